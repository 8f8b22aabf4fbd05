# test_kernels again with the CPU's AVX-512 kernels off (GR_NO_AVX512,
# devices/cpu/cpu_direct.c): on a CPU that has AVX-512 the plain run checks
# the direct 3x3 convolutions, this one the Winograd and im2col kernels that
# every other CPU (and valgrind) runs for the same layers.
add_test(NAME test_kernels_no_avx512 COMMAND test_kernels)
set_tests_properties(test_kernels_no_avx512 PROPERTIES TIMEOUT 300 ENVIRONMENT GR_NO_AVX512=1)
