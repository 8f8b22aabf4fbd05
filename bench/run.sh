#!/usr/bin/env bash
# bench/run.sh: graphrun against its peers and a hand-written C floor, on the
# same workloads, in one run. The peers: PyTorch CPU from Debian's
# python3-torch (always), and, when bench/peers.sh has made its venv, PyTorch
# 2.x from PyPI and TensorFlow 2.x (tensorflow-cpu) run the seed's way
# (tf.compat.v1 graph, N Python threads looping sess.run(train_op)).
# Prints a markdown table of ratios against the best peer on stdout; progress
# goes to stderr.
#
#   bench/run.sh                        # builds build/graphrun if missing
#   GRAPHRUN=build-bench/graphrun bench/run.sh
#   REPS=5 RESULTS=/tmp/bench.md bench/run.sh
#
# Environment:
#   GRAPHRUN  graphrun binary (default: build/graphrun, built with cmake if missing)
#   SHARED    folder holding bench/torch_*.py and bench/c_softmax_floor.c
#             (default: $(dirname "$0")/../../shared)
#   REPS      runs per measurement; the best one is reported (default 3)
#   TIMEOUT   seconds allowed per single run (default 300)
#   RESULTS   also write the report to this file
#   MAX_LOAD  warn when the 1-minute load average is above this (default 1.5)
#   WAIT_QUIET  wait up to this many seconds for the load to drop below
#             MAX_LOAD before starting (default 0: do not wait)
#   PEER_OMP_WAIT  OMP_WAIT_POLICY for the Debian PyTorch runs (default PASSIVE, see peer())
#   PEERS_VENV  the venv bench/peers.sh made (default bench/.venv); used when
#             it is complete, skipped with a note otherwise
#   PEERS     auto (default: use PEERS_VENV when present) or 0 (Debian peer only)
#   SM_STEPS, MLP_STEPS, CNN_STEPS  steps per run (defaults 20000, 2000, 200)
#   DEEP_LAYERS  sizes of the deep, narrow net (bench/gen_deep.py) whose compile
#             time and memory are measured (default "111 1111 11111": about
#             1k, 10k and 100k nodes)
#   DEEP_STEP_LAYERS, DEEP_STEPS, DEEP_PEER_STEPS  the deep net trained against
#             PyTorch (bench/torch_deep.py), at width 16 and at width 1 (batch 1:
#             all overhead): layers (default 1111), graphrun's steps (default
#             500) and PyTorch's (default 30; each side times only its loop)
#   OPENBLAS_CORETYPE  passed on to every side that uses Debian's OpenBLAS
#             (graphrun, Debian's PyTorch, the floor, the sgemm probe); unset:
#             the kernels graphrun picks (`graphrun --version` names them); the
#             report records the kernel OpenBLAS runs and warns when it fell
#             back to its generic one (see bench/README.md)
set -eu
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$(dirname "$0")/../../shared}
GRAPHRUN=${GRAPHRUN:-build/graphrun}
REPS=${REPS:-3}
TIMEOUT=${TIMEOUT:-300}
RESULTS=${RESULTS:-}
MAX_LOAD=${MAX_LOAD:-1.5}
WAIT_QUIET=${WAIT_QUIET:-0}
PEER_OMP_WAIT=${PEER_OMP_WAIT:-PASSIVE}
PY=/usr/bin/python3             # the peer is always Debian's python3-torch
PEERS_VENV=${PEERS_VENV:-$HERE/.venv}
PEERS=${PEERS:-auto}
DATA=/usr/share/datasets/fashion-mnist

# Workload sizes (kept so that the whole run stays well under 10 minutes).
SM_STEPS=${SM_STEPS:-20000}; SM_BATCH=32
MLP_STEPS=${MLP_STEPS:-2000}; MLP_BATCH=64
CNN_STEPS=${CNN_STEPS:-200};  CNN_BATCH=64
DEEP_LAYERS=${DEEP_LAYERS:-111 1111 11111}
DEEP_STEP_LAYERS=${DEEP_STEP_LAYERS:-1111}; DEEP_STEPS=${DEEP_STEPS:-500}
DEEP_PEER_STEPS=${DEEP_PEER_STEPS:-30}

