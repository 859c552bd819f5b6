/*
 * A CPU register tile (common/register_tile.h) of MR rows, 5 to 8, by
 * 16-lane vectors, stored column by column as runs of MR consecutive
 * values: the flipped GEMM's tile of C^T (cl/gemm/gemm_f32_cpu.cl) and the
 * implicit GEMM row variant's tile of pixels by filters into NCHW
 * (cl/conv/conv_f32_igemm_rows.cl). KILN_TILE_RUNS is 1 where the tile is
 * such, 0 otherwise.
 *
 * KILN_TILE_COLUMNS(acc, v, t) fills float16 t[8] from vector v of
 * acc[MR][NV]: t[x].lo holds the MR values of column v * 16 + 2x (rows past
 * MR as zero), t[x].hi those of column v * 16 + 2x + 1. The transpose is
 * done in registers, in three rounds of interleaving one vector's lanes
 * with another's (OpenCL vector literals, which LLVM turns into shuffles),
 * instead of through a private array read value by value.
 *
 * run_load, run_load_f32 and run_store move a run of MR values between
 * memory and the first lanes of a float8, never touching a value past the
 * run, which may be the tensor's last.
 *
 * tile_store_runs stores a whole tile so, with the epilogue (KILN_ACT of
 * common/epilogue.h) applied to each run: what both kernels call.
 */
#ifndef KILN_CL_TILE_RUNS_H
#define KILN_CL_TILE_RUNS_H

#include "common/epilogue.h"
#include "common/register_tile.h"

#if MR >= 5 && MR <= 8 && VW == 16
#define KILN_TILE_RUNS 1

inline float8 run_load(KILN_GLOBAL const KILN_STORAGE *p)
{
#if MR == 8
    return KILN_VLOADN(8, p);
#elif MR == 7
    return (float8)(KILN_VLOADN(4, p), KILN_VLOADN(2, p + 4), KILN_LOAD(p, 6), 0.0f);
#elif MR == 6
    return (float8)(KILN_VLOADN(4, p), KILN_VLOADN(2, p + 4), 0.0f, 0.0f);
#else
    return (float8)(KILN_VLOADN(4, p), KILN_LOAD(p, 4), 0.0f, 0.0f, 0.0f);
#endif
}

inline float8 run_load_f32(KILN_GLOBAL const float *p)
{
#if MR == 8
    return vload8(0, p);
#elif MR == 7
    return (float8)(vload4(0, p), vload2(0, p + 4), p[6], 0.0f);
#elif MR == 6
    return (float8)(vload4(0, p), vload2(0, p + 4), 0.0f, 0.0f);
#else
    return (float8)(vload4(0, p), p[4], 0.0f, 0.0f, 0.0f);
#endif
}

inline void run_store(float8 x, KILN_GLOBAL KILN_STORAGE *p)
{
#if MR == 8
    KILN_VSTOREN(x, 8, p);
#else
    KILN_VSTOREN(x.lo, 4, p);
#if MR >= 6
    KILN_VSTOREN(x.s45, 2, p + 4);
#endif
#if MR == 7
    KILN_STORE(x.s6, p, 6);
#elif MR == 5
    KILN_STORE(x.s4, p, 4);
#endif
#endif
}

/* Row i of acc's vector v, zero past MR. */
#define KILN_TILE_ROW(acc, i, v) ((i) < MR ? acc[(i) < MR ? (i) : 0][v] : (float16)(0.0f))

/* The vectors of two rows a and b, lanes interleaved: a0 b0 a1 b1 ... (lo:
   lanes 0-7, hi: lanes 8-15), pairs of lanes (2), or quads (4). */
#define KILN_ZIP1_LO(a, b)                                                                                             \
    (float16)(a.s0, b.s0, a.s1, b.s1, a.s2, b.s2, a.s3, b.s3, a.s4, b.s4, a.s5, b.s5, a.s6, b.s6, a.s7, b.s7)
#define KILN_ZIP1_HI(a, b)                                                                                             \
    (float16)(a.s8, b.s8, a.s9, b.s9, a.sa, b.sa, a.sb, b.sb, a.sc, b.sc, a.sd, b.sd, a.se, b.se, a.sf, b.sf)
#define KILN_ZIP2_LO(a, b) (float16)(a.s01, b.s01, a.s23, b.s23, a.s45, b.s45, a.s67, b.s67)
#define KILN_ZIP2_HI(a, b) (float16)(a.s89, b.s89, a.sab, b.sab, a.scd, b.scd, a.sef, b.sef)
#define KILN_ZIP4_LO(a, b) (float16)(a.s0123, b.s0123, a.s4567, b.s4567)
#define KILN_ZIP4_HI(a, b) (float16)(a.s89ab, b.s89ab, a.scdef, b.scdef)

