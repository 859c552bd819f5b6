/*
 * Direct convolution: the general fallback for every shape (groups,
 * depthwise, dilation, stride, padding, both layouts, fused epilogue and
 * pool, fp16 storage), built to be fast where the other algorithms are not:
 * depthwise layers, memory-bound at R*S multiply-adds per output, and layers
 * with few input channels.
 *
 * The filter geometry (KILN_DIRECT_R, _S, _SH, _SW, _DH, _DW: size, stride,
 * dilation) and every size but the batch are compiled in, so the loops over
 * taps and over a tile's footprint unroll, which output each loaded input
 * feeds is resolved at compile time, and offsets are constants. Each
 * work-item computes a tile of outputs, loading every input element of its
 * footprint once per input channel, and keeps the tile in registers.
 *
 * NCHW: row tiles (common/window.h) of VW outputs along a row (contiguous
 * w) x TH rows x KT filters of one group. Per input channel and footprint
 * row, the S window columns as vectors (row_taps), multiplied by the KT
 * weights into each output row they reach; rows outside the image are
 * skipped. When a plane has one row tile (small images), every row a tile
 * reads is a constant, so rows narrower than a vector load clamped into the
 * plane and the plane's last row is stored as a vector ending at the
 * plane's end.
 *
 * NHWC: VW filters (contiguous k) x TQ columns x TH rows. Depthwise
 * (KILN_DIRECT_DEPTHWISE: c == k == groups), one vector load of VW channels
 * per footprint pixel against R*S weight vectors gathered into registers.
 * Otherwise a work-group's work-items share a block of VW filters, staged in
 * local memory as vectors CC input channels at a time, and each footprint
 * pixel's input value is broadcast. The host picks VW dividing the group's
 * filters (or c, depthwise), so lanes never leave a group nor the tensor.
 *
 * Epilogue per convolution output: v = act(alpha*acc + beta*z + bias); with
 * KILN_POOL the tile (even in both dimensions) is max-pooled 2x2 after the
 * activation and stored at half the coordinates.
 *
 * One kernel, conv_f32_direct, over a 1-D range of tiles (the argument
 * `tiles` bounds them) in work-groups of KILN_DIRECT_WG; KILN_NHWC chooses
 * the layout.
 */
#include "common/epilogue.h"
#include "common/portability.h"
#include "common/storage.h"

/* The filter, its strides and dilations. */
#define FR KILN_DIRECT_R
#define FS KILN_DIRECT_S
#define SH KILN_DIRECT_SH
#define SW KILN_DIRECT_SW
#define DH KILN_DIRECT_DH
#define DL KILN_DIRECT_DW
/* Every size but the batch: input channels C, height H, width W; K filters,
   KG per group and CG channels per group; the convolution output P x Q and
   the stored output YH x YW (halved by the pool); top and left padding. */
#define C KILN_DIRECT_C
#define H KILN_DIRECT_H
#define W KILN_DIRECT_W
#define K KILN_DIRECT_K
#define KG KILN_DIRECT_KG
#define CG KILN_DIRECT_CG
#define P KILN_DIRECT_P
#define Q KILN_DIRECT_Q
#define YH KILN_DIRECT_YH
#define YW KILN_DIRECT_YW
#define PT KILN_DIRECT_PT
#define PL KILN_DIRECT_PL
/* The tiling: VW lanes, TH rows, TILES_P row tiles (and the host's row
   tiling, NCHW) or TILES_P x TILES_Q pixel tiles (NHWC) per plane, KBLOCKS
   blocks of filters. */
#define VW KILN_DIRECT_VW
#define TH KILN_DIRECT_TH
#define TILES_P KILN_DIRECT_TILES_P
#define KBLOCKS KILN_DIRECT_KBLOCKS
/* The output columns the tiles cover: the convolution's, or the pooled
   ones. */
#if KILN_POOL
#define QE (2 * YW)
#else
#define QE Q
#endif
#include "common/window.h"

/* Input rows a tile of TH output rows reads. */
#define IR ((TH - 1) * SH + (FR - 1) * DH + 1)

/* The activation, on every lane at once. */
KILN_ACTIVATION_FUNCTION(VEC, activate)

#if !KILN_NHWC

