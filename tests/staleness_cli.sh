#!/bin/sh
# staleness_cli.sh GRAPHRUN - the training log records the staleness of the
# updates (docs/curves.md): every record and the done line carry
# staleness_mean/p99/max; one executor's are 0 and its summary says
# nothing of it; with two executors the summary line gives the run's.
set -u
G=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$T/m.graph" <<'GRAPH'
data d = gaussian(n=512, dims=[8], batch=16, seed=1, shuffle=true)
var w = glorot([8, 4])
loss = mean((d.x @ w) * (d.x @ w))
train = sgd(0.01).minimize(loss)
GRAPH
timeout 60 "$G" "$T/m.graph" --steps 200 --threads 1 --log "$T/one.jsonl" --log-every 50 > "$T/one.out" 2>&1 ||
    fail "one executor: $(cat "$T/one.out")"
[ "$(grep -c '"staleness_mean":0,"staleness_p99":0,"staleness_max":0' "$T/one.jsonl")" -eq 5 ] ||
    fail "one executor: want 4 records and the done line at staleness 0: $(cat "$T/one.jsonl")"
! grep -q staleness "$T/one.out" || fail "one executor's summary names staleness: $(cat "$T/one.out")"
timeout 60 "$G" "$T/m.graph" --steps 400 --executors 2 --threads 2 --log "$T/two.jsonl" > "$T/two.out" 2>&1 ||
    fail "two executors: $(cat "$T/two.out")"
grep -Eq '^trained train: .*, staleness mean [0-9]+\.[0-9]{2} p99 [0-9]+ max [0-9]+$' "$T/two.out" ||
    fail "two executors' summary: $(cat "$T/two.out")"
grep '"event":"done"' "$T/two.jsonl" | grep -Eq '"staleness_mean":[0-9.e+-]+,"staleness_p99":[0-9]+,"staleness_max":[0-9]+' ||
    fail "two executors' done line: $(tail -n 1 "$T/two.jsonl")"
echo "ok: staleness in the log and the summary"
