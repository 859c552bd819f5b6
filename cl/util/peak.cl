/*
 * What the device can do at best, for kiln-tune and kiln-bench peak: an
 * fp32 multiply-add loop (arithmetic peak) and a copy (memory bandwidth).
 * KILN_UTIL_WG is the work-group size from the profile.
 */

#include "common/portability.h"

/* Chains of dependent multiply-adds per work-item, independent of each
   other so that a core's FMA pipes all have work, each PEAK_LANES wide:
   float8 ran twice the rate of float4 on POCL's AVX-512 device, and float16
   (128 live values) spilled. */
#define PEAK_CHAINS 8
#define PEAK_LANES 8

/* Each work-item runs `iters` rounds of PEAK_CHAINS float8 multiply-adds
   (2 * PEAK_LANES * PEAK_CHAINS * iters flops) on values that converge to
   1, and stores their sum (PEAK_CHAINS * PEAK_LANES = 64 when converged), so
   nothing is dead. */
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void util_peak_fma(KILN_GLOBAL float *out, const int iters)
{
    const size_t id = KILN_GLOBAL_ID(0);
    const float8 a = (float8)(0.999f), b = (float8)(0.001f);
    float8 x[PEAK_CHAINS];
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; c++)
        x[c] = (float8)((float)c * 0.125f);
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int c = 0; c < PEAK_CHAINS; c++)
            x[c] = fma(x[c], a, b);
    }
    float8 s = (float8)(0.0f);
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; c++)
        s += x[c];
    out[id] = s.s0 + s.s1 + s.s2 + s.s3 + s.s4 + s.s5 + s.s6 + s.s7;
}

/* dst[i] = src[i] for n float4s. */
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void util_copy_f32x4(KILN_GLOBAL const float4 *src, KILN_GLOBAL float4 *dst, const ulong n)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i < n)
        dst[i] = src[i];
}
