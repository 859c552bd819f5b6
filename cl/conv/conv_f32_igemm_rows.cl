/*
 * Implicit-GEMM convolution for OpenCL on CPUs: the row variant, for NHWC
 * and for the strided NCHW layers of small images (src/ops/conv_igemm.c
 * chooses; the panel variant is conv_f32_igemm.cl).
 *
 * The GEMM view of the panel variant with the roles of the register tile
 * swapped: MR output pixels are the tile's rows, broadcast one input value
 * at a time straight from a channels-last input, and NR output channels its
 * columns, NR/VW vectors of packed weights. Nothing is gathered: in
 * channels-last order, the inputs a pixel's window reads, tap by tap, are
 * runs of C/groups consecutive channels (the whole filter row, S * C, with
 * one group and no column dilation), so each of the MR pixels streams
 * through its own contiguous run. NHWC is read in place: a tile whose
 * windows reach the padding reads tap by tap, zeros where a tap lies
 * outside the image. NCHW inputs are first copied into a channels-last
 * buffer with a zero border (the copy kernel).
 *
 * conv_f32_igemm_rows_pack: weights into zero-padded panels of NR filters,
 *   Wt[g][panel][(r * S + s) * cg + c][NR]. Global (KK, panels, groups).
 * conv_f32_igemm_rows_copy (NCHW): x into xp, N x Hp x Wp x C with the
 *   padding as zeros. Global (ceil(C / 16), Hp, N), local (1, 1, 1).
 * conv_f32_igemm_rows: global (chunks, panels, groups), local (1, 1, 1);
 *   work-group (chunk, panel, g) computes chunk_tiles tiles of MR pixels
 *   against the panel's NR filters, reading the panel's weights once per
 *   tile from the cache they stay in.
 *
 * Defines: KILN_TILE_MR/NR/VW (the register tile: MR pixels, NR filters),
 * KILN_NHWC, KILN_F16, KILN_BF16, the epilogue switches of
 * common/epilogue.h, and for a small filter KILN_ROWS_FIXED with
 * KILN_ROWS_R, _S, _CG, _DIL_W and _GROUPS (below).
 */
#include "common/epilogue.h"
#include "common/portability.h"
#include "common/register_tile.h"
#include "common/tile_runs.h"
#include "conv/igemm_pack.h"
#include "conv/igemm_shape.h"

KILN_ACTIVATION_FUNCTION(VEC, activate_vec)

/* A filter of a small volume (an RGB stem's 3x3 over 3 channels) has its
   size, channels per group, column dilation and groups compiled in (KILN_ROWS_FIXED; src/ops/conv_igemm.c decides), so that the
   loops over the taps of a tile inside the image unroll whole. Left to run
   time, a filter row of 9 values took a loop of 4, its remainder and the
   stepping of the MR pixels' pointers, as many instructions as the
   multiply-adds. The tiles at the padding keep their loops over the taps
   (only the channels' is unrolled): unrolled whole, a 5x5 filter's 25 taps
   and their masks spilled the accumulators. */
#if KILN_ROWS_FIXED
#define TAP_R KILN_ROWS_R
#define TAP_S KILN_ROWS_S
#define TAP_CG KILN_ROWS_CG
#define TAP_DIL_W KILN_ROWS_DIL_W
#define TAP_GROUPS KILN_ROWS_GROUPS
#define UNROLL_TAPS _Pragma("unroll")
#define UNROLL_FIXED _Pragma("unroll")
#else
#define TAP_R R
#define TAP_S S
#define TAP_CG cg
#define TAP_DIL_W dil_w
#define TAP_GROUPS groups
#define UNROLL_TAPS _Pragma("unroll 4")
#define UNROLL_FIXED
#endif

/* Global (KK, panels, groups). KCRS weights are reordered from (c, r, s);
   KRSC ones are already in (r, s, c) order. */
#if KILN_WANTS(conv_f32_igemm_rows_pack)
KILN_KERNEL void conv_f32_igemm_rows_pack(const int kg, const int cg, const int R, const int S,
                                          KILN_GLOBAL const KILN_STORAGE *w, KILN_GLOBAL float *wt)
{
    const int kk = KILN_GLOBAL_ID(0), panel = KILN_GLOBAL_ID(1), g = KILN_GLOBAL_ID(2);
    const int kk_count = cg * R * S;
    if (kk >= kk_count)
        return;
#if KILN_NHWC
    const int src = kk;
#else
    const int rs = kk / cg, c = kk - rs * cg;
    const int src = c * R * S + rs;
#endif
    igemm_pack_row(kg, kk_count, g, panel, kk, src, NR, w, wt);
}
#endif