die() { echo "bench/run.sh: error: $*" >&2; exit 2; }
say() { echo "bench: $*" >&2; }

# ---------------------------------------------------------------- checks
case $REPS in ''|*[!0-9]*|0) die "REPS must be a positive integer (got '$REPS')";; esac
[ -d "$SHARED" ] || die "SHARED=$SHARED not found; set SHARED to the folder that holds bench/torch_small.py"
SHARED=$(cd "$SHARED" && pwd)
for f in torch_small.py torch_mlp.py torch_cnn.py c_softmax_floor.c blas_concurrency.c; do
  [ -f "$SHARED/bench/$f" ] || die "missing $SHARED/bench/$f (is SHARED=$SHARED right?)"
done
[ -x "$PY" ] || die "$PY not found; install Debian's python3: apt-get install python3 python3-torch"
"$PY" -c 'import torch, numpy' 2>/dev/null \
  || die "PyTorch is not importable by $PY; install it with: apt-get install python3-torch"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [ -f "$DATA/$f" ] || die "missing dataset file $DATA/$f"
done
command -v gcc >/dev/null || die "gcc not found; apt-get install gcc"
command -v timeout >/dev/null || die "timeout (coreutils) not found"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (bench/measure.py reads peak memory from it): apt-get install time"
for f in tf_common.py tf_softmax.py tf_mlp.py tf_cnn.py report.py; do
  [ -f "$HERE/$f" ] || die "missing $HERE/$f"
done

# The optional peers: PyPI PyTorch (PT2) and TensorFlow (TF) from bench/peers.sh's venv.
VPY=$PEERS_VENV/bin/python; HAVE_PT2=0; HAVE_TF=0; PEERS_NOTE=""
case $PEERS in
  0|no|off) PEERS_NOTE="not used (PEERS=$PEERS)" ;;
  auto|1|yes)
    if [ ! -e "$PEERS_VENV" ]; then
      PEERS_NOTE="not installed (bench/peers.sh installs PyPI PyTorch and TensorFlow)"
    elif [ ! -f "$PEERS_VENV/graphrun-peers.txt" ] || [ ! -x "$VPY" ]; then
      PEERS_NOTE="$PEERS_VENV is incomplete (run bench/peers.sh again); not used"
      say "WARNING: $PEERS_NOTE"
    else
      grep -q '^torch=' "$PEERS_VENV/graphrun-peers.txt" && HAVE_PT2=1
      grep -q '^tensorflow=' "$PEERS_VENV/graphrun-peers.txt" && HAVE_TF=1
      PEERS_NOTE="$PEERS_VENV"
      say "optional peers from $PEERS_VENV: $(tr '\n' ' ' <"$PEERS_VENV/graphrun-peers.txt")"
    fi ;;
  *) die "PEERS must be auto or 0 (got '$PEERS')" ;;
esac

