/*
 * What kiln's two tensor-core GEMM kernels (gemm_f16_mma.cu, gemm_f16_wgmma.cu)
 * share: the storage type of A, B and C (storage_t: 16-bit patterns, or
 * fp32 with KILN_MMA_TF32=1), the multiplies' type for PTX (MMA_TYPE:
 * "f16", "bf16" with KILN_MMA_BF16=1, "tf32" with KILN_MMA_TF32=1), a
 * generic pointer's shared-memory address, and a stored value of C to fp32
 * and back (16-bit: round to nearest even; NaN stays NaN).
 */
#ifndef KILN_CU_TENSOR_CORE_H
#define KILN_CU_TENSOR_CORE_H

#ifndef KILN_MMA_BF16
#define KILN_MMA_BF16 0
#endif
#ifndef KILN_MMA_TF32
#define KILN_MMA_TF32 0
#endif
#if KILN_MMA_TF32
#define MMA_TYPE "tf32"
typedef float storage_t;
#elif KILN_MMA_BF16
#define MMA_TYPE "bf16"
typedef unsigned short storage_t;
#else
#define MMA_TYPE "f16"
typedef unsigned short storage_t;
#endif

/* Stored values in 16 bytes, the unit of the copies. */
#define CHUNK (16 / (int)sizeof(storage_t))

__device__ __forceinline__ unsigned shared_address(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ float from_storage(storage_t h)
{
#if KILN_MMA_TF32
    return h;
#elif KILN_MMA_BF16
    return __int_as_float((int)((unsigned)h << 16));
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}

__device__ __forceinline__ storage_t to_storage(float f)
{
#if KILN_MMA_TF32
    return f;
#else
    unsigned short h;
#if KILN_MMA_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
    return h;
#endif
}

#endif /* KILN_CU_TENSOR_CORE_H */
