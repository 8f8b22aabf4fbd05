/* The text source, text(...): files read whole and concatenated (a
 * directory stands for the text files in it), decoded as UTF-8 characters
 * or taken as bytes, or split into words, and the vocabulary built: the
 * characters present, in code-point order, the 256 bytes, or the most
 * frequent words.  An example is a window of block + 1
 * ids: x is its first block, y its last block (each id's next one).
 * Windows start every stride ids of the first `split` of the text (the
 * training part) or of the rest (the validation part), or with streams
 * the part is cut into batch contiguous streams whose windows follow each
 * other, one row of every batch each; the vocabulary comes from the whole
 * text, so both parts agree on it. */
#include "data_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEXT_CODEPOINTS 0x110000

/* The concatenated bytes, and where each file starts (for messages). */
typedef struct text_buf {
    char *bytes;
    int64_t len, cap;
    char **names;
    int64_t *start;
    int n, cap_files;
} text_buf;

static void text_buf_free(text_buf *t)
{
    for (int k = 0; k < t->n; k++) free(t->names[k]);
    free(t->names);
    free(t->start);
    free(t->bytes);
}

static int text_oom(const char *path, char *err, size_t errlen)
{
    data_err(err, errlen, "%s: out of memory for the text", path);
    return -1;
}

static int text_grow(text_buf *t, int64_t more, const char *path, char *err, size_t errlen)
{
    if (t->len + more > DATA_TEXT_MAX_BYTES) {
        data_err(err, errlen, "%s: the text is larger than %lld bytes, the limit", path,
                 (long long)DATA_TEXT_MAX_BYTES);
        return -1;
    }
    if (t->n == t->cap_files) {
        t->cap_files = t->cap_files ? 2 * t->cap_files : 8;
        char **nm = realloc(t->names, (size_t)t->cap_files * sizeof *nm);
        if (nm) t->names = nm;
        int64_t *st = realloc(t->start, (size_t)t->cap_files * sizeof *st);
        if (st) t->start = st;
        if (!nm || !st) return text_oom(path, err, errlen);
    }
    if (t->len + more + 1 > t->cap) {
        int64_t cap = 2 * (t->len + more) + 1;
        char *b = realloc(t->bytes, (size_t)cap);
        if (!b) return text_oom(path, err, errlen);
        t->bytes = b;
        t->cap = cap;
    }
    return 0;
}

/* Appends file path; an empty file is an error when the program named it,
 * and skipped when a directory held it. */
static int text_add_file(text_buf *t, const char *path, int named, char *err, size_t errlen)
{
    int64_t size;
    int fd = data_open_file(path, DATA_TEXT_MAX_BYTES, "text", &size, err, errlen);
    if (fd < 0) return -1;
    int rc = size == 0 && named ? -1 : 0;
    if (rc) data_err(err, errlen, "%s: the file is empty", path);
    if (rc == 0 && size > 0) rc = text_grow(t, size, path, err, errlen);
    if (rc == 0 && size > 0) rc = data_read_exact(fd, path, t->bytes + t->len, size, err, errlen);
    close(fd);
    if (rc || size == 0) return rc;
    if (!(t->names[t->n] = strdup(path))) return text_oom(path, err, errlen);
    t->start[t->n++] = t->len;
    t->len += size;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether directory entry name (of the n sorted ones) is left out: hidden
 * files, fortune's indexes (NAME.dat) and NAME.u8 beside NAME. */
static int text_skipped(char **names, int n, const char *name)
{
    size_t len = strlen(name);
    if (name[0] == '.' || (len > 4 && strcmp(name + len - 4, ".dat") == 0)) return 1;
    if (len <= 3 || strcmp(name + len - 3, ".u8") != 0) return 0;
    char base[256];
    snprintf(base, sizeof base, "%.*s", (int)(len - 3), name);
    const char *key = base;
    return bsearch(&key, names, (size_t)n, sizeof *names, by_name) != NULL;
}

/* The entries of directory dir, sorted by name, into *names; -1 when it
 * cannot be read (errno says why). */
static int text_dir_names(const char *dir, char ***names, int *n)
{
    DIR *d = opendir(dir);
    int cap = 0, rc = d ? 0 : -1;
    *names = NULL;
    *n = 0;
    errno = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (*n == cap) {
            char **v = realloc(*names, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *v);
            if (!v) break;
            *names = v;
        }
        if (!((*names)[*n] = strdup(e->d_name))) break;
        (*n)++;
    }
    if (errno) rc = -1;
    if (d) closedir(d);
    if (*n) qsort(*names, (size_t)*n, sizeof **names, by_name);
    return rc;
}

