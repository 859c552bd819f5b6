/*
 * Convolution descriptors and arguments through the public API: the
 * defaults of desc_init and the output size, tables of bad descriptors and
 * bad executions that must fail with a specific status, a detail, and
 * nothing written, the smallest valid shapes next to them, NULL arguments,
 * and UNSUPPORTED for each algorithm where it does not apply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_cases.h"

#define POISON_PLAN ((kiln_conv2d_plan *)(uintptr_t)0x5a5a)
#define POISON_SIZE ((size_t)0x5c5c5c5c)

/* ------------------------------------------------------------------------ */
/* Descriptor defaults and output size                                      */
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
        struct cc_row r;
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
        kiln_conv2d_desc d = cc_desc_of(&cases[i].r, KILN_CONV_AUTO);
        d.fused_maxpool = cases[i].pool;
        size_t p = POISON_SIZE, q = POISON_SIZE, yh = POISON_SIZE, yw = POISON_SIZE;
        kt_assert_status(kiln_conv2d_output_size(&d, &p, &q, &yh, &yw), KILN_SUCCESS);
        struct kiln_conv_dims m = kiln_conv_dims_of(&d);
        assert_true(m.p == cases[i].p && m.q == cases[i].q && m.yh == cases[i].yh && m.yw == cases[i].yw);
        if (p != cases[i].p || q != cases[i].q || yh != cases[i].yh || yw != cases[i].yw)
            fail_msg("case %zu: output %zux%zu stored %zux%zu, expected %zux%zu stored %zux%zu", i, p, q, yh, yw,
                     cases[i].p, cases[i].q, cases[i].yh, cases[i].yw);
    }
    size_t p = POISON_SIZE;
    kt_assert_status(kiln_conv2d_output_size(NULL, &p, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_true(p == POISON_SIZE);
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
        fail_msg("%s %s: plan_create returned %s (%s), not UNSUPPORTED", cc_algo_name(d->algo), what,
                 kiln_status_string(st), kiln_last_error_detail());
    kt_assert_status(st, KILN_ERROR_UNSUPPORTED);
    assert_ptr_equal(plan, POISON_PLAN);
    printf("# %s %s: %s\n", cc_algo_name(d->algo), what, kiln_last_error_detail());

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

static const struct cc_row winograd_misfits[] = {
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

static const struct cc_row gemm1x1_misfits[] = {
    {CONV("3x3", NCHW, 1, 8, 9, 9, 8, 3, 3)},
    {CONV("1x3", NCHW, 1, 8, 9, 9, 8, 1, 3)},
    {CONV("stride2", NCHW, 1, 8, 9, 9, 8, 1, 1), .sh = 2, .sw = 2},
    {CONV("stride 2x1", NHWC, 1, 8, 9, 9, 8, 1, 1), .sh = 2},
};

/* The fused pool on the algorithms without it (1x1, so gemm-1x1 applies
   otherwise). */
static const struct cc_row pool_misfits[] = {
    {CONV("1x1 pool", NCHW, 1, 8, 9, 9, 8, 1, 1), .pool = 1},
    {CONV("1x1 pool", NHWC, 2, 8, 6, 7, 8, 1, 1), .pool = 1},
};

/* The tensor-core implicit GEMM outside fp16/bf16 NHWC, one group, channels
   a multiple of 8, no pool: UNSUPPORTED on every device (elsewhere than the
   CUDA backend at compute capability 8.0 on, for the device too). */
static const struct cc_row mma_misfits[] = {
    {CONV("nchw", NCHW, 1, 8, 9, 9, 8, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("fp32", NHWC, 1, 8, 9, 9, 8, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("12 channels", NHWC, 1, 12, 9, 9, 8, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("groups2", NHWC, 1, 16, 9, 9, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 2, .dtype = KILN_BF16},
    {CONV("pool", NHWC, 1, 8, 9, 9, 8, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16, .pool = 1},
};

struct misfit_test {
    kiln_conv_algo algo;
    const struct cc_row *rows;
    size_t count;
};

static void test_unsupported(void **state)
{
    const struct misfit_test *m = *state;
    /* An algorithm not written yet answers "not implemented" everywhere. */
    kiln_conv2d_desc probe = cc_desc_of(cc_epilogue_shape(m->algo, 0), m->algo);
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(kt_ctx, &probe, &plan);
    if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) {
        printf("# skipped: %s\n", kiln_last_error_detail());
        skip();
    }
    if (st == KILN_SUCCESS)
        kiln_conv2d_plan_destroy(plan);
    for (size_t i = 0; i < m->count; i++) {
        kiln_conv2d_desc d = cc_desc_of(&m->rows[i], m->algo);
        assert_false(cc_applies(m->algo, &d));
        assert_unsupported(&d, m->rows[i].what);
    }
}

/* ------------------------------------------------------------------------ */
/* Bad descriptors: INVALID_ARGUMENT, a detail, nothing written             */
/* ------------------------------------------------------------------------ */

/* clang-format off */
enum field {
    F_NONE, F_N, F_C, F_H, F_W, F_K, F_R, F_S, F_SH, F_SW, F_PT, F_PB, F_PL, F_PR, F_DH, F_DW, F_GROUPS,
    F_LAYOUT, F_DTYPE, F_ACT, F_ALGO, F_POOL, F_MATH
};
/* clang-format on */

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
    {"dtype = 3", F_DTYPE, 3, F_NONE, 0},
    {"math = 2", F_MATH, 2, F_NONE, 0},
    {"activation = 7", F_ACT, 7, F_NONE, 0},
    {"algo = 8", F_ALGO, 8, F_NONE, 0},
    {"pool with p = 1 (h 1 + pads 2, r 3)", F_POOL, 1, F_H, 1},
    {"pool with q = 1 (w 1 + pads 2, s 3)", F_POOL, 1, F_W, 1},
};

static void set_field(kiln_conv2d_desc *d, enum field f, size_t v)
{
    /* clang-format off */
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
    case F_MATH: d->math = (kiln_math)v; break;
    }
    /* clang-format on */
}

static const struct cc_row bad_base = {CONV("base", NCHW, 2, 8, 10, 9, 12, 3, 3), PAD(1, 1, 1, 1)};

static void test_bad_desc(void **state)
{
    const struct bad_desc *b = *state;
    kiln_conv2d_desc d = cc_desc_of(&bad_base, KILN_CONV_AUTO);
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
        kiln_conv2d_desc d = cc_desc_of(&bad_base, KILN_CONV_AUTO);
        set_field(&d, edges[i].f1, edges[i].v1);
        set_field(&d, edges[i].f2, edges[i].v2);
        if (edges[i].f1 == F_POOL) /* h 2 + pad 1 + 1 - 3 + 1 = 2 rows */
            d.w = 2;
        kt_assert_status(kiln_conv2d_output_size(&d, NULL, NULL, NULL, NULL), KILN_SUCCESS);
        kiln_conv2d_plan *plan = NULL;
        kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if (kt_unsupported_here(kt_ctx, st))
            continue;
        if (st != KILN_SUCCESS)
            fail_msg("%s: %s (%s)", edges[i].name, kiln_status_string(st), kiln_last_error_detail());
        kiln_conv2d_plan_destroy(plan);
    }
}

/* ------------------------------------------------------------------------ */
/* Bad executions: INVALID_ARGUMENT or OUT_OF_BOUNDS, nothing written       */
/* ------------------------------------------------------------------------ */

/* clang-format off */
enum bad_exec_kind {
    X_NULL_PLAN, X_NULL_X, X_NULL_W, X_NULL_Y, X_NO_BIAS, X_NO_Z, X_EXTRA_BIAS, X_EXTRA_Z,
    X_Y_IS_X, X_Y_IS_W, X_Y_IS_Z, X_Y_IS_BIAS,
    X_SHORT_X, X_SHORT_W, X_SHORT_BIAS, X_SHORT_Z, X_SHORT_Y,
};
/* clang-format on */

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
    {"y is z under the fused pool", X_Y_IS_Z, 1, 1, KILN_F32, KILN_ERROR_INVALID_ARGUMENT},
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
tensor, lets one of the "one short" rows through. (Its switch sets are
among test_conv_epilogue.c's, so it adds no kernel variant of its own.) */
static void test_bad_exec(void **state)
{
    const struct bad_exec *x = *state;
    kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], KILN_CONV_AUTO);
    d.dtype = x->dtype;
    d.has_bias = x->bias;
    d.alpha = 1.5f;
    d.beta = x->residual ? 0.5f : 0.0f;
    d.fused_maxpool = x->residual;
    d.activation = x->dtype == KILN_F16 ? KILN_ACT_RELU : KILN_ACT_NONE;
    const struct kiln_conv_dims m = kiln_conv_dims_of(&d);
    const size_t es = kt_elem_size(d.dtype);
    size_t bytes[CR_OPERANDS];
    for (int i = 0; i < CR_OPERANDS; i++)
        bytes[i] = kiln_conv_tensor_count(&d, &m, i) * (i == CR_BIAS ? sizeof(float) : es);
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
    kt_skip_unsupported_here(kt_ctx, st);
    kt_assert_status(st, KILN_SUCCESS);
    if (x->kind >= X_SHORT_X)
        bytes[CR_X + (x->kind - X_SHORT_X)] -= x->kind == X_SHORT_BIAS ? sizeof(float) : es;
    kiln_buffer *buf[CR_OPERANDS];
    for (int i = 0; i < CR_OPERANDS; i++)
        buf[i] = kt_poisoned_buffer(kt_ctx, bytes[i]);
    const kiln_buffer *bx = buf[CR_X], *bw = buf[CR_W], *bb = x->bias ? buf[CR_BIAS] : NULL,
                      *bz = x->residual ? buf[CR_Z] : NULL;
    kiln_buffer *by = buf[CR_Y];
    /* clang-format off */
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
    /* clang-format on */
    kiln_event *ev = KT_POISON_EVENT;
    kiln_conv2d_plan *use = x->kind == X_NULL_PLAN ? NULL : plan;
    kt_assert_status(kiln_conv2d_plan_execute(use, bx, bw, bb, bz, by, &ev), x->want);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    if (x->kind == X_Y_IS_Z) /* z may be y, but not under the pool */
        assert_non_null(strstr(kiln_last_error_detail(), "fused max pool"));
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
    kiln_conv2d_desc d = cc_desc_of(&bad_base, KILN_CONV_AUTO);
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

static const struct misfit_test misfits[] = {
    {KILN_CONV_WINOGRAD_2X2, winograd_misfits, sizeof winograd_misfits / sizeof *winograd_misfits},
    {KILN_CONV_WINOGRAD_4X4, winograd_misfits, sizeof winograd_misfits / sizeof *winograd_misfits},
    {KILN_CONV_GEMM_1X1, gemm1x1_misfits, sizeof gemm1x1_misfits / sizeof *gemm1x1_misfits},
    {KILN_CONV_GEMM_1X1, pool_misfits, sizeof pool_misfits / sizeof *pool_misfits},
    {KILN_CONV_IMPLICIT_GEMM, pool_misfits, sizeof pool_misfits / sizeof *pool_misfits},
    {KILN_CONV_IM2COL, pool_misfits, sizeof pool_misfits / sizeof *pool_misfits},
    {KILN_CONV_IGEMM_MMA, mma_misfits, sizeof mma_misfits / sizeof *mma_misfits},
};

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_desc_init));
    kt_add(&tests, cmocka_unit_test(test_output_size));
    kt_add(&tests, cmocka_unit_test(test_edge_descs_accepted));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    for (size_t i = 0; i < sizeof misfits / sizeof *misfits; i++)
        kt_addf(&tests, test_unsupported, &misfits[i], "%s unsupported where it does not apply (%s, ...)",
                cc_algo_name(misfits[i].algo), misfits[i].rows[0].what);
    kt_add_items(&tests, "bad desc: ", test_bad_desc, bad_descs, sizeof bad_descs / sizeof *bad_descs,
                 sizeof *bad_descs);
    kt_add_items(&tests, "bad execute: ", test_bad_exec, bad_execs, sizeof bad_execs / sizeof *bad_execs,
                 sizeof *bad_execs);
    return kt_run("conv_desc", &tests);
}
