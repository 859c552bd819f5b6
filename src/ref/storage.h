/*
 * Storage types on the host: bf16 encoding and decoding (as the kernels'
 * cl/common/storage.h does), and what storing a result in a tensor's type
 * adds to a reference's error bound. Shared by the tests' references, the
 * tuner's checks and kiln-bench.
 */
#ifndef KILN_REF_STORAGE_H
#define KILN_REF_STORAGE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln/kiln.h"

/* fp32 -> bf16 bits, rounding to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t kiln_ref_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float kiln_ref_from_bf16(uint16_t h)
{
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* The rounding of a value near `ref`, already within `b` of it, to storage
   type t: half an ulp of t's significand (11 bits for fp16, 8 for bf16)
   relative, or half the smallest subnormal; nothing for fp32. */
static inline double kiln_ref_storage_bound(kiln_dtype t, double ref, double b)
{
    if (t == KILN_F16)
        return (fabs(ref) + b) * 0x1p-11 + 0x1p-25;
    if (t == KILN_BF16)
        return (fabs(ref) + b) * 0x1p-8 + 0x1p-134;
    return 0.0;
}

#endif /* KILN_REF_STORAGE_H */
