/* cmd_check.c - `graphrun check [options] FILE...`: compile each file (all
 * checks: syntax, names, shapes, dtypes, reuse, devices, --set) and report
 * every error without running anything; optionally dump a stage.  Also
 * `graphrun dot FILE`, the Graphviz dump. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

typedef struct check_opts {
    const char *emit, *target;
    cli_params params;
    gr_compile_options comp;
} check_opts;

enum { O_EMIT = 256, O_TARGET, O_SET, O_SOFT, O_DEVICES, O_CPU_AS_GPU };

/* What check and dot share: compiling. */
#define COMPILE_OPTS                                                                               \
    {"set", O_SET, "NAME=VALUE", "override a param (repeatable)", CLI_V_PARAM, NULL},              \
        {"devices",                                                                                \
         O_DEVICES,                                                                                \
         "SPEC",                                                                                   \
         "the devices to compile for, e.g. cpu:0-1,gpu:0 (sim:N: simulated\n"                      \
         "GPUs; each kind numbered 0 to 15); default: this machine's",                             \
         CLI_V_NONE,                                                                               \
         NULL},                                                                                    \
        {"soft-placement",                                                                         \
         O_SOFT,                                                                                   \
         NULL,                                                                                     \
         "accept nodes on missing devices or without a kernel there (cpu:0)",                      \
         CLI_V_NONE,                                                                               \
         NULL},                                                                                    \
    {                                                                                              \
        "cpu-as-gpu", O_CPU_AS_GPU, NULL,                                                          \
            "compile what is placed on cpu:N for gpu:(N mod GPUs), data\n"                         \
            "sources excepted (no effect without a GPU)",                                          \
            CLI_V_NONE, NULL                                                                       \
    }

static const cli_opt check_table[] = {
    {"emit", O_EMIT, "WHAT", "also print a stage: ast, ir, plan or dot", CLI_V_WORDS,
     "ast ir plan dot"},
    {"target", O_TARGET, "NAME", "the target --emit plan lays out (default: the last .minimize())",
     CLI_V_TARGET, NULL},
    COMPILE_OPTS,
};

static const cli_opt dot_table[] = {COMPILE_OPTS};

const cli_spec cli_check_spec = {
    "check",
    "check [options] FILE...",
    "report errors without running",
    "Compiles each FILE (syntax, names, shapes, dtypes, reuse, devices, --set) and reports\n"
    "every error without running anything.\n",
    check_table,
    sizeof check_table / sizeof *check_table,
    "*.graph",
    NULL,
};

const cli_spec cli_dot_spec = {
    "dot",
    "dot [options] FILE...",
    "Graphviz: a cluster per device, transfers in red",
    "Prints the compiled graph of FILE for Graphviz (graphrun dot m.graph | dot -Tsvg).\n",
    dot_table,
    sizeof dot_table / sizeof *dot_table,
    "*.graph",
    NULL,
};

static int valid_emit(const char *e)
{
    return !e || !strcmp(e, "ast") || !strcmp(e, "ir") || !strcmp(e, "plan") || !strcmp(e, "dot");
}

/* Returns CLI_OK, CLI_USAGE, or -1 after --help. */
static int parse_check_opts(int argc, char **argv, const cli_spec *spec, check_opts *o)
{
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, spec)) != CLI_OPT_END) {
        if (c == CLI_OPT_HELP) return -1;
        if (c == CLI_OPT_BAD) return CLI_USAGE;
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
        else if (c == O_SET && cli_add_param(&o->params, optarg) < 0)
            return cli_usage_error(spec, "--set needs NAME=VALUE, got %s", optarg);
    }
    if (!valid_emit(o->emit))
        return cli_usage_error(spec, "unknown --emit '%s' (ast, ir, plan or dot)", o->emit);
    if (optind >= argc) return cli_usage_error(spec, "no input file");
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

static int check_all(int argc, char **argv, const cli_spec *spec, check_opts *o)
{
    int rc = parse_check_opts(argc, argv, spec, o);
    if (rc < 0) return CLI_OK;
    if (rc != CLI_OK) return rc;
    for (int i = optind; i < argc; i++) {
        int r = check_file(argv[i], o);
        if (r > rc) rc = r;
    }
    return rc;
}

int cmd_check(int argc, char **argv)
{
    check_opts o = {0};
    return check_all(argc, argv, &cli_check_spec, &o);
}

int cmd_dot(int argc, char **argv)
{
    check_opts o = {.emit = "dot"};
    return check_all(argc, argv, &cli_dot_spec, &o);
}
