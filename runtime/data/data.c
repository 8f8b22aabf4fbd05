/* The reader: format dispatch, validation, per-epoch shuffling and the
 * read-ahead ring.
 *
 * The ring is an array of slots used in order. A builder claims slot[tail]
 * and the next batch under the lock and fills it outside (FREE -> FILLING
 * -> READY); the read-ahead thread is the usual builder, and a consumer
 * that finds nothing ready builds the next batch itself instead of waiting.
 * Consumers take slot[head] (READY -> READING -> FREE) and read outside the
 * lock too, so batches are handed out strictly in cursor order whoever
 * built them. data_seek bumps a generation number so that a batch built for
 * the old cursor is thrown away, not published. */
#include "data_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DATA_RING_MAX   8
#define DATA_RING_MIN   2
#define DATA_RING_BYTES (INT64_C(64) << 20) /* beyond this, fewer slots */
#define DATA_MAX_BYTES  (INT64_C(1) << 40)

typedef enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_READING } slot_state;

/* A shuffle of 0..n-1 for one epoch.  Builders of that epoch's batches read
 * it unlocked; it is rebuilt for epoch + 2 only when none is left. */
typedef struct data_perm {
    int64_t *idx;
    uint64_t epoch;
    enum { PERM_NONE, PERM_MAKING, PERM_READY } state;
    int users; /* builders reading idx */
} data_perm;

typedef struct data_slot {
    float *x;
    int32_t *y;
    slot_state state;
} data_slot;

struct data_reader {
    data_set ds;
    int64_t batch;
    int64_t shard, shards; /* data_spec's: the positions of a batch * shards batch taken */
    int shuffle;
    uint64_t seed;
    uint64_t per_epoch; /* batches per epoch: floor(n / (batch * shards)) */
    /* Everything below is guarded by mu, except the contents of a slot or a
     * permutation while a builder owns it. */
    data_perm perm[2]; /* epoch e's shuffle is in perm[e & 1]; unused when not shuffling */
    pthread_mutex_t mu;
    pthread_cond_t ready; /* a slot became READY, or stop */
    pthread_cond_t
        space; /* a slot became FREE, a shuffle ready or unused, the cursor moved, or stop */
    pthread_cond_t idle; /* the last consumer left after stop */
    data_slot slots[DATA_RING_MAX];
    int nslots;
    int n_free;              /* slots in state FREE */
    int wake_at;             /* a full ring wakes the thread once this many are FREE */
    int sleeping;            /* the thread waits on space */
    int head, tail;          /* next slot to take / to fill */
    uint64_t p_epoch, p_pos; /* next batch a builder claims */
    uint64_t c_epoch, c_pos; /* next batch a consumer gets */
    uint64_t gen;            /* bumped by data_seek */
    int stop;
    int inflight; /* consumers inside data_next */
    int thread_started;
    pthread_t thread;
};

/* ---- spec checks and format dispatch ---- */

static int64_t spec_shards(const data_spec *s)
{
    return s->shards > 1 ? s->shards : 1;
}

/* Each format's two entry points, by data_kind: probe fills the info from
 * headers (compile time), load fills the set (session open). */
static const struct data_format {
    int (*probe)(const data_spec *s, data_info *info, char *err, size_t errlen);
    int (*load)(const data_spec *s, data_set *ds, char *err, size_t errlen);
} data_formats[] = {
    [DATA_KIND_IDX] = {data_idx_probe, data_idx_load},
    [DATA_KIND_CSV] = {data_csv_probe, data_csv_load},
    [DATA_KIND_RAW] = {data_raw_probe, data_raw_load},
    [DATA_KIND_GAUSSIAN] = {data_gauss_probe, data_gauss_load},
    [DATA_KIND_TEXT] = {data_text_probe, data_text_load},
};

/* s's format, or NULL for a kind that is none (data_check_spec). */
static const struct data_format *data_format_of(const data_spec *s)
{
    return (unsigned)s->kind < sizeof data_formats / sizeof *data_formats ? &data_formats[s->kind]
                                                                          : NULL;
}

static int data_check_spec(const data_spec *s, char *err, size_t errlen)
{
    const char *what = s->kind == DATA_KIND_GAUSSIAN ? "gaussian" : s->path[0];
    if (!data_format_of(s)) {
        data_err(err, errlen, "data: unknown data source kind %d", (int)s->kind);
        return -1;
    }
    if (!what) {
        data_err(err, errlen, "data: no file given for the data source");
        return -1;
    }
    if (s->batch < 1) {
        data_err(err, errlen, "%s: batch %lld must be >= 1", what, (long long)s->batch);
        return -1;
    }
    if (s->shard < 0 || s->shard >= spec_shards(s)) {
        data_err(err, errlen, "%s: shard %d is outside [0, %d)", what, s->shard, s->shards);
        return -1;
    }
    return 0;
}

