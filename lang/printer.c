/* printer.c - ast_format: canonical source text (`graphrun fmt`).
 *
 * Parentheses are printed exactly where precedence needs them, so that
 * parse(print(t)) has the same tree as t.  Comments are not in the tree:
 * the printer walks the tree in source order with a cursor into the
 * tree's comment list, and prints every comment that starts before a
 * place where a line may break (between statements, after an element of
 * a bracketed list, before a closing bracket).  So every comment comes
 * out once, in order, next to the code it was written beside.
 *
 * Lines: a bracketed list (call arguments, list elements, parameters,
 * dimensions) that does not fit in AST_LINE_WIDTH columns, or that holds
 * a comment, is filled: elements go on the line while they fit, then on a
 * new line aligned just after the opening bracket.  Nothing else breaks,
 * so a long string or name may overflow.  Every decision depends on the
 * tree and the comments only, which makes fmt idempotent. */
#include <stdlib.h>
#include <string.h>

#include "ast.h"

enum { PREC_DEVICE = 1, PREC_CMP, PREC_SUM, PREC_PROD, PREC_UNARY, PREC_POSTFIX, PREC_PRIMARY };
enum { INDENT = 2 };

typedef struct pr_state {
    FILE *out;         /* NULL: only measure (col counts what would be printed) */
    const ast_tree *t; /* its comments and source; NULL when measuring */
    int next;          /* the first comment not printed yet */
    int col;           /* column of the cursor, 0-based, in code points */
    int fresh;         /* nothing printed on this line yet */
    int pending;       /* indentation to print before the line's first text */
    int flat;          /* no line breaks, no comments: measuring, or a list that fits */
    int first;         /* no statement or comment printed yet in this block */
    uint32_t prev_end; /* end of the last statement or comment between statements */
} pr_state;

static void print_expr(pr_state *p, const ast_node *n, int min_prec, int reserve);
static void print_stmt_inner(pr_state *p, const ast_node *n, int indent);

/* ---- output ---- */

static void put(pr_state *p, const char *s, size_t n)
{
    if (p->fresh && p->out) fprintf(p->out, "%*s", p->pending, "");
    p->fresh = 0;
    if (p->out) fwrite(s, 1, n, p->out);
    for (size_t i = 0; i < n; i++) p->col += ((unsigned char)s[i] & 0xC0) != 0x80;
}

static void puts_(pr_state *p, const char *s)
{
    put(p, s, strlen(s));
}

/* Ends the line (unless nothing is on it) and indents the next one. */
static void line(pr_state *p, int indent)
{
    if (!p->fresh && p->out) fputc('\n', p->out);
    p->fresh = 1;
    p->pending = p->col = indent;
}

static void blank_line(pr_state *p)
{
    if (p->out) fputc('\n', p->out);
}

/* ---- measuring ---- */

static int expr_width(const ast_node *n, int min_prec)
{
    pr_state m = {.flat = 1};
    print_expr(&m, n, min_prec, 0);
    return m.col;
}

/* The width of what follows on the line, which only a layout that may
 * break needs (measuring it while measuring would take exponential time). */
static int width_after(const pr_state *p, const ast_node *n, int min_prec)
{
    return p->flat ? 0 : expr_width(n, min_prec);
}

static int stmt_width(const ast_node *n)
{
    pr_state m = {.flat = 1};
    print_stmt_inner(&m, n, 0);
    return m.col;
}

static int fits(const pr_state *p, int width)
{
    return p->col + width <= AST_LINE_WIDTH;
}

/* ---- comments ---- */

/* A comment that has only blanks before it on its line stays on a line of
 * its own; the others follow the code they were written after. */
static int own_line(const src_file *s, src_span c)
{
    for (uint32_t i = c.begin; i > s->lines[0] && s->text[i - 1] != '\n'; i--)
        if (!strchr(" \t\f\v\r", s->text[i - 1])) return 0;
    return 1;
}

/* Whether a comment not printed yet starts in [begin, end). */
static int has_comment(const pr_state *p, uint32_t begin, uint32_t end)
{
    for (int i = p->next; p->t && i < p->t->n_comments && p->t->comments[i].begin < end; i++)
        if (p->t->comments[i].begin >= begin) return 1;
    return 0;
}

static int comment_due(const pr_state *p, uint32_t limit)
{
    return !p->flat && p->next < p->t->n_comments && p->t->comments[p->next].begin < limit;
}

