/* checkpoint.c - checkpoints in the safetensors format: the parser and
 * writer of the container (session-free, fuzzed on its own), then
 * gr_session_save / gr_session_restore.
 *
 * Save copies every variable, the data cursors and the step counters into
 * memory while holding the session's pause lock exclusively (so no run is
 * half-way through its updates), releases it, then writes a temp file,
 * fsyncs it and renames it over the target.  Restore validates the whole
 * file against the program before it writes anything into the session. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

/* ---- SHA-256 (FIPS 180-4), for the graph_sha256 metadata ---- */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ror32(v[4], 6) ^ ror32(v[4], 11) ^ ror32(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha_k[i] + w[i];
        uint32_t t2 = (ror32(v[0], 2) ^ ror32(v[0], 13) ^ ror32(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) h[i] += v[i];
}

void ckpt_sha256_hex(const void *buf, size_t len, char hex[65])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = buf;
    size_t full = len / 64 * 64, rest = len - full;
    for (size_t i = 0; i < full; i += 64) sha_block(h, p + i);
    /* the tail, the 0x80 marker and the bit length: one or two blocks */
    uint8_t tail[128] = {0};
    memcpy(tail, p + full, rest);
    tail[rest] = 0x80;
    size_t nt = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) tail[nt - 1 - i] = (uint8_t)(bits >> (8 * i));
    for (size_t i = 0; i < nt; i += 64) sha_block(h, tail + i);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", h[i]);
}

/* ---- parsing ---- */

typedef struct parse_ctx {
    const char *fname;
    char *err;
    size_t errlen;
    size_t data_len; /* bytes after the header */
    const uint8_t *data;
} parse_ctx;

static int perr(const parse_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(const parse_ctx *c, const char *fmt, ...)
{
    int n = snprintf(c->err, c->errlen, "%s: ", c->fname);
    if (n < 0 || (size_t)n >= c->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *ckpt_shape_str(int rank, const int64_t *dim, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)dim[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

/* A JSON number that is an integer in [0, max]. */
static int json_uint(const cJSON *j, double max, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= max) || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_dtype(const parse_ctx *c, const char *name, const cJSON *e, ckpt_tensor *t)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(d))
        return perr(c, "tensor '%s': \"dtype\" is missing or not a string", name);
    if (strcmp(d->valuestring, "F32") == 0)
        t->dtype = CKPT_F32;
    else if (strcmp(d->valuestring, "I32") == 0)
        t->dtype = CKPT_I32;
    else
        return perr(c, "tensor '%s': dtype %.32s is not supported (only F32 and I32)", name,
                    d->valuestring);
    return 0;
}

static int parse_shape(const parse_ctx *c, const char *name, const cJSON *e, ckpt_tensor *t)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(s))
        return perr(c, "tensor '%s': \"shape\" is missing or not an array", name);
    int rank = cJSON_GetArraySize(s);
    if (rank > CKPT_MAX_DIMS)
        return perr(c, "tensor '%s': shape has %d dimensions, at most %d are supported", name, rank,
                    CKPT_MAX_DIMS);
    t->rank = 0;
    for (const cJSON *d = s->child; d; d = d->next) {
        uint64_t v;
        if (json_uint(d, 9007199254740992.0, &v) < 0)
            return perr(c, "tensor '%s': shape entries must be non-negative integers", name);
        t->dim[t->rank++] = (int64_t)v;
    }
    return 0;
}

/* numel * 4, or SIZE_MAX when that overflows. */
static size_t shape_bytes(const ckpt_tensor *t)
{
    size_t n = 4;
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(n, (size_t)t->dim[i], &n)) return SIZE_MAX;
    return n;
}

static int parse_offsets(const parse_ctx *c, const char *name, const cJSON *e, uint64_t r[2])
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) != 2 ||
        json_uint(o->child, 9007199254740992.0, &r[0]) < 0 ||
        json_uint(o->child->next, 9007199254740992.0, &r[1]) < 0)
        return perr(c,
                    "tensor '%s': \"data_offsets\" must be [begin, end] with non-negative "
                    "integers",
                    name);
    if (r[0] > r[1])
        return perr(c, "tensor '%s': data_offsets [%llu, %llu] have begin > end", name,
                    (unsigned long long)r[0], (unsigned long long)r[1]);
    if (r[1] > c->data_len)
        return perr(c,
                    "tensor '%s': data_offsets [%llu, %llu] go past the end of the data "
                    "(%zu bytes; is the file truncated?)",
                    name, (unsigned long long)r[0], (unsigned long long)r[1], c->data_len);
    return 0;
}

