#!/usr/bin/env bash
# bench/peers.sh: the optional, stronger peers for bench/run.sh, in a
# git-ignored virtual environment (default bench/.venv): PyTorch 2.x and
# TensorFlow 2.x (tensorflow-cpu) from PyPI.
#
#   bench/peers.sh            # create or complete the venv, then check it
#   bench/peers.sh --check    # only check an existing venv and print the versions
#   rm -rf bench/.venv        # remove it; bench/run.sh then runs the Debian peer only
#
# Nothing in the build or the tests uses this venv; only bench/run.sh does,
# when it is present (and it always keeps the Debian python3-torch peer).
#
# About the size: PyPI has no CPU-only torch for Linux x86_64. Its wheel is the
# CUDA build and depends on the nvidia-* CUDA library wheels, so `pip install
# torch` from PyPI downloads about 3.5 GB and the venv takes about 7 GB. The
# CPU kernels are the same; without a GPU, torch simply runs on the CPU. (A
# `--no-deps` install of torch does not import: libtorch links libcufile,
# libcusparseLt, libnvshmem and more.) TORCH_SPEC="" skips torch.
#
# Environment:
#   VENV        where to create the venv (default: bench/.venv)
#   BASE_PY     interpreter the venv is made from (default /usr/bin/python3, Debian's)
#   TORCH_SPEC  pip requirement for PyTorch (default torch==2.15.0; "" skips it)
#   TF_SPEC     pip requirement for TensorFlow (default tensorflow-cpu==2.21.0; "" skips it)
#   PIP_TIMEOUT seconds allowed for the whole pip install (default 1800)
set -eu
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${VENV:-$HERE/.venv}
BASE_PY=${BASE_PY:-/usr/bin/python3}
TORCH_SPEC=${TORCH_SPEC-torch==2.15.0}
TF_SPEC=${TF_SPEC-tensorflow-cpu==2.21.0}
PIP_TIMEOUT=${PIP_TIMEOUT:-1800}
MARK=$VENV/graphrun-peers.txt   # written last: run.sh trusts a venv only when it is there

die() { echo "bench/peers.sh: error: $*" >&2; exit 2; }
say() { echo "peers: $*" >&2; }

CHECK_ONLY=0
case ${1:-} in
  '') ;;
  --check) CHECK_ONLY=1 ;;
  -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (try --help)" ;;
esac

# check: import each framework, print its version, write the marker
check() {
  local py=$VENV/bin/python out ok=1
  [ -x "$py" ] || die "no venv at $VENV; create it with bench/peers.sh"
  : >"$MARK.tmp"
  if [ -n "$TORCH_SPEC" ] || "$py" -c 'import torch' 2>/dev/null; then
    if out=$("$py" -c 'import torch; t = torch.ones(64, 784) @ torch.ones(784, 10); assert float(t[0, 0]) == 784.0; print(torch.__version__)' 2>&1); then
      say "torch $out: ok"; echo "torch=$out" >>"$MARK.tmp"
    else
      ok=0; echo "$out" | tail -n 5 >&2; say "torch does not import in $VENV"
    fi
  fi
  if [ -n "$TF_SPEC" ] || "$py" -c 'import tensorflow' 2>/dev/null; then
    if out=$(TF_CPP_MIN_LOG_LEVEL=2 "$py" -c 'import tensorflow as tf; assert float(tf.reduce_sum(tf.ones([64, 784]) @ tf.ones([784, 10]))) == 64 * 10 * 784.0; print(tf.__version__)' 2>&1); then
      out=$(echo "$out" | tail -n 1); say "tensorflow $out: ok"; echo "tensorflow=$out" >>"$MARK.tmp"
    else
      ok=0; echo "$out" | tail -n 5 >&2; say "tensorflow does not import in $VENV"
    fi
  fi
  [ "$ok" = 1 ] || { rm -f "$MARK.tmp" "$MARK"; die "the venv at $VENV is incomplete; run bench/peers.sh again (or rm -rf $VENV)"; }
  [ -s "$MARK.tmp" ] || { rm -f "$MARK.tmp"; die "nothing to check: TORCH_SPEC and TF_SPEC are both empty"; }
  mv "$MARK.tmp" "$MARK"
  say "peers ready in $VENV; bench/run.sh will use them"
}

if [ "$CHECK_ONLY" = 1 ]; then check; exit 0; fi

[ -n "$TORCH_SPEC$TF_SPEC" ] || die "TORCH_SPEC and TF_SPEC are both empty: nothing to install"
[ -x "$BASE_PY" ] || die "$BASE_PY not found; install Debian's python3 (apt-get install python3 python3-venv) or set BASE_PY"
avail_gb=$(df -Pk "$(dirname "$VENV")" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
need_gb=1; [ -n "$TORCH_SPEC" ] && need_gb=8
[ "$avail_gb" -ge "$need_gb" ] || die "only ${avail_gb} GB free under $(dirname "$VENV"); the venv needs about ${need_gb} GB"

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV from $BASE_PY"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV" 2>"$HERE/.peers-venv.log" || {
    cat "$HERE/.peers-venv.log" >&2; rm -f "$HERE/.peers-venv.log"; rm -rf "$VENV"
    die "'$BASE_PY -m venv' failed; on Debian: apt-get install python3-venv"; }
  rm -f "$HERE/.peers-venv.log"
fi
rm -f "$MARK"

specs=()
[ -n "$TF_SPEC" ] && specs+=("$TF_SPEC")
[ -n "$TORCH_SPEC" ] && specs+=("$TORCH_SPEC")
say "pip install ${specs[*]} (from PyPI)${TORCH_SPEC:+; torch brings ~3 GB of CUDA libraries, see the header of this script}"
LOG=$VENV/pip-install.log
if ! timeout "$PIP_TIMEOUT" "$VENV/bin/python" -m pip install --disable-pip-version-check \
       --progress-bar off "${specs[@]}" >"$LOG" 2>&1; then
  tail -n 15 "$LOG" >&2
  if grep -q -i -E 'connection|timed out|temporary failure|name resolution|network is unreachable|proxy|SSL' "$LOG"; then
    die "pip could not reach the package index (network?); full log: $LOG"
  elif grep -q -i 'no matching distribution\|could not find a version' "$LOG"; then
    die "pip found no matching wheel for ${specs[*]} for $("$VENV/bin/python" --version 2>&1); set TORCH_SPEC/TF_SPEC; full log: $LOG"
  elif grep -q -i 'no space left' "$LOG"; then
    die "the disk filled up; free space and run bench/peers.sh again; full log: $LOG"
  fi
  die "pip install failed (log above; full log: $LOG)"
fi
check
