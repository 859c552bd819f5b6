/*
 * 2-D convolution: validate a descriptor, choose an algorithm (the caller's,
 * the profile's heuristic, or the fastest one timed in benchmark mode and
 * remembered in memory and in a find database on disk), and run it.
 */
#include "ops/conv2d.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/diag.h"
#include "ops/find.h"
#include "profiles/profile.h"

void kiln_conv2d_desc_init(kiln_conv2d_desc *desc, kiln_tensor_layout layout, size_t n, size_t c, size_t h, size_t w,
                           size_t k, size_t r, size_t s)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->layout = layout;
    desc->dtype = KILN_F32;
    desc->n = n, desc->c = c, desc->h = h, desc->w = w;
    desc->k = k, desc->r = r, desc->s = s;
    desc->stride_h = desc->stride_w = 1;
    desc->dilation_h = desc->dilation_w = 1;
    desc->groups = 1;
    desc->alpha = 1.0f;
    desc->activation = KILN_ACT_NONE;
    desc->leaky_slope = 0.01f;
    desc->algo = KILN_CONV_AUTO;
}

/* One spatial dimension: output size, or 0 with a detail on failure. */
static size_t out_dim(const char *axis, size_t in, size_t f, size_t stride, size_t dil, size_t pad0, size_t pad1)
{
    size_t extent = dil * (f - 1) + 1;
    if (pad0 >= extent || pad1 >= extent) {
        kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: %s padding %zu/%zu must be smaller than the filter extent %zu",
                   axis, pad0, pad1, extent);
        return 0;
    }
    if (in + pad0 + pad1 < extent) {
        kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                   "conv2d: the padded %s (%zu) is smaller than the filter extent %zu: no output pixel", axis,
                   in + pad0 + pad1, extent);
        return 0;
    }
    return (in + pad0 + pad1 - extent) / stride + 1;
}

static kiln_status validate(const kiln_conv2d_desc *d, struct kiln_conv_shape *s)
{
    if ((unsigned)d->layout > KILN_NHWC || (unsigned)d->dtype > KILN_BF16 || (unsigned)d->activation > KILN_ACT_GELU ||
        (unsigned)d->algo > KILN_CONV_IGEMM_MMA || (unsigned)d->math > KILN_MATH_TF32)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "conv2d: layout, dtype, activation, algo or math is not a valid value");
    const size_t sizes[] = {d->n, d->c,        d->h,        d->w,          d->k,          d->r,
                            d->s, d->stride_h, d->stride_w, d->dilation_h, d->dilation_w, d->groups};
    static const char *const names[] = {"n", "c",        "h",        "w",          "k",          "r",
                                        "s", "stride_h", "stride_w", "dilation_h", "dilation_w", "groups"};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (sizes[i] == 0)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: %s must be at least 1", names[i]);
        if (sizes[i] > INT_MAX / 4)
            return kiln_error(KILN_ERROR_UNSUPPORTED, "conv2d: %s = %zu is too large", names[i], sizes[i]);
    }
    if (d->c % d->groups || d->k % d->groups)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: groups = %zu must divide c = %zu and k = %zu",
                          d->groups, d->c, d->k);
    memset(s, 0, sizeof *s);
    s->d = *d;
    s->p = out_dim("height", d->h, d->r, d->stride_h, d->dilation_h, d->pad_top, d->pad_bottom);
    if (!s->p)
        return KILN_ERROR_INVALID_ARGUMENT;
    s->q = out_dim("width", d->w, d->s, d->stride_w, d->dilation_w, d->pad_left, d->pad_right);
    if (!s->q)
        return KILN_ERROR_INVALID_ARGUMENT;
    s->yh = s->p, s->yw = s->q;
    if (d->fused_maxpool) {
        if (s->p < 2 || s->q < 2)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                              "conv2d: the fused 2x2 max pool needs an output of at least 2x2, not %zux%zu", s->p,
                              s->q);
        s->yh = s->p / 2, s->yw = s->q / 2;
    }
    s->cg = d->c / d->groups, s->kg = d->k / d->groups;
    return KILN_SUCCESS;
}