TMP=$(mktemp -d "${TMPDIR:-/tmp}/graphrun-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- builds
case $GRAPHRUN in /*) ;; *) GRAPHRUN=$ROOT/$GRAPHRUN;; esac
if [ ! -x "$GRAPHRUN" ]; then
  if [ "$GRAPHRUN" = "$ROOT/build/graphrun" ]; then
    command -v cmake >/dev/null || die "cmake not found; apt-get install cmake (or run scripts/bootstrap.sh)"
    say "building $GRAPHRUN (cmake, Release)"
    { cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release \
        && cmake --build "$ROOT/build" -j2 --target graphrun; } >"$TMP/build.log" 2>&1 \
      || { tail -n 30 "$TMP/build.log" >&2; die "building graphrun failed (log above)"; }
    [ -x "$GRAPHRUN" ] || die "the build finished but $GRAPHRUN is not there"
  else
    die "GRAPHRUN=$GRAPHRUN is not an executable file"
  fi
fi
"$GRAPHRUN" --version >/dev/null 2>&1 || die "$GRAPHRUN --version failed"
GR_KERNELS=$("$GRAPHRUN" --version | sed -n 's/.*OpenBLAS kernels: \([A-Za-z0-9]*\).*/\1/p')
# graphrun re-runs itself with the kernels the CPU has when OpenBLAS falls
# back to its generic ones (gr_blas_kernels); every side that uses Debian's
# OpenBLAS gets the same kernels, so the comparison stays fair.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -n "$GR_KERNELS" ]; then
  export OPENBLAS_CORETYPE=$GR_KERNELS
fi

say "compiling the C floor and the sgemm probe"
gcc -O3 -march=native -o "$TMP/c_softmax_floor" "$SHARED/bench/c_softmax_floor.c" -lopenblas -lz -lm \
  2>"$TMP/cc.log" || { cat "$TMP/cc.log" >&2; die "compiling c_softmax_floor.c failed (apt-get install libopenblas-dev zlib1g-dev)"; }
gcc -O3 -march=native -o "$TMP/blas_concurrency" "$SHARED/bench/blas_concurrency.c" -lopenblas -lpthread \
  2>"$TMP/cc.log" || { cat "$TMP/cc.log" >&2; die "compiling blas_concurrency.c failed (apt-get install libopenblas-dev)"; }

# Which kernels does Debian's OpenBLAS pick on this CPU? A CPU newer than the
# OpenBLAS build (0.3.21 does not know family 6 model 207, for example) gets
# the generic "Prescott" (SSE3) kernels, several times slower than AVX-512.
printf '%s\n' '#include <stdio.h>' 'char *openblas_get_corename(void);' \
  'int main(void) { printf("%s\n", openblas_get_corename()); return 0; }' >"$TMP/blas_core.c"
BLAS_CORE=$(gcc -o "$TMP/blas_core" "$TMP/blas_core.c" -lopenblas 2>/dev/null && "$TMP/blas_core" 2>/dev/null || echo '?')
BLAS_NOTE="kernels: $BLAS_CORE (OPENBLAS_CORETYPE ${OPENBLAS_CORETYPE:-unset})"
case $BLAS_CORE in
  [Pp]rescott|[Kk]atmai|[Cc]oppermine|[Nn]orthwood|[Bb]anias|[Gg]eneric|[Cc]ore2)
    BLAS_NOTE="$BLAS_NOTE: OpenBLAS does not know this CPU ($(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1), family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -n 1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1)) and runs its generic kernels: graphrun, Debian's PyTorch, the C floor and the sgemm ceilings are slowed; OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) picks real ones"
    say "WARNING: $BLAS_NOTE" ;;
esac

