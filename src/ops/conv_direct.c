/*
 * Direct convolution (cl/conv/conv_f32_direct.cl): the fallback for every
 * valid shape and the fast path for depthwise and few-channel layers. The
 * filter geometry is compiled into the kernel; the tile each work-item
 * computes is chosen here from the shape and the profile's direct_vw and
 * direct_wg. No workspace.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"
#include "ops/nn_common.h"
#include "ops/row_tiling.h"

#define SOURCE "conv/conv_f32_direct"

/* What a work-item computes and how many of them there are. */
struct tiling {
    int nhwc, depthwise; /* depthwise: the NHWC kernel's one-channel-per-group path */
    size_t vw;           /* vector lanes: output columns (NCHW) or filters (NHWC) */
    size_t th;           /* output rows */
    size_t kt;           /* NCHW: filters */
    size_t tq;           /* NHWC: output columns */
    size_t cc;           /* NHWC, not depthwise: input channels per local-memory chunk */
    size_t tiles_q, tiles_p, kblocks, tiles;
    struct kiln_row_tiling rows; /* NCHW: the row tiles */
    size_t wg;                   /* work-group size */
};

/* NCHW: row tiles (row_tiling.c) of KT filters of a group (at most
   conv.direct.kt and the accumulators) and up to acc / KT rows, or, for
   one filter of one input channel (depthwise), up to conv.direct.rows. */
static void nchw_tiling(const struct kiln_conv_shape *s, const struct kiln_param_conv_direct *params, size_t vw,
                        size_t p_ext, size_t q_ext, struct tiling *t)
{
    const kiln_conv2d_desc *d = &s->d;
    const size_t acc = (size_t)params->acc;
    t->kt = kiln_pow2_divisor(s->kg, kiln_min_size((size_t)params->kt, acc));
    t->kblocks = d->k / t->kt;
    const struct kiln_row_window win = {
        d->h, d->w, p_ext, q_ext, d->stride_w, d->s, d->dilation_w, d->pad_left, d->fused_maxpool != 0};
    const size_t rows = s->cg == 1 && t->kt == 1 ? (size_t)params->rows : acc / t->kt;
    kiln_row_tiling(&win, d->n * t->kblocks, vw, rows, t->wg, &t->rows);
    t->vw = t->rows.vw;
    t->th = t->rows.th;
    t->tiles_p = t->rows.tiles_p;
    t->tiles_q = t->rows.tiles_q;
}

/* NHWC: VW filters dividing the group's filters (or the channels,
   depthwise), so lanes never leave a group; up to 4 x 4 output pixels,
   about acc of them; filters staged in local memory at most 16 KiB at a
   time. */
static void nhwc_tiling(const struct kiln_conv_shape *s, size_t vw, size_t acc, size_t p_ext, size_t q_ext,
                        struct tiling *t)
{
    t->depthwise = s->cg == 1 && s->kg == 1;
    t->vw = kiln_pow2_divisor(t->depthwise ? s->d.k : s->kg, vw);
    t->tq = kiln_min_size(4, q_ext); /* even for the pool: q_ext is */
    t->tiles_q = kiln_div_up(q_ext, t->tq);
    t->kblocks = s->d.k / t->vw;
    const size_t taps = s->d.r * s->d.s * t->vw;
    t->cc = kiln_min_size(s->cg, taps < 4096 ? 4096 / taps : 1);
    /* Rows shared evenly between tiles of up to 4 rows, at least 2 for the
       pool (which takes them in pairs). */
    const size_t least = s->d.fused_maxpool ? 2 : 1;
    const size_t rows = kiln_min_size(4, acc / t->tq > least ? acc / t->tq : least);
    t->tiles_p = kiln_div_up(p_ext, rows);
    t->th = kiln_div_up(p_ext, t->tiles_p);
    if (s->d.fused_maxpool)
        t->th += t->th % 2;
}