#if !KILN_NHWC
/* Work-item (c-block, hp, n): channels c0 .. c0 + 15 of row hp of xp, pixel
   by pixel, one vector store per pixel (the 16 input rows it reads in NCHW
   stay in the data cache along the row). */
#if KILN_WANTS(conv_f32_igemm_rows_copy)
KILN_KERNEL void conv_f32_igemm_rows_copy(const int C, const int H, const int W, const int Hp, const int Wp,
                                          const int pad_top, const int pad_left, KILN_GLOBAL const KILN_STORAGE *x,
                                          KILN_GLOBAL KILN_STORAGE *xp)
{
    const int c0 = (int)KILN_GLOBAL_ID(0) * 16, hp = KILN_GLOBAL_ID(1), n = KILN_GLOBAL_ID(2);
    if (c0 >= C || hp >= Hp)
        return;
    const int h = hp - pad_top, cn = min(16, C - c0);
    const bool row_inside = (uint)h < (uint)H;
    KILN_GLOBAL KILN_STORAGE *dst = xp + ((size_t)n * Hp + hp) * Wp * C + c0;
    const KILN_GLOBAL KILN_STORAGE *src = x + (((size_t)n * C + c0) * H + (row_inside ? h : 0)) * W;
    for (int wp = 0; wp < Wp; wp++, dst += C) {
        const int w = wp - pad_left;
        const bool inside = row_inside && (uint)w < (uint)W;
        if (cn == 16) {
            float v[16];
#pragma unroll
            for (int c = 0; c < 16; c++)
                v[c] = inside ? KILN_LOAD(src, (size_t)c * H * W + w) : 0.0f;
            KILN_VSTOREN(vload16(0, v), 16, dst);
        } else
            for (int c = 0; c < cn; c++)
                KILN_STORE(inside ? KILN_LOAD(src, (size_t)c * H * W + w) : 0.0f, dst, c);
    }
}
#endif
#endif

#if KILN_NHWC
/* One tap of a tile whose windows reach the padding: the tap's cg channels
   from xp + at[i] for each pixel i against the weights from b, pixel i's
   values taken as zeros where !ok[i] (`masked`: some pixel's tap lies in the
   padding; at[i] is then a valid address all the same). The loop of the
   tiles inside the image (conv_f32_igemm_rows) is the same product read
   through a pointer per pixel; run through this function, those tiles
   took 1-3% longer (a 1x1 layer of 512 channels at 14x14, five alternating
   runs of POCL's profiling, December 1), so it stays written out there. */
inline __attribute__((always_inline)) void edge_tap(VEC acc[MR][NV], KILN_GLOBAL const float *b,
                                                    KILN_GLOBAL const KILN_STORAGE *xp, const size_t at[MR],
                                                    const bool ok[MR], const int cg, const bool masked)
{
    UNROLL_TAPS
    for (int c = 0; c < cg; c++, b += NR) {
        VEC bv[NV];
#pragma unroll
        for (int v = 0; v < NV; v++)
            bv[v] = VLOAD(v, b);
#pragma unroll
        for (int i = 0; i < MR; i++) {
            const float x = KILN_LOAD(xp, at[i] + c);
            const VEC a = (VEC)(!masked || ok[i] ? x : 0.0f);
#pragma unroll
            for (int v = 0; v < NV; v++)
                acc[i][v] = fma(a, bv[v], acc[i][v]);
        }
    }
}
#endif

