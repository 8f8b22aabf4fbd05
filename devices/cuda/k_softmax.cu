// k_softmax.cu - CUDA kernels of the softmax family (rows for kernels.cu).
#include "cuda_impl.cuh"

extern "C" const cuda_row cuda_rows_softmax[] = {{OP_COUNT, NULL}};
