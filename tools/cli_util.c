/* cli_util.c - option and input helpers shared by the subcommands. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int cli_suggest(const char *word, const char *const *cands, int n, const char **out, int max)
{
    /* The names word is a prefix of (or that are a prefix of it), then the
     * closest by edit distance, as the compiler's did-you-mean picks it. */
    int k = 0;
    size_t lw = strlen(word);
    for (int i = 0; i < n && k < max; i++) {
        size_t lc = strlen(cands[i]);
        if (lw && lw != lc &&
            (lw < lc ? strncmp(word, cands[i], lw) == 0 : strncmp(word, cands[i], lc) == 0))
            out[k++] = cands[i];
    }
    const char *near = k < max ? gr_suggest(word, cands, n) : NULL;
    for (int i = 0; near && i < k; i++)
        if (out[i] == near) near = NULL;
    if (near) out[k++] = near;
    return k;
}

void cli_print_near(FILE *out, const char *pre, const char *const *near, int k)
{
    for (int i = 0; i < k; i++)
        fprintf(out, "%s'%s%s'%s",
                i == 0       ? "; did you mean "
                : i == k - 1 ? " or "
                             : ", ",
                pre, near[i], i == k - 1 ? "?" : "");
}

const char *cli_rate(double steps_per_s, char *buf, size_t n)
{
    if (steps_per_s >= 1 || steps_per_s <= 0)
        snprintf(buf, n, "%.0f steps/s", steps_per_s);
    else
        snprintf(buf, n, "%.*f s/step", 1 / steps_per_s < 10 ? 2 : 1, 1 / steps_per_s);
    return buf;
}

const char *cli_rank_prefix = "";

void cli_print_status(const gr_status *st)
{
    const char *msg = gr_status_message(st);
    fputs(cli_rank_prefix, stderr);
    if (gr_status_location(st, NULL, NULL, NULL) || strstr(msg, ": error: "))
        fputs(msg, stderr); /* a diagnostic: it names its file and line */
    else
        fprintf(stderr, "graphrun: error: %s", msg);
}

int cli_read_all(FILE *f, char **text, size_t *len)
{
    *text = NULL;
    FILE *m = open_memstream(text, len);
    if (!m) return -1;
    char chunk[4096];
    size_t total = 0;
    int bad = 0;
    for (size_t n; !bad && (n = fread(chunk, 1, sizeof chunk, f)) > 0;) {
        total += n;
        bad = total > CLI_MAX_INPUT ? -2 : fwrite(chunk, 1, n, m) != n;
    }
    if (!bad && ferror(f)) bad = -1;
    if (fclose(m) != 0 && !bad) bad = -1;
    if (!bad) return 0;
    free(*text);
    *text = NULL;
    return bad < 0 ? bad : -1;
}

FILE *cli_open_regular(const char *path, const char **why)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    FILE *f = NULL;
    if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        *why = "not a regular file";
        close(fd);
        return NULL;
    }
    if (fd >= 0 && !(f = fdopen(fd, "rb"))) close(fd);
    if (!f) *why = strerror(errno);
    return f;
}
