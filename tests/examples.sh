#!/bin/sh
# examples.sh GRAPHRUN EXAMPLES MODEL [OPTIONS...] - one of issue 26's example
# models trained in a tiny configuration: the training loss falls (the mean
# of the first two log records against that of the last two), and:
#   denoise   the clean test images' reconstruction error is below that of
#             the untrained network (a 0.5 grey: mse about 0.2) by far
#   resnet    the test accuracy, taken with batch norm's running statistics,
#             is well above chance, and the running statistics were updated
#   word2vec  (OPTIONS may ask for Hogwild! executors, whose log records are
#             few) instead: the final loss is well below the first step's,
#             which is exactly 2 win (1 + k) log 2 = 16.64 (`out` starts at 0);
#             on the 172 words of tests/models/tiny_text.txt, with
#             lr 1: so few words repeat so often in a batch that the
#             example's 2.5 can diverge there
#   cifar_towers (issue 27) the two synchronous towers train one set of
#             variables (the checkpoint holds tower/model/conv1/w once) and
#             the test accuracy is well above chance
#   llama     (issue 27) the validation loss is a number below that of the
#             untrained model (log 113 = 4.7 nats per character)
#   char_lstm (issue 27) the same for the character LSTM of lstm_seq, and
#             the LSTM state carried across batches (carry, truncated
#             BPTT) is in the checkpoint and not all zeros: the steps
#             assigned it their last state; the validation's (val_carry),
#             which an evaluation in the middle carried through its pass,
#             is zeros again: the pass's state was its own
set -u
G=$1 EX=$2 M=$3
shift 3
# a folder of its own, so that the tests of one model can run in parallel
W=$(mktemp -d "./example_$M.XXXXXX") || exit 1
cd "$W" || exit 1
fail() { echo "FAIL: $M: $* (files in $W)" >&2; exit 1; }
loss_falls() { # loss_falls LOG FACTOR
  grep '"loss"' "$1" | grep -v '"done"' | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/' > "$M.loss"
  n=$(wc -l < "$M.loss")
  [ "$n" -ge 4 ] || fail "only $n log records"
  awk -v f="$2" '{ v[NR] = $1 } END { a = (v[1] + v[2]) / 2; b = (v[NR - 1] + v[NR]) / 2
    printf "loss %.4f -> %.4f\n", a, b; exit !(b < a * f) }' "$M.loss" || fail "the loss did not fall enough"
}
case $M in
denoise)
  "$G" "$EX/fashion_denoise.graph" --set batch=16 --steps 120 --log-every 10 --log "$M.jsonl" \
      --eval test_mse --quiet "$@" > "$M.out" || fail "training: $(cat "$M.out")"
  loss_falls "$M.jsonl" 0.8
  mse=$(sed -n 's/^test_mse = \([0-9.e+-]*\)$/\1/p' "$M.out")
  echo "test_mse $mse"
  awk -v m="$mse" 'BEGIN { exit !(m != "" && m > 0 && m < 0.08) }' || fail "test_mse '$mse' is not below 0.08"
  ;;
resnet)
  "$G" "$EX/fashion_resnet.graph" --set batch=16 --set width=4 --set lr=0.02 --steps 60 \
      --log-every 5 --log "$M.jsonl" --eval accuracy --checkpoint "$M.st" --quiet "$@" > "$M.out" ||
      fail "training: $(cat "$M.out")"
  loss_falls "$M.jsonl" 0.9
  acc=$(sed -n 's/^accuracy = \([0-9.e+-]*\)$/\1/p' "$M.out")
  echo "accuracy $acc"
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a > 0.4 && a <= 1) }' || fail "accuracy '$acc' is not above 0.4"
  # a running mean still all zeros and a running variance all ones were never updated
  "$G" inspect "$M.st" > "$M.inspect" || fail "inspect"
  line=$(grep 'model/resnet_0/block1/bn1/moving_mean ' "$M.inspect") || fail "no running mean: $(cat "$M.inspect")"
  echo "$line" | awk '{ exit !($5 != 0 || $6 != 0) }' || fail "the running mean was not updated: $line"
  ;;
