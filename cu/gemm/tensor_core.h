/*
 * What kiln's two tensor-core GEMM kernels (gemm_f16_mma.cu, gemm_f16_wgmma.cu)
 * share: the multiplies' type for PTX (MMA_TYPE: "f16", or "bf16" with
 * KILN_MMA_BF16=1), a generic pointer's shared-memory address, and a stored
 * 16-bit value of C to fp32 and back (round to nearest even; NaN stays
 * NaN).
 */
#ifndef KILN_CU_TENSOR_CORE_H
#define KILN_CU_TENSOR_CORE_H

#ifndef KILN_MMA_BF16
#define KILN_MMA_BF16 0
#endif
#if KILN_MMA_BF16
#define MMA_TYPE "bf16"
#else
#define MMA_TYPE "f16"
#endif

__device__ __forceinline__ unsigned shared_address(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ float from_storage(unsigned short h)
{
#if KILN_MMA_BF16
    return __int_as_float((int)((unsigned)h << 16));
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}

__device__ __forceinline__ unsigned short to_storage(float f)
{
    unsigned short h;
#if KILN_MMA_BF16
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
    return h;
}

#endif /* KILN_CU_TENSOR_CORE_H */
