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

#define SOURCE "conv/conv_f32_direct.cl"

/* What a work-item computes and how many of them there are. */
struct tiling {
    int nhwc, depthwise; /* depthwise: the NHWC kernel's one-channel-per-group path */
    size_t vw;           /* vector lanes: output columns (NCHW) or filters (NHWC) */
    size_t th;           /* output rows */
    size_t kt;           /* NCHW: filters */
    size_t tq;           /* NHWC: output columns */
    size_t cc;           /* NHWC, not depthwise: input channels per local-memory chunk */
    size_t tiles_q, tiles_p, kblocks, tiles;
    size_t inner_first, inner_end; /* NCHW: tiles in a row that read no padding */
    long edge[3];                  /* NCHW: other tiles compiled apart, -1 for none */
    int edge_rest;                 /* NCHW: edge tiles beyond those three */
    size_t wg;                     /* work-group size */
};

/* The largest power of two <= cap that divides n. */
static size_t pow2_divisor(size_t n, size_t cap)
{
    size_t v = 1;
    while (v * 2 <= cap && n % (v * 2) == 0)
        v *= 2;
    return v;
}

/* The largest power of two <= n (n >= 1). */
static size_t pow2_floor(size_t n)
{
    size_t v = 1;
    while (v * 2 <= n)
        v *= 2;
    return v;
}

