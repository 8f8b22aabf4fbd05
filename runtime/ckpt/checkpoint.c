/* checkpoint.c - gr_session_save / gr_session_restore: which session state
 * goes into a safetensors file and how it comes back.  The container itself
 * is safetensors.c; this file is the policy on top of it.
 *
 * Save copies every variable, the data cursors and the step counters into
 * memory while holding the session's pause lock exclusively (so no run is
 * half-way through its updates), releases it, then replaces the file
 * atomically (ckpt_io.c).  Restore validates the whole file against the
 * program before it writes anything into the session. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_io.h"
#include "runtime/dist/dist.h"
#include "runtime/runtime.h"
#include "safetensors.h"
#include "sha256.h"

/* What a save copies under the pause lock: everything it writes. */
typedef struct ckpt_snapshot {
    uint8_t *data; /* the variables, back to back in program order */
    size_t bytes;
    uint64_t (*cursor)[2];
    uint64_t steps, runs;
} ckpt_snapshot;

static size_t ckpt_vars_bytes(const ir_graph *g)
{
    size_t n = 0;
    for (int i = 0; i < g->n_vars; i++) n += ir_nbytes(&g->vars[i].type);
    return n;
}

static void ckpt_cursor_get(data_reader *r, int di, void *ctx)
{
    ckpt_snapshot *sn = ctx;
    data_cursor(r, &sn->cursor[di][0], &sn->cursor[di][1]);
}

/* Called with the session paused: no run is mid-update. */
static void ckpt_snapshot_copy(gr_session *s, ckpt_snapshot *sn)
{
    const ir_graph *g = rt_session_graph(s);
    size_t off = 0;
    for (int i = 0; i < g->n_vars; i++) {
        rt_var_read(s, i, sn->data + off);
        off += ir_nbytes(&g->vars[i].type);
    }
    rt_readers_each(s, ckpt_cursor_get, sn);
    rt_session_counters(s, &sn->steps, &sn->runs);
}

/* The variables can be large: running out of memory for them is an error
 * the caller sees, not an abort. */
static int ckpt_snapshot_take(gr_session *s, ckpt_snapshot *sn)
{
    const ir_graph *g = rt_session_graph(s);
    sn->bytes = ckpt_vars_bytes(g);
    sn->data = malloc(sn->bytes + 1);
    if (!sn->data) return -1;
    sn->cursor = base_xcalloc((size_t)g->n_data + 1, sizeof *sn->cursor);
    rt_session_pause(s);
    ckpt_snapshot_copy(s, sn);
    rt_session_resume(s);
    return 0;
}

static void ckpt_snapshot_free(ckpt_snapshot *sn)
{
    free(sn->data);
    free(sn->cursor);
}

static safet_dtype ckpt_var_dtype(const ir_var *v)
{
    return v->type.dtype == DT_I32 ? SAFET_I32 : SAFET_F32;
}

static void ckpt_var_tensor(const ir_var *v, safet_tensor *t)
{
    t->name = (char *)v->name;
    t->dtype = ckpt_var_dtype(v);
    t->rank = v->type.rank;
    for (int k = 0; k < v->type.rank; k++) t->dim[k] = v->type.dim[k];
    t->bytes = ir_nbytes(&v->type);
}