static int parse_entry(const parse_ctx *c, const cJSON *e, ckpt_tensor *t, uint64_t r[2])
{
    const char *name = e->string;
    if (!cJSON_IsObject(e)) return perr(c, "tensor '%s': entry is not a JSON object", name);
    if (parse_dtype(c, name, e, t) < 0 || parse_shape(c, name, e, t) < 0 ||
        parse_offsets(c, name, e, r) < 0)
        return -1;
    size_t want = shape_bytes(t);
    if (want != r[1] - r[0]) {
        char b[160];
        return perr(c, "tensor '%s': shape %s needs %zu bytes of %s, but data_offsets hold %llu",
                    name, ckpt_shape_str(t->rank, t->dim, b, sizeof b), want,
                    t->dtype == CKPT_F32 ? "F32" : "I32", (unsigned long long)(r[1] - r[0]));
    }
    t->data = c->data + r[0];
    t->bytes = want;
    return 0;
}

static int parse_meta(const parse_ctx *c, const cJSON *m, ckpt_file *f)
{
    if (!cJSON_IsObject(m)) return perr(c, "\"__metadata__\" is not a JSON object");
    f->meta = calloc((size_t)cJSON_GetArraySize(m) + 1, sizeof *f->meta);
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e)) return perr(c, "metadata '%s': value is not a string", e->string);
        f->meta[f->n_meta].key = strdup(e->string);
        f->meta[f->n_meta++].value = strdup(e->valuestring);
    }
    return 0;
}

typedef struct range_ref {
    uint64_t begin, end;
    int t;
} range_ref;

static int range_cmp(const void *a, const void *b)
{
    const range_ref *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Sorted by begin, the non-empty ranges must tile the data section: an
 * overlap means two tensors share bytes, a hole or a tail usually means the
 * header length was damaged and the data is read from the wrong place. */
static int check_layout(const parse_ctx *c, const ckpt_file *f, range_ref *r, int n)
{
    qsort(r, (size_t)n, sizeof *r, range_cmp);
    int last = -1;
    uint64_t covered = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].begin == r[i].end) continue;
        if (last >= 0 && r[i].begin < r[last].end)
            return perr(c, "tensors '%s' and '%s': data_offsets overlap", f->t[r[last].t].name,
                        f->t[r[i].t].name);
        if (r[i].begin > covered)
            return perr(c, "data bytes [%llu, %llu) belong to no tensor (before tensor '%s')",
                        (unsigned long long)covered, (unsigned long long)r[i].begin,
                        f->t[r[i].t].name);
        last = i;
        covered = r[i].end;
    }
    if (covered != c->data_len)
        return perr(c, "the last %llu data bytes belong to no tensor (damaged header length?)",
                    (unsigned long long)(c->data_len - covered));
    return 0;
}

static int is_duplicate(const ckpt_file *f, const char *name)
{
    for (int i = 0; i < f->n_t; i++)
        if (strcmp(f->t[i].name, name) == 0) return 1;
    return 0;
}

static int parse_entries(const parse_ctx *c, const cJSON *root, ckpt_file *f)
{
    int n = cJSON_GetArraySize(root), rc = 0;
    range_ref *r = calloc((size_t)n + 1, sizeof *r);
    f->t = calloc((size_t)n + 1, sizeof *f->t);
    for (const cJSON *e = root->child; e && rc == 0; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            rc = f->meta ? perr(c, "\"__metadata__\" appears twice") : parse_meta(c, e, f);
            continue;
        }
        if (is_duplicate(f, e->string)) {
            rc = perr(c, "tensor '%s' appears twice in the header", e->string);
            break;
        }
        ckpt_tensor *t = &f->t[f->n_t];
        uint64_t off[2] = {0, 0};
        rc = parse_entry(c, e, t, off);
        if (rc == 0) {
            t->name = strdup(e->string);
            r[f->n_t] = (range_ref){off[0], off[1], f->n_t};
            f->n_t++;
        }
    }
    if (rc == 0) rc = check_layout(c, f, r, f->n_t);
    free(r);
    return rc;
}

