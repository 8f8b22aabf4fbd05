/* cmd_check.c - `graphrun check [options] FILE...`: compile each file (all
 * checks: syntax, names, shapes, dtypes, reuse, devices, --set) and report
 * every error without running anything; optionally dump a stage.  Also
 * `graphrun dot FILE`, the Graphviz dump. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct check_opts {
    const char *emit, *target;
    cli_params params;
    gr_compile_options comp;
} check_opts;

static const char check_help[] =
    "usage: graphrun check [options] FILE...\n"
    "  --emit WHAT        also print a stage: ast, ir, plan or dot\n"
    "  --target NAME      the target --emit plan lays out (default: the last .minimize())\n"
    "  --set NAME=VALUE   override a param (repeatable)\n"
    "  --devices SPEC     the devices to compile for, e.g. cpu:0-1,gpu:0 (sim:N: simulated\n"
    "                     GPUs; each kind numbered 0 to 15); default: this machine's\n"
    "  --soft-placement   accept nodes on missing devices or without a kernel there (cpu:0)\n"
    "  --cpu-as-gpu       compile what is placed on cpu:N for gpu:(N mod GPUs), data\n"
    "                     sources excepted (no effect without a GPU)\n";

static int valid_emit(const char *e)
{
    return !e || !strcmp(e, "ast") || !strcmp(e, "ir") || !strcmp(e, "plan") || !strcmp(e, "dot");
}

/* Returns CLI_OK, CLI_USAGE, or -1 after --help. */
static int parse_check_opts(int argc, char **argv, check_opts *o)
{
    enum { O_EMIT = 256, O_TARGET, O_SET, O_SOFT, O_DEVICES, O_CPU_AS_GPU };
    static const struct option longs[] = {{"emit", 1, 0, O_EMIT},
                                          {"target", 1, 0, O_TARGET},
                                          {"set", 1, 0, O_SET},
                                          {"soft-placement", 0, 0, O_SOFT},
                                          {"cpu-as-gpu", 0, 0, O_CPU_AS_GPU},
                                          {"devices", 1, 0, O_DEVICES},
                                          {"help", 0, 0, 'h'},
                                          {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == 'h') return fputs(check_help, stdout), -1;
        if (c == O_EMIT)
            o->emit = optarg;
        else if (c == O_TARGET)
            o->target = optarg;
        else if (c == O_SOFT)
            o->comp.soft_placement = 1;
        else if (c == O_CPU_AS_GPU)
            o->comp.cpu_as_gpu = 1;
        else if (c == O_DEVICES)
            o->comp.devices = optarg;
        else if (c != O_SET || cli_add_param(&o->params, optarg) < 0)
            return CLI_USAGE;
    }
    if (!valid_emit(o->emit)) {
        fprintf(stderr, "graphrun check: unknown --emit '%s' (ast, ir, plan or dot)\n", o->emit);
        return CLI_USAGE;
    }
    if (optind >= argc) {
        fputs("graphrun check: no input file\n", stderr);
        return CLI_USAGE;
    }
    o->comp.params = o->params.v;
    o->comp.n_params = o->params.n;
    return CLI_OK;
}

static int check_file(const char *path, const check_opts *o)
{
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_code c = gr_compile_file(path, &o->comp, &p, st);
    if (c != GR_OK)
        cli_print_status(st);
    else
        fputs(gr_program_warnings(p), stderr);
    if (c == GR_OK && o->emit && (c = gr_program_emit(p, o->emit, o->target, stdout, st)) != GR_OK)
        cli_print_status(st);
    gr_program_free(p);
    gr_status_free(st);
    return cli_exit_code(c);
}

static int check_all(int argc, char **argv, check_opts *o)
{
    int rc = parse_check_opts(argc, argv, o);
    if (rc < 0) return CLI_OK;
    if (rc != CLI_OK) return fputs(check_help, stderr), rc;
    for (int i = optind; i < argc; i++) {
        int r = check_file(argv[i], o);
        if (r > rc) rc = r;
    }
    return rc;
}

int cmd_check(int argc, char **argv)
{
    check_opts o = {0};
    return check_all(argc, argv, &o);
}

int cmd_dot(int argc, char **argv)
{
    check_opts o = {.emit = "dot"};
    return check_all(argc, argv, &o);
}
