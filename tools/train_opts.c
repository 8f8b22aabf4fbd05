/* train_opts.c - the training command's options: `graphrun FILE --steps N
 * [options]` parsed into a train_opts (train.h), with the help text. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_opts.h"
#include "train.h"

#define TRAIN_MAX_THREADS   1024 /* gr_session_options.threads' limit */
#define TRAIN_MAX_EXECUTORS 64   /* per target: 16 targets of 64 = the session's limit, 1024 */

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
    O_CPU_AS_GPU,
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
    O_MAX_STALENESS,
    O_SLOW,
    O_BACKUP,
    O_STALE_LR
};

static const cli_opt train_opts_table[] = {
    {"steps", O_STEPS, "N",
     "train until step N, in [0, 2^53] (required; with --restore, N\n"
     "counts the restored steps too: the run does N - S more)",
     CLI_V_NONE, NULL},
    {"target", O_TARGET, "NAME",
     "target to run (default: the last .minimize()); repeat it to run\n"
     "several targets at once, one executor each (async towers)",
     CLI_V_TARGET, NULL},
    {"executors", O_EXECUTORS, "K",
     "K executors (1 to 64) run each target concurrently, sharing\n"
     "the variables without locks (Hogwild!); --steps is the total",
     CLI_V_NONE, NULL},
    {"locking", O_LOCKING, NULL, "every variable update takes that variable's lock", CLI_V_NONE,
     NULL},
    {"max-staleness", O_MAX_STALENESS, "S",
     "bounded staleness for concurrent executors, or --distributed\n"
     "async ranks: none starts a step more than S steps ahead of the\n"
     "slowest still running (0: in lockstep; S in [0, 2^31 - 1];\n"
     "default: unbounded, Hogwild!)",
     CLI_V_NONE, NULL},
    {"slow", O_SLOW, "W:F",
     "a straggler, for experiments: concurrent worker W (0 is the\n"
     "first), or with --distributed rank W, sleeps after each step so\n"
     "that its steps take F times as long (F a number in [1, 1000])",
     CLI_V_NONE, NULL},
    {"stale-lr", O_STALE_LR, NULL,
     "staleness-aware learning rate for concurrent executors, or\n"
     "--distributed async ranks: each update's lr (a rank's change)\n"
     "is scaled by 1 / max(1, its staleness)",
     CLI_V_NONE, NULL},
    {"eval", O_EVAL, "NAME", "scalar target evaluated over its data at the end (repeatable)",
     CLI_V_TARGET, NULL},
    {"eval-every", O_EVAL_EVERY, "K", "also evaluate every K steps (K in [1, 2^53])", CLI_V_NONE,
     NULL},
    {"set", O_SET, "NAME=VALUE", "override a param (repeatable)", CLI_V_PARAM, NULL},
    {"seed", O_SEED, "S",
     "seed for initialisation, shuffling and dropout, in [0, 2^64 - 1]\n"
     "(default 0)",
     CLI_V_NONE, NULL},
    {"threads", O_THREADS, "T",
     "total threads (1 to 1024), split evenly between executors\n"
     "(default: all cores)",
     CLI_V_NONE, NULL},
    {"log", O_LOG, "PATH",
     "write JSON lines: a record every --log-every steps (loss,\n"
     "steps/s, examples/s, lr), evaluations, then a final summary\n"
     "(the file appears at PATH when the run ends; until then\n"
     "PATH.tmp.<pid>.*)",
     CLI_V_FILE, NULL},
    {"log-every", O_LOG_EVERY, "K",
     "steps between records in the log and TensorBoard, in [1, 2^53]\n"
     "(default: steps / 1000, rounded down, plus 1)",
     CLI_V_NONE, NULL},
    {"tensorboard", O_TENSORBOARD, "DIR",
     "also write the records as TensorBoard scalars, into\n"
     "DIR/RUN (view: tensorboard --logdir DIR)",
     CLI_V_DIR, NULL},
    {"run-name", O_RUN_NAME, "RUN", "the run's folder in DIR (default: FILE's name and the time)",
     CLI_V_NONE, NULL},
    {"check-numerics", O_NUMERICS, NULL, "stop at the first NaN/Inf, naming the op and its line",
     CLI_V_NONE, NULL},
    {"profile", O_PROFILE, NULL, "time every kernel call; print the costliest nodes at the end",
     CLI_V_NONE, NULL},
    {"devices", O_DEVICES, "SPEC",
     "the devices, e.g. cpu:0-1,gpu:0 (sim:N: simulated GPUs; each\n"
     "kind numbered 0 to 15); default: this machine's",
     CLI_V_NONE, NULL},
    {"no-step-graphs", O_NO_GRAPHS, NULL,
     "on a GPU, launch each step's calls one by one (no CUDA graphs)", CLI_V_NONE, NULL},
    {"soft-placement", O_SOFT, NULL,
     "run nodes placed on missing devices, or without a kernel there,\n"
     "on cpu:0",
     CLI_V_NONE, NULL},
    {"cpu-as-gpu", O_CPU_AS_GPU, NULL,
     "run what is placed on cpu:N on gpu:(N mod GPUs) instead, data\n"
     "sources excepted (no effect without a GPU)",
     CLI_V_NONE, NULL},
    {"quiet", O_QUIET, NULL, "print only errors and the final summary", CLI_V_NONE, NULL},
    {"checkpoint", O_CKPT, "PATH", "save a checkpoint (safetensors) to PATH at the end", CLI_V_FILE,
     NULL},
    {"checkpoint-every", O_CKPT_EVERY, "K",
     "also save it every K steps, K in [1, 2^53] (needs --checkpoint)", CLI_V_NONE, NULL},
    {"restore", O_RESTORE, "PATH",
     "resume from a checkpoint: variables, optimizer slots, step and\n"
     "data positions; training continues from its step",
     CLI_V_FILE, NULL},
    {"init-from", O_INIT_FROM, "PATH",
     "load only the trainable weights of a checkpoint; start at step 0", CLI_V_FILE, NULL},
    {"allow-missing", O_ALLOW_MISSING, NULL,
     "variables absent from the checkpoint keep their initial values", CLI_V_NONE, NULL},
    {"distributed", O_DISTRIBUTED, "MODE",
     "train over the processes mpirun started (Open MPI): sync\n"
     "averages gradients every step (P processes of batch B train\n"
     "as one of batch P*B); async shares the variables through rank 0\n"
     "without waiting (Hogwild! across processes)",
     CLI_V_WORDS, "sync async"},
    {"sync-every", O_SYNC_EVERY, "K",
     "with --distributed async: average the variables every K steps\n"
     "instead (K in [1, 2^31 - 1])",
     CLI_V_NONE, NULL},
    {"backup", O_BACKUP, "B",
     "with --distributed sync over P processes: each step averages\n"
     "the first P - B gradients to arrive and drops the late ones\n"
     "(backup workers; B in [0, P - 1])",
     CLI_V_NONE, NULL},
};

