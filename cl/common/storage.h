/*
 * Storage types of tensors. Arithmetic is always fp32.
 * - KILN_F16=1: fp16, moved through vload_half/vstore_half, which every
 *   OpenCL 1.2 device has (cl_khr_fp16 is needed only for fp16 arithmetic,
 *   which kiln does not do).
 * - KILN_BF16=1: bfloat16, the high 16 bits of an fp32, held as ushort:
 *   widened by a shift, narrowed by rounding to nearest even (a NaN stays a
 *   quiet NaN of its sign, never rounds to infinity).
 * - neither: fp32.
 * KILN_STORAGE_16 is 1 for either 16-bit type.
 */
#ifndef KILN_CL_STORAGE_H
#define KILN_CL_STORAGE_H

#include "common/portability.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* KILN_VLOADN(n, p) and KILN_VSTOREN(v, n, p) move n (2, 4, 8 or 16)
   consecutive storage values at a global pointer of any alignment as one
   floatn. vloadn would do, but POCL (LLVM 15) splits an unaligned vload8
   into 64-bit loads and shuffles them together; a vector type declared with
   the alignment of one float becomes one unaligned move. Lowering a
   typedef's alignment is a Clang extension, hence the fallback. */
#ifndef KILN_F16
#define KILN_F16 0
#endif
#ifndef KILN_BF16
#define KILN_BF16 0
#endif
#define KILN_STORAGE_16 (KILN_F16 || KILN_BF16)

#if KILN_F16
#define KILN_STORAGE half
#define KILN_LOAD(p, i) vload_half((i), (p))
#define KILN_STORE(v, p, i) vstore_half((v), (i), (p))
#define KILN_VLOADN(n, p) CAT(vload_half, n)(0, (p))
#define KILN_VSTOREN(v, n, p) CAT(vstore_half, n)((v), 0, (p))
#elif KILN_BF16
#define KILN_STORAGE ushort
float kiln_bf16_load(const ushort h) { return as_float((uint)h << 16); }
ushort kiln_bf16_round(const float f)
{
    const uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((u >> 16) | 0x40u);
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#define KILN_LOAD(p, i) kiln_bf16_load((p)[i])
#define KILN_STORE(v, p, i) ((p)[i] = kiln_bf16_round(v))
/* n-wide forms, for the kernels with vector syntax only. */
#define KILN_BF16_WIDEN(n, h) CAT(as_float, n)(CAT(convert_uint, n)(h) << 16)
#define KILN_BF16_NARROW(n, v)                                                                                         \
    CAT(convert_ushort, n)                                                                                             \
    (select((CAT(as_uint, n)(v) + 0x7fffu + ((CAT(as_uint, n)(v) >> 16) & 1u)) >> 16,                                  \
            (CAT(as_uint, n)(v) >> 16) | 0x40u, isnan(v)))
#define KILN_VLOADN(n, p) KILN_BF16_WIDEN(n, CAT(vload, n)(0, (p)))
#define KILN_VSTOREN(v, n, p) CAT(vstore, n)(KILN_BF16_NARROW(n, (v)), 0, (p))
#else
#define KILN_STORAGE float
#define KILN_LOAD(p, i) ((p)[i])
#define KILN_STORE(v, p, i) ((p)[i] = (v))
#ifdef __clang__
typedef float2 __attribute__((aligned(4))) kiln_float2_u;
typedef float4 __attribute__((aligned(4))) kiln_float4_u;
typedef float8 __attribute__((aligned(4))) kiln_float8_u;
typedef float16 __attribute__((aligned(4))) kiln_float16_u;
#define KILN_VLOADN(n, p) (*(KILN_GLOBAL const CAT(CAT(kiln_float, n), _u) *)(p))
#define KILN_VSTOREN(v, n, p) (*(KILN_GLOBAL CAT(CAT(kiln_float, n), _u) *)(p) = (v))
#else
#define KILN_VLOADN(n, p) CAT(vload, n)(0, (p))
#define KILN_VSTOREN(v, n, p) CAT(vstore, n)((v), 0, (p))
#endif
#endif

#endif
