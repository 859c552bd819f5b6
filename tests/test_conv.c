/*
 * 2-D convolution through the public API against the plain-C reference of
 * conv_ref.h: a shape table run over AUTO and every algorithm that applies
 * to the row (one test per row and algorithm, named by both), the epilogue
 * (bias, residual, each activation, the fused pool) on two shapes per
 * algorithm, UNSUPPORTED for each algorithm where it does not apply,
 * describe(), the one-shot call, events, plan reuse, batch-norm folding, the
 * find mode and its database, and tables of bad descriptors and bad
 * executions that must fail with a specific status and write nothing.
 *
 * Algorithms still being written answer UNSUPPORTED "not implemented"; their
 * rows are reported as skipped.
 *
 * Compile budget: every (algorithm, layout, dtype, epilogue switches) is one
 * POCL build, while shapes, alpha, beta and the leaky slope are run-time
 * arguments. So every shape row uses the same epilogue (bias, no residual,
 * no activation) and the epilogue tests put their switch sets on two shapes
 * that alternate layouts instead of running each set in both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conv_ref.h"
#include "test_util.h"

#define POISON_PLAN ((kiln_conv2d_plan *)(uintptr_t)0x5a5a)
#define POISON_SIZE ((size_t)0x5c5c5c5c)

static const char *algo_name(kiln_conv_algo algo)
{
    static const char *const names[] = {"auto",   "implicit-gemm", "winograd-2x2", "winograd-4x4",
                                        "direct", "im2col",        "gemm-1x1"};
    return (unsigned)algo < sizeof names / sizeof *names ? names[algo] : "?";
}

/* Whether `algo` applies to the shape, as the header documents it. */
static int applies(kiln_conv_algo algo, const kiln_conv2d_desc *d)
{
    if (d->fused_maxpool &&
        (algo == KILN_CONV_IMPLICIT_GEMM || algo == KILN_CONV_IM2COL || algo == KILN_CONV_GEMM_1X1))
        return 0; /* the fused pool: direct and Winograd only */
    switch (algo) {
    case KILN_CONV_WINOGRAD_2X2:
    case KILN_CONV_WINOGRAD_4X4:
        return d->r == 3 && d->s == 3 && d->stride_h == 1 && d->stride_w == 1 && d->dilation_h == 1 &&
               d->dilation_w == 1 && d->groups == 1;
    case KILN_CONV_GEMM_1X1:
        return d->r == 1 && d->s == 1 && d->stride_h == 1 && d->stride_w == 1 &&
               !(d->pad_top | d->pad_bottom | d->pad_left | d->pad_right);
    default:
        return 1;
    }
}

/* plan_create that must succeed, except that an algorithm not written yet
   (UNSUPPORTED, "not implemented") skips the test. */
static kiln_conv2d_plan *plan_or_skip(kiln_context *c, const kiln_conv2d_desc *d)
{
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(c, d, &plan);
    if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) {
        printf("# skipped: %s\n", kiln_last_error_detail());
        skip();
    }
    kt_assert_status(st, KILN_SUCCESS);
    assert_non_null(plan);
    return plan;
}

/* describe(): the requested algorithm (a concrete one for AUTO), its name, a
   kernel, the context's profile and a reason. Returns the algorithm run. */
static kiln_conv_algo assert_plan_describes(const kiln_conv2d_plan *plan, kiln_context *c, kiln_conv_algo algo)
{
    kiln_conv2d_plan_info info;
    memset(&info, 0, sizeof info);
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    if (algo == KILN_CONV_AUTO)
        assert_true(info.algo > KILN_CONV_AUTO && info.algo <= KILN_CONV_GEMM_1X1);
    else
        assert_int_equal(info.algo, algo);
    assert_true(info.name[0] && info.kernel[0] && info.profile[0] && info.reason[0]);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(c, &dev), KILN_SUCCESS);
    assert_string_equal(info.profile, dev.profile);
    return info.algo;
}

/* Plan, fill, execute, check against the reference; `label` names the case. */
static void run_case(kiln_context *c, const kiln_conv2d_desc *d, const char *label)
{
    kiln_conv2d_plan *plan = plan_or_skip(c, d);
    kiln_conv_algo ran = assert_plan_describes(plan, c, d->algo);
    struct cr_case t;
    cr_case_init(&t, c, d);
    cr_case_fill(&t, &kt_group_seed);
    kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, cr_algo_tol(ran, t.dims.k_eff), label);
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
}

/* ------------------------------------------------------------------------ */
/* The shape table                                                          */
/* ------------------------------------------------------------------------ */

enum { NCHW = KILN_NCHW, NHWC = KILN_NHWC };

/* One problem: pads are top, bottom, left, right; zero stride, dilation and
   groups mean 1. Every row runs with bias, alpha 1, no residual and no
   activation (one define set per algorithm, layout and dtype). */
struct row {
    const char *what;
    int layout;
    size_t n, c, h, w, k, r, s;
    size_t sh, sw, pad[4], dh, dw, groups;
    kiln_dtype dtype;
    int direct; /* run DIRECT on this row too (see below) */
    int pool;   /* fused max pool */
};

#define CONV(what_, lay, n_, c_, h_, w_, k_, r_, s_)                                                                 \
    .what = what_, .layout = lay, .n = n_, .c = c_, .h = h_, .w = w_, .k = k_, .r = r_, .s = s_
#define PAD(t, b, l, r) .pad = {t, b, l, r}
#define D .direct = 1

/*
 * Every row runs under AUTO, IMPLICIT_GEMM and IM2COL, and under the
 * algorithms that apply to it: GEMM_1X1 on 1x1 stride-1 unpadded rows, both
 * Winograds on 3x3 stride-1 undilated ungrouped rows. Those build one kernel
 * per define set, shared by all rows. DIRECT builds one per shape (filter,
 * strides, dilation, width and padding are compile-time constants), about
 * 1 s under a cold POCL cache and 3 s for the 7x7 stem, so it runs on the
 * rows marked D: every row AUTO sends to it (fewer than 4 channels and
 * 8 filters per group: depthwise, the single pixel), the stems, plus one
 * row for each of
 * asymmetric padding, uneven strides, uneven dilation, a 1-wide filter,
 * groups and a strided 1x1, and the NCHW shape of the epilogue tests, which
 * the describe, find and constant-weights tests reuse. The 7x7 stems are
 * 16x16 because the direct NCHW build grows with the width (8 s at 32x32).
 *
 * Winograd tiles: F(2x2) outputs 2x2 and F(4x4) 4x4 per tile, so outputs of
 * 5, 6, 7, 9, 13 and 17 leave partial tiles; the implicit-GEMM tile is 6
 * filters by 32 pixels here (x86-64-avx512), so k of 7, 9, 12 and 24 and odd
 * pixel counts leave partial tiles too; its gather copies whole vectors of
 * input rows at strides 1 and 2 where a run of pixels is 16 or more wide and
 * clear of the padding (the "wide" rows), and small images split the
 * filters over several work-groups (every row with fewer than 16 tiles).
 */
