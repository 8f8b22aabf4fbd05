/* checkpoint.h - private to runtime/: the safetensors container.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON, then
 * the raw tensor data.  ckpt_parse checks everything that can be checked
 * without a session (sizes, JSON types, offsets, dtypes, byte counts), so
 * the libFuzzer target links this parser and cJSON only: the session half
 * of checkpoint.c is compiled out with -DCKPT_PARSER_ONLY.
 *
 * Ownership: a ckpt_file points into the buffer it was parsed from (tensor
 * data) and owns its strings; free it with ckpt_file_free before the buffer.
 */
#ifndef GR_RUNTIME_CHECKPOINT_H
#define GR_RUNTIME_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAX_DIMS 8

typedef enum ckpt_dtype { CKPT_F32, CKPT_I32 } ckpt_dtype;

typedef struct ckpt_tensor {
    char *name;
    ckpt_dtype dtype;
    int rank;
    int64_t dim[CKPT_MAX_DIMS];
    const uint8_t *data; /* into the parsed buffer */
    size_t bytes;        /* = numel * 4 (checked) */
} ckpt_tensor;

typedef struct ckpt_meta {
    char *key, *value;
} ckpt_meta;

typedef struct ckpt_file {
    ckpt_tensor *t;
    int n_t;
    ckpt_meta *meta;
    int n_meta;
} ckpt_file;

/* Parses and validates buf.  On error returns -1 and writes one line (no
 * trailing newline) starting with `fname` into err; *out is then empty. */
int ckpt_parse(const uint8_t *buf, size_t len, const char *fname, ckpt_file *out, char *err,
               size_t errlen);
void ckpt_file_free(ckpt_file *f);
/* The metadata value for key, or NULL. */
const char *ckpt_meta_get(const ckpt_file *f, const char *key);
/* The tensor named name, or NULL. */
const ckpt_tensor *ckpt_find(const ckpt_file *f, const char *name);
/* "[784,256]" into buf; returns buf. */
const char *ckpt_shape_str(int rank, const int64_t *dim, char *buf, size_t n);

/* Writer: builds the header for tensors laid out back to back in the order
 * given (data offsets follow from the byte counts).  Returns a malloc'd
 * buffer holding the 8-byte length and the JSON, padded with spaces so the
 * data starts 8-byte aligned; *hlen is its size.  NULL when out of memory. */
uint8_t *ckpt_header(const ckpt_tensor *t, int n_t, const ckpt_meta *meta, int n_meta,
                     size_t *hlen);

/* SHA-256 of buf as 64 lowercase hex digits plus NUL into hex[65]. */
void ckpt_sha256_hex(const void *buf, size_t len, char hex[65]);

#endif