static void ckpt_add_meta(safet_meta *m, int *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void ckpt_add_meta(safet_meta *m, int *n, const char *key, const char *fmt, ...)
{
    char value[128]; /* numbers, the version and a SHA-256: all short */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    m[*n].key = base_xstrdup(key);
    m[*n].value = base_xstrdup(value);
    (*n)++;
}

/* "data.NAME.vocab": a text source's characters in id order ("" for bytes),
 * so that sampling decodes with the vocabulary the weights were trained on. */
static void ckpt_add_vocab(safet_meta *m, int *n, const ir_data *d)
{
    char key[512];
    snprintf(key, sizeof key, "data.%s.vocab", d->name);
    m[*n].key = base_xstrdup(key);
    m[*n].value = base_xstrdup(d->vocab_chars ? d->vocab_chars : "");
    (*n)++;
}

static safet_meta *ckpt_build_meta(const gr_session *s, const ckpt_snapshot *sn, int *n)
{
    const ir_graph *g = rt_session_graph(s);
    const src_file *src = rt_session_program(s)->src;
    safet_meta *m = base_xcalloc(8 + 4 * (size_t)g->n_data, sizeof *m);
    char hex[65], key[512];
    sha256_hex(src->text, src->len, hex);
    *n = 0;
    ckpt_add_meta(m, n, "format", "graphrun");
    ckpt_add_meta(m, n, "graphrun_version", "%s", GR_VERSION_STRING);
    ckpt_add_meta(m, n, "graph_sha256", "%s", hex);
    ckpt_add_meta(m, n, "step", "%llu", (unsigned long long)sn->steps);
    ckpt_add_meta(m, n, "run_counter", "%llu", (unsigned long long)sn->runs);
    const rt_dist *dist = rt_session_dist(s);
    if (dist) ckpt_add_meta(m, n, "processes", "%d", dist_size(dist));
    for (int d = 0; d < g->n_data; d++) {
        snprintf(key, sizeof key, "data.%s.epoch", g->data[d].name);
        ckpt_add_meta(m, n, key, "%llu", (unsigned long long)sn->cursor[d][0]);
        snprintf(key, sizeof key, "data.%s.position", g->data[d].name);
        ckpt_add_meta(m, n, key, "%llu", (unsigned long long)sn->cursor[d][1]);
        snprintf(key, sizeof key, "data.%s.batch", g->data[d].name);
        ckpt_add_meta(m, n, key, "%lld", (long long)g->data[d].batch);
        if (g->data[d].kind == DATA_TEXT) ckpt_add_vocab(m, n, &g->data[d]);
    }
    return m;
}

static void ckpt_meta_free(safet_meta *m, int n)
{
    for (int i = 0; i < n; i++) {
        free(m[i].key);
        free(m[i].value);
    }
    free(m);
}

/* The safetensors header for the snapshot: every variable in program
 * order, so the tensors lie back to back exactly as sn->data holds them. */
static uint8_t *ckpt_encode_header(const gr_session *s, const ckpt_snapshot *sn, size_t *hn)
{
    const ir_graph *g = rt_session_graph(s);
    safet_tensor *t = base_xcalloc((size_t)g->n_vars + 1, sizeof *t);
    for (int i = 0; i < g->n_vars; i++) ckpt_var_tensor(&g->vars[i], &t[i]);
    int n_meta = 0;
    safet_meta *meta = ckpt_build_meta(s, sn, &n_meta);
    uint8_t *h = safet_header(t, g->n_vars, meta, n_meta, hn);
    ckpt_meta_free(meta, n_meta);
    free(t);
    return h;
}

static gr_code ckpt_save(gr_session *s, const char *path, gr_status *st)
{
    ckpt_snapshot sn = {0};
    if (ckpt_snapshot_take(s, &sn) < 0) {
        ckpt_snapshot_free(&sn);
        return rt_fail(st, GR_ERR_NOMEM, "%s: no memory for the checkpoint snapshot\n", path);
    }
    size_t hn = 0;
    uint8_t *h = ckpt_encode_header(s, &sn, &hn);
    gr_code c = h ? ckio_replace(path, h, hn, sn.data, sn.bytes, st)
                  : rt_fail(st, GR_ERR_NOMEM, "%s: no memory for the checkpoint header\n", path);
    free(h);
    ckpt_snapshot_free(&sn);
    if (c == GR_OK) rt_ok(st);
    return c;
}

/* ckpt_save as the distributed save calls it (dist_saver). */
static gr_code save_session(void *s, const char *path, gr_status *st)
{
    return ckpt_save(s, path, st);
}

/* A distributed session: rank 0 writes the file, every process waits for it. */
gr_code gr_session_save(gr_session *s, const char *path, gr_status *st)
{
    if (!s || !path) return rt_null(st, "gr_session_save", s ? "path" : "session");
    rt_dist *d = rt_session_dist(s);
    return d ? dist_save(d, path, save_session, s, st) : ckpt_save(s, path, st);
}

/* ---- restore ---- */

/* Everything a restore will write, decided before anything is written. */
typedef struct ckpt_plan {
    const char *path;
    const safet_tensor **src; /* per variable: its tensor in the file, or NULL */
    uint64_t (*cursor)[2];    /* per data source */
    int *has_cursor;
    uint64_t steps, runs;
    int processes;       /* of the session (1: not distributed) */
    const rt_dist *dist; /* a cursor counts batches of all the processes (dist_data_shards) */
} ckpt_plan;

static int ckpt_wanted(const ir_var *v, const gr_restore_options *o)
{
    return !o->weights_only || !v->opt_state;
}

/* --init-from may read a checkpoint made with another optimizer: its slots
 * ("<weight>/momentum") and step counter are not weights and are skipped. */
static int ckpt_foreign_state(const ir_graph *g, const char *name)
{
    if (strcmp(name, "global_step") == 0) return 1;
    const char *slash = strrchr(name, '/');
    if (!slash) return 0;
    size_t n = (size_t)(slash - name);
    char *owner = memcpy(base_xmalloc(n + 1), name, n);
    owner[n] = 0;
    int vi = ir_find_var(g, owner);
    free(owner);
    return vi >= 0;
}

static gr_code ckpt_check_tensor(const ckpt_plan *rp, const ir_var *v, const safet_tensor *t,
                                 gr_status *st)
{
    safet_dtype want = ckpt_var_dtype(v);
    char a[160], b[160];
    if (t->dtype != want)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: tensor '%s': dtype %s does not match the variable's %s\n", rp->path,
                       t->name, safet_dtype_name(t->dtype), safet_dtype_name(want));
    int same = t->rank == v->type.rank;
    for (int k = 0; same && k < t->rank; k++) same = t->dim[k] == v->type.dim[k];
    if (!same)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: tensor '%s': shape %s does not match the variable's %s\n", rp->path,
                       t->name, safet_shape_str(t->rank, t->dim, a, sizeof a),
                       safet_shape_str(v->type.rank, v->type.dim, b, sizeof b));
    return GR_OK;
}

