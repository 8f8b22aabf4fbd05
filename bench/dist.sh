#!/bin/bash
# bench/dist.sh: distributed training on one machine, graphrun against PyTorch
# DDP (gloo), in one run: the Fashion-MNIST MLP (examples/fashion_mlp.graph,
# 784-512-256-10, SGD), 1 thread per process, batch 64 per process.
#   graphrun, 1 process                     (no MPI)
#   graphrun, P processes --distributed sync  (allreduce of the gradients)
#   graphrun, P processes --distributed async (variables shared through rank 0)
#   PyTorch DDP, 1 and P processes          (../shared/bench/torch_ddp.py; Debian's
#                                            torch, and PyPI's from bench/peers.sh)
# Prints a markdown table of examples/s and ratios on stdout, progress on stderr.
#
# Environment: GRAPHRUN (default build/graphrun), SHARED (default ../shared),
#   P (processes, default 2), STEPS (per process, default 2000), REPS (best of,
#   default 3), PEERS_VENV (default bench/.venv), TIMEOUT (default 300 s).
set -u
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(dirname "$HERE")
GRAPHRUN=${GRAPHRUN:-$ROOT/build/graphrun}; SHARED=${SHARED:-$ROOT/../shared}
P=${P:-2}; STEPS=${STEPS:-2000}; REPS=${REPS:-3}; TIMEOUT=${TIMEOUT:-300}
PEERS_VENV=${PEERS_VENV:-$HERE/.venv}; PY=/usr/bin/python3
MODEL=$ROOT/examples/fashion_mlp.graph
export OMPI_MCA_btl_vader_single_copy_mechanism=none
die() { echo "bench/dist.sh: error: $*" >&2; exit 2; }
say() { echo "bench: $*" >&2; }
[ -x "$GRAPHRUN" ] || die "no $GRAPHRUN (build it first)"
command -v mpirun >/dev/null || die "mpirun not found (apt-get install openmpi-bin)"
[ -f "$SHARED/bench/torch_ddp.py" ] || die "missing $SHARED/bench/torch_ddp.py"
MPI="mpirun -np $P --oversubscribe --allow-run-as-root --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
declare -A best

keep() { # keep KEY VALUE: the best of the repetitions (status 0 when VALUE is it)
  local k=$1 v=$2
  [ -z "$v" ] && { say "  $k: FAILED"; return 1; }
  say "  $k: $v examples/s"
  if [ -z "${best[$k]:-}" ] || awk -v a="$v" -v b="${best[$k]}" 'BEGIN { exit !(a > b) }'; then
    best[$k]=$v
    return 0
  fi
  return 1
}

gr_one() {
  timeout "$TIMEOUT" "$GRAPHRUN" "$MODEL" --steps "$STEPS" --threads 1 --quiet >"$TMP/out" 2>&1 &&
    sed -n 's/.* \([0-9.]*\) steps\/s.*/\1/p' "$TMP/out" | awk '{ printf "%.0f\n", $1 * 64 }'
}

gr_dist() { # gr_dist MODE: examples/s of all processes, and the communication share
  timeout "$TIMEOUT" $MPI "$GRAPHRUN" "$MODEL" --steps "$STEPS" --threads 1 --quiet \
    --distributed "$1" >"$TMP/out" 2>&1 || return 0
  sed -n 's/^distributed: .* \([0-9]*\) examples\/s in all.*(\([0-9.]*\)% of.*/\1 \2/p' "$TMP/out"
}

ddp() { # ddp PYTHON RANKS
  timeout "$TIMEOUT" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
    "$1" "$SHARED/bench/torch_ddp.py" "$STEPS" 64 "$2" >"$TMP/out" 2>&1 &&
    sed -n 's/.*examples\/s=\([0-9]*\).*/\1/p' "$TMP/out"
}

PEERS="debian:$PY"
[ -x "$PEERS_VENV/bin/python" ] && "$PEERS_VENV/bin/python" -c 'import torch' 2>/dev/null &&
  PEERS="$PEERS pypi:$PEERS_VENV/bin/python"
for rep in $(seq "$REPS"); do
  say "repetition $rep/$REPS (load $(cut -d' ' -f1 /proc/loadavg))"
  keep gr1 "$(gr_one)"
  for mode in sync async; do
    r=$(gr_dist $mode)
    keep "gr_$mode" "${r% *}" && best[comm_$mode]=${r#* } # the share in the best run
  done
  for p in $PEERS; do
    keep "ddp1_${p%%:*}" "$(ddp "${p#*:}" 1)"
    keep "ddp${P}_${p%%:*}" "$(ddp "${p#*:}" "$P")"
  done
done

ratio() { awk -v a="${best[$1]:-0}" -v b="${best[$2]:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'; }
bestddp=0; bestname=""
for p in $PEERS; do
  v=${best[ddp${P}_${p%%:*}]:-0}
  awk -v a="$v" -v b="$bestddp" 'BEGIN { exit !(a > b) }' && bestddp=$v bestname=ddp${P}_${p%%:*}
done
best[bestddp]=$bestddp
echo "Distributed MLP, $P processes x 1 thread, batch 64 each, $STEPS steps, best of $REPS ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| run | examples/s | vs graphrun 1 process | vs best DDP ($bestname) |"
echo "|---|---|---|---|"
echo "| graphrun, 1 process | ${best[gr1]:-FAIL} | 1.00 | $(ratio gr1 bestddp) |"
echo "| graphrun, $P processes, sync (communication ${best[comm_sync]:-?}% of the time) | ${best[gr_sync]:-FAIL} | $(ratio gr_sync gr1) | $(ratio gr_sync bestddp) |"
echo "| graphrun, $P processes, async (communication ${best[comm_async]:-?}% of the time) | ${best[gr_async]:-FAIL} | $(ratio gr_async gr1) | $(ratio gr_async bestddp) |"
for p in $PEERS; do
  n=${p%%:*}
  echo "| PyTorch DDP ($n), 1 process | ${best[ddp1_$n]:-FAIL} | $(ratio ddp1_$n gr1) | |"
  echo "| PyTorch DDP ($n), $P processes | ${best[ddp${P}_$n]:-FAIL} | $(ratio ddp${P}_$n gr1) | |"
done
