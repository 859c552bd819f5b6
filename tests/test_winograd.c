/*
 * Winograd convolution, F(2x2,3x3) and F(4x4,3x3), through the public API
 * against the double-precision oracle of conv_ref.h: a table of shapes and
 * epilogues run for both variants and both layouts (one test per row,
 * variant and layout, named by all three), with y poisoned with NaN so an
 * element left unwritten fails; plan reuse with changed weights, and with
 * constant_weights; and the shapes Winograd does not apply to, which must
 * fail with UNSUPPORTED and a detail and write nothing.
 *
 * Tolerance: Winograd's error is not bounded by S = sum |x||w| over an
 * output's receptive field: a tile's outputs are combined from its whole
 * (m+2) x (m+2) input patch, and the transforms round values that the exact
 * result cancels. The bound is therefore the envelope measured on the data
 * cr_case_fill draws (docs/winograd.md: uniform x, weights of variance
 * 1/K_eff, 200k outputs per channel count): with padding 1 the worst
 * error / S over C = 1 ... 512 was 11 u for F(2x2) and 420 u for F(4x4),
 * both at C = 1 (u = 2^-24; from C = 8 on, 2.3 u and 46 u). The tests allow
 * 64 u and 2048 u, about five times that. Padding 2 leaves a corner output
 * one real tap per channel, where error / S grows without bound as C falls
 * (75,000 u for F(4x4) at C = 1, 290 u at C = 8), so the rows with padding
 * 2 have C >= 8. A wrong coefficient or a lost term is off by orders of
 * magnitude more.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_ref.h"
#include "test_util.h"

#define WINO2X2_TOL 0x1p-18 /* 64 u */
#define WINO4X4_TOL 0x1p-13 /* 2048 u */

static double tolerance(kiln_conv_algo algo) { return algo == KILN_CONV_WINOGRAD_4X4 ? WINO4X4_TOL : WINO2X2_TOL; }

/* ------------------------------------------------------------------------ */
/* The shape and epilogue table                                             */
/* ------------------------------------------------------------------------ */