static gr_code ckpt_match_tensors(const gr_session *s, const safet_file *f,
                                  const gr_restore_options *o, ckpt_plan *rp, gr_status *st)
{
    const ir_graph *g = rt_session_graph(s);
    for (int i = 0; i < f->n_t; i++) {
        const safet_tensor *t = &f->t[i];
        int vi = ir_find_var(g, t->name);
        if (vi < 0 && o->weights_only && ckpt_foreign_state(g, t->name)) continue;
        if (vi < 0)
            return rt_fail(
                st, GR_ERR_DATA,
                "%s: tensor '%s': unexpected, the program has no variable of that name\n", rp->path,
                t->name);
        if (!ckpt_wanted(&g->vars[vi], o)) continue;
        gr_code c = ckpt_check_tensor(rp, &g->vars[vi], t, st);
        if (c != GR_OK) return c;
        rp->src[vi] = t;
    }
    for (int vi = 0; vi < g->n_vars; vi++)
        if (ckpt_wanted(&g->vars[vi], o) && !rp->src[vi] && !o->allow_missing)
            return rt_fail(st, GR_ERR_DATA,
                           "%s: tensor '%s': missing, the file has no value for this variable "
                           "(allow_missing / --allow-missing keeps its initial value)\n",
                           rp->path, g->vars[vi].name);
    return GR_OK;
}

/* Decimal digits only (no sign, space or suffix), and no more than max:
 * strtoull alone would take "-1" as 2^64 - 1 and " 7" as 7. */
static int ckpt_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!*s || strspn(s, "0123456789") != strlen(s)) return -1;
    errno = 0;
    *out = strtoull(s, NULL, 10);
    return errno == ERANGE || *out > max ? -1 : 0;
}

/* Every number in the metadata is in [min, GR_MAX_STEPS]: steps, run
 * counts, epochs, positions and batches all count at most one thing per
 * step or example, so a larger one is damage, and it could overflow the
 * step arithmetic of whoever resumes. */
static gr_code ckpt_meta_u64(const ckpt_plan *rp, const safet_file *f, const char *key,
                             int required, uint64_t min, uint64_t *out, int *found, gr_status *st)
{
    const char *v = safet_meta_get(f, key);
    char shown[48];
    *found = v != NULL;
    *out = 0;
    if (!v && !required) return GR_OK;
    if (!v) return rt_fail(st, GR_ERR_DATA, "%s: metadata '%s' is missing\n", rp->path, key);
    if (ckpt_parse_u64(v, GR_MAX_STEPS, out) < 0 || *out < min)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: metadata '%s': '%s' is not a decimal integer in [%llu, %llu] (2^53)\n",
                       rp->path, key, safet_shown(v, shown), (unsigned long long)min,
                       (unsigned long long)GR_MAX_STEPS);
    return GR_OK;
}

/* A position saved with another batch size counts other batches: it is
 * converted through the examples it stands for, which must be a whole
 * number of this program's batches (the shuffle of an epoch depends only on
 * the seed and the epoch, so the same examples follow). */
