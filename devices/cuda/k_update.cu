// k_update.cu - CUDA kernels of the update family (rows for kernels.cu).
#include "cuda_impl.cuh"

extern "C" const cuda_row cuda_rows_update[] = {{OP_COUNT, NULL}};
