/* graphrun.h - the one public header of libgraphrun.
 *
 * graphrun compiles a model written in the .graph language into an
 * executable dataflow graph and runs its targets:
 *
 *     gr_status *st = gr_status_new();
 *     gr_program *prog;
 *     gr_session *s;
 *     if (gr_compile_file("mlp.graph", NULL, &prog, st) != GR_OK ||
 *         gr_session_new(prog, NULL, &s, st) != GR_OK) {
 *         fprintf(stderr, "%s", gr_status_message(st));   // file:line:col: error: ...
 *         return 1;
 *     }
 *     float loss;
 *     gr_fetch f = {"loss", &loss, sizeof loss};
 *     for (int i = 0; i < 1000; i++) gr_run(s, "train", NULL, 0, &f, 1, st);
 *     double acc;
 *     gr_eval(s, "accuracy", &acc, st);
 *     gr_session_free(s);
 *     gr_program_free(prog);
 *     gr_status_free(st);
 *
 * Rules for the whole header:
 *  - Ownership: every gr_*_new / gr_compile_* result, and every gr_tensor
 *    the library hands out, is owned by the caller and released with the
 *    matching *_free.  A session keeps a reference to
 *    its program: free sessions before their program.  Strings returned by
 *    the library live as long as the object they came from.  Buffers passed
 *    in (feeds, fetches, paths) stay the caller's; the library copies what
 *    it keeps.
 *  - Errors: functions return a gr_code; GR_OK is 0.  When a gr_status is
 *    passed (it may be NULL), it receives the code, a message and, for
 *    errors in a .graph file, the location.  Messages for .graph errors are
 *    complete diagnostics: "FILE:LINE:COL: error: ...", the source line and
 *    a caret.
 *  - Threads: gr_run and gr_eval may be called on one session from any
 *    number of threads at once; gr_session_save and the gr_variable_*
 *    calls may run beside them (they wait for the steps in flight and copy
 *    between whole steps).  Everything else on a given object must not
 *    race with other calls on that object.
 *  - Arguments: a pointer argument may be NULL only where its comment says
 *    so (st everywhere; outputs such as gr_status_location's, chars and
 *    size of gr_program_vocab; a fetch's data, asking for a view; *_free of
 *    NULL does nothing; accessors of a NULL object answer 0 or NULL).  Any
 *    other NULL, a negative count, an array that is NULL with a count
 *    above 0, a NULL name in a feed or fetch and a feed given twice are
 *    refused with GR_ERR_ARG and a message naming the function and the
 *    argument ("gr_run: feeds[1].name is NULL"); nothing changes.
 *  - Memory: running out of memory is GR_ERR_NOMEM for every buffer of
 *    data (variables, activation arenas, data sets, tensors, checkpoint
 *    files) and anywhere while compiling or planning a target.  Memory a
 *    call had taken when it ran out may stay allocated.
 *  - The library never calls exit() and never prints; internal bugs (a
 *    broken invariant), and running out of memory in the tables a session
 *    and its executors keep (a few pointers per graph node, made by
 *    gr_session_new and a target's first gr_run), call the abort hook
 *    (gr_set_abort_hook), which by default prints the message to stderr
 *    and calls abort().
 */
#ifndef GRAPHRUN_H
#define GRAPHRUN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version: this header is its one source (CMakeLists.txt reads these
 * three lines; libgraphrun's soname is libgraphrun.so.MAJOR, docs/api.md).
 * gr_version() says which library a program runs against; these say which
 * header it was compiled with. */
#define GR_VERSION_MAJOR    0
#define GR_VERSION_MINOR    1
#define GR_VERSION_PATCH    0
#define GR_VERSION_STR2_(x) #x
#define GR_VERSION_STR_(x)  GR_VERSION_STR2_(x)
#define GR_VERSION_STRING                                                                          \
    GR_VERSION_STR_(GR_VERSION_MAJOR)                                                              \
    "." GR_VERSION_STR_(GR_VERSION_MINOR) "." GR_VERSION_STR_(GR_VERSION_PATCH)
