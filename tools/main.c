/* main.c - `graphrun`: dispatches to a subcommand, or trains when the first
 * argument is a file.  Adding a subcommand = one line in `commands`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} cli_command;

static const cli_command commands[] = {
    {"check", cmd_check, "check [--emit ast|ir|plan|dot] FILE...  report errors without running"},
    {"dot", cmd_dot,
     "dot FILE                    Graphviz: a cluster per device, transfers in red"},
    {"fmt", cmd_fmt,
     "fmt [-w | --check] FILE...  print, rewrite (-w) or check FILEs' canonical form"},
    {"inspect", cmd_inspect,
     "inspect [--json] FILE.safetensors  a checkpoint's metadata and tensor statistics"},
    {"plot", cmd_plot,
     "plot RUN.jsonl... [-o OUT.svg] [--log-y] [--smooth S]  chart the curves of --log files"},
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void usage(FILE *out)
{
    fputs("usage: graphrun FILE.graph --steps N [options]  train the model in FILE (FILE --help: "
          "options)\n",
          out);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(out, "       graphrun %s\n", commands[i].help);
    fputs("       graphrun --help | --version\n", out);
}

/* Runs graphrun again, once, with OPENBLAS_CORETYPE set when OpenBLAS fell
 * back to its generic kernels on a CPU that has better ones (a GEMM runs
 * about 4x faster).  If the exec fails, the generic kernels stay. */
static void tune_blas(char **argv)
{
    const char *core = NULL;
    gr_blas_kernels(&core);
    if (!core || setenv("OPENBLAS_CORETYPE", core, 0) != 0) return;
    execv("/proc/self/exe", argv);
}

/* What a command printed must have reached standard output: a write error
 * there (`graphrun fmt m.graph > out.graph` on a full disk) fails the
 * command, as one to a file it writes does. */
static int stdout_done(int rc)
{
    errno = 0;
    int failed = fflush(stdout) != 0;
    int err = errno;
    if (!failed && !ferror(stdout)) return rc;
    fprintf(stderr, "graphrun: error: standard output: %s\n",
            failed && err ? strerror(err) : "a write failed");
    return rc != CLI_OK ? rc : CLI_FAILED;
}

static int run_command(int argc, char **argv)
{
    tune_blas(argv);
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *a = argv[1];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(a, "--version") == 0) {
        printf("graphrun %s (OpenBLAS kernels: %s)\n", gr_version(), gr_blas_kernels(NULL));
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(a, commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    if (a[0] == '-') {
        fprintf(stderr, "graphrun: unknown option '%s'\n", a);
        usage(stderr);
        return CLI_USAGE;
    }
    return cmd_train(argc, argv);
}

int main(int argc, char **argv)
{
    return stdout_done(run_command(argc, argv));
}
