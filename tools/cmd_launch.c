/* cmd_launch.c - `graphrun launch -np N FILE [training options]`: runs
 * this graphrun on N processes under Open MPI's mpirun, with the flags a
 * fresh machine needs: --oversubscribe when N is more than its cores
 * (mpirun refuses by default), --allow-run-as-root as root (mpirun refuses
 * root by default).  docs/distributed.md. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_opts.h"

enum { O_NP = 'n', O_DRY_RUN = 256, O_MPIRUN };

static const cli_opt launch_table[] = {
    {"np", O_NP, "N",
     "the number of processes, 1 to 4096 (also written -np N, as mpirun\n"
     "spells it)",
     CLI_V_NONE, NULL},
    {"mpirun", O_MPIRUN, "PATH", "the mpirun to run (default: mpirun on the PATH)", CLI_V_FILE,
     NULL},
    {"dry-run", O_DRY_RUN, NULL, "print the mpirun command instead of running it", CLI_V_NONE,
     NULL},
};

const cli_spec cli_launch_spec = {
    "launch",
    "launch -np N FILE --steps N [options]",
    "train on N processes under mpirun (--oversubscribe, root)",
    "Runs graphrun FILE [options] on N processes through Open MPI's mpirun, adding\n"
    "--oversubscribe when N is more than this machine's cores and --allow-run-as-root\n"
    "when run as root; give the training --distributed sync or async (without it each\n"
    "process trains a model of its own).  The launch options come before FILE;\n"
    "everything from FILE on is the training command line.\n",
    launch_table,
    sizeof launch_table / sizeof *launch_table,
    "*.graph",
    "Example: graphrun launch -np 4 examples/fashion_mlp.graph --steps 2000 --distributed sync\n",
};

/* The launch options, up to FILE: -np N (mpirun's spelling) is read as
 * --np N.  Returns the index of FILE, or -1 after --help, or -2 after a
 * usage error (printed). */
static int parse_launch(int argc, char **argv, long *np, const char **mpirun, int *dry)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return i + 1;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_print_help(&cli_launch_spec, stdout);
            return -1;
        }
        if (strcmp(a, "--dry-run") == 0) {
            *dry = 1;
            continue;
        }
        int is_np = !strcmp(a, "-np") || !strcmp(a, "-n") || !strcmp(a, "--np");
        if (!is_np && strcmp(a, "--mpirun") != 0) {
            const char *names[] = {"np", "mpirun", "dry-run", "help"}, *near[1];
            int k = strncmp(a, "--", 2) == 0 ? cli_suggest(a + 2, names, 4, near, 1) : 0;
            if (k)
                return cli_usage_error(&cli_launch_spec,
                                       "unknown option '%s'; did you mean '--%s'?", a, near[0]),
                       -2;
            return cli_usage_error(&cli_launch_spec, "unknown option '%s'", a), -2;
        }
        if (i + 1 >= argc) return cli_usage_error(&cli_launch_spec, "%s needs a value", a), -2;
        const char *v = argv[++i];
        if (!is_np) {
            *mpirun = v;
            continue;
        }
        char *end;
        errno = 0;
        *np = strspn(v, "0123456789") == strlen(v) ? strtol(v, &end, 10) : -1;
        if (!*v || errno || *np < 1 || *np > 4096)
            return cli_usage_error(&cli_launch_spec, "%s '%.64s': takes an integer in [1, 4096]", a,
                                   v),
                   -2;
    }
    if (*np < 1) return cli_usage_error(&cli_launch_spec, "-np N is required"), -2;
    if (i >= argc) return cli_usage_error(&cli_launch_spec, "no FILE given"), -2;
    return i;
}

int cmd_launch(int argc, char **argv)
{
    long np = 0;
    const char *mpirun = "mpirun";
    int dry = 0, file = parse_launch(argc, argv, &np, &mpirun, &dry);
    if (file == -1) return CLI_OK;
    if (file < 0) return CLI_USAGE;
    char self[PATH_MAX], nbuf[24];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return fprintf(stderr, "graphrun launch: cannot find this program\n"), CLI_FAILED;
    self[n] = 0;
    snprintf(nbuf, sizeof nbuf, "%ld", np);
    char **args = calloc((size_t)argc + 8, sizeof *args);
    if (!args) return fputs("graphrun: error: out of memory\n", stderr), CLI_FAILED;
    int k = 0;
    args[k++] = (char *)mpirun;
    if (geteuid() == 0) args[k++] = "--allow-run-as-root";
    if (np > sysconf(_SC_NPROCESSORS_ONLN)) args[k++] = "--oversubscribe";
    args[k++] = "-np";
    args[k++] = nbuf;
    args[k++] = self;
    for (int i = file; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    if (dry) {
        for (int i = 0; i < k; i++) printf("%s%s", i ? " " : "", args[i]);
        putchar('\n');
        free(args);
        return CLI_OK;
    }
    fflush(stdout);
    execvp(mpirun, args);
    fprintf(stderr,
            "graphrun launch: cannot run %s: %s (install openmpi-bin, or name it with "
            "--mpirun)\n",
            mpirun, strerror(errno));
    free(args);
    return CLI_FAILED;
}
