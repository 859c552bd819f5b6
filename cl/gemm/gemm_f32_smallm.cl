/*
 * Small-M GEMM for CPUs: a few rows of C from A and B read where they are (no
 * packing, no workspace). Made for the classifier of a network at batch 1,
 * C[1 x n] = x[1 x k] . W^T, a matrix-vector product bound by reading B.
 *
 * ABI: gemm_f32_tiled's (gemm_f32_tiled.cl), in row-major terms, for batch
 * item b = KILN_GLOBAL_ID(2):
 *   C(i,j) = alpha * sum_k opA(i,k) * opB(k,j) + beta * C(i,j),  i < M, j < N
 *   opA(i,k) = KILN_TRANS_A ? A[k*lda + i] : A[i*lda + k]
 *   opB(k,j) = KILN_TRANS_B ? B[j*ldb + k] : B[k*ldb + j]
 *   C(i,j)   = C[i*ldc + j]
 * where every index is offset by off_x + b * stride_x (a stride of 0 shares
 * the operand between batch items). Any M, N, K >= 1, any ld and offset (no
 * alignment assumed); with beta == 0, C is written but never read. Storage is
 * fp32, fp16 (KILN_F16=1) or bf16 (KILN_BF16=1); arithmetic is fp32.
 *
 * Compile options: the gemm.smallm group's options (VW below is
 * KILN_GEMM_SMALLM_VW), KILN_TRANS_A, KILN_TRANS_B, KILN_F16 and KILN_BF16, plus the
 * work-item's register block from the plan: KILN_SMALLM_MB rows of C by
 * KILN_SMALLM_NB accumulator vectors per row.
 *
 * gemm_f32_smallm_dot (KILN_TRANS_B = 1): column j of opB is row j of B,
 * contiguous along K, so C(i,j) is a dot product along K. A work-item owns NB
 * columns of C; per step of VW along K it loads MB vectors of opA
 * (contiguous with KILN_TRANS_A = 0, gathered with stride lda otherwise) and
 * one vector of each of its NB rows of B into MB x NB accumulators, which are
 * summed across lanes at the end; the last K % VW terms are added one by one.
 * Launch: global = (ceil(N / NB), 1, batch).
 *
 * gemm_f32_smallm_axpy (KILN_TRANS_B = 0): row k of opB is row k of B,
 * contiguous along N. A work-item owns CHUNKS chunks of NB vectors of VW
 * columns of C and per k broadcasts MB values of opA against a chunk. The
 * chunk that crosses N loads its row segments of B lane by lane, zero-filled
 * past N; chunks wholly past N are skipped. Launch: global =
 * (ceil(N / (CHUNKS * NB * VW)), 1, batch).
 * With KILN_SMALLM_KC 0 (one chunk), the work-item runs over all of K for
 * one block of MB rows at a time. With KILN_SMALLM_KC > 0 it takes K in
 * steps of that many rows of B, and per step every block of rows and every
 * chunk in turn, their sums parked in private memory between steps: each
 * row of B is then read in runs of CHUNKS * NB * VW columns from one step's
 * rows while their pages are fresh in the TLB, where one chunk over all of K
 * reads one line per row, a page apart (a row of 4096 floats is 16 KiB), and
 * each line waits for memory (docs/gemm.md has the measurements).
 *
 * Both: any local size (1 on CPUs: one work-item per work-group). A
 * work-item runs over all M rows, MB at a time, so the lines of B it loaded
 * for the first block are in cache for the next; in the last block, rows
 * past M repeat row M - 1 (computed, not stored), as do the dot kernel's
 * columns past N, so the inner loops have no bounds checks.
 */
#define VW KILN_GEMM_SMALLM_VW
#define MB KILN_SMALLM_MB
#define NB KILN_SMALLM_NB
#ifndef KILN_SMALLM_KC
#define KILN_SMALLM_KC 0
#endif
#if KILN_SMALLM_KC
#define CHUNKS KILN_SMALLM_CHUNKS
#define BLOCKS KILN_SMALLM_BLOCKS /* ceil(M / MB) */
#else
#define CHUNKS 1
#endif

#include "common/portability.h"
#include "common/vector.h"

