#!/usr/bin/env python3
"""torch_llama.py - the PyTorch reference of examples/llama.graph.

    torch_llama.py STEPS THREADS [SEED] [--eval]

SEED (default 0) seeds the initialisation and, plus 1, the windows' order.

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: characters of Debian's fortunes read as graphrun's text()
reads them (as bench/torch_char_gpt.py does), the first 90% for training,
random windows of 64 + 1 characters in batches of 32; 4 pre-norm blocks of
RMSNorm (eps 1e-5, gain 1; written out: torch 1.13 has no nn.RMSNorm),
4-head causal attention with rotary embeddings on q and k (base 10000,
HF's halves convention, rotate_half, as graphrun's rope()), a SwiGLU MLP
of 352 (w2(silu(w1 x) * w3 x)), no biases, no dropout, a final RMSNorm and
an untied output layer; weights N(0, 0.02), gains 1; AdamW (0.9, 0.95,
eps 1e-8) with weight decay 0.1 on matrices only, lr 1e-3 with 100 warmup
steps then cosine to 1e-4 at step 2000, gradients clipped to norm 1.  The
windows' order comes from another generator than graphrun's.

Prints `steps/s=...` for the training loop alone and, with --eval, the
validation loss over every window of the held-out part as `val_loss=...`.
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CORPUS = "/usr/share/games/fortunes"
BATCH, BLOCK, WIDTH, HEADS, LAYERS, HIDDEN = 32, 64, 128, 4, 4, 352
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


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps, self.gain = eps, nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gain


def rope_tables(t, d, base=10000.0):
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # d/2 frequencies
    ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]  # [t, d/2]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float(), ang.sin().float()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(WIDTH), RMSNorm(WIDTH)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(4))
        self.w1 = nn.Linear(WIDTH, HIDDEN, bias=False)
        self.w3 = nn.Linear(WIDTH, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, WIDTH, bias=False)

    def attention(self, x, cos, sin):
        b, t, c = x.shape
        split = lambda y: y.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        rope = lambda y: y * cos + rotate_half(y) * sin
        q, k, v = rope(split(self.wq(x))), rope(split(self.wk(x))), split(self.wv(x))
        s = q @ k.transpose(-2, -1) / math.sqrt(c // HEADS)
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        return self.wo((F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        y = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))


class Llama(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.tok_embeddings = nn.Parameter(torch.randn(vocab, WIDTH) * 0.02)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(WIDTH)
        self.output = nn.Linear(WIDTH, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        cos, sin = rope_tables(BLOCK, WIDTH // HEADS)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, ids):
        h = self.tok_embeddings[ids]
        for blk in self.layers:
            h = blk(h, self.cos, self.sin)
        return self.output(self.norm(h))


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
    starts = list(range(0, len(ids) - BLOCK, BLOCK))
    n = len(starts) // BATCH * BATCH
    total, batches = 0.0, 0
    model.eval()
    with torch.no_grad():
        for i in range(0, n, BATCH):
            w = torch.stack([ids[s:s + BLOCK + 1] for s in starts[i:i + BATCH]])
            logits = model(w[:, :-1])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1)).item()
            batches += 1
    return total / max(batches, 1)


def train_and_report(name, model, opt, data, steps, threads, seed, lr_of=None, batch_at=None,
                     evaluate=None):
    """STEPS batches of data = load_text(): batch_at(t) at step t from 1 when
    given, else random windows drawn by a generator of SEED + 1; with the
    learning rate lr_of(t) when given and gradients clipped to CLIP; prints
    the steps/s line, and with --eval the validation loss evaluate(model,
    val_ids) (default val_loss, in model.eval()) (also used by
    torch_char_lstm.py)."""
    train_ids, val_ids, vocab = data
    g = torch.Generator().manual_seed(seed + 1)
    t0 = time.perf_counter()
    for t in range(1, steps + 1):
        x, y = batch_at(t) if batch_at else batch_of(train_ids, g)
        for group in opt.param_groups if lr_of else ():
            group["lr"] = lr_of(t)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
    dt = time.perf_counter() - t0
    out = "torch %s %s threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f" % (
        torch.__version__, name, threads, steps, dt, steps / dt, loss.item())
    if "--eval" in sys.argv:
        out += " val_loss=%.4f" % (evaluate or val_loss)(model, val_ids)
    print(out, flush=True)


def setup_run():
    """STEPS THREADS [SEED] [--eval] from the command line: the threads and
    the seed set, the text loaded.  Returns (steps, threads, seed, data)."""
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    seed = next((int(a) for a in sys.argv[3:] if a != "--eval"), 0)
    torch.manual_seed(seed)
    return steps, threads, seed, load_text()


def main():
    steps, threads, seed, data = setup_run()
    model = Llama(data[2])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": DECAY},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    train_and_report("llama", model, opt, data, steps, threads, seed, lr_at)


if __name__ == "__main__":
    main()
