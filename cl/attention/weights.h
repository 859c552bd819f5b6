/*
 * Vector helpers of the attention kernels' softmax, for VEC of VW lanes
 * (common/vector.h): IOTA (lane numbers), weight(x) = 2^x for x <= 2^7 by a
 * polynomial, and, for the decoding kernel, LANE_SUMS_n (lane_max is
 * common/vector.h's).
 */
#ifndef KILN_ATTENTION_WEIGHTS_H
#define KILN_ATTENTION_WEIGHTS_H

#include "common/vector.h"

#if VW == 1
#define IOTA 0
#define AS_VEC as_float
#define AS_IVEC as_int
#elif VW == 2
#define IOTA ((IVEC)(0, 1))
#elif VW == 4
#define IOTA ((IVEC)(0, 1, 2, 3))
#elif VW == 8
#define IOTA ((IVEC)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define IOTA ((IVEC)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif
#if VW > 1
#define AS_VEC CAT(as_float, VW)
#define AS_IVEC CAT(as_int, VW)
#endif

/* 2^x for the weights (x <= 2^7): x = n + f with n the nearest integer
   (rounded by adding 1.5 * 2^23, which leaves n in the low mantissa bits:
   cheaper than rint where rint is a library routine), a degree-6
   polynomial for 2^f on [-1/2, 1/2] (relative error under 1e-7 in float),
   times 2^n built in the exponent bits. Below -127 (and for -inf) the
   exponent field is 0, so the weight is 0; NaN stays NaN. */
static inline VEC weight(VEC x)
{
    x = select(x, (VEC)(-127.0f), x < (VEC)(-127.0f));
    const VEC t = x + (VEC)(0x1.8p23f), n = t - (VEC)(0x1.8p23f), f = x - n;
    VEC p = (VEC)(1.535336196e-4f);
    p = fma(p, f, (VEC)(1.339887502e-3f));
    p = fma(p, f, (VEC)(9.618436918e-3f));
    p = fma(p, f, (VEC)(5.550332367e-2f));
    p = fma(p, f, (VEC)(2.402264774e-1f));
    p = fma(p, f, (VEC)(6.931471825e-1f));
    p = fma(p, f, (VEC)(1.0f));
    return p * AS_VEC((AS_IVEC(t) + 127) << 23); /* the low 9 bits of t's integer hold n mod 512 */
}

#if VW > 1
/* Adjacent lanes of a summed pairwise, a's into the low half, b's into the
   high half. */
static inline VEC lane_pairs(const VEC a, const VEC b) { return (VEC)(a.even + a.odd, b.even + b.odd); }
#endif

/* LANE_SUMS_n(a, i): the n vectors a[i] .. a[i + n - 1] folded into one by
   a balanced tree of n - 1 lane_pairs. With n = VW, lane j is the sum of
   a[i + j]'s lanes; with fewer, each vector's lanes are summed down to VW / n
   partial sums, and folding VW / n such results again (LANE_SUMS_(VW / n))
   finishes the tree. */
#define LANE_SUMS_1(a, i) (a)[i]
#define LANE_SUMS_2(a, i) lane_pairs(LANE_SUMS_1(a, i), LANE_SUMS_1(a, (i) + 1))
#define LANE_SUMS_4(a, i) lane_pairs(LANE_SUMS_2(a, i), LANE_SUMS_2(a, (i) + 2))
#define LANE_SUMS_8(a, i) lane_pairs(LANE_SUMS_4(a, i), LANE_SUMS_4(a, (i) + 4))
#define LANE_SUMS_16(a, i) lane_pairs(LANE_SUMS_8(a, i), LANE_SUMS_8(a, (i) + 8))

#endif /* KILN_ATTENTION_WEIGHTS_H */