const cli_spec cli_train_spec = {
    "",
    "FILE --steps N [options]",
    "train the model of a .graph file: run a target (by default the last .minimize())\n"
    "for N steps, report progress, evaluate, checkpoint",
    NULL,
    train_opts_table,
    sizeof train_opts_table / sizeof *train_opts_table,
    "*.graph",
    "Long options are spelled in full: a prefix (--step) is an error, not an abbreviation.\n"
    "Numbers are decimal digits only (no sign, spaces or suffix); one out of its range\n"
    "is an error (exit 2).  2^53 = 9007199254740992.\n"
    "Below 1 step/s the progress line shows seconds per step (s/step) instead.\n"
    "Ctrl-C or SIGTERM stops training after the step in flight (cancelling an --eval pass in\n"
    "flight), saves --checkpoint, completes the log and the TensorBoard file, and exits 130\n"
    "(143 for SIGTERM; no final evaluation); a second one kills.\n",
};

/* Every number option: decimal digits only, checked against its range. */
typedef struct num_opt {
    int id;
    const char *name;
    uint64_t min, max;
} num_opt;

static const num_opt num_opts[] = {
    {O_STEPS, "--steps", 0, GR_MAX_STEPS},
    {O_EXECUTORS, "--executors", 1, TRAIN_MAX_EXECUTORS},
    {O_EVAL_EVERY, "--eval-every", 1, GR_MAX_STEPS},
    {O_SEED, "--seed", 0, UINT64_MAX},
    {O_THREADS, "--threads", 1, TRAIN_MAX_THREADS},
    {O_LOG_EVERY, "--log-every", 1, GR_MAX_STEPS},
    {O_CKPT_EVERY, "--checkpoint-every", 1, GR_MAX_STEPS},
    {O_SYNC_EVERY, "--sync-every", 1, INT_MAX},
    {O_MAX_STALENESS, "--max-staleness", 0, INT_MAX},
    {O_BACKUP, "--backup", 0, INT_MAX},
};

