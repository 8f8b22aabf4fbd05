/* cli_util.c - option helpers shared by the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_add_param(cli_params *ps, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || ps->n == CLI_MAX_PARAMS) return -1;
    *eq = 0;
    ps->v[ps->n++] = (gr_param){arg, eq + 1};
    return 0;
}

int cli_exit_code(gr_code c)
{
    if (c == GR_OK) return CLI_OK;
    return c == GR_ERR_IO || c == GR_ERR_ARG ? CLI_USAGE : CLI_FAILED;
}

void cli_print_status(const gr_status *st)
{
    const char *msg = gr_status_message(st);
    if (gr_status_location(st, NULL, NULL, NULL) || strstr(msg, ": error: "))
        fputs(msg, stderr); /* a diagnostic: it names its file and line */
    else
        fprintf(stderr, "graphrun: error: %s", msg);
}
