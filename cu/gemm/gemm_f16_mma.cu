/*
 * gemm_f16_mma: batched C = alpha A B + beta C on tensor cores, fp16
 * storage of A, B and C (bf16 multiplies with KILN_MMA_BF16=1, sm_80 on),
 * fp32 accumulation (mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32;
 * two m16n8k8 on sm_75). The products of fp16 values are exact in fp32, so
 * this computes as precisely as the fp32-arithmetic GEMM on fp16 storage
 * does, up to the order of the additions.
 *
 * With KILN_MMA_TF32=1 (sm_80 on) A, B and C are fp32 and the multiplies
 * TF32 (mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32): each value of
 * A and B is rounded to TF32 (cvt.rna.tf32.f32: 10 explicit significand
 * bits, to nearest, ties away from zero) as its fragment is loaded, so a
 * product is off by at most 2^-10 of its magnitude; the sums are fp32. The
 * caller's descriptor allows it (KILN_MATH_TF32).
 *
 * ABI: the in-place GEMM's (cl/gemm/gemm_f32_tiled.cl), in row-major terms:
 *   C(i,j) = alpha * sum_k opA(i,k) * opB(k,j) + beta * C(i,j)
 *   opA(i,k) = KILN_TRANS_A ? A[k*lda + i] : A[i*lda + k]
 *   opB(k,j) = KILN_TRANS_B ? B[j*ldb + k] : B[k*ldb + j]
 * every index offset by off_x + b * stride_x for batch item b = blockIdx.z;
 * any M, N, K >= 1; beta == 0: C is not read; alpha == 0: A and B are not.
 *
 * A block of WARPS_M x WARPS_N warps computes BM x BN of C in steps of BK
 * along K (KILN_MMA_BK 16-bit values, or half as many fp32 ones: the same
 * bytes a row). Each step's tiles of A and B are copied to shared memory as
 * stored (A's M x BK rows, or BK x M for A transposed; B likewise), through
 * a ring of STAGES buffers: with KILN_MMA_ASYNC (sm_80 on) by 16-byte
 * cp.async copies that zero-fill past the edges, issued STAGES - 1 steps
 * ahead, else by plain loads. Rows along K are padded by 16 bytes, rows
 * along M or N by 8 values, so the warps read them without bank conflicts.
 * Each warp multiplies its WM x WN part as (WM / 16) x (WN / 8) mma tiles
 * per 16 of K (8 with TF32), its fragments read by ldmatrix (.trans where
 * the stored layout is the other way round) at the addresses of
 * gemm/mma_layout.h, which the host model checks (the steps of
 * gemm/mma_pipeline.h); ldmatrix moves 16-bit values, so TF32 fragments of
 * an operand stored along M or N are read value by value at that header's
 * element mapping.
 *
 * Parameters (-D): KILN_MMA_BM, BN, BK (multiples of 16, 32 for BK),
 * KILN_MMA_WARPS_M, WARPS_N (WM a multiple of 16, WN of 16), KILN_MMA_STAGES
 * (2 to 5), KILN_TRANS_A, KILN_TRANS_B, KILN_MMA_BF16, KILN_MMA_TF32, and
 * KILN_MMA_ASYNC: 1 when every operand row starts 16-byte aligned (base
 * offsets, batch strides and leading dimensions multiples of 16 bytes; the
 * host checks).
 *
 * Launch: block (WARPS_M * WARPS_N * 32), grid (ceil(N / BN), ceil(M / BM),
 * batch), dynamic shared memory STAGES * (A and B tile) bytes
 * (kiln_gemm_mma_shared_bytes, the host's formula: the same for 16-bit and
 * fp32 storage).
 */

#ifndef KILN_MMA_BM
#define KILN_MMA_BM 128
#endif
#ifndef KILN_MMA_BN
#define KILN_MMA_BN 128
#endif
#ifndef KILN_MMA_BK
#define KILN_MMA_BK 32
#endif
#ifndef KILN_MMA_WARPS_M
#define KILN_MMA_WARPS_M 2
#endif
#ifndef KILN_MMA_WARPS_N
#define KILN_MMA_WARPS_N 4
#endif
#ifndef KILN_MMA_STAGES
#define KILN_MMA_STAGES 3
#endif
#ifndef KILN_TRANS_A
#define KILN_TRANS_A 0
#endif
#ifndef KILN_TRANS_B
#define KILN_TRANS_B 0
#endif
#ifndef KILN_MMA_ASYNC
#define KILN_MMA_ASYNC 1
#endif
#define BM KILN_MMA_BM
#define BN KILN_MMA_BN
#define BK (KILN_MMA_BK * 2 / (int)sizeof(storage_t))
#define STAGES KILN_MMA_STAGES
#define WARPS_N KILN_MMA_WARPS_N
#define THREADS (KILN_MMA_WARPS_M * KILN_MMA_WARPS_N * 32)
#define WM (BM / KILN_MMA_WARPS_M)
#define WN (BN / KILN_MMA_WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)

/* The stored tiles: A as BM rows of BK (or BK rows of BM, transposed), B as
   BK rows of BN (or BN rows of BK). Rows along K are padded by 16 bytes,
   rows along M or N by 8 values: the 8 rows of 16 bytes an ldmatrix reads
   fall in distinct banks, and so do TF32's value-by-value loads of lanes
   (g, t) at row t, column g (rows 8 values more than a multiple of 16). */