static int parse_header(const parse_ctx *c, const uint8_t *json, size_t n, ckpt_file *f)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)json, n, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t pos = at && at >= (const char *)json && at <= (const char *)json + n
                         ? (size_t)(at - (const char *)json)
                         : 0;
        return perr(c, "the header is not valid JSON (error near byte %zu of %zu)", pos, n);
    }
    int rc = 0;
    /* safetensors pads the header with spaces; anything else is garbage */
    for (const char *p = end; p && p < (const char *)json + n && rc == 0; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r')
            rc = perr(c, "the header has trailing bytes after its JSON object");
    if (rc == 0 && !cJSON_IsObject(root)) rc = perr(c, "the header is not a JSON object");
    if (rc == 0) rc = parse_entries(c, root, f);
    cJSON_Delete(root);
    return rc;
}

int ckpt_parse(const uint8_t *buf, size_t len, const char *fname, ckpt_file *out, char *err,
               size_t errlen)
{
    memset(out, 0, sizeof *out);
    parse_ctx c = {.fname = fname ? fname : "checkpoint", .err = err, .errlen = errlen};
    if (len < 8)
        return perr(&c, "file is %zu bytes, too short for a safetensors header (8 bytes)", len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    if (n > len - 8)
        return perr(&c,
                    "header length %llu exceeds the file size (%zu bytes; is the file "
                    "truncated?)",
                    (unsigned long long)n, len);
    if (n < 2)
        return perr(&c, "header length %llu is too small for a JSON object", (unsigned long long)n);
    c.data = buf + 8 + n;
    c.data_len = len - 8 - (size_t)n;
    if (parse_header(&c, buf + 8, (size_t)n, out) < 0) {
        ckpt_file_free(out);
        return -1;
    }
    return 0;
}

void ckpt_file_free(ckpt_file *f)
{
    for (int i = 0; f->t && i < f->n_t; i++) free(f->t[i].name);
    for (int i = 0; f->meta && i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->t);
    free(f->meta);
    memset(f, 0, sizeof *f);
}

const char *ckpt_meta_get(const ckpt_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

const ckpt_tensor *ckpt_find(const ckpt_file *f, const char *name)
{
    for (int i = 0; i < f->n_t; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

/* ---- writing the header ---- */

static cJSON *tensor_json(const ckpt_tensor *t, size_t begin)
{
    cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *off = cJSON_CreateArray();
    cJSON_AddStringToObject(e, "dtype", t->dtype == CKPT_F32 ? "F32" : "I32");
    for (int i = 0; i < t->rank; i++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dim[i]));
    cJSON_AddItemToObject(e, "shape", shape);
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)begin));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(begin + t->bytes)));
    cJSON_AddItemToObject(e, "data_offsets", off);
    return e;
}

