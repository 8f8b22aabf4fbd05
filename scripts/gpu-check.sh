#!/usr/bin/env bash
# scripts/gpu-check.sh - the whole GPU verification of graphrun in one
# command, for a lent GPU machine that has nvcc, CMake and PyTorch but no
# internet and none of our Debian packages (docs/gpu.md).
#
#   scripts/gpu-check.sh --prepare   here, where apt works: downloads the
#                                    .debs the build and the data need
#                                    (derived from CMakeLists.txt, resolved
#                                    by apt) into gpu-pack/ (git-ignored;
#                                    carry it)
#   scripts/gpu-check.sh             there: unpacks gpu-pack/ with dpkg -x
#                                    into a prefix, builds with CUDA and runs
#                                    the stages below
#
# Stages, each limited in time; a failure is recorded and the next stage
# runs; the summary lists them all:
#   unpack      the .debs into $GPU_CHECK_PREFIX; PATH, pkg-config and CMake
#               pointed at it (only if gpu-pack/ exists)
#   tools       flex, bison, pkg-config, protoc-c and the libraries are found
#   configure   CMake, Release, GR_CUDA=ON (GPU_CHECK_CUDA), GR_MPI=OFF
#   build       everything, tests included
#   gpu         is a CUDA GPU usable?  (test_devices --gpu; nvidia-smi -L)
#   sim         test_devices on the simulated GPU (the harness) and
#               test_cuda (every op the models use has a CUDA row)
#   cuda-host   ctest -L cuda-host: the CUDA device's code on the CPU
#               stand-in (tests/cuda_host), the tests ctest-gpu runs next
#   ctest-gpu   ctest -L gpu with GR_REQUIRE_GPU=1: every op's CUDA kernel
#               against the CPU, faults, gradients on gpu:0, and the CPU
#               suite again with GR_TEST_ON_GPU=1 (without a GPU: ctest -L
#               gpu must skip every test cleanly)
#   sanitizer   compute-sanitizer (memcheck) on test_devices cuda
#   train-mlp   examples/fashion_mlp.graph on gpu:0 (--cpu-as-gpu) and
#   train-cnn   on the CPU, same seed and steps: test accuracies within 2 and
#               3 points of each other
#   hogwild     the MLP with two executors sharing gpu:0 (Hogwild!)
#   towers      bench/gpu/towers_gpu_cpu.graph: towers on gpu:0 and cpu:0,
#               synchronous and asynchronous
#   bench       steps/s of softmax regression, the MLP and the CNN on gpu:0
#               against PyTorch CUDA (bench/gpu/torch_cuda.py), and the
#               matmul kernel against cuBLAS alone (bench/gpu/gpu_matmul.c)
#
# Output: progress and the summary on stdout; the full log
# ($OUT/gpu-check.log), the summary ($OUT/summary.md) and the benchmark
# table ($OUT/bench.md) under $OUT (default ./gpu-out).
#
# Exit status: 0 every stage passed on a GPU; 1 a stage failed or timed
# out; 2 nothing could be built (no pack and missing tools, configure or
# build failed); 77 no usable GPU: the stages that need none passed and the
# GPU stages were skipped.
#
# Time: the run ends within GPU_CHECK_BUDGET + 10 s (default 450 s, so
# under 8 minutes): a stage that would start with under 15 s left is
# skipped, and each stage's limit is cut to what is left less 5 s (its
# kill takes up to 10 s more).  A stage that fails or times out prints its
# last 25 lines at once; the summary names every stage.
#
# scripts/gpu-dry-run.sh runs this in a base Debian root with only the
# pack, as on the GPU machine but without nvcc and GPU (it must exit 77).
#
# Environment: OUT; GPU_CHECK_BUDGET (seconds for the whole run);
# GPU_CHECK_CUDA (on, the default: GR_CUDA=ON; auto or off for a dry run
# without nvcc); GPU_CHECK_LIMIT_SCALE (default 1: each stage's limit
# times this, for a slow machine);
# GPU_CHECK_PACK (default gpu-pack), GPU_CHECK_PREFIX (default
# /tmp/graphrun-gpu-prefix), GPU_CHECK_BUILD (default build-gpu), JOBS
# (default: all cores); GPU_CHECK_SKIP="stage ..." skips stages by name.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PACK=${GPU_CHECK_PACK:-$ROOT/gpu-pack}
PREFIX=${GPU_CHECK_PREFIX:-/tmp/graphrun-gpu-prefix}
BUILD=${GPU_CHECK_BUILD:-$ROOT/build-gpu}
BUDGET=${GPU_CHECK_BUDGET:-450}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
CUDA=${GPU_CHECK_CUDA:-on}
SCALE=${GPU_CHECK_LIMIT_SCALE:-1}
SKIP=" ${GPU_CHECK_SKIP:-} "
ARCH=x86_64-linux-gnu

