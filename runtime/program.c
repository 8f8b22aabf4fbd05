/* program.c - the gr_program API: compiling a .graph file or string (the
 * driver is compile.c), its dumps and what it says about its targets. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Adds path to the program's files unless it is there. */
static void program_add_file(gr_program *p, const char *path)
{
    for (int i = 0; i < p->n_files; i++)
        if (strcmp(p->files[i], path) == 0) return;
    p->files = base_xreallocarray(p->files, (size_t)p->n_files + 1, sizeof *p->files);
    p->files[p->n_files++] = path;
}

/* A file of a text() directory: the program keeps its own copy. */
static void program_add_dir_file(void *ctx, const char *path)
{
    gr_program *p = ctx;
    p->dir_files =
        base_xreallocarray(p->dir_files, (size_t)p->n_dir_files + 1, sizeof *p->dir_files);
    p->dir_files[p->n_dir_files++] = base_xstrdup(path);
    program_add_file(p, p->dir_files[p->n_dir_files - 1]);
}

/* gr_program_file's list: the data paths as sema resolved them, which are
 * the paths the readers open, and after a directory that text() reads the
 * files in it that it reads. */
static void program_list_files(gr_program *p, int from_file)
{
    if (from_file) program_add_file(p, p->src->name);
    for (int d = 0; d < p->g->n_data; d++) {
        const ir_data *src = &p->g->data[d];
        int text = src->kind == DATA_TEXT;
        const char *const *paths = text ? src->paths : src->path;
        for (int i = 0; i < (text ? src->n_paths : 2); i++) {
            if (paths[i]) program_add_file(p, paths[i]);
            if (paths[i] && text) data_text_files(paths[i], program_add_dir_file, p);
        }
    }
}

typedef struct compile_job {
    gr_program *p;
    const gr_compile_options *opt;
    int from_file;
    gr_status *st;
    int returned; /* rt_compile returned (memory did not run out inside it) */
} compile_job;

static gr_code compile_job_run(void *arg)
{
    compile_job *j = arg;
    gr_code c = rt_compile(j->p, j->opt, j->st);
    j->returned = 1;
    if (c == GR_OK) program_list_files(j->p, j->from_file);
    return c;
}

/* Compiles src into *out.  When memory runs out part-way, what the
 * compiler had built is left allocated: its structures may be half made. */
static gr_code program_from(src_file *src, int from_file, const gr_compile_options *opt,
                            gr_program **out, gr_status *st)
{
    gr_program *p = calloc(1, sizeof *p);
    if (!p) {
        src_free(src);
        *out = NULL;
        return rt_fail(st, GR_ERR_NOMEM, "no memory for a program\n");
    }
    p->src = src;
    diag_init(&p->diags);
    compile_job j = {p, opt, from_file, st, 0};
    gr_code c = rt_catch_oom(compile_job_run, &j, src->name, st);
    if (!j.returned) p = NULL; /* half made: not freed */
    if (c != GR_OK) {
        gr_program_free(p);
        p = NULL;
    }
    *out = p;
    return c;
}

gr_code gr_compile_file(const char *path, const gr_compile_options *opt, gr_program **out,
                        gr_status *st)
{
    char err[512];
    if (!out) return rt_null(st, "gr_compile_file", "out");
    *out = NULL;
    if (!path) return rt_null(st, "gr_compile_file", "path");
    if (rt_compile_options_check("gr_compile_file", opt, st) != GR_OK) return GR_ERR_ARG;
    src_file *src = src_load(path, err, sizeof err);
    if (!src) return rt_fail(st, GR_ERR_IO, "%s\n", err);
    return program_from(src, 1, opt, out, st);
}

gr_code gr_compile_string(const char *name, const char *text, size_t len,
                          const gr_compile_options *opt, gr_program **out, gr_status *st)
{
    if (!out) return rt_null(st, "gr_compile_string", "out");
    *out = NULL;
    if (!name || !text) return rt_null(st, "gr_compile_string", name ? "text" : "name");
    if (len > LIM_SOURCE_BYTES) return rt_source_too_long(st, "gr_compile_string", len);
    if (rt_compile_options_check("gr_compile_string", opt, st) != GR_OK) return GR_ERR_ARG;
    return program_from(src_from_string(name, text, len), 0, opt, out, st);
}

void gr_program_free(gr_program *p)
{
    if (!p) return;
    ir_free(p->g);
    ast_free(p->ast);
    src_free(p->src);
    diag_free(&p->diags);
    free(p->warnings);
    free(p->files);
    for (int i = 0; i < p->n_dir_files; i++) free(p->dir_files[i]);
    free(p->dir_files);
    free(p);
}

const char *gr_program_warnings(const gr_program *p)
{
    return p && p->warnings ? p->warnings : "";
}

const char *gr_program_default_target(const gr_program *p)
{
    if (!p || p->g->default_target < 0) return NULL;
    return p->g->names[p->g->default_target].name;
}