/* The smallest power of two >= n. */
static size_t pow2_ceil(size_t n)
{
    size_t v = 1;
    while (v < n)
        v *= 2;
    return v;
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* NCHW: VW output columns, no wider than the output row nor (stride 1 or 2)
   than an input row's VW * SW columns, so edge tiles can permute one load
   clamped into the row; KT filters of a group and 16 / KT rows, about 16
   vector accumulators; the edge tiles listed for compiling apart. */
static void nchw_tiling(const struct kiln_conv_shape *s, size_t vw, size_t p_ext, size_t q_ext, struct tiling *t)
{
    const kiln_conv2d_desc *d = &s->d;
    const size_t sw = d->stride_w, span = sw <= 2 ? d->w / sw : 0;
    t->vw = min_size(vw, pow2_ceil(q_ext));
    if (span > 0)
        t->vw = min_size(t->vw, pow2_floor(span));
    if (d->fused_maxpool && t->vw < 2)
        t->vw = 2;
    t->kt = pow2_divisor(s->kg, 8);
    t->th = 16 / t->kt;
    while (t->th > 2 && p_ext <= t->th) /* at least two row tiles */
        t->th /= 2;
    t->tiles_q = kiln_div_up(q_ext, t->vw);
    t->kblocks = d->k / t->kt;

    /* Tile tq reads columns tq * step - pad_left + [0, reach). */
    const size_t step = t->vw * sw, reach = (t->vw - 1) * sw + (d->s - 1) * d->dilation_w + 1;
    t->inner_first = min_size(t->tiles_q, kiln_div_up(d->pad_left, step));
    t->inner_end = d->w + d->pad_left < reach ? 0 : min_size(t->tiles_q, (d->w + d->pad_left - reach) / step + 1);
    /* The edge tiles: the first ones from the left, then from the right. */
    const size_t right = t->inner_end > t->inner_first ? t->inner_end : t->inner_first;
    size_t count = 0;
    for (size_t e = 0; e < t->inner_first && count < 3; e++)
        t->edge[count++] = (long)e;
    for (size_t e = t->tiles_q; e > right && count < 3; e--)
        t->edge[count++] = (long)e - 1;
    for (size_t i = count; i < 3; i++)
        t->edge[i] = -1;
    t->edge_rest = t->inner_first + (t->tiles_q - right) > count;
}

/* NHWC: VW filters dividing the group's filters (or the channels,
   depthwise), so lanes never leave a group; 4 x 4 output pixels; filters
   staged in local memory at most 16 KiB at a time. */
static void nhwc_tiling(const struct kiln_conv_shape *s, size_t vw, size_t q_ext, struct tiling *t)
{
    t->depthwise = s->cg == 1 && s->kg == 1;
    t->vw = pow2_divisor(t->depthwise ? s->d.k : s->kg, vw);
    t->th = 4;
    t->tq = min_size(4, q_ext); /* even for the pool: q_ext is */
    t->tiles_q = kiln_div_up(q_ext, t->tq);
    t->kblocks = s->d.k / t->vw;
    const size_t taps = s->d.r * s->d.s * t->vw;
    t->cc = min_size(s->cg, taps < 4096 ? 4096 / taps : 1);
}

static kiln_status tiling_of(const struct kiln_conv2d_plan *plan, struct tiling *t)
{
    const struct kiln_conv_shape *s = &plan->s;
    long vw = 0, wg = 0;
    kiln_status st = kiln_conv_param(plan, "direct_vw", &vw);
    if (st == KILN_SUCCESS)
        st = kiln_conv_param(plan, "direct_wg", &wg);
    if (st != KILN_SUCCESS)
        return st;
    memset(t, 0, sizeof *t);
    t->nhwc = s->d.layout == KILN_NHWC;
    t->wg = (size_t)wg;
    t->kt = t->tq = t->cc = 1;
    /* The convolution outputs that are stored, or pooled into what is. */
    const int pool = s->d.fused_maxpool != 0;
    const size_t p_ext = pool ? 2 * s->yh : s->p, q_ext = pool ? 2 * s->yw : s->q;
    if (t->nhwc)
        nhwc_tiling(s, (size_t)vw, q_ext, t);
    else
        nchw_tiling(s, (size_t)vw, p_ext, q_ext, t);
    /* Rows shared evenly between the row tiles (in pairs for the pool). */
    t->tiles_p = kiln_div_up(p_ext, t->th);
    t->th = kiln_div_up(p_ext, t->tiles_p);
    if (pool)
        t->th += t->th % 2;
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

static kiln_status direct_prepare(struct kiln_conv2d_plan *plan)
{
    const kiln_conv2d_desc *d = &plan->s.d;
    struct tiling t;
    char options[1024];
    kiln_status st = tiling_of(plan, &t);
    if (st == KILN_SUCCESS)
        st = kiln_conv_options(plan, options, sizeof options);
    if (st != KILN_SUCCESS)
        return st;
    size_t used = strlen(options);
    int n = snprintf(options + used, sizeof options - used,
                     " -DKILN_DIRECT_R=%zu -DKILN_DIRECT_S=%zu -DKILN_DIRECT_SH=%zu -DKILN_DIRECT_SW=%zu"
                     " -DKILN_DIRECT_DH=%zu -DKILN_DIRECT_DW=%zu -DKILN_DIRECT_VW=%zu -DKILN_DIRECT_TH=%zu"
                     " -DKILN_DIRECT_KT=%zu -DKILN_DIRECT_TQ=%zu -DKILN_DIRECT_DEPTHWISE=%d -DKILN_DIRECT_W=%zu"
                     " -DKILN_DIRECT_PL=%zu -DKILN_DIRECT_TILES_Q=%zu -DKILN_DIRECT_INNER_FIRST=%zu"
                     " -DKILN_DIRECT_INNER_END=%zu -DKILN_DIRECT_EDGE_A=%ld -DKILN_DIRECT_EDGE_B=%ld"
                     " -DKILN_DIRECT_EDGE_C=%ld -DKILN_DIRECT_EDGE_REST=%d -DKILN_DIRECT_WG=%zu -DKILN_DIRECT_CC=%zu"
                     " -DKILN_DIRECT_CG=%zu",
                     d->r, d->s, d->stride_h, d->stride_w, d->dilation_h, d->dilation_w, t.vw, t.th, t.kt, t.tq,
                     t.depthwise, d->w, d->pad_left, t.tiles_q, t.inner_first, t.inner_end, t.edge[0], t.edge[1],
                     t.edge[2], t.edge_rest, t.wg, t.cc, plan->s.cg);
    if (n < 0 || (size_t)n >= sizeof options - used)
        return kiln_error(KILN_ERROR_INTERNAL, "conv2d direct: compiler options longer than %zu bytes", sizeof options);
    if ((st = kiln_kernel_get(plan->ctx, SOURCE, options, "conv_f32_direct", &plan->kernels[0])) != KILN_SUCCESS)
        return st;

    if (t.nhwc)
        snprintf(plan->info.kernel, sizeof plan->info.kernel, "conv_f32_direct_nhwc%s_%zux%zux%zu",
                 t.depthwise ? "_dw" : "", t.th, t.tq, t.vw);
    else
        snprintf(plan->info.kernel, sizeof plan->info.kernel, "conv_f32_direct_nchw_%zux%zux%zu", t.kt, t.th, t.vw);
    snprintf(plan->info.params, sizeof plan->info.params,
             "tile %s %zux%zux%zu, VW=%zu WG=%zu, %zux%zu filter, stride %zux%zu, dilation %zux%zu",
             t.nhwc ? "rows x columns x filters" : "filters x rows x columns", t.nhwc ? t.th : t.kt,
             t.nhwc ? t.tq : t.th, t.vw, t.vw, t.wg, d->r, d->s, d->stride_h, d->stride_w, d->dilation_h,
             d->dilation_w);
    plan->local[0][0] = t.wg;
    if (t.nhwc && !t.depthwise) /* whole work-groups per k-block */
        plan->global[0][0] = t.kblocks * kiln_div_up(t.tiles / t.kblocks, t.wg) * t.wg;
    else
        plan->global[0][0] = kiln_div_up(t.tiles, t.wg) * t.wg;
    return KILN_SUCCESS;
}

static kiln_status direct_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *a, void **event)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    struct tiling t;
    kiln_status st = tiling_of(plan, &t);
    if (st != KILN_SUCCESS)
        return st;
    /* The kernel's int arguments, in order. */
    const int32_t ints[] = {(int32_t)d->c,       (int32_t)d->h,      (int32_t)d->k,      (int32_t)s->p,
                            (int32_t)s->q,       (int32_t)s->yh,     (int32_t)s->yw,     (int32_t)s->kg,
                            (int32_t)d->pad_top, (int32_t)t.tiles_p, (int32_t)t.kblocks, (int32_t)t.tiles};
    enum { NINTS = sizeof ints / sizeof *ints, NARGS = 5 + NINTS + 3 };
    struct kiln_arg args[NARGS] = {
        {KILN_ARG_BUFFER, 0, a->x}, {KILN_ARG_BUFFER, 0, a->w}, {KILN_ARG_BUFFER, 0, a->bias},
        {KILN_ARG_BUFFER, 0, a->z}, {KILN_ARG_BUFFER, 0, a->y},
    };
    for (int i = 0; i < NINTS; i++)
        args[5 + i] = (struct kiln_arg){KILN_ARG_SCALAR, sizeof ints[i], &ints[i]};
    args[5 + NINTS] = (struct kiln_arg){KILN_ARG_SCALAR, sizeof d->alpha, &d->alpha};
    args[6 + NINTS] = (struct kiln_arg){KILN_ARG_SCALAR, sizeof d->beta, &d->beta};
    args[7 + NINTS] = (struct kiln_arg){KILN_ARG_SCALAR, sizeof d->leaky_slope, &d->leaky_slope};
    return kiln_kernel_launch(plan->ctx, plan->kernels[0], args, NARGS, 1, plan->global[0], plan->local[0], event);
}

const struct kiln_conv_algorithm kiln_conv_direct = {"direct",       KILN_CONV_DIRECT, direct_unsupported,
                                                     direct_prepare, direct_execute,   NULL};
