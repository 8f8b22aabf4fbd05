/* schedule.c - mpi_schedule, the embedding side of tests/mpi/run.sh's
 * schedule cases: two ranks train tests/mpi/tiny.graph through the public
 * API, and one of them leaves the collective schedule
 * (docs/distributed.md, "Failure"); with backup workers, any number of
 * ranks.
 *
 *   mpi_schedule MODEL CASE [MODE [BACKUP [TARGET]]]
 *   CASE  together  both ranks: 10 steps, an evaluation, a save, a restore
 *         leave     rank 1 frees its session after 3 steps; rank 0 goes on to 10
 *         leave-others  every rank but 0 does
 *         stop      rank 1 stops calling after 3 steps (sleeps for a minute)
 *         eval      rank 1 evaluates after 3 steps while rank 0 trains
 *         target    rank 1 trains another target (other lengths to average)
 *         agree     rank 1 gives gr_session_dist_agree another value
 *         replicas  30 steps, the last rank 4 times slower; then rank 0
 *                   prints "replicas: identical" when every rank's variables
 *                   are rank 0's bit for bit, else "replicas: rank R differs",
 *                   and "replicas: the last rank ran N times"
 *         stall     the last rank stops calling after 3 steps; the others
 *                   train to 10 and evaluate
 *         stall-others  every rank but 0 stops after 3 steps
 *         stall-root    rank 0 stops after 3 steps
 *         stale     (tests/mpi/stale.graph) rank 1 takes one step of
 *                   train_slow while rank 0 steps train every 10 ms; rank 1
 *                   prints "stale: K" (its update's staleness) then "stale:
 *                   scaled" when v's shared change is its own times
 *                   1 / K (K 255, the counts' last bucket: under half its
 *                   own), "stale: whole" when it is its own, bit for bit
 *   MODE  sync (default), async, every (async with sync_every 2), bound
 *         (async, max_staleness 1) or stale-lr (async, stale_lr)
 *   BACKUP  backup workers (sync; default 0); TARGET default train
 *
 * Training runs until the session's step reaches a number, not a number of
 * runs: with backup workers a rank may skip steps (docs/distributed.md).
 *
 * A failed call prints "rank R: MESSAGE" and ends the job (MPI_Abort), as
 * the header asks.  A gr_session_dist_agree difference, which every rank
 * finds, is printed by each and ends each cleanly with exit status 3. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graphrun.h"

static int rank, size;

static void die(const gr_status *st)
{
    fprintf(stderr, "rank %d: %s", rank, gr_status_message(st));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static const char *target = "train";

static void train(gr_session *s, uint64_t until, gr_status *st)
{
    while (gr_session_step(s) < until)
        if (gr_run(s, target, NULL, 0, NULL, 0, st) != GR_OK) die(st);
}

/* Both ranks: the same calls, every kind of collective. */
static void together(gr_session *s, gr_status *st)
{
    double loss = 0;
    train(s, 10, st);
    if (gr_eval(s, "loss", &loss, st) != GR_OK || gr_session_save(s, "together.st", st) != GR_OK ||
        gr_session_restore(s, "together.st", NULL, st) != GR_OK)
        die(st);
    train(s, 12, st);
}

