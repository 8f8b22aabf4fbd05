"""torch_deep.py: the peer of bench/gen_deep.py's net in PyTorch.

usage: /usr/bin/python3 bench/torch_deep.py LAYERS STEPS [BATCH] [WIDTH]

LAYERS dense layers of WIDTH units (relu, the last without), a mean squared
error against the input, plain SGD 0.01, one thread: with layers this
small a step is all per-op overhead.  The data (64 batches of Gaussian
noise) is made before the clock starts and walked in order; 3 untimed
steps warm up.  Prints steps/s and us/step."""
import sys
import time

import torch


def main():
    if not 3 <= len(sys.argv) <= 5:
        sys.exit(__doc__)
    layers, steps = int(sys.argv[1]), int(sys.argv[2])
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    width = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    torch.set_num_threads(1)
    torch.manual_seed(1)
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(width, width))
        if i + 1 < layers:
            mods.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*mods)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    data = torch.randn(64, batch, width)

    def step(s):
        x = data[s % 64]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), x)
        loss.backward()
        opt.step()
        return loss

    for s in range(3):
        step(s)
    t0 = time.perf_counter()
    for s in range(steps):
        loss = step(s)
    dt = time.perf_counter() - t0
    print(f"deep layers={layers} width={width} batch={batch} steps={steps} time={dt:.3f}s "
          f"steps/s={steps / dt:.2f} us/step={dt / steps * 1e6:.1f} loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
