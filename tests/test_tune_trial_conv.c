/* A candidate tried on a convolution as the tuner tries it
   (src/tune/trial_conv.c): right parameters are timed on a table of
   descriptors (both layouts, strides, 1x1, groups and depthwise, dilation,
   every epilogue, each algorithm forced on one Winograd-eligible shape); a
   kernel variant that computes a wrong result is rejected with its reason
   and never timed. The wrong variant comes from a copy of the kernel
   sources (KILN_KERNEL_DIR) in which the direct kernel scales its sums
   slightly for one work-group size only: only the candidate that selects it
   fails. */
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "ops/find.h"
#include "trial_checks.h"

/* One row: the descriptor, and what the plan's kernel name must contain
   ("" when the algorithm is the heuristic's). */
struct row {
    const char *name;
    kiln_tensor_layout layout;
    size_t n, c, h, w, k, r, s, stride, pad, dilation, groups;
    int bias;
    float beta;
    kiln_activation act;
    int pool;
    kiln_conv_algo algo;
    const char *kernel;
};

static const struct row rows[] = {
    {"nchw 3x3 stride 1", KILN_NCHW, 2, 8, 13, 11, 12, 3, 3, 1, 1, 1, 1, 0, 0.0f, KILN_ACT_NONE, 0, KILN_CONV_AUTO, ""},
    {"nhwc 3x3 stride 1", KILN_NHWC, 1, 12, 10, 9, 8, 3, 3, 1, 1, 1, 1, 0, 0.0f, KILN_ACT_NONE, 0, KILN_CONV_AUTO, ""},
    {"nchw 3x3 stride 2", KILN_NCHW, 1, 6, 15, 14, 10, 3, 3, 2, 1, 1, 1, 0, 0.0f, KILN_ACT_NONE, 0, KILN_CONV_AUTO, ""},
    {"nhwc 3x3 stride 2", KILN_NHWC, 2, 5, 17, 12, 7, 3, 3, 2, 0, 1, 1, 0, 0.0f, KILN_ACT_NONE, 0, KILN_CONV_AUTO, ""},
    {"nchw 1x1", KILN_NCHW, 1, 16, 9, 9, 24, 1, 1, 1, 0, 1, 1, 0, 0.0f, KILN_ACT_NONE, 0, KILN_CONV_AUTO, ""},
    {"nhwc 1x1", KILN_NHWC, 2, 20, 7, 5, 12, 1, 1, 1, 0, 1, 1, 0, 0.0f, KILN_ACT_NONE, 0, KILN_CONV_AUTO, ""},
    {"nchw depthwise bias relu", KILN_NCHW, 1, 16, 12, 12, 16, 3, 3, 1, 1, 1, 16, 1, 0.0f, KILN_ACT_RELU, 0,
     KILN_CONV_AUTO, ""},
    {"nhwc depthwise stride 2 bias relu6", KILN_NHWC, 2, 24, 11, 13, 24, 3, 3, 2, 1, 1, 24, 1, 0.0f, KILN_ACT_RELU6, 0,
     KILN_CONV_AUTO, ""},
    {"nchw groups dilation 2 bias gelu", KILN_NCHW, 1, 8, 14, 12, 12, 3, 3, 1, 2, 2, 2, 1, 0.0f, KILN_ACT_GELU, 0,
     KILN_CONV_AUTO, ""},
    {"nchw residual z bias leaky relu", KILN_NCHW, 1, 8, 10, 10, 8, 3, 3, 1, 1, 1, 1, 1, 0.5f, KILN_ACT_LEAKY_RELU, 0,
     KILN_CONV_AUTO, ""},
    {"nhwc residual z sigmoid", KILN_NHWC, 2, 6, 9, 8, 10, 3, 3, 1, 1, 1, 1, 0, -1.5f, KILN_ACT_SIGMOID, 0,
     KILN_CONV_AUTO, ""},
    {"nchw fused maxpool tanh", KILN_NCHW, 1, 4, 12, 14, 8, 3, 3, 1, 1, 1, 1, 1, 0.0f, KILN_ACT_TANH, 1, KILN_CONV_AUTO,
     ""},
    {"nhwc fused maxpool residual z", KILN_NHWC, 1, 3, 11, 10, 6, 3, 3, 1, 1, 1, 1, 1, 1.0f, KILN_ACT_RELU, 1,
     KILN_CONV_AUTO, ""},
    {"winograd-4x4", KILN_NCHW, 2, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 0.0f, KILN_ACT_RELU, 0, KILN_CONV_WINOGRAD_4X4,
     "wino4x4"},
    {"winograd-2x2 nhwc residual z", KILN_NHWC, 1, 8, 10, 12, 8, 3, 3, 1, 1, 1, 1, 0, 0.5f, KILN_ACT_NONE, 0,
     KILN_CONV_WINOGRAD_2X2, "wino2x2"},
    {"winograd shape, direct", KILN_NCHW, 2, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 0.0f, KILN_ACT_RELU, 0,
     KILN_CONV_DIRECT, "direct"},
    {"winograd shape, implicit gemm", KILN_NCHW, 2, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 0.0f, KILN_ACT_RELU, 0,
     KILN_CONV_IMPLICIT_GEMM, "igemm"},
    {"winograd shape, im2col", KILN_NHWC, 1, 8, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1, 0.0f, KILN_ACT_NONE, 0,
     KILN_CONV_IM2COL, ""},
};

