/*
 * The block-level steps of kiln's mma.sync kernels that stage their tiles
 * through a ring of shared-memory buffers (gemm_f16_mma.cu, and the
 * convolution's conv/conv_f16_igemm_mma.cu), whatever copies the tiles
 * there: the copy groups' commit and wait, the ring's order of copies and
 * multiplies, the accumulators' zeroing, and one staged step multiplied by
 * a warp, its fragments read by ldmatrix at gemm/mma_layout.h's addresses
 * (.trans where the stored layout is the other way round).
 *
 * With KILN_MMA_TF32=1 (gemm_f16_mma.cu's fp32 storage; the convolution is
 * 16-bit only) a step multiplies by m16n8k8 on TF32 values, each value of A
 * and B rounded to TF32 (cvt.rna.tf32.f32: to nearest, ties away from zero)
 * as its fragment is loaded. ldmatrix moves 16-bit values, so it reads only
 * operands stored along K there; those stored along M or N are read value
 * by value at mma_layout.h's kiln_mma_tf32_* element mapping.
 *
 * Template parameters are CamelCase, apart from the kernels' macros. Before
 * including: KILN_MMA_ASYNC, 1 where the tiles come by cp.async (sm_80 on),
 * 0 for plain loads.
 */
#ifndef KILN_CU_MMA_PIPELINE_H
#define KILN_CU_MMA_PIPELINE_H

#include "gemm/mma_layout.h"
#include "gemm/tensor_core.h"

/* K of one mma: 16 16-bit values or 8 fp32 ones, 32 bytes. */
#define MMA_K (2 * CHUNK)

#if KILN_MMA_TF32

/* An fp32 value rounded to TF32: to nearest, ties away from zero. */
__device__ __forceinline__ unsigned tf32(const unsigned bits)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
    return r;
}

/* d += a b for one 16 x 8 x 8 tile of TF32 values. */
__device__ __forceinline__ void mma_tile(float d[4], const unsigned a[4], const unsigned b[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* TF32 fragments of an operand stored along M or N, which ldmatrix would
   split: value by value at gemm/mma_layout.h's element mapping, rounded.
   A's of rows m0 to m0 + 15 from A stored K x M, rows ALd apart; B's of
   columns n0 to n0 + 7 (b0) and n0 + 8 to n0 + 15 (b1) from B stored
   K x N, rows BLd apart. */
template <int ALd>
__device__ __forceinline__ void load_a_values(unsigned a[4], const storage_t *at, const int kk, const int m0,
                                              const int lane)
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        a[i] = tf32(__float_as_uint(at[(kk + kiln_mma_tf32_a_k(lane, i)) * ALd + m0 + kiln_mma_tf32_a_row(lane, i)]));
}
template <int BLd>
__device__ __forceinline__ void load_b_values(unsigned b0[2], unsigned b1[2], const storage_t *bt, const int kk,
                                              const int n0, const int lane)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const storage_t *p = bt + (kk + kiln_mma_tf32_b_k(lane, i)) * BLd + n0 + kiln_mma_tf32_b_col(lane);
        b0[i] = tf32(__float_as_uint(p[0]));
        b1[i] = tf32(__float_as_uint(p[8]));
    }
}

#else

/* d += a b for one 16 x 8 x 16 tile of 16-bit values. */
__device__ __forceinline__ void mma_tile(float d[4], const unsigned a[4], const unsigned b[2]) { mma_16816(d, a, b); }

#endif

/* ldmatrix .x4 (.trans with Trans) at p (gemm/mma_layout.h's addresses):
   four 8 x 8 matrices of 16-bit values; fp32 values rounded to TF32 as the
   multiply takes them. */
template <bool Trans> __device__ __forceinline__ void ldsm_fragments(unsigned r[4], const storage_t *p)
{
    if (Trans)
        ldsm_x4_trans(r, p);
    else
        ldsm_x4(r, p);
#if KILN_MMA_TF32
#pragma unroll
    for (int i = 0; i < 4; i++)
        r[i] = tf32(r[i]);
#endif
}