/* One number to compare: 10000 * MAJOR + 100 * MINOR + PATCH. */
#define GR_VERSION_NUMBER (GR_VERSION_MAJOR * 10000 + GR_VERSION_MINOR * 100 + GR_VERSION_PATCH)

typedef enum gr_code {
    GR_OK = 0,
    GR_ERR_SYNTAX,  /* the .graph file does not parse */
    GR_ERR_COMPILE, /* names, shapes, dtypes, reuse, devices, --set */
    GR_ERR_IO,      /* a file could not be read or written */
    GR_ERR_DATA,    /* a data file is malformed, or a label or id (read or fed) is out of range */
    GR_ERR_ARG,     /* API misuse: bad argument, unknown target, wrong feed */
    GR_ERR_NUMERIC, /* NaN or Inf found with check_numerics */
    GR_ERR_NOMEM,
    GR_ERR_INTERNAL,
    GR_ERR_CANCELLED /* gr_eval stopped by gr_eval_cancel */
} gr_code;

typedef struct gr_status gr_status;
typedef struct gr_program gr_program;
typedef struct gr_session gr_session;
typedef struct gr_tensor gr_tensor;

/* ---- status ---- */
gr_status *gr_status_new(void);
void gr_status_free(gr_status *st);
gr_code gr_status_code(const gr_status *st);
/* "" when the code is GR_OK. */
const char *gr_status_message(const gr_status *st);
/* Location of the first error in a .graph file; 0 when there is none. */
int gr_status_location(const gr_status *st, const char **file, int *line, int *col);
const char *gr_code_name(gr_code c);

/* ---- tensors ----
 * A gr_tensor is a dtype, a shape and its bytes (row-major, zeroed when
 * made).  Its data and size are what a gr_feed or gr_fetch takes:
 *     gr_tensor *z;
 *     gr_program_tensor(prog, "z", &z, st);          // shaped like input z
 *     gr_feed feed = {"z", gr_tensor_data(z), gr_tensor_bytes(z)};  */
typedef enum gr_dtype { GR_F32 = 0, GR_I32 = 1 } gr_dtype;
#define GR_MAX_RANK 8
/* NULL for a bad dtype or shape (rank over GR_MAX_RANK, a negative
 * dimension, over 2^40 bytes) or when memory runs out. */
gr_tensor *gr_tensor_new(gr_dtype dtype, int rank, const int64_t *dims);
void gr_tensor_free(gr_tensor *t);
/* Each accessor answers 0 (or NULL) for a NULL tensor. */
gr_dtype gr_tensor_dtype(const gr_tensor *t);
int gr_tensor_rank(const gr_tensor *t);
int64_t gr_tensor_dim(const gr_tensor *t, int axis); /* 0 outside [0, rank) */
int64_t gr_tensor_numel(const gr_tensor *t);
size_t gr_tensor_bytes(const gr_tensor *t);
void *gr_tensor_data(gr_tensor *t);

/* ---- programs ---- */
typedef struct gr_param {
    const char *name;
    const char *value; /* text, as in --set name=value */
} gr_param;

/* Training over several processes (Open MPI; docs/distributed.md).  SYNC:
 * every step averages the gradients over the processes (allreduce) before
 * updating, so P processes of batch B train as one of batch P*B.  ASYNC:
 * Hogwild! across processes: rank 0 holds the variables, every process
 * reads them before its step and adds its step's change to them after it,
 * without waiting for the others (or, with sync_every K, averages them
 * every K steps). */
typedef enum gr_distributed { GR_DIST_NONE = 0, GR_DIST_SYNC, GR_DIST_ASYNC } gr_distributed;

typedef struct gr_compile_options {
    const gr_param *params;     /* n_params of them, each name and value non-NULL */
    int n_params;               /* >= 0; params may be NULL only when it is 0 */
    int soft_placement;         /* nodes on missing devices, or whose op the device lacks,
                                   move to cpu:0, with a warning */
    unsigned passes_off;        /* GR_PASS_* bits to switch passes off (tests, debugging) */
    const char *devices;        /* the devices to compile for, e.g. "cpu:0-1,gpu:0" ("sim:N":
                                   simulated GPUs for gpu:N; indices 0 to 15); NULL: this
                                   machine's */
    gr_distributed distributed; /* a program for distributed training: its sessions need
                                   MPI (gr_session_options.mpi_comm) */
    int cpu_as_gpu;             /* every node and variable that would run on cpu:N runs on
                                   gpu:(N mod GPUs) instead, data sources excepted (they stay
                                   on the host); no effect on a machine without GPUs.  How
                                   the CPU tests run on a GPU (--cpu-as-gpu) */
} gr_compile_options;