static gr_code ckpt_convert_position(const ckpt_plan *rp, const safet_file *f, const ir_data *d,
                                     uint64_t *pos, gr_status *st)
{
    char kb[512];
    uint64_t saved, examples;
    int has_b = 0;
    snprintf(kb, sizeof kb, "data.%s.batch", d->name);
    gr_code c = ckpt_meta_u64(rp, f, kb, 0, 1, &saved, &has_b, st);
    if (c != GR_OK || !has_b || saved == (uint64_t)d->batch) return c;
    if (__builtin_mul_overflow(*pos, saved, &examples) || examples > (uint64_t)d->n)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: metadata 'data.%s.position' = %llu batches of %llu examples, but data "
                       "'%s' has %lld examples\n",
                       rp->path, d->name, (unsigned long long)*pos, (unsigned long long)saved,
                       d->name, (long long)d->n);
    if (examples % (uint64_t)d->batch != 0)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: data '%s' was saved after %llu examples of its epoch (%llu batches of "
                       "%llu), not a whole number of this program's batches of %lld: resume with "
                       "batch %llu, or load only the weights (--init-from)\n",
                       rp->path, d->name, (unsigned long long)examples, (unsigned long long)*pos,
                       (unsigned long long)saved, (long long)d->batch, (unsigned long long)saved);
    *pos = examples / (uint64_t)d->batch;
    return GR_OK;
}

static gr_code ckpt_match_cursor(const ckpt_plan *rp, const safet_file *f, const ir_data *d, int di,
                                 gr_status *st)
{
    char ke[512], kp[512];
    int has_e = 0, has_p = 0;
    snprintf(ke, sizeof ke, "data.%s.epoch", d->name);
    snprintf(kp, sizeof kp, "data.%s.position", d->name);
    gr_code c = ckpt_meta_u64(rp, f, ke, 0, 0, &rp->cursor[di][0], &has_e, st);
    if (c == GR_OK) c = ckpt_meta_u64(rp, f, kp, has_e, 0, &rp->cursor[di][1], &has_p, st);
    if (c == GR_OK && has_p) c = ckpt_convert_position(rp, f, d, &rp->cursor[di][1], st);
    if (c != GR_OK) return c;
    if (has_p && !has_e)
        return rt_fail(st, GR_ERR_DATA, "%s: metadata '%s' is missing\n", rp->path, ke);
    int64_t per_epoch = d->batch > 0 ? d->n / (d->batch * dist_data_shards(rp->dist, di)) : 0;
    if (has_p && rp->cursor[di][1] > (uint64_t)per_epoch)
        return rt_fail(
            st, GR_ERR_DATA, "%s: metadata '%s' = %llu, but data '%s' has %lld batches per epoch\n",
            rp->path, kp, (unsigned long long)rp->cursor[di][1], d->name, (long long)per_epoch);
    rp->has_cursor[di] = has_e;
    return GR_OK;
}

/* "data.NAME.epoch" keys must name a data source of the program. */
static gr_code ckpt_check_data_keys(const gr_session *s, const ckpt_plan *rp, const safet_file *f,
                                    gr_status *st)
{
    const ir_graph *g = rt_session_graph(s);
    for (int i = 0; i < f->n_meta; i++) {
        const char *k = f->meta[i].key, *dot = strrchr(k, '.');
        if (strncmp(k, "data.", 5) != 0 || !dot || dot < k + 5) continue;
        int found = 0;
        for (int d = 0; d < g->n_data && !found; d++)
            found = strlen(g->data[d].name) == (size_t)(dot - k - 5) &&
                    strncmp(g->data[d].name, k + 5, (size_t)(dot - k - 5)) == 0;
        if (!found)
            return rt_fail(st, GR_ERR_DATA,
                           "%s: metadata '%s': the program has no data source '%.*s'\n", rp->path,
                           k, (int)(dot - k - 5), k + 5);
    }
    return GR_OK;
}

/* Data positions count batches of all the processes together: resuming
 * them needs as many processes as saved them. */
static gr_code ckpt_match_processes(const ckpt_plan *rp, const safet_file *f, gr_status *st)
{
    uint64_t p;
    int found;
    gr_code c = ckpt_meta_u64(rp, f, "processes", 0, 1, &p, &found, st);
    if (c != GR_OK || (found ? p : 1) == (uint64_t)rp->processes) return c;
    return rt_fail(st, GR_ERR_DATA,
                   "%s: saved by %llu process%s, restored by %d: resume with the same number "
                   "(or load only the weights: --init-from)\n",
                   rp->path, (unsigned long long)(found ? p : 1), (found ? p : 1) == 1 ? "" : "es",
                   rp->processes);
}

