#!/usr/bin/env bash
# scripts/gpu-dry-run.sh - proves scripts/gpu-check.sh and its pack before a
# GPU is lent: the check runs in a root that has only what the GPU machine
# has (a base Debian 12 with PACK_HAVE of gpu-check.sh: compilers, make,
# CMake, Python) and the pack, with no network.  It must get through
# unpack, tools, configure and build and exit 77 at the gpu stage.
#
#   sudo scripts/gpu-dry-run.sh
#
# Needs root (debootstrap, chroot, mounts) and, the first time, the network:
# it makes the root once with `debootstrap --variant=minbase bookworm` and
# caches it in $GPU_DRY_ROOT (default /var/cache/graphrun-dryroot, outside
# the repository; delete it to make it again).  Each run then prepares a
# fresh pack into gpu-pack/ (the one to carry), copies the working tree
# (tracked and untracked files that git does not ignore) and the pack into
# the root, and runs the check there, the network cut off with unshare -n.
#
# What it proves: the pack holds every package the configure and build
# need, the unpack/PATH/pkg-config/CMake plumbing works on a machine
# without them, and the stages up to gpu run.  What it cannot: the CUDA
# build (there is no nvcc in the root, so it configures with
# GPU_CHECK_CUDA=auto, that is without CUDA; on the GPU machine the check
# keeps GR_CUDA=ON) and anything after the gpu stage on a GPU.
#
# Not part of the CTest suite (slow, needs root).  docs/gpu.md describes it.
#
# Environment: GPU_DRY_ROOT; GPU_DRY_MIRROR (default
# http://deb.debian.org/debian); JOBS (default 2); OUT (default
# ./gpu-out/dry, where the check's log and summary are copied);
# GPU_CHECK_BUDGET (default 3600) and GPU_CHECK_LIMIT_SCALE (default 6): a
# slow machine builds for much longer than the GPU machine's 16 cores.
#
# Exit status: 0 the dry run passed (the check exited 77); otherwise the
# check's exit status, or 2 when the root could not be made.
set -u
set -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DRY=${GPU_DRY_ROOT:-/var/cache/graphrun-dryroot}
MIRROR=${GPU_DRY_MIRROR:-http://deb.debian.org/debian}
OUT=${OUT:-$ROOT/gpu-out/dry}
HAVE=$(sed -n 's/^PACK_HAVE="\(.*\)"$/\1/p' "$ROOT/scripts/gpu-check.sh")
SYSPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "gpu-dry-run: $*"; }
die() {
    say "$*" >&2
    exit 2
}

# The root: a minbase Debian 12 and what the GPU machine has, made once.
make_root() {
    local tmp=$DRY.tmp
    command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap || die "cannot install debootstrap"
    rm -rf "$tmp"
    say "making $DRY (debootstrap minbase bookworm, then: $HAVE)"
    debootstrap --variant=minbase bookworm "$tmp" "$MIRROR" >"$tmp.log" 2>&1 || die "debootstrap failed: $tmp.log"
    cp /etc/resolv.conf "$tmp/etc/resolv.conf"
    mount -t proc proc "$tmp/proc" || die "cannot mount proc"
    # shellcheck disable=SC2086
    chroot "$tmp" /usr/bin/env -i PATH=$SYSPATH HOME=/root DEBIAN_FRONTEND=noninteractive \
        sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $HAVE && apt-get clean" \
        >>"$tmp.log" 2>&1
    local rc=$?
    umount "$tmp/proc"
    [ $rc = 0 ] || die "installing $HAVE in the root failed: $tmp.log"
    echo "$HAVE" >"$tmp/.graphrun-dryroot"
    mv -T "$tmp" "$DRY" || die "cannot move $tmp to $DRY"
    rm -f "$tmp.log"
}

# The root as the GPU machine would be before a check: no earlier
# prefix, data link, tree or output.
clean_root() {
    rm -rf "${DRY:?}/src" "${DRY:?}/tmp/"* "$DRY/usr/share/datasets"
}

# The working tree as the device tool carries it, and the pack.
copy_tree() {
    mkdir -p "$DRY/src" || return 1
    (cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -x -C "$DRY/src" ||
        return 1
    cp -a "$ROOT/gpu-pack" "$DRY/src/gpu-pack"
}

unmount_all() {
    mountpoint -q "$DRY/dev" && umount "$DRY/dev"
    mountpoint -q "$DRY/proc" && umount "$DRY/proc"
}

run_check() {
    mount -t proc proc "$DRY/proc" && mount --bind /dev "$DRY/dev" || return 2
    trap unmount_all EXIT
    # shellcheck disable=SC2016
    unshare -n chroot "$DRY" /usr/bin/env -i PATH=$SYSPATH HOME=/root LANG=C.UTF-8 TMPDIR=/tmp \
        GPU_CHECK_CUDA=auto GPU_CHECK_BUDGET="${GPU_CHECK_BUDGET:-3600}" \
        GPU_CHECK_LIMIT_SCALE="${GPU_CHECK_LIMIT_SCALE:-6}" JOBS="${JOBS:-2}" OUT=/src/gpu-out \
        nice bash /src/scripts/gpu-check.sh
}

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)"
[ -n "$HAVE" ] || die "no PACK_HAVE in scripts/gpu-check.sh"
if [ -e "$DRY/.graphrun-dryroot" ]; then
    [ "$(cat "$DRY/.graphrun-dryroot")" = "$HAVE" ] || die "$DRY was made with other packages than '$HAVE': delete it"
elif [ -e "$DRY" ]; then
    die "$DRY exists and is not a root this script made: delete it or set GPU_DRY_ROOT"
else
    make_root
fi
t0=$(date +%s)
say "tree: $(git -C "$ROOT" log -1 --format='%h %s' | cut -c1-70)$(git -C "$ROOT" diff --quiet HEAD || echo ' + uncommitted changes')"
say "preparing the pack"
bash "$ROOT/scripts/gpu-check.sh" --prepare | tail -2 || die "--prepare failed"
clean_root
copy_tree || die "cannot copy the tree into $DRY/src"
say "running scripts/gpu-check.sh in $DRY (no network, GPU_CHECK_CUDA=auto)"
run_check
rc=$?
mkdir -p "$OUT" && cp -a "$DRY/src/gpu-out/." "$OUT/" 2>/dev/null
say "check exit $rc after $(($(date +%s) - t0))s; log and summary in $OUT"
if [ $rc = 77 ]; then
    say "PASS: built from the pack alone and stopped at the gpu stage (77)"
    exit 0
fi
say "FAIL: expected exit 77 (see $OUT/gpu-check.log)"
exit $rc
