/* fuzz_data_raw.c - libFuzzer target: any bytes as raw little-endian x
 * (f32) and y (i32) files through the readers of runtime/data/.
 *
 * Input: the common option bytes (fuzz_data.h), one byte for the example
 * rank (b % 6: 5 is refused), four for its dims (b % 8: 0 is refused), two
 * choosing where the rest splits into x | y, then the contents.  Bits of
 * the flags byte:
 *   1: there is a y file (the part after the split)
 *   2: name a y file that does not exist
 * An accepted unshuffled batch must hold exactly the file's values. */
#include "tests/fuzz/fuzz_data.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FZ_LABELS = 2, FZ_NO_LABELS_FILE = 4 };

typedef struct raw_ref {
    fz_in x, y;
    int64_t ex; /* floats per example */
} raw_ref;

static void raw_check(void *ctx, int64_t first, int64_t count, const float *x, const int32_t *y)
{
    const raw_ref *ref = ctx;
    size_t xb = (size_t)(count * ref->ex) * 4, off = (size_t)(first * ref->ex) * 4;
    if (memcmp(x, ref->x.p + off, xb) != 0)
        fz_fail("x of examples from %lld differs", (long long)first);
    if (ref->y.p && memcmp(y, ref->y.p + (size_t)first * 4, (size_t)count * 4) != 0)
        fz_fail("y of examples from %lld differs", (long long)first);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size}, x = {0}, y = {0};
    data_spec s = {.kind = DATA_KIND_RAW, .label_col = -1};
    fz_plan plan;
    raw_ref ref = {{0}, {0}, 1};
    fz_common(&in, &s, &plan);
    s.x_rank = fz_take(&in) % 6;
    for (int d = 0; d < 4; d++) s.x_dims[d] = fz_take(&in) % 8;
    for (int d = 0; d < s.x_rank && d < 4; d++) ref.ex *= s.x_dims[d];
    unsigned sel = fz_take16(&in);
    if (plan.flags & FZ_LABELS)
        fz_split(&in, sel, &x, &y);
    else
        x = in;
    s.path[0] = fz_file(0, x.p, x.n);
    ref.x = x;
    if (plan.flags & FZ_NO_LABELS_FILE) {
        s.path[1] = fz_missing();
    } else if (plan.flags & FZ_LABELS) {
        s.path[1] = fz_file(1, y.p, y.n);
        ref.y = y;
    }
    fz_exercise(&s, &plan, raw_check, &ref);
    return 0;
}