/* Pairs of rows, then quads, then all 8: lane pair (2e, 2e + 1) of t[x]
   ends up as the 8 rows of columns 2e and 2e + 1 (b0: columns 0-3 of rows
   0-3, b4 the same of rows 4-7; b1 and b5 columns 4-7; b2, b6 columns
   8-11; b3, b7 columns 12-15). */
#define KILN_TILE_COLUMNS(acc, v, t)                                                                                   \
    do {                                                                                                               \
        const float16 r0_ = KILN_TILE_ROW(acc, 0, v), r1_ = KILN_TILE_ROW(acc, 1, v), r2_ = KILN_TILE_ROW(acc, 2, v),  \
                      r3_ = KILN_TILE_ROW(acc, 3, v), r4_ = KILN_TILE_ROW(acc, 4, v), r5_ = KILN_TILE_ROW(acc, 5, v),  \
                      r6_ = KILN_TILE_ROW(acc, 6, v), r7_ = KILN_TILE_ROW(acc, 7, v);                                  \
        const float16 a0_ = KILN_ZIP1_LO(r0_, r1_), a1_ = KILN_ZIP1_HI(r0_, r1_), a2_ = KILN_ZIP1_LO(r2_, r3_),        \
                      a3_ = KILN_ZIP1_HI(r2_, r3_), a4_ = KILN_ZIP1_LO(r4_, r5_), a5_ = KILN_ZIP1_HI(r4_, r5_),        \
                      a6_ = KILN_ZIP1_LO(r6_, r7_), a7_ = KILN_ZIP1_HI(r6_, r7_);                                      \
        const float16 b0_ = KILN_ZIP2_LO(a0_, a2_), b1_ = KILN_ZIP2_HI(a0_, a2_), b2_ = KILN_ZIP2_LO(a1_, a3_),        \
                      b3_ = KILN_ZIP2_HI(a1_, a3_), b4_ = KILN_ZIP2_LO(a4_, a6_), b5_ = KILN_ZIP2_HI(a4_, a6_),        \
                      b6_ = KILN_ZIP2_LO(a5_, a7_), b7_ = KILN_ZIP2_HI(a5_, a7_);                                      \
        t[0] = KILN_ZIP4_LO(b0_, b4_), t[1] = KILN_ZIP4_HI(b0_, b4_), t[2] = KILN_ZIP4_LO(b1_, b5_);                   \
        t[3] = KILN_ZIP4_HI(b1_, b5_), t[4] = KILN_ZIP4_LO(b2_, b6_), t[5] = KILN_ZIP4_HI(b2_, b6_);                   \
        t[6] = KILN_ZIP4_LO(b3_, b7_), t[7] = KILN_ZIP4_HI(b3_, b7_);                                                  \
    } while (0)

KILN_ACTIVATION_FUNCTION(float8, activate8)

/* Column j of the tile (its MR rows) as the run at out + j * ld:
   act(alpha * acc + beta * addend + bias), the addend (NULL: none) read
   where the run is stored, col_bias[j] (NULL: none) added to the whole run,
   row_bias (NULL: none) to it row by row. Callers pass NULL as a constant
   where a switch rules a term out, so the test folds away. */
__attribute__((always_inline)) inline void tile_store_runs(VEC acc[MR][NV], KILN_GLOBAL KILN_STORAGE *out,
                                                           const size_t ld, const float alpha, const float beta,
                                                           KILN_GLOBAL const KILN_STORAGE *addend,
                                                           KILN_GLOBAL const float *col_bias,
                                                           KILN_GLOBAL const float *row_bias, const float slope)
{
#pragma unroll
    for (int v = 0; v < NV; v++) {
        float16 t[8];
        KILN_TILE_COLUMNS(acc, v, t);
#pragma unroll
        for (int x = 0; x < 8; x++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int j = v * VW + 2 * x + h; /* the column of the tile */
                const size_t at = (size_t)j * ld;
                float8 r = alpha * (h ? t[x].hi : t[x].lo);
                if (addend)
                    r = fma((float8)(beta), run_load(addend + at), r);
                if (col_bias)
                    r += col_bias[j];
                if (row_bias)
                    r += run_load_f32(row_bias);
                run_store(activate8(r, slope), out + at);
            }
    }
}

#else
#define KILN_TILE_RUNS 0
#endif

#endif
