/* Data readers: every format, shuffling, epochs, concurrency, seeking and
 * each error message. All fixture files are written into a mkdtemp folder
 * at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "runtime/data/data.h"

#define MAX_FILES 128

static char g_dir[256];
static char g_files[MAX_FILES][320];
static int g_nfiles;

/* ---- fixture helpers ---- */

static const char *tmp_path(const char *name)
{
    assert_true(g_nfiles < MAX_FILES);
    char *p = g_files[g_nfiles++];
    snprintf(p, sizeof g_files[0], "%s/%s", g_dir, name);
    return p;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes bytes to path, through zlib when gz is set. */
static void write_bytes(const char *path, int gz, const void *a, size_t na, const void *b,
                        size_t nb)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        if (na) assert_int_equal(gzwrite(f, a, (unsigned)na), (int)na);
        if (nb) assert_int_equal(gzwrite(f, b, (unsigned)nb), (int)nb);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        if (na) assert_int_equal(fwrite(a, 1, na, f), na);
        if (nb) assert_int_equal(fwrite(b, 1, nb, f), nb);
        assert_int_equal(fclose(f), 0);
    }
}

/* An IDX file: magic, dims, then body (body_len may be short, to truncate). */
static void write_idx(const char *path, int gz, uint32_t magic, const uint32_t *dims, int nd,
                      const void *body, size_t body_len)
{
    unsigned char hdr[4 + 4 * 5];
    put_be32(hdr, magic);
    for (int d = 0; d < nd; d++) put_be32(hdr + 4 + 4 * d, dims[d]);
    write_bytes(path, gz, hdr, 4 + 4 * (size_t)nd, body, body_len);
}

/* Images n x 2 x 3 with pixel k of image i = (i + k) % 256; labels i % 10. */
enum { IMG_R = 2, IMG_C = 3, IMG_PX = IMG_R * IMG_C };

static void make_idx_pair(const char *img, const char *lab, int gz, uint32_t n)
{
    unsigned char *px = malloc(n * IMG_PX + 1), *lb = malloc(n + 1);
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < IMG_PX; k++) px[i * IMG_PX + k] = (unsigned char)((i + k) % 256);
        lb[i] = (unsigned char)(i % 10);
    }
    uint32_t di[3] = {n, IMG_R, IMG_C}, dl[1] = {n};
    write_idx(img, gz, 0x00000803, di, 3, px, n * IMG_PX);
    write_idx(lab, gz, 0x00000801, dl, 1, lb, n);
    free(px);
    free(lb);
}

/* Raw: example i is {i, -i} (f32), label i (i32). */
static void make_raw(const char *x, const char *y, int n)
{
    float *xv = malloc(sizeof(float) * 2 * (size_t)n);
    int32_t *yv = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        xv[2 * i] = (float)i;
        xv[2 * i + 1] = (float)-i;
        yv[i] = i;
    }
    write_bytes(x, 0, xv, sizeof(float) * 2 * (size_t)n, NULL, 0);
    if (y) write_bytes(y, 0, yv, sizeof(int32_t) * (size_t)n, NULL, 0);
    free(xv);
    free(yv);
}

static data_spec raw_spec(const char *x, const char *y, int64_t batch, int shuffle, uint64_t seed)
{
    data_spec s = {.kind = DATA_KIND_RAW,
                   .path = {x, y},
                   .batch = batch,
                   .shuffle = shuffle,
                   .seed = seed,
                   .x_rank = 1,
                   .x_dims = {2},
                   .label_col = -1};
    return s;
}

static data_spec idx_spec(const char *img, const char *lab, int64_t batch)
{
    data_spec s = {.kind = DATA_KIND_IDX, .path = {img, lab}, .batch = batch, .label_col = -1};
    return s;
}

static void write_text(const char *path, const char *text)
{
    write_bytes(path, 0, text, strlen(text), NULL, 0);
}

/* Opens, failing the test with the reader's own message. */
static data_reader *open_ok(const data_spec *s)
{
    char err[512] = "";
    data_reader *r = data_open(s, err, sizeof err);
    if (!r) fail_msg("data_open failed: %s", err);
    return r;
}

/* Expects data_probe and data_open both to fail with exactly want. */
static void expect_error(const data_spec *s, const char *want)
{
    char err[512] = "";
    data_reader *r = data_open(s, err, sizeof err);
    if (r) data_close(r);
    assert_null(r);
    assert_string_equal(err, want);
}

static void expect_probe_error(const data_spec *s, const char *want)
{
    char err[512] = "";
    data_info info;
    assert_int_equal(data_probe(s, &info, err, sizeof err), -1);
    assert_string_equal(err, want);
}

/* ---- group setup ---- */

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/gr_test_data_XXXXXX", base);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < g_nfiles; i++) unlink(g_files[i]);
    return rmdir(g_dir);
}

/* ---- formats ---- */

static void check_idx_sequence(data_reader *r, int n, int batch)
{
    float x[4 * IMG_PX];
    int32_t y[4];
    for (int b = 0; b < 2 * (n / batch); b++) {
        assert_int_equal(data_next(r, x, y), 0);
        for (int i = 0; i < batch; i++) {
            int ex = (b % (n / batch)) * batch + i; /* file order, epoch wraps */
            for (int k = 0; k < IMG_PX; k++)
                assert_float_equal(x[i * IMG_PX + k], (float)((ex + k) % 256), 0);
            assert_int_equal(y[i], ex % 10);
        }
    }
}

static void idx_roundtrip(int gz)
{
    const char *img = tmp_path(gz ? "rt-img.gz" : "rt-img"),
               *lab = tmp_path(gz ? "rt-lab.gz" : "rt-lab");
    make_idx_pair(img, lab, gz, 12);
    data_spec s = idx_spec(img, lab, 4);
    data_info info;
    char err[256];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, 12);
    assert_int_equal(info.x_rank, 2);
    assert_int_equal(info.x_dims[0], IMG_R);
    assert_int_equal(info.x_dims[1], IMG_C);
    assert_true(info.has_y);
    data_reader *r = open_ok(&s);
    check_idx_sequence(r, 12, 4);
    data_close(r);
}

static void test_idx_plain_reads_file_order(void **state)
{
    (void)state;
    idx_roundtrip(0);
}

static void test_idx_gzip_reads_file_order(void **state)
{
    (void)state;
    idx_roundtrip(1);
}

static void test_idx_without_labels_gives_zero_y(void **state)
{
    (void)state;
    const char *img = tmp_path("nolab-img"), *lab = tmp_path("nolab-lab");
    make_idx_pair(img, lab, 0, 5);
    data_spec s = idx_spec(img, NULL, 5);
    data_reader *r = open_ok(&s);
    float x[5 * IMG_PX];
    int32_t y[5] = {7, 7, 7, 7, 7};
    assert_int_equal(data_next(r, x, y), 0);
    for (int i = 0; i < 5; i++) assert_int_equal(y[i], 0);
    assert_float_equal(x[4 * IMG_PX + 1], 5.0f, 0);
    data_close(r);
}

/* x_scale multiplies each converted value as an f32 mul by the scale
 * would: the same bits as reading unscaled and multiplying after. */
static void test_x_scale_is_the_mul_it_replaces(void **state)
{
    (void)state;
    const char *img = tmp_path("scale-img"), *lab = tmp_path("scale-lab");
    make_idx_pair(img, lab, 0, 5);
    data_spec s = idx_spec(img, lab, 5);
    float plain[5 * IMG_PX], scaled[5 * IMG_PX], c = 1.0f / 255.0f;
    int32_t y[5];
    data_reader *r = open_ok(&s);
    assert_int_equal(data_next(r, plain, y), 0);
    data_close(r);
    s.x_scale = c;
    r = open_ok(&s);
    assert_int_equal(data_next(r, scaled, y), 0);
    data_close(r);
    int differ = 0;
    for (int i = 0; i < 5 * IMG_PX; i++) {
        float want = plain[i] * c;
        assert_memory_equal(&scaled[i], &want, sizeof want);
        differ |= scaled[i] != plain[i];
    }
    assert_true(differ);
}

