#!/usr/bin/env python3
"""read_checkpoint.py - reads a graphrun checkpoint with nothing but json and
numpy, and recomputes the Fashion-MNIST test accuracy of the MLP in
examples/fashion_mlp.graph from its weights.

    read_checkpoint.py CKPT [--data DIR] [--log LOG.jsonl] [--tol 1e-4]

With --log, compares with the accuracy graphrun logged ("event": "done")
and exits 1 when they differ by more than --tol.  This checks that the
file is plain safetensors: any other reader gets the same numbers.
"""
import argparse
import gzip
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": "<f4", "I32": "<i4"}


def load_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = memoryview(buf)[8 + n:]
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[e["dtype"]])
        tensors[name] = arr.reshape(e["shape"])
    return meta, tensors


def read_idx(path):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    magic, count = struct.unpack(">II", buf[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", buf[8:16])
        return np.frombuffer(buf, dtype=np.uint8, offset=16).reshape(count, rows * cols)
    if magic == 0x801:
        return np.frombuffer(buf, dtype=np.uint8, offset=8)
    raise ValueError("%s: bad IDX magic 0x%08x" % (path, magic))


def mlp_accuracy(t, x, y):
    h = x.astype(np.float32) / np.float32(255)
    for layer in ("fc1", "fc2"):
        h = np.maximum(h @ t["model/%s/w" % layer] + t["model/%s/b" % layer], 0)
    logits = h @ t["model/out/w"] + t["model/out/b"]
    return float(np.mean(np.argmax(logits, axis=1) == y))


def logged_accuracy(log):
    with open(log) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == "done":
                return e["eval"]["accuracy"]
    raise ValueError("%s: no \"done\" event" % log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--log")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    meta, t = load_safetensors(a.ckpt)
    x = read_idx(a.data + "/t10k-images-idx3-ubyte.gz")
    y = read_idx(a.data + "/t10k-labels-idx1-ubyte.gz")
    acc = mlp_accuracy(t, x, y)
    print("step %s: numpy test accuracy %.6f" % (meta.get("step", "?"), acc))
    if a.log:
        want = logged_accuracy(a.log)
        print("graphrun logged accuracy %.6f" % want)
        if abs(acc - want) > a.tol + 1e-9:
            print("MISMATCH: |%.6f - %.6f| > %g" % (acc, want, a.tol))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