static gr_code ckpt_match_state(const gr_session *s, const safet_file *f, ckpt_plan *rp,
                                gr_status *st)
{
    int found;
    gr_code c = ckpt_meta_u64(rp, f, "step", 0, 0, &rp->steps, &found, st);
    if (c == GR_OK) c = ckpt_meta_u64(rp, f, "run_counter", 0, 0, &rp->runs, &found, st);
    if (c == GR_OK && !found) rp->runs = rp->steps;
    if (c == GR_OK) c = ckpt_match_processes(rp, f, st);
    if (c == GR_OK) c = ckpt_check_data_keys(s, rp, f, st);
    const ir_graph *g = rt_session_graph(s);
    for (int d = 0; c == GR_OK && d < g->n_data; d++)
        c = ckpt_match_cursor(rp, f, &g->data[d], d, st);
    return c;
}

/* Characters in a UTF-8 string. */
static int64_t utf8_count(const char *s)
{
    int64_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* A text source's vocabulary in the file, when there is one, must be the
 * program's: the same ids must mean the same characters (weights_only
 * too). */
static gr_code ckpt_match_vocab(const gr_session *s, const safet_file *f, const char *path,
                                gr_status *st)
{
    const ir_graph *g = rt_session_graph(s);
    for (int d = 0; d < g->n_data; d++) {
        const ir_data *src = &g->data[d];
        char key[512];
        snprintf(key, sizeof key, "data.%s.vocab", src->name);
        const char *v = safet_meta_get(f, key), *want = src->vocab_chars ? src->vocab_chars : "";
        if (src->kind != DATA_TEXT || !v || strcmp(v, want) == 0) continue;
        return rt_fail(st, GR_ERR_DATA,
                       "%s: metadata '%s': data '%s' was trained with another vocabulary (%s%lld "
                       "ids) than the program reads now (%s%lld ids)\n",
                       path, key, src->name, *v ? "" : "bytes, ",
                       *v ? (long long)utf8_count(v) : 256LL, *want ? "" : "bytes, ",
                       (long long)src->vocab);
    }
    return GR_OK;
}

/* Readers open lazily when a plan first needs them (readers.c), but a
 * restored cursor away from the start needs one now (one already open
 * stays as it is). */
static gr_code ckpt_open_readers(gr_session *s, const ckpt_plan *rp, gr_status *st)
{
    gr_code c = GR_OK;
    for (int d = 0; d < rt_session_graph(s)->n_data && c == GR_OK; d++)
        if (rp->has_cursor[d] && (rp->cursor[d][0] || rp->cursor[d][1]))
            c = rt_open_reader(s, d, st);
    return c;
}

static void ckpt_cursor_set(data_reader *r, int di, void *ctx)
{
    const ckpt_plan *rp = ctx;
    if (rp->has_cursor[di]) data_seek(r, rp->cursor[di][0], rp->cursor[di][1]);
}

static void ckpt_apply(gr_session *s, const ckpt_plan *rp, const gr_restore_options *o)
{
    rt_session_pause(s);
    for (int vi = 0; vi < rt_session_graph(s)->n_vars; vi++)
        if (rp->src[vi]) rt_var_write(s, vi, rp->src[vi]->data);
    if (!o->weights_only) {
        rt_readers_each(s, ckpt_cursor_set, (void *)rp);
        rt_session_set_counters(s, rp->steps, rp->runs);
    }
    rt_session_resume(s);
}

/* Matches the parsed file against the session, then applies it: nothing
 * in the session changes unless every check passed. */
static gr_code ckpt_restore_parsed(gr_session *s, const char *path, const safet_file *f,
                                   const gr_restore_options *o, gr_status *st)
{
    int nv = rt_session_graph(s)->n_vars, nd = rt_session_graph(s)->n_data;
    ckpt_plan rp = {.path = path,
                    .processes = dist_size(rt_session_dist(s)),
                    .dist = rt_session_dist(s),
                    .src = base_xcalloc((size_t)nv + 1, sizeof *rp.src),
                    .cursor = base_xcalloc((size_t)nd + 1, sizeof *rp.cursor),
                    .has_cursor = base_xcalloc((size_t)nd + 1, sizeof *rp.has_cursor)};
    gr_code c = ckpt_match_vocab(s, f, path, st);
    if (c == GR_OK) c = ckpt_match_tensors(s, f, o, &rp, st);
    if (c == GR_OK && !o->weights_only) c = ckpt_match_state(s, f, &rp, st);
    if (c == GR_OK && !o->weights_only) c = ckpt_open_readers(s, &rp, st);
    if (c == GR_OK) ckpt_apply(s, &rp, o);
    free(rp.src);
    free(rp.cursor);
    free(rp.has_cursor);
    return c;
}

