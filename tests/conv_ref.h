/*
 * The plain-C convolution oracle and the host side of a convolution test
 * case, shared by the convolution tests (conv_cases.h, test_conv_*.c,
 * test_winograd.c). Header-only (static inline functions), like
 * gemm_ref.h and attention_ref.h.
 *
 * cr_reference() is the whole operator in double precision, one output at a
 * time with obvious loops: the convolution over both layouts, groups,
 * dilation, strides and asymmetric padding, then
 *   y = pool(act(alpha * conv + beta * z + bias)),
 * and for every output an error bound (cr_bound) built from the sum of
 * |x||w| over its receptive field. A case (struct cr_case) owns exact-size
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

#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* Shapes and indexing                                                      */
/* ------------------------------------------------------------------------ */

/* What follows from a descriptor: convolution output p x q, stored output
   yh x yw, channels and filters per group, and K_eff, the number of products
   summed into one output (cg * r * s). */
struct cr_dims {
    size_t p, q, yh, yw, cg, kg, k_eff;
};

/* The documented output-size formula; 0 in p or q if the output would be
   empty (no check of anything else). */
static inline struct cr_dims cr_dims_of(const kiln_conv2d_desc *d)
{
    struct cr_dims m;
    memset(&m, 0, sizeof m);
    size_t eh = d->dilation_h * (d->r - 1) + 1, ew = d->dilation_w * (d->s - 1) + 1;
    size_t hp = d->h + d->pad_top + d->pad_bottom, wp = d->w + d->pad_left + d->pad_right;
    m.p = hp >= eh && d->stride_h ? (hp - eh) / d->stride_h + 1 : 0;
    m.q = wp >= ew && d->stride_w ? (wp - ew) / d->stride_w + 1 : 0;
    m.yh = d->fused_maxpool ? m.p / 2 : m.p;
    m.yw = d->fused_maxpool ? m.q / 2 : m.q;
    m.cg = d->groups ? d->c / d->groups : 0;
    m.kg = d->groups ? d->k / d->groups : 0;
    m.k_eff = m.cg * d->r * d->s;
    return m;
}

/* Element index of activation (n, c, h, w) of a tensor with `ch` channels and
   hh x ww pixels in the descriptor's layout (x, z and y). */
static inline size_t cr_act_at(const kiln_conv2d_desc *d, size_t ch, size_t hh, size_t ww, size_t n, size_t c, size_t h,
                               size_t w)
{
    return d->layout == KILN_NHWC ? ((n * hh + h) * ww + w) * ch + c : ((n * ch + c) * hh + h) * ww + w;
}

/* Element index of weight (k, c-within-group, r, s): KCRS or KRSC. */
static inline size_t cr_w_at(const kiln_conv2d_desc *d, size_t cg, size_t k, size_t c, size_t r, size_t s)
{
    return d->layout == KILN_NHWC ? ((k * d->r + r) * d->s + s) * cg + c : ((k * cg + c) * d->r + r) * d->s + s;
}

/* ------------------------------------------------------------------------ */
/* fp16 storage                                                             */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Tolerances                                                               */
/* ------------------------------------------------------------------------ */

/*
 * Error of the convolution sum of one output, as a multiple of
 * S = sum |x||w| over its receptive field (the K_eff products it adds):
 *
 * - Implicit GEMM, im2col + GEMM, GEMM-1x1 and direct form exactly the K_eff
 *   products and add them in some order: each product rounds once (u = 2^-24
 *   relative) and each addition at most once more, so |error| <= K_eff * u * S
 *   (Higham's gamma_K to first order). As in gemm_ref.h we allow 4u per term
 *   (2^-22): twice for FMA-versus-separate rounding and blocked or split
 *   partial sums, twice for the epilogue's scaling by alpha, which rounds
 *   relative to values no larger than S.
 * - Winograd adds the same channel sums, but in the transform domain, so
 *   the error is K_eff * 2^-22 * S plus a transform term: the input, filter
 *   and output transforms round, and F(4x4,3x3)'s coefficients (up to 8 in
 *   the output transform, 5 in the input one, fractions like 1/6 and 1/24)
 *   scale those roundings up where the exact result cancels. The transform
 *   term has no data-independent bound relative to S (an output whose
 *   receptive field is mostly padding has a small S but shares its tile's
 *   whole input patch); docs/winograd.md measured its worst at 11 u for
 *   F(2x2) and 420 u for F(4x4) (u = 2^-24) on this file's data with
 *   padding 1 and any channel count, 10 u and 290 u with padding 2 from 8
 *   channels on. The factors below are the envelopes chosen there for
 *   tests/test_winograd.c, 64 u and 2048 u, about five times the worst seen;
 *   they are the only place these numbers live in this file.
 */
