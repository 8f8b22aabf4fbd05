#!/usr/bin/env python3
"""gen_deep.py: writes a .graph of a deep, narrow net to stdout.

    bench/gen_deep.py LAYERS [--width 16] [--batch 16] [--devices D] > deep.graph

LAYERS dense layers of WIDTH units (relu, the last without), a mean squared
error against the input, and `train = sgd(0.01).minimize(loss)`: forward,
backward and updates, about 9 IR nodes per layer after the passes.  Every
layer is its own statement, as a generator unrolling a transformer would
write it.  With --devices D, layer i runs on cpu:(i mod D), so every layer
crosses partitions (run it with --devices cpu:0-(D-1)).
bench/torch_deep.py builds the same net in PyTorch."""
import argparse


def main():
    ap = argparse.ArgumentParser(description="a deep, narrow .graph on stdout")
    ap.add_argument("layers", type=int)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--devices", type=int, default=1)
    a = ap.parse_args()
    if min(a.layers, a.width, a.batch, a.devices) < 1:
        ap.error("LAYERS, --width, --batch and --devices must be positive")
    lines = [f"# {a.layers} dense layers of width {a.width} (bench/gen_deep.py)",
             f"data d = gaussian(n={64 * a.batch}, dims=[{a.width}], batch={a.batch}, seed=1)",
             "",
             "fn dense(x, units, act=relu) {",
             "  var w = glorot([cols(x), units])",
             "  var b = zeros([units])",
             "  return act(x @ w + b)",
             "}",
             "",
             "h0 = d.x"]
    at = (lambda i: f" @cpu:{i % a.devices}") if a.devices > 1 else (lambda i: "")
    for i in range(1, a.layers):
        lines.append(f"h{i} = dense(h{i - 1}, {a.width}){at(i)}")
    lines.append(f"loss = mse(dense(h{a.layers - 1}, {a.width}, act=none), d.x)")
    lines.append("train = sgd(0.01).minimize(loss)")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