/* The next comment; the line ends after it. */
static void put_comment(pr_state *p, int indent)
{
    size_t n;
    const char *text = ast_comment_text(p->t, p->next, &n);
    put(p, text, n);
    line(p, indent);
}

/* Inside brackets: comments due before limit, each ending its line; the
 * next line starts at column indent. */
static void flush_in_list(pr_state *p, uint32_t limit, int indent)
{
    for (; comment_due(p, limit); p->next++) {
        if (!p->fresh) {
            if (own_line(p->t->src, p->t->comments[p->next]))
                line(p, indent);
            else
                puts_(p, "  ");
        }
        put_comment(p, indent);
    }
}

/* ---- statements: lines and blank lines ---- */

static int blank_between(const src_file *s, uint32_t from, uint32_t to)
{
    int newlines = 0;
    for (uint32_t i = from; i < to; i++) newlines += s->text[i] == '\n';
    return newlines >= 2;
}

/* Starts the line of a statement or an own-line comment that begins at
 * begin: one blank line before it where the source has any. */
static void stmt_line(pr_state *p, uint32_t begin, int indent)
{
    line(p, indent);
    if (!p->first && p->out && blank_between(p->t->src, p->prev_end, begin)) blank_line(p);
    p->first = 0;
}

static void advance_prev_end(pr_state *p, uint32_t end)
{
    if (end > p->prev_end) p->prev_end = end;
}

/* Between statements: comments due before limit. */
static void flush_stmts(pr_state *p, uint32_t limit, int indent)
{
    for (; comment_due(p, limit); p->next++) {
        src_span c = p->t->comments[p->next];
        if (p->fresh || own_line(p->t->src, c))
            stmt_line(p, c.begin, indent);
        else
            puts_(p, "  ");
        put_comment(p, indent);
        advance_prev_end(p, c.end);
    }
}

/* ---- expressions ---- */

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
static void print_float(pr_state *p, double v)
{
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".e")) strcat(buf, ".0");
    puts_(p, buf);
}

static void print_num(pr_state *p, const ast_node *n)
{
    char buf[64];
    if (!n->flag) {
        print_float(p, n->num);
        return;
    }
    snprintf(buf, sizeof buf, "%.0f", n->num);
    puts_(p, buf);
}

static void print_string(pr_state *p, const char *s)
{
    puts_(p, "\"");
    for (; *s; s++) {
        const char *esc = *s == '"'    ? "\\\""
                          : *s == '\\' ? "\\\\"
                          : *s == '\n' ? "\\n"
                          : *s == '\t' ? "\\t"
                                       : NULL;
        if (esc)
            puts_(p, esc);
        else
            put(p, s, 1);
    }
    puts_(p, "\"");
}

static int list_width(const pr_state *p, ast_node *const *items, int n)
{
    int w = 2 + 2 * (n > 1 ? n - 1 : 0);
    for (int i = 0; i < n; i++) w += width_after(p, items[i], 0);
    return w;
}

/* One element of a filled list: on this line if it fits, else on the
 * next, at column align.  after: what follows it (',' or the bracket and
 * the list's reserve). */
static void fill_item(pr_state *p, const ast_node *item, int after, int align)
{
    int w = expr_width(item, 0) + after;
    if (!p->fresh && p->col > align) {
        if (fits(p, 1 + w))
            puts_(p, " ");
        else
            line(p, align);
    }
    print_expr(p, item, 0, after);
}

static void print_filled(pr_state *p, ast_node *const *items, int n, uint32_t end,
                         const char *close, int reserve)
{
    int align = p->col;
    for (int i = 0; i < n; i++) {
        flush_in_list(p, items[i]->span.begin, align);
        fill_item(p, items[i], i + 1 < n ? 1 : 1 + reserve, align);
        if (i + 1 < n) puts_(p, ",");
    }
    flush_in_list(p, end, align);
    if (p->fresh) p->pending = p->col = align - 1; /* the bracket under its mate */
    puts_(p, close);
}

/* open items close, the list's comments being those in span; reserve:
 * columns that follow on the same line. */
static void print_list(pr_state *p, const char *open, ast_node *const *items, int n, src_span span,
                       const char *close, int reserve)
{
    int flat = p->flat || (!has_comment(p, span.begin, span.end) &&
                           fits(p, list_width(p, items, n) + reserve));
    puts_(p, open);
    if (!flat) {
        print_filled(p, items, n, span.end, close, reserve);
        return;
    }
    int was_flat = p->flat;
    p->flat = 1;
    for (int i = 0; i < n; i++) {
        if (i) puts_(p, ", ");
        print_expr(p, items[i], 0, 0);
    }
    p->flat = was_flat;
    puts_(p, close);
}