enum { GR_PASS_CSE = 1, GR_PASS_FOLD = 2, GR_PASS_FUSE = 4 };

/* opt may be NULL; bad n_params, params or distributed: GR_ERR_ARG naming the field.
 * gr_compile_string (and gr_format_string) read len bytes of text, at most
 * 64 MiB as for a file (more: GR_ERR_ARG). */
gr_code gr_compile_file(const char *path, const gr_compile_options *opt, gr_program **out,
                        gr_status *st);
gr_code gr_compile_string(const char *name, const char *text, size_t len,
                          const gr_compile_options *opt, gr_program **out, gr_status *st);
void gr_program_free(gr_program *p);
/* Writes the canonical form of a .graph file (what `graphrun fmt` prints,
 * comments included; docs/language.md, "Canonical form").  Only syntax is
 * checked; nothing is written when the file has errors. */
gr_code gr_format_file(const char *path, FILE *out, gr_status *st);
/* The same for text in memory; name is the file name errors show. */
gr_code gr_format_string(const char *name, const char *text, size_t len, FILE *out, gr_status *st);
/* Rewrites path in canonical form through a gr_output ("output files"
 * below: a temporary file next to the target, renamed over it; a symbolic
 * link is followed and stays a link), keeping its permission bits.  The
 * file is untouched when it is canonical already, when it has errors, and
 * when it is read-only or not a regular file (errors, found before it is
 * read).  changed (may be NULL): 1 when it was rewritten. */
gr_code gr_format_in_place(const char *path, int *changed, gr_status *st);
/* Warnings from compilation (soft placement...), as diagnostics text. */
const char *gr_program_warnings(const gr_program *p);
/* The target made by the last `.minimize()`, or NULL. */
const char *gr_program_default_target(const gr_program *p);
/* What the CLI needs to report on a target. */
typedef struct gr_target_info {
    const char *loss; /* for a minimize target: the name of its loss ("train/loss"), else NULL */
    const char *lr;   /* for a minimize target: its learning rate ("train/lr"), else NULL */
    int64_t batch;    /* examples per run: the batch of the first data source it reads, or 0 */
    int is_train;
    int is_scalar; /* one f32 value: can be evaluated with gr_eval */
} gr_target_info;
gr_code gr_target_info_get(const gr_program *p, const char *target, gr_target_info *info,
                           gr_status *st);
/* A new zeroed tensor with the dtype and shape of the program's input,
 * variable or named tensor `name`: how an embedder learns a shape and gets
 * a buffer of the right size for a feed or a fetch. */
gr_code gr_program_tensor(const gr_program *p, const char *name, gr_tensor **out, gr_status *st);
/* The program's variables (weights, optimizer slots, counters) by full
 * name, k in [0, count); NULL outside. */
int gr_program_variable_count(const gr_program *p);
const char *gr_program_variable_name(const gr_program *p, int k);
/* The vocabulary of text data source `data` (NULL: the first text source),
 * as sampling needs it to decode ids: its size (ids are in [0, size)) and,
 * for a character vocabulary, the characters in id order as UTF-8 (id k is
 * the k-th character; no NUL), which lives as long as the program; *chars
 * is NULL for a byte vocabulary (vocab="bytes": id k is byte k, size 256);
 * for a word vocabulary (vocab="words") it is the words in id order, one a
 * line ("<unk>" first, id 0).  Either output may be NULL.  Checkpoints store it too
 * (docs/checkpoints.md). */
gr_code gr_program_vocab(const gr_program *p, const char *data, const char **chars, int64_t *size,
                         gr_status *st);
/* Writes a dump: "ast", "ir", "plan" (for target, or the default target)
 * or "dot" (Graphviz). */
