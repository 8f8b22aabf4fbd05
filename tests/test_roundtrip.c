/* test_roundtrip.c - fmt keeps meaning and comments, and our own files are
 * canonical: for every .graph in the repository that parses,
 * parse(fmt(x)) == parse(x), fmt(x) has x's comments in order, and
 * fmt(fmt(x)) == fmt(x); the examples, tests/models, bench/ and the ```graph
 * blocks of README.md and docs/ are in canonical form. */
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lang/ast.h"

static char *format_tree(const ast_tree *t, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    ast_format(t, f);
    fclose(f);
    return out;
}

static ast_tree *parse_ok(src_file *src, diag_list *d)
{
    ast_tree *t = ps_parse(src, d);
    if (d->n_errors) diag_print(d, stderr);
    assert_int_equal(d->n_errors, 0);
    assert_non_null(t->root);
    return t;
}

/* Formats src (which parses) and checks the tree, the comments and
 * idempotence; returns the formatted text. */
static char *roundtrip_src(src_file *src, ast_tree *t1)
{
    diag_list d2;
    diag_init(&d2);
    size_t len1, len2;
    char *text1 = format_tree(t1, &len1);
    src_file *src2 = src_from_string("formatted", text1, len1);
    ast_tree *t2 = parse_ok(src2, &d2);
    if (!ast_equal(t1->root, t2->root))
        fail_msg("%s: tree changed after formatting:\n%s", src->name, text1);
    if (!ast_comments_equal(t1, t2))
        fail_msg("%s: comments changed after formatting:\n%s", src->name, text1);
    char *text2 = format_tree(t2, &len2);
    if (strcmp(text1, text2) != 0)
        fail_msg("%s: formatting twice differs:\n%s\n---\n%s", src->name, text1, text2);
    free(text2);
    ast_free(t2);
    diag_free(&d2);
    src_free(src2);
    return text1;
}

static int g_files; /* files that parsed and round-tripped */

static int roundtrip_visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    const char *base = path + ftw->base;
    if (type == FTW_D && ftw->level > 0 && (base[0] == '.' || strncmp(base, "build", 5) == 0))
        return FTW_SKIP_SUBTREE;
    size_t n = strlen(base);
    if (type != FTW_F || n < 7 || strcmp(base + n - 6, ".graph") != 0) return FTW_CONTINUE;
    char err[512];
    src_file *src = src_load(path, err, sizeof err);
    if (!src) fail_msg("%s", err);
    diag_list d;
    diag_init(&d);
    ast_tree *t = ps_parse(src, &d);
    if (d.n_errors == 0 && t->root) { /* files with syntax errors cannot be formatted */
        free(roundtrip_src(src, t));
        g_files++;
    }
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return FTW_CONTINUE;
}

static void test_every_graph_file_round_trips_with_its_comments(void **state)
{
    (void)state;
    g_files = 0;
    assert_int_equal(nftw(GR_SOURCE_DIR, roundtrip_visit, 16, FTW_ACTIONRETVAL), 0);
    assert_true(g_files >= 60);
}

/* text (named name) must be canonical already. */
static void check_canonical(const char *name, const char *text, size_t len)
{
    src_file *src = src_from_string(name, text, len);
    diag_list d;
    diag_init(&d);
    ast_tree *t = parse_ok(src, &d);
    char *out = roundtrip_src(src, t);
    if (strlen(out) != len || memcmp(out, text, len) != 0)
        fail_msg("%s is not in canonical form (graphrun fmt -w fixes files); it should be:\n%s",
                 name, out);
    free(out);
    ast_free(t);
    diag_free(&d);
    src_free(src);
}

static char *read_text(const char *path, size_t *len)
{
    char err[512];
    src_file *src = src_load(path, err, sizeof err);
    if (!src) fail_msg("%s", err);
    char *text = malloc(src->len + 1);
    memcpy(text, src->text, src->len + 1);
    *len = src->len;
    src_free(src);
    return text;
}

static int canonical_visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    size_t n = strlen(path + ftw->base), len;
    if (type != FTW_F || n < 7 || strcmp(path + ftw->base + n - 6, ".graph") != 0) return 0;
    char *text = read_text(path, &len);
    check_canonical(path, text, len);
    free(text);
    g_files++;
    return 0;
}

static void test_examples_and_models_are_canonical(void **state)
{
    (void)state;
    g_files = 0;
    assert_int_equal(nftw(GR_SOURCE_DIR "/examples", canonical_visit, 16, 0), 0);
    assert_int_equal(nftw(GR_TEST_DIR "/models", canonical_visit, 16, 0), 0);
    assert_int_equal(nftw(GR_SOURCE_DIR "/bench", canonical_visit, 16, 0), 0);
    assert_true(g_files >= 8);
}

