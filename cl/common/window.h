/*
 * The row tiles of kernels that slide a window over NCHW planes (direct
 * convolution, pooling), in the vector vocabulary of common/vector.h.
 *
 * A row tile is VW consecutive outputs of TH rows of one plane. For every
 * input row of its footprint the kernel reads VW columns at the window's
 * column stride SW, once per window column. Tiles whose columns all lie in
 * the row (the interior ones) load plainly, at stride 2 as 2*VW values of
 * which they keep the even ones. The others (edge tiles) load VW*SW values
 * clamped into the row, or, when the plane has one row tile (TILES_P == 1)
 * and its rows are narrower than that, clamped into the plane, then shift
 * and mask them into place. The host (src/ops/row_tiling.c) lists up to
 * three edge tiles to compile with their columns as constants, so those
 * shuffles fold into one or two permutes; any others do them at run time.
 * The last tile of a row is shifted left to end at the row's end, so every
 * tile is whole when the row is at least VW wide. Where the compiler
 * targets AVX-512 (KILN_MASKED_ROWS), a plane of one row tile reads its
 * rows with masked loads instead of clamped ones: narrower than a vector
 * of 16 at stride 1, and at stride 2 (row_load, row_taps).
 *
 * The including kernel defines VW (1, 2, 4, 8 or 16); for the row tiles
 * also SW, W and H (input width and height), P and Q (output height and
 * width), QE (the output columns the tiles cover: Q, or fewer under a fused
 * pool), TH, TILES_P, PL (left padding) and the host's KILN_ROW_* tiling.
 */
#ifndef KILN_CL_WINDOW_H
#define KILN_CL_WINDOW_H

#include "common/vector.h"

/* Helpers must inline: their constant arguments select code paths. */
#define INLINE inline __attribute__((always_inline))

#if VW > 1
/* Per width: LANES: 0, 1, ... VW - 1; LANE_LIST(k): k, k + 1, ... and
   EVERY_OTHER(k): k, k + 2, ... as shuffle indices. */
#if VW == 2
#define LANES ((IVEC)(0, 1))
#define LANE_LIST(k) (k), (k) + 1
#define EVERY_OTHER(k) (k), (k) + 2
#elif VW == 4
#define LANES ((IVEC)(0, 1, 2, 3))
#define LANE_LIST(k) (k), (k) + 1, (k) + 2, (k) + 3
#define EVERY_OTHER(k) (k), (k) + 2, (k) + 4, (k) + 6
#elif VW == 8
#define LANES ((IVEC)(0, 1, 2, 3, 4, 5, 6, 7))
#define LANE_LIST(k) (k), (k) + 1, (k) + 2, (k) + 3, (k) + 4, (k) + 5, (k) + 6, (k) + 7
#define EVERY_OTHER(k) (k), (k) + 2, (k) + 4, (k) + 6, (k) + 8, (k) + 10, (k) + 12, (k) + 14
#else
#define LANES ((IVEC)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#define LANE_LIST(k)                                                                                                   \
    (k), (k) + 1, (k) + 2, (k) + 3, (k) + 4, (k) + 5, (k) + 6, (k) + 7, (k) + 8, (k) + 9, (k) + 10, (k) + 11,          \
        (k) + 12, (k) + 13, (k) + 14, (k) + 15
#define EVERY_OTHER(k)                                                                                                 \
    (k), (k) + 2, (k) + 4, (k) + 6, (k) + 8, (k) + 10, (k) + 12, (k) + 14, (k) + 16, (k) + 18, (k) + 20, (k) + 22,     \
        (k) + 24, (k) + 26, (k) + 28, (k) + 30
#endif
/* The even (odd) elements of 2*VW consecutive ones: a stride-2 row. */
#if VW == 16
#define VLOAD_EVEN(p) ((float16)(KILN_VLOADN(16, p).even, KILN_VLOADN(16, (p) + 16).even))
#define VLOAD_ODD(p) ((float16)(KILN_VLOADN(16, p).odd, KILN_VLOADN(16, (p) + 16).odd))
#else
#define VLOAD_EVEN(p) (KILN_VLOADN(VW2, p).even)
#define VLOAD_ODD(p) (KILN_VLOADN(VW2, p).odd)
#endif
#endif

