/* runtime.h - private to runtime/: programs, sessions, executors.
 *
 * A gr_program is the compiled, immutable graph.  A gr_session owns the
 * variable store, the data readers and, per distinct (target, fetches)
 * request, a plan with a free list of executors.  gr_run takes an executor
 * from that list, so any number of threads can run at once; each executor
 * has its own arena laid out by the plan, so a step allocates nothing.
 *
 * struct gr_session is private to runtime/session/ (session_int.h); the
 * rest of runtime/ reads a session through the rt_session_* calls below,
 * and an executor is given what it needs of its session (exec_env) when it
 * is made, so runtime/exec/ never calls into the session. */
#ifndef GR_RUNTIME_H
#define GR_RUNTIME_H

#include <pthread.h>
#include <stdatomic.h>

#include "../compiler/compiler.h"
#include "../devices/cpu/cpu.h"
#include "../include/graphrun.h"
#include "base/fatal.h"
#include "runtime/data/data.h"

struct gr_status {
    gr_code code;
    char *msg;
    char *file;
    int line, col;
};

/* Sets st (if any) and returns code. Message is printf-style. */
gr_code rt_fail(gr_status *st, gr_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The API's rule for a pointer argument that may not be NULL: GR_ERR_ARG
 * with "FN: ARG is NULL" (return rt_null(st, "gr_run", "target")). */
gr_code rt_null(gr_status *st, const char *fn, const char *arg);
/* GR_ERR_ARG: "FN: len is N, above the limit of 64 MiB for a source"
 * (LIM_SOURCE_BYTES, the limit of a .graph file, for text in memory). */
gr_code rt_source_too_long(gr_status *st, const char *fn, size_t len);
/* Runs fn(arg) with running out of memory caught (base/fatal.h): its code,
 * or GR_ERR_NOMEM "WHAT: out of memory" when an base_x*alloc failed.  Only for
 * work that holds no lock and starts no thread; what it had allocated then
 * stays allocated. */
gr_code rt_catch_oom(gr_code (*fn)(void *arg), void *arg, const char *what, gr_status *st);
/* plan_build, with running out of memory an error: NULL and GR_ERR_NOMEM. */
plan_graph *rt_plan_build(const ir_graph *g, const int *roots, int n_roots, gr_status *st);
/* An error at node n's place in the .graph file: "FILE:LINE:COL: error:
 * MSG", the source line and a caret, as compile errors print. */
gr_code rt_fail_at(gr_status *st, gr_code code, const ir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "1.5 GiB" into buf; returns buf. */
const char *rt_human_bytes(size_t n, char *buf, size_t len);
/* dst becomes a copy of src (a partition thread's error); returns its code. */
gr_code rt_status_copy(gr_status *dst, const gr_status *src);
/* Copies formatted diagnostics (and the first error's location) into st. */
gr_code rt_fail_diags(gr_status *st, gr_code code, const diag_list *d);
void rt_ok(gr_status *st);
/* tensor.c: a new zeroed gr_tensor of type ty (GR_ERR_NOMEM on failure). */
gr_code rt_tensor_like(const ir_type *ty, gr_tensor **out, gr_status *st);

/* machine.c: which devices exist (see there). */
typedef enum machine_gpu { MACHINE_GPU_NONE, MACHINE_GPU_CUDA, MACHINE_GPU_SIM } machine_gpu;
typedef struct rt_machine {
    int n_cpu, n_gpu;
    machine_gpu gpu;
    const char *gpu_why; /* no GPU because the CUDA module, built, could not be opened: why */
} rt_machine;
/* The machine this process runs on, probed once. */
const rt_machine *machine_probe(void);
/* A spec such as "cpu:0-1,sim:0" into m; -1 with a message. */
int machine_parse(const char *spec, rt_machine *m, char *err, size_t errlen);
/* The kernel table of device dev on m, NULL when it has none. */
const kernel_fn *machine_kernels(const rt_machine *m, int dev);
/* A new device object for dev on m into *out (vt->close ends it); an
 * error naming the device when this machine lacks it (m is what a program
 * was compiled for, which --devices may have made another machine's). */
gr_code machine_device_new(const rt_machine *m, int dev, device_obj **out, gr_status *st);
/* The device objects a session makes: one per device a variable or a live
 * node of the graph sits on, and the host (cpu:0). */
typedef struct rt_devices {
    device_obj **obj;
    int n;
} rt_devices;
/* Opens them into *out (machine_devices_close ends them, after an error too). */
gr_code machine_devices_open(const rt_machine *m, const ir_graph *g, rt_devices *out,
                             gr_status *st);
void machine_devices_close(rt_devices *d);
/* The object of device id dev, which must be one of them. */
device_obj *machine_devices_find(const rt_devices *d, int dev);

struct gr_program {
    rt_machine machine;         /* what it was compiled for: sessions make these devices */
    gr_distributed distributed; /* gr_compile_options.distributed */
    src_file *src;
    ast_tree *ast;
    ir_graph *g;
    diag_list diags;
    char *warnings;
    const char **files; /* gr_program_file: the .graph file, then the data files */
    int n_files;
    char **dir_files; /* the files of text() directories, which files points into */
    int n_dir_files;
};

typedef struct rt_exec rt_exec;
typedef struct rt_dist rt_dist; /* dist.h */
typedef struct rt_summary rt_summary;

/* compile.c: parses p->src, runs sema, placement and the passes into p->ast
 * and p->g, and keeps the warnings in p->warnings. */
gr_code rt_compile(gr_program *p, const gr_compile_options *opt, gr_status *st);
/* rt_compile with another data probe than the readers': the compile
 * fuzzer's, which types data sources without reading any file. */
gr_code rt_compile_probe(gr_program *p, const gr_compile_options *opt, sema_data_probe probe,
                         void *probe_ctx, gr_status *st);
/* The API's check of opt (may be NULL) before compiling: fn names the
 * function in the message. */
gr_code rt_compile_options_check(const char *fn, const gr_compile_options *opt, gr_status *st);
/* sema's data probe (sema_data_probe): what the readers say of source d;
 * ctx is unused. */
int rt_probe_data(void *ctx, const ir_data *d, sema_data_shape *out, char *err, size_t errlen);
/* The reader spec of data source d, as sema probed it and a session opens
 * it. Paths point into the graph. */
void rt_data_spec(const ir_data *d, data_spec *s);

/* runtime/session/state.c: what the rest of runtime/ reads of a session. */
const gr_program *rt_session_program(const gr_session *s);
const ir_graph *rt_session_graph(const gr_session *s);
const gr_session_options *rt_session_options(const gr_session *s);
rt_dist *rt_session_dist(const gr_session *s);       /* NULL: not distributed */
rt_summary *rt_session_summary(const gr_session *s); /* NULL: no tensorboard_dir */
/* The session's object for device id dev (one the program uses). */
device_obj *rt_device(const gr_session *s, int dev);
/* The pause lock, exclusively: no run is under way until rt_session_resume
 * (a consistent snapshot, a write of the variables, an evaluation). */
void rt_session_pause(gr_session *s);
void rt_session_resume(gr_session *s);
/* The train step counter (gr_session_step) and the run counter (every
 * executor run: dropout's masks).  Set only with the session paused. */
void rt_session_counters(const gr_session *s, uint64_t *train_steps, uint64_t *runs);
void rt_session_set_counters(gr_session *s, uint64_t train_steps, uint64_t runs);
/* The run counter alone (an evaluation gives its runs back). */
void rt_session_set_runs(gr_session *s, uint64_t runs);

/* runtime/session/vars.c: variable vi's value copied from its device into
 * host memory dst, or from host memory src onto its device (the session
 * paused, or not yet shared). */
void rt_var_read(gr_session *s, int vi, void *dst);
void rt_var_write(gr_session *s, int vi, const void *src);

/* init.c: variable initialisers, deterministic per (seed, variable name). */
void rt_init_var(const ir_var *v, float *dst, uint64_t seed);

/* exec.c: an executor of one plan.  What it uses of its session, given
 * when it is made; everything it points to outlives the executor. */
typedef struct exec_env {
    const gr_session_options *opt; /* threads, executors, seed, locking, profile... */
    const rt_devices *devs;        /* the session's device objects */
    void *const *var;              /* per variable: its buffer on its device */
    dev_var_lock *var_lock;        /* per variable: the lock of locking updates */
    data_reader *_Atomic *readers; /* per data source; the plan's are open */
    atomic_uint_fast64_t *steps;   /* the session's run counter */
    kern_comm *comm;               /* what the allreduce kernels call (dist.h) */
} exec_env;
gr_code exec_new(const exec_env *env, const plan_graph *p, rt_exec **out, gr_status *st);
void exec_free(rt_exec *e);
/* Binds feeds, runs the plan once, copies fetches out (or sets their view
 * and *views = 1 when their data is NULL). */
gr_code exec_run(rt_exec *e, const gr_feed *feeds, int n_feeds, gr_fetch *fetches, int n_fetches,
                 int *views, gr_status *st);
/* The plan the executor runs. */
const plan_graph *exec_plan(const rt_exec *e);

/* summary.c: a session's TensorBoard event file in folder dir into *out
 * (opened by gr_session_new when asked for, closed by gr_session_free). */
gr_code rt_summary_open(const char *dir, rt_summary **out, gr_status *st);
void rt_summary_close(rt_summary *m);
/* One point of tag's curve (dropped unless step is past its last one), and
 * the file flushed to disk: 0, or -1 with the message in err.  Safe from any
 * thread: the writer is behind its own mutex. */
int rt_summary_scalar(rt_summary *m, const char *tag, int64_t step, double value, char *err,
                      size_t errlen);
int rt_summary_sync(rt_summary *m, char *err, size_t errlen);

/* runtime/session/readers.c */
/* Opens data source di's reader if it is not open yet. */
gr_code rt_open_reader(gr_session *s, int di, gr_status *st);
/* fn(r, di, ctx) for every open reader, under the session's lock of plans
 * (no plan is added meanwhile). */
void rt_readers_each(gr_session *s, void (*fn)(data_reader *r, int di, void *ctx), void *ctx);

/* runtime/session/plans.c: fn(e, ctx) for every executor of every plan,
 * under that lock (gr_session_profile). */
void rt_plans_each_exec(gr_session *s, void (*fn)(const rt_exec *e, void *ctx), void *ctx);

#endif