word2vec)
  "$G" "$EX/word2vec.graph" --set corpus="$EX/../tests/models/tiny_text.txt" --set batch=64 \
      --set lr=1 --steps 300 --log "$M.jsonl" --quiet "$@" > "$M.out" || fail "training: $(cat "$M.out")"
  last=$(sed -n 's/.*"event":"done".*"loss":\([0-9.e+-]*\).*/\1/p' "$M.jsonl")
  echo "loss 16.64 -> $last"
  awk -v b="$last" 'BEGIN { exit !(b != "" && b > 0 && b < 12.5) }' || fail "final loss '$last' is not below 12.5"
  ;;
cifar_towers)
  "$G" "$EX/cifar_towers.graph" --set batch=8 --steps 80 --log-every 5 --log "$M.jsonl" \
      --eval accuracy --checkpoint "$M.st" --quiet "$@" > "$M.out" || fail "training: $(cat "$M.out")"
  loss_falls "$M.jsonl" 0.9
  acc=$(sed -n 's/^accuracy = \([0-9.e+-]*\)$/\1/p' "$M.out")
  echo "accuracy $acc"
  awk -v a="$acc" 'BEGIN { exit !(a != "" && a > 0.25 && a <= 1) }' || fail "accuracy '$acc' is not above 0.25"
  "$G" inspect "$M.st" > "$M.inspect" || fail "inspect"
  n=$(grep -c '/conv1/w ' "$M.inspect")
  [ "$n" -eq 1 ] || fail "$n copies of conv1/w, not one shared by the towers: $(cat "$M.inspect")"
  ;;
llama)
  "$G" "$EX/llama.graph" --set batch=8 --set block=16 --set width=32 --set heads=2 --set layers=2 \
      --set hidden=64 --set warmup=5 --set steps=100 --steps 100 --log-every 10 --log "$M.jsonl" \
      --eval val_loss --quiet "$@" > "$M.out" || fail "training: $(cat "$M.out")"
  loss_falls "$M.jsonl" 0.9
  val=$(sed -n 's/^val_loss = \([0-9.e+-]*\)$/\1/p' "$M.out")
  echo "val_loss $val"
  awk -v v="$val" 'BEGIN { exit !(v != "" && v > 0 && v < 4.2) }' || fail "val_loss '$val' is not below 4.2"
  ;;
char_lstm)
  "$G" "$EX/char_lstm.graph" --set batch=8 --set block=16 --set embed=16 --set hidden=32 \
      --set lr=0.01 --steps 100 --log-every 10 --log "$M.jsonl" --eval val_loss --eval-every 50 \
      --checkpoint "$M.st" --quiet "$@" > "$M.out" || fail "training: $(cat "$M.out")"
  loss_falls "$M.jsonl" 0.9
  val=$(sed -n 's/^val_loss = \([0-9.e+-]*\)$/\1/p' "$M.out")
  echo "val_loss $val"
  awk -v v="$val" 'BEGIN { exit !(v != "" && v > 0 && v < 4.2) }' || fail "val_loss '$val' is not below 4.2"
  "$G" inspect "$M.st" > "$M.inspect" || fail "inspect"
  line=$(grep '^carry ' "$M.inspect") || fail "no carried state: $(cat "$M.inspect")"
  echo "$line"
  echo "$line" | awk '{ exit !($5 != 0 || $6 != 0) }' || fail "the state was not carried: $line"
  line=$(grep '^val_carry ' "$M.inspect") || fail "no validation state: $(cat "$M.inspect")"
  echo "$line" | awk '{ exit !($5 == 0 && $6 == 0) }' || fail "an evaluation left its state: $line"
  ;;
*) fail "unknown model" ;;
esac
cd .. && rm -rf "$W"
exit 0
