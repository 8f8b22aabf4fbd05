#!/bin/sh
# numbers_cli.sh GRAPHRUN - numbers from outside are parsed strictly (issue
# 23): every number option of the training command is decimal digits in its
# documented range, or exit 2 naming the option, the value and the range;
# --seed takes all of [0, 2^64 - 1]; a checkpoint's step is at most 2^53
# (2^63 - 1 used to hang training, 2^64 - 1 to resume from step -1).  Every
# run is under `timeout`, so a regression fails instead of hanging.
set -u
G=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$T/m.graph" <<'GRAPH'
data d = gaussian(n=64, dims=[2], batch=4, seed=1, shuffle=true)
var w = glorot([2, 1])
loss = mean(d.x @ w)
train = sgd(0.1).minimize(loss)
GRAPH

# expect RC WANT ARGS...: the exit status and a line of stderr holding WANT
# (when not empty)
expect() {
    rc=$1 want=$2
    shift 2
    timeout 20 "$G" "$T/m.graph" "$@" > "$T/out" 2> "$T/err"
    got=$?
    [ $got -eq "$rc" ] || fail "$*: exit $got, want $rc: $(head -c 300 "$T/err")"
    [ -z "$want" ] || grep -qF -- "$want" "$T/err" || fail "$*: stderr lacks '$want': $(head -c 300 "$T/err")"
}

S53=9007199254740992
U64=18446744073709551615
for bad in 99999999999999999999999 9007199254740993 -1 +5 " 5" 5x 0x10 ""; do
    expect 2 "--steps '$bad'" --steps "$bad"
done
expect 2 "--steps '99999999999999999999999': out of range; --steps takes an integer in [0, $S53]" \
    --steps 99999999999999999999999
expect 2 "--seed '18446744073709551616': out of range; --seed takes an integer in [0, $U64]" \
    --steps 1 --seed 18446744073709551616
expect 2 "--seed '-1': not a decimal integer" --steps 1 --seed -1
expect 2 "--threads '0': out of range; --threads takes an integer in [1, 1024]" --steps 1 --threads 0
expect 2 "--threads '1025'" --steps 1 --threads 1025
expect 2 "--executors '65'" --steps 1 --executors 65
expect 2 "--eval-every '0'" --steps 1 --eval-every 0
expect 2 "--log-every '9007199254740993'" --steps 1 --log-every 9007199254740993
expect 2 "--checkpoint-every '1e3'" --steps 1 --checkpoint-every 1e3
expect 2 "--sync-every '2147483648'" --steps 1 --sync-every 2147483648

# the whole uint64 range seeds, and 2^64 - 1 is not 2^63 - 1 (strtol saturates)
expect 0 "" --steps 3 --seed $U64 --quiet
a=$(sed -n 's/.*final loss //p' "$T/out")
expect 0 "" --steps 3 --seed 9223372036854775807 --quiet
b=$(sed -n 's/.*final loss //p' "$T/out")
[ -n "$a" ] && [ "$a" != "$b" ] || fail "--seed 2^64-1 trained like --seed 2^63-1: loss $a, $b"

# A checkpoint of w (f32[2,1]) whose metadata says `step`.
ckpt() {
    json="{\"__metadata__\":{\"step\":\"$1\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":[0,8]}}"
    n=$(printf %s "$json" | wc -c)
    { printf "\\$(printf %03o $((n % 256)))\\$(printf %03o $((n / 256)))\\0\\0\\0\\0\\0\\0"
      printf %s "$json"; printf '\0\0\0\0\0\0\0\0'; } > "$T/c.safetensors"
}
for step in 9223372036854775807 $U64 9007199254740993; do
    ckpt $step
    expect 1 "c.safetensors: metadata 'step': '$step' is not a decimal integer in [0, $S53]" \
        --steps 10 --restore "$T/c.safetensors"
done
ckpt $S53
expect 0 "already at step $S53 >= --steps $S53: nothing to train" --steps $S53 --restore "$T/c.safetensors"
exit 0
