#!/bin/bash
# bench/models.sh: the example models of issues 26 and 27 against their PyTorch
# references (same model, init, data and hyperparameters), steps/s of the
# training loop at 1 and 2 threads, best of REPS, interleaved:
#   examples/fashion_denoise.graph  bench/torch_denoise.py    (and the test mse)
#   examples/fashion_resnet.graph   bench/torch_resnet_bn.py  (and the test accuracy)
#   examples/word2vec.graph         bench/torch_word2vec.py   (2 threads: graphrun
#                                   runs 2 Hogwild! executors, PyTorch 2 intra-op threads)
#   examples/cifar_towers.graph     bench/torch_cifar_towers.py (and the test accuracy;
#                                   graphrun's two sync towers, PyTorch one model
#                                   with both towers' batch; at 1 thread both towers
#                                   run on one partition, --devices cpu:0
#                                   --soft-placement: --threads 1 alone gives each
#                                   tower's partition, cpu:0 and cpu:1, a thread)
#   examples/llama.graph            bench/torch_llama.py      (and the validation loss)
#   examples/char_lstm.graph        bench/torch_char_lstm.py  (and the validation loss)
# Prints a markdown table on stdout, progress on stderr.  The results (test
# mse, test accuracy, validation loss, word2vec's final training loss) are those of the last
# repetition, after the same number of steps.
#   STEPS (default 100; word2vec runs 10 x STEPS), REPS (default 3),
#   MODELS (default "denoise resnet word2vec cifar_towers llama char_lstm"), GRAPHRUN (default
#   build/graphrun), PYTHON (default /usr/bin/python3:
#   Debian's python3-torch)
set -u
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(dirname "$HERE")
GRAPHRUN=${GRAPHRUN:-$ROOT/build/graphrun}; STEPS=${STEPS:-100}; REPS=${REPS:-3}
PYTHON=${PYTHON:-/usr/bin/python3}
say() { echo "bench: $*" >&2; }
[ -x "$GRAPHRUN" ] || { echo "bench/models.sh: no $GRAPHRUN" >&2; exit 2; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
declare -A best quality
keep() {
  [ -z "$2" ] && { say "  $1: FAILED"; return; }
  say "  $1: $2 steps/s${3:+, $3}"
  quality[$1]=${3:-}
  if [ -z "${best[$1]:-}" ] || awk -v a="$2" -v b="${best[$1]}" 'BEGIN { exit !(a > b) }'; then best[$1]=$2; fi
}
steps_of() { if [ "$1" = word2vec ]; then echo $((10 * STEPS)); else echo "$STEPS"; fi; }
graph_of() { case $1 in denoise) echo fashion_denoise;; resnet) echo fashion_resnet;; *) echo "$1";; esac; }
eval_of() { case $1 in denoise) echo test_mse;; resnet|cifar_towers) echo accuracy;; llama|char_lstm) echo val_loss;; *) echo;; esac; }
gr() { # gr MODEL THREADS: the summary line's steps/s, then the evaluation
  local ev threads="--threads $2"
  ev=$(eval_of "$1")
  [ "$1" = word2vec ] && [ "$2" -gt 1 ] && threads="--executors $2 --threads $2"
  [ "$1" = cifar_towers ] && [ "$2" = 1 ] && threads="$threads --devices cpu:0 --soft-placement"
  # shellcheck disable=SC2086
  "$GRAPHRUN" "$ROOT/examples/$(graph_of "$1").graph" --steps "$(steps_of "$1")" $threads \
    ${ev:+--eval $ev} --quiet > "$TMP/out" 2>&1 || return
  sed -n 's/.* \([0-9.]*\) steps\/s.*/\1/p' "$TMP/out"
  if [ -n "$ev" ]; then sed -n "s/^$ev = \([0-9.]*\).*/$ev=\1/p" "$TMP/out"
  else sed -n 's/.*final loss \([0-9.]*\).*/loss=\1/p' "$TMP/out"; fi
}
pt() { # pt MODEL THREADS
  local script=torch_$1.py extra=
  case $1 in llama|char_lstm) extra=--eval;; esac
  [ "$1" = resnet ] && script=torch_resnet_bn.py
  env OMP_NUM_THREADS="$2" MKL_NUM_THREADS="$2" OPENBLAS_NUM_THREADS="$2" OMP_WAIT_POLICY=PASSIVE \
    "$PYTHON" "$HERE/$script" "$(steps_of "$1")" "$2" $extra > "$TMP/out" 2>&1 || return
  sed -n 's/.*steps\/s=\([0-9.]*\).*/\1/p' "$TMP/out"
  if [ "$1" = word2vec ]; then sed -n 's/.* \(loss=[0-9.]*\).*/\1/p' "$TMP/out"
  else sed -n 's/.* \(test_mse=[0-9.]*\).*/\1/p; s/.* \(accuracy=[0-9.]*\).*/\1/p; s/.* \(val_loss=[0-9.]*\).*/\1/p' "$TMP/out"; fi
}
run() { # run KEY COMMAND...: keep the first line as steps/s, the second as quality
  local out; out=$("${@:2}")
  keep "$1" "$(echo "$out" | sed -n 1p)" "$(echo "$out" | sed -n 2p)"
}
MODELS=${MODELS:-denoise resnet word2vec cifar_towers llama char_lstm}
for rep in $(seq "$REPS"); do
  say "repetition $rep/$REPS (load $(cut -d' ' -f1 /proc/loadavg))"
  for m in $MODELS; do
    for t in 1 2; do
      run "gr_$m$t" gr "$m" "$t"
      run "pt_$m$t" pt "$m" "$t"
    done
  done
done
ratio() { awk -v a="${best[$1]:-0}" -v b="${best[$2]:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
echo "issues 26 and 27's example models, $STEPS steps (word2vec $((10 * STEPS))), best of $REPS" \
     "($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| model | threads | graphrun steps/s | PyTorch steps/s | graphrun / PyTorch | graphrun result | PyTorch result |"
echo "|---|---|---|---|---|---|---|"
for m in $MODELS; do
  for t in 1 2; do
    echo "| $m | $t | ${best[gr_$m$t]:-FAIL} | ${best[pt_$m$t]:-FAIL} | $(ratio "gr_$m$t" "pt_$m$t") |" \
         "${quality[gr_$m$t]:-} | ${quality[pt_$m$t]:-} |"
  done
done
