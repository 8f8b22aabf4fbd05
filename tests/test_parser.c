/* test_parser.c - tree shapes, precedence, spans and error recovery. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lang/ast.h"

typedef struct parsed {
    src_file *src;
    diag_list d;
    ast_tree *t;
} parsed;

static parsed *parse_n(const char *text, size_t len)
{
    parsed *p = calloc(1, sizeof *p);
    p->src = src_from_string("t.graph", text, len);
    diag_init(&p->d);
    p->t = ps_parse(p->src, &p->d);
    return p;
}

static parsed *parse(const char *text)
{
    return parse_n(text, strlen(text));
}

static void parsed_free(parsed *p)
{
    ast_free(p->t);
    diag_free(&p->d);
    src_free(p->src);
    free(p);
}

/* Prints all diagnostics on failure, so a broken test says why. */
static void assert_no_errors(const parsed *p)
{
    if (p->d.n_errors) diag_print(&p->d, stderr);
    assert_int_equal(p->d.n_errors, 0);
}

/* A compact, independent rendering of expression trees: (op a b). */
static void sx(const ast_node *n, char *buf, size_t cap);

static void sx_cat(char *buf, size_t cap, const char *s)
{
    strncat(buf, s, cap - strlen(buf) - 1);
}

static void sx_items(const ast_node *n, char *buf, size_t cap)
{
    for (int i = 0; i < n->n_items; i++) {
        sx_cat(buf, cap, " ");
        sx(n->items[i], buf, cap);
    }
}

static void sx(const ast_node *n, char *buf, size_t cap)
{
    char tmp[64];
    switch (n->kind) {
    case AST_NUM:
        snprintf(tmp, sizeof tmp, "%g", n->num);
        sx_cat(buf, cap, tmp);
        return;
    case AST_NAME:
        sx_cat(buf, cap, n->name);
        return;
    case AST_STR:
        sx_cat(buf, cap, "\"");
        sx_cat(buf, cap, n->name);
        sx_cat(buf, cap, "\"");
        return;
    case AST_BOOL:
        sx_cat(buf, cap, n->flag ? "true" : "false");
        return;
    default:
        break;
    }
    sx_cat(buf, cap, "(");
    switch (n->kind) {
    case AST_BINARY:
        sx_cat(buf, cap, ast_op_text(n->op));
        break;
    case AST_UNARY:
        sx_cat(buf, cap, "neg");
        break;
    case AST_CALL:
        sx_cat(buf, cap, "call");
        break;
    case AST_METHOD:
        sx_cat(buf, cap, ".");
        sx_cat(buf, cap, n->name);
        break;
    case AST_FIELD:
        sx_cat(buf, cap, "field ");
        sx_cat(buf, cap, n->name);
        break;
    case AST_INDEX:
        sx_cat(buf, cap, "index");
        break;
    case AST_DEVICE:
        sx_cat(buf, cap, "dev");
        break;
    case AST_DEVSPEC:
        sx_cat(buf, cap, n->name);
        break;
    case AST_KWARG:
        sx_cat(buf, cap, n->name);
        sx_cat(buf, cap, "=");
        break;
    case AST_LIST:
        sx_cat(buf, cap, "list");
        break;
    default:
        sx_cat(buf, cap, ast_kind_name(n->kind));
    }
    if (n->a) {
        sx_cat(buf, cap, " ");
        sx(n->a, buf, cap);
    }
    if (n->b) {
        sx_cat(buf, cap, " ");
        sx(n->b, buf, cap);
    }
    sx_items(n, buf, cap);
    if (n->as_name) {
        sx_cat(buf, cap, " as ");
        sx_cat(buf, cap, n->as_name);
    }
    sx_cat(buf, cap, ")");
}

