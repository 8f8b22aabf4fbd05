/* cli.h - the graphrun command line: one function per subcommand.
 *
 * tools/main.c dispatches on argv[1]; each cmd_* gets argc/argv with argv[0]
 * the subcommand and returns the process exit status: 0 ok, 1 a problem
 * with the model or its data, 2 usage (unknown option, missing file; the
 * whole rule: cli_exit_rule in cli_opts.c).  The CLI uses only the public
 * API, include/graphrun.h. */
#ifndef GR_CLI_H
#define GR_CLI_H

#include "graphrun.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

int cmd_check(int argc, char **argv);
int cmd_dot(int argc, char **argv);
int cmd_fmt(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
/* `graphrun plot`: SVG charts of --log files (cmd_plot.c, plot_svg.c). */
int cmd_plot(int argc, char **argv);
/* `graphrun launch -np N FILE ...`: mpirun with the flags it needs (cmd_launch.c). */
int cmd_launch(int argc, char **argv);
/* `graphrun FILE.graph [options]`: trains (tools/cmd_train.c). */
int cmd_train(int argc, char **argv);

#define CLI_MAX_PARAMS 64
typedef struct cli_params {
    gr_param v[CLI_MAX_PARAMS];
    int n;
} cli_params;

/* Adds NAME=VALUE (splitting arg in place); -1 when malformed or full. */
int cli_add_param(cli_params *ps, char *arg);
/* Prints a failed call's status on stderr: diagnostics as they are, other
 * errors as "graphrun: error: MESSAGE". */
void cli_print_status(const gr_status *st);
/* Set by --distributed ("rank 1: "): cli_print_status starts each message with it. */
extern const char *cli_rank_prefix;
/* cli_mpi.c: MPI_Init_thread for --distributed, with this process's rank and
 * the number of processes (-1 after printing why not); at the end, rc
 * becomes the exit status: MPI_Finalize, or MPI_Abort of the whole job when
 * rc != 0.  cli_mpi_note: the note for a process mpirun started without
 * --distributed (printed by rank 0 only). */
int cli_mpi_start(int *argc, char ***argv, int *rank, int *size);
int cli_mpi_end(int rc);
void cli_mpi_note(void);
/* --distributed, after the session opens: every rank gives the options that
 * decide its collectives (--target, --steps, --eval, --eval-every, the
 * checkpoint and restore policy) as rank 0 does (gr_session_dist_agree);
 * -1 after printing the difference (every rank does, then ends without
 * aborting the job).  0 without --distributed. */
struct train_opts;
int cli_mpi_agree(const struct train_opts *o, gr_session *s, gr_status *st);
/* --backup, after the last step: every rank ended at rank 0's step (a
 * collective, so a rank that stalled ends the job with a message naming
 * it, rather than MPI_Finalize waiting for it); -1 after printing why. */
int cli_mpi_done(const struct train_opts *o, gr_session *s, gr_status *st);
/* gr_session_new failed with st: when every process failed so together
 * (their options, graphs or initial variables differ: GR_ERR_ARG,
 * "distributed: rank R ..."; include/graphrun.h), each ends by itself after
 * printing why, instead of aborting the job before the others have. */
void cli_mpi_session_failed(const gr_status *st);
/* --distributed, once the number of processes is known: --backup B and
 * --slow R:F's rank below it.  2 after rank 0 printed the usage error
 * (every rank ends by itself, without aborting the job), else 0. */
int cli_mpi_check(const struct train_opts *o, int size);
/* The seconds this process has spent other than communicating (a clock
 * for --slow), and after a step begun at busy0, --slow R:F's sleep on
 * rank R: F - 1 times that step's own time. */
double cli_mpi_busy(const gr_session *s);
void cli_mpi_slow(const struct train_opts *o, const gr_session *s, double busy0);
/* The exit status for a failed library call (the rule: cli_opts.c,
 * cli_exit_rule): a file named on the command line that cannot be read
 * (GR_ERR_IO) and a name the model lacks (GR_ERR_ARG: --target, --eval) are
 * usage, 2; the rest is the model's or its data's, 1. */
int cli_exit_code(gr_code c);
/* The names among cands (n of them) that word may have meant, at most
 * max, into out; their count: those word is a prefix of (--step: --steps)
 * or that are a prefix of it, then the closest by edit distance
 * (gr_suggest: --stpes, chekc). */
int cli_suggest(const char *word, const char *const *cands, int n, const char **out, int max);
/* "; did you mean 'PRE a', 'PRE b' or 'PRE c'?" for cli_suggest's k picks
 * (nothing when k is 0): the tail of an unknown-name line. */
void cli_print_near(FILE *out, const char *pre, const char *const *near, int k);
/* A training rate for people: "12 steps/s", and below 1 step/s the
 * seconds a step takes, "3.25 s/step" (never "0 steps/s"); returns buf. */
const char *cli_rate(double steps_per_s, char *buf, size_t n);
/* Opens path for reading if it is a regular file (a FIFO or a device never
 * blocks the open), else NULL with *why saying why not. */
FILE *cli_open_regular(const char *path, const char **why);
/* Reads f to its end into a malloc'd, NUL-terminated *text: 0, -1 on a
 * read error (errno set), -2 when f holds more than CLI_MAX_INPUT bytes
 * (it is not read further: standard input may never end). */
#define CLI_MAX_INPUT ((size_t)64 << 20)
int cli_read_all(FILE *f, char **text, size_t *len);
/* cli_out.c: a file a command reads or writes, and what it is for
 * messages ("--log", "the model file"). */
typedef struct cli_file {
    const char *path; /* NULL: none (skipped) */
    const char *what;
} cli_file;
/* Whether a and b name the same file: the same device and inode after
 * following links, or, for files not there yet, the same name in the same
 * folder.  Spelling does not matter ("x", "./x", a link to x). */
int cli_same_file(const char *a, const char *b);
/* 0 when no output is one of the inputs or inside an input that is a
 * folder (text() reads every file in one) and no two outputs are the same
 * file; else -1 after printing which ones. */
int cli_check_outputs(const cli_file *outs, int n_outs, const cli_file *ins, int n_ins);
/* 0 when path can be written as an output now (a gr_output opened and
 * discarded: a regular file, a link to one, or new, in a folder that takes
 * a temporary file); else -1 after printing why. */
int cli_probe_output(const char *path);
/* Prints a unified diff from a to b (lines, 3 of context), headed
 * "--- a/NAME" and "+++ b/NAME" (cli_diff.c). */
void cli_diff(const char *name, const char *a, size_t alen, const char *b, size_t blen, FILE *out);

#endif
