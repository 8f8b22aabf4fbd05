/* compile.c - the compile driver: parse -> sema -> passes for one
 * gr_program, with what the compiler needs from the machine (its GPUs). */
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
                       .n_gpu = available_gpus()};
    int r = sema_compile(p->g, p->ast, &so);
    free(params);
    if (r < 0 || p->diags.n_errors) return rt_fail_diags(st, GR_ERR_COMPILE, &p->diags);
    pass_run_all(p->g, opt ? opt->passes_off : 0);
    compile_warnings(p);
    rt_ok(st);
    return GR_OK;
}
