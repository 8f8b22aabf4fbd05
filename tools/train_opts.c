/* train_opts.c - the training command's options: `graphrun FILE --steps N
 * [options]` parsed into a train_opts (train.h), with the help text. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    O_HELP
};

static const char train_usage[] =
    "usage: graphrun FILE --steps N [options]\n"
    "  --steps N          train until step N, in [0, 2^53] (required; with --restore, N\n"
    "                     counts the restored steps too: the run does N - S more)\n"
    "  --target NAME      target to run (default: the last .minimize()); repeat it to run\n"
    "                     several targets at once, one executor each (async towers)\n"
    "  --executors K      K executors (1 to 64) run each target concurrently, sharing\n"
    "                     the variables without locks (Hogwild!); --steps is the total\n"
    "  --locking          every variable update takes that variable's lock\n"
    "  --eval NAME        scalar target evaluated over its data at the end (repeatable)\n"
    "  --eval-every K     also evaluate every K steps (K in [1, 2^53])\n"
    "  --set NAME=VALUE   override a param (repeatable)\n"
    "  --seed S           seed for initialisation, shuffling and dropout, in [0, 2^64 - 1]\n"
    "                     (default 0)\n"
    "  --threads T        total threads (1 to 1024), split evenly between executors\n"
    "                     (default: all cores)\n"
    "  --log PATH         write JSON lines: a record every --log-every steps (loss,\n"
    "                     steps/s, examples/s, lr), evaluations, then a final summary\n"
    "                     (the file appears at PATH when the run ends; until then\n"
    "                     PATH.tmp.<pid>.*)\n"
    "  --log-every K      steps between records in the log and TensorBoard, in [1, 2^53]\n"
    "                     (default: steps / 1000, rounded down, plus 1)\n"
    "  --tensorboard DIR  also write the records as TensorBoard scalars, into\n"
    "                     DIR/RUN (view: tensorboard --logdir DIR)\n"
    "  --run-name RUN     the run's folder in DIR (default: FILE's name and the time)\n"
    "  --check-numerics   stop at the first NaN/Inf, naming the op and its line\n"
    "  --profile          time every kernel call; print the costliest nodes at the end\n"
    "  --devices SPEC     the devices, e.g. cpu:0-1,gpu:0 (sim:N: simulated GPUs; each\n"
    "                     kind numbered 0 to 15); default: this machine's\n"
    "  --no-step-graphs   on a GPU, launch each step's calls one by one (no CUDA graphs)\n"
    "  --soft-placement   run nodes placed on missing devices, or without a kernel there, on "
    "cpu:0\n"
    "  --cpu-as-gpu       run what is placed on cpu:N on gpu:(N mod GPUs) instead, data\n"
    "                     sources excepted (no effect without a GPU)\n"
    "  --quiet            print only errors and the final summary\n"
    "  --checkpoint PATH  save a checkpoint (safetensors) to PATH at the end\n"
    "  --checkpoint-every K  also save it every K steps, K in [1, 2^53] (needs --checkpoint)\n"
    "  --restore PATH     resume from a checkpoint: variables, optimizer slots, step and\n"
    "                     data positions; training continues from its step\n"
    "  --init-from PATH   load only the trainable weights of a checkpoint; start at step 0\n"
    "  --allow-missing    variables absent from the checkpoint keep their initial values\n"
    "  --distributed MODE train over the processes mpirun started (Open MPI): sync\n"
    "                     averages gradients every step (P processes of batch B train\n"
    "                     as one of batch P*B); async shares the variables through rank 0\n"
    "                     without waiting (Hogwild! across processes)\n"
    "  --sync-every K     with --distributed async: average the variables every K steps\n"
    "                     instead (K in [1, 2^31 - 1])\n"
    "Numbers are decimal digits only (no sign, spaces or suffix); one out of its range\n"
    "is an error (exit 2).  2^53 = 9007199254740992.\n"
    "Ctrl-C or SIGTERM stops training after the step in flight (cancelling an --eval pass in\n"
    "flight), saves --checkpoint, completes the log and the TensorBoard file, and exits 130\n"
    "(143 for SIGTERM; no final evaluation); a second one kills.\n";

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
    default:
        o->sess.sync_every = (int)v;
        break;
    }
}

static int bad_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "graphrun: %s%s%s\n%s", msg, arg ? " " : "", arg ? arg : "", train_usage);
    return 2;
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

int parse_train_opts(int argc, char **argv, train_opts *o)
{
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
                                          {"cpu-as-gpu", 0, 0, O_CPU_AS_GPU},
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
    const num_opt *num;
    uint64_t v;
    int c;
    o->steps = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":", longs, NULL)) != -1) {
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
