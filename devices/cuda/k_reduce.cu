// k_reduce.cu - CUDA kernels of the reduce family (rows for kernels.cu).
#include "cuda_impl.cuh"

extern "C" const cuda_row cuda_rows_reduce[] = {{OP_COUNT, NULL}};
