/* cmd_train.c - `graphrun FILE --steps N`: train a target, report progress,
 * evaluate, summarise.  Uses only the public API (include/graphrun.h). */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train.h"

static const char train_usage[] =
    "usage: graphrun FILE --steps N [options]\n"
    "  --steps N          train until step N (required; with --restore, N counts the\n"
    "                     restored steps too: the run does N - S more)\n"
    "  --target NAME      target to run (default: the last .minimize()); repeat it to run\n"
    "                     several targets at once, one executor each (async towers)\n"
    "  --executors K      K executors run each target concurrently, sharing the\n"
    "                     variables without locks (Hogwild!); --steps is the total\n"
    "  --locking          every variable update takes that variable's lock\n"
    "  --eval NAME        scalar target evaluated over its data at the end (repeatable)\n"
    "  --eval-every K     also evaluate every K steps\n"
    "  --set NAME=VALUE   override a param (repeatable)\n"
    "  --seed S           seed for initialisation, shuffling and dropout (default 0)\n"
    "  --threads T        total threads, split evenly between executors (default: all cores)\n"
    "  --log PATH         write JSON lines: a record every --log-every steps (loss,\n"
    "                     steps/s, examples/s, lr), evaluations, then a final summary\n"
    "  --log-every K      steps between records in the log and TensorBoard\n"
    "                     (default: steps / 1000, rounded down, plus 1)\n"
    "  --tensorboard DIR  also write the records as TensorBoard scalars, into\n"
    "                     DIR/RUN (view: tensorboard --logdir DIR)\n"
    "  --run-name RUN     the run's folder in DIR (default: FILE's name and the time)\n"
    "  --check-numerics   stop at the first NaN/Inf, naming the op and its line\n"
    "  --profile          time every kernel call; print the costliest nodes at the end\n"
    "  --devices SPEC     the devices, e.g. cpu:0-1,gpu:0 (sim:N: simulated GPUs);\n"
    "                     default: this machine's\n"
    "  --no-step-graphs   on a GPU, launch each step's calls one by one (no CUDA graphs)\n"
    "  --soft-placement   run nodes placed on missing devices, or without a kernel there, on "
    "cpu:0\n"
    "  --quiet            print only errors and the final summary\n"
    "  --checkpoint PATH  save a checkpoint (safetensors) to PATH at the end\n"
    "  --checkpoint-every K  also save it every K steps (needs --checkpoint)\n"
    "  --restore PATH     resume from a checkpoint: variables, optimizer slots, step and\n"
    "                     data positions; training continues from its step\n"
    "  --init-from PATH   load only the trainable weights of a checkpoint; start at step 0\n"
    "  --allow-missing    variables absent from the checkpoint keep their initial values\n"
    "  --distributed MODE train over the processes mpirun started (Open MPI): sync\n"
    "                     averages gradients every step (P processes of batch B train\n"
    "                     as one of batch P*B); async shares the variables through rank 0\n"
    "                     without waiting (Hogwild! across processes)\n"
    "  --sync-every K     with --distributed async: average the variables every K steps\n"
    "                     instead\n"
    "Ctrl-C stops training after the step in flight, completes the log and the TensorBoard\n"
    "file, and exits 130 (no final checkpoint or evaluation); a second Ctrl-C kills.\n";

static int parse_long(const char *s, long min, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < min) return -1;
    *out = v;
    return 0;
}

static int bad_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "graphrun: %s%s%s\n%s", msg, arg ? " " : "", arg ? arg : "", train_usage);
    return 2;
}

static int parse_mode(const char *s, gr_distributed *out)
{
    if (strcmp(s, "sync") == 0)
        *out = GR_DIST_SYNC;
    else if (strcmp(s, "async") == 0)
        *out = GR_DIST_ASYNC;
    else
        return -1;
    return 0;
}

static int check_dist_opts(const train_opts *o)
{
    if (o->sess.sync_every && o->comp.distributed != GR_DIST_ASYNC)
        return bad_usage("--sync-every needs --distributed async", NULL);
    if (o->comp.distributed && (o->executors > 1 || o->n_targets > 1))
        return bad_usage("--distributed runs one executor of one target per process; give "
                         "each process more cores with --threads, or start more processes",
                         NULL);
    return 0;
}