static kiln_status tiling_of(struct kiln_conv2d_plan *plan, struct tiling *t)
{
    const struct kiln_conv_shape *s = &plan->s;
    const struct kiln_param_conv_direct *params;
    kiln_status st = kiln_conv_params(plan, KILN_GROUP_conv_direct, &params);
    if (st != KILN_SUCCESS)
        return st;
    /* One lane where the backend takes no vector syntax (CUDA): the kernel is
       then scalar C that portability.h maps. */
    const long vw = plan->base.ctx->vector_kernels ? params->vw : 1, wg = params->wg;
    memset(t, 0, sizeof *t);
    t->nhwc = s->d.layout == KILN_NHWC;
    t->wg = (size_t)wg;
    t->kt = t->tq = t->cc = 1;
    /* The convolution outputs that are stored, or pooled into what is. */
    const int pool = s->d.fused_maxpool != 0;
    const size_t p_ext = pool ? 2 * s->yh : s->p, q_ext = pool ? 2 * s->yw : s->q;
    if (t->nhwc)
        nhwc_tiling(s, (size_t)vw, (size_t)params->acc, p_ext, q_ext, t);
    else
        nchw_tiling(s, params, (size_t)vw, p_ext, q_ext, t);
    t->tiles = s->d.n * t->kblocks * t->tiles_p * t->tiles_q;
    return KILN_SUCCESS;
}

/* Applies to every valid shape whose tensors fit the kernel's int indices. */
static const char *direct_unsupported(const struct kiln_conv_shape *s)
{
    const kiln_conv2d_desc *d = &s->d;
    size_t in, out;
    if (!kiln_tensor_elements(d->n, d->c, d->h, d->w, &in) || !kiln_tensor_elements(d->n, d->k, s->p, s->q, &out) ||
        in > INT_MAX || out > INT_MAX)
        return "input or output tensor above 2^31 elements";
    return NULL;
}

/* Whether the depthwise NHWC kernel reads its weights from taps packed once
   (kept weights, vectors of more than one lane). A work-item gathered its
   VW filters' R*S weights lane by lane: 144 scalar loads for 3x3 and 16
   lanes, as many as a 4 x 4 tile's multiply-adds. */
static int taps_packed(const struct kiln_conv2d_plan *plan, const struct tiling *t)
{
    return t->nhwc && t->depthwise && t->vw > 1 && plan->s.d.constant_weights;
}