kiln_status kiln_conv2d_output_size(const kiln_conv2d_desc *desc, size_t *p, size_t *q, size_t *y_h, size_t *y_w)
{
    kiln_error_clear();
    KILN_CHECK_ARG(desc);
    struct kiln_conv_shape s;
    kiln_status st = validate(desc, &s);
    if (st != KILN_SUCCESS)
        return st;
    if (p)
        *p = s.p;
    if (q)
        *q = s.q;
    if (y_h)
        *y_h = s.yh;
    if (y_w)
        *y_w = s.yw;
    return KILN_SUCCESS;
}

kiln_status kiln_conv_shape_of(const kiln_conv2d_desc *desc, struct kiln_conv_shape *s) { return validate(desc, s); }

/* The algorithms this build has, in the order `find` tries them. */
static const struct kiln_conv_algorithm *const algorithms[] = {
    &kiln_conv_igemm_mma, &kiln_conv_igemm,  &kiln_conv_winograd4, &kiln_conv_winograd2,
    &kiln_conv_gemm1x1,   &kiln_conv_im2col, &kiln_conv_direct,
};
enum { ALGORITHM_COUNT = sizeof algorithms / sizeof *algorithms };

static const struct kiln_conv_algorithm *algorithm_of(kiln_conv_algo algo)
{
    for (size_t i = 0; i < ALGORITHM_COUNT; i++)
        if (algorithms[i]->algo == (int)algo)
            return algorithms[i];
    return NULL;
}

/* Why algorithm a does not apply to s, NULL where it does (an entry
   without unsupported takes every shape, plan.h). */
const char *kiln_conv_why_not(const struct kiln_conv_algorithm *a, const struct kiln_conv_shape *s)
{
    return a->unsupported ? a->unsupported(s) : NULL;
}

static int usable(const struct kiln_conv_algorithm *a, const struct kiln_conv_shape *s)
{
    return !kiln_conv_why_not(a, s);
}

/* The profile's conv.algo: what the heuristic falls back on when none of
   its rules applies. NULL if the profile names none this build has. */
static const struct kiln_conv_algorithm *profile_default(const struct kiln_profile *profile)
{
    const kiln_conv_algo algo =
        (kiln_conv_algo)(kiln_profile_params(profile)->select.conv_algo + KILN_CONV_IMPLICIT_GEMM);
    for (size_t i = 0; i < ALGORITHM_COUNT; i++)
        if (algorithms[i]->algo == (int)algo)
            return algorithms[i];
    return NULL;
}

/* The profile's heuristic: depthwise and thin groups go direct, unless a
   thin input meets many filters over a large window (a stem: a GEMM with a
   deep enough reduction, a filter volume of 16 or more), which never
   applies on NCHW where implicit GEMM takes its CPU kernel; plain 1x1 on
   NCHW output planes of select.conv_1x1_direct_min_pixels or more direct,
   where implicit GEMM
   takes its CPU kernel (the batch aside: direct tiles a plane); else to GEMM, by implicit GEMM from
   select.conv_1x1_igemm_min_pixels on NCHW, and at any size on NHWC where
   implicit GEMM takes its CPU kernel (whose row variant reads NHWC in
   place) and the GEMM would pack the input on every call (16-bit storage,
   gemm.cpu.a_in_place 0); a strided 1x1 of one group on fewer NCHW pixels,
   where implicit GEMM takes its CPU kernel, to im2col (the input subsampled, then a GEMM
   that reads it in place); 3x3 with enough channels to Winograd, F(4x4) from 16 tiles of
   4x4 and F(2x2) from 16 tiles of 2x2; else the profile's conv.algo. Each
   threshold is a measured break-even (docs/convolution.md#heuristic). */
