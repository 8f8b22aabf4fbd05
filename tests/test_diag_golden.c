/* test_diag_golden.c - every tests/diag/NAME.graph must print exactly
 * tests/diag/NAME.expected (the syntax and lexical diagnostics, carets and
 * all).  GR_UPDATE_GOLDEN=1 rewrites the .expected files instead; review
 * the diff before committing. */
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

#define DIAG_DIR GR_TEST_DIR "/diag"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    FILE *m = open_memstream(&buf, len);
    char chunk[4096];
    for (size_t n; (n = fread(chunk, 1, sizeof chunk, f)) > 0;) fwrite(chunk, 1, n, m);
    fclose(m);
    fclose(f);
    return buf;
}

/* Parses diag/NAME.graph and returns what diag_print wrote. */
static char *run_case(const char *name, size_t *len)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s.graph", DIAG_DIR, name);
    gr_source *src = src_load(path, err, sizeof err);
    if (!src) fail_msg("%s", err);
    free(src->name);
    src->name = malloc(strlen(name) + 12);
    sprintf(src->name, "diag/%s.graph", name);
    gr_diags d;
    diag_init(&d);
    ast_tree *t = ps_parse(src, &d);
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    diag_print(&d, f);
    fclose(f);
    if (d.n_errors == 0) fail_msg("diag/%s.graph: expected errors, got none", name);
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return out;
}

static int check_case(const char *name)
{
    size_t got_len, want_len = 0;
    char *got = run_case(name, &got_len);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.expected", DIAG_DIR, name);
    if (getenv("GR_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        fwrite(got, 1, got_len, f);
        fclose(f);
    }
    char *want = read_file(path, &want_len);
    int ok = want && want_len == got_len && memcmp(want, got, got_len) == 0;
    if (!ok)
        fprintf(stderr, "--- diag/%s.graph: got ---\n%s--- expected ---\n%s---\n", name, got,
                want ? want : "(no .expected file)\n");
    free(got);
    free(want);
    return ok;
}

static void test_golden_diagnostics_match_exactly(void **state)
{
    (void)state;
    DIR *dp = opendir(DIAG_DIR);
    assert_non_null(dp);
    int n = 0, bad = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".graph") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), e->d_name);
        bad += !check_case(name);
        n++;
    }
    closedir(dp);
    assert_true(n >= 25);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_diagnostics_match_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
