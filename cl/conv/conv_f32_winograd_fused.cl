/*
 * Winograd convolution F(m x m, 3 x 3) on a CPU: the (m+2)^2 products and
 * the output transform in one kernel, after conv_f32_winograd.cl's _filter
 * and _in have written U and V (that file describes the transforms and the
 * workspace: V[t][c][tile] in NCHW, V[t][tile][c] in NHWC).
 *
 * Work-item (block, group) computes, for NR filters starting at block * NR
 * and GP panels of MR tiles starting at tile group * GP * MR
 * (KILN_WINO_GROUP, one panel after the other for each t, so that each
 * block of U serves them all from the nearest caches), every product
 *   M[t][tile][k] = sum_c V[t][c][tile] U[t][c][k]      (t < (m+2)^2)
 * on the CPU register tile (common/register_tile.h: the MR tiles broadcast,
 * lanes are filters): V read where _in wrote it (NCHW: each channel's
 * tiles consecutive, channels T floats apart; NHWC: each tile's channels
 * consecutive, tiles C floats apart), U
 * from the panels _filter wrote for this kernel (KILN_WINO_PANEL = NR:
 * U[t][k / NR][c][k % NR], zeros past K). It keeps the products in private
 * memory, GP (m+2)^2 x MR x NR floats, and transforms them back,
 *   y = pool(act(alpha * A^T M A + beta * z + bias)),
 * storing the outputs (NCHW filter by filter, NHWC a vector of filters a
 * pixel), so the products never go through memory
 * and the convolution takes one launch after the input transform instead
 * of two. The last panel of tiles ends at the last tile (the host ensures
 * T >= MR), storing only the tiles the one before did not; the last block
 * of filters stores those below K.
 *
 * Defines: KILN_WINO_M, the register tile (KILN_TILE_MR, _NR, _VW), KILN_NHWC,
 * the storage (KILN_F16, KILN_BF16) and the epilogue switches KILN_ACT,
 * KILN_HAS_BIAS, KILN_HAS_Z, KILN_POOL; KILN_WINO_PANEL (NR) and
 * KILN_WINO_GROUP. The blocks of filters are the first dimension, so the
 * work-items that share a group's V, (m+2)^2 x C x GP x MR floats, run
 * one after another while it is in cache: with the groups first, 8 images
 * of 128 channels at 56x56 read V from memory once per block (12.1 against
 * 10.1-10.4 ms).
 */
#include "common/epilogue.h"
#include "common/portability.h"
#include "common/register_tile.h"
#include "common/storage.h"

#define WM KILN_WINO_M
#define WA (WM + 2)
#include "conv/winograd_1d.h"

#define KERNEL(suffix) CAT(CAT(CAT(conv_f32_wino, WM), CAT(x, WM)), suffix)

#define GP KILN_WINO_GROUP

KILN_ACTIVATION_FUNCTION(VEC, activate_vec)

/* Filters kj .. kj + lanes - 1 of output pixel (oh, ow) of image n: the
   residual z, a vector of them. */
inline VEC residual(KILN_GLOBAL const KILN_STORAGE *z, int n, int kj, int lanes, int oh, int ow, int K, int P, int Q)
{
#if KILN_NHWC
    return load_vec(z + (((size_t)n * P + oh) * Q + ow) * K + kj, lanes);
#else
    float zl[VW];
    for (int l = 0; l < VW; l++)
        zl[l] = l < lanes ? KILN_LOAD(z, (((size_t)n * K + kj + l) * P + oh) * Q + ow) : 0.0f;
    return VLOAD(0, zl);
#endif
}

/* The tile's stored values o (SIDE x SIDE pixels from (r0, c0) of y, YH x
   YW, those inside it) for filters kj .. kj + lanes - 1: NHWC a vector a
   pixel, NCHW filter by filter. */
inline void store_tile(VEC o[SIDE][SIDE], KILN_GLOBAL KILN_STORAGE *y, int n, int kj, int lanes, int r0, int c0, int K,
                       int YH, int YW)
{
#if KILN_NHWC
    for (int a = 0; a < SIDE && r0 + a < YH; a++)
        for (int c = 0; c < SIDE && c0 + c < YW; c++)
            store_vec(o[a][c], y + (((size_t)n * YH + r0 + a) * YW + c0 + c) * K + kj, lanes);
#else
    float out[SIDE][SIDE][VW];
#pragma unroll
    for (int a = 0; a < SIDE; a++)
#pragma unroll
        for (int c = 0; c < SIDE; c++)
            VSTORE(o[a][c], 0, out[a][c]);
#if SIDE > 1
    /* A tile inside y: each filter's rows of SIDE values, one store each
       (value by value, this was a sixth of the kernel's time at 56x56). */
    const bool whole = r0 + SIDE <= YH && c0 + SIDE <= YW;
#endif
    for (int l = 0; l < lanes; l++) {
        KILN_GLOBAL KILN_STORAGE *plane = y + ((size_t)n * K + kj + l) * YH * YW;
#if SIDE > 1
        if (whole) {
#pragma unroll
            for (int a = 0; a < SIDE; a++) {
                float row[SIDE];
#pragma unroll
                for (int c = 0; c < SIDE; c++)
                    row[c] = out[a][c][l];
                KILN_VSTOREN(CAT(vload, SIDE)(0, row), SIDE, plane + (size_t)(r0 + a) * YW + c0);
            }
            continue;
        }
#endif
        for (int a = 0; a < SIDE && r0 + a < YH; a++)
            for (int c = 0; c < SIDE && c0 + c < YW; c++)
                KILN_STORE(out[a][c][l], plane, (size_t)(r0 + a) * YW + c0 + c);
    }
#endif
}