gr_code gr_program_emit(const gr_program *p, const char *what, const char *target, FILE *out,
                        gr_status *st);
/* The files the program reads, k in [0, count): the .graph file (when it
 * was compiled from a file; the language has no include statement) and
 * each data file, as the readers open it (resolved against the .graph
 * file's folder, then /usr/share/datasets), each once; a folder that
 * text() reads is followed by the files in it that it reads ("corpus",
 * "corpus/a.txt", ...).  A tool can compare them with its outputs before
 * it writes any (the CLI refuses `--log model.graph`, and any output
 * inside such a folder).  NULL outside. */
int gr_program_file_count(const gr_program *p);
const char *gr_program_file(const gr_program *p, int k);

/* ---- sessions ---- */
typedef struct gr_session_options {
    int threads;        /* total thread budget, in [0, 1024]; 0 = number of cores */
    uint64_t seed;      /* variable initialisation, shuffling, dropout */
    int check_numerics; /* stop at the first NaN/Inf, naming the op and line */
    int locking;        /* every variable update takes that variable's lock, as if
                           each optimizer said locking=true (default: Hogwild!) */
    int executors;      /* executors expected to run at once, in [0, 1024]: each gets
                           threads / executors intra-op threads (0: 1) */
    int no_step_graphs; /* on a GPU, enqueue each step's calls one by one instead of
                           replaying them as a recorded step graph (CUDA graphs) */
    /* A program compiled with .distributed: the processes it trains over, as a
     * pointer to an MPI_Comm (NULL: MPI_COMM_WORLD).  MPI must be initialised
     * (MPI_THREAD_SERIALIZED at least) before gr_session_new and finalised
     * after gr_session_free; every process of the communicator makes its
     * session, runs the same train target the same number of times and calls
     * gr_eval, gr_session_save and gr_session_restore at the same points,
     * and frees its session after the same calls.  A process that leaves
     * this schedule (frees its session early, makes another collective) makes
     * the others' waiting call fail, naming it; a wait that lasts longer than
     * GR_DIST_TIMEOUT seconds (environment; default 600) fails too.  After
     * any failed call, end the job (MPI_Abort), as the CLI does: the other
     * processes may still be waiting inside MPI. */
    const void *mpi_comm;
    int sync_every; /* GR_DIST_ASYNC: average the variables every K steps instead of
                       sharing them through rank 0 at every step (0); K >= 0 */
    int backup;     /* GR_DIST_SYNC, B backup workers (0 <= B < processes): each step
                       rank 0 averages the first P - B gradients to arrive and the
                       others take its variables after their step (0: every one) */
    /* a folder (made if missing) for a TensorBoard event file, which
       gr_session_scalar writes; NULL: none */
    const char *tensorboard_dir;
    int profile; /* time every kernel call (gr_session_profile); CPU partitions only */
    /* the staleness-aware learning rate (Zhang et al. 2016) for concurrent
       executors: each update's learning rate is scaled by 1 / max(1, s), s
       the updates of its variable that other steps made since its step
       began (gr_session_staleness); an update of staleness 0 is unscaled.
       GR_DIST_ASYNC through rank 0 (sync_every 0): each rank's change is
       scaled by the factor of its staleness across the ranks; refused in
       the other distributed modes */
    int stale_lr;
    /* GR_DIST_ASYNC through rank 0 (sync_every 0), bounded staleness: with
       bounded = 1, a rank waits before a step while it is more than
       max_staleness steps ahead of the slowest rank still training (one
       that freed its session, or waits in a collective, stops counting);
       a wait longer than GR_DIST_TIMEOUT fails, naming the rank and its
       step.  Refused in the other distributed modes. */
    int bounded;
    int max_staleness; /* S >= 0 */
} gr_session_options;

/* opt may be NULL (all defaults); a field outside its range is refused
 * with GR_ERR_ARG and a message naming it. */
gr_code gr_session_new(const gr_program *p, const gr_session_options *opt, gr_session **out,
                       gr_status *st);
void gr_session_free(gr_session *s);

typedef struct gr_feed {
    const char *name; /* an `input` declared in the program */
    const void *data;
    size_t bytes; /* must equal the input's size */
} gr_feed;

