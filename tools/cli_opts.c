/* cli_opts.c - option tables (cli_opts.h): parsing with exact names,
 * one-line usage errors with suggestions, --help, the man page and the
 * shell completion, all from the same tables. */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

#define MAX_OPTS 48

const cli_spec *const cli_specs[] = {&cli_train_spec,  &cli_check_spec,      &cli_dot_spec,
                                     &cli_fmt_spec,    &cli_inspect_spec,    &cli_plot_spec,
                                     &cli_launch_spec, &cli_completion_spec, &cli_man_spec};
const int cli_n_specs = sizeof cli_specs / sizeof *cli_specs;

const char cli_exit_rule[] =
    "Exit status: 0 done; 1 a problem with the model or its data (it does not compile, a data\n"
    "or checkpoint file is malformed, training or a write failed, fmt --check found a file\n"
    "not canonical); 2 usage (an unknown option or command, a missing or malformed value,\n"
    "options that conflict, a --target or --eval name the model lacks, a file named on the\n"
    "command line that is missing or unreadable, or read-only for fmt -w); 130 after\n"
    "Ctrl-C, 143 after SIGTERM.\n";

static const cli_opt help_opt = {"help", 'h', NULL, "print this help", CLI_V_NONE, NULL};

static const char *cmd_prefix(const cli_spec *spec)
{
    return *spec->name ? " " : "";
}

/* "graphrun check --help" or "graphrun FILE --help". */
static void help_pointer(const cli_spec *spec, FILE *out)
{
    fprintf(out, "graphrun%s%s --help lists the options", *spec->name ? " " : " FILE", spec->name);
}