static void print_devspec(pr_state *p, const ast_node *d)
{
    puts_(p, "@");
    puts_(p, d->name);
    puts_(p, ":");
    const ast_node *ix = d->a;
    int bare = ix && (ix->kind == AST_NAME || (ix->kind == AST_NUM && ix->flag));
    if (!bare) puts_(p, "(");
    if (ix) print_expr(p, ix, 0, 0);
    if (!bare) puts_(p, ")");
}

static void print_call(pr_state *p, const ast_node *n, int reserve)
{
    int as = n->as_name ? 4 + (int)strlen(n->as_name) : 0;
    if (n->as_index) as += 2 + expr_width(n->as_index, 0);
    int args = list_width(p, n->items, n->n_items) + as + reserve;
    int method = n->kind == AST_METHOD ? 1 + (int)strlen(n->name) : 0;
    print_expr(p, n->a, PREC_POSTFIX, method + args);
    if (method) {
        puts_(p, ".");
        puts_(p, n->name);
    }
    print_list(p, "(", n->items, n->n_items, n->span, ")", as + reserve);
    if (!as) return;
    puts_(p, " as ");
    puts_(p, n->as_name);
    if (!n->as_index) return;
    puts_(p, "[");
    print_expr(p, n->as_index, 0, 0);
    puts_(p, "]");
}

static void print_binary(pr_state *p, const ast_node *n, int reserve)
{
    int prec = binary_prec(n->op);
    const char *op = ast_op_text(n->op);
    /* Left-associative, except comparisons, which do not chain. */
    int right = 2 + (int)strlen(op) + width_after(p, n->b, prec + 1) + reserve;
    print_expr(p, n->a, prec == PREC_CMP ? prec + 1 : prec, right);
    puts_(p, " ");
    puts_(p, op);
    puts_(p, " ");
    print_expr(p, n->b, prec + 1, reserve);
}

static void print_index(pr_state *p, const ast_node *n, int reserve)
{
    print_expr(p, n->a, PREC_POSTFIX, 2 + width_after(p, n->b, 0) + reserve);
    puts_(p, "[");
    print_expr(p, n->b, 0, 1 + reserve);
    puts_(p, "]");
}

/* NAME or NAME=expr: keyword arguments and parameters. */
static void print_named_arg(pr_state *p, const ast_node *n, int reserve)
{
    puts_(p, n->name);
    if (!n->a) return;
    puts_(p, "=");
    print_expr(p, n->a, 0, reserve);
}

static void print_expr_inner(pr_state *p, const ast_node *n, int reserve)
{
    switch (n->kind) {
    case AST_NUM:
        print_num(p, n);
        break;
    case AST_STR:
        print_string(p, n->name);
        break;
    case AST_BOOL:
        puts_(p, n->flag ? "true" : "false");
        break;
    case AST_NAME:
        puts_(p, n->name);
        break;
    case AST_LIST:
        print_list(p, "[", n->items, n->n_items, n->span, "]", reserve);
        break;
    case AST_CALL:
    case AST_METHOD:
        print_call(p, n, reserve);
        break;
    case AST_FIELD:
        print_expr(p, n->a, PREC_POSTFIX, 1 + (int)strlen(n->name) + reserve);
        puts_(p, ".");
        puts_(p, n->name);
        break;
    case AST_INDEX:
        print_index(p, n, reserve);
        break;
    case AST_BINARY:
        print_binary(p, n, reserve);
        break;
    case AST_UNARY:
        puts_(p, "-");
        print_expr(p, n->a, PREC_UNARY, reserve);
        break;
    case AST_DEVICE:
        print_expr(p, n->a, PREC_DEVICE, 1 + width_after(p, n->b, 0) + reserve);
        puts_(p, " ");
        print_devspec(p, n->b);
        break;
    case AST_DEVSPEC:
        print_devspec(p, n);
        break;
    case AST_KWARG:
    case AST_PARAMDEF:
        print_named_arg(p, n, reserve);
        break;
    case AST_TYPE:
        puts_(p, n->name);
        print_list(p, "[", n->items, n->n_items, n->span, "]", reserve);
        break;
    default:
        puts_(p, "<");
        puts_(p, ast_kind_name(n->kind));
        puts_(p, ">");
    }
}

static void print_expr(pr_state *p, const ast_node *n, int min_prec, int reserve)
{
    if (!n) return;
    int paren = expr_prec(n) < min_prec;
    if (paren) puts_(p, "(");
    print_expr_inner(p, n, reserve + paren);
    if (paren) puts_(p, ")");
}

