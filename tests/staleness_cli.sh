#!/bin/sh
# staleness_cli.sh GRAPHRUN - the training log records the staleness of the
# updates (docs/curves.md): every record and the done line carry
# staleness_mean/p99/max; one executor's are 0 and its summary says
# nothing of it; with two executors the summary line gives the run's.
# --max-staleness S bounds it (two workers: at most 2S + 1), with a
# straggler (--slow) too; --stale-lr runs with two executors; all three
# refuse what they cannot act on (one executor; --stale-lr MPI ranks).
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
# max_of FILE: the summary's max staleness
max_of() { sed -n 's/.*, staleness mean [0-9.]* p99 [0-9]* max \([0-9]*\)$/\1/p' "$1"; }
for S in 0 1; do
    for slow in "" "--slow 1:3"; do
        timeout 60 "$G" "$T/m.graph" --steps 300 --executors 2 --threads 2 --max-staleness $S $slow \
            > "$T/b.out" 2>&1 || fail "--max-staleness $S $slow: $(cat "$T/b.out")"
        m=$(max_of "$T/b.out")
        [ -n "$m" ] && [ "$m" -le $((2 * S + 1)) ] ||
            fail "--max-staleness $S $slow: max staleness '$m' above $((2 * S + 1)): $(cat "$T/b.out")"
    done
done
timeout 60 "$G" "$T/m.graph" --steps 300 --executors 2 --threads 2 --stale-lr > "$T/s.out" 2>&1 ||
    fail "--stale-lr: $(cat "$T/s.out")"
[ -n "$(max_of "$T/s.out")" ] || fail "--stale-lr's summary: $(cat "$T/s.out")"
for bad in "--max-staleness 1" "--executors 2 --slow 2:3" "--executors 2 --slow 1:0.5" \
    "--executors 2 --slow x" "--executors 2 --max-staleness -1" "--stale-lr" \
    "--stale-lr --distributed sync"; do
    timeout 20 "$G" "$T/m.graph" --steps 10 $bad > "$T/u.out" 2>&1
    [ $? -eq 2 ] || fail "$bad: want exit 2: $(cat "$T/u.out")"
    [ "$(wc -l < "$T/u.out")" -eq 1 ] || fail "$bad: want one line: $(cat "$T/u.out")"
done
echo "ok: staleness in the log and the summary, bounded by --max-staleness; --stale-lr"
