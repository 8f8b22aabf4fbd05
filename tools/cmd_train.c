/* cmd_train.c - `graphrun FILE --steps N`: train a target, report progress,
 * evaluate, summarise.  Uses only the public API (include/graphrun.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train.h"

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
        double busy = o->comp.distributed ? cli_mpi_busy(s) : 0;
        if (gr_run(s, o->target, NULL, 0, f, nf, st) != GR_OK) {
            if (pg->tty && !o->quiet) fputc('\n', stderr);
            cli_print_status(st);
            return -1;
        }
        if (o->comp.distributed) cli_mpi_slow(o, s, busy);
        if (o->sess.backup) step = (long)gr_session_step(s); /* rank 0's, taken (may skip) */
        int last = step == o->steps || trep_interrupted();
        if (trep_report(o, pg, step, loss, lr, last) < 0) return -1;
        if (last) break;
        int ev = o->eval_every && step % o->eval_every == 0 ? trep_run_evals(o, s, vals, st) : -2;
        if (ev == -1 || (ev == 0 && trep_evals_done(o, pg, vals, step, 0) < 0)) return -1;
        if (o->ckpt_every && step % o->ckpt_every == 0 && !trep_interrupted() &&
            trep_save_checkpoint(o, s, st) < 0) /* interrupted: the caller saves */
            return -1;
        if (trep_interrupted()) { /* during the evaluation or the save: no other step */
            if (trep_report(o, pg, step, loss, lr, 1) < 0) return -1; /* the last record */
            break;
        }
    }
    *secs = trep_now() - pg->t0;
    *last_loss = loss;
    return 0;
}

/* --distributed: examples/s of all the processes (with backup workers,
 * of the gradients averaged), and the share of the time this one spent
 * communicating. */
static void dist_summary(const gr_session *s, const gr_target_info *ti, int backup, double secs,
                         double sps)
{
    int rank, size;
    double comm;
    gr_session_dist_info(s, &rank, &size, &comm);
    if (size < 2 && comm == 0) return;
    printf("distributed: %d processes, %.0f examples/s in all, communication %.2fs (%.1f%% of "
           "rank 0's time)\n",
           size, sps * (double)ti->batch * (size - backup), comm, secs > 0 ? 100 * comm / secs : 0);
}

/* Several executors or targets run at once (train_async.c). */
static int concurrent(const train_opts *o)
{
    return o->executors > 1 || o->n_targets > 1;
}

/* The step training ended at (a restore may have started past --steps). */
static long last_step(const train_opts *o)
{
    return o->steps > o->start ? o->steps : o->start;
}