#if KILN_TRANS_A
#define A_AT(i, k) ((size_t)(k)*lda + (i))
#else
#define A_AT(i, k) ((size_t)(i)*lda + (k))
#endif

/* VW consecutive elements of row i of opA from column k. */
inline VEC load_a(KILN_GLOBAL const KILN_STORAGE *A, const int lda, const int i, const int k)
{
#if KILN_TRANS_A
    float lane[VW];
    for (int e = 0; e < VW; e++)
        lane[e] = KILN_LOAD(A, A_AT(i, k + e));
    return VLOAD(0, lane);
#else
    return VLOAD_S(0, A + A_AT(i, k));
#endif
}

/* C[at] = alpha * sum + beta * C[at], reading C only for beta != 0. */
inline void store_c(KILN_GLOBAL KILN_STORAGE *C, const size_t at, const float sum, const float alpha, const float beta)
{
    float r = alpha * sum;
    if (beta != 0.0f)
        r = fma(beta, KILN_LOAD(C, at), r);
    KILN_STORE(r, C, at);
}

/* int row[MB]: the row of opA that line i of the block from row i0 computes
   (M - 1 past M). */
#define BLOCK_ROWS(row, i0)                                                                                            \
    int row[MB];                                                                                                       \
    _Pragma("unroll") for (int i_ = 0; i_ < MB; i_++) row[i_] = min((i0) + i_, M - 1)

/* VEC acc[MB][NB], zero. */
#define ZERO(acc)                                                                                                      \
    VEC acc[MB][NB];                                                                                                   \
    _Pragma("unroll") for (int i_ = 0; i_ < MB; i_++) _Pragma("unroll") for (int v_ = 0; v_ < NB; v_++) acc[i_][v_] =  \
        0.0f

#if KILN_WANTS(gemm_f32_smallm_dot)
KILN_KERNEL void gemm_f32_smallm_dot(const int M, const int N, const int K, const float alpha, const float beta,
                                     KILN_GLOBAL const KILN_STORAGE *A, const ulong off_a, const int lda,
                                     const ulong stride_a, KILN_GLOBAL const KILN_STORAGE *B, const ulong off_b,
                                     const int ldb, const ulong stride_b, KILN_GLOBAL KILN_STORAGE *C,
                                     const ulong off_c, const int ldc, const ulong stride_c)
{
    const int j0 = KILN_GLOBAL_ID(0) * NB, b = KILN_GLOBAL_ID(2);
    if (j0 >= N)
        return;
    A += off_a + b * stride_a;
    B += off_b + b * stride_b;
    C += off_c + b * stride_c;
    KILN_GLOBAL const KILN_STORAGE *col[NB];
#pragma unroll
    for (int c = 0; c < NB; c++)
        col[c] = B + (size_t)min(j0 + c, N - 1) * ldb;

    for (int i0 = 0; i0 < M; i0 += MB) {
        BLOCK_ROWS(row, i0);
        ZERO(acc);
        int k = 0;
        for (; k + VW <= K; k += VW) {
            VEC a[MB];
#pragma unroll
            for (int i = 0; i < MB; i++)
                a[i] = load_a(A, lda, row[i], k);
#pragma unroll
            for (int c = 0; c < NB; c++) {
                const VEC bv = VLOAD_S(0, col[c] + k);
#pragma unroll
                for (int i = 0; i < MB; i++)
                    acc[i][c] = fma(a[i], bv, acc[i][c]);
            }
        }
        float sum[MB][NB];
#pragma unroll
        for (int i = 0; i < MB; i++)
#pragma unroll
            for (int c = 0; c < NB; c++)
                sum[i][c] = lane_sum(acc[i][c]);
        for (; k < K; k++)
#pragma unroll
            for (int i = 0; i < MB; i++) {
                const float a = KILN_LOAD(A, A_AT(row[i], k));
#pragma unroll
                for (int c = 0; c < NB; c++)
                    sum[i][c] = fma(a, KILN_LOAD(col[c], k), sum[i][c]);
            }
        for (int i = 0; i < MB && i0 + i < M; i++)
            for (int c = 0; c < NB && j0 + c < N; c++)
                store_c(C, (size_t)(i0 + i) * ldc + j0 + c, sum[i][c], alpha, beta);
    }
}
#endif