# The pack is derived, not listed: every find_package, pkg_check_modules
# and find_program of CMakeLists.txt has a row here naming the Debian
# package that provides it ("-": the GPU machine has it, or the check does
# not build it); --prepare fails on one without a row.  apt then resolves
# those packages and the data with all they depend on, less what a base
# Debian (priority required) with PACK_HAVE has: what the GPU machine has.
PACK_MAP="Threads:- ZLIB:zlib1g-dev FLEX:flex BISON:bison PkgConfig:pkgconf \
openblas:libopenblas-pthread-dev libcjson:libcjson-dev cmocka:libcmocka-dev \
libprotobuf-c:libprotobuf-c-dev protoc-c:protobuf-c-compiler MPI:- CUDAToolkit:-"
# The data: Fashion-MNIST, and the fortunes char_gpt.graph reads (test_cuda
# compiles every example; 0.9 MiB).
PACK_DATA="dataset-fashion-mnist fortunes fortunes-min"
PACK_HAVE="build-essential cmake make python3"
PACK_MAX_MB=50

# ---------------------------------------------------------------- prepare

# What CMakeLists.txt looks for, one name a line: packages, pkg-config
# modules (version constraints and keywords dropped) and programs.
cmake_wants() {
    local f=$ROOT/CMakeLists.txt
    grep -oE 'find_package\([A-Za-z0-9_]+' "$f" | cut -d'(' -f2
    grep -oE 'pkg_check_modules\([^)]*\)' "$f" | tr '()' '  ' |
        awk '{ for (i = 3; i <= NF; i++) if ($i !~ /^[A-Z_]+$/) print $i }' | sed 's/[<>=].*//'
    grep -oE 'find_program\([A-Za-z0-9_]+ +[^ )]+' "$f" | awk '{ print $2 }'
}

# The Debian packages for what CMakeLists.txt looks for, and the data.
pack_roots() {
    local w row bad=0
    for w in $(cmake_wants | sort -u); do
        row=$(printf '%s\n' $PACK_MAP | grep -m1 "^$w:") || {
            echo "gpu-check: CMakeLists.txt looks for '$w', which PACK_MAP lacks: add its Debian package" >&2
            bad=1
            continue
        }
        [ "${row#*:}" = - ] || echo "${row#*:}"
    done
    echo $PACK_DATA
    return $bad
}

# The packages apt would install for "$@" on a machine with nothing
# installed (an empty dpkg status), one a line.
apt_closure() {
    apt-get -s -o Dir::State::status="$STATUS0" install --no-install-recommends "$@" | awk '/^Inst / { print $2 }' | sort -u
}

# The packages that those named depend on at exactly their version (a -dev
# package's library: its libz.so points at zlib1g's libz.so.1.2.13, which
# the machine may have at another version).
exact_deps() {
    apt-cache show --no-all-versions "$@" | sed -n 's/^\(Pre-\)\{0,1\}Depends: //p' | tr ',' '\n' |
        sed -n 's/^ *\([a-z0-9.+-]*\) (= .*/\1/p'
}

# The pack: apt's closure of the roots less that of a base Debian with
# PACK_HAVE, so every run-time dependency is in and nothing rots, and the
# exact-version dependencies of what is in it.
pack_list() {
    local roots
    roots=$(pack_roots) || return 1
    STATUS0=$(mktemp) && : >"$STATUS0"
    # shellcheck disable=SC2086,SC2046
    apt_closure $PACK_HAVE '?priority(required)' >"$STATUS0.have" &&
        apt_closure $PACK_HAVE '?priority(required)' $roots >"$STATUS0.want" &&
        comm -13 "$STATUS0.have" "$STATUS0.want" >"$STATUS0.pack" &&
        { cat "$STATUS0.pack" && exact_deps $(cat "$STATUS0.pack"); } | sort -u
    local rc=$?
    rm -f "$STATUS0" "$STATUS0.have" "$STATUS0.want" "$STATUS0.pack"
    return $rc
}

