#!/usr/bin/env python3
"""torch_cifar_towers.py - the PyTorch reference of examples/cifar_towers.graph.

    torch_cifar_towers.py STEPS THREADS [SEED]

SEED (default 0) seeds the initialisation and, plus 1, the batch order.

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults, as one model that takes the batch of both towers (64
images: the mean of the two towers' mean losses is the mean over the 64,
and the towers share their variables, so one update of it is the towers'
synchronous step): TF's CIFAR-10 tutorial model on Fashion-MNIST / 255 in
shuffled batches of 64: conv5x5-64 (N(0, 0.05), bias 0), relu, maxpool
3x3 stride 2 with TF's SAME padding (28 -> 14: no cell before, one after,
which PyTorch's symmetric padding= cannot say, so the input is padded
with -inf on the right and bottom), LRN, conv5x5-64 (bias 0.1), relu,
LRN, maxpool, dense 384 and 192 (N(0, 0.04), bias 0.1, relu) and 10
(N(0, 1/192), bias 0).  LRN is TF's lrn(depth_radius=4, bias=1, alpha=0.001
/ 9, beta=0.75), which nn.LocalResponseNorm writes as size 9, alpha 9 *
0.001 / 9 (it divides alpha by the size), beta 0.75, k 1 (docs/language.md).
Plain SGD, lr 0.05.

Prints `steps/s=...` for the training loop alone, then `accuracy=...` on the
test set in batches of 500 as graphrun evaluates `accuracy`.
"""
import gzip
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist/"
BATCH, LR = 64, 0.05  # both towers: 2 x 32


def idx(name):
    with gzip.open(DATA + name) as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        x = torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8)
        return x.reshape(n, 1, 28, 28).float() / 255
    return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).long()


def layer(m, std, bias):
    nn.init.normal_(m.weight, std=std)
    nn.init.constant_(m.bias, bias)
    return m


def pool(x):  # TF's max_pool(3x3, stride 2, SAME) on an even size
    return F.max_pool2d(F.pad(x, (0, 1, 0, 1), value=float("-inf")), 3, 2)


class CifarNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = layer(nn.Conv2d(1, 64, 5, padding=2), 0.05, 0.0)
        self.conv2 = layer(nn.Conv2d(64, 64, 5, padding=2), 0.05, 0.1)
        self.norm = nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0)
        self.local3 = layer(nn.Linear(64 * 7 * 7, 384), 0.04, 0.1)
        self.local4 = layer(nn.Linear(384, 192), 0.04, 0.1)
        self.out = layer(nn.Linear(192, 10), 1.0 / 192, 0.0)

    def forward(self, x):
        h = self.norm(pool(F.relu(self.conv1(x))))
        h = pool(self.norm(F.relu(self.conv2(h))))
        h = F.relu(self.local4(F.relu(self.local3(h.flatten(1)))))
        return self.out(h)


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    x, y = idx("train-images-idx3-ubyte.gz"), idx("train-labels-idx1-ubyte.gz")
    tx, ty = idx("t10k-images-idx3-ubyte.gz"), idx("t10k-labels-idx1-ubyte.gz")
    model = CifarNet()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    g = torch.Generator().manual_seed(seed + 1)
    order, pos = torch.randperm(len(x), generator=g), 0
    t0 = time.perf_counter()
    for _ in range(steps):
        if pos + BATCH > len(x):
            order, pos = torch.randperm(len(x), generator=g), 0
        i = order[pos:pos + BATCH]
        pos += BATCH
        loss = F.cross_entropy(model(x[i]), y[i])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    with torch.no_grad():
        right = sum((model(tx[i:i + 500]).argmax(1) == ty[i:i + 500]).sum().item()
                    for i in range(0, len(tx), 500))
    print("torch %s cifar_towers threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f accuracy=%.4f" % (
        torch.__version__, threads, steps, dt, steps / dt, loss.item(), right / len(tx)), flush=True)


if __name__ == "__main__":
    main()
