// kernels.cu - the CUDA kernel table, merged from each family's rows
// (k_*.cu) when the library loads.  An op in two families, or one of
// CUDA_NO_ROW (cuda.h) given a row, is a bug found here; an op in none has a
// NULL row, and compiling a program that places it on a GPU is an error
// (compiler/place.c, place_kernels).  tests/test_cuda_rows.c reads the
// families' rows and checks that every op but the sources and CUDA_NO_ROW has
// one, in the CPU suite; tests/test_cuda.c checks that every op the examples
// use has a row.
#include "cuda_impl.cuh"

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
#define NO_ROW(id) GR_ASSERT(!cuda_kernels[OP_##id]);
        CUDA_NO_ROW(NO_ROW)
#undef NO_ROW
    }
} fill_at_load;
} // namespace