prepare() {
    command -v apt-get >/dev/null || { echo "gpu-check: --prepare needs apt-get (Debian)" >&2; exit 2; }
    local debs
    pack_roots >/dev/null || exit 2
    debs=$(pack_list) || { apt-get update -qq && debs=$(pack_list); } || exit 2
    mkdir -p "$PACK" && cd "$PACK" || exit 2
    rm -f ./*.deb MANIFEST
    # shellcheck disable=SC2086
    if ! apt-get download $debs; then
        echo "gpu-check: apt-get download failed; running apt-get update once" >&2
        apt-get update -qq && apt-get download $debs || exit 2
    fi
    # Plain names (the Debian ones hold '%3a', '~' and '+'): dpkg -x
    # needs none of them.
    for f in ./*_*.deb; do
        p=$(dpkg-deb --show --showformat='${Package}' "$f")
        dpkg-deb --show --showformat='${Package} ${Version} ${Architecture}\n' "$f" >>MANIFEST
        mv "$f" "$p.deb"
    done
    local kb
    kb=$(du -sk . | cut -f1)
    if [ "$kb" -gt $((PACK_MAX_MB * 1024)) ]; then
        echo "gpu-check: the pack is $((kb / 1024)) MiB, over $PACK_MAX_MB: leaving Fashion-MNIST out" >&2
        rm -f dataset-fashion-mnist.deb
        grep -v '^dataset-fashion-mnist ' MANIFEST >MANIFEST.new && mv MANIFEST.new MANIFEST
        kb=$(du -sk . | cut -f1)
    fi
    cat MANIFEST
    echo "gpu-check: $(ls ./*.deb | wc -l) packages, $((kb / 1024)) MiB in $PACK"
    echo "gpu-check: carry it: run(carry=[\"$(basename "$PACK")\"], command=\"bash scripts/gpu-check.sh\")"
}

if [ "${1:-}" = "--prepare" ]; then
    prepare
    exit 0
fi
if [ $# -gt 0 ]; then
    echo "usage: scripts/gpu-check.sh [--prepare]   (see the top of the script)" >&2
    exit 2
fi

# ---------------------------------------------------------------- the run

OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT" || exit 2
LOG=$OUT/gpu-check.log
SUMMARY=$OUT/summary.md
BENCH=$OUT/bench.md
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
: >"$LOG"
: >"$WORK/results"
START=$(date +%s)
DEADLINE=$((START + BUDGET))
HAVE_GPU=0
SETUP_FAILED=0
case $CUDA in on | auto | off) ;; *) echo "gpu-check: GPU_CHECK_CUDA is on, auto or off" >&2; exit 2 ;; esac
export ROOT BUILD PREFIX WORK LOG JOBS ARCH CUDA

say() { echo "gpu-check: $*" | tee -a "$LOG"; }

# Records a stage's result: NAME STATUS SECONDS NOTE.
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$WORK/results"; }

# stage NAME LIMIT FUNCTION: runs FUNCTION in a shell of its own, limited to
# LIMIT seconds (less if the budget has less), its output in the log.  The
# function's exit status: 0 pass, 77 skip, anything else fail; it may write
# a one-line note into $WORK/note.  Returns 0 when the stage passed.
stage() {
    local name=$1 limit=$2 fn=$3 left t0 rc status note
    case $SKIP in *" $name "*) record "$name" SKIP 0 "GPU_CHECK_SKIP"; return 1 ;; esac
    left=$((DEADLINE - $(date +%s)))
    if [ "$left" -lt 15 ]; then
        record "$name" SKIP 0 "out of time (budget ${BUDGET}s)"
        say "$name: skipped, out of time"
        return 1
    fi
    limit=$((limit * SCALE))
    [ "$limit" -gt $((left - 5)) ] && limit=$((left - 5))
    : >"$WORK/note"
    : >"$WORK/stage.out"
    say "$name: running (limit ${limit}s)"
    echo "==================== $name ====================" >>"$LOG"
    t0=$(date +%s)
    timeout -k 10 "$limit" bash -c "set -o pipefail; $fn" >"$WORK/stage.out" 2>&1
    rc=$?
    cat "$WORK/stage.out" >>"$LOG"
    note=$(head -c 300 "$WORK/note" | tr '\n\t' '  ')
    case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124 | 137) status=TIMEOUT note="killed after ${limit}s. $note" ;;
    *) status=FAIL note="exit $rc. $note" ;;
    esac
    record "$name" "$status" "$(($(date +%s) - t0))" "$note"
    say "$name: $status in $(($(date +%s) - t0))s${note:+: $note}"
    if [ "$status" = FAIL ] || [ "$status" = TIMEOUT ]; then
        echo "---- last lines of $name ----"
        tail -n 25 "$WORK/stage.out"
        echo "----"
    fi
    [ "$status" = PASS ]
}

# ---- stage functions (run by stage(), in a shell of their own) ----

note() { echo "$*" >>"$WORK/note"; }

# The value of "key":NUMBER on the `done` line of a graphrun --log file.
done_field() { grep '"event":"done"' "$1" 2>/dev/null | grep -o "\"$2\":[-0-9.eE+]*" | head -1 | cut -d: -f2; }

# dpkg -x, or ar + tar where dpkg is missing.
unpack_deb() {
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$1" "$PREFIX"
    else
        local m
        m=$(ar t "$1" | grep '^data.tar')
        case $m in
        *.xz) ar p "$1" "$m" | tar -xJ -C "$PREFIX" ;;
        *.zst) ar p "$1" "$m" | zstd -dc | tar -x -C "$PREFIX" ;;
        *) ar p "$1" "$m" | tar -xz -C "$PREFIX" ;;
        esac
    fi
}

st_unpack() {
    # Only a folder this script made is emptied.
    if [ -e "$PREFIX" ] && [ ! -e "$PREFIX/.graphrun-gpu-prefix" ]; then
        echo "$PREFIX exists and is not a prefix this script made: set GPU_CHECK_PREFIX"
        return 1
    fi
    rm -rf "${PREFIX:?}" && mkdir -p "$PREFIX" && touch "$PREFIX/.graphrun-gpu-prefix" || return 1
    local f n=0
    for f in "$PACK"/*.deb; do
        unpack_deb "$f" || { echo "cannot unpack $f"; return 1; }
        n=$((n + 1))
    done
    # /lib/... of a .deb is /usr/lib/... on a merged-/usr system, and its
    # absolute symlinks point into /: both made to point into the prefix.
    if [ -d "$PREFIX/lib" ]; then cp -a "$PREFIX/lib/." "$PREFIX/usr/lib/" && rm -rf "${PREFIX:?}/lib"; fi
    find "$PREFIX" -type l -lname '/*' | while read -r l; do
        t=$(readlink "$l")
        case $t in /lib/* | /lib64/*) t=/usr$t ;; esac
        ln -sfn "$PREFIX$t" "$l"
    done
    # The shared libraries this machine lacks, in one folder for
    # LD_LIBRARY_PATH (ours alone would shadow newer system ones).
    mkdir -p "$PREFIX/ldlib"
    for f in "$PREFIX"/usr/lib/$ARCH/*.so.[0-9]* "$PREFIX"/usr/lib/$ARCH/openblas-pthread/libopenblas.so.0; do
        [ -e "$f" ] || continue
        n_=$(basename "$f")
        case $n_ in *.so.[0-9]) ;; *.so.[0-9][0-9]) ;; *) continue ;; esac
        ldconfig -p 2>/dev/null | grep -q "^[[:space:]]$n_ " || ln -sfn "$f" "$PREFIX/ldlib/$n_"
    done
    echo "unpacked $n packages into $PREFIX; libraries this machine lacks: $(ls "$PREFIX/ldlib" | tr '\n' ' ')"
    note "$n packages; lacking here: $(ls "$PREFIX/ldlib" | tr '\n' ' ')"
    local d
    for d in datasets/fashion-mnist games/fortunes; do
        if [ -d "$PREFIX/usr/share/$d" ] && [ ! -e "/usr/share/$d" ]; then
            mkdir -p "$(dirname "/usr/share/$d")" && ln -s "$PREFIX/usr/share/$d" "/usr/share/$d" \
                && note "/usr/share/$d linked"
        fi
    done
    return 0
}

st_tools() {
    local ok=0 t
    for t in flex bison m4 pkg-config protoc-c cmake nvcc gcc g++ python3 timeout; do
        if command -v "$t" >/dev/null; then
            echo "$t: $(command -v "$t"): $("$t" --version 2>&1 | head -1)"
        else
            echo "$t: MISSING"
            case $t:$CUDA in python3:* | nvcc:auto | nvcc:off) ;; *) ok=1 ;; esac
        fi
    done
    if command -v protoc-c >/dev/null && ! protoc-c --version >/dev/null 2>&1; then
        echo "protoc-c does not run: $(protoc-c --version 2>&1 | head -1)"
        ok=1
    fi
    for m in openblas libcjson cmocka libprotobuf-c zlib; do
        if pkg-config --exists "$m"; then
            echo "pkg-config $m: $(pkg-config --modversion "$m") $(pkg-config --cflags --libs "$m")"
        else
            echo "pkg-config $m: MISSING"
            [ "$m" = zlib ] || ok=1
        fi
    done
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1 | tail -1
    ls /usr/share/datasets/fashion-mnist/*.gz 2>/dev/null | head -4
    [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || note "no Fashion-MNIST: training stages will fail"
    [ $ok = 0 ] || note "missing tools (see the log): run scripts/gpu-check.sh --prepare where apt works, carry gpu-pack"
    return $ok
}

st_configure() {
    local gen=()
    # Ninja (the GPU machine has it, maybe not make).  The fuzzers are off:
    # not needed there, and under Ninja their targets clash with their
    # outputs (tests/fuzz.cmake).
    # MPI is off: the check is about the GPU, and an MPI the machine may
    # have would make its build differ from the dry run's.
    command -v ninja >/dev/null && gen=(-G Ninja)
    rm -f "$BUILD/CMakeCache.txt" # a fresh configure; objects of an earlier run are kept
    cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGR_CUDA="${CUDA^^}" -DGR_MPI=OFF \
        -DGR_FUZZ=OFF -DCMAKE_CUDA_ARCHITECTURES=90 ${CMAKE_EXTRA:-} || return 1
    note "GR_CUDA=${CUDA^^}: $(grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=/' "$BUILD/CMakeCache.txt" && echo "CUDA built" || echo "no CUDA")"
}

st_build() {
    cmake --build "$BUILD" -j "$JOBS" || return 1
    note "built with $JOBS jobs"
}

st_gpu() {
    nvidia-smi -L 2>&1 | head -4
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -3
    "$BUILD/tests/test_devices" --gpu
    local rc=$?
    [ $rc = 0 ] && note "$(nvidia-smi -L 2>/dev/null | head -1)"
    [ $rc = 77 ] && note "no usable CUDA GPU here"
    return $rc
}

st_sim() {
    ctest --test-dir "$BUILD" -R '^(test_devices|test_cuda)$' --output-on-failure --timeout 120
    local rc=$?
    grep -h 'no CUDA kernel row\|ops the models use have no CUDA row' "$BUILD/Testing/Temporary/LastTest.log" 2>/dev/null | sort -u | head -40
    local miss
    miss=$(grep -h 'ops the models use have no CUDA row' "$BUILD/Testing/Temporary/LastTest.log" 2>/dev/null | head -1 | sed 's/^test_cuda: //')
    [ -n "$miss" ] && note "$miss"
    return $rc
}

# The CUDA device's code on the CPU stand-in (tests/cuda_host.cmake): the
# same tests ctest-gpu then runs on the GPU, so a failure only there is the
# GPU's.
st_cuda_host() {
    ctest --test-dir "$BUILD" -L cuda-host -j 8 --output-on-failure --timeout 120
    local rc=$?
    note "$(grep -h 'tests passed' "$WORK/stage.out" | tail -1)"
    return $rc
}

st_ctest_gpu() {
    if [ "$HAVE_GPU" = 1 ]; then
        GR_REQUIRE_GPU=1 ctest --test-dir "$BUILD" -L gpu -j 4 --output-on-failure --timeout 240
        local rc=$?
        note "$(grep -h 'tests passed' "$WORK/stage.out" | tail -1)"
        return $rc
    fi
    # No GPU: every gpu test must skip (exit 77), none fail.
    ctest --test-dir "$BUILD" -L gpu -j 4 --timeout 60 || return 1
    local n
    n=$(grep -c 'Not Run (Skipped)\|\*\*\*Skipped' "$WORK/stage.out")
    note "no GPU: $n gpu tests skipped cleanly"
    return 77
}

st_sanitizer() {
    command -v compute-sanitizer >/dev/null || { note "no compute-sanitizer on PATH"; return 77; }
    GR_TEST_SKIP='*gradients*' compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 30 \
        "$BUILD/tests/test_devices" cuda
    local rc=$?
    note "$(grep -h 'ERROR SUMMARY' "$WORK/stage.out" | tail -1)"
    return $rc
}

# train NAME GRAPH STEPS [env...]: one graphrun training with the test
# accuracy, its log in $WORK/NAME.jsonl.
train() {
    local name=$1 graph=$2 steps=$3
    shift 3
    "$BUILD/graphrun" "$ROOT/$graph" --steps "$steps" --seed 1 --eval accuracy --quiet \
        --log "$WORK/$name.jsonl" "$@"
}

# compare NAME MAX_POINTS MIN_ACC: the gpu and cpu runs of NAME agree.
compare_acc() {
    local name=$1 max=$2 min=$3 g c gs cs
    g=$(done_field "$WORK/${name}_gpu.jsonl" accuracy)
    c=$(done_field "$WORK/${name}_cpu.jsonl" accuracy)
    gs=$(done_field "$WORK/${name}_gpu.jsonl" steps_per_s)
    cs=$(done_field "$WORK/${name}_cpu.jsonl" steps_per_s)
    note "accuracy gpu:0 ${g:-?} (${gs:-?} steps/s), cpu ${c:-?} (${cs:-?} steps/s)"
    [ -n "$g" ] && [ -n "$c" ] || return 1
    awk -v g="$g" -v c="$c" -v m="$max" -v lo="$min" \
        'BEGIN { d = g - c; if (d < 0) d = -d; exit !(d * 100 <= m && g >= lo && c >= lo) }'
}

st_train_mlp() {
    train mlp_gpu examples/fashion_mlp.graph 2000 --cpu-as-gpu || return 1
    train mlp_cpu examples/fashion_mlp.graph 2000 || return 1
    compare_acc mlp 2 0.75
}

st_train_cnn() {
    train cnn_gpu examples/fashion_cnn.graph 300 --cpu-as-gpu || return 1
    train cnn_cpu examples/fashion_cnn.graph 300 || return 1
    compare_acc cnn 3 0.65
}

st_hogwild() {
    "$BUILD/graphrun" "$ROOT/examples/fashion_mlp.graph" --steps 2000 --executors 2 --cpu-as-gpu \
        --seed 1 --eval accuracy --quiet --log "$WORK/hogwild.jsonl" || return 1
    local a s
    a=$(done_field "$WORK/hogwild.jsonl" accuracy)
    s=$(done_field "$WORK/hogwild.jsonl" steps_per_s)
    note "2 executors on gpu:0: accuracy ${a:-?}, ${s:-?} steps/s"
    awk -v a="${a:-0}" 'BEGIN { exit !(a >= 0.75) }'
}

st_towers() {
    local g=$ROOT/bench/gpu/towers_gpu_cpu.graph l1 l2
    "$BUILD/graphrun" "$g" --steps 500 --target train --seed 1 --quiet --log "$WORK/towers.jsonl" || return 1
    "$BUILD/graphrun" "$g" --steps 500 --target train_0 --target train_1 --seed 1 --quiet \
        --log "$WORK/towers_async.jsonl" || return 1
    l1=$(done_field "$WORK/towers.jsonl" loss)
    l2=$(done_field "$WORK/towers_async.jsonl" loss)
    note "gpu:0 + cpu:0 towers: final loss sync ${l1:-?}, async ${l2:-?} (from 2.30)"
    awk -v a="${l1:-9}" -v b="${l2:-9}" 'BEGIN { exit !(a < 1.0 && b < 1.0) }'
}

# One row of the table: WORKLOAD GRAPHRUN_GPU_LOG TORCH_LINE CPU_LOG.
bench_row() {
    local what=$1 glog=$2 tline=$3 clog=$4 g t c ga ta r
    g=$(done_field "$glog" steps_per_s)
    ga=$(done_field "$glog" accuracy)
    c=$(done_field "$clog" steps_per_s)
    t=$(echo "$tline" | grep -o 'steps_per_s=[0-9.]*' | cut -d= -f2)
    ta=$(echo "$tline" | grep -o 'test_acc=[0-9.]*' | cut -d= -f2)
    r=$(awk -v g="${g:-0}" -v t="${t:-0}" 'BEGIN { if (g > 0 && t > 0) printf "%.2f", g / t; else print "-" }')
    [ -n "$t" ] || echo "torch failed: $tline" >>"$WORK/note"
    echo "| $what | ${g:-n/a} | ${t:-FAIL} | $r | ${c:--} | ${ga:--} / ${ta:--} |"
}

# graph_row WHAT LOG_GRAPHS LOG_CALLS: µs per step both ways.
graph_row() {
    local g c
    g=$(done_field "$2" steps_per_s)
    c=$(done_field "$3" steps_per_s)
    awk -v w="$1" -v g="${g:-0}" -v c="${c:-0}" 'BEGIN {
        if (g > 0 && c > 0) printf "| %s | %.1f | %.1f | %.1f%% |\n", w, 1e6 / g, 1e6 / c, 100 * (1 - c / g);
        else printf "| %s | %s | %s | - |\n", w, g, c }'
}

st_bench() {
    local py=python3 ts tm tc
    cd "$ROOT" || return 1
    train sm_gpu examples/fashion_softmax.graph 5000 --cpu-as-gpu
    train sm_cpu examples/fashion_softmax.graph 5000
    "$BUILD/graphrun" "$ROOT/examples/fashion_softmax.graph" --steps 5000 --seed 1 --cpu-as-gpu \
        --quiet --no-step-graphs --log "$WORK/sm_gpu_calls.jsonl"
    "$BUILD/graphrun" "$ROOT/examples/fashion_mlp.graph" --steps 2000 --seed 1 --cpu-as-gpu \
        --quiet --no-step-graphs --log "$WORK/mlp_gpu_calls.jsonl"
    ts=$(timeout 90 $py bench/gpu/torch_cuda.py softmax 5000 2>&1 | tail -1)
    tm=$(timeout 90 $py bench/gpu/torch_cuda.py mlp 2000 2>&1 | tail -1)
    tc=$(timeout 90 $py bench/gpu/torch_cuda.py cnn 300 2>&1 | tail -1)
    echo "torch: $ts"
    echo "torch: $tm"
    echo "torch: $tc"
    {
        echo "### graphrun on gpu:0 against PyTorch CUDA ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
        echo
        echo "Training steps per second (graphrun: \`done\` line of --log, compile and data loading excluded; PyTorch: its timed loop, TF32 off, data on the GPU)."
        echo
        echo "| workload | graphrun gpu:0 steps/s | PyTorch CUDA steps/s | graphrun / PyTorch | graphrun cpu steps/s | test accuracy graphrun / PyTorch |"
        echo "|---|---|---|---|---|---|"
        bench_row "softmax regression 784-10, batch 32, 5000 steps" "$WORK/sm_gpu.jsonl" "$ts" "$WORK/sm_cpu.jsonl"
        bench_row "MLP 784-512-256-10, batch 64, 2000 steps" "$WORK/mlp_gpu.jsonl" "$tm" "$WORK/mlp_cpu.jsonl"
        bench_row "LeNet CNN, batch 64, 300 steps" "$WORK/cnn_gpu.jsonl" "$tc" "$WORK/cnn_cpu.jsonl"
        echo "| MLP Hogwild!, 2 executors on gpu:0, 2000 steps | $(done_field "$WORK/hogwild.jsonl" steps_per_s) | - | - | - | $(done_field "$WORK/hogwild.jsonl" accuracy) / - |"
        echo
        echo "### step graphs (CUDA graphs) against the same steps launched call by call (--no-step-graphs)"
        echo
        echo "| workload | µs/step, step graphs | µs/step, call by call | saved |"
        echo "|---|---|---|---|"
        graph_row "softmax regression, batch 32" "$WORK/sm_gpu.jsonl" "$WORK/sm_gpu_calls.jsonl"
        graph_row "MLP, batch 64" "$WORK/mlp_gpu.jsonl" "$WORK/mlp_gpu_calls.jsonl"
        echo
        echo "### matmul: graphrun's CUDA kernel (through the device vtable) against cuBLAS alone"
        echo
        timeout 60 "$BUILD/gpu_matmul" 2>&1 || echo "(gpu_matmul failed: exit $?)"
    } >"$WORK/bench.md"
    cat "$WORK/bench.md"
    cp "$WORK/bench.md" "$BENCH_OUT"
    [ -s "$WORK/note" ] && return 1
    grep -q '^| 64 x 512 x 784' "$WORK/bench.md" || { note "gpu_matmul gave no table"; return 1; }
    return 0
}

export -f note done_field unpack_deb train compare_acc bench_row graph_row
export -f st_unpack st_tools st_configure st_build st_gpu st_sim st_cuda_host st_ctest_gpu st_sanitizer
export -f st_train_mlp st_train_cnn st_hogwild st_towers st_bench
export PACK BENCH_OUT=$BENCH

# ---- the stages ----

say "graphrun GPU check: $(cd "$ROOT" && git log -1 --format='%h %s' 2>/dev/null | cut -c1-80 || echo '(not a git checkout)')"
say "host $(uname -n), $(nproc) cores, budget ${BUDGET}s, log $LOG"

if [ -d "$PACK" ] && ls "$PACK"/*.deb >/dev/null 2>&1; then
    if stage unpack 90 st_unpack; then
        P=$PREFIX/usr
        export PATH="$P/bin:$PATH"
        export LD_LIBRARY_PATH="$PREFIX/ldlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export PKG_CONFIG_LIBDIR="$P/lib/$ARCH/pkgconfig:$P/lib/$ARCH/openblas-pthread/pkgconfig:$P/share/pkgconfig"
        export PKG_CONFIG_SYSROOT_DIR=$PREFIX
        export M4=$P/bin/m4 BISON_PKGDATADIR=$P/share/bison
        export CMAKE_PREFIX_PATH=$P${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
        export CMAKE_EXTRA="-DPKG_CONFIG_EXECUTABLE=$P/bin/pkgconf -DFLEX_EXECUTABLE=$P/bin/flex -DBISON_EXECUTABLE=$P/bin/bison -DZLIB_ROOT=$P"
    fi
else
    say "no pack in $PACK: using this machine's packages"
fi

stage tools 30 st_tools || SETUP_FAILED=1
[ $SETUP_FAILED = 0 ] && { stage configure 120 st_configure || SETUP_FAILED=1; }
[ $SETUP_FAILED = 0 ] && { stage build 360 st_build || SETUP_FAILED=1; }

if [ $SETUP_FAILED = 0 ]; then
    stage gpu 30 st_gpu && HAVE_GPU=1
    export HAVE_GPU
    stage sim 120 st_sim
    stage cuda-host 90 st_cuda_host
    stage ctest-gpu 240 st_ctest_gpu
    if [ $HAVE_GPU = 1 ]; then
        stage sanitizer 150 st_sanitizer
        stage train-mlp 120 st_train_mlp
        stage train-cnn 150 st_train_cnn
        stage hogwild 90 st_hogwild
        stage towers 90 st_towers
        stage bench 180 st_bench
    else
        for s in sanitizer train-mlp train-cnn hogwild towers bench; do record "$s" SKIP 0 "no GPU"; done
    fi
fi

# ---- summary ----

ELAPSED=$(($(date +%s) - START))
failed=$(awk -F'\t' '$2 == "FAIL" || $2 == "TIMEOUT"' "$WORK/results" | wc -l)
if [ $SETUP_FAILED = 1 ]; then
    verdict="could not build (exit 2)" code=2
elif [ "$failed" -gt 0 ]; then
    verdict="$failed stage(s) failed (exit 1)" code=1
elif [ $HAVE_GPU = 0 ]; then
    verdict="no GPU: built, the GPU stages skipped (exit 77)" code=77
else
    verdict="every stage passed on the GPU (exit 0)" code=0
fi
{
    echo "## graphrun GPU check: $verdict"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), ${ELAPSED}s of a ${BUDGET}s budget"
    echo
    echo "| stage | result | seconds | note |"
    echo "|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$WORK/results"
    if [ -s "$BENCH" ] && [ $HAVE_GPU = 1 ]; then
        echo
        cat "$BENCH"
    fi
} >"$SUMMARY"
echo
cat "$SUMMARY"
exit $code