/* Big-endian f32 images with 4 dims: per-example shape [2, 1, 2]. */
static void test_idx_f32_elements_and_rank3_examples(void **state)
{
    (void)state;
    const char *img = tmp_path("f32-img");
    enum { N = 3, PER = 4 };
    unsigned char body[N * PER * 4];
    for (int i = 0; i < N * PER; i++) {
        float v = (float)i * 0.5f - 1.0f;
        uint32_t u;
        memcpy(&u, &v, 4);
        put_be32(body + 4 * i, u);
    }
    uint32_t dims[4] = {N, 2, 1, 2};
    write_idx(img, 1, 0x00000D04, dims, 4, body, sizeof body);
    data_spec s = idx_spec(img, NULL, 3);
    data_info info;
    char err[256];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.x_rank, 3);
    assert_int_equal(info.x_dims[0] * info.x_dims[1] * info.x_dims[2], PER);
    assert_false(info.has_y);
    data_reader *r = open_ok(&s);
    float x[N * PER];
    assert_int_equal(data_next(r, x, NULL), 0);
    for (int i = 0; i < N * PER; i++) assert_float_equal(x[i], (float)i * 0.5f - 1.0f, 0);
    data_close(r);
}

static void check_csv(const char *text, int label_col, int features, const float *wx,
                      const int32_t *wy, int n)
{
    const char *p = tmp_path("t.csv");
    write_text(p, text);
    data_spec s = {.kind = DATA_KIND_CSV, .path = {p, NULL}, .batch = n, .label_col = label_col};
    data_info info;
    char err[256] = "";
    if (data_probe(&s, &info, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(info.n, n);
    assert_int_equal(info.x_rank, 1);
    assert_int_equal(info.x_dims[0], features);
    assert_int_equal(info.has_y, label_col != -2);
    data_reader *r = open_ok(&s);
    float x[32];
    int32_t y[8];
    assert_int_equal(data_next(r, x, y), 0);
    for (int i = 0; i < n * features; i++) assert_float_equal(x[i], wx[i], 1e-6);
    for (int i = 0; wy && i < n; i++) assert_int_equal(y[i], wy[i]);
    data_close(r);
    g_nfiles--; /* the next check_csv reuses the name */
    unlink(p);
}

static void test_csv_with_header_label_last(void **state)
{
    (void)state;
    const float wx[] = {1.5f, 2, 3, -4, 0.25f, 6};
    const int32_t wy[] = {1, 0, 2};
    check_csv("a,b,label\n1.5,2,1\r\n3, -4 ,0\n\n0.25,6,2\n", -1, 2, wx, wy, 3);
}

static void test_csv_without_header_label_first(void **state)
{
    (void)state;
    const float wx[] = {10, 20, 30, 40};
    const int32_t wy[] = {3, 4};
    check_csv("3,10,20\n4,30,40", 0, 2, wx, wy, 2);
}

static void test_csv_without_label(void **state)
{
    (void)state;
    const float wx[] = {1, 2, 3, 4, 5, 6};
    check_csv("x,y,z\n1,2,3\n4,5,6\n", -2, 3, wx, NULL, 2);
}

static void test_raw_reads_x_and_y(void **state)
{
    (void)state;
    const char *x = tmp_path("raw-x"), *y = tmp_path("raw-y");
    make_raw(x, y, 6);
    data_spec s = raw_spec(x, y, 3, 0, 0);
    data_reader *r = open_ok(&s);
    float xb[6];
    int32_t yb[3];
    for (int b = 0; b < 4; b++) {
        assert_int_equal(data_next(r, xb, yb), 0);
        for (int i = 0; i < 3; i++) {
            int ex = (b % 2) * 3 + i;
            assert_float_equal(xb[2 * i], (float)ex, 0);
            assert_float_equal(xb[2 * i + 1], (float)-ex, 0);
            assert_int_equal(yb[i], ex);
        }
    }
    data_close(r);
}

static void pull_gaussian(uint64_t seed, int shuffle, float *out, int batches)
{
    data_spec s = {.kind = DATA_KIND_GAUSSIAN,
                   .batch = 50,
                   .seed = seed,
                   .shuffle = shuffle,
                   .x_rank = 2,
                   .x_dims = {3, 3},
                   .n = 200};
    data_reader *r = open_ok(&s);
    for (int b = 0; b < batches; b++) assert_int_equal(data_next(r, out + b * 450, NULL), 0);
    data_close(r);
}

static void test_gaussian_is_deterministic_and_standard_normal(void **state)
{
    (void)state;
    enum { B = 4, M = B * 450 };
    float *a = malloc(sizeof(float) * M), *b = malloc(sizeof(float) * M),
          *c = malloc(sizeof(float) * M);
    pull_gaussian(42, 1, a, B);
    pull_gaussian(42, 1, b, B);
    pull_gaussian(43, 1, c, B);
    assert_memory_equal(a, b, sizeof(float) * M);
    assert_memory_not_equal(a, c, sizeof(float) * M);
    double sum = 0, sq = 0;
    for (int i = 0; i < M; i++) {
        assert_true(isfinite(a[i]));
        sum += a[i];
        sq += (double)a[i] * a[i];
    }
    double mean = sum / M, var = sq / M - mean * mean;
    assert_true(fabs(mean) < 0.1);
    assert_true(fabs(var - 1.0) < 0.1);
    free(a);
    free(b);
    free(c);
}

/* ---- shuffling, epochs, cursors ---- */

enum { SH_N = 40, SH_B = 8, SH_PER = SH_N / SH_B };

/* Pulls one epoch of example indices (decoded from x[0]) into order[]. */
static void pull_epoch(data_reader *r, int *order)
{
    float x[SH_B * 2];
    int32_t y[SH_B];
    for (int b = 0; b < SH_PER; b++) {
        assert_int_equal(data_next(r, x, y), 0);
        for (int i = 0; i < SH_B; i++) {
            assert_int_equal((int)x[2 * i], y[i]);
            order[b * SH_B + i] = y[i];
        }
    }
}

static void assert_permutation(const int *order, int n)
{
    int seen[SH_N] = {0};
    for (int i = 0; i < n; i++) {
        assert_in_range(order[i], 0, n - 1);
        seen[order[i]]++;
    }
    for (int i = 0; i < n; i++) assert_int_equal(seen[i], 1);
}

static void test_shuffle_is_a_fresh_permutation_each_epoch(void **state)
{
    (void)state;
    const char *x = tmp_path("sh-x"), *y = tmp_path("sh-y");
    make_raw(x, y, SH_N);
    data_spec s = raw_spec(x, y, SH_B, 1, 7);
    int e0[SH_N], e1[SH_N], again[SH_N], identity[SH_N];
    for (int i = 0; i < SH_N; i++) identity[i] = i;
    data_reader *r = open_ok(&s);
    pull_epoch(r, e0);
    pull_epoch(r, e1);
    data_close(r);
    assert_permutation(e0, SH_N);
    assert_permutation(e1, SH_N);
    assert_memory_not_equal(e0, e1, sizeof e0);
    assert_memory_not_equal(e0, identity, sizeof e0);
    r = open_ok(&s);
    pull_epoch(r, again);
    data_close(r);
    assert_memory_equal(e0, again, sizeof e0);
    s.seed = 8;
    r = open_ok(&s);
    pull_epoch(r, again);
    data_close(r);
    assert_memory_not_equal(e0, again, sizeof e0);
}

static void test_epoch_rollover_drops_remainder(void **state)
{
    (void)state;
    const char *x = tmp_path("ro-x"), *y = tmp_path("ro-y");
    make_raw(x, y, 10);
    data_spec s = raw_spec(x, y, 3, 0, 0);
    data_reader *r = open_ok(&s);
    float xb[6];
    int32_t yb[3];
    uint64_t e, p;
    for (int b = 0; b < 7; b++) {
        data_cursor(r, &e, &p);
        assert_int_equal(e, (uint64_t)(b / 3));
        assert_int_equal(p, (uint64_t)(b % 3));
        assert_int_equal(data_next(r, xb, yb), 0);
        for (int i = 0; i < 3; i++) assert_int_equal(yb[i], (b % 3) * 3 + i); /* 9 never */
    }
    data_cursor(r, &e, &p);
    assert_int_equal(e, 2);
    assert_int_equal(p, 1);
    data_close(r);

    /* Shuffled: each epoch draws 9 distinct examples out of 10. */
    s.shuffle = 1;
    r = open_ok(&s);
    for (int ep = 0; ep < 3; ep++) {
        int seen[10] = {0};
        for (int b = 0; b < 3; b++) {
            assert_int_equal(data_next(r, xb, yb), 0);
            for (int i = 0; i < 3; i++) assert_int_equal(seen[yb[i]]++, 0);
        }
    }
    data_close(r);
}

enum { CC_N = 112, CC_B = 7, CC_PER = CC_N / CC_B, CC_EPOCHS = 3, CC_TOTAL = CC_PER * CC_EPOCHS };
enum { CC_THREADS = 8 };

typedef struct cc_shared {
    data_reader *r;
    pthread_mutex_t mu;
    int taken;                   /* batches claimed so far */
    int32_t got[CC_TOTAL][CC_B]; /* labels of each batch, in claim order */
} cc_shared;

static void *cc_worker(void *arg)
{
    cc_shared *sh = arg;
    float x[CC_B * 2];
    for (;;) {
        pthread_mutex_lock(&sh->mu);
        int k = sh->taken < CC_TOTAL ? sh->taken++ : -1;
        pthread_mutex_unlock(&sh->mu);
        if (k < 0) return NULL;
        int32_t y[CC_B];
        if (data_next(sh->r, x, y) != 0) return NULL;
        for (int i = 0; i < CC_B; i++) {
            if ((int)x[2 * i] != y[i]) y[i] = -1; /* x and y must travel together */
        }
        memcpy(sh->got[k], y, sizeof y);
    }
}

/* Each pulled batch must equal exactly one batch of the sequential run. */
static void cc_match_sequential(cc_shared *sh, const data_spec *s)
{
    static int32_t want[CC_TOTAL][CC_B];
    int used[CC_TOTAL] = {0};
    float x[CC_B * 2];
    data_reader *r = open_ok(s);
    for (int b = 0; b < CC_TOTAL; b++) assert_int_equal(data_next(r, x, want[b]), 0);
    data_close(r);
    for (int k = 0; k < CC_TOTAL; k++) {
        int found = -1;
        for (int b = 0; b < CC_TOTAL && found < 0; b++)
            if (!used[b] && memcmp(want[b], sh->got[k], sizeof want[b]) == 0) found = b;
        assert_true(found >= 0);
        used[found] = 1;
    }
}

static void test_concurrent_readers_see_each_example_once_per_epoch(void **state)
{
    (void)state;
    const char *x = tmp_path("cc-x"), *y = tmp_path("cc-y");
    make_raw(x, y, CC_N);
    data_spec s = raw_spec(x, y, CC_B, 1, 99);
    static cc_shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    sh.r = open_ok(&s);
    pthread_t t[CC_THREADS];
    for (int i = 0; i < CC_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, cc_worker, &sh), 0);
    for (int i = 0; i < CC_THREADS; i++) pthread_join(t[i], NULL);
    uint64_t e, p;
    data_cursor(sh.r, &e, &p);
    assert_int_equal(e, CC_EPOCHS);
    assert_int_equal(p, 0);
    data_close(sh.r);
    int count[CC_N] = {0};
    for (int k = 0; k < CC_TOTAL; k++)
        for (int i = 0; i < CC_B; i++) {
            assert_in_range(sh.got[k][i], 0, CC_N - 1);
            count[sh.got[k][i]]++;
        }
    for (int i = 0; i < CC_N; i++) assert_int_equal(count[i], CC_EPOCHS);
    cc_match_sequential(&sh, &s);
    pthread_mutex_destroy(&sh.mu);
}

/* Two batches per epoch, and consumers that build the next batch whenever
 * nothing is ready: builders work on consecutive epochs at once, so each
 * epoch's shuffle must stay intact until its last batch is built.  With
 * acquires serialized (ordered), the batches in hand-out order must be the
 * sequential run's; with eight free-running consumers, the same batches in
 * some order. */
enum { SE_N = 10, SE_B = 4, SE_TOTAL = 400 };

typedef struct se_shared {
    data_reader *r;
    pthread_mutex_t mu;
    int ordered;
    int taken;
    int32_t got[SE_TOTAL][SE_B];
} se_shared;

static void *se_worker(void *arg)
{
    se_shared *sh = arg;
    for (;;) {
        data_batch b;
        pthread_mutex_lock(&sh->mu);
        int k = sh->taken < SE_TOTAL ? sh->taken++ : -1;
        int ok = k >= 0 && (!sh->ordered || data_acquire(sh->r, &b) == 0);
        pthread_mutex_unlock(&sh->mu);
        if (ok && !sh->ordered) ok = data_acquire(sh->r, &b) == 0;
        if (!ok) return NULL;
        memcpy(sh->got[k], b.y, sizeof sh->got[k]);
        data_release(sh->r, &b);
    }
}

static void se_run(se_shared *sh, const data_spec *s, int ordered)
{
    memset(sh, 0, sizeof *sh);
    pthread_mutex_init(&sh->mu, NULL);
    sh->ordered = ordered;
    sh->r = open_ok(s);
    pthread_t t[8];
    for (int i = 0; i < 8; i++) assert_int_equal(pthread_create(&t[i], NULL, se_worker, sh), 0);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    data_close(sh->r);
    pthread_mutex_destroy(&sh->mu);
}

static void test_many_builders_across_epochs_keep_the_sequence(void **state)
{
    (void)state;
    const char *x = tmp_path("se-x"), *y = tmp_path("se-y");
    make_raw(x, y, SE_N);
    data_spec s = raw_spec(x, y, SE_B, 1, 7);
    static int32_t want[SE_TOTAL][SE_B];
    static se_shared sh;
    float xb[SE_B * 2];
    data_reader *r = open_ok(&s);
    for (int k = 0; k < SE_TOTAL; k++) assert_int_equal(data_next(r, xb, want[k]), 0);
    data_close(r);
    se_run(&sh, &s, 1);
    assert_memory_equal(want, sh.got, sizeof want);
    se_run(&sh, &s, 0);
    int used[SE_TOTAL] = {0};
    for (int k = 0; k < SE_TOTAL; k++) {
        int found = -1;
        for (int b = 0; b < SE_TOTAL && found < 0; b++)
            if (!used[b] && memcmp(want[b], sh.got[k], sizeof want[b]) == 0) found = b;
        assert_true(found >= 0);
        used[found] = 1;
    }
}

static void test_seek_reproduces_the_sequence(void **state)
{
    (void)state;
    const char *x = tmp_path("sk-x"), *y = tmp_path("sk-y");
    make_raw(x, y, SH_N);
    data_spec s = raw_spec(x, y, SH_B, 1, 5);
    enum { T = 3 * SH_PER };
    int32_t seq[T][SH_B], yb[SH_B];
    float xb[2 * SH_B];
    data_reader *r = open_ok(&s);
    for (int b = 0; b < T; b++) assert_int_equal(data_next(r, xb, seq[b]), 0);
    /* Back to the middle of epoch 1, with the ring full of later batches. */
    assert_int_equal(data_seek(r, 1, 2), 0);
    for (int b = SH_PER + 2; b < T; b++) {
        assert_int_equal(data_next(r, xb, yb), 0);
        assert_memory_equal(yb, seq[b], sizeof yb);
    }
    /* pos == batches per epoch means the start of the next epoch. */
    assert_int_equal(data_seek(r, 0, SH_PER), 0);
    uint64_t e, p;
    data_cursor(r, &e, &p);
    assert_int_equal(e, 1);
    assert_int_equal(p, 0);
    assert_int_equal(data_next(r, xb, yb), 0);
    assert_memory_equal(yb, seq[SH_PER], sizeof yb);
    assert_int_equal(data_seek(r, 0, SH_PER + 1), -1);
    data_close(r);
    /* A fresh reader can jump straight to a later cursor. */
    r = open_ok(&s);
    assert_int_equal(data_seek(r, 2, 3), 0);
    assert_int_equal(data_next(r, xb, yb), 0);
    assert_memory_equal(yb, seq[2 * SH_PER + 3], sizeof yb);
    data_close(r);
}

/* Large examples keep the read-ahead thread busy, so most seeks land while
 * it is building a batch for the old cursor: that batch must never appear. */
static void test_seek_while_read_ahead_is_building(void **state)
{
    (void)state;
    enum { N = 40, B = 8, PER = N / B, T = 3 * PER, EX = 64 * 64 };
    data_spec s = {.kind = DATA_KIND_GAUSSIAN,
                   .batch = B,
                   .shuffle = 1,
                   .seed = 11,
                   .x_rank = 2,
                   .x_dims = {64, 64},
                   .n = N};
    float *seq = malloc(sizeof(float) * T * B * EX), *xb = malloc(sizeof(float) * B * EX);
    data_reader *r = open_ok(&s);
    for (int b = 0; b < T; b++) assert_int_equal(data_next(r, seq + (size_t)b * B * EX, NULL), 0);
    uint64_t g = 12345;
    for (int i = 0; i < 100; i++) {
        g = g * 6364136223846793005u + 1442695040888963407u;
        int b = (int)((g >> 33) % T);
        assert_int_equal(data_seek(r, (uint64_t)(b / PER), (uint64_t)(b % PER)), 0);
        assert_int_equal(data_next(r, xb, NULL), 0);
        assert_memory_equal(xb, seq + (size_t)b * B * EX, sizeof(float) * B * EX);
    }
    data_close(r);
    free(seq);
    free(xb);
}

static void test_close_with_full_ring_and_unread_batches(void **state)
{
    (void)state;
    const char *x = tmp_path("cl-x");
    make_raw(x, NULL, 16);
    data_spec s = raw_spec(x, NULL, 1, 1, 3);
    for (int i = 0; i < 20; i++) {
        data_reader *r = open_ok(&s);
        float xb[2];
        if (i % 2) assert_int_equal(data_next(r, xb, NULL), 0);
        if (i % 3 == 0) usleep(1000); /* let the ring fill: close must not hang */
        data_close(r);
    }
}

/* ---- errors ---- */

static void test_error_missing_file(void **state)
{
    (void)state;
    char want[512], path[300];
    snprintf(path, sizeof path, "%s/does-not-exist.gz", g_dir);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    data_spec s = idx_spec(path, NULL, 1);
    expect_error(&s, want);
    expect_probe_error(&s, want);
    data_spec c = {.kind = DATA_KIND_CSV, .path = {path, NULL}, .batch = 1, .label_col = -1};
    expect_error(&c, want);
    data_spec w = raw_spec(path, NULL, 1, 0, 0);
    expect_error(&w, want);
}

static void test_error_wrong_magic(void **state)
{
    (void)state;
    const char *img = tmp_path("wm-img"), *lab = tmp_path("wm-lab");
    make_idx_pair(img, lab, 1, 4);
    char want[512];
    /* The two files swapped: each has the other's magic. */
    data_spec s = idx_spec(lab, img, 1);
    snprintf(want, sizeof want, "%s: bad magic number 0x00000801, expected 0x00000803 (IDX images)",
             lab);
    expect_error(&s, want);
    expect_probe_error(&s, want);
    const char *txt = tmp_path("wm-text");
    write_text(txt, "hello world\n");
    s = idx_spec(img, txt, 1);
    snprintf(want, sizeof want, "%s: bad magic number 0x68656c6c, expected 0x00000801 (IDX labels)",
             txt);
    expect_error(&s, want);
}

static void test_error_truncated_images(void **state)
{
    (void)state;
    const char *img = tmp_path("tr-img.gz"), *lab = tmp_path("tr-lab.gz");
    make_idx_pair(img, lab, 1, 4);
    unsigned char px[4 * IMG_PX] = {0};
    uint32_t dims[3] = {4, IMG_R, IMG_C};
    write_idx(img, 1, 0x00000803, dims, 3, px, sizeof px - 5);
    char want[512];
    snprintf(want, sizeof want, "%s: truncated: header promises 24 bytes of data, file has 19",
             img);
    data_spec s = idx_spec(img, lab, 1);
    expect_error(&s, want);
    write_idx(img, 0, 0x00000803, dims, 2, NULL, 0);
    snprintf(want, sizeof want, "%s: truncated: the IDX header ends inside its dimensions", img);
    expect_error(&s, want);
    expect_probe_error(&s, want);
}

static void test_error_truncated_labels(void **state)
{
    (void)state;
    const char *img = tmp_path("tl-img"), *lab = tmp_path("tl-lab");
    make_idx_pair(img, lab, 0, 4);
    unsigned char lb[4] = {1, 2, 3, 4};
    uint32_t dims[1] = {4};
    write_idx(lab, 0, 0x00000801, dims, 1, lb, 3);
    char want[512];
    snprintf(want, sizeof want, "%s: truncated: header promises 4 bytes of data, file has 3", lab);
    data_spec s = idx_spec(img, lab, 1);
    expect_error(&s, want);
}

static void test_error_count_mismatch(void **state)
{
    (void)state;
    const char *img = tmp_path("cm-img"), *lab = tmp_path("cm-lab");
    const char *img4 = tmp_path("cm-img4"), *lab4 = tmp_path("cm-lab4");
    make_idx_pair(img, lab, 0, 5);
    make_idx_pair(img4, lab4, 0, 4);
    data_spec s = idx_spec(img4, lab, 1);
    char want[512];
    snprintf(want, sizeof want, "%s: 5 labels, but %s has 4 images", lab, img4);
    expect_error(&s, want);
    expect_probe_error(&s, want);
}

static void test_error_label_out_of_range(void **state)
{
    (void)state;
    const char *img = tmp_path("lr-img"), *lab = tmp_path("lr-lab");
    make_idx_pair(img, lab, 0, 12); /* labels 0..9, 0, 1 */
    data_spec s = idx_spec(img, lab, 1);
    s.n_classes = 9;
    char want[512];
    snprintf(want, sizeof want, "%s: label 9 of example 9 is outside [0, 9)", lab);
    expect_error(&s, want);
    s.n_classes = 10;
    data_close(open_ok(&s));
}

static void test_error_batch_larger_than_n(void **state)
{
    (void)state;
    const char *img = tmp_path("bn-img"), *lab = tmp_path("bn-lab");
    make_idx_pair(img, lab, 0, 6);
    data_spec s = idx_spec(img, lab, 7);
    char want[512];
    snprintf(want, sizeof want, "%s: batch 7 is larger than the 6 examples in the data set", img);
    expect_error(&s, want);
    expect_probe_error(&s, want);
    s.batch = 0;
    snprintf(want, sizeof want, "%s: batch 0 must be >= 1", img);
    expect_error(&s, want);
}

static void test_error_csv_ragged_row(void **state)
{
    (void)state;
    const char *p = tmp_path("rag.csv");
    write_text(p, "a,b,c\n1,2,3\n4,5\n6,7,8\n");
    data_spec s = {.kind = DATA_KIND_CSV, .path = {p, NULL}, .batch = 1, .label_col = -1};
    char want[512];
    snprintf(want, sizeof want, "%s:3:4: expected 3 columns, found 2", p);
    expect_error(&s, want);
}

static void test_error_csv_non_numeric(void **state)
{
    (void)state;
    const char *p = tmp_path("nn.csv");
    write_text(p, "1,2,3\n4,five,6\n");
    data_spec s = {.kind = DATA_KIND_CSV, .path = {p, NULL}, .batch = 1, .label_col = -1};
    char want[512];
    snprintf(want, sizeof want, "%s:2:3: column 2: 'five' is not a number", p);
    expect_error(&s, want);
    write_text(p, "1,2,3.5\n");
    snprintf(want, sizeof want, "%s:1:5: label '3.5' in column 3 is not a non-negative integer", p);
    expect_error(&s, want);
}

static void test_error_raw_size_not_multiple(void **state)
{
    (void)state;
    const char *x = tmp_path("rs-x"), *y = tmp_path("rs-y");
    float v[5] = {0};
    write_bytes(x, 0, v, sizeof v, NULL, 0);
    data_spec s = raw_spec(x, NULL, 1, 0, 0);
    char want[512];
    snprintf(want, sizeof want,
             "%s: size 20 bytes is not a multiple of 8 (one example of 2 f32 values)", x);
    expect_error(&s, want);
    expect_probe_error(&s, want);
    make_raw(x, NULL, 3);
    write_bytes(y, 0, v, 8, NULL, 0);
    s.path[1] = y;
    snprintf(want, sizeof want,
             "%s: size 8 bytes, expected 12 (one i32 label for each of 3 examples in %s)", y, x);
    expect_error(&s, want);
}

static void test_error_empty_corrupt_and_cut_files(void **state)
{
    (void)state;
    const char *p = tmp_path("bad.gz");
    char want[512];
    data_spec s = idx_spec(p, NULL, 1);
    write_bytes(p, 0, "", 0, NULL, 0);
    snprintf(want, sizeof want, "%s: truncated: too short for an IDX header", p);
    expect_error(&s, want);
    /* A gzip header followed by garbage: zlib's own reason is passed on. */
    write_bytes(p, 0, "\x1f\x8b\x08\x00garbagegarbage", 18, NULL, 0);
    char err[512] = "";
    assert_null(data_open(&s, err, sizeof err));
    snprintf(want, sizeof want, "%s: read error: ", p);
    assert_memory_equal(err, want, strlen(want));
    /* A gzip stream cut in the middle reads as truncated data. */
    enum { N = 20 };
    unsigned char body[N * IMG_PX];
    for (int i = 0; i < N * IMG_PX; i++) body[i] = (unsigned char)(i * 7919 % 251);
    uint32_t dims[3] = {N, IMG_R, IMG_C};
    const char *whole = tmp_path("whole.gz");
    write_idx(whole, 1, 0x00000803, dims, 3, body, sizeof body);
    unsigned char gz[1024];
    FILE *f = fopen(whole, "rb");
    size_t len = fread(gz, 1, sizeof gz, f);
    fclose(f);
    write_bytes(p, 0, gz, len - 12, NULL, 0); /* drops the trailer and some data */
    err[0] = '\0';
    assert_null(data_open(&s, err, sizeof err));
    snprintf(want, sizeof want, "%s: truncated: header promises 120 bytes of data, file has ", p);
    assert_memory_equal(err, want, strlen(want));
}

static void test_error_csv_empty_and_bad_labels(void **state)
{
    (void)state;
    const char *p = tmp_path("lab.csv");
    data_spec s = {.kind = DATA_KIND_CSV, .path = {p, NULL}, .batch = 1, .label_col = -1};
    char want[512];
    write_text(p, "a,b\n\n");
    snprintf(want, sizeof want, "%s: no data rows", p);
    expect_error(&s, want);
    expect_probe_error(&s, want);
    write_text(p, "1,2\n3,-1\n");
    snprintf(want, sizeof want, "%s:2:3: label '-1' in column 2 is not a non-negative integer", p);
    expect_error(&s, want);
    write_text(p, "1,2\n3,4\n");
    s.label_col = 5;
    snprintf(want, sizeof want, "%s: label column 5 is out of range (the file has 2 columns)", p);
    expect_error(&s, want);
    s.label_col = -1;
    s.n_classes = 4;
    snprintf(want, sizeof want, "%s: label 4 of example 1 is outside [0, 4)", p);
    expect_error(&s, want);
}

/* ---- hardening: inputs from fuzzing (tests/fuzz/fuzz_data_*.c) and review ---- */

/* A header that promises about 1 TB in a 23-byte file is refused from its
 * header alone, above the limit on an IDX file's data (it used to be
 * allocated whole and fail as out of memory, then read as it grew). */
static void test_idx_header_promising_a_terabyte_is_refused(void **state)
{
    (void)state;
    const char *p = tmp_path("huge-header");
    uint32_t dims[3] = {0xFFFFFFFFu, 16, 16};
    write_idx(p, 0, 0x00000803, dims, 3, "abc", 3);
    data_spec s = idx_spec(p, NULL, 1);
    char want[512];
    snprintf(want, sizeof want,
             "%s: the IDX header's dimensions make more than 17179869184 bytes of data, the limit",
             p);
    expect_probe_error(&s, want);
    expect_error(&s, want);
    write_idx(p, 1, 0x00000803, dims, 3, "abc", 3);
    expect_error(&s, want);
}

/* Bodies bigger than the first read chunk (1 MiB) come out whole. */
static void test_idx_body_larger_than_one_read_chunk(void **state)
{
    (void)state;
    enum { N = 400000, BATCH = 8 }; /* 2.4 MB of pixels: the buffer grows twice */
    for (int gz = 0; gz < 2; gz++) {
        const char *img = tmp_path(gz ? "big-img.gz" : "big-img"),
                   *lab = tmp_path(gz ? "big-lab.gz" : "big-lab");
        make_idx_pair(img, lab, gz, N);
        data_spec s = idx_spec(img, lab, BATCH);
        data_reader *r = open_ok(&s);
        float x[BATCH * IMG_PX];
        int32_t y[BATCH];
        assert_int_equal(data_seek(r, 0, N / BATCH - 1), 0);
        assert_int_equal(data_next(r, x, y), 0);
        for (int i = 0; i < BATCH; i++) {
            int ex = N - BATCH + i;
            for (int k = 0; k < IMG_PX; k++)
                assert_float_equal(x[i * IMG_PX + k], (float)((ex + k) % 256), 0);
            assert_int_equal(y[i], ex % 10);
        }
        data_close(r);
    }
}

/* An empty example (a zero dimension after n) holds no data, so a 16-byte
 * file could declare two billion of them: shuffling those took 32 GB and
 * minutes.  Such files are refused at probe. */
static void test_idx_empty_examples_are_refused(void **state)
{
    (void)state;
    const char *p = tmp_path("empty-examples");
    uint32_t dims[3] = {2000000000u, 3, 0};
    write_idx(p, 0, 0x00000803, dims, 3, NULL, 0);
    data_spec s = idx_spec(p, NULL, 1);
    s.shuffle = 1;
    char want[512];
    snprintf(want, sizeof want, "%s: IDX dimension 2 is 0; examples must not be empty", p);
    expect_probe_error(&s, want); /* first: the old code passed probe, then hung in open */
    expect_error(&s, want);
}

/* A field is parsed whole: one longer than 127 characters used to be cut
 * to its first 127 before strtod, and one with a NUL byte cut at the NUL,
 * so either could pass as a number. Messages quote at most 64 characters. */
static void test_csv_long_or_nul_field_is_not_a_number(void **state)
{
    (void)state;
    const char *p = tmp_path("long.csv");
    data_spec s = {.kind = DATA_KIND_CSV, .path = {p, NULL}, .batch = 1, .label_col = -1};
    char text[256], want[512], ones[65];
    memset(ones, '1', 64);
    ones[64] = '\0';
    snprintf(text, sizeof text, "1,2\n%s%s%sxyz,1\n", ones, ones, "1111111111");
    write_text(p, text);
    snprintf(want, sizeof want, "%s:2:1: column 1: '%s' is not a number", p, ones);
    expect_error(&s, want);
    write_bytes(p, 0, "1,2\n3\0junk,1\n", 13, NULL, 0);
    snprintf(want, sizeof want, "%s:2:1: column 1: '3' is not a number", p);
    expect_error(&s, want);
}

/* strtod reports ERANGE for underflow too; 1e-320 is a number (it becomes
 * 0 as f32), so a first row holding one is data, not a header. */
static void test_csv_underflow_is_a_number_not_a_header(void **state)
{
    (void)state;
    const float wx[] = {0, 2};
    const int32_t wy[] = {1, 0};
    check_csv("1e-320,1\n2,0\n", -1, 1, wx, wy, 2);
}

/* ---- data is read as it is, or refused (issue 23) ---- */

/* probe and open both succeed and the set has n examples. */
static data_reader *open_n(const data_spec *s, int64_t n)
{
    data_info info;
    char err[512] = "";
    if (data_probe(s, &info, err, sizeof err)) fail_msg("data_probe: %s", err);
    assert_int_equal(info.n, n);
    return open_ok(s);
}

static data_spec csv_spec(const char *p, int64_t batch)
{
    data_spec s = {.kind = DATA_KIND_CSV, .path = {p, NULL}, .batch = batch, .label_col = -1};
    return s;
}

/* A byte order mark is skipped, and the first row is a header only when
 * none of its fields is a number: a BOM, an empty field or a word among
 * numbers used to make it one, and its example was dropped unseen. */
static void test_csv_header_rule_cannot_be_fooled(void **state)
{
    (void)state;
    const float bom_x[] = {1, 2, 3, 4, 5, 6};
    const int32_t bom_y[] = {0, 1, 2};
    check_csv("\xEF\xBB\xBF"
              "1,2,0\n3,4,1\n5,6,2\n",
              -1, 2, bom_x, bom_y, 3);
    const float idx_x[] = {1, 7, 2, 8, 3, 9};
    const int32_t idx_y[] = {0, 1, 0};
    check_csv("\xEF\xBB\xBF"
              ",a,label\n1,7,0\n2,8,1\n3,9,0\n",
              2, 2, idx_x, idx_y, 3);
    const char *p = tmp_path("hdr.csv");
    data_spec s = csv_spec(p, 1);
    char want[512];
    const char *hint = " (the first row is a header only when none of its fields is a number)";
    write_text(p, ",1,2\n3,4,5\n");
    snprintf(want, sizeof want, "%s:1:1: column 1 is empty%s", p, hint);
    expect_error(&s, want);
    write_text(p, "\xEF\xBB\xBF"
                  "id,1,2\n3,4,5\n");
    snprintf(want, sizeof want, "%s:1:1: column 1: 'id' is not a number%s", p, hint);
    expect_error(&s, want);
    write_text(p, " , ,\n1,2,0\n");
    snprintf(want, sizeof want, "%s:1:2: column 1 is empty%s", p, hint);
    expect_error(&s, want);
    write_text(p, "a,b\n1,,0\n");
    snprintf(want, sizeof want, "%s:2:4: expected 2 columns, found 3", p);
    expect_error(&s, want);
}

/* nan and infinities are errors unless the spec asks for them; a finite
 * numeral beyond f32's range is an error either way. */
static void test_csv_nonfinite_values_need_the_opt_in(void **state)
{
    (void)state;
    const char *p = tmp_path("nf.csv");
    data_spec s = csv_spec(p, 3);
    char want[512];
    const char *opt = "is not a finite number; csv(..., nonfinite=true) reads nan and inf";
    write_text(p, "x,y,label\n1,2,0\n3, nan ,1\n-INF,Infinity,0\n");
    snprintf(want, sizeof want, "%s:3:4: column 2: 'nan' %s", p, opt);
    expect_error(&s, want);
    s.nonfinite = 1;
    data_reader *r = open_n(&s, 3);
    float x[6];
    int32_t y[3];
    assert_int_equal(data_next(r, x, y), 0);
    assert_true(isnan(x[3]) && isinf(x[4]) && x[4] < 0 && isinf(x[5]) && x[5] > 0);
    data_close(r);
    write_text(p, "1,2,0\n1e39,2,1\n");
    snprintf(want, sizeof want, "%s:2:1: column 1: '1e39' is beyond the range of f32", p);
    expect_error(&s, want);
    s.nonfinite = 0;
    expect_error(&s, want);
    write_text(p, "1,2,0\n1,2,nan\n");
    snprintf(want, sizeof want, "%s:2:5: column 3: 'nan' %s", p, opt);
    expect_error(&s, want);
}

/* Only decimal numbers: hex floats and other forms strtod takes are not
 * what a CSV file means. */
static void test_csv_numbers_are_decimal(void **state)
{
    (void)state;
    const float wx[] = {-1.5e3f, 0.5f, 5, 7, 0.25f, -0.0f};
    check_csv("-1.5e3,.5,0\n5.,+7,1\n2.5E-1,-0,2\n", -1, 2, wx, NULL, 3);
    const char *p = tmp_path("dec.csv");
    data_spec s = csv_spec(p, 1);
    static const char *bad[] = {"0x1p3", "1e", ".", "+", "1.5f", "1 2", "--1", "1e+", "infinite"};
    char text[64], want[512];
    for (int k = 0; k < 9; k++) {
        snprintf(text, sizeof text, "1,0\n%s,1\n", bad[k]);
        write_text(p, text);
        char err[512] = "";
        assert_null(data_open(&s, err, sizeof err));
        snprintf(want, sizeof want, "%s:2:1: column 1: '%s' is not a", p, bad[k]);
        if (strncmp(err, want, strlen(want)) != 0) fail_msg("'%s': %s", bad[k], err);
    }
}

/* Quoted fields: a header name may hold a comma or a quote (""), a number
 * may be quoted; a quote that does not close is an error. */
static void test_csv_quoted_fields(void **state)
{
    (void)state;
    const float wx[] = {1, 2.5f, 3, 4};
    const int32_t wy[] = {0, 1};
    check_csv("\"x, first\",\"say \"\"y\"\"\",label\r\n1,\"2.5\",0\r\n 3 , \"4\" ,1\r\n", -1, 2, wx,
              wy, 2);
    const char *p = tmp_path("q.csv");
    data_spec s = csv_spec(p, 1);
    char want[512];
    write_text(p, "1,2\n3,\"4\n");
    snprintf(want, sizeof want,
             "%s:2:3: this quoted field does not end on its line (a line break inside quotes is "
             "not supported)",
             p);
    expect_error(&s, want);
    write_text(p, "1,2\n\"3\"x,4\n");
    snprintf(want, sizeof want,
             "%s:2:4: text after a closing quote (write a quote inside a quoted field as \"\")", p);
    expect_error(&s, want);
    write_text(p, "1,2,0\n1,2,3,4\n");
    snprintf(want, sizeof want, "%s:2:7: expected 3 columns, found 4", p);
    expect_error(&s, want);
}

/* Every reader refuses what is not a regular file before reading it: a
 * directory, a FIFO (opened without waiting for a writer) and a device
 * (csv("/dev/zero") used to read until memory ran out). */
static void test_non_regular_files_are_refused(void **state)
{
    (void)state;
    const char *fifo = tmp_path("fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *paths[] = {g_dir, fifo, "/dev/zero"};
    char want[512];
    for (int k = 0; k < 3; k++) {
        snprintf(want, sizeof want, "%s: not a regular file", paths[k]);
        data_spec c = csv_spec(paths[k], 1);
        expect_probe_error(&c, want);
        expect_error(&c, want);
        data_spec i = idx_spec(paths[k], NULL, 1);
        expect_probe_error(&i, want);
        data_spec r = raw_spec(paths[k], NULL, 1, 0, 0);
        expect_probe_error(&r, want);
        if (k == 0) continue; /* a directory is text's list of files */
        data_spec t = {.kind = DATA_KIND_TEXT,
                       .path = {paths[k]},
                       .paths = &paths[k],
                       .n_paths = 1,
                       .batch = 1,
                       .block = 1,
                       .stride = 1,
                       .split = 1};
        snprintf(want, sizeof want, "%s: not a regular file or a directory", paths[k]);
        expect_probe_error(&t, want);
    }
    const char *img = tmp_path("nr-img");
    make_idx_pair(img, tmp_path("nr-lab"), 0, 4);
    data_spec i = idx_spec(img, fifo, 1);
    snprintf(want, sizeof want, "%s: not a regular file", fifo);
    expect_error(&i, want);
}

/* A sparse file of size bytes (nothing is written). */
static const char *sparse_file(const char *name, off_t size)
{
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), size), 0);
    assert_int_equal(fclose(f), 0);
    return p;
}

