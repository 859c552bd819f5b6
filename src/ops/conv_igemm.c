/*
 * Implicit-GEMM convolution, in one of two kernels chosen by the profile's
 * select.conv_igemm_route: the CPU kernel or the GPU-style tiled kernel.
 *
 * CPU, with the GEMM register tile of the profile's gemm.cpu group, in one
 * of two variants (rows_variant); both pack the weights (on each execution,
 * or once with constant_weights):
 * - panel (cl/conv/conv_f32_igemm.cl, NCHW): each work-group of one
 *   work-item gathers the im2col panel of NR output pixels into local
 *   memory and multiplies it by every weight panel of MR filters;
 * - row (cl/conv/conv_f32_igemm_rows.cl): tiles of MR pixels broadcast
 *   from a channels-last input (NHWC in place, or a copy with the padding
 *   as zeros) against NR filters, without a panel.
 *
 * Tiled (cl/conv/conv_f32_igemm_tiled.cl; the conv.igemm_tiled group):
 * work-groups of mdimc x ndimc work-items compute mwg pixels x nwg filters,
 * staging kwg-deep blocks of the im2col matrix and of the weights,
 * read in place, through local memory; no workspace, except where a layer
 * has fewer tiles than the device can fill: then the filter volume is split
 * into slices (kiln_split_k, the group's split_k_min and split_k_waves)
 * whose fp32 products a second kernel adds in order, with the epilogue.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"
#include "profiles/profile.h"

#define SOURCE "conv/conv_f32_igemm"
#define ROWS_SOURCE "conv/conv_f32_igemm_rows"
#define TILED_SOURCE "conv/conv_f32_igemm_tiled"

enum { PACK, MAIN, SPLIT, REDUCE, COPY = SPLIT };

static const char *igemm_unsupported(const struct kiln_conv_shape *s)
{
    if (s->d.fused_maxpool)
        return "the fused max pool needs the direct or a Winograd algorithm";
    return NULL;
}

/* How many blocks of weight panels to split each pixel tile's work into.
   One while the tiles alone give every compute unit several work-groups;
   otherwise the fewest that give each unit two, in a multiple of the unit
   count so the last round is not half empty. Each block gathers its im2col
   panel again, so more blocks cost more
   (docs/convolution.md#filter-blocks-of-the-implicit-gemm-cpu-kernel). */
static size_t filter_blocks(size_t tiles, size_t panels, unsigned units)
{
    size_t cu = units ? units : 1;
    if (tiles >= 8 * cu)
        return 1;
    size_t blocks = (2 * cu + tiles - 1) / tiles;
    while (blocks < panels && tiles * blocks % cu)
        blocks++;
    return blocks < panels ? blocks : panels;
}

/* The panel variant's tile (MR filters x NR pixels) and filter blocks. */
static kiln_status panel_tile(struct kiln_conv2d_plan *plan, struct kiln_options *options, struct kiln_cpu_tile *tile,
                              size_t *blocks)
{
    const struct kiln_conv_shape *s = &plan->s;
    const size_t pixels = s->d.n * s->p * s->q;
    const struct kiln_param_gemm_cpu *cpu;
    kiln_status st = kiln_conv_params(plan, KILN_GROUP_gemm_cpu, &cpu);
    if (st != KILN_SUCCESS)
        return st;
    *tile = kiln_cpu_tile_choose(cpu, s->kg, pixels, options);
    const size_t tiles = kiln_div_up(pixels, (size_t)tile->nr), panels = kiln_div_up(s->kg, (size_t)tile->mr);
    *blocks = filter_blocks(tiles * s->d.groups, panels, plan->base.ctx->desc.compute_units);
    return KILN_SUCCESS;
}

/* The panel variant's im2col panel in local memory: the filter volume by NR
   pixels, in fp32. */
static size_t panel_bytes(const struct kiln_conv_shape *s, const struct kiln_cpu_tile *tile)
{
    return s->cg * s->d.r * s->d.s * (size_t)tile->nr * sizeof(float);
}

