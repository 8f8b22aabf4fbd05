#!/bin/sh
# data_cli.sh GRAPHRUN - what graphrun reads is refused when it is not a
# regular file or is above its limit, at once and without blocking (issue 23):
# the .graph source (64 MiB) and a data file named by csv(...), each a FIFO,
# a device, a directory and a sparse file past the limit; and the CSV rules
# (a non-finite value, the opt-in) as a user meets them, with their location.
set -u
G=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$T" || exit 1

# refused MESSAGE GRAPHRUN-ARGS...: exit status 1 or 2 within 20 s, and MESSAGE
refused() {
    want=$1
    shift
    out=$(timeout 20 "$G" "$@" 2>&1)
    rc=$?
    [ $rc -eq 1 ] || [ $rc -eq 2 ] || fail "$* exited $rc: $out"
    case $out in *"$want"*) ;; *) fail "$*: '$out' does not say '$want'" ;; esac
}
mkfifo fifo.graph fifo.csv
mkdir dir.graph dir.csv
truncate -s 67108865 big.graph
truncate -s 1073741825 big.csv
for f in /dev/zero fifo.graph dir.graph; do
    refused "graphrun: error: $f: not a regular file" check $f
done
refused "big.graph: the file is 67108865 bytes, above the limit of 64 MiB for a source" \
    check big.graph
refused "fifo.graph: not a regular file" fifo.graph --steps 1

for f in /dev/zero fifo.csv dir.csv; do
    printf 'data d = csv("%s", batch=1)\n' $f > m.graph
    refused "m.graph:1:10: error: $f: not a regular file" check m.graph
done
printf 'data d = csv("big.csv", batch=1)\n' > m.graph
refused "big.csv: the file is 1073741825 bytes, above the limit of 1073741824 bytes for a CSV file" \
    check m.graph

# a NaN in a CSV stops the run before training, naming the file, line and column;
# nonfinite=true reads it
printf 'a,b,label\n1,2,0\n3,NaN,1\n' > nan.csv
cat > nan.graph <<'GRAPH'
data d = csv("nan.csv", batch=2)
var w = zeros([2, 2])
loss = mean(softmax_xent(d.x @ w, d.y))
train = sgd(0.1).minimize(loss)
GRAPH
refused "nan.graph:1:10: error: data 'd': nan.csv:3:3: column 2: 'NaN' is not a finite number" \
    nan.graph --steps 1 --quiet
sed -i 's/batch=2)/batch=2, nonfinite=true)/' nan.graph
"$G" nan.graph --steps 1 --quiet > out.txt 2>&1 || fail "nonfinite=true: $(cat out.txt)"
grep -q "final loss nan" out.txt || fail "nonfinite=true: the NaN is not read: $(cat out.txt)"

# an --eval that cannot count its last partial batch is refused before any step
printf 'a,b,label\n1,2,0\n3,4,1\n5,6,0\n' > three.csv
cat > tail.graph <<'GRAPH'
data d = csv("three.csv", batch=2)
var w = zeros([2, 2])
loss = mean(softmax_xent(d.x @ w, d.y))
train = sgd(0.1).minimize(loss)
not_linear = 1 - mean(argmax(d.x @ w, 1) == d.y) * mean(argmax(d.x @ w, 1) == d.y)
GRAPH
refused "'not_linear' cannot cover all 3 examples of 'd' in batches of 2" \
    tail.graph --steps 100000000 --eval not_linear --quiet
exit 0
