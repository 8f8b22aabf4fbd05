#!/bin/sh
# plot_cli.sh GRAPHRUN SRCDIR PYTHON - `graphrun plot` end to end, in a scratch
# folder: two short training runs' --log files charted together (linear and
# log scale), checked by plot_check.py and rendered by rsvg-convert; then
# the errors: a missing file, a line that is not JSON, a record without a
# step (or, with --time, without its seconds), --log-y on a loss that is
# not positive, a file with no records, a bad --smooth; and the chart
# against the seconds of training (--time).
set -u
G=$1
SRC=$2
PY=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
MODEL=$SRC/tests/models/tiny_cnn.graph
CHECK=$SRC/tests/plot_check.py

for seed in 1 2; do
    "$G" "$MODEL" --steps 60 --seed $seed --log-every 2 --eval accuracy --eval-every 20 \
        --log "$T/run$seed.jsonl" --quiet > /dev/null || fail "training run $seed"
done

"$G" plot "$T/run1.jsonl" "$T/run2.jsonl" -o "$T/lin.svg" || fail "plot"
"$PY" "$CHECK" "$T/lin.svg" 2 2 || fail "linear chart"
"$G" plot "$T/run1.jsonl" "$T/run2.jsonl" --log-y --smooth 0.9 > "$T/log.svg" || fail "plot --log-y"
"$PY" "$CHECK" "$T/log.svg" 2 2 log || fail "log chart"
rsvg-convert "$T/lin.svg" -o "$T/lin.png" && [ -s "$T/lin.png" ] || fail "rsvg-convert lin.svg"
rsvg-convert "$T/log.svg" -o "$T/log.png" && [ -s "$T/log.png" ] || fail "rsvg-convert log.svg"
grep -q '>run1<' "$T/lin.svg" && grep -q '>run2<' "$T/lin.svg" || fail "legend labels"
"$G" plot --time "$T/run1.jsonl" "$T/run2.jsonl" -o "$T/time.svg" || fail "plot --time"
"$PY" "$CHECK" "$T/time.svg" 2 2 || fail "chart against time"
grep -q '>seconds<' "$T/time.svg" && ! grep -q '>step<' "$T/time.svg" || fail "--time's axis label"

# expect CODE PATTERN ARGS...: the plot exits CODE and its stderr matches PATTERN
expect() {
    code=$1 pat=$2
    shift 2
    "$G" plot "$@" -o "$T/bad.svg" 2> "$T/err.txt"
    rc=$?
    [ $rc -eq "$code" ] || fail "plot $*: exit $rc, expected $code"
    grep -q "$pat" "$T/err.txt" || fail "plot $*: said '$(cat "$T/err.txt")', expected '$pat'"
}
expect 2 "$T/none.jsonl: No such file" "$T/none.jsonl"
head -n 2 "$T/run1.jsonl" > "$T/corrupt.jsonl"
echo '{"step": 5, "loss": 0.3' >> "$T/corrupt.jsonl"
expect 1 "^$T/corrupt.jsonl:3: error: not a JSON object" "$T/corrupt.jsonl"
printf '{"step":1,"loss":1}\n{"loss":0.5}\n' > "$T/nostep.jsonl"
expect 1 "^$T/nostep.jsonl:2: error: \"step\" is missing" "$T/nostep.jsonl"
expect 1 "^$T/nostep.jsonl:1: error: \"elapsed_s\" is missing" "$T/nostep.jsonl" --time
printf '{"step":1,"loss":1}\n\n{"step":2,"loss":0}\n' > "$T/zero.jsonl"
expect 1 "^$T/zero.jsonl:3: error: --log-y" "$T/zero.jsonl" --log-y
: > "$T/empty.jsonl"
expect 1 "$T/empty.jsonl: no loss or eval records" "$T/empty.jsonl"
expect 2 "bad --smooth 1" "$T/run1.jsonl" --smooth 1
exit 0