/* Calls add(ctx, DIR/NAME) for each regular file of directory dir that
 * text() reads (see text_skipped), the empty ones too, in name order; -1
 * with errno set when dir cannot be read. */
static int text_dir_each(const char *dir, void (*add)(void *ctx, const char *path), void *ctx)
{
    int n;
    char **names, path[4096];
    int rc = text_dir_names(dir, &names, &n), saved = errno;
    for (int k = 0; rc == 0 && k < n; k++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (!text_skipped(names, n, names[k]) && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            add(ctx, path);
    }
    for (int k = 0; k < n; k++) free(names[k]);
    free(names);
    errno = saved;
    return rc;
}

typedef struct text_dir_ctx {
    text_buf *t;
    char *err;
    size_t errlen;
    int rc;
} text_dir_ctx;

static void text_dir_add(void *ctx, const char *path)
{
    text_dir_ctx *c = ctx;
    if (c->rc == 0) c->rc = text_add_file(c->t, path, 0, c->err, c->errlen);
}

/* The regular files of directory dir (see text_skipped), in name order. */
static int text_add_dir(text_buf *t, const char *dir, char *err, size_t errlen)
{
    text_dir_ctx c = {t, err, errlen, 0};
    int before = t->n;
    if (text_dir_each(dir, text_dir_add, &c) < 0 && c.rc == 0) {
        data_err(err, errlen, "%s: cannot read the directory: %s", dir, strerror(errno));
        c.rc = -1;
    }
    if (c.rc == 0 && t->n == before) {
        data_err(err, errlen,
                 "%s: no text files in the directory (names starting with '.' or "
                 "ending in .dat, and NAME.u8 beside NAME, are skipped)",
                 dir);
        c.rc = -1;
    }
    return c.rc;
}

void data_text_files(const char *path, void (*add)(void *ctx, const char *path), void *ctx)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) text_dir_each(path, add, ctx);
}

/* A file, or the text files of a directory. */
static int text_add_path(text_buf *t, const char *p, char *err, size_t errlen)
{
    struct stat st;
    if (stat(p, &st) != 0) {
        data_err(err, errlen, "%s: cannot open: %s", p, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) return text_add_dir(t, p, err, errlen);
    if (S_ISREG(st.st_mode)) return text_add_file(t, p, 1, err, errlen);
    data_err(err, errlen, "%s: not a regular file or a directory", p);
    return -1;
}

static int text_read(const data_spec *s, text_buf *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    for (int k = 0; k < s->n_paths; k++)
        if (text_add_path(t, s->paths[k], err, errlen)) return -1;
    return 0;
}

/* ---- ids ---- */

/* The code point at s[0..n) into *cp: its length in bytes, or 0 when the
 * bytes there are not UTF-8 (overlong forms and surrogates included). */
static int utf8_next(const unsigned char *s, int64_t n, int32_t *cp)
{
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (len == 0 || c > 0xF4 || len > n) return 0;
    uint32_t v = len == 1 ? c : c & (0x3Fu >> (len - 1));
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[k] & 0x3Fu);
    }
    if (v < least[len] || v >= TEXT_CODEPOINTS || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = (int32_t)v;
    return len;
}

/* "FILE: ... at byte N" for byte offset at of the text. */
static void text_err_at(const text_buf *t, int64_t at, const char *what, char *err, size_t errlen)
{
    int k = t->n - 1;
    while (k > 0 && t->start[k] > at) k--;
    data_err(err, errlen, "%s: %s at byte %lld; read it with vocab=\"bytes\"", t->names[k], what,
             (long long)(at - t->start[k]));
}

/* The text as code points (chars) or bytes into ids[0..*n). */
static int text_decode(const data_spec *s, const text_buf *t, int32_t *ids, int64_t *n, char *err,
                       size_t errlen)
{
    const unsigned char *b = (const unsigned char *)t->bytes;
    *n = 0;
    for (int64_t i = 0; i < t->len; (*n)++) {
        if (s->byte_vocab) {
            ids[*n] = b[i++];
            continue;
        }
        int len = utf8_next(b + i, t->len - i, &ids[*n]);
        if (len == 0 || ids[*n] == 0) {
            text_err_at(t, i, len ? "a NUL character" : "invalid UTF-8", err, errlen);
            return -1;
        }
        i += len;
    }
    return 0;
}

/* Code points to ids: their rank among those present, from a bitmap of
 * them and the count of bits before each word (200 KB, however long the
 * text).  *cps (malloc'd) gets the vocabulary's code points in id order. */
