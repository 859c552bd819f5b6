/*
 * The block-level steps of kiln's mma.sync kernels that stage their tiles
 * through a ring of shared-memory buffers (gemm_f16_mma.cu, and the
 * convolution's conv/conv_f16_igemm_mma.cu), whatever copies the tiles
 * there: the copy groups' commit and wait, the ring's order of copies and
 * multiplies, the accumulators' zeroing, and one staged step multiplied by
 * a warp, its fragments read by ldmatrix at gemm/mma_layout.h's addresses
 * (.trans where the stored layout is the other way round).
 *
 * Template parameters are CamelCase, apart from the kernels' macros. Before
 * including: KILN_MMA_ASYNC, 1 where the tiles come by cp.async (sm_80 on),
 * 0 for plain loads.
 */
#ifndef KILN_CU_MMA_PIPELINE_H
#define KILN_CU_MMA_PIPELINE_H

#include "gemm/mma_layout.h"
#include "gemm/tensor_core.h"

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

/* One staged step of Bk values of K: the warp whose part of the block
   starts at row wr and column wc adds its (Mi x 16) x (Ni x 8) of A B to
   acc, as Mi x Ni mma tiles per 16 of K. A's buffer `at` is stored M x K
   (K x M with TransA), rows ALd apart; B's `bt` K x N (N x K with
   TransB), rows BLd apart. */
template <int Bk, int Mi, int Ni, int ALd, int BLd, int TransA, int TransB>
__device__ __forceinline__ void mma_warp_step(float (&acc)[Mi][Ni][4], const unsigned short *at,
                                              const unsigned short *bt, const int wr, const int wc, const int lane)
{
#pragma unroll
    for (int kk = 0; kk < Bk; kk += 16) {
        unsigned a[Mi][4], b[Ni][2];
#pragma unroll
        for (int mi = 0; mi < Mi; mi++) {
            if (TransA)
                ldsm_x4_trans(a[mi], at + (kk + kiln_mma_ldsm_across_row(lane)) * ALd + wr + mi * 16 +
                                         kiln_mma_ldsm_across_col(lane));
            else
                ldsm_x4(a[mi],
                        at + (wr + mi * 16 + kiln_mma_ldsm_down_row(lane)) * ALd + kk + kiln_mma_ldsm_down_col(lane));
        }
#pragma unroll
        for (int ni = 0; ni < Ni; ni += 2) {
            unsigned r[4];
            if (TransB)
                ldsm_x4(r, bt + (wc + ni * 8 + kiln_mma_ldsm_across_row(lane)) * BLd + kk +
                               kiln_mma_ldsm_across_col(lane));
            else
                ldsm_x4_trans(r, bt + (kk + kiln_mma_ldsm_down_row(lane)) * BLd + wc + ni * 8 +
                                     kiln_mma_ldsm_down_col(lane));
            b[ni][0] = r[0], b[ni][1] = r[1], b[ni + 1][0] = r[2], b[ni + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < Mi; mi++)
#pragma unroll
            for (int ni = 0; ni < Ni; ni++)
                mma_16816(acc[mi][ni], a[mi], b[ni]);
    }
}

#endif /* KILN_CU_MMA_PIPELINE_H */
