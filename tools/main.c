/* main.c - `graphrun`: dispatches to a subcommand, or trains when the first
 * argument is a file.  Adding a subcommand = one line in `commands` and its
 * cli_spec (cli_opts.h), which --help, the man page and the completion read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"

typedef struct cli_command {
    const cli_spec *spec;
    int (*run)(int argc, char **argv);
} cli_command;

static int cmd_completion(int argc, char **argv);
static int cmd_man(int argc, char **argv);

static const cli_command commands[] = {
    {&cli_check_spec, cmd_check},
    {&cli_dot_spec, cmd_dot},
    {&cli_fmt_spec, cmd_fmt},
    {&cli_inspect_spec, cmd_inspect},
    {&cli_plot_spec, cmd_plot},
    {&cli_launch_spec, cmd_launch},
    {&cli_completion_spec, cmd_completion},
    {&cli_man_spec, cmd_man},
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

const cli_spec cli_completion_spec = {
    "completion",
    "completion bash|zsh",
    "print the shell completion script",
    "Prints a script that completes graphrun's commands, options, files and the targets\n"
    "and params of the .graph file on the line.  Load it with\n"
    "  source <(graphrun completion bash)      (or zsh), e.g. from ~/.bashrc\n",
    NULL,
    0,
    NULL,
    NULL,
};

const cli_spec cli_man_spec = {
    "man",
    "man",
    "print the man page (roff; from the tables --help prints)",
    "View it with: graphrun man | man -l -\n",
    NULL,
    0,
    NULL,
    NULL,
};

static void usage(FILE *out)
{
    fprintf(out, "usage: graphrun %-28s %s\n", cli_train_spec.usage, "train the model in FILE");
    for (size_t i = 0; i < N_COMMANDS; i++) {
        const cli_spec *s = commands[i].spec;
        if (strlen(s->usage) > 28) /* the summary on a line of its own */
            fprintf(out, "       graphrun %s\n%45s%s\n", s->usage, "", s->summary);
        else
            fprintf(out, "       graphrun %-28s %s\n", s->usage, s->summary);
    }
    fputs("       graphrun --help | --version\n"
          "graphrun FILE --help and graphrun COMMAND --help list the options.\n",
          out);
    fputs(cli_exit_rule, out);
}

static int cmd_completion(int argc, char **argv)
{
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, &cli_completion_spec)) != CLI_OPT_END)
        return c == CLI_OPT_HELP ? CLI_OK : CLI_USAGE;
    if (optind != argc - 1)
        return cli_usage_error(&cli_completion_spec, "name one shell: bash or zsh");
    if (cli_print_completion(argv[optind], stdout) < 0)
        return cli_usage_error(&cli_completion_spec, "unknown shell '%s' (bash or zsh)",
                               argv[optind]);
    return CLI_OK;
}

static int cmd_man(int argc, char **argv)
{
    int c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, &cli_man_spec)) != CLI_OPT_END)
        return c == CLI_OPT_HELP ? CLI_OK : CLI_USAGE;
    if (optind != argc) return cli_usage_error(&cli_man_spec, "takes no arguments");
    cli_print_man(stdout);
    return CLI_OK;
}

/* --version: what this graphrun was built with. */
static void version(void)
{
    const char *better = NULL, *kernels = gr_blas_kernels(&better);
    printf("graphrun %s\n", gr_version());
    printf("devices: cpu, sim (simulated GPUs)%s\n",
#ifdef GR_HAVE_CUDA
           ", gpu (CUDA)"
#else
           ""
#endif
    );
    /* "OpenBLAS kernels: NAME" as before: bench/run.sh reads it */
    printf("BLAS: OpenBLAS kernels: %s%s%s%s\n", kernels, better ? " (this CPU can run " : "",
           better ? better : "", better ? ")" : "");
#ifdef GR_HAVE_CUDA
    puts("CUDA: yes (cuBLAS is opened when a GPU is first used)");
#else
    puts("CUDA: no (configure with -DGR_CUDA=ON where nvcc is installed)");
#endif
#ifdef GR_HAVE_MPI
    puts("MPI: yes (--distributed, under mpirun)");
#else
    puts("MPI: no (install libopenmpi-dev and configure with -DGR_MPI=ON)");
#endif
}

/* argv[1] is neither an option nor a command: a file to train, unless it
 * looks like a mistyped command (no such file, no '/' or '.'). */
static int unknown_command(const char *a)
{
    if (strpbrk(a, "/.") || access(a, F_OK) == 0) return 0;
    const char *names[N_COMMANDS], *near[3];
    for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].spec->name;
    fprintf(stderr, "graphrun: unknown command '%s'", a);
    cli_print_near(stderr, "", near, cli_suggest(a, names, (int)N_COMMANDS, near, 3));
    fputs(" (graphrun --help lists the commands; a model file is FILE.graph)\n", stderr);
    return 1;
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
        version();
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(a, commands[i].spec->name) == 0) return commands[i].run(argc - 1, argv + 1);
    if (a[0] == '-') {
        const char *names[] = {"help", "version"}, *near[2];
        int k = strncmp(a, "--", 2) == 0 ? cli_suggest(a + 2, names, 2, near, 2) : 0;
        fprintf(stderr, "graphrun: unknown option '%s'", a);
        if (k) fprintf(stderr, "; did you mean '--%s'?", near[0]);
        fputs(" (graphrun --help lists the commands; options follow FILE or COMMAND)\n", stderr);
        return CLI_USAGE;
    }
    if (unknown_command(a)) return CLI_USAGE;
    return cmd_train(argc, argv);
}

int main(int argc, char **argv)
{
    return stdout_done(run_command(argc, argv));
}