static kiln_status cpu_prepare(struct kiln_conv2d_plan *plan)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    struct kiln_options options = {0};
    kiln_conv_options(plan, &options);
    struct kiln_cpu_tile tile;
    size_t blocks = 1;
    kiln_status st = panel_tile(plan, &options, &tile, &blocks);
    const size_t mr = (size_t)tile.mr, nr = (size_t)tile.nr, pixels = d->n * s->p * s->q;
    const size_t kk = s->cg * d->r * d->s, panels = kiln_div_up(s->kg, mr), local_bytes = panel_bytes(s, &tile);
    if (st == KILN_SUCCESS && local_bytes > plan->base.ctx->desc.local_mem_bytes)
        st = kiln_error(KILN_ERROR_UNSUPPORTED,
                        "conv2d implicit-gemm: a %zu x %zu im2col panel (%zu bytes) exceeds the device's %llu bytes "
                        "of local memory",
                        kk, nr, local_bytes, plan->base.ctx->desc.local_mem_bytes);
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_igemm_%zux%zu", mr, nr);
    static const char *const names[] = {"conv_f32_igemm_pack_w", "conv_f32_igemm"};
    kiln_options_only(&options, names, 2);
    if (st == KILN_SUCCESS)
        st = kiln_plan_kernel(&plan->base, PACK, SOURCE, &options, "conv_f32_igemm_pack_w");
    if (st == KILN_SUCCESS)
        st = kiln_plan_kernel(&plan->base, MAIN, SOURCE, &options, "conv_f32_igemm");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    const size_t tiles = kiln_div_up(pixels, nr);
    plan->block_panels = kiln_div_up(panels, blocks);
    blocks = kiln_div_up(panels, plan->block_panels);
    snprintf(plan->base.params, sizeof plan->base.params,
             "MR=%zu NR=%zu VW=%ld, im2col panel %zux%zu in local memory, %zu filter blocks", mr, nr, tile.vw, kk, nr,
             blocks);
    size_t g[2][3] = {{kk, panels, d->groups}, {tiles, blocks, d->groups}};
    memcpy(plan->global, g, sizeof g);
    for (int i = 0; i < 3; i++)
        plan->local[MAIN][i] = 1;
    plan->local_bytes = local_bytes;
    return kiln_plan_workspace(&plan->base, 0, d->groups * panels * mr * kk * sizeof(float));
}

/* The planes the row variant reads: x with its padding (x itself where it
   reads NHWC in place, which has none). */
static size_t padded_h(const kiln_conv2d_desc *d) { return d->h + d->pad_top + d->pad_bottom; }
static size_t padded_w(const kiln_conv2d_desc *d) { return d->w + d->pad_left + d->pad_right; }

/* The planes the row variant reads: NCHW's copy, padded; NHWC in place. */
static size_t rows_plane_h(const kiln_conv2d_desc *d) { return d->layout == KILN_NHWC ? d->h : padded_h(d); }
static size_t rows_plane_w(const kiln_conv2d_desc *d) { return d->layout == KILN_NHWC ? d->w : padded_w(d); }

/* The row variant compiles in the filter's size and channels per group
   where its volume (cg x R x S) is at most this: an RGB stem's 3x3 (27),
   whose taps' loops then unroll whole
   (docs/convolution.md#the-row-variant-of-the-implicit-gemm-cpu-kernel).
   One program per such filter; larger volumes share one. */
#define ROWS_FIXED_MAX_VOLUME 32

/* The row variant: tiles of MR pixels broadcast from a channels-last input
   against NR filters (docs/convolution.md#the-row-variant-of-the-implicit-gemm-cpu-kernel).
   Work-groups take chunks of tiles of one weight panel: at least eight per
   compute unit, each reading its panel's weights once into the cache. */