static char *header_json(const ckpt_tensor *t, int n_t, const ckpt_meta *meta, int n_meta)
{
    cJSON *root = cJSON_CreateObject(), *m = cJSON_CreateObject();
    for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[i].key, meta[i].value);
    cJSON_AddItemToObject(root, "__metadata__", m);
    size_t off = 0;
    for (int i = 0; i < n_t; i++) {
        cJSON_AddItemToObject(root, t[i].name, tensor_json(&t[i], off));
        off += t[i].bytes;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

uint8_t *ckpt_header(const ckpt_tensor *t, int n_t, const ckpt_meta *meta, int n_meta, size_t *hlen)
{
    char *json = header_json(t, n_t, meta, n_meta);
    if (!json) return NULL;
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    uint8_t *h = malloc(8 + padded);
    if (h) {
        for (int i = 0; i < 8; i++) h[i] = (uint8_t)((uint64_t)padded >> (8 * i));
        memcpy(h + 8, json, n);
        memset(h + 8 + n, ' ', padded - n);
        *hlen = 8 + padded;
    }
    free(json);
    return h;
}

#ifndef CKPT_PARSER_ONLY
/* ---- sessions ---- */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

/* What a save copies under the pause lock: everything it writes. */
typedef struct snapshot {
    uint8_t *data; /* the variables, back to back in program order */
    size_t bytes;
    uint64_t (*cursor)[2];
    uint64_t steps, runs;
} snapshot;

static size_t vars_bytes(const ir_graph *g)
{
    size_t n = 0;
    for (int i = 0; i < g->n_vars; i++) n += ir_nbytes(&g->vars[i].type);
    return n;
}

static int snapshot_take(gr_session *s, snapshot *sn)
{
    const ir_graph *g = s->g;
    sn->bytes = vars_bytes(g);
    sn->data = malloc(sn->bytes + 1);
    sn->cursor = calloc((size_t)g->n_data + 1, sizeof *sn->cursor);
    if (!sn->data || !sn->cursor) return -1;
    pthread_rwlock_wrlock(&s->pause);
    size_t off = 0;
    for (int i = 0; i < g->n_vars; i++) {
        size_t n = ir_nbytes(&g->vars[i].type);
        memcpy(sn->data + off, s->var[i], n);
        off += n;
    }
    pthread_mutex_lock(&s->mu);
    for (int d = 0; d < g->n_data; d++)
        if (s->readers[d]) data_cursor(s->readers[d], &sn->cursor[d][0], &sn->cursor[d][1]);
    pthread_mutex_unlock(&s->mu);
    sn->steps = atomic_load(&s->train_steps);
    sn->runs = atomic_load(&s->steps);
    pthread_rwlock_unlock(&s->pause);
    return 0;
}

static void snapshot_free(snapshot *sn)
{
    free(sn->data);
    free(sn->cursor);
}

static void var_tensor(const ir_var *v, ckpt_tensor *t)
{
    t->name = (char *)v->name;
    t->dtype = v->type.dtype == DT_I32 ? CKPT_I32 : CKPT_F32;
    t->rank = v->type.rank;
    for (int k = 0; k < v->type.rank; k++) t->dim[k] = v->type.dim[k];
    t->bytes = ir_nbytes(&v->type);
}

static void add_meta(ckpt_meta *m, int *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_meta(ckpt_meta *m, int *n, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&m[*n].value, fmt, ap) < 0) m[*n].value = NULL;
    va_end(ap);
    m[*n].key = strdup(key);
    (*n)++;
}

static ckpt_meta *build_meta(const gr_session *s, const snapshot *sn, int *n)
{
    const ir_graph *g = s->g;
    ckpt_meta *m = calloc(8 + 2 * (size_t)g->n_data, sizeof *m);
    char hex[65], key[512];
    ckpt_sha256_hex(s->prog->src->text, s->prog->src->len, hex);
    *n = 0;
    add_meta(m, n, "format", "graphrun");
    add_meta(m, n, "graphrun_version", "%s", GR_VERSION_STRING);
    add_meta(m, n, "graph_sha256", "%s", hex);
    add_meta(m, n, "step", "%llu", (unsigned long long)sn->steps);
    add_meta(m, n, "run_counter", "%llu", (unsigned long long)sn->runs);
    for (int d = 0; d < g->n_data; d++) {
        snprintf(key, sizeof key, "data.%s.epoch", g->data[d].name);
        add_meta(m, n, key, "%llu", (unsigned long long)sn->cursor[d][0]);
        snprintf(key, sizeof key, "data.%s.position", g->data[d].name);
        add_meta(m, n, key, "%llu", (unsigned long long)sn->cursor[d][1]);
    }
    return m;
}

static void meta_free(ckpt_meta *m, int n)
{
    for (int i = 0; i < n; i++) {
        free(m[i].key);
        free(m[i].value);
    }
    free(m);
}

static int write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Makes the rename durable: the directory entry must reach the disk too. */
static int fsync_dir(const char *path)
{
    char *copy = strdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static gr_code write_atomic(const char *path, const uint8_t *h, size_t hn, const uint8_t *d,
                            size_t dn, gr_status *st)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        gr_code c = rt_fail(st, GR_ERR_IO, "%s: cannot create a temporary file next to it: %s\n",
                            path, strerror(errno));
        free(tmp);
        return c;
    }
    int ok = fchmod(fd, 0644) == 0 && write_all(fd, h, hn) == 0 && write_all(fd, d, dn) == 0 &&
             fsync(fd) == 0;
    int err = errno;
    if (close(fd) != 0 && ok) ok = 0, err = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, err = errno;
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return rt_fail(st, GR_ERR_IO, "%s: cannot write checkpoint: %s\n", path, strerror(err));
    }
    free(tmp);
    if (fsync_dir(path) != 0)
        return rt_fail(st, GR_ERR_IO, "%s: written, but its folder could not be synced: %s\n", path,
                       strerror(errno));
    return GR_OK;
}

