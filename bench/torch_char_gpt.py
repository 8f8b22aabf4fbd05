#!/usr/bin/env python3
"""torch_char_gpt.py - the PyTorch reference of examples/char_gpt.graph.

    torch_char_gpt.py STEPS THREADS [--eval]

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: characters of Debian's fortunes (the files graphrun's
text() reads from a directory, in name order, without NAME.dat and NAME.u8
beside NAME), the vocabulary of the characters present in code-point
order, the first 90% for training and the rest for validation, random
windows of 64 + 1 characters in batches of 32; 4 pre-norm blocks of
4-head causal attention (q, k, v and the projection each a linear layer
with a bias) and a 4x gelu (tanh) MLP, width 128, learned positions,
dropout 0.1, the output tied to the token embedding; weights N(0, 0.02),
biases 0, layernorm gains 1; AdamW (0.9, 0.999, eps 1e-8) with weight decay
0.1 on matrices only, lr 1e-3 with 100 warmup steps then cosine to 1e-4 at
step 2000, gradients clipped to norm 1.  The windows' order comes from
another generator than graphrun's: the two see the same distribution of
data, not the same batches.

Prints `steps/s=...` for the training loop alone (the peer format of
bench/run.sh) and, with --eval, the validation loss over every window of
the held-out part (windows every 64 characters, as graphrun evaluates
`val_loss`) as `val_loss=...`.
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CORPUS = "/usr/share/games/fortunes"
BATCH, BLOCK, WIDTH, HEADS, LAYERS, RATE = 32, 64, 128, 4, 4, 0.1
LR, WARMUP, SCHED_STEPS, MIN_LR, DECAY, CLIP = 1e-3, 100, 2000, 1e-4, 0.1, 1.0


def corpus_files(d):
    names = sorted(n for n in os.listdir(d) if not n.startswith("."))
    keep = []
    for n in names:
        base, ext = os.path.splitext(n)
        if ext in (".dat", ".u8") and base in names:
            continue
        if os.path.isfile(os.path.join(d, n)):
            keep.append(os.path.join(d, n))
    return keep


def load_text():
    text = "".join(open(p, encoding="utf-8").read() for p in corpus_files(CORPUS)
                   if os.path.getsize(p) > 0)
    chars = sorted(set(text))
    table = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([table[c] for c in text], dtype=torch.long)
    cut = int(len(ids) * 0.9)
    return ids[:cut], ids[cut:], len(chars)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.q, self.k, self.v, self.proj = (nn.Linear(WIDTH, WIDTH) for _ in range(4))
        self.fc, self.out = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)
        self.drop = nn.Dropout(RATE)

    def attention(self, x):
        b, t, c = x.shape
        split = lambda y: y.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        s = q @ k.transpose(-2, -1) / math.sqrt(c // HEADS)
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        y = (self.drop(F.softmax(s, dim=-1)) @ v).transpose(1, 2).reshape(b, t, c)
        return self.drop(self.proj(y))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(vocab, WIDTH) * 0.02)
        self.wpe = nn.Parameter(torch.randn(BLOCK, WIDTH) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f, self.drop = nn.LayerNorm(WIDTH), nn.Dropout(RATE)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, ids):
        h = self.drop(self.wte[ids] + self.wpe)
        for blk in self.blocks:
            h = blk(h)
        return self.ln_f(h) @ self.wte.t()


def lr_at(t):  # t: the step, 1 on the first
    if t <= WARMUP:
        return LR * t / WARMUP
    p = min(1.0, (t - WARMUP) / (SCHED_STEPS - WARMUP))
    return MIN_LR + (LR - MIN_LR) * (1 + math.cos(math.pi * p)) / 2


def batch_of(ids, g):
    start = torch.randint(0, len(ids) - BLOCK - 1, (BATCH,), generator=g)
    w = torch.stack([ids[s:s + BLOCK + 1] for s in start.tolist()])
    return w[:, :-1], w[:, 1:]


def val_loss(model, ids):
    model.eval()
    starts = list(range(0, len(ids) - BLOCK, BLOCK))
    n = len(starts) // BATCH * BATCH
    total, batches = 0.0, 0
    with torch.no_grad():
        for i in range(0, n, BATCH):
            w = torch.stack([ids[s:s + BLOCK + 1] for s in starts[i:i + BATCH]])
            logits = model(w[:, :-1])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1)).item()
            batches += 1
    model.train()
    return total / max(batches, 1)


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    train_ids, val_ids, vocab = load_text()
    model = GPT(vocab)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": DECAY},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        x, y = batch_of(train_ids, g)
        for group in opt.param_groups:
            group["lr"] = lr_at(t)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
    dt = time.perf_counter() - t0
    out = "torch %s char_gpt threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f" % (
        torch.__version__, threads, steps, dt, steps / dt, loss.item())
    if "--eval" in sys.argv:
        out += " val_loss=%.4f" % val_loss(model, val_ids)
    print(out, flush=True)


if __name__ == "__main__":
    main()
