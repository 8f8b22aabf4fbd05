/* cmd_inspect.c - `graphrun inspect [--json] FILE.safetensors`: a
 * checkpoint's metadata and, per tensor, its dtype, shape, bytes and value
 * statistics.  The file is checked as a restore checks it
 * (gr_checkpoint_open), so a damaged one gets the same message. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_opts.h"

static const cli_opt inspect_table[] = {
    {"json", 'j' + 256, NULL, "the same as one JSON object", CLI_V_NONE, NULL},
};

const cli_spec cli_inspect_spec = {
    "inspect",
    "inspect [--json] FILE.safetensors",
    "a checkpoint's metadata and tensor statistics",
    "Prints a checkpoint's metadata (step, graph hash, version, data cursors) and, for\n"
    "every tensor, its dtype, shape, bytes, min, max, mean and NaN/Inf counts.\n",
    inspect_table,
    sizeof inspect_table / sizeof *inspect_table,
    "*.safetensors",
    NULL,
};

typedef struct tensor_stats {
    double min, max, mean; /* over the values that are not NaN; NAN when there are none */
    int64_t nan, inf;
} tensor_stats;

static tensor_stats stats_of(gr_tensor *t)
{
    tensor_stats s = {INFINITY, -INFINITY, 0, 0, 0};
    int64_t n = gr_tensor_numel(t), counted = 0;
    const void *data = gr_tensor_data(t);
    for (int64_t i = 0; i < n; i++) {
        double v =
            gr_tensor_dtype(t) == GR_F32 ? ((const float *)data)[i] : ((const int32_t *)data)[i];
        if (isnan(v)) {
            s.nan++;
            continue;
        }
        s.inf += isinf(v) != 0;
        s.min = v < s.min ? v : s.min;
        s.max = v > s.max ? v : s.max;
        s.mean += v;
        counted++;
    }
    if (!counted) s.min = s.max = NAN;
    s.mean = counted ? s.mean / (double)counted : NAN;
    return s;
}

static const char *shape_str(const gr_tensor *t, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int k = 0; k < gr_tensor_rank(t) && used < n; k++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", k ? "," : "",
                                 (long long)gr_tensor_dim(t, k));
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

static const char *dtype_str(const gr_tensor *t)
{
    return gr_tensor_dtype(t) == GR_F32 ? "F32" : "I32";
}

static size_t name_width(const gr_checkpoint *c)
{
    size_t w = strlen("tensor");
    for (int k = 0; k < gr_checkpoint_tensor_count(c); k++)
        if (strlen(gr_checkpoint_tensor_name(c, k)) > w)
            w = strlen(gr_checkpoint_tensor_name(c, k));
    return w;
}

static void print_text(const char *path, const gr_checkpoint *c, gr_tensor **t)
{
    size_t bytes = 0, w = name_width(c);
    int n = gr_checkpoint_tensor_count(c);
    for (int k = 0; k < n; k++) bytes += gr_tensor_bytes(t[k]);
    printf("%s: %d tensors, %zu bytes of data\n", path, n, bytes);
    for (int k = 0; k < gr_checkpoint_meta_count(c); k++) {
        const char *v, *key = gr_checkpoint_meta(c, k, &v);
        printf("  %-24s %s\n", key, v);
    }
    printf("%-*s  dtype  %-16s %12s %12s %12s %12s %6s %6s\n", (int)w, "tensor", "shape", "bytes",
           "min", "max", "mean", "NaN", "Inf");
    for (int k = 0; k < n; k++) {
        char sh[160];
        tensor_stats s = stats_of(t[k]);
        printf("%-*s  %-5s  %-16s %12zu %12.6g %12.6g %12.6g %6lld %6lld\n", (int)w,
               gr_checkpoint_tensor_name(c, k), dtype_str(t[k]), shape_str(t[k], sh, sizeof sh),
               gr_tensor_bytes(t[k]), s.min, s.max, s.mean, (long long)s.nan, (long long)s.inf);
    }
}

/* A JSON number, or null where the value is not finite (JSON has no NaN). */
static void add_number(cJSON *o, const char *key, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, key, v);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *tensor_json(const char *name, gr_tensor *t)
{
    cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray();
    tensor_stats s = stats_of(t);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "dtype", dtype_str(t));
    for (int k = 0; k < gr_tensor_rank(t); k++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)gr_tensor_dim(t, k)));
    cJSON_AddItemToObject(o, "shape", shape);
    cJSON_AddNumberToObject(o, "bytes", (double)gr_tensor_bytes(t));
    add_number(o, "min", s.min);
    add_number(o, "max", s.max);
    add_number(o, "mean", s.mean);
    cJSON_AddNumberToObject(o, "nan", (double)s.nan);
    cJSON_AddNumberToObject(o, "inf", (double)s.inf);
    return o;
}

static void print_json(const char *path, const gr_checkpoint *c, gr_tensor **t)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject(), *ts = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "file", path);
    for (int k = 0; k < gr_checkpoint_meta_count(c); k++) {
        const char *v, *key = gr_checkpoint_meta(c, k, &v);
        cJSON_AddStringToObject(meta, key, v);
    }
    cJSON_AddItemToObject(root, "metadata", meta);
    for (int k = 0; k < gr_checkpoint_tensor_count(c); k++)
        cJSON_AddItemToArray(ts, tensor_json(gr_checkpoint_tensor_name(c, k), t[k]));
    cJSON_AddItemToObject(root, "tensors", ts);
    char *text = cJSON_Print(root);
    puts(text);
    free(text);
    cJSON_Delete(root);
}

/* Copies every tensor out of c into t; on failure prints the status. */
static int load_tensors(const gr_checkpoint *c, gr_tensor **t, gr_status *st)
{
    for (int k = 0; k < gr_checkpoint_tensor_count(c); k++)
        if (gr_checkpoint_tensor(c, k, &t[k], st) != GR_OK) {
            cli_print_status(st);
            return -1;
        }
    return 0;
}

static int inspect_file(const char *path, int json)
{
    gr_status *st = gr_status_new();
    gr_checkpoint *c = NULL;
    gr_code code = gr_checkpoint_open(path, &c, st);
    int rc = cli_exit_code(code), n = gr_checkpoint_tensor_count(c);
    gr_tensor **t = calloc((size_t)n + 1, sizeof *t);
    if (code != GR_OK)
        cli_print_status(st);
    else if (load_tensors(c, t, st) < 0)
        rc = CLI_FAILED;
    else if (json)
        print_json(path, c, t);
    else
        print_text(path, c, t);
    for (int k = 0; k < n; k++) gr_tensor_free(t[k]);
    free(t);
    gr_checkpoint_free(c);
    gr_status_free(st);
    return rc;
}

int cmd_inspect(int argc, char **argv)
{
    int json = 0, c;
    optind = 1;
    while ((c = cli_getopt(argc, argv, &cli_inspect_spec)) != CLI_OPT_END) {
        if (c == CLI_OPT_HELP) return CLI_OK;
        if (c == CLI_OPT_BAD) return CLI_USAGE;
        json = 1;
    }
    if (optind != argc - 1)
        return cli_usage_error(&cli_inspect_spec,
                               optind < argc ? "one FILE at a time" : "no input file");
    return inspect_file(argv[optind], json);
}
