/*
 * Implicit-GEMM convolution for OpenCL on CPUs, NCHW: the panel variant
 * (the row variant, conv_f32_igemm_rows.cl, takes NHWC and the strided NCHW
 * layers of small images; src/ops/conv_igemm.c chooses).
 *
 * GEMM view, per group: Y[k][pixel] = sum_kk W[k][kk] * X[kk][pixel], with
 * M = output channels of the group, N = output pixels n*P*Q, K = kk over the
 * filter volume C/groups * R * S in the KCRS weights' order (c, r, s). X is
 * the im2col matrix, never stored in global memory: each work-group gathers
 * the K x NR panel of its NR pixels into local memory once (padding reads
 * as zero; a flat fp32 1x1 layer's whole tiles read it in place from x) and
 * reuses it for every block of MR output channels, with the same MR x NR
 * vector register tile as the CPU
 * GEMM (cl/gemm/gemm_f32_cpu.cl). The epilogue (alpha, residual, bias,
 * activation) is applied before the only store of y.
 *
 * conv_f32_igemm_pack_w: weights into zero-padded panels of MR filters,
 *   kk-major inside a panel: Wp[g][panel][kk][MR]. Global (KK, panels, groups).
 * conv_f32_igemm: global (ceil(N*P*Q / NR), blocks, groups), local (1, 1, 1);
 *   work-group (tile, block, g) multiplies its panel by weight panels
 *   block * block_panels .. + block_panels (small images split the filters
 *   so that every core has work); the local buffer holds KK * NR floats.
 *
 * Defines: KILN_TILE_MR/NR/VW (the GEMM register tile), KILN_F16,
 * KILN_BF16, and the epilogue switches of common/epilogue.h.
 */
#include "common/epilogue.h"
#include "common/portability.h"
#include "common/register_tile.h"
#include "conv/igemm_pack.h"
#include "conv/igemm_shape.h"

#if KILN_WANTS(conv_f32_igemm_pack_w)
KILN_KERNEL void conv_f32_igemm_pack_w(const int kg, const int cg, const int R, const int S,
                                       KILN_GLOBAL const KILN_STORAGE *w, KILN_GLOBAL float *wp)
{
    const int kk = KILN_GLOBAL_ID(0), panel = KILN_GLOBAL_ID(1), g = KILN_GLOBAL_ID(2);
    if (kk < cg * R * S)
        igemm_pack_row(kg, cg * R * S, g, panel, kk, kk, MR, w, wp);
}
#endif

/* Rows [from, end) of NR floats at p, `stride` floats apart, into L2 (a
   hint); returns end. */
inline int fetch_rows(const KILN_GLOBAL float *p, int stride, int from, int end)
{
    for (int row = from; row < end; row++) {
#pragma unroll
        for (int line = 0; line < NR; line += 16) /* a 64-byte line */
            KILN_PREFETCH(p + (size_t)row * stride + line);
    }
    return end;
}

/* Offset of x[n][c][h][w]. */
inline size_t x_at(int n, int c, int h, int w, int C, int H, int W) { return (((size_t)n * C + c) * H + h) * W + w; }

/* Offset of an output element (channel k of pixel pix = (n*P + p)*Q + q). */
inline size_t y_at(int pix, int k, int K, int PQ)
{
    const int n = pix / PQ;
    return ((size_t)n * K + k) * PQ + (pix - n * PQ);
}

/* dst[j] = src[j * stride] for j < len, where every element is inside the
   input row, which holds `room` elements from src on: whole vectors for
   strides 1 and 2 (the even lanes of two, read only where the odd lane after
   the last element is in the row too: never past the tensor's end), then
   the rest of the run in a half and a quarter vector (rows of 7, 14 or 28
   outputs are shorter than one vector, or end in part of one), then one by
   one. */
inline void copy_row(KILN_LOCAL float *dst, const KILN_GLOBAL KILN_STORAGE *src, int len, int stride, int room)
{
    int j = 0;
    if (stride == 1) {
        for (; j + VW <= len; j += VW)
            VSTORE(VLOAD_S(0, src + j), 0, dst + j);
#if VW >= 16
        if (j + 8 <= len) {
            vstore8(KILN_VLOADN(8, src + j), 0, dst + j);
            j += 8;
        }
#endif
#if VW >= 8
        if (j + 4 <= len) {
            vstore4(KILN_VLOADN(4, src + j), 0, dst + j);
            j += 4;
        }
#endif
    }
#if VW > 1 /* a scalar has no even lanes: the loop below copies it */
    else if (stride == 2) {
        for (; j + VW <= len && 2 * (j + VW) <= room; j += VW) {
            const VEC lo = VLOAD_S(0, src + 2 * j), hi = VLOAD_S(0, src + 2 * j + VW);
            VSTORE((VEC)(lo.even, hi.even), 0, dst + j);
        }
#if VW >= 16
        if (j + 8 <= len && 2 * (j + 8) <= room) {
            vstore8(KILN_VLOADN(16, src + 2 * j).even, 0, dst + j);
            j += 8;
        }
#endif
#if VW >= 8
        if (j + 4 <= len && 2 * (j + 4) <= room) {
            vstore4(KILN_VLOADN(8, src + 2 * j).even, 0, dst + j);
            j += 4;
        }
#endif
    }
#endif
    for (; j < len; j++)
        dst[j] = KILN_LOAD(src, j * stride);
}