/* The NB vectors of row k of B from the work-item's first column (B points
   there): with `full` all NB * VW columns exist, else only the first `cols`,
   loaded lane by lane and zero past them. */
inline void load_b_row(VEC *bv, KILN_GLOBAL const KILN_STORAGE *B, const int ldb, const int k, const int cols,
                       const int full)
{
    KILN_GLOBAL const KILN_STORAGE *bk = B + (size_t)k * ldb;
    for (int v = 0; v < NB; v++) {
        if (full) {
            bv[v] = VLOAD_S(v, bk);
            continue;
        }
        float lane[VW];
        for (int e = 0; e < VW; e++)
            lane[e] = v * VW + e < cols ? KILN_LOAD(bk, v * VW + e) : 0.0f;
        bv[v] = VLOAD(0, lane);
    }
}

/* acc[i][v] += opA(row[i], k) * (row k of B, vector v), each value of opA
   loaded as a broadcast; `full` and `cols` as for load_b_row. */
__attribute__((always_inline)) inline void axpy_row(VEC (*acc)[NB], KILN_GLOBAL const KILN_STORAGE *A, const int lda,
                                                    const int *row, KILN_GLOBAL const KILN_STORAGE *B, const int ldb,
                                                    const int k, const int cols, const int full)
{
    VEC bv[NB];
    load_b_row(bv, B, ldb, k, cols, full);
#pragma unroll
    for (int i = 0; i < MB; i++) {
        const VEC a = (VEC)(KILN_LOAD(A, A_AT(row[i], k)));
#pragma unroll
        for (int v = 0; v < NB; v++)
            acc[i][v] = fma(a, bv[v], acc[i][v]);
    }
}

/* acc[i][v] += sum over k of opA(row[i], k) * (row k of B, vector v), `full`
   and `cols` as for load_b_row. Per VW steps along K it loads VW values of
   each row of opA as a vector (converted from fp16 together) and broadcasts
   them in turn. The kernel calls it with `full` constant, so the loop is
   compiled twice and its steps test nothing; POCL does not inline it
   unasked, hence always_inline. */
__attribute__((always_inline)) inline void axpy_rows(VEC (*acc)[NB], KILN_GLOBAL const KILN_STORAGE *A, const int lda,
                                                     const int *row, KILN_GLOBAL const KILN_STORAGE *B, const int ldb,
                                                     const int K, const int cols, const int full)
{
    VEC bv[NB];
    int k = 0;
    for (; k + VW <= K; k += VW) {
        float a[MB][VW];
#pragma unroll
        for (int i = 0; i < MB; i++)
            VSTORE(load_a(A, lda, row[i], k), 0, a[i]);
#pragma unroll
        for (int e = 0; e < VW; e++) {
            load_b_row(bv, B, ldb, k + e, cols, full);
#pragma unroll
            for (int i = 0; i < MB; i++)
#pragma unroll
                for (int v = 0; v < NB; v++)
                    acc[i][v] = fma((VEC)(a[i][e]), bv[v], acc[i][v]);
        }
    }
    for (; k < K; k++)
        axpy_row(acc, A, lda, row, B, ldb, k, cols, full);
}

/* Rows i0 .. i0 + MB - 1 (those below M) of C from the work-item's chunk
   (C points at its first column, `cols` of them there, more than zero):
   alpha * acc + beta * C. */
inline void store_rows(KILN_GLOBAL KILN_STORAGE *C, const int ldc, const int M, const int i0, VEC (*acc)[NB],
                       const int cols, const float alpha, const float beta)
{
    for (int i = 0; i < MB && i0 + i < M; i++) {
        KILN_GLOBAL KILN_STORAGE *c = C + (size_t)(i0 + i) * ldc;
        for (int v = 0; v < NB && v * VW < cols; v++) {
            if (cols >= (v + 1) * VW) {
                VEC r = alpha * acc[i][v];
                if (beta != 0.0f)
                    r = fma((VEC)(beta), VLOAD_S(v, c), r);
                VSTORE_S(r, v, c);
                continue;
            }
            float lane[VW];
            VSTORE(acc[i][v], 0, lane);
            for (int e = 0; v * VW + e < cols; e++)
                store_c(c, v * VW + e, lane[e], alpha, beta);
        }
    }
}

