/*
 * The explicit im2col matrix (the baseline algorithm; implicit GEMM avoids
 * it). One work-item per element:
 *   NCHW: col[n][c][r][s][p*Q + q]   global (P*Q, C*R*S, N)
 *   NHWC: col[n*P*Q + pq][g][r][s][c]   global (C*R*S, N*P*Q, 1)
 * so that per group the GEMM reads it with the weights' own K order (KCRS
 * or KRSC). Padding is stored as zero.
 */
#include "common/portability.h"
#include "common/storage.h"

KILN_KERNEL void conv_f32_im2col(const int C, const int H, const int W, const int R, const int S, const int P,
                                 const int Q, const int stride_h, const int stride_w, const int pad_top,
                                 const int pad_left, const int dil_h, const int dil_w, const int groups,
                                 KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL KILN_STORAGE *col)
{
#if KILN_NHWC
    const int row = KILN_GLOBAL_ID(0), pix = KILN_GLOBAL_ID(1);
    const int cg = C / groups, per_group = R * S * cg;
    const int g = row / per_group, rsc = row - g * per_group;
    const int r = rsc / (S * cg), s = rsc / cg % S, c = g * cg + rsc % cg;
    const int n = pix / (P * Q), pq = pix - n * P * Q;
#else
    const int pq = KILN_GLOBAL_ID(0), row = KILN_GLOBAL_ID(1), n = KILN_GLOBAL_ID(2);
    const int c = row / (R * S), r = row / S % R, s = row % S;
#endif
    if (row >= C * R * S || pq >= P * Q)
        return;
    const int p = pq / Q, q = pq - p * Q;
    const int h = p * stride_h - pad_top + r * dil_h, w = q * stride_w - pad_left + s * dil_w;
    float v = 0.0f;
    if ((uint)h < (uint)H && (uint)w < (uint)W) {
#if KILN_NHWC
        v = KILN_LOAD(x, (((size_t)n * H + h) * W + w) * C + c);
#else
        v = KILN_LOAD(x, (((size_t)n * C + c) * H + h) * W + w);
#endif
    }
#if KILN_NHWC
    KILN_STORE(v, col, (size_t)pix * C * R * S + row);
#else
    KILN_STORE(v, col, ((size_t)n * C * R * S + row) * P * Q + pq);
#endif
}