/* Each reader's limit is checked from the file's size, before a byte is
 * read: 1 GiB for CSV and text, 16 GiB for IDX and raw files. */
static void test_files_above_the_limits_are_refused(void **state)
{
    (void)state;
    char want[512];
    const char *csv = sparse_file("big.csv", (off_t)1 << 30 | 1);
    data_spec c = csv_spec(csv, 1);
    snprintf(want, sizeof want,
             "%s: the file is 1073741825 bytes, above the limit of 1073741824 bytes for a CSV file",
             csv);
    expect_probe_error(&c, want);
    const char *txt = sparse_file("big.txt", (off_t)1 << 30 | 1);
    data_spec t = {.kind = DATA_KIND_TEXT,
                   .path = {txt},
                   .paths = &txt,
                   .n_paths = 1,
                   .batch = 1,
                   .block = 1,
                   .stride = 1,
                   .split = 1};
    snprintf(want, sizeof want,
             "%s: the file is 1073741825 bytes, above the limit of 1073741824 bytes for text", txt);
    expect_probe_error(&t, want);
    const char *bin = sparse_file("big.bin", ((off_t)1 << 34) + 8);
    data_spec r = raw_spec(bin, NULL, 1, 0, 0);
    snprintf(want, sizeof want,
             "%s: the file is 17179869192 bytes, above the limit of 17179869184 bytes for a raw "
             "file",
             bin);
    expect_probe_error(&r, want);
    data_spec i = idx_spec(bin, NULL, 1);
    snprintf(want, sizeof want,
             "%s: the file is 17179869192 bytes, above the limit of 17179869184 bytes for an IDX "
             "file",
             bin);
    expect_probe_error(&i, want);
    unlink(csv);
    unlink(txt);
    unlink(bin);
}