static int summary(const train_opts *o, const gr_session *s, const gr_target_info *ti, double secs,
                   float loss, const double *vals, trep_progress *pg)
{
    long done = o->steps > o->start ? o->steps - o->start : 0;
    double sps = secs > 0 ? (double)done / secs : 0;
    if (o->silent) return 0;
    printf("trained");
    for (int i = 0; i < o->n_targets; i++) printf("%s %s", i ? "," : "", o->targets[i]);
    printf(": %ld steps in %.2fs, %.1f steps/s", done, secs, sps);
    if (ti->loss) printf(", final loss %.4f", (double)loss);
    if (concurrent(o) || o->comp.distributed) { /* one executor's updates are never stale */
        char stale[96];
        trep_staleness(pg, stale, sizeof stale);
        fputs(stale, stdout);
    }
    printf("\n");
    for (int i = 0; i < o->n_evals; i++) printf("%s = %.4f\n", o->evals[i], vals[i]);
    if (o->comp.distributed) dist_summary(s, ti, o->sess.backup, secs, sps);
    return trep_log_done(o, pg, done, last_step(o), sps, loss, vals);
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

/* Every --eval can count all its examples (a last partial batch too):
 * checked before training, not after it (printed). */
static int evals_possible(const train_opts *o, gr_session *s, gr_status *st)
{
    for (int i = 0; i < o->n_evals; i++)
        if (gr_eval_check(s, o->evals[i], st) != GR_OK) {
            cli_print_status(st);
            return -1;
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
    if (gr_session_new(prog, &o->sess, &s, st) != GR_OK) {
        cli_print_status(st);
        if (o->comp.distributed) cli_mpi_session_failed(st);
    } else if (run && !o->quiet)
        fprintf(stderr, "tensorboard: writing to %s (view: tensorboard --logdir %s)\n", run,
                o->tb_dir);
    pg->tb = run ? s : NULL;
    pg->sess = s;
    o->sess.tensorboard_dir = NULL;
    free(run);
    return s;
}

/* Ctrl-C or SIGTERM stopped the run after a step: the checkpoint unless
 * saved already (and not with --distributed, whose processes may stop at
 * different steps), then 128 + the signal's number, as a shell reports a
 * process it killed. */
static int interrupted(const train_opts *o, gr_session *s, int saved, gr_status *st)
{
    fprintf(stderr, "graphrun: interrupted at step %llu\n", (unsigned long long)gr_session_step(s));
    if (o->ckpt_path && !saved && !o->comp.distributed && trep_save_checkpoint(o, s, st) < 0)
        return 1;
    return 128 + trep_interrupted();
}

/* After the last step: the checkpoint, the final evaluation, the summary.
 * The checkpoint comes first, so a resumed run continues exactly where an
 * uninterrupted one would be.  A signal during them is honoured when the
 * save in flight returns, and cancels the evaluation in flight. */
static int finish(const train_opts *o, gr_session *s, const gr_target_info *ti, double secs,
                  float loss, trep_progress *pg, gr_status *st)
{
    double vals[MAX_EVALS] = {0};
    if (o->ckpt_path && trep_save_checkpoint(o, s, st) < 0) return 1;
    if (!trep_interrupted() && trep_run_evals(o, s, vals, st) < 0) return 1;
    if (trep_interrupted()) return interrupted(o, s, 1, st);
    if (trep_evals_done(o, pg, vals, last_step(o), 1) < 0 ||
        summary(o, s, ti, secs, loss, vals, pg) < 0)
        return 1;
    return !o->silent && trep_profile(s, o->steps - o->start, secs, pg) < 0;
}

/* Before anything is written: no output is one of the run's inputs (the
 * model, its data, the checkpoint it starts from unless that is also the
 * --checkpoint target), and no two outputs are one file. */
static int check_files(const train_opts *o, const gr_program *prog)
{
    int n = gr_program_file_count(prog), n_in = 0;
    cli_file *ins = calloc((size_t)n + 1, sizeof *ins);
    if (!ins) return fputs("graphrun: error: out of memory\n", stderr), -1;
    for (int k = 0; k < n; k++) /* the .graph file comes first */
        ins[n_in++] = (cli_file){gr_program_file(prog, k), k ? "the data file" : "the model file"};
    const char *from = o->restore_path ? o->restore_path : o->init_path;
    if (from && !(o->ckpt_path && cli_same_file(from, o->ckpt_path)))
        ins[n_in++] = (cli_file){from, o->restore_path ? "--restore" : "--init-from"};
    const cli_file outs[] = {{o->log_path, "--log"}, {o->ckpt_path, "--checkpoint"}};
    int rc = cli_check_outputs(outs, 2, ins, n_in);
    free(ins);
    return rc;
}

static int train_session(train_opts *o, gr_program *prog, gr_status *st)
{
    gr_target_info ti = {0};
    double secs = 0;
    float loss = 0;
    trep_progress pg = {.tty = isatty(2)};
    int bad = check_evals(o, prog, st);
    if (bad == -2) return CLI_USAGE;
    if (bad < 0 || target_infos(o, prog, &ti, st) < 0) { /* a name the model lacks: usage */
        cli_print_status(st);
        return cli_exit_code(gr_status_code(st));
    }
    if (check_files(o, prog) < 0) return CLI_USAGE;
    /* --checkpoint must be writable now, not only after the run */
    if ((o->ckpt_path && !o->silent && cli_probe_output(o->ckpt_path) < 0) ||
        trep_log_open(o, &pg) < 0)
        return 1;
    gr_session *s = open_session(o, prog, &pg, st);
    if (!s || cli_mpi_agree(o, s, st) < 0 || evals_possible(o, s, st) < 0) {
        gr_output_discard(pg.log);
        gr_session_free(s);
        return 1;
    }
    trep_catch_interrupt();
    trep_cancel_evals_of(o->comp.distributed ? NULL : s);
    int rc = restore_checkpoint(o, s, st) < 0 ||
             (concurrent(o) ? train_async(o, s, &secs, &loss, &pg, st)
                            : train_loop(o, s, &ti, &secs, &loss, &pg, st)) < 0 ||
             cli_mpi_done(o, s, st) < 0;
    if (!rc)
        rc = trep_interrupted() ? interrupted(o, s, 0, st) : finish(o, s, &ti, secs, loss, &pg, st);
    if (pg.tb && gr_session_scalar_flush(s, st) != GR_OK) { /* the last TensorBoard values */
        cli_print_status(st);
        if (!rc) rc = 1;
    }
    if (trep_log_close(&pg) < 0)
        rc = 1; /* the log is complete at its path, whatever ended the run */
    trep_cancel_evals_of(NULL);
    gr_session_free(s);
    return rc;
}

/* --distributed: MPI starts; only rank 0 reports (the others print errors).
 * 0, 1 (MPI did not start) or 2 (a usage error). */
static int start_distributed(train_opts *o)
{
    static char prefix[32];
    int rank = 0, size = 1;
    if (!o->comp.distributed) {
        cli_mpi_note();
        return 0;
    }
    if (cli_mpi_start(NULL, NULL, &rank, &size) < 0) return 1;
    snprintf(prefix, sizeof prefix, "rank %d: ", rank);
    cli_rank_prefix = prefix;
    if (rank != 0) o->quiet = o->silent = 1, o->log_path = NULL, o->tb_dir = NULL;
    return cli_mpi_check(o, size);
}

int cmd_train(int argc, char **argv)
{
    train_opts o = {0};
    int rc = parse_train_opts(argc, argv, &o);
    if (rc) return rc < 0 ? CLI_OK : rc;
    if ((rc = start_distributed(&o)) != 0) return cli_mpi_end(rc);
    gr_status *st = gr_status_new();
    gr_program *prog = NULL;
    gr_code c = gr_compile_file(o.file, &o.comp, &prog, st);
    if (c != GR_OK) { /* a missing model file is usage (2), as in every command */
        cli_print_status(st);
        gr_status_free(st);
        return cli_mpi_end(cli_exit_code(c));
    }
    if (!o.silent) fprintf(stderr, "%s", gr_program_warnings(prog));
    if (!o.target) o.target = o.targets[o.n_targets++] = gr_program_default_target(prog);
    if (o.executors < 1) o.executors = 1;
    o.sess.executors = o.executors * o.n_targets;
    if (!o.target) {
        fprintf(stderr, "graphrun: %s has no .minimize() target; name one with --target\n", o.file);
        rc = CLI_USAGE;
    } else
        rc = train_session(&o, prog, st);
    gr_program_free(prog);
    gr_status_free(st);
    return cli_mpi_end(rc);
}