static int check_ckpt_opts(train_opts *o)
{
    if (o->run_name && !o->tb_dir) return bad_usage("--run-name needs --tensorboard DIR", NULL);
    if (o->ckpt_every && !o->ckpt_path)
        return bad_usage("--checkpoint-every needs --checkpoint PATH", NULL);
    if (o->restore_path && o->init_path)
        return bad_usage("use either --restore or --init-from, not both", NULL);
    o->restore.weights_only = o->init_path != NULL;
    return 0;
}

static int parse_train_opts(int argc, char **argv, train_opts *o)
{
    enum {
        O_STEPS = 256,
        O_TARGET,
        O_EVAL,
        O_EVAL_EVERY,
        O_SET,
        O_SEED,
        O_THREADS,
        O_LOG,
        O_QUIET,
        O_NUMERICS,
        O_SOFT,
        O_CKPT,
        O_CKPT_EVERY,
        O_RESTORE,
        O_INIT_FROM,
        O_ALLOW_MISSING,
        O_EXECUTORS,
        O_LOCKING,
        O_DEVICES,
        O_NO_GRAPHS,
        O_DISTRIBUTED,
        O_SYNC_EVERY,
        O_LOG_EVERY,
        O_TENSORBOARD,
        O_RUN_NAME,
        O_PROFILE,
        O_HELP
    };
    static const struct option longs[] = {{"steps", 1, 0, O_STEPS},
                                          {"target", 1, 0, O_TARGET},
                                          {"eval", 1, 0, O_EVAL},
                                          {"eval-every", 1, 0, O_EVAL_EVERY},
                                          {"set", 1, 0, O_SET},
                                          {"seed", 1, 0, O_SEED},
                                          {"threads", 1, 0, O_THREADS},
                                          {"log", 1, 0, O_LOG},
                                          {"quiet", 0, 0, O_QUIET},
                                          {"check-numerics", 0, 0, O_NUMERICS},
                                          {"soft-placement", 0, 0, O_SOFT},
                                          {"devices", 1, 0, O_DEVICES},
                                          {"no-step-graphs", 0, 0, O_NO_GRAPHS},
                                          {"checkpoint", 1, 0, O_CKPT},
                                          {"checkpoint-every", 1, 0, O_CKPT_EVERY},
                                          {"restore", 1, 0, O_RESTORE},
                                          {"init-from", 1, 0, O_INIT_FROM},
                                          {"allow-missing", 0, 0, O_ALLOW_MISSING},
                                          {"executors", 1, 0, O_EXECUTORS},
                                          {"locking", 0, 0, O_LOCKING},
                                          {"distributed", 1, 0, O_DISTRIBUTED},
                                          {"sync-every", 1, 0, O_SYNC_EVERY},
                                          {"log-every", 1, 0, O_LOG_EVERY},
                                          {"tensorboard", 1, 0, O_TENSORBOARD},
                                          {"run-name", 1, 0, O_RUN_NAME},
                                          {"profile", 0, 0, O_PROFILE},
                                          {"help", 0, 0, O_HELP},
                                          {0, 0, 0, 0}};
    long v;
    int c;
    o->steps = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
        switch (c) {
        case O_STEPS:
            if (parse_long(optarg, 0, &o->steps)) return bad_usage("bad --steps", optarg);
            break;
        case O_TARGET:
            if (o->n_targets == MAX_TARGETS) return bad_usage("too many --target", NULL);
            o->targets[o->n_targets++] = optarg;
            o->target = o->targets[0];
            break;
        case O_EXECUTORS:
            if (parse_long(optarg, 1, &v) || v > 64) return bad_usage("bad --executors", optarg);
            o->executors = (int)v;
            break;
        case O_LOCKING:
            o->sess.locking = 1;
            break;
        case O_EVAL:
            if (o->n_evals == MAX_EVALS) return bad_usage("too many --eval", NULL);
            o->evals[o->n_evals++] = optarg;
            break;
        case O_EVAL_EVERY:
            if (parse_long(optarg, 1, &o->eval_every)) return bad_usage("bad --eval-every", optarg);
            break;
        case O_SET:
            if (cli_add_param(&o->params, optarg))
                return bad_usage("--set needs NAME=VALUE, got", optarg);
            break;
        case O_SEED:
            if (parse_long(optarg, 0, &v)) return bad_usage("bad --seed", optarg);
            o->sess.seed = (uint64_t)v;
            break;
        case O_THREADS:
            if (parse_long(optarg, 1, &v) || v > 256) return bad_usage("bad --threads", optarg);
            o->sess.threads = (int)v;
            break;
        case O_LOG:
            o->log_path = optarg;
            break;
        case O_LOG_EVERY:
            if (parse_long(optarg, 1, &o->log_every)) return bad_usage("bad --log-every", optarg);
            break;
        case O_TENSORBOARD:
            o->tb_dir = optarg;
            break;
        case O_RUN_NAME:
            if (!*optarg || strchr(optarg, '/') || !strcmp(optarg, ".") || !strcmp(optarg, ".."))
                return bad_usage("--run-name must be a folder name (no '/'), got", optarg);
            o->run_name = optarg;
            break;
        case O_QUIET:
            o->quiet = 1;
            break;
        case O_NUMERICS:
            o->sess.check_numerics = 1;
            break;
        case O_PROFILE:
            o->sess.profile = 1;
            break;
        case O_SOFT:
            o->comp.soft_placement = 1;
            break;
        case O_DEVICES:
            o->comp.devices = optarg;
            break;
        case O_NO_GRAPHS:
            o->sess.no_step_graphs = 1;
            break;
        case O_CKPT:
            o->ckpt_path = optarg;
            break;
        case O_CKPT_EVERY:
            if (parse_long(optarg, 1, &o->ckpt_every))
                return bad_usage("bad --checkpoint-every", optarg);
            break;
        case O_RESTORE:
            o->restore_path = optarg;
            break;
        case O_INIT_FROM:
            o->init_path = optarg;
            break;
        case O_ALLOW_MISSING:
            o->restore.allow_missing = 1;
            break;
        case O_DISTRIBUTED:
            if (parse_mode(optarg, &o->comp.distributed))
                return bad_usage("--distributed takes sync or async, not", optarg);
            break;
        case O_SYNC_EVERY:
            if (parse_long(optarg, 1, &v) || v > INT_MAX)
                return bad_usage("bad --sync-every", optarg);
            o->sess.sync_every = (int)v;
            break;
        case O_HELP:
            fputs(train_usage, stdout);
            return -1;
        case ':':
            return bad_usage("missing value for", argv[optind - 1]);
        default:
            return bad_usage("unknown option", argv[optind - 1]);
        }
    }
    if (optind != argc - 1)
        return bad_usage(optind < argc ? "expected one FILE, got more" : "no FILE given", NULL);
    o->file = argv[optind];
    if (o->steps < 0) return bad_usage("--steps N is required", NULL);
    o->comp.params = o->params.v;
    o->comp.n_params = o->params.n;
    return check_dist_opts(o) ? 2 : check_ckpt_opts(o);
}

