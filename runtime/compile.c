/* compile.c - the compile driver: parse -> sema -> passes -> kernel check
 * for one gr_program, with what the compiler needs from the machine: its
 * GPUs, the data readers' probe (sema types a data source by its headers)
 * and the CPU kernels (constant folding runs them at compile time).  The
 * plan of each target is made later, by the session that runs it. */
#include <stdlib.h>

#include "runtime.h"

#ifdef GR_HAVE_CUDA
#include "../devices/cuda/cuda.h"
static int available_gpus(void)
{
    return cuda_device_count();
}
#else
static int available_gpus(void)
{
    return 0;
}
#endif

void rt_data_spec(const ir_data *d, data_spec *s)
{
    static const data_kind kinds[] = {[DATA_IDX] = DATA_KIND_IDX,
                                      [DATA_CSV] = DATA_KIND_CSV,
                                      [DATA_RAW] = DATA_KIND_RAW,
                                      [DATA_GAUSSIAN] = DATA_KIND_GAUSSIAN};
    *s = (data_spec){.kind = kinds[d->kind],
                     .path = {d->path[0], d->path[1]},
                     .batch = d->batch,
                     .shuffle = d->shuffle,
                     .seed = d->seed,
                     .label_col = d->label_col,
                     .n_classes = d->n_classes,
                     .n = d->gen_n,
                     .x_rank = d->x_rank};
    for (int i = 0; i < d->x_rank; i++) s->x_dims[i] = d->x_dims[i];
}

/* sema's data probe: the readers' own, on the spec the session will open. */
static int compile_probe_data(void *ctx, const ir_data *d, sema_data_shape *out, char *err,
                              size_t errlen)
{
    (void)ctx;
    data_spec s;
    data_info info;
    rt_data_spec(d, &s);
    if (data_probe(&s, &info, err, errlen) < 0) return -1;
    *out = (sema_data_shape){.n = info.n, .x_rank = info.x_rank, .has_y = info.has_y};
    for (int i = 0; i < info.x_rank; i++) out->x_dims[i] = info.x_dims[i];
    return 0;
}

static int compile_can_eval(void *ctx, op_kind op)
{
    (void)ctx;
    return cpu_kernels[op] != NULL;
}

/* Folding runs one node serially, without scratch (passes.c folds no op
 * that needs scratch). */
static int compile_eval(void *ctx, const ir_graph *g, int node, void *out, void *const *in,
                        char *err, size_t errlen)
{
    (void)ctx;
    const ir_node *n = &g->nodes[node];
    const ir_type *in_t[PASS_EVAL_MAX_IN];
    kern_fault fault = {{0}};
    GR_ASSERT(n->n_in <= PASS_EVAL_MAX_IN);
    for (int j = 0; j < n->n_in; j++) in_t[j] = &g->nodes[n->in[j]].type;
    kern_args a = {.g = g,
                   .node = n,
                   .out = out,
                   .out_t = &n->type,
                   .n_in = n->n_in,
                   .in = in,
                   .in_t = in_t,
                   .max_tasks = 1,
                   .fault = &fault};
    if (cpu_kernels[n->op](&a) == 0) return 0;
    snprintf(err, errlen, "%s", fault.msg);
    return -1;
}

static const pass_evaluator compile_folder = {.can_eval = compile_can_eval, .eval = compile_eval};

/* The kernel table of a device kind; NULL when this build has none. */
static const kernel_fn *device_kernels(int dev)
{
    return IR_DEV_KIND(dev) == DEV_CPU ? cpu_kernels : NULL;
}

int rt_check_kernels(ir_graph *g, const kernel_fn *(*kernels_of)(int dev))
{
    int missing = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead || ops_has(n->op, OPF_SOURCE)) continue;
        const kernel_fn *k = kernels_of(n->device);
        if (k && k[n->op]) continue;
        char dev[32];
        diag_error(g->diags, n->src, n->span, "'%s' has no kernel on %s", ops_name(n->op),
                   ir_dev_str(n->device, dev, sizeof dev));
        missing++;
    }
    return missing ? -1 : 0;
}

static void compile_warnings(gr_program *p)
{
    size_t len = 0;
    FILE *f = open_memstream(&p->warnings, &len);
    if (!f) return;
    diag_print(&p->diags, f);
    fclose(f);
}

gr_code rt_compile(gr_program *p, const gr_compile_options *opt, gr_status *st)
{
    return rt_compile_probe(p, opt, compile_probe_data, NULL, st);
}

gr_code rt_compile_probe(gr_program *p, const gr_compile_options *opt, sema_data_probe probe,
                         void *probe_ctx, gr_status *st)
{
    p->ast = ps_parse(p->src, &p->diags);
    if (p->diags.n_errors) return rt_fail_diags(st, GR_ERR_SYNTAX, &p->diags);
    p->g = ir_new(&p->diags);
    sema_param *params = calloc((size_t)(opt ? opt->n_params : 0) + 1, sizeof *params);
    for (int i = 0; opt && i < opt->n_params; i++)
        params[i] = (sema_param){opt->params[i].name, opt->params[i].value};
    sema_options so = {.params = params,
                       .n_params = opt ? opt->n_params : 0,
                       .soft_placement = opt && opt->soft_placement,
                       .n_cpu = 16,
                       .n_gpu = available_gpus(),
                       .probe_data = probe,
                       .probe_ctx = probe_ctx};
    int r = sema_compile(p->g, p->ast, &so);
    free(params);
    if (r < 0 || p->diags.n_errors) return rt_fail_diags(st, GR_ERR_COMPILE, &p->diags);
    pass_run_all(p->g, opt ? opt->passes_off : 0, &compile_folder);
    if (p->diags.n_errors || rt_check_kernels(p->g, device_kernels) < 0)
        return rt_fail_diags(st, GR_ERR_COMPILE, &p->diags);
    compile_warnings(p);
    rt_ok(st);
    return GR_OK;
}
