#!/usr/bin/env bash
# bench/spectrum.sh: between synchronous and asynchronous on one machine
# (issue 29, docs/distributed.md): the Fashion-MNIST MLP trained by one
# executor and by two concurrent ones, unbounded (Hogwild!, also with the
# staleness-aware learning rate, --stale-lr) and under --max-staleness S,
# each with and without a straggler (--slow 1:F); for
# each, the seconds of training until the test accuracy first reaches
# TARGET (evaluated every EVAL_EVERY steps), the staleness the summary
# reports, and the final accuracy.  Then the same over RANKS MPI processes
# (`graphrun launch`, one thread each): sync, sync with one backup worker
# (--backup 1), async through rank 0 (Hogwild! across ranks, also with
# --stale-lr), async under --max-staleness S, and periodic averaging
# (async --sync-every K), each with and without the last rank slowed
# (--slow R:F).  Prints a markdown table; the runs' logs stay in OUT, and
# `graphrun plot --time` charts them (loss and test accuracy against the
# seconds of training) in PLOTS: spectrum-local.svg and spectrum-mpi.svg
# without the straggler, spectrum-local-slow.svg and spectrum-mpi-slow.svg
# with it (each beside the synchronous baseline).
#
#   bench/spectrum.sh                 # builds build/graphrun if missing
#   TARGET=0.84 STEPS=4000 bench/spectrum.sh
#   ROWS=mpi bench/spectrum.sh        # only the MPI rows
#   ROWS=mpi-async bench/spectrum.sh  # only the MPI rows past sync and --backup
#
# Environment: GRAPHRUN (default build/graphrun), TARGET (0.85), STEPS
# (8000), EVAL_EVERY (250), SLOW (3), SEED (1), RANKS (3), ROWS (all,
# local, mpi or mpi-async), SYNC_EVERY (the MPI periodic averaging's K, 10), OUT (a
# temporary folder), PLOTS (the charts' folder, default OUT).
set -eu
set -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
G=${GRAPHRUN:-$ROOT/build/graphrun}
TARGET=${TARGET:-0.85}
STEPS=${STEPS:-8000}
EVAL_EVERY=${EVAL_EVERY:-250}
SLOW=${SLOW:-3}
SEED=${SEED:-1}
SYNC_EVERY=${SYNC_EVERY:-10}
RANKS=${RANKS:-3}
ROWS=${ROWS:-all}
OUT=${OUT:-$(mktemp -d)}
PLOTS=${PLOTS:-$OUT}
mkdir -p "$OUT" "$PLOTS"
MODEL=$ROOT/examples/fashion_mlp.graph
if [ ! -x "$G" ]; then
    cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release > /dev/null
    cmake --build "$ROOT/build" -j2 --target graphrun graphrun_mpi > /dev/null
fi
LAUNCH=()                  # the MPI rows: graphrun launch -np RANKS
NO_STALE="0 (one executor)" # what a run without staleness figures shows

# run NAME ARGS...: trains, then prints the table's row
run() {
    name=$1
    shift
    log=$OUT/$(echo "$name" | tr -c 'a-zA-Z0-9\n' _).jsonl
    echo "spectrum: $name" >&2
    "$G" "${LAUNCH[@]}" "$MODEL" --steps "$STEPS" --seed "$SEED" --eval accuracy --eval-every "$EVAL_EVERY" \
        --log "$log" --quiet "$@" > "$log.out"
    reached=$(awk -v t="$TARGET" -F'"accuracy":' '/"eval"/ && !/"done"/ {
        split($2, a, /[,}]/); if (a[1] + 0 >= t) {
            n = split($0, e, /"elapsed_s":/); split(e[2], s, /[,}]/); print s[1]; exit } }' "$log")
    stale=$(sed -n 's/.*, staleness mean \([0-9.]*\) p99 \([0-9]*\) max \([0-9]*\)$/\1 \/ \2 \/ \3/p' "$log.out")
    final=$(sed -n 's/^accuracy = //p' "$log.out")
    secs=$(sed -n 's/.* steps in \([0-9.]*\)s.*/\1/p' "$log.out")
    echo "| $name | ${reached:-not reached} | $secs | ${stale:-$NO_STALE} | $final |"
}

echo "| mode (\`examples/fashion_mlp.graph\`, $STEPS steps) | seconds to accuracy $TARGET | seconds in all | staleness mean / p99 / max | final accuracy |"
echo "|---|---|---|---|---|"
if [ "$ROWS" = all ] || [ "$ROWS" = local ]; then
    run "1 executor (synchronous), 2 threads" --threads 2
    for slow in "" "--slow 1:$SLOW"; do
        tag=${slow:+, worker 1 ${SLOW}x slower}
        run "2 executors, Hogwild!$tag" --executors 2 --threads 2 $slow
        run "2 executors, Hogwild! with the staleness-aware learning rate$tag" --executors 2 \
            --threads 2 --stale-lr $slow
        for S in 0 1 4; do
            run "2 executors, --max-staleness $S$tag" --executors 2 --threads 2 --max-staleness $S $slow
        done
    done
fi
if [ "$ROWS" != local ]; then
    LAUNCH=(launch -np "$RANKS") NO_STALE="0 (sync)"
    last=$((RANKS - 1))
    for slow in "" "--slow $last:$SLOW"; do
        tag=${slow:+, rank $last ${SLOW}x slower}
        if [ "$ROWS" != mpi-async ]; then
            run "$RANKS MPI ranks, sync$tag" --threads 1 --distributed sync $slow
            run "$RANKS MPI ranks, sync, --backup 1$tag" --threads 1 --distributed sync --backup 1 \
                $slow
        fi
        run "$RANKS MPI ranks, async (Hogwild!)$tag" --threads 1 --distributed async $slow
        run "$RANKS MPI ranks, async with the staleness-aware learning rate$tag" --threads 1 \
            --distributed async --stale-lr $slow
        for S in 0 1 4; do
            run "$RANKS MPI ranks, async, --max-staleness $S$tag" --threads 1 --distributed async \
                --max-staleness $S $slow
        done
        run "$RANKS MPI ranks, periodic averaging (async --sync-every $SYNC_EVERY)$tag" --threads 1 \
            --distributed async --sync-every "$SYNC_EVERY" $slow
    done
fi
# chart SVG PREFIX SLOW: the logs of the rows named PREFIX..., those with
# the straggler (SLOW 1) or without (0), and the synchronous baseline
chart() {
    local files=() f
    for f in "$OUT"/$2*.jsonl; do
        [ -e "$f" ] || continue
        case $f in
        *slower*) [ "$3" = 1 ] && files+=("$f") ;;
        *executor__synchronous* | *MPI_ranks__sync.jsonl) files+=("$f") ;;
        *) [ "$3" = 0 ] && files+=("$f") ;;
        esac
    done
    [ ${#files[@]} -gt 0 ] || return 0
    "$G" plot --time "${files[@]}" -o "$PLOTS/$1"
    echo "spectrum: chart $PLOTS/$1" >&2
}
chart spectrum-local.svg "[12]_executor" 0
chart spectrum-local-slow.svg "[12]_executor" 1
chart spectrum-mpi.svg "${RANKS}_MPI" 0
chart spectrum-mpi-slow.svg "${RANKS}_MPI" 1
echo "logs: $OUT" >&2