/* Sets what a format leaves 0 to its default: one label per example. */
static int info_defaults(data_info *info)
{
    if (info->y_per < 1) info->y_per = 1;
    return 0;
}

static int data_check_batch(const data_spec *s, int64_t n, char *err, size_t errlen)
{
    int64_t p = spec_shards(s);
    const char *what = s->kind == DATA_KIND_GAUSSIAN ? "gaussian" : s->path[0];
    if (n > DATA_MAX_EXAMPLES) {
        data_err(err, errlen, "%s: %lld examples, above the limit of %lld per data source", what,
                 (long long)n, (long long)DATA_MAX_EXAMPLES);
        return -1;
    }
    if (s->batch <= n / p) return 0;
    if (p == 1)
        data_err(err, errlen, "%s: batch %lld is larger than the %lld examples in the data set",
                 what, (long long)s->batch, (long long)n);
    else
        data_err(err, errlen,
                 "%s: batch %lld on each of %lld processes is more than the %lld examples in the "
                 "data set",
                 what, (long long)s->batch, (long long)p, (long long)n);
    return -1;
}

int data_probe(const data_spec *s, data_info *info, char *err, size_t errlen)
{
    if (data_check_spec(s, err, errlen)) return -1;
    if (data_format_of(s)->probe(s, info, err, errlen)) return -1;
    info_defaults(info);
    return data_check_batch(s, info->n, err, errlen);
}

static int data_check_labels(const data_spec *s, const data_set *ds, char *err, size_t errlen)
{
    if (!ds->y || s->n_classes <= 0) return 0;
    for (int64_t i = 0; i < ds->info.n; i++) {
        if (ds->y[i] < 0 || ds->y[i] >= s->n_classes) {
            data_err(err, errlen, "%s: label %d of example %lld is outside [0, %lld)", ds->y_path,
                     (int)ds->y[i], (long long)i, (long long)s->n_classes);
            return -1;
        }
    }
    return 0;
}

/* ---- shuffling and batch building ---- */

static void make_perm(int64_t *perm, int64_t n, uint64_t seed, uint64_t epoch)
{
    data_rng g;
    data_rng_seed(&g, data_mix(seed, epoch));
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)data_rng_below(&g, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Called with mu held: returns epoch's shuffle, made by this caller (with
 * mu released meanwhile) or by another, and counts the caller as a user. */
static const int64_t *perm_take(data_reader *r, uint64_t epoch)
{
    data_perm *p = &r->perm[epoch & 1];
    for (;;) {
        if (p->epoch == epoch && p->state == PERM_READY) break;
        if (p->state != PERM_MAKING && p->users == 0) {
            p->state = PERM_MAKING;
            p->epoch = epoch;
            pthread_mutex_unlock(&r->mu);
            make_perm(p->idx, r->ds.info.n, r->seed, epoch);
            pthread_mutex_lock(&r->mu);
            p->state = PERM_READY;
            pthread_cond_broadcast(&r->space);
            break;
        }
        pthread_cond_wait(&r->space, &r->mu); /* made by another, or still in use for epoch - 2 */
    }
    p->users++;
    return p->idx;
}

static void perm_drop(data_reader *r, uint64_t epoch)
{
    if (--r->perm[epoch & 1].users == 0) pthread_cond_broadcast(&r->space);
}

/* The example at position at of an epoch's order; positions past n are
 * those of a tail batch (pos == per_epoch), which starts the order again. */
static int64_t order_at(const data_reader *r, const int64_t *perm, int64_t at)
{
    if (at >= r->ds.info.n) at -= r->ds.info.n;
    return perm ? perm[at] : at;
}

static void build_batch(const data_reader *r, data_slot *slot, const int64_t *perm, uint64_t pos)
{
    int64_t ex = r->ds.ex_elems, p = r->shards, first = (int64_t)pos * r->batch * p + r->shard;
    for (int64_t i = 0; i < r->batch; i++) {
        int64_t at = first + i * p, idx = order_at(r, perm, at);
        if (perm && i + 2 < r->batch) data_set_prefetch(&r->ds, order_at(r, perm, at + 2 * p));
        data_set_example(&r->ds, idx, slot->x + i * ex);
        data_set_labels(&r->ds, idx, slot->y + i * r->ds.info.y_per);
    }
}

/* The batch after (epoch, pos); after the tail (pos == per_epoch) too. */
static void reader_advance(const data_reader *r, uint64_t *epoch, uint64_t *pos)
{
    if (++*pos >= r->per_epoch) {
        ++*epoch;
        *pos = 0;
    }
}