static const num_opt *find_num_opt(int id)
{
    for (size_t i = 0; i < sizeof num_opts / sizeof *num_opts; i++)
        if (num_opts[i].id == id) return &num_opts[i];
    return NULL;
}

/* No sign, space, base prefix or trailing text: what strtoull would
 * otherwise accept ("-1" as 2^64 - 1, " 7", "7x") is refused. */
static int parse_num(const num_opt *n, const char *s, uint64_t *out)
{
    const char *why = "not a decimal integer";
    if (*s && strspn(s, "0123456789") == strlen(s)) {
        errno = 0;
        *out = strtoull(s, NULL, 10);
        if (errno != ERANGE && *out >= n->min && *out <= n->max) return 0;
        why = "out of range";
    }
    fprintf(stderr, "graphrun: error: %s '%.64s': %s; %s takes an integer in [%llu, %llu]\n",
            n->name, s, why, n->name, (unsigned long long)n->min, (unsigned long long)n->max);
    return 2;
}

static void set_num(train_opts *o, int id, uint64_t v)
{
    switch (id) {
    case O_STEPS:
        o->steps = (long)v;
        break;
    case O_EXECUTORS:
        o->executors = (int)v;
        break;
    case O_EVAL_EVERY:
        o->eval_every = (long)v;
        break;
    case O_SEED:
        o->sess.seed = v;
        break;
    case O_THREADS:
        o->sess.threads = (int)v;
        break;
    case O_LOG_EVERY:
        o->log_every = (long)v;
        break;
    case O_CKPT_EVERY:
        o->ckpt_every = (long)v;
        break;
    case O_MAX_STALENESS:
        o->max_staleness = (long)v;
        break;
    case O_BACKUP:
        o->sess.backup = (int)v;
        break;
    default:
        o->sess.sync_every = (int)v;
        break;
    }
}

static int bad_usage(const char *msg, const char *arg)
{
    return cli_usage_error(&cli_train_spec, "%s%s%s", msg, arg ? " " : "", arg ? arg : "");
}

/* The name of option c when it takes a path (never empty), else NULL. */
static const char *path_opt_name(int c)
{
    switch (c) {
    case O_LOG:
        return "--log";
    case O_TENSORBOARD:
        return "--tensorboard";
    case O_CKPT:
        return "--checkpoint";
    case O_RESTORE:
        return "--restore";
    case O_INIT_FROM:
        return "--init-from";
    default:
        return NULL;
    }
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
    if (o->sess.backup && o->comp.distributed != GR_DIST_SYNC)
        return bad_usage("--backup needs --distributed sync", NULL);
    const char *ssp = o->max_staleness >= 0 ? "--max-staleness" : "--stale-lr";
    if ((o->max_staleness >= 0 || o->sess.stale_lr) && o->comp.distributed &&
        (o->comp.distributed != GR_DIST_ASYNC || o->sess.sync_every))
        return cli_usage_error(&cli_train_spec,
                               "%s with --distributed needs async without --sync-every: sync "
                               "ranks never apply a stale update, and --sync-every K already "
                               "waits for every rank every K steps",
                               ssp);
    if (o->comp.distributed && (o->executors > 1 || o->n_targets > 1))
        return bad_usage("--distributed runs one executor of one target per process; give "
                         "each process more cores with --threads, or start more processes",
                         NULL);
    return 0;
}