/* Parses "x = EXPR" and compares the right-hand side's s-expression. */
static void expect_expr(const char *expr, const char *want)
{
    char text[512], got[1024] = "";
    snprintf(text, sizeof text, "x = %s\n", expr);
    parsed *p = parse(text);
    assert_no_errors(p);
    assert_int_equal(p->t->root->n_items, 1);
    const ast_node *s = p->t->root->items[0];
    assert_int_equal(s->kind, AST_ASSIGN);
    sx(s->b, got, sizeof got);
    if (strcmp(got, want) != 0) fprintf(stderr, "expr: %s\n got: %s\nwant: %s\n", expr, got, want);
    assert_string_equal(got, want);
    parsed_free(p);
}

static void test_mul_binds_tighter_than_add(void **state)
{
    (void)state;
    expect_expr("a + b * c", "(+ a (* b c))");
    expect_expr("a * b + c", "(+ (* a b) c)");
    expect_expr("a - b - c", "(- (- a b) c)");
}

static void test_matmul_is_multiplicative_and_left_assoc(void **state)
{
    (void)state;
    expect_expr("x @ w + b", "(+ (@ x w) b)");
    expect_expr("x / 255 @ w", "(@ (/ x 255) w)");
    expect_expr("a @ b @ c", "(@ (@ a b) c)");
}

static void test_unary_minus_binds_tighter_than_binary(void **state)
{
    (void)state;
    expect_expr("-a @ b", "(@ (neg a) b)");
    expect_expr("2 - -3", "(- 2 (neg 3))");
    expect_expr("-f(x).y", "(neg (field y (call f x)))");
}

static void test_comparison_is_lowest_binary(void **state)
{
    (void)state;
    expect_expr("argmax(l, 1) == y + 1", "(== (call argmax l 1) (+ y 1))");
    expect_expr("t > 0", "(> t 0)");
}

static void test_comparisons_do_not_chain(void **state)
{
    (void)state;
    parsed *p = parse("x = a < b < c\n");
    assert_int_equal(p->d.n_errors, 1);
    parsed_free(p);
}

static void test_device_annotation_is_lowest_and_wraps_whole_expr(void **state)
{
    (void)state;
    expect_expr("f(x) @gpu:0", "(dev (call f x) (gpu 0))");
    expect_expr("a + b @cpu:t", "(dev (+ a b) (cpu t))");
    expect_expr("sgd(lr).minimize(l) @cpu:(i + 1)",
                "(dev (.minimize (call sgd lr) l) (cpu (+ i 1)))");
}

static void test_postfix_call_method_field_index_as(void **state)
{
    (void)state;
    expect_expr("train.x", "(field x train)");
    expect_expr("l[t]", "(index l t)");
    expect_expr("dense(h, 10, act=none) as out", "(call dense h 10 (act= none) as out)");
    expect_expr("sgd(lr).minimize(loss)", "(.minimize (call sgd lr) loss)");
    expect_expr("f(x)(y)", "(call (call f x) y)");
}

static void test_literals_and_lists(void **state)
{
    (void)state;
    expect_expr("[[2.0], [-3.0], [0.5],]", "(list (list 2) (list (neg 3)) (list 0.5))");
    expect_expr("[]", "(list)");
    expect_expr("f(\"a\\tb\", true, false)", "(call f \"a\tb\" true false)");
}

static void test_keyword_arguments_after_positional(void **state)
{
    (void)state;
    expect_expr("idx(\"a\", \"b\", batch=batch, shuffle=true)",
                "(call idx \"a\" \"b\" (batch= batch) (shuffle= true))");
}

