/* Internal to the data readers (the .c files of runtime/data/): the in-memory data set
 * that every format loader fills, the format entry points, and the PRNG. */
#ifndef GR_RUNTIME_DATA_IMPL_H
#define GR_RUNTIME_DATA_IMPL_H

#include "data.h"

/* ---- what a reader reads (docs/language.md, "Data sources": change both) ----
 * A file that is not a regular file (a FIFO, a device, a directory) is
 * refused before anything is read, and so is one past its limit: each
 * reader holds its data in memory, so the limits bound that memory. */

/* A CSV file, held whole as text while it is parsed. */
#define DATA_CSV_MAX_BYTES (INT64_C(1) << 30)
/* The data of an IDX file (after decompression) or of a raw file. */
#define DATA_BIN_MAX_BYTES (INT64_C(1) << 34)
/* The text of one text(...) source, its files together (ids are i32, and
 * so are the windows' offsets). */
#define DATA_TEXT_MAX_BYTES (INT64_C(1) << 30)
/* Examples in one source: each costs a slot of the shuffle (8 bytes), and
 * a gaussian source has as many as it is told. */
#define DATA_MAX_EXAMPLES INT64_C(2147483647)

/* How x is stored. IDX keeps its file element type (converted to host byte
 * order) so that Fashion-MNIST stays one byte per pixel; GAUSS stores
 * nothing and regenerates each example from (seed, index). */
typedef enum data_elem {
    DATA_ELEM_U8,
    DATA_ELEM_I8,
    DATA_ELEM_I16,
    DATA_ELEM_I32,
    DATA_ELEM_F32,
    DATA_ELEM_F64,
    DATA_ELEM_GAUSS,
    DATA_ELEM_TEXT, /* x: the i32 ids of a text; example i is the window at data_text_at(ds, i) */
} data_elem;

typedef struct data_set {
    data_info info;
    data_elem elem;
    int64_t ex_elems;   /* elements per example: prod(x_dims) */
    void *x;            /* n * ex_elems elements of type elem; NULL for GAUSS */
    int32_t *y;         /* n labels, or NULL */
    uint64_t seed;      /* GAUSS only */
    int64_t stride;     /* TEXT only */
    int64_t streams;    /* TEXT only: 0, or the streams (data_spec.streams) */
    int64_t stream_len; /* TEXT with streams: the ids of each stream */
    float scale;        /* x values are multiplied by it (data_spec.x_scale); 0: not */
    const char *x_path; /* for messages (borrowed from the spec) */
    const char *y_path;
} data_set;

/* Writes a formatted one-line message into err (tolerates err == NULL). */
void data_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Opens path for reading without blocking on it (a FIFO is never waited
 * for): a regular file of at most limit bytes, its size into *size.  Else
 * -1 with "PATH: not a regular file" or "PATH: the file is N bytes, above
 * the limit of L bytes for WHAT" in err. */
int data_open_file(const char *path, int64_t limit, const char *what, int64_t *size, char *err,
                   size_t errlen);
/* Reads exactly len bytes of fd into buf; -1 with a message naming path
 * (a read error, or a file that shrank since it was opened). */
int data_read_exact(int fd, const char *path, void *buf, int64_t len, char *err, size_t errlen);
/* All of path, checked as data_open_file does, into a new buffer (*buf,
 * NUL-terminated after its *len bytes). */
int data_read_whole(const char *path, int64_t limit, const char *what, char **buf, int64_t *len,
                    char *err, size_t errlen);
/* 0 when each of the first count values of a set of f32 or f64 elements
 * is a finite f32, or (allow) is nan or an infinity itself; else -1 and
 * "PATH: value K (example E) is nan, not a finite number; ..." or "... is
 * 1e+300, beyond the range of f32". */
int data_check_finite(const data_set *ds, int64_t count, int allow, char *err, size_t errlen);

/* Size in bytes of one stored element. */
size_t data_elem_size(data_elem e);
/* a * b into *out; 0 when it would exceed limit. */
int data_mul_ok(int64_t a, int64_t b, int64_t limit, int64_t *out);
/* Validates rank/dims from the spec (raw, gaussian) and returns prod(dims). */
int data_spec_dims(const data_spec *s, const char *what, int64_t *prod, char *err, size_t errlen);

/* Format entry points: probe fills info from headers; load fills the set. */
int data_idx_probe(const data_spec *s, data_info *info, char *err, size_t errlen);
int data_idx_load(const data_spec *s, data_set *ds, char *err, size_t errlen);
int data_csv_probe(const data_spec *s, data_info *info, char *err, size_t errlen);
int data_csv_load(const data_spec *s, data_set *ds, char *err, size_t errlen);
int data_raw_probe(const data_spec *s, data_info *info, char *err, size_t errlen);
int data_raw_load(const data_spec *s, data_set *ds, char *err, size_t errlen);
int data_gauss_probe(const data_spec *s, data_info *info, char *err, size_t errlen);
int data_gauss_load(const data_spec *s, data_set *ds, char *err, size_t errlen);
int data_text_probe(const data_spec *s, data_info *info, char *err, size_t errlen);
int data_text_load(const data_spec *s, data_set *ds, char *err, size_t errlen);

/* Text: where example i's window starts in ds->x: i * stride, or with
 * streams, window i / streams of stream i % streams. */
int64_t data_text_at(const data_set *ds, int64_t i);
/* Converts example i of the set to f32 into out (ex_elems floats; a text
 * window's i32 ids, as they are). */
void data_set_example(const data_set *ds, int64_t i, float *out);
/* Example i's info.y_per labels into y (zeros when the set has none). */
void data_set_labels(const data_set *ds, int64_t i, int32_t *y);
/* Asks the CPU to start loading example i's stored bytes (shuffled batches
 * gather rows from anywhere in a set bigger than the caches). */
void data_set_prefetch(const data_set *ds, int64_t i);
void data_set_free(data_set *ds);

/* xoshiro256** seeded through splitmix64: small, fast, reproducible. */
typedef struct data_rng {
    uint64_t s[4];
} data_rng;
void data_rng_seed(data_rng *g, uint64_t seed);
uint64_t data_rng_next(data_rng *g);
/* Uniform in [0, bound), bound >= 1, without modulo bias. */
uint64_t data_rng_below(data_rng *g, uint64_t bound);
/* Fills out[0..count) with standard normal values (Box-Muller). */
void data_rng_normal(data_rng *g, float *out, int64_t count);
/* Mixes two words into one seed (used for (seed, epoch) and (seed, index)). */
uint64_t data_mix(uint64_t a, uint64_t b);

#endif
