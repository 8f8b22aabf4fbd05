/* cmd_check.c - `graphrun check [--emit ast] FILE...`: parse and report. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lang/ast.h"

static void check_usage(FILE *out)
{
    fputs("usage: graphrun check [--emit ast] FILE...\n", out);
}

/* Returns CLI_OK, CLI_FAILED (errors in the file) or CLI_USAGE (unreadable). */
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
    diag_print(&d, stderr);
    int rc = d.n_errors ? CLI_FAILED : CLI_OK;
    if (rc == CLI_OK && emit && strcmp(emit, "ast") == 0) ast_dump(t, stdout);
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return rc;
}

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
        if (strcmp(optarg, "ast") != 0) {
            fprintf(stderr, "graphrun check: unknown --emit value '%s' (expected: ast)\n", optarg);
            return CLI_USAGE;
        }
        *emit = optarg;
    }
    return CLI_OK;
}

int cmd_check(int argc, char **argv)
{
    const char *emit = NULL;
    int rc = parse_options(argc, argv, &emit);
    if (rc < 0) return CLI_OK;
    if (rc == CLI_OK && optind >= argc) {
        fputs("graphrun check: no input file\n", stderr);
        rc = CLI_USAGE;
    }
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