# ---------------------------------------------------------------- runners
# Each measurement appends "key<TAB>rep<TAB>value" to $RES; a run that fails
# records FAIL (with the reason in $TMP/failures) and the benchmark goes on.
RES=$TMP/results.tsv; : >"$RES"; : >"$TMP/failures"
FAILED=0
put() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RES"; }
fail() { # key rep what logfile
  FAILED=1; put "$1" "$2" FAIL
  { echo "- $3 (run $2) failed:"; tail -n 5 "$4" | sed 's/^/    /'; } >>"$TMP/failures"
  say "  FAILED: $3 (see report)"
}
load1() { cut -d' ' -f1 /proc/loadavg; }
# busy CPU seconds of the whole machine, and of this script's finished children
cpu_busy() { awk '/^cpu / { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8 + $9) / 100 }' /proc/stat; }
# seconds of CPU that the reaped children used, from a file written by `times`
# (`times` must run in this shell: in a $(...) subshell the children are not its own)
child_secs() { awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.2f\n", t }' "$1"; }

# gr KEY REP GRAPH STEPS THREADS EVAL [EXECUTORS] -> KEY_sps, KEY_acc
# (GRAPH: a file in examples/, or an absolute path)
gr() {
  local key=$1 rep=$2 graph=$3 steps=$4 threads=$5 ev=$6 execs=${7:-1} log=$TMP/$1.$2.jsonl out vals
  out=$TMP/$1.$2.out
  case $graph in /*) ;; *) graph=$ROOT/examples/$graph;; esac
  if timeout "$TIMEOUT" "$GRAPHRUN" "$graph" --steps "$steps" --threads "$threads" \
       --executors "$execs" ${ev:+--eval "$ev"} --quiet --log "$log" >"$out" 2>&1 \
     && vals=$("$PY" - "$log" "$ev" 2>>"$out" <<'EOF'
import json, sys
done = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        d = json.loads(line)
        if d.get("event") == "done":
            done = d
if done is None:
    sys.exit("no done event in log")
acc = done.get("eval", {}).get(sys.argv[2]) if sys.argv[2] else None
print(done["steps_per_s"], "NA" if acc is None else acc)
EOF
  ); then
    put "${key}_sps" "$rep" "${vals% *}"; put "${key}_acc" "$rep" "${vals#* }"
    say "  graphrun ${graph#"$ROOT"/} threads=$threads: ${vals% *} steps/s${ev:+, $ev ${vals#* }}"
  else
    fail "${key}_sps" "$rep" "graphrun $graph --steps $steps --threads $threads" "$out"
  fi
}

# field NAME FILE: value of NAME=... in the last line of FILE that has it
field() { tr -s ' \t' '\n\n' <"$2" | grep "^$1=" | tail -n 1 | cut -d= -f2 || true; }

# pyrun KEY REP LABEL [VAR=value...] COMMAND ARGS... -> KEY_sps (and KEY_acc
# when the script prints test_acc); the VAR=value words go through env(1)
pyrun() {
  local key=$1 rep=$2 label=$3 out=$TMP/$1.$2.out sps acc; shift 3
  if timeout "$TIMEOUT" env "$@" >"$out" 2>&1 \
     && sps=$(field 'steps/s' "$out") && [ -n "$sps" ]; then
    put "${key}_sps" "$rep" "$sps"
    acc=$(field test_acc "$out"); [ -n "$acc" ] && put "${key}_acc" "$rep" "$acc"
    say "  $label: $sps steps/s${acc:+, test_acc $acc}"
  else
    fail "${key}_sps" "$rep" "$label" "$out"
  fi
}

# peer KEY REP THREADS SCRIPT ARGS...: Debian's PyTorch 1.13 on SCRIPT (a file in
# $SHARED/bench, or a path)
# Debian's torch calls the pthreads OpenBLAS, which starts one thread per core
# whatever torch.set_num_threads says: without OPENBLAS_NUM_THREADS, the
# "1 thread" peer would run its GEMMs on 2 cores, and the 2-thread peer would
# run 2 OpenMP + 2 OpenBLAS threads. So the peer gets THREADS of each. And
# libgomp's default active wait (its idle OpenMP threads spin) starves the
# OpenBLAS threads on a 2-core machine: the 2-thread MLP peer drops from ~650
# to ~150 steps/s. PEER_OMP_WAIT (default PASSIVE) gives the peer its best
# configuration; PEER_OMP_WAIT=ACTIVE shows the out-of-the-box behaviour.
peer() {
  local key=$1 rep=$2 threads=$3 script=$4; shift 4
  case $script in */*) ;; *) script=$SHARED/bench/$script;; esac
  pyrun "$key" "$rep" "pytorch 1.13 ${script##*/} $*" \
    OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" OMP_WAIT_POLICY="$PEER_OMP_WAIT" \
    "$PY" "$script" "$@"
}

# pt2 KEY REP THREADS SCRIPT ARGS...: PyPI's PyTorch 2.x (bench/peers.sh) on the
# same shared/bench/SCRIPT. Its wheel brings its own BLAS (MKL) and libgomp,
# which follow torch.set_num_threads; OMP_NUM_THREADS and MKL_NUM_THREADS are
# set to THREADS as well, so that nothing starts more threads than asked, and
# OMP_WAIT_POLICY to PEER_OMP_WAIT as for the Debian peer: with libgomp's
# default spinning, any other busy process on the 2 cores collapses its
# 2-thread runs (MLP 20 vs 64 steps/s, CNN 2.4 vs 6.0 under load 9).
pt2() {
  local key=$1 rep=$2 threads=$3 script=$4; shift 4
  [ "$HAVE_PT2" = 1 ] || return 0
  pyrun "$key" "$rep" "pytorch-pypi $script $*" \
    OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
    OMP_WAIT_POLICY="$PEER_OMP_WAIT" \
    "$VPY" "$SHARED/bench/$script" "$@"
}