gr_code gr_program_vocab(const gr_program *p, const char *data, const char **chars, int64_t *size,
                         gr_status *st)
{
    if (!p) return rt_null(st, "gr_program_vocab", "program");
    for (int d = 0; d < p->g->n_data; d++) {
        const ir_data *src = &p->g->data[d];
        if (src->kind != DATA_TEXT || (data && strcmp(src->name, data) != 0)) continue;
        if (chars) *chars = src->vocab_chars;
        if (size) *size = src->vocab;
        rt_ok(st);
        return GR_OK;
    }
    const char *near = NULL, *names[64];
    int n = 0;
    for (int d = 0; data && d < p->g->n_data && n < 64; d++)
        if (p->g->data[d].kind == DATA_TEXT) names[n++] = p->g->data[d].name;
    if (data && (near = gr_suggest(data, names, n)))
        return rt_fail(st, GR_ERR_ARG, "no text data source named '%s'; did you mean '%s'?\n", data,
                       near);
    return rt_fail(st, GR_ERR_ARG, data ? "no text data source named '%s'\n" : "%s\n",
                   data ? data : "the program has no text data source");
}

/* "no target named 'trian'; did you mean 'train'?" */
static gr_code no_target(const gr_program *p, const char *target, gr_status *st)
{
    const char *near = ir_near_name(p->g, target);
    if (near)
        return rt_fail(st, GR_ERR_ARG, "no target named '%s'; did you mean '%s'?\n", target, near);
    return rt_fail(st, GR_ERR_ARG, "no target named '%s'\n", target);
}

static gr_code emit_plan(const gr_program *p, const char *target, FILE *out, gr_status *st)
{
    if (!target) target = gr_program_default_target(p);
    int k = target ? ir_find_name(p->g, target) : -1;
    if (k < 0) return no_target(p, target ? target : "(none)", st);
    plan_graph *plan = rt_plan_build(p->g, &p->g->names[k].node, 1, st);
    if (!plan) return GR_ERR_NOMEM;
    fprintf(out, "target %s\n", target);
    plan_dump(plan, out);
    plan_free(plan);
    return GR_OK;
}

typedef struct emit_job {
    const gr_program *p;
    const char *what, *target;
    FILE *out;
    gr_status *st;
} emit_job;

static gr_code emit_job_run(void *arg)
{
    const emit_job *j = arg;
    const gr_program *p = j->p;
    const char *what = j->what, *target = j->target;
    FILE *out = j->out;
    gr_status *st = j->st;
    rt_ok(st);
    if (strcmp(what, "ast") == 0)
        ast_dump(p->ast, out);
    else if (strcmp(what, "ir") == 0)
        ir_dump(p->g, out);
    else if (strcmp(what, "plan") == 0)
        return emit_plan(p, target, out, st);
    else if (strcmp(what, "dot") == 0)
        ir_dot(p->g, out);
    else
        return rt_fail(st, GR_ERR_ARG, "unknown dump '%s' (ast, ir, plan or dot)\n", what);
    return GR_OK;
}

gr_code gr_program_emit(const gr_program *p, const char *what, const char *target, FILE *out,
                        gr_status *st)
{
    if (!p || !what || !out)
        return rt_null(st, "gr_program_emit", !p ? "program" : !what ? "what" : "out");
    emit_job j = {p, what, target, out, st};
    return rt_catch_oom(emit_job_run, &j, "gr_program_emit", st);
}

int gr_program_file_count(const gr_program *p)
{
    return p ? p->n_files : 0;
}

const char *gr_program_file(const gr_program *p, int k)
{
    return p && k >= 0 && k < p->n_files ? p->files[k] : NULL;
}

const char *gr_version(void)
{
    return GR_VERSION_STRING;
}

const char *gr_blas_kernels(const char **better)
{
    if (better) *better = cpu_blas_better_core();
    return cpu_blas_core();
}

gr_code gr_target_info_get(const gr_program *p, const char *target, gr_target_info *info,
                           gr_status *st)
{
    if (!info) return rt_null(st, "gr_target_info_get", "info");
    memset(info, 0, sizeof *info);
    if (!p || !target) return rt_null(st, "gr_target_info_get", !p ? "program" : "target");
    int k = ir_find_name(p->g, target);
    if (k < 0) return no_target(p, target, st);
    const ir_graph *g = p->g;
    const ir_type *t = &g->nodes[ir_value_node(g, g->names[k].node)].type;
    info->is_train = g->names[k].is_train;
    info->is_scalar = t->dtype == DT_F32 && ir_numel(t) == 1;
    if (info->is_train) {
        char buf[300];
        snprintf(buf, sizeof buf, "%s/loss", target);
        int l = ir_find_name(g, buf);
        if (l >= 0) info->loss = g->names[l].name;
        snprintf(buf, sizeof buf, "%s/lr", target);
        if ((l = ir_find_name(g, buf)) >= 0) info->lr = g->names[l].name;
    }
    plan_graph *plan = rt_plan_build(g, &g->names[k].node, 1, st);
    if (!plan) return GR_ERR_NOMEM;
    if (plan->n_data_used) info->batch = g->data[plan->data_used[0]].batch;
    plan_free(plan);
    rt_ok(st);
    return GR_OK;
}
