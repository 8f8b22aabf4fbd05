/* init.c - variable initialisers.  Each variable draws from its own stream,
 * seeded by (session seed, full variable name), so values do not depend on
 * declaration order and a restored or extended model initialises the same. */
#include <math.h>
#include <string.h>

#include "runtime.h"

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) * 0x1.0p-53;
}

static double gaussian(uint64_t *s)
{
    double u = uniform01(s), v = uniform01(s);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(2.0 * M_PI * v);
}

static uint64_t name_hash(const char *name, uint64_t seed)
{
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

/* fan_in/fan_out: [in, out] for matrices, [OC, C, KH, KW] for filters. */
static void fans(const ir_type *t, double *fi, double *fo)
{
    double rf = 1;
    for (int i = 2; i < t->rank; i++) rf *= (double)t->dim[i];
    if (t->rank == 0)
        *fi = *fo = 1;
    else if (t->rank == 1)
        *fi = *fo = (double)t->dim[0];
    else if (t->rank == 2)
        *fi = (double)t->dim[0], *fo = (double)t->dim[1];
    else
        *fi = (double)t->dim[1] * rf, *fo = (double)t->dim[0] * rf;
}

void rt_init_var(const ir_var *v, float *dst, uint64_t seed)
{
    int64_t n = ir_numel(&v->type);
    uint64_t s = name_hash(v->seed_name ? v->seed_name : v->name, seed);
    double fi, fo, lim;
    fans(&v->type, &fi, &fo);
    for (int64_t i = 0; i < n; i++) {
        double x;
        switch (v->init) {
        case INIT_ZEROS:
            x = 0;
            break;
        case INIT_ONES:
            x = 1;
            break;
        case INIT_CONSTANT:
            x = v->a;
            break;
        case INIT_UNIFORM:
            x = v->a + (v->b - v->a) * uniform01(&s);
            break;
        case INIT_NORMAL:
            x = v->a + v->b * gaussian(&s);
            break;
        case INIT_GLOROT:
            lim = sqrt(6.0 / (fi + fo));
            x = (2 * uniform01(&s) - 1) * lim;
            break;
        case INIT_HE:
            x = gaussian(&s) * sqrt(2.0 / fi);
            break;
        default:
            x = 0;
            break;
        }
        dst[i] = (float)x;
    }
}