#define CR_WINO2X2_TRANSFORM_TOL 0x1p-18
#define CR_WINO4X4_TRANSFORM_TOL 0x1p-13

static inline double cr_algo_tol(kiln_conv_algo algo, size_t k_eff)
{
    double sum_tol = (double)k_eff * 0x1p-22;
    switch (algo) {
    case KILN_CONV_WINOGRAD_2X2:
        return sum_tol + CR_WINO2X2_TRANSFORM_TOL;
    case KILN_CONV_WINOGRAD_4X4:
        return sum_tol + CR_WINO4X4_TRANSFORM_TOL;
    default:
        return sum_tol;
    }
}

/* The activation in double precision (kiln_activation's formulas; GELU is
   the tanh approximation, with sqrt(2/pi) to double precision). */
static inline double cr_activate(kiln_activation act, double v, double slope)
{
    switch (act) {
    case KILN_ACT_RELU:
        return v > 0.0 ? v : 0.0;
    case KILN_ACT_RELU6:
        return v < 0.0 ? 0.0 : v > 6.0 ? 6.0 : v;
    case KILN_ACT_LEAKY_RELU:
        return v < 0.0 ? slope * v : v;
    case KILN_ACT_SIGMOID:
        return 1.0 / (1.0 + exp(-v));
    case KILN_ACT_TANH:
        return tanh(v);
    case KILN_ACT_GELU:
        return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    default:
        return v;
    }
}

/*
 * Error of act(v~) where v~ = v + e, |e| <= pre (the pre-activation bound):
 * the activation's Lipschitz constant times pre, plus its own fp32 error.
 * - ReLU, ReLU6: Lipschitz 1, exact.
 * - leaky ReLU: Lipschitz max(1, |slope|), one multiply rounds (u |result|).
 * - sigmoid: Lipschitz 1/4; 1/(1 + exp(-v)) with OpenCL's exp (<= 3 ulp), an
 *   add and a divide (<= 2.5 ulp) stays within 8u of a value <= 1; we allow
 *   16u for builds with relaxed builtins.
 * - tanh: Lipschitz 1, OpenCL's tanh is within 5 ulp of a value <= 1: 16u.
 * - GELU: Lipschitz < 1.13 (slope of x * Phi(x) peaks at 1.129); in fp32 the
 *   argument a = 0.798 (v + 0.0447 v^3) carries ~4 roundings (4u |a|), tanh
 *   adds 5 ulp, both scaled by 0.5 |v| (tanh' <= 1), and the final products
 *   ~3u |result| <= 3u |v|: within |v| (2u |a| + 6u), allowed 16u |v| (1 + |a|).
 */
static inline double cr_act_bound(kiln_activation act, double v, double slope, double pre)
{
    const double u = 0x1p-24;
    switch (act) {
    case KILN_ACT_LEAKY_RELU:
        return (fabs(slope) > 1.0 ? fabs(slope) : 1.0) * pre + u * fabs(cr_activate(act, v, slope));
    case KILN_ACT_SIGMOID:
        return 0.25 * pre + 16.0 * u;
    case KILN_ACT_TANH:
        return pre + 16.0 * u;
    case KILN_ACT_GELU: {
        double a = 0.7978845608 * (fabs(v) + 0.044715 * fabs(v * v * v));
        return 1.13 * pre + 16.0 * u * fabs(v) * (1.0 + a);
    }
    default:
        return pre;
    }
}