static const struct row rows[] = {
    {CONV("1x1", NCHW, 1, 16, 8, 8, 24, 1, 1)},
    {CONV("1x1", NHWC, 1, 16, 8, 8, 24, 1, 1)},
    {CONV("1x1 64ch", NCHW, 1, 64, 14, 14, 64, 1, 1)},
    {CONV("1x1 n2", NCHW, 2, 16, 7, 9, 24, 1, 1)}, /* implicit-GEMM tiles cross the image boundary */
    {CONV("1x1 64ch", NHWC, 2, 64, 7, 7, 64, 1, 1)},
    {CONV("1x1 stride2", NCHW, 1, 8, 9, 9, 16, 1, 1), .sh = 2, .sw = 2},
    {CONV("1x1 stride2", NHWC, 1, 8, 9, 9, 16, 1, 1), .sh = 2, .sw = 2, D},
    {CONV("3x3 pad0", NCHW, 1, 8, 10, 10, 16, 3, 3)},
    {CONV("3x3 pad0", NHWC, 1, 8, 10, 10, 16, 3, 3)},
    {CONV("3x3 pad1", NCHW, 1, 8, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1", NHWC, 1, 8, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad2", NCHW, 1, 4, 7, 7, 8, 3, 3), PAD(2, 2, 2, 2)},
    {CONV("3x3 pad2", NHWC, 1, 4, 7, 7, 8, 3, 3), PAD(2, 2, 2, 2)},
    {CONV("3x3 pad t1b0l2r1", NCHW, 1, 5, 9, 11, 7, 3, 3), PAD(1, 0, 2, 1), D},
    {CONV("3x3 pad t1b0l2r1", NHWC, 1, 5, 9, 11, 7, 3, 3), PAD(1, 0, 2, 1)},
    {CONV("3x3 pad t0b2l0r1", NCHW, 1, 6, 8, 9, 9, 3, 3), PAD(0, 2, 0, 1)},
    {CONV("3x3 pad1 out5x7", NCHW, 1, 8, 5, 7, 8, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 out6x6", NHWC, 1, 8, 6, 6, 8, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 odd 13x17", NCHW, 1, 7, 13, 17, 9, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 odd 13x17", NHWC, 1, 7, 13, 17, 9, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 n2", NCHW, 2, 8, 9, 11, 12, 3, 3), PAD(1, 1, 1, 1), D}, /* = epilogue_shapes[0][0] */
    {CONV("3x3 pad1 n3", NCHW, 3, 8, 9, 10, 12, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 n3", NHWC, 3, 8, 9, 10, 12, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 64ch", NCHW, 1, 64, 16, 16, 64, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 64ch", NHWC, 1, 64, 14, 14, 64, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 c72 k56", NCHW, 2, 72, 9, 9, 56, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 stride2 pad1", NCHW, 1, 8, 15, 15, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 stride2 pad1", NHWC, 1, 8, 15, 15, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 stride1x2 pad1", NHWC, 2, 6, 9, 12, 8, 3, 3), PAD(1, 1, 1, 1), .sw = 2, D},
    {CONV("3x3 stride2 pad1 wide", NCHW, 1, 8, 9, 41, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("1x1 stride2 wide", NCHW, 1, 8, 5, 40, 12, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 dilation2 pad2", NCHW, 1, 8, 13, 13, 8, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 2},
    {CONV("3x3 dilation2 pad2", NHWC, 1, 8, 13, 13, 8, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 2},
    {CONV("3x3 dilation2x3 pad0", NCHW, 1, 4, 11, 14, 6, 3, 3), .dh = 2, .dw = 3, D},
    {CONV("3x1 pad1,0", NCHW, 1, 8, 10, 9, 8, 3, 1), PAD(1, 1, 0, 0), D},
    {CONV("1x3 pad0,1", NHWC, 1, 8, 10, 9, 8, 1, 3), PAD(0, 0, 1, 1)},
    {CONV("5x5 pad2", NCHW, 1, 6, 11, 11, 8, 5, 5), PAD(2, 2, 2, 2)},
    {CONV("5x5 pad2", NHWC, 1, 6, 11, 11, 8, 5, 5), PAD(2, 2, 2, 2)},
    {CONV("7x7 stride2 pad3 stem", NCHW, 1, 3, 16, 16, 32, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2, D},
    {CONV("7x7 stride2 pad3 stem", NHWC, 1, 3, 16, 16, 32, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2, D},
    {CONV("3x3 groups2", NCHW, 1, 8, 10, 10, 12, 3, 3), PAD(1, 1, 1, 1), .groups = 2, D},
    {CONV("3x3 groups2", NHWC, 1, 8, 10, 10, 12, 3, 3), PAD(1, 1, 1, 1), .groups = 2},
    {CONV("3x3 groups4", NCHW, 2, 16, 8, 9, 8, 3, 3), PAD(1, 1, 1, 1), .groups = 4},
    {CONV("3x3 groups4", NHWC, 2, 16, 8, 9, 8, 3, 3), PAD(1, 1, 1, 1), .groups = 4},
    {CONV("1x1 groups4", NCHW, 1, 16, 6, 7, 32, 1, 1), .groups = 4},
    {CONV("3x3 depthwise", NCHW, 1, 16, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, D},
    {CONV("3x3 depthwise", NHWC, 1, 16, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, D},
    {CONV("3x3 depthwise stride2", NCHW, 2, 32, 14, 13, 32, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .groups = 32, D},
    {CONV("5x5 depthwise x2", NHWC, 1, 8, 9, 9, 16, 5, 5), PAD(2, 2, 2, 2), .groups = 8, D},
    {CONV("single pixel", NCHW, 1, 1, 1, 1, 1, 1, 1), D},
    /* Direct NCHW row tiles (cl/common/window.h) with the CPU profiles'
       vectors of 8 (16 on amd-zen4) and work-groups of 16: 128 or more
       planes of at most 16 rows make one row tile per plane, whose rows the
       kernel knows; rows narrower than a vector then load clamped into the
       plane and the plane's last row stores a vector made of its last
       rows' values. */
    {CONV("3x3 depthwise 7x7 one row tile", NCHW, 1, 128, 7, 7, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128, D},
    {CONV("3x3 depthwise stride2 14x14 one row tile", NCHW, 1, 128, 14, 14, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128, D},
    {CONV("3x3 depthwise 5x6 one row tile", NCHW, 2, 64, 5, 6, 64, 3, 3), PAD(1, 1, 1, 1), .groups = 64, D},
    {CONV("1x3 depthwise 1x3 plane under a vector", NCHW, 1, 128, 1, 3, 128, 1, 3), PAD(0, 0, 1, 1), .groups = 128,
     D},
    {CONV("3x3 depthwise 12x20 one row tile, last tile shifted", NCHW, 1, 128, 12, 20, 128, 3, 3), PAD(1, 1, 1, 1),
     .groups = 128, D},
    {CONV("3x3 depthwise stride2 28x28 one row tile", NCHW, 1, 128, 28, 28, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128, D},
    {CONV("3x3 two filters per group 7x7 one row tile", NCHW, 1, 128, 7, 7, 256, 3, 3), PAD(1, 1, 1, 1),
     .groups = 128, D},
    {CONV("3x3 depthwise 6x6 one row tile pool", NCHW, 1, 128, 6, 6, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128, D,
     .pool = 1},
    /* Stride 2 with interior tiles: the row's 2 * VW columns loaded once
       and the window's columns shuffled out of them (3, 5 and 1 wide), and
       dilated, a load per window column. Output rows of 48, so no tile
       overlaps an interior one (an overlapping tile would rewrite its
       lanes). */
    {CONV("3x3 depthwise stride2 16x96", NCHW, 1, 8, 16, 96, 8, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .groups = 8,
     D},
    {CONV("5x5 depthwise stride2 16x96", NCHW, 1, 8, 16, 96, 8, 5, 5), PAD(2, 2, 2, 2), .sh = 2, .sw = 2, .groups = 8,
     D},
    {CONV("1x1 stride2 16x96", NCHW, 1, 8, 16, 96, 16, 1, 1), .sh = 2, .sw = 2, D},
    {CONV("3x3 depthwise stride2 dilation2 16x96", NCHW, 1, 4, 16, 96, 4, 3, 3), PAD(2, 2, 2, 2), .sh = 2, .sw = 2,
     .dh = 2, .dw = 2, .groups = 4, D},
    /* MobileNet v1's last depthwise layers. */
    {CONV("3x3 depthwise 14x14 mobilenet", NCHW, 1, 512, 14, 14, 512, 3, 3), PAD(1, 1, 1, 1), .groups = 512, D},
    {CONV("3x3 depthwise 7x7 mobilenet", NCHW, 1, 1024, 7, 7, 1024, 3, 3), PAD(1, 1, 1, 1), .groups = 1024, D},
    /* fp16 storage, fp32 arithmetic. */
    {CONV("3x3 pad1", NHWC, 1, 16, 10, 10, 16, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("3x3 pad1 64ch", NHWC, 1, 64, 10, 10, 64, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("1x1", NHWC, 2, 16, 7, 9, 24, 1, 1), .dtype = KILN_F16},
    {CONV("3x3 pad1 wide", NCHW, 1, 8, 6, 40, 8, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("3x3 stride2 pad1 wide", NCHW, 1, 8, 7, 41, 8, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .dtype = KILN_F16},
    {CONV("3x3 depthwise", NCHW, 1, 16, 9, 11, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, .dtype = KILN_F16, D},
    {CONV("3x3 depthwise 7x7 one row tile", NCHW, 1, 128, 7, 7, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128,
     .dtype = KILN_F16, D},
};

static kiln_conv2d_desc desc_of(const struct row *r, kiln_conv_algo algo)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, (kiln_tensor_layout)r->layout, r->n, r->c, r->h, r->w, r->k, r->r, r->s);
    d.stride_h = r->sh ? r->sh : 1, d.stride_w = r->sw ? r->sw : 1;
    d.pad_top = r->pad[0], d.pad_bottom = r->pad[1], d.pad_left = r->pad[2], d.pad_right = r->pad[3];
    d.dilation_h = r->dh ? r->dh : 1, d.dilation_w = r->dw ? r->dw : 1;
    d.groups = r->groups ? r->groups : 1;
    d.dtype = r->dtype;
    d.fused_maxpool = r->pool;
    d.has_bias = 1;
    d.algo = algo;
    return d;
}

static void row_name(char *buf, size_t size, const struct row *r, kiln_conv_algo algo)
{
    kiln_conv2d_desc d = desc_of(r, algo);
    snprintf(buf, size, "%s %s %s n%zu c%zu %zux%zu k%zu %zux%zu s%zu,%zu p%zu,%zu,%zu,%zu d%zu,%zu g%zu %s",
             algo_name(algo), r->what, r->layout == NHWC ? "nhwc" : "nchw", d.n, d.c, d.h, d.w, d.k, d.r, d.s,
             d.stride_h, d.stride_w, d.pad_top, d.pad_bottom, d.pad_left, d.pad_right, d.dilation_h, d.dilation_w,
             d.groups, d.dtype == KILN_F16 ? "f16" : "f32");
}

struct row_test {
    const struct row *row;
    kiln_conv_algo algo;
    char name[192];
};

static void test_row(void **state)
{
    const struct row_test *rt = *state;
    kiln_conv2d_desc d = desc_of(rt->row, rt->algo);
    run_case(kt_ctx, &d, rt->name);
}

/* ------------------------------------------------------------------------ */
/* Epilogues                                                                */
/* ------------------------------------------------------------------------ */

/* Algorithms as bits, for the epilogue table. */
#define B(algo) (1u << (algo))
#define ON_GEMMS (B(KILN_CONV_IMPLICIT_GEMM) | B(KILN_CONV_IM2COL) | B(KILN_CONV_GEMM_1X1))
#define ON_ACTS (B(KILN_CONV_IMPLICIT_GEMM) | B(KILN_CONV_GEMM_1X1))
#define ON_WINO (B(KILN_CONV_WINOGRAD_2X2) | B(KILN_CONV_WINOGRAD_4X4))
#define ON_ALL (ON_GEMMS | ON_WINO | B(KILN_CONV_DIRECT))
#define ON_POOL (ON_WINO | B(KILN_CONV_DIRECT)) /* the algorithms with the fused pool */

/*
 * Switch sets of the epilogue, and the algorithms each runs on. Each set is
 * one kernel build per algorithm: about 0.3 s for implicit GEMM and the GEMM
 * that im2col and GEMM-1x1 share, 1 s for direct and the Winograds. Every
 * algorithm runs the structural cases (residual without bias, bias with
 * residual, pool after the identity and after ReLU); the rows add bias
 * without residual. The activation is one function (cl/common/epilogue.h)
 * that every kernel includes, and what differs per algorithm is only where
 * it is applied, so each activation runs on implicit GEMM, on the GEMM
 * epilogue (through GEMM-1x1; im2col adds only its own unfolding kernel,
 * which has no epilogue) and on one of direct and the Winograds (direct
 * with GELU alone builds for 2.2 s).
 * alpha and beta are run-time values: alpha 8 with ReLU6 drives many outputs
 * past 6 so the clamp is exercised.
 */
static const struct epilogue {
    const char *name;
    int bias;
    float alpha, beta;
    kiln_activation act;
    int pool;
    unsigned algos;
} epilogues[] = {
    {"alpha1.5", 0, 1.5f, 0.0f, KILN_ACT_NONE, 0, ON_GEMMS},
    {"bias alpha1.5", 1, 1.5f, 0.0f, KILN_ACT_NONE, 0, ON_GEMMS | ON_WINO}, /* the rows' define set */
    {"residual", 0, 1.5f, 0.5f, KILN_ACT_NONE, 0, ON_ALL},
    {"bias+residual", 1, 1.5f, 0.5f, KILN_ACT_NONE, 0, ON_GEMMS},
    {"bias+residual relu", 1, 1.5f, 0.5f, KILN_ACT_RELU, 0, ON_ACTS},
    {"bias+residual relu6 alpha8", 1, 8.0f, 0.5f, KILN_ACT_RELU6, 0, ON_ACTS | B(KILN_CONV_DIRECT)},
    {"bias+residual leaky0.1", 1, 1.5f, 0.5f, KILN_ACT_LEAKY_RELU, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_2X2)},
    {"bias+residual sigmoid", 1, 1.5f, 0.5f, KILN_ACT_SIGMOID, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_4X4)},
    {"bias+residual tanh", 1, 1.5f, 0.5f, KILN_ACT_TANH, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_2X2)},
    {"bias+residual gelu", 1, 1.5f, 0.5f, KILN_ACT_GELU, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_4X4)},
    {"bias+residual pool", 1, 1.5f, 0.5f, KILN_ACT_NONE, 1, ON_POOL},
    {"bias+residual relu pool", 1, 1.5f, 0.5f, KILN_ACT_RELU, 1, ON_POOL},
    {"pool", 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, ON_POOL},
};

/* The two shapes of each algorithm: 3x3 pad 1 (every algorithm but
   GEMM-1x1) or 1x1, odd output sizes (partial tiles, a pool that drops a row
   and a column) in NCHW with a batch, and even ones in NHWC. Epilogue i runs
   on shape i % 2, so every switch set is built once per algorithm and both
   layouts see the epilogue and the pool. */
static const struct row epilogue_shapes[2][2] = {
    {{CONV("3x3 pad1", NCHW, 2, 8, 9, 11, 12, 3, 3), PAD(1, 1, 1, 1)},
     {CONV("3x3 pad1", NHWC, 1, 12, 8, 8, 8, 3, 3), PAD(1, 1, 1, 1)}},
    {{CONV("1x1", NCHW, 2, 8, 9, 11, 12, 1, 1)}, {CONV("1x1", NHWC, 1, 12, 8, 8, 8, 1, 1)}},
};

/* Direct NCHW planes in one row tile with rows narrower than a vector (on
   the CPU profiles): the residual loads clamped into the plane, and the
   plane's last row stores a vector of several rows' values. Every direct
   epilogue runs on one of the two. */
static const struct row plane_shapes[2] = {
    {CONV("3x3 depthwise 7x7 one row tile", NCHW, 1, 128, 7, 7, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128},
    {CONV("3x3 depthwise stride2 14x14 one row tile", NCHW, 1, 128, 14, 14, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128},
};

struct epilogue_test {
    const struct epilogue *e;
    const struct row *shape;
    kiln_conv_algo algo;
    char name[192];
};

static void test_epilogue(void **state)
{
    const struct epilogue_test *et = *state;
    kiln_conv2d_desc d = desc_of(et->shape, et->algo);
    d.has_bias = et->e->bias;
    d.alpha = et->e->alpha;
    d.beta = et->e->beta;
    d.activation = et->e->act;
    d.leaky_slope = 0.1f;
    d.fused_maxpool = et->e->pool;
    run_case(kt_ctx, &d, et->name);
}

/* fp16 with the residual (stored as fp16) and the pool, on the algorithms
   that take a 3x3, in NCHW (the 3x3 fp16 rows are NHWC): one more define
   set each. */
static void test_f16_epilogue(void **state)
{
    const kiln_conv_algo *algo = *state;
    kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][0], *algo);
    d.dtype = KILN_F16;
    d.alpha = 1.5f, d.beta = 0.5f;
    d.activation = KILN_ACT_RELU;
    d.fused_maxpool = 1;
    if (!applies(*algo, &d))
        d.fused_maxpool = 0; /* implicit-gemm and im2col have no fused pool */
    char label[96];
    snprintf(label, sizeof label, "%s f16 bias+residual relu%s", algo_name(*algo), d.fused_maxpool ? " pool" : "");
    run_case(kt_ctx, &d, label);
}

/* ------------------------------------------------------------------------ */
/* Algorithms where they do not apply                                       */
/* ------------------------------------------------------------------------ */

/* plan_create and the one-shot call both answer UNSUPPORTED with a detail,
   leave the plan pointer alone and write nothing. */
static void assert_unsupported(const kiln_conv2d_desc *d, const char *what)
{
    kiln_conv2d_plan *plan = POISON_PLAN;
    kiln_status st = kiln_conv2d_plan_create(kt_ctx, d, &plan);
    if (st != KILN_ERROR_UNSUPPORTED)
        fail_msg("%s %s: plan_create returned %s (%s), not UNSUPPORTED", algo_name(d->algo), what,
                 kiln_status_string(st), kiln_last_error_detail());
    kt_assert_status(st, KILN_ERROR_UNSUPPORTED);
    assert_ptr_equal(plan, POISON_PLAN);
    printf("# %s %s: %s\n", algo_name(d->algo), what, kiln_last_error_detail());

    struct cr_case t;
    cr_case_init(&t, kt_ctx, d);
    cr_case_fill(&t, &kt_group_seed);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_conv2d(kt_ctx, d, t.buf[CR_X], t.buf[CR_W], t.buf[CR_BIAS], t.buf[CR_Z], t.buf[CR_Y], &ev),
                     KILN_ERROR_UNSUPPORTED);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    unsigned char *back = malloc(t.len[CR_Y] * kt_elem_size(d->dtype));
    assert_non_null(back);
    kt_assert_status(kiln_buffer_read(t.buf[CR_Y], 0, t.len[CR_Y] * kt_elem_size(d->dtype), back), KILN_SUCCESS);
    assert_memory_equal(back, t.raw[CR_Y], t.len[CR_Y] * kt_elem_size(d->dtype));
    free(back);
    cr_case_free(&t);
}

static const struct row winograd_misfits[] = {
    {CONV("5x5", NCHW, 1, 8, 9, 9, 8, 5, 5), PAD(2, 2, 2, 2)},
    {CONV("1x1", NCHW, 1, 8, 9, 9, 8, 1, 1)},
    {CONV("3x1", NCHW, 1, 8, 9, 9, 8, 3, 1)},
    {CONV("stride2", NHWC, 1, 8, 9, 9, 8, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("stride 1x2", NCHW, 1, 8, 9, 9, 8, 3, 3), .sw = 2},
    {CONV("dilation2", NCHW, 1, 8, 9, 9, 8, 3, 3), .dh = 2, .dw = 2},
    {CONV("dilation 2x1", NCHW, 1, 8, 9, 9, 8, 3, 3), .dh = 2},
    {CONV("groups2", NCHW, 1, 8, 9, 9, 8, 3, 3), .groups = 2},
    {CONV("depthwise", NHWC, 1, 8, 9, 9, 8, 3, 3), .groups = 8},
};

static const struct row gemm1x1_misfits[] = {
    {CONV("3x3", NCHW, 1, 8, 9, 9, 8, 3, 3)},
    {CONV("1x3", NCHW, 1, 8, 9, 9, 8, 1, 3)},
    {CONV("stride2", NCHW, 1, 8, 9, 9, 8, 1, 1), .sh = 2, .sw = 2},
    {CONV("stride 2x1", NHWC, 1, 8, 9, 9, 8, 1, 1), .sh = 2},
};

/* The fused pool on the algorithms without it (1x1, so gemm-1x1 applies
   otherwise). */
static const struct row pool_misfits[] = {
    {CONV("1x1 pool", NCHW, 1, 8, 9, 9, 8, 1, 1), .pool = 1},
    {CONV("1x1 pool", NHWC, 2, 8, 6, 7, 8, 1, 1), .pool = 1},
};

struct misfit_test {
    kiln_conv_algo algo;
    const struct row *rows;
    size_t count;
};

static void test_unsupported(void **state)
{
    const struct misfit_test *m = *state;
    /* An algorithm not written yet answers "not implemented" everywhere. */
    kiln_conv2d_desc probe = desc_of(&epilogue_shapes[m->algo == KILN_CONV_GEMM_1X1][0], m->algo);
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(kt_ctx, &probe, &plan);
    if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) {
        printf("# skipped: %s\n", kiln_last_error_detail());
        skip();
    }
    if (st == KILN_SUCCESS)
        kiln_conv2d_plan_destroy(plan);
    for (size_t i = 0; i < m->count; i++) {
        kiln_conv2d_desc d = desc_of(&m->rows[i], m->algo);
        assert_false(applies(m->algo, &d));
        assert_unsupported(&d, m->rows[i].what);
    }
}

/* ------------------------------------------------------------------------ */
/* Descriptor defaults, output size, describe, one-shot, events, reuse      */
/* ------------------------------------------------------------------------ */

static void test_desc_init(void **state)
{
    (void)state;
    for (int lay = NCHW; lay <= NHWC; lay++) {
        kiln_conv2d_desc d;
        memset(&d, 0xa5, sizeof d);
        kiln_conv2d_desc_init(&d, (kiln_tensor_layout)lay, 2, 3, 5, 7, 11, 3, 1);
        assert_int_equal(d.layout, lay);
        assert_int_equal(d.dtype, KILN_F32);
        assert_true(d.n == 2 && d.c == 3 && d.h == 5 && d.w == 7 && d.k == 11 && d.r == 3 && d.s == 1);
        assert_true(d.stride_h == 1 && d.stride_w == 1 && d.dilation_h == 1 && d.dilation_w == 1);
        assert_true(d.pad_top == 0 && d.pad_bottom == 0 && d.pad_left == 0 && d.pad_right == 0);
        assert_int_equal(d.groups, 1);
        assert_true(d.alpha == 1.0f && d.beta == 0.0f);
        assert_int_equal(d.has_bias, 0);
        assert_int_equal(d.activation, KILN_ACT_NONE);
        assert_int_equal(d.fused_maxpool, 0);
        assert_int_equal(d.algo, KILN_CONV_AUTO);
        assert_int_equal(d.find, 0);
        assert_int_equal(d.constant_weights, 0);
    }
}

static void test_output_size(void **state)
{
    (void)state;
    static const struct {
        struct row r;
        int pool;
        size_t p, q, yh, yw;
    } cases[] = {
        {{CONV("", NCHW, 1, 1, 7, 9, 1, 3, 3)}, 0, 5, 7, 5, 7},
        {{CONV("", NCHW, 1, 1, 7, 9, 1, 3, 3), PAD(1, 0, 2, 1)}, 0, 6, 10, 6, 10},
        {{CONV("", NHWC, 1, 1, 224, 224, 1, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2}, 0, 112, 112, 112, 112},
        {{CONV("", NCHW, 1, 1, 13, 12, 1, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 3}, 0, 13, 10, 13, 10},
        {{CONV("", NCHW, 1, 1, 8, 8, 1, 3, 3), .sh = 3, .sw = 2}, 0, 2, 3, 2, 3},
        {{CONV("", NCHW, 1, 1, 9, 11, 1, 3, 3), PAD(1, 1, 1, 1)}, 1, 9, 11, 4, 5},
        {{CONV("", NHWC, 1, 1, 3, 3, 1, 2, 2)}, 1, 2, 2, 1, 1},
        {{CONV("", NCHW, 1, 1, 1, 1, 1, 1, 1)}, 0, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_conv2d_desc d = desc_of(&cases[i].r, KILN_CONV_AUTO);
        d.fused_maxpool = cases[i].pool;
        size_t p = POISON_SIZE, q = POISON_SIZE, yh = POISON_SIZE, yw = POISON_SIZE;
        kt_assert_status(kiln_conv2d_output_size(&d, &p, &q, &yh, &yw), KILN_SUCCESS);
        struct cr_dims m = cr_dims_of(&d);
        assert_true(m.p == cases[i].p && m.q == cases[i].q && m.yh == cases[i].yh && m.yw == cases[i].yw);
        if (p != cases[i].p || q != cases[i].q || yh != cases[i].yh || yw != cases[i].yw)
            fail_msg("case %zu: output %zux%zu stored %zux%zu, expected %zux%zu stored %zux%zu", i, p, q, yh, yw,
                     cases[i].p, cases[i].q, cases[i].yh, cases[i].yw);
    }
    size_t p = POISON_SIZE;
    kt_assert_status(kiln_conv2d_output_size(NULL, &p, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_true(p == POISON_SIZE);
}

static void test_describe(void **state)
{
    (void)state;
    static const kiln_conv_algo algos[] = {KILN_CONV_AUTO,   KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL,
                                           KILN_CONV_DIRECT, KILN_CONV_WINOGRAD_2X2,  KILN_CONV_WINOGRAD_4X4};
    size_t described = 0;
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][0], algos[i]); /* 3x3 pad 1 */
        kiln_conv2d_plan *plan = NULL;
        kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented"))
            continue;
        kt_assert_status(st, KILN_SUCCESS);
        assert_plan_describes(plan, kt_ctx, algos[i]);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        if (algos[i] != KILN_CONV_AUTO)
            assert_string_equal(info.name, algo_name(algos[i]));
        assert_non_null(strstr(info.reason, algos[i] == KILN_CONV_AUTO ? "heuristic" : "requested"));
        printf("# %s: %s %s [%s] profile %s, %s, workspace %zu bytes\n", algo_name(algos[i]), info.name, info.kernel,
               info.params, info.profile, info.reason, info.workspace_bytes);
        kiln_conv2d_plan_destroy(plan);
        described++;
    }
    assert_true(described > 0);

    kiln_conv2d_plan_info info, before;
    memset(&info, 0x3c, sizeof info);
    before = info;
    kt_assert_status(kiln_conv2d_plan_describe(NULL, &info), KILN_ERROR_INVALID_ARGUMENT);
    assert_memory_equal(&info, &before, sizeof info);
    kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][0], KILN_CONV_AUTO);
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kt_assert_status(kiln_conv2d_plan_describe(plan, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_conv2d_plan_destroy(plan);
    kiln_conv2d_plan_destroy(NULL);
}

/* The profile's conv.algo is what AUTO falls back on where no rule of the
   heuristic applies (a 3x3 stride-2 layer with 8 channels). A profile
   directory adds a child of the matched profile whose default is im2col. */
static void test_profile_default_algo(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    char dir[] = "/tmp/kiln-conv-algo-XXXXXX", path[sizeof dir + 32];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/conv-algo-im2col.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"name\": \"conv-algo-im2col\", \"parent\": \"%s\", \"source\": \"test_conv\",\n"
               " \"match\": {\"type\": \"cpu\", \"name\": [\"no device has this name\"]},\n"
               " \"kernels\": {\"conv\": {\"algo\": \"im2col\"}}}\n",
            dev.profile);
    fclose(f);
    setenv("KILN_PROFILE_DIR", dir, 1);
    kiln_context_options o = {.device = "0", .profile = "conv-algo-im2col", .disable_disk_cache = 1};
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&o, &ctx);
    unsetenv("KILN_PROFILE_DIR");
    remove(path);
    rmdir(dir);
    kt_assert_status(st, KILN_SUCCESS);

    const struct row stride2 = {CONV("3x3 stride2 pad1", NCHW, 1, 8, 15, 15, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
                                .sw = 2};
    kiln_context *contexts[] = {kt_ctx, ctx};
    for (int i = 0; i < 2; i++) {
        kiln_conv2d_desc d = desc_of(&stride2, KILN_CONV_AUTO);
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(contexts[i], &d, &plan), KILN_SUCCESS);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        assert_string_equal(info.name, i ? "im2col" : "implicit-gemm");
        assert_non_null(strstr(info.reason, "conv.algo"));
        kiln_conv2d_plan_destroy(plan);
    }
    kiln_context_destroy(ctx);
}

/* kiln_conv2d with and without an event, in both layouts. */
static void test_one_shot(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][i], KILN_CONV_AUTO);
        d.alpha = 1.5f, d.beta = 0.5f, d.activation = KILN_ACT_RELU;
        struct cr_case t;
        cr_case_init(&t, kt_ctx, &d);
        for (int with_event = 0; with_event < 2; with_event++) {
            cr_case_fill(&t, &kt_group_seed);
            kiln_event *ev = KT_POISON_EVENT;
            kt_assert_status(kiln_conv2d(kt_ctx, &d, t.buf[CR_X], t.buf[CR_W], t.buf[CR_BIAS], t.buf[CR_Z], t.buf[CR_Y],
                                         with_event ? &ev : NULL),
                             KILN_SUCCESS);
            if (with_event)
                kt_wait_and_release(ev);
            else
                assert_ptr_equal(ev, KT_POISON_EVENT);
            /* AUTO may pick any algorithm: allow the loosest tolerance */
            cr_case_check(&t, cr_algo_tol(KILN_CONV_WINOGRAD_4X4, t.dims.k_eff), "one-shot");
        }
        cr_case_free(&t);
    }
}

/* One plan, two sets of buffers, executions queued back to back before
   anything is read: each result reflects its own inputs. */
static void test_plan_reuse(void **state)
{
    (void)state;
    kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][0], KILN_CONV_AUTO);
    d.beta = 0.5f;
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kiln_conv_algo ran = assert_plan_describes(plan, kt_ctx, KILN_CONV_AUTO);
    struct cr_case t1, t2;
    cr_case_init(&t1, kt_ctx, &d);
    cr_case_init(&t2, kt_ctx, &d);
    for (int round = 0; round < 3; round++) {
        cr_case_fill(&t1, &kt_group_seed);
        cr_case_fill(&t2, &kt_group_seed);
        kiln_event *ev = KT_POISON_EVENT;
        kt_assert_status(cr_case_execute(&t1, plan, NULL), KILN_SUCCESS);
        kt_assert_status(cr_case_execute(&t2, plan, &ev), KILN_SUCCESS);
        kt_wait_and_release(ev);
        cr_case_check(&t1, cr_algo_tol(ran, t1.dims.k_eff), "reuse, first buffers");
        cr_case_check(&t2, cr_algo_tol(ran, t2.dims.k_eff), "reuse, second buffers");
    }
    cr_case_free(&t1);
    cr_case_free(&t2);
    kiln_conv2d_plan_destroy(plan);
}

/* constant_weights: the plan may pack the weights once. Executions with the
   same weights buffer and fresh inputs stay right, and so does a switch to
   another weights buffer (which must be packed again) and back, in both
   layouts (Winograd's GEMM keeps the transformed weights packed as its A
   operand in NCHW and as B in NHWC). */
/* Winograd's batched GEMM packs its operands only above the profile's
   gemm.direct_max (64^3 on the CPU profiles): K C T > 64^3 here for both
   tile sizes (T = 81 tiles of F(4x4)). */
static const struct row packed_shapes[2] = {
    {CONV("3x3 pad1 64ch", NCHW, 1, 64, 34, 34, 64, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 64ch", NHWC, 1, 64, 34, 34, 64, 3, 3), PAD(1, 1, 1, 1)},
};

static void test_constant_weights(void **state)
{
    (void)state;
    static const kiln_conv_algo algos[] = {KILN_CONV_AUTO,   KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL,
                                           KILN_CONV_DIRECT, KILN_CONV_GEMM_1X1,      KILN_CONV_WINOGRAD_2X2,
                                           KILN_CONV_WINOGRAD_4X4};
    size_t ran = 0;
    for (size_t run = 0; run < 2 * sizeof algos / sizeof *algos; run++) {
        const size_t i = run / 2, layout = run % 2;
        const int wino = algos[i] == KILN_CONV_WINOGRAD_2X2 || algos[i] == KILN_CONV_WINOGRAD_4X4;
        kiln_conv2d_desc d = desc_of(wino ? &packed_shapes[layout] : &epilogue_shapes[algos[i] == KILN_CONV_GEMM_1X1][layout],
                                     algos[i]);
        d.constant_weights = 1;
        kiln_conv2d_plan *plan = NULL;
        kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented"))
            continue;
        kt_assert_status(st, KILN_SUCCESS);
        kiln_conv_algo algo = assert_plan_describes(plan, kt_ctx, algos[i]);
        char label[96];
        snprintf(label, sizeof label, "%s %s constant_weights", algo_name(algos[i]), layout ? "nhwc" : "nchw");
        struct cr_case a, b;
        cr_case_init(&a, kt_ctx, &d);
        cr_case_init(&b, kt_ctx, &d);
        cr_case_fill(&a, &kt_group_seed);
        cr_case_fill(&b, &kt_group_seed);
        const double tol = cr_algo_tol(algo, a.dims.k_eff);
        struct cr_case *order[] = {&a, &a, &b, &a};
        for (size_t r = 0; r < sizeof order / sizeof *order; r++) {
            struct cr_case *t = order[r];
            cr_case_refresh_x(t, &kt_group_seed);
            kt_assert_status(cr_case_execute(t, plan, NULL), KILN_SUCCESS);
            cr_case_check(t, tol, label);
        }
        cr_case_free(&a);
        cr_case_free(&b);
        kiln_conv2d_plan_destroy(plan);
        ran++;
    }
    assert_true(ran > 0);
}

/* ------------------------------------------------------------------------ */
/* Batch-norm folding                                                       */
/* ------------------------------------------------------------------------ */

struct bn {
    size_t k;
    float *scale, *shift, *mean, *var;
};

/* Trained-looking statistics: scale in [0.5, 2), shift and mean in [-1, 1),
   variance in [0.1, 2). */
static struct bn bn_make(size_t k)
{
    struct bn b = {k, malloc(k * sizeof(float)), malloc(k * sizeof(float)), malloc(k * sizeof(float)),
                   malloc(k * sizeof(float))};
    assert_true(b.scale && b.shift && b.mean && b.var);
    kt_fill_uniform(b.scale, k, 0.5f, 2.0f, &kt_group_seed);
    kt_fill_uniform(b.shift, k, -1.0f, 1.0f, &kt_group_seed);
    kt_fill_uniform(b.mean, k, -1.0f, 1.0f, &kt_group_seed);
    kt_fill_uniform(b.var, k, 0.1f, 2.0f, &kt_group_seed);
    return b;
}

static struct cr_bn bn_view(const struct bn *b, float eps) { return (struct cr_bn){b->scale, b->shift, b->mean, b->var, eps}; }

static void bn_free(struct bn *b) { free(b->scale), free(b->shift), free(b->mean), free(b->var); }

/* On the host: each folded weight within 2^-22 of w * g (one rounding of the
   product, up to three more if g is formed in fp32), each folded bias within
   2^-22 of (b - mean) g + shift relative to |b - mean| |g| + |shift|; with
   the bias written to a separate array, in place, and NULL meaning zero. */
static void test_fold_batchnorm_values(void **state)
{
    (void)state;
    enum { K = 13, PER = 27 };
    struct bn b = bn_make(K);
    const struct cr_bn bn = bn_view(&b, 1e-3f);
    float w[K * PER], w0[K * PER], bias[K], bias0[K], out[K];
    kt_fill_uniform(w0, K * PER, -1.0f, 1.0f, &kt_group_seed);
    kt_fill_uniform(bias0, K, -1.0f, 1.0f, &kt_group_seed);
    static const char *const modes[] = {"separate bias_out", "in place", "NULL bias"};
    for (int mode = 0; mode < 3; mode++) {
        memcpy(w, w0, sizeof w);
        memcpy(bias, bias0, sizeof bias);
        float *dst = mode == 1 ? bias : out;
        kt_assert_status(kiln_fold_batchnorm(K, PER, w, mode == 2 ? NULL : bias, dst, b.scale, b.shift, b.mean,
                                             b.var, bn.eps),
                         KILN_SUCCESS);
        for (size_t f = 0; f < K; f++) {
            double g = cr_bn_gain(&bn, f), shifted = (mode == 2 ? 0.0 : bias0[f]) - b.mean[f];
            for (size_t i = 0; i < PER; i++) {
                double want = w0[f * PER + i] * g;
                if (!(fabs(w[f * PER + i] - want) <= fabs(want) * 0x1p-22))
                    fail_msg("%s: w'[%zu][%zu] = %.9g, expected %.9g", modes[mode], f, i, w[f * PER + i], want);
            }
            double want = shifted * g + b.shift[f];
            if (!(fabs(dst[f] - want) <= (fabs(shifted * g) + fabs(b.shift[f])) * 0x1p-22))
                fail_msg("%s: b'[%zu] = %.9g, expected %.9g", modes[mode], f, dst[f], want);
        }
    }
    bn_free(&b);
}

/* Folding, then convolving on the device, equals the convolution followed by
   batch norm (cr_bn_reference, which states the bound), in both layouts. */
static void test_fold_batchnorm_conv(void **state)
{
    (void)state;
    for (int lay = NCHW; lay <= NHWC; lay++) {
        kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][lay], KILN_CONV_AUTO);
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        kiln_conv_algo ran = assert_plan_describes(plan, kt_ctx, KILN_CONV_AUTO);
        struct cr_case t;
        cr_case_init(&t, kt_ctx, &d);
        cr_case_fill(&t, &kt_group_seed);
        struct bn b = bn_make(d.k);
        const struct cr_bn bn = bn_view(&b, 1e-5f);
        float *w0 = malloc(t.len[CR_W] * sizeof *w0), *bias0 = malloc(d.k * sizeof *bias0);
        assert_true(w0 && bias0);
        memcpy(w0, t.val[CR_W], t.len[CR_W] * sizeof *w0);
        memcpy(bias0, t.val[CR_BIAS], d.k * sizeof *bias0);
        kt_assert_status(kiln_fold_batchnorm(d.k, t.dims.k_eff, t.val[CR_W], t.val[CR_BIAS], t.val[CR_BIAS],
                                             b.scale, b.shift, b.mean, b.var, bn.eps),
                         KILN_SUCCESS);
        cr_upload(&t, CR_W);
        cr_upload(&t, CR_BIAS);
        kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);

        double *ref = malloc(t.len[CR_Y] * sizeof *ref), *bound = malloc(t.len[CR_Y] * sizeof *bound);
        float *got = malloc(t.len[CR_Y] * sizeof *got);
        assert_true(ref && bound && got);
        cr_bn_reference(&d, t.val[CR_X], w0, bias0, &bn, cr_algo_tol(ran, t.dims.k_eff), ref, bound);
        kt_assert_status(kiln_buffer_read(t.buf[CR_Y], 0, t.len[CR_Y] * sizeof *got, got), KILN_SUCCESS);
        size_t bad = 0;
        for (size_t i = 0; i < t.len[CR_Y]; i++)
            if (!(fabs(got[i] - ref[i]) <= bound[i]) && bad++ < 5)
                print_error("%s: y element %zu = %.9g, conv then batch norm %.9g, bound %.3g\n",
                            lay == NHWC ? "nhwc" : "nchw", i, got[i], ref[i], bound[i]);
        if (bad)
            fail_msg("%zu of %zu outputs differ from convolution followed by batch norm", bad, t.len[CR_Y]);
        free(ref), free(bound), free(got), free(w0), free(bias0);
        bn_free(&b);
        cr_case_free(&t);
        kiln_conv2d_plan_destroy(plan);
    }
}

enum bn_bad { BN_NULL_W, BN_NULL_OUT, BN_NULL_SCALE, BN_NULL_SHIFT, BN_NULL_MEAN, BN_NULL_VAR, BN_K0, BN_PER0,
              BN_NEG_EPS, BN_NAN_EPS, BN_VAR_NEG, BN_VAR_ZERO_EPS_ZERO, BN_VAR_NAN };

static const struct {
    const char *name;
    enum bn_bad kind;
} bn_bads[] = {
    {"weights NULL", BN_NULL_W},   {"bias_out NULL", BN_NULL_OUT},  {"scale NULL", BN_NULL_SCALE},
    {"shift NULL", BN_NULL_SHIFT}, {"mean NULL", BN_NULL_MEAN},     {"var NULL", BN_NULL_VAR},
    {"k = 0", BN_K0},              {"per_filter = 0", BN_PER0},     {"eps < 0", BN_NEG_EPS},
    {"eps NaN", BN_NAN_EPS},       {"last var + eps < 0", BN_VAR_NEG}, {"var = eps = 0", BN_VAR_ZERO_EPS_ZERO},
    {"var NaN", BN_VAR_NAN},
};

static void test_fold_batchnorm_bad(void **state)
{
    (void)state;
    enum { K = 4, PER = 9 };
    for (size_t i = 0; i < sizeof bn_bads / sizeof *bn_bads; i++) {
        struct bn b = bn_make(K);
        float w[K * PER], w0[K * PER], bias[K], out[K], out0[K];
        kt_fill_uniform(w0, K * PER, -1.0f, 1.0f, &kt_group_seed);
        kt_fill_uniform(bias, K, -1.0f, 1.0f, &kt_group_seed);
        kt_fill_uniform(out0, K, -1.0f, 1.0f, &kt_group_seed);
        memcpy(w, w0, sizeof w);
        memcpy(out, out0, sizeof out);
        float eps = 1e-5f;
        size_t k = K, per = PER;
        enum bn_bad kind = bn_bads[i].kind;
        if (kind == BN_K0)
            k = 0;
        if (kind == BN_PER0)
            per = 0;
        if (kind == BN_NEG_EPS)
            eps = -1e-5f;
        if (kind == BN_NAN_EPS)
            eps = NAN;
        if (kind == BN_VAR_NEG)
            b.var[K - 1] = -0.5f;
        if (kind == BN_VAR_ZERO_EPS_ZERO)
            b.var[1] = 0.0f, eps = 0.0f;
        if (kind == BN_VAR_NAN)
            b.var[2] = NAN;
        kiln_status st = kiln_fold_batchnorm(k, per, kind == BN_NULL_W ? NULL : w, bias,
                                             kind == BN_NULL_OUT ? NULL : out, kind == BN_NULL_SCALE ? NULL : b.scale,
                                             kind == BN_NULL_SHIFT ? NULL : b.shift,
                                             kind == BN_NULL_MEAN ? NULL : b.mean, kind == BN_NULL_VAR ? NULL : b.var,
                                             eps);
        if (st != KILN_ERROR_INVALID_ARGUMENT)
            fail_msg("fold_batchnorm with %s: %s", bn_bads[i].name, kiln_status_string(st));
        kt_assert_status(st, KILN_ERROR_INVALID_ARGUMENT);
        if (memcmp(w, w0, sizeof w) || memcmp(out, out0, sizeof out))
            fail_msg("fold_batchnorm with %s wrote its outputs", bn_bads[i].name);
        bn_free(&b);
    }
}

/* ------------------------------------------------------------------------ */
/* Find mode and its database                                               */
/* ------------------------------------------------------------------------ */

/* In a fresh cache directory: a plan with find (desc.find, or KILN_FIND=1
   in the environment) times the candidates and says so; a second context on
   the same directory takes the choice from the find database. Both compute
   the right result. */
static void find_round(int by_env)
{
    char *dir = kt_temp_dir();
    if (by_env)
        assert_int_equal(setenv("KILN_FIND", "1", 1), 0);
    kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][0], KILN_CONV_AUTO);
    d.find = !by_env;
    kiln_conv_algo first = KILN_CONV_AUTO;
    for (int round = 0; round < 2; round++) {
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.cache_dir = dir;
        kiln_context *c = NULL;
        kt_assert_status(kiln_context_create(&opt, &c), KILN_SUCCESS);
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(c, &d, &plan), KILN_SUCCESS);
        kiln_conv_algo ran = assert_plan_describes(plan, c, KILN_CONV_AUTO);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        printf("# find (%s) round %d: %s, %s\n", by_env ? "KILN_FIND=1" : "desc.find", round, info.name, info.reason);
        assert_non_null(strstr(info.reason, "find"));
        if (round == 0) {
            first = ran;
            /* a second plan in the same context reuses the choice */
            kiln_conv2d_plan *again = NULL;
            kt_assert_status(kiln_conv2d_plan_create(c, &d, &again), KILN_SUCCESS);
            kiln_conv2d_plan_info info2;
            kt_assert_status(kiln_conv2d_plan_describe(again, &info2), KILN_SUCCESS);
            assert_int_equal(info2.algo, ran);
            assert_non_null(strstr(info2.reason, "find"));
            kiln_conv2d_plan_destroy(again);
        } else {
            assert_non_null(strstr(info.reason, "database"));
            assert_int_equal(ran, first);
        }
        struct cr_case t;
        cr_case_init(&t, c, &d);
        cr_case_fill(&t, &kt_group_seed);
        kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
        cr_case_check(&t, cr_algo_tol(ran, t.dims.k_eff), "find");
        cr_case_free(&t);
        kiln_conv2d_plan_destroy(plan);
        kiln_context_destroy(c);
    }
    if (by_env)
        assert_int_equal(unsetenv("KILN_FIND"), 0);
    kt_remove_tree(dir);
    free(dir);
}

static void test_find_desc(void **state)
{
    (void)state;
    find_round(0);
}

static void test_find_env(void **state)
{
    (void)state;
    find_round(1);
}

/* ------------------------------------------------------------------------ */
/* Bad descriptors: INVALID_ARGUMENT, a detail, nothing written             */
/* ------------------------------------------------------------------------ */

enum field {
    F_NONE, F_N, F_C, F_H, F_W, F_K, F_R, F_S, F_SH, F_SW, F_PT, F_PB, F_PL, F_PR, F_DH, F_DW, F_GROUPS,
    F_LAYOUT, F_DTYPE, F_ACT, F_ALGO, F_POOL
};

/* The base problem: NCHW n2 c8 10x9 k12 3x3 pad 1, with up to two fields
   changed. */
static const struct bad_desc {
    const char *name;
    enum field f1;
    size_t v1;
    enum field f2;
    size_t v2;
} bad_descs[] = {
    {"n = 0", F_N, 0, F_NONE, 0},
    {"c = 0", F_C, 0, F_NONE, 0},
    {"h = 0", F_H, 0, F_NONE, 0},
    {"w = 0", F_W, 0, F_NONE, 0},
    {"k = 0", F_K, 0, F_NONE, 0},
    {"r = 0", F_R, 0, F_NONE, 0},
    {"s = 0", F_S, 0, F_NONE, 0},
    {"stride_h = 0", F_SH, 0, F_NONE, 0},
    {"stride_w = 0", F_SW, 0, F_NONE, 0},
    {"dilation_h = 0", F_DH, 0, F_NONE, 0},
    {"dilation_w = 0", F_DW, 0, F_NONE, 0},
    {"groups = 0", F_GROUPS, 0, F_NONE, 0},
    {"groups 3 does not divide c 8", F_GROUPS, 3, F_NONE, 0},
    {"groups 8 does not divide k 12", F_GROUPS, 8, F_NONE, 0},
    {"groups 12 does not divide c 8", F_GROUPS, 12, F_NONE, 0},
    {"no output row: h 1 + pads 2 < r 4", F_H, 1, F_R, 4},
    {"no output row: h 2 + pads 2 < dilated extent 7", F_H, 2, F_DH, 3},
    {"no output column: w 1 + pads 2 < dilated extent 5", F_W, 1, F_DW, 2},
    {"pad_top 3 = r", F_PT, 3, F_NONE, 0},
    {"pad_bottom 3 = r", F_PB, 3, F_NONE, 0},
    {"pad_left 4 > s", F_PL, 4, F_NONE, 0},
    {"pad_right 3 = s", F_PR, 3, F_NONE, 0},
    {"pad_top 5 = dilated extent 5", F_PT, 5, F_DH, 2},
    {"pad_right 7 = dilated extent 7", F_PR, 7, F_DW, 3},
    {"layout = 2", F_LAYOUT, 2, F_NONE, 0},
    {"dtype = 2", F_DTYPE, 2, F_NONE, 0},
    {"activation = 7", F_ACT, 7, F_NONE, 0},
    {"algo = 7", F_ALGO, 7, F_NONE, 0},
    {"pool with p = 1 (h 1 + pads 2, r 3)", F_POOL, 1, F_H, 1},
    {"pool with q = 1 (w 1 + pads 2, s 3)", F_POOL, 1, F_W, 1},
};

static void set_field(kiln_conv2d_desc *d, enum field f, size_t v)
{
    switch (f) {
    case F_NONE: break;
    case F_N: d->n = v; break;
    case F_C: d->c = v; break;
    case F_H: d->h = v; break;
    case F_W: d->w = v; break;
    case F_K: d->k = v; break;
    case F_R: d->r = v; break;
    case F_S: d->s = v; break;
    case F_SH: d->stride_h = v; break;
    case F_SW: d->stride_w = v; break;
    case F_PT: d->pad_top = v; break;
    case F_PB: d->pad_bottom = v; break;
    case F_PL: d->pad_left = v; break;
    case F_PR: d->pad_right = v; break;
    case F_DH: d->dilation_h = v; break;
    case F_DW: d->dilation_w = v; break;
    case F_GROUPS: d->groups = v; break;
    case F_LAYOUT: d->layout = (kiln_tensor_layout)v; break;
    case F_DTYPE: d->dtype = (kiln_dtype)v; break;
    case F_ACT: d->activation = (kiln_activation)v; break;
    case F_ALGO: d->algo = (kiln_conv_algo)v; break;
    case F_POOL: d->fused_maxpool = (int)v; break;
    }
}

static const struct row bad_base = {CONV("base", NCHW, 2, 8, 10, 9, 12, 3, 3), PAD(1, 1, 1, 1)};

static void test_bad_desc(void **state)
{
    const struct bad_desc *b = *state;
    kiln_conv2d_desc d = desc_of(&bad_base, KILN_CONV_AUTO);
    d.has_bias = 0;
    set_field(&d, b->f1, b->v1);
    set_field(&d, b->f2, b->v2);
    size_t p = POISON_SIZE, q = POISON_SIZE, yh = POISON_SIZE, yw = POISON_SIZE;
    kt_assert_status(kiln_conv2d_output_size(&d, &p, &q, &yh, &yw), KILN_ERROR_INVALID_ARGUMENT);
    assert_true(p == POISON_SIZE && q == POISON_SIZE && yh == POISON_SIZE && yw == POISON_SIZE);
    kiln_conv2d_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    /* The one-shot call fails the same way, with buffers large enough for
       any reading of the descriptor, and leaves y alone. */
    kiln_buffer *x = kt_poisoned_buffer(kt_ctx, 32768), *w = kt_poisoned_buffer(kt_ctx, 32768),
                *y = kt_poisoned_buffer(kt_ctx, 32768);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_conv2d(kt_ctx, &d, x, w, NULL, NULL, y, &ev), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    kt_assert_still_poisoned(y);
    kiln_buffer_destroy(x), kiln_buffer_destroy(w), kiln_buffer_destroy(y);
}

/* The smallest valid shapes next to the rejected ones are accepted. */
static void test_edge_descs_accepted(void **state)
{
    (void)state;
    static const struct bad_desc edges[] = {
        {"pad 2 = extent - 1", F_PT, 2, F_PR, 2},
        {"pad 4 = dilated extent - 1", F_PT, 4, F_DH, 2},
        {"h 3, pad_top 0", F_H, 3, F_PT, 0},
        {"pool on a 2x2 output", F_POOL, 1, F_H, 2},
        {"groups = 4 divides c 8 and k 12", F_GROUPS, 4, F_NONE, 0},
    };
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        kiln_conv2d_desc d = desc_of(&bad_base, KILN_CONV_AUTO);
        set_field(&d, edges[i].f1, edges[i].v1);
        set_field(&d, edges[i].f2, edges[i].v2);
        if (edges[i].f1 == F_POOL) /* h 2 + pad 1 + 1 - 3 + 1 = 2 rows */
            d.w = 2;
        kt_assert_status(kiln_conv2d_output_size(&d, NULL, NULL, NULL, NULL), KILN_SUCCESS);
        kiln_conv2d_plan *plan = NULL;
        kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if (st != KILN_SUCCESS)
            fail_msg("%s: %s (%s)", edges[i].name, kiln_status_string(st), kiln_last_error_detail());
        kiln_conv2d_plan_destroy(plan);
    }
}

/* ------------------------------------------------------------------------ */
/* Bad executions: INVALID_ARGUMENT or OUT_OF_BOUNDS, nothing written       */
/* ------------------------------------------------------------------------ */

enum bad_exec_kind {
    X_NULL_PLAN, X_NULL_X, X_NULL_W, X_NULL_Y, X_NO_BIAS, X_NO_Z, X_EXTRA_BIAS, X_EXTRA_Z,
    X_Y_IS_X, X_Y_IS_W, X_Y_IS_Z, X_Y_IS_BIAS,
    X_SHORT_X, X_SHORT_W, X_SHORT_BIAS, X_SHORT_Z, X_SHORT_Y,
};

static const struct bad_exec {
    const char *name;
    enum bad_exec_kind kind;
    int bias, residual; /* the plan's has_bias and beta != 0 */
    kiln_dtype dtype;
    kiln_status want;
} bad_execs[] = {
    {"NULL plan", X_NULL_PLAN, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL x", X_NULL_X, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL w", X_NULL_W, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL y", X_NULL_Y, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"bias missing with has_bias", X_NO_BIAS, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"z missing with beta != 0", X_NO_Z, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"bias given without has_bias", X_EXTRA_BIAS, 0, 0, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"z given with beta = 0", X_EXTRA_Z, 0, 0, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"y is x", X_Y_IS_X, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"y is w", X_Y_IS_W, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"y is z", X_Y_IS_Z, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"y is bias", X_Y_IS_BIAS, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
    {"x one element short", X_SHORT_X, 1, 1, KILN_F32, KILN_ERROR_OUT_OF_BOUNDS},
    {"w one element short", X_SHORT_W, 1, 1, KILN_F32, KILN_ERROR_OUT_OF_BOUNDS},
    {"bias one element short", X_SHORT_BIAS, 1, 1, KILN_F32, KILN_ERROR_OUT_OF_BOUNDS},
    {"z one element short", X_SHORT_Z, 1, 1, KILN_F32, KILN_ERROR_OUT_OF_BOUNDS},
    {"y one element short", X_SHORT_Y, 1, 1, KILN_F32, KILN_ERROR_OUT_OF_BOUNDS},
    {"f16 x one element short", X_SHORT_X, 1, 1, KILN_F16, KILN_ERROR_OUT_OF_BOUNDS},
    {"f16 z one element short", X_SHORT_Z, 1, 1, KILN_F16, KILN_ERROR_OUT_OF_BOUNDS},
    {"f16 y one element short", X_SHORT_Y, 1, 1, KILN_F16, KILN_ERROR_OUT_OF_BOUNDS},
    {"f16 bias one fp32 short (k fp16 would fit)", X_SHORT_BIAS, 1, 1, KILN_F16, KILN_ERROR_OUT_OF_BOUNDS},
};

/* The base is the NCHW epilogue shape, pooled when it has a residual so z
is larger than y: a bounds check that sizes z like y, or bias like an fp16
tensor, lets one of the "one short" rows through. (Its switch sets are the
epilogue tests', so no kernel is built here.) */
static void test_bad_exec(void **state)
{
    const struct bad_exec *x = *state;
    kiln_conv2d_desc d = desc_of(&epilogue_shapes[0][0], KILN_CONV_AUTO);
    d.dtype = x->dtype;
    d.has_bias = x->bias;
    d.alpha = 1.5f;
    d.beta = x->residual ? 0.5f : 0.0f;
    d.fused_maxpool = x->residual;
    d.activation = x->dtype == KILN_F16 ? KILN_ACT_RELU : KILN_ACT_NONE;
    const struct cr_dims m = cr_dims_of(&d);
    const size_t es = kt_elem_size(d.dtype);
    size_t bytes[CR_OPERANDS] = {d.n * d.c * d.h * d.w * es, d.k * m.cg * d.r * d.s * es, d.k * sizeof(float),
                                 d.n * d.k * m.p * m.q * es, d.n * d.k * m.yh * m.yw * es};
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    if (x->kind >= X_SHORT_X)
        bytes[CR_X + (x->kind - X_SHORT_X)] -= x->kind == X_SHORT_BIAS ? sizeof(float) : es;
    kiln_buffer *buf[CR_OPERANDS];
    for (int i = 0; i < CR_OPERANDS; i++)
        buf[i] = kt_poisoned_buffer(kt_ctx, bytes[i]);
    const kiln_buffer *bx = buf[CR_X], *bw = buf[CR_W], *bb = x->bias ? buf[CR_BIAS] : NULL,
                      *bz = x->residual ? buf[CR_Z] : NULL;
    kiln_buffer *by = buf[CR_Y];
    switch (x->kind) {
    case X_NULL_X: bx = NULL; break;
    case X_NULL_W: bw = NULL; break;
    case X_NULL_Y: by = NULL; break;
    case X_NO_BIAS: bb = NULL; break;
    case X_NO_Z: bz = NULL; break;
    case X_EXTRA_BIAS: bb = buf[CR_BIAS]; break;
    case X_EXTRA_Z: bz = buf[CR_Z]; break;
    case X_Y_IS_X: by = buf[CR_X]; break;
    case X_Y_IS_W: by = buf[CR_W]; break;
    case X_Y_IS_Z: by = buf[CR_Z]; break;
    case X_Y_IS_BIAS: by = buf[CR_BIAS]; break;
    default: break;
    }
    kiln_event *ev = KT_POISON_EVENT;
    kiln_conv2d_plan *use = x->kind == X_NULL_PLAN ? NULL : plan;
    kt_assert_status(kiln_conv2d_plan_execute(use, bx, bw, bb, bz, by, &ev), x->want);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    if (x->kind != X_NULL_PLAN) { /* the one-shot call checks the same */
        kt_assert_status(kiln_conv2d(kt_ctx, &d, bx, bw, bb, bz, by, &ev), x->want);
        assert_ptr_equal(ev, KT_POISON_EVENT);
    }
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    for (int i = 0; i < CR_OPERANDS; i++) /* all poison still: nothing ran */
        kt_assert_still_poisoned(buf[i]);
    for (int i = 0; i < CR_OPERANDS; i++)
        kiln_buffer_destroy(buf[i]);
    kiln_conv2d_plan_destroy(plan);
}

static void test_null_arguments(void **state)
{
    (void)state;
    kiln_conv2d_desc d = desc_of(&bad_base, KILN_CONV_AUTO);
    kiln_conv2d_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_conv2d_plan_create(NULL, &d, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, NULL, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_buffer *x = kt_poisoned_buffer(kt_ctx, 16384), *w = kt_poisoned_buffer(kt_ctx, 16384),
                *b = kt_poisoned_buffer(kt_ctx, 256), *y = kt_poisoned_buffer(kt_ctx, 16384);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_conv2d(NULL, &d, x, w, b, NULL, y, &ev), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_conv2d(kt_ctx, NULL, x, w, b, NULL, y, &ev), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    kt_assert_still_poisoned(y);
    kiln_buffer_destroy(x), kiln_buffer_destroy(w), kiln_buffer_destroy(b), kiln_buffer_destroy(y);
}

/* ------------------------------------------------------------------------ */

#define ROWS (sizeof rows / sizeof *rows)
#define EPILOGUES (sizeof epilogues / sizeof *epilogues)
#define BAD_DESCS (sizeof bad_descs / sizeof *bad_descs)
#define BAD_EXECS (sizeof bad_execs / sizeof *bad_execs)

static const kiln_conv_algo all_algos[] = {KILN_CONV_AUTO,         KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL,
                                           KILN_CONV_DIRECT,       KILN_CONV_GEMM_1X1,      KILN_CONV_WINOGRAD_2X2,
                                           KILN_CONV_WINOGRAD_4X4};
#define ALGOS (sizeof all_algos / sizeof *all_algos)

static const struct misfit_test misfits[] = {
    {KILN_CONV_WINOGRAD_2X2, winograd_misfits, sizeof winograd_misfits / sizeof *winograd_misfits},
    {KILN_CONV_WINOGRAD_4X4, winograd_misfits, sizeof winograd_misfits / sizeof *winograd_misfits},
    {KILN_CONV_GEMM_1X1, gemm1x1_misfits, sizeof gemm1x1_misfits / sizeof *gemm1x1_misfits},
    {KILN_CONV_GEMM_1X1, pool_misfits, sizeof pool_misfits / sizeof *pool_misfits},
    {KILN_CONV_IMPLICIT_GEMM, pool_misfits, sizeof pool_misfits / sizeof *pool_misfits},
    {KILN_CONV_IM2COL, pool_misfits, sizeof pool_misfits / sizeof *pool_misfits},
};
#define MISFITS (sizeof misfits / sizeof *misfits)

/* Algorithms that take a 3x3 filter, for the fp16 epilogue. */
static const kiln_conv_algo f16_epilogue_algos[] = {KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL, KILN_CONV_DIRECT,
                                                    KILN_CONV_WINOGRAD_2X2, KILN_CONV_WINOGRAD_4X4};
#define F16_EPILOGUES (sizeof f16_epilogue_algos / sizeof *f16_epilogue_algos)

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_desc_init));
    kt_add(&tests, cmocka_unit_test(test_output_size));
    kt_add(&tests, cmocka_unit_test(test_describe));
    kt_add(&tests, cmocka_unit_test(test_one_shot));
    kt_add(&tests, cmocka_unit_test(test_plan_reuse));
    kt_add(&tests, cmocka_unit_test(test_constant_weights));
    kt_add(&tests, cmocka_unit_test(test_profile_default_algo));
    kt_add(&tests, cmocka_unit_test(test_fold_batchnorm_values));
    kt_add(&tests, cmocka_unit_test(test_fold_batchnorm_conv));
    kt_add(&tests, cmocka_unit_test(test_fold_batchnorm_bad));
    kt_add(&tests, cmocka_unit_test(test_find_desc));
    kt_add(&tests, cmocka_unit_test(test_find_env));
    kt_add(&tests, cmocka_unit_test(test_edge_descs_accepted));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    for (size_t a = 0; a < ALGOS; a++)
        for (size_t i = 0; i < ROWS; i++) {
            kiln_conv2d_desc d = desc_of(&rows[i], all_algos[a]);
            if (!applies(all_algos[a], &d) || (all_algos[a] == KILN_CONV_DIRECT && !rows[i].direct))
                continue;
            struct row_test rt = {&rows[i], all_algos[a], ""};
            row_name(rt.name, sizeof rt.name, &rows[i], all_algos[a]);
            kt_add_copy(&tests, test_row, &rt, sizeof rt, "%s", rt.name);
        }
    for (size_t a = 1; a < ALGOS; a++)
        for (size_t i = 0; i < EPILOGUES; i++) {
            if (!(epilogues[i].algos & B(all_algos[a])))
                continue;
            struct epilogue_test et = {&epilogues[i], &epilogue_shapes[all_algos[a] == KILN_CONV_GEMM_1X1][i % 2],
                                       all_algos[a], ""};
            snprintf(et.name, sizeof et.name, "%s epilogue %s on %s %s n%zu c%zu %zux%zu k%zu", algo_name(et.algo),
                     et.e->name, et.shape->what, et.shape->layout == NHWC ? "nhwc" : "nchw", et.shape->n, et.shape->c,
                     et.shape->h, et.shape->w, et.shape->k);
            kt_add_copy(&tests, test_epilogue, &et, sizeof et, "%s", et.name);
        }
    for (size_t i = 0; i < EPILOGUES; i++) {
        if (!(epilogues[i].algos & B(KILN_CONV_DIRECT)))
            continue;
        struct epilogue_test et = {&epilogues[i], &plane_shapes[i % 2], KILN_CONV_DIRECT, ""};
        snprintf(et.name, sizeof et.name, "direct epilogue %s on %s nchw n%zu c%zu %zux%zu k%zu", et.e->name,
                 et.shape->what, et.shape->n, et.shape->c, et.shape->h, et.shape->w, et.shape->k);
        kt_add_copy(&tests, test_epilogue, &et, sizeof et, "%s", et.name);
    }
    for (size_t i = 0; i < F16_EPILOGUES; i++)
        kt_addf(&tests, test_f16_epilogue, &f16_epilogue_algos[i],
                "%s f16 epilogue bias+residual relu (pool where fused) on 3x3 pad1 nchw",
                algo_name(f16_epilogue_algos[i]));
    for (size_t i = 0; i < MISFITS; i++)
        kt_addf(&tests, test_unsupported, &misfits[i], "%s unsupported where it does not apply (%s, ...)",
                algo_name(misfits[i].algo), misfits[i].rows[0].what);
    kt_add_items(&tests, "bad desc: ", test_bad_desc, bad_descs, BAD_DESCS, sizeof *bad_descs);
    kt_add_items(&tests, "bad execute: ", test_bad_exec, bad_execs, BAD_EXECS, sizeof *bad_execs);
    return kt_run("conv", &tests);
}
