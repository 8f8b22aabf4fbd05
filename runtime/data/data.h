/* Data readers: the stateful sources behind `data` declarations.
 *
 * A reader loads a whole data set into memory at open (IDX images stay
 * uint8; they become f32 only when a batch is built), then a read-ahead
 * thread keeps a small ring of prepared batches. data_next pops the next
 * batch in cursor order; any number of threads may call it at once.
 *
 * Epochs: floor(n / (batch * shards)) batches each; the remainder is dropped
 * for that epoch (an evaluation reads it as the epoch's tail batch, see
 * data_seek_tail). With shuffle on, epoch e uses a permutation derived from
 * (seed, e), so a cursor (epoch, pos) names one batch forever: that is what
 * checkpoints store and data_seek restores.
 *
 * Errors: data_probe and data_open write one line (no trailing newline)
 * into err, starting with the file it is about, e.g.
 *   "x.gz: bad magic number 0x00000801, expected 0x00000803 (IDX images)".
 * Ownership: the reader copies everything it needs from the spec; the
 * caller keeps the spec and its paths.
 */
#ifndef GR_RUNTIME_DATA_H
#define GR_RUNTIME_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef enum data_kind {
    DATA_KIND_IDX,
    DATA_KIND_CSV,
    DATA_KIND_RAW,
    DATA_KIND_GAUSSIAN,
    DATA_KIND_TEXT
} data_kind;

typedef struct data_spec {
    data_kind kind;
    const char *path[2]; /* idx: images, labels (labels may be NULL); csv: path[0]; raw: x file, y
                            file (may be NULL) */
    int64_t batch;       /* examples per batch, >= 1 */
    int shuffle;         /* reshuffle each epoch */
    uint64_t seed;       /* shuffle seed (and gaussian values) */
    /* raw: per-example shape of x (dims, rank) and dtypes; x is f32 LE, y is i32 LE */
    int x_rank;
    int64_t x_dims[4];
    /* csv: which column holds the label (-1 = last, -2 = no label); header row auto-detected */
    int label_col;
    /* csv, raw, idx: nan and infinities are values (else an error at open) */
    int nonfinite;
    /* labels must be in [0, n_classes) when n_classes > 0 (checked at open) */
    int64_t n_classes;
    /* gaussian: n examples of shape x_dims, standard normal, generated from seed; no labels */
    int64_t n;
    /* every x value is multiplied by it after conversion to f32 (0 or 1: not scaled) */
    float x_scale;
    /* distributed training: the sequence of batches is that of one reader of
     * batch * shards examples, and this one takes the examples at positions
     * shard, shard + shards, ... of each (0 and 0, or 0 and 1: all) */
    int shard, shards;
    /* text (data_text.c): the files (a directory stands for the text files in it), read
       whole and concatenated; examples are windows of block + 1 characters (or bytes),
       starting every stride, of the first `split` of the text or (val_part) the rest */
    const char *const *paths;
    int n_paths;
    int64_t block, stride;
    double split;
    int val_part;
    int byte_vocab;     /* ids are bytes (256), not the characters present */
    int64_t word_vocab; /* > 0: ids are words, at most this many (<unk> = 0 included) */
    /* text: the part is cut into `batch` contiguous streams of equal length,
       and batch k's row b is stream b's window k (its ids [k * block, k *
       block + block], stride and shuffle unused): row b of batch k + 1
       continues row b of batch k.  An epoch is the windows of one stream;
       the next starts at window 0 of every stream again.  Not with shards. */
    int streams;
} data_spec;

typedef struct data_info {
    int64_t n; /* examples */
    int x_rank;
    int64_t x_dims[4]; /* per example: idx images -> [rows, cols]; csv -> [features]; raw/gaussian
                          -> spec dims */
    int has_y;         /* labels present (y is i32, y_per per example) */
    int64_t y_per;     /* labels per example: 1, or the block of a text window */
    int x_i32;         /* x holds i32 values (text: character ids), not f32 */
    int64_t vocab;     /* text: ids are in [0, vocab) */
} data_info;

typedef struct data_reader data_reader;

/* Reads only headers (cheap; a CSV file is scanned for its line count): fills
 * info. Also rejects batch < 1 and batch > n. On error returns -1 and writes
 * a one-line message naming the file into err. */
int data_probe(const data_spec *s, data_info *info, char *err, size_t errlen);

/* Loads the data into memory, validates everything (truncation, counts of
 * images vs labels, label range, batch <= n) and starts the read-ahead
 * thread. NULL + err on error. */
data_reader *data_open(const data_spec *s, char *err, size_t errlen);

/* Stops and joins the read-ahead thread, wakes any data_next still waiting
 * (it returns -1), waits for them to leave, then frees everything. */
void data_close(data_reader *r);

/* The shape of what data_next hands out (same as data_probe's info). */
void data_reader_info(const data_reader *r, data_info *info);

/* Copies the next batch: x gets batch*prod(x_dims) floats (raw values: IDX
 * pixels are 0..255 as float, not scaled; i32 ids when info.x_i32), y gets
 * batch*y_per int32 labels (y may be NULL; zeros when the data has no
 * labels). Thread-safe: concurrent
 * callers always get different batches; within one epoch no example is
 * handed out twice. Returns 0; -1 only when data_close is already under way. */
int data_next(data_reader *r, float *x, int32_t *y);

/* Zero-copy form of data_next: the next batch stays in the reader's ring,
 * readable at b->x and b->y (y is zeros when the data has no labels), until
 * data_release.  A held batch keeps its ring slot from being refilled, so
 * hold it for one step only; a caller that takes batches from several
 * readers must take them in one fixed order (e.g. by reader index).
 * Returns -1 only when data_close is under way. */
typedef struct data_batch {
    const float *x;
    const int32_t *y;
    void *slot;
} data_batch;
int data_acquire(data_reader *r, data_batch *b);
void data_release(data_reader *r, data_batch *b);

/* The cursor, for checkpoints: (epoch, batches taken within the epoch).
 * data_seek makes the next data_next return exactly what it would have
 * returned at that cursor. Call data_seek only while no data_next is in
 * flight. It returns -1 when pos > batches per epoch. */
void data_cursor(const data_reader *r, uint64_t *epoch, uint64_t *pos);
int data_seek(data_reader *r, uint64_t epoch, uint64_t pos);

/* The tail of an epoch: the examples that its floor(n / (batch * shards))
 * batches leave out, r = n mod (batch * shards) of them, as one more batch
 * of the usual shape whose slots past the r are filled from the start of
 * the epoch's order (they repeat examples).  data_seek_tail makes the next
 * batch epoch's tail (the one after it is (epoch + 1, 0)); call it as
 * data_seek.  data_tail_rows is how many leading rows of this reader's
 * share of the tail are real examples: 0 when r is 0 (then there is no
 * tail) or every real one went to other shards. */
void data_seek_tail(data_reader *r, uint64_t epoch);
int64_t data_tail_rows(const data_reader *r);

/* Text: the vocabulary of the spec's files, the characters in id order as
 * UTF-8, into *chars (malloc'd, the caller frees it); NULL for a byte
 * vocabulary.  -1 with a message as data_probe. */
int data_text_vocab(const data_spec *s, char **chars, char *err, size_t errlen);
/* Text: when path is a directory, calls add(ctx, "PATH/NAME") for each
 * file in it that text() reads (as the reader picks them: regular files,
 * not hidden ones, NAME.dat or NAME.u8 beside NAME), in name order;
 * nothing for a file or a path that cannot be read. */
void data_text_files(const char *path, void (*add)(void *ctx, const char *path), void *ctx);

#endif
