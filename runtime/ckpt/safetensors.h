/* safetensors.h - private to runtime/: the safetensors container, parsed
 * and written.  Knows nothing of sessions or the IR: checkpoint.c maps
 * variables onto it, and the libFuzzer target links this codec alone (with
 * cJSON and base/fatal.c).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON, then
 * the raw tensor data:
 *
 *     {"__metadata__": {"key": "value", ...},
 *      "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
 *
 * safet_parse checks everything that can be checked without knowing what
 * the tensors are for: sizes, JSON types, offsets, dtypes, byte counts,
 * that the tensors tile the data section exactly, and that every name reads
 * as what it is (no NUL in any string; tensor names and metadata keys
 * non-empty UTF-8 without control or invisible formatting characters).
 *
 * Ownership: a safet_file points into the buffer it was parsed from (tensor
 * data) and owns its strings; free it with safet_file_free before the
 * buffer.  Allocation failures while parsing abort through base/fatal.h:
 * they are bounded by the size of a buffer already in memory. */
#ifndef GR_RUNTIME_SAFETENSORS_H
#define GR_RUNTIME_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SAFET_MAX_DIMS 8

/* Both 4 bytes wide: byte counts are numel * 4. */
typedef enum safet_dtype { SAFET_F32, SAFET_I32 } safet_dtype;

typedef struct safet_tensor {
    char *name;
    safet_dtype dtype;
    int rank;
    int64_t dim[SAFET_MAX_DIMS];
    const uint8_t *data; /* into the parsed buffer */
    size_t bytes;        /* = numel * 4 (checked) */
} safet_tensor;

typedef struct safet_meta {
    char *key, *value;
} safet_meta;

typedef struct safet_file {
    safet_tensor *t;
    int n_t;
    safet_meta *meta;
    int n_meta;
} safet_file;

/* Parses and validates buf.  On error returns -1 and writes one line (no
 * trailing newline) starting with "fname: " into err; *out is then empty. */
int safet_parse(const uint8_t *buf, size_t len, const char *fname, safet_file *out, char *err,
                size_t errlen);
void safet_file_free(safet_file *f);
/* The metadata value for key, or NULL. */
const char *safet_meta_get(const safet_file *f, const char *key);
/* The tensor named name, or NULL. */
const safet_tensor *safet_find(const safet_file *f, const char *name);
/* v for a message: its first 40 bytes, those outside printable ASCII
 * shown as '?', "..." when cut; returns buf. */
const char *safet_shown(const char *v, char buf[48]);
/* "F32" or "I32". */
const char *safet_dtype_name(safet_dtype d);
/* "[784,256]" into buf; returns buf. */
const char *safet_shape_str(int rank, const int64_t *dim, char *buf, size_t n);

/* Writer: builds the header for tensors laid out back to back in the order
 * given (data offsets follow from the byte counts; data pointers are not
 * read).  Returns a malloc'd buffer holding the 8-byte length and the JSON,
 * padded with spaces so the data starts 8-byte aligned; *hlen is its size.
 * NULL when out of memory. */
uint8_t *safet_header(const safet_tensor *t, int n_t, const safet_meta *meta, int n_meta,
                      size_t *hlen);

#endif
