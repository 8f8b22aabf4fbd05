#!/bin/bash
# bench/lm.sh: the character GPT (examples/char_gpt.graph) against its
# PyTorch reference (bench/torch_char_gpt.py: same model, init, data and
# hyperparameters), steps/s at 1 and 2 threads, best of REPS, interleaved.
# Prints a markdown table on stdout, progress on stderr.
#   STEPS (default 60), REPS (default 3), GRAPHRUN (default build/graphrun),
#   PEERS_VENV (default bench/.venv: PyPI's torch; Debian's python3-torch too)
set -u
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(dirname "$HERE")
GRAPHRUN=${GRAPHRUN:-$ROOT/build/graphrun}; STEPS=${STEPS:-60}; REPS=${REPS:-3}
PEERS_VENV=${PEERS_VENV:-$HERE/.venv}
say() { echo "bench: $*" >&2; }
[ -x "$GRAPHRUN" ] || { echo "bench/lm.sh: no $GRAPHRUN" >&2; exit 2; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
declare -A best
keep() {
  [ -z "$2" ] && { say "  $1: FAILED"; return; }
  say "  $1: $2 steps/s"
  if [ -z "${best[$1]:-}" ] || awk -v a="$2" -v b="${best[$1]}" 'BEGIN { exit !(a > b) }'; then best[$1]=$2; fi
}
gr() { # the training loop's steps/s from the summary line
  "$GRAPHRUN" "$ROOT/examples/char_gpt.graph" --steps "$STEPS" --threads "$1" --quiet > "$TMP/out" 2>&1 &&
    sed -n 's/.* \([0-9.]*\) steps\/s.*/\1/p' "$TMP/out"
}
pt() { # pt PYTHON THREADS
  env OMP_NUM_THREADS="$2" MKL_NUM_THREADS="$2" OPENBLAS_NUM_THREADS="$2" OMP_WAIT_POLICY=PASSIVE \
    "$1" "$HERE/torch_char_gpt.py" "$STEPS" "$2" > "$TMP/out" 2>&1 &&
    sed -n 's/.*steps\/s=\([0-9.]*\).*/\1/p' "$TMP/out"
}
PEERS="debian:/usr/bin/python3"
[ -x "$PEERS_VENV/bin/python" ] && PEERS="$PEERS pypi:$PEERS_VENV/bin/python"
for rep in $(seq "$REPS"); do
  say "repetition $rep/$REPS (load $(cut -d' ' -f1 /proc/loadavg))"
  for t in 1 2; do
    keep "gr$t" "$(gr $t)"
    for p in $PEERS; do keep "${p%%:*}$t" "$(pt "${p#*:}" $t)"; done
  done
done
ratio() { awk -v a="${best[$1]:-0}" -v b="${best[$2]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
echo "char GPT (4 x 128, block 64, batch 32), $STEPS steps, best of $REPS ($(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| threads | graphrun steps/s | PyTorch (Debian) | PyTorch (PyPI) | graphrun / best PyTorch |"
echo "|---|---|---|---|---|"
for t in 1 2; do
  bp=debian$t
  awk -v a="${best[pypi$t]:-0}" -v b="${best[debian$t]:-0}" 'BEGIN { exit !(a > b) }' && bp=pypi$t
  echo "| $t | ${best[gr$t]:-FAIL} | ${best[debian$t]:-n/a} | ${best[pypi$t]:-n/a} | $(ratio gr$t $bp) |"
done
