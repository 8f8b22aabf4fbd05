#!/bin/sh
# run.sh CASE GRAPHRUN MPIRUN - one distributed-training test (tests/mpi.cmake),
# run in the current folder with the model tests/mpi/mlp.graph.
#   oracle-T  2 processes x batch 32 x 50 steps of target train_T leave the
#             same variables (within 1e-5, Adam's 5e-5) as 1 process x batch 64, through the
#             one-node shared-memory allreduce and through MPI_Allreduce (the
#             path between nodes); sgd also with 3 processes (1e-5 of 1 x 96).
#             sgd's update of fc1/w is fused with its allreduce on both paths
#             (apply_sgd_allreduce in --profile), momentum's and adam's are not;
#             with backup workers (3 processes, --backup 1, one of them 4 times
#             slower) every process's variables are rank 0's bit for bit
#             after 30 steps (async processes' are not: the check can fail), and
#             the slow one skipped steps (ran fewer than 30 times)
#   resume    25 steps, checkpoint, resume to 50 == 50 uninterrupted, bit for
#             bit; resuming with another number of processes is an error
#   kill      a rank killed mid-run ends the job, non-zero, within 10 s
#   mismatch  processes that compiled different graphs get an error, no hang
#   async     async (and --sync-every) reach sync's test accuracy within 2.5 points
#             (1500 steps, near the plateau), in the mean of the evaluations
#             at steps 1100, 1200, ..., 1500: one evaluation is too noisy (sgd
#             at lr 0.1 on one process, 3000 steps of 32, 31 seeds: 0.795-0.856
#             at the last step, 0.827-0.849 as the mean of the last 5; one
#             async run in CI, 0.8118, failed the single-point check).  Async
#             is not deterministic: which steps overlap depends on the
#             scheduler.  A run that diverges or loses its updates ends far below
#   cli       usage errors, and the note for mpirun without --distributed
# The schedule cases use tests/mpi/tiny.graph (no data files) and, for the
# embedding side, PROGRAM (tests/mpi/schedule.c); each job must end by
# itself within seconds (30 s is a hang):
#   agree-OPT  the ranks give another --steps, --seed, --eval, --eval-every,
#             --sync-every, --checkpoint or --checkpoint-every: an error on
#             both ranks naming the option and both values, no checkpoint
#   agree-api  gr_session_dist_agree with another value on rank 1: the
#             error on both ranks, each ending cleanly (no MPI_Abort)
#   leave-M   rank 1 frees its session after 3 steps, rank 0 trains on: the
#             job ends naming rank 1 and where each one is (M: sync through
#             the shared-memory allreduce, mpi through MPI_Allreduce, every:
#             async --sync-every 2)
#   stop-M    rank 1 stops calling after 3 steps: GR_DIST_TIMEOUT=2 ends the
#             job naming the collective, the step and rank 1
#   other-eval  rank 1 evaluates while rank 0 trains: caught at once
#   other-target-M  rank 1 trains another target (M: sync, mpi), whose
#             gradients have another length: caught at the first step
#   together  the same calls on both ranks end normally, in every mode (and
#             async ranks may train different numbers of steps); with backup
#             workers too (3 ranks, backup 1)
#   backup-stall  3 ranks, backup 1, the last stops calling after 3 steps: the
#             others train on to step 10, and their evaluation ends the job
#             (GR_DIST_TIMEOUT=2) naming the rank
#   backup-stall-others  every rank but 0 stops: rank 0's wait for a gradient
#             ends the job, naming the step
#   backup-stall-root  rank 0 stops: the others' wait for its variables ends
#             the job
#   backup-leave  every rank but 0 frees its session after 3 steps: rank 0's
#             wait for a gradient ends at once (GR_DIST_TIMEOUT is 600 s),
#             naming one
#   backup-cli  --backup without --distributed sync, --backup >= P and --slow
#             of a rank that does not exist are usage errors (exit 2)
#   stale     3 async ranks count stale updates (the summary line's and the
#             log's maximum above 0); 2 sync ranks count none
#   stale-lr  tests/mpi/stale.graph: a rank's update that others' updates
#             overtook (2 or more) lands scaled by 1 / staleness with
#             --stale-lr, whole without; one async rank trains to the same
#             bits with and without it
#   bound     3 async ranks, --max-staleness 1, rank 2 3 times slower: no
#             update more than (P - 1)(2S + 1) = 6 behind
#   bound-leave  rank 1 frees its session after 3 steps: rank 0, bounded to
#             1 step ahead, trains on to 10 (a rank that left stops counting)
#   bound-eval  rank 1 evaluates after 3 steps: rank 0 stops counting it
#             (it waits in a collective), trains to 10 and leaves, and rank
#             1's evaluation ends the job at once, naming rank 0
#   bound-stop  rank 1 stops calling after 3 steps: rank 0's wait to start
#             step 6 ends the job (GR_DIST_TIMEOUT=2) naming rank 1's step
#   bound-cli  --max-staleness and --stale-lr with sync or --sync-every are
#             usage errors (exit 2); ranks with other bounds are refused
set -u
case_=$1 G=$2 MPIRUN=$3 P=${4:-}
HERE=$(cd "$(dirname "$0")" && pwd)
M=$HERE/mlp.graph T=$HERE/tiny.graph SG=$HERE/stale.graph
PY=/usr/bin/python3
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers: no CMA
R="$MPIRUN -np 2 --oversubscribe --allow-run-as-root"
R3="$MPIRUN -np 3 --oversubscribe --allow-run-as-root"
fail() { echo "FAIL: $*" >&2; exit 1; }