static void desc_of(const struct row *row, kiln_conv2d_desc *d)
{
    kiln_conv2d_desc_init(d, row->layout, row->n, row->c, row->h, row->w, row->k, row->r, row->s);
    d->stride_h = d->stride_w = row->stride;
    d->pad_top = d->pad_bottom = d->pad_left = d->pad_right = row->pad;
    d->dilation_h = d->dilation_w = row->dilation;
    d->groups = row->groups;
    d->has_bias = row->bias;
    d->beta = row->beta;
    d->activation = row->act;
    d->leaky_slope = 0.1f;
    d->fused_maxpool = row->pool;
    d->algo = row->algo;
}

static void test_right_parameters_are_timed(void **state)
{
    const struct row *row = *state;
    kiln_conv2d_desc d;
    desc_of(row, &d);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_conv(kt_ctx, &d, 3, 0.0, kt_group_seed, &t), KILN_SUCCESS);
    /* An algorithm written in OpenCL's vector syntax has no plan on a
       backend without it. */
    if (t.verdict == KILN_TRIAL_NO_PLAN && t.status == KILN_ERROR_UNSUPPORTED && !kt_ctx->vector_kernels) {
        printf("# %s: %s\n", row->name, t.reason);
        skip();
    }
    tc_assert_timed(&t);
    assert_true(t.runs >= 3 && t.runs <= KILN_TIME_MAX_RUNS); /* more where three add up to under KILN_TIME_MIN_MS */
    printf("# %s: %s, worst error %.3g of the bound\n", row->name, t.kernel, t.worst);
    if (!strstr(t.kernel, row->kernel))
        fail_msg("kernel %s, expected a %s kernel", t.kernel, row->kernel);
}

static void test_asymmetric_padding_is_timed(void **state)
{
    (void)state;
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NHWC, 1, 5, 9, 11, 7, 3, 2);
    d.pad_top = 2, d.pad_bottom = 0, d.pad_left = 0, d.pad_right = 1;
    d.stride_w = 2;
    d.alpha = 0.75f;
    struct kiln_trial t;
    kt_assert_status(kiln_trial_conv(kt_ctx, &d, 2, 0.0, kt_group_seed, &t), KILN_SUCCESS);
    tc_assert_timed(&t);
}