# tfp KEY REP SCRIPT ARGS...: TensorFlow 2.x (bench/peers.sh) on bench/SCRIPT,
# the seed's pattern; the scripts set intra-/inter-op threads themselves.
tfp() {
  local key=$1 rep=$2 script=$3; shift 3
  [ "$HAVE_TF" = 1 ] || return 0
  pyrun "$key" "$rep" "tensorflow $script $*" TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1 \
    "$VPY" "$HERE/$script" "$@"
}

# floor KEY REP -> KEY_sps
floor() {
  local key=$1 rep=$2 out=$TMP/$1.$2.out sps
  if OPENBLAS_NUM_THREADS=1 timeout "$TIMEOUT" "$TMP/c_softmax_floor" "$SM_STEPS" >"$out" 2>&1 \
     && sps=$(field 'steps/s' "$out") && [ -n "$sps" ]; then
    put "${key}_sps" "$rep" "$sps"; say "  c floor: $sps steps/s"
  else
    fail "${key}_sps" "$rep" "c_softmax_floor $SM_STEPS" "$out"
  fi
}

# sgemm KEY REP THREADS -> KEY_gflops (context: what the BLAS can do here)
sgemm() {
  local out=$TMP/$1.$2.out g
  if OPENBLAS_NUM_THREADS=1 timeout "$TIMEOUT" "$TMP/blas_concurrency" "$3" >"$out" 2>&1 \
     && g=$(field 'GFLOP/s' "$out") && [ -n "$g" ]; then
    put "$1_gflops" "$2" "$g"
  else
    fail "$1_gflops" "$2" "blas_concurrency $3" "$out"
  fi
}