static const struct row {
    size_t n, c, h, w, k;
    size_t pad[4]; /* top, bottom, left, right */
    int bias;
    float alpha, beta;
    kiln_activation act;
    int pool;
    kiln_dtype dtype;
    const char *what;
} rows[] = {
    /* clang-format off */
    /* shapes: output p x q = (h + top + bottom - 2) x (w + left + right - 2) */
    {1, 3, 8, 8, 5, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "8x8 output, multiple of both tiles"},
    {1, 3, 7, 9, 5, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "7x9 output, partial tiles"},
    {1, 2, 3, 3, 3, {0, 0, 0, 0}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "1x1 output"},
    {1, 6, 10, 13, 4, {0, 0, 0, 0}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "no padding"},
    {1, 16, 5, 6, 3, {2, 2, 2, 2}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "padding 2"},
    {1, 8, 9, 11, 6, {0, 2, 1, 0}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "asymmetric padding"},
    {3, 5, 6, 7, 7, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "batch 3"},
    {1, 1, 12, 12, 1, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "one channel, one filter"},
    {1, 8, 4, 70, 8, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "wide rows"},
    {1, 4, 40, 2, 4, {1, 1, 0, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "40x1 output"},
    {1, 64, 14, 14, 64, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "C = K = 64"},
    {2, 70, 11, 10, 67, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "C = 70, K = 67, batch 2"},
    {1, 128, 8, 8, 96, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "C = 128, K = 96"},
    /* epilogues */
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F32, "bias"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 0, 1.5f, 0.5f, KILN_ACT_NONE, 0, KILN_F32, "alpha 1.5, residual beta 0.5"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, -0.75f, -2.0f, KILN_ACT_NONE, 0, KILN_F32, "alpha -0.75, beta -2, bias"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_RELU, 0, KILN_F32, "bias, ReLU"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 4.0f, 0.0f, KILN_ACT_RELU6, 0, KILN_F32, "alpha 4, bias, ReLU6"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_LEAKY_RELU, 0, KILN_F32, "bias, leaky ReLU"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_SIGMOID, 0, KILN_F32, "bias, sigmoid"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_TANH, 0, KILN_F32, "bias, tanh"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_GELU, 0, KILN_F32, "bias, GELU"},
    {2, 16, 12, 16, 24, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, KILN_F32, "pool of a 12x16 output"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, KILN_F32, "pool of an 11x13 output"},
    {1, 8, 9, 7, 8, {0, 0, 0, 0}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, KILN_F32, "pool of a 7x5 output"},
    {1, 8, 4, 4, 8, {0, 0, 0, 0}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, KILN_F32, "pool of a 2x2 output"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_RELU, 1, KILN_F32, "residual, bias, ReLU, pool"},
    {1, 70, 15, 15, 67, {1, 1, 1, 1}, 1, 1.0f, 1.0f, KILN_ACT_LEAKY_RELU, 1, KILN_F32, "C 70 K 67 z bias leaky pool"},
    {1, 8, 5, 75, 8, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_RELU, 1, KILN_F32, "wide rows: z, bias, ReLU, pool"},
    /* fp16 storage */
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F16, "fp16"},
    {1, 8, 34, 34, 8, {1, 1, 1, 1}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 0, KILN_F16, "fp16, wide rows"},
    {1, 8, 34, 34, 8, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_NONE, 1, KILN_F16, "fp16, wide rows: z, bias, pool"},
    {2, 16, 11, 13, 24, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_RELU, 1, KILN_F16, "fp16, residual, bias, ReLU, pool"},
    {1, 8, 34, 34, 8, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_NONE, 1, KILN_BF16, "bf16, wide rows: z, bias, pool"},
    /* NCHW on the CPU profiles' GEMM route: the products and the output
       transform in one kernel, whose register tile needs at least MR tiles
       and NR filters (40 filters: the last block of 32 or 16 overlaps the
       one before) */
    {2, 16, 11, 13, 40, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_RELU, 1, KILN_F32, "K 40: residual, bias, ReLU, pool"},
    {1, 24, 13, 11, 40, {1, 1, 1, 1}, 1, -0.75f, -2.0f, KILN_ACT_LEAKY_RELU, 0, KILN_F32, "K 40: alpha, beta, bias, leaky"},
    {1, 16, 9, 7, 40, {0, 0, 0, 0}, 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, KILN_F32, "K 40: pool of a 7x5 output"},
    {2, 16, 11, 13, 40, {1, 1, 1, 1}, 1, 1.0f, 0.0f, KILN_ACT_SIGMOID, 0, KILN_F16, "K 40: fp16, bias, sigmoid"},
    {1, 8, 34, 34, 40, {1, 1, 1, 1}, 1, 1.0f, 0.5f, KILN_ACT_NONE, 1, KILN_BF16, "K 40: bf16, z, bias, pool"},
    /* clang-format on */
};
enum { ROWS = sizeof rows / sizeof *rows, VARIANTS = 2, LAYOUTS = 2 };

struct row_test {
    const struct row *row;
    kiln_conv_algo algo;
    kiln_tensor_layout layout;
};

static void desc_of(kiln_conv2d_desc *d, const struct row *r, kiln_conv_algo algo, kiln_tensor_layout layout)
{
    kiln_conv2d_desc_init(d, layout, r->n, r->c, r->h, r->w, r->k, 3, 3);
    d->pad_top = r->pad[0], d->pad_bottom = r->pad[1], d->pad_left = r->pad[2], d->pad_right = r->pad[3];
    d->has_bias = r->bias;
    d->alpha = r->alpha, d->beta = r->beta;
    d->activation = r->act;
    d->leaky_slope = 0.1f;
    d->fused_maxpool = r->pool;
    d->dtype = r->dtype;
    d->algo = algo;
}

static const char *variant_name(kiln_conv_algo algo)
{
    return algo == KILN_CONV_WINOGRAD_4X4 ? "winograd-4x4" : "winograd-2x2";
}

/* The plan runs the requested variant and says so. */
static void assert_plan_describes(const kiln_conv2d_plan *plan, kiln_conv_algo algo)
{
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    assert_int_equal(info.algo, algo);
    assert_string_equal(info.name, variant_name(algo));
    assert_non_null(strstr(info.kernel, algo == KILN_CONV_WINOGRAD_4X4 ? "conv_f32_wino4x4" : "conv_f32_wino2x2"));
    assert_true(info.params[0] && info.profile[0]);
    assert_string_equal(info.reason, "requested");
    assert_true(info.workspace_bytes > 0);
}

