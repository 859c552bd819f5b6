/*
 * Convolutions that lower onto kiln's GEMM with the epilogue fused into its
 * store (src/ops/gemm.h, the CPU family):
 *   gemm-1x1  a 1x1, stride-1, unpadded convolution is a GEMM on the input;
 *   im2col    the im2col matrix is built in the workspace, then multiplied.
 * Per group g, with D the data matrix (the input or the im2col matrix):
 *   NCHW: y[n][g] (kg x PQ)  = W_g (kg x cgRS) . D[n][g] (cgRS x PQ), batched over n,
 *         bias per row;
 *   NHWC: y[:, g] (NPQ x kg) = D[:, g] (NPQ x cgRS) . W_g^T (cgRS x kg), bias per column.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"

/* The GEMM and the per-group offsets of each operand. */
struct lowering {
    kiln_gemm_plan *gemm;
    size_t group_a, group_b, group_c; /* element offsets between groups */
    int data_is_a;                    /* NHWC: the data matrix is A; NCHW: B */
};

static const char *gemm1x1_unsupported(const struct kiln_conv_shape *s)
{
    const kiln_conv2d_desc *d = &s->d;
    if (!kiln_conv_pointwise(d) || d->stride_h != 1 || d->stride_w != 1)
        return "needs a 1x1 filter, stride 1 and no padding";
    if (d->fused_maxpool)
        return "the fused max pool needs the direct or a Winograd algorithm";
    return NULL;
}

static const char *im2col_unsupported(const struct kiln_conv_shape *s)
{
    if (s->d.fused_maxpool)
        return "the fused max pool needs the direct or a Winograd algorithm";
    return NULL;
}

/* Plan the GEMM over a data matrix whose rows (NCHW) or row length (NHWC)
   cover all channels: `volume` = C * R * S elements per pixel. */
static kiln_status lower(struct kiln_conv2d_plan *plan, size_t volume)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    size_t pq = s->p * s->q, per_group = volume / d->groups;
    struct lowering *l = calloc(1, sizeof *l);
    if (!l)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a convolution lowering");
    plan->base.impl = l;
    kiln_gemm_desc g;
    struct kiln_gemm_epilogue epi = {d->has_bias ? 1 : 0, d->beta != 0.0f, d->activation};
    if (d->layout == KILN_NCHW) {
        kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, s->kg, pq, per_group);
        g.batch = d->n;
        g.stride_a = 0, g.stride_b = volume * pq, g.stride_c = d->k * pq;
        g.ldb = pq;
        l->group_a = s->kg * per_group, l->group_b = per_group * pq, l->group_c = s->kg * pq;
    } else {
        kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, d->n * pq, s->kg, per_group);
        g.lda = volume, g.ldc = d->k;
        l->group_a = per_group, l->group_b = s->kg * per_group, l->group_c = s->kg;
        l->data_is_a = 1;
        epi.bias = d->has_bias ? 2 : 0;
    }
    g.dtype = d->dtype;
    g.algo = KILN_GEMM_CPU;
    /* Constant weights are packed once (run's reuse); one group's only. */
    const unsigned keep =
        d->constant_weights && d->groups == 1 ? (l->data_is_a ? KILN_GEMM_KEEP_B : KILN_GEMM_KEEP_A) : 0;
    kiln_status st = kiln_gemm_plan_create_fused(plan->base.ctx, &g, &epi, keep, &l->gemm);
    if (st != KILN_SUCCESS)
        return st;
    kiln_gemm_plan_info info;
    kiln_gemm_plan_describe(l->gemm, &info);
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "%s", info.kernel);
    snprintf(plan->base.param_set, sizeof plan->base.param_set, "%s", info.param_set);
    snprintf(plan->base.params, sizeof plan->base.params, "%.200s, per group %zux%zux%zu", info.params, g.m, g.n, g.k);
    plan->base.workspace_bytes += info.workspace_bytes;
    return KILN_SUCCESS;
}

