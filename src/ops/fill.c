/*
 * Fill: the simplest operator, and the pattern every operator follows: read
 * its parameters from the context's profile, fetch the kernel through the
 * program cache (built once per device and parameters), launch on the queue.
 */
#include <stdint.h>

#include "core/context.h"
#include "core/diag.h"
#include "profiles/profile.h"
#include "util/options.h"

kiln_status kiln_buffer_fill_f32(kiln_buffer *buf, size_t first, size_t count, float value)
{
    kiln_error_clear();
    KILN_CHECK_ARG(buf);
    if (first > SIZE_MAX / sizeof(float) || count > SIZE_MAX / sizeof(float))
        return kiln_error(KILN_ERROR_OUT_OF_BOUNDS, "%s: range [%zu, +%zu) overflows", __func__, first, count);
    kiln_status st = kiln_check_range(__func__, buf->size, first * sizeof(float), count * sizeof(float));
    if (st != KILN_SUCCESS || count == 0)
        return st;

    kiln_context *ctx = buf->ctx;
    const struct kiln_param_util *util = &kiln_profile_params(ctx->profile)->util;
    const long wg = util->wg;
    struct kiln_kernel *kernel = NULL;
    struct kiln_options options = {0};
    kiln_profile_defines(&options, KILN_GROUP_util, util);
    st = kiln_options_status(&options, __func__);
    if (st == KILN_SUCCESS)
        st = kiln_kernel_get(ctx, "util/fill", kiln_options_text(&options), "util_fill_f32", &kernel);
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_args args = {0};
    kiln_args_buffer(&args, buf->handle);
    kiln_args_ulong(&args, first);
    kiln_args_ulong(&args, count);
    kiln_args_float(&args, value);
    size_t local = (size_t)wg;
    size_t global = (count + local - 1) / local * local;
    return kiln_kernel_launch(ctx, kernel, &args, 1, &global, &local, 0, NULL);
}