/* p[col], p[col + step], ... for VW lanes. Unless `full` (every lane inside
   [0, limit)), a lane outside reads `fill`. step and full are constants at
   every call, so the branches fold. */
INLINE VEC load_span(KILN_GLOBAL const KILN_STORAGE *p, int col, int step, int limit, bool full, float fill)
{
    if (full && step == 1)
        return VLOADU_S(p + col);
#if VW > 1
    if (full && step == 2)
        return VLOAD_EVEN(p + col);
#endif
    float t[VW];
#pragma unroll
    for (int l = 0; l < VW; l++) {
        const int c = col + l * step;
        t[l] = full || (uint)c < (uint)limit ? KILN_LOAD(p, c) : fill;
    }
    return VLOAD(0, t);
}

#if VW > 1
/* Lanes of v moved down (lane l takes lane l + k) or up by a constant k,
   zero shifted in. */
#define SHIFT_DOWN(v, k) __builtin_shufflevector((v), (VEC)(0.0f), LANE_LIST(k))
#define SHIFT_UP(v, k) __builtin_shufflevector((VEC)(0.0f), (v), LANE_LIST(VW - (k)))

/* Lane l of the result is v[l + k], zero where l + k is outside the vector.
   k is a constant at every call, so the tests fold into at most four
   shuffles of constant masks, which the compiler merges. (OpenCL's shuffle
   and shuffle2 go element by element in POCL, and once they are inlined
   LLVM 15 turns the 2*VW-value load feeding them into element loads.) */
INLINE VEC shift_lanes(VEC v, int k)
{
    if (k >= VW || k <= -VW)
        return 0.0f;
    const int m = abs(k);
    if (m & 1)
        v = k > 0 ? SHIFT_DOWN(v, 1) : SHIFT_UP(v, 1);
#if VW > 2
    if (m & 2)
        v = k > 0 ? SHIFT_DOWN(v, 2) : SHIFT_UP(v, 2);
#endif
#if VW > 4
    if (m & 4)
        v = k > 0 ? SHIFT_DOWN(v, 4) : SHIFT_UP(v, 4);
#endif
#if VW > 8
    if (m & 8)
        v = k > 0 ? SHIFT_DOWN(v, 8) : SHIFT_UP(v, 8);
#endif
    return v;
}
#endif

/* VW values row[start], row[start + step], ..., `fill` outside [0, width):
   with stride 1 or 2, one load of VW * step values from row + clamp(start,
   lo, hi - VW * step), where row[lo..hi) may be read, then (stride 2) its
   even or odd elements, a lane shift and a mask, which fold into one or two
   shuffles when the arguments are constants; otherwise lane by lane. */
INLINE VEC clamped_load(KILN_GLOBAL const KILN_STORAGE *row, int start, int step, int width, int lo, int hi, float fill)
{
#if VW > 1
    if (step <= 2 && hi - lo >= VW * step) {
        const int from = clamp(start, lo, hi - VW * step), d = start - from;
        VEC v = VLOADU_S(row + from);
        if (step == 2)
            v = d % 2 == 0 ? VLOAD_EVEN(row + from) : VLOAD_ODD(row + from);
        /* d / step rounded down: lane 0's element. */
        v = shift_lanes(v, step == 2 ? d >> 1 : d);
        const IVEC cols = start + LANES * step;
        return select((VEC)(fill), v, cols >= 0 && cols < width);
    }
#endif
    return load_span(row, start, step, width, false, fill);
}

/* KILN_MASKED_ROWS: where the compiler targets AVX-512 (POCL on such a
   CPU) and the vectors are fp32 of 16 or 8 lanes, masked_load(p, first,
   width, fill) reads the VW values from p, columns first, first + 1, ...
   of a row `width` long, with the lanes outside the row set to `fill`
   and never read: an AVX-512 masked load, which touches no memory for a
   masked lane. first and width are constants where the callers use it,
   so the mask is too. */