/* The copies issued since the last commit become one group. */
__device__ __forceinline__ void mma_commit()
{
#if KILN_MMA_ASYNC
    asm volatile("cp.async.commit_group;");
#endif
}

/* With Stages - 1 groups committed ahead of step s's use: step s's group
   has landed, and every warp is done with the buffer of step s - 1. */
template <int Stages> __device__ __forceinline__ void mma_wait()
{
#if KILN_MMA_ASYNC
    asm volatile("cp.async.wait_group %0;" ::"n"(Stages - 2));
#endif
    __syncthreads();
}

/* The ring of Stages buffers over `steps` steps: load(s) issues the copies
   of step s's tiles into buffer s % Stages (steps in order, Stages - 1
   ahead), and multiply(s) uses them once they have landed. */
template <int Stages, typename Load, typename Multiply>
__device__ __forceinline__ void mma_pipeline(const int steps, Load &&load, Multiply &&multiply)
{
#pragma unroll
    for (int s = 0; s < Stages - 1; s++) {
        if (s < steps)
            load(s);
        mma_commit();
    }
    for (int s = 0; s < steps; s++) {
        mma_wait<Stages>(); /* step s has landed; every warp is done with step s - 1 */
        if (s + Stages - 1 < steps)
            load(s + Stages - 1); /* into step s - 1's buffer */
        mma_commit();
        multiply(s);
    }
}

/* One staged step of Bk values of K: the warp whose part of the block
   starts at row wr and column wc adds its (Mi x 16) x (Ni x 8) of A B to
   acc, as Mi x Ni mma tiles per MMA_K of K. A's buffer `at` is stored
   M x K (K x M with TransA), rows ALd apart; B's `bt` K x N (N x K with
   TransB), rows BLd apart. */
template <int Bk, int Mi, int Ni, int ALd, int BLd, int TransA, int TransB>
__device__ __forceinline__ void mma_warp_step(float (&acc)[Mi][Ni][4], const storage_t *at, const storage_t *bt,
                                              const int wr, const int wc, const int lane)
{
#pragma unroll
    for (int kk = 0; kk < Bk; kk += MMA_K) {
        unsigned a[Mi][4], b[Ni][2];
#pragma unroll
        for (int mi = 0; mi < Mi; mi++) {
#if KILN_MMA_TF32
            if (TransA) {
                load_a_values<ALd>(a[mi], at, kk, wr + mi * 16, lane);
                continue;
            }
#endif
            if (TransA)
                ldsm_fragments<true>(a[mi], at + (kk + kiln_mma_ldsm_across_row(lane)) * ALd + wr + mi * 16 +
                                                kiln_mma_ldsm_across_col(lane, CHUNK));
            else
                ldsm_fragments<false>(a[mi], at + (wr + mi * 16 + kiln_mma_ldsm_down_row(lane)) * ALd + kk +
                                                 kiln_mma_ldsm_down_col(lane, CHUNK));
        }
#pragma unroll
        for (int ni = 0; ni < Ni; ni += 2) {
#if KILN_MMA_TF32
            if (!TransB) {
                load_b_values<BLd>(b[ni], b[ni + 1], bt, kk, wc + ni * 8, lane);
                continue;
            }
#endif
            unsigned r[4];
            if (TransB)
                ldsm_fragments<false>(r, bt + (wc + ni * 8 + kiln_mma_ldsm_across_row(lane)) * BLd + kk +
                                             kiln_mma_ldsm_across_col(lane, CHUNK));
            else
                ldsm_fragments<true>(r, bt + (kk + kiln_mma_ldsm_down_row(lane)) * BLd + wc + ni * 8 +
                                            kiln_mma_ldsm_down_col(lane, CHUNK));
            b[ni][0] = r[0], b[ni][1] = r[1], b[ni + 1][0] = r[2], b[ni + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < Mi; mi++)
#pragma unroll
            for (int ni = 0; ni < Ni; ni++)
                mma_tile(acc[mi][ni], a[mi], b[ni]);
    }
}

#endif /* KILN_CU_MMA_PIPELINE_H */