#define KT KILN_DIRECT_KT

/* Lane-wise 2x2 max pool of rows a and b into `out` (VW / 2 values). */
INLINE void pool_pairs(VEC a, VEC b, float *out)
{
    float t[VW];
    VSTORE(fmax(a, b), 0, t);
#pragma unroll
    for (int l = 0; l < VW / 2; l++)
        out[l] = fmax(t[2 * l], t[2 * l + 1]);
}

/* Weight (r, s) of filter kt of a channel whose first filter's weights
   start at wc, read where it is used: a broadcast operand of the
   multiply-add (held in registers, KT x FR x FS of them per channel spilled
   the accumulators). */
#define WEIGHT(wc, kt, r, s) ((VEC)(KILN_LOAD((wc), (kt) * (CG * FR * FS) + (r) * FS + (s))))

#if FR > 3
/* Filters taller than 3 rows: the filter rows in a loop the compiler keeps
   (each output row's input row loaded per filter row), so that the kernel's
   code, unrolled once per tile variant, stays small. */
INLINE void nchw_channel(VEC acc[KT][TH], KILN_GLOBAL const KILN_STORAGE *xc, KILN_GLOBAL const KILN_STORAGE *wc,
                         int row0, int col0, bool interior)
{
#pragma unroll 1
    for (int r = 0; r < FR; r++)
#pragma unroll
        for (int t = 0; t < TH; t++) {
            VEC xv[FS];
            if (!footprint_row(xv, xc, row0, t * SH + r * DH, col0, interior, 0.0f))
                continue;
#pragma unroll
            for (int s = 0; s < FS; s++)
#pragma unroll
                for (int kt = 0; kt < KT; kt++)
                    acc[kt][t] = fma(WEIGHT(wc, kt, r, s), xv[s], acc[kt][t]);
        }
}
#else
/* Add input channel xc's contribution to the tile (weights from wc). */
INLINE void nchw_channel(VEC acc[KT][TH], KILN_GLOBAL const KILN_STORAGE *xc, KILN_GLOBAL const KILN_STORAGE *wc,
                         int row0, int col0, bool interior)
{
#pragma unroll
    for (int i = 0; i < IR; i++) {
        VEC xv[FS];
        if (!footprint_row(xv, xc, row0, i, col0, interior, 0.0f))
            continue;
#pragma unroll
        for (int s = 0; s < FS; s++)
#pragma unroll
            for (int r = 0; r < FR; r++) {
                const int d = i - r * DH; /* = t * SH for the output row t this tap reaches */
                if (d < 0 || d % SH != 0 || d / SH >= TH)
                    continue;
#pragma unroll
                for (int kt = 0; kt < KT; kt++)
                    acc[kt][d / SH] = fma(WEIGHT(wc, kt, r, s), xv[s], acc[kt][d / SH]);
            }
    }
}

#endif

/* The tile's sums over the CG input channels from c0 of filters k0.. of
   image n. */
INLINE void nchw_tile(VEC acc[KT][TH], KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const KILN_STORAGE *w, int n,
                      int k0, int c0, int row0, int col0, bool interior)
{
    for (int c = 0; c < CG; c++)
        nchw_channel(acc, x + ((size_t)n * C + c0 + c) * H * W, w + ((size_t)k0 * CG + c) * (FR * FS), row0, col0,
                     interior);
}