static void test_every_statement_kind(void **state)
{
    (void)state;
    parsed *p = parse("param batch = 64\n"
                      "data d = gaussian(n=10)\n"
                      "input z: f32[batch, 100]\n"
                      "var w = zeros([3])\n"
                      "fn dense(x, units, act=relu) { return act(x) }\n"
                      "scope m reuse(t > 0) @gpu:t { l[t] = 1 }\n"
                      "for t in 0..2 { y = t }\n"
                      "f(x); g(y)\n");
    assert_no_errors(p);
    const ast_node *r = p->t->root;
    assert_int_equal(r->kind, AST_PROGRAM);
    const ast_kind want[] = {AST_PARAM, AST_DATA, AST_INPUT,     AST_VAR,      AST_FN,
                             AST_SCOPE, AST_FOR,  AST_EXPR_STMT, AST_EXPR_STMT};
    assert_int_equal(r->n_items, 9);
    for (int i = 0; i < 9; i++) assert_int_equal(r->items[i]->kind, want[i]);
    const ast_node *in = r->items[2]->a;
    assert_int_equal(in->kind, AST_TYPE);
    assert_string_equal(in->name, "f32");
    assert_int_equal(in->n_items, 2);
    const ast_node *fn = r->items[4];
    assert_int_equal(fn->n_items, 3);
    assert_null(fn->items[0]->a);
    assert_string_equal(fn->items[2]->name, "act");
    assert_string_equal(fn->items[2]->a->name, "relu");
    assert_int_equal(fn->b->kind, AST_BLOCK);
    assert_int_equal(fn->b->items[0]->kind, AST_RETURN);
    const ast_node *sc = r->items[5];
    assert_int_equal(sc->flag, 2);
    assert_int_equal(sc->a->op, AOP_GT);
    assert_string_equal(sc->b->name, "gpu");
    assert_string_equal(sc->b->a->name, "t");
    assert_int_equal(sc->c->items[0]->kind, AST_ASSIGN);
    assert_int_equal(sc->c->items[0]->a->kind, AST_INDEX);
    const ast_node *fo = r->items[6];
    assert_string_equal(fo->name, "t");
    assert_true(fo->a->num == 0 && fo->b->num == 2);
    assert_int_equal(fo->c->n_items, 1);
    parsed_free(p);
}

static void test_scope_reuse_forms(void **state)
{
    (void)state;
    parsed *p = parse("scope a { }\nscope b reuse { }\nscope c reuse @cpu:1 {\n}\n");
    assert_no_errors(p);
    const ast_node *r = p->t->root;
    assert_int_equal(r->items[0]->flag, 0);
    assert_int_equal(r->items[1]->flag, 1);
    assert_int_equal(r->items[2]->flag, 1);
    assert_null(r->items[1]->b);
    assert_string_equal(r->items[2]->b->name, "cpu");
    assert_true(r->items[2]->b->a->num == 1);
    parsed_free(p);
}

static void test_newlines_inside_brackets_are_ignored(void **state)
{
    (void)state;
    parsed *p = parse("x = f(a,\n      b)\ny = [1,\n 2]\n\n\n");
    assert_no_errors(p);
    assert_int_equal(p->t->root->n_items, 2);
    parsed_free(p);
}

static void expect_linecol(const parsed *p, uint32_t off, int line, int col)
{
    int l, c;
    src_linecol(p->src, off, &l, &c);
    assert_int_equal(l, line);
    assert_int_equal(c, col);
}

static void test_spans_cover_each_node(void **state)
{
    (void)state;
    const char *text = "a = 1\nloss = mean(x @ w)\n";
    parsed *p = parse(text);
    assert_no_errors(p);
    const ast_node *s = p->t->root->items[1];
    assert_int_equal(s->span.begin, 6);
    assert_int_equal(s->span.end, 24);
    const ast_node *call = s->b, *mm = call->items[0];
    assert_int_equal(call->span.begin, 13);
    assert_int_equal(mm->span.begin, 18);
    assert_int_equal(mm->span.end, 23);
    expect_linecol(p, mm->span.begin, 2, 13);
    parsed_free(p);
}