static void test_cutoff_stops_after_one_run(void **state)
{
    (void)state;
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 8, 16, 16, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    struct kiln_trial t;
    kt_assert_status(kiln_trial_conv(kt_ctx, &d, 9, 1e-9, kt_group_seed, &t), KILN_SUCCESS);
    tc_assert_timed(&t);
    assert_int_equal(t.runs, 1);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 4, 8, 8, 4, 3, 3);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_conv(NULL, &d, 1, 0.0, 1, &t), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_trial_conv(kt_ctx, NULL, 1, 0.0, 1, &t), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_trial_conv(kt_ctx, &d, 1, 0.0, 1, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

/* fp16 and bf16 storage, as the tensor-core convolution takes it (NHWC, a
   bias and ReLU, a residual z): x, w and z drawn in the storage type, the
   bias in fp32, y checked with its own rounding added to the bound. */
static void test_16_bit_storage(void **state)
{
    (void)state;
    for (kiln_dtype t = KILN_F16; t <= KILN_BF16; t++) {
        kiln_conv2d_desc d;
        kiln_conv2d_desc_init(&d, KILN_NHWC, 2, 16, 9, 10, 24, 3, 3);
        d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
        d.dtype = t;
        d.has_bias = 1;
        d.beta = 0.5f;
        d.activation = KILN_ACT_RELU;
        struct kiln_trial trial;
        kt_assert_status(kiln_trial_conv(kt_ctx, &d, 2, 0.0, kt_group_seed + t, &trial), KILN_SUCCESS);
        tc_assert_16_bit(&trial, t, "nhwc 3x3");
    }
}

/* A descriptor no plan accepts is a candidate without a plan, not an error
   of the trial; so is an algorithm that does not apply. */
static void test_no_plan_is_a_verdict(void **state)
{
    (void)state;
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 6, 8, 8, 4, 3, 3);
    d.groups = 4;
    struct kiln_trial t;
    kt_assert_status(kiln_trial_conv(kt_ctx, &d, 1, 0.0, 1, &t), KILN_SUCCESS);
    assert_int_equal(t.verdict, KILN_TRIAL_NO_PLAN);
    assert_int_equal(t.status, KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(t.runs, 0);
    d.groups = 1;
    d.stride_h = 2;
    d.algo = KILN_CONV_WINOGRAD_4X4;
    kt_assert_status(kiln_trial_conv(kt_ctx, &d, 1, 0.0, 1, &t), KILN_SUCCESS);
    assert_int_equal(t.verdict, KILN_TRIAL_NO_PLAN);
    assert_int_equal(t.status, KILN_ERROR_UNSUPPORTED);
}

/* The smallest register tile the schema admits, scalar columns (vw 1), on
   the stride-2 NCHW implicit GEMM, whose input rows are copied in vectors
   of even lanes: a candidate the tuner once had to reject as a build
   failure. */
static void test_scalar_register_tile_is_timed(void **state)
{
    (void)state;
    kiln_context *ctx =
        kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"mr\": 2, \"nr\": 2, \"vw\": 1, \"narrow_mr\": 1}}}");
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 3, 33, 29, 8, 3, 3);
    d.stride_h = d.stride_w = 2;
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.has_bias = 1;
    d.activation = KILN_ACT_RELU;
    d.algo = KILN_CONV_IMPLICIT_GEMM;
    struct kiln_trial t;
    kt_assert_status(kiln_trial_conv(ctx, &d, 2, 0.0, kt_group_seed, &t), KILN_SUCCESS);
    tc_assert_timed(&t);
    printf("# %s %s\n", t.kernel, t.params);
    kiln_context_destroy(ctx);
}

/* A trial of the direct NCHW convolution in work-groups of `wg`. */
static void trial_wg(int wg, struct kiln_trial *t)
{
    char overlay[128];
    snprintf(overlay, sizeof overlay, "{\"kernels\": {\"conv.direct\": {\"wg\": %d}}}", wg);
    kiln_context *ctx = kt_overlay_context("%s", overlay);
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 6, 20, 20, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.has_bias = 1;
    d.activation = KILN_ACT_RELU;
    d.algo = KILN_CONV_DIRECT;
    kt_assert_status(kiln_trial_conv(ctx, &d, 2, 0.0, kt_group_seed, t), KILN_SUCCESS);
    kiln_context_destroy(ctx);
}

static void test_wrong_variant_is_rejected(void **state)
{
    (void)state;
    char *dir = tc_kernels_begin(KT_CL_DIR), path[4200];
    snprintf(path, sizeof path, "%s/conv/conv_f32_direct.cl", dir);
    kt_edit_file(path, "            v[t] = alpha * acc[kt][t];\n",
                 "#if KILN_DIRECT_WG == 32\n"
                 "            v[t] = alpha * acc[kt][t] * 1.001f;\n"
                 "#else\n"
                 "            v[t] = alpha * acc[kt][t];\n"
                 "#endif\n");

    struct kiln_trial t;
    trial_wg(16, &t);
    tc_assert_timed(&t);
    assert_non_null(strstr(t.params, "WG=16"));
    trial_wg(32, &t);
    tc_assert_rejected(&t, KILN_TRIAL_WRONG, "wg 32");
    assert_non_null(strstr(t.params, "WG=32"));
    trial_wg(64, &t);
    tc_assert_timed(&t);
    assert_non_null(strstr(t.params, "WG=64"));

    tc_kernels_end(dir);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add_items(&tests, "test_right_parameters_are_timed: ", test_right_parameters_are_timed, rows,
                 sizeof rows / sizeof *rows, sizeof *rows);
    kt_add(&tests, cmocka_unit_test(test_asymmetric_padding_is_timed));
    kt_add(&tests, cmocka_unit_test(test_scalar_register_tile_is_timed));
    kt_add(&tests, cmocka_unit_test(test_cutoff_stops_after_one_run));
    kt_add(&tests, cmocka_unit_test(test_bad_arguments));
    kt_add(&tests, cmocka_unit_test(test_16_bit_storage));
    kt_add(&tests, cmocka_unit_test(test_no_plan_is_a_verdict));
    kt_add(&tests, cmocka_unit_test(test_wrong_variant_is_rejected));
    return kt_run("tune_trial_conv", &tests);
}
