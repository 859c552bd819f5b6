/*
 * A CPU register tile (common/register_tile.h) of MR rows, 5 to 8, by
 * 16-lane vectors, stored column by column as runs of MR consecutive
 * values: the flipped GEMM's tile of C^T (cl/gemm/gemm_f32_cpu.cl) and the
 * implicit GEMM row variant's tile of pixels by filters into NCHW
 * (cl/conv/conv_f32_igemm_rows.cl). KILN_TILE_RUNS is 1 where the tile is
 * such, 0 otherwise.
 *
 * KILN_TILE_COLUMNS(acc, v, t) fills float16 t[8] from vector v of
 * acc[MR][NV]: each half of t[x] holds the MR values of one column of the
 * tile (rows past MR as zero), column v * 16 + KILN_TILE_COLUMN(x, h). The
 * transpose is done in registers, in three rounds of shuffles of two
 * vectors, the first two inside 128-bit quarters (what the AVX-512 unpack
 * instructions do in one step each), instead of through a private array
 * read value by value.
 *
 * run_load and run_store move a run of MR values between memory and the
 * first lanes of a float8, never touching a value past the run, which may
 * be the tensor's last.
 *
 * tile_store_runs stores a whole tile so, with the epilogue (KILN_ACT of
 * common/epilogue.h) applied to its vectors before the transpose, or to
 * each run after a residual addend: what both kernels call.
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
#else
    /* Two loads of 4 that overlap inside the run (run_store). */
    const float4 a = KILN_VLOADN(4, p), b = KILN_VLOADN(4, p + (MR - 4));
#if MR == 7
    return (float8)(a, b.s123, 0.0f);
#elif MR == 6
    return (float8)(a, b.s23, 0.0f, 0.0f);
#else
    return (float8)(a, b.s3, 0.0f, 0.0f, 0.0f);
#endif
#endif
}

/* Two stores of 4 values, the second ending at the run's end: they overlap
   inside the run (lanes 3 to 6 for a run of 7), where a store of 4, 2 and
   1 took three stores and two extractions. */
inline void run_store(float8 x, KILN_GLOBAL KILN_STORAGE *p)
{
#if MR == 8
    KILN_VSTOREN(x, 8, p);
#else
    KILN_VSTOREN(x.lo, 4, p);
#if MR == 7
    KILN_VSTOREN(x.s3456, 4, p + 3);
#elif MR == 6
    KILN_VSTOREN(x.s2345, 4, p + 2);
#else
    KILN_VSTOREN(x.s1234, 4, p + 1);
#endif
#endif
}

/* Row i of acc's vector v, zero past MR. */
#define KILN_TILE_ROW(acc, i, v) ((i) < MR ? acc[(i) < MR ? (i) : 0][v] : (float16)(0.0f))

/* Shuffles of two 16-lane vectors a (lanes 0-15) and b (16-31). The first
   two work inside each 128-bit quarter, as the AVX-512 unpack instructions
   do: UNPACK_LO interleaves lanes 0 and 1 of each quarter of a and b,
   UNPACK_HI lanes 2 and 3; PAIRS_LO / _HI the same with pairs of lanes. */
#define KILN_UNPACK_LO(a, b) __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29)
#define KILN_UNPACK_HI(a, b) __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31)
#define KILN_PAIRS_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)
#define KILN_PAIRS_HI(a, b) __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31)
/* Quarters 0 and 1 (2 and 3) of a and b, alternating: a.q0 b.q0 a.q1 b.q1. */
#define KILN_QUARTERS_LO(a, b) __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23)
#define KILN_QUARTERS_HI(a, b)                                                                                         \
    __builtin_shufflevector(a, b, 8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31)

/* The column of the tile (of 16, vector v's) whose rows KILN_TILE_COLUMNS
   leaves in half h (0: lanes 0-7, 1: 8-15) of t[x]. */
#define KILN_TILE_COLUMN(x, h) (((x)&1) * 8 + ((x) >> 1) + 4 * (h))

/* Rows 0-3 and 4-7 each interleaved in two rounds inside the quarters
   (after them, quarter q of x[c] holds rows 0-3 of column 4q + c, y[c]
   rows 4-7), then the halves of each column joined: 24 shuffles for 16
   columns. */
