/* Softmax over the middle axis of [outer][dim][inner] (cl/nn/softmax.cl). */
#include <stdint.h>
#include <stdio.h>

#include "core/diag.h"
#include "ops/nn_common.h"
#include "profiles/profile.h"

kiln_status kiln_softmax(kiln_context *ctx, size_t outer, size_t dim, size_t inner, const kiln_buffer *x,
                         kiln_buffer *y, kiln_event **event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(x);
    KILN_CHECK_ARG(y);
    if (outer == 0 || dim == 0 || inner == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "%s: outer, dim and inner must be at least 1 (outer=%zu dim=%zu inner=%zu)", __func__, outer,
                          dim, inner);
    size_t count, columns;
    kiln_tensor_elements(outer, dim, inner, 1, &count);
    kiln_tensor_elements(outer, inner, 1, 1, &columns);
    kiln_status st = kiln_tensor_check(__func__, "x", ctx, x, count, sizeof(float));
    if (st == KILN_SUCCESS)
        st = kiln_tensor_check(__func__, "y", ctx, y, count, sizeof(float));
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_args args = {0};
    kiln_args_buffer(&args, x->handle);
    kiln_args_buffer(&args, y->handle);
    kiln_args_ulong(&args, columns);
    kiln_args_ulong(&args, dim);
    kiln_args_ulong(&args, inner);
    /* A work-item per column, which takes a column of contiguous values in
       vectors of the profile's util.vw; but a work-group per column where
       the columns are fewer than one work-group holds and a work-item would
       walk its column value by value: strided columns, or a profile without
       vectors (the GPUs'). On the CPU profiles a work-group per contiguous
       column was slower (docs/pocl.md, softmax). */
    const struct kiln_param_util *util = &kiln_profile_params(ctx->profile)->util;
    char defines[48];
    snprintf(defines, sizeof defines, "-DKILN_SOFTMAX_VW=%d", (int)util->vw);
    if (columns < (size_t)util->wg && (inner > 1 || util->vw <= 1))
        return kiln_nn_launch(ctx, "nn/softmax", "nn_softmax_group", defines, &args, columns * (size_t)util->wg, 0,
                              event);
    return kiln_nn_launch(ctx, "nn/softmax", "nn_softmax", defines, &args, columns, 0, event);
}
