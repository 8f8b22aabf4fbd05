/* cli_opts.h - every command's options as one table (cli_spec), from which
 * come getopt_long's table, `--help`, the man page (`graphrun man`) and the
 * shell completion (`graphrun completion bash|zsh`), so the four never
 * disagree.
 *
 * Long options match by their exact name only: getopt_long's prefix
 * matching (`--step` for `--steps`) is refused, with the name it would
 * have taken as a suggestion. */
#ifndef GR_CLI_OPTS_H
#define GR_CLI_OPTS_H

#include <stdio.h>

/* What a shell completes after an option that takes a value. */
typedef enum cli_value {
    CLI_V_NONE,   /* nothing to offer (a number, a spec) */
    CLI_V_FILE,   /* any file */
    CLI_V_DIR,    /* a folder */
    CLI_V_TARGET, /* a named tensor of the .graph file on the line */
    CLI_V_PARAM,  /* NAME= for a param of the .graph file on the line */
    CLI_V_WORDS   /* one of cli_opt.words */
} cli_value;

typedef struct cli_opt {
    const char *name;  /* the long name, without "--" */
    int key;           /* what cli_getopt returns: the short letter (-w), or an id >= 256 */
    const char *arg;   /* the value's name ("N", "PATH"), or NULL: a flag */
    const char *help;  /* one line or more, "\n" between them */
    cli_value value;   /* completion of the value */
    const char *words; /* CLI_V_WORDS: the values, space-separated */
} cli_opt;

typedef struct cli_spec {
    const char *name;    /* "check"; "" for training (graphrun FILE) */
    const char *usage;   /* after "graphrun ": "check [options] FILE..." */
    const char *summary; /* one line: what it does */
    const char *about;   /* printed under the usage line (may be NULL) */
    const cli_opt *opts;
    int n_opts;
    const char *files; /* the files it takes, as a glob for completion ("*.graph") */
    const char *notes; /* printed after the options (may be NULL) */
} cli_spec;

/* The commands, training first, in the order --help lists them. */
extern const cli_spec cli_train_spec, cli_check_spec, cli_dot_spec, cli_fmt_spec, cli_inspect_spec,
    cli_plot_spec, cli_launch_spec, cli_completion_spec, cli_man_spec;
extern const cli_spec *const cli_specs[];
extern const int cli_n_specs;

/* The exit-status rule every command follows (--help, the man page). */
extern const char cli_exit_rule[];

/* getopt_long over spec's options (and --help/-h, which every command
 * has); the caller sets optind = 1 first.  Returns an option's key, or:
 * CLI_OPT_END after the last option (optind: the first operand),
 * CLI_OPT_HELP after printing the help on standard output, CLI_OPT_BAD
 * after printing one line on stderr (unknown option, a prefix of one,
 * missing value), with what it may have meant and where the help is. */
enum { CLI_OPT_END = -1, CLI_OPT_HELP = -2, CLI_OPT_BAD = -3 };
int cli_getopt(int argc, char **argv, const cli_spec *spec);

/* One usage error on one line: "graphrun CMD: MESSAGE (graphrun CMD
 * --help: the options)"; returns 2 (CLI_USAGE). */
int cli_usage_error(const cli_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void cli_print_help(const cli_spec *spec, FILE *out);
/* `graphrun man`: the whole CLI as a roff man page (section 1). */
void cli_print_man(FILE *out);
/* `graphrun completion bash|zsh`: -1 for another shell. */
int cli_print_completion(const char *shell, FILE *out);

#endif