typedef struct gr_fetch {
    const char *name; /* any named tensor of the program (a group: its first member) */
    void *data;       /* the value is copied here; NULL asks for a view */
    size_t bytes;     /* must equal the tensor's size (any value for a view) */
    const void *view; /* set when data is NULL: the tensor in place, no copy.
                         It stays valid until this thread's next gr_run,
                         gr_prepare or gr_eval on the session, or
                         gr_session_free. */
} gr_fetch;

/* Runs `target` once (one step for a train target: it takes the next batch
 * of each data source it reads).  Thread-safe. */
gr_code gr_run(gr_session *s, const char *target, const gr_feed *feeds, int n_feeds,
               gr_fetch *fetches, int n_fetches, gr_status *st);
/* Optional: builds the plan for (target, fetch names), opens its data
 * sources and creates one executor now, so the first gr_run with the same
 * target and fetch names does no setup work. */
gr_code gr_prepare(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                   gr_status *st);
/* Evaluates a scalar target over one full pass of its data sources, from
 * their start, and returns the mean (e.g. test-set accuracy), every
 * example counted once.  When the batch does not divide the data set, the
 * last batch is read padded with examples from the start and only its
 * real examples are counted: the target must then be a sum over the batch
 * of a value per example, every position weighted alike (mean(argmax(...)
 * == y), mean(softmax_xent(...)), mse(...), multiples and sums of such),
 * which gr_eval checks from the graph; another target is refused with
 * GR_ERR_ARG, naming why and a batch that divides the data (docs/api.md).
 * A group target (group(loss, assign(state, ...))) is evaluated by its
 * first member, its assigns run after each batch: the variables they
 * write start the pass at their initial values and get their own values
 * back after it, so a recurrent state is carried across the pass and
 * nothing else sees it (docs/language.md, "State"). */
gr_code gr_eval(gr_session *s, const char *target, double *value, gr_status *st);
/* Makes the gr_eval calls in progress on s, and every later one, stop
 * before their next batch and fail with GR_ERR_CANCELLED (the data
 * cursors as they were, no value): a long evaluation need not run to its
 * end after Ctrl-C.  It only sets a flag, so a signal handler may call it
 * (the CLI does, on SIGINT and SIGTERM).  Nothing else changes: gr_run,
 * saves and restores go on.  In a distributed session the other processes'
 * evaluation then fails (end the job).  NULL: nothing. */
void gr_eval_cancel(gr_session *s);
/* Whether gr_eval can evaluate target, without evaluating it: GR_OK, or
 * the error gr_eval would give (not a scalar, a last partial batch it
 * cannot count, sources that do not pair up), so a program can learn it
 * before hours of training rather than after.  Opens the target's data. */
gr_code gr_eval_check(gr_session *s, const char *target, gr_status *st);

/* Variables, by full scoped name ("model/fc1/w"): read or write exactly
 * the variable's size, or get a copy as a new tensor with its shape. */
gr_code gr_variable_read(gr_session *s, const char *name, void *data, size_t bytes, gr_status *st);
gr_code gr_variable_get(gr_session *s, const char *name, gr_tensor **out, gr_status *st);
gr_code gr_variable_write(gr_session *s, const char *name, const void *data, size_t bytes,
                          gr_status *st);

/* ---- TensorBoard (see docs/curves.md) ----
 * Appends scalar `tag` = value at `step` (step < 0: gr_session_step) to
 * the session's event file, which gr_session_new made in tensorboard_dir:
 *     gr_session_options o = {.tensorboard_dir = "runs/mlp-1"};
 *     ...
 *     gr_session_scalar(s, "train/loss", -1, loss, st);
 * `tensorboard --logdir runs` then shows one curve per tag, one run per
 * folder.  Thread-safe.  Each tag's steps only increase: a value at a step
 * not above the tag's last one is dropped (GR_OK), so threads reporting out
 * of order never fold a curve back.  Values are buffered and written every
 * few seconds and at gr_session_free (a killed process leaves what it
 * wrote, whole records but for a write the kill cut short, which readers
 * skip); GR_ERR_IO when a write fails, GR_ERR_ARG when the session has no
 * tensorboard_dir. */