#if KILN_WANTS(conv_f32_igemm_rows)
KILN_KERNEL void conv_f32_igemm_rows(IGEMM_SHAPE_ARGS, const float alpha, const float beta, const float slope,
                                     KILN_GLOBAL const KILN_STORAGE *xp, KILN_GLOBAL const float *wt,
                                     KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z,
                                     KILN_GLOBAL KILN_STORAGE *y, const int chunk_tiles, const int Hp, const int Wp)
{
    const int chunk = KILN_GLOBAL_ID(0), panel = KILN_GLOBAL_ID(1), g = KILN_GLOBAL_ID(2);
    const int cg = C / groups, kg = K / groups, PQ = P * Q, pixels = N * PQ;
    const int kk_count = cg * R * S, panels = (kg + NR - 1) / NR, tiles = (pixels + MR - 1) / MR;
    const int f0 = panel * NR, filters = min(NR, kg - f0);
    const KILN_GLOBAL float *wpanel = wt + ((size_t)g * panels + panel) * (size_t)kk_count * NR;
    /* The taps of one filter row are contiguous in xp where its columns
       are (no dilation) and so are all channels (one group). */
    const bool joined = TAP_DIL_W == 1 && TAP_GROUPS == 1;
    const int taps = joined ? 1 : TAP_S, run = joined ? TAP_S * TAP_CG : TAP_CG;
    const int t_end = min(tiles, (chunk + 1) * chunk_tiles);
    for (int t = chunk * chunk_tiles; t < t_end; t++) {
        /* The tile's pixels: each one's window origin, row oh and column ow
           of image on in the Hp x Wp planes of xp (past the last pixel, the
           last again; its results are not stored). NHWC is read in place,
           its padding outside the planes: `inside` when no window of the
           tile reaches it. NCHW was copied with its padding as zeros. */
        const int pix0 = t * MR;
#if KILN_NHWC
        const int pt = pad_top, pl = pad_left;
#else
        const int pt = 0, pl = 0;
#endif
        int on[MR], oh[MR], ow[MR];
        bool inside = true;
        {
            /* One division for the tile, then pixel by pixel along the rows. */
            int n = pix0 / PQ, p = (pix0 - n * PQ) / Q, q = pix0 - n * PQ - p * Q;
#pragma unroll
            for (int i = 0; i < MR; i++) {
                const bool real = pix0 + i < pixels;
                on[i] = real ? n : on[i > 0 ? i - 1 : 0];
                oh[i] = real ? p * stride_h - pt : oh[i > 0 ? i - 1 : 0];
                ow[i] = real ? q * stride_w - pl : ow[i > 0 ? i - 1 : 0];
#if KILN_NHWC
                inside = inside && oh[i] >= 0 && oh[i] + (R - 1) * dil_h < Hp && ow[i] >= 0 &&
                         ow[i] + (S - 1) * dil_w < Wp;
#endif
                if (++q == Q) {
                    q = 0;
                    if (++p == P)
                        p = 0, n++;
                }
            }
        }
        VEC acc[MR][NV];
#pragma unroll
        for (int i = 0; i < MR; i++)
#pragma unroll
            for (int v = 0; v < NV; v++)
                acc[i][v] = 0.0f;
        const KILN_GLOBAL float *b = wpanel;
        if (inside) {
            const KILN_GLOBAL KILN_STORAGE *px[MR];
#pragma unroll
            for (int i = 0; i < MR; i++)
                px[i] = xp + (((size_t)on[i] * Hp + oh[i]) * Wp + ow[i]) * C + g * cg;
            UNROLL_FIXED
            for (int r = 0; r < TAP_R; r++)
                UNROLL_FIXED
                for (int s = 0; s < taps; s++) {
                    const size_t tap = ((size_t)(r * dil_h) * Wp + s * dil_w) * C;
                    UNROLL_TAPS
                    for (int c = 0; c < run; c++, b += NR) {
                        VEC bv[NV];
#pragma unroll
                        for (int v = 0; v < NV; v++)
                            bv[v] = VLOAD(v, b);
#pragma unroll
                        for (int i = 0; i < MR; i++) {
                            const VEC a = (VEC)KILN_LOAD(px[i], tap + c);
#pragma unroll
                            for (int v = 0; v < NV; v++)
                                acc[i][v] = fma(a, bv[v], acc[i][v]);
                        }
                    }
                }
        }
#if KILN_NHWC
        else {
            /* Tap by tap (the weights' (r, s, c) order): each pixel reads
               its tap's channels where the tap is inside the image, and
               takes zeros where it lies in the padding (reading then the
               group's first channels of the tensor, a valid address). */
            for (int r = 0; r < TAP_R; r++)
                for (int s = 0; s < TAP_S; s++) {
                    bool ok[MR], any = false, all = true;
                    size_t at[MR];
#pragma unroll
                    for (int i = 0; i < MR; i++) {
                        const int ih = oh[i] + r * dil_h, iw = ow[i] + s * dil_w;
                        ok[i] = (uint)ih < (uint)Hp && (uint)iw < (uint)Wp;
                        at[i] = (ok[i] ? (((size_t)on[i] * Hp + ih) * Wp + iw) * C : 0) + g * cg;
                        any = any || ok[i];
                        all = all && ok[i];
                    }
                    if (all)
                        edge_tap(acc, b, xp, at, ok, TAP_CG, false);
                    else if (any) /* else the tap lies in the padding for every pixel */
                        edge_tap(acc, b, xp, at, ok, TAP_CG, true);
                    b += (size_t)TAP_CG * NR;
                }
        }
#endif

        /* Epilogue and the only store: NHWC pixel by pixel along the
           filters, in vectors where the panel is whole; NCHW filter by
           filter along the pixels, which are consecutive where the tile is
           inside one image. */
#if KILN_NHWC
        if (filters == NR) {
            VEC bv[NV];
#pragma unroll
            for (int v = 0; v < NV; v++)
#if KILN_HAS_BIAS
                bv[v] = VLOAD(v, bias + g * kg + f0);
#else
                bv[v] = 0.0f;
#endif
            /* Unrolled, with the bound inside: acc indexed by a loop
               counter that stays a variable keeps the whole tile in memory,
               stored back at every k of the loop above. */
#pragma unroll
            for (int i = 0; i < MR; i++) {
                if (pix0 + i >= pixels)
                    break;
                const size_t at = (size_t)(pix0 + i) * K + g * kg + f0;
#pragma unroll
                for (int v = 0; v < NV; v++) {
                    VEC r = alpha * acc[i][v];
#if KILN_HAS_Z
                    r = fma((VEC)beta, VLOAD_S(v, z + at), r);
#endif
                    VSTORE_S(activate_vec(r + bv[v], slope), v, y + at);
                }
            }
            continue;
        }
#endif
#if !KILN_NHWC && KILN_TILE_RUNS
        /* A whole tile inside one image: each filter's MR pixels are a run of
           its output plane, stored from the tile transposed in registers. */
        if (filters == NR && pix0 % PQ + MR <= PQ && pix0 + MR <= pixels) {
            const int n0 = pix0 / PQ, pq0 = pix0 - n0 * PQ, k0 = g * kg + f0;
            const size_t first = ((size_t)n0 * K + k0) * PQ + pq0; /* filter k0's run */
            tile_store_runs(acc, y + first, PQ, alpha, beta, KILN_HAS_Z ? z + first : 0, KILN_HAS_BIAS ? bias + k0 : 0,
                            0, slope);
            continue;
        }
#endif
        float lane[MR][NR];
#pragma unroll
        for (int i = 0; i < MR; i++)
#pragma unroll
            for (int v = 0; v < NV; v++)
                VSTORE(acc[i][v], v, lane[i]);
#if KILN_NHWC
        for (int i = 0; i < MR && pix0 + i < pixels; i++) {
            const size_t at = (size_t)(pix0 + i) * K + g * kg + f0;
            for (int j = 0; j < filters; j++) {
#if KILN_HAS_BIAS
                const float bk = bias[g * kg + f0 + j];
#else
                const float bk = 0.0f;
#endif
                float v = alpha * lane[i][j];
#if KILN_HAS_Z
                v = fma(beta, KILN_LOAD(z, at + j), v);
#endif
                KILN_STORE(kiln_activate(v + bk, slope), y, at + j);
            }
        }
#else
        const int n0 = pix0 / PQ, pq0 = pix0 - n0 * PQ;
        const bool along = pq0 + MR <= PQ && pix0 + MR <= pixels;
        for (int j = 0; j < filters; j++) {
            const int k = g * kg + f0 + j;
#if KILN_HAS_BIAS
            const float bk = bias[k];
#else
            const float bk = 0.0f;
#endif
            if (along) {
                const size_t at = ((size_t)n0 * K + k) * PQ + pq0;
#pragma unroll
                for (int i = 0; i < MR; i++) {
                    float v = alpha * lane[i][j];
#if KILN_HAS_Z
                    v = fma(beta, KILN_LOAD(z, at + i), v);
#endif
                    KILN_STORE(kiln_activate(v + bk, slope), y, at + i);
                }
                continue;
            }
            for (int i = 0; i < MR && pix0 + i < pixels; i++) {
                const int pix = pix0 + i, n = pix / PQ;
                const size_t at = ((size_t)n * K + k) * PQ + (pix - n * PQ);
                float v = alpha * lane[i][j];
#if KILN_HAS_Z
                v = fma(beta, KILN_LOAD(z, at), v);
#endif
                KILN_STORE(kiln_activate(v + bk, slope), y, at);
            }
        }
#endif
    }
}
#endif
