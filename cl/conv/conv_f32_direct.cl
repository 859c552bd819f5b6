/*
 * Direct convolution: the general fallback for every shape (groups,
 * depthwise, dilation, stride, padding, both layouts, fused epilogue and
 * pool, fp16 storage), built to be fast where the other algorithms are not:
 * depthwise layers, memory-bound at R*S multiply-adds per output, and layers
 * with few input channels.
 *
 * The filter geometry (KILN_DIRECT_R, _S, _SH, _SW, _DH, _DW: size, stride,
 * dilation), the input width and left padding are compiled in, so the loops
 * over taps and over a tile's footprint unroll, which output each loaded
 * input feeds is resolved at compile time, and row offsets are constants.
 * Each work-item computes a tile of outputs, loading every input element of
 * its footprint once per input channel, and keeps the tile in registers.
 *
 * NCHW: VW outputs along a row (contiguous w) x TH rows x KT filters of one
 * group. Per input channel and footprint row, one vector load per filter
 * column (stride 2 loads 2*VW and keeps the even lanes), multiplied by the
 * KT weights into each output row it reaches. Rows outside the image are
 * skipped. Tiles whose columns lie inside the row load plainly; edge tiles
 * load VW*SW columns clamped into the row and shuffle and mask them into
 * place. The host lists up to three edge tiles (KILN_DIRECT_EDGE_A..C) that
 * are compiled with their columns as constants, which folds that shuffle
 * into one permute; any others do it at run time.
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
 * One kernel, conv_f32_direct, over a 1-D range of tiles in work-groups of
 * KILN_DIRECT_WG; KILN_NHWC chooses the layout.
 */
#include "common/epilogue.h"
#include "common/storage.h"

#define FR KILN_DIRECT_R
#define FS KILN_DIRECT_S
#define SH KILN_DIRECT_SH
#define SW KILN_DIRECT_SW
#define DH KILN_DIRECT_DH
#define DL KILN_DIRECT_DW
#define VW KILN_DIRECT_VW
#define TH KILN_DIRECT_TH
#define W KILN_DIRECT_W
#define TILES_Q KILN_DIRECT_TILES_Q
#define CG KILN_DIRECT_CG
/* Input rows a tile of TH output rows reads. */
#define IR ((TH - 1) * SH + (FR - 1) * DH + 1)

/* Helpers must inline: their constant arguments select code paths. */
#define INLINE inline __attribute__((always_inline))

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

/* vec: VW floats; VLOAD_S / VSTORE_S move them from / to storage, VFROM /
   VTO from / to a float array. */
#if VW == 1
typedef float vec;
#define VLOAD_S(p) KILN_LOAD((p), 0)
#define VSTORE_S(v, p) KILN_STORE((v), (p), 0)
#define VFROM(a) ((a)[0])
#define VTO(v, a) ((a)[0] = (v))
#else
typedef CAT(float, VW) vec;
#if KILN_F16
#define VLOAD_W(n, p) CAT(vload_half, n)(0, (p))
#define VSTORE_S(v, p) CAT(vstore_half, VW)((v), 0, (p))
#else
#define VLOAD_W(n, p) CAT(vload, n)(0, (p))
#define VSTORE_S(v, p) CAT(vstore, VW)((v), 0, (p))
#endif
#define VLOAD_S(p) VLOAD_W(VW, p)
#define VFROM(a) CAT(vload, VW)(0, (a))
#define VTO(v, a) CAT(vstore, VW)((v), 0, (a))
/* The even elements of 2*VW consecutive ones: a stride-2 row. */
#if VW == 16
#define VLOAD_EVEN(p) ((float16)(VLOAD_W(16, p).even, VLOAD_W(16, (p) + 16).even))
#else
#define VLOAD_EVEN(p) (VLOAD_W(VW2, p).even)
#endif
#if VW == 2
#define VW2 4
#elif VW == 4
#define VW2 8
#elif VW == 8
#define VW2 16
#endif
#endif

