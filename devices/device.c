/* device.c - what every device shares: running one kernel call. */
#include <pthread.h>

#include "device.h"

int dev_kern_run(kernel_fn fn, const kern_args *a)
{
    pthread_mutex_t *m = a->lock;
    if (m) pthread_mutex_lock(m);
    int r = fn(a);
    if (m) pthread_mutex_unlock(m);
    return r;
}