#define KILN_TILE_COLUMNS(acc, v, t)                                                                                   \
    do {                                                                                                               \
        const float16 r0_ = KILN_TILE_ROW(acc, 0, v), r1_ = KILN_TILE_ROW(acc, 1, v), r2_ = KILN_TILE_ROW(acc, 2, v),  \
                      r3_ = KILN_TILE_ROW(acc, 3, v), r4_ = KILN_TILE_ROW(acc, 4, v), r5_ = KILN_TILE_ROW(acc, 5, v),  \
                      r6_ = KILN_TILE_ROW(acc, 6, v), r7_ = KILN_TILE_ROW(acc, 7, v);                                  \
        const float16 a0_ = KILN_UNPACK_LO(r0_, r1_), a1_ = KILN_UNPACK_HI(r0_, r1_), a2_ = KILN_UNPACK_LO(r2_, r3_),  \
                      a3_ = KILN_UNPACK_HI(r2_, r3_), a4_ = KILN_UNPACK_LO(r4_, r5_), a5_ = KILN_UNPACK_HI(r4_, r5_),  \
                      a6_ = KILN_UNPACK_LO(r6_, r7_), a7_ = KILN_UNPACK_HI(r6_, r7_);                                  \
        const float16 x_[4] = {KILN_PAIRS_LO(a0_, a2_), KILN_PAIRS_HI(a0_, a2_), KILN_PAIRS_LO(a1_, a3_),              \
                               KILN_PAIRS_HI(a1_, a3_)};                                                               \
        const float16 y_[4] = {KILN_PAIRS_LO(a4_, a6_), KILN_PAIRS_HI(a4_, a6_), KILN_PAIRS_LO(a5_, a7_),              \
                               KILN_PAIRS_HI(a5_, a7_)};                                                               \
        _Pragma("unroll") for (int c_ = 0; c_ < 4; c_++)                                                               \
        {                                                                                                              \
            t[2 * c_] = KILN_QUARTERS_LO(x_[c_], y_[c_]);                                                              \
            t[2 * c_ + 1] = KILN_QUARTERS_HI(x_[c_], y_[c_]);                                                          \
        }                                                                                                              \
    } while (0)

KILN_ACTIVATION_FUNCTION(float8, activate8)
KILN_ACTIVATION_FUNCTION(float16, activate16)

/* Column j of the tile (its MR rows) as the run at out + j * ld:
   act(alpha * acc + bias + beta * addend), the addend (NULL: none) read
   where the run is stored, col_bias[j] (NULL: none) added to the whole run,
   row_bias (NULL: none) to it row by row. alpha and the biases are applied
   to the tile's 16-lane vectors before the transpose (a column's bias is a
   lane's), and so is the activation when there is no addend: MR x NV
   vector operations instead of three or four on each of the 16 x NV runs.
   Callers pass NULL as a constant where a switch rules a term out, so the
   test folds away. */
__attribute__((always_inline)) inline void tile_store_runs(VEC acc[MR][NV], KILN_GLOBAL KILN_STORAGE *out,
                                                           const size_t ld, const float alpha, const float beta,
                                                           KILN_GLOBAL const KILN_STORAGE *addend,
                                                           KILN_GLOBAL const float *col_bias,
                                                           KILN_GLOBAL const float *row_bias, const float slope)
{
    VEC e[MR][NV];
#pragma unroll
    for (int i = 0; i < MR; i++)
#pragma unroll
        for (int v = 0; v < NV; v++) {
            VEC r = alpha * acc[i][v];
            if (col_bias)
                r += VLOAD(v, col_bias);
            if (row_bias)
                r += row_bias[i];
            e[i][v] = addend ? r : activate16(r, slope);
        }
#pragma unroll
    for (int v = 0; v < NV; v++) {
        float16 t[8];
        KILN_TILE_COLUMNS(e, v, t);
#pragma unroll
        for (int x = 0; x < 8; x++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const size_t at = (size_t)(v * VW + KILN_TILE_COLUMN(x, h)) * ld;
                float8 r = h ? t[x].hi : t[x].lo;
                if (addend)
                    r = activate8(fma((float8)(beta), run_load(addend + at), r), slope);
                run_store(r, out + at);
            }
    }
}

#else
#define KILN_TILE_RUNS 0
#endif

#endif
