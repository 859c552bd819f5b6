/*
 * Batch-norm folding (kiln_fold_batchnorm): the folded weights and bias
 * against double precision on the host, a convolution on folded weights
 * against the convolution followed by batch norm (conv_ref.h's
 * cr_bn_reference), and arguments that must be refused without writing.
 */
#include <stdlib.h>
#include <string.h>

#include "conv_cases.h"

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

static struct cr_bn bn_view(const struct bn *b, float eps)
{
    return (struct cr_bn){b->scale, b->shift, b->mean, b->var, eps};
}

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
        kt_assert_status(
            kiln_fold_batchnorm(K, PER, w, mode == 2 ? NULL : bias, dst, b.scale, b.shift, b.mean, b.var, bn.eps),
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
        kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][lay], KILN_CONV_AUTO);
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        kiln_conv_algo ran = cc_assert_plan_describes(plan, kt_ctx, KILN_CONV_AUTO);
        struct cr_case t;
        cr_case_init(&t, kt_ctx, &d);
        cr_case_fill(&t, &kt_group_seed);
        struct bn b = bn_make(d.k);
        const struct cr_bn bn = bn_view(&b, 1e-5f);
        float *w0 = malloc(t.len[CR_W] * sizeof *w0), *bias0 = malloc(d.k * sizeof *bias0);
        assert_true(w0 && bias0);
        memcpy(w0, t.val[CR_W], t.len[CR_W] * sizeof *w0);
        memcpy(bias0, t.val[CR_BIAS], d.k * sizeof *bias0);
        kt_assert_status(kiln_fold_batchnorm(d.k, t.dims.k_eff, t.val[CR_W], t.val[CR_BIAS], t.val[CR_BIAS], b.scale,
                                             b.shift, b.mean, b.var, bn.eps),
                         KILN_SUCCESS);
        cr_upload(&t, CR_W);
        cr_upload(&t, CR_BIAS);
        kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);

        double *ref = malloc(t.len[CR_Y] * sizeof *ref), *bound = malloc(t.len[CR_Y] * sizeof *bound);
        float *got = malloc(t.len[CR_Y] * sizeof *got);
        assert_true(ref && bound && got);
        cr_bn_reference(&d, t.val[CR_X], w0, bias0, &bn, kiln_conv_algo_tol(ran, t.dims.k_eff), ref, bound);
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

/* clang-format off */
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
/* clang-format on */

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
        kiln_status st =
            kiln_fold_batchnorm(k, per, kind == BN_NULL_W ? NULL : w, bias, kind == BN_NULL_OUT ? NULL : out,
                                kind == BN_NULL_SCALE ? NULL : b.scale, kind == BN_NULL_SHIFT ? NULL : b.shift,
                                kind == BN_NULL_MEAN ? NULL : b.mean, kind == BN_NULL_VAR ? NULL : b.var, eps);
        if (st != KILN_ERROR_INVALID_ARGUMENT)
            fail_msg("fold_batchnorm with %s: %s", bn_bads[i].name, kiln_status_string(st));
        kt_assert_status(st, KILN_ERROR_INVALID_ARGUMENT);
        if (memcmp(w, w0, sizeof w) || memcmp(out, out0, sizeof out))
            fail_msg("fold_batchnorm with %s wrote its outputs", bn_bads[i].name);
        bn_free(&b);
    }
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_fold_batchnorm_values));
    kt_add(&tests, cmocka_unit_test(test_fold_batchnorm_conv));
    kt_add(&tests, cmocka_unit_test(test_fold_batchnorm_bad));
    return kt_run("conv_batchnorm", &tests);
}