static int text_rank(int32_t *ids, int64_t n, int32_t **cps, int64_t *vocab)
{
    enum { WORDS = TEXT_CODEPOINTS / 64 };
    uint64_t *bits = calloc(WORDS, sizeof *bits);
    int32_t *before = malloc(WORDS * sizeof *before);
    if (!bits || !before) goto oom;
    for (int64_t i = 0; i < n; i++) bits[ids[i] >> 6] |= UINT64_C(1) << (ids[i] & 63);
    int32_t count = 0;
    for (int w = 0; w < WORDS; w++) {
        before[w] = count;
        count += __builtin_popcountll(bits[w]);
    }
    *vocab = count;
    if (!(*cps = malloc((size_t)count * sizeof **cps + 1))) goto oom;
    for (int w = 0, k = 0; w < WORDS; w++)
        for (uint64_t b = bits[w]; b; b &= b - 1) (*cps)[k++] = w * 64 + __builtin_ctzll(b);
    for (int64_t i = 0; i < n; i++) {
        uint64_t below = (UINT64_C(1) << (ids[i] & 63)) - 1;
        ids[i] = before[ids[i] >> 6] + __builtin_popcountll(bits[ids[i] >> 6] & below);
    }
    free(bits);
    free(before);
    return 0;
oom:
    free(bits);
    free(before);
    return -1;
}

/* Everything text() needs: the ids of the whole text, the vocabulary. */
typedef struct text_corpus {
    int32_t *ids;
    int64_t n;
    int32_t *cps; /* chars: the vocabulary's code points in id order */
    char *words;  /* words: the vocabulary in id order, one a line */
    int64_t vocab;
} text_corpus;

/* ---- words ----
 * A word is a run of ASCII letters, digits and apostrophes, or of UTF-8's
 * bytes above 0x7F, with ASCII letters lowercased; everything else parts
 * words and is dropped.  Id 0 is "<unk>"; ids 1.. are the vocab_size - 1
 * most frequent words, ties in byte order; every other word is <unk>. */

typedef struct word_slot {
    int64_t at;      /* the first occurrence's offset in the text */
    int32_t len, id; /* its bytes; its id (after text_word_ids) */
    int64_t count;
} word_slot;

/* The words in order of first appearance, found through a hash table of
 * their indices + 1 (0: empty). */
typedef struct word_table {
    word_slot *word;
    int64_t n, cap_words;
    int64_t *slot;
    int64_t cap; /* slots, a power of 2 */
    const char *text;
} word_table;

static int word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'' || c >= 0x80;
}

