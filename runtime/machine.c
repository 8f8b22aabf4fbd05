/* machine.c - which devices exist, and device objects for them.
 *
 * A machine is a number of CPU devices (cpu:0..cpu:N-1, logical: each is
 * its own partition with its own threads) and of GPUs, of one kind: CUDA,
 * or the simulated GPU (devices/sim), which stands in for gpu:N on machines
 * without one.  The machine a process runs on is probed once: LIM_DEVICES
 * CPU devices (compiler/limits.h), and GR_SIM_GPU=N in the environment
 * gives N simulated GPUs (tests use it); otherwise the CUDA device count.
 * A spec (gr_compile_options.devices, `--devices`) replaces the probe, so
 * that goldens and tests say the same on any host:
 *
 *     cpu:0-1,gpu:0        two CPU devices and one real GPU
 *     cpu:0,sim:0-1        one CPU device and two simulated GPUs */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../devices/sim/sim.h"
#include "modules.h"
#include "runtime.h"

/* The CUDA device is a module (modules.h), opened by the first probe or
 * spec that asks for a real GPU. */
static int cuda_gpus(void)
{
    const cuda_module *m = rt_cuda_module(NULL);
    return m ? m->device_count() : 0;
}

static const kernel_fn *cuda_table(void)
{
    const cuda_module *m = rt_cuda_module(NULL);
    return m ? m->kernels : NULL;
}

/* NULL, or why gpu:N cannot be used (the CUDA device itself aborts when
 * cuBLAS is missing: asked first, it is an error instead). */
static const char *cuda_unusable(void)
{
    const char *why = NULL;
    const cuda_module *m = rt_cuda_module(&why);
    return m ? m->blas_load() : why;
}

static device_obj *cuda_new(int dev)
{
    return rt_cuda_module(NULL)->device_new(dev);
}

static rt_machine probed;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* At most LIM_DEVICES of a kind: a machine with more GPUs shows its first
 * LIM_DEVICES; GR_SIM_GPU=N asks for N in [0, LIM_DEVICES] (above: the
 * limit; anything but a number: none). */
static int clamp_devices(long n)
{
    return n < 0 ? 0 : n > LIM_DEVICES ? LIM_DEVICES : (int)n;
}

static void probe(void)
{
    const char *sim = getenv("GR_SIM_GPU");
    probed.n_cpu = LIM_DEVICES;
    if (sim && *sim) {
        char *end;
        long n = strtol(sim, &end, 10);
        probed.n_gpu = *end ? 0 : clamp_devices(n);
        probed.gpu = probed.n_gpu > 0 ? MACHINE_GPU_SIM : MACHINE_GPU_NONE;
        return;
    }
    probed.n_gpu = clamp_devices(cuda_gpus());
    probed.gpu = probed.n_gpu > 0 ? MACHINE_GPU_CUDA : MACHINE_GPU_NONE;
    const char *why = NULL;
    if (!rt_cuda_module(&why) && rt_cuda_built()) probed.gpu_why = why;
}

const rt_machine *machine_probe(void)
{
    pthread_once(&probe_once, probe);
    return &probed;
}

/* "KIND:N" or "KIND:A-B" at *s; advances *s past it.  -1: not that form;
 * -2: a number past the device limit. */
static int parse_item(const char **s, char *kind, size_t nk, int *lo, int *hi)
{
    const char *c = *s, *colon = strchr(c, ':');
    if (!colon || (size_t)(colon - c) >= nk) return -1;
    memcpy(kind, c, (size_t)(colon - c));
    kind[colon - c] = 0;
    char *end;
    long a = strtol(colon + 1, &end, 10), b = a;
    if (end == colon + 1 || a < 0) return -1;
    if (*end == '-') {
        const char *start = end + 1;
        b = strtol(start, &end, 10);
        if (end == start || b < a) return -1;
    }
    if (*end && *end != ',') return -1;
    if (b >= LIM_DEVICES) return -2;
    *lo = (int)a, *hi = (int)b;
    *s = *end ? end + 1 : end;
    return 0;
}

/* Devices are numbered from 0 without holes: a range must start at 0. */
static int add_item(rt_machine *m, const char *kind, int lo, int hi)
{
    if (lo != 0) return -1;
    if (strcmp(kind, "cpu") == 0) {
        m->n_cpu = hi + 1;
        return 0;
    }
    machine_gpu g = strcmp(kind, "gpu") == 0   ? MACHINE_GPU_CUDA
                    : strcmp(kind, "sim") == 0 ? MACHINE_GPU_SIM
                                               : MACHINE_GPU_NONE;
    if (g == MACHINE_GPU_NONE || (m->gpu != MACHINE_GPU_NONE && m->gpu != g)) return -1;
    m->gpu = g;
    m->n_gpu = hi + 1;
    return 0;
}