/* Checks every ```graph block of a markdown file; returns how many. */
static int check_markdown(const char *path)
{
    size_t len;
    char *text = read_text(path, &len), *block = NULL, name[600];
    int n = 0, line = 0;
    for (char *s = text, *nl; *s; s = nl + 1, line++) {
        nl = strchr(s, '\n');
        if (!nl) break;
        if (!block && strncmp(s, "```graph\n", 9) == 0) {
            block = nl + 1;
            snprintf(name, sizeof name, "%s:%d", path, line + 2);
        } else if (block && strncmp(s, "```\n", 4) == 0) {
            check_canonical(name, block, (size_t)(s - block));
            block = NULL;
            n++;
        }
    }
    free(text);
    return n;
}

static int markdown_visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    size_t n = strlen(path + ftw->base);
    if (type == FTW_F && n > 3 && strcmp(path + ftw->base + n - 3, ".md") == 0)
        g_files += check_markdown(path);
    return 0;
}

static void test_graph_blocks_in_docs_are_canonical(void **state)
{
    (void)state;
    g_files = 0;
    assert_true(check_markdown(GR_SOURCE_DIR "/README.md") >= 1);
    assert_int_equal(nftw(GR_SOURCE_DIR "/docs", markdown_visit, 16, 0), 0);
    assert_true(g_files >= 1);
}

static char *format_string(const char *text)
{
    src_file *src = src_from_string("t", text, strlen(text));
    diag_list d;
    diag_init(&d);
    ast_tree *t = parse_ok(src, &d);
    char *out = roundtrip_src(src, t);
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return out;
}

static void assert_formats_to(const char *text, const char *want)
{
    char *out = format_string(text);
    assert_string_equal(out, want);
    free(out);
}

static void test_printer_parenthesises_only_when_needed(void **state)
{
    (void)state;
    assert_formats_to("x = (a + b) * c - (d - e) + -(f @ g) @ h\ny = (f(x) as a)(z) @cpu:(i + 1)\n",
                      "x = (a + b) * c - (d - e) + -(f @ g) @ h\n"
                      "y = (f(x) as a)(z) @cpu:(i + 1)\n");
}

static void test_comments_stay_beside_their_code(void **state)
{
    (void)state;
    assert_formats_to("# head\n\n\n# more\nparam a=1 # a\nx = f(a,   # after a\n"
                      "  # before b\n  b)\nfn g(p, # p\n q) {\n  return p   # ret\n\n\n  # end\n}\n"
                      "v = a[1 # idx\n]\n",
                      "# head\n\n# more\nparam a = 1  # a\nx = f(a,  # after a\n"
                      "      # before b\n      b)\nfn g(p,  # p\n     q) {\n  return p  # ret\n\n"
                      "  # end\n}\nv = a[1]  # idx\n");
}

static void test_long_calls_fill_lines_aligned_to_the_bracket(void **state)
{
    (void)state;
    assert_formats_to(
        "y = some_function(argument_number_one, argument_number_two, argument_number_three, "
        "other(x, y, z, w), last)\n",
        "y = some_function(argument_number_one, argument_number_two, argument_number_three,\n"
        "                  other(x, y, z, w), last)\n");
}

static void test_long_strings_are_never_broken(void **state)
{
    (void)state;
    char text[400], want[400];
    char s[201];
    memset(s, 's', 200);
    s[200] = 0;
    snprintf(text, sizeof text, "d = f(\"%s\")\n", s);
    snprintf(want, sizeof want, "d = f(\"%s\")\n", s);
    assert_formats_to(text, want);
}

static void test_blocks_fit_on_one_line_or_indent_by_two(void **state)
{
    (void)state;
    assert_formats_to(
        "scope m {\n    a = f(x)\n}\nfn e() { }\nfor i in 0..2 { scope s { b = 1 } }\n",
        "scope m { a = f(x) }\nfn e() {}\nfor i in 0..2 {\n  scope s { b = 1 }\n}\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_graph_file_round_trips_with_its_comments),
        cmocka_unit_test(test_examples_and_models_are_canonical),
        cmocka_unit_test(test_graph_blocks_in_docs_are_canonical),
        cmocka_unit_test(test_printer_parenthesises_only_when_needed),
        cmocka_unit_test(test_comments_stay_beside_their_code),
        cmocka_unit_test(test_long_calls_fill_lines_aligned_to_the_bracket),
        cmocka_unit_test(test_long_strings_are_never_broken),
        cmocka_unit_test(test_blocks_fit_on_one_line_or_indent_by_two),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
