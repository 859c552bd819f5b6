/* Helpers of the neural-network operators (see nn_common.h). */
#include "ops/nn_common.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "profiles/profile.h"
#include "util/options.h"

int kiln_tensor_elements(size_t a, size_t b, size_t c, size_t d, size_t *out)
{
    if (__builtin_mul_overflow(a, b, out) || __builtin_mul_overflow(*out, c, out) ||
        __builtin_mul_overflow(*out, d, out)) {
        *out = SIZE_MAX;
        return 0;
    }
    return 1;
}

kiln_status kiln_tensor_check(const char *func, const char *name, const kiln_context *ctx, const kiln_buffer *buf,
                              size_t elements, size_t elem_size)
{
    if (buf->ctx != ctx)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s belongs to another context", func, name);
    size_t bytes;
    if (__builtin_mul_overflow(elements, elem_size, &bytes) || bytes > buf->size)
        return kiln_error(KILN_ERROR_OUT_OF_BOUNDS,
                          "%s: %s needs %zu elements of %zu bytes but its buffer has %zu bytes", func, name, elements,
                          elem_size, buf->size);
    return KILN_SUCCESS;
}

kiln_status kiln_nn_launch(kiln_context *ctx, const char *source, const char *name, const char *defines,
                           const struct kiln_args *args, size_t items, size_t wg, kiln_event **event)
{
    const struct kiln_param_util *util = &kiln_profile_params(ctx->profile)->util;
    struct kiln_kernel *kernel = NULL;
    struct kiln_options options = {0};
    kiln_profile_defines(&options, KILN_GROUP_util, util);
    kiln_options_add(&options, "%s", defines);
    kiln_options_only(&options, &name, 1);
    kiln_status st = kiln_options_status(&options, name);
    if (st == KILN_SUCCESS)
        st = kiln_kernel_get(ctx, source, kiln_options_text(&options), name, &kernel);
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    size_t local = wg ? wg : (size_t)util->wg, global = (items + local - 1) / local * local;
    void *handle = NULL;
    st = kiln_kernel_launch(ctx, kernel, args, 1, &global, &local, 0, event ? &handle : NULL);
    if (st == KILN_SUCCESS && event)
        st = kiln_event_new(ctx->backend, handle, event);
    return st;
}
