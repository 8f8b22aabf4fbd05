// k_gemm.cu - CUDA kernels of the gemm family (rows for kernels.cu).
#include "cuda_impl.cuh"

extern "C" const cuda_row cuda_rows_gemm[] = {{OP_COUNT, NULL}};
