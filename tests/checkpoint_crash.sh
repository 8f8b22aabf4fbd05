#!/bin/sh
# checkpoint_crash.sh GRAPHRUN MODEL WORKDIR - crash safety of checkpoints.
# 20 times: train with a checkpoint every 3 steps, SIGKILL the process after
# a random 10-200 ms (once a checkpoint exists), then the checkpoint must
# load (--restore ... --steps 0).  Odd rounds start fresh, even rounds
# resume from the file, so saves also replace an existing checkpoint.
#
# A kill during a write leaves that writer's ck.safetensors.tmp.<pid>.XXXXXX
# behind; the next save sweeps it, so at most one is ever left.  Files that
# are not ck.safetensors's temporaries must survive every sweep.
set -u
G=$1 M=$2 D=$3
rm -rf "$D" && mkdir -p "$D" && cd "$D" || exit 1

temps() {
    for f in ck.safetensors.tmp.*; do printf '%s\n' "$f"; done |
        grep -E '^ck\.safetensors\.tmp\.[1-9][0-9]*\.[A-Za-z0-9]{6}$'
}

sh -c 'exit 0' & dead=$!
wait $dead
keep="ck.safetensors.tmp.keep other.safetensors.tmp.$dead.AbCd12"
for f in $keep "ck.safetensors.tmp.$dead.AbCd12"; do echo partial >"$f"; done

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
    left=$(temps | wc -l)
    if [ "$left" -gt 1 ]; then
        echo "round $i: $left stale temporaries, earlier ones were not swept:"; temps; exit 1
    fi
    echo "round $i: killed after ${ms} ms, $left temporary left; $(grep resumed check.out)"
done

# one more save sweeps the last killed writer's temporary, and only that
"$G" "$M" --restore ck.safetensors --steps 0 --checkpoint ck.safetensors --quiet >check.out 2>&1 ||
    { echo "final save failed:"; cat check.out; exit 1; }
if [ -n "$(temps)" ]; then echo "temporaries left after the final save:"; temps; exit 1; fi
for f in $keep; do
    [ -f "$f" ] || { echo "$f was removed, but it is not a temporary of ck.safetensors"; exit 1; }
done
echo "20 kills, every checkpoint loaded, stale temporaries swept"
