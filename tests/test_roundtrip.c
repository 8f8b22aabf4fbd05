/* test_roundtrip.c - parse(print(parse(x))) == parse(x) for every example
 * and every valid test input, and printing is idempotent. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lang/ast.h"

static char *print_tree(const ast_node *root, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    ast_print(root, f);
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

static void roundtrip_file(const char *path)
{
    char err[512];
    src_file *src = src_load(path, err, sizeof err);
    if (!src) fail_msg("%s", err);
    diag_list d1, d2;
    diag_init(&d1);
    diag_init(&d2);
    ast_tree *t1 = parse_ok(src, &d1);
    size_t len1, len2;
    char *text1 = print_tree(t1->root, &len1);
    src_file *src2 = src_from_string("printed", text1, len1);
    ast_tree *t2 = parse_ok(src2, &d2);
    if (!ast_equal(t1->root, t2->root))
        fail_msg("%s: tree changed after printing:\n%s", path, text1);
    char *text2 = print_tree(t2->root, &len2);
    assert_string_equal(text1, text2);
    free(text1);
    free(text2);
    ast_free(t1);
    ast_free(t2);
    diag_free(&d1);
    diag_free(&d2);
    src_free(src);
    src_free(src2);
}

/* Round-trips every *.graph in dir; returns how many there were. */
static int roundtrip_dir(const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) fail_msg("cannot open %s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".graph") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        roundtrip_file(path);
        n++;
    }
    closedir(dp);
    return n;
}

static void test_examples_round_trip(void **state)
{
    (void)state;
    assert_true(roundtrip_dir(GR_SOURCE_DIR "/examples") >= 5);
}

static void test_valid_parse_inputs_round_trip(void **state)
{
    (void)state;
    assert_true(roundtrip_dir(GR_TEST_DIR "/parse") >= 2);
}

static void test_printer_parenthesises_only_when_needed(void **state)
{
    (void)state;
    const char *text =
        "x = (a + b) * c - (d - e) + -(f @ g) @ h\ny = (f(x) as a)(z) @cpu:(i + 1)\n";
    src_file *src = src_from_string("t", text, strlen(text));
    diag_list d;
    diag_init(&d);
    ast_tree *t = parse_ok(src, &d);
    size_t len;
    char *out = print_tree(t->root, &len);
    assert_string_equal(out, "x = (a + b) * c - (d - e) + -(f @ g) @ h\n"
                             "y = (f(x) as a)(z) @cpu:(i + 1)\n");
    free(out);
    ast_free(t);
    diag_free(&d);
    src_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples_round_trip),
        cmocka_unit_test(test_valid_parse_inputs_round_trip),
        cmocka_unit_test(test_printer_parenthesises_only_when_needed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