gr_code gr_session_scalar(gr_session *s, const char *tag, int64_t step, double value,
                          gr_status *st);
/* Writes the values gr_session_scalar buffered and syncs the file to disk:
 * call it before gr_session_free to learn whether the last ones reached it
 * (gr_session_free writes them too, but cannot report a failure).
 * GR_ERR_IO with the path and the reason; GR_OK for a session without a
 * tensorboard_dir. */
gr_code gr_session_scalar_flush(gr_session *s, gr_status *st);

/* ---- checkpoints (safetensors; see docs/checkpoints.md) ----
 * A save holds every variable (weights, optimizer slots, step counters),
 * the training step and each data source's cursor.  It may run while other
 * threads call gr_run: it copies a consistent snapshot between runs, then
 * writes it through a gr_output ("output files" below): path must be a
 * regular file, a symbolic link to one, or new; a temp file is renamed over
 * it, so path is never partial, and any write error fails the save with
 * the old file untouched.
 * A restore checks the whole file against the program (names, dtypes,
 * shapes, sizes) before it changes anything: on error the session is as it
 * was and the message names the file and the tensor. */
typedef struct gr_restore_options {
    int weights_only;  /* load the model's variables only (weights, frozen ones, running
                          statistics, averages); optimizer slots and counters keep their
                          init, the step and data cursors are not restored */
    int allow_missing; /* variables absent from the file keep their init values */
} gr_restore_options;
gr_code gr_session_save(gr_session *s, const char *path, gr_status *st);
/* opt may be NULL (full restore, nothing missing). */
gr_code gr_session_restore(gr_session *s, const char *path, const gr_restore_options *opt,
                           gr_status *st);
/* The number of training steps (gr_run calls on a .minimize() target) the
 * session has done, including those restored from a checkpoint.  At
 * GR_MAX_STEPS a further train run is refused (GR_ERR_ARG), and a restore
 * refuses a checkpoint that claims more. */
uint64_t gr_session_step(const gr_session *s);
/* 2^53: every step count is exact as a double (JSON logs, TensorBoard,
 * steps/s), and a step plus any step count stays far from int64 overflow. */
#define GR_MAX_STEPS (UINT64_C(1) << 53)
/* A distributed session's rank and number of processes (0 and 1 for any
 * other session), and the seconds this process has spent communicating
 * (allreduce, reading and updating shared variables).  Any may be NULL. */
void gr_session_dist_info(const gr_session *s, int *rank, int *size, double *comm_secs);
/* Distributed sessions: checks that every process runs with the same
 * `value` of `what` (an option of the embedding program, as text), e.g.
 *     gr_session_dist_agree(s, "--steps", "200", st);
 * Collective: every process calls it with the same `what`s in the same
 * order (what and value: at most 4 KiB together).  When a process's value
 * differs from rank 0's, every process gets GR_ERR_ARG and the same
 * message, naming the first such rank and both values:
 *     distributed: rank 1: --steps 200 differs from rank 0's --steps 100; ...
 * so all of them can stop cleanly (gr_session_free, MPI_Finalize).  Any
 * other failure of a distributed call (a process that left, a timeout:
 * GR_ERR_IO) is this process's alone: end the job with MPI_Abort.
 * gr_session_new compares its own options the same way, named as the
 * CLI's flags: --distributed, --seed, --sync-every, --locking and
 * --check-numerics, then the compiled graphs and the initial variables: a
 * difference fails it on every process with GR_ERR_ARG and a message
 * starting "distributed: rank R" (its other failures are the process's
 * own).  GR_OK at once for a session that is not distributed. */
gr_code gr_session_dist_agree(gr_session *s, const char *what, const char *value, gr_status *st);
/* MPI for a program that does not link it (the graphrun CLI): distributed
 * sessions run in libgraphrun-mpi.so, a module opened when first needed
 * (docs/distributed.md), so a program that leaves MPI to graphrun starts
 * it here: MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED) on
 * MPI_COMM_WORLD, whose rank and size come back.  argc and argv may be
 * NULL.  GR_ERR_ARG when the module cannot be opened or MPI does not start;
 * GR_ERR_IO when MPI started below MPI_THREAD_SERIALIZED (still call
 * gr_mpi_finalize).  A program that calls MPI itself does not need these. */
