#!/usr/bin/env python3
"""torch_word2vec.py - the PyTorch reference of examples/word2vec.graph.

    torch_word2vec.py STEPS THREADS

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: skip-gram with negative sampling on the characters of
Debian's fortunes (the files graphrun's text() reads from a directory, in
name order, without NAME.dat and NAME.u8 beside NAME; the vocabulary of the
characters present in code-point order); random windows of 2 * 2 + 1
characters, 256 a step, the middle one the center and the other 4 its
contexts; 5 negatives per (center, context) pair drawn from the counts of
the batch's first 4 ids of each window to the power 0.75; an input table
uniform in +-0.5 / 32 and an output table of zeros, both [V, 32]; the loss
per center the sum over its contexts of -log sigmoid(pos) - sum -log
sigmoid(-neg), averaged over the batch; plain SGD, lr 0.5, on sparse
gradients (F.embedding(sparse=True): only the rows looked up change, as
graphrun's sparse row update).  THREADS is torch's intra-op threads (the
graphrun side runs Hogwild! executors instead).  The windows and negatives
come from other generators than graphrun's.

Prints `steps/s=...` for the training loop alone, and the last loss.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

CORPUS = "/usr/share/games/fortunes"
BATCH, WIN, DIM, K, LR = 256, 2, 32, 5, 0.5


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
    return torch.tensor([table[c] for c in text], dtype=torch.long), len(chars)


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ids, vocab = load_text()
    emb = torch.empty(vocab, DIM).uniform_(-0.5 / DIM, 0.5 / DIM).requires_grad_()
    out = torch.zeros(vocab, DIM, requires_grad=True)
    opt = torch.optim.SGD([emb, out], lr=LR)
    g = torch.Generator().manual_seed(1)
    span = torch.arange(2 * WIN + 1)
    t0 = time.perf_counter()
    for _ in range(steps):
        start = torch.randint(0, len(ids) - 2 * WIN, (BATCH, 1), generator=g)
        w = ids[start + span]  # [BATCH, 2 WIN + 1]
        center = w[:, WIN:WIN + 1]
        context = torch.cat([w[:, :WIN], w[:, WIN + 1:]], 1)
        weights = torch.bincount(w[:, :2 * WIN].reshape(-1), minlength=vocab).float() ** 0.75
        negatives = torch.multinomial(weights, BATCH * 2 * WIN * K, replacement=True, generator=g)
        c = F.embedding(center, emb, sparse=True)  # [BATCH, 1, DIM]
        pos = (c * F.embedding(context, out, sparse=True)).sum(2)  # [BATCH, 2 WIN]
        nvec = F.embedding(negatives.view(BATCH, 2 * WIN, K), out, sparse=True)
        neg = (c.view(BATCH, 1, 1, DIM) * nvec).sum(3)  # [BATCH, 2 WIN, K]
        pair = F.softplus(-pos) + F.softplus(neg).sum(2)
        loss = pair.sum(1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print("torch %s word2vec threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f" % (
        torch.__version__, threads, steps, dt, steps / dt, loss.item()), flush=True)


if __name__ == "__main__":
    main()
