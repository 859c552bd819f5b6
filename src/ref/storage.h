/*
 * Storage types on the host: fp16 and bf16 encoding and decoding (as the
 * kernels' cl/common/storage.h does), and what storing a result in a
 * tensor's type adds to a reference's error bound. Shared by the tests'
 * references, the tuner's checks and kiln-bench.
 */
#ifndef KILN_REF_STORAGE_H
#define KILN_REF_STORAGE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kiln/kiln.h"

/* fp32 -> fp16 bits, rounding to nearest even (subnormals included);
   magnitudes from 65520 on become infinity; NaN stays a (quiet) NaN. */
static inline uint16_t kiln_ref_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, shift, h;
    if (e >= 113) { /* normal half: drop 13 mantissa bits */
        shift = 13;
        h = ((e - 112) << 10) | ((a & 0x7fffffu) >> 13);
    } else { /* subnormal half: units of 2^-24 */
        shift = 126 - e;
        if (shift > 24)
            return (uint16_t)sign;
        h = mant >> shift;
    }
    uint32_t rem = (shift == 13 ? a : mant) & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
        h++; /* a carry into the exponent is the correct rounding */
    return (uint16_t)(sign | h);
}

static inline float kiln_ref_from_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (e == 0) {
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    x = sign | (e == 31 ? 0x7f800000u | (mant << 13) : ((e + 112) << 23) | (mant << 13));
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

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

/* The 16-bit encoding of f in storage type t (fp16 or bf16), and back. */
static inline uint16_t kiln_ref_to_16(kiln_dtype t, float f)
{
    return t == KILN_F16 ? kiln_ref_to_f16(f) : kiln_ref_to_bf16(f);
}

static inline float kiln_ref_from_16(kiln_dtype t, uint16_t h)
{
    return t == KILN_F16 ? kiln_ref_from_f16(h) : kiln_ref_from_bf16(h);
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
