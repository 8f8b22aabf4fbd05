// k_elementwise.cu - CUDA kernels of the elementwise family (rows for kernels.cu).
#include "cuda_impl.cuh"

extern "C" const cuda_row cuda_rows_elementwise[] = {{OP_COUNT, NULL}};