/*
 * Bound on |y - reference| of one convolution output before pooling.
 * - tol * |alpha| * S: the convolution sum (cr_algo_tol), scaled by alpha.
 * - beta * z, bias and their adds round once each relative to their own
 *   size and to v: 2^-23 (|beta z| + |bias| + |v|).
 * - FLT_MIN: a kernel may flush denormal intermediates to zero.
 * - then the activation (cr_act_bound), and with fp16 storage the output's
 *   rounding to fp16: half an ulp of 11 significant bits (2^-11 relative) or
 *   half the smallest subnormal (2^-25). fp16 inputs are rounded before the
 *   reference sees them, so they add nothing here.
 */
static inline double cr_bound(const kiln_conv2d_desc *d, double tol, double abs_sum, double beta_z, double bias,
                              double v, double ref)
{
    double pre = tol * fabs((double)d->alpha) * abs_sum + (fabs(beta_z) + fabs(bias) + fabs(v)) * 0x1p-23 + FLT_MIN;
    double b = cr_act_bound(d->activation, v, d->leaky_slope, pre);
    if (d->dtype == KILN_F16)
        b += (fabs(ref) + b) * 0x1p-11 + 0x1p-25;
    return b;
}

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

/* The convolution sum of output (n, k, p, q) in double, and sum |x||w| over
   its receptive field in *abs_sum. Input pixel p * stride - pad + r *
   dilation, skipped when it falls in the padding. */
static inline double cr_conv_at(const kiln_conv2d_desc *d, const struct cr_dims *m, const float *x, const float *w,
                                size_t n, size_t k, size_t p, size_t q, double *abs_sum)
{
    const size_t g = k / m->kg;
    double sum = 0.0, mag = 0.0;
    for (size_t c = 0; c < m->cg; c++)
        for (size_t r = 0; r < d->r; r++)
            for (size_t s = 0; s < d->s; s++) {
                size_t ih = p * d->stride_h + r * d->dilation_h, iw = q * d->stride_w + s * d->dilation_w;
                if (ih < d->pad_top || iw < d->pad_left)
                    continue;
                ih -= d->pad_top, iw -= d->pad_left;
                if (ih >= d->h || iw >= d->w)
                    continue;
                double prod = (double)x[cr_act_at(d, d->c, d->h, d->w, n, g * m->cg + c, ih, iw)] *
                              (double)w[cr_w_at(d, m->cg, k, c, r, s)];
                sum += prod;
                mag += fabs(prod);
            }
    *abs_sum = mag;
    return sum;
}

/*
 * y = pool(act(alpha * conv(x, w) + beta * z + bias)) in double precision,
 * with the error bound of each stored output in `bound` (NULL: not wanted)
 * for an algorithm of tolerance `tol` (cr_algo_tol). z is read only when
 * beta != 0 and bias only when has_bias. A pooled output is the maximum of
 * four values each within its own bound, so it is within the largest of the
 * four. Outputs are in y's layout: n x k x yh x yw.
 */