static int train_loop(const train_opts *o, gr_session *s, const gr_target_info *ti, double *secs,
                      float *last_loss, trep_progress *pg, gr_status *st)
{
    float loss = 0, lr = NAN;
    gr_fetch f[2] = {{ti->loss, &loss, sizeof loss, NULL}, {ti->lr, &lr, sizeof lr, NULL}};
    int nf = ti->loss ? ti->lr ? 2 : 1 : 0;
    double vals[MAX_EVALS];
    if (gr_prepare(s, o->target, f, nf, st) != GR_OK) {
        cli_print_status(st);
        return -1;
    }
    trep_start(o, pg);
    for (long step = o->start + 1; step <= o->steps; step++) {
        if (gr_run(s, o->target, NULL, 0, f, nf, st) != GR_OK) {
            if (pg->tty && !o->quiet) fputc('\n', stderr);
            cli_print_status(st);
            return -1;
        }
        int last = step == o->steps || trep_interrupted();
        if (trep_report(o, pg, step, loss, lr, last) < 0) return -1;
        if (last) break;
        if (o->eval_every && step % o->eval_every == 0 &&
            (trep_run_evals(o, s, vals, st) < 0 || trep_evals_done(o, pg, vals, step, 0) < 0))
            return -1;
        if (o->ckpt_every && step % o->ckpt_every == 0 && trep_save_checkpoint(o, s, st) < 0)
            return -1;
    }
    *secs = trep_now() - pg->t0;
    *last_loss = loss;
    return 0;
}

/* --distributed: examples/s of all the processes, and the share of the
 * time this one spent communicating. */
static void dist_summary(const gr_session *s, const gr_target_info *ti, double secs, double sps)
{
    int rank, size;
    double comm;
    gr_session_dist_info(s, &rank, &size, &comm);
    if (size < 2 && comm == 0) return;
    printf("distributed: %d processes, %.0f examples/s in all, communication %.2fs (%.1f%% of "
           "rank 0's time)\n",
           size, sps * (double)ti->batch * size, comm, secs > 0 ? 100 * comm / secs : 0);
}