/* p[col], p[col + step], ... for VW lanes. Unless `full` (every lane inside
   [0, limit)), a lane outside reads zero. step and full are constants at
   every call, so the branches fold. */
INLINE vec load_span(__global const KILN_STORAGE *p, int col, int step, int limit, bool full)
{
    if (full && step == 1)
        return VLOAD_S(p + col);
#if VW > 1
    if (full && step == 2)
        return VLOAD_EVEN(p + col);
#endif
    float t[VW];
#pragma unroll
    for (int l = 0; l < VW; l++) {
        const int c = col + l * step;
        t[l] = full || (uint)c < (uint)limit ? KILN_LOAD(p, c) : 0.0f;
    }
    return VFROM(t);
}

/* Lanes [0, n) of v to p[0..n). */
INLINE void store_span(vec v, __global KILN_STORAGE *p, int n)
{
    if (n >= VW) {
        VSTORE_S(v, p);
        return;
    }
    float t[VW];
    VTO(v, t);
    for (int l = 0; l < n; l++)
        KILN_STORE(t[l], p, l);
}

INLINE vec activate(vec v, float slope)
{
#if KILN_ACT
    float t[VW];
    VTO(v, t);
#pragma unroll
    for (int l = 0; l < VW; l++)
        t[l] = kiln_activate(t[l], slope);
    return VFROM(t);
#else
    (void)slope;
    return v;
#endif
}

#if !KILN_NHWC

#define KT KILN_DIRECT_KT
#define PL KILN_DIRECT_PL
/* Tiles [INNER_FIRST, INNER_END) of a row read only columns inside it. */
#define INNER_FIRST KILN_DIRECT_INNER_FIRST
#define INNER_END KILN_DIRECT_INNER_END

/* Lane-wise 2x2 max pool of rows a and b into `out` (VW / 2 values). */
INLINE void pool_pairs(vec a, vec b, float *out)
{
    float t[VW];
    VTO(fmax(a, b), t);
#pragma unroll
    for (int l = 0; l < VW / 2; l++)
        out[l] = fmax(t[2 * l], t[2 * l + 1]);
}

/* VW columns start, start + SW, ... of a row, zero outside it. With stride 1
   or 2 and rows of at least VW * SW, one load of VW * SW columns clamped
   into the row, then a lane permutation and a mask, which fold into one
   shuffle when `start` is a constant; otherwise lane by lane. */
#if VW > 1 && SW <= 2 && W >= VW * SW
typedef CAT(int, VW) ivec;
#if VW == 2
#define LANES ((ivec)(0, 1))
#elif VW == 4
#define LANES ((ivec)(0, 1, 2, 3))
#elif VW == 8
#define LANES ((ivec)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define LANES ((ivec)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif
INLINE vec edge_load(__global const KILN_STORAGE *row, int start)
{
    const int from = clamp(start, 0, W - VW * SW);
    const ivec cols = start + LANES * SW, inside = cols >= 0 && cols < W;
#if SW == 2 && VW == 16
    const vec v = shuffle2(VLOAD_S(row + from), VLOAD_S(row + from + 16), CAT(as_uint, VW)(cols - from));
    return select((vec)(0.0f), v, inside);
#else
    /* Lanes outside the row pick from a zero vector. */
    const CAT(uint, VW) pick = CAT(as_uint, VW)(select((ivec)(VW * SW), cols - from, inside));
#if SW == 1
    return shuffle2(VLOAD_S(row + from), (vec)(0.0f), pick);
#else
    return shuffle2(VLOAD_W(VW2, row + from), (CAT(float, VW2))(0.0f), pick);
#endif
#endif
}
#else
INLINE vec edge_load(__global const KILN_STORAGE *row, int start) { return load_span(row, start, SW, W, false); }
#endif