#if (VW == 16 || VW == 8) && defined(__AVX512F__) && defined(__AVX512VL__) && !KILN_STORAGE_16
#define KILN_MASKED_ROWS 1
INLINE VEC masked_load(KILN_GLOBAL const float *p, int first, int width, float fill)
{
    uint mask = 0;
#pragma unroll
    for (int l = 0; l < VW; l++)
        if (first + l >= 0 && first + l < width)
            mask |= 1u << l;
#if VW == 16
    return __builtin_ia32_loadups512_mask((const float *)(size_t)p, (VEC)(fill), (ushort)mask);
#else
    return __builtin_ia32_loadups256_mask((const float *)(size_t)p, (VEC)(fill), (uchar)mask);
#endif
}
#else
#define KILN_MASKED_ROWS 0
#endif

#ifdef KILN_ROW_TILES_Q

#define TILES_Q KILN_ROW_TILES_Q

/* Tile tq's first output column: the last tile of a row ends at QE (when a
   vector fits in it), overlapping its neighbour. */
#define TILE_Q0(tq) min((tq)*VW, max(QE - VW, 0))

/* Columns start, start + SW, ... of `row`, row ih of its plane, `fill`
   outside the row: one load clamped into the row, or into the plane when
   its rows are narrower than a load and known at compile time. */
INLINE VEC row_load(KILN_GLOBAL const KILN_STORAGE *row, int ih, int start, float fill)
{
#if TILES_P == 1 && W < VW && VW == 16 && SW == 1 && KILN_MASKED_ROWS
    /* Where the compiler targets AVX-512 (POCL on such a CPU), one load
       with the lanes outside the row masked, which never touch memory:
       a MobileNet depthwise layer's 14x14 planes 1.09-1.16x as fast as
       the clamped load with its shift and select (docs/convolution.md,
       "Masked row loads"). At vectors of 8 (7x7 planes) it measured
       0.92x, so not there. */
    return masked_load(row + start, start, W, fill);
#elif TILES_P == 1 && W < VW * SW
    return clamped_load(row, start, SW, W, -ih * W, (H - ih) * W, fill);
#else
    return clamped_load(row, start, SW, W, 0, W, fill);
#endif
}

#if VW > 1 && SW == 2 && DL == 1
/* The FS window columns at stride 2 (dilation 1) of a tile whose 2 * VW
   columns from its first, col0, are a and b: the even and the odd ones,
   with the further columns past[k] (column col0 + 2 * VW + k, k < FS - 2)
   shifted in one lane at a time. */
INLINE void split_taps(VEC taps[FS], VEC a, VEC b, const float past[FS])
{
    const VEC even = __builtin_shufflevector(a, b, EVERY_OTHER(0)), odd = __builtin_shufflevector(a, b, EVERY_OTHER(1));
#pragma unroll
    for (int s = 0; s < FS; s++) {
        VEC v = s % 2 == 0 ? even : odd;
#pragma unroll
        for (int j = 0; j < s / 2; j++)
            v = __builtin_shufflevector(v, (VEC)(past[s % 2 + 2 * j]), LANE_LIST(1));
        taps[s] = v;
    }
}
#endif

/* The FS window columns of `row` (row ih of its plane) for a tile whose
   footprint starts at column col0: taps[s] holds columns col0 + s * DL,
   + SW, ..., `fill` outside the row. Interior tiles at stride 2 (dilation 1)
   load the 2 * VW columns once and take every tap out of them
   (split_taps), reading the columns past them from memory; otherwise one
   load per tap. The including kernel defines FS and DL. */
INLINE void row_taps(VEC taps[FS], KILN_GLOBAL const KILN_STORAGE *row, int ih, int col0, bool interior, float fill)
{
#if VW > 1 && SW == 2 && DL == 1
    if (interior) {
        float past[FS];
#pragma unroll
        for (int k = 0; k < FS - 2; k++)
            past[k] = KILN_LOAD(row, col0 + 2 * VW + k);
        split_taps(taps, VLOADU_S(row + col0), VLOADU_S(row + col0 + VW), past);
        return;
    }
#endif
#if TILES_P == 1 && SW == 2 && DL == 1 && FS - 1 <= VW && KILN_MASKED_ROWS
    /* A plane of one row tile at stride 2 where the compiler targets
       AVX-512: as the interior tiles above, the 2 * VW columns from col0
       and the FS - 2 past them loaded once for all the taps, each load
       with the lanes outside the row masked to `fill` (never touching
       memory), instead of each tap's load clamped into the plane, split,
       shifted and selected. MobileNet's stride-2 depthwise layers: 256
       planes of 28x28 (vectors of 16) 1.17-1.32x, 512 of 14x14 (vectors of
       8) 1.07-1.14x (docs/convolution.md, "Masked row loads"). Windows
       of more than VW + 1 columns keep the clamped loads: their further
       columns would pass the vector loaded past the 2 * VW. */
    if (!interior) {
        KILN_GLOBAL const float *at = row + col0;
        const VEC further = masked_load(at + 2 * VW, col0 + 2 * VW, min(W, col0 + 2 * VW + FS - 2), fill);
        float past[FS];
#pragma unroll
        for (int k = 0; k < FS - 2; k++)
            past[k] = further[k];
        split_taps(taps, masked_load(at, col0, W, fill), masked_load(at + VW, col0 + VW, W, fill), past);
        return;
    }
#endif
#pragma unroll
    for (int s = 0; s < FS; s++)
        taps[s] = interior ? load_span(row, col0 + s * DL, SW, W, true, fill) : row_load(row, ih, col0 + s * DL, fill);
}