/* A gaussian source, which stores nothing, still has at most 2^31 - 1
 * examples: each costs a slot of the shuffle. */
static void test_gaussian_examples_are_bounded(void **state)
{
    (void)state;
    data_spec s = {.kind = DATA_KIND_GAUSSIAN,
                   .batch = 1,
                   .shuffle = 1,
                   .x_rank = 1,
                   .x_dims = {1},
                   .n = INT64_C(1) << 31};
    expect_probe_error(&s, "gaussian: 2147483648 examples, above the limit of 2147483647 per "
                           "data source");
}

/* The header's count must be the file's: 10 examples declared in a file
 * of 100 used to read as a set of 10.  Plain files are measured at probe,
 * gzipped ones as they are read, one byte past the declared data at most
 * (so a gzip bomb behind a small header stops there). */
static void test_idx_header_counts_must_match_the_file(void **state)
{
    (void)state;
    enum { N = 100 };
    unsigned char body[N * IMG_PX] = {0};
    uint32_t dims[3] = {10, IMG_R, IMG_C};
    char want[512];
    for (int gz = 0; gz < 2; gz++) {
        const char *p = tmp_path(gz ? "count.gz" : "count");
        write_idx(p, gz, 0x00000803, dims, 3, body, sizeof body);
        data_spec s = idx_spec(p, NULL, 1);
        snprintf(want, sizeof want,
                 "%s: the file holds more data than its header declares, 60 bytes (10 examples); "
                 "the header's counts must match the file",
                 p);
        if (!gz) expect_probe_error(&s, want);
        expect_error(&s, want);
    }
    /* 10 images behind 64 MiB of zeros, 64 KB gzipped */
    size_t bomb = (size_t)64 << 20;
    unsigned char *zeros = calloc(bomb, 1);
    const char *p = tmp_path("bomb.gz");
    write_idx(p, 1, 0x00000803, dims, 3, zeros, bomb);
    free(zeros);
    data_spec s = idx_spec(p, NULL, 1);
    snprintf(want, sizeof want,
             "%s: the file holds more data than its header declares, 60 bytes (10 examples); "
             "the header's counts must match the file",
             p);
    expect_error(&s, want);
}

