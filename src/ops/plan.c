#include "ops/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"

int kiln_plan_cuda_runs(const kiln_context *ctx, int cc_fits, const char *what, const char *need, char *why,
                        size_t size)
{
    const int runs = ctx->backend->native_sources && cc_fits;
    if (!runs && why)
        snprintf(why, size, "%s needs the CUDA backend%s%s (%s backend, %s)", what,
                 need ? " on compute capability " : "", need ? need : "", ctx->backend->name,
                 ctx->desc.arch[0] ? ctx->desc.arch : "no compute capability");
    return runs;
}

void *kiln_plan_new(kiln_context *ctx, size_t size, const char *algorithm, int algo, const char *reason)
{
    struct kiln_plan *base = calloc(1, size);
    if (!base) {
        kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a %s plan", algorithm);
        return NULL;
    }
    base->ctx = ctx;
    base->algorithm = algorithm;
    base->algo = algo;
    snprintf(base->profile, sizeof base->profile, "%s", kiln_profile_name(ctx->profile));
    snprintf(base->reason, sizeof base->reason, "%s", reason);
    return base;
}

void kiln_plan_free(struct kiln_plan *base)
{
    if (!base)
        return;
    for (int i = 0; i < KILN_PLAN_WORKSPACE; i++)
        kiln_buffer_destroy(base->workspace[i]);
    free(base);
}

kiln_status kiln_plan_kernel(struct kiln_plan *base, int slot, const char *source, const struct kiln_options *options,
                             const char *name)
{
    kiln_status st = kiln_options_status(options, name);
    if (st == KILN_SUCCESS && !kiln_options_holds(kiln_options_text(options), name))
        st = kiln_error(KILN_ERROR_INTERNAL, "%s: kernel %s is not among those its program's options name (KILN_ONLY)",
                        source, name);
    if (st == KILN_SUCCESS)
        st = kiln_kernel_get(base->ctx, source, kiln_options_text(options), name, &base->kernels[slot]);
    return st;
}

kiln_status kiln_plan_workspace(struct kiln_plan *base, int slot, size_t bytes)
{
    kiln_status st = kiln_buffer_create(base->ctx, bytes ? bytes : 1, &base->workspace[slot]);
    if (st == KILN_SUCCESS)
        base->workspace_bytes += bytes;
    return st;
}

kiln_status kiln_plan_params(struct kiln_plan *base, enum kiln_group_id group, const struct kiln_dims *dims,
                             void *values)
{
    return kiln_profile_plan_set(base->ctx->profile, group, dims, &base->ctx->desc, (const void **)values,
                                 base->param_set);
}

kiln_status kiln_plan_event(const struct kiln_plan *base, kiln_status st, void *handle, kiln_event **event)
{
    if (st == KILN_SUCCESS && event)
        st = kiln_event_new(base->ctx->backend, handle, event);
    return st;
}

void kiln_text_copy(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}