static void test_crlf_bom_and_tabs_give_right_columns(void **state)
{
    (void)state;
    parsed *p = parse("\xEF\xBB\xBF"
                      "a = 1\r\n\tb = 2\r\n");
    assert_no_errors(p);
    const ast_node *b = p->t->root->items[1];
    expect_linecol(p, p->t->root->items[0]->span.begin, 1, 1);
    expect_linecol(p, b->span.begin, 2, 2);
    parsed_free(p);
}

static void test_missing_final_newline_is_fine(void **state)
{
    (void)state;
    parsed *p = parse("x = 1\ny = f(x)");
    assert_no_errors(p);
    assert_int_equal(p->t->root->n_items, 2);
    parsed_free(p);
}

static void test_several_errors_in_one_run(void **state)
{
    (void)state;
    parsed *p = parse("x = = 1\ny = 2\nz = )\nfn f( { }\nw = 3\n");
    assert_int_equal(p->d.n_errors, 3);
    assert_non_null(p->t->root);
    /* the good statements are still there */
    assert_int_equal(p->t->root->n_items, 2);
    parsed_free(p);
}

static void test_error_cap_counts_the_rest(void **state)
{
    (void)state;
    char text[2048] = "";
    for (int i = 0; i < 30; i++) strcat(text, "x = = 1\n");
    parsed *p = parse(text);
    assert_int_equal(p->d.n_errors, 30);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    diag_print(&p->d, f);
    fclose(f);
    assert_non_null(strstr(out, "t.graph: 10 more errors not shown\n"));
    assert_null(strstr(out, "t.graph:21:"));
    free(out);
    parsed_free(p);
}

static void test_empty_and_comment_only_programs_are_errors(void **state)
{
    (void)state;
    const char *cases[] = {"", "\n\n", "# just a comment\n", "  \t\r\n"};
    for (int i = 0; i < 4; i++) {
        parsed *p = parse(cases[i]);
        assert_int_equal(p->d.n_errors, 1);
        assert_string_equal(p->d.v[0].msg, "empty program");
        parsed_free(p);
    }
}

static void test_deep_nesting_reports_instead_of_crashing(void **state)
{
    (void)state;
    const int n = 100000;
    char *text = malloc((size_t)n * 2 + 16);
    strcpy(text, "x = ");
    memset(text + 4, '(', (size_t)n);
    strcpy(text + 4 + n, "1");
    parsed *p = parse(text);
    assert_int_equal(p->d.n_errors, 1);
    assert_string_equal(p->d.v[0].msg, "nesting too deep (limit 200)");
    parsed_free(p);
    memset(text + 4, '-', (size_t)n);
    p = parse(text);
    assert_true(p->d.n_errors >= 1);
    parsed_free(p);
    free(text);
}

static void test_hint_for_assignment_in_reuse_condition(void **state)
{
    (void)state;
    parsed *p = parse("scope m reuse(t = 0) { x = 1 }\n");
    assert_int_equal(p->d.n_errors, 1);
    assert_non_null(strstr(p->d.v[0].msg, "use '=='"));
    parsed_free(p);
}

static void test_hint_for_keyword_used_as_name(void **state)
{
    (void)state;
    parsed *p = parse("var in = 1\n");
    assert_int_equal(p->d.n_errors, 1);
    assert_int_equal(p->d.n, 2);
    assert_int_equal(p->d.v[1].sev, DIAG_NOTE);
    assert_non_null(strstr(p->d.v[1].msg, "'in' is a keyword"));
    parsed_free(p);
}

static void test_hint_for_unclosed_paren(void **state)
{
    (void)state;
    parsed *p = parse("x = f(a\ny = 2\nz = 3\n");
    assert_int_equal(p->d.n_errors, 1);
    assert_int_equal(p->d.n, 2);
    assert_non_null(strstr(p->d.v[1].msg, "unclosed '('"));
    assert_int_equal(p->d.v[1].span.begin, 5);
    parsed_free(p);
}

