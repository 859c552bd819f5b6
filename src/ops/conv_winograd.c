/*
 * Winograd convolution F(m x m, 3 x 3) for 3x3 filters, stride 1, dilation
 * 1, one group: F(2x2, 3x3) ("winograd-2x2") and F(4x4, 3x3)
 * ("winograd-4x4"), one implementation parameterised by m.
 *
 * Each execution transforms the weights (unless constant_weights says the
 * same buffer was transformed, and the GEMM has packed the result, before)
 * and the input into the workspace,
 * multiplies them as (m+2)^2 independent matrices with a batched kiln GEMM
 * plan, and transforms the products back with the epilogue and the optional
 * 2x2 max pool fused into the only write of y. cl/conv/conv_f32_winograd.cl
 * describes the kernels and the workspace layout. On the CPU GEMM route,
 * one kernel (cl/conv/conv_f32_winograd_fused.cl) computes the
 * products on the CPU register tile and transforms them back, so they never
 * go through memory (docs/winograd.md, "The products and the output
 * transform in one kernel"). The transformed weights
 * are (m+2)^2 K C floats, 4 times the weights for m = 4, so Winograd pays
 * only where the tiles outnumber the filters (docs/winograd.md).
 *
 * Accuracy: F(2x2) is as accurate as the direct sum; F(4x4) is about 10
 * times worse, and worse still for few channels, since a tile's outputs are
 * built from its whole 6x6 patch. tests/test_winograd.c allows 64 u and
 * 2048 u (u = 2^-24); the error study is in docs/winograd.md#error-study.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"

#define SOURCE "conv/conv_f32_winograd"
#define SOURCE_FUSED "conv/conv_f32_winograd_fused"

enum { FILTER, INPUT, OUTPUT }; /* kernels */
enum { WS_U, WS_V, WS_M };      /* workspace: transformed weights, inputs, products */

struct wino {
    int m;                /* output tile side; the transform is m + 2 */
    size_t th, tw, tiles; /* tile rows and columns per image, tiles in all */
    uint64_t plane[3];    /* floats from one t to the next in U, V, M */
    int local;            /* launch work-groups of one work-item */
    int fused;            /* the products and the output transform in one kernel */
    size_t group;         /* fused: panels of tiles a work-item takes */
    kiln_gemm_plan *gemm; /* the products otherwise */
};

static const char *wino_unsupported(const struct kiln_conv_shape *s)
{
    const kiln_conv2d_desc *d = &s->d;
    if (d->r != 3 || d->s != 3 || d->stride_h != 1 || d->stride_w != 1 || d->dilation_h != 1 || d->dilation_w != 1 ||
        d->groups != 1)
        return "needs 3x3 filters, stride 1, dilation 1 and one group";
    return NULL;
}

static size_t up(size_t a, size_t b) { return (a + b - 1) / b; }

/* Floats between the (m+2)^2 matrices of a workspace buffer: whole 64-byte
   lines, an odd number of them, so the transforms' (m+2)^2 concurrent store
   streams fall in different cache sets (a multiple of 4 KiB would put them
   all in one). */
static size_t plane_of(size_t floats)
{
    size_t lines = up(floats, 16);
    return (lines | 1) * 16;
}

