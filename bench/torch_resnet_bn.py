#!/usr/bin/env python3
"""torch_resnet_bn.py - the PyTorch reference of examples/fashion_resnet.graph.

    torch_resnet_bn.py STEPS THREADS [SEED]

SEED (default 0) seeds the initialisation and, plus 1, the batch order.

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: Fashion-MNIST / 255 in shuffled batches of 64; a 3x3 stem
of 16 channels with batch norm and relu; a residual block of 16 channels
(conv3x3-BN-relu-conv3x3-BN plus the input, relu), then two of 32 and 64
channels whose first convolution has stride 2 and whose input is projected
by a 1x1 convolution of stride 2 and batch norm; global average pooling
over 7x7 and a dense layer of 10.  Convolutions have no bias and He-normal
weights (std sqrt(2 / fan_in)); the dense layer is Glorot-uniform with a
zero bias; batch norm has gain 1, bias 0, eps 1e-5 and running statistics
that keep 0.9 of their value each step (PyTorch's momentum=0.1).  SGD with
momentum 0.9 (no dampening, as graphrun's momentum()), lr 0.05.

Prints `steps/s=...` for the training loop alone, then `accuracy=...` on the
test set with batch norm in eval mode (the running statistics), in
batches of 500 as graphrun evaluates `accuracy`.
"""
import gzip
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist/"
BATCH, LR, WIDTH = 64, 0.05, 16


def idx(name):
    with gzip.open(DATA + name) as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        x = torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8)
        return x.reshape(n, 1, 28, 28).float() / 255
    return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).long()


def conv(c_in, c_out, size=3, stride=1):
    m = nn.Conv2d(c_in, c_out, size, stride=stride, padding=(size - 1) // 2, bias=False)
    nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
    return m


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-5, momentum=0.1)


class Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1, self.bn1 = conv(c_in, c_out, stride=stride), bn(c_out)
        self.conv2, self.bn2 = conv(c_out, c_out), bn(c_out)
        self.proj = None
        if stride != 1:
            self.proj = nn.Sequential(conv(c_in, c_out, size=1, stride=stride), bn(c_out))

    def forward(self, x):
        h = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(h + (x if self.proj is None else self.proj(x)))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.stem_bn = conv(1, WIDTH), bn(WIDTH)
        self.blocks = nn.Sequential(Block(WIDTH, WIDTH, 1), Block(WIDTH, 2 * WIDTH, 2),
                                    Block(2 * WIDTH, 4 * WIDTH, 2))
        self.fc = nn.Linear(4 * WIDTH, 10)
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        h = self.blocks(F.relu(self.stem_bn(self.stem(x))))
        return self.fc(F.avg_pool2d(h, 7).flatten(1))


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    x, y = idx("train-images-idx3-ubyte.gz"), idx("train-labels-idx1-ubyte.gz")
    tx, ty = idx("t10k-images-idx3-ubyte.gz"), idx("t10k-labels-idx1-ubyte.gz")
    model = ResNet()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
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
    model.eval()
    with torch.no_grad():
        right = sum((model(tx[i:i + 500]).argmax(1) == ty[i:i + 500]).sum().item()
                    for i in range(0, len(tx), 500))
    print("torch %s resnet_bn threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f accuracy=%.4f" % (
        torch.__version__, threads, steps, dt, steps / dt, loss.item(), right / len(tx)), flush=True)


if __name__ == "__main__":
    main()