#define A_ROWS (KILN_TRANS_A ? BK : BM)
#define A_COLS (KILN_TRANS_A ? BM : BK)
#define B_ROWS (KILN_TRANS_B ? BN : BK)
#define B_COLS (KILN_TRANS_B ? BK : BN)
#define A_LD (A_COLS + (KILN_TRANS_A ? 8 : CHUNK))
#define B_LD (B_COLS + (KILN_TRANS_B ? CHUNK : 8))
#define A_TILE (A_ROWS * A_LD)
#define B_TILE (B_ROWS * B_LD)

#if KILN_MMA_BK % 32 || BM % 16 || BN % 16 || WM % 16 || WN % 16 || STAGES < 2 || STAGES > 5
#error "gemm_f16_mma: parameters break the constraints listed in device_profiles/README.md"
#endif

/* bf16 multiplies (KILN_MMA_BF16=1, MMA_TYPE of gemm/tensor_core.h) need
   sm_80 and newer, the same fragment layout; TF32 ones too. */
#if (KILN_MMA_BF16 || KILN_MMA_TF32) && __CUDA_ARCH__ < 800
#error "gemm_f16_mma: bf16 and tf32 need sm_80 or newer"
#endif

/* Asynchronous copies need sm_80. */
#if __CUDA_ARCH__ < 800
#undef KILN_MMA_ASYNC
#define KILN_MMA_ASYNC 0
#endif
#include "gemm/mma_pipeline.h"

/* Copy a ROWS x COLS tile of a stored matrix (rows from row0, columns from
   col0, ld apart; rows >= rows_end and columns >= cols_end read as 0) into
   shared memory rows LD apart. */
template <int ROWS, int COLS, int LD>
__device__ __forceinline__ void stage(storage_t *dst, const storage_t *src, const int ld, const int row0,
                                      const int col0, const int rows_end, const int cols_end, const int tid)
{
    constexpr int CHUNKS = ROWS * (COLS / CHUNK);
#pragma unroll
    for (int e = tid; e < CHUNKS; e += THREADS) {
        const int r = e / (COLS / CHUNK), c = e % (COLS / CHUNK) * CHUNK;
        const int row = row0 + r, col = col0 + c;
        storage_t *d = dst + r * LD + c;
#if KILN_MMA_ASYNC
        const int valid = row < rows_end ? min(max(cols_end - col, 0), CHUNK) : 0;
        copy16(d, valid ? src + (size_t)row * ld + col : src, valid * (int)sizeof(storage_t));
#else
#pragma unroll
        for (int j = 0; j < CHUNK; j++)
            d[j] = row < rows_end && col + j < cols_end ? src[(size_t)row * ld + col + j] : (storage_t)0;
#endif
    }
}

/* The signature keeps one line per operand. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_f16_mma(const int M, const int N, const int K, const float alpha, const float beta,
             const storage_t *__restrict__ A, const unsigned long off_a, const int lda, const unsigned long stride_a,
             const storage_t *__restrict__ B, const unsigned long off_b, const int ldb, const unsigned long stride_b,
             storage_t *__restrict__ C, const unsigned long off_c, const int ldc, const unsigned long stride_c)
/* clang-format on */
{
    extern __shared__ __align__(16) storage_t shared[];
    storage_t *as = shared, *bs = shared + STAGES * A_TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const unsigned long batch = blockIdx.z;
    A += off_a + batch * stride_a;
    B += off_b + batch * stride_b;
    C += off_c + batch * stride_c;
    const int wr = kiln_mma_warp_row(warp, WARPS_N, WM), wc = kiln_mma_warp_col(warp, WARPS_N, WN);

    float acc[MI][NI][4];
    mma_zero(acc);

    /* Step s's tiles into buffer s % STAGES; alpha == 0 reads neither A nor B. */
    const int steps = alpha != 0.0f ? (K + BK - 1) / BK : 0;
    auto load = [&](int s) {
        const int k0 = s * BK, buf = s % STAGES;
#if KILN_TRANS_A
        stage<BK, BM, A_LD>(as + buf * A_TILE, A, lda, k0, m0, K, M, tid);
#else
        stage<BM, BK, A_LD>(as + buf * A_TILE, A, lda, m0, k0, M, K, tid);
#endif
#if KILN_TRANS_B
        stage<BN, BK, B_LD>(bs + buf * B_TILE, B, ldb, n0, k0, N, K, tid);
#else
        stage<BK, BN, B_LD>(bs + buf * B_TILE, B, ldb, k0, n0, K, N, tid);
#endif
    };
    mma_pipeline<STAGES>(steps, load, [&](int s) {
        mma_warp_step<BK, MI, NI, A_LD, B_LD, KILN_TRANS_A, KILN_TRANS_B>(acc, as + s % STAGES * A_TILE,
                                                                          bs + s % STAGES * B_TILE, wr, wc, lane);
    });

#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = m0 + wr + mi * 16 + kiln_mma_c_row(lane, i);
                const int c = n0 + wc + ni * 8 + kiln_mma_c_col(lane, i);
                if (r < M && c < N) {
                    storage_t *p = C + (size_t)r * ldc + c;
                    float v = alpha * acc[mi][ni][i];
                    if (beta != 0.0f)
                        v += beta * from_storage(*p);
                    *p = to_storage(v);
                }
            }
}
