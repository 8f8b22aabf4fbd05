#!/bin/sh
# bench/python_hogwild.sh - the seed's program in Python (examples/python/hogwild.py:
# THREADS Python threads each looping sess.run(train_op) on one session) against the
# C CLI's Hogwild! (--executors K --threads K), on the Fashion-MNIST MLP, 1 and 2
# threads.  Prints a markdown table of steps/s (median of REPS runs) and the load
# average before and after; measure on a quiet machine (uptime).
#
#   bench/python_hogwild.sh                       # build/graphrun and build/python
#   BUILD=build-py STEPS=3000 REPS=5 bench/python_hogwild.sh
#
# Needs the build's Python package (tests/python.cmake builds BUILD/python/graphrun)
# and Debian's python3-numpy; PY (default /usr/bin/python3) runs it.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
GRAPHRUN=${GRAPHRUN:-$BUILD/graphrun}
PYPATH=${PYPATH:-$BUILD/python}
PY=${PY:-/usr/bin/python3}
STEPS=${STEPS:-2000}
REPS=${REPS:-3}
THREADS=${THREADS:-"1 2"}
G=examples/fashion_mlp.graph

[ -x "$GRAPHRUN" ] || { echo "python_hogwild: no $GRAPHRUN (cmake --build $BUILD)" >&2; exit 2; }
[ -d "$PYPATH/graphrun" ] || { echo "python_hogwild: no $PYPATH/graphrun (cmake --build $BUILD)" >&2; exit 2; }

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

cli() { # THREADS -> steps/s
    "$GRAPHRUN" "$G" --steps "$STEPS" --executors "$1" --threads "$1" --seed 1 --quiet 2>&1 |
        sed -n 's/.* \([0-9.]*\) steps\/s.*/\1/p' | tail -1
}
py() { # THREADS -> steps/s
    PYTHONPATH="$PYPATH" "$PY" examples/python/hogwild.py "$STEPS" "$1" 1 |
        sed -n 's/.*steps\/s=\([0-9.]*\).*/\1/p'
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "| threads | C CLI --executors K (steps/s) | Python threads (steps/s) | Python / C |"
echo "|---|---|---|---|"
for k in $THREADS; do
    c=$(for r in $(seq "$REPS"); do cli "$k"; done | median)
    p=$(for r in $(seq "$REPS"); do py "$k"; done | median)
    awk -v k="$k" -v c="$c" -v p="$p" 'BEGIN {printf "| %s | %.1f | %.1f | %.2f |\n", k, c, p, p / c}'
done
echo
echo "$STEPS steps a run, median of $REPS; $(nproc) cores ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)); load average $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after."
