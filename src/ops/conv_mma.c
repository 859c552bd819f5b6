/*
 * Implicit-GEMM convolution on tensor cores (cu/conv/conv_f16_igemm_mma.cu):
 * fp16 or bf16 storage, NHWC input and output with KRSC weights, one
 * group, channels a multiple of 8, on backends with native CUDA sources
 * (the CUDA backend) at compute capability 8.0 and newer. The products of
 * fp16 (bf16) values are exact in fp32, where the kernel sums them, so it
 * computes as precisely as the fp32-arithmetic implicit GEMM on the same
 * data, up to the order of the additions.
 *
 * The kernel takes the tiled implicit GEMM's arguments (kiln_conv_igemm_args)
 * and reads every tensor in place: no workspace, and constant_weights
 * changes nothing. Its blocks, warps and pipeline depth are the profile's
 * conv.mma group. AUTO takes it wherever it runs and applies
 * (docs/convolution.md#tensor-cores).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"
#include "profiles/profile.h"

#define SOURCE "conv/conv_f16_igemm_mma.cu"

int kiln_conv_mma_runs_on(const kiln_context *ctx, char *why, size_t size)
{
    return kiln_plan_cuda_runs(ctx, kiln_plan_cc(ctx) >= 80, "the tensor-core convolution", "8.0 or newer", why, size);
}

static const char *mma_unsupported(const struct kiln_conv_shape *s)
{
    const kiln_conv2d_desc *d = &s->d;
    if (d->layout != KILN_NHWC)
        return "the tensor-core kernel takes NHWC (KRSC weights)";
    if (d->dtype != KILN_F16 && d->dtype != KILN_BF16)
        return "the tensor-core kernel takes fp16 or bf16 storage (fp32 storage keeps fp32 arithmetic)";
    if (d->groups != 1)
        return "the tensor-core kernel takes one group";
    if (d->c % 8)
        return "the tensor-core kernel copies 8 channels at a time: c must be a multiple of 8";
    if (d->fused_maxpool)
        return "the fused max pool needs the direct or a Winograd algorithm";
    /* 32-bit offsets (cu/conv/igemm_gather.h): x, the weights and y within
       2^31 - 1 values, the dilated filters' extents below 2^28. Every size
       is at most INT_MAX / 4 (validate), so these products do not wrap. */
    const double limit = INT_MAX;
    if ((double)d->n * d->h * d->w * d->c > limit || (double)d->k * d->r * d->s * d->c > limit ||
        (double)d->n * s->p * s->q * d->k > limit)
        return "the tensor-core kernel's offsets are 32-bit: x, w and y within 2^31 - 1 values";
    if ((d->r - 1) * d->dilation_h >= (size_t)1 << 28 || (d->s - 1) * d->dilation_w >= (size_t)1 << 28)
        return "the tensor-core kernel takes dilated filters below 2^28 pixels";
    /* Blocks of filters along the grid's second dimension, 65535 at most,
       whatever the profile's bn (16 or more). */
    if (d->k > 65535 * 16)
        return "the tensor-core kernel takes at most 1048560 filters";
    return NULL;
}

static kiln_status mma_prepare(struct kiln_conv2d_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    const struct kiln_param_conv_mma *t;
    /* The schema's check (run by kiln_conv_params) has fitted the shared
       memory and the block to the device. */
    kiln_status st = kiln_conv_params(plan, KILN_GROUP_conv_mma, &t);
    if (st != KILN_SUCCESS)
        return st;
    const size_t threads = (size_t)t->warps_m * t->warps_n * 32;
    const long shared = kiln_conv_mma_shared_bytes(t);
    struct kiln_options options = {0};
    kiln_conv_options(plan, &options);
    kiln_options_add(&options, "-DKILN_MMA_BF16=%d -DKILN_MIN_ARCH=80",
                     d->dtype == KILN_BF16); /* cp.async, bf16: sm_80 on */
    kiln_profile_defines(&options, KILN_GROUP_conv_mma, t);
    st = kiln_plan_kernel(&plan->base, 0, SOURCE, &options, "conv_f16_igemm_mma");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f16_igemm_mma_%dx%d", t->bm, t->bn);
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %d pixels x %d filters x %d, %dx%d warps, %d stages, %ld bytes of shared memory", t->bm, t->bn,
             t->bk, t->warps_m, t->warps_n, t->stages, shared);
    const size_t pixels = d->n * s->p * s->q;
    plan->global[0][0] = kiln_div_up(pixels, (size_t)t->bm) * threads;
    plan->global[0][1] = kiln_div_up(d->k, (size_t)t->bn);
    plan->global[0][2] = 1;
    plan->local[0][0] = threads, plan->local[0][1] = plan->local[0][2] = 1;
    plan->local_bytes = (size_t)shared;
    const size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len, " (%s storage, %s)",
             d->dtype == KILN_BF16 ? "bf16" : "fp16", ctx->desc.arch);
    return KILN_SUCCESS;
}

static kiln_status mma_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void **event)
{
    struct kiln_args a = {0};
    kiln_conv_igemm_args(&a, &plan->s, x, x->w);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[0], &a, 3, plan->global[0], plan->local[0],
                              plan->local_bytes, event);
}

const struct kiln_conv_algorithm kiln_conv_igemm_mma = {"implicit-gemm-mma", KILN_CONV_IGEMM_MMA, mma_unsupported,
                                                        mma_prepare,         mma_execute,         NULL};
