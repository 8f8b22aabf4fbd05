#!/usr/bin/env python3
"""torch_word2vec.py - the PyTorch reference of examples/word2vec.graph.

    torch_word2vec.py STEPS THREADS

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: skip-gram with negative sampling on the words of Debian's
fortunes (the files graphrun's text() reads from a directory, in name
order, without NAME.dat and NAME.u8 beside NAME, joined; words as
text(vocab="words") splits them: runs of ASCII letters, digits and
apostrophes or of non-ASCII bytes, ASCII lowercased; id 0 <unk>, then the
9,999 most frequent words, ties in byte order); random windows of
2 * 2 + 1 words, 256 a step, the middle one the center and the other 4 its
contexts; 5 negatives per (center, context) pair drawn from rank^-0.75
(the unigram counts to the power 0.75, each count estimated from the
word's rank by Zipf's law; <unk> never); an input table uniform in
+-0.5 / 64 and an output table of zeros, both [V, 64]; the loss per center
the sum over its contexts of -log sigmoid(pos) - sum -log sigmoid(-neg),
averaged over the batch; plain SGD, lr 2.5, on sparse gradients
(F.embedding(sparse=True): only the rows looked up change, as graphrun's
sparse row update).  THREADS is torch's intra-op threads (the graphrun
side runs Hogwild! executors instead).  The windows and negatives come
from other generators than graphrun's.

Prints `steps/s=...` (and words/s: centers a second) for the training
loop alone, and the last loss.
"""
import collections
import os
import re
import sys
import time

import torch
import torch.nn.functional as F

CORPUS = "/usr/share/games/fortunes"
VOCAB, BATCH, WIN, DIM, K, LR = 10000, 256, 2, 64, 5, 2.5


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


def load_words():
    data = b"".join(open(p, "rb").read() for p in corpus_files(CORPUS)
                    if os.path.getsize(p) > 0).lower()
    words = re.findall(rb"[a-z0-9'\x80-\xff]+", data)
    counts = collections.Counter(words)
    kept = sorted(counts, key=lambda w: (-counts[w], w))[:VOCAB - 1]
    table = {w: i + 1 for i, w in enumerate(kept)}
    return torch.tensor([table.get(w, 0) for w in words], dtype=torch.long), len(kept) + 1


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ids, vocab = load_words()
    rank = torch.arange(vocab, dtype=torch.float32)
    unigram = torch.where(rank > 0, rank.clamp(min=1) ** -0.75, torch.zeros(()))
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
        negatives = torch.multinomial(unigram, BATCH * 2 * WIN * K, replacement=True, generator=g)
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
    print("torch %s word2vec vocab=%d threads=%d steps=%d time=%.3fs steps/s=%.2f words/s=%.0f "
          "loss=%.4f" % (torch.__version__, vocab, threads, steps, dt, steps / dt,
                         steps * BATCH / dt, loss.item()), flush=True)


if __name__ == "__main__":
    main()