static uint64_t word_hash(const char *s, int32_t n)
{
    uint64_t h = 1469598103934665603u;
    for (int32_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

static int word_grow(word_table *w)
{
    int64_t cap = w->cap ? 2 * w->cap : 1024;
    int64_t *s = calloc((size_t)cap, sizeof *s);
    word_slot *words = realloc(w->word, (size_t)(cap / 2) * sizeof *words);
    if (words) w->word = words;
    if (!s || !words) {
        free(s);
        return -1;
    }
    for (int64_t k = 0; k < w->n; k++) {
        uint64_t i = word_hash(w->text + w->word[k].at, w->word[k].len) & (uint64_t)(cap - 1);
        while (s[i]) i = (i + 1) & (uint64_t)(cap - 1);
        s[i] = k + 1;
    }
    free(w->slot);
    w->slot = s;
    w->cap = cap;
    return 0;
}

/* The index of the word at text[at..at+len), counted once more. */
static int64_t word_add(word_table *w, int64_t at, int32_t len)
{
    if (2 * (w->n + 1) > w->cap && word_grow(w) < 0) return -1;
    uint64_t i = word_hash(w->text + at, len) & (uint64_t)(w->cap - 1);
    for (;; i = (i + 1) & (uint64_t)(w->cap - 1)) {
        int64_t k = w->slot[i] - 1;
        if (k < 0) {
            k = w->n++;
            w->slot[i] = k + 1;
            w->word[k] = (word_slot){.at = at, .len = len};
        } else if (w->word[k].len != len ||
                   memcmp(w->text + w->word[k].at, w->text + at, (size_t)len)) {
            continue;
        }
        w->word[k].count++;
        return k;
    }
}

static int by_count(const void *a, const void *b, void *text)
{
    const word_slot *x = *(word_slot *const *)a, *y = *(word_slot *const *)b;
    const char *t = text;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    int32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(t + x->at, t + y->at, (size_t)n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Ids by rank, the vocabulary string; ids[] holds slots, then ids. */
static int text_word_ids(const data_spec *s, word_table *w, text_corpus *c)
{
    word_slot **order = malloc((size_t)(w->n + 1) * sizeof *order);
    if (!order) return -1;
    int64_t n = w->n, bytes = 6;
    for (int64_t k = 0; k < n; k++) order[k] = &w->word[k];
    qsort_r(order, (size_t)n, sizeof *order, by_count, (void *)w->text);
    int64_t keep = n < s->word_vocab - 1 ? n : s->word_vocab - 1;
    for (int64_t k = 0; k < n; k++) order[k]->id = k < keep ? (int32_t)(k + 1) : 0;
    for (int64_t k = 0; k < keep; k++) bytes += order[k]->len + 1;
    if ((c->words = malloc((size_t)bytes))) {
        char *p = c->words + sprintf(c->words, "<unk>");
        for (int64_t k = 0; k < keep; k++) {
            *p++ = '\n';
            memcpy(p, w->text + order[k]->at, (size_t)order[k]->len);
            p += order[k]->len;
        }
        *p = 0;
    }
    free(order);
    for (int64_t i = 0; i < c->n; i++) c->ids[i] = w->word[c->ids[i]].id;
    c->vocab = keep + 1;
    return c->words ? 0 : -1;
}

/* The text's words as ids; t's bytes are lowercased on the way. */
static int text_words(const data_spec *s, text_buf *t, text_corpus *c, char *err, size_t errlen)
{
    unsigned char *b = (unsigned char *)t->bytes;
    for (int64_t i = 0; i < t->len;) { /* the same UTF-8 rules as chars */
        int32_t cp;
        int len = utf8_next(b + i, t->len - i, &cp);
        if (len == 0 || cp == 0) {
            text_err_at(t, i, len ? "a NUL character" : "invalid UTF-8", err, errlen);
            return -1;
        }
        i += len;
    }
    for (int64_t i = 0; i < t->len; i++)
        if (b[i] >= 'A' && b[i] <= 'Z') b[i] = (unsigned char)(b[i] - 'A' + 'a');
    word_table w = {.text = t->bytes};
    int rc = 0;
    c->n = 0;
    for (int64_t i = 0; i < t->len && rc == 0;) {
        if (!word_byte(b[i])) {
            i++;
            continue;
        }
        int64_t at = i;
        while (i < t->len && word_byte(b[i]) && i - at < INT32_MAX) i++;
        int64_t k = word_add(&w, at, (int32_t)(i - at));
        if (k < 0)
            rc = -1;
        else
            c->ids[c->n++] = (int32_t)k;
    }
    if (rc == 0) rc = text_word_ids(s, &w, c);
    free(w.slot);
    free(w.word);
    return rc ? text_oom(s->path[0], err, errlen) : 0;
}

static int text_load_corpus(const data_spec *s, text_corpus *c, char *err, size_t errlen)
{
    text_buf t;
    memset(c, 0, sizeof *c);
    int rc = text_read(s, &t, err, errlen);
    if (rc == 0 && !(c->ids = malloc((size_t)t.len * sizeof *c->ids + 1)))
        rc = text_oom(s->path[0], err, errlen);
    if (rc == 0 && s->word_vocab) {
        rc = text_words(s, &t, c, err, errlen);
    } else {
        if (rc == 0) rc = text_decode(s, &t, c->ids, &c->n, err, errlen);
        c->vocab = 256;
        if (rc == 0 && !s->byte_vocab && text_rank(c->ids, c->n, &c->cps, &c->vocab) < 0)
            rc = text_oom(s->path[0], err, errlen);
    }
    text_buf_free(&t);
    if (rc) {
        free(c->ids);
        free(c->cps);
        free(c->words);
    }
    return rc;
}

static const char *text_unit(const data_spec *s)
{
    return s->word_vocab ? "words" : s->byte_vocab ? "bytes" : "characters";
}

/* streams=true: the windows of the batch streams, len / batch ids each,
 * into *n (one process reads them all). */
static int text_stream_windows(const data_spec *s, int64_t len, const char *part, int64_t *n,
                               char *err, size_t errlen)
{
    int64_t per = len / s->batch;
    if (s->shards > 1) {
        data_err(err, errlen,
                 "%s: streams=true cannot be split among %d processes (each row must continue "
                 "its own stream)",
                 s->path[0], s->shards);
        return -1;
    }
    if (per < s->block + 1) {
        data_err(err, errlen,
                 "%s: streams=true cuts the text's %s part (%lld %s) into batch %lld streams of "
                 "%lld, shorter than a window (block + 1 = %lld)",
                 s->path[0], part, (long long)len, text_unit(s), (long long)s->batch,
                 (long long)per, (long long)(s->block + 1));
        return -1;
    }
    *n = (per - 1) / s->block * s->batch;
    return 0;
}

/* The windows of a part of len ids into *n: one every stride, or the
 * streams'. */
static int text_windows(const data_spec *s, int64_t len, const char *part, int64_t *n, char *err,
                        size_t errlen)
{
    if (s->streams) return text_stream_windows(s, len, part, n, err, errlen);
    *n = (len - s->block - 1) / s->stride + 1;
    if (s->batch <= *n) return 0;
    data_err(err, errlen,
             "%s: batch %lld is larger than the %lld windows of the text's %s part (block %lld, "
             "stride %lld)",
             s->path[0], (long long)s->batch, (long long)*n, part, (long long)s->block,
             (long long)s->stride);
    return -1;
}

/* The part's ids [*first, *first + *len) and its windows, checked. */
static int text_part(const data_spec *s, const text_corpus *c, int64_t *first, int64_t *len,
                     data_info *info, char *err, size_t errlen)
{
    int64_t cut = (int64_t)(s->split * (double)c->n);
    const char *part = s->val_part ? "validation" : "training";
    *first = s->val_part ? cut : 0;
    *len = s->val_part ? c->n - cut : cut;
    if (s->block < 1 || s->stride < 1) {
        data_err(err, errlen, "%s: block and stride must be >= 1", s->path[0]);
        return -1;
    }
    if (*len == 0) {
        data_err(err, errlen, "%s: split=%g leaves nothing for the %s part", s->path[0], s->split,
                 part);
        return -1;
    }
    if (*len <= s->block) {
        data_err(err, errlen,
                 "%s: block %lld is longer than the text's %s part (%lld %s; a window needs "
                 "block + 1)",
                 s->path[0], (long long)s->block, part, (long long)*len, text_unit(s));
        return -1;
    }
    memset(info, 0, sizeof *info);
    if (text_windows(s, *len, part, &info->n, err, errlen)) return -1;
    info->x_rank = 1;
    info->x_dims[0] = s->block;
    info->has_y = 1;
    info->y_per = s->block;
    info->x_i32 = 1;
    info->vocab = c->vocab;
    return 0;
}

int data_text_probe(const data_spec *s, data_info *info, char *err, size_t errlen)
{
    text_corpus c;
    int64_t first, len;
    if (text_load_corpus(s, &c, err, errlen)) return -1;
    int rc = text_part(s, &c, &first, &len, info, err, errlen);
    free(c.ids);
    free(c.cps);
    free(c.words);
    return rc;
}

int data_text_load(const data_spec *s, data_set *ds, char *err, size_t errlen)
{
    text_corpus c;
    int64_t first, len;
    if (text_load_corpus(s, &c, err, errlen)) return -1;
    free(c.cps);
    free(c.words);
    ds->x = c.ids;
    if (text_part(s, &c, &first, &len, &ds->info, err, errlen)) return -1;
    memmove(c.ids, c.ids + first, (size_t)len * sizeof *c.ids);
    ds->elem = DATA_ELEM_TEXT;
    ds->ex_elems = s->block;
    ds->stride = s->stride;
    ds->streams = s->streams ? s->batch : 0;
    ds->stream_len = len / s->batch;
    ds->x_path = s->path[0];
    return 0;
}

/* UTF-8 of code point c into out (4 bytes at most); its length. */
static int utf8_put(int32_t c, char *out)
{
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3F)), 2;
    int len = c < 0x10000 ? 3 : 4;
    out[0] = (char)(len == 3 ? 0xE0 | c >> 12 : 0xF0 | c >> 18);
    for (int k = 1; k < len; k++) out[k] = (char)(0x80 | ((c >> (6 * (len - 1 - k))) & 0x3F));
    return len;
}

int data_text_vocab(const data_spec *s, char **chars, char *err, size_t errlen)
{
    text_corpus c;
    *chars = NULL;
    if (text_load_corpus(s, &c, err, errlen)) return -1;
    free(c.ids);
    if (s->word_vocab) {
        *chars = c.words;
        return 0;
    }
    if (s->byte_vocab) return 0;
    char *out = malloc((size_t)c.vocab * 4 + 1);
    int64_t at = 0;
    for (int64_t k = 0; out && k < c.vocab; k++) at += utf8_put(c.cps[k], out + at);
    free(c.cps);
    if (!out) return text_oom(s->path[0], err, errlen);
    out[at] = 0;
    *chars = out;
    return 0;
}
