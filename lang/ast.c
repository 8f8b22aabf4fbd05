/* ast.c - names, structural dump and equality of syntax trees. */
#include <assert.h>
#include <string.h>

#include "ast.h"

static const char *const kind_names[] = {
    "PROGRAM",  "BLOCK",  "PARAM", "DATA",   "INPUT",   "VAR",       "FN",
    "PARAMDEF", "RETURN", "SCOPE", "FOR",    "ASSIGN",  "EXPR_STMT", "NUM",
    "STR",      "BOOL",   "NAME",  "LIST",   "CALL",    "METHOD",    "FIELD",
    "INDEX",    "BINARY", "UNARY", "DEVICE", "DEVSPEC", "KWARG",     "TYPE",
};
static_assert(sizeof kind_names / sizeof *kind_names == AST_KIND_COUNT, "kind_names");

static const char *const op_texts[] = {
    "@", "+", "-", "*", "/", "==", "!=", "<", ">", "<=", ">=", "-",
};
static_assert(sizeof op_texts / sizeof *op_texts == AOP_COUNT, "op_texts");

const char *ast_kind_name(ast_kind k)
{
    return (unsigned)k < AST_KIND_COUNT ? kind_names[k] : "?";
}

const char *ast_op_text(ast_op op)
{
    return (unsigned)op < AOP_COUNT ? op_texts[op] : "?";
}

static void dump_span(const src_file *src, src_span sp, FILE *out)
{
    if (!src) return;
    int l1, c1, l2, c2;
    src_linecol(src, sp.begin, &l1, &c1);
    src_linecol(src, sp.end, &l2, &c2);
    fprintf(out, " @%d:%d-%d:%d", l1, c1, l2, c2);
}

static void dump_attrs(const ast_node *n, FILE *out)
{
    if (n->kind == AST_NUM)
        fprintf(out, " %.17g%s", n->num, n->flag ? "" : " (float)");
    else if (n->kind == AST_STR)
        fprintf(out, " \"%s\"", n->name);
    else if (n->name)
        fprintf(out, " %s", n->name);
    if (n->kind == AST_BOOL) fprintf(out, " %s", n->flag ? "true" : "false");
    if (n->kind == AST_BINARY || n->kind == AST_UNARY) fprintf(out, " '%s'", ast_op_text(n->op));
    if (n->kind == AST_SCOPE && n->flag) fprintf(out, " reuse%s", n->flag == 2 ? "(a)" : "");
    if (n->as_name) fprintf(out, " as %s", n->as_name);
}

static void dump_node(const src_file *src, const ast_node *n, int depth, const char *role,
                      FILE *out)
{
    fprintf(out, "%*s", depth * 2, "");
    if (role) fprintf(out, "%s: ", role);
    if (!n) {
        fputs("(null)\n", out);
        return;
    }
    fputs(ast_kind_name(n->kind), out);
    dump_attrs(n, out);
    dump_span(src, n->span, out);
    fputc('\n', out);
    if (n->a) dump_node(src, n->a, depth + 1, "a", out);
    if (n->b) dump_node(src, n->b, depth + 1, "b", out);
    if (n->c) dump_node(src, n->c, depth + 1, "c", out);
    if (n->as_index) dump_node(src, n->as_index, depth + 1, "as_index", out);
    for (int i = 0; i < n->n_items; i++) dump_node(src, n->items[i], depth + 1, NULL, out);
}

void ast_dump(const ast_tree *t, FILE *out)
{
    if (!t || !t->root) {
        fputs("(no tree)\n", out);
        return;
    }
    dump_node(t->src, t->root, 0, NULL, out);
}

static int str_eq(const char *x, const char *y)
{
    if (!x || !y) return x == y;
    return strcmp(x, y) == 0;
}

int ast_equal(const ast_node *x, const ast_node *y)
{
    if (!x || !y) return x == y;
    if (x->kind != y->kind || x->flag != y->flag || x->n_items != y->n_items) return 0;
    if (!str_eq(x->name, y->name) || !str_eq(x->as_name, y->as_name)) return 0;
    if (x->kind == AST_NUM && x->num != y->num) return 0;
    if ((x->kind == AST_BINARY || x->kind == AST_UNARY) && x->op != y->op) return 0;
    if (!ast_equal(x->a, y->a) || !ast_equal(x->b, y->b) || !ast_equal(x->c, y->c)) return 0;
    if (!ast_equal(x->as_index, y->as_index)) return 0;
    for (int i = 0; i < x->n_items; i++)
        if (!ast_equal(x->items[i], y->items[i])) return 0;
    return 1;
}

const char *ast_comment_text(const ast_tree *t, int i, size_t *len)
{
    const char *s = t->src->text + t->comments[i].begin;
    size_t n = t->comments[i].end - t->comments[i].begin;
    while (n > 1 && strchr(" \t\f\v\r", s[n - 1])) n--;
    *len = n;
    return s;
}

int ast_comments_equal(const ast_tree *x, const ast_tree *y)
{
    if (x->n_comments != y->n_comments) return 0;
    for (int i = 0; i < x->n_comments; i++) {
        size_t nx, ny;
        const char *a = ast_comment_text(x, i, &nx), *b = ast_comment_text(y, i, &ny);
        if (nx != ny || memcmp(a, b, nx) != 0) return 0;
    }
    return 1;
}
