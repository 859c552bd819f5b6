/*
 * The explicit im2col matrix (the baseline algorithm; implicit GEMM avoids
 * it, and for a strided 1x1 filter it is the subsampled input). One
 * work-item per run of the matrix that one input row or pixel gives:
 *   NCHW: col[n][c][r][s][p*Q + q], work-item (p, c*R*S + r*S + s, n) writes
 *         the Q values of output row p: global (P, C*R*S, N);
 *   NHWC: col[n*P*Q + pq][g][r][s][c], work-item (g*R*S + r*S + s, n*P*Q + pq)
 *         writes the C/groups channels of one filter tap: global
 *         (groups*R*S, N*P*Q, 1);
 * so that per group the GEMM reads it with the weights' own K order (KCRS
 * or KRSC), and the index arithmetic is done once per run, not per value.
 * Padding is stored as zero.
 */
#include "common/portability.h"
#include "common/storage.h"

KILN_KERNEL void conv_f32_im2col(const int C, const int H, const int W, const int R, const int S, const int P,
                                 const int Q, const int stride_h, const int stride_w, const int pad_top,
                                 const int pad_left, const int dil_h, const int dil_w, const int groups,
                                 KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL KILN_STORAGE *col)
{
#if KILN_NHWC
    const int tap = KILN_GLOBAL_ID(0), pix = KILN_GLOBAL_ID(1);
    if (tap >= groups * R * S)
        return;
    const int cg = C / groups, g = tap / (R * S), r = tap / S % R, s = tap % S;
    const int n = pix / (P * Q), pq = pix - n * P * Q, p = pq / Q, q = pq - p * Q;
    const int h = p * stride_h - pad_top + r * dil_h, w = q * stride_w - pad_left + s * dil_w;
    const int inside = (uint)h < (uint)H && (uint)w < (uint)W;
    const size_t src = (((size_t)n * H + h) * W + w) * C + (size_t)g * cg;
    const size_t dst = (size_t)pix * C * R * S + ((size_t)g * R * S + r * S + s) * cg;
    for (int c = 0; c < cg; c++)
        KILN_STORE(inside ? KILN_LOAD(x, src + c) : 0.0f, col, dst + c);
#else
    const int p = KILN_GLOBAL_ID(0), row = KILN_GLOBAL_ID(1), n = KILN_GLOBAL_ID(2);
    if (row >= C * R * S || p >= P)
        return;
    const int c = row / (R * S), r = row / S % R, s = row % S;
    const int h = p * stride_h - pad_top + r * dil_h, w0 = -pad_left + s * dil_w;
    const size_t src = (((size_t)n * C + c) * H + h) * W;
    const size_t dst = ((size_t)n * C * R * S + row) * P * Q + (size_t)p * Q;
    if ((uint)h >= (uint)H) {
        for (int q = 0; q < Q; q++)
            KILN_STORE(0.0f, col, dst + q);
        return;
    }
    for (int q = 0; q < Q; q++) {
        const int w = w0 + q * stride_w;
        KILN_STORE((uint)w < (uint)W ? KILN_LOAD(x, src + w) : 0.0f, col, dst + q);
    }
#endif
}
