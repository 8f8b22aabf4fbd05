# tests/cuda_host.cmake - the CUDA device's own code, run on the CPU
# (label cuda-host; docs/gpu.md).  devices/cuda/*.cu compile unchanged as
# C++ against the stand-in in tests/cuda_host/ (its cuda_runtime.h and
# cublas_v2.h), which runs their kernels block by block on stream threads,
# and their GEMMs through a libcublas.so.13 of its own (built here, where
# blas_dl.cu looks first).  graphrun_cuhost is graphrun_internal with that
# device; the tests below are the CPU suite's, linked against it, with
# gpu:0 (and gpu:1) backed by it.  No nvcc and no GPU needed.
if(NOT GR_HAVE_CUDA_HOST)
  return()
endif()
set(GR_CH ${CMAKE_CURRENT_SOURCE_DIR}/cuda_host)
set(GR_CH_LIBDIR ${CMAKE_CURRENT_BINARY_DIR}/cuda_host)
set(GR_CH_CXX_OPTIONS -Wall -Wextra -Wno-unknown-pragmas)
if(GR_WERROR)
  list(APPEND GR_CH_CXX_OPTIONS -Werror)
endif()

add_library(cuda_host_cublas SHARED ${GR_CH}/cublas.cc)
target_include_directories(cuda_host_cublas PRIVATE ${GR_CH}/include ${GR_CH})
target_link_libraries(cuda_host_cublas PRIVATE PkgConfig::OPENBLAS)
target_compile_options(cuda_host_cublas PRIVATE ${GR_CH_CXX_OPTIONS})
set_target_properties(cuda_host_cublas PROPERTIES OUTPUT_NAME cublas SOVERSION 13
  LIBRARY_OUTPUT_DIRECTORY ${GR_CH_LIBDIR} CXX_STANDARD 17)

