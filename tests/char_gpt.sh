#!/bin/sh
# char_gpt.sh GRAPHRUN GENERATE GRAPH - the character GPT example end to end,
# in a tiny configuration: training lowers the loss (first record against
# the last), the validation loss is a number, and generate.c samples the
# checkpoint: as many characters as asked, all from the vocabulary, the
# same for the same seed and different for another.
set -u
G=$1 GEN=$2 M=$3
TINY="--set batch=8 --set block=16 --set width=32 --set heads=2 --set layers=2 --set warmup=5 --set steps=60"
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck disable=SC2086
"$G" "$M" $TINY --steps 60 --log gpt.jsonl --log-every 10 --eval val_loss --checkpoint gpt.st \
    --quiet > train.out || fail "training"
first=$(grep '"loss"' gpt.jsonl | head -n 1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
last=$(grep '"loss"' gpt.jsonl | grep -v done | tail -n 1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/')
echo "loss $first -> $last; $(grep val_loss train.out)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a * 0.9) }' || fail "the loss did not fall"
grep -Eq '^val_loss = [0-9]' train.out || fail "no val_loss: $(cat train.out)"
grep -q '"lr"' gpt.jsonl || fail "no learning rate in the log"
# `transformer(h) as block[l]` in the loop: one scope per layer
"$G" inspect gpt.st | grep -q "model/gpt/block_1/attn/q/w" || fail "no scope block_1"
# shellcheck disable=SC2086
"$GEN" "$M" gpt.st $TINY -n 40 -s 7 "The " > a.txt || fail "generate"
# shellcheck disable=SC2086
"$GEN" "$M" gpt.st $TINY -n 40 -s 7 "The " > b.txt || fail "generate again"
# shellcheck disable=SC2086
"$GEN" "$M" gpt.st $TINY -n 40 -s 8 -k 5 "The " > c.txt || fail "generate, top-k"
cat a.txt
[ "$(head -c 4 a.txt)" = "The " ] || fail "the prompt is not echoed"
[ "$(wc -m < a.txt)" -ge 45 ] || fail "fewer characters than asked" # prompt, 40, newline
cmp -s a.txt b.txt || fail "the same seed gave different text"
! cmp -s a.txt c.txt || fail "another seed and top-k gave the same text"
"$GEN" "$M" nosuch.st $TINY > /dev/null 2> e.txt && fail "a missing checkpoint succeeded"
grep -q "nosuch.st" e.txt || fail "the error does not name the file: $(cat e.txt)"
exit 0
