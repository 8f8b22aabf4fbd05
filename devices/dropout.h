/* dropout.h - the dropout mask and random's numbers, one function for every
 * device: element i
 * is kept when dropout_u(dropout_key(seed, step), i) >= rate.  Counter-based,
 * so forward and backward agree without storing the mask, and the CPU and
 * a GPU drop exactly the same elements.  The step's key is splitmix64;
 * each element's number is two rounds of 32-bit mixing (murmur3's
 * finaliser, a bijection), one per half of the key, which compilers
 * vectorise (32-bit lanes) where 64-bit multiplies would stay scalar. */
#ifndef GR_DROPOUT_H
#define GR_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "../compiler/ops.h"

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

DROPOUT_FN uint32_t dropout_mix32(uint32_t h)
{
    h = (h ^ (h >> 16)) * 0x85ebca6bu;
    h = (h ^ (h >> 13)) * 0xc2b2ae35u;
    return h ^ (h >> 16);
}

/* Element i's uniform in [0,1) from the step's key alone. */
DROPOUT_FN float dropout_u(uint64_t key, int64_t i)
{
    uint32_t hi = (uint32_t)(key >> 32) ^ (uint32_t)((uint64_t)i >> 32) * 0x9e3779b9u;
    uint32_t h = dropout_mix32(dropout_mix32((uint32_t)i ^ (uint32_t)key) ^ hi);
    return (float)(int32_t)(h >> 8) * (1.0f / 16777216.0f); /* int: vectorises */
}

/* The key of one step; the kernel's seed already mixes in the node's mask
 * key (attr i2). */
DROPOUT_FN uint64_t dropout_key(uint64_t seed, uint64_t step)
{
    return dropout_mix(seed ^ (step * 0xd1b54a32d192ed03ull));
}

/* Element i of random's numbers (compiler/ops.h, kind OP_RANDOM_*):
 * uniform in [a, b), normal with mean a and std b (Box-Muller on the
 * uniforms 2i and 2i+1), or bernoulli: 1 with probability a, else 0. */
DROPOUT_FN float random_at(uint64_t key, int64_t i, int kind, float a, float b)
{
    if (kind == OP_RANDOM_BERNOULLI) return dropout_u(key, i) < a ? 1.0f : 0.0f;
    if (kind == OP_RANDOM_UNIFORM) return a + (b - a) * dropout_u(key, i);
    float u1 = dropout_u(key, 2 * i), u2 = dropout_u(key, 2 * i + 1);
    float r = sqrtf(-2.0f * logf(u1 > 1e-30f ? u1 : 1e-30f));
    return a + b * r * cosf(6.28318530718f * u2);
}

/* The key of a random node's numbers on one step (the node's key mixed in
 * as dropout's mask key is). */
DROPOUT_FN uint64_t random_key(uint64_t seed, int64_t node_key, uint64_t step)
{
    return dropout_key(seed ^ ((uint64_t)node_key * 0x9e3779b97f4a7c15ull), step);
}

/* The scale of a kept element: 1 / (1 - rate), or 0 when rate >= 1 drops all. */
DROPOUT_FN float dropout_scale(float rate)
{
    return rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
}

#endif
