/* session_int.h - private to runtime/session/: struct gr_session and what
 * the session's files offer each other.
 *
 * The files, each with one job, and the one way their calls run (a file
 * calls only files below it):
 *
 *   session.c  gr_session_new / gr_session_free and the option checks: makes
 *              and ends what every other file keeps
 *   eval.c     gr_eval / gr_eval_check: a pass over the data, with a state
 *              of its own for the variables its target assigns
 *   plans.c    the plan cache, each plan's executor pool, the views a thread
 *              holds, gr_prepare / gr_run
 *   vars.c     the variables: their initial values and gr_variable_*
 *   readers.c  the data readers, opened when a plan first needs them
 *   state.c    the registry of live sessions, and the accessors the rest of
 *              runtime/ reads a session by (runtime.h: rt_session_*)
 *
 * Only these files include this header: the rest of runtime/ uses runtime.h. */
#ifndef GR_SESSION_INT_H
#define GR_SESSION_INT_H

#include "runtime/runtime.h"

/* One distinct (target, fetches) request: its plan and its executors. */
typedef struct rt_plan_entry {
    uint64_t hash; /* of the names (plans.c: plan_hash) */
    char **names;  /* the target, then the fetches */
    int n_fetches;
    plan_graph *plan; /* roots: the target, then the fetches */
    int is_train;     /* the target is a .minimize(): a training step */
    rt_exec **free_execs;
    int n_free, cap_free;
    rt_exec **all; /* every executor made, free or not */
    int n_all, cap_all;
} rt_plan_entry;

struct gr_session {
    uint64_t id; /* unique per session, for thread-held views */
    const gr_program *prog;
    const ir_graph *g;
    gr_session_options opt;
    rt_devices devs;               /* the devices the program uses, made by the session */
    void **var;                    /* one buffer per variable, in its device's memory */
    dev_var_lock *var_lock;        /* per variable: taken by locking updates */
    data_reader *_Atomic *readers; /* per data source, opened when a plan needs it */
    pthread_mutex_t readers_mu;    /* opening readers (which may load for seconds) */
    pthread_mutex_t mu;            /* plans and executor lists, held only briefly */
    pthread_rwlock_t pause;        /* runs hold it shared; a consistent snapshot
                                      (checkpoint save) holds it exclusively */
    rt_plan_entry *plans;
    int n_plans, cap_plans;
    atomic_uint_fast64_t steps;
    atomic_uint_fast64_t train_steps; /* gr_run calls on train targets (checkpoint.c) */
    atomic_uint_fast64_t accum_runs;  /* runs of accumulating targets: the phase of each */
    rt_dist *dist;                    /* a distributed program's processes (dist.h), else NULL */
    rt_summary *summary;              /* the TensorBoard event file, or NULL (summary.c) */
    atomic_int eval_cancelled;        /* gr_eval_cancel was called (eval.c) */
    exec_env env;                     /* what every executor of the session is given */
};

/* state.c: the live-session registry.  Debug builds look a session up on
 * every call, so a call on a freed one gets a clear status instead of
 * touching freed memory; every build asks whether a thread's held view
 * (plans.c) still has its session. */
void sess_live_add(const gr_session *s);
void sess_live_remove(const gr_session *s);
/* Whether a live session has this id. */
int sess_live_id(uint64_t id);
/* NULL, freed (debug builds) or fine: the check every entry point starts with. */
gr_code sess_check(const gr_session *s, const char *fn, gr_status *st);

/* readers.c: one slot per data source (sess_readers_close ends them). */
void sess_readers_alloc(gr_session *s);
void sess_readers_close(gr_session *s);
/* The readers plan p reads, opened. */
gr_code sess_readers_open(gr_session *s, const plan_graph *p, gr_status *st);

/* vars.c: every variable allocated on its device and initialised
 * (sess_vars_free frees them, after an error too). */
gr_code sess_vars_init(gr_session *s, gr_status *st);
void sess_vars_free(gr_session *s);
/* Variable i back to its initial value (an evaluation's state, eval.c). */
gr_code sess_var_reset(gr_session *s, int i, gr_status *st);

/* plans.c */
/* The node id of target or tensor `name`, else -1 with an error naming the
 * program's names. */
int sess_find_tensor(const gr_session *s, const char *name, gr_status *st);
/* Finds (or makes) the plan of (target, fetches) and takes an executor of
 * it: *plan_index is its plan, *is_train whether it trains. */
gr_code sess_acquire(gr_session *s, const char *target, const gr_fetch *fetches, int n_fetches,
                     rt_exec **e, int *plan_index, int *is_train, gr_status *st);
/* Gives executor e back to plan plan_index's free list. */
void sess_release(gr_session *s, int plan_index, rt_exec *e);
/* This thread's executors held for views of s go back to their lists
 * (every call on the session starts with it). */
void sess_drop_held(gr_session *s);
/* The session is going away: this thread's views of it end, and every plan
 * and executor is freed. */
void sess_plans_free(gr_session *s);

#endif