static kiln_status run(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void *data, void **event)
{
    const struct lowering *l = plan->base.impl;
    const kiln_conv2d_desc *d = &plan->s.d;
    /* The GEMM workspace holds one group's packed weights: reusable only
       with a single group. */
    int reuse = !kiln_conv_weights_stale(plan, x->w) && d->groups == 1;
    kiln_status st = KILN_SUCCESS;
    for (size_t g = 0; g < d->groups && st == KILN_SUCCESS; g++) {
        struct kiln_gemm_args a = {d->alpha,
                                   d->beta,
                                   l->data_is_a ? data : x->w,
                                   l->data_is_a ? x->w : data,
                                   x->y,
                                   g * l->group_a,
                                   g * l->group_b,
                                   g * l->group_c,
                                   x->bias,
                                   x->z,
                                   g * plan->s.kg,
                                   d->leaky_slope,
                                   reuse && !l->data_is_a,
                                   reuse && l->data_is_a};
        st = kiln_gemm_run(l->gemm, &a, g + 1 == d->groups ? event : NULL);
    }
    if (st != KILN_SUCCESS || d->groups > 1)
        plan->packed_from = NULL;
    return st;
}

static void release(struct kiln_conv2d_plan *plan)
{
    struct lowering *l = plan->base.impl;
    if (l)
        kiln_gemm_plan_destroy(l->gemm);
    free(l);
    plan->base.impl = NULL;
}

static kiln_status gemm1x1_prepare(struct kiln_conv2d_plan *plan) { return lower(plan, plan->s.d.c); }

static kiln_status gemm1x1_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void **event)
{
    return run(plan, x, x->x, event);
}

static kiln_status im2col_prepare(struct kiln_conv2d_plan *plan)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    size_t volume = d->c * d->r * d->s, pixels = d->n * s->p * s->q;
    /* The unfolding has no epilogue: only layout and storage select its
       program, so every epilogue shares one build. */
    struct kiln_options options = {0};
    kiln_options_storage(&options, d->dtype);
    kiln_options_add(&options, "-DKILN_NHWC=%d", d->layout == KILN_NHWC);
    kiln_status st = kiln_plan_kernel(&plan->base, 0, "conv/conv_f32_im2col", &options, "conv_f32_im2col");
    kiln_options_free(&options);
    if (st == KILN_SUCCESS)
        st = kiln_plan_workspace(&plan->base, 0, volume * pixels * kiln_dtype_size(d->dtype));
    if (st != KILN_SUCCESS)
        return st;
    /* A work-item per output row (NCHW) or per pixel's filter tap (NHWC):
       conv/conv_f32_im2col.cl. */
    size_t g[3] = {s->p, volume, d->n};
    if (d->layout == KILN_NHWC)
        g[0] = d->groups * d->r * d->s, g[1] = pixels, g[2] = 1;
    memcpy(plan->global[0], g, sizeof g);
    return lower(plan, volume);
}

static kiln_status im2col_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void **event)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    const size_t v[14] = {d->c,        d->h,        d->w,       d->r,        d->s,          s->p,          s->q,
                          d->stride_h, d->stride_w, d->pad_top, d->pad_left, d->dilation_h, d->dilation_w, d->groups};
    struct kiln_args args = {0};
    for (int i = 0; i < 14; i++)
        kiln_args_int(&args, (int32_t)v[i]);
    void *col = plan->base.workspace[0]->handle;
    kiln_args_buffer(&args, x->x);
    kiln_args_buffer(&args, col);
    kiln_status st =
        kiln_kernel_launch(plan->base.ctx, plan->base.kernels[0], &args, 3, plan->global[0], NULL, 0, NULL);
    return st == KILN_SUCCESS ? run(plan, x, col, event) : st;
}

const struct kiln_conv_algorithm kiln_conv_gemm1x1 = {"gemm-1x1",      KILN_CONV_GEMM_1X1, gemm1x1_unsupported,
                                                      gemm1x1_prepare, gemm1x1_execute,    release};
const struct kiln_conv_algorithm kiln_conv_im2col = {"im2col",       KILN_CONV_IM2COL, im2col_unsupported,
                                                     im2col_prepare, im2col_execute,   release};
