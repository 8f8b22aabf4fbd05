#!/bin/sh
# cuda-host-mutants.sh - plants one bug of each kind the CUDA stand-in is
# meant to catch (tests/cuda_host, docs/gpu.md) into a copy of the tree,
# rebuilds, and runs the cuda-host test that should catch it.  Exits 1 if
# any bug goes uncaught.  Several minutes on two cores; not part of CI.
#
#     scripts/cuda-host-mutants.sh [WORKDIR]      (default: build-mutants)
#
# Each mutant is a perl substitution on one file; a substitution that no
# longer matches the source is reported as stale (and fails the run), so
# the table cannot pass by planting nothing.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(realpath -m "${1:-$root/build-mutants}")
src=$work/src
bld=$work/build
rm -rf "$src"
mkdir -p "$src" "$bld"
(cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$src")
cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DGR_CUDA=OFF -DGR_FUZZ=OFF >/dev/null

# name | file | perl substitution | ctest regex of the tests that must fail
mutants='
grid_stride_off_by_one|devices/cuda/k_elementwise.cu|s/CUDA_FOR\(i, n\) out\[i\] = Op\(\)\(x\[i\]\);/for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i <= n; i += (int64_t)gridDim.x * blockDim.x) out[i] = Op()(x[i]);/|^cuda_host_devices$
reduction_missing_syncthreads|devices/cuda/k_reduce.cu|s/(if \(lane == 0\) part\[warp\] = a;\n)    __syncthreads\(\);\n/$1/|^cuda_host_devices$
gemm_wrong_lda|devices/cuda/k_gemm.cu|s/int lda = g->ta \? m : k,/int lda = g->ta ? m : k + 1,/|^cuda_host_devices$
missing_stream_event_wait|devices/cuda/device.cu|s/    CUDA_CHECK\(cudaStreamWaitEvent\(q->stream, e->ev, cudaEventWaitExternal\), NULL\);\n//|^cuda_host_(test_partitions|test_concurrency|embed_towers_async)$
step_graph_captures_host_pointer|runtime/exec/parts.c|s/ok &= e->xfers\[x\[i\]\].mode != XFER_DEV_HOST;/(void)x;/|^cuda_host_test_step_graphs$
step_graph_frozen_run_counter|devices/cuda/k_elementwise.cu|s/step_dev \? \*step_dev : step\)/step_dev ? step : step)/|^cuda_host_test_step_graphs$
'
targets="cuda_host_test_devices cuda_host_test_partitions cuda_host_test_concurrency \
cuda_host_towers_async cuda_host_test_step_graphs"
cmake --build "$bld" -j2 --target $targets >/dev/null

rm -f "$work/missed"
printf '%-36s %-16s %s\n' mutant result "tests that failed"
printf '%s\n' "$mutants" | while IFS='|' read -r name file subst tests; do
    [ -n "$name" ] || continue
    cp "$src/$file" "$work/orig"
    perl -0pi -e "$subst" "$src/$file" || true
    if cmp -s "$src/$file" "$work/orig"; then
        printf '%-36s %-16s %s\n' "$name" STALE "(the substitution matched nothing)"
        echo 1 >"$work/missed"
        continue
    fi
    if ! cmake --build "$bld" -j2 --target $targets >"$work/$name.build.log" 2>&1; then
        printf '%-36s %-16s %s\n' "$name" "NO BUILD" "see $work/$name.build.log"
        echo 1 >"$work/missed"
    else
        (cd "$bld" && ctest -R "$tests" --timeout 300 --output-on-failure >"$work/$name.log" 2>&1) && rc=0 || rc=$?
        failed=$(grep -Eo '[0-9]+ - [a-z_]+ \(' "$work/$name.log" | sed 's/.* - //; s/ (//' | tr '\n' ' ')
        if [ "$rc" -ne 0 ]; then
            printf '%-36s %-16s %s\n' "$name" caught "$failed"
        else
            printf '%-36s %-16s %s\n' "$name" MISSED "(every test of $tests passed)"
            echo 1 >"$work/missed"
        fi
    fi
    cp "$work/orig" "$src/$file"
done
cmake --build "$bld" -j2 --target $targets >/dev/null
[ ! -e "$work/missed" ] || { rm -f "$work/missed"; exit 1; }
