/* fuzz_data_idx.c - libFuzzer target: any bytes as IDX images, and
 * optionally labels, through the readers of runtime/data/.
 *
 * Input: the common option bytes (fuzz_data.h), then two bytes choosing
 * where the rest splits into images | labels, then the contents.  Bits of
 * the flags byte:
 *   1: there is a labels file (the part after the split)
 *   2: gzip the images before writing them (else written as they are,
 *      which also lets corpus entries be gzip streams themselves)
 *   3: gzip the labels
 *   4: name a labels file that does not exist
 * An accepted unshuffled batch must hold exactly the file's elements and
 * labels, whenever the harness knows the plain contents. */
#include "tests/fuzz/fuzz_data.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FZ_LABELS = 2, FZ_GZ_IMAGES = 4, FZ_GZ_LABELS = 8, FZ_NO_LABELS_FILE = 16 };

/* The plain (uncompressed) contents, or NULL when unknown. */
typedef struct idx_ref {
    fz_in img, lab;
} idx_ref;

static uint32_t ref_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One element of IDX type `type` at p, as the reader should give it. */
static float ref_elem(const uint8_t *p, int type)
{
    uint32_t u;
    float f;
    double d;
    uint64_t w;
    switch (type) {
    case 0x08:
        return p[0];
    case 0x09:
        return (int8_t)p[0];
    case 0x0B:
        return (int16_t)(p[0] << 8 | p[1]);
    case 0x0C:
        return (float)(int32_t)ref_be32(p);
    case 0x0D:
        u = ref_be32(p);
        memcpy(&f, &u, 4);
        return f;
    case 0x0E:
        w = (uint64_t)ref_be32(p) << 32 | ref_be32(p + 4);
        memcpy(&d, &w, 8);
        return (float)d;
    }
    fz_fail("accepted IDX element type 0x%02x", type);
}

static size_t ref_elem_size(int type)
{
    return type == 0x0E ? 8 : type >= 0x0C ? 4 : type == 0x0B ? 2 : 1;
}

static void idx_check(void *ctx, int64_t first, int64_t count, const float *x, const int32_t *y)
{
    const idx_ref *ref = ctx;
    if (ref->lab.p) {
        for (int64_t i = 0; i < count; i++)
            if (y[i] != ref->lab.p[8 + first + i])
                fz_fail("label %lld differs", (long long)(first + i));
    }
    if (!ref->img.p) return;
    const uint8_t *h = ref->img.p;
    int type = h[2], nd = h[3];
    size_t es = ref_elem_size(type), ex = 1;
    for (int d = 1; d < nd; d++) ex *= ref_be32(h + 4 + 4 * d);
    const uint8_t *body = h + 4 + 4 * nd;
    for (size_t k = 0; k < (size_t)count * ex; k++) {
        float want = ref_elem(body + ((size_t)first * ex + k) * es, type);
        if (memcmp(&want, &x[k], sizeof want) != 0)
            fz_fail("element %zu of example %lld differs", k % ex, (long long)(first + k / ex));
    }
}

/* Writes part to file k, gzipped when asked; ref gets the plain contents
 * when the reader will see them (a part that is itself gzip is unknown). */
static const char *idx_write(int k, fz_in part, int gz, fz_in *ref)
{
    if (!gz) {
        int is_gz = part.n >= 2 && part.p[0] == 0x1f && part.p[1] == 0x8b;
        *ref = is_gz ? (fz_in){NULL, 0} : part;
        return fz_file(k, part.p, part.n);
    }
    size_t len;
    uint8_t *z = fz_gzip(part.p, part.n, &len);
    const char *path = fz_file(k, z, len);
    free(z);
    *ref = part;
    return path;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size}, img = {0}, lab = {0};
    data_spec s = {.kind = DATA_KIND_IDX, .label_col = -1};
    fz_plan plan;
    idx_ref ref = {{0}, {0}};
    fz_common(&in, &s, &plan);
    unsigned sel = fz_take16(&in);
    if (plan.flags & FZ_LABELS)
        fz_split(&in, sel, &img, &lab);
    else
        img = in;
    s.path[0] = idx_write(0, img, plan.flags & FZ_GZ_IMAGES, &ref.img);
    if (plan.flags & FZ_NO_LABELS_FILE)
        s.path[1] = fz_missing();
    else if (plan.flags & FZ_LABELS)
        s.path[1] = idx_write(1, lab, plan.flags & FZ_GZ_LABELS, &ref.lab);
    fz_exercise(&s, &plan, idx_check, &ref);
    return 0;
}