gr_code gr_session_save(gr_session *s, const char *path, gr_status *st)
{
    if (!s || !path) return rt_fail(st, GR_ERR_ARG, "gr_session_save: NULL argument\n");
    const ir_graph *g = s->g;
    snapshot sn = {0};
    if (snapshot_take(s, &sn) < 0) {
        snapshot_free(&sn);
        return rt_fail(st, GR_ERR_NOMEM, "%s: no memory for the checkpoint snapshot\n", path);
    }
    ckpt_tensor *t = calloc((size_t)g->n_vars + 1, sizeof *t);
    for (int i = 0; i < g->n_vars; i++) var_tensor(&g->vars[i], &t[i]);
    int n_meta = 0;
    ckpt_meta *meta = build_meta(s, &sn, &n_meta);
    size_t hn = 0;
    uint8_t *h = ckpt_header(t, g->n_vars, meta, n_meta, &hn);
    gr_code c = h ? write_atomic(path, h, hn, sn.data, sn.bytes, st)
                  : rt_fail(st, GR_ERR_NOMEM, "%s: no memory for the checkpoint header\n", path);
    free(h);
    meta_free(meta, n_meta);
    free(t);
    snapshot_free(&sn);
    if (c == GR_OK) rt_ok(st);
    return c;
}

uint64_t gr_session_step(const gr_session *s)
{
    return s ? atomic_load(&((gr_session *)s)->train_steps) : 0;
}

/* ---- restore ---- */

static gr_code read_file(const char *path, uint8_t **buf, size_t *len, gr_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return rt_fail(st, GR_ERR_IO, "%s: cannot open checkpoint: %s\n", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return rt_fail(st, GR_ERR_IO, "%s: not a regular file\n", path);
    }
    *len = (size_t)sb.st_size;
    *buf = malloc(*len + 1);
    if (!*buf) {
        fclose(f);
        return rt_fail(st, GR_ERR_NOMEM, "%s: no memory to read %zu bytes\n", path, *len);
    }
    size_t got = fread(*buf, 1, *len, f);
    fclose(f);
    if (got != *len) {
        free(*buf);
        *buf = NULL;
        return rt_fail(st, GR_ERR_IO, "%s: read %zu of %zu bytes\n", path, got, *len);
    }
    return GR_OK;
}

/* Everything a restore will write, decided before anything is written. */
typedef struct restore_plan {
    const char *path;
    const ckpt_tensor **src; /* per variable: its tensor in the file, or NULL */
    uint64_t (*cursor)[2];   /* per data source */
    int *has_cursor;
    uint64_t steps, runs;
} restore_plan;

static int wanted(const ir_var *v, const gr_restore_options *o)
{
    return !o->weights_only || (v->trainable && v->slot_of < 0);
}

/* --init-from may read a checkpoint made with another optimizer: its slots
 * ("<weight>/momentum") and step counter are not weights and are skipped. */
static int foreign_state(const ir_graph *g, const char *name)
{
    if (strcmp(name, "global_step") == 0) return 1;
    const char *slash = strrchr(name, '/');
    if (!slash) return 0;
    char *owner = strndup(name, (size_t)(slash - name));
    int vi = ir_find_var(g, owner);
    free(owner);
    return vi >= 0;
}

static gr_code check_tensor(const restore_plan *rp, const ir_var *v, const ckpt_tensor *t,
                            gr_status *st)
{
    ckpt_dtype want = v->type.dtype == DT_I32 ? CKPT_I32 : CKPT_F32;
    char a[160], b[160];
    if (t->dtype != want)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: tensor '%s': dtype %s does not match the variable's %s\n", rp->path,
                       t->name, t->dtype == CKPT_F32 ? "F32" : "I32",
                       want == CKPT_F32 ? "F32" : "I32");
    int same = t->rank == v->type.rank;
    for (int k = 0; same && k < t->rank; k++) same = t->dim[k] == v->type.dim[k];
    if (!same)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: tensor '%s': shape %s does not match the variable's %s\n", rp->path,
                       t->name, ckpt_shape_str(t->rank, t->dim, a, sizeof a),
                       ckpt_shape_str(v->type.rank, v->type.dim, b, sizeof b));
    return GR_OK;
}