gr_code gr_mpi_init(int *argc, char ***argv, int *rank, int *size, gr_status *st);
/* Ends what gr_mpi_init started (nothing if it did not): abort_code 0
 * finalises MPI; any other ends the whole job with MPI_Abort(abort_code),
 * so that the other processes do not wait for this one. */
void gr_mpi_finalize(int abort_code);

/* With gr_session_options.profile: where the kernels' time went, one row
 * per graph node (fused nodes under the fused op's name), summed over every
 * run and executor so far, evaluations included.  A call's time is its wall
 * time, whatever threads it split over; calls on a GPU are not timed (they
 * run later, on the device: use Nsight Systems there). */
typedef struct gr_profile_row {
    const char *op;   /* the kernel's op, e.g. "conv2d_bias" */
    char type[48];    /* its output, e.g. "f32[64,32,28,28]" (an update: its variable's) */
    char device[16];  /* "cpu:0" */
    const char *file; /* the .graph file and line the node comes from; NULL, 0 if none */
    int line;
    char source[72]; /* that line, without its indentation (cut if longer) */
    uint64_t calls;
    double seconds;
} gr_profile_row;
/* Writes the costliest min(cap, n) rows into rows, costliest first, and
 * returns n, the number of nodes that ran (0 without profile).  Call it
 * while no gr_run is in progress for exact sums. */
int gr_session_profile(gr_session *s, gr_profile_row *rows, int cap);

/* Staleness of asynchronous updates (docs/api.md, "Staleness").  Each step
 * that updates a variable counts, as it ends, how many other steps'
 * updates of that variable landed between its start (when it read the
 * variable) and its own write: 0 for one executor and for synchronous
 * towers, more where Hogwild! executors race.  count[k] is the number of
 * updates of staleness k; the last bucket holds k or more.  The counts
 * only grow: read them twice and take gr_staleness_between for an
 * interval. */
#define GR_STALENESS_BUCKETS 256
typedef struct gr_staleness {
    uint64_t updates; /* updates counted: the sum of count[] */
    uint64_t sum;     /* their staleness, summed */
    uint64_t count[GR_STALENESS_BUCKETS];
} gr_staleness;
/* The counts so far, over every executor of the session (all zero for a
 * NULL session).  Safe while other threads run steps.  A GR_DIST_ASYNC
 * session through rank 0 (sync_every 0) counts instead every rank's
 * changes to rank 0's shared variables, each update of a variable being
 * one rank's change after one step, its staleness the changes of other
 * ranks that landed between its step's read and its own (the same counts
 * on every rank: rank 0 keeps them). */
void gr_session_staleness(gr_session *s, gr_staleness *out);
/* The updates counted between two readings (before may be all zero: since
 * the session began): their mean, 99th percentile and maximum staleness,
 * each 0 when there were none (a percentile or maximum in the last bucket
 * reads GR_STALENESS_BUCKETS - 1, "or more").  Any pointer may be NULL. */
void gr_staleness_between(const gr_staleness *now, const gr_staleness *before, double *mean,
                          uint64_t *p99, uint64_t *max);

/* A checkpoint file on its own, without a program (`graphrun inspect`):
 * opening reads it whole and checks it as gr_session_restore checks the
 * container (header, dtypes, shapes, offsets, sizes).  Tensors and
 * metadata are in file order, k in [0, count). */
typedef struct gr_checkpoint gr_checkpoint;
gr_code gr_checkpoint_open(const char *path, gr_checkpoint **out, gr_status *st);
void gr_checkpoint_free(gr_checkpoint *c);
int gr_checkpoint_tensor_count(const gr_checkpoint *c);
/* Tensor k's full name, NULL outside [0, count). */
const char *gr_checkpoint_tensor_name(const gr_checkpoint *c, int k);
/* A copy of tensor k: dtype, shape and values. */
gr_code gr_checkpoint_tensor(const gr_checkpoint *c, int k, gr_tensor **out, gr_status *st);
int gr_checkpoint_meta_count(const gr_checkpoint *c);
/* Metadata entry k: returns its key and sets *value; NULL outside. */
const char *gr_checkpoint_meta(const gr_checkpoint *c, int k, const char **value);