int cli_usage_error(const cli_spec *spec, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "graphrun%s%s: ", cmd_prefix(spec), spec->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (", stderr);
    help_pointer(spec, stderr);
    fputs(")\n", stderr);
    return CLI_USAGE;
}

/* " did you mean '--a' or '--b'?" after the unknown option word (with its
 * dashes), when one of spec's options is close. */
static void suggest_option(const cli_spec *spec, const char *word, FILE *out)
{
    const char *names[MAX_OPTS + 1], *near[3];
    int n = 0;
    for (int i = 0; i < spec->n_opts; i++) names[n++] = spec->opts[i].name;
    names[n++] = help_opt.name;
    if (strncmp(word, "--", 2) != 0) return;
    char bare[128];
    snprintf(bare, sizeof bare, "%.*s", (int)strcspn(word + 2, "="), word + 2);
    cli_print_near(out, "--", near, cli_suggest(bare, names, n, near, 3));
}

static int bad_option(const cli_spec *spec, const char *word, const char *why)
{
    fprintf(stderr, "graphrun%s%s: %s '%s'", cmd_prefix(spec), spec->name, why, word);
    suggest_option(spec, word, stderr);
    fputs(" (", stderr);
    help_pointer(spec, stderr);
    fputs(")\n", stderr);
    return CLI_OPT_BAD;
}

/* getopt_long's tables for spec, built once per spec. */
typedef struct getopt_tables {
    const cli_spec *spec;
    struct option longs[MAX_OPTS + 2];
    char shorts[2 * MAX_OPTS + 4];
} getopt_tables;

static void build_tables(const cli_spec *spec, getopt_tables *t)
{
    int n = 0;
    char *s = t->shorts;
    *s++ = ':'; /* a missing value is ':', not '?' */
    for (int i = 0; i <= spec->n_opts && n < MAX_OPTS; i++) {
        const cli_opt *o = i < spec->n_opts ? &spec->opts[i] : &help_opt;
        t->longs[n++] =
            (struct option){o->name, o->arg ? required_argument : no_argument, NULL, o->key};
        if (o->key > 0 && o->key < 128) {
            *s++ = (char)o->key;
            if (o->arg) *s++ = ':';
        }
    }
    t->longs[n] = (struct option){0, 0, 0, 0};
    *s = 0;
    t->spec = spec;
}

int cli_getopt(int argc, char **argv, const cli_spec *spec)
{
    static getopt_tables t;
    if (t.spec != spec) build_tables(spec, &t);
    opterr = 0;
    int li = -1;
    int c = getopt_long(argc, argv, t.shorts, t.longs, &li);
    if (c == -1) return CLI_OPT_END;
    if (c == ':') {
        const char *word = argv[optind - 1];
        fprintf(stderr, "graphrun%s%s: %s needs a value (", cmd_prefix(spec), spec->name, word);
        help_pointer(spec, stderr);
        fputs(")\n", stderr);
        return CLI_OPT_BAD;
    }
    if (c == '?') {
        const char *arg = argv[optind - 1];
        if (strncmp(arg, "--", 2) == 0 && strchr(arg, '=') && optopt) /* --quiet=1 */
            return cli_usage_error(spec, "%.*s takes no value", (int)strcspn(arg, "="), arg),
                   CLI_OPT_BAD;
        char word[3] = {'-', (char)optopt, 0};
        return bad_option(spec, optopt > 0 && optopt < 128 ? word : arg, "unknown option");
    }
    if (li >= 0) {
        /* The option's own word: before its value when the value was the next word. */
        const char *word =
            optarg && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
        size_t len = strcspn(word + 2, "=");
        if (strncmp(word, "--", 2) != 0 || len != strlen(t.longs[li].name) ||
            strncmp(word + 2, t.longs[li].name, len) != 0)
            return bad_option(spec, word, "unknown option");
    }
    if (c == 'h') {
        cli_print_help(spec, stdout);
        return CLI_OPT_HELP;
    }
    return c;
}

/* ---- --help ---- */

#define HELP_COL 21

static void print_lines(const char *text, int indent, FILE *out)
{
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        fprintf(out, "%*s%.*s\n", indent, "", (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static void print_opt(const cli_opt *o, FILE *out)
{
    char left[96];
    int n = o->key > 0 && o->key < 128 ? snprintf(left, sizeof left, "  -%c, --%s%s%s", o->key,
                                                  o->name, o->arg ? " " : "", o->arg ? o->arg : "")
                                       : snprintf(left, sizeof left, "  --%s%s%s", o->name,
                                                  o->arg ? " " : "", o->arg ? o->arg : "");
    size_t first = strcspn(o->help, "\n");
    fprintf(out, "%s%*s%.*s\n", left, n < HELP_COL - 1 ? HELP_COL - n : 2, "", (int)first, o->help);
    if (o->help[first]) print_lines(o->help + first + 1, HELP_COL, out);
}

void cli_print_help(const cli_spec *spec, FILE *out)
{
    fprintf(out, "usage: graphrun %s\n", spec->usage);
    if (spec->about) fputs(spec->about, out);
    for (int i = 0; i < spec->n_opts; i++) print_opt(&spec->opts[i], out);
    print_opt(&help_opt, out);
    if (spec->notes) fputs(spec->notes, out);
    fputs(cli_exit_rule, out);
}

/* ---- the man page ---- */

/* Text as roff: backslashes and dashes escaped, no line starting with a
 * control character. */
static void roff(const char *s, FILE *out)
{
    int bol = 1;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\'')) fputs("\\&", out);
        bol = *s == '\n';
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else
            fputc(*s, out);
    }
}

/* A paragraph of help text as one roff paragraph: lines joined. */
static void roff_para(const char *text, FILE *out)
{
    for (const char *p = text; *p;) {
        size_t n = strcspn(p, "\n");
        char *line = strndup(p, n);
        if (line) roff(line + strspn(line, " "), out);
        free(line);
        fputc('\n', out);
        p += n + (p[n] == '\n');
    }
}

static void man_opt(const cli_opt *o, FILE *out)
{
    fputs(".TP\n", out);
    if (o->key > 0 && o->key < 128) fprintf(out, "\\fB\\-%c\\fR, ", o->key);
    fputs("\\fB\\-\\-", out);
    roff(o->name, out);
    fputs("\\fR", out);
    if (o->arg) {
        fputs(" \\fI", out);
        roff(o->arg, out);
        fputs("\\fR", out);
    }
    fputc('\n', out);
    roff_para(o->help, out);
}

static void man_spec(const cli_spec *spec, FILE *out)
{
    if (spec->about) roff_para(spec->about, out);
    for (int i = 0; i < spec->n_opts; i++) man_opt(&spec->opts[i], out);
    man_opt(&help_opt, out);
    if (spec->notes) {
        fputs(".PP\n", out);
        roff_para(spec->notes, out);
    }
}

void cli_print_man(FILE *out)
{
    fprintf(out, ".TH GRAPHRUN 1 \"\" \"graphrun %s\" \"User Commands\"\n", gr_version());
    fputs(".SH NAME\ngraphrun \\- train and check dataflow-graph models written in .graph "
          "files\n.SH SYNOPSIS\n",
          out);
    for (int i = 0; i < cli_n_specs; i++) {
        fputs(".B graphrun\n", out);
        roff(cli_specs[i]->usage, out);
        fputs("\n.br\n", out);
    }
    fputs(".B graphrun\n\\-\\-help | \\-\\-version\n", out);
    fputs(".SH DESCRIPTION\n", out);
    roff_para(cli_train_spec.summary, out);
    fputs(".SH OPTIONS\n", out);
    man_spec(&cli_train_spec, out);
    fputs(".SH COMMANDS\n", out);
    for (int i = 1; i < cli_n_specs; i++) {
        fputs(".SS graphrun ", out);
        roff(cli_specs[i]->usage, out);
        fputc('\n', out);
        roff_para(cli_specs[i]->summary, out);
        fputs(".PP\n", out);
        man_spec(cli_specs[i], out);
    }
    fputs(".SH EXIT STATUS\n", out);
    roff_para(cli_exit_rule, out);
    fputs(".SH ENVIRONMENT\n.TP\n.B OPENBLAS_CORETYPE\n"
          "OpenBLAS kernels; when unset and OpenBLAS falls back to its generic ones on this CPU,\n"
          "graphrun re\\-runs itself with the kernels the CPU has (graphrun \\-\\-version shows "
          "them).\n.TP\n.B GR_SIM_GPU\nthe number of simulated GPUs that stand in for "
          "@gpu:N.\n",
          out);
    fputs(".SH SEE ALSO\nREADME.md and docs/ in the source tree: docs/cli.md (this page's "
          "rules), docs/language.md, docs/distributed.md.\n",
          out);
}

/* ---- shell completion ---- */

/* Whether option k of spec i was in an earlier spec (one case label each). */
static int seen_before(int i, int k)
{
    for (int j = 0; j < i; j++)
        for (int m = 0; m < cli_specs[j]->n_opts; m++)
            if (strcmp(cli_specs[j]->opts[m].name, cli_specs[i]->opts[k].name) == 0) return 1;
    return 0;
}

/* The bash function: everything in it comes from the tables.  The names
 * of the .graph file on the line come from its text: top-level
 * assignments (targets, --eval) and params (--set). */
static void completion_bash(FILE *out)
{
    fputs("# graphrun completion for bash (zsh: graphrun completion zsh)\n"
          "# load: source <(graphrun completion bash)\n"
          "_graphrun_graph_file() {\n"
          "    local w\n"
          "    for w in \"${COMP_WORDS[@]}\"; do\n"
          "        case $w in *.graph) [ -f \"$w\" ] && { printf '%s\\n' \"$w\"; return; };; esac\n"
          "    done\n"
          "}\n"
          "_graphrun_names() { # $1: targets or params\n"
          "    local f; f=$(_graphrun_graph_file); [ -n \"$f\" ] || return\n"
          "    if [ \"$1\" = params ]; then\n"
          "        sed -n 's/^[[:space:]]*param[[:space:]]\\{1,\\}\\([A-Za-z_][A-Za-z0-9_]*\\).*/"
          "\\1=/p' \"$f\"\n"
          "    else\n"
          "        sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)[[:space:]]*=[^=].*/\\1/p' \"$f\"\n"
          "    fi\n"
          "}\n"
          "_graphrun() {\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local cmd=\"\" i opts files value words=\"\"\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break;; esac\n"
          "    done\n"
          "    # launch -np N FILE ...: from FILE on, the training options\n"
          "    [ \"$cmd\" = launch ] && [ -n \"$(_graphrun_graph_file)\" ] && cmd=FILE\n"
          "    case $cmd in\n",
          out);
    for (int i = 1; i < cli_n_specs; i++) {
        const cli_spec *s = cli_specs[i];
        fprintf(out, "    %s) opts=\"--help", s->name);
        for (int k = 0; k < s->n_opts; k++) fprintf(out, " --%s", s->opts[k].name);
        fprintf(out, "\"; files='%s';;\n", s->files ? s->files : "");
    }
    fputs("    *) opts=\"--help", out);
    for (int k = 0; k < cli_train_spec.n_opts; k++)
        fprintf(out, " --%s", cli_train_spec.opts[k].name);
    fprintf(out, "\"; files='%s';;\n    esac\n", cli_train_spec.files);
    fputs("    case $prev in\n", out);
    /* Values, by option: the same name means the same kind in every command. */
    for (int i = 0; i < cli_n_specs; i++)
        for (int k = 0; k < cli_specs[i]->n_opts; k++) {
            const cli_opt *o = &cli_specs[i]->opts[k];
            if (!o->arg || seen_before(i, k)) continue;
            fprintf(out, "    --%s)", o->name);
            switch (o->value) {
            case CLI_V_FILE:
                fputs(" COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n", out);
                break;
            case CLI_V_DIR:
                fputs(" COMPREPLY=($(compgen -d -- \"$cur\")); return;;\n", out);
                break;
            case CLI_V_TARGET:
                fputs(" COMPREPLY=($(compgen -W \"$(_graphrun_names targets)\" -- \"$cur\")); "
                      "return;;\n",
                      out);
                break;
            case CLI_V_PARAM:
                fputs(" compopt -o nospace 2>/dev/null; COMPREPLY=($(compgen -W "
                      "\"$(_graphrun_names params)\" -- \"$cur\")); return;;\n",
                      out);
                break;
            case CLI_V_WORDS:
                fprintf(out, " COMPREPLY=($(compgen -W '%s' -- \"$cur\")); return;;\n", o->words);
                break;
            default:
                fputs(" return;;\n", out);
            }
        }
    fputs("    -o) COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n"
          "    esac\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
          "        [ -z \"$cmd\" ] && COMPREPLY+=($(compgen -W '--version' -- \"$cur\"))\n"
          "        return\n"
          "    fi\n"
          "    if [ -z \"$cmd\" ]; then\n"
          "        COMPREPLY=($(compgen -W '",
          out);
    for (int i = 1; i < cli_n_specs; i++)
        fprintf(out, "%s%s", i > 1 ? " " : "", cli_specs[i]->name);
    fputs("' -- \"$cur\"))\n"
          "    fi\n"
          "    [ \"$cmd\" = completion ] && { COMPREPLY=($(compgen -W 'bash zsh' -- \"$cur\")); "
          "return; }\n"
          "    compopt -o filenames 2>/dev/null\n"
          "    COMPREPLY+=($(compgen -d -- \"$cur\"))\n"
          "    local f\n"
          "    for f in $(compgen -f -- \"$cur\"); do\n"
          "        case $f in $files) COMPREPLY+=(\"$f\");; esac\n"
          "    done\n"
          "}\n"
          "complete -F _graphrun graphrun\n",
          out);
}

int cli_print_completion(const char *shell, FILE *out)
{
    if (strcmp(shell, "bash") == 0) {
        completion_bash(out);
        return 0;
    }
    if (strcmp(shell, "zsh") != 0) return -1;
    fputs("#compdef graphrun\n"
          "# graphrun completion for zsh: the bash function through bashcompinit\n"
          "# load: source <(graphrun completion zsh)\n"
          "autoload -U +X bashcompinit && bashcompinit\n",
          out);
    completion_bash(out);
    return 0;
}