/* Add input channel xc's contribution (weights wk) to the tile. */
INLINE void nchw_channel(vec acc[KT][TH], __global const KILN_STORAGE *xc, const vec wk[KT][FR][FS], int row0,
                         int col0, int h, bool interior)
{
#pragma unroll
    for (int i = 0; i < IR; i++) {
        const int ih = row0 + i;
        if ((uint)ih >= (uint)h)
            continue;
        __global const KILN_STORAGE *row = xc + ih * W;
#pragma unroll
        for (int s = 0; s < FS; s++) {
            const int start = col0 + s * DL;
            const vec xv = interior ? load_span(row, start, SW, W, true) : edge_load(row, start);
#pragma unroll
            for (int r = 0; r < FR; r++) {
                const int d = i - r * DH; /* = t * SH for the output row t this tap reaches */
                if (d < 0 || d % SH != 0 || d / SH >= TH)
                    continue;
#pragma unroll
                for (int kt = 0; kt < KT; kt++)
                    acc[kt][d / SH] = fma(wk[kt][r][s], xv, acc[kt][d / SH]);
            }
        }
    }
}

/* The tile's sums over the CG input channels from c0 of filters k0.. of
   image n. */
INLINE void nchw_tile(vec acc[KT][TH], __global const KILN_STORAGE *x, __global const KILN_STORAGE *w, int n, int k0,
                      int c0, int C, int H, int row0, int col0, bool interior)
{
    for (int c = 0; c < CG; c++) {
        vec wk[KT][FR][FS];
#pragma unroll
        for (int kt = 0; kt < KT; kt++)
#pragma unroll
            for (int r = 0; r < FR; r++)
#pragma unroll
                for (int s = 0; s < FS; s++)
                    wk[kt][r][s] = KILN_LOAD(w, ((size_t)(k0 + kt) * CG + c) * (FR * FS) + r * FS + s);
        nchw_channel(acc, x + ((size_t)n * C + c0 + c) * H * W, wk, row0, col0, H, interior);
    }
}

/* Tile index = ((n * kblocks + kb) * tiles_p + tp) * TILES_Q + tq. */
__kernel __attribute__((reqd_work_group_size(KILN_DIRECT_WG, 1, 1))) void
conv_f32_direct(__global const KILN_STORAGE *x, __global const KILN_STORAGE *w, __global const float *bias,
                __global const KILN_STORAGE *z, __global KILN_STORAGE *y, const int C, const int H, const int K,
                const int P, const int Q, const int YH, const int YW, const int kg, const int pad_top,
                const int tiles_p, const int kblocks, const int tiles, const float alpha, const float beta,
                const float slope)
{
    int id = get_global_id(0);
    if (id >= tiles)
        return;
    const int tq = id % TILES_Q;
    id /= TILES_Q;
    const int tp = id % tiles_p;
    id /= tiles_p;
    const int k0 = id % kblocks * KT, n = id / kblocks;
    const int p0 = tp * TH, q0 = tq * VW;
    const int row0 = p0 * SH - pad_top;
    const int c0 = k0 / kg * CG;

    vec acc[KT][TH];
#pragma unroll
    for (int kt = 0; kt < KT; kt++)
#pragma unroll
        for (int t = 0; t < TH; t++)
            acc[kt][t] = 0.0f;
    /* Interior tiles; then up to three edge tiles, each compiled with its
       columns as constants (KILN_DIRECT_EDGE_A.. C, -1 for none); then any
       others (KILN_DIRECT_EDGE_REST). */
    const int step = VW * SW;
    if (tq >= INNER_FIRST && tq < INNER_END)
        nchw_tile(acc, x, w, n, k0, c0, C, H, row0, tq * step - PL, true);
    else if (tq == KILN_DIRECT_EDGE_A)
        nchw_tile(acc, x, w, n, k0, c0, C, H, row0, KILN_DIRECT_EDGE_A * step - PL, false);
    else if (tq == KILN_DIRECT_EDGE_B)
        nchw_tile(acc, x, w, n, k0, c0, C, H, row0, KILN_DIRECT_EDGE_B * step - PL, false);
    else if (tq == KILN_DIRECT_EDGE_C)
        nchw_tile(acc, x, w, n, k0, c0, C, H, row0, KILN_DIRECT_EDGE_C * step - PL, false);
#if KILN_DIRECT_EDGE_REST
    else
        nchw_tile(acc, x, w, n, k0, c0, C, H, row0, tq * step - PL, false);
#endif

    const bool qfull = q0 + VW <= Q;
#pragma unroll
    for (int kt = 0; kt < KT; kt++) {
        const size_t plane = (size_t)n * K + k0 + kt;
        vec v[TH];
#pragma unroll
        for (int t = 0; t < TH; t++) {
            v[t] = alpha * acc[kt][t];
#if KILN_HAS_Z
            if (p0 + t < P)
                v[t] = fma((vec)(beta), load_span(z + (plane * P + p0 + t) * Q, q0, 1, Q, qfull), v[t]);
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
            __global KILN_STORAGE *out = y + (plane * YH + py) * YW + px;
            for (int l = 0; l < VW / 2 && px + l < YW; l++)
                KILN_STORE(pooled[l], out, l);
        }
#else
#pragma unroll
        for (int t = 0; t < TH; t++)
            if (p0 + t < P)
                store_span(v[t], y + (plane * P + p0 + t) * Q + q0, Q - q0);
#endif
    }
}

