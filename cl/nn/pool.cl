/*
 * 2-D max and average pooling of fp32 tensors. The window (KILN_POOL_R x
 * KILN_POOL_S, strides _SH x _SW, top and left padding _PT, _PL) and every
 * size but the batch are compiled in, so the loops over the window unroll.
 * The window is clipped to the input: max ignores padding; average divides
 * by the clipped window, or by the whole window with KILN_POOL_COUNT_PAD.
 * KILN_POOL_AVG selects average.
 *
 * nn_pool2d_nchw: row tiles (common/window.h) of VW outputs along a row x
 * TH rows of one plane. The window is separable: per input row of the
 * tile's footprint, the S window columns are reduced as vectors, then
 * folded into each output row the input row reaches. Lanes outside the
 * input read the reduction's identity (-inf or 0).
 * nn_pool2d_nchw_plane: the window is the whole plane (global pooling):
 * one work-item reduces a plane as vectors of VW.
 * nn_pool2d_nhwc: VW channels (contiguous) of one output pixel per
 * work-item, one vector load per window cell inside the input.
 *
 * KILN_NHWC selects the layout. Work-groups of KILN_POOL_WG (the host's
 * choice: the profile's util.wg or less); the argument `items` bounds the
 * work-items.
 * Offsets inside a plane (NCHW) are ints: the host refuses planes of 2^31
 * values or more.
 */
#include "common/portability.h"
#include "common/storage.h"

#define FR KILN_POOL_R
#define FS KILN_POOL_S
#define SH KILN_POOL_SH
#define SW KILN_POOL_SW
#define PT KILN_POOL_PT
#define PL KILN_POOL_PL
#define DL 1
/* Input channels, height and width; output height P and width Q. */
#define C KILN_POOL_C
#define H KILN_POOL_H
#define W KILN_POOL_W
#define P KILN_POOL_P
#define Q KILN_POOL_Q
#define QE Q
#define VW KILN_POOL_VW
#define TH KILN_POOL_TH
#define TILES_P KILN_POOL_TILES_P
#include "common/window.h"

#if KILN_POOL_AVG
#define IDENTITY 0.0f
#define COMBINE(a, b) ((a) + (b))
#else
/* b where it is larger, else a: a compare and a select, which the compiler
   turns into one max instruction (fmax must also honour a NaN in a, which
   costs two more on x86). The accumulator a starts at -inf and never
   becomes NaN, so NaN inputs are ignored, as fmax would. */
#define IDENTITY (-INFINITY)
#define COMBINE(a, b) ((b) > (a) ? (b) : (a))
#endif

#if VW == 1
#define TO_FLOATS(v) convert_float(v)
#else
#define TO_FLOATS(v) CAT(convert_float, VW)(v)
#endif

/* The window cells inside the input along one dimension, for windows
   starting at `start` (any integer or integer vector type). */
#define CELLS(start, window, size) (min((start) + (window), (size)) - max((start), 0))

#if !KILN_NHWC
#ifdef KILN_ROW_TILES_Q

/* Input rows a tile of TH output rows reads. */
#define IR ((TH - 1) * SH + FR)

/* Fold the window over the tile's footprint, rows from row0 and columns
   from col0 of the plane at xc, into acc. */
INLINE void pool_tile(VEC acc[TH], KILN_GLOBAL const float *xc, int row0, int col0, bool interior)
{
#pragma unroll
    for (int i = 0; i < IR; i++) {
        VEC taps[FS], across = IDENTITY;
        if (!footprint_row(taps, xc, row0, i, col0, interior, IDENTITY))
            continue;
#pragma unroll
        for (int s = 0; s < FS; s++)
            across = COMBINE(across, taps[s]);
#pragma unroll
        for (int r = 0; r < FR; r++) {
            const int d = i - r; /* = t * SH for the output row t this row reaches */
            if (d >= 0 && d % SH == 0 && d / SH < TH)
                acc[d / SH] = COMBINE(acc[d / SH], across);
        }
    }
}