static kiln_status rows_prepare(struct kiln_conv2d_plan *plan)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    const size_t pixels = d->n * s->p * s->q;
    const struct kiln_param_gemm_cpu *cpu;
    kiln_status st = kiln_conv_params(plan, KILN_GROUP_gemm_cpu, &cpu);
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_conv_options(plan, &options);
    const struct kiln_cpu_tile tile = kiln_cpu_tile_choose_pixels(cpu, pixels, s->kg, &options);
    const size_t mr = (size_t)tile.mr, nr = (size_t)tile.nr;
    const size_t kk = s->cg * d->r * d->s, panels = kiln_div_up(s->kg, nr), tiles = kiln_div_up(pixels, mr);
    const int copy = d->layout == KILN_NCHW; /* NHWC is read in place, padding and all */
    const int fixed = kk <= ROWS_FIXED_MAX_VOLUME;
    if (fixed)
        kiln_options_add(&options,
                         "-DKILN_ROWS_FIXED=1 -DKILN_ROWS_R=%zu -DKILN_ROWS_S=%zu -DKILN_ROWS_CG=%zu "
                         "-DKILN_ROWS_DIL_W=%zu -DKILN_ROWS_GROUPS=%zu",
                         d->r, d->s, s->cg, d->dilation_w, d->groups);
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_igemm_rows_%zux%zu", mr, nr);
    const char *const names[] = {"conv_f32_igemm_rows_pack", "conv_f32_igemm_rows",
                                 copy ? "conv_f32_igemm_rows_copy" : NULL};
    kiln_options_only(&options, names, 3);
    st = kiln_plan_kernel(&plan->base, PACK, ROWS_SOURCE, &options, "conv_f32_igemm_rows_pack");
    if (st == KILN_SUCCESS)
        st = kiln_plan_kernel(&plan->base, MAIN, ROWS_SOURCE, &options, "conv_f32_igemm_rows");
    if (st == KILN_SUCCESS && copy)
        st = kiln_plan_kernel(&plan->base, COPY, ROWS_SOURCE, &options, "conv_f32_igemm_rows_copy");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    const size_t units = plan->base.ctx->desc.compute_units ? plan->base.ctx->desc.compute_units : 1;
    const size_t chunk = tiles * panels * d->groups / (8 * units);
    plan->block_panels = chunk < 1 ? 1 : chunk < tiles ? chunk : tiles; /* tiles per work-group */
    snprintf(plan->base.params, sizeof plan->base.params,
             "rows: MR=%zu pixels x NR=%zu filters, VW=%ld, %zu tiles per work-group, %s%s", mr, nr, tile.vw,
             plan->block_panels, copy ? "input copied channels-last" : "input read in place",
             fixed ? ", filter compiled in" : "");
    const size_t g[3][3] = {{kk, panels, d->groups},
                            {kiln_div_up(tiles, plan->block_panels), panels, d->groups},
                            {kiln_div_up(d->c, 16), padded_h(d), d->n}};
    memcpy(plan->global, g, sizeof g);
    for (int i = 0; i < 3; i++)
        plan->local[MAIN][i] = plan->local[COPY][i] = 1;
    plan->rows = 1;
    st = kiln_plan_workspace(&plan->base, 0, d->groups * panels * nr * kk * sizeof(float));
    if (st == KILN_SUCCESS && copy)
        st = kiln_plan_workspace(&plan->base, 1, d->n * d->c * padded_h(d) * padded_w(d) * kiln_dtype_size(d->dtype));
    return st;
}

/* The tiled kernel; its parameters were checked against their constraints
   and the device's limits when the profile was loaded and matched. */
static kiln_status tiled_prepare(struct kiln_conv2d_plan *plan)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    const struct kiln_param_conv_igemm_tiled *t;
    kiln_status st = kiln_conv_params(plan, KILN_GROUP_conv_igemm_tiled, &t);
    if (st != KILN_SUCCESS)
        return st;
    const long mwg = t->mwg, nwg = t->nwg, kwg = t->kwg, mdimc = t->mdimc, ndimc = t->ndimc, vw = t->vw;
    const size_t threads = (size_t)(mdimc * ndimc);
    /* The kernel's blocks of X and W (rows padded as its XLD and WLD say)
       and its index tables (a long and two ints per pixel and per kk, the
       kk table twice). */
    const long xld = mwg + (d->layout == KILN_NHWC ? vw : 0), wld = nwg + vw;
    const size_t local_bytes = (size_t)(kwg * (xld + wld)) * sizeof(float) + (size_t)(mwg + 2 * kwg) * 16;
    struct kiln_options options = {0};
    kiln_conv_options(plan, &options);
    kiln_profile_defines(&options, KILN_GROUP_conv_igemm_tiled, t);

    snprintf(plan->base.kernel, sizeof plan->base.kernel, "conv_f32_igemm_tiled_%ldx%ld", mwg, nwg);
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %ld pixels x %ld filters, K step %ld, work-group %ldx%ld, VW=%ld, %zu bytes of local memory", mwg,
             nwg, kwg, mdimc, ndimc, vw, local_bytes);
    const size_t pixels = d->n * s->p * s->q;
    const size_t g[3] = {kiln_div_up(pixels, (size_t)mwg) * threads, kiln_div_up(s->kg, (size_t)nwg), d->groups};
    memcpy(plan->global[MAIN], g, sizeof g);
    plan->local[MAIN][0] = threads;
    plan->local[MAIN][1] = plan->local[MAIN][2] = 1;
    plan->tiled = 1;
    const size_t kk = s->cg * d->r * d->s, tiles = g[0] / threads * g[1] * g[2];
    plan->splits = kiln_split_k(tiles, kk, (size_t)kwg, t->split_k_min, t->split_k_waves,
                                plan->base.ctx->desc.compute_units, &plan->ks);
    if (plan->splits < 2)
        st = kiln_plan_kernel(&plan->base, MAIN, TILED_SOURCE, &options, "conv_f32_igemm_tiled");
    else {
        /* The split program holds the slice and reduction kernels. */
        kiln_options_add(&options, "-DKILN_CONV_SPLIT=1");
        st = kiln_plan_kernel(&plan->base, SPLIT, TILED_SOURCE, &options, "conv_f32_igemm_tiled_split");
        if (st == KILN_SUCCESS)
            st = kiln_plan_kernel(&plan->base, REDUCE, TILED_SOURCE, &options, "conv_f32_igemm_split_reduce");
        if (st == KILN_SUCCESS)
            st = kiln_plan_workspace(&plan->base, 0, d->groups * plan->splits * pixels * s->kg * sizeof(float));
        memcpy(plan->global[SPLIT], g, sizeof g);
        plan->global[SPLIT][2] = d->groups * plan->splits;
        memcpy(plan->local[SPLIT], plan->local[MAIN], sizeof plan->local[MAIN]);
        plan->global[REDUCE][0] = pixels, plan->global[REDUCE][1] = d->k, plan->global[REDUCE][2] = 1;
        kiln_split_k_describe(&plan->base, plan->splits, plan->ks, tiles);
    }
    kiln_options_free(&options);
    return st;
}