KILN_KERNEL void KERNEL(_fused)(const int N, const int C, const int H, const int W, const int K, const int P,
                                const int Q, const int pad_top, const int pad_left, const int TH, const int TW,
                                const float alpha_arg, const float beta_arg, const float slope_arg,
                                KILN_GLOBAL const float *u, const ulong plane_u, KILN_GLOBAL const float *v,
                                const ulong plane_v, KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z,
                                KILN_GLOBAL KILN_STORAGE *y)
{
    (void)H, (void)W, (void)pad_top, (void)pad_left;
    KILN_TILE_HOLD(held, alpha_arg, beta_arg, slope_arg);
    const int T = N * TH * TW, YH = KILN_POOL ? P / 2 : P, YW = KILN_POOL ? Q / 2 : Q;
    const int k0 = (int)KILN_GLOBAL_ID(0) * NR, first = (int)KILN_GLOBAL_ID(1) * GP * MR;
    const int groups = min(GP, (T - first + MR - 1) / MR);

    VEC prod[GP][WA * WA][MR][NV];
    for (int t = 0; t < WA * WA; t++)
        for (int g = 0; g < groups; g++) {
            VEC acc[MR][NV];
            const int tile0 = min(first + g * MR, T - MR);
#if KILN_NHWC
            KILN_TILE_MULTIPLY_RLD(acc, v + t * plane_v + (size_t)tile0 * C, 1, C, u + t * plane_u + (size_t)k0 * C, NR, C);
#else
            KILN_TILE_MULTIPLY_LD(acc, v + t * plane_v + tile0, T, u + t * plane_u + (size_t)k0 * C, NR, C);
#endif
#pragma unroll
            for (int i = 0; i < MR; i++)
#pragma unroll
                for (int j = 0; j < NV; j++)
                    prod[g][t][i][j] = acc[i][j];
        }

    const float alpha = held[0], beta = held[1], slope = held[2];
    (void)beta, (void)slope;
    for (int g = 0; g < groups; g++) {
        const int own_tile = first + g * MR, tile0 = min(own_tile, T - MR);
        for (int i = own_tile - tile0; i < MR; i++) {
            const int tile = tile0 + i, n = tile / (TH * TW), tt = tile - n * TH * TW, th = tt / TW, tw = tt - th * TW;
            const int oh0 = th * WM, ow0 = tw * WM, r0 = oh0 / (WM / SIDE), c0 = ow0 / (WM / SIDE);
            for (int j = 0; j < NV; j++) {
                const int kj = k0 + j * VW, lanes = min(VW, K - kj); /* VW filters a vector */
                if (lanes <= 0)
                    break;
                VEC mv[WA][WA], r[WM][WM], e[WM][WM], o[SIDE][SIDE];
#pragma unroll
                for (int a = 0; a < WA; a++)
#pragma unroll
                    for (int b = 0; b < WA; b++)
                        mv[a][b] = prod[g][a * WA + b][i][j];
                output_2d(mv, r);
#if KILN_HAS_BIAS
                const VEC b = load_ws(bias + kj, lanes);
#else
                const VEC b = 0.0f;
#endif
#pragma unroll
                for (int a = 0; a < WM; a++)
#pragma unroll
                    for (int c = 0; c < WM; c++) {
                        VEC s = alpha * r[a][c];
#if KILN_HAS_Z
                        /* The residual of each lane's filter, inside P x Q. */
                        if (oh0 + a < P && ow0 + c < Q)
                            s = fma((VEC)(beta), residual(z, n, kj, lanes, oh0 + a, ow0 + c, K, P, Q), s);
#endif
                        e[a][c] = activate_vec(s + b, slope);
                    }
                pool_tile(e, o);
                store_tile(o, y, n, kj, lanes, r0, c0, K, YH, YW);
            }
        }
    }
}