static const struct kiln_conv_algorithm *heuristic(const struct kiln_conv_shape *s, const kiln_context *ctx, char *why,
                                                   size_t why_size)
{
    const struct kiln_profile *profile = ctx->profile;
    const kiln_conv2d_desc *d = &s->d;
    const long wino_min = kiln_profile_params(profile)->select.conv_wino_min_channels;
    const long igemm_min = kiln_profile_params(profile)->select.conv_1x1_igemm_min_pixels;
    const long direct_min = kiln_profile_params(profile)->select.conv_1x1_direct_min_pixels;
    /* NHWC 1x1 layers by implicit GEMM where its CPU kernel runs them: the
       profile's route, on a context that runs vector kernels (the rule of
       igemm_prepare, src/ops/conv_igemm.c). */
    const int cpu_igemm =
        kiln_profile_params(profile)->select.conv_igemm_route == KILN_IGEMM_CPU && ctx->vector_kernels;
    /* ... unless the GEMM reads the input in place as well: fp32, with
       gemm.cpu.a_in_place (its straight tile's A, docs/gemm.md). */
    const int gemm_in_place = d->dtype == KILN_F32 && kiln_profile_params(profile)->gemm_cpu.a_in_place;
    const struct kiln_conv_algorithm *pick;
    /* A thin input goes direct: on NCHW where implicit GEMM takes its CPU
       kernel at any filter volume (MobileNet's stem, 27, and ResNet's, 147:
       docs/convolution.md#thin-inputs-with-many-filters), elsewhere below a
       volume of 16 or with fewer than 8 filters. */
    const int thin_direct = d->layout == KILN_NCHW && cpu_igemm;
    if (s->cg < 4 && (thin_direct || s->kg < 8 || s->cg * d->r * d->s < 16)) {
        pick = &kiln_conv_direct;
        snprintf(why, why_size,
                 "heuristic: %zu channels and %zu filters per group, a filter volume of %zu (depthwise, thin groups, "
                 "%s)",
                 s->cg, s->kg, s->cg * d->r * d->s,
                 thin_direct ? "a thin NCHW input: direct where implicit GEMM runs its CPU kernel"
                             : "a thin input's small window: direct below 16");
    } else if (usable(&kiln_conv_gemm1x1, s) && d->layout == KILN_NHWC && cpu_igemm && !gemm_in_place &&
               usable(&kiln_conv_igemm, s)) {
        pick = &kiln_conv_igemm;
        snprintf(why, why_size, "heuristic: 1x1 on NHWC, by implicit GEMM reading it in place");
    } else if (usable(&kiln_conv_gemm1x1, s) && d->layout == KILN_NCHW && cpu_igemm &&
               s->p * s->q >= (size_t)direct_min && usable(&kiln_conv_direct, s)) {
        pick = &kiln_conv_direct;
        snprintf(why, why_size, "heuristic: 1x1 on NCHW output planes of %ld pixels or more, direct", direct_min);
    } else if (usable(&kiln_conv_gemm1x1, s) && d->layout == KILN_NCHW && d->n * s->p * s->q >= (size_t)igemm_min &&
               usable(&kiln_conv_igemm, s)) {
        pick = &kiln_conv_igemm;
        snprintf(why, why_size, "heuristic: 1x1 on NCHW planes of %ld pixels or more, by implicit GEMM", igemm_min);
    } else if (usable(&kiln_conv_gemm1x1, s)) {
        pick = &kiln_conv_gemm1x1;
        snprintf(why, why_size, "heuristic: 1x1, stride 1, no padding is a GEMM");
    } else if (d->layout == KILN_NCHW && cpu_igemm && d->groups == 1 && kiln_conv_pointwise(d) && d->dilation_h == 1 &&
               d->dilation_w == 1 && d->n * s->p * s->q < (size_t)igemm_min && usable(&kiln_conv_im2col, s)) {
        pick = &kiln_conv_im2col;
        snprintf(why, why_size,
                 "heuristic: strided 1x1 on NCHW planes of fewer than %ld pixels: the subsampled input, "
                 "then a GEMM",
                 igemm_min);
    } else if (usable(&kiln_conv_winograd4, s) && d->c >= (size_t)wino_min && d->k >= (size_t)wino_min &&
               d->n * ((s->p + 3) / 4) * ((s->q + 3) / 4) >= 16) {
        pick = &kiln_conv_winograd4;
        snprintf(why, why_size, "heuristic: 3x3 stride 1, c, k >= %ld, 16 or more 4x4 output tiles", wino_min);
    } else if (usable(&kiln_conv_winograd2, s) && d->c >= (size_t)wino_min && d->k >= (size_t)wino_min &&
               d->n * ((s->p + 1) / 2) * ((s->q + 1) / 2) >= 16) {
        pick = &kiln_conv_winograd2;
        snprintf(why, why_size, "heuristic: 3x3 stride 1, c, k >= %ld, 16 or more 2x2 output tiles", wino_min);
    } else if ((pick = profile_default(profile)) && usable(pick, s)) {
        snprintf(why, why_size, "heuristic: the profile's default conv.algo, %s", pick->name);
    } else if (usable(&kiln_conv_igemm, s)) {
        pick = &kiln_conv_igemm;
        snprintf(why, why_size, "heuristic: implicit GEMM");
    } else {
        pick = &kiln_conv_direct;
        snprintf(why, why_size, "heuristic: direct (the only algorithm for this epilogue)");
    }
    return pick;
}

