/* test_cuda.c - the CUDA device on a machine without a GPU (normal CI):
 * its kernel table covers every op the shipped models use, and its vtable
 * is the one the runtime sees.
 *
 * Every examples/ *.graph and tests/models/ *.graph is compiled (on the CPU,
 * with every pass, so the fused ops appear too) and each live node's op
 * that is not a source must have a row in cuda_kernels[]; the failure names
 * each op that lacks one and the models that use it.  Data sources are
 * probed as the CLI does; a file that is missing (no Fashion-MNIST on this
 * machine) is typed as Fashion-MNIST would be, so the check does not depend
 * on the data being installed.
 *
 * A build without the CUDA device (GR_CUDA=OFF, or no nvcc) has nothing to
 * check: the program exits 77, which CTest reports as skipped
 * (tests/cuda.cmake). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/runtime.h"
#ifdef GR_HAVE_CUDA
#include "devices/cuda/cuda.h"

#define MAX_MODELS 32

/* The readers' probe, or, when the file is not there, what an IDX file of
 * 28x28 images would say: the shapes the examples are written for. */
static int probe_or_fashion(void *ctx, const ir_data *d, sema_data_shape *out, char *err,
                            size_t errlen)
{
    if (rt_probe_data(ctx, d, out, err, errlen) == 0) return 0;
    if (d->kind != DATA_IDX) return -1;
    *out = (sema_data_shape){.n = 60000, .x_rank = 1, .x_dims = {784}, .has_y = d->path[1] != NULL};
    return 0;
}

/* Compiles path for cpu:0-15 and marks the ops of its live nodes. */
static void ops_of(const char *path, int *used)
{
    char err[512];
    gr_program *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->src = src_load(path, err, sizeof err);
    if (!p->src) fail_msg("%s", err);
    diag_init(&p->diags);
    gr_status *st = gr_status_new();
    gr_compile_options o = {.devices = "cpu:0-15"};
    if (rt_compile_probe(p, &o, probe_or_fashion, NULL, st) != GR_OK)
        fail_msg("%s does not compile: %s", path, gr_status_message(st));
    for (int i = 0; i < p->g->n_nodes; i++)
        if (!p->g->nodes[i].dead) used[p->g->nodes[i].op] = 1;
    gr_status_free(st);
    gr_program_free(p);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The .graph files of dir, sorted, appended to paths. */
static int graphs_in(const char *dir, char paths[][512], int n)
{
    DIR *d = opendir(dir);
    if (!d) fail_msg("cannot open %s", dir);
    int first = n;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".graph") != 0) continue;
        assert_true(n < MAX_MODELS);
        snprintf(paths[n++], 512, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(paths[first], (size_t)(n - first), sizeof paths[0], by_name);
    return n;
}

static void test_every_op_the_models_use_has_a_cuda_row(void **state)
{
    (void)state;
    static char paths[MAX_MODELS][512];
    static int used[MAX_MODELS][OP_COUNT];
    int n = graphs_in(GR_SOURCE_DIR "/examples", paths, 0);
    n = graphs_in(GR_SOURCE_DIR "/tests/models", paths, n);
    assert_true(n >= 5);
    for (int m = 0; m < n; m++) ops_of(paths[m], used[m]);
    int missing = 0, needed = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        char who[1024] = "";
        size_t k = 0;
        for (int m = 0; m < n; m++)
            if (used[m][op] && k < sizeof who)
                k += (size_t)snprintf(who + k, sizeof who - k, " %s", strrchr(paths[m], '/') + 1);
        if (!k || ops_has(op, OPF_SOURCE)) continue;
        needed++;
        if (cuda_kernels[op]) continue;
        print_error("no CUDA kernel row for %s (used by%s)\n", ops_name(op), who);
        missing++;
    }
    printf("test_cuda: %d of the %d ops the models use have no CUDA row\n", missing, needed);
    assert_int_equal(missing, 0);
}

/* The runtime finds the table through the vtable; sources have no row. */
static void test_the_vtable_is_async_and_holds_the_table(void **state)
{
    (void)state;
    assert_string_equal(cuda_vtable.name, "cuda");
    assert_int_equal(cuda_vtable.async, 1);
    assert_ptr_equal(cuda_vtable.kernels, cuda_kernels);
    for (int op = 0; op < OP_COUNT; op++)
        if (ops_has(op, OPF_SOURCE)) assert_null(cuda_kernels[op]);
}

/* Without a GPU the count is 0 and no device object is made; with one, a
 * GPU past the last still makes none. */
static void test_no_device_object_past_the_last_gpu(void **state)
{
    (void)state;
    int n = cuda_device_count();
    assert_true(n >= 0);
    assert_null(cuda_device_new(IR_DEV(DEV_GPU, n)));
}

/* cuBLAS is not linked (a process that never makes a CUDA device does not
 * load it); the library opens and has every call the device makes. */
static void test_cublas_opens_with_every_call(void **state)
{
    (void)state;
    const char *why = cuda_blas_load();
    if (why) fail_msg("%s", why);
    assert_null(cuda_blas_load()); /* once, and the same answer after */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_the_models_use_has_a_cuda_row),
        cmocka_unit_test(test_the_vtable_is_async_and_holds_the_table),
        cmocka_unit_test(test_no_device_object_past_the_last_gpu),
        cmocka_unit_test(test_cublas_opens_with_every_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("test_cuda: this build has no CUDA device (GR_CUDA=OFF, or nvcc was not found): "
           "skipped\n");
    return 77;
}
#endif
