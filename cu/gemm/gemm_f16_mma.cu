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
 * gemm/mma_layout.h, which the host model checks; ldmatrix moves 16-bit
 * values, so TF32 fragments of an operand stored along M or N are read
 * value by value at that header's element mapping.
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
#include "gemm/mma_layout.h"
#include "gemm/tensor_core.h"

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
/* K of one mma: 16 16-bit values or 8 fp32 ones, 32 bytes. */
#define MMA_K (2 * CHUNK)

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

#if KILN_MMA_TF32

/* d += a b for one 16 x 8 x 8 tile of TF32 values. */
__device__ __forceinline__ void mma_tile(float d[4], const unsigned a[4], const unsigned b[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* An fp32 value rounded to TF32: to nearest, ties away from zero. */
__device__ __forceinline__ unsigned tf32(const unsigned bits)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
    return r;
}

#else

/* d += a b for one 16 x 8 x 16 tile. Turing (sm_75) has no m16n8k16 for
   f16: there it is two m16n8k8, the first on A's registers 0-1 and B's
   register 0 (k 0-7), the second on A's 2-3 and B's 1 (k 8-15): the
   m16n8k8 fragments are exactly those halves of the m16n8k16 ones (the
   host model checks both). */
__device__ __forceinline__ void mma_tile(float d[4], const unsigned a[4], const unsigned b[2])
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
        const storage_t *s = valid ? src + (size_t)row * ld + col : src;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(d)), "l"(s),
                     "r"(valid * (int)sizeof(storage_t)));
#else
#pragma unroll
        for (int j = 0; j < CHUNK; j++)
            d[j] = row < rows_end && col + j < cols_end ? src[(size_t)row * ld + col + j] : (storage_t)0;
#endif
    }
}

/* ldmatrix .x4 (.trans with TRANS): four 8 x 8 matrices of 16-bit values,
   rows from the lanes' addresses (gemm/mma_layout.h); fp32 values rounded
   to TF32 as the multiply takes them. */
template <bool TRANS> __device__ __forceinline__ void ldsm_x4(unsigned r[4], const storage_t *p)
{
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(p)));
#if KILN_MMA_TF32
#pragma unroll
    for (int i = 0; i < 4; i++)
        r[i] = tf32(r[i]);
#endif
}

#if KILN_MMA_TF32
/* TF32 fragments of an operand stored along M or N, which ldmatrix would
   split: value by value at gemm/mma_layout.h's element mapping, rounded.
   A's of rows m0 to m0 + 15 from A stored K x M; B's of columns n0 to
   n0 + 7 (b0) and n0 + 8 to n0 + 15 (b1) from B stored K x N. */
__device__ __forceinline__ void load_a_values(unsigned a[4], const storage_t *at, const int kk, const int m0,
                                              const int lane)
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        a[i] = tf32(__float_as_uint(at[(kk + kiln_mma_tf32_a_k(lane, i)) * A_LD + m0 + kiln_mma_tf32_a_row(lane, i)]));
}
__device__ __forceinline__ void load_b_values(unsigned b0[2], unsigned b1[2], const storage_t *bt, const int kk,
                                              const int n0, const int lane)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const storage_t *p = bt + (kk + kiln_mma_tf32_b_k(lane, i)) * B_LD + n0 + kiln_mma_tf32_b_col(lane);
        b0[i] = tf32(__float_as_uint(p[0]));
        b1[i] = tf32(__float_as_uint(p[8]));
    }
}
#endif

__device__ __forceinline__ void commit()
{
#if KILN_MMA_ASYNC
    asm volatile("cp.async.commit_group;");
#endif
}

__device__ __forceinline__ void wait_stage()
{
#if KILN_MMA_ASYNC
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 2));
#endif
    __syncthreads();
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
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[mi][ni][i] = 0.0f;

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
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < steps)
            load(s);
        commit();
    }

    for (int s = 0; s < steps; s++) {
        wait_stage(); /* step s has landed; every warp is done with step s - 1 */
        if (s + STAGES - 1 < steps)
            load(s + STAGES - 1); /* into step s - 1's buffer */
        commit();
        const storage_t *at = as + s % STAGES * A_TILE, *bt = bs + s % STAGES * B_TILE;
#pragma unroll
        for (int kk = 0; kk < BK; kk += MMA_K) {
            unsigned a[MI][4], b[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
#if KILN_MMA_TF32 && KILN_TRANS_A
                load_a_values(a[mi], at, kk, wr + mi * 16, lane);
#elif KILN_TRANS_A
                ldsm_x4<true>(a[mi], at + (kk + kiln_mma_ldsm_across_row(lane)) * A_LD + wr + mi * 16 +
                                         kiln_mma_ldsm_across_col(lane, CHUNK));
#else
                ldsm_x4<false>(a[mi], at + (wr + mi * 16 + kiln_mma_ldsm_down_row(lane)) * A_LD + kk +
                                          kiln_mma_ldsm_down_col(lane, CHUNK));
#endif
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni += 2) {
#if KILN_MMA_TF32 && !KILN_TRANS_B
                load_b_values(b[ni], b[ni + 1], bt, kk, wc + ni * 8, lane);
#else
                unsigned r[4];
#if KILN_TRANS_B
                ldsm_x4<false>(r, bt + (wc + ni * 8 + kiln_mma_ldsm_across_row(lane)) * B_LD + kk +
                                      kiln_mma_ldsm_across_col(lane, CHUNK));
#else
                ldsm_x4<true>(r, bt + (kk + kiln_mma_ldsm_down_row(lane)) * B_LD + wc + ni * 8 +
                                     kiln_mma_ldsm_down_col(lane, CHUNK));
#endif
                b[ni][0] = r[0], b[ni][1] = r[1], b[ni + 1][0] = r[2], b[ni + 1][1] = r[3];
#endif
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++)
                    mma_tile(acc[mi][ni], a[mi], b[ni]);
        }
    }

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