static struct kiln_dims shape_dims(const struct kiln_conv_shape *s)
{
    const kiln_conv2d_desc *d = &s->d;
    struct kiln_dims dims = {{0}};
    dims.v[KILN_DIM_M] = (long)(d->n * s->p * s->q);
    dims.v[KILN_DIM_N] = (long)s->kg;
    dims.v[KILN_DIM_K] = (long)(s->cg * d->r * d->s);
    dims.v[KILN_DIM_BATCH] = (long)d->n;
    dims.v[KILN_DIM_CHANNELS] = (long)s->cg;
    dims.v[KILN_DIM_FILTERS] = (long)s->kg;
    dims.v[KILN_DIM_PIXELS] = (long)(s->p * s->q);
    return dims;
}

kiln_status kiln_conv_desc_dims(const kiln_conv2d_desc *desc, struct kiln_dims *dims)
{
    struct kiln_conv_shape s;
    kiln_status st = validate(desc, &s);
    if (st == KILN_SUCCESS)
        *dims = shape_dims(&s);
    return st;
}

kiln_status kiln_conv_params(struct kiln_conv2d_plan *plan, enum kiln_group_id group, void *values)
{
    const struct kiln_dims dims = shape_dims(&plan->s);
    return kiln_plan_params(&plan->base, group, &dims, values);
}

void kiln_conv_options(const struct kiln_conv2d_plan *plan, struct kiln_options *o)
{
    const kiln_conv2d_desc *d = &plan->s.d;
    kiln_options_storage(o, d->dtype);
    kiln_options_add(o, "-DKILN_ACT=%d -DKILN_HAS_BIAS=%d -DKILN_HAS_Z=%d -DKILN_POOL=%d -DKILN_NHWC=%d",
                     (int)d->activation, d->has_bias != 0, d->beta != 0.0f, d->fused_maxpool != 0,
                     d->layout == KILN_NHWC);
}

int kiln_conv_weights_stale(struct kiln_conv2d_plan *plan, void *w)
{
    if (plan->s.d.constant_weights && plan->packed_from == w)
        return 0;
    plan->packed_from = plan->s.d.constant_weights ? w : NULL;
    return 1;
}

/* Whether ctx's backend compiles the algorithm's kernels: the tensor-core
   implicit GEMM where kiln_conv_mma_runs_on says; the others all with
   OpenCL's vector syntax, else (CUDA) implicit GEMM and direct. */
static int compiled_here(const kiln_context *ctx, const struct kiln_conv_algorithm *a)
{
    if (a == &kiln_conv_igemm_mma)
        return kiln_conv_mma_runs_on(ctx, NULL, 0);
    return ctx->vector_kernels || a == &kiln_conv_igemm || a == &kiln_conv_direct;
}

kiln_status kiln_conv_plan_with(kiln_context *ctx, const struct kiln_conv_shape *s,
                                const struct kiln_conv_algorithm *algorithm, const char *reason, kiln_conv2d_plan **out)
{
    const char *why_not = kiln_conv_why_not(algorithm, s);
    if (why_not)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "conv2d: %s does not apply: %s", algorithm->name, why_not);
    char cuda_why[256];
    if (algorithm == &kiln_conv_igemm_mma && !kiln_conv_mma_runs_on(ctx, cuda_why, sizeof cuda_why))
        return kiln_error(KILN_ERROR_UNSUPPORTED, "conv2d: %s: %s", algorithm->name, cuda_why);
    if (!compiled_here(ctx, algorithm))
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "conv2d: %s's kernels use OpenCL vector syntax, which the %s backend does not compile "
                          "(implicit-gemm and direct run there)",
                          algorithm->name, ctx->backend->name);
    if (!ctx->vector_kernels && s->d.fused_maxpool)
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "conv2d: the fused max pool takes pairs of columns as vectors, which the %s backend does not "
                          "compile",
                          ctx->backend->name);
    kiln_conv2d_plan *plan = kiln_plan_new(ctx, sizeof *plan, algorithm->name, algorithm->algo, reason);
    if (!plan)
        return KILN_ERROR_OUT_OF_MEMORY;
    plan->s = *s;
    plan->algorithm = algorithm;
    kiln_status st = algorithm->prepare(plan);
    if (st != KILN_SUCCESS) {
        kiln_conv2d_plan_destroy(plan);
        return st;
    }
    *out = plan;
    return KILN_SUCCESS;
}

