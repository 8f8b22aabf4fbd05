#!/bin/sh
# outputs_cli.sh GRAPHRUN SRCDIR PYTHON CASE - what the command line writes,
# end to end, in a scratch folder (tests/outputs.cmake runs one CASE per
# test):
#   special    --checkpoint/--log/plot -o on a FIFO, a char device, a folder:
#              refused at once, and each is still what it was
#   symlinks   a link to a file is followed and stays a link (--checkpoint,
#              --log, fmt -w); a dangling one is refused
#   errors     --log /dev/full, a log cut by a full disk (ulimit -f): exit 1
#              naming the path and the errno text, the old file intact
#   inputs     an output that is an input (the model, a data file, a file in a
#              text() folder or a new one there, --restore, a log plot reads)
#              or two outputs that are one file: refused before any step,
#              nothing written; --checkpoint = --restore works
#   json       a NaN loss writes null: every line is JSON, and plot reads it
#   signals    SIGTERM and SIGINT mid-run: 143 and 130, the log complete at its
#              path ending in a record of the last step, the checkpoint saved
#   eval       SIGINT during the final --eval, SIGTERM during an --eval-every
#              pass: the evaluation cancelled (gr_eval_cancel), 130 or 143 at
#              once (the uncancelled pass takes hours), no "done" line, the
#              checkpoint and the log's last record at the step before it
#   tensorboard --tensorboard DIR where DIR or DIR/RUN is not a folder: refused,
#              the file untouched; the values written when the run ends
#              past a size limit: exit 1 naming the event file; an empty
#              --tensorboard (or any output or input path) refused
#   plotopts   plot --smooth: a decimal in [0, 1), anything else a usage error
#   stdin      fmt - refuses more than 64 MiB
#   stdout     what a command prints to standard output must get there: each
#              command's output to /dev/full is exit 1, naming it
#   readers    fmt, fmt --check and plot refuse a FIFO and /dev/zero as input
#              at once (not regular files: nothing blocks or reads for ever)
set -u
G=$1 SRC=$2 PY=$3 CASE=$4
T=$(mktemp -d)
trap 'chmod -R u+w "$T"; rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL ($CASE): $*" >&2; exit 1; }
MODEL=$SRC/examples/linear_regression.graph
cp "$MODEL" m.graph

# runs graphrun, at most 20 s (a FIFO opened for writing would block)
gr() { timeout 20 "$G" "$@"; }
# no temporaries left in the folder
no_temps() { [ -z "$(ls -a | grep '\.tmp\.')" ] || fail "temporaries left: $(ls -a | grep '\.tmp\.')"; }
# fails unless the last command failed and err.txt has $1
refused() {
    [ "$1" -ne 0 ] && [ "$1" -ne 124 ] || fail "$2: exit $1 (expected an error)"
    grep -q -- "$3" err.txt || fail "$2: message: $(cat err.txt)"
}

case_special() {
    mkfifo fifo && mkdir dir || fail "setup"
    for out in fifo dir; do
        gr m.graph --steps 5 --checkpoint $out --quiet 2> err.txt
        refused $? "--checkpoint $out" "$out: not a regular file"
        gr m.graph --steps 5 --log $out --quiet 2> err.txt
        refused $? "--log $out" "$out: not a regular file"
    done
    [ -p fifo ] && [ -d dir ] || fail "a FIFO or a folder was replaced"
    if [ "$(id -u)" = 0 ] && mknod null c 1 3 2> /dev/null; then
        gr m.graph --steps 5 --checkpoint null --quiet 2> err.txt
        refused $? "--checkpoint on a char device" "null: not a regular file (a character device)"
        [ -c null ] || fail "the char device was replaced"
    fi
    gr m.graph --steps 5 --log l.jsonl --quiet && gr plot l.jsonl -o fifo 2> err.txt
    refused $? "plot -o fifo" "fifo: not a regular file"
    gr fmt -w fifo 2> err.txt
    refused $? "fmt -w fifo" "fifo: not a regular file"
    [ -p fifo ] || fail "plot or fmt replaced the FIFO"
    no_temps
}

case_symlinks() {
    gr m.graph --steps 5 --checkpoint ck --quiet || fail "first save"
    ln -s ck ck.link && ln -s l.jsonl l.link && echo old > l.jsonl
    gr m.graph --steps 7 --restore ck.link --checkpoint ck.link --log l.link --quiet 2> /dev/null ||
        fail "--checkpoint and --log through links"
    [ -L ck.link ] && [ -L l.link ] || fail "a link was replaced by a file"
    gr m.graph --restore ck --steps 0 2>&1 | grep -q "resumed from step 7" ||
        fail "the link's target was not updated"
    tail -n 1 l.jsonl | grep -q '"event":"done","steps":2' || fail "the log's target: $(cat l.jsonl)"
    printf 'param lr    = 0.1\nloss  = lr\n' > ugly.graph && ln -s ugly.graph fmt.link
    gr fmt -w fmt.link || fail "fmt -w through a link"
    [ -L fmt.link ] && grep -q '^param lr = 0.1$' ugly.graph || fail "fmt -w replaced the link"
    ln -s nowhere dangling
    gr m.graph --steps 5 --log dangling --quiet 2> err.txt
    refused $? "--log to a dangling link" "dangling: a symbolic link to nothing"
    [ -L dangling ] && [ ! -e nowhere ] || fail "the dangling link was followed or replaced"
    no_temps
}

