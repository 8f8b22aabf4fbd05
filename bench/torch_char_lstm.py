#!/usr/bin/env python3
"""torch_char_lstm.py - the PyTorch reference of examples/char_lstm.graph.

    torch_char_lstm.py STEPS THREADS [SEED] [--eval]

SEED (default 0) seeds the initialisation.

The same model, initialisation, data and hyperparameters as the .graph file
at its defaults: characters of Debian's fortunes read as graphrun's text()
reads them (as bench/torch_llama.py does), the first 90% for training, cut
into 32 contiguous streams as text(..., streams=true) cuts them (PyTorch's
word_language_model's batchify), batch k's row b the window k of 64 + 1
characters of stream b, back to window 0 after the last; embeddings of 64
drawn N(0, 1), one nn.LSTM layer of 256 (batch_first) whose hidden state is
carried from one batch to the next and detached (truncated BPTT, graphrun's
`carry`), zero at the start; its weights are one Glorot-uniform [64 + 256,
4 x 256] matrix split into weight_ih and weight_hh (graphrun's w, rows x's
then h's, gates i, f, g, o as PyTorch's), biases 0 (bias_hh stays 0:
graphrun has one bias), a Glorot-uniform output layer with a zero bias;
Adam (lr 2e-3, 0.9, 0.999, eps 1e-8), gradients clipped to norm 1.  The
training batches are graphrun's, in its order.  The validation pass reads
the held-out 10% cut into 32 streams the same way, every window of every
stream once, in order, with a state of its own carried from one window to
the next, zero at the start of the pass (word_language_model's
evaluate()), as graphrun's --eval val_loss does.

Prints `steps/s=...` for the training loop alone and, with --eval, the
validation loss over every window of the held-out part as `val_loss=...`:
the mean of the batches' mean losses, as graphrun's gr_eval.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

# the text, the windows and the validation pass of torch_llama.py, whose
# BATCH and BLOCK (32, 64) are this model's too
from torch_llama import BATCH, BLOCK, setup_run, train_and_report

EMBED, HIDDEN = 64, 256
LR = 2e-3  # gradients clipped to 1.0: torch_llama.CLIP, train_and_report


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

    def step(self, ids, state):
        """[n, BLOCK] ids and the first state (None: zeros) -> the logits
        and the last state."""
        hs, last = self.lstm(self.emb[ids], state)
        return self.out(hs), last

    def forward(self, ids):  # training: the training streams' state
        logits, last = self.step(ids, getattr(self, "state", None))
        self.state = tuple(s.detach() for s in last)  # carried, no gradient into the past
        return logits


def stream_batches(ids):
    """(batch_at, W): batch_at(t) is text(..., streams=true)'s batch t (from
    1): BATCH streams of len(ids) // BATCH ids, row b the window (t - 1) mod
    W of stream b, W the windows of a stream."""
    per = len(ids) // BATCH
    streams, windows = ids[:BATCH * per].view(BATCH, per), (per - 1) // BLOCK

    def batch_at(t):
        k = (t - 1) % windows * BLOCK
        w = streams[:, k:k + BLOCK + 1]
        return w[:, :-1], w[:, 1:]
    return batch_at, windows


def stream_val_loss(model, ids):
    """The mean loss of the batches of the streams of ids, each window once,
    the state carried from zero: graphrun's gr_eval of val_loss."""
    batch_at, windows = stream_batches(ids)
    total, state = 0.0, None
    model.eval()
    with torch.no_grad():
        for t in range(1, windows + 1):
            x, y = batch_at(t)
            logits, state = model.step(x, state)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    return total / windows


def main():
    steps, threads, seed, data = setup_run()
    model = CharLSTM(data[2])
    model.lstm.bias_hh_l0.requires_grad_(False)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR,
                           betas=(0.9, 0.999), eps=1e-8)
    train_and_report("char_lstm", model, opt, data, steps, threads, seed,
                     batch_at=stream_batches(data[0])[0], evaluate=stream_val_loss)

if __name__ == "__main__":
    main()
