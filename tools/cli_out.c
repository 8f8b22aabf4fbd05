/* cli_out.c - the files a command writes, checked against each other and
 * against the files it reads before anything is written (train and plot):
 * `--log model.graph` must not overwrite the model it trains. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* Who a file is: its device and inode after following links, or, for a
 * file not there yet, its folder's and its name. */
typedef struct cli_id {
    dev_t dev;
    ino_t ino;
    char *name; /* NULL when the file exists */
} cli_id;

/* 0, or -1 when neither the file nor its folder can be looked at (then it
 * cannot be written either, and that error comes when it is opened). */
static int cli_file_id(const char *path, cli_id *id)
{
    struct stat sb;
    *id = (cli_id){0};
    if (stat(path, &sb) == 0) {
        *id = (cli_id){sb.st_dev, sb.st_ino, NULL};
        return 0;
    }
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int rc = dir && stat(dir, &sb) == 0 ? 0 : -1;
    free(dir);
    if (rc == 0) *id = (cli_id){sb.st_dev, sb.st_ino, strdup(slash ? slash + 1 : path)};
    return rc == 0 && id->name ? 0 : -1;
}

int cli_same_file(const char *a, const char *b)
{
    cli_id x = {0}, y = {0};
    int same = cli_file_id(a, &x) == 0 && cli_file_id(b, &y) == 0 && x.dev == y.dev &&
               x.ino == y.ino && !x.name == !y.name && (!x.name || strcmp(x.name, y.name) == 0);
    free(x.name);
    free(y.name);
    return same;
}

/* Whether the file a write to out replaces (where its links lead), or
 * creates, lies in folder dir: a text() folder reads every file in it. */
static int cli_in_folder(const char *out, const char *dir)
{
    struct stat d, f;
    if (stat(dir, &d) != 0 || !S_ISDIR(d.st_mode)) return 0;
    char *real = realpath(out, NULL);
    char *path = real ? real : strdup(out);
    char *slash = path ? strrchr(path, '/') : NULL;
    if (slash) slash[slash == path] = 0; /* "/x" -> "/", "a/x" -> "a" */
    int in = path && stat(slash ? path : ".", &f) == 0;
    free(path);
    in = in && f.st_dev == d.st_dev && f.st_ino == d.st_ino;
    return in;
}

/* The first input that out is (*folder = 0) or that is a folder out would
 * be in (*folder = 1), or -1. */
static int cli_find_input(const cli_file *out, const cli_file *ins, int n_ins, int *folder)
{
    for (int i = 0; i < n_ins; i++) {
        *folder = 0;
        if (ins[i].path && cli_same_file(out->path, ins[i].path)) return i;
        *folder = 1;
        if (ins[i].path && cli_in_folder(out->path, ins[i].path)) return i;
    }
    return -1;
}

int cli_check_outputs(const cli_file *outs, int n_outs, const cli_file *ins, int n_ins)
{
    for (int k = 0; k < n_outs; k++) {
        if (!outs[k].path) continue;
        int folder, i = cli_find_input(&outs[k], ins, n_ins, &folder);
        if (i >= 0 && folder) {
            fprintf(stderr,
                    "%sgraphrun: error: %s %s: inside %s, a folder whose files this command "
                    "reads as data; nothing was written\n",
                    cli_rank_prefix, outs[k].what, outs[k].path, ins[i].path);
            return -1;
        }
        if (i >= 0) {
            fprintf(stderr,
                    "%sgraphrun: error: %s %s: the same file as %s %s, which this command "
                    "reads; nothing was written\n",
                    cli_rank_prefix, outs[k].what, outs[k].path, ins[i].what, ins[i].path);
            return -1;
        }
        for (int j = 0; j < k; j++)
            if (outs[j].path && cli_same_file(outs[j].path, outs[k].path)) {
                fprintf(stderr, "%sgraphrun: error: %s %s and %s %s are the same file\n",
                        cli_rank_prefix, outs[j].what, outs[j].path, outs[k].what, outs[k].path);
                return -1;
            }
    }
    return 0;
}

int cli_probe_output(const char *path)
{
    gr_status *st = gr_status_new();
    gr_output *out = NULL;
    int rc = gr_output_open(path, &out, st) == GR_OK ? 0 : -1;
    if (rc) cli_print_status(st);
    gr_output_discard(out);
    gr_status_free(st);
    return rc;
}