static void test_as_needs_a_call(void **state)
{
    (void)state;
    parsed *p = parse("h = x as fc1\n");
    assert_int_equal(p->d.n_errors, 1);
    assert_non_null(strstr(p->d.v[0].msg, "must follow a call"));
    parsed_free(p);
}

/* `f(x) as b[l]` indexes the scope's name; `(f(x) as b)[l]` the value. */
static void test_as_takes_an_index(void **state)
{
    (void)state;
    parsed *p = parse("h = f(x) as block[l + 1]\ny = (f(x) as b)[0]\n");
    assert_int_equal(p->d.n_errors, 0);
    const ast_node *call = p->t->root->items[0]->b, *ix = p->t->root->items[1]->b;
    assert_int_equal(call->kind, AST_CALL);
    assert_string_equal(call->as_name, "block");
    assert_non_null(call->as_index);
    assert_int_equal(call->as_index->kind, AST_BINARY);
    assert_int_equal(ix->kind, AST_INDEX);
    assert_null(ix->a->as_index);
    parsed *q = parse("h = f(x) as block[l]\n");
    assert_false(ast_equal(p->t->root->items[0], q->t->root->items[0]));
    parsed_free(p);
    parsed_free(q);
}

static void test_ast_equal_ignores_spans_only(void **state)
{
    (void)state;
    parsed *a = parse("x = f(a,  b) @cpu:0\n"), *b = parse("x=f(a,b)@cpu:0"),
           *c = parse("x = f(a, c) @cpu:0\n");
    assert_true(ast_equal(a->t->root, b->t->root));
    assert_false(ast_equal(a->t->root, c->t->root));
    parsed_free(a);
    parsed_free(b);
    parsed_free(c);
}

static void test_dump_shows_kinds_and_positions(void **state)
{
    (void)state;
    parsed *p = parse("x = 1 + y\n");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ast_dump(p->t, f);
    fclose(f);
    assert_non_null(strstr(out, "PROGRAM"));
    assert_non_null(strstr(out, "BINARY '+' @1:5-1:10"));
    assert_non_null(strstr(out, "NAME y @1:9-1:10"));
    free(out);
    parsed_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mul_binds_tighter_than_add),
        cmocka_unit_test(test_matmul_is_multiplicative_and_left_assoc),
        cmocka_unit_test(test_unary_minus_binds_tighter_than_binary),
        cmocka_unit_test(test_comparison_is_lowest_binary),
        cmocka_unit_test(test_comparisons_do_not_chain),
        cmocka_unit_test(test_device_annotation_is_lowest_and_wraps_whole_expr),
        cmocka_unit_test(test_postfix_call_method_field_index_as),
        cmocka_unit_test(test_literals_and_lists),
        cmocka_unit_test(test_keyword_arguments_after_positional),
        cmocka_unit_test(test_every_statement_kind),
        cmocka_unit_test(test_scope_reuse_forms),
        cmocka_unit_test(test_newlines_inside_brackets_are_ignored),
        cmocka_unit_test(test_spans_cover_each_node),
        cmocka_unit_test(test_crlf_bom_and_tabs_give_right_columns),
        cmocka_unit_test(test_missing_final_newline_is_fine),
        cmocka_unit_test(test_several_errors_in_one_run),
        cmocka_unit_test(test_error_cap_counts_the_rest),
        cmocka_unit_test(test_empty_and_comment_only_programs_are_errors),
        cmocka_unit_test(test_deep_nesting_reports_instead_of_crashing),
        cmocka_unit_test(test_hint_for_assignment_in_reuse_condition),
        cmocka_unit_test(test_hint_for_keyword_used_as_name),
        cmocka_unit_test(test_hint_for_unclosed_paren),
        cmocka_unit_test(test_as_needs_a_call),
        cmocka_unit_test(test_as_takes_an_index),
        cmocka_unit_test(test_ast_equal_ignores_spans_only),
        cmocka_unit_test(test_dump_shows_kinds_and_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
