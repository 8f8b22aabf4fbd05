#!/bin/sh
# Installs, from Debian's packages, whatever graphrun needs to build, test and
# run its examples.  Does nothing when everything is already there; runs
# `apt-get update` only when something is missing.  Not root: prints the
# command to run instead.
set -eu

PKGS="build-essential cmake make pkg-config flex bison libcmocka-dev \
libopenblas-dev zlib1g-dev libcjson-dev dataset-fashion-mnist \
clang libclang-rt-14-dev valgrind python3 python3-numpy \
python3-dev python3-setuptools python3-wheel python3-pytest python3-venv python3-pip \
libopenmpi-dev openmpi-bin libprotobuf-c-dev protobuf-c-compiler graphviz librsvg2-bin \
fortunes"

missing=""
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$st" in
    *"ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    exit 0
fi

echo "bootstrap: missing packages:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: not root; run this, then try again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
