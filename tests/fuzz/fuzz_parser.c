/* fuzz_parser.c - libFuzzer target: any bytes through the whole front end.
 * Parses, and for inputs without errors formats, re-parses and checks
 * that the tree is the same, that every comment came out once, in order,
 * with its text, and that formatting the output changes nothing; so
 * printer bugs show up as crashes too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lang/ast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *format(const ast_tree *t, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    ast_format(t, f);
    fclose(f);
    return text;
}

static void fail(const char *what, const char *text, const diag_list *d)
{
    fprintf(stderr, "%s; formatted text:\n%s\n", what, text);
    diag_print(d, stderr);
    abort();
}

static void check_roundtrip(const ast_tree *t)
{
    size_t len = 0, len2 = 0;
    char *text = format(t, &len);
    src_file *src = src_from_string("printed", text, len);
    diag_list d;
    diag_init(&d);
    ast_tree *t2 = ps_parse(src, &d);
    if (d.n_errors || !ast_equal(t->root, t2->root)) fail("tree changed", text, &d);
    if (!ast_comments_equal(t, t2)) fail("comments changed", text, &d);
    char *text2 = format(t2, &len2);
    if (len != len2 || memcmp(text, text2, len) != 0)
        fail("formatting it again changes it", text, &d);
    free(text2);
    ast_free(t2);
    diag_free(&d);
    src_free(src);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    src_file *src = src_from_string("fuzz.graph", (const char *)data, size);
    if (!src) return 0;
    diag_list d;
    diag_init(&d);
    ast_tree *t = ps_parse(src, &d);
    FILE *sink = fopen("/dev/null", "w");
    if (sink) {
        diag_print(&d, sink);
        if (t) ast_dump(t, sink);
        fclose(sink);
    }
    if (t && t->root && d.n_errors == 0) check_roundtrip(t);
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return 0;
}
