/* format.c - the gr_format_* API: the canonical form of a .graph file
 * (lang/printer.c), printed, or written back in place through ckpt_io's
 * atomic replace (a symbolic link is followed and stays a link). */
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/ckpt_io.h"
#include "runtime.h"

/* The canonical text of src, malloc'd, into *text and *len. */
static gr_code format_src(const src_file *src, char **text, size_t *len, gr_status *st)
{
    diag_list d;
    diag_init(&d);
    ast_tree *t = ps_parse(src, &d);
    gr_code c = d.n_errors ? rt_fail_diags(st, GR_ERR_SYNTAX, &d) : GR_OK;
    FILE *f = c == GR_OK ? open_memstream(text, len) : NULL;
    if (c == GR_OK && !f) c = rt_fail(st, GR_ERR_NOMEM, "%s: no memory to format\n", src->name);
    if (f) {
        ast_format(t, f);
        fclose(f);
        rt_ok(st);
    }
    ast_free(t);
    diag_free(&d);
    return c;
}

static gr_code format_to(src_file *src, FILE *out, gr_status *st)
{
    char *text = NULL;
    size_t len = 0;
    gr_code c = format_src(src, &text, &len, st);
    if (c == GR_OK) fwrite(text, 1, len, out);
    free(text);
    src_free(src);
    return c;
}

gr_code gr_format_file(const char *path, FILE *out, gr_status *st)
{
    char err[512];
    if (!path || !out) return rt_null(st, "gr_format_file", path ? "out" : "path");
    src_file *src = src_load(path, err, sizeof err);
    if (!src) return rt_fail(st, GR_ERR_IO, "%s\n", err);
    return format_to(src, out, st);
}

gr_code gr_format_string(const char *name, const char *text, size_t len, FILE *out, gr_status *st)
{
    if (!name || !text || !out)
        return rt_null(st, "gr_format_string", !name ? "name" : !text ? "text" : "out");
    if (len > LIM_SOURCE_BYTES) return rt_source_too_long(st, "gr_format_string", len);
    return format_to(src_from_string(name, text, len), out, st);
}

gr_code gr_format_in_place(const char *path, int *changed, gr_status *st)
{
    char err[512];
    if (changed) *changed = 0;
    if (!path) return rt_null(st, "gr_format_in_place", "path");
    gr_code c = ckio_check_target(path, st); /* before reading: a FIFO would block */
    if (c != GR_OK) return c;
    src_file *src = src_load(path, err, sizeof err);
    if (!src) return rt_fail(st, GR_ERR_IO, "%s\n", err);
    char *text = NULL;
    size_t len = 0;
    c = format_src(src, &text, &len, st);
    int same = c == GR_OK && len == src->len && memcmp(text, src->text, len) == 0;
    if (c == GR_OK && !same) c = ckio_replace(path, (const uint8_t *)text, len, NULL, 0, st);
    if (changed) *changed = c == GR_OK && !same;
    free(text);
    src_free(src);
    return c;
}