train() { # train NPROC TARGET STEPS BATCH EXTRA...
    np=$1 t=$2 n=$3 b=$4
    shift 4
    if [ "$np" = 1 ]; then
        "$G" "$M" --target "$t" --steps "$n" --set batch="$b" --threads 1 --quiet "$@"
    else
        $MPIRUN -np "$np" --oversubscribe --allow-run-as-root "$G" "$M" --target "$t" \
            --steps "$n" --set batch="$b" --threads 1 --quiet --distributed "$@"
    fi
}

plateau() { # plateau LOG: the mean of the --log's last 5 accuracies
    $PY -c 'import json, sys
a = [r["eval"]["accuracy"] for r in map(json.loads, open(sys.argv[1])) if "eval" in r]
print(f"{sum(a[-5:]) / 5:.4f}" if len(a) >= 5 else "none")' "$1"
}

job() { # job OUT CMD...: the job's exit status in $rc and its seconds in $secs
    out=$1
    shift
    t0=$(date +%s)
    timeout 30 "$@" > "$out" 2>&1
    rc=$? secs=$(($(date +%s) - t0))
    [ $rc -ne 124 ] || fail "the job hung (killed after 30 s): $(cat "$out")"
}

quick_failure() { # quick_failure OUT: non-zero, within 10 s
    [ $rc -ne 0 ] || fail "exit status 0: $(cat "$1")"
    [ $secs -le 10 ] || fail "the job took ${secs}s to end: $(cat "$1")"
}

twice() { # twice TEXT OUT: TEXT printed by both ranks
    [ "$(grep -F -o -- "$1" "$2" | wc -l)" = 2 ] || fail "not from both ranks: $1: $(cat "$2")"
}

agree() { # agree MODE "RANK 0'S OPTIONS" "RANK 1'S OPTIONS" MESSAGE
    rm -f a.st b.st
    # shellcheck disable=SC2086 # the options are words
    job agree.out "$MPIRUN" --oversubscribe --allow-run-as-root \
        -np 1 "$G" "$T" --steps 20 --quiet --distributed $1 $2 : \
        -np 1 "$G" "$T" --steps 20 --quiet --distributed $1 $3
    quick_failure agree.out
    twice "$4" agree.out
    [ ! -e a.st ] && [ ! -e b.st ] || fail "a checkpoint was written"
}

