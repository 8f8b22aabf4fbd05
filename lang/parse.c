/* parse.c - ps_parse: runs flex + bison over a src_file; node helpers. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ps_internal.h"
#include "parser.h"
#include "lexer.h"

/* Every node is allocated with its tree depth behind it, so the nesting
 * limit costs O(children) per node and needs no field in ast.h. */
typedef struct ps_wnode {
    ast_node n;
    int depth;
} ps_wnode;

/* Out of memory mid-parse: hand out one scratch node so that the grammar
 * actions never see NULL; the error makes the caller discard the tree. */
static ast_node *oom_node(ps_ctx *c)
{
    static _Thread_local ps_wnode scratch;
    if (!c->fatal) ps_error(c, 0, 0, "out of memory");
    c->fatal = 1;
    memset(&scratch, 0, sizeof scratch);
    return &scratch.n;
}

ast_node *ps_node(ps_ctx *c, ast_kind k, uint32_t begin, uint32_t end)
{
    ps_wnode *w = ps_alloc(c->arena, sizeof *w);
    if (!w) return oom_node(c);
    w->n.kind = k;
    w->n.span.begin = begin;
    w->n.span.end = end;
    w->depth = 1;
    return &w->n;
}

/* Room for one more element in an arena array of cnt elements that
 * doubles when cnt is 0, 1, 2, 4, ...; NULL (after an error) when out of
 * memory. */
static void *grow(ps_ctx *c, void *v, int cnt, size_t size)
{
    if (cnt & (cnt - 1)) return v;
    size_t cap = cnt ? (size_t)cnt * 2 : 2;
    void *w = ps_alloc(c->arena, cap * size);
    if (!w) {
        oom_node(c);
        return NULL;
    }
    if (cnt) memcpy(w, v, (size_t)cnt * size);
    return w;
}

void ps_push(ps_ctx *c, ast_node *n, ast_node *item)
{
    ast_node **v = grow(c, n->items, n->n_items, sizeof *v);
    if (!v) return;
    n->items = v;
    n->items[n->n_items++] = item;
}

void ps_add_comment(ps_ctx *c, uint32_t begin, uint32_t end)
{
    src_span *v = grow(c, c->comments, c->n_comments, sizeof *v);
    if (!v) return;
    c->comments = v;
    c->comments[c->n_comments++] = (src_span){begin, end};
}

static int depth_of(const ast_node *n)
{
    return n ? ((const ps_wnode *)n)->depth : 0;
}

ast_node *ps_finish(ps_ctx *c, ast_node *n)
{
    int d = depth_of(n->a);
    if (depth_of(n->b) > d) d = depth_of(n->b);
    if (depth_of(n->c) > d) d = depth_of(n->c);
    for (int i = 0; i < n->n_items; i++)
        if (depth_of(n->items[i]) > d) d = depth_of(n->items[i]);
    ((ps_wnode *)n)->depth = d + 1;
    if (d + 1 > PS_MAX_TREE_DEPTH && !c->tree_too_deep) {
        c->tree_too_deep = 1;
        ps_error(c, n->span.begin, n->span.end, "expression nested too deeply (limit %d)",
                 PS_MAX_TREE_DEPTH);
    }
    return n;
}

void ps_forget_brackets(ps_ctx *c)
{
    int keep = 0;
    for (int i = 0; i < c->depth; i++) {
        if (c->open[i] != '{') continue;
        c->open_at[keep] = c->open_at[i];
        c->open[keep++] = '{';
    }
    c->depth = keep;
}

void ps_error(ps_ctx *c, uint32_t begin, uint32_t end, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(c->d, DIAG_ERROR, c->src, (src_span){begin, end}, fmt, ap);
    va_end(ap);
}

/* "Unexpected end of file" points just past the last line's text. */
static uint32_t eof_position(const src_file *s)
{
    uint32_t e = (uint32_t)s->len;
    if (e > 0 && s->text[e - 1] == '\n') e--;
    if (e > 0 && s->text[e - 1] == '\r') e--;
    return e < s->lines[0] ? s->lines[0] : e;
}

static int run_parser(ps_ctx *c)
{
    yyscan_t scanner;
    if (lang_yylex_init_extra(c, &scanner) != 0) return -1;
    const src_file *s = c->src;
    uint32_t skip = s->lines[0]; /* the BOM, if any */
    c->pos = skip;
    YY_BUFFER_STATE buf = lang_yy_scan_bytes(s->text + skip, (int)(s->len - skip), scanner);
    int rc = buf ? lang_yyparse(scanner) : -1;
    if (buf) lang_yy_delete_buffer(buf, scanner);
    lang_yylex_destroy(scanner);
    return rc;
}

static int only_blank(const ast_node *root)
{
    return root && root->n_items == 0;
}

ast_tree *ps_parse(const src_file *src, diag_list *d)
{
    ast_tree *t = calloc(1, sizeof *t);
    ps_arena *arena = ps_arena_new();
    if (!t || !arena) {
        free(t);
        ps_arena_free(arena);
        diag_error(d, NULL, ((src_span){0, 0}), "out of memory");
        return NULL;
    }
    ps_ctx c = {.src = src, .d = d, .arena = arena, .eof_pos = eof_position(src)};
    int errs = d->n_errors;
    if (run_parser(&c) < 0) diag_error(d, NULL, ((src_span){0, 0}), "out of memory");
    if (d->n_errors == errs && only_blank(c.root))
        diag_error(d, src, ((src_span){src->lines[0], src->lines[0]}), "empty program");
    t->root = c.fatal ? NULL : c.root;
    t->src = src;
    t->comments = c.comments;
    t->n_comments = c.n_comments;
    t->arena = arena;
    return t;
}

void ast_free(ast_tree *t)
{
    if (!t) return;
    ps_arena_free(t->arena);
    free(t);
}