/* Reads path whole into *buf and parses it into f (freed by the caller,
 * f first, whatever the result). */
/* A distributed session's file is read by rank 0 and sent to the others. */
static gr_code ckpt_load(gr_session *s, const char *path, uint8_t **buf, safet_file *f,
                         gr_status *st)
{
    size_t len = 0;
    char err[1024];
    memset(f, 0, sizeof *f);
    *buf = NULL;
    rt_dist *d = s ? rt_session_dist(s) : NULL;
    gr_code c =
        d ? dist_read_file(d, path, ckio_read, buf, &len, st) : ckio_read(path, buf, &len, st);
    if (c == GR_OK && safet_parse(*buf, len, path, f, err, sizeof err) < 0)
        c = rt_fail(st, GR_ERR_DATA, "%s\n", err);
    return c;
}

gr_code gr_session_restore(gr_session *s, const char *path, const gr_restore_options *opt,
                           gr_status *st)
{
    if (!s || !path) return rt_null(st, "gr_session_restore", s ? "path" : "session");
    gr_restore_options o = {0};
    if (opt) o = *opt;
    uint8_t *buf;
    safet_file f;
    gr_code c = ckpt_load(s, path, &buf, &f, st);
    if (c == GR_OK) c = ckpt_restore_parsed(s, path, &f, &o, st);
    safet_file_free(&f);
    free(buf);
    if (c == GR_OK && rt_session_dist(s)) c = dist_restored(rt_session_dist(s), st);
    if (c == GR_OK) rt_ok(st);
    return c;
}

/* ---- a checkpoint on its own (gr_checkpoint_*: `graphrun inspect`) ---- */

struct gr_checkpoint {
    uint8_t *buf; /* the file; f's tensors point into it */
    safet_file f;
};

gr_code gr_checkpoint_open(const char *path, gr_checkpoint **out, gr_status *st)
{
    if (!out) return rt_null(st, "gr_checkpoint_open", "out");
    *out = NULL;
    if (!path) return rt_null(st, "gr_checkpoint_open", "path");
    gr_checkpoint *k = base_xcalloc(1, sizeof *k);
    gr_code c = ckpt_load(NULL, path, &k->buf, &k->f, st);
    if (c != GR_OK) {
        gr_checkpoint_free(k);
        return c;
    }
    *out = k;
    rt_ok(st);
    return GR_OK;
}

void gr_checkpoint_free(gr_checkpoint *c)
{
    if (!c) return;
    safet_file_free(&c->f);
    free(c->buf);
    free(c);
}

int gr_checkpoint_tensor_count(const gr_checkpoint *c)
{
    return c ? c->f.n_t : 0;
}

const char *gr_checkpoint_tensor_name(const gr_checkpoint *c, int k)
{
    return c && k >= 0 && k < c->f.n_t ? c->f.t[k].name : NULL;
}

gr_code gr_checkpoint_tensor(const gr_checkpoint *c, int k, gr_tensor **out, gr_status *st)
{
    if (!out || !c) return rt_null(st, "gr_checkpoint_tensor", c ? "out" : "checkpoint");
    *out = NULL;
    if (!gr_checkpoint_tensor_name(c, k))
        return rt_fail(st, GR_ERR_ARG, "gr_checkpoint_tensor: no tensor %d\n", k);
    const safet_tensor *t = &c->f.t[k];
    gr_tensor *x = gr_tensor_new(t->dtype == SAFET_F32 ? GR_F32 : GR_I32, t->rank, t->dim);
    if (!x) return rt_fail(st, GR_ERR_NOMEM, "%s: no memory for %zu bytes\n", t->name, t->bytes);
    memcpy(gr_tensor_data(x), t->data, t->bytes);
    *out = x;
    rt_ok(st);
    return GR_OK;
}

int gr_checkpoint_meta_count(const gr_checkpoint *c)
{
    return c ? c->f.n_meta : 0;
}

const char *gr_checkpoint_meta(const gr_checkpoint *c, int k, const char **value)
{
    if (!c || k < 0 || k >= c->f.n_meta) return NULL;
    if (value) *value = c->f.meta[k].value;
    return c->f.meta[k].key;
}