static void test_row(void **state)
{
    const struct row_test *rt = *state;
    kiln_conv2d_desc d;
    desc_of(&d, rt->row, rt->algo, rt->layout);
    char label[192];
    snprintf(label, sizeof label, "%s %s %s", variant_name(rt->algo), rt->layout == KILN_NHWC ? "NHWC" : "NCHW",
             rt->row->what);

    struct cr_case t;
    cr_case_init(&t, kt_ctx, &d);
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
    if (kt_unsupported_here(kt_ctx, st)) {
        cr_case_free(&t);
        skip();
    }
    kt_assert_status(st, KILN_SUCCESS);
    assert_plan_describes(plan, rt->algo);
    cr_case_fill(&t, &kt_group_seed);
    kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, tolerance(rt->algo), label);
    kiln_conv2d_plan_destroy(plan);
    cr_case_free(&t);
}

static void row_name(char *buf, size_t size, const struct row_test *rt)
{
    const struct row *r = rt->row;
    snprintf(buf, size, "%s %s n%zu c%zu %zux%zu k%zu pad %zu,%zu,%zu,%zu: %s", variant_name(rt->algo),
             rt->layout == KILN_NHWC ? "NHWC" : "NCHW", r->n, r->c, r->h, r->w, r->k, r->pad[0], r->pad[1], r->pad[2],
             r->pad[3], r->what);
}

/* ------------------------------------------------------------------------ */
/* Plan reuse, events                                                       */
/* ------------------------------------------------------------------------ */

/* A plan executed again after the weights and input change gives the new
   result (the weights are transformed on every execution), and the event of
   an execution completes its work. */
static void test_reuse_with_new_weights(void **state)
{
    (void)state;
    static const kiln_conv_algo algos[] = {KILN_CONV_WINOGRAD_2X2, KILN_CONV_WINOGRAD_4X4};
    for (int layout = KILN_NCHW; layout <= KILN_NHWC; layout++)
        for (size_t a = 0; a < VARIANTS; a++) {
            kiln_conv2d_desc d;
            desc_of(&d, &rows[1], algos[a], (kiln_tensor_layout)layout);
            d.has_bias = 1;
            struct cr_case t;
            cr_case_init(&t, kt_ctx, &d);
            kiln_conv2d_plan *plan = NULL;
            kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
            if (kt_unsupported_here(kt_ctx, st)) {
                cr_case_free(&t);
                skip();
            }
            kt_assert_status(st, KILN_SUCCESS);
            for (int run = 0; run < 2; run++) {
                cr_case_fill(&t, &kt_group_seed);
                kiln_event *ev = NULL;
                kt_assert_status(cr_case_execute(&t, plan, &ev), KILN_SUCCESS);
                assert_non_null(ev);
                kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
                kiln_event_destroy(ev);
                cr_case_check(&t, tolerance(algos[a]), variant_name(algos[a]));
            }
            kiln_conv2d_plan_destroy(plan);
            cr_case_free(&t);
        }
}

/* With constant_weights the weights are transformed once per buffer: a
   second execution with new inputs reuses them, and another weights buffer
   is transformed afresh. */
static void test_constant_weights(void **state)
{
    (void)state;
    static const kiln_conv_algo algos[] = {KILN_CONV_WINOGRAD_2X2, KILN_CONV_WINOGRAD_4X4};
    for (int layout = KILN_NCHW; layout <= KILN_NHWC; layout++)
        for (size_t a = 0; a < VARIANTS; a++) {
            kiln_conv2d_desc d;
            desc_of(&d, &rows[1], algos[a], (kiln_tensor_layout)layout);
            d.constant_weights = 1;
            struct cr_case t;
            cr_case_init(&t, kt_ctx, &d);
            kiln_conv2d_plan *plan = NULL;
            kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
            if (kt_unsupported_here(kt_ctx, st)) {
                cr_case_free(&t);
                skip();
            }
            kt_assert_status(st, KILN_SUCCESS);
            cr_case_fill(&t, &kt_group_seed);
            kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
            cr_case_check(&t, tolerance(algos[a]), "first execution");

            /* new input, same weights buffer (y poisoned again) */
            kt_fill_uniform(t.val[CR_X], t.len[CR_X], -1.0f, 1.0f, &kt_group_seed);
            cr_upload(&t, CR_X);
            cr_upload(&t, CR_Y);
            kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
            cr_case_check(&t, tolerance(algos[a]), "same weights, new input");

            /* another weights buffer with other values */
            kiln_buffer *first = t.buf[CR_W];
            const size_t bytes = t.len[CR_W] * kt_elem_size(d.dtype);
            kt_assert_status(kiln_buffer_create(kt_ctx, bytes, &t.buf[CR_W]), KILN_SUCCESS);
            for (size_t i = 0; i < t.len[CR_W]; i++)
                t.val[CR_W][i] = -t.val[CR_W][i];
            cr_upload(&t, CR_W);
            cr_upload(&t, CR_Y);
            kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
            cr_case_check(&t, tolerance(algos[a]), "another weights buffer");
            kiln_buffer_destroy(first);

            kiln_conv2d_plan_destroy(plan);
            cr_case_free(&t);
        }
}