/* ---- output files ----
 * Every file the library writes (gr_session_save, gr_format_in_place) goes
 * through this, and embedders may use it for theirs (the CLI writes --log
 * and `plot -o` so).  The target is resolved first: a path that exists must
 * be a regular file that may be written (not read-only), or a symbolic link
 * to one, followed (the link stays a link; its target is replaced); a
 * dangling link, a FIFO, a device, a directory or a socket is GR_ERR_IO
 * naming the path, and nothing is opened before that is known.  The output
 * is written to TARGET.tmp.<pid>.XXXXXX in the target's folder; the commit
 * renames it over TARGET, so TARGET holds the old file until then and the
 * new one, complete, after it:
 *     gr_output *o;
 *     if (gr_output_open("run.jsonl", &o, st) != GR_OK) return ...;
 *     fprintf(gr_output_file(o), "...\n");
 *     if (gr_output_commit(o, st) != GR_OK) ...   // "run.jsonl: cannot write: No space left..."
 * Any write error (short write, ENOSPC, EIO, fsync, close, rename) fails
 * the flush or the commit with the path and the errno text; a failed
 * commit removes the temporary and leaves TARGET untouched.  A replaced
 * file's permission bits are kept; a new one gets 0666 less the umask.  A
 * process killed before its commit leaves its temporary, which the next
 * gr_output_open of the same target removes (docs/checkpoints.md, "Stale
 * temporaries").  A gr_output is used by one thread at a time. */
typedef struct gr_output gr_output;
gr_code gr_output_open(const char *path, gr_output **out, gr_status *st);
/* The stream to write to (fully buffered); NULL for a NULL output. */
FILE *gr_output_file(gr_output *o);
/* Pushes what is buffered to the temporary file; GR_ERR_IO when any write
 * so far failed (the output can then only be discarded). */
gr_code gr_output_flush(gr_output *o, gr_status *st);
/* Flushes, fsyncs, closes and renames the temporary over the target, then
 * fsyncs the folder; frees o whatever the result. */
gr_code gr_output_commit(gr_output *o, gr_status *st);
/* Removes the temporary, leaving the target as it was, and frees o (NULL:
 * nothing). */
void gr_output_discard(gr_output *o);

/* ---- misc ---- */
/* The abort hook gets the message ("out of memory (allocating ...)",
 * "FILE:LINE: assertion failed: ..."), from whatever thread met it.  It
 * must not return (abort() follows if it does) and must not call the
 * library: it may log, flush the embedder's own files, and end the process
 * or longjmp to a point of the embedder's that never calls this library
 * again.  NULL restores the default (print, then abort()).  Process-wide. */
typedef void (*gr_abort_hook)(const char *msg);
void gr_set_abort_hook(gr_abort_hook hook);
/* The library's version, "MAJOR.MINOR.PATCH" (GR_VERSION_STRING of the
 * header it was built with). */
const char *gr_version(void);
/* The kernels OpenBLAS runs for the CPU ("SkylakeX", "Haswell"...).  OpenBLAS
 * picks them by CPU model when it loads; on a model it does not know it
 * falls back to generic ones ("Prescott"), about 4x slower on GEMMs.  Then,
 * if better is not NULL, *better is the OPENBLAS_CORETYPE value that picks
 * the kernels this CPU can run (else NULL): set it in the environment of a
 * new process (the graphrun CLI re-runs itself so). */
const char *gr_blas_kernels(const char **better);
/* "Did you mean": the candidate closest to word in edit distance, chosen
 * as the compiler's own hints choose (at most strlen(word) / 3 + 1 edits
 * away, never word itself; the first of equals), or NULL when none is that
 * close.  n candidates, any of them NULL (skipped); NULL word or
 * candidates, or n <= 0: NULL.  How the CLI suggests an option, a command
 * or a name. */
const char *gr_suggest(const char *word, const char *const *candidates, int n);

#ifdef __cplusplus
}
#endif

#endif