/* The step training ended at (a restore may have started past --steps). */
static long last_step(const train_opts *o)
{
    return o->steps > o->start ? o->steps : o->start;
}

static void summary(const train_opts *o, const gr_session *s, const gr_target_info *ti, double secs,
                    float loss, const double *vals, FILE *log)
{
    long done = o->steps > o->start ? o->steps - o->start : 0;
    double sps = secs > 0 ? (double)done / secs : 0;
    if (o->silent) return;
    printf("trained");
    for (int i = 0; i < o->n_targets; i++) printf("%s %s", i ? "," : "", o->targets[i]);
    printf(": %ld steps in %.2fs, %.1f steps/s", done, secs, sps);
    if (ti->loss) printf(", final loss %.4f", (double)loss);
    printf("\n");
    for (int i = 0; i < o->n_evals; i++) printf("%s = %.4f\n", o->evals[i], vals[i]);
    if (o->comp.distributed) dist_summary(s, ti, secs, sps);
    if (!log) return;
    fprintf(log,
            "{\"event\":\"done\",\"steps\":%ld,\"step\":%ld,\"steps_per_s\":%.2f,\"loss\":%.6g,"
            "\"eval\":",
            done, last_step(o), sps, (double)loss);
    trep_eval_json(o, vals, log);
    fputs("}\n", log);
}

/* --restore / --init-from: load before the first step. */
static int restore_checkpoint(train_opts *o, gr_session *s, gr_status *st)
{
    const char *path = o->restore_path ? o->restore_path : o->init_path;
    if (!path) return 0;
    if (gr_session_restore(s, path, &o->restore, st) != GR_OK) {
        cli_print_status(st);
        return -1;
    }
    o->start = (long)gr_session_step(s);
    if (o->restore_path) {
        if (!o->silent) fprintf(stderr, "resumed from step %ld\n", o->start);
        if (o->start >= o->steps)
            fprintf(stderr, "already at step %ld >= --steps %ld: nothing to train\n", o->start,
                    o->steps);
    }
    return 0;
}

/* Every --eval names a scalar: checked before training, not after it. */
static int check_evals(const train_opts *o, const gr_program *prog, gr_status *st)
{
    for (int i = 0; i < o->n_evals; i++) {
        gr_target_info ti;
        if (gr_target_info_get(prog, o->evals[i], &ti, st) != GR_OK) return -1;
        if (!ti.is_scalar) {
            fprintf(stderr, "graphrun: error: --eval %s: not a scalar, so it cannot be averaged\n",
                    o->evals[i]);
            return -2;
        }
    }
    return 0;
}

/* Checks every --target exists and records its loss name. */
static int target_infos(train_opts *o, const gr_program *prog, gr_target_info *first, gr_status *st)
{
    for (int i = 0; i < o->n_targets; i++) {
        gr_target_info ti;
        if (gr_target_info_get(prog, o->targets[i], &ti, st) != GR_OK) return -1;
        o->losses[i] = ti.loss;
        o->lrs[i] = ti.lr;
        if (i == 0) *first = ti, o->batch = ti.batch;
    }
    return 0;
}

static int concurrent(const train_opts *o)
{
    return o->executors > 1 || o->n_targets > 1;
}

/* --tensorboard DIR: the run's folder, DIR/RUN, malloc'd; NULL without. */
static char *tb_run_dir(const train_opts *o)
{
    char name[512], when[32], *dir;
    if (!o->tb_dir) return NULL;
    if (o->run_name)
        snprintf(name, sizeof name, "%s", o->run_name);
    else {
        const char *base = strrchr(o->file, '/') ? strrchr(o->file, '/') + 1 : o->file;
        size_t n = strlen(base);
        if (n > 6 && strcmp(base + n - 6, ".graph") == 0) n -= 6;
        time_t t = time(NULL);
        strftime(when, sizeof when, "%Y%m%d-%H%M%S", localtime(&t));
        snprintf(name, sizeof name, "%.*s-%s", (int)n, base, when);
    }
    return asprintf(&dir, "%s/%s", o->tb_dir, name) < 0 ? NULL : dir;
}

/* The session, with its TensorBoard folder when asked for; NULL on error
 * (printed). */
static gr_session *open_session(train_opts *o, gr_program *prog, trep_progress *pg, gr_status *st)
{
    gr_session *s = NULL;
    char *run = tb_run_dir(o);
    o->sess.tensorboard_dir = run;
    if (gr_session_new(prog, &o->sess, &s, st) != GR_OK)
        cli_print_status(st);
    else if (run && !o->quiet)
        fprintf(stderr, "tensorboard: writing to %s (view: tensorboard --logdir %s)\n", run,
                o->tb_dir);
    pg->tb = run ? s : NULL;
    o->sess.tensorboard_dir = NULL;
    free(run);
    return s;
}