case_errors() {
    gr m.graph --steps 5 --log /dev/full --quiet 2> err.txt
    refused $? "--log /dev/full" "/dev/full"
    [ -c /dev/full ] || fail "/dev/full is no longer a device"
    # RLIMIT_FSIZE: a write past 16 KiB fails with EFBIG (SIGXFSZ ignored) part-way
    echo old > l.jsonl
    sh -c "trap '' XFSZ; ulimit -f 16; exec timeout 20 \"$G\" m.graph --steps 100000000 \
        --log-every 1 --log l.jsonl --quiet" 2> err.txt
    refused $? "a log past the size limit" "l.jsonl: cannot write: File too large"
    [ "$(cat l.jsonl)" = old ] || fail "the old log was damaged"
    sh -c "trap '' XFSZ; ulimit -f 16; exec timeout 20 \"$G\" m.graph --steps 300 \
        --checkpoint ck --quiet" 2> /dev/null || fail "a small checkpoint under the limit"
    sh -c "trap '' XFSZ; ulimit -f 16; exec timeout 20 \"$G\" $SRC/tests/models/ckpt_crash.graph \
        --steps 1 --checkpoint ck --quiet" 2> err.txt
    refused $? "a checkpoint past the size limit" "ck: cannot write: File too large"
    gr m.graph --restore ck --steps 0 2>&1 | grep -q "resumed from step 300" ||
        fail "the old checkpoint was damaged"
    no_temps
}

case_inputs() {
    printf 'f0,f1,label\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n' > d.csv
    printf 'data d = csv("d.csv", batch=2)\nvar w = zeros([2, 2])\n%s\n%s\n' \
        'loss = mean(softmax_xent(d.x @ w, d.y))' 'train = sgd(0.1).minimize(loss)' > c.graph
    cp m.graph m.orig && cp d.csv d.orig
    gr m.graph --steps 5 --log m.graph --quiet 2> err.txt
    refused $? "--log MODEL" "the same file as the model file"
    gr m.graph --steps 5 --checkpoint ./m.graph --quiet 2> err.txt
    refused $? "--checkpoint MODEL" "the same file as the model file"
    gr c.graph --steps 5 --log "$T/d.csv" --quiet 2> err.txt
    refused $? "--log DATA" "the same file as the data file"
    cmp -s m.graph m.orig && cmp -s d.csv d.orig || fail "an input was overwritten"
    gr m.graph --steps 5 --log x --checkpoint ./x --quiet 2> err.txt
    refused $? "--log X --checkpoint X" "are the same file"
    [ ! -e x ] || fail "x was written"
    gr m.graph --steps 5 --checkpoint ck --quiet && cp ck ck.orig || fail "a first checkpoint"
    gr m.graph --steps 9 --restore ck --log ck --quiet 2> err.txt
    refused $? "--log RESTORE" "the same file as --restore"
    gr m.graph --steps 9 --init-from ck --log ck --quiet 2> err.txt
    refused $? "--log INIT-FROM" "the same file as --init-from"
    cmp -s ck ck.orig || fail "the restored checkpoint was overwritten"
    gr m.graph --steps 9 --restore ck --checkpoint ck --quiet 2> /dev/null ||
        fail "--checkpoint equal to --restore must work"
    # a text() folder: its files are inputs, and a new file in it would be read next time
    mkdir corpus && printf 'some text to learn from, read in windows\n' > corpus/a.txt &&
        cp corpus/a.txt a.txt.orig || fail "a corpus"
    printf 'data d = text("corpus", block=4, batch=2)\nvar w = zeros([%s])\n%s\n%s\n' \
        '4, 1' 'loss = mean(cast(d.x, dtype="f32") @ w)' 'train = sgd(0.1).minimize(loss)' > t.graph
    ln -s corpus/a.txt text.link
    for out in corpus/a.txt text.link corpus/new.jsonl; do
        gr t.graph --steps 5 --log $out --quiet 2> err.txt
        refused $? "--log $out (a text() folder)" "inside corpus, a folder whose files this command reads"
        gr t.graph --steps 5 --checkpoint $out --quiet 2> err.txt
        refused $? "--checkpoint $out (a text() folder)" "inside corpus, a folder whose files"
    done
    cmp -s corpus/a.txt a.txt.orig && [ "$(ls corpus)" = a.txt ] || fail "the corpus was written"
    gr m.graph --steps 5 --log a.jsonl --quiet && cp a.jsonl a.orig || fail "a log"
    gr plot a.jsonl -o ./a.jsonl 2> err.txt
    refused $? "plot -o INPUT" "the same file as the log"
    cmp -s a.jsonl a.orig || fail "plot overwrote its input"
    no_temps
}