/* A run of len outputs whose window column starts at w0 (maybe outside the
   row): zeros where it is outside, copy_row for the part inside. */
inline void copy_padded_row(KILN_LOCAL float *dst, const KILN_GLOBAL KILN_STORAGE *row, int len, int w0, int stride,
                            int W)
{
    /* [lo, hi): the outputs whose column w0 + j * stride is in 0 .. W - 1. */
    const int lo = w0 < 0 ? min(len, (-w0 + stride - 1) / stride) : 0;
    const int hi = w0 < W ? min(len, (W - w0 + stride - 1) / stride) : 0;
    int j = 0;
    for (; j < lo; j++)
        dst[j] = 0.0f;
    if (hi > lo) {
        copy_row(dst + lo, row + w0 + lo * stride, hi - lo, stride, W - (w0 + lo * stride));
        j = hi;
    }
    for (; j < len; j++)
        dst[j] = 0.0f;
}

KILN_ACTIVATION_FUNCTION(VEC, activate_vec)

#if KILN_WANTS(conv_f32_igemm)
KILN_KERNEL void conv_f32_igemm(IGEMM_SHAPE_ARGS, const float alpha, const float beta, const float slope,
                                KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const float *wp,
                                KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z,
                                KILN_GLOBAL KILN_STORAGE *y, const int block_panels, KILN_LOCAL float *panel)
{
    const int tile = KILN_GLOBAL_ID(0), block = KILN_GLOBAL_ID(1), g = KILN_GLOBAL_ID(2);
    const int cg = C / groups, kg = K / groups, PQ = P * Q, pixels = N * PQ;
    const int kk_count = cg * R * S;
    const int pix0 = tile * NR;

    /* The tile's pixels as runs within one output row: run i covers panel
       columns seg_j[i] .. seg_j[i + 1], starting at output (img, p, q). Past
       the last pixel, columns repeat it (their results are not stored). A
       flat NCHW convolution (1x1, stride 1, no padding) reads each image
       plane as one row, so its runs end only at image boundaries. */
    const bool flat = R == 1 && S == 1 && stride_h == 1 && stride_w == 1 && P == H && Q == W;
    int seg_j[NR + 1], seg_img[NR], seg_p[NR], seg_q[NR], runs = 0;
    for (int j = 0; j < NR;) {
        const int pix = min(pix0 + j, pixels - 1);
        const int n = pix / PQ, pq = pix - n * PQ, p = pq / Q, q = pq - p * Q;
        const int len = pix0 + j < pixels ? min((flat ? PQ - pq : Q - q), NR - j) : NR - j;
        seg_j[runs] = j, seg_img[runs] = n, seg_p[runs] = p, seg_q[runs] = pix0 + j < pixels ? q : Q;
        runs++;
        j += len;
    }
    seg_j[runs] = NR;

    const int pq0 = pix0 % PQ;
    /* Tiles inside one image store each filter's row as vectors. */
    const bool rows = pix0 + NR <= pixels && pq0 + NR <= PQ;
#if !KILN_F16 && !KILN_BF16
    /* A flat layer's tile inside one image is a block of x itself: row kk
       (channel c of the group) of its panel is NR floats of plane c, PQ
       floats from the next. It reads them in place, ungathered. */
    const bool in_place = flat && rows;
    const KILN_GLOBAL float *b = x + x_at(pix0 / PQ, g * cg, 0, pq0, C, H, W);
#else
    const bool in_place = false;
    const KILN_GLOBAL float *b = 0;
#endif

    /* Gather the implicit im2col panel: row kk holds the NR pixels' inputs,
       kk in the weights' order. A run reads one input row (unit stride at
       stride 1). */
    for (int i = 0; i < (in_place ? 0 : runs); i++) {
        const int j0 = seg_j[i], len = seg_j[i + 1] - j0;
        for (int r = 0; r < R; r++) {
            const int h = seg_p[i] * stride_h - pad_top + r * dil_h;
            const bool row_inside = (uint)h < (uint)H && seg_q[i] < Q;
            for (int s = 0; s < S; s++) {
                const int w0 = seg_q[i] * stride_w - pad_left + s * dil_w;
                const bool interior = row_inside && (flat || (w0 >= 0 && w0 + (len - 1) * stride_w < W));
                for (int c = 0; c < cg; c++) {
                    KILN_LOCAL float *dst = panel + ((size_t)(c * R + r) * S + s) * NR + j0;
                    const KILN_GLOBAL KILN_STORAGE *src =
                        x + x_at(seg_img[i], g * cg + c, row_inside ? h : 0, 0, C, H, W);
                    if (interior)
                        copy_row(dst, src + w0, len, stride_w, (flat ? (H - h) * W : W) - w0);
                    else
                        copy_padded_row(dst, src, len, w0, stride_w, row_inside ? W : 0); /* a row outside: all zeros */
                }
            }
        }
    }

    const int panels = (kg + MR - 1) / MR;
    const int mt_first = block * block_panels, mt_end = min(panels, (block + 1) * block_panels);
    /* A tile read in place fetches the next tile's panel (the NR pixels
       after its own, in the same image) into L2 while it multiplies, a
       share of its rows before each weight panel. Its rows lie PQ floats
       apart (12.5 KiB at 56x56), further than the hardware's prefetchers
       follow, which left them to the next tile's first weight panel. That
       tile's work-group is most often this thread's next: POCL hands out
       consecutive work-groups in chunks. */
    const bool fetch_next = in_place && pq0 + 2 * NR <= PQ;
    const int fetch_share = (kk_count + (mt_end - mt_first) - 1) / max(mt_end - mt_first, 1);
    int fetched = 0;
    for (int mt = mt_first; mt < mt_end; mt++) {
        if (fetch_next)
            fetched = fetch_rows(b + NR, PQ, fetched, min(kk_count, fetched + fetch_share));
        const KILN_GLOBAL float *a = wp + ((size_t)g * panels + mt) * (size_t)kk_count * MR;
#if KILN_HAS_Z
        /* The residual's rows of this panel into L1 before its k loop: PQ
           floats apart, like the tile's pixels, they were each a miss at
           the epilogue (z is often y itself: the lines the stores need).
           On the 2-vCPU Xeon, in place, 1.07-1.09x at 64 -> 256 on 56x56,
           1.03x at 128 -> 512 on 28x28 (docs/convolution.md). */
        if (rows) {
#pragma unroll
            for (int i = 0; i < MR; i++) {
                const size_t at = ((size_t)(pix0 / PQ) * K + min(g * kg + mt * MR + i, K - 1)) * PQ + pq0;
#pragma unroll
                for (int line = 0; line < NR; line += 16) /* a 64-byte line */
                    KILN_PREFETCH_L1(z + at + line);
            }
        }
#endif
        VEC acc[MR][NV];
        if (in_place)
            KILN_TILE_MULTIPLY_LD(acc, a, MR, b, PQ, kk_count);
        else
            KILN_TILE_MULTIPLY(acc, a, panel, kk_count);

        /* Epilogue and the only store, unrolled with the bound inside so
           that acc is indexed by constants and stays in registers. With a
           loop that broke at kg, POCL's code kept the tile on the stack,
           zeroed it there before every panel's k loop and read it back here
           (on the 2-vCPU Zen 4, alternating: 64 -> 128 channels at 56x56
           0.283-0.285 -> 0.261-0.264 ms, 128 -> 128 0.508-0.509 ->
           0.489-0.490). */
#pragma unroll
        for (int i = 0; i < MR; i++) {
            const int kl = mt * MR + i;
            if (kl >= kg)
                continue;
            const int k = g * kg + kl;
#if KILN_HAS_BIAS
            const float b = bias[k];
#else
            const float b = 0.0f;
#endif
            if (rows) {
                const size_t at = ((size_t)(pix0 / PQ) * K + k) * PQ + pq0;
#pragma unroll
                for (int v = 0; v < NV; v++) {
                    VEC r = alpha * acc[i][v];
#if KILN_HAS_Z
                    r = fma((VEC)beta, VLOAD_S(v, z + at), r);
#endif
                    VSTORE_S(activate_vec(r + b, slope), v, y + at);
                }
                continue;
            }
            float lane[NR];
#pragma unroll
            for (int v = 0; v < NV; v++)
                VSTORE(acc[i][v], v, lane);
            for (int j = 0; j < NR && pix0 + j < pixels; j++) {
                const size_t at = y_at(pix0 + j, k, K, PQ);
                float r = alpha * lane[j];
#if KILN_HAS_Z
                r = fma(beta, KILN_LOAD(z, at), r);
#endif
                KILN_STORE(kiln_activate(r + b, slope), y, at);
            }
        }
    }
}
#endif

