/*
 * Where the elements of a convolution's tensors are stored and what one
 * output should be, for code that checks a convolution on the host with
 * plain loops: the tuner's check of each candidate (src/tune/trial_conv.c)
 * and the tests' reference (tests/conv_ref.h). Header-only.
 *
 * kiln_conv_output_at() is the whole operator in double precision for one
 * stored output, with obvious loops: the convolution over both layouts,
 * groups, dilation, strides and asymmetric padding, then
 *   y = pool(act(alpha * conv + beta * z + bias)),
 * and its error bound (kiln_conv_bound) built from the sum of |x||w| over
 * the receptive field.
 */
#ifndef KILN_REF_CONV_OPERAND_H
#define KILN_REF_CONV_OPERAND_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kiln/kiln.h"
#include "ref/storage.h"

/* ------------------------------------------------------------------------ */
/* Shapes and indexing                                                      */
/* ------------------------------------------------------------------------ */

/* The tensors of one execution, in kiln_conv2d_plan_execute's order. */
enum kiln_conv_tensor_id { KILN_CONV_X, KILN_CONV_W, KILN_CONV_BIAS, KILN_CONV_Z, KILN_CONV_Y, KILN_CONV_TENSORS };

/* What follows from a descriptor: convolution output p x q, stored output
   yh x yw, channels and filters per group, and K_eff, the number of products
   summed into one output (cg * r * s). */
struct kiln_conv_dims {
    size_t p, q, yh, yw, cg, kg, k_eff;
};

/* The documented output-size formula; 0 in p or q if the output would be
   empty (no check of anything else). */
