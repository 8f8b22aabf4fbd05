#!/bin/sh
# checkpoint_crash.sh GRAPHRUN MODEL WORKDIR - crash safety of checkpoints.
# 20 times: train with a checkpoint every 3 steps, SIGKILL the process after
# a random 10-200 ms (once a checkpoint exists), then the checkpoint must
# load (--restore ... --steps 0).  Odd rounds start fresh, even rounds
# resume from the file, so saves also replace an existing checkpoint.
set -u
G=$1 M=$2 D=$3
rm -rf "$D" && mkdir -p "$D" && cd "$D" || exit 1
i=0
while [ $i -lt 20 ]; do
    i=$((i + 1))
    from=""
    [ $((i % 2)) -eq 0 ] && from="--restore ck.safetensors"
    # shellcheck disable=SC2086
    "$G" "$M" --steps 100000 --checkpoint-every 3 --checkpoint ck.safetensors $from \
        --quiet >train.out 2>&1 &
    pid=$!
    n=0
    while [ ! -s ck.safetensors ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n + 1)); done
    ms=$(( $(od -An -N2 -tu2 /dev/urandom) % 191 + 10 ))
    sleep "$(printf '0.%03d' "$ms")"
    if ! kill -0 $pid 2>/dev/null; then
        echo "round $i: graphrun exited before the kill:"; cat train.out; exit 1
    fi
    kill -KILL $pid
    wait $pid 2>/dev/null
    if ! "$G" "$M" --restore ck.safetensors --steps 0 --quiet >check.out 2>&1; then
        echo "round $i: killed after ${ms} ms, the checkpoint does not load:"; cat check.out
        exit 1
    fi
    echo "round $i: killed after ${ms} ms; $(grep resumed check.out)"
    # a kill during a write leaves its temp file behind, never a partial ck
    rm -f ck.safetensors.tmp.*
done
echo "20 kills, every checkpoint loaded"