/* Tile index = ((n * KBLOCKS + kb) * TILES_P + tp) * TILES_Q + tq. */
#if KILN_WANTS(conv_f32_direct)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_DIRECT_WG, 1, 1)
void conv_f32_direct(KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const KILN_STORAGE *w,
                     KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z, KILN_GLOBAL KILN_STORAGE *y,
                     const int tiles, const float alpha, const float beta, const float slope)
{
    int id = KILN_GLOBAL_ID(0);
    if (id >= tiles)
        return;
    const int tq = id % TILES_Q;
    id /= TILES_Q;
    const int tp = id % TILES_P;
    id /= TILES_P;
    const int k0 = id % KBLOCKS * KT, n = id / KBLOCKS;
    const int p0 = tp * TH, q0 = TILE_Q0(tq);
    const int row0 = p0 * SH - PT;
    const int c0 = k0 / KG * CG;

    VEC acc[KT][TH];
#pragma unroll
    for (int kt = 0; kt < KT; kt++)
#pragma unroll
        for (int t = 0; t < TH; t++)
            acc[kt][t] = 0.0f;
#define CONV_TILE(col0, interior) nchw_tile(acc, x, w, n, k0, c0, row0, col0, interior)
    ROW_TILE(tq, CONV_TILE)

#pragma unroll
    for (int kt = 0; kt < KT; kt++) {
        const size_t plane = (size_t)n * K + k0 + kt;
        VEC v[TH];
#pragma unroll
        for (int t = 0; t < TH; t++) {
            v[t] = alpha * acc[kt][t];
#if KILN_HAS_Z
            if (p0 + t < P) {
                KILN_GLOBAL const KILN_STORAGE *zrow = z + (plane * P + p0 + t) * Q;
#if QE >= VW
                const VEC zv = VLOADU_S(zrow + q0);
#elif TILES_P == 1
                const VEC zv = clamped_load(zrow, 0, 1, Q, -t * Q, (P - t) * Q, 0.0f);
#else
                const VEC zv = load_span(zrow, 0, 1, Q, false, 0.0f);
#endif
                v[t] = fma((VEC)(beta), zv, v[t]);
            }
#endif
#if KILN_HAS_BIAS
            v[t] += bias[k0 + kt];
#endif
            v[t] = activate(v[t], slope);
        }
#if KILN_POOL
#pragma unroll
        for (int t = 0; t < TH; t += 2) {
            const int py = (p0 + t) / 2, px = q0 / 2;
            if (py >= YH)
                break;
            float pooled[VW / 2];
            pool_pairs(v[t], v[t + 1], pooled);
            KILN_GLOBAL KILN_STORAGE *out = y + (plane * YH + py) * YW + px;
            for (int l = 0; l < VW / 2 && px + l < YW; l++)
                KILN_STORE(pooled[l], out, l);
        }
#else
#if KILN_HAS_Z && QE > VW && QE % VW != 0
        /* z may be y (an in-place residual): a row's last tile, shifted
           left onto the one before it, reads z where that one stores, so
           that one stores only the columns the last does not cover. */
        if (q0 < QE - VW && q0 + VW > QE - VW) {
#pragma unroll
            for (int t = 0; t < TH; t++)
                if (p0 + t < P) {
                    float lanes[VW];
                    VSTORE(v[t], 0, lanes);
                    KILN_GLOBAL KILN_STORAGE *out = y + (plane * P + p0 + t) * Q + q0;
                    for (int l = 0; l < QE - VW - q0; l++)
                        KILN_STORE(lanes[l], out, l);
                }
            continue;
        }
#endif
#pragma unroll
        for (int t = 0; t < TH; t++)
            if (p0 + t < P)
                store_row(v, t, p0, q0, y + plane * P * Q);
#endif
    }
}
#endif

#else /* KILN_NHWC */

#define TQ KILN_DIRECT_TQ
#define TILES_Q KILN_DIRECT_TILES_Q
/* Input columns a tile of TQ output columns reads. */
#define IC ((TQ - 1) * SW + (FS - 1) * DL + 1)

/* Add one footprint pixel's value xv (input row i, column j of the tile) to
   the outputs it reaches through weights wv. */
INLINE void nhwc_pixel(VEC acc[TH][TQ], const VEC wv[FR][FS], VEC xv, int i, int j)
{
#pragma unroll
    for (int r = 0; r < FR; r++) {
        const int di = i - r * DH;
        if (di < 0 || di % SH != 0 || di / SH >= TH)
            continue;
#pragma unroll
        for (int s = 0; s < FS; s++) {
            const int dj = j - s * DL;
            if (dj < 0 || dj % SW != 0 || dj / SW >= TQ)
                continue;
            acc[di / SH][dj / SW] = fma(wv[r][s], xv, acc[di / SH][dj / SW]);
        }
    }
}

/* Add input channel c's contribution to the tile: the footprint pixels'
   values (broadcast unless `vector`) through weights wv. row0 and col0 are
   the footprint's first row and column; x points at the tile's image and
   channel. */
