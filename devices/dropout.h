/* dropout.h - the dropout mask, one function for every device: element i
 * is kept when dropout_u(dropout_key(seed, step), i) >= rate.  Counter-based
 * (splitmix64), so forward and backward agree without storing the mask,
 * and the CPU and a GPU drop exactly the same elements. */
#ifndef GR_DROPOUT_H
#define GR_DROPOUT_H

#include <stdint.h>

#ifdef __CUDACC__
#define DROPOUT_FN __host__ __device__ static inline
#else
#define DROPOUT_FN static inline
#endif

DROPOUT_FN uint64_t dropout_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Element i's uniform in [0,1) from the step's key alone. */
DROPOUT_FN float dropout_u(uint64_t key, int64_t i)
{
    return (float)(dropout_mix(key ^ (uint64_t)i) >> 40) * (1.0f / 16777216.0f);
}

/* The key of one step; the kernel's seed already mixes in the node's mask
 * key (attr i2). */
DROPOUT_FN uint64_t dropout_key(uint64_t seed, uint64_t step)
{
    return dropout_mix(seed ^ (step * 0xd1b54a32d192ed03ull));
}

/* The scale of a kept element: 1 / (1 - rate), or 0 when rate >= 1 drops all. */
DROPOUT_FN float dropout_scale(float rate)
{
    return rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
}

#endif
