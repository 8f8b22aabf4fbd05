/* device.c - what every device shares: running one kernel call. */
#include <stdio.h>
#include <pthread.h>

#include "device.h"

int dev_kern_run(kernel_fn fn, const kern_args *a)
{
    dev_var_lock *l = a->lock;
    if (!l) return fn(a);
    pthread_mutex_lock(&l->mu);
    if (l->ev) l->dev->vt->event_wait(l->dev, a->queue, l->ev);
    int r = fn(a);
    if (l->ev) l->dev->vt->event_record(l->dev, l->ev, a->queue);
    pthread_mutex_unlock(&l->mu);
    return r;
}

/* "[2,7]": where flat index i sits in a tensor of type t. */
static void index_str(const ir_type *t, int64_t i, char *buf, size_t n)
{
    int64_t at[IR_MAX_DIMS];
    for (int d = t->rank - 1; d >= 0; d--) {
        at[d] = t->dim[d] ? i % t->dim[d] : 0;
        i = t->dim[d] ? i / t->dim[d] : 0;
    }
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->rank && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)at[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

void dev_fault_id(kern_fault *f, const char *what, int id, const ir_type *t, int64_t i,
                  int64_t limit)
{
    char at[96];
    index_str(t, i, at, sizeof at);
    snprintf(f->msg, sizeof f->msg, "%s %d at %s is outside [0, %lld)", what, id, at,
             (long long)limit);
}