#if KILN_WANTS(gemm_f32_smallm_axpy)
KILN_KERNEL void gemm_f32_smallm_axpy(const int M, const int N, const int K, const float alpha, const float beta,
                                      KILN_GLOBAL const KILN_STORAGE *A, const ulong off_a, const int lda,
                                      const ulong stride_a, KILN_GLOBAL const KILN_STORAGE *B, const ulong off_b,
                                      const int ldb, const ulong stride_b, KILN_GLOBAL KILN_STORAGE *C,
                                      const ulong off_c, const int ldc, const ulong stride_c)
{
    const int j0 = KILN_GLOBAL_ID(0) * CHUNKS * NB * VW, b = KILN_GLOBAL_ID(2);
    if (j0 >= N)
        return;
    A += off_a + b * stride_a;
    B += off_b + b * stride_b + j0;
    C += off_c + b * stride_c + j0;
    const int cols = N - j0; /* of C from j0 on; fewer than CHUNKS * NB * VW at the edge */

#if KILN_SMALLM_KC
    float part[BLOCKS][CHUNKS][MB][NB * VW];
    for (int k0 = 0; k0 < K; k0 += KILN_SMALLM_KC) {
        const int kn = min(KILN_SMALLM_KC, K - k0);
#if KILN_TRANS_A
        KILN_GLOBAL const KILN_STORAGE *ak = A + (size_t)k0 * lda;
#else
        KILN_GLOBAL const KILN_STORAGE *ak = A + k0;
#endif
        KILN_GLOBAL const KILN_STORAGE *bk = B + (size_t)k0 * ldb;
        for (int rb = 0; rb < BLOCKS; rb++) {
            BLOCK_ROWS(row, rb * MB);
            for (int ch = 0; ch < CHUNKS && ch * NB * VW < cols; ch++) {
                const int cc = cols - ch * NB * VW; /* the chunk's columns, from bc on */
                KILN_GLOBAL const KILN_STORAGE *bc = bk + ch * NB * VW;
                VEC acc[MB][NB];
#pragma unroll
                for (int i = 0; i < MB; i++)
#pragma unroll
                    for (int v = 0; v < NB; v++)
                        acc[i][v] = k0 ? VLOAD(v, part[rb][ch][i]) : (VEC)(0.0f);
                if (cc >= NB * VW && kn == KILN_SMALLM_KC) {
                    /* A whole step of a whole chunk: per row of B its NB
                       vectors against MB values of opA, each loaded as a
                       broadcast (no vectors of opA along K: a step may be
                       shorter than one). */
#pragma unroll 8
                    for (int k = 0; k < KILN_SMALLM_KC; k++)
                        axpy_row(acc, ak, lda, row, bc, ldb, k, cc, 1);
                } else if (cc >= NB * VW)
                    axpy_rows(acc, ak, lda, row, bc, ldb, kn, cc, 1);
                else
                    axpy_rows(acc, ak, lda, row, bc, ldb, kn, cc, 0);
#pragma unroll
                for (int i = 0; i < MB; i++)
#pragma unroll
                    for (int v = 0; v < NB; v++)
                        VSTORE(acc[i][v], v, part[rb][ch][i]);
            }
        }
    }
    for (int rb = 0; rb < BLOCKS; rb++)
        for (int ch = 0; ch < CHUNKS && ch * NB * VW < cols; ch++) {
            VEC acc[MB][NB];
#pragma unroll
            for (int i = 0; i < MB; i++)
#pragma unroll
                for (int v = 0; v < NB; v++)
                    acc[i][v] = VLOAD(v, part[rb][ch][i]);
            store_rows(C + ch * NB * VW, ldc, M, rb * MB, acc, cols - ch * NB * VW, alpha, beta);
        }
#else
    for (int i0 = 0; i0 < M; i0 += MB) {
        BLOCK_ROWS(row, i0);
        ZERO(acc);
        if (cols >= NB * VW)
            axpy_rows(acc, A, lda, row, B, ldb, K, cols, 1);
        else
            axpy_rows(acc, A, lda, row, B, ldb, K, cols, 0);
        store_rows(C, ldc, M, i0, acc, cols, alpha, beta);
    }
#endif
}
#endif
