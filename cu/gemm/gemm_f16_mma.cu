/*
 * gemm_f16_mma: C = A B on tensor cores, fp16 storage and multiplies (bf16
 * with KILN_MMA_BF16=1, sm_80 on), fp32 accumulation and output
 * (mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 from sm_80, two
 * m16n8k8 on sm_75).
 *
 * Row-major A (M x K, lda), B (K x N, ldb) and C (M x N, ldc); any M, N, K
 * >= 1 (edges zero-filled on load, masked on store). A block of
 * WARPS_M x WARPS_N warps computes BM x BN of C in steps of BK along K: the
 * block stages the BM x BK slice of A and the BK x BN slice of B in shared
 * memory (rows padded by 8 halves), then each warp multiplies its
 * WM x WN part (WM = BM / WARPS_M, WN = BN / WARPS_N) as (WM / 16) x
 * (WN / 8) mma tiles per 16 of K, its fragments read from shared memory
 * through gemm/mma_layout.h (the layout the host model checks against the
 * PTX ISA). Halves are moved as 16-bit patterns, two to a register, the
 * lower-indexed element in the low half, as the ISA packs .f16x2.
 *
 * Launch: block (WARPS_M * WARPS_N * 32), grid (ceil(N / BN), ceil(M / BM)).
 * Parameters (-D): KILN_MMA_BM, KILN_MMA_BN, KILN_MMA_BK (a multiple of 16),
 * KILN_MMA_WARPS_M, KILN_MMA_WARPS_N.
 *
 * A first kernel of the CUDA backend: single-buffered, no cp.async pipeline
 * or ldmatrix yet, not measured on a GPU.
 */
#include "gemm/mma_layout.h"

#ifndef KILN_MMA_BM
#define KILN_MMA_BM 64
#endif
#ifndef KILN_MMA_BN
#define KILN_MMA_BN 64
#endif
#ifndef KILN_MMA_BK
#define KILN_MMA_BK 32
#endif
#ifndef KILN_MMA_WARPS_M
#define KILN_MMA_WARPS_M 2
#endif
#ifndef KILN_MMA_WARPS_N
#define KILN_MMA_WARPS_N 2
#endif
#define BM KILN_MMA_BM
#define BN KILN_MMA_BN
#define BK KILN_MMA_BK
#define WARPS_N KILN_MMA_WARPS_N
#define THREADS (KILN_MMA_WARPS_M * KILN_MMA_WARPS_N * 32)
#define WM (BM / KILN_MMA_WARPS_M)
#define WN (BN / KILN_MMA_WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#define ALD (BK + 8)
#define BLD (BN + 8)

#if BK % 16 || WM % 16 || WN % 8
#error "gemm_f16_mma: BK a multiple of 16, warp tiles of whole 16 x 8 mma tiles"
#endif

/* The multiplies' type: fp16, or bf16 with KILN_MMA_BF16=1 (sm_80 and
   newer; the same fragment layout). */
#if KILN_MMA_BF16
#if __CUDA_ARCH__ < 800
#error "gemm_f16_mma: bf16 needs sm_80 or newer"
#endif
#define MMA_TYPE "bf16"
#else
#define MMA_TYPE "f16"
#endif

/* d += a b for one 16 x 8 x 16 tile. Turing (sm_75) has no m16n8k16 for
   f16: there it is two m16n8k8, the first on A's registers 0-1 and B's
   register 0 (k 0-7), the second on A's 2-3 and B's 1 (k 8-15): the
   m16n8k8 fragments are exactly those halves of the m16n8k16 ones (the
   host model checks both). */
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

extern "C" __global__ void __launch_bounds__(THREADS)
    gemm_f16_mma(const int M, const int N, const int K, const unsigned short *__restrict__ A, const int lda,
                 const unsigned short *__restrict__ B, const int ldb, float *__restrict__ C, const int ldc)
{
    __shared__ unsigned short As[BM * ALD], Bs[BK * BLD];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int wr = kiln_mma_warp_row(warp, WARPS_N, WM), wc = kiln_mma_warp_col(warp, WARPS_N, WN);
    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mi][ni][i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int e = tid; e < BM * BK; e += THREADS) {
            const int r = e / BK, c = e % BK;
            As[r * ALD + c] = m0 + r < M && k0 + c < K ? A[(size_t)(m0 + r) * lda + k0 + c] : 0;
        }
        for (int e = tid; e < BK * BN; e += THREADS) {
            const int r = e / BN, c = e % BN;
            Bs[r * BLD + c] = k0 + r < K && n0 + c < N ? B[(size_t)(k0 + r) * ldb + n0 + c] : 0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const unsigned short *row = As + (wr + mi * 16) * ALD + kk;
                    const unsigned lo = row[kiln_mma_a_row(lane, 2 * j) * ALD + kiln_mma_a_col(lane, 2 * j)];
                    const unsigned hi = row[kiln_mma_a_row(lane, 2 * j + 1) * ALD + kiln_mma_a_col(lane, 2 * j + 1)];
                    a[mi][j] = lo | hi << 16;
                }
#pragma unroll
            for (int ni = 0; ni < NI; ni++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const unsigned short *col = Bs + kk * BLD + wc + ni * 8;
                    const unsigned lo = col[kiln_mma_b_row(lane, 2 * j) * BLD + kiln_mma_b_col(lane, 2 * j)];
                    const unsigned hi = col[kiln_mma_b_row(lane, 2 * j + 1) * BLD + kiln_mma_b_col(lane, 2 * j + 1)];
                    b[ni][j] = lo | hi << 16;
                }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++)
                    mma_16816(acc[mi][ni], a[mi], b[ni]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = m0 + wr + mi * 16 + kiln_mma_c_row(lane, i);
                const int c = n0 + wc + ni * 8 + kiln_mma_c_col(lane, i);
                if (r < M && c < N)
                    C[(size_t)r * ldc + c] = acc[mi][ni][i];
            }
}