/* Called with mu held and slots[tail] FREE; returns with mu held.  Claims
 * the next batch and its slot, builds it with mu released, and publishes it.
 * The read-ahead thread and any consumer that finds nothing ready build
 * side by side; batches still come out in claim order, so who built one
 * never changes the sequence. */
static void fill_one(data_reader *r)
{
    data_slot *slot = &r->slots[r->tail];
    uint64_t epoch = r->p_epoch, pos = r->p_pos, gen = r->gen;
    slot->state = SLOT_FILLING;
    r->n_free--;
    r->tail = (r->tail + 1) % r->nslots;
    reader_advance(r, &r->p_epoch, &r->p_pos);
    const int64_t *perm = r->shuffle ? perm_take(r, epoch) : NULL;
    pthread_mutex_unlock(&r->mu);
    build_batch(r, slot, perm, pos);
    pthread_mutex_lock(&r->mu);
    if (perm) perm_drop(r, epoch);
    if (gen != r->gen) {
        slot->state = SLOT_FREE; /* built for a cursor data_seek has since replaced */
        r->n_free++;
        pthread_cond_broadcast(&r->space);
        return;
    }
    slot->state = SLOT_READY;
    pthread_cond_broadcast(&r->ready);
}

/* Fills the ring, then sleeps until half of it is free again: one wake-up
 * per nslots/2 batches rather than per batch, so the thread runs in bursts
 * the scheduler can move to an idle core instead of waking next to the
 * executor it serves every step. */
static void *reader_main(void *arg)
{
    data_reader *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->slots[r->tail].state == SLOT_FREE) fill_one(r);
        r->sleeping = 1;
        while (!r->stop && (r->n_free < r->wake_at || r->slots[r->tail].state != SLOT_FREE))
            pthread_cond_wait(&r->space, &r->mu);
        r->sleeping = 0;
        if (r->stop) break;
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- open / close ---- */

static int reader_alloc(data_reader *r, char *err, size_t errlen)
{
    int64_t floats, bytes;
    if (!data_mul_ok(r->batch, r->ds.ex_elems, DATA_MAX_BYTES, &floats) ||
        !data_mul_ok(floats, 4, DATA_MAX_BYTES, &bytes)) {
        data_err(err, errlen, "%s: one batch would be implausibly large", r->ds.x_path);
        return -1;
    }
    int64_t fit = bytes ? DATA_RING_BYTES / bytes : DATA_RING_MAX;
    r->nslots = fit > DATA_RING_MAX   ? DATA_RING_MAX
                : fit < DATA_RING_MIN ? DATA_RING_MIN
                                      : (int)fit;
    r->n_free = r->nslots;
    r->wake_at = r->nslots / 2;
    for (int k = 0; k < r->nslots; k++) {
        r->slots[k].x = malloc(bytes ? (size_t)bytes : 1);
        r->slots[k].y = malloc((size_t)(r->batch * r->ds.info.y_per) * sizeof(int32_t));
        if (!r->slots[k].x || !r->slots[k].y) goto oom;
    }
    for (int k = 0; k < 2 && r->shuffle; k++)
        if (!(r->perm[k].idx = malloc((size_t)r->ds.info.n * sizeof(int64_t)))) goto oom;
    return 0;
oom:
    data_err(err, errlen, "%s: out of memory for the batch buffers", r->ds.x_path);
    return -1;
}

static void reader_free(data_reader *r)
{
    for (int k = 0; k < DATA_RING_MAX; k++) {
        free(r->slots[k].x);
        free(r->slots[k].y);
    }
    free(r->perm[0].idx);
    free(r->perm[1].idx);
    data_set_free(&r->ds);
    pthread_cond_destroy(&r->ready);
    pthread_cond_destroy(&r->space);
    pthread_cond_destroy(&r->idle);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static data_reader *reader_new(const data_spec *s)
{
    data_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->batch = s->batch;
    r->shards = spec_shards(s);
    r->shard = s->shard;
    r->shuffle = s->shuffle != 0;
    r->seed = s->seed;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->ready, NULL);
    pthread_cond_init(&r->space, NULL);
    pthread_cond_init(&r->idle, NULL);
    return r;
}