/* ------------------------------------------------------------------------ */
/* Shapes Winograd does not apply to                                        */
/* ------------------------------------------------------------------------ */

static const struct unsupported {
    size_t c, k, r, s, stride, dilation, groups;
    const char *what;
} unsupported[] = {
    /* clang-format off */
    {4, 4, 5, 5, 1, 1, 1, "5x5 filter"},
    {4, 4, 1, 1, 1, 1, 1, "1x1 filter"},
    {4, 4, 3, 1, 1, 1, 1, "3x1 filter"},
    {4, 4, 3, 3, 2, 1, 1, "stride 2"},
    {4, 4, 3, 3, 1, 2, 1, "dilation 2"},
    {4, 4, 3, 3, 1, 1, 2, "two groups"},
    {4, 4, 3, 3, 1, 1, 4, "depthwise"},
    /* clang-format on */
};
enum { UNSUPPORTED = sizeof unsupported / sizeof *unsupported };

struct unsupported_test {
    const struct unsupported *u;
    kiln_conv_algo algo;
};

/* Planning fails with UNSUPPORTED and a detail that names the variant and
   the reason; the one-shot call fails the same way and leaves y as it was. */
static void test_unsupported(void **state)
{
    const struct unsupported_test *ut = *state;
    const struct unsupported *u = ut->u;
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, u->c, 9, 9, u->k, u->r, u->s);
    d.stride_h = d.stride_w = u->stride;
    d.dilation_h = d.dilation_w = u->dilation;
    d.groups = u->groups;
    d.algo = ut->algo;
    kiln_conv2d_plan *plan = (kiln_conv2d_plan *)(uintptr_t)0x5a5a;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_ERROR_UNSUPPORTED);
    assert_ptr_equal(plan, (kiln_conv2d_plan *)(uintptr_t)0x5a5a);
    assert_non_null(strstr(kiln_last_error_detail(), variant_name(ut->algo)));
    assert_non_null(strstr(kiln_last_error_detail(), "3x3"));

    struct cr_case t;
    cr_case_init(&t, kt_ctx, &d);
    cr_case_fill(&t, &kt_group_seed);
    kt_assert_status(kiln_conv2d(kt_ctx, &d, t.buf[CR_X], t.buf[CR_W], NULL, NULL, t.buf[CR_Y], NULL),
                     KILN_ERROR_UNSUPPORTED);
    const size_t ny = t.len[CR_Y];
    float *y = malloc(ny * sizeof *y);
    assert_non_null(y);
    kt_assert_status(kiln_buffer_read(t.buf[CR_Y], 0, ny * sizeof *y, y), KILN_SUCCESS);
    for (size_t i = 0; i < ny; i++)
        if (!isnan(y[i]))
            fail_msg("y[%zu] = %g was written", i, (double)y[i]);
    free(y);
    cr_case_free(&t);
}

int main(void)
{
    static const kiln_conv_algo algos[VARIANTS] = {KILN_CONV_WINOGRAD_2X2, KILN_CONV_WINOGRAD_4X4};
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_reuse_with_new_weights));
    kt_add(&tests, cmocka_unit_test(test_constant_weights));
    for (size_t a = 0; a < VARIANTS; a++)
        for (int layout = KILN_NCHW; layout <= KILN_NHWC; layout++)
            for (size_t i = 0; i < ROWS; i++) {
                const struct row_test rt = {&rows[i], algos[a], (kiln_tensor_layout)layout};
                char name[192];
                row_name(name, sizeof name, &rt);
                kt_add_copy(&tests, test_row, &rt, sizeof rt, "%s", name);
            }
    for (size_t a = 0; a < VARIANTS; a++)
        for (size_t i = 0; i < UNSUPPORTED; i++) {
            const struct unsupported_test ut = {&unsupported[i], algos[a]};
            kt_add_copy(&tests, test_unsupported, &ut, sizeof ut, "%s unsupported: %s", variant_name(algos[a]),
                        unsupported[i].what);
        }
    return kt_run("winograd", &tests);
}