INLINE void nhwc_channel(VEC acc[TH][TQ], const VEC wv[FR][FS], KILN_GLOBAL const KILN_STORAGE *x, int row0, int col0,
                         bool vector)
{
#pragma unroll
    for (int i = 0; i < IR; i++) {
        const int ih = row0 + i;
        if ((uint)ih >= (uint)H)
            continue;
        KILN_GLOBAL const KILN_STORAGE *row = x + (size_t)ih * W * C;
#pragma unroll
        for (int j = 0; j < IC; j++) {
            const int iw = col0 + j;
            if ((uint)iw < (uint)W)
                nhwc_pixel(acc, wv, vector ? VLOADU_S(row + iw * C) : (VEC)(KILN_LOAD(row, iw * C)), i, j);
        }
    }
}

/* Image n and first output row p0 and column q0 of pixel tile `pixel`,
   numbered (n * TILES_P + tp) * TILES_Q + tq. */
INLINE void pixel_tile(int pixel, int *n, int *p0, int *q0)
{
    *q0 = pixel % TILES_Q * TQ;
    *p0 = pixel / TILES_Q % TILES_P * TH;
    *n = pixel / TILES_Q / TILES_P;
}

#if !KILN_DIRECT_DEPTHWISE
#define CC KILN_DIRECT_CC
#endif

/* Depthwise: work-item id computes pixel tile id / KBLOCKS of k-block
   id % KBLOCKS, so neighbouring work-items read neighbouring channels.
   Otherwise work-group g computes pixel tiles g % groups * WG + [0, WG) of
   k-block g / groups: its work-items share their filters, which they stage
   in local memory as VW-wide vectors, CC of the CG input channels at a
   time (usually all at once: one barrier, before anything else is
   computed, so nothing lives across it). */