data_reader *data_open(const data_spec *s, char *err, size_t errlen)
{
    if (data_check_spec(s, err, errlen)) return NULL;
    data_reader *r = reader_new(s);
    if (!r) {
        data_err(err, errlen, "data: out of memory");
        return NULL;
    }
    if (data_format_of(s)->load(s, &r->ds, err, errlen) || info_defaults(&r->ds.info) ||
        data_check_labels(s, &r->ds, err, errlen) ||
        data_check_batch(s, r->ds.info.n, err, errlen) || reader_alloc(r, err, errlen))
        goto fail;
    r->ds.scale = s->x_scale == 1.0f ? 0.0f : s->x_scale;
    r->per_epoch = (uint64_t)(r->ds.info.n / (r->batch * r->shards));
    if (pthread_create(&r->thread, NULL, reader_main, r) != 0) {
        data_err(err, errlen, "%s: cannot start the read-ahead thread", r->ds.x_path);
        goto fail;
    }
    r->thread_started = 1;
    return r;
fail:
    reader_free(r);
    return NULL;
}

void data_close(data_reader *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->ready);
    pthread_cond_broadcast(&r->space);
    while (r->inflight > 0) pthread_cond_wait(&r->idle, &r->mu);
    pthread_mutex_unlock(&r->mu);
    if (r->thread_started) pthread_join(r->thread, NULL);
    reader_free(r);
}

void data_reader_info(const data_reader *r, data_info *info)
{
    *info = r->ds.info;
}

/* ---- consumers ---- */

static void reader_leave(data_reader *r)
{
    if (--r->inflight == 0 && r->stop) pthread_cond_broadcast(&r->idle);
    pthread_mutex_unlock(&r->mu);
}

int data_acquire(data_reader *r, data_batch *b)
{
    pthread_mutex_lock(&r->mu);
    r->inflight++;
    /* Nothing ready: build the next batch here rather than wait, when its
     * slot is free (the read-ahead thread is behind, or not yet scheduled). */
    while (!r->stop && r->slots[r->head].state != SLOT_READY) {
        if (r->slots[r->tail].state == SLOT_FREE)
            fill_one(r);
        else
            pthread_cond_wait(&r->ready, &r->mu);
    }
    if (r->stop) {
        reader_leave(r);
        return -1;
    }
    data_slot *slot = &r->slots[r->head];
    slot->state = SLOT_READING;
    r->head = (r->head + 1) % r->nslots;
    reader_advance(r, &r->c_epoch, &r->c_pos);
    pthread_mutex_unlock(&r->mu);
    *b = (data_batch){slot->x, slot->y, slot};
    return 0;
}

void data_release(data_reader *r, data_batch *b)
{
    pthread_mutex_lock(&r->mu);
    ((data_slot *)b->slot)->state = SLOT_FREE;
    if (++r->n_free >= r->wake_at && r->sleeping) pthread_cond_signal(&r->space);
    reader_leave(r);
}

int data_next(data_reader *r, float *x, int32_t *y)
{
    data_batch b;
    if (data_acquire(r, &b) < 0) return -1;
    memcpy(x, b.x, (size_t)(r->batch * r->ds.ex_elems) * sizeof(float));
    if (y) memcpy(y, b.y, (size_t)(r->batch * r->ds.info.y_per) * sizeof(int32_t));
    data_release(r, &b);
    return 0;
}

void data_cursor(const data_reader *r, uint64_t *epoch, uint64_t *pos)
{
    data_reader *m = (data_reader *)r; /* locking does not change the logical state */
    pthread_mutex_lock(&m->mu);
    *epoch = r->c_epoch;
    *pos = r->c_pos;
    pthread_mutex_unlock(&m->mu);
}

/* Moves both cursors to (epoch, pos); pos may be per_epoch, the tail. */
static void reader_move(data_reader *r, uint64_t epoch, uint64_t pos)
{
    pthread_mutex_lock(&r->mu);
    r->gen++;
    /* Prepared batches belong to the old cursor. A FILLING slot is left to
     * its builder, which sees the new generation and frees it. */
    for (int k = 0; k < r->nslots; k++)
        if (r->slots[k].state == SLOT_READY) {
            r->slots[k].state = SLOT_FREE;
            r->n_free++;
        }
    r->head = r->tail;
    r->p_epoch = r->c_epoch = epoch;
    r->p_pos = r->c_pos = pos;
    pthread_cond_broadcast(&r->space);
    pthread_mutex_unlock(&r->mu);
}

int data_seek(data_reader *r, uint64_t epoch, uint64_t pos)
{
    if (pos > r->per_epoch) return -1;
    if (pos == r->per_epoch) {
        epoch++;
        pos = 0;
    }
    reader_move(r, epoch, pos);
    return 0;
}

void data_seek_tail(data_reader *r, uint64_t epoch)
{
    reader_move(r, epoch, r->per_epoch);
}

int64_t data_tail_rows(const data_reader *r)
{
    int64_t rem = r->ds.info.n - (int64_t)r->per_epoch * r->batch * r->shards;
    return rem > r->shard ? (rem - r->shard + r->shards - 1) / r->shards : 0;
}
