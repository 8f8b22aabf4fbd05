/* fuzz_data_csv.c - libFuzzer target: any bytes as a CSV file through
 * the readers of runtime/data/.
 *
 * Input: the common option bytes (fuzz_data.h), one byte choosing the
 * label column ((b % 12) - 3: -3 is refused, -2 none, -1 last, 0..8 a
 * column, possibly past the last), then the file.  CSV labels are
 * non-negative integers, so any accepted label must be >= 0. */
#include "tests/fuzz/fuzz_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void csv_check(void *ctx, int64_t first, int64_t count, const float *x, const int32_t *y)
{
    (void)ctx;
    (void)x;
    for (int64_t i = 0; i < count; i++)
        if (y[i] < 0) fz_fail("negative label %d in row %lld", (int)y[i], (long long)(first + i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    data_spec s = {.kind = DATA_KIND_CSV};
    fz_plan plan;
    fz_common(&in, &s, &plan);
    s.label_col = fz_take(&in) % 12 - 3;
    s.path[0] = fz_file(0, in.p, in.n);
    fz_exercise(&s, &plan, csv_check, NULL);
    return 0;
}
