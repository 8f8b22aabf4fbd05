#!/bin/sh
# data_eval_mpi.sh GRAPHRUN MPIRUN - gr_eval over a source that 2 processes
# split (the train source of --distributed sync) counts every example once:
# 17 examples in batches of 3 on each process leave 5 to a last batch (3 on
# rank 0, 2 on rank 1), and the evaluations must equal one process's in
# batches of 1.  The learning rate is too small to move a weight, so both
# runs evaluate the initial weights (seed 0).
set -u
G=$1 MPIRUN=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T" || exit 1
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers: no CMA

awk 'BEGIN { for (i = 0; i < 17; i++) printf "%g,%g,%d\n", (i * 7 % 11) / 5 - 1, (i * 5 % 13) / 6 - 1, i * 5 % 3 }' > d.csv
cat > m.graph <<'GRAPH'
param batch = 3
data train = csv("d.csv", batch=batch)
var w = normal([2, 3], std=1)
logits = train.x @ w
accuracy = mean(argmax(logits, 1) == train.y)
xent = mean(softmax_xent(logits, train.y))
step = sgd(1e-30).minimize(xent)
GRAPH
$MPIRUN -np 2 --oversubscribe --allow-run-as-root "$G" m.graph --steps 1 --distributed sync \
    --threads 1 --eval xent --eval accuracy --log p2.jsonl --quiet > p2.out 2>&1 ||
    fail "2 processes: $(cat p2.out)"
"$G" m.graph --set batch=1 --steps 1 --threads 1 --eval xent --eval accuracy --log p1.jsonl \
    --quiet > p1.out 2>&1 || fail "1 process: $(cat p1.out)"
evals() { sed -n 's/.*"eval":{"xent":\([^,]*\),"accuracy":\([^}]*\)}.*/\1 \2/p' "$1"; }
a=$(evals p2.jsonl) b=$(evals p1.jsonl)
[ -n "$a" ] && [ -n "$b" ] || fail "no evaluations in the logs: '$a' '$b'"
echo "2 processes x batch 3: $a; 1 process x batch 1: $b"
echo "$a $b" | awk '{ d1 = $1 - $3; d2 = $2 - $4; if (d1 < 0) d1 = -d1; if (d2 < 0) d2 = -d2
    exit !(d1 <= 1e-5 * (1 + $3) && d2 <= 1e-6) }' || fail "the evaluations differ"
