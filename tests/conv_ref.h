/*
 * The plain-C convolution oracle and the host side of a convolution test
 * case, shared by the convolution tests (conv_cases.h, test_conv_*.c,
 * test_winograd.c). Header-only (static inline functions), like
 * gemm_ref.h and attention_ref.h.
 *
 * cr_reference() is the whole operator in double precision over every
 * output, with an error bound for each: src/ref/conv_operand.h holds the
 * shapes, indexing, tolerances and the reference of one output, which the
 * tuner's check of a candidate shares. A case (struct cr_case) owns exact-size
 * device buffers, fills them with fresh uniform values (never zeros), poisons
 * y with NaN, and checks that every element of y is within its bound (NaN
 * never is, so an element left unwritten fails) and that the inputs came
 * back unchanged.
 */
#ifndef KILN_TEST_CONV_REF_H
#define KILN_TEST_CONV_REF_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/conv_operand.h"
#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

/*
 * y = pool(act(alpha * conv(x, w) + beta * z + bias)) in double precision
 * (kiln_conv_output_at for every stored output), with the error bound of
 * each stored output in `bound` (NULL: not wanted) for an algorithm of
 * tolerance `tol` (kiln_conv_algo_tol). z is read only when beta != 0 and
 * bias only when has_bias. Outputs are in y's layout: n x k x yh x yw.
 */
static inline void cr_reference(const kiln_conv2d_desc *d, const float *x, const float *w, const float *bias,
                                const float *z, double tol, double *y, double *bound)
{
    const struct kiln_conv_dims m = kiln_conv_dims_of(d);
    for (size_t n = 0; n < d->n; n++)
        for (size_t k = 0; k < d->k; k++)
            for (size_t oh = 0; oh < m.yh; oh++)
                for (size_t ow = 0; ow < m.yw; ow++) {
                    const size_t at = kiln_conv_act_at(d, d->k, m.yh, m.yw, n, k, oh, ow);
                    double e;
                    y[at] = kiln_conv_output_at(d, &m, x, w, bias, z, tol, n, k, oh, ow, &e);
                    if (bound)
                        bound[at] = e;
                }
}

/* ------------------------------------------------------------------------ */
/* Batch-norm folding                                                       */
/* ------------------------------------------------------------------------ */

/* Inference batch-norm statistics of k filters. */
struct cr_bn {
    const float *scale, *shift, *mean, *var;
    float eps;
};

/* g = scale / sqrt(var + eps) in double. */
static inline double cr_bn_gain(const struct cr_bn *bn, size_t k)
{
    return (double)bn->scale[k] / sqrt((double)bn->var[k] + (double)bn->eps);
}

/*
 * Convolution with the original weights w and bias (NULL: zero), then batch
 * norm, in double: y = (conv + bias - mean) * g + shift, for a plain fp32
 * descriptor (alpha 1, no residual, activation or pool). `bound` is the
 * error allowed to a device convolution of tolerance `tol` run on the folded
 * weights w' = fl(w g) and bias b' = fl((bias - mean) g + shift):
 * - fl(w g) is w g (1 + d), |d| <= 2^-24 per weight: the folded sum is
 *   within 2^-24 |g| S of g * conv, and the device's own error is tol times
 *   its S' = |g| S (1 + 2^-24); allowed |g| S (tol + 2^-23).
 * - b' in fp32: up to four roundings (subtract, multiply, add, store)
 *   relative to |bias - mean| |g| + |shift|: 2^-22 of that.
 * - adding b' on the device: 2^-23 (|b'| + |y|), plus FLT_MIN for flushed
 *   denormals.
 */
static inline void cr_bn_reference(const kiln_conv2d_desc *d, const float *x, const float *w, const float *bias,
                                   const struct cr_bn *bn, double tol, double *y, double *bound)
{
    const struct kiln_conv_dims m = kiln_conv_dims_of(d);
    for (size_t n = 0; n < d->n; n++)
        for (size_t k = 0; k < d->k; k++) {
            const double g = cr_bn_gain(bn, k), shifted = (bias ? bias[k] : 0.0) - bn->mean[k];
            const double folded_bias = shifted * g + bn->shift[k];
            for (size_t p = 0; p < m.p; p++)
                for (size_t q = 0; q < m.q; q++) {
                    double abs_sum, sum = kiln_conv_sum_at(d, &m, x, w, n, k, p, q, &abs_sum);
                    const size_t at = kiln_conv_act_at(d, d->k, m.p, m.q, n, k, p, q);
                    y[at] = (sum + shifted) * g + bn->shift[k];
                    bound[at] = fabs(g) * abs_sum * (tol + 0x1p-23) +
                                (fabs(shifted * g) + fabs((double)bn->shift[k])) * 0x1p-22 +
                                (fabs(folded_bias) + fabs(y[at])) * 0x1p-23 + FLT_MIN;
                }
        }
}