/* After the last step: the checkpoint, the final evaluation, the summary.
 * The checkpoint comes first, so a resumed run continues exactly where an
 * uninterrupted one would be. */
static int finish(const train_opts *o, gr_session *s, const gr_target_info *ti, double secs,
                  float loss, trep_progress *pg, gr_status *st)
{
    double vals[MAX_EVALS] = {0};
    if ((o->ckpt_path && trep_save_checkpoint(o, s, st) < 0) ||
        trep_run_evals(o, s, vals, st) < 0 || trep_evals_done(o, pg, vals, last_step(o), 1) < 0)
        return 1;
    summary(o, s, ti, secs, loss, vals, pg->log);
    if (!o->silent) trep_profile(s, o->steps - o->start, secs, pg->log);
    return 0;
}

static int train_session(train_opts *o, gr_program *prog, gr_status *st)
{
    gr_target_info ti = {0};
    double secs = 0;
    float loss = 0;
    trep_progress pg = {.tty = isatty(2)};
    int bad = check_evals(o, prog, st);
    if (bad == -2) return 1;
    if (bad < 0 || target_infos(o, prog, &ti, st) < 0) {
        cli_print_status(st);
        return 1;
    }
    gr_session *s = open_session(o, prog, &pg, st);
    if (!s) return 1;
    if (cli_mpi_agree(o, s, st) < 0) { /* --distributed: every rank, the same schedule */
        gr_session_free(s);
        return 1;
    }
    if (o->log_path && !(pg.log = fopen(o->log_path, "w"))) {
        fprintf(stderr, "graphrun: error: cannot write the log %s: %s\n", o->log_path,
                strerror(errno));
        gr_session_free(s);
        return 1;
    }
    if (pg.log) setvbuf(pg.log, NULL, _IOLBF, 0); /* whole lines, even if killed */
    trep_catch_interrupt();
    int rc = restore_checkpoint(o, s, st) < 0 ||
             (concurrent(o) ? train_async(o, s, &secs, &loss, &pg, st)
                            : train_loop(o, s, &ti, &secs, &loss, &pg, st)) < 0;
    if (!rc && trep_interrupted()) {
        fprintf(stderr, "graphrun: interrupted at step %llu\n",
                (unsigned long long)gr_session_step(s));
        rc = 130;
    } else if (!rc)
        rc = finish(o, s, &ti, secs, loss, &pg, st);
    if (pg.log && fclose(pg.log) != 0) {
        perror(o->log_path);
        rc = 1;
    }
    gr_session_free(s);
    return rc;
}

/* --distributed: MPI starts; only rank 0 reports (the others print errors). */
static int start_distributed(train_opts *o)
{
    static char prefix[32];
    int rank = 0, size = 1;
    if (!o->comp.distributed) {
        cli_mpi_note();
        return 0;
    }
    if (cli_mpi_start(NULL, NULL, &rank, &size) < 0) return -1;
    snprintf(prefix, sizeof prefix, "rank %d: ", rank);
    cli_rank_prefix = prefix;
    if (rank != 0) o->quiet = o->silent = 1, o->log_path = NULL, o->tb_dir = NULL;
    return 0;
}

int cmd_train(int argc, char **argv)
{
    train_opts o = {0};
    int rc = parse_train_opts(argc, argv, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    if (start_distributed(&o) < 0) return cli_mpi_end(1);
    gr_status *st = gr_status_new();
    gr_program *prog = NULL;
    if (gr_compile_file(o.file, &o.comp, &prog, st) != GR_OK) {
        cli_print_status(st);
        gr_status_free(st);
        return cli_mpi_end(1);
    }
    if (!o.silent) fprintf(stderr, "%s", gr_program_warnings(prog));
    if (!o.target) o.target = o.targets[o.n_targets++] = gr_program_default_target(prog);
    if (o.executors < 1) o.executors = 1;
    o.sess.executors = o.executors * o.n_targets;
    if (!o.target) {
        fprintf(stderr, "graphrun: %s has no .minimize() target; name one with --target\n", o.file);
        rc = 1;
    } else
        rc = train_session(&o, prog, st);
    gr_program_free(prog);
    gr_status_free(st);
    return cli_mpi_end(rc);
}
