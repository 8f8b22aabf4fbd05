#!/usr/bin/env python3
"""torch_char_lstm.py - the PyTorch reference of examples/char_lstm.graph.

    torch_char_lstm.py STEPS THREADS [SEED] [--eval]

SEED (default 0) seeds the initialisation and, plus 1, the windows' order.

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: characters of Debian's fortunes read as graphrun's text()
reads them (as bench/torch_llama.py does), the first 90% for training,
random windows of 64 + 1 characters in batches of 32; embeddings of 64
drawn N(0, 1), one nn.LSTM layer of 256 (batch_first, a zero first state
for every window) whose weights are one Glorot-uniform [64 + 256, 4 x 256]
matrix split into weight_ih and weight_hh (graphrun's w, rows x's then
h's, gates i, f, g, o as PyTorch's), biases 0 (bias_hh stays 0: graphrun
has one bias), a Glorot-uniform output layer with a zero bias; Adam (lr
2e-3, 0.9, 0.999, eps 1e-8), gradients clipped to norm 1.  The windows'
order comes from another generator than graphrun's.

Prints `steps/s=...` for the training loop alone and, with --eval, the
validation loss over every window of the held-out part as `val_loss=...`.
"""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# the text, the windows and the validation pass of torch_llama.py, whose
# BATCH and BLOCK (32, 64) are this model's too
from torch_llama import batch_of, load_text, val_loss

EMBED, HIDDEN = 64, 256
LR, CLIP = 2e-3, 1.0


class CharLSTM(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Parameter(torch.randn(vocab, EMBED))
        self.lstm = nn.LSTM(EMBED, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, vocab)
        w = torch.empty(EMBED + HIDDEN, 4 * HIDDEN)
        nn.init.xavier_uniform_(w)
        with torch.no_grad():
            self.lstm.weight_ih_l0.copy_(w[:EMBED].t())
            self.lstm.weight_hh_l0.copy_(w[EMBED:].t())
            self.lstm.bias_ih_l0.zero_()
            self.lstm.bias_hh_l0.zero_()
            nn.init.xavier_uniform_(self.out.weight)
            self.out.bias.zero_()

    def forward(self, ids):
        hs, _ = self.lstm(self.emb[ids])  # a zero first state
        return self.out(hs)


def main():
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    seed = next((int(a) for a in sys.argv[3:] if a != "--eval"), 0)
    torch.manual_seed(seed)
    train_ids, val_ids, vocab = load_text()
    model = CharLSTM(vocab)
    model.lstm.bias_hh_l0.requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR,
                           betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(seed + 1)
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = batch_of(train_ids, g)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
    dt = time.perf_counter() - t0
    out = "torch %s char_lstm threads=%d steps=%d time=%.3fs steps/s=%.2f loss=%.4f" % (
        torch.__version__, threads, steps, dt, steps / dt, loss.item())
    if "--eval" in sys.argv:
        out += " val_loss=%.4f" % val_loss(model, val_ids)
    print(out, flush=True)


if __name__ == "__main__":
    main()
