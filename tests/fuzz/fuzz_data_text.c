/* fuzz_data_text.c - libFuzzer target: any bytes as the text of text(...)
 * through the readers of runtime/data/, as one file or split in two.
 *
 * Input: the common option bytes (fuzz_data.h), one for the block (1 + b %
 * 16), one for the stride (1 + b % 4), one for the split ((b + 1) / 256),
 * two choosing where the rest splits into two files, then the contents.
 * Bits of the flags byte:
 *   1: the validation part (the text after the split)
 *   2: a byte vocabulary (any bytes; otherwise UTF-8 characters)
 *   3: two files (the part after the file split is the second)
 * An accepted unshuffled batch holds the windows at multiples of the
 * stride: y is x one id later, and with bytes the ids are the bytes. */
#include "tests/fuzz/fuzz_data.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FZ_VAL = 2, FZ_BYTES = 4, FZ_TWO_FILES = 8 };

typedef struct text_ref {
    const data_spec *s;
    fz_in whole;   /* the bytes of both files in order */
    int64_t first; /* byte vocabulary: the part's first byte in whole */
} text_ref;

static void text_check(void *ctx, int64_t first, int64_t count, const float *xf, const int32_t *y)
{
    const text_ref *ref = ctx;
    const int32_t *x = (const int32_t *)xf;
    int64_t T = ref->s->block;
    for (int64_t i = 0; i < count; i++)
        for (int64_t t = 0; t < T; t++) {
            int64_t at = (first + i) * ref->s->stride + t;
            if (t + 1 < T && y[i * T + t] != x[i * T + t + 1])
                fz_fail("y of window %lld is not x shifted by one", (long long)(first + i));
            if (ref->s->byte_vocab && x[i * T + t] != ref->whole.p[ref->first + at])
                fz_fail("x of window %lld is not its bytes", (long long)(first + i));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size}, a = {0}, b = {0};
    const char *paths[2];
    data_spec s = {.kind = DATA_KIND_TEXT, .paths = paths};
    fz_plan plan;
    fz_common(&in, &s, &plan);
    s.n_classes = 0;
    s.block = 1 + fz_take(&in) % 16;
    s.stride = 1 + fz_take(&in) % 4;
    s.split = (fz_take(&in) + 1) / 256.0;
    s.val_part = (plan.flags & FZ_VAL) != 0;
    s.byte_vocab = (plan.flags & FZ_BYTES) != 0;
    unsigned sel = fz_take16(&in);
    if (plan.flags & FZ_TWO_FILES)
        fz_split(&in, sel, &a, &b);
    else
        a = in;
    paths[0] = fz_file(0, a.p, a.n);
    s.n_paths = 1;
    if (plan.flags & FZ_TWO_FILES) paths[s.n_paths++] = fz_file(1, b.p, b.n);
    s.path[0] = paths[0];
    s.path[1] = s.n_paths > 1 ? paths[1] : NULL;
    text_ref ref = {&s, in, s.val_part ? (int64_t)(s.split * (double)in.n) : 0};
    fz_exercise(&s, &plan, text_check, &ref);
    return 0;
}