schedule() { # schedule CASE MODE [EXPECTED]: mpi_schedule's job, and its message
    job sched.out $R "$P" "$T" "$1" "$2"
    [ $# -lt 3 ] && return
    quick_failure sched.out
    grep -q "^rank 0: .*$3" sched.out || fail "no message: $3: $(cat sched.out)"
}

left() { # left WHERE: rank 1's goodbye, seen by rank 0 in WHERE
    echo "rank 1 left (gr_session_free) after its collective [0-9]*, at step 3, while rank 0 \
waits in its collective [0-9]* ($1)"
}

case $case_ in
oracle-*)
    t=train_${case_#oracle-}
    train 2 "$t" 50 32 sync --checkpoint p2.st --profile > p2.out 2>&1 || fail "2 processes"
    train 1 "$t" 50 64 --checkpoint p1.st > /dev/null || fail "1 process"
    # Adam's normalised step carries rounding differences of the summation
    # order into the trajectory: after 50 steps 3.5e-6 with OpenBLAS's AVX2
    # GEMM, 6e-6 to 1.9e-5 with cpu_sgemm.c's (panels of 16 or 256 rows)
    tol=1e-5
    [ "$t" = train_adam ] && tol=5e-5
    $PY "$HERE/compare.py" p2.st p1.st $tol || fail "2 x 32 differs from 1 x 64"
    GR_MPI_ALLREDUCE=1 train 2 "$t" 50 32 sync --checkpoint pm.st --profile > pm.out 2>&1 ||
        fail "MPI path"
    $PY "$HERE/compare.py" pm.st p1.st $tol || fail "2 x 32 through MPI_Allreduce differs"
    # fc1/w's gradient is averaged alone: sgd's update joins its allreduce, others' do not
    for out in p2.out pm.out; do
        fused=$(grep -c " apply_sgd_allreduce *f32\[784,128\]" $out)
        [ "$fused" = "$([ "$t" = train_sgd ] && echo 1 || echo 0)" ] || fail "$fused fused in $out"
    done
    if [ "$t" = train_sgd ]; then
        train 3 "$t" 50 32 sync --checkpoint p3.st > /dev/null || fail "3 processes"
        train 1 "$t" 50 96 --checkpoint p96.st > /dev/null || fail "1 process x 96"
        $PY "$HERE/compare.py" p3.st p96.st 1e-5 || fail "3 x 32 differs from 1 x 96"
    fi
    # the check can fail: without averaging, the two are far apart
    train 2 "$t" 50 32 async --sync-every 1000 --checkpoint pa.st > /dev/null || fail async
    ! $PY "$HERE/compare.py" pa.st p1.st 1e-5 > /dev/null || fail "compare.py cannot fail"
    job rep.out $R3 "$P" "$M" replicas sync 1 "$t"
    grep -qx "replicas: identical" rep.out || fail "backup workers' replicas: $(cat rep.out)"
    runs=$(sed -n 's/^replicas: the last rank ran \([0-9]*\) times$/\1/p' rep.out)
    [ "${runs:-30}" -lt 30 ] || fail "the slow rank skipped no step: $(cat rep.out)"
    if [ "$t" = train_sgd ]; then # the check can fail: async replicas differ
        job rep.out $R "$P" "$M" replicas async 0 "$t"
        grep -qx "replicas: rank 1 differs" rep.out || fail "async replicas: $(cat rep.out)"
    fi
    ;;
resume)
    rm -f r.st
    train 2 train_adam 25 32 sync --checkpoint r.st > /dev/null || fail "first half"
    train 2 train_adam 50 32 sync --restore r.st --checkpoint r.st > /dev/null || fail resume
    train 2 train_adam 50 32 sync --checkpoint u.st > /dev/null || fail uninterrupted
    $PY "$HERE/compare.py" r.st u.st 0 || fail "resumed differs from uninterrupted"
    train 1 train_adam 60 64 --restore r.st 2> other.err && fail "restored by 1 process"
    grep -q "saved by 2 processes, restored by 1" other.err || fail "message: $(cat other.err)"
    ;;
kill)
    pat="^$G $M --target train_sgd --steps 1000000000"
    $R "$G" "$M" --target train_sgd --steps 1000000000 --distributed sync --threads 1 \
        > kill.out 2>&1 &
    job=$!
    trap 'kill $job 2>/dev/null; pkill -f "$pat"' EXIT # a failed check leaves nothing running
    for _ in $(seq 100); do [ "$(pgrep -c -f "$pat")" = 2 ] && break; sleep 0.1; done
    [ "$(pgrep -c -f "$pat")" = 2 ] || fail "the job did not start"
    sleep 2 # loading the data, then training
    victim=$(pgrep -n -f "$pat")
    t0=$(date +%s)
    kill -9 "$victim"
    wait $job
    rc=$? t=$(($(date +%s) - t0))
    [ $rc -ne 0 ] || fail "exit status 0 after a rank was killed"
    [ $t -le 10 ] || fail "the job took ${t}s to end"
    grep -q "rank 1" kill.out || fail "no message names the rank: $(cat kill.out)"
    ;;
