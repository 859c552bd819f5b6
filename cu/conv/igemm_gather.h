/*
 * The implicit im2col gather of kiln's tensor-core convolution
 * (conv_f16_igemm_mma.cu): where each thread's 16-byte copies of an A tile
 * read the NHWC input. A is M x Kdim, M = n * P * Q output pixels, row
 * m = (image, oh, ow), column k = (r * S + s) * C + c the input value
 *   x[image][oh * stride_h - pad_top + r * dil_h][ow * stride_w - pad_left + s * dil_w][c],
 * zero outside the image. With C % 8 == 0 every 8 consecutive columns from
 * a multiple of 8 are 8 channels of one tap: one 16-byte copy, read in full
 * or zero-filled.
 *
 * A block's THREADS threads copy a BM x BK tile as BM * BK / 8 such pieces;
 * thread t takes column kiln_igemm_piece_col(t) of rows
 * kiln_igemm_piece_row(t, i) (THREADS a multiple of BK / 8), so all its
 * pieces of a step read the same tap: it decodes its pixels once per block
 * (kiln_igemm_pixel_of) and its tap once, then advances the tap by BK
 * columns a step (kiln_igemm_tap_next), without a division. The host model
 * in tests/test_cuda.c runs these functions against a direct convolution.
 *
 * Plain C and CUDA C alike. Offsets are unsigned, exact modulo 2^32, so
 * exact wherever a value is read (the host keeps x within 2^31 - 1
 * values); the host bounds the shapes so that the int arithmetic cannot
 * overflow (src/ops/conv_mma.c): heights, widths and pads below 2^29 (as
 * every descriptor's), the dilated filter's extents below 2^28, so a row
 * past M stays outside.
 */
#ifndef KILN_CU_IGEMM_GATHER_H
#define KILN_CU_IGEMM_GATHER_H

#include "gemm/mma_layout.h"

/* Thread t's pieces: column (in values) and row i of the tile. */
KILN_MMA_FN int kiln_igemm_piece_col(int t, int bk) { return t % (bk / 8) * 8; }
KILN_MMA_FN int kiln_igemm_piece_row(int t, int i, int bk, int threads)
{
    return t / (bk / 8) + i * (threads / (bk / 8));
}

/* A row of A: the input row and column of its window's first tap (before
   dilation), and the offset in x of that position's channel 0, modulo
   2^32 (the position may lie in the padding, before x's start). A row past
   M gets a position that no tap of the filter brings inside the image. */
struct kiln_igemm_pixel {
    unsigned at;
    int h, w;
};

KILN_MMA_FN struct kiln_igemm_pixel kiln_igemm_pixel_of(int m, int M, int P, int Q, int H, int W, int C, int stride_h,
                                                        int stride_w, int pad_top, int pad_left)
{
    struct kiln_igemm_pixel px;
    if (m >= M) {
        px.at = 0, px.h = px.w = -(1 << 30);
        return px;
    }
    const int image = m / (P * Q), pq = m - image * (P * Q), oh = pq / Q, ow = pq - oh * Q;
    px.h = oh * stride_h - pad_top, px.w = ow * stride_w - pad_left;
    px.at = (((unsigned)image * H + (unsigned)px.h) * W + (unsigned)px.w) * C;
    return px;
}

/* A column of A: its tap (r, s) and channel c. */
struct kiln_igemm_tap {
    int r, s, c;
};

KILN_MMA_FN struct kiln_igemm_tap kiln_igemm_tap_of(int k, int C, int S)
{
    struct kiln_igemm_tap t;
    const int rs = k / C;
    t.r = rs / S, t.s = rs - t.r * S, t.c = k - rs * C;
    return t;
}

/* The column `by` further on. */
KILN_MMA_FN void kiln_igemm_tap_next(struct kiln_igemm_tap *t, int by, int C, int S)
{
    t->c += by;
    while (t->c >= C) {
        t->c -= C;
        if (++t->s == S)
            t->s = 0, t->r++;
    }
}

/* Whether pixel px reads inside the image at tap t (and t is a tap of the
   filter: columns past Kdim read as zero), and then the offset of its
   value (exact where it is inside; any value elsewhere, without
   overflow). */
KILN_MMA_FN int kiln_igemm_inside(struct kiln_igemm_pixel px, struct kiln_igemm_tap t, int R, int H, int W, int dil_h,
                                  int dil_w)
{
    return t.r < R && (unsigned)(px.h + t.r * dil_h) < (unsigned)H && (unsigned)(px.w + t.s * dil_w) < (unsigned)W;
}
KILN_MMA_FN unsigned kiln_igemm_at(struct kiln_igemm_pixel px, struct kiln_igemm_tap t, int W, int C, int dil_h,
                                   int dil_w)
{
    return px.at + ((unsigned)t.r * dil_h * W + (unsigned)t.s * dil_w) * C + t.c;
}

#endif /* KILN_CU_IGEMM_GATHER_H */