#else /* KILN_NHWC */

#define TQ KILN_DIRECT_TQ
/* Input columns a tile of TQ output columns reads. */
#define IC ((TQ - 1) * SW + (FS - 1) * DL + 1)

/* Add one footprint pixel's value xv (input row i, column j of the tile) to
   the outputs it reaches through weights wv. */
INLINE void nhwc_pixel(vec acc[TH][TQ], const vec wv[FR][FS], vec xv, int i, int j)
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
INLINE void nhwc_channel(vec acc[TH][TQ], const vec wv[FR][FS], __global const KILN_STORAGE *x, int C, int H,
                         int row0, int col0, bool vector)
{
#pragma unroll
    for (int i = 0; i < IR; i++) {
        const int ih = row0 + i;
        if ((uint)ih >= (uint)H)
            continue;
        __global const KILN_STORAGE *row = x + (size_t)ih * W * C;
#pragma unroll
        for (int j = 0; j < IC; j++) {
            const int iw = col0 + j;
            if ((uint)iw < (uint)W)
                nhwc_pixel(acc, wv, vector ? VLOAD_S(row + iw * C) : (vec)(KILN_LOAD(row, iw * C)), i, j);
        }
    }
}

/* Image n and first output row p0 and column q0 of pixel tile `pixel`,
   numbered (n * tiles_p + tp) * TILES_Q + tq. */
INLINE void pixel_tile(int pixel, int tiles_p, int *n, int *p0, int *q0)
{
    *q0 = pixel % TILES_Q * TQ;
    *p0 = pixel / TILES_Q % tiles_p * TH;
    *n = pixel / TILES_Q / tiles_p;
}

#if !KILN_DIRECT_DEPTHWISE
#define CC KILN_DIRECT_CC
#endif

/* Depthwise: work-item id computes pixel tile id / kblocks of k-block
   id % kblocks, so neighbouring work-items read neighbouring channels.
   Otherwise work-group g computes pixel tiles g % groups * WG + [0, WG) of
   k-block g / groups: its work-items share their filters, which they stage
   in local memory as VW-wide vectors, CC of the CG input channels at a
   time (usually all at once: one barrier, before anything else is
   computed, so nothing lives across it). */