/* f32 and f64 IDX data and raw f32 data hold finite f32 values, unless
 * the spec asks for nan and infinities; f64 beyond f32's range is refused
 * either way (it would become an infinity). */
static void test_binary_nonfinite_values_need_the_opt_in(void **state)
{
    (void)state;
    const char *x = tmp_path("nf-x");
    float xv[4] = {1, 2, NAN, 4};
    write_bytes(x, 0, xv, sizeof xv, NULL, 0);
    data_spec r = raw_spec(x, NULL, 1, 0, 0);
    char want[512];
    snprintf(want, sizeof want,
             "%s: value 2 (example 1) is nan, not a finite number; nonfinite=true reads nan and "
             "inf as they are",
             x);
    expect_error(&r, want);
    r.nonfinite = 1;
    data_close(open_ok(&r));
    const char *img = tmp_path("nf-f64");
    double dv[3] = {1, 1e300, -INFINITY};
    unsigned char body[24];
    for (int i = 0; i < 3; i++) {
        uint64_t u;
        memcpy(&u, &dv[i], 8);
        put_be32(body + 8 * i, (uint32_t)(u >> 32));
        put_be32(body + 8 * i + 4, (uint32_t)u);
    }
    uint32_t dims[2] = {3, 1};
    write_idx(img, 1, 0x00000E02, dims, 2, body, sizeof body);
    data_spec i = idx_spec(img, NULL, 1);
    i.nonfinite = 1;
    snprintf(want, sizeof want, "%s: value 1 (example 1) is 1e+300, beyond the range of f32", img);
    expect_error(&i, want);
    memcpy(body + 8, &(uint64_t){0}, 8);
    write_idx(img, 1, 0x00000E02, dims, 2, body, sizeof body);
    data_close(open_ok(&i)); /* 0.0 and -inf */
    i.nonfinite = 0;
    snprintf(want, sizeof want,
             "%s: value 2 (example 2) is -inf, not a finite number; nonfinite=true reads nan and "
             "inf as they are",
             img);
    expect_error(&i, want);
}