/* Tile index = (plane * TILES_P + tp) * TILES_Q + tq. */
#if KILN_WANTS(nn_pool2d_nchw)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_POOL_WG, 1, 1)
void nn_pool2d_nchw(KILN_GLOBAL const float *x, KILN_GLOBAL float *y, const ulong items)
{
    size_t id = KILN_GLOBAL_ID(0);
    if (id >= items)
        return;
    const int tq = id % TILES_Q;
    id /= TILES_Q;
    const int tp = id % TILES_P;
    const size_t plane = id / TILES_P;
    const int p0 = tp * TH, q0 = TILE_Q0(tq), row0 = p0 * SH - PT;
    KILN_GLOBAL const float *xc = x + (size_t)plane * H * W;
    VEC acc[TH];
#pragma unroll
    for (int t = 0; t < TH; t++)
        acc[t] = IDENTITY;
#define POOL_TILE(col0, interior) pool_tile(acc, xc, row0, col0, interior)
    ROW_TILE(tq, POOL_TILE)
#if KILN_POOL_AVG
#if KILN_POOL_COUNT_PAD
#pragma unroll
    for (int t = 0; t < TH; t++)
        acc[t] /= (float)(FR * FS);
#else
#if VW == 1
    const int cols = CELLS(q0 * SW - PL, FS, W);
#else
    const IVEC cols = CELLS((q0 + LANES) * SW - PL, FS, W);
#endif
#pragma unroll
    for (int t = 0; t < TH; t++)
        acc[t] /= TO_FLOATS(CELLS((p0 + t) * SH - PT, FR, H) * cols);
#endif
#endif
#pragma unroll
    for (int t = 0; t < TH; t++)
        if (p0 + t < P)
            store_row(acc, t, p0, q0, y + (size_t)plane * P * Q);
}
#endif

#endif /* KILN_ROW_TILES_Q */

/* Plane `id` (H * W values, unpadded, one output). */
#if KILN_WANTS(nn_pool2d_nchw_plane)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_POOL_WG, 1, 1)
void nn_pool2d_nchw_plane(KILN_GLOBAL const float *x, KILN_GLOBAL float *y, const ulong items)
{
    const size_t id = KILN_GLOBAL_ID(0);
    if (id >= items)
        return;
    KILN_GLOBAL const float *xp = x + (size_t)id * H * W;
    VEC acc = IDENTITY;
    for (int j = 0; j + VW <= H * W; j += VW)
        acc = COMBINE(acc, VLOADU_S(xp + j));
#if (H * W) % VW != 0
#if VW > 1 && H * W > VW
    /* The last VW values, less those already folded in. */
    acc = COMBINE(acc, select((VEC)(IDENTITY), VLOADU_S(xp + H * W - VW), LANES >= VW - (H * W) % VW));
#else
    acc = COMBINE(acc, load_span(xp, H * W / VW * VW, 1, H * W, false, IDENTITY));
#endif
#endif
    float lanes[VW];
    VSTORE(acc, 0, lanes);
    float v = lanes[0];
#pragma unroll
    for (int l = 1; l < VW; l++)
        v = COMBINE(v, lanes[l]);
#if KILN_POOL_AVG
    v /= (float)(H * W);
#endif
    y[id] = v;
}
#endif

#else /* KILN_NHWC */

/* The window loops unroll unless the window is large (a global pool over
   a large image). */
#if FR * FS <= 64
#define WINDOW_UNROLL _Pragma("unroll")
#else
#define WINDOW_UNROLL
#endif

/* Work-item = ((n * P + oy) * Q + ox) * C / VW + channel block. */
#if KILN_WANTS(nn_pool2d_nhwc)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_POOL_WG, 1, 1)
void nn_pool2d_nhwc(KILN_GLOBAL const float *x, KILN_GLOBAL float *y, const ulong items)
{
    const size_t id = KILN_GLOBAL_ID(0);
    if (id >= items)
        return;
    const int c0 = id % (C / VW) * VW;
    const size_t pixel = id / (C / VW), n = pixel / Q / P;
    const int ox = pixel % Q, oy = pixel / Q % P;
    const int h0 = oy * SH - PT, w0 = ox * SW - PL;
    KILN_GLOBAL const float *xn = x + (size_t)n * H * W * C + c0;
    VEC acc = IDENTITY;
    WINDOW_UNROLL
    for (int r = 0; r < FR; r++) {
        const int h = h0 + r;
        if ((uint)h >= (uint)H)
            continue;
        WINDOW_UNROLL
        for (int s = 0; s < FS; s++) {
            const int w = w0 + s;
            if ((uint)w < (uint)W)
                acc = COMBINE(acc, VLOADU_S(xn + ((size_t)h * W + w) * C));
        }
    }
#if KILN_POOL_AVG
#if KILN_POOL_COUNT_PAD
    acc /= (float)(FR * FS);
#else
    acc /= (float)(CELLS(h0, FR, H) * CELLS(w0, FS, W));
#endif
#endif
    VSTOREU_S(acc, y + (size_t)pixel * C + c0);
}
#endif

#endif /* KILN_NHWC */
