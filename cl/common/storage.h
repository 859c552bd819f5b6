/*
 * Storage types of tensors. Arithmetic is always fp32; with KILN_F16 set,
 * tensors are stored as fp16 and moved through vload_half/vstore_half, which
 * every OpenCL 1.2 device has (cl_khr_fp16 is needed only for fp16
 * arithmetic, which kiln does not do).
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
#if KILN_F16
#define KILN_STORAGE half
#define KILN_LOAD(p, i) vload_half((i), (p))
#define KILN_STORE(v, p, i) vstore_half((v), (i), (p))
#define KILN_VLOADN(n, p) CAT(vload_half, n)(0, (p))
#define KILN_VSTOREN(v, n, p) CAT(vstore_half, n)((v), 0, (p))
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
