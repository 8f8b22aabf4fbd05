/* printer.c - ast_print: canonical source text (`graphrun fmt`).
 *
 * Parentheses are printed exactly where precedence needs them, so that
 * parse(print(t)) has the same tree as t.  Comments are not kept in the
 * AST, so fmt drops them. */
#include <stdlib.h>
#include <string.h>

#include "ast.h"

enum { PREC_DEVICE = 1, PREC_CMP, PREC_SUM, PREC_PROD, PREC_UNARY, PREC_POSTFIX, PREC_PRIMARY };

static void print_expr(const ast_node *n, int min_prec, FILE *out);
static void print_stmt(const ast_node *n, int indent, FILE *out);

static int binary_prec(ast_op op)
{
    switch (op) {
    case AOP_ADD:
    case AOP_SUB:
        return PREC_SUM;
    case AOP_MUL:
    case AOP_DIV:
    case AOP_MATMUL:
        return PREC_PROD;
    default:
        return PREC_CMP;
    }
}

static int expr_prec(const ast_node *n)
{
    switch (n->kind) {
    case AST_DEVICE:
        return PREC_DEVICE;
    case AST_BINARY:
        return binary_prec(n->op);
    case AST_UNARY:
        return PREC_UNARY;
    case AST_CALL:
    case AST_METHOD: /* `f(x) as a` reads badly with a postfix glued on */
        return n->as_name ? PREC_UNARY : PREC_POSTFIX;
    case AST_FIELD:
    case AST_INDEX:
        return PREC_POSTFIX;
    default:
        return PREC_PRIMARY;
    }
}

/* Shortest text that reads back as the same double, and still as a float. */
static void print_float(double v, FILE *out)
{
    char buf[64];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, out);
    if (!strpbrk(buf, ".e")) fputs(".0", out);
}

static void print_string(const char *s, FILE *out)
{
    fputc('"', out);
    for (; *s; s++) {
        switch (*s) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            fputc(*s, out);
        }
    }
    fputc('"', out);
}

static void print_list(ast_node *const *items, int n, FILE *out)
{
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", out);
        print_expr(items[i], 0, out);
    }
}

static void print_devspec(const ast_node *d, FILE *out)
{
    fprintf(out, "@%s:", d->name);
    const ast_node *ix = d->a;
    int bare = ix && (ix->kind == AST_NAME || (ix->kind == AST_NUM && ix->flag));
    if (bare)
        print_expr(ix, 0, out);
    else {
        fputc('(', out);
        if (ix) print_expr(ix, 0, out);
        fputc(')', out);
    }
}

static void print_call(const ast_node *n, FILE *out)
{
    print_expr(n->a, PREC_POSTFIX, out);
    if (n->kind == AST_METHOD) fprintf(out, ".%s", n->name);
    fputc('(', out);
    print_list(n->items, n->n_items, out);
    fputc(')', out);
    if (n->as_name) fprintf(out, " as %s", n->as_name);
}

static void print_binary(const ast_node *n, FILE *out)
{
    int p = binary_prec(n->op);
    /* Left-associative, except comparisons, which do not chain. */
    print_expr(n->a, p == PREC_CMP ? p + 1 : p, out);
    fprintf(out, " %s ", ast_op_text(n->op));
    print_expr(n->b, p + 1, out);
}

static void print_expr_inner(const ast_node *n, FILE *out)
{
    switch (n->kind) {
    case AST_NUM:
        if (n->flag)
            fprintf(out, "%.0f", n->num);
        else
            print_float(n->num, out);
        break;
    case AST_STR:
        print_string(n->name, out);
        break;
    case AST_BOOL:
        fputs(n->flag ? "true" : "false", out);
        break;
    case AST_NAME:
        fputs(n->name, out);
        break;
    case AST_LIST:
        fputc('[', out);
        print_list(n->items, n->n_items, out);
        fputc(']', out);
        break;
    case AST_CALL:
    case AST_METHOD:
        print_call(n, out);
        break;
    case AST_FIELD:
        print_expr(n->a, PREC_POSTFIX, out);
        fprintf(out, ".%s", n->name);
        break;
    case AST_INDEX:
        print_expr(n->a, PREC_POSTFIX, out);
        fputc('[', out);
        print_expr(n->b, 0, out);
        fputc(']', out);
        break;
    case AST_BINARY:
        print_binary(n, out);
        break;
    case AST_UNARY:
        fputc('-', out);
        print_expr(n->a, PREC_UNARY, out);
        break;
    case AST_DEVICE:
        print_expr(n->a, PREC_DEVICE, out);
        fputc(' ', out);
        print_devspec(n->b, out);
        break;
    case AST_DEVSPEC:
        print_devspec(n, out);
        break;
    case AST_KWARG:
        fprintf(out, "%s=", n->name);
        print_expr(n->a, 0, out);
        break;
    case AST_TYPE:
        fprintf(out, "%s[", n->name);
        print_list(n->items, n->n_items, out);
        fputc(']', out);
        break;
    default:
        fprintf(out, "<%s>", ast_kind_name(n->kind));
    }
}

