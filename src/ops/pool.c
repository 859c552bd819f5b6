/*
 * 2-D pooling (cl/nn/pool.cl): max or average over a window of each channel.
 * The window and the sizes are compiled into the kernel, which is one of
 * three: NCHW row tiles (row_tiling.c), NCHW global pooling (a window that
 * is the whole unpadded plane) a plane per work-item, or NHWC a vector of
 * channels per work-item; vector widths and work-groups from the profile's
 * `util` family, the work-groups smaller where they would not reach every
 * compute unit.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/gemm.h"
#include "ops/nn_common.h"
#include "ops/row_tiling.h"
#include "profiles/profile.h"
#include "util/options.h"

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

    if (d->layout == KILN_NCHW && d->h * d->w > INT_MAX)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "%s: planes of %zu x %zu values (2^31 or more)", __func__, d->h,
                          d->w);

    const struct kiln_param_util *util = &kiln_profile_params(ctx->profile)->util;
    /* One lane where the backend takes no vector syntax (CUDA): the kernel
       is then scalar C that portability.h maps. */
    const long wg = util->wg, vw = ctx->vector_kernels ? util->vw : 1;
    /* The kernel, its vector width, rows and row tiles, and work-items. */
    const char *kernel;
    struct kiln_row_tiling rows = {.vw = 1, .th = 1, .tiles_p = 1};
    uint64_t items;
    if (d->layout == KILN_NHWC) {
        kernel = "nn_pool2d_nhwc";
        rows.vw = kiln_pow2_divisor(d->c, (size_t)vw);
        items = out / rows.vw;
    } else if (d->window_h == d->h && d->window_w == d->w && !d->pad_top && !d->pad_bottom && !d->pad_left &&
               !d->pad_right) {
        kernel = "nn_pool2d_nchw_plane";
        rows.vw = (size_t)vw;
        items = d->n * d->c;
    } else {
        kernel = "nn_pool2d_nchw";
        const struct kiln_row_window win = {d->h, d->w, yh, yw, d->stride_w, d->window_w, 1, d->pad_left, 0};
        kiln_row_tiling(&win, d->n * d->c, (size_t)vw, 16, (size_t)wg, &rows);
        items = d->n * d->c * rows.tiles_p * rows.tiles_q;
    }
    /* Work-groups of util.wg, halved while there would be fewer than 4 per
       compute unit, so that a compute unit that starts late does not hold
       back the whole: a global pool at batch 1 in NHWC has C / VW
       work-items, 128 for 1024 channels in the CPU profiles' vectors of 8,
       two of their work-groups of 64 (POCL's second worker often starts
       late). That pool, 7x7, took 28 us a call with its wait, and 21 in
       work-groups of 16 (2-vCPU Zen 4). On a GPU not below 32 work-items,
       a warp, whose lanes a smaller group would leave idle. */
    const size_t cus = ctx->desc.compute_units ? ctx->desc.compute_units : 1;
    const size_t least = ctx->desc.type == KILN_DEVICE_CPU ? 1 : 32;
    size_t local = (size_t)wg;
    while (local > least && items < 4 * cus * local)
        local /= 2;
    struct kiln_options defines = {0};
    kiln_options_add(&defines,
                     "-DKILN_POOL_WG=%zu -DKILN_NHWC=%d -DKILN_POOL_AVG=%d -DKILN_POOL_COUNT_PAD=%d -DKILN_POOL_R=%zu"
                     " -DKILN_POOL_S=%zu"
                     " -DKILN_POOL_SH=%zu -DKILN_POOL_SW=%zu -DKILN_POOL_PT=%zu -DKILN_POOL_PL=%zu -DKILN_POOL_C=%zu"
                     " -DKILN_POOL_H=%zu -DKILN_POOL_W=%zu -DKILN_POOL_P=%zu -DKILN_POOL_Q=%zu -DKILN_POOL_VW=%zu"
                     " -DKILN_POOL_TH=%zu -DKILN_POOL_TILES_P=%zu",
                     local, d->layout == KILN_NHWC, d->mode == KILN_POOL_AVG, d->count_include_pad != 0, d->window_h,
                     d->window_w, d->stride_h, d->stride_w, d->pad_top, d->pad_left, d->c, d->h, d->w, yh, yw, rows.vw,
                     rows.th, rows.tiles_p);
    if (strcmp(kernel, "nn_pool2d_nchw") == 0)
        kiln_row_tiling_options(&rows, &defines);
    struct kiln_args args = {0};
    kiln_args_buffer(&args, x->handle);
    kiln_args_buffer(&args, y->handle);
    kiln_args_ulong(&args, items);
    st = kiln_options_status(&defines, __func__);
    if (st == KILN_SUCCESS)
        st = kiln_nn_launch(ctx, "nn/pool", kernel, kiln_options_text(&defines), &args, items, local, event);
    kiln_options_free(&defines);
    return st;
}