static inline struct kiln_conv_dims kiln_conv_dims_of(const kiln_conv2d_desc *d)
{
    struct kiln_conv_dims m;
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

/* Elements of tensor `which` (bias and z whether or not the epilogue takes
   them): 0 when a dimension is 0, else SIZE_MAX if that does not fit in a
   size_t. */
static inline size_t kiln_conv_tensor_count(const kiln_conv2d_desc *d, const struct kiln_conv_dims *m, int which)
{
    const size_t f[KILN_CONV_TENSORS][4] = {{d->n, d->c, d->h, d->w},
                                            {d->k, m->cg, d->r, d->s},
                                            {d->k, 1, 1, 1},
                                            {d->n, d->k, m->p, m->q},
                                            {d->n, d->k, m->yh, m->yw}};
    size_t count = 1;
    for (int i = 0; i < 4; i++)
        if (f[which][i] == 0)
            return 0;
    for (int i = 0; i < 4; i++)
        if (__builtin_mul_overflow(count, f[which][i], &count))
            return SIZE_MAX;
    return count;
}

/* Whether an execution takes tensor `which`: bias only when has_bias, z
   only when beta != 0. */
static inline int kiln_conv_tensor_used(const kiln_conv2d_desc *d, int which)
{
    return which == KILN_CONV_BIAS ? d->has_bias != 0 : which == KILN_CONV_Z ? d->beta != 0.0f : 1;
}

/* Element index of activation (n, c, h, w) of a tensor with `ch` channels and
   hh x ww pixels in the descriptor's layout (x, z and y). */
static inline size_t kiln_conv_act_at(const kiln_conv2d_desc *d, size_t ch, size_t hh, size_t ww, size_t n, size_t c,
                                      size_t h, size_t w)
{
    return d->layout == KILN_NHWC ? ((n * hh + h) * ww + w) * ch + c : ((n * ch + c) * hh + h) * ww + w;
}

/* Element index of weight (k, c-within-group, r, s): KCRS or KRSC. */
static inline size_t kiln_conv_w_at(const kiln_conv2d_desc *d, size_t cg, size_t k, size_t c, size_t r, size_t s)
{
    return d->layout == KILN_NHWC ? ((k * d->r + r) * d->s + s) * cg + c : ((k * cg + c) * d->r + r) * d->s + s;
}

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
 *   (Higham's gamma_K to first order). As in tests/gemm_ref.h we allow 4u
 *   per term (2^-22): twice for FMA-versus-separate rounding and blocked or
 *   split partial sums, twice for the epilogue's scaling by alpha, which
 *   rounds relative to values no larger than S.
 * - Winograd adds the same channel sums, but in the transform domain, so
 *   the error is K_eff * 2^-22 * S plus a transform term: the input, filter
 *   and output transforms round, and F(4x4,3x3)'s coefficients (up to 8 in
 *   the output transform, 5 in the input one, fractions like 1/6 and 1/24)
 *   scale those roundings up where the exact result cancels. The transform
 *   term has no data-independent bound relative to S (an output whose
 *   receptive field is mostly padding has a small S but shares its tile's
 *   whole input patch); docs/winograd.md measured its worst at 11 u for
 *   F(2x2) and 420 u for F(4x4) (u = 2^-24) on tests/conv_ref.h's data with
 *   padding 1 and any channel count, 10 u and 290 u with padding 2 from 8
 *   channels on. The factors below are the envelopes chosen there for
 *   tests/test_winograd.c, 64 u and 2048 u, about five times the worst seen;
 *   they are the only place these numbers live. Both terms are relative to
 *   S, so scaling x or w scales error and bound alike.
 */
#define KILN_CONV_WINO2X2_TRANSFORM_TOL 0x1p-18
#define KILN_CONV_WINO4X4_TRANSFORM_TOL 0x1p-13

static inline double kiln_conv_algo_tol(kiln_conv_algo algo, size_t k_eff)
{
    double sum_tol = (double)k_eff * 0x1p-22;
    switch (algo) {
    case KILN_CONV_WINOGRAD_2X2:
        return sum_tol + KILN_CONV_WINO2X2_TRANSFORM_TOL;
    case KILN_CONV_WINOGRAD_4X4:
        return sum_tol + KILN_CONV_WINO4X4_TRANSFORM_TOL;
    default:
        return sum_tol;
    }
}

/* The activation in double precision (kiln_activation's formulas; GELU is
   the tanh approximation, with sqrt(2/pi) to double precision). */
static inline double kiln_conv_activate(kiln_activation act, double v, double slope)
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
static inline double kiln_conv_act_bound(kiln_activation act, double v, double slope, double pre)
{
    const double u = 0x1p-24;
    switch (act) {
    case KILN_ACT_LEAKY_RELU:
        return (fabs(slope) > 1.0 ? fabs(slope) : 1.0) * pre + u * fabs(kiln_conv_activate(act, v, slope));
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
 * - tol * |alpha| * S: the convolution sum (kiln_conv_algo_tol), scaled by
 *   alpha.
 * - beta * z, bias and their adds round once each relative to their own
 *   size and to v: 2^-23 (|beta z| + |bias| + |v|).
 * - FLT_MIN: a kernel may flush denormal intermediates to zero.
 * - then the activation (kiln_conv_act_bound), and with 16-bit storage the
 *   output's rounding (kiln_ref_storage_bound). 16-bit inputs are rounded
 *   before the reference sees them, so they add nothing here.
 */
static inline double kiln_conv_bound(const kiln_conv2d_desc *d, double tol, double abs_sum, double beta_z, double bias,
                                     double v, double ref)
{
    double pre = tol * fabs((double)d->alpha) * abs_sum + (fabs(beta_z) + fabs(bias) + fabs(v)) * 0x1p-23 + FLT_MIN;
    double b = kiln_conv_act_bound(d->activation, v, d->leaky_slope, pre);
    return b + kiln_ref_storage_bound(d->dtype, ref, b);
}

/* ------------------------------------------------------------------------ */
/* The reference                                                            */
/* ------------------------------------------------------------------------ */

/* The convolution sum of output (n, k, p, q) in double, and sum |x||w| over
   its receptive field in *abs_sum. Input pixel p * stride - pad + r *
   dilation, skipped when it falls in the padding. */
static inline double kiln_conv_sum_at(const kiln_conv2d_desc *d, const struct kiln_conv_dims *m, const float *x,
                                      const float *w, size_t n, size_t k, size_t p, size_t q, double *abs_sum)
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
                double prod = (double)x[kiln_conv_act_at(d, d->c, d->h, d->w, n, g * m->cg + c, ih, iw)] *
                              (double)w[kiln_conv_w_at(d, m->cg, k, c, r, s)];
                sum += prod;
                mag += fabs(prod);
            }
    *abs_sum = mag;
    return sum;
}

/*
 * Stored output (n, k, oh, ow) of y = pool(act(alpha * conv(x, w) + beta * z
 * + bias)) in double precision, and in *bound its error bound for an
 * algorithm of tolerance `tol` (kiln_conv_algo_tol). z is read only when
 * beta != 0 and bias only when has_bias. A pooled output is the maximum of
 * four values each within its own bound, so it is within the largest of the
 * four.
 */
static inline double kiln_conv_output_at(const kiln_conv2d_desc *d, const struct kiln_conv_dims *m, const float *x,
                                         const float *w, const float *bias, const float *z, double tol, size_t n,
                                         size_t k, size_t oh, size_t ow, double *bound)
{
    const size_t pool = d->fused_maxpool ? 2 : 1;
    double best = -INFINITY, best_bound = 0.0;
    for (size_t ph = 0; ph < pool; ph++)
        for (size_t pw = 0; pw < pool; pw++) {
            const size_t p = oh * pool + ph, q = ow * pool + pw;
            double abs_sum, sum = kiln_conv_sum_at(d, m, x, w, n, k, p, q, &abs_sum);
            double beta_z =
                d->beta != 0.0f ? (double)d->beta * z[kiln_conv_act_at(d, d->k, m->p, m->q, n, k, p, q)] : 0.0;
            double b = d->has_bias ? bias[k] : 0.0;
            double v = (double)d->alpha * sum + beta_z + b;
            double a = kiln_conv_activate(d->activation, v, d->leaky_slope);
            double e = kiln_conv_bound(d, tol, abs_sum, beta_z, b, v, a);
            if (a > best)
                best = a;
            if (e > best_bound)
                best_bound = e;
        }
    *bound = best_bound;
    return best;
}

#endif /* KILN_REF_CONV_OPERAND_H */
