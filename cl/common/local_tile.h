/*
 * The work-group tile of the GPU-style GEMM kernels, in the manner of
 * CLBlast's Xgemm, shared by gemm_f32_tiled (and gemm_f32_direct, its body)
 * and the tiled implicit-GEMM convolution (conv_f32_igemm_tiled): C += A B
 * over an MWG x NWG block of C, computed by MDIMC x NDIMC work-items and
 * stepping K by KWG through local memory.
 *
 * Parameters, which the including kernel maps from its own group of
 * compile options: LTILE_MWG, LTILE_NWG (the block of C), LTILE_KWG (the K
 * step), LTILE_MDIMC, LTILE_NDIMC (work-items along M and N), LTILE_KWI
 * (unroll of the multiply over a step), LTILE_VWM, LTILE_VWN (vector widths
 * of the register tile's reads), LTILE_SA, LTILE_SB (1 when A, B are staged
 * in local memory), LTILE_A_ALONG_K, LTILE_B_ALONG_K (1 when the operand's
 * contiguous dimension in memory is K).
 *
 * Register tile: work-item (im, in) holds MWI x NWI values of C (MWI = MWG /
 * MDIMC, NWI = NWG / NDIMC): groups of VWM consecutive rows
 * (mi / VWM * MDIMC + im) * VWM + mi % VWM and likewise groups of VWN
 * columns, so neighbouring work-items hold neighbouring vectors.
 *
 * Local tiles: A's MWG x KWG block as KWG rows of ALD floats (element (i, k)
 * at LTILE_A_AT(i, k) = k * ALD + i), B's KWG x NWG block as KWG rows of BLD
 * floats. An operand read from memory along K is written down the columns
 * of its tile; padding its rows by one vector spreads those writes over the
 * banks and keeps the rows vector-aligned. The hosts size local memory by
 * this rule.
 *
 * A K step: every work-item writes its share of the staged tiles (the
 * kernel's own loads: a strided matrix, an im2col gather), then LTILE_STEP.
 */
#ifndef KILN_CL_LOCAL_TILE_H
#define KILN_CL_LOCAL_TILE_H

#include "common/portability.h"
#include "common/storage.h"

#if LTILE_MWG % (LTILE_MDIMC * LTILE_VWM) || LTILE_NWG % (LTILE_NDIMC * LTILE_VWN) || LTILE_KWG % LTILE_KWI
#error "local tile: MWG must be a multiple of MDIMC * VWM, NWG of NDIMC * VWN and KWG of KWI"
#endif

#define LTILE_THREADS (LTILE_MDIMC * LTILE_NDIMC)
#define LTILE_MWI (LTILE_MWG / LTILE_MDIMC)
#define LTILE_NWI (LTILE_NWG / LTILE_NDIMC)
#define LTILE_ALD (LTILE_MWG + (LTILE_A_ALONG_K ? LTILE_VWM : 0))
#define LTILE_BLD (LTILE_NWG + (LTILE_B_ALONG_K ? LTILE_VWN : 0))
#define LTILE_A_AT(i, k) ((k)*LTILE_ALD + (i))
#define LTILE_B_AT(k, j) ((k)*LTILE_BLD + (j))

/* Tile row of register row mi of work-item row im, tile column of register
   column ni of work-item column in. */
#define LTILE_ROW(mi, im) (((mi) / LTILE_VWM * LTILE_MDIMC + (im)) * LTILE_VWM + (mi) % LTILE_VWM)
#define LTILE_COL(ni, in) (((ni) / LTILE_VWN * LTILE_NDIMC + (in)) * LTILE_VWN + (ni) % LTILE_VWN)