case_json() {
    cat > nan.graph << 'EOF'
# the loss is NaN on the steps whose example is negative (log of it: steps 2, 4 and 5),
# finite on the others
data d = gaussian(n=64, dims=[1], batch=1, seed=1)
var w = zeros([1, 1])
loss = mse(d.x @ w, d.x) + mean(log(d.x))
train = sgd(0.1).minimize(loss)
EOF
    gr nan.graph --steps 5 --eval loss --eval-every 2 --log nan.jsonl --quiet --profile \
        > /dev/null 2>&1 || fail "training the NaN model"
    grep -q '"loss":null' nan.jsonl || fail "no null loss: $(cat nan.jsonl)"
    "$PY" -c 'import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    json.loads(line)' nan.jsonl || fail "a line is not JSON: $(cat nan.jsonl)"
    gr plot nan.jsonl -o nan.svg || fail "plot refused graphrun's own log"
    ! grep -q '0000000[0-9]' nan.jsonl || fail "numbers are not rounded: $(head -n 2 nan.jsonl)"
}

# starts a long run of $3 (m.graph unless given) with a log and a checkpoint,
# waits for its first records, sends $1 (and again $4 seconds later, if
# given) and checks the exit status $2
signal_run() {
    rm -f s.jsonl* ck
    "$G" "${3:-m.graph}" --steps 100000000 --log-every 1000 --log s.jsonl --checkpoint ck \
        --quiet 2> err.txt &
    pid=$!
    n=0
    while [ $n -lt 500 ] && ! cat s.jsonl* 2> /dev/null | grep -q step; do
        sleep 0.01
        n=$((n + 1))
    done
    kill -"$1" $pid
    [ $# -lt 4 ] || { sleep "$4" && kill -"$1" $pid 2> /dev/null; }
    wait $pid
    rc=$?
    [ $rc -eq "$2" ] || fail "SIG$1: exit $rc, expected $2: $(cat err.txt)"
    step=$(sed -n 's/^graphrun: interrupted at step \([0-9]*\)$/\1/p' err.txt)
    [ -n "$step" ] || fail "SIG$1: $(cat err.txt)"
    tail -n 1 s.jsonl | grep -q "^{\"step\":$step,\"loss\":" ||
        fail "SIG$1: the log's last line is not the record of step $step: $(tail -n 1 s.jsonl)"
    "$G" "${3:-m.graph}" --restore ck --steps 0 2>&1 | grep -q "resumed from step $step" ||
        fail "SIG$1: no checkpoint of step $step"
    no_temps
}

case_signals() {
    signal_run TERM 143
    signal_run INT 130
    # SIGTERM (SIGINT), and 20 ms later another, while a 64 MB checkpoint is saved:
    # one request delivered twice (timeout(1) sends the signal it gets to
    # its command and to the command's process group; a terminal's Ctrl-C
    # reaches every process of the group), so one clean stop, the
    # checkpoint complete
    cat > big.graph << 'EOF'
data d = gaussian(n=3000000, dims=[1], batch=1, seed=1)
var w = zeros([1, 1])
var big = ones([4096, 4096])
loss = mse(d.x @ w, d.x)
total = sum(big)
train = sgd(0.1).minimize(loss)
EOF
    signal_run TERM 143 big.graph 0.02
    signal_run INT 130 big.graph 0.02
}

# waits (10 s at most) until the log's temporary or file holds $1
wait_log() {
    n=0
    while [ $n -lt 1000 ] && ! cat e.jsonl* 2> /dev/null | grep -q "$1"; do
        sleep 0.01
        n=$((n + 1))
    done
}

case_eval() {
    cat > slow.graph << 'EOF'
# an evaluation of hours: three million batches of one example, each through
# a 1024 x 1024 matrix
data d = gaussian(n=3000000, dims=[1], batch=1, seed=1)
var w = zeros([1, 1])
var big = ones([1024, 1024])
loss = mse(d.x @ w, d.x)
slow = mean(d.x @ ones([1, 1024]) @ big) + loss
train = sgd(0.1).minimize(loss)
EOF
    # Ctrl-C during the final --eval: the evaluation is cancelled, 130 at once
    timeout 60 "$G" slow.graph --steps 1 --eval slow --log e.jsonl --quiet > out.txt 2> err.txt &
    pid=$!
    wait_log '"step":1,'
    kill -INT $pid
    wait $pid
    rc=$?
    [ $rc -eq 130 ] || fail "Ctrl-C during the final --eval: exit $rc, expected 130"
    ! grep -q '"event":"done"' e.jsonl || fail "an interrupted run wrote its done line"
    # SIGTERM during an --eval-every pass: cancelled, no further step, the
    # checkpoint of the step before it, 143
    rm -f e.jsonl
    timeout 60 "$G" slow.graph --steps 1000 --eval slow --eval-every 2 --log-every 1 \
        --log e.jsonl --checkpoint ck --quiet > out.txt 2> err.txt &
    pid=$!
    wait_log '"step":2,'
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 143 ] || fail "SIGTERM during --eval-every: exit $rc, expected 143: $(cat err.txt)"
    grep -q "^graphrun: interrupted at step 2$" err.txt || fail "SIGTERM during --eval-every: $(cat err.txt)"
    [ "$(tail -n 1 e.jsonl)" = "$(grep '"step":2,' e.jsonl)" ] ||
        fail "SIGTERM during --eval-every: the log does not end at step 2: $(cat e.jsonl)"
    "$G" slow.graph --restore ck --steps 0 2>&1 | grep -q "resumed from step 2" ||
        fail "SIGTERM during --eval-every: no checkpoint of step 2"
}

