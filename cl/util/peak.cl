/*
 * What the device can do at best, for kiln-tune and kiln-bench peak: an
 * fp32 multiply-add loop (arithmetic peak), a copy and a read (memory
 * bandwidth).
 * KILN_UTIL_WG is the work-group size from the profile. Shared with the
 * CUDA backend through common/portability.h (one lane there).
 */

#include "common/portability.h"

/* Chains of dependent multiply-adds per work-item, independent of each
   other so that a core's FMA pipes all have work. Which vector width
   reaches the peak depends on the device and its compiler (float8 ran twice
   the rate of float4 on POCL's AVX2 and AVX-512 devices, float16 twice
   float8 on an AVX-512 Xeon whose LLVM target prefers 256-bit vectors, and
   spilled on AVX2), so there is one kernel per width and the host takes the
   fastest. */
#define PEAK_CHAINS 8

/* Each work-item runs `iters` rounds of PEAK_CHAINS multiply-adds of
   float<lanes> (2 * lanes * PEAK_CHAINS * iters flops) on values that
   converge to 1, and stores the mean of their lanes' sums (PEAK_CHAINS = 8
   when converged), so nothing is dead. */
#define PEAK_FMA_KERNEL(name, vec, lanes)                                                       \
    KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)                                       \
    void name(KILN_GLOBAL float *out, const int iters)                                         \
    {                                                                                          \
        const size_t id = KILN_GLOBAL_ID(0);                                                   \
        const vec a = (vec)(0.999f), b = (vec)(0.001f);                                         \
        vec x[PEAK_CHAINS];                                                                    \
        _Pragma("unroll") for (int c = 0; c < PEAK_CHAINS; c++) x[c] = (vec)((float)c * 0.125f); \
        for (int i = 0; i < iters; i++) {                                                      \
            _Pragma("unroll") for (int c = 0; c < PEAK_CHAINS; c++) x[c] = fma(x[c], a, b);    \
        }                                                                                      \
        vec s = (vec)(0.0f);                                                                   \
        _Pragma("unroll") for (int c = 0; c < PEAK_CHAINS; c++) s += x[c];                     \
        float t = 0.0f;                                                                        \
        _Pragma("unroll") for (int l = 0; l < lanes; l++) t += ((float *)&s)[l];               \
        out[id] = t / (float)(lanes);                                                          \
    }

#if KILN_VECTOR_SYNTAX && KILN_WANTS(util_peak_fma)
PEAK_FMA_KERNEL(util_peak_fma, float8, 8)
#endif
#if KILN_VECTOR_SYNTAX && KILN_WANTS(util_peak_fma16)
PEAK_FMA_KERNEL(util_peak_fma16, float16, 16)
#endif
/* One lane, for backends without OpenCL's vector syntax (the CUDA
   backend): there a warp's threads are the vector. */
#if KILN_WANTS(util_peak_fma1)
PEAK_FMA_KERNEL(util_peak_fma1, float, 1)
#endif

/* dst[i] = src[i] for n float4s (CUDA's float4 is a 16-byte struct). */
#if KILN_WANTS(util_copy_f32x4)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void util_copy_f32x4(KILN_GLOBAL const float4 *src, KILN_GLOBAL float4 *dst, const ulong n)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i < n)
        dst[i] = src[i];
}
#endif

/* The sum of n float4s: a read of 16 n bytes. Work-item t reads runs of
   `span` float4s, the t-th of every run of global-size spans (`stride`
   float4s): span 1 interleaves the
   work-items (coalesced on GPUs), span n / global size gives each its own
   contiguous block (CPUs, launched one work-item per work-group, so that no
   vectoriser across work-items turns the runs into gathers). Each
   work-item stores its sum, so nothing is dead; with every value 1 the sums
   are exact (fewer than 2^24 terms each), and the host checks them. */
#if KILN_VECTOR_SYNTAX
#define READ_ACC float4
#define READ_ADD(acc, v) ((acc) += (v))
#else
#define READ_ACC float
#define READ_ADD(acc, v) ((acc) += ((v).x + (v).y) + ((v).z + (v).w))
#endif
#if KILN_WANTS(util_read_f32x4)
KILN_KERNEL
void util_read_f32x4(KILN_GLOBAL const float4 *src, const ulong n, const ulong span, const ulong stride,
                     KILN_GLOBAL float *sums)
{
    const ulong t = KILN_GLOBAL_ID(0);
    READ_ACC s0 = (READ_ACC)(0.0f), s1 = s0, s2 = s0, s3 = s0;
    for (ulong base = t * span; base < n; base += stride) {
        const ulong end = base + span < n ? base + span : n;
        ulong i = base;
        for (; i + 4 <= end; i += 4) {
            READ_ADD(s0, src[i]);
            READ_ADD(s1, src[i + 1]);
            READ_ADD(s2, src[i + 2]);
            READ_ADD(s3, src[i + 3]);
        }
        for (; i < end; i++)
            READ_ADD(s0, src[i]);
    }
#if KILN_VECTOR_SYNTAX
    const float4 s = (s0 + s1) + (s2 + s3);
    sums[t] = (s.x + s.y) + (s.z + s.w);
#else
    sums[t] = (s0 + s1) + (s2 + s3);
#endif
}
#endif