/* Benchmark mode (src/ops/find.h): the key names the device and driver,
   the kernel sources and profile parameters, and the shape with its
   epilogue; each applicable algorithm is timed on scratch tensors. */
static void find_key(const kiln_context *ctx, const struct kiln_conv_shape *s, char *key, size_t size)
{
    const kiln_conv2d_desc *d = &s->d;
    snprintf(key, size,
             "conv-find 2\ndevice=%s\nversion=%s\ndriver=%s\nprofile=%s\ncode=%016" PRIx64
             "\nshape=%d %d %zu %zu %zu %zu %zu %zu %zu s%zu,%zu p%zu,%zu,%zu,%zu d%zu,%zu g%zu\n"
             "epilogue=bias%d z%d act%d pool%d\n",
             ctx->desc.name, ctx->desc.device_version, ctx->desc.driver_version, kiln_profile_name(ctx->profile),
             kiln_find_code_hash(ctx), (int)d->layout, (int)d->dtype, d->n, d->c, d->h, d->w, d->k, d->r, d->s,
             d->stride_h, d->stride_w, d->pad_top, d->pad_bottom, d->pad_left, d->pad_right, d->dilation_h,
             d->dilation_w, d->groups, d->has_bias != 0, d->beta != 0.0f, (int)d->activation, d->fused_maxpool != 0);
}

struct find_state {
    kiln_context *ctx;
    const struct kiln_conv_shape *s;
    kiln_buffer *t[5]; /* scratch x, w, bias, z, y */
    kiln_conv2d_plan *plan;
};

static int find_applies(void *cookie, size_t i)
{
    const struct find_state *f = cookie;
    return usable(algorithms[i], f->s) && compiled_here(f->ctx, algorithms[i]);
}

static kiln_status find_run(void *cookie)
{
    const struct find_state *f = cookie;
    return kiln_conv2d_plan_execute(f->plan, f->t[0], f->t[1], f->t[2], f->t[3], f->t[4], NULL);
}

static kiln_status find_time(void *cookie, size_t i, double *ms, int *built)
{
    struct find_state *f = cookie;
    *built = kiln_conv_plan_with(f->ctx, f->s, algorithms[i], "find", &f->plan) == KILN_SUCCESS;
    if (!*built)
        return KILN_SUCCESS;
    kiln_status st = kiln_find_median(f->ctx, find_run, f, ms);
    kiln_conv2d_plan_destroy(f->plan);
    f->plan = NULL;
    return st;
}

