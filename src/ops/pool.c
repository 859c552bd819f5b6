/*
 * 2-D pooling (cl/nn/pool.cl): max or average over a window of each channel,
 * in NCHW or NHWC, one work-item per output element.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "core/diag.h"
#include "ops/nn_common.h"

/* One spatial dimension: pads smaller than the window, at least one output. */
static kiln_status pool_dim(const char *axis, size_t in, size_t window, size_t stride, size_t pad0, size_t pad1,
                            size_t *out)
{
    if (pad0 >= window || pad1 >= window)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "pool2d: %s padding %zu/%zu must be smaller than the window %zu",
                          axis, pad0, pad1, window);
    if (in + pad0 + pad1 < window)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "pool2d: the padded %s (%zu) is smaller than the window %zu",
                          axis, in + pad0 + pad1, window);
    *out = (in + pad0 + pad1 - window) / stride + 1;
    return KILN_SUCCESS;
}

static kiln_status pool_validate(const kiln_pool2d_desc *d, size_t *yh, size_t *yw)
{
    if ((unsigned)d->layout > KILN_NHWC || (unsigned)d->mode > KILN_POOL_AVG)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "pool2d: layout or mode is not a valid value");
    const size_t sizes[] = {d->n, d->c, d->h, d->w, d->window_h, d->window_w, d->stride_h, d->stride_w};
    static const char *const names[] = {"n", "c", "h", "w", "window_h", "window_w", "stride_h", "stride_w"};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (sizes[i] == 0)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "pool2d: %s must be at least 1", names[i]);
        if (sizes[i] > INT_MAX / 4)
            return kiln_error(KILN_ERROR_UNSUPPORTED, "pool2d: %s = %zu is too large", names[i], sizes[i]);
    }
    kiln_status st = pool_dim("height", d->h, d->window_h, d->stride_h, d->pad_top, d->pad_bottom, yh);
    if (st == KILN_SUCCESS)
        st = pool_dim("width", d->w, d->window_w, d->stride_w, d->pad_left, d->pad_right, yw);
    return st;
}

kiln_status kiln_pool2d_output_size(const kiln_pool2d_desc *desc, size_t *y_h, size_t *y_w)
{
    kiln_error_clear();
    KILN_CHECK_ARG(desc);
    size_t yh, yw;
    kiln_status st = pool_validate(desc, &yh, &yw);
    if (st != KILN_SUCCESS)
        return st;
    if (y_h)
        *y_h = yh;
    if (y_w)
        *y_w = yw;
    return KILN_SUCCESS;
}

kiln_status kiln_pool2d(kiln_context *ctx, const kiln_pool2d_desc *desc, const kiln_buffer *x, kiln_buffer *y,
                        kiln_event **event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(desc);
    KILN_CHECK_ARG(x);
    KILN_CHECK_ARG(y);
    const kiln_pool2d_desc *d = desc;
    size_t yh, yw, in, out;
    kiln_status st = pool_validate(d, &yh, &yw);
    if (st != KILN_SUCCESS)
        return st;
    kiln_tensor_elements(d->n, d->c, d->h, d->w, &in);
    kiln_tensor_elements(d->n, d->c, yh, yw, &out);
    if ((st = kiln_tensor_check(__func__, "x", ctx, x, in, sizeof(float))) != KILN_SUCCESS ||
        (st = kiln_tensor_check(__func__, "y", ctx, y, out, sizeof(float))) != KILN_SUCCESS)
        return st;
    if (x->handle == y->handle)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: y must not be x's buffer", __func__);

    char defines[128];
    snprintf(defines, sizeof defines, "-DKILN_NHWC=%d -DKILN_POOL_AVG=%d -DKILN_POOL_COUNT_PAD=%d",
             d->layout == KILN_NHWC, d->mode == KILN_POOL_AVG, d->count_include_pad != 0);
    const uint64_t total = out;
    const int32_t ints[] = {(int32_t)d->c,        (int32_t)d->h,        (int32_t)d->w,        (int32_t)yh,
                            (int32_t)yw,          (int32_t)d->window_h, (int32_t)d->window_w, (int32_t)d->stride_h,
                            (int32_t)d->stride_w, (int32_t)d->pad_top,  (int32_t)d->pad_left};
    enum { NINTS = sizeof ints / sizeof *ints, NARGS = 3 + NINTS };
    struct kiln_arg args[NARGS] = {
        {KILN_ARG_BUFFER, 0, x->handle},
        {KILN_ARG_BUFFER, 0, y->handle},
        {KILN_ARG_SCALAR, sizeof total, &total},
    };
    for (int i = 0; i < NINTS; i++)
        args[3 + i] = (struct kiln_arg){KILN_ARG_SCALAR, sizeof ints[i], &ints[i]};
    return kiln_nn_launch(ctx, "nn/pool.cl", "nn_pool2d", defines, args, NARGS, out, event);
}
