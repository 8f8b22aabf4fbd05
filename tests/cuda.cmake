# tests/cuda.cmake - the CUDA device.  docs/gpu.md describes the whole.
#
# Always (normal CI, no GPU needed):
#   test_devices   every op's kernel on the simulated GPU against the CPU,
#                  faults from queue_sync, gradients on gpu:0 (sim:0): the
#                  harness that gpu_devices runs on CUDA
#   test_cuda      every op the examples and tests/models use has a CUDA
#                  kernel row (exits 77, skipped, in a build without CUDA)
#   cuda_host_*    the CUDA device's own code on the CPU stand-in, the
#                  same tests as label gpu (tests/cuda_host.cmake)
#
# Label `gpu` (a real GPU; `ctest -L gpu`, run by scripts/gpu-check.sh):
#   gpu_devices    test_devices on CUDA
#   gpu_<test>     the CPU suite again with GR_TEST_ON_GPU=1: each test
#                  compiles with cpu_as_gpu (tests/gr_test.h), which moves
#                  every cpu:N node and variable to gpu:N (as tests/sim.cmake
#                  does on the simulated GPU); the embedding examples get
#                  --cpu-as-gpu
# Without a usable GPU each exits 77 and CTest reports it skipped; with
# GR_REQUIRE_GPU=1 in the environment it fails instead.  `test_devices --gpu`
# is the probe the gpu_<test> wrappers run first.
set_tests_properties(test_cuda PROPERTIES SKIP_RETURN_CODE 77)

add_test(NAME gpu_devices COMMAND test_devices cuda)
set_tests_properties(gpu_devices PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)

# sh -c: $0 is the probe, "$@" the test; 77 from the probe is a skip.
set(GR_GPU_FIRST [=["$0" --gpu || exit $?; exec "$@"]=])
# The suite on a GPU: also what tests/cuda_host.cmake runs on the stand-in.
set(GR_GPU_SUITE test_gradcheck test_train test_optim test_state test_text test_partitions test_concurrency
  test_checkpoint test_staleness)
foreach(t ${GR_GPU_SUITE})
  add_test(NAME gpu_${t}
    COMMAND sh -c "${GR_GPU_FIRST}" $<TARGET_FILE:test_devices> $<TARGET_FILE:${t}>)
  set_tests_properties(gpu_${t} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
    ENVIRONMENT "GR_TEST_ON_GPU=1")
endforeach()
# The embedding examples (tests/embed.cmake builds them; this file is read
# before it, hence generator expressions and a pattern of our own).
set(GR_GPU_EXPECT [=[out=$("$@") || { echo "$out"; exit 1; }
echo "$out"; echo "$out" | grep -Eq "$0" || { echo "output does not match: $0"; exit 1; }]=])
if(EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  add_test(NAME gpu_embed_hogwild
    COMMAND sh -c "${GR_GPU_FIRST}" $<TARGET_FILE:test_devices>
            sh -c "${GR_GPU_EXPECT}" "^accuracy 0\\.[5-9]"
            $<TARGET_FILE:hogwild> ${PROJECT_SOURCE_DIR}/examples/fashion_mlp.graph 2 100 --cpu-as-gpu)
  add_test(NAME gpu_embed_towers_async
    COMMAND sh -c "${GR_GPU_FIRST}" $<TARGET_FILE:test_devices>
            sh -c "${GR_GPU_EXPECT}" "^training loss [0-9.]+ -> [0-9.]+$"
            $<TARGET_FILE:towers_async> ${PROJECT_SOURCE_DIR}/examples/two_towers.graph 100 --cpu-as-gpu)
  set_tests_properties(gpu_embed_hogwild gpu_embed_towers_async PROPERTIES
    LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# The towers split across gpu:0 and cpu:0 compile for such a machine on any
# host (--devices), so the model gpu-check.sh trains stays valid.
add_test(NAME cli_check_towers_gpu_cpu
  COMMAND graphrun check --devices cpu:0,sim:0 ${PROJECT_SOURCE_DIR}/bench/gpu/towers_gpu_cpu.graph)

# bench/gpu/gpu_matmul.c: graphrun's matmul kernel against cuBLAS alone, for
# scripts/gpu-check.sh.  Built wherever the CUDA device is.
if(GR_HAVE_CUDA)
  add_executable(gpu_matmul ${PROJECT_SOURCE_DIR}/bench/gpu/gpu_matmul.c)
  target_link_libraries(gpu_matmul PRIVATE graphrun_internal CUDA::cudart CUDA::cublas)
endif()