/* The CPU kernel's variant: the row variant for NHWC; where the panel
   variant's panel would not fit the device's local memory (a deep filter
   volume: 3x3 over 512 channels at 7x7 on POCL's 1 MiB); for a strided
   filter wider than 1x1 with two panels of the row variant's filters or
   more and a filter volume (C R S) of ROWS_MIN_VOLUME or more (its
   channels-last copy then pays for itself: ResNet-50's stride-2 3x3
   layers; short runs of channels, as in an RGB stem, do not), or where the
   panel variant would split the filters into blocks that gather the same
   panel again (small images); the panel variant otherwise
   (docs/convolution.md#the-row-variant-of-the-implicit-gemm-cpu-kernel). */
#define ROWS_MIN_VOLUME 256
static int rows_variant(struct kiln_conv2d_plan *plan)
{
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    if (d->layout == KILN_NHWC)
        return 1;
    struct kiln_options options = {0};
    struct kiln_cpu_tile tile;
    size_t blocks = 1;
    kiln_status st = panel_tile(plan, &options, &tile, &blocks);
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return 0; /* cpu_prepare reports it */
    if (panel_bytes(s, &tile) > plan->base.ctx->desc.local_mem_bytes)
        return 1;
    if (d->stride_h * d->stride_w == 1 || d->r * d->s == 1)
        return 0;
    const struct kiln_param_gemm_cpu *cpu;
    int wide = 0;
    if (s->cg * d->r * d->s >= ROWS_MIN_VOLUME && kiln_conv_params(plan, KILN_GROUP_gemm_cpu, &cpu) == KILN_SUCCESS)
        wide = s->kg >= 2 * (size_t)kiln_cpu_tile_choose(cpu, d->n * s->p * s->q, s->kg, &options).nr;
    kiln_options_free(&options);
    return wide || blocks > 1;
}

static kiln_status igemm_prepare(struct kiln_conv2d_plan *plan)
{
    const int route = kiln_profile_params(plan->base.ctx->profile)->select.conv_igemm_route;
    if (route != KILN_IGEMM_CPU || !plan->base.ctx->vector_kernels)
        return tiled_prepare(plan);
    return rows_variant(plan) ? rows_prepare(plan) : cpu_prepare(plan);
}

/* The kernels' shape arguments (IGEMM_SHAPE_ARGS of conv/igemm_shape.h). */
static void shape_args(struct kiln_args *a, const struct kiln_conv_shape *s)
{
    const kiln_conv2d_desc *d = &s->d;
    const size_t shape[16] = {d->n,        d->c,          d->h,          d->w,        d->k,        d->r,
                              d->s,        s->p,          s->q,          d->stride_h, d->stride_w, d->pad_top,
                              d->pad_left, d->dilation_h, d->dilation_w, d->groups};
    for (int i = 0; i < 16; i++)
        kiln_args_int(a, (int32_t)shape[i]);
}

void kiln_conv_igemm_args(struct kiln_args *a, const struct kiln_conv_shape *s, const struct kiln_conv_args *x, void *w)
{
    const kiln_conv2d_desc *d = &s->d;
    shape_args(a, s);
    kiln_args_float(a, d->alpha);
    kiln_args_float(a, d->beta);
    kiln_args_float(a, d->leaky_slope);
    kiln_args_buffer(a, x->x);
    kiln_args_buffer(a, w);
    kiln_args_buffer_or(a, x->bias, x->y); /* unused bias and z: y stands in, never read */
    kiln_args_buffer_or(a, x->z, x->y);
    kiln_args_buffer(a, x->y);
}