/* The taps (row_taps) of row i of a tile's footprint, input row row0 + i
   of the plane at xc; false, loading nothing, when that row is outside the
   image. The row's offset is row0 * W as a long plus the constant i * W,
   which the compiler folds into the loads' addresses. */
INLINE bool footprint_row(VEC taps[FS], KILN_GLOBAL const KILN_STORAGE *xc, int row0, int i, int col0, bool interior,
                          float fill)
{
    if (i < -row0 || i >= H - row0)
        return false;
    row_taps(taps, xc + (long)row0 * W + i * W, row0 + i, col0, interior, fill);
    return true;
}

/* TILE(col0, interior) for row tile tq, whose footprint starts at input
   column col0: the interior tiles, then the edge tiles compiled apart, then
   any others. */
#if KILN_ROW_EDGE_REST
#define ROW_TILE_REST(tq, TILE) else TILE(TILE_Q0(tq) * SW - PL, false);
#else
#define ROW_TILE_REST(tq, TILE)
#endif
#define ROW_TILE(tq, TILE)                                                                                             \
    if ((tq) >= KILN_ROW_INNER_FIRST && (tq) < KILN_ROW_INNER_END)                                                     \
        TILE(TILE_Q0(tq) * SW - PL, true);                                                                             \
    else if ((tq) == KILN_ROW_EDGE_A)                                                                                  \
        TILE(TILE_Q0(KILN_ROW_EDGE_A) * SW - PL, false);                                                               \
    else if ((tq) == KILN_ROW_EDGE_B)                                                                                  \
        TILE(TILE_Q0(KILN_ROW_EDGE_B) * SW - PL, false);                                                               \
    else if ((tq) == KILN_ROW_EDGE_C)                                                                                  \
        TILE(TILE_Q0(KILN_ROW_EDGE_C) * SW - PL, false);                                                               \
    ROW_TILE_REST(tq, TILE)

/* Output row p0 + t of a P x Q plane, lanes from column q0, where v holds
   the tile's TH rows and the tile starts at row p0: one vector store when
   the tile is that wide. When it is wider than the row (one tile, q0 = 0),
   also one store if the lanes past the row land in later rows of this tile
   (stored after it), and for the plane's last rows one vector ending at the
   plane's end made of their values; otherwise lane by lane. */
INLINE void store_row(const VEC v[TH], int t, int p0, int q0, KILN_GLOBAL KILN_STORAGE *plane)
{
    KILN_GLOBAL KILN_STORAGE *out = plane + (p0 + t) * Q + q0;
    if (QE >= VW || t * Q + VW <= min(TH, P - p0) * Q) {
        VSTOREU_S(v[t], out);
        return;
    }
    float lanes[VW];
#if TILES_P == 1 && P * Q >= VW
#pragma unroll
    for (int l = 0; l < VW; l++) {
        const int f = P * Q - VW + l;
        float row[VW];
        VSTORE(v[f / Q], 0, row);
        lanes[l] = row[f % Q];
    }
    VSTOREU_S(VLOAD(0, lanes), plane + P * Q - VW);
#else
    VSTORE(v[t], 0, lanes);
    for (int l = 0; l < Q; l++)
        KILN_STORE(lanes[l], out, l);
#endif
}

#endif /* KILN_ROW_TILES_Q */

#endif
