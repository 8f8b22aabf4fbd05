/* cmd_check.c - `graphrun check [--emit WHAT] FILE...`: parse, run the
 * compiler's checks (cli_check_semantics) and report every error. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lang/ast.h"

__attribute__((weak)) int cli_check_semantics(const ast_tree *t, gr_diags *d, const char *emit)
{
    (void)t;
    (void)d;
    if (!emit) return CLI_OK;
    fprintf(stderr, "graphrun check: --emit %s is not available yet (try --emit ast)\n", emit);
    return CLI_USAGE;
}

static void check_usage(FILE *out)
{
    fputs("usage: graphrun check [--emit ast] FILE...\n", out);
}

static int check_tree(const ast_tree *t, gr_diags *d, const char *emit)
{
    int is_ast = emit && strcmp(emit, "ast") == 0;
    int rc = cli_check_semantics(t, d, is_ast ? NULL : emit);
    if (rc == CLI_OK && d->n_errors) rc = CLI_FAILED;
    if (rc == CLI_OK && is_ast) ast_dump(t, stdout);
    return rc;
}

/* Returns CLI_OK, CLI_FAILED (errors in the file) or CLI_USAGE. */
static int check_file(const char *path, const char *emit)
{
    char err[512];
    gr_source *src = src_load(path, err, sizeof err);
    if (!src) {
        fprintf(stderr, "graphrun: %s\n", err);
        return CLI_USAGE;
    }
    gr_diags d;
    diag_init(&d);
    ast_tree *t = ps_parse(src, &d);
    int rc = d.n_errors ? CLI_FAILED : check_tree(t, &d, emit);
    diag_print(&d, stderr);
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return rc;
}

/* Returns CLI_OK, CLI_USAGE, or -1 after --help. */
static int parse_options(int argc, char **argv, const char **emit)
{
    static const struct option opts[] = {
        {"emit", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            check_usage(stdout);
            return -1;
        }
        if (c != 'e') return CLI_USAGE;
        *emit = optarg;
    }
    if (optind >= argc) {
        fputs("graphrun check: no input file\n", stderr);
        return CLI_USAGE;
    }
    return CLI_OK;
}

int cmd_check(int argc, char **argv)
{
    const char *emit = NULL;
    int rc = parse_options(argc, argv, &emit);
    if (rc < 0) return CLI_OK;
    if (rc != CLI_OK) {
        check_usage(stderr);
        return rc;
    }
    for (int i = optind; i < argc; i++) {
        int r = check_file(argv[i], emit);
        if (r > rc) rc = r;
    }
    return rc;
}