/* Launch the main kernel of any variant: the arguments of
   kiln_conv_igemm_args, then the CPU kernels' block_panels (the row
   variant's tiles per work-group) and the planes the row variant reads,
   Hp x Wp (rows_plane_h); the panel variant's local panel is the launch's
   dynamic local memory (plan->local_bytes, 0 for the others). */
static kiln_status launch(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void *w, void **event)
{
    const kiln_conv2d_desc *d = &plan->s.d;
    struct kiln_args a = {0};
    kiln_conv_igemm_args(&a, &plan->s, x, w);
    if (!plan->tiled)
        kiln_args_int(&a, (int32_t)plan->block_panels);
    if (plan->rows) {
        kiln_args_int(&a, (int32_t)rows_plane_h(d));
        kiln_args_int(&a, (int32_t)rows_plane_w(d));
    }
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[MAIN], &a, 3, plan->global[MAIN], plan->local[MAIN],
                              plan->local_bytes, event);
}

/* The split tiled kernel: the slices into the workspace, then their sums
   with the epilogue. */
static kiln_status launch_split(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void **event)
{
    const kiln_conv2d_desc *d = &plan->s.d;
    void *part = plan->base.workspace[0]->handle;
    struct kiln_args a = {0}, r = {0};
    shape_args(&a, &plan->s);
    shape_args(&r, &plan->s);
    kiln_args_int(&a, (int32_t)plan->ks);
    kiln_args_int(&a, (int32_t)plan->splits);
    kiln_args_buffer(&a, x->x);
    kiln_args_buffer(&a, x->w);
    kiln_args_buffer(&a, part);
    kiln_status st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[SPLIT], &a, 3, plan->global[SPLIT],
                                        plan->local[SPLIT], 0, NULL);
    if (st != KILN_SUCCESS)
        return st;
    kiln_args_int(&r, (int32_t)plan->splits);
    kiln_args_float(&r, d->alpha);
    kiln_args_float(&r, d->beta);
    kiln_args_float(&r, d->leaky_slope);
    kiln_args_buffer(&r, part);
    kiln_args_buffer_or(&r, x->bias, x->y);
    kiln_args_buffer_or(&r, x->z, x->y);
    kiln_args_buffer(&r, x->y);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[REDUCE], &r, 2, plan->global[REDUCE], NULL, 0, event);
}

/* The CPU kernel: weights packed where stale, NCHW or padded input copied
   channels-last for the row variant, then the main kernel. */
static kiln_status igemm_execute(struct kiln_conv2d_plan *plan, const struct kiln_conv_args *x, void **event)
{
    if (plan->tiled)
        return plan->splits > 1 ? launch_split(plan, x, event) : launch(plan, x, x->w, event);
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    void *wp = plan->base.workspace[0]->handle;
    kiln_status st = KILN_SUCCESS;
    if (kiln_conv_weights_stale(plan, x->w)) {
        struct kiln_args a = {0};
        const int32_t v[4] = {(int32_t)s->kg, (int32_t)s->cg, (int32_t)d->r, (int32_t)d->s};
        for (int i = 0; i < 4; i++)
            kiln_args_int(&a, v[i]);
        kiln_args_buffer(&a, x->w);
        kiln_args_buffer(&a, wp);
        st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[PACK], &a, 3, plan->global[PACK], NULL, 0, NULL);
        if (st != KILN_SUCCESS) {
            plan->packed_from = NULL;
            return st;
        }
    }
    struct kiln_conv_args in = *x;
    if (plan->rows && plan->base.kernels[COPY]) {
        in.x = plan->base.workspace[1]->handle;
        struct kiln_args a = {0};
        const int32_t v[7] = {(int32_t)d->c,        (int32_t)d->h,       (int32_t)d->w,       (int32_t)padded_h(d),
                              (int32_t)padded_w(d), (int32_t)d->pad_top, (int32_t)d->pad_left};
        for (int i = 0; i < 7; i++)
            kiln_args_int(&a, v[i]);
        kiln_args_buffer(&a, x->x);
        kiln_args_buffer(&a, in.x);
        st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[COPY], &a, 3, plan->global[COPY], plan->local[COPY],
                                0, NULL);
        if (st != KILN_SUCCESS)
            return st;
    }
    return launch(plan, &in, wp, event);
}

const struct kiln_conv_algorithm kiln_conv_igemm = {"implicit-gemm", KILN_CONV_IMPLICIT_GEMM, igemm_unsupported,
                                                    igemm_prepare,   igemm_execute,           NULL};