mismatch)
    timeout 60 "$MPIRUN" --oversubscribe --allow-run-as-root \
        -np 1 "$G" "$M" --steps 5 --distributed sync : \
        -np 1 "$G" "$M" --steps 5 --distributed sync --set batch=32 > mm.out 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "exit status $rc"
    grep -q "rank 1 compiled a different graph than rank 0" mm.out || fail "$(cat mm.out)"
    ;;
async)
    for m in sync async every; do
        opts=$m
        [ $m = every ] && opts="async --sync-every 10"
        # shellcheck disable=SC2086 # the options are words
        train 2 train_sgd 1500 32 $opts --eval accuracy --eval-every 100 --log $m.jsonl \
            > $m.out || fail "$opts"
    done
    s=$(plateau sync.jsonl) a=$(plateau async.jsonl) e=$(plateau every.jsonl)
    echo "accuracy, mean of steps 1100-1500: sync $s, async $a, async --sync-every 10 $e"
    $PY -c "import sys; s, a, e = map(float, sys.argv[1:]); sys.exit(a < s - 0.025 or e < s - 0.025)" \
        "$s" "$a" "$e" || fail "async is more than 2.5 points below sync"
    ;;
cli)
    "$G" "$M" --steps 1 --sync-every 2 2> e1; [ $? -eq 2 ] || fail "--sync-every alone"
    grep -q "needs --distributed async" e1 || fail "$(cat e1)"
    "$G" "$M" --steps 1 --distributed sync --executors 2 2> e2; [ $? -eq 2 ] || fail executors
    "$G" "$M" --steps 1 --distributed maybe 2> e3; [ $? -eq 2 ] || fail "bad mode"
    grep -q "takes sync or async" e3 || fail "$(cat e3)"
    $R "$G" "$M" --target train_sgd --steps 2 --threads 1 --quiet > alone.out 2> alone.err ||
        fail "without --distributed"
    [ "$(grep -c 'without --distributed' alone.err)" = 1 ] || fail "note: $(cat alone.err)"
    ;;
agree-steps)
    agree sync "" "--steps 30" "rank 1: --steps 30 differs from rank 0's --steps 20"
    ;;
agree-seed)
    agree sync "--seed 1" "" "rank 1: --seed 0 differs from rank 0's --seed 1"
    ;;
agree-eval)
    agree sync "--eval loss" "" "rank 1: --eval (none) differs from rank 0's --eval loss"
    ;;
agree-eval-every)
    agree sync "--eval loss --eval-every 5" "--eval loss --eval-every 10" \
        "rank 1: --eval-every 10 differs from rank 0's --eval-every 5"
    ;;
agree-sync-every)
    agree async "--sync-every 5" "--sync-every 10" \
        "rank 1: --sync-every 10 differs from rank 0's --sync-every 5"
    ;;
agree-checkpoint)
    agree sync "--checkpoint a.st" "" \
        "rank 1: --checkpoint (none) differs from rank 0's --checkpoint (given)"
    ;;
agree-checkpoint-every)
    agree sync "--checkpoint a.st --checkpoint-every 5" "--checkpoint b.st --checkpoint-every 10" \
        "rank 1: --checkpoint-every 10 differs from rank 0's --checkpoint-every 5"
    ;;
agree-api)
    schedule agree sync
    [ $rc -ne 0 ] || fail "exit status 0: $(cat sched.out)"
    for r in 0 1; do
        grep -q "^rank $r: distributed: rank 1: --colour blue differs from rank 0's --colour red" \
            sched.out || fail "rank $r: $(cat sched.out)"
    done
    ! grep -q MPI_ABORT sched.out || fail "the ranks did not end by themselves: $(cat sched.out)"
    ;;
leave-sync)
    schedule leave sync "$(left "gradient allreduce, step 4")"
    ;;
leave-mpi)
    export GR_MPI_ALLREDUCE=1
    schedule leave sync "$(left "gradient allreduce, step 4")"
    ;;
leave-every)
    schedule leave every "$(left "averaging (sync_every), after step 4")"
    ;;
stop-sync | stop-mpi)
    [ "$case_" = stop-mpi ] && export GR_MPI_ALLREDUCE=1
    export GR_DIST_TIMEOUT=2
    schedule stop sync "rank 0 waited 2[.0-9]* s in its collective [0-9]* \
(gradient allreduce, step 4) for rank 1, which stopped calling (GR_DIST_TIMEOUT)"
    [ $secs -ge 2 ] || fail "ended before the timeout: $(cat sched.out)"
    ;;