#if KILN_WANTS(conv_f32_direct)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_DIRECT_WG, 1, 1)
void conv_f32_direct(KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const KILN_STORAGE *w,
                     KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z, KILN_GLOBAL KILN_STORAGE *y,
                     const int tiles, const float alpha, const float beta, const float slope)
{
    VEC acc[TH][TQ];
#pragma unroll
    for (int t = 0; t < TH; t++)
#pragma unroll
        for (int u = 0; u < TQ; u++)
            acc[t][u] = 0.0f;
    int n, p0, q0;
    VEC wv[FR][FS];
#if KILN_DIRECT_DEPTHWISE
    const int id = KILN_GLOBAL_ID(0);
    if (id >= tiles)
        return;
    const int k0 = id % KBLOCKS * VW;
    pixel_tile(id / KBLOCKS, &n, &p0, &q0);
    /* w[k0 + l][r][s] for the VW lanes l: a vector load each from the taps
       packed VW filters side by side (KILN_DIRECT_TAPS, kept weights,
       conv_f32_direct_pack_taps), else gathered lane by lane from KRSC. */
#pragma unroll
    for (int r = 0; r < FR; r++)
#pragma unroll
        for (int s = 0; s < FS; s++) {
#if KILN_DIRECT_TAPS
            wv[r][s] = VLOADU_S(w + (size_t)k0 * (FR * FS) + (r * FS + s) * VW);
#else
            float t[VW];
#pragma unroll
            for (int l = 0; l < VW; l++)
                t[l] = KILN_LOAD(w, (size_t)(k0 + l) * (FR * FS) + r * FS + s);
            wv[r][s] = VLOAD(0, t);
#endif
        }
    nhwc_channel(acc, wv, x + (size_t)n * H * W * C + k0, p0 * SH - PT, q0 * SW - PL, true);
#else
    const int pixels = tiles / KBLOCKS, groups = (pixels + KILN_DIRECT_WG - 1) / KILN_DIRECT_WG;
    const int k0 = KILN_GROUP_ID(0) / groups * VW;
    KILN_SHARED float wl[CC][FR * FS][VW];
    for (int c0 = 0; c0 < CG; c0 += CC) {
        /* wl[c][tap][l] = w[k0 + l][tap][c0 + c] (KRSC), zero past CG. */
        if (c0 > 0)
            KILN_BARRIER_LOCAL();
        for (int e = KILN_LOCAL_ID(0); e < CC * FR * FS * VW; e += KILN_DIRECT_WG) {
            const int c = e % CC, tap = e / CC % (FR * FS), l = e / CC / (FR * FS);
            wl[c][tap][l] = c0 + c < CG ? KILN_LOAD(w, ((size_t)(k0 + l) * (FR * FS) + tap) * CG + c0 + c) : 0.0f;
        }
        KILN_BARRIER_LOCAL();
        /* Work-items past the last pixel tile compute it again and store
           nothing. Skipping the chunk on that condition instead, a
           work-item's condition invariant in this loop of barriers, made
           POCL's compiled work-group store no output at all where there
           were exactly two chunks (as does a reduced kernel of the same
           form; three or more chunks were right). */
        const int pixel = min((int)(KILN_GROUP_ID(0) % groups * KILN_DIRECT_WG + KILN_LOCAL_ID(0)), pixels - 1);
        pixel_tile(pixel, &n, &p0, &q0);
        KILN_GLOBAL const KILN_STORAGE *xc = x + (size_t)n * H * W * C + k0 / KG * CG + c0;
        for (int c = 0; c < CC && c0 + c < CG; c++) {
#pragma unroll
            for (int r = 0; r < FR; r++)
#pragma unroll
                for (int s = 0; s < FS; s++)
                    wv[r][s] = VLOAD(0, wl[c][r * FS + s]);
            nhwc_channel(acc, wv, xc + c, p0 * SH - PT, q0 * SW - PL, false);
        }
    }
    const int pixel = KILN_GROUP_ID(0) % groups * KILN_DIRECT_WG + KILN_LOCAL_ID(0);
    if (pixel >= pixels)
        return;
    pixel_tile(pixel, &n, &p0, &q0);
#endif

#if KILN_HAS_BIAS
    const VEC b = VLOAD(0, bias + k0);
#endif
#pragma unroll
    for (int t = 0; t < TH; t++)
#pragma unroll
        for (int u = 0; u < TQ; u++) {
            VEC v = alpha * acc[t][u];
#if KILN_HAS_Z
            if (p0 + t < P && q0 + u < Q)
                v = fma((VEC)(beta), VLOADU_S(z + (((size_t)n * P + p0 + t) * Q + q0 + u) * K + k0), v);
#endif
#if KILN_HAS_BIAS
            v += b;
#endif
            acc[t][u] = activate(v, slope);
        }
#if KILN_POOL
#pragma unroll
    for (int t = 0; t < TH; t += 2)
#pragma unroll
        for (int u = 0; u < TQ; u += 2) {
            const int py = (p0 + t) / 2, px = (q0 + u) / 2;
            if (py < YH && px < YW)
                VSTOREU_S(fmax(fmax(acc[t][u], acc[t][u + 1]), fmax(acc[t + 1][u], acc[t + 1][u + 1])),
                         y + (((size_t)n * YH + py) * YW + px) * K + k0);
        }
#else
#pragma unroll
    for (int t = 0; t < TH; t++)
#pragma unroll
        for (int u = 0; u < TQ; u++)
            if (p0 + t < P && q0 + u < Q)
                VSTOREU_S(acc[t][u], y + (((size_t)n * P + p0 + t) * Q + q0 + u) * K + k0);
#endif
}
#endif

#endif /* KILN_NHWC */

#if KILN_DIRECT_TAPS
/* Depthwise weights w (K x R*S, KRSC with one channel) into wt, each block of
   VW filters tap by tap with its VW filters side by side: wt[(k / VW) * R*S
   * VW + tap * VW + k % VW] = w[k * R*S + tap]. Global K * R*S. */
#if KILN_WANTS(conv_f32_direct_pack_taps)
KILN_KERNEL void conv_f32_direct_pack_taps(KILN_GLOBAL const KILN_STORAGE *w, KILN_GLOBAL KILN_STORAGE *wt)
{
    const int e = KILN_GLOBAL_ID(0);
    if (e >= K * FR * FS)
        return;
    const int k = e / (FR * FS), tap = e % (FR * FS);
    KILN_STORE(KILN_LOAD(w, e), wt, (k / VW) * (FR * FS) * VW + tap * VW + k % VW);
}
#endif
#endif