/* Scratch x, w, bias, z, y for timing, filled with small values. */
static kiln_status find_scratch(struct find_state *f)
{
    const struct kiln_conv_shape *s = f->s;
    const kiln_conv2d_desc *d = &s->d;
    size_t elem = kiln_dtype_size(d->dtype);
    size_t counts[5] = {d->n * d->c * d->h * d->w, d->k * s->cg * d->r * d->s, d->has_bias ? d->k : 0,
                        d->beta != 0.0f ? d->n * d->k * s->p * s->q : 0, d->n * d->k * s->yh * s->yw};
    for (int i = 0; i < 5; i++) {
        if (!counts[i])
            continue;
        size_t bytes = counts[i] * (i == 2 ? sizeof(float) : elem);
        kiln_status st = kiln_buffer_create(f->ctx, bytes, &f->t[i]);
        if (st == KILN_SUCCESS)
            st = kiln_buffer_fill_f32(f->t[i], 0, bytes / sizeof(float), 0.0078125f);
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

static kiln_status find_algorithm(kiln_context *ctx, const struct kiln_conv_shape *s,
                                  const struct kiln_conv_algorithm **pick, char *reason, size_t reason_size)
{
    const char *names[ALGORITHM_COUNT];
    for (size_t i = 0; i < ALGORITHM_COUNT; i++)
        names[i] = algorithms[i]->name;
    struct find_state f = {ctx, s, {0}, NULL};
    const struct kiln_find_candidates c = {names, ALGORITHM_COUNT, find_applies, find_time, &f};
    char key[1024];
    find_key(ctx, s, key, sizeof key);
    size_t i = 0;
    kiln_status st = find_scratch(&f);
    if (st == KILN_SUCCESS)
        st = kiln_find(ctx, key, &c, &i, reason, reason_size);
    for (int b = 0; b < 5; b++)
        kiln_buffer_destroy(f.t[b]);
    if (st == KILN_SUCCESS)
        *pick = algorithms[i];
    return st;
}

kiln_status kiln_conv2d_plan_create(kiln_context *ctx, const kiln_conv2d_desc *desc, kiln_conv2d_plan **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(desc);
    KILN_CHECK_ARG(out);
    struct kiln_conv_shape s;
    kiln_status st = validate(desc, &s);
    if (st != KILN_SUCCESS)
        return st;

    char reason[160];
    const struct kiln_conv_algorithm *algorithm;
    if (desc->algo != KILN_CONV_AUTO) {
        algorithm = algorithm_of(desc->algo);
        snprintf(reason, sizeof reason, "requested");
    } else {
        int find = desc->find || kiln_env_flag("KILN_FIND");
        algorithm = heuristic(&s, ctx, reason, sizeof reason);
        /* Tensor cores wherever they run and apply; else the CUDA backend's
           algorithms: implicit GEMM where it applies, else direct (which
           takes every shape and epilogue). */
        if (compiled_here(ctx, &kiln_conv_igemm_mma) && usable(&kiln_conv_igemm_mma, &s)) {
            algorithm = &kiln_conv_igemm_mma;
            snprintf(reason, sizeof reason, "%s: the tensor cores take 16-bit NHWC storage here", algorithm->name);
        } else if (!compiled_here(ctx, algorithm)) {
            algorithm = usable(&kiln_conv_igemm, &s) ? &kiln_conv_igemm : &kiln_conv_direct;
            snprintf(reason, sizeof reason, "%s: of the %s backend's two algorithms, the one that applies",
                     algorithm->name, ctx->backend->name);
        }
        if (find && (st = find_algorithm(ctx, &s, &algorithm, reason, sizeof reason)) != KILN_SUCCESS)
            return st;
    }
    st = kiln_conv_plan_with(ctx, &s, algorithm, reason, out);
    if (st == KILN_SUCCESS)
        kiln_log(KILN_LOG_INFO, "conv2d %zux%zux%zux%zu k%zu %zux%zu: %s, %s (%s)", s.d.n, s.d.c, s.d.h, s.d.w, s.d.k,
                 s.d.r, s.d.s, algorithm->name, (*out)->base.kernel, reason);
    return st;
}

/* The buffer must hold `elems` elements of `elem` bytes. */
static kiln_status check_tensor(const char *name, const kiln_buffer *buf, size_t elems, size_t elem)
{
    if (buf->size / elem < elems)
        return kiln_error(KILN_ERROR_OUT_OF_BOUNDS, "conv2d: %s needs %zu elements but its buffer holds %zu", name,
                          elems, buf->size / elem);
    return KILN_SUCCESS;
}

kiln_status kiln_conv2d_plan_execute(kiln_conv2d_plan *plan, const kiln_buffer *x, const kiln_buffer *w,
                                     const kiln_buffer *bias, const kiln_buffer *z, kiln_buffer *y, kiln_event **event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(plan);
    KILN_CHECK_ARG(x);
    KILN_CHECK_ARG(w);
    KILN_CHECK_ARG(y);
    const struct kiln_conv_shape *s = &plan->s;
    const kiln_conv2d_desc *d = &s->d;
    if (!d->has_bias != !bias)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: bias must be given %s",
                          d->has_bias ? "when has_bias is set" : "only when has_bias is set");
    if ((d->beta != 0.0f) != (z != NULL))
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: the residual z must be given %s",
                          d->beta != 0.0f ? "when beta != 0" : "only when beta != 0");
    const kiln_buffer *inputs[] = {x, w, bias, z};
    for (size_t i = 0; i < 4; i++) {
        if (!inputs[i])
            continue;
        if (inputs[i]->ctx != plan->base.ctx || y->ctx != plan->base.ctx)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: a buffer belongs to another context");
        /* z may be y (the residual added in place): every kernel reads an
           element of z before it stores that element of y, and nothing else
           stores it (tests/test_conv_epilogue.c, in-place residual). */
        if (inputs[i]->handle == y->handle && i != 3)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "conv2d: y must not be the same buffer as x, w or bias");
    }
    if (z && z->handle == y->handle && d->fused_maxpool)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "conv2d: z can be y only without the fused max pool (y is the pooled output, z is not)");
    size_t elem = kiln_dtype_size(d->dtype);
    kiln_status st = check_tensor("x", x, d->n * d->c * d->h * d->w, elem);
    if (st == KILN_SUCCESS)
        st = check_tensor("w", w, d->k * s->cg * d->r * d->s, elem);
    if (st == KILN_SUCCESS && bias)
        st = check_tensor("bias", bias, d->k, sizeof(float));
    if (st == KILN_SUCCESS && z)
        st = check_tensor("z", z, d->n * d->k * s->p * s->q, elem);
    if (st == KILN_SUCCESS)
        st = check_tensor("y", y, d->n * d->k * s->yh * s->yw, elem);
    if (st != KILN_SUCCESS)
        return st;

    const struct kiln_conv_args args = {x->handle, w->handle, bias ? bias->handle : NULL, z ? z->handle : NULL,
                                        y->handle};
    void *handle = NULL;
    st = plan->algorithm->execute(plan, &args, event ? &handle : NULL);
    return kiln_plan_event(&plan->base, st, handle, event);
}

