/* cmd_fmt.c - `graphrun fmt FILE`: print the canonical form on stdout.
 * Nothing is printed for a file with errors, so a redirect never keeps a
 * half-formatted program. */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

int cmd_fmt(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h') return puts("usage: graphrun fmt FILE"), CLI_OK;
        return fputs("usage: graphrun fmt FILE\n", stderr), CLI_USAGE;
    }
    if (argc - optind != 1) return fputs("usage: graphrun fmt FILE\n", stderr), CLI_USAGE;
    gr_status *st = gr_status_new();
    gr_code code = gr_format_file(argv[optind], stdout, st);
    if (code != GR_OK) cli_print_status(st);
    gr_status_free(st);
    return cli_exit_code(code);
}
