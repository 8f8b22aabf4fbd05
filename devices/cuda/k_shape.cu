// k_shape.cu - CUDA kernels of the shape family (rows for kernels.cu).
#include "cuda_impl.cuh"

extern "C" const cuda_row cuda_rows_shape[] = {{OP_COUNT, NULL}};
