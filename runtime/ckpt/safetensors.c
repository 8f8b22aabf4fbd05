/* safetensors.c - the safetensors container: parser and header writer
 * (see safetensors.h).  Every error names the file, and the tensor where
 * there is one. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fatal.h"

/* JSON numbers are doubles: offsets and dims must be exact integers. */
#define SAFET_MAX_INT 9007199254740992.0 /* 2^53 */

typedef struct safet_ctx {
    const char *fname;
    char *err;
    size_t errlen;
    size_t data_len; /* bytes after the header */
    const uint8_t *data;
} safet_ctx;

/* A tensor's data_offsets, kept beside its index for the layout check. */
typedef struct safet_range {
    uint64_t begin, end;
    int t;
} safet_range;

static int safet_err(const safet_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int safet_err(const safet_ctx *c, const char *fmt, ...)
{
    int n = snprintf(c->err, c->errlen, "%s: ", c->fname);
    if (n < 0 || (size_t)n >= c->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

const char *safet_dtype_name(safet_dtype d)
{
    return d == SAFET_F32 ? "F32" : "I32";
}

const char *safet_shape_str(int rank, const int64_t *dim, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)dim[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

/* ---- one tensor entry ---- */

/* A JSON number that is an integer in [0, max]. */
static int safet_json_uint(const cJSON *j, double max, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return -1;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= max) || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int safet_parse_dtype(const safet_ctx *c, const char *name, const cJSON *e, safet_tensor *t)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(d))
        return safet_err(c, "tensor '%s': \"dtype\" is missing or not a string", name);
    if (strcmp(d->valuestring, "F32") == 0)
        t->dtype = SAFET_F32;
    else if (strcmp(d->valuestring, "I32") == 0)
        t->dtype = SAFET_I32;
    else
        return safet_err(c, "tensor '%s': dtype %.32s is not supported (only F32 and I32)", name,
                         d->valuestring);
    return 0;
}

static int safet_parse_shape(const safet_ctx *c, const char *name, const cJSON *e, safet_tensor *t)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(s))
        return safet_err(c, "tensor '%s': \"shape\" is missing or not an array", name);
    int rank = cJSON_GetArraySize(s);
    if (rank > SAFET_MAX_DIMS)
        return safet_err(c, "tensor '%s': shape has %d dimensions, at most %d are supported", name,
                         rank, SAFET_MAX_DIMS);
    t->rank = 0;
    for (const cJSON *d = s->child; d; d = d->next) {
        uint64_t v;
        if (safet_json_uint(d, SAFET_MAX_INT, &v) < 0)
            return safet_err(c, "tensor '%s': shape entries must be non-negative integers", name);
        t->dim[t->rank++] = (int64_t)v;
    }
    return 0;
}

/* numel * 4, or SIZE_MAX when that overflows. */
static size_t safet_shape_bytes(const safet_tensor *t)
{
    size_t n = 4;
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(n, (size_t)t->dim[i], &n)) return SIZE_MAX;
    return n;
}

static int safet_parse_offsets(const safet_ctx *c, const char *name, const cJSON *e, uint64_t r[2])
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(o) || cJSON_GetArraySize(o) != 2 ||
        safet_json_uint(o->child, SAFET_MAX_INT, &r[0]) < 0 ||
        safet_json_uint(o->child->next, SAFET_MAX_INT, &r[1]) < 0)
        return safet_err(c,
                         "tensor '%s': \"data_offsets\" must be [begin, end] with non-negative "
                         "integers",
                         name);
    if (r[0] > r[1])
        return safet_err(c, "tensor '%s': data_offsets [%llu, %llu] have begin > end", name,
                         (unsigned long long)r[0], (unsigned long long)r[1]);
    if (r[1] > c->data_len)
        return safet_err(c,
                         "tensor '%s': data_offsets [%llu, %llu] go past the end of the data "
                         "(%zu bytes; is the file truncated?)",
                         name, (unsigned long long)r[0], (unsigned long long)r[1], c->data_len);
    return 0;
}

