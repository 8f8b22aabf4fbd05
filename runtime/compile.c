/* compile.c - the compile driver: parse -> sema -> placement -> passes for
 * one gr_program, with what the compiler needs from the machine: its
 * devices and kernel tables (placement decides devices with them), the
 * data readers' probe (sema types a data source by its headers) and the
 * CPU kernels (constant folding runs them at compile time).  The
 * plan of each target is made later, by the session that runs it. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

void rt_data_spec(const ir_data *d, data_spec *s)
{
    static const data_kind kinds[] = {[DATA_IDX] = DATA_KIND_IDX,
                                      [DATA_CSV] = DATA_KIND_CSV,
                                      [DATA_RAW] = DATA_KIND_RAW,
                                      [DATA_GAUSSIAN] = DATA_KIND_GAUSSIAN,
                                      [DATA_TEXT] = DATA_KIND_TEXT};
    *s = (data_spec){.kind = kinds[d->kind],
                     .path = {d->path[0], d->path[1]},
                     .batch = d->batch,
                     .shuffle = d->shuffle,
                     .seed = d->seed,
                     .label_col = d->label_col,
                     .n_classes = d->n_classes,
                     .nonfinite = d->nonfinite,
                     .n = d->gen_n,
                     .x_rank = d->x_rank,
                     .x_scale = d->x_scale,
                     .paths = d->paths,
                     .n_paths = d->n_paths,
                     .block = d->block,
                     .stride = d->stride,
                     .split = d->split,
                     .val_part = d->val_part,
                     .byte_vocab = d->byte_vocab,
                     .word_vocab = d->word_vocab,
                     .streams = d->streams};
    for (int i = 0; i < d->x_rank; i++) s->x_dims[i] = d->x_dims[i];
}

/* sema's data probe: the readers' own, on the spec the session will open. */
int rt_probe_data(void *ctx, const ir_data *d, sema_data_shape *out, char *err, size_t errlen)
{
    (void)ctx;
    data_spec s;
    data_info info;
    rt_data_spec(d, &s);
    if (data_probe(&s, &info, err, errlen) < 0) return -1;
    *out = (sema_data_shape){.n = info.n,
                             .x_rank = info.x_rank,
                             .has_y = info.has_y,
                             .x_i32 = info.x_i32,
                             .y_per = info.y_per,
                             .vocab = info.vocab};
    for (int i = 0; i < info.x_rank; i++) out->x_dims[i] = info.x_dims[i];
    return d->kind == DATA_TEXT ? data_text_vocab(&s, &out->vocab_chars, err, errlen) : 0;
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

/* The placement pass's "does device dev implement op": the machine's
 * kernel table for dev. */
static int compile_implements(void *m, op_kind op, int dev)
{
    const kernel_fn *k = machine_kernels(m, dev);
    return k && k[op];
}

static void compile_warnings(gr_program *p)
{
    size_t len = 0;
    FILE *f = open_memstream(&p->warnings, &len);
    if (!f) return;
    diag_print(&p->diags, f);
    fclose(f);
}

static gr_code compile_machine(gr_program *p, const gr_compile_options *opt, gr_status *st)
{
    char err[256];
    if (!opt || !opt->devices) {
        p->machine = *machine_probe();
        return GR_OK;
    }
    if (machine_parse(opt->devices, &p->machine, err, sizeof err) == 0) return GR_OK;
    return rt_fail(st, GR_ERR_ARG, "%s\n", err);
}

static gr_code check_params(const char *fn, const gr_compile_options *opt, gr_status *st)
{
    if (opt->n_params < 0)
        return rt_fail(st, GR_ERR_ARG, "%s: options.n_params is %d, must be >= 0\n", fn,
                       opt->n_params);
    if (opt->n_params > 0 && !opt->params)
        return rt_fail(st, GR_ERR_ARG, "%s: options.params is NULL but options.n_params is %d\n",
                       fn, opt->n_params);
    for (int i = 0; i < opt->n_params; i++)
        if (!opt->params[i].name || !opt->params[i].value)
            return rt_fail(st, GR_ERR_ARG, "%s: options.params[%d].%s is NULL\n", fn, i,
                           opt->params[i].name ? "value" : "name");
    return GR_OK;
}

gr_code rt_compile_options_check(const char *fn, const gr_compile_options *opt, gr_status *st)
{
    if (!opt) return GR_OK;
    if ((unsigned)opt->distributed > GR_DIST_ASYNC)
        return rt_fail(st, GR_ERR_ARG, "%s: options.distributed is %d, not a gr_distributed mode\n",
                       fn, (int)opt->distributed);
    return check_params(fn, opt, st);
}

gr_code rt_compile(gr_program *p, const gr_compile_options *opt, gr_status *st)
{
    return rt_compile_probe(p, opt, rt_probe_data, NULL, st);
}

gr_code rt_compile_probe(gr_program *p, const gr_compile_options *opt, sema_data_probe probe,
                         void *probe_ctx, gr_status *st)
{
    gr_code c = compile_machine(p, opt, st);
    if (c != GR_OK) return c;
    p->distributed = opt ? opt->distributed : GR_DIST_NONE;
    p->ast = ps_parse(p->src, &p->diags);
    if (p->diags.n_errors) return rt_fail_diags(st, GR_ERR_SYNTAX, &p->diags);
    p->g = ir_new(&p->diags);
    sema_param *params = base_xcalloc((size_t)(opt ? opt->n_params : 0) + 1, sizeof *params);
    for (int i = 0; opt && i < opt->n_params; i++)
        params[i] = (sema_param){opt->params[i].name, opt->params[i].value};
    sema_options so = {.params = params,
                       .n_params = opt ? opt->n_params : 0,
                       .allreduce = opt && opt->distributed == GR_DIST_SYNC,
                       .probe_data = probe,
                       .probe_ctx = probe_ctx};
    int r = sema_compile(p->g, p->ast, &so);
    free(params);
    if (r < 0 || p->diags.n_errors) return rt_fail_diags(st, GR_ERR_COMPILE, &p->diags);
    place_options po = {.n_cpu = p->machine.n_cpu,
                        .n_gpu = p->machine.n_gpu,
                        .soft_placement = opt && opt->soft_placement,
                        .cpu_as_gpu = opt && opt->cpu_as_gpu,
                        .implements = compile_implements,
                        .ctx = &p->machine,
                        .no_gpu_why = p->machine.gpu_why};
    if (place_run(p->g, &po) < 0) return rt_fail_diags(st, GR_ERR_COMPILE, &p->diags);
    pass_evaluator ev = {.can_eval = compile_can_eval, .eval = compile_eval};
    pass_run_all(p->g, opt ? opt->passes_off : 0, &ev);
    if (p->diags.n_errors) return rt_fail_diags(st, GR_ERR_COMPILE, &p->diags);
    compile_warnings(p);
    rt_ok(st);
    return GR_OK;
}
