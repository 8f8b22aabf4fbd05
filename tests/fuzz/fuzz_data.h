/* fuzz_data.h - shared by the data reader fuzz targets (fuzz_data_idx.c,
 * fuzz_data_csv.c, fuzz_data_raw.c, fuzz_data_text.c; the code is in
 * fuzz_data_common.c).
 *
 * Every input is a few option bytes followed by file contents.  The first
 * FZ_COMMON_BYTES are read by fz_common and set what all readers share:
 *   [0] batch: 1 + b, except 0xfe -> 0 (refused) and 0xff -> 2^40 (too big)
 *   [1] flags: bit 0 shuffle; bits 1..7 belong to the target
 *   [2] n_classes: the byte as int8_t (<= 0: labels are not range-checked)
 *   [3] low nibble: batches to pull; high nibble: where to seek
 *   [4] shuffle seed, and the epoch to seek to (low 3 bits)
 * The target reads its own option bytes next, writes the rest into one or
 * two in-memory files (memfd, opened by path as /proc/self/fd/N) and calls
 * fz_exercise, which probes, opens, pulls, seeks and closes, aborting on
 * anything a reader must not do. */
#ifndef GR_FUZZ_DATA_H
#define GR_FUZZ_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/data/data.h"

#define FZ_COMMON_BYTES 5

/* The unread part of the input. */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

/* What fz_exercise does besides opening: from the common option bytes. */
typedef struct fz_plan {
    int flags; /* byte [1]; bits 1..7 are the target's */
    int pulls; /* batches taken before the seek */
    int seek;  /* selects the seek position */
    int epoch; /* the seek's epoch */
} fz_plan;

/* Checks an unshuffled batch against the file: count examples from first
 * (x holds count * prod(x_dims) floats, or i32 ids, y count * y_per
 * labels). Aborts on a mismatch. */
typedef void (*fz_check_fn)(void *ctx, int64_t first, int64_t count, const float *x,
                            const int32_t *y);

/* Next option byte; 0 once the input is used up. */
uint8_t fz_take(fz_in *in);
/* Next two bytes, little-endian. */
unsigned fz_take16(fz_in *in);
/* Fills the spec fields every reader shares (batch, shuffle, seed,
 * n_classes) and the plan from the first FZ_COMMON_BYTES. */
void fz_common(fz_in *in, data_spec *s, fz_plan *plan);
/* Splits the rest of the input at sel % (n + 1): *a gets the front. */
void fz_split(fz_in *in, unsigned sel, fz_in *a, fz_in *b);
/* Replaces the contents of in-memory file k (0 or 1) and returns its path;
 * the files live for the whole run. */
const char *fz_file(int k, const uint8_t *data, size_t len);
/* A path that does not exist, for a missing second file. */
const char *fz_missing(void);
/* gzip-compresses len bytes; the result is malloc'd (*out_len bytes). */
uint8_t *fz_gzip(const uint8_t *data, size_t len, size_t *out_len);
/* Prints why and aborts, so that libFuzzer keeps the input. */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Probes and opens s; a refusal must be a one-line message naming one of
 * the spec's files, and what probe refuses open must refuse too.  An open
 * reader must report probe's shape, hand out batches of that shape with
 * labels in range, advance its cursor, seek reproducibly, and close. */
void fz_exercise(const data_spec *s, const fz_plan *plan, fz_check_fn check, void *ctx);

#endif