kiln_status kiln_conv2d_plan_describe(const kiln_conv2d_plan *plan, kiln_conv2d_plan_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(plan);
    KILN_CHECK_ARG(info);
    KILN_PLAN_DESCRIBE(&plan->base, info, name);
    return KILN_SUCCESS;
}

void kiln_conv2d_plan_destroy(kiln_conv2d_plan *plan)
{
    if (plan && plan->algorithm && plan->algorithm->release)
        plan->algorithm->release(plan);
    kiln_plan_free(plan ? &plan->base : NULL);
}

kiln_status kiln_conv2d(kiln_context *ctx, const kiln_conv2d_desc *desc, const kiln_buffer *x, const kiln_buffer *w,
                        const kiln_buffer *bias, const kiln_buffer *z, kiln_buffer *y, kiln_event **event)
{
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(ctx, desc, &plan);
    if (st == KILN_SUCCESS)
        st = kiln_conv2d_plan_execute(plan, x, w, bias, z, y, event);
    kiln_conv2d_plan_destroy(plan);
    return st;
}

kiln_status kiln_fold_batchnorm(size_t k, size_t per_filter, float *weights, const float *bias, float *bias_out,
                                const float *scale, const float *shift, const float *mean, const float *var, float eps)
{
    kiln_error_clear();
    KILN_CHECK_ARG(weights);
    KILN_CHECK_ARG(bias_out);
    KILN_CHECK_ARG(scale);
    KILN_CHECK_ARG(shift);
    KILN_CHECK_ARG(mean);
    KILN_CHECK_ARG(var);
    if (k == 0 || per_filter == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_fold_batchnorm: k and per_filter must be at least 1");
    if (!(eps >= 0.0f))
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_fold_batchnorm: eps must be >= 0");
    for (size_t f = 0; f < k; f++)
        if (!(var[f] + eps > 0.0f))
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_fold_batchnorm: var[%zu] + eps is not positive", f);
    for (size_t f = 0; f < k; f++) {
        double g = scale[f] / sqrt((double)var[f] + eps);
        for (size_t i = 0; i < per_filter; i++)
            weights[f * per_filter + i] = (float)(weights[f * per_filter + i] * g);
        bias_out[f] = (float)(((bias ? bias[f] : 0.0) - mean[f]) * g + shift[f]);
    }
    return KILN_SUCCESS;
}
