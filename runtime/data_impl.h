/* Internal to the data readers (runtime/data*.c): the in-memory data set
 * that every format loader fills, the format entry points, and the PRNG. */
#ifndef GR_RUNTIME_DATA_IMPL_H
#define GR_RUNTIME_DATA_IMPL_H

#include "runtime/data.h"

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
    DATA_ELEM_TEXT, /* x: the i32 ids of a text; example i is the window at i * stride */
} data_elem;

typedef struct data_set {
    data_info info;
    data_elem elem;
    int64_t ex_elems;   /* elements per example: prod(x_dims) */
    void *x;            /* n * ex_elems elements of type elem; NULL for GAUSS */
    int32_t *y;         /* n labels, or NULL */
    uint64_t seed;      /* GAUSS only */
    int64_t stride;     /* TEXT only */
    float scale;        /* x values are multiplied by it (data_spec.x_scale); 0: not */
    const char *x_path; /* for messages (borrowed from the spec) */
    const char *y_path;
} data_set;

/* Writes a formatted one-line message into err (tolerates err == NULL). */
void data_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

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