/* Example indices (x[0] of make_raw) of the next batch of r into ex. */
static void pull_indices(data_reader *r, int batch, int *ex)
{
    float x[64];
    int32_t y[32];
    assert_int_equal(data_next(r, x, y), 0);
    for (int i = 0; i < batch; i++) ex[i] = (int)x[2 * i];
}

/* The tail of an epoch holds the examples its batches leave out, then the
 * epoch's first ones again; across shards (2 of batch 2 over 11 examples:
 * 2 batches, then 3 left) each example of the epoch is a real row exactly
 * once, shuffled or not. */
static void test_tail_batch_holds_the_remainder_once(void **state)
{
    (void)state;
    enum { N = 11, B = 2, P = 2 };
    const char *x = tmp_path("tail-x"), *y = tmp_path("tail-y");
    make_raw(x, y, N);
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        int seen[N] = {0}, first[P][B], ex[B];
        for (int k = 0; k < P; k++) {
            data_spec s = raw_spec(x, y, B, shuffle, 9);
            s.shard = k;
            s.shards = P;
            data_reader *r = open_ok(&s);
            for (int b = 0; b < N / (B * P); b++) {
                pull_indices(r, B, ex);
                if (b == 0) memcpy(first[k], ex, sizeof ex);
                for (int i = 0; i < B; i++) seen[ex[i]]++;
            }
            assert_int_equal(data_tail_rows(r), k == 0 ? 2 : 1);
            data_seek_tail(r, 0);
            pull_indices(r, B, ex);
            for (int i = 0; i < data_tail_rows(r); i++) seen[ex[i]]++;
            if (k == 1) assert_int_equal(ex[1], first[0][0]); /* padding: the epoch again */
            uint64_t e, pos;
            data_cursor(r, &e, &pos);
            assert_true(e == 1 && pos == 0);
            data_close(r);
        }
        for (int i = 0; i < N; i++) assert_int_equal(seen[i], 1);
    }
    data_spec s = raw_spec(x, y, 1, 0, 0);
    data_reader *r = open_ok(&s);
    assert_int_equal(data_tail_rows(r), 0);
    data_close(r);
}