/* --slow W:F: a worker index and a factor in [1, 1000]. */
static int parse_slow(const char *s, train_opts *o)
{
    char *end;
    errno = 0;
    unsigned long w = strtoul(s, &end, 10);
    if (end == s || *end != ':' || !(s[0] >= '0' && s[0] <= '9') || errno || w > INT_MAX) return -1;
    const char *f = end + 1;
    double x = strtod(f, &end);
    if (end == f || *end || !(f[0] >= '0' && f[0] <= '9') || !(x >= 1 && x <= 1000)) return -1;
    o->slow_worker = (int)w, o->slow_factor = x;
    return 0;
}

/* --max-staleness, --slow and --stale-lr act on the concurrent workers
 * (train_async.c): executors x targets of them; --slow with --distributed
 * on a rank (cli_mpi_check, once the ranks are known). */
static int check_worker_opts(const train_opts *o)
{
    if (o->comp.distributed) return 0;
    int workers = (o->executors > 1 ? o->executors : 1) * (o->n_targets > 1 ? o->n_targets : 1);
    const char *which = o->max_staleness >= 0 ? "--max-staleness"
                        : o->slow_worker >= 0 ? "--slow"
                        : o->sess.stale_lr    ? "--stale-lr"
                                              : NULL;
    if (which && workers < 2)
        return cli_usage_error(&cli_train_spec,
                               "%s acts on concurrent workers: give --executors K (K >= 2) or "
                               "several --target",
                               which);
    if (o->slow_worker >= workers)
        return cli_usage_error(&cli_train_spec,
                               "--slow %d:...: there are %d workers, numbered 0 to %d",
                               o->slow_worker, workers, workers - 1);
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

int parse_train_opts(int argc, char **argv, train_opts *o)
{
    const num_opt *num;
    uint64_t v;
    int c;
    o->steps = -1;
    o->max_staleness = -1;
    o->slow_worker = -1;
    optind = 1;
    while ((c = cli_getopt(argc, argv, &cli_train_spec)) != CLI_OPT_END) {
        if (c == CLI_OPT_HELP) return -1;
        if (c == CLI_OPT_BAD) return 2;
        if ((num = find_num_opt(c)) && parse_num(num, optarg, &v)) return 2;
        const char *path_opt = path_opt_name(c);
        if (path_opt && !*optarg) /* --tensorboard '' would write to /RUN */
            return bad_usage(path_opt, "needs a path, got an empty one");
        if (num) {
            set_num(o, c, v);
            continue;
        }
        switch (c) {
        case O_TARGET:
            if (o->n_targets == MAX_TARGETS) return bad_usage("too many --target", NULL);
            o->targets[o->n_targets++] = optarg;
            o->target = o->targets[0];
            break;
        case O_LOCKING:
            o->sess.locking = 1;
            break;
        case O_STALE_LR:
            o->sess.stale_lr = 1;
            break;
        case O_EVAL:
            if (o->n_evals == MAX_EVALS) return bad_usage("too many --eval", NULL);
            o->evals[o->n_evals++] = optarg;
            break;
        case O_SET:
            if (cli_add_param(&o->params, optarg))
                return bad_usage("--set needs NAME=VALUE, got", optarg);
            break;
        case O_LOG:
            o->log_path = optarg;
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
        case O_CPU_AS_GPU:
            o->comp.cpu_as_gpu = 1;
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
        case O_SLOW:
            if (parse_slow(optarg, o))
                return bad_usage("--slow takes W:F, a worker and a factor in [1, 1000], not",
                                 optarg);
            break;
        default:
            break;
        }
    }
    if (optind != argc - 1)
        return bad_usage(optind < argc ? "expected one FILE, got more" : "no FILE given", NULL);
    o->file = argv[optind];
    if (o->steps < 0) return bad_usage("--steps N is required", NULL);
    o->comp.params = o->params.v;
    o->comp.n_params = o->params.n;
    if (o->comp.distributed && o->max_staleness >= 0) /* the ranks' bound is the session's */
        o->sess.bounded = 1, o->sess.max_staleness = (int)o->max_staleness;
    return check_dist_opts(o) || check_worker_opts(o) ? 2 : check_ckpt_opts(o);
}
