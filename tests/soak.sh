#!/usr/bin/env bash
# tests/soak.sh [SECONDS] [BUILD_DIR] - the long version of tests/test_soak.c.
#
# Runs the soak scenario (two training targets on cpu:0 and cpu:1 sharing
# their variables, SOAK_THREADS Hogwild! threads per target, a checkpointer
# saving distinct files and overwriting one path, an evaluator) for SECONDS
# (default 600), then checks every checkpoint and the final accuracy.  It
# prints a line a minute and a summary; the exit status is the test's (a
# watchdog aborts, with each thread's state, when a thread stays inside one
# call for SOAK_STALL_SECONDS, default 120).
#
#   tests/soak.sh                       # 10 minutes, build/tests/test_soak
#   tests/soak.sh 3600 build-tsan       # an hour under ThreadSanitizer
#   SOAK_THREADS=8 SOAK_DATA=fashion tests/soak.sh 600
#
# The other SOAK_* knobs are listed at the top of tests/test_soak.c.  The
# output also goes to $SOAK_LOG (default BUILD_DIR/soak.log).
set -euo pipefail

secs=${1:-600}
build=${2:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
bin=$build/tests/test_soak
log=${SOAK_LOG:-$build/soak.log}

case $secs in
'' | *[!0-9]* | 0)
    echo "usage: tests/soak.sh [SECONDS>0] [BUILD_DIR]" >&2
    exit 2
    ;;
esac
if [ ! -x "$bin" ]; then
    cmake -S "$src" -B "$build" >/dev/null
    cmake --build "$build" --target test_soak -j2 >/dev/null
fi
# the Tsan build needs the suppressions of the intended Hogwild! races
if grep -q '^CMAKE_BUILD_TYPE:STRING=Tsan' "$build/CMakeCache.txt" 2>/dev/null; then
    export TSAN_OPTIONS="suppressions=$src/devices/cpu/tsan.supp halt_on_error=1 history_size=7"
fi

echo "soak: $secs s, ${SOAK_THREADS:-3} threads per target, data ${SOAK_DATA:-gaussian}," \
    "binary $bin, log $log"
start=$(date +%s)
status=0
# timeout is a backstop only: the test's watchdog reports a stall first
SOAK_SECONDS=$secs timeout --signal=ABRT $((secs + 1800)) "$bin" 2>&1 | tee "$log" ||
    status=$?
echo "soak: exit status $status after $(($(date +%s) - start)) s"
exit "$status"
