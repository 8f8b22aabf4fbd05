# torch_cuda.py - the CUDA peer of scripts/gpu-check.sh's benchmark: the
# models of examples/fashion_{softmax,mlp,cnn}.graph trained with PyTorch on
# the GPU, with the same sizes, optimizer and learning rate.
#
#   python3 torch_cuda.py MODEL STEPS [BATCH]    MODEL: softmax | mlp | cnn
#
# Prints one line: model=... steps=... steps_per_s=... test_acc=...
# Only the training loop is timed (after 20 warm-up steps, between two
# torch.cuda.synchronize()), as graphrun's steps_per_s excludes compiling
# and loading.  The data sits on the GPU, scaled to [0, 1] once; each epoch
# draws a new permutation there.  TF32 is off for matmul and convolution:
# graphrun computes in f32, so the two do the same arithmetic.
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = os.environ.get("FASHION_DIR", "/usr/share/datasets/fashion-mnist")


def idx(name):
    with gzip.open(os.path.join(DATA, name)) as f:
        raw = f.read()
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 2051:
        rows, cols = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw, np.uint8, offset=16).reshape(n, rows * cols)
    return np.frombuffer(raw, np.uint8, offset=8)


def model_for(name):
    if name == "softmax":
        m = nn.Linear(784, 10)
        nn.init.zeros_(m.weight)
        nn.init.zeros_(m.bias)
        return m, 0.1, 32
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10)), 0.05, 64
    if name == "cnn":
        return nn.Sequential(
            nn.Unflatten(1, (1, 28, 28)),
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10)), 0.05, 64
    sys.exit("usage: torch_cuda.py softmax|mlp|cnn STEPS [BATCH]")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: torch_cuda.py softmax|mlp|cnn STEPS [BATCH]")
    name, steps = sys.argv[1], int(sys.argv[2])
    if not torch.cuda.is_available():
        print("torch_cuda.py: no CUDA GPU")
        sys.exit(77)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model, lr, batch = model_for(name)
    if len(sys.argv) > 3:
        batch = int(sys.argv[3])
    model = model.to(dev)
    x = torch.from_numpy(idx("train-images-idx3-ubyte.gz").copy()).to(dev).float() / 255
    y = torch.from_numpy(idx("train-labels-idx1-ubyte.gz").astype(np.int64)).to(dev)
    xt = torch.from_numpy(idx("t10k-images-idx3-ubyte.gz").copy()).to(dev).float() / 255
    yt = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz").astype(np.int64)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    per_epoch = x.shape[0] // batch
    order = torch.randperm(x.shape[0], device=dev)

    def step(s):
        nonlocal order
        if s % per_epoch == 0 and s:
            order = torch.randperm(x.shape[0], device=dev)
        i = order[(s % per_epoch) * batch:(s % per_epoch + 1) * batch]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x[i]), y[i])
        loss.backward()
        opt.step()
        return loss

    warm = 20
    for s in range(warm):
        step(s)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(warm, warm + steps):
        loss = step(s)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    with torch.no_grad():
        acc = sum((model(xt[k:k + 1000]).argmax(1) == yt[k:k + 1000]).sum().item()
                  for k in range(0, xt.shape[0], 1000)) / xt.shape[0]
    print(f"model={name} steps={steps} batch={batch} time={dt:.3f}s "
          f"steps_per_s={steps / dt:.1f} us_per_step={dt / steps * 1e6:.1f} "
          f"loss={loss.item():.4f} test_acc={acc:.4f}")


if __name__ == "__main__":
    main()
