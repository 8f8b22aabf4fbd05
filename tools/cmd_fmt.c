/* cmd_fmt.c - `graphrun fmt FILE`: print the canonical form on stdout.
 * Nothing is printed for a file with errors, so a redirect never keeps a
 * half-formatted program. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "lang/ast.h"

static int fmt_file(const char *path)
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
    if (rc == CLI_OK) ast_print(t->root, stdout);
    ast_free(t);
    diag_free(&d);
    src_free(src);
    return rc;
}

int cmd_fmt(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') {
            puts("usage: graphrun fmt FILE");
            return CLI_OK;
        }
        fputs("usage: graphrun fmt FILE\n", stderr);
        return CLI_USAGE;
    }
    if (argc - optind != 1) {
        fputs("usage: graphrun fmt FILE\n", stderr);
        return CLI_USAGE;
    }
    return fmt_file(argv[optind]);
}