static kiln_status wino_prepare(struct kiln_conv2d_plan *plan)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    struct wino *w = calloc(1, sizeof *w);
    if (!w)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a Winograd plan");
    plan->base.impl = w;
    w->m = plan->algorithm->algo == KILN_CONV_WINOGRAD_4X4 ? 4 : 2;
    const size_t m = (size_t)w->m, a2 = (m + 2) * (m + 2);
    w->th = up(s->p, m), w->tw = up(s->q, m), w->tiles = d->n * w->th * w->tw;
    const size_t wide = d->c > d->k ? d->c : d->k;
    if (w->tiles > INT32_MAX / wide)
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "conv2d %s: %zu tiles x %zu channels exceed 2^31 transformed values per tile position",
                          plan->algorithm->name, w->tiles, wide);

    /* Vector width: conv.winograd's. NHWC lanes are channels and take it
       as it is; NCHW lanes are tiles of a row, gathered with swizzles that
       need m <= VW <= 8, and a row of fewer tiles takes a narrower vector
       (down to m, below which lanes are masked). */
    const int nhwc = d->layout == KILN_NHWC;
    const struct kiln_param_conv_winograd *params;
    kiln_status st = kiln_conv_params(plan, KILN_GROUP_conv_winograd, &params);
    if (st != KILN_SUCCESS)
        return st;
    long vw = params->vw;
    if (vw < 2)
        vw = 2;
    if (!nhwc) {
        if (vw > 8)
            vw = 8;
        while (vw > w->m && (size_t)vw > w->tw)
            vw /= 2;
        if (vw < w->m)
            vw = w->m;
    }
    /* The fused kernel's register tile: MR tiles by NR filters. It needs
       MR tiles (its last panel ends at the last tile); U's filters are
       padded to whole panels of NR, which the filter transform writes VW
       at a time. */
    const size_t units = plan->base.ctx->desc.compute_units ? plan->base.ctx->desc.compute_units : 1;
    struct kiln_options fused = {0};
    struct kiln_cpu_tile tile = {0};
    if (plan->base.ctx->vector_kernels &&
        kiln_profile_params(plan->base.ctx->profile)->select.gemm_route == KILN_ROUTE_CPU) {
        const struct kiln_param_gemm_cpu *cpu;
        if ((st = kiln_conv_params(plan, KILN_GROUP_gemm_cpu, &cpu)) != KILN_SUCCESS)
            return st;
        kiln_conv_options(plan, &fused);
        kiln_options_add(&fused, "-DKILN_WINO_M=%d", w->m);
        tile = kiln_cpu_tile_choose(cpu, w->tiles, d->k, &fused);
        w->fused = w->tiles >= (size_t)tile.mr && tile.nr % vw == 0;
        /* Panels of MR tiles a work-item takes in turn, so that each t's
           block of U serves them all from the nearest caches: as many as
           leave every compute unit two work-items, their products within
           512 KiB of private memory (docs/winograd.md). */
        const size_t panels = up(w->tiles, (size_t)tile.mr), blocks = up(d->k, (size_t)tile.nr);
        const size_t panel_bytes = a2 * (size_t)tile.mr * (size_t)tile.nr * sizeof(float);
        const size_t most = panel_bytes < ((size_t)512 << 10) ? ((size_t)512 << 10) / panel_bytes : 1;
        size_t groups = up(panels, most);
        if (groups < up(2 * units, blocks))
            groups = up(2 * units, blocks);
        w->group = up(panels, groups < panels ? groups : panels);
        kiln_options_add(&fused, "-DKILN_WINO_PANEL=%ld -DKILN_WINO_GROUP=%zu", tile.nr, w->group);
    }
    struct kiln_options options = {0};
    kiln_conv_options(plan, &options);
    kiln_options_add(&options, "-DKILN_WINO_M=%d -DKILN_WINO_VW=%ld -DKILN_WINO_PANEL=%ld", w->m, vw,
                     w->fused ? tile.nr : 0L);
    static const char *const suffix[] = {"filter", "in", "out"};
    char names[3][64];
    const char *wanted[3];
    for (int i = FILTER; i <= OUTPUT; i++) {
        snprintf(names[i], sizeof names[i], "conv_f32_wino%dx%d_%s", w->m, w->m,
                 i == OUTPUT && w->fused ? "fused" : suffix[i]);
        wanted[i] = i == OUTPUT && w->fused ? NULL : names[i]; /* the fused kernel has a source of its own */
    }
    kiln_options_only(&options, wanted, 3);
    for (int i = FILTER; i <= OUTPUT && st == KILN_SUCCESS; i++)
        st = kiln_plan_kernel(&plan->base, i, i == OUTPUT && w->fused ? SOURCE_FUSED : SOURCE,
                              i == OUTPUT && w->fused ? &fused : &options, names[i]);
    kiln_options_free(&options);
    kiln_options_free(&fused);
    if (st != KILN_SUCCESS)
        return st;

    /* Launch geometry (cl/conv/conv_f32_winograd.cl). */
    const size_t lanes = (size_t)vw;
    const size_t geometry[3][3] = {
        {up(d->k, lanes), d->c, 1},
        {nhwc ? up(d->c, lanes) : w->th, nhwc ? w->tw : d->n * d->c, nhwc ? d->n * w->th : 1},
        {nhwc ? up(d->k, lanes) : w->th, nhwc ? w->tw : d->n * d->k, nhwc ? d->n * w->th : 1},
    };
    memcpy(plan->global, geometry, sizeof geometry);
    const size_t panels_k = w->fused ? up(d->k, (size_t)tile.nr) * (size_t)tile.nr : d->k; /* U's filters */
    /* NCHW on a CPU: a work-item takes a whole plane's tile rows where the
       planes give every compute unit eight work-items: its V stores then
       fill whole lines (7x7 with 512 channels, F(2x2): 35-37 -> 28 us). */
    if (!nhwc && plan->base.ctx->desc.type == KILN_DEVICE_CPU && d->n * d->c >= 8 * units)
        plan->global[INPUT][0] = 1;
    if (w->fused) {
        plan->global[FILTER][0] = panels_k / lanes;
        plan->global[OUTPUT][0] = panels_k / (size_t)tile.nr; /* blocks of filters first */
        plan->global[OUTPUT][1] = up(up(w->tiles, (size_t)tile.mr), w->group);
        plan->global[OUTPUT][2] = 1;
    }
    /* A CPU runs each work-item's vectors best alone, in work-groups of one
       (docs/winograd.md#work-groups-on-a-cpu). */
    w->local = plan->base.ctx->desc.type == KILN_DEVICE_CPU;
    for (int i = FILTER; i <= OUTPUT; i++)
        for (int dim = 0; dim < 3; dim++)
            plan->local[i][dim] = 1;

    w->plane[WS_U] = plane_of(panels_k * d->c);
    w->plane[WS_V] = plane_of(d->c * w->tiles);
    w->plane[WS_M] = plane_of(d->k * w->tiles);
    for (int i = WS_U; i <= (w->fused ? WS_V : WS_M); i++)
        if ((st = kiln_plan_workspace(&plan->base, i, a2 * w->plane[i] * sizeof(float))) != KILN_SUCCESS)
            return st;

    if (w->fused) {
        snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_wino%dx%d_fused_%ldx%ld", w->m, w->m, tile.mr,
                 tile.nr);
        snprintf(plan->base.params, sizeof plan->base.params,
                 "VW=%ld, %zu tiles, %zu products %zux%zux%zu and the output transform in one kernel (MR=%ld tiles, "
                 "NR=%ld filters, %zu panels of tiles a work-item)",
                 vw, w->tiles, a2, w->tiles, d->k, d->c, tile.mr, tile.nr, w->group);
        return KILN_SUCCESS;
    }

    /* NCHW: M[t] (K x T) = U[t]^T V[t] (U[t] is C x K, read transposed so
       the GEMM packs it from contiguous runs); NHWC: M[t] (T x K) = V[t]
       (T x C) U[t] (C x K). Row-major, one batch item per t. */
    kiln_gemm_desc g;
    if (nhwc)
        kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, w->tiles, d->k, d->c);
    else
        kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, d->k, w->tiles, d->c);
    g.batch = a2;
    g.stride_a = w->plane[nhwc ? WS_V : WS_U];
    g.stride_b = w->plane[nhwc ? WS_U : WS_V];
    g.stride_c = w->plane[WS_M];
    /* Constant weights: U is transformed and packed once (execute's reuse). */
    const unsigned keep = d->constant_weights ? (nhwc ? KILN_GEMM_KEEP_B : KILN_GEMM_KEEP_A) : 0;
    if ((st = kiln_gemm_plan_create_fused(plan->base.ctx, &g, NULL, keep, &w->gemm)) != KILN_SUCCESS)
        return st;
    kiln_gemm_plan_info gi;
    kiln_gemm_plan_describe(w->gemm, &gi);
    plan->base.workspace_bytes += gi.workspace_bytes;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_wino%dx%d + %.40s", w->m, w->m, gi.kernel);
    snprintf(plan->base.params, sizeof plan->base.params, "VW=%ld, %zu tiles, %zu GEMMs %zux%zux%zu (%.120s)", vw,
             w->tiles, a2, g.m, g.n, g.k, gi.params);
    return KILN_SUCCESS;
}

