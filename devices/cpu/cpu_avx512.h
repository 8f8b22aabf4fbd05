/* cpu_avx512.h - the register tile that the CPU's AVX-512 kernels share
 * (cpu_direct.c's convolutions, cpu_sgemm.c's products): AVX512_ROWS rows
 * x J vectors of 16 outputs, each row's weight broadcast against J vectors
 * of its input.  Only for functions marked AVX512, run where
 * cpu_has_avx512() says so; the rest of the CPU device is built without
 * AVX-512 (CMakeLists.txt). */
#ifndef GR_CPU_AVX512_H
#define GR_CPU_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#define AVX512      __attribute__((target("avx512f")))
#define AVX512_W    16 /* floats a vector */
#define AVX512_ROWS 8

/* dst[r][v * 16 ..] (rows ldd apart) = alpha * sum over i < n, t < nt of
 * w[(i * nt + t) * 8 + r] * src[i * ld + off[t] + v * 16 ..], plus what
 * dst holds when add; J = 1-3 vectors (a constant where it is inlined). */
static inline __attribute__((always_inline)) AVX512 void
avx512_tile(const float *src, int64_t ld, int64_t n, const int32_t *off, int nt, const float *w,
            float *dst, int64_t ldd, int J, float alpha, int add)
{
    __m512 acc[AVX512_ROWS][3];
#pragma GCC unroll 8
    for (int r = 0; r < AVX512_ROWS; r++)
#pragma GCC unroll 3
        for (int v = 0; v < J; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i++, src += ld)
        for (int t = 0; t < nt; t++, w += AVX512_ROWS) {
            const float *p = src + off[t];
            __m512 x0 = _mm512_loadu_ps(p);
            __m512 x1 = J > 1 ? _mm512_loadu_ps(p + AVX512_W) : x0;
            __m512 x2 = J > 2 ? _mm512_loadu_ps(p + 2 * AVX512_W) : x0;
#pragma GCC unroll 8
            for (int r = 0; r < AVX512_ROWS; r++) {
                __m512 wv = _mm512_set1_ps(w[r]);
                acc[r][0] = _mm512_fmadd_ps(x0, wv, acc[r][0]);
                if (J > 1) acc[r][1] = _mm512_fmadd_ps(x1, wv, acc[r][1]);
                if (J > 2) acc[r][2] = _mm512_fmadd_ps(x2, wv, acc[r][2]);
            }
        }
    __m512 a = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
    for (int r = 0; r < AVX512_ROWS; r++)
#pragma GCC unroll 3
        for (int v = 0; v < J; v++) {
            float *d = dst + r * ldd + v * AVX512_W;
            __m512 out = _mm512_mul_ps(acc[r][v], a);
            _mm512_storeu_ps(d, add ? _mm512_add_ps(_mm512_loadu_ps(d), out) : out);
        }
}

#endif
