/* cmd_fmt.c - `graphrun fmt [-w | --check] FILE...`: the canonical form of
 * each file (docs/language.md, "Canonical form"), printed, written back in
 * place, or compared.  Nothing is printed or written for a file with
 * errors, so a redirect never keeps a half-formatted program. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

enum { O_CHECK = 256 };

static const cli_opt fmt_table[] = {
    {"write", 'w', NULL,
     "rewrite each FILE in place instead (atomically, keeping its mode); a file\n"
     "that is canonical already, has errors or is read-only is left untouched",
     CLI_V_NONE, NULL},
    {"check", O_CHECK, NULL,
     "print nothing for canonical files, a unified diff for the others, and\n"
     "exit 1 if there are any (for CI)",
     CLI_V_NONE, NULL},
};

const cli_spec cli_fmt_spec = {
    "fmt",
    "fmt [-w | --check] FILE...",
    "print, rewrite (-w) or check FILEs' canonical form",
    "Prints each FILE (- reads standard input) in canonical form: 2-space indentation,\n"
    "lines of at most 100 columns, comments kept (docs/language.md, \"Canonical form\").\n",
    fmt_table,
    sizeof fmt_table / sizeof *fmt_table,
    "*.graph",
    NULL,
};

typedef enum fmt_mode { FMT_PRINT, FMT_WRITE, FMT_CHECK } fmt_mode;

/* -w: the library reads, formats and replaces the file. */
static int fmt_write(const char *path)
{
    gr_status *st = gr_status_new();
    gr_code c = gr_format_in_place(path, NULL, st);
    if (c != GR_OK) cli_print_status(st);
    gr_status_free(st);
    return cli_exit_code(c);
}

/* Prints the canonical form of text, or (check) a diff when it differs. */
static int fmt_text(const char *name, const char *text, size_t len, fmt_mode mode)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    gr_status *st = gr_status_new();
    gr_code c = f ? gr_format_string(name, text, len, f, st) : GR_ERR_NOMEM;
    if (f) fclose(f);
    if (c != GR_OK) cli_print_status(st);
    int differs = c == GR_OK && (n != len || memcmp(out, text, n) != 0);
    if (c == GR_OK && mode == FMT_PRINT) fwrite(out, 1, n, stdout);
    if (differs && mode == FMT_CHECK) cli_diff(name, text, len, out, n, stdout);
    free(out);
    gr_status_free(st);
    return c != GR_OK ? cli_exit_code(c) : differs && mode == FMT_CHECK ? CLI_FAILED : CLI_OK;
}

static int fmt_one(const char *path, fmt_mode mode)
{
    if (mode == FMT_WRITE) return fmt_write(path);
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    const char *why = NULL;
    FILE *f = is_stdin ? stdin : cli_open_regular(path, &why);
    char *text = NULL;
    size_t len = 0;
    int got = f ? cli_read_all(f, &text, &len) : -1;
    if (got != 0) {
        if (got == -2)
            fprintf(stderr, "graphrun: error: %s: input larger than 64 MiB\n", name);
        else
            fprintf(stderr, "graphrun: error: %s: cannot read: %s\n", name,
                    why ? why : strerror(errno));
        if (f && !is_stdin) fclose(f);
        return CLI_USAGE;
    }
    if (!is_stdin) fclose(f);
    int rc = fmt_text(name, text, len, mode);
    free(text);
    return rc;
}

/* The mode, or -1 after --help, or -2 on misuse (printed). */
static int parse_fmt_opts(int argc, char **argv)
{
    int c, write = 0, check = 0;
    optind = 1;
    while ((c = cli_getopt(argc, argv, &cli_fmt_spec)) != CLI_OPT_END) {
        if (c == CLI_OPT_HELP) return -1;
        if (c == CLI_OPT_BAD) return -2;
        if (c == 'w')
            write = 1;
        else if (c == O_CHECK)
            check = 1;
    }
    if (write && check)
        return cli_usage_error(&cli_fmt_spec, "-w and --check exclude each other"), -2;
    if (optind == argc) return cli_usage_error(&cli_fmt_spec, "no input file"), -2;
    return write ? FMT_WRITE : check ? FMT_CHECK : FMT_PRINT;
}

int cmd_fmt(int argc, char **argv)
{
    int mode = parse_fmt_opts(argc, argv);
    if (mode == -1) return CLI_OK;
    if (mode == -2) return CLI_USAGE;
    for (int i = optind; i < argc; i++)
        if (mode == FMT_WRITE && strcmp(argv[i], "-") == 0)
            return fputs("graphrun fmt: -w cannot rewrite standard input\n", stderr), CLI_USAGE;
    int rc = CLI_OK;
    for (int i = optind; i < argc; i++) {
        int r = fmt_one(argv[i], (fmt_mode)mode);
        if (r > rc) rc = r;
    }
    return rc;
}