__kernel __attribute__((reqd_work_group_size(KILN_DIRECT_WG, 1, 1))) void
conv_f32_direct(__global const KILN_STORAGE *x, __global const KILN_STORAGE *w, __global const float *bias,
                __global const KILN_STORAGE *z, __global KILN_STORAGE *y, const int C, const int H, const int K,
                const int P, const int Q, const int YH, const int YW, const int kg, const int pad_top,
                const int tiles_p, const int kblocks, const int tiles, const float alpha, const float beta,
                const float slope)
{
    vec acc[TH][TQ];
#pragma unroll
    for (int t = 0; t < TH; t++)
#pragma unroll
        for (int u = 0; u < TQ; u++)
            acc[t][u] = 0.0f;
    int n, p0, q0;
    vec wv[FR][FS];
#if KILN_DIRECT_DEPTHWISE
    const int id = get_global_id(0);
    if (id >= tiles)
        return;
    const int k0 = id % kblocks * VW;
    pixel_tile(id / kblocks, tiles_p, &n, &p0, &q0);
    /* w[k0 + l][r][s] for the VW lanes l. */
#pragma unroll
    for (int r = 0; r < FR; r++)
#pragma unroll
        for (int s = 0; s < FS; s++) {
            float t[VW];
#pragma unroll
            for (int l = 0; l < VW; l++)
                t[l] = KILN_LOAD(w, (size_t)(k0 + l) * (FR * FS) + r * FS + s);
            wv[r][s] = VFROM(t);
        }
    nhwc_channel(acc, wv, x + (size_t)n * H * W * C + k0, C, H, p0 * SH - pad_top, q0 * SW - KILN_DIRECT_PL, true);
#else
    const int pixels = tiles / kblocks, groups = (pixels + KILN_DIRECT_WG - 1) / KILN_DIRECT_WG;
    const int k0 = get_group_id(0) / groups * VW;
    __local float wl[CC][FR * FS][VW];
    for (int c0 = 0; c0 < CG; c0 += CC) {
        /* wl[c][tap][l] = w[k0 + l][tap][c0 + c] (KRSC), zero past CG. */
        if (c0 > 0)
            barrier(CLK_LOCAL_MEM_FENCE);
        for (int e = get_local_id(0); e < CC * FR * FS * VW; e += KILN_DIRECT_WG) {
            const int c = e % CC, tap = e / CC % (FR * FS), l = e / CC / (FR * FS);
            wl[c][tap][l] = c0 + c < CG ? KILN_LOAD(w, ((size_t)(k0 + l) * (FR * FS) + tap) * CG + c0 + c) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int pixel = get_group_id(0) % groups * KILN_DIRECT_WG + get_local_id(0);
        if (pixel >= pixels)
            continue;
        pixel_tile(pixel, tiles_p, &n, &p0, &q0);
        __global const KILN_STORAGE *xc = x + (size_t)n * H * W * C + k0 / kg * CG + c0;
        for (int c = 0; c < CC && c0 + c < CG; c++) {
#pragma unroll
            for (int r = 0; r < FR; r++)
#pragma unroll
                for (int s = 0; s < FS; s++)
                    wv[r][s] = VFROM(wl[c][r * FS + s]);
            nhwc_channel(acc, wv, xc + c, C, H, p0 * SH - pad_top, q0 * SW - KILN_DIRECT_PL, false);
        }
    }
    const int pixel = get_group_id(0) % groups * KILN_DIRECT_WG + get_local_id(0);
    if (pixel >= pixels)
        return;
    pixel_tile(pixel, tiles_p, &n, &p0, &q0);
#endif

#if KILN_HAS_BIAS
    const vec b = VFROM(bias + k0);
#endif
#pragma unroll
    for (int t = 0; t < TH; t++)
#pragma unroll
        for (int u = 0; u < TQ; u++) {
            vec v = alpha * acc[t][u];
#if KILN_HAS_Z
            if (p0 + t < P && q0 + u < Q)
                v = fma((vec)(beta), VLOAD_S(z + (((size_t)n * P + p0 + t) * Q + q0 + u) * K + k0), v);
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
                VSTORE_S(fmax(fmax(acc[t][u], acc[t][u + 1]), fmax(acc[t + 1][u], acc[t + 1][u + 1])),
                         y + (((size_t)n * YH + py) * YW + px) * K + k0);
        }
#else
#pragma unroll
    for (int t = 0; t < TH; t++)
#pragma unroll
        for (int u = 0; u < TQ; u++)
            if (p0 + t < P && q0 + u < Q)
                VSTORE_S(acc[t][u], y + (((size_t)n * P + p0 + t) * Q + q0 + u) * K + k0);
#endif
}

#endif /* KILN_NHWC */
