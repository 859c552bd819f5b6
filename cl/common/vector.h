/*
 * The vector vocabulary of kernels that define their vector width VW (1, 2,
 * 4, 8 or 16) before including this:
 *   VEC, IVEC       floatVW (float for 1) and the int vector of the same
 *                   width (what comparing two VECs gives); ANY(c) whether
 *                   any lane of such a comparison holds.
 *   VLOAD(i, p), VSTORE(v, i, p)
 *                   vector i of a float array p (vloadVW / vstoreVW).
 *   VLOAD_S(i, p), VSTORE_S(v, i, p)
 *                   the same for a storage array in global memory (fp16
 *                   converted on the way; fp32 as one unaligned move,
 *                   KILN_VLOADN in common/storage.h, where POCL would split
 *                   vloadVW into pieces of four).
 *   VLOADU_S(p), VSTOREU_S(v, p)
 *                   VW storage values at a global pointer of any alignment.
 *   VW2             2 * VW as a literal, for VW 2, 4 and 8 (for pasting
 *                   into type and function names).
 *   lane_max(v), lane_sum(v)
 *                   the largest lane of a VEC and the sum of its lanes,
 *                   halving the vector.
 */
#ifndef KILN_CL_VECTOR_H
#define KILN_CL_VECTOR_H

#include "common/storage.h"

#if VW == 1 /* OpenCL has no float1, vload1 or vload_half1 */
#define VEC float
#define IVEC int
#define ANY(c) (c) /* a scalar comparison gives 1, whose sign bit any() would miss */
#define VLOAD(i, p) ((p)[i])
#define VSTORE(v, i, p) ((p)[i] = (v))
#define VLOAD_S(i, p) KILN_LOAD((p), (i))
#define VSTORE_S(v, i, p) KILN_STORE((v), (p), (i))
#define VLOADU_S(p) KILN_LOAD((p), 0)
#define VSTOREU_S(v, p) KILN_STORE((v), (p), 0)
#else
#define VEC CAT(float, VW)
#define IVEC CAT(int, VW)
#define ANY(c) any(c)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)
#if KILN_F16
#define VLOAD_S(i, p) CAT(vload_half, VW)((i), (p))
#define VSTORE_S(v, i, p) CAT(vstore_half, VW)((v), (i), (p))
#elif KILN_BF16
#define VLOAD_S(i, p) KILN_VLOADN(VW, (p) + (size_t)(i) * VW)
#define VSTORE_S(v, i, p) KILN_VSTOREN((v), VW, (p) + (size_t)(i) * VW)
#else /* one unaligned move where the compiler takes it (KILN_VLOADN) */
#define VLOAD_S(i, p) KILN_VLOADN(VW, (p) + (size_t)(i) * VW)
#define VSTORE_S(v, i, p) KILN_VSTOREN((v), VW, (p) + (size_t)(i) * VW)
#endif
#define VLOADU_S(p) KILN_VLOADN(VW, p)
#define VSTOREU_S(v, p) KILN_VSTOREN(v, VW, p)
#endif

#if VW == 2
#define VW2 4
#elif VW == 4
#define VW2 8
#elif VW == 8
#define VW2 16
#endif

/* The largest lane of v. */
static inline float lane_max(const VEC v)
{
#if VW == 1
    return v;
#elif VW == 2
    return fmax(v.s0, v.s1);
#elif VW == 4
    const float2 h = fmax(v.lo, v.hi);
    return fmax(h.s0, h.s1);
#elif VW == 8
    const float4 q = fmax(v.lo, v.hi);
    const float2 h = fmax(q.lo, q.hi);
    return fmax(h.s0, h.s1);
#else
    const float8 o = fmax(v.lo, v.hi);
    const float4 q = fmax(o.lo, o.hi);
    const float2 h = fmax(q.lo, q.hi);
    return fmax(h.s0, h.s1);
#endif
}

/* The sum of v's lanes. */
static inline float lane_sum(const VEC v)
{
#if VW == 16
    const float8 v8 = v.lo + v.hi;
#elif VW == 8
    const float8 v8 = v;
#endif
#if VW >= 8
    const float4 v4 = v8.lo + v8.hi;
#elif VW == 4
    const float4 v4 = v;
#endif
#if VW >= 4
    const float2 v2 = v4.lo + v4.hi;
#elif VW == 2
    const float2 v2 = v;
#endif
#if VW >= 2
    return v2.x + v2.y;
#else
    return v;
#endif
}

#endif
