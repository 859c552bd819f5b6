/* Element-wise activations (cl/nn/activation.cl, cl/common/epilogue.h). */
#include <stdint.h>
#include <stdio.h>

#include "core/diag.h"
#include "ops/nn_common.h"

kiln_status kiln_activation_forward(kiln_context *ctx, kiln_activation act, float leaky_slope, size_t count,
                                    const kiln_buffer *x, kiln_buffer *y, kiln_event **event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(x);
    KILN_CHECK_ARG(y);
    if ((unsigned)act > KILN_ACT_GELU)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: activation %d is not a valid value", __func__, (int)act);
    if (count == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: count must be at least 1", __func__);
    kiln_status st = kiln_tensor_check(__func__, "x", ctx, x, count, sizeof(float));
    if (st == KILN_SUCCESS)
        st = kiln_tensor_check(__func__, "y", ctx, y, count, sizeof(float));
    if (st != KILN_SUCCESS)
        return st;
    char defines[32];
    snprintf(defines, sizeof defines, "-DKILN_ACT=%d", (int)act);
    struct kiln_args args = {0};
    kiln_args_buffer(&args, x->handle);
    kiln_args_buffer(&args, y->handle);
    kiln_args_ulong(&args, count);
    kiln_args_float(&args, leaky_slope);
    return kiln_nn_launch(ctx, "nn/activation", "nn_activation", defines, &args, count, 0, event);
}
