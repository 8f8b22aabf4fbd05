/* fuzz_parser.c - libFuzzer target: any bytes through the whole front end.
 * Parses, and for inputs without errors prints, re-parses and checks the
 * round trip, so printer bugs show up as crashes too. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "lang/ast.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_roundtrip(const ast_tree *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ast_print(t->root, f);
    fclose(f);
    src_file *src = src_from_string("printed", text, len);
    diag_list d;
    diag_init(&d);
    ast_tree *t2 = ps_parse(src, &d);
    if (d.n_errors || !ast_equal(t->root, t2->root)) {
        fprintf(stderr, "round trip failed for printed text:\n%s\n", text);
        diag_print(&d, stderr);
        abort();
    }
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