static uint64_t fnv(uint64_t h, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Every variable's bytes, hashed. */
static uint64_t variables_hash(gr_session *s, const gr_program *p, gr_status *st)
{
    uint64_t h = 14695981039346656037ull;
    for (int k = 0; k < gr_program_variable_count(p); k++) {
        gr_tensor *t = NULL;
        if (gr_variable_get(s, gr_program_variable_name(p, k), &t, st) != GR_OK) die(st);
        h = fnv(h, gr_tensor_data(t), gr_tensor_bytes(t));
        gr_tensor_free(t);
    }
    return h;
}

/* Trains (the last rank sleeping 3 times its run's time after each but
 * the first, which opens the data, so that it falls behind whatever the
 * build's speed), then compares. */
static void replicas(gr_session *s, const gr_program *p, gr_status *st)
{
    int runs = 0;
    for (; gr_session_step(s) < 30; runs++) {
        double t = MPI_Wtime();
        if (gr_run(s, target, NULL, 0, NULL, 0, st) != GR_OK) die(st);
        if (rank == size - 1 && runs) usleep((useconds_t)(3e6 * (MPI_Wtime() - t)));
    }
    uint64_t mine = variables_hash(s, p, st), *all = calloc((size_t)size, sizeof *all);
    MPI_Gather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int odd = 0;
    for (int r = 1; r < size && rank == 0 && !odd; r++) odd = all[r] != all[0] ? r : 0;
    if (rank == 0 && odd) printf("replicas: rank %d differs\n", odd);
    if (rank == 0 && !odd) printf("replicas: identical\n");
    MPI_Bcast(&runs, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
    if (rank == 0) printf("replicas: the last rank ran %d times\n", runs);
    free(all);
}

/* Ranks stop calling (sleep for a minute) after 3 steps; the others train
 * to 10 and evaluate. */
static void stall(gr_session *s, const char *what, gr_status *st)
{
    double loss = 0;
    int stops = strcmp(what, "stall-root") == 0     ? rank == 0
                : strcmp(what, "stall-others") == 0 ? rank != 0
                                                    : rank == size - 1;
    train(s, stops ? 3 : 10, st);
    if (stops) sleep(60);
    if (gr_eval(s, "loss", &loss, st) != GR_OK) die(st);
}

static float variable_v(gr_session *s, gr_status *st)
{
    gr_tensor *t = NULL;
    if (gr_variable_get(s, "v", &t, st) != GR_OK) die(st);
    float v = ((const float *)gr_tensor_data(t))[0];
    gr_tensor_free(t);
    return v;
}

/* Rank 1's step against rank 0's, then v's change: rank 1's own (its local
 * copy after its step) against the shared one (after the evaluation's
 * refresh); rank 0 never changes v. */
static void stale(gr_session *s, gr_status *st)
{
    double loss = 0;
    int done = 0;
    gr_staleness n = {0}, zero = {0};
    uint64_t k = 0;
    if (rank == 1) {
        if (gr_run(s, "train_slow", NULL, 0, NULL, 0, st) != GR_OK) die(st);
        MPI_Send(&done, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
    while (rank == 0 && !done) {
        if (gr_run(s, "train", NULL, 0, NULL, 0, st) != GR_OK) die(st);
        usleep(10000);
        MPI_Iprobe(1, 7, MPI_COMM_WORLD, &done, MPI_STATUS_IGNORE);
    }
    if (rank == 0) MPI_Recv(&done, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    float own = variable_v(s, st);
    if (gr_eval(s, "loss", &loss, st) != GR_OK) die(st);
    float shared = variable_v(s, st);
    gr_session_staleness(s, &n); /* rank 0's updates are 0 or 1 behind */
    gr_staleness_between(&n, &zero, NULL, NULL, &k);
    if (rank != 1) return;
    printf("stale: %llu\n", (unsigned long long)k);
    if (shared == own) printf("stale: whole\n");
    int capped = k == GR_STALENESS_BUCKETS - 1; /* 255 or more: s itself is not counted */
    if (k > 1 && (capped ? fabsf(shared) * 2 < fabsf(own) : shared == own * (1.0f / (float)k)))
        printf("stale: scaled\n");
}

static int run_case(gr_session *s, const gr_program *p, const char *what, gr_status *st)
{
    double loss = 0;
    if (strcmp(what, "stale") == 0) {
        stale(s, st);
        return 0;
    }
    if (strcmp(what, "together") == 0) {
        together(s, st);
        return 0;
    }
    if (strcmp(what, "replicas") == 0) {
        replicas(s, p, st);
        return 0;
    }
    if (strncmp(what, "stall", 5) == 0) {
        stall(s, what, st);
        return 0;
    }
    if (strcmp(what, "agree") == 0) {
        if (gr_session_dist_agree(s, "--colour", rank ? "blue" : "red", st) == GR_OK) return 0;
        fprintf(stderr, "rank %d: %s", rank, gr_status_message(st));
        return 3;
    }
    if (rank == 1 && strcmp(what, "target") == 0) target = "train_b";
    int leaves =
        strcmp(what, "leave-others") == 0 ? rank != 0 : rank == 1 && strcmp(what, "target") != 0;
    train(s, leaves ? 3 : 10, st);
    if (rank == 1 && strcmp(what, "stop") == 0) sleep(60);
    if (rank == 1 && strcmp(what, "eval") == 0 && gr_eval(s, "loss", &loss, st) != GR_OK) die(st);
    return 0;
}

int main(int argc, char **argv)
{
    int level = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &level);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        fprintf(stderr, "usage: mpi_schedule MODEL CASE [sync|async|every [BACKUP [TARGET]]]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argc > 3 ? argv[3] : "sync";
    gr_compile_options co = {.distributed = strcmp(mode, "sync") ? GR_DIST_ASYNC : GR_DIST_SYNC};
    gr_session_options so = {.threads = 1,
                             .sync_every = strcmp(mode, "every") ? 0 : 2,
                             .backup = argc > 4 ? atoi(argv[4]) : 0,
                             .bounded = strcmp(mode, "bound") == 0,
                             .max_staleness = 1,
                             .stale_lr = strcmp(mode, "stale-lr") == 0};
    if (argc > 5) target = argv[5];
    gr_status *st = gr_status_new();
    gr_program *p = NULL;
    gr_session *s = NULL;
    if (gr_compile_file(argv[1], &co, &p, st) != GR_OK || gr_session_new(p, &so, &s, st) != GR_OK)
        die(st);
    int rc = run_case(s, p, argv[2], st);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
    MPI_Finalize();
    return rc;
}