static int safet_parse_entry(const safet_ctx *c, const cJSON *e, safet_tensor *t, uint64_t r[2])
{
    const char *name = e->string;
    if (!cJSON_IsObject(e)) return safet_err(c, "tensor '%s': entry is not a JSON object", name);
    if (safet_parse_dtype(c, name, e, t) < 0 || safet_parse_shape(c, name, e, t) < 0 ||
        safet_parse_offsets(c, name, e, r) < 0)
        return -1;
    size_t want = safet_shape_bytes(t);
    if (want != r[1] - r[0]) {
        char b[160];
        return safet_err(c,
                         "tensor '%s': shape %s needs %zu bytes of %s, but data_offsets hold %llu",
                         name, safet_shape_str(t->rank, t->dim, b, sizeof b), want,
                         safet_dtype_name(t->dtype), (unsigned long long)(r[1] - r[0]));
    }
    t->data = c->data + r[0];
    t->bytes = want;
    return 0;
}

/* ---- names ---- */

const char *safet_shown(const char *v, char buf[48])
{
    size_t n = strnlen(v, 40);
    for (size_t i = 0; i < n; i++) buf[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
    strcpy(buf + n, v[n] ? "..." : "");
    return buf;
}

/* Code points that change how the text around them reads without showing:
 * C0, DEL and C1 controls, zero-width and bidirectional formatting. */
static int safet_hidden(uint32_t v)
{
    return v < 0x20 || (v >= 0x7f && v <= 0x9f) || (v >= 0x200b && v <= 0x200f) ||
           (v >= 0x202a && v <= 0x202e) || (v >= 0x2060 && v <= 0x2069) || v == 0xfeff;
}

/* The code point at s (NUL-terminated) into *v: its length, or 0 when the
 * bytes there are not UTF-8 (overlong forms and surrogates included).  The
 * codec links alone (the fuzzer), so it has its own decoder. */
static int safet_utf8(const unsigned char *s, uint32_t *v)
{
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (len == 0) return 0;
    *v = len == 1 ? c : c & (0x3Fu >> (len - 1));
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0; /* the terminating NUL stops here too */
        *v = *v << 6 | (s[k] & 0x3Fu);
    }
    if (*v < least[len] || *v > 0x10FFFF || (*v >= 0xD800 && *v <= 0xDFFF)) return 0;
    return len;
}

/* What is wrong with a tensor name or metadata key, or NULL: it must read
 * as what it is, so it is non-empty UTF-8 with no hidden code point. */
static const char *safet_name_flaw(const char *name)
{
    const unsigned char *p = (const unsigned char *)name;
    if (!*p) return "is empty";
    for (uint32_t v; *p; p += safet_utf8(p, &v)) {
        if (!safet_utf8(p, &v)) return "is not valid UTF-8";
        if (safet_hidden(v)) return "holds a control or invisible formatting character";
    }
    return NULL;
}

static int safet_check_name(const safet_ctx *c, const char *what, const char *name)
{
    char shown[48];
    const char *flaw = safet_name_flaw(name);
    return flaw ? safet_err(c, "%s '%s' %s", what, safet_shown(name, shown), flaw) : 0;
}

/* The offset of the first JSON string in s[0..n) that holds a NUL, a raw
 * byte or the escape \u0000, or -1.  Parsed strings end at their first
 * NUL, so "w\u0000junk" would silently read as "w". */
static long safet_find_nul(const char *s, size_t n)
{
    long start = -1; /* of the string being read */
    for (size_t i = 0; i < n; i++) {
        if (s[i] == 0) return start >= 0 ? start : (long)i;
        if (start < 0 || s[i] == '"') {
            start = start < 0 && s[i] == '"' ? (long)i : -1;
            continue;
        }
        if (s[i] != '\\' || i + 1 == n) continue;
        if (s[i + 1] == 'u' && n - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0) return start;
        if (s[i + 1]) i++; /* the escaped character; a raw NUL is found next round */
    }
    return -1;
}

static int safet_nul_err(const safet_ctx *c, const char *s, size_t n, long at)
{
    char text[41], shown[48];
    const char *close = memchr(s + at + 1, '"', n - (size_t)at - 1); /* the string alone */
    size_t k = (close ? (size_t)(close + 1 - s) : n) - (size_t)at;
    if (k > 40) k = 40;
    memcpy(text, s + at, k);
    text[k] = 0;
    return safet_err(c,
                     "the header's string at byte %ld (%s) holds a NUL (\\u0000), which would "
                     "cut a name or value short",
                     at, safet_shown(text, shown));
}

