/* fuzz_compile.c - libFuzzer target: any bytes through the whole compiler.
 *
 * Each input is compiled as gr_compile_string would (parse, sema with its
 * autodiff, the passes with the CPU kernels folding constants, the kernel
 * check; passes switched off and soft placement as the input's length
 * says), then the first and the last named target and all of them
 * together get a memory plan, and every dump is written to /dev/null.
 * Nothing is trained.  Three plans at most: a plan costs what the graph
 * has, and one per name made some inputs quadratic (461 names over a
 * 100 000-node chain took 500 s), which the compile limits cannot bound.
 *
 * Data sources read no files: a fuzzer must not open whatever path an
 * input names (/dev/zero, a FIFO).  fake_probe types idx, csv, raw and
 * text sources from their arguments alone; gaussian ones go through the real
 * probe, which reads nothing.  What the compiler may produce is then
 * checked: every live node's type is within the size limits, and each
 * plan's buffers lie inside its arena. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the readers' probes would say of a readable file, without one. */
static int fake_probe(void *ctx, const ir_data *d, sema_data_shape *out, char *err, size_t errlen)
{
    (void)ctx;
    data_spec s;
    data_info info;
    rt_data_spec(d, &s);
    if (d->kind == DATA_GAUSSIAN) {
        if (data_probe(&s, &info, err, errlen) < 0) return -1;
        *out = (sema_data_shape){.n = info.n, .x_rank = info.x_rank, .has_y = info.has_y};
        memcpy(out->x_dims, info.x_dims, sizeof out->x_dims);
        return 0;
    }
    if (!d->path[0] || (d->kind == DATA_RAW && d->x_rank == 0)) {
        snprintf(err, errlen, "fuzz: no file or no dims");
        return -1;
    }
    *out = (sema_data_shape){
        .n = 1 << 16, .has_y = d->kind == DATA_CSV ? d->label_col != -2 : d->path[1] != NULL};
    if (d->batch < 1 || d->batch > out->n) {
        snprintf(err, errlen, "fuzz: batch %lld", (long long)d->batch);
        return -1;
    }
    static const int64_t idx_dims[] = {28, 28}, csv_dims[] = {4};
    const int64_t *dims = d->kind == DATA_IDX   ? idx_dims
                          : d->kind == DATA_CSV ? csv_dims
                                                : d->x_dims;
    out->x_rank = d->kind == DATA_IDX ? 2 : d->kind == DATA_CSV ? 1 : d->x_rank;
    for (int i = 0; i < out->x_rank; i++) out->x_dims[i] = dims[i];
    if (d->kind == DATA_TEXT) /* sema types text by its block; the vocabulary is made up */
        out->vocab = 64, out->x_i32 = 1, out->y_per = d->block, out->has_y = 1;
    return 0;
}

static void check_types(const ir_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        char why[160];
        if (g->nodes[i].dead || !ir_type_problem(&g->nodes[i].type, why, sizeof why)) continue;
        fprintf(stderr, "node %d (%s) has an invalid type: %s\n", i, ops_name(g->nodes[i].op), why);
        abort();
    }
}

static void check_plan(const ir_graph *g, const int *roots, int n, FILE *sink)
{
    plan_graph *p = plan_build(g, roots, n);
    for (int i = 0; i < p->n; i++) {
        int id = p->order[i];
        if (p->offset[id] != PLAN_NONE &&
            p->offset[id] + ir_nbytes(&g->nodes[id].type) > p->arena_bytes) {
            fprintf(stderr, "node %d lies outside the arena\n", id);
            abort();
        }
    }
    plan_dump(p, sink);
    plan_free(p);
}

static void check_program(const gr_program *prog, FILE *sink)
{
    const ir_graph *g = prog->g;
    int *roots = malloc(sizeof(int) * (size_t)(g->n_names + 1));
    check_types(g);
    for (int i = 0; i < g->n_names; i++) roots[i] = g->names[i].node;
    if (g->n_names > 0) check_plan(g, &roots[0], 1, sink);
    if (g->n_names > 1) check_plan(g, &roots[g->n_names - 1], 1, sink);
    if (g->n_names > 2) check_plan(g, roots, g->n_names, sink);
    free(roots);
    ir_dump(g, sink);
    ir_dot(g, sink);
    ast_dump(prog->ast, sink);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    gr_program *p = calloc(1, sizeof *p);
    p->src = src_from_string("fuzz.graph", (const char *)data, size);
    diag_init(&p->diags);
    gr_status *st = gr_status_new();
    /* The options come from the input's length, so every input replays
     * alike and mutations try each combination: any pass switched off,
     * and soft placement (a node on a GPU, none here, moves to cpu:0). */
    gr_compile_options opt = {.passes_off = size & 7, .soft_placement = (size >> 3) & 1};
    if (rt_compile_probe(p, &opt, fake_probe, NULL, st) == GR_OK) check_program(p, sink);
    fputs(gr_status_message(st), sink);
    gr_status_free(st);
    gr_program_free(p);
    return 0;
}
