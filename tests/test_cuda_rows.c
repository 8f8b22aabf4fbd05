/* test_cuda_rows.c - the CUDA kernel table, checked from its source in the
 * CPU suite (no nvcc, no GPU): the rows of every family in
 * devices/cuda/k_*.cu, {OP_X, kernel} up to {OP_COUNT, NULL}, give every op
 * of OPS_LIST a kernel but the sources and the ops CUDA_NO_ROW (cuda.h)
 * names; no op has two rows; every family is merged by kernels.cu. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/ops.h"
#include "devices/cuda/cuda.h"

#define CUDA_DIR GR_SOURCE_DIR "/devices/cuda"

static const char *const op_ids[OP_COUNT] = {
#define OP_ID(id, name) [OP_##id] = #id,
    OPS_LIST(OP_ID)
#undef OP_ID
};

static int no_row[OP_COUNT] = {
#define NO_ROW(id) [OP_##id] = 1,
    CUDA_NO_ROW(NO_ROW)
#undef NO_ROW
};

/* What the families say: rows per op, and the problems met reading them. */
static int rows[OP_COUNT];
static int n_families, problems;

/* The file's text with its comments blanked, so a commented-out row is no
 * row. */
static char *read_code(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    s[n] = 0;
    for (char *p = s; *p; p++) {
        char *end = NULL;
        if (p[0] == '/' && p[1] == '/') end = strchr(p, '\n');
        if (p[0] == '/' && p[1] == '*') {
            end = strstr(p + 2, "*/");
            end = end ? end + 2 : p + strlen(p);
        }
        if (!end) continue;
        memset(p, ' ', (size_t)(end - p));
        p = end - 1;
    }
    return s;
}

static int op_of(const char *id, size_t len)
{
    for (int op = 0; op < OP_COUNT; op++)
        if (strlen(op_ids[op]) == len && strncmp(op_ids[op], id, len) == 0) return op;
    return -1;
}

/* The family's name (len bytes at name) appears in kernels.cu as a whole
 * word. */
static int merged(const char *kernels, const char *name, size_t len)
{
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)len, name);
    for (const char *p = kernels; (p = strstr(p, word)) != NULL; p++)
        if (!isalnum((unsigned char)p[len]) && p[len] != '_') return 1;
    return 0;
}

/* The rows of the array that opens at body, up to {OP_COUNT, NULL}. */
static void read_rows(const char *file, const char *body)
{
    const char *end = strstr(body, "};");
    assert_non_null(end);
    for (const char *p = body; (p = strstr(p, "{OP_")) != NULL && p < end; p++) {
        const char *id = p + 4;
        size_t len = 0;
        while (isalnum((unsigned char)id[len]) || id[len] == '_') len++;
        if (len == 5 && strncmp(id, "COUNT", 5) == 0) return;
        int op = op_of(id, len);
        if (op < 0) {
            print_error("%s: OP_%.*s is not in OPS_LIST\n", file, (int)len, id);
            problems++;
            continue;
        }
        rows[op]++;
    }
    print_error("%s: a family without {OP_COUNT, NULL}\n", file);
    problems++;
}

static void read_family_file(const char *file, const char *kernels)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", CUDA_DIR, file);
    char *s = read_code(path);
    static const char intro[] = "const cuda_row cuda_rows_";
    for (char *p = s; (p = strstr(p, intro)) != NULL; p++) {
        const char *name = p + strlen("const cuda_row ");
        size_t len = strcspn(name, "[ ");
        char *body = strchr(p, '{');
        assert_non_null(body);
        n_families++;
        if (!merged(kernels, name, len)) {
            print_error("%s: %.*s is not merged by kernels.cu\n", file, (int)len, name);
            problems++;
        }
        read_rows(file, body);
    }
    free(s);
}

/* Once, for every test. */
static void read_families(void)
{
    static int done;
    if (done++) return;
    char *kernels = read_code(CUDA_DIR "/kernels.cu");
    DIR *d = opendir(CUDA_DIR);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "k_", 2) == 0 && n > 3 && strcmp(e->d_name + n - 3, ".cu") == 0)
            read_family_file(e->d_name, kernels);
    }
    closedir(d);
    free(kernels);
}

static void test_every_family_is_read_and_merged(void **state)
{
    (void)state;
    read_families();
    assert_true(n_families >= 7);
    assert_int_equal(problems, 0);
}

/* A source has no kernel anywhere; an op CUDA_NO_ROW names has none here,
 * for the reason given there; every other op has exactly one row. */
static void test_every_op_has_one_cuda_row_or_a_stated_reason(void **state)
{
    (void)state;
    read_families();
    int bad = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        int want = !ops_has(op, OPF_SOURCE) && !no_row[op];
        if (rows[op] == want) continue;
        if (rows[op] > 1)
            print_error("%s has %d CUDA rows (devices/cuda/k_*.cu)\n", ops_name(op), rows[op]);
        else if (want)
            print_error("%s has no CUDA row: give it one in devices/cuda/k_*.cu, or name it in "
                        "CUDA_NO_ROW (devices/cuda/cuda.h) with the reason\n",
                        ops_name(op));
        else
            print_error("%s has a CUDA row but is %s\n", ops_name(op),
                        no_row[op] ? "in CUDA_NO_ROW" : "a source");
        bad++;
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_family_is_read_and_merged),
        cmocka_unit_test(test_every_op_has_one_cuda_row_or_a_stated_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
