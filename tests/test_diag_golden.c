/* test_diag_golden.c - every tests/DIR/NAME.graph must print exactly
 * tests/DIR/NAME.expected when compiled (its errors, or its warnings when
 * it compiles), carets and all:
 *   diag/     syntax and lexical errors (at least 25 cases)
 *   compile/  names, shapes, dtypes, reuse, arity, devices, data, --set
 *             (at least 15 cases)
 * A first line `# args: --set NAME=VALUE ... --devices SPEC --soft-placement`
 * passes params and options.  A case that compiles must print warnings:
 * then they are what it prints.  Files are compiled through the public API
 * from the tests folder, so messages name them as DIR/NAME.graph on every
 * machine.  GR_UPDATE_GOLDEN=1 rewrites the .expected files instead;
 * review the diff before committing. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "graphrun.h"

#define MAX_ARGS 8

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

/* Params and options from a leading "# args: --set a=1 --devices cpu:0"
 * line. */
static void case_options(const char *text, char *buf, size_t n, gr_param *ps, gr_compile_options *o)
{
    if (strncmp(text, "# args:", 7) != 0) return;
    snprintf(buf, n, "%.*s", (int)strcspn(text + 7, "\n"), text + 7);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        if (strcmp(tok, "--soft-placement") == 0)
            o->soft_placement = 1;
        else if (strcmp(tok, "--devices") == 0)
            o->devices = strtok(NULL, " ");
        else if (strcmp(tok, "--set") != 0 && eq && o->n_params < MAX_ARGS) {
            *eq = 0;
            ps[o->n_params++] = (gr_param){tok, eq + 1};
        }
    }
}

/* Compiles DIR/NAME.graph and returns the status message, or the
 * warnings of a case that compiles. */
static char *run_case(const char *dir, const char *name)
{
    char path[512], args[512];
    size_t len;
    snprintf(path, sizeof path, "%s/%s.graph", dir, name);
    char *text = read_file(path, &len);
    if (!text) fail_msg("cannot read %s", path);
    gr_param ps[MAX_ARGS];
    gr_compile_options o = {.params = ps};
    case_options(text, args, sizeof args, ps, &o);
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    const char *got =
        gr_compile_file(path, &o, &p, st) == GR_OK ? gr_program_warnings(p) : gr_status_message(st);
    if (!*got) fail_msg("%s: expected errors or warnings, got none", path);
    char *out = strdup(got);
    gr_program_free(p);
    gr_status_free(st);
    free(text);
    return out;
}

static int check_case(const char *dir, const char *name)
{
    size_t want_len = 0;
    char *got = run_case(dir, name), path[512];
    snprintf(path, sizeof path, "%s/%s.expected", dir, name);
    if (getenv("GR_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        fputs(got, f);
        fclose(f);
    }
    char *want = read_file(path, &want_len);
    int ok = want && want_len == strlen(got) && memcmp(want, got, want_len) == 0;
    if (!ok)
        fprintf(stderr, "--- %s/%s.graph: got ---\n%s--- expected ---\n%s---\n", dir, name, got,
                want ? want : "(no .expected file)\n");
    free(got);
    free(want);
    return ok;
}

static void check_dir(const char *dir, int min_cases)
{
    assert_int_equal(chdir(GR_TEST_DIR), 0);
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    int n = 0, bad = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".graph") != 0) continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 6), e->d_name);
        bad += !check_case(dir, name);
        n++;
    }
    closedir(dp);
    assert_true(n >= min_cases);
    assert_int_equal(bad, 0);
}

static void test_syntax_diagnostics_match_exactly(void **state)
{
    (void)state;
    check_dir("diag", 25);
}

static void test_compile_diagnostics_match_exactly(void **state)
{
    (void)state;
    check_dir("compile", 15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_diagnostics_match_exactly),
        cmocka_unit_test(test_compile_diagnostics_match_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