static gr_code match_tensors(const gr_session *s, const ckpt_file *f, const gr_restore_options *o,
                             restore_plan *rp, gr_status *st)
{
    const ir_graph *g = s->g;
    for (int i = 0; i < f->n_t; i++) {
        const ckpt_tensor *t = &f->t[i];
        int vi = ir_find_var(g, t->name);
        if (vi < 0 && o->weights_only && foreign_state(g, t->name)) continue;
        if (vi < 0)
            return rt_fail(
                st, GR_ERR_DATA,
                "%s: tensor '%s': unexpected, the program has no variable of that name\n", rp->path,
                t->name);
        if (!wanted(&g->vars[vi], o)) continue;
        gr_code c = check_tensor(rp, &g->vars[vi], t, st);
        if (c != GR_OK) return c;
        rp->src[vi] = t;
    }
    for (int vi = 0; vi < g->n_vars; vi++)
        if (wanted(&g->vars[vi], o) && !rp->src[vi] && !o->allow_missing)
            return rt_fail(st, GR_ERR_DATA,
                           "%s: tensor '%s': missing, the file has no value for this variable "
                           "(allow_missing / --allow-missing keeps its initial value)\n",
                           rp->path, g->vars[vi].name);
    return GR_OK;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == ' ') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

static gr_code meta_u64(const restore_plan *rp, const ckpt_file *f, const char *key, int required,
                        uint64_t *out, int *found, gr_status *st)
{
    const char *v = ckpt_meta_get(f, key);
    *found = v != NULL;
    *out = 0;
    if (!v && !required) return GR_OK;
    if (!v) return rt_fail(st, GR_ERR_DATA, "%s: metadata '%s' is missing\n", rp->path, key);
    if (parse_u64(v, out) < 0)
        return rt_fail(st, GR_ERR_DATA,
                       "%s: metadata '%s': '%.40s' is not a non-negative integer\n", rp->path, key,
                       v);
    return GR_OK;
}

static gr_code match_cursor(const restore_plan *rp, const ckpt_file *f, const ir_data *d, int di,
                            gr_status *st)
{
    char ke[512], kp[512];
    int has_e = 0, has_p = 0;
    snprintf(ke, sizeof ke, "data.%s.epoch", d->name);
    snprintf(kp, sizeof kp, "data.%s.position", d->name);
    gr_code c = meta_u64(rp, f, ke, 0, &rp->cursor[di][0], &has_e, st);
    if (c == GR_OK) c = meta_u64(rp, f, kp, has_e, &rp->cursor[di][1], &has_p, st);
    if (c != GR_OK) return c;
    if (has_p && !has_e)
        return rt_fail(st, GR_ERR_DATA, "%s: metadata '%s' is missing\n", rp->path, ke);
    int64_t per_epoch = d->batch > 0 ? d->n / d->batch : 0;
    if (has_p && rp->cursor[di][1] > (uint64_t)per_epoch)
        return rt_fail(
            st, GR_ERR_DATA, "%s: metadata '%s' = %llu, but data '%s' has %lld batches per epoch\n",
            rp->path, kp, (unsigned long long)rp->cursor[di][1], d->name, (long long)per_epoch);
    rp->has_cursor[di] = has_e;
    return GR_OK;
}

/* "data.NAME.epoch" keys must name a data source of the program. */
static gr_code check_data_keys(const gr_session *s, const restore_plan *rp, const ckpt_file *f,
                               gr_status *st)
{
    for (int i = 0; i < f->n_meta; i++) {
        const char *k = f->meta[i].key, *dot = strrchr(k, '.');
        if (strncmp(k, "data.", 5) != 0 || !dot || dot < k + 5) continue;
        int found = 0;
        for (int d = 0; d < s->g->n_data && !found; d++)
            found = strlen(s->g->data[d].name) == (size_t)(dot - k - 5) &&
                    strncmp(s->g->data[d].name, k + 5, (size_t)(dot - k - 5)) == 0;
        if (!found)
            return rt_fail(st, GR_ERR_DATA,
                           "%s: metadata '%s': the program has no data source '%.*s'\n", rp->path,
                           k, (int)(dot - k - 5), k + 5);
    }
    return GR_OK;
}