static void print_expr(const ast_node *n, int min_prec, FILE *out)
{
    if (!n) return;
    int paren = expr_prec(n) < min_prec;
    if (paren) fputc('(', out);
    print_expr_inner(n, out);
    if (paren) fputc(')', out);
}

static void indent_to(int indent, FILE *out)
{
    for (int i = 0; i < indent; i++) fputs("    ", out);
}

static int is_block_stmt(const ast_node *n)
{
    return n->kind == AST_FN || n->kind == AST_SCOPE || n->kind == AST_FOR;
}

/* Top-level block statements get a blank line around them. */
static void print_stmts(const ast_node *blk, int indent, FILE *out)
{
    for (int i = 0; i < blk->n_items; i++) {
        const ast_node *s = blk->items[i];
        if (i > 0 && indent == 0 && (is_block_stmt(s) || is_block_stmt(blk->items[i - 1])))
            fputc('\n', out);
        print_stmt(s, indent, out);
    }
}

static void print_block(const ast_node *blk, int indent, FILE *out)
{
    fputs(" {\n", out);
    if (blk) print_stmts(blk, indent + 1, out);
    indent_to(indent, out);
    fputs("}", out);
}

static void print_fn(const ast_node *n, int indent, FILE *out)
{
    fprintf(out, "fn %s(", n->name);
    for (int i = 0; i < n->n_items; i++) {
        const ast_node *p = n->items[i];
        fprintf(out, "%s%s", i ? ", " : "", p->name);
        if (p->a) {
            fputc('=', out);
            print_expr(p->a, 0, out);
        }
    }
    fputc(')', out);
    print_block(n->b, indent, out);
}

static void print_scope(const ast_node *n, int indent, FILE *out)
{
    fprintf(out, "scope %s", n->name);
    if (n->flag == 1) fputs(" reuse", out);
    if (n->flag == 2) {
        fputs(" reuse(", out);
        print_expr(n->a, 0, out);
        fputc(')', out);
    }
    if (n->b) {
        fputc(' ', out);
        print_devspec(n->b, out);
    }
    print_block(n->c, indent, out);
}

static void print_named(const char *kw, const ast_node *n, const char *sep, FILE *out)
{
    fprintf(out, "%s %s%s", kw, n->name, sep);
    print_expr(n->a, 0, out);
}

static void print_stmt_inner(const ast_node *n, int indent, FILE *out)
{
    switch (n->kind) {
    case AST_PARAM:
        print_named("param", n, " = ", out);
        break;
    case AST_DATA:
        print_named("data", n, " = ", out);
        break;
    case AST_VAR:
        print_named("var", n, " = ", out);
        break;
    case AST_INPUT:
        print_named("input", n, ": ", out);
        break;
    case AST_RETURN:
        fputs("return ", out);
        print_expr(n->a, 0, out);
        break;
    case AST_FN:
        print_fn(n, indent, out);
        break;
    case AST_SCOPE:
        print_scope(n, indent, out);
        break;
    case AST_FOR:
        fprintf(out, "for %s in ", n->name);
        print_expr(n->a, 0, out);
        fputs("..", out);
        print_expr(n->b, 0, out);
        print_block(n->c, indent, out);
        break;
    case AST_ASSIGN:
        print_expr(n->a, 0, out);
        fputs(" = ", out);
        print_expr(n->b, 0, out);
        break;
    case AST_EXPR_STMT:
        print_expr(n->a, 0, out);
        break;
    default:
        print_expr(n, 0, out);
    }
}

static void print_stmt(const ast_node *n, int indent, FILE *out)
{
    indent_to(indent, out);
    print_stmt_inner(n, indent, out);
    fputc('\n', out);
}

void ast_print(const ast_node *n, FILE *out)
{
    if (!n) return;
    if (n->kind == AST_PROGRAM || n->kind == AST_BLOCK)
        print_stmts(n, 0, out);
    else if (n->kind < AST_NUM)
        print_stmt(n, 0, out);
    else
        print_expr(n, 0, out);
}
