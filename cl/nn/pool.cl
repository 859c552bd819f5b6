/*
 * 2-D max and average pooling, one output element per work-item, in the
 * output's memory order (KILN_NHWC: channels innermost, so neighbouring
 * work-items read neighbouring channels). The window is clipped to the
 * input: max ignores padding; average divides by the clipped window, or by
 * the whole window with KILN_POOL_COUNT_PAD. KILN_POOL_AVG selects average.
 * KILN_UTIL_WG is the work-group size from the profile.
 */

__kernel __attribute__((reqd_work_group_size(KILN_UTIL_WG, 1, 1)))
void nn_pool2d(__global const float *x, __global float *y, const ulong total, const int C, const int H, const int W,
               const int YH, const int YW, const int window_h, const int window_w, const int stride_h,
               const int stride_w, const int pad_top, const int pad_left)
{
    const size_t i = get_global_id(0);
    if (i >= total)
        return;
#if KILN_NHWC
    const int c = i % C;
    size_t rest = i / C;
    const int ox = rest % YW;
    rest /= YW;
    const int oy = rest % YH;
    /* Element strides of a row and a column. */
    const size_t step_h = (size_t)W * C, step_w = C;
    __global const float *xp = x + rest / YH * H * step_h + c;
#else
    const int ox = i % YW;
    size_t rest = i / YW;
    const int oy = rest % YH;
    const size_t step_h = W, step_w = 1;
    __global const float *xp = x + rest / YH * H * step_h; /* rest / YH = n * C + c */
#endif
    const int h0 = oy * stride_h - pad_top, w0 = ox * stride_w - pad_left;
    const int h_lo = max(h0, 0), h_hi = min(h0 + window_h, H);
    const int w_lo = max(w0, 0), w_hi = min(w0 + window_w, W);
#if KILN_POOL_AVG
    float acc = 0.0f;
#else
    float acc = -INFINITY;
#endif
    for (int h = h_lo; h < h_hi; h++) {
        __global const float *row = xp + h * step_h;
        for (int w = w_lo; w < w_hi; w++) {
#if KILN_POOL_AVG
            acc += row[w * step_w];
#else
            acc = fmax(acc, row[w * step_w]);
#endif
        }
    }
#if KILN_POOL_AVG
#if KILN_POOL_COUNT_PAD
    acc /= (float)(window_h * window_w);
#else
    acc /= (float)((h_hi - h_lo) * (w_hi - w_lo));
#endif
#endif
    y[i] = acc;
}