static inline void cr_reference(const kiln_conv2d_desc *d, const float *x, const float *w, const float *bias,
                                const float *z, double tol, double *y, double *bound)
{
    const struct cr_dims m = cr_dims_of(d);
    const size_t pool = d->fused_maxpool ? 2 : 1;
    for (size_t n = 0; n < d->n; n++)
        for (size_t k = 0; k < d->k; k++)
            for (size_t oh = 0; oh < m.yh; oh++)
                for (size_t ow = 0; ow < m.yw; ow++) {
                    double best = -INFINITY, best_bound = 0.0;
                    for (size_t ph = 0; ph < pool; ph++)
                        for (size_t pw = 0; pw < pool; pw++) {
                            const size_t p = oh * pool + ph, q = ow * pool + pw;
                            double abs_sum, sum = cr_conv_at(d, &m, x, w, n, k, p, q, &abs_sum);
                            double beta_z =
                                d->beta != 0.0f ? (double)d->beta * z[cr_act_at(d, d->k, m.p, m.q, n, k, p, q)] : 0.0;
                            double b = d->has_bias ? bias[k] : 0.0;
                            double v = (double)d->alpha * sum + beta_z + b;
                            double a = cr_activate(d->activation, v, d->leaky_slope);
                            double e = cr_bound(d, tol, abs_sum, beta_z, b, v, a);
                            if (a > best)
                                best = a;
                            if (e > best_bound)
                                best_bound = e;
                        }
                    const size_t at = cr_act_at(d, d->k, m.yh, m.yw, n, k, oh, ow);
                    y[at] = best;
                    if (bound)
                        bound[at] = best_bound;
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
    const struct cr_dims m = cr_dims_of(d);
    for (size_t n = 0; n < d->n; n++)
        for (size_t k = 0; k < d->k; k++) {
            const double g = cr_bn_gain(bn, k), shifted = (bias ? bias[k] : 0.0) - bn->mean[k];
            const double folded_bias = shifted * g + bn->shift[k];
            for (size_t p = 0; p < m.p; p++)
                for (size_t q = 0; q < m.q; q++) {
                    double abs_sum, sum = cr_conv_at(d, &m, x, w, n, k, p, q, &abs_sum);
                    const size_t at = cr_act_at(d, d->k, m.p, m.q, n, k, p, q);
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

enum { CR_X, CR_W, CR_BIAS, CR_Z, CR_Y, CR_OPERANDS };

struct cr_case {
    kiln_conv2d_desc desc;
    struct cr_dims dims;
    size_t len[CR_OPERANDS]; /* elements (0: operand unused) */
    float *val[CR_OPERANDS]; /* host values as stored (fp16-representable with F16) */
    unsigned char *raw[CR_OPERANDS];
    kiln_buffer *buf[CR_OPERANDS];
};

static inline size_t cr_operand_elem_size(const struct cr_case *t, int which)
{
    return which == CR_BIAS ? 4 : kt_elem_size(t->desc.dtype); /* bias stays fp32 */
}

/* Allocate exact-size buffers for `desc`: bias only if has_bias, z only if
   beta != 0. */
static inline void cr_case_init(struct cr_case *t, kiln_context *ctx, const kiln_conv2d_desc *desc)
{
    memset(t, 0, sizeof *t);
    t->desc = *desc;
    t->dims = cr_dims_of(desc);
    const struct cr_dims *m = &t->dims;
    t->len[CR_X] = desc->n * desc->c * desc->h * desc->w;
    t->len[CR_W] = desc->k * m->cg * desc->r * desc->s;
    t->len[CR_BIAS] = desc->has_bias ? desc->k : 0;
    t->len[CR_Z] = desc->beta != 0.0f ? desc->n * desc->k * m->p * m->q : 0;
    t->len[CR_Y] = desc->n * desc->k * m->yh * m->yw;
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
    if (cr_operand_elem_size(t, which) == 2) {
        for (size_t i = 0; i < t->len[which]; i++) {
            uint16_t h = kt_to_half(v[i]);
            memcpy(raw + 2 * i, &h, 2);
        }
    } else {
        memcpy(raw, v, t->len[which] * sizeof(float));
    }
}

static inline float cr_decode(const struct cr_case *t, int which, const unsigned char *raw, size_t i)
{
    return kt_stored(raw, cr_operand_elem_size(t, which), i);
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
            if (cr_operand_elem_size(t, i) == 2)
                for (size_t j = 0; j < t->len[i]; j++)
                    v[j] = kt_from_half(kt_to_half(v[j]));
        }
        cr_upload(t, i);
    }
}

/* Fresh x and NaN y, the rest as it was: for plans that may keep what they
   made of the weights. */
static inline void cr_case_refresh_x(struct cr_case *t, uint64_t *seed)
{
    kt_fill_uniform(t->val[CR_X], t->len[CR_X], -1.0f, 1.0f, seed);
    if (cr_operand_elem_size(t, CR_X) == 2)
        for (size_t j = 0; j < t->len[CR_X]; j++)
            t->val[CR_X][j] = kt_from_half(kt_to_half(t->val[CR_X][j]));
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
                    size_t at = cr_act_at(d, d->k, t->dims.yh, t->dims.yw, n, k, h, w);
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