static kiln_status direct_prepare(struct kiln_conv2d_plan *plan)
{
    const kiln_conv2d_desc *d = &plan->s.d;
    struct tiling t;
    kiln_status st = tiling_of(plan, &t);
    if (st != KILN_SUCCESS)
        return st;
    const struct kiln_conv_shape *sh = &plan->s;
    struct kiln_options options = {0};
    kiln_conv_options(plan, &options);
    kiln_options_add(&options,
                     "-DKILN_DIRECT_R=%zu -DKILN_DIRECT_S=%zu -DKILN_DIRECT_SH=%zu -DKILN_DIRECT_SW=%zu"
                     " -DKILN_DIRECT_DH=%zu -DKILN_DIRECT_DW=%zu -DKILN_DIRECT_C=%zu -DKILN_DIRECT_H=%zu"
                     " -DKILN_DIRECT_W=%zu -DKILN_DIRECT_K=%zu -DKILN_DIRECT_KG=%zu -DKILN_DIRECT_CG=%zu"
                     " -DKILN_DIRECT_P=%zu -DKILN_DIRECT_Q=%zu -DKILN_DIRECT_YH=%zu -DKILN_DIRECT_YW=%zu"
                     " -DKILN_DIRECT_PT=%zu -DKILN_DIRECT_PL=%zu -DKILN_DIRECT_VW=%zu -DKILN_DIRECT_TH=%zu"
                     " -DKILN_DIRECT_KT=%zu -DKILN_DIRECT_TQ=%zu -DKILN_DIRECT_TILES_P=%zu -DKILN_DIRECT_TILES_Q=%zu"
                     " -DKILN_DIRECT_KBLOCKS=%zu -DKILN_DIRECT_DEPTHWISE=%d -DKILN_DIRECT_WG=%zu -DKILN_DIRECT_CC=%zu",
                     d->r, d->s, d->stride_h, d->stride_w, d->dilation_h, d->dilation_w, d->c, d->h, d->w, d->k, sh->kg,
                     sh->cg, sh->p, sh->q, sh->yh, sh->yw, d->pad_top, d->pad_left, t.vw, t.th, t.kt, t.tq, t.tiles_p,
                     t.tiles_q, t.kblocks, t.depthwise, t.wg, t.cc);
    if (!t.nhwc)
        kiln_row_tiling_options(&t.rows, &options);
    /* Depthwise NHWC with kept weights: the taps packed once, VW filters
       side by side, so that a work-item loads each tap's weights as one
       vector instead of gathering them lane by lane. */
    const int taps = taps_packed(plan, &t);
    kiln_options_add(&options, " -DKILN_DIRECT_TAPS=%d", taps);
    const char *const names[] = {"conv_f32_direct", taps ? "conv_f32_direct_pack_taps" : NULL};
    kiln_options_only(&options, names, 2);
    st = kiln_plan_kernel(&plan->base, 0, SOURCE, &options, "conv_f32_direct");
    if (st == KILN_SUCCESS && taps)
        st = kiln_plan_kernel(&plan->base, 1, SOURCE, &options, "conv_f32_direct_pack_taps");
    kiln_options_free(&options);
    if (st == KILN_SUCCESS && taps)
        st = kiln_plan_workspace(&plan->base, 0, d->k * d->r * d->s * kiln_dtype_size(d->dtype));
    if (st != KILN_SUCCESS)
        return st;

    if (t.nhwc)
        snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_direct_nhwc%s_%zux%zux%zu",
                 t.depthwise ? "_dw" : "", t.th, t.tq, t.vw);
    else
        snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_direct_nchw_%zux%zux%zu", t.kt, t.th, t.vw);
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %s %zux%zux%zu, VW=%zu WG=%zu, %zux%zu filter, stride %zux%zu, dilation %zux%zu",
             t.nhwc ? "rows x columns x filters" : "filters x rows x columns", t.nhwc ? t.th : t.kt,
             t.nhwc ? t.tq : t.th, t.vw, t.vw, t.wg, d->r, d->s, d->stride_h, d->stride_w, d->dilation_h,
             d->dilation_w);
    if (taps) {
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, ", taps packed once");
    }
    plan->local[0][0] = t.wg;
    if (t.nhwc && !t.depthwise) /* whole work-groups per k-block */
        plan->global[0][0] = t.kblocks * kiln_div_up(t.tiles / t.kblocks, t.wg) * t.wg;
    else
        plan->global[0][0] = kiln_div_up(t.tiles, t.wg) * t.wg;
    return KILN_SUCCESS;
}

static kiln_status direct_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *a, void **event)
{
    const kiln_conv2d_desc *d = &plan->s.d;
    struct tiling t;
    kiln_status st = tiling_of(plan, &t);
    if (st != KILN_SUCCESS)
        return st;
    void *w = a->w;
    if (taps_packed(plan, &t)) {
        w = plan->base.workspace[0]->handle;
        if (kiln_conv_weights_stale(plan, a->w)) {
            struct kiln_args p = {0};
            kiln_args_buffer(&p, a->w);
            kiln_args_buffer(&p, w);
            const size_t global = d->k * d->r * d->s;
            st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[1], &p, 1, &global, NULL, 0, NULL);
            if (st != KILN_SUCCESS) {
                plan->packed_from = NULL;
                return st;
            }
        }
    }
    /* Every size is compiled in; the tile count bounds the work-items. */
    struct kiln_args args = {0};
    kiln_args_buffer(&args, a->x);
    kiln_args_buffer(&args, w);
    kiln_args_buffer(&args, a->bias);
    kiln_args_buffer(&args, a->z);
    kiln_args_buffer(&args, a->y);
    kiln_args_int(&args, (int32_t)t.tiles);
    kiln_args_float(&args, d->alpha);
    kiln_args_float(&args, d->beta);
    kiln_args_float(&args, d->leaky_slope);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[0], &args, 1, plan->global[0], plan->local[0], 0,
                              event);
}

const struct kiln_conv_algorithm kiln_conv_direct = {"direct",       KILN_CONV_DIRECT, direct_unsupported,
                                                     direct_prepare, direct_execute,   NULL};