/* ---- the real data set ---- */

#define FM_DIR "/usr/share/datasets/fashion-mnist/"

static void test_fashion_mnist_t10k(void **state)
{
    (void)state;
    const char *img = FM_DIR "t10k-images-idx3-ubyte.gz", *lab = FM_DIR "t10k-labels-idx1-ubyte.gz";
    if (access(img, R_OK) != 0 || access(lab, R_OK) != 0) skip();
    unsigned char hdr[16], first_px[784], first_label;
    gzFile f = gzopen(lab, "rb");
    assert_non_null(f);
    assert_int_equal(gzread(f, hdr, 8), 8);
    assert_int_equal(gzread(f, &first_label, 1), 1);
    gzclose(f);
    f = gzopen(img, "rb");
    assert_non_null(f);
    assert_int_equal(gzread(f, hdr, 16), 16);
    assert_int_equal(gzread(f, first_px, 784), 784);
    gzclose(f);

    data_spec s = idx_spec(img, lab, 100);
    s.n_classes = 10;
    data_info info;
    char err[512];
    assert_int_equal(data_probe(&s, &info, err, sizeof err), 0);
    assert_int_equal(info.n, 10000);
    assert_int_equal(info.x_rank, 2);
    assert_int_equal(info.x_dims[0], 28);
    assert_int_equal(info.x_dims[1], 28);
    data_reader *r = open_ok(&s);
    float *x = malloc(sizeof(float) * 100 * 784);
    int32_t y[100];
    assert_int_equal(data_next(r, x, y), 0);
    assert_int_equal(y[0], first_label);
    for (int k = 0; k < 784; k++) assert_float_equal(x[k], (float)first_px[k], 0);
    free(x);
    data_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_plain_reads_file_order),
        cmocka_unit_test(test_idx_gzip_reads_file_order),
        cmocka_unit_test(test_idx_without_labels_gives_zero_y),
        cmocka_unit_test(test_x_scale_is_the_mul_it_replaces),
        cmocka_unit_test(test_idx_f32_elements_and_rank3_examples),
        cmocka_unit_test(test_csv_with_header_label_last),
        cmocka_unit_test(test_csv_without_header_label_first),
        cmocka_unit_test(test_csv_without_label),
        cmocka_unit_test(test_raw_reads_x_and_y),
        cmocka_unit_test(test_gaussian_is_deterministic_and_standard_normal),
        cmocka_unit_test(test_shuffle_is_a_fresh_permutation_each_epoch),
        cmocka_unit_test(test_epoch_rollover_drops_remainder),
        cmocka_unit_test(test_concurrent_readers_see_each_example_once_per_epoch),
        cmocka_unit_test(test_many_builders_across_epochs_keep_the_sequence),
        cmocka_unit_test(test_seek_reproduces_the_sequence),
        cmocka_unit_test(test_seek_while_read_ahead_is_building),
        cmocka_unit_test(test_close_with_full_ring_and_unread_batches),
        cmocka_unit_test(test_error_missing_file),
        cmocka_unit_test(test_error_wrong_magic),
        cmocka_unit_test(test_error_truncated_images),
        cmocka_unit_test(test_error_truncated_labels),
        cmocka_unit_test(test_error_count_mismatch),
        cmocka_unit_test(test_error_label_out_of_range),
        cmocka_unit_test(test_error_batch_larger_than_n),
        cmocka_unit_test(test_error_csv_ragged_row),
        cmocka_unit_test(test_error_csv_non_numeric),
        cmocka_unit_test(test_error_raw_size_not_multiple),
        cmocka_unit_test(test_error_empty_corrupt_and_cut_files),
        cmocka_unit_test(test_error_csv_empty_and_bad_labels),
        cmocka_unit_test(test_idx_header_promising_a_terabyte_is_refused),
        cmocka_unit_test(test_idx_body_larger_than_one_read_chunk),
        cmocka_unit_test(test_idx_empty_examples_are_refused),
        cmocka_unit_test(test_csv_long_or_nul_field_is_not_a_number),
        cmocka_unit_test(test_csv_underflow_is_a_number_not_a_header),
        cmocka_unit_test(test_csv_header_rule_cannot_be_fooled),
        cmocka_unit_test(test_csv_nonfinite_values_need_the_opt_in),
        cmocka_unit_test(test_csv_numbers_are_decimal),
        cmocka_unit_test(test_csv_quoted_fields),
        cmocka_unit_test(test_non_regular_files_are_refused),
        cmocka_unit_test(test_files_above_the_limits_are_refused),
        cmocka_unit_test(test_gaussian_examples_are_bounded),
        cmocka_unit_test(test_idx_header_counts_must_match_the_file),
        cmocka_unit_test(test_binary_nonfinite_values_need_the_opt_in),
        cmocka_unit_test(test_tail_batch_holds_the_remainder_once),
        cmocka_unit_test(test_fashion_mnist_t10k),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
