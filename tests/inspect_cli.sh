#!/bin/sh
# inspect_cli.sh GRAPHRUN SRCDIR PYTHON - `graphrun inspect` end to end, in a
# scratch folder: a checkpoint of a short training run, as text and as JSON
# (checked against numpy by inspect_check.py), NaN and Inf counted, and the
# errors: a truncated file, a file that is not safetensors, a missing file,
# no file.
set -u
G=$1
SRC=$2
PY=$3 # with numpy
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
CHECK=$SRC/tests/inspect_check.py
CK=$T/ck.safetensors

"$G" "$SRC/tests/models/tiny_cnn.graph" --steps 30 --checkpoint "$CK" --quiet > /dev/null ||
    fail "training"

"$G" inspect "$CK" > "$T/out.txt" || fail "inspect"
for want in "^$CK: [0-9]* tensors" "^  step  *30$" "^  graph_sha256  *[0-9a-f]\{64\}$" \
    "^  graphrun_version " "^model/conv1/w  *F32  *\[4,1,3,3\]  *144 " "^model/fc1/w/momentum  *F32 "; do
    grep -q "$want" "$T/out.txt" || fail "no line '$want' in: $(cat "$T/out.txt")"
done

"$G" inspect --json "$CK" > "$T/out.json" || fail "inspect --json"
"$PY" "$CHECK" "$CK" "$T/out.json" || fail "--json differs from numpy"
"$PY" "$CHECK" --poison "$CK" "$T/nan.safetensors" || fail "poisoning"
"$G" inspect --json "$T/nan.safetensors" > "$T/nan.json" || fail "inspect of NaN and Inf"
"$PY" "$CHECK" "$T/nan.safetensors" "$T/nan.json" || fail "NaN/Inf counts differ from numpy"
grep -q '"nan":[[:space:]]*1' "$T/nan.json" && grep -q '"inf":[[:space:]]*1' "$T/nan.json" ||
    fail "NaN and Inf not counted"

# expect CODE PATTERN FILE: inspect exits CODE and says PATTERN on stderr
expect() {
    "$G" inspect "$3" > "$T/o.txt" 2> "$T/err.txt"
    rc=$?
    [ $rc -eq "$1" ] || fail "inspect $3: exit $rc, expected $1"
    grep -q "$2" "$T/err.txt" || fail "inspect $3: said '$(cat "$T/err.txt")', expected '$2'"
    [ ! -s "$T/o.txt" ] || fail "inspect $3 printed a report"
}
size=$(stat -c %s "$CK")
head -c $((size - 10)) "$CK" > "$T/short.safetensors"
expect 1 "error: $T/short.safetensors: .*is the file truncated" "$T/short.safetensors"
echo "not a checkpoint at all" > "$T/text.safetensors"
expect 1 "error: $T/text.safetensors: " "$T/text.safetensors"
expect 2 "$T/none.safetensors: cannot open checkpoint" "$T/none.safetensors"
"$G" inspect 2> /dev/null
[ $? -eq 2 ] || fail "inspect without a file must exit 2"
exit 0