file(GLOB GR_CH_DEVICE CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/devices/cuda/*.cu)
set_source_files_properties(${GR_CH_DEVICE} PROPERTIES LANGUAGE CXX COMPILE_OPTIONS "-xc++")
# runtime/modules.c with the device linked in (GR_LINK_CUDA): the core
# calls the stand-in's module entry instead of opening libgraphrun-cuda.so
# (runtime/dist/dist.c: not in graphrun_obj, built with it).
add_library(graphrun_cuda_host OBJECT ${GR_CH_DEVICE} ${GR_CH}/runtime.cc ${GR_CH}/exec.cc
  ${GR_CH}/fiber.cc ${PROJECT_SOURCE_DIR}/runtime/modules.c
  ${PROJECT_SOURCE_DIR}/runtime/dist/dist.c)
target_include_directories(graphrun_cuda_host BEFORE PRIVATE ${GR_CH}/include ${GR_CH})
target_link_libraries(graphrun_cuda_host PRIVATE graphrun_obj)
target_compile_definitions(graphrun_cuda_host PRIVATE GR_HAVE_CUDA=1
  GR_CUDA_LIBDIR="${GR_CH_LIBDIR}" GR_LINK_CUDA=1 GR_CUDA_MODULE=1
  $<$<BOOL:${GR_HAVE_MPI}>:GR_MPI_MODULE=1>)
target_compile_options(graphrun_cuda_host PRIVATE
  "$<$<COMPILE_LANGUAGE:CXX>:${GR_CH_CXX_OPTIONS}>")
set_target_properties(graphrun_cuda_host PROPERTIES CXX_STANDARD 17)

add_library(graphrun_cuhost STATIC $<TARGET_OBJECTS:graphrun_obj>
  $<TARGET_OBJECTS:graphrun_cuda_host>)
target_link_libraries(graphrun_cuhost PUBLIC graphrun_obj stdc++ ${CMAKE_DL_LIBS})
target_compile_definitions(graphrun_cuhost PUBLIC GR_HAVE_CUDA=1)
add_dependencies(graphrun_cuhost cuda_host_cublas) # opened at run time

# The stand-in's own rules, on kernels written for the purpose.
add_executable(cuda_host_stand_in ${GR_CH}/test_stand_in.cc)
target_link_libraries(cuda_host_stand_in PRIVATE graphrun_cuhost)
target_include_directories(cuda_host_stand_in PRIVATE ${GR_CH}/include)
target_compile_options(cuda_host_stand_in PRIVATE ${GR_CH_CXX_OPTIONS})
set_target_properties(cuda_host_stand_in PROPERTIES CXX_STANDARD 17)
add_test(NAME cuda_host_stand_in COMMAND cuda_host_stand_in)

# The suite on the stand-in: test_devices compares every op's CUDA kernel
# with the CPU's; the others (the suite ctest -L gpu runs on a real GPU,
# and the step-graph test, which counts graph launches) run as on the
# simulated GPU (tests/sim.cmake), every node and variable of cpu:N on gpu:N.
set(GR_CH_TESTS test_devices ${GR_GPU_SUITE} test_step_graphs test_cuda test_placement)
foreach(t ${GR_CH_TESTS})
  add_executable(cuda_host_${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
  target_link_libraries(cuda_host_${t} PRIVATE graphrun_cuhost PkgConfig::CMOCKA)
  target_compile_definitions(cuda_host_${t} PRIVATE GR_TEST_CUDA_HOST=1
    GR_SOURCE_DIR="${PROJECT_SOURCE_DIR}" GR_TEST_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
  target_include_directories(cuda_host_${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
endforeach()
add_test(NAME cuda_host_devices COMMAND cuda_host_test_devices cuda)
add_test(NAME cuda_host_test_step_graphs COMMAND cuda_host_test_step_graphs)
foreach(t ${GR_GPU_SUITE}) # GR_GPU_SUITE: tests/cuda.cmake, the same on a real GPU
  add_test(NAME cuda_host_${t} COMMAND cuda_host_${t})
  set_tests_properties(cuda_host_${t} PROPERTIES ENVIRONMENT "GR_TEST_ON_GPU=1")
endforeach()
add_test(NAME cuda_host_test_cuda COMMAND cuda_host_test_cuda)
add_test(NAME cuda_host_test_placement COMMAND cuda_host_test_placement)
# The same where cudaGetDeviceCount finds no GPU: gpu:0 is an error, not an
# abort (test_gpu0_without_a_gpu_is_an_error runs only then).
add_test(NAME cuda_host_no_gpu COMMAND cuda_host_test_placement)
set_tests_properties(cuda_host_no_gpu PROPERTIES ENVIRONMENT "CUDA_HOST_DEVICES=0")
# The embedding examples, through the public API only: Hogwild! threads,
# and towers on gpu:0 and gpu:1 (GR_GPU_EXPECT: tests/cuda.cmake).
foreach(ex hogwild towers_async)
  add_executable(cuda_host_${ex} ${PROJECT_SOURCE_DIR}/examples/embed/${ex}.c)
  target_link_libraries(cuda_host_${ex} PRIVATE graphrun_cuhost Threads::Threads m)
  target_compile_definitions(cuda_host_${ex} PRIVATE
    GR_EXAMPLES_DIR="${PROJECT_SOURCE_DIR}/examples")
endforeach()
if(EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz)
  add_test(NAME cuda_host_embed_hogwild
    COMMAND sh -c "${GR_GPU_EXPECT}" "^accuracy 0\\.[5-9]" $<TARGET_FILE:cuda_host_hogwild>
            ${PROJECT_SOURCE_DIR}/examples/fashion_mlp.graph 2 100 --cpu-as-gpu)
endif()
add_test(NAME cuda_host_embed_towers_async
  COMMAND sh -c "${GR_GPU_EXPECT}" "^training loss [0-9.]+ -> [0-9.]+$"
          $<TARGET_FILE:cuda_host_towers_async> ${PROJECT_SOURCE_DIR}/examples/two_towers.graph 100
          --cpu-as-gpu)

get_property(GR_CH_ALL DIRECTORY PROPERTY TESTS)
list(FILTER GR_CH_ALL INCLUDE REGEX "^cuda_host_")
# Under TSan (each kernel thread instrumented, every fiber switch told) the
# whole set takes over six minutes on two cores: there only the tests of
# threads and streams meeting run (Hogwild!, locking, towers, step graphs);
# the plain and ASan builds run them all.
if(CMAKE_BUILD_TYPE STREQUAL "Tsan")
  set(GR_CH_TSAN cuda_host_stand_in cuda_host_test_concurrency cuda_host_test_partitions
    cuda_host_test_step_graphs cuda_host_embed_hogwild cuda_host_no_gpu)
  foreach(t ${GR_CH_ALL})
    if(NOT t IN_LIST GR_CH_TSAN)
      set_tests_properties(${t} PROPERTIES DISABLED TRUE)
    endif()
  endforeach()
endif()
set_tests_properties(${GR_CH_ALL} PROPERTIES LABELS cuda-host TIMEOUT 300)