int machine_parse(const char *spec, rt_machine *m, char *err, size_t errlen)
{
    *m = (rt_machine){.n_cpu = 1};
    const char *s = spec;
    while (*s) {
        char kind[8];
        int lo, hi, r = parse_item(&s, kind, sizeof kind, &lo, &hi);
        if (r == -2) {
            snprintf(err, errlen, "--devices '%s': devices are numbered 0 to %d", spec,
                     LIM_DEVICES - 1);
            return -1;
        }
        if (r < 0 || add_item(m, kind, lo, hi) < 0) {
            snprintf(err, errlen,
                     "--devices '%s': expected a list such as cpu:0-1,gpu:0 (kinds cpu, gpu "
                     "or sim; numbers from 0; one kind of GPU)",
                     spec);
            return -1;
        }
    }
    const char *why = NULL;
    if (m->gpu != MACHINE_GPU_CUDA || rt_cuda_module(&why)) return 0;
    snprintf(err, errlen, "--devices '%s': gpu:N needs CUDA, and %s (sim:N simulates GPUs)", spec,
             why);
    return -1;
}

const kernel_fn *machine_kernels(const rt_machine *m, int dev)
{
    if (IR_DEV_KIND(dev) == DEV_CPU) return cpu_kernels;
    return m->gpu == MACHINE_GPU_SIM ? sim_vtable.kernels : cuda_table();
}

/* gpu:idx of a program compiled for other devices (--devices) than this
 * machine's `have` GPUs. */
static gr_code cuda_lacking(int idx, int have, gr_status *st)
{
    char has[32] = "no GPU";
    if (have == 1) snprintf(has, sizeof has, "only gpu:0");
    if (have > 1) snprintf(has, sizeof has, "only gpu:0 to gpu:%d", have - 1);
    return rt_fail(st, GR_ERR_ARG,
                   "gr_session_new: the program uses gpu:%d, but this machine has %s (it was "
                   "compiled for other devices: --devices)\n",
                   idx, has);
}

static gr_code cuda_open(int dev, device_obj **out, gr_status *st)
{
    int idx = IR_DEV_INDEX(dev);
    const char *why = NULL;
    if (!rt_cuda_module(&why))
        return rt_fail(st, GR_ERR_IO, "gr_session_new: gpu:%d cannot be used: %s\n", idx, why);
    int have = clamp_devices(cuda_gpus());
    if (idx >= have) return cuda_lacking(idx, have, st);
    why = cuda_unusable();
    if (why || !(*out = cuda_new(dev)))
        return rt_fail(st, GR_ERR_IO, "gr_session_new: gpu:%d cannot be used: %s\n", idx,
                       why ? why : "the CUDA device did not open");
    return GR_OK;
}

gr_code machine_device_new(const rt_machine *m, int dev, device_obj **out, gr_status *st)
{
    *out = NULL;
    if (IR_DEV_KIND(dev) == DEV_CPU) {
        *out = cpu_device_new(dev);
        return GR_OK;
    }
    if (m->gpu == MACHINE_GPU_CUDA) return cuda_open(dev, out, st);
    if ((*out = sim_device_new(dev))) return GR_OK;
    return rt_fail(st, GR_ERR_NOMEM,
                   "gr_session_new: cannot reserve the memory of simulated gpu:%d\n",
                   IR_DEV_INDEX(dev));
}

device_obj *machine_devices_find(const rt_devices *d, int dev)
{
    for (int i = 0; i < d->n; i++)
        if (d->obj[i]->id == dev) return d->obj[i];
    fatal("no device object for device %d", dev); /* placement placed nothing else */
}

/* The program may have been compiled for another machine (--devices):
 * a device this one lacks is an error here. */
static gr_code devices_add(const rt_machine *m, rt_devices *d, int dev, gr_status *st)
{
    for (int i = 0; i < d->n; i++)
        if (d->obj[i]->id == dev) return GR_OK;
    gr_code c = machine_device_new(m, dev, &d->obj[d->n], st);
    if (c == GR_OK) d->n++;
    return c;
}

gr_code machine_devices_open(const rt_machine *m, const ir_graph *g, rt_devices *out, gr_status *st)
{
    out->obj = base_xcalloc((size_t)(g->n_vars + g->n_nodes) + 1, sizeof *out->obj);
    out->n = 0;
    gr_code c = devices_add(m, out, IR_DEV(DEV_CPU, 0), st); /* the host: data sources, staging */
    for (int i = 0; c == GR_OK && i < g->n_vars; i++)
        c = devices_add(m, out, g->vars[i].device, st);
    for (int i = 0; c == GR_OK && i < g->n_nodes; i++)
        if (!g->nodes[i].dead) c = devices_add(m, out, g->nodes[i].device, st);
    return c;
}

void machine_devices_close(rt_devices *d)
{
    for (int i = 0; i < d->n; i++) d->obj[i]->vt->close(d->obj[i]);
    free(d->obj);
    d->obj = NULL;
    d->n = 0;
}
