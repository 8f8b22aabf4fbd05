#!/usr/bin/env python3
"""torch_denoise.py - the PyTorch reference of examples/fashion_denoise.graph.

    torch_denoise.py STEPS THREADS

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: Fashion-MNIST's training images / 255 in shuffled batches
of 64, Gaussian noise of standard deviation 0.3 drawn afresh each step, a
784-256-64 relu encoder and a 64-256 relu, 784 sigmoid decoder (weights
Glorot-uniform, biases 0), the mean squared error against the clean image,
Adam (lr 1e-3, 0.9, 0.999, eps 1e-8).  The batches and the noise come from
other generators than graphrun's: the same distributions, not the same
numbers.

Prints `steps/s=...` for the training loop alone (the peer format of
bench/run.sh), then `test_mse=...`: the reconstruction error of the clean
test images, in batches of 1000 as graphrun evaluates `test_mse`.
"""
import gzip
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist/"
BATCH, NOISE, LR = 64, 0.3, 1e-3


def images(name):
    with gzip.open(DATA + name) as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    assert magic == 2051
    x = torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8)
    return x.reshape(n, 784).float() / 255


def dense(n_in, n_out):
    m = nn.Linear(n_in, n_out)
    nn.init.xavier_uniform_(m.weight)
    nn.init.zeros_(m.bias)
    return m


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    train, test = images("train-images-idx3-ubyte.gz"), images("t10k-images-idx3-ubyte.gz")
    model = nn.Sequential(dense(784, 256), nn.ReLU(), dense(256, 64), nn.ReLU(),
                          dense(64, 256), nn.ReLU(), dense(256, 784), nn.Sigmoid())
    opt = torch.optim.Adam(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    order, pos = torch.randperm(len(train), generator=g), 0
    t0 = time.perf_counter()
    for _ in range(steps):
        if pos + BATCH > len(train):
            order, pos = torch.randperm(len(train), generator=g), 0
        clean = train[order[pos:pos + BATCH]]
        pos += BATCH
        noisy = clean + torch.randn(BATCH, 784) * NOISE
        loss = F.mse_loss(model(noisy), clean)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    with torch.no_grad():
        mse = sum(F.mse_loss(model(test[i:i + 1000]), test[i:i + 1000]).item()
                  for i in range(0, len(test), 1000)) / (len(test) // 1000)
    print("torch %s denoise threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f test_mse=%.4f" % (
        torch.__version__, threads, steps, dt, steps / dt, loss.item(), mse), flush=True)


if __name__ == "__main__":
    main()