/* ------------------------------------------------------------------------ */
/* A test case: host values, device buffers, check                          */
/* ------------------------------------------------------------------------ */

/* The tensors, as src/ref/conv_operand.h numbers them. */
enum {
    CR_X = KILN_CONV_X,
    CR_W = KILN_CONV_W,
    CR_BIAS = KILN_CONV_BIAS,
    CR_Z = KILN_CONV_Z,
    CR_Y = KILN_CONV_Y,
    CR_OPERANDS = KILN_CONV_TENSORS
};

struct cr_case {
    kiln_conv2d_desc desc;
    struct kiln_conv_dims dims;
    size_t len[CR_OPERANDS]; /* elements (0: operand unused) */
    float *val[CR_OPERANDS]; /* host values as stored (fp16-representable with F16) */
    unsigned char *raw[CR_OPERANDS];
    kiln_buffer *buf[CR_OPERANDS];
};

static inline kiln_dtype cr_operand_dtype(const struct cr_case *t, int which)
{
    return which == CR_BIAS ? KILN_F32 : t->desc.dtype; /* bias stays fp32 */
}

static inline size_t cr_operand_elem_size(const struct cr_case *t, int which)
{
    return kt_elem_size(cr_operand_dtype(t, which));
}

/* Allocate exact-size buffers for `desc`: bias only if has_bias, z only if
   beta != 0. */
static inline void cr_case_init(struct cr_case *t, kiln_context *ctx, const kiln_conv2d_desc *desc)
{
    memset(t, 0, sizeof *t);
    t->desc = *desc;
    t->dims = kiln_conv_dims_of(desc);
    for (int i = 0; i < CR_OPERANDS; i++)
        t->len[i] = kiln_conv_tensor_used(desc, i) ? kiln_conv_tensor_count(desc, &t->dims, i) : 0;
    for (int i = 0; i < CR_OPERANDS; i++) {
        if (!t->len[i])
            continue;
        size_t bytes = t->len[i] * cr_operand_elem_size(t, i);
        t->val[i] = malloc(t->len[i] * sizeof(float));
        t->raw[i] = malloc(bytes);
        assert_non_null(t->val[i]);
        assert_non_null(t->raw[i]);
        kt_assert_status(kiln_buffer_create(ctx, bytes, &t->buf[i]), KILN_SUCCESS);
    }
}

static inline void cr_case_free(struct cr_case *t)
{
    for (int i = 0; i < CR_OPERANDS; i++) {
        kiln_buffer_destroy(t->buf[i]);
        free(t->val[i]);
        free(t->raw[i]);
    }
}

static inline void cr_encode(const struct cr_case *t, int which, const float *v, unsigned char *raw)
{
    for (size_t i = 0; i < t->len[which]; i++)
        kt_store(raw, cr_operand_dtype(t, which), i, v[i]);
}

static inline float cr_decode(const struct cr_case *t, int which, const unsigned char *raw, size_t i)
{
    return kt_stored(raw, cr_operand_dtype(t, which), i);
}

static inline void cr_upload(struct cr_case *t, int which)
{
    cr_encode(t, which, t->val[which], t->raw[which]);
    kt_assert_status(kiln_buffer_write(t->buf[which], 0, t->len[which] * cr_operand_elem_size(t, which), t->raw[which]),
                     KILN_SUCCESS);
}

/*
 * Fresh uniform values: x, bias and z in [-1, 1), weights in [-a, a) with
 * a = sqrt(3 / K_eff) so a convolution output has about the spread of one
 * input (variance K_eff * 1/3 * a^2 / 3 = 1/3) and sigmoid, tanh and GELU see
 * their curved range rather than saturation. A uniform draw is zero with
 * probability 2^-24 per element. With F16 the values are rounded to fp16 so
 * the reference sees what is stored. y is all NaN.
 */