/* ---- the header object ---- */

static int safet_parse_meta(const safet_ctx *c, const cJSON *m, safet_file *f)
{
    if (!cJSON_IsObject(m)) return safet_err(c, "\"__metadata__\" is not a JSON object");
    f->meta = base_xcalloc((size_t)cJSON_GetArraySize(m) + 1, sizeof *f->meta);
    for (const cJSON *e = m->child; e; e = e->next) {
        if (safet_check_name(c, "metadata key", e->string) < 0) return -1;
        if (!cJSON_IsString(e))
            return safet_err(c, "metadata '%s': value is not a string", e->string);
        f->meta[f->n_meta].key = base_xstrdup(e->string);
        f->meta[f->n_meta++].value = base_xstrdup(e->valuestring);
    }
    return 0;
}

static int safet_range_cmp(const void *a, const void *b)
{
    const safet_range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Sorted by begin, the non-empty ranges must tile the data section: an
 * overlap means two tensors share bytes, a hole or a tail usually means the
 * header length was damaged and the data is read from the wrong place. */
static int safet_check_layout(const safet_ctx *c, const safet_file *f, safet_range *r, int n)
{
    qsort(r, (size_t)n, sizeof *r, safet_range_cmp);
    int last = -1;
    uint64_t covered = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].begin == r[i].end) continue;
        if (last >= 0 && r[i].begin < r[last].end)
            return safet_err(c, "tensors '%s' and '%s': data_offsets overlap", f->t[r[last].t].name,
                             f->t[r[i].t].name);
        if (r[i].begin > covered)
            return safet_err(c, "data bytes [%llu, %llu) belong to no tensor (before tensor '%s')",
                             (unsigned long long)covered, (unsigned long long)r[i].begin,
                             f->t[r[i].t].name);
        last = i;
        covered = r[i].end;
    }
    if (covered != c->data_len)
        return safet_err(c, "the last %llu data bytes belong to no tensor (damaged header length?)",
                         (unsigned long long)(c->data_len - covered));
    return 0;
}

typedef struct safet_name {
    const char *name;
    int at; /* the tensor's place in the header */
} safet_name;