# cost KEY REP ARGS... -> KEY_ms, KEY_mb: the best wall time of 3 runs of
# `graphrun ARGS` and its peak memory (bench/measure.py)
cost() {
  local key=$1 rep=$2 out=$TMP/$1.$2.out v; shift 2
  if v=$(timeout "$TIMEOUT" "$PY" "$HERE/measure.py" 3 "$GRAPHRUN" "$@" 2>"$out"); then
    v=${v#ms=}; put "${key}_ms" "$rep" "${v% mb=*}"; put "${key}_mb" "$rep" "${v#* mb=}"
  else
    fail "${key}_ms" "$rep" "graphrun $*" "$out"
  fi
}

# The deep, narrow nets (1 layer: what any compile costs, the process and its
# libraries) and their IR node counts after the passes -> deepL_nodes.
say "generating the deep, narrow nets (bench/gen_deep.py: $DEEP_LAYERS layers)"
for L in 1 $DEEP_LAYERS $DEEP_STEP_LAYERS; do
  [ -f "$TMP/deep$L.graph" ] && continue
  "$PY" "$HERE/gen_deep.py" "$L" >"$TMP/deep$L.graph" || die "bench/gen_deep.py $L failed"
  n=$("$GRAPHRUN" check --emit ir "$TMP/deep$L.graph" | grep -c '^%') \
    || die "graphrun check $TMP/deep$L.graph failed"
  put "deep${L}_nodes" 1 "$n"
done
"$PY" "$HERE/gen_deep.py" "$DEEP_STEP_LAYERS" --width 1 --batch 1 >"$TMP/deep_w1.graph" \
  || die "bench/gen_deep.py --width 1 failed"

# deep REP: compile (`graphrun check`) and compile + prepare + 1 step at each
# size; then steps of the DEEP_STEP_LAYERS net, at width 16 and at width 1,
# graphrun and PyTorch
deep() {
  local L
  say " deep, narrow net: compile at $DEEP_LAYERS layers, steps at $DEEP_STEP_LAYERS"
  for L in 1 $DEEP_LAYERS; do
    cost "deepc$L" "$1" check "$TMP/deep$L.graph"
    cost "deepr$L" "$1" "$TMP/deep$L.graph" --steps 1 --threads 1 --quiet
  done
  gr deep_gr "$1" "$TMP/deep$DEEP_STEP_LAYERS.graph" "$DEEP_STEPS" 1 ""
  peer deep_pt "$1" 1 "$HERE/torch_deep.py" "$DEEP_STEP_LAYERS" "$DEEP_PEER_STEPS"
  gr deepw1_gr "$1" "$TMP/deep_w1.graph" "$DEEP_STEPS" 1 ""
  peer deepw1_pt "$1" 1 "$HERE/torch_deep.py" "$DEEP_STEP_LAYERS" "$DEEP_PEER_STEPS" 1 1
}

# ---------------------------------------------------------------- run
too_busy() { awk -v l="$(load1)" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }'; }
waited=0
while too_busy && [ "$waited" -lt "$WAIT_QUIET" ]; do
  say "load average $(load1) > $MAX_LOAD; waiting for a quieter machine ($waited/$WAIT_QUIET s)"
  sleep 15; waited=$((waited + 15))
done
LOAD_START=$(load1)
if awk -v l="$LOAD_START" -v m="$MAX_LOAD" 'BEGIN { exit !(l > m) }'; then
  say "WARNING: load average is $LOAD_START (> $MAX_LOAD); numbers will be noisy"
fi
T0=$(date +%s); BUSY0=$(cpu_busy); times >"$TMP/times0"
# The repetitions are interleaved (graphrun, PyTorch, floor, then again) so
# that a burst of background load does not hit one side only.
for rep in $(seq 1 "$REPS"); do
  say "repetition $rep/$REPS"
  sgemm sgemm1 "$rep" 1; sgemm sgemm2 "$rep" 2
  say " softmax regression, 1 thread, $SM_STEPS steps"
  gr sm_gr "$rep" fashion_softmax.graph "$SM_STEPS" 1 accuracy
  peer sm_pt "$rep" 1 torch_small.py "$SM_STEPS" "$SM_BATCH"
  pt2 sm_pt2 "$rep" 1 torch_small.py "$SM_STEPS" "$SM_BATCH"
  tfp sm_tf "$rep" tf_softmax.py "$SM_STEPS" "$SM_BATCH"
  floor sm_c "$rep"
  say " MLP, 2 threads, $MLP_STEPS steps"
  gr mlp2_gr "$rep" fashion_mlp.graph "$MLP_STEPS" 2 accuracy
  peer mlp2_pt "$rep" 2 torch_mlp.py "$MLP_STEPS" "$MLP_BATCH" 2
  pt2 mlp2_pt2 "$rep" 2 torch_mlp.py "$MLP_STEPS" "$MLP_BATCH" 2
  tfp mlp2_tf "$rep" tf_mlp.py "$MLP_STEPS" "$MLP_BATCH" 2
  say " MLP, 1 thread, $MLP_STEPS steps"
  gr mlp1_gr "$rep" fashion_mlp.graph "$MLP_STEPS" 1 accuracy
  peer mlp1_pt "$rep" 1 torch_mlp.py "$MLP_STEPS" "$MLP_BATCH" 1
  pt2 mlp1_pt2 "$rep" 1 torch_mlp.py "$MLP_STEPS" "$MLP_BATCH" 1
  tfp mlp1_tf "$rep" tf_mlp.py "$MLP_STEPS" "$MLP_BATCH" 1
  say " MLP Hogwild!, 2 workers x 1 thread, $MLP_STEPS steps in total"
  gr hog_gr "$rep" fashion_mlp.graph "$MLP_STEPS" 2 accuracy 2
  peer hog_pt "$rep" 1 torch_mlp.py "$MLP_STEPS" "$MLP_BATCH" 1 2
  pt2 hog_pt2 "$rep" 1 torch_mlp.py "$MLP_STEPS" "$MLP_BATCH" 1 2
  tfp hog_tf "$rep" tf_mlp.py "$MLP_STEPS" "$MLP_BATCH" 1 2
  say " CNN, 2 threads, $CNN_STEPS steps"
  gr cnn2_gr "$rep" fashion_cnn.graph "$CNN_STEPS" 2 accuracy
  peer cnn2_pt "$rep" 2 torch_cnn.py "$CNN_STEPS" "$CNN_BATCH" 2
  pt2 cnn2_pt2 "$rep" 2 torch_cnn.py "$CNN_STEPS" "$CNN_BATCH" 2
  tfp cnn2_tf "$rep" tf_cnn.py "$CNN_STEPS" "$CNN_BATCH" 2
  deep "$rep"
done
ELAPSED=$(( $(date +%s) - T0 ))
LOAD_END=$(load1); times >"$TMP/times1"
# CPU time the rest of the machine used while the benchmark ran (USER_HZ is 100 on Linux)
OTHER=$(awk -v b0="$BUSY0" -v b1="$(cpu_busy)" -v c0="$(child_secs "$TMP/times0")" -v c1="$(child_secs "$TMP/times1")" -v t="$ELAPSED" \
  'BEGIN { o = (b1 - b0) - (c1 - c0); if (o < 0) o = 0; printf "%.0f CPU-s (%.0f%% of one core)", o, t ? 100 * o / t : 0 }')

# ---------------------------------------------------------------- report
META=$TMP/meta.txt
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)"
  echo "cores=$(nproc) online ($(lscpu 2>/dev/null | sed -n 's/^Core(s) per socket:[[:space:]]*//p' | head -n 1) cores/socket, $(lscpu 2>/dev/null | sed -n 's/^Thread(s) per core:[[:space:]]*//p' | head -n 1) thread/core)"
  echo "torch=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) (python3-torch $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null || echo '?'), $("$PY" --version 2>&1))"
  echo "peer_env=OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=the thread count, OMP_WAIT_POLICY=$PEER_OMP_WAIT"
  echo "peers_venv=$PEERS_NOTE"
  if [ "$HAVE_PT2" = 1 ]; then
    echo "torch2=$("$VPY" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($("$VPY" --version 2>&1), PyPI wheel; OMP_NUM_THREADS=MKL_NUM_THREADS=the thread count, OMP_WAIT_POLICY=$PEER_OMP_WAIT)"
  fi
  if [ "$HAVE_TF" = 1 ]; then
    echo "tf=$(TF_CPP_MIN_LOG_LEVEL=3 "$VPY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null | tail -n 1) (tensorflow-cpu from PyPI, $("$VPY" --version 2>&1))"
  fi
  echo "openblas=$(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || dpkg-query -W -f='${Version}' libopenblas0 2>/dev/null || echo '?')"
  echo "blas_core=$BLAS_NOTE"
  echo "gcc=$(gcc -dumpfullversion 2>/dev/null || gcc -dumpversion)"
  rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')
  dirty=$(GIT_OPTIONAL_LOCKS=0 git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null | wc -l)
  echo "graphrun=$("$GRAPHRUN" --version 2>&1 | head -n 1) ($GRAPHRUN, commit $rev$([ "$dirty" -gt 0 ] && echo " + $dirty modified files"))"
  echo "load=$LOAD_START at start, $LOAD_END at end (1-minute average)"
  echo "other=$OTHER"
  echo "reps=$REPS"
  echo "elapsed=$ELAPSED"
  echo "sm_steps=$SM_STEPS"; echo "mlp_steps=$MLP_STEPS"; echo "cnn_steps=$CNN_STEPS"
  echo "deep_layers=$DEEP_LAYERS"; echo "deep_step_layers=$DEEP_STEP_LAYERS"; echo "deep_steps=$DEEP_STEPS"; echo "deep_peer_steps=$DEEP_PEER_STEPS"
} >"$META"

REPORT=$TMP/report.md
"$PY" "$HERE/report.py" "$META" "$RES" "$TMP/failures" >"$REPORT" \
  || die "writing the report failed (bench/report.py)"
cat "$REPORT"
if [ -n "$RESULTS" ]; then cp "$REPORT" "$RESULTS"; say "report written to $RESULTS"; fi
exit $FAILED