case_tensorboard() {
    echo file > tbfile
    gr m.graph --steps 5 --tensorboard tbfile --quiet 2> err.txt
    refused $? "--tensorboard FILE" "tbfile/m-[0-9-]*: cannot make the folder: Not a directory"
    mkdir tb && echo file > tb/run
    gr m.graph --steps 5 --tensorboard tb --run-name run --quiet 2> err.txt
    refused $? "--tensorboard DIR with a file DIR/RUN" "tb/run: not a directory"
    [ "$(cat tbfile)" = file ] && [ "$(cat tb/run)" = file ] || fail "a file was replaced"
    # an empty path is refused (--tensorboard '' used to write to /RUN); so is each output's
    run=gr-outputs-test-$$
    gr m.graph --steps 5 --tensorboard "" --run-name $run --quiet 2> err.txt
    rc=$?
    [ ! -e "/$run" ] || { rm -rf "/${run:?}"; fail "--tensorboard '' wrote /$run"; }
    refused $rc "--tensorboard ''" "--tensorboard needs a path, got an empty one"
    for opt in --log --checkpoint --restore --init-from; do
        gr m.graph --steps 5 $opt "" --quiet 2> err.txt
        refused $? "$opt ''" "$opt needs a path"
    done
    # the last values, written when the run ends, do not fit (RLIMIT_FSIZE)
    sh -c "trap '' XFSZ; ulimit -f 16; exec timeout 20 \"$G\" m.graph --steps 100 \
        --log-every 1 --tensorboard tb --run-name full --quiet" 2> err.txt
    refused $? "TensorBoard's last values past the size limit" "tb/full/events.out.tfevents.*: cannot write: File too large"
}

case_plotopts() {
    gr m.graph --steps 5 --log a.jsonl --quiet || fail "a log"
    for bad in " 0.5" 0x0.8 1e-400 0.5e -0 nan inf 1 ""; do
        gr plot a.jsonl --smooth "$bad" > /dev/null 2> err.txt
        rc=$?
        [ $rc -eq 2 ] && grep -q -- "bad --smooth" err.txt || fail "--smooth '$bad': exit $rc"
    done
    for good in 0 0.0 .5 0.99; do
        gr plot a.jsonl --smooth $good > /dev/null || fail "--smooth $good refused"
    done
}

case_stdin() {
    head -c 67108865 /dev/zero | gr fmt - 2> err.txt
    refused $? "fmt - of 64 MiB + 1" "<stdin>: input larger than 64 MiB"
}

case_stdout() {
    gr m.graph --steps 5 --log a.jsonl --checkpoint ck --quiet > /dev/null || fail "a log"
    for args in "fmt m.graph" "check --emit ir m.graph" "dot m.graph" "inspect ck" \
        "inspect --json ck" "plot a.jsonl" "m.graph --steps 5 --quiet" "--help" "--version"; do
        # shellcheck disable=SC2086
        gr $args > /dev/full 2> err.txt
        refused $? "$args > /dev/full" "graphrun: error: standard output: No space left on device"
    done
}

case_readers() {
    mkfifo fifo || fail "mkfifo"
    for args in "fmt fifo" "fmt --check fifo" "plot fifo" "fmt /dev/zero" "plot /dev/zero"; do
        # shellcheck disable=SC2086
        gr $args > /dev/null 2> err.txt
        refused $? "$args" "not a regular file"
    done
}

"case_$CASE"
echo "ok ($CASE)"