static inline void cr_case_fill(struct cr_case *t, uint64_t *seed)
{
    const float a = (float)sqrt(3.0 / (double)t->dims.k_eff);
    for (int i = 0; i < CR_OPERANDS; i++) {
        if (!t->len[i])
            continue;
        float *v = t->val[i];
        if (i == CR_Y) {
            for (size_t j = 0; j < t->len[i]; j++)
                v[j] = NAN;
        } else {
            kt_fill_uniform(v, t->len[i], i == CR_W ? -a : -1.0f, i == CR_W ? a : 1.0f, seed);
            for (size_t j = 0; j < t->len[i]; j++)
                v[j] = kt_round_to(cr_operand_dtype(t, i), v[j]);
        }
        cr_upload(t, i);
    }
}

/* Fresh x and NaN y, the rest as it was: for plans that may keep what they
   made of the weights. */
static inline void cr_case_refresh_x(struct cr_case *t, uint64_t *seed)
{
    kt_fill_uniform(t->val[CR_X], t->len[CR_X], -1.0f, 1.0f, seed);
    for (size_t j = 0; j < t->len[CR_X]; j++)
        t->val[CR_X][j] = kt_round_to(t->desc.dtype, t->val[CR_X][j]);
    for (size_t j = 0; j < t->len[CR_Y]; j++)
        t->val[CR_Y][j] = NAN;
    cr_upload(t, CR_X);
    cr_upload(t, CR_Y);
}

static inline kiln_status cr_case_execute(struct cr_case *t, kiln_conv2d_plan *plan, kiln_event **event)
{
    return kiln_conv2d_plan_execute(plan, t->buf[CR_X], t->buf[CR_W], t->buf[CR_BIAS], t->buf[CR_Z], t->buf[CR_Y],
                                    event);
}

/* Read everything back after the convolution ran on the filled case: x, w,
   bias and z bit for bit as uploaded, every element of y within its bound of
   the reference for an algorithm of tolerance `tol`. `label` names the case
   in messages. */
static inline void cr_case_check(const struct cr_case *t, double tol, const char *label)
{
    const kiln_conv2d_desc *d = &t->desc;
    for (int i = 0; i < CR_Y; i++) {
        if (!t->len[i])
            continue;
        size_t bytes = t->len[i] * cr_operand_elem_size(t, i);
        unsigned char *back = malloc(bytes);
        assert_non_null(back);
        kt_assert_status(kiln_buffer_read(t->buf[i], 0, bytes, back), KILN_SUCCESS);
        if (memcmp(back, t->raw[i], bytes) != 0)
            fail_msg("%s: input %s was modified", label, (const char *[]){"x", "w", "bias", "z"}[i]);
        free(back);
    }
    const size_t ny = t->len[CR_Y];
    unsigned char *got = malloc(ny * kt_elem_size(d->dtype));
    double *ref = malloc(ny * sizeof *ref), *bound = malloc(ny * sizeof *bound);
    assert_non_null(got);
    assert_non_null(ref);
    assert_non_null(bound);
    kt_assert_status(kiln_buffer_read(t->buf[CR_Y], 0, ny * kt_elem_size(d->dtype), got), KILN_SUCCESS);
    cr_reference(d, t->val[CR_X], t->val[CR_W], t->val[CR_BIAS], t->val[CR_Z], tol, ref, bound);

    size_t bad = 0;
    double worst = 0.0;
    for (size_t n = 0; n < d->n; n++)
        for (size_t k = 0; k < d->k; k++)
            for (size_t h = 0; h < t->dims.yh; h++)
                for (size_t w = 0; w < t->dims.yw; w++) {
                    size_t at = kiln_conv_act_at(d, d->k, t->dims.yh, t->dims.yw, n, k, h, w);
                    double v = cr_decode(t, CR_Y, got, at), err = fabs(v - ref[at]);
                    if (err / bound[at] > worst)
                        worst = err / bound[at];
                    if (!(err <= bound[at]) && bad++ < 5)
                        print_error("%s: y[n=%zu][k=%zu][%zu][%zu] = %.9g, reference %.9g, error %.3g > bound %.3g\n",
                                    label, n, k, h, w, v, ref[at], err, bound[at]);
                }
    free(got);
    free(ref);
    free(bound);
    if (bad)
        fail_msg("%s: %zu of %zu outputs wrong", label, bad, ny);
    if (getenv("KILN_TEST_VERBOSE"))
        printf("# %s: worst error %.3g of the bound\n", label, worst);
}

#endif /* KILN_TEST_CONV_REF_H */