other-eval)
    schedule eval sync
    quick_failure sched.out
    grep -q "^rank [01]: .*(evaluation total, after step 3)" sched.out &&
        grep -q "^rank [01]: .*(gradient allreduce, step 4)" sched.out || fail "$(cat sched.out)"
    ;;
other-target-sync | other-target-mpi)
    [ "$case_" = other-target-mpi ] && export GR_MPI_ALLREDUCE=1
    schedule target sync
    quick_failure sched.out
    grep -Eq "^rank [01]: .*(\(4 to 6 floats\)|averages [46] floats).*\(gradient allreduce, step 1\)" \
        sched.out ||
        fail "$(cat sched.out)"
    ;;
together)
    for mode in sync async every; do
        schedule together $mode
        [ $rc -eq 0 ] || fail "$mode: exit status $rc: $(cat sched.out)"
    done
    # async steps are not collectives: rank 1 may stop first
    schedule leave async
    [ $rc -eq 0 ] || fail "async, rank 1 leaving: exit status $rc: $(cat sched.out)"
    job sched.out $R3 "$P" "$T" together sync 1
    [ $rc -eq 0 ] || fail "backup workers: exit status $rc: $(cat sched.out)"
    export GR_MPI_ALLREDUCE=1
    schedule together sync
    [ $rc -eq 0 ] || fail "MPI_Allreduce: exit status $rc: $(cat sched.out)"
    ;;
backup-stall | backup-stall-others | backup-stall-root)
    export GR_DIST_TIMEOUT=2
    job sched.out $R3 "$P" "$T" "${case_#backup-}" sync 1
    quick_failure sched.out
    case $case_ in
    backup-stall) want="^rank 0: .*waited 2[.0-9]* s in its collective [0-9]* \
(evaluation total, after step 10) for rank 2, which stopped calling" ;;
    backup-stall-others) want="^rank 0: .*waited 2[.0-9]* s for the gradients of 1 of the \
other 2 ranks for step 4 (--backup 1), which stopped coming (GR_DIST_TIMEOUT)" ;;
    *) want="^rank [12]: .*waited 2[.0-9]* s for rank 0's variables after a step past 3 \
(--backup 1), which stopped coming (GR_DIST_TIMEOUT)" ;;
    esac
    grep -q "$want" sched.out || fail "no message: $want: $(cat sched.out)"
    ;;
backup-leave)
    job sched.out $R3 "$P" "$T" leave-others sync 1
    quick_failure sched.out
    grep -q "^rank 0: .*rank [12] left (gr_session_free) at step 3 while rank 0 waits for the \
gradients of 1 of the other 2 ranks for step 4 (--backup 1)" sched.out || fail "$(cat sched.out)"
    ;;
backup-cli)
    "$G" "$T" --steps 1 --backup 1 2> e1; [ $? -eq 2 ] || fail "--backup alone"
    grep -q "needs --distributed sync" e1 || fail "$(cat e1)"
    "$G" "$T" --steps 1 --distributed async --backup 1 2> e2; [ $? -eq 2 ] || fail "async"
    grep -q "needs --distributed sync" e2 || fail "$(cat e2)"
    job e3 $R "$G" "$T" --steps 5 --quiet --distributed sync --backup 2
    [ $rc -eq 2 ] || fail "--backup 2 of 2: exit status $rc: $(cat e3)"
    [ "$(grep -c -- "--backup 2 with 2 processes: B must be below" e3)" = 1 ] || fail "$(cat e3)"
    job e4 $R "$G" "$T" --steps 5 --quiet --distributed sync --slow 2:3
    [ $rc -eq 2 ] || fail "--slow 2:3 of 2 ranks: exit status $rc: $(cat e4)"
    grep -q "there are 2 ranks, numbered 0 to 1" e4 || fail "$(cat e4)"
    job e5 $R "$G" "$T" --steps 20 --quiet --distributed sync --backup 1 --slow 1:2
    [ $rc -eq 0 ] || fail "--backup 1 --slow 1:2: exit status $rc: $(cat e5)"
    grep -q "trained train_b: 20 steps" e5 || fail "$(cat e5)"
    ;;
