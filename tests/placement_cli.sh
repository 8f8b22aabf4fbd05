#!/bin/sh
# placement_cli.sh GRAPHRUN - devices from the command line: --devices takes
# indices 0 to 15 (LIM_DEVICES) and refuses 16; a run of a program compiled
# for a GPU this machine lacks (--devices cpu:0,gpu:0-15, placed on gpu:15)
# is an error naming it, in a build with CUDA or without, never an abort;
# a variable annotated on a missing GPU trains on cpu:0 under
# --soft-placement; and --cpu-as-gpu, not GR_TEST_ON_GPU in the
# environment, moves cpu:0 to gpu:0 (data sources stay on the host).
set -u
G=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$T/m.graph" <<'G'
data d = gaussian(n=16, dims=[3], batch=4)
var w = ones([3, 2]) @gpu:15
loss = mean(d.x @ w)
train = sgd(0.1).minimize(loss)
G

"$G" check --devices cpu:0-15,sim:0-15 "$T/m.graph" || fail "--devices cpu:0-15,sim:0-15"
"$G" check --devices cpu:0-16 "$T/m.graph" 2> "$T/err" && fail "--devices cpu:0-16 accepted"
grep -q "devices are numbered 0 to 15" "$T/err" || fail "--devices cpu:0-16: $(cat "$T/err")"

"$G" "$T/m.graph" --steps 2 --quiet --devices cpu:0,gpu:0-15 2> "$T/err"
rc=$?
[ $rc -lt 128 ] || fail "gpu:15 of another machine: exit $rc: $(cat "$T/err")"
if [ $rc -ne 0 ]; then # 0: a machine with 16 GPUs
    grep -q "gpu:15, but this machine has\|gpu:N needs CUDA" "$T/err" ||
        fail "gpu:15 of another machine: $(cat "$T/err")"
fi

"$G" "$T/m.graph" --steps 2 --quiet --devices cpu:0 --soft-placement 2> "$T/err" ||
    fail "--soft-placement of a variable: $(cat "$T/err")"
grep -q "gpu:15 is not available" "$T/err" || fail "no soft-placement warning: $(cat "$T/err")"
sed 's/ @gpu:15$//' "$T/m.graph" > "$T/c.graph"
GR_TEST_ON_GPU=1 "$G" check --emit ir --devices cpu:0,sim:0 "$T/c.graph" > "$T/ir" 2>&1 ||
    fail "check --emit ir: $(cat "$T/ir")"
grep -q "@gpu:0" "$T/ir" && fail "GR_TEST_ON_GPU=1 placed a node: $(cat "$T/ir")"
"$G" check --emit ir --cpu-as-gpu --devices cpu:0,sim:0 "$T/c.graph" > "$T/ir" 2>&1 ||
    fail "check --cpu-as-gpu: $(cat "$T/ir")"
grep -q "^%0 = variable() f32\[3,2\] @gpu:0" "$T/ir" || fail "--cpu-as-gpu: $(cat "$T/ir")"
grep -q "= data() .* @cpu:0" "$T/ir" || fail "--cpu-as-gpu moved the data: $(cat "$T/ir")"
echo ok