static int safet_name_cmp(const void *a, const void *b)
{
    const safet_name *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The place of the first tensor entry whose name an earlier one has, or
 * INT_MAX: one sort, where a search of the tensors so far per entry would
 * make a header of many tensors quadratic. */
static int safet_first_repeat(const cJSON *root, int n)
{
    safet_name *v = base_xcalloc((size_t)n + 1, sizeof *v);
    int m = 0, first = INT_MAX;
    for (const cJSON *e = root->child; e; e = e->next)
        if (strcmp(e->string, "__metadata__") != 0) {
            v[m] = (safet_name){e->string, m};
            m++;
        }
    qsort(v, (size_t)m, sizeof *v, safet_name_cmp);
    for (int i = 1; i < m; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0 && v[i].at < first) first = v[i].at;
    free(v);
    return first;
}

/* Parses one tensor entry and appends it to f and its range to r. */
static int safet_add_tensor(const safet_ctx *c, const cJSON *e, safet_file *f, safet_range *r)
{
    safet_tensor *t = &f->t[f->n_t];
    uint64_t off[2] = {0, 0};
    if (safet_check_name(c, "tensor name", e->string) < 0 || safet_parse_entry(c, e, t, off) < 0)
        return -1;
    t->name = base_xstrdup(e->string);
    r[f->n_t] = (safet_range){off[0], off[1], f->n_t};
    f->n_t++;
    return 0;
}

static int safet_parse_entries(const safet_ctx *c, const cJSON *root, safet_file *f)
{
    int n = cJSON_GetArraySize(root), rc = 0, repeat = safet_first_repeat(root, n);
    safet_range *r = base_xcalloc((size_t)n + 1, sizeof *r);
    f->t = base_xcalloc((size_t)n + 1, sizeof *f->t);
    for (const cJSON *e = root->child; e && rc == 0; e = e->next) {
        if (strcmp(e->string, "__metadata__") != 0 && f->n_t == repeat)
            rc = safet_err(c, "tensor '%s' appears twice in the header", e->string);
        else if (strcmp(e->string, "__metadata__") != 0)
            rc = safet_add_tensor(c, e, f, r);
        else if (f->meta)
            rc = safet_err(c, "\"__metadata__\" appears twice");
        else
            rc = safet_parse_meta(c, e, f);
    }
    if (rc == 0) rc = safet_check_layout(c, f, r, f->n_t);
    free(r);
    return rc;
}

/* safetensors pads the header with spaces; anything else is garbage. */
static int safet_only_space(const char *p, const char *end)
{
    for (; p && p < end; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') return 0;
    return 1;
}

static int safet_parse_header(const safet_ctx *c, const uint8_t *json, size_t n, safet_file *f)
{
    const char *s = (const char *)json, *end = NULL;
    long nul = safet_find_nul(s, n);
    if (nul >= 0) return safet_nul_err(c, s, n, nul);
    cJSON *root = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t pos = at && at >= s && at <= s + n ? (size_t)(at - s) : 0;
        return safet_err(c, "the header is not valid JSON (error near byte %zu of %zu)", pos, n);
    }
    int rc = 0;
    if (!safet_only_space(end, s + n))
        rc = safet_err(c, "the header has trailing bytes after its JSON object");
    else if (!cJSON_IsObject(root))
        rc = safet_err(c, "the header is not a JSON object");
    else
        rc = safet_parse_entries(c, root, f);
    cJSON_Delete(root);
    return rc;
}

/* The 8-byte length N, checked against the file; sets the data section. */
static int safet_header_len(safet_ctx *c, const uint8_t *buf, size_t len, size_t *n)
{
    if (len < 8)
        return safet_err(c, "file is %zu bytes, too short for a safetensors header (8 bytes)", len);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | buf[i];
    if (v > len - 8)
        return safet_err(c,
                         "header length %llu exceeds the file size (%zu bytes; is the file "
                         "truncated?)",
                         (unsigned long long)v, len);
    if (v < 2)
        return safet_err(c, "header length %llu is too small for a JSON object",
                         (unsigned long long)v);
    *n = (size_t)v;
    c->data = buf + 8 + *n;
    c->data_len = len - 8 - *n;
    return 0;
}

int safet_parse(const uint8_t *buf, size_t len, const char *fname, safet_file *out, char *err,
                size_t errlen)
{
    memset(out, 0, sizeof *out);
    safet_ctx c = {.fname = fname ? fname : "checkpoint", .err = err, .errlen = errlen};
    size_t n = 0;
    if (safet_header_len(&c, buf, len, &n) < 0) return -1;
    if (safet_parse_header(&c, buf + 8, n, out) < 0) {
        safet_file_free(out);
        return -1;
    }
    return 0;
}

void safet_file_free(safet_file *f)
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

const char *safet_meta_get(const safet_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

const safet_tensor *safet_find(const safet_file *f, const char *name)
{
    for (int i = 0; i < f->n_t; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

/* ---- writing the header ---- */

static cJSON *safet_tensor_json(const safet_tensor *t, size_t begin)
{
    cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *off = cJSON_CreateArray();
    cJSON_AddStringToObject(e, "dtype", safet_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->dim[i]));
    cJSON_AddItemToObject(e, "shape", shape);
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)begin));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(begin + t->bytes)));
    cJSON_AddItemToObject(e, "data_offsets", off);
    return e;
}

static char *safet_header_json(const safet_tensor *t, int n_t, const safet_meta *meta, int n_meta)
{
    cJSON *root = cJSON_CreateObject(), *m = cJSON_CreateObject();
    for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[i].key, meta[i].value);
    cJSON_AddItemToObject(root, "__metadata__", m);
    size_t off = 0;
    for (int i = 0; i < n_t; i++) {
        cJSON_AddItemToObject(root, t[i].name, safet_tensor_json(&t[i], off));
        off += t[i].bytes;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

uint8_t *safet_header(const safet_tensor *t, int n_t, const safet_meta *meta, int n_meta,
                      size_t *hlen)
{
    char *json = safet_header_json(t, n_t, meta, n_meta);
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
