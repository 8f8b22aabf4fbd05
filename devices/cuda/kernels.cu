// kernels.cu - the CUDA kernel table, merged from each family's rows
// (k_*.cu) when the library loads.  An op in two families is a bug found
// here; an op in none has a NULL row, and compiling a program that places it
// on a GPU is an error (runtime/compile.c); tests/test_cuda.c checks that
// every op the examples use has a row.  allreduce has none: MPI runs on the
// host, so autodiff places it on cpu:0; nor has apply_sgd_allreduce, its
// fusion with an update, which the compiler makes only where a row is.
#include "cuda_impl.cuh"

static_assert(OP_COUNT == 76, "ops.h changed: give the new op its CUDA row (k_*.cu)");

kernel_fn cuda_kernels[OP_COUNT];

static void add_rows(const cuda_row *rows)
{
    for (; rows->fn; rows++) {
        GR_ASSERT((unsigned)rows->op < OP_COUNT && !cuda_kernels[rows->op]);
        cuda_kernels[rows->op] = rows->fn;
    }
}

namespace
{
struct table_fill {
    table_fill()
    {
        const cuda_row *families[] = {cuda_rows_elementwise, cuda_rows_reduce, cuda_rows_softmax,
                                      cuda_rows_norm,        cuda_rows_gemm,   cuda_rows_shape,
                                      cuda_rows_update};
        for (const cuda_row *f : families) add_rows(f);
    }
} fill_at_load;
} // namespace