static kiln_status wino_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void **event)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    const struct wino *w = plan->base.impl;
    void *u = plan->base.workspace[WS_U]->handle, *v = plan->base.workspace[WS_V]->handle,
         *m = w->fused ? NULL : plan->base.workspace[WS_M]->handle;
    kiln_status st;
    const int fresh = kiln_conv_weights_stale(plan, x->w);
    if (fresh) {
        struct kiln_args a = {0};
        kiln_args_int(&a, (int32_t)d->k);
        kiln_args_int(&a, (int32_t)d->c);
        kiln_args_buffer(&a, x->w);
        kiln_args_buffer(&a, u);
        kiln_args_ulong(&a, w->plane[WS_U]);
        if ((st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[FILTER], &a, 2, plan->global[FILTER],
                                     w->local ? plan->local[FILTER] : NULL, 0, NULL)) != KILN_SUCCESS) {
            plan->packed_from = NULL;
            return st;
        }
    }

    /* The input and output transforms' arguments both start with the shape. */
    const size_t shape[11] = {d->n, d->c, d->h, d->w, d->k, s->p, s->q, d->pad_top, d->pad_left, w->th, w->tw};
    struct kiln_args in = {0}, out = {0};
    for (int i = 0; i < 11; i++) {
        kiln_args_int(&in, (int32_t)shape[i]);
        kiln_args_int(&out, (int32_t)shape[i]);
    }
    kiln_args_buffer(&in, x->x);
    kiln_args_buffer(&in, v);
    kiln_args_ulong(&in, w->plane[WS_V]);
    kiln_args_int(&in, (int32_t)plan->global[INPUT][0]); /* th_step, NCHW's tile rows a work-item apart */
    if ((st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[INPUT], &in, 3, plan->global[INPUT],
                                 w->local ? plan->local[INPUT] : NULL, 0, NULL)) != KILN_SUCCESS)
        return st;

    kiln_args_float(&out, d->alpha);
    kiln_args_float(&out, d->beta);
    kiln_args_float(&out, d->leaky_slope);
    if (w->fused) {
        kiln_args_buffer(&out, u);
        kiln_args_ulong(&out, w->plane[WS_U]);
        kiln_args_buffer(&out, v);
        kiln_args_ulong(&out, w->plane[WS_V]);
    } else {
        /* With weights transformed on an earlier call, the GEMM's packed
           copy of U is current too: 36 K C floats for F(4x4) not packed
           again. */
        const int nhwc = d->layout == KILN_NHWC;
        const struct kiln_gemm_args product = {1.0f, 0.0f, nhwc ? v : u,    nhwc ? u : v,  m, 0, 0, 0, NULL, NULL,
                                               0,    0.0f, !fresh && !nhwc, !fresh && nhwc};
        if ((st = kiln_gemm_run(w->gemm, &product, NULL)) != KILN_SUCCESS) {
            plan->packed_from = NULL;
            return st;
        }
        kiln_args_buffer(&out, m);
        kiln_args_ulong(&out, w->plane[WS_M]);
    }
    kiln_args_buffer_or(&out, x->bias, x->y); /* unused bias and z: y stands in, never read */
    kiln_args_buffer_or(&out, x->z, x->y);
    kiln_args_buffer(&out, x->y);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[OUTPUT], &out, 3, plan->global[OUTPUT],
                              w->local ? plan->local[OUTPUT] : NULL, 0, event);
}

static void wino_release(struct kiln_conv2d_plan *plan)
{
    struct wino *w = plan->base.impl;
    if (w)
        kiln_gemm_plan_destroy(w->gemm);
    free(w);
    plan->base.impl = NULL;
}

const struct kiln_conv_algorithm kiln_conv_winograd2 = {"winograd-2x2", KILN_CONV_WINOGRAD_2X2, wino_unsupported,
                                                        wino_prepare,   wino_execute,           wino_release};
const struct kiln_conv_algorithm kiln_conv_winograd4 = {"winograd-4x4", KILN_CONV_WINOGRAD_4X4, wino_unsupported,
                                                        wino_prepare,   wino_execute,           wino_release};
