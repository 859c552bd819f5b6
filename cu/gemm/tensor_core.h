/*
 * What kiln's tensor-core kernels (gemm_f16_mma.cu, gemm_f16_wgmma.cu,
 * attention/attention_f16_mma.cu) share: the storage type of A, B and C
 * (storage_t: 16-bit patterns, or fp32 with KILN_MMA_TF32=1, the GEMMs'
 * alone), the multiplies' type for PTX (MMA_TYPE: "f16", "bf16" with
 * KILN_MMA_BF16=1, "tf32" with KILN_MMA_TF32=1), a generic pointer's
 * shared-memory address, a stored value of C to fp32 and back (16-bit:
 * round to nearest even; NaN stays NaN), mma.sync's 16 x 8 x 16 multiply
 * (16-bit values), ldmatrix's four 8 x 8 matrices of 16-bit values and
 * (sm_80 on) cp.async's 16-byte copy.
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

#if !KILN_MMA_TF32
/* d += a b for one 16 x 8 x 16 tile of 16-bit values. Turing (sm_75) has
   no m16n8k16 for f16: there it is two m16n8k8, the first on A's registers
   0-1 and B's register 0 (k 0-7), the second on A's 2-3 and B's 1 (k
   8-15): the m16n8k8 fragments are exactly those halves of the m16n8k16
   ones (the host model checks both). */
__device__ __forceinline__ void mma_16816(float d[4], const unsigned a[4], const unsigned b[2])
{
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_TYPE "." MMA_TYPE ".f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#endif
}
#endif

/* Four 8 x 8 matrices of 16-bit values, rows from the lanes' addresses. */
__device__ __forceinline__ void ldsm_x4(unsigned r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(unsigned r[4], const void *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
}

#if __CUDA_ARCH__ >= 800
/* A 16-byte copy to shared memory, `bytes` of it read (the rest zeros). */
__device__ __forceinline__ void copy16(void *dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(dst)), "l"(src), "r"(bytes));
}
#endif

/* Zero a warp's accumulators: Mi x Ni tiles of mma C fragments. */
template <int Mi, int Ni> __device__ __forceinline__ void mma_zero(float (&acc)[Mi][Ni][4])
{
#pragma unroll
    for (int mi = 0; mi < Mi; mi++)
#pragma unroll
        for (int ni = 0; ni < Ni; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mi][ni][i] = 0.0f;
}

#endif /* KILN_CU_TENSOR_CORE_H */