/* Copy n consecutive floats between float arrays (local, private). */
#if KILN_VECTOR_SYNTAX
#define LTILE_COPY1(src, dst) ((dst)[0] = (src)[0])
#define LTILE_COPY2(src, dst) vstore2(vload2(0, src), 0, dst)
#define LTILE_COPY4(src, dst) vstore4(vload4(0, src), 0, dst)
#define LTILE_COPY8(src, dst) vstore8(vload8(0, src), 0, dst)
#define LTILE_COPY16(src, dst) vstore16(vload16(0, src), 0, dst)
#define LTILE_COPY(n, src, dst) CAT(LTILE_COPY, n)(src, dst)
#else
#define LTILE_COPY(n, src, dst)                                                                                        \
    do {                                                                                                               \
        _Pragma("unroll") for (int c_ = 0; c_ < (n); c_++)(dst)[c_] = (src)[c_];                                       \
    } while (0)
#endif

inline void ltile_zero(float acc[LTILE_MWI][LTILE_NWI])
{
#pragma unroll
    for (int mi = 0; mi < LTILE_MWI; mi++)
#pragma unroll
        for (int ni = 0; ni < LTILE_NWI; ni++)
            acc[mi][ni] = 0.0f;
}

/* The register fragments of step row k, read from the staged tiles as
   vectors: a[mi] = A(LTILE_ROW(mi, im), k), b[ni] = B(k, LTILE_COL(ni, in)). */
inline void ltile_a_fragment(float a[LTILE_MWI], KILN_LOCAL const float *als, const int k, const int im)
{
#pragma unroll
    for (int mv = 0; mv < LTILE_MWI / LTILE_VWM; mv++)
        LTILE_COPY(LTILE_VWM, als + LTILE_A_AT((mv * LTILE_MDIMC + im) * LTILE_VWM, k), a + mv * LTILE_VWM);
}

inline void ltile_b_fragment(float b[LTILE_NWI], KILN_LOCAL const float *bls, const int k, const int in)
{
#pragma unroll
    for (int nv = 0; nv < LTILE_NWI / LTILE_VWN; nv++)
        LTILE_COPY(LTILE_VWN, bls + LTILE_B_AT(k, (nv * LTILE_NDIMC + in) * LTILE_VWN), b + nv * LTILE_VWN);
}

/* Between a step's staging and its multiply, every work-item's share of the
   staged tiles is handed to all; after the multiply, the tiles are released
   to the next step's staging. No barrier when nothing is staged. */
#if LTILE_SA || LTILE_SB
#define LTILE_SYNC() KILN_BARRIER_LOCAL()
#else
#define LTILE_SYNC() ((void)0)
#endif

/* One K step after staging: acc[MWI][NWI] += A(tile rows, step) B(step,
   tile columns), KWI step rows at a time, between the step's two barriers.
   A_FRAGMENT(a, k) and B_FRAGMENT(b, k) name the caller's macros filling the
   fragments of step row k: ltile_a_fragment / ltile_b_fragment for a staged
   operand, the kernel's own reads from memory for one that is not. */
#define LTILE_STEP(acc, A_FRAGMENT, B_FRAGMENT)                                                                        \
    do {                                                                                                               \
        LTILE_SYNC();                                                                                                  \
        for (int kb_ = 0; kb_ < LTILE_KWG; kb_ += LTILE_KWI) {                                                         \
            _Pragma("unroll") for (int kw_ = 0; kw_ < LTILE_KWI; kw_++)                                                \
            {                                                                                                          \
                float a_[LTILE_MWI], b_[LTILE_NWI];                                                                    \
                A_FRAGMENT(a_, kb_ + kw_);                                                                             \
                B_FRAGMENT(b_, kb_ + kw_);                                                                             \
                _Pragma("unroll") for (int mi_ = 0; mi_ < LTILE_MWI; mi_++)                                            \
                    _Pragma("unroll") for (int ni_ = 0; ni_ < LTILE_NWI; ni_++) acc[mi_][ni_] += a_[mi_] * b_[ni_];    \
            }                                                                                                          \
        }                                                                                                              \
        LTILE_SYNC();                                                                                                  \
    } while (0)

#endif