static gr_code match_state(const gr_session *s, const ckpt_file *f, restore_plan *rp, gr_status *st)
{
    int found;
    gr_code c = meta_u64(rp, f, "step", 0, &rp->steps, &found, st);
    if (c == GR_OK) c = meta_u64(rp, f, "run_counter", 0, &rp->runs, &found, st);
    if (c == GR_OK && !found) rp->runs = rp->steps;
    if (c == GR_OK) c = check_data_keys(s, rp, f, st);
    for (int d = 0; c == GR_OK && d < s->g->n_data; d++)
        c = match_cursor(rp, f, &s->g->data[d], d, st);
    return c;
}

/* Readers open lazily when a plan first needs them (session.c), but a
 * restored cursor needs one now. */
static gr_code open_cursor_readers(gr_session *s, const restore_plan *rp, gr_status *st)
{
    gr_code c = GR_OK;
    pthread_mutex_lock(&s->mu);
    for (int d = 0; d < s->g->n_data && c == GR_OK; d++)
        if (rp->has_cursor[d] && (rp->cursor[d][0] || rp->cursor[d][1] || s->readers[d]))
            c = rt_open_reader(s, d, st);
    pthread_mutex_unlock(&s->mu);
    return c;
}

static void apply(gr_session *s, const restore_plan *rp, const gr_restore_options *o)
{
    pthread_rwlock_wrlock(&s->pause);
    for (int vi = 0; vi < s->g->n_vars; vi++)
        if (rp->src[vi]) memcpy(s->var[vi], rp->src[vi]->data, rp->src[vi]->bytes);
    if (!o->weights_only) {
        pthread_mutex_lock(&s->mu);
        for (int d = 0; d < s->g->n_data; d++)
            if (rp->has_cursor[d] && s->readers[d])
                data_seek(s->readers[d], rp->cursor[d][0], rp->cursor[d][1]);
        pthread_mutex_unlock(&s->mu);
        atomic_store(&s->train_steps, rp->steps);
        atomic_store(&s->steps, rp->runs);
    }
    pthread_rwlock_unlock(&s->pause);
}

static gr_code restore_parsed(gr_session *s, const ckpt_file *f, const gr_restore_options *o,
                              restore_plan *rp, gr_status *st)
{
    gr_code c = match_tensors(s, f, o, rp, st);
    if (c == GR_OK && !o->weights_only) c = match_state(s, f, rp, st);
    if (c == GR_OK && !o->weights_only) c = open_cursor_readers(s, rp, st);
    if (c == GR_OK) apply(s, rp, o);
    return c;
}

gr_code gr_session_restore(gr_session *s, const char *path, const gr_restore_options *opt,
                           gr_status *st)
{
    if (!s || !path) return rt_fail(st, GR_ERR_ARG, "gr_session_restore: NULL argument\n");
    gr_restore_options o = {0};
    if (opt) o = *opt;
    uint8_t *buf = NULL;
    size_t len = 0;
    gr_code c = read_file(path, &buf, &len, st);
    if (c != GR_OK) return c;
    ckpt_file f;
    char err[1024];
    if (ckpt_parse(buf, len, path, &f, err, sizeof err) < 0) {
        free(buf);
        return rt_fail(st, GR_ERR_DATA, "%s\n", err);
    }
    int nv = s->g->n_vars, nd = s->g->n_data;
    restore_plan rp = {.path = path,
                       .src = calloc((size_t)nv + 1, sizeof *rp.src),
                       .cursor = calloc((size_t)nd + 1, sizeof *rp.cursor),
                       .has_cursor = calloc((size_t)nd + 1, sizeof *rp.has_cursor)};
    c = restore_parsed(s, &f, &o, &rp, st);
    free(rp.src);
    free(rp.cursor);
    free(rp.has_cursor);
    ckpt_file_free(&f);
    free(buf);
    if (c == GR_OK) rt_ok(st);
    return c;
}
#endif