stale)
    job st.out $R3 "$G" "$T" --steps 4000 --threads 1 --distributed async --eval loss --log st.log
    [ $rc -eq 0 ] || fail "async: exit status $rc: $(cat st.out)"
    grep -q "^trained train_b: 4000 steps.*, staleness mean [0-9.]* p99 [0-9]* max [1-9]" st.out ||
        fail "no stale update counted: $(cat st.out)"
    grep -q '"event":"done".*"staleness_max":[1-9]' st.log || fail "log: $(tail -1 st.log)"
    job sy.out $R "$G" "$T" --steps 400 --threads 1 --distributed sync --log sy.log
    [ $rc -eq 0 ] || fail "sync: exit status $rc: $(cat sy.out)"
    grep -q "^trained train_b: 400 steps.*, staleness mean 0.00 p99 0 max 0$" sy.out ||
        fail "sync: $(cat sy.out)"
    ! grep -q '"staleness_max":[1-9]' sy.log || fail "sync log: $(cat sy.log)"
    ;;
stale-lr)
    for mode in async stale-lr; do
        job sl.out $R "$P" "$SG" stale $mode
        [ $rc -eq 0 ] || fail "$mode: exit status $rc: $(cat sl.out)"
        k=$(sed -n 's/^stale: \([0-9]*\)$/\1/p' sl.out)
        [ "${k:-0}" -ge 2 ] || fail "$mode: no update 2 or more behind: $(cat sl.out)"
        want=$([ $mode = async ] && echo whole || echo scaled)
        grep -qx "stale: $want" sl.out || fail "$mode: not $want: $(cat sl.out)"
    done
    for lr in "" --stale-lr; do
        # shellcheck disable=SC2086 # no word, or the option
        $MPIRUN -np 1 --allow-run-as-root "$G" "$T" --steps 50 --threads 1 --quiet \
            --distributed async --checkpoint "one$lr.st" $lr > /dev/null || fail "1 rank $lr"
    done
    $PY "$HERE/compare.py" one.st one--stale-lr.st 0 || fail "one rank: --stale-lr changed the bits"
    ;;
bound)
    job b.out $R3 "$G" "$T" --steps 1000 --threads 1 --distributed async --max-staleness 1 \
        --slow 2:3 --eval loss
    [ $rc -eq 0 ] || fail "exit status $rc: $(cat b.out)"
    max=$(sed -n 's/^trained .*, staleness mean [0-9.]* p99 [0-9]* max \([0-9]*\)$/\1/p' b.out)
    [ -n "$max" ] && [ "$max" -le 6 ] || fail "more than 6 behind: $(cat b.out)"
    ;;
bound-leave)
    schedule leave bound
    [ $rc -eq 0 ] || fail "exit status $rc: $(cat sched.out)"
    ;;
bound-eval)
    schedule eval bound
    quick_failure sched.out
    grep -q "^rank 1: .*rank 0 left (gr_session_free) after its collective [0-9]*, at step 10, \
while rank 1 waits in its collective [0-9]* (evaluation total, after step 3)" sched.out ||
        fail "$(cat sched.out)"
    ;;
bound-stop)
    export GR_DIST_TIMEOUT=2
    schedule stop bound "rank 0 waited 2[.0-9]* s for rank 1, at step 3, to start step 6 \
(--max-staleness 1), which stopped coming (GR_DIST_TIMEOUT)"
    [ $secs -ge 2 ] || fail "ended before the timeout: $(cat sched.out)"
    ;;
bound-cli)
    for bad in "sync --max-staleness 1" "sync --stale-lr" "async --sync-every 5 --max-staleness 1" \
        "async --sync-every 5 --stale-lr"; do
        # shellcheck disable=SC2086 # the options are words
        "$G" "$T" --steps 1 --distributed $bad 2> e1
        [ $? -eq 2 ] || fail "$bad: not a usage error: $(cat e1)"
        grep -q "with --distributed needs async without --sync-every" e1 || fail "$(cat e1)"
    done
    agree async "--max-staleness 1" "--max-staleness 2" \
        "rank 1: --max-staleness 2 differs from rank 0's --max-staleness 1"
    agree async "--stale-lr" "" "rank 1: --stale-lr off differs from rank 0's --stale-lr on"
    ;;
*)
    fail "unknown case $case_"
    ;;
esac