/* ---- statements ---- */

static int is_block_stmt(const ast_node *n)
{
    return n->kind == AST_FN || n->kind == AST_SCOPE || n->kind == AST_FOR;
}

static void print_stmts(pr_state *p, const ast_node *blk, uint32_t end, int indent)
{
    for (int i = 0; i < blk->n_items; i++) {
        const ast_node *s = blk->items[i];
        flush_stmts(p, s->span.begin, indent);
        stmt_line(p, s->span.begin, indent);
        print_stmt_inner(p, s, indent);
        advance_prev_end(p, s->span.end);
    }
    flush_stmts(p, end, indent);
}

/* `{ stmt }` on one line: one statement that is no block, without
 * comments, when it fits; `{}` when empty. */
static int one_line_block(const pr_state *p, const ast_node *blk)
{
    if (has_comment(p, blk->span.begin, blk->span.end)) return 0;
    if (blk->n_items == 0) return 1;
    return blk->n_items == 1 && !is_block_stmt(blk->items[0]) &&
           fits(p, 5 + stmt_width(blk->items[0]));
}

static void print_block(pr_state *p, const ast_node *blk, int indent)
{
    if (one_line_block(p, blk)) {
        puts_(p, blk->n_items ? " { " : " {}");
        if (blk->n_items) print_stmt_inner(p, blk->items[0], indent);
        if (blk->n_items) puts_(p, " }");
        return;
    }
    puts_(p, " {");
    p->first = 1;
    print_stmts(p, blk, blk->span.end - 1, indent + INDENT);
    p->first = 0;
    line(p, indent);
    puts_(p, "}");
}

static void print_fn(pr_state *p, const ast_node *n, int indent)
{
    puts_(p, "fn ");
    puts_(p, n->name);
    src_span params = {n->span.begin, n->b->span.begin};
    print_list(p, "(", n->items, n->n_items, params, ")", 2);
    print_block(p, n->b, indent);
}

static void print_scope(pr_state *p, const ast_node *n, int indent)
{
    puts_(p, "scope ");
    puts_(p, n->name);
    if (n->flag == 1) puts_(p, " reuse");
    if (n->flag == 2) {
        puts_(p, " reuse(");
        print_expr(p, n->a, 0, 0);
        puts_(p, ")");
    }
    if (n->b) {
        puts_(p, " ");
        print_devspec(p, n->b);
    }
    print_block(p, n->c, indent);
}

static void print_for(pr_state *p, const ast_node *n, int indent)
{
    puts_(p, "for ");
    puts_(p, n->name);
    puts_(p, " in ");
    print_expr(p, n->a, 0, 0);
    puts_(p, "..");
    print_expr(p, n->b, 0, 0);
    print_block(p, n->c, indent);
}

static void print_decl(pr_state *p, const char *kw, const ast_node *n, const char *sep)
{
    puts_(p, kw);
    puts_(p, n->name);
    puts_(p, sep);
    print_expr(p, n->a, 0, 0);
}

static void print_stmt_inner(pr_state *p, const ast_node *n, int indent)
{
    switch (n->kind) {
    case AST_PARAM:
        print_decl(p, "param ", n, " = ");
        break;
    case AST_DATA:
        print_decl(p, "data ", n, " = ");
        break;
    case AST_VAR:
        print_decl(p, "var ", n, " = ");
        break;
    case AST_INPUT:
        print_decl(p, "input ", n, ": ");
        break;
    case AST_RETURN:
        puts_(p, "return ");
        print_expr(p, n->a, 0, 0);
        break;
    case AST_FN:
        print_fn(p, n, indent);
        break;
    case AST_SCOPE:
        print_scope(p, n, indent);
        break;
    case AST_FOR:
        print_for(p, n, indent);
        break;
    case AST_ASSIGN:
        print_expr(p, n->a, 0, 3 + width_after(p, n->b, 0));
        puts_(p, " = ");
        print_expr(p, n->b, 0, 0);
        break;
    case AST_EXPR_STMT:
        print_expr(p, n->a, 0, 0);
        break;
    default:
        print_expr(p, n, 0, 0);
        break;
    }
}

void ast_format(const ast_tree *t, FILE *out)
{
    if (!t || !t->root) return;
    pr_state p = {.out = out, .t = t, .fresh = 1, .first = 1};
    print_stmts(&p, t->root, UINT32_MAX, 0);
    if (!p.fresh) fputc('\n', out);
}
