/*
 * The plain-C oracles of pooling, softmax and activations, each with a
 * tolerance per output, shared by test_nn_ops.c, test_threads.c and the fuzz harnesses.
 * Header-only (static inline functions), like conv_ref.h. The activation
 * reference is src/ref/conv_operand.h's kiln_conv_activate().
 */
#ifndef KILN_TEST_NN_REF_H
#define KILN_TEST_NN_REF_H

#include <float.h>
#include <math.h>

#include "conv_ref.h"

/* Element (n, c, h, w) of a tensor of c x h x w images in the layout. */
static inline size_t nr_at(kiln_tensor_layout layout, size_t c, size_t h, size_t w, size_t in, size_t ic, size_t ih,
                           size_t iw)
{
    return layout == KILN_NHWC ? ((in * h + ih) * w + iw) * c + ic : ((in * c + ic) * h + ih) * w + iw;
}

/* Pooling of x (yh x yw outputs per channel), with a tolerance per output:
   max is exact; an average of `cells` values in [-1, 1] summed in float is
   off by at most about cells * epsilon. */
static inline void nr_pool_reference(const kiln_pool2d_desc *d, size_t yh, size_t yw, const float *x, double *y,
                                     double *tol)
{
    for (size_t n = 0; n < d->n; n++)
        for (size_t c = 0; c < d->c; c++)
            for (size_t oy = 0; oy < yh; oy++)
                for (size_t ox = 0; ox < yw; ox++) {
                    double acc = d->mode == KILN_POOL_MAX ? -INFINITY : 0.0;
                    size_t cells = 0;
                    for (size_t i = 0; i < d->window_h; i++)
                        for (size_t j = 0; j < d->window_w; j++) {
                            long h = (long)(oy * d->stride_h + i) - (long)d->pad_top;
                            long w = (long)(ox * d->stride_w + j) - (long)d->pad_left;
                            if (h < 0 || w < 0 || h >= (long)d->h || w >= (long)d->w)
                                continue;
                            double v = x[nr_at(d->layout, d->c, d->h, d->w, n, c, (size_t)h, (size_t)w)];
                            acc = d->mode == KILN_POOL_MAX ? fmax(acc, v) : acc + v;
                            cells++;
                        }
                    size_t o = nr_at(d->layout, d->c, yh, yw, n, c, oy, ox);
                    if (d->mode == KILN_POOL_AVG)
                        acc /= (double)(d->count_include_pad ? d->window_h * d->window_w : cells);
                    y[o] = acc;
                    tol[o] = d->mode == KILN_POOL_MAX ? 0.0 : 2.0 * (double)(cells + 1) * FLT_EPSILON;
                }
}

/* Softmax of x viewed as [outer][dim][inner] over dim, safe itself:
   exp(x - max) in double. The kernel's float sum of `dim` terms is off by at
   most about dim * epsilon relative, exp and the division add a few ulp, and
   x - max rounds by up to half an ulp of |x - max|, which exp turns into that
   much relative error: hence (dim + 8 + |x - max|) * epsilon relative. */
static inline void nr_softmax_reference(size_t outer, size_t dim, size_t inner, const float *x, double *y, double *tol)
{
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            const size_t base = o * dim * inner + i;
            double m = -INFINITY, sum = 0.0;
            for (size_t d = 0; d < dim; d++)
                m = fmax(m, x[base + d * inner]);
            for (size_t d = 0; d < dim; d++)
                sum += exp((double)x[base + d * inner] - m);
            for (size_t d = 0; d < dim; d++) {
                const size_t e = base + d * inner;
                y[e] = exp((double)x[e] - m) / sum;
                tol[e] = ((double)(dim + 8) + fabs((double)x[e] - m)) * FLT_EPSILON * y[e];
            }
        }
}

/* The activation of x with its tolerance: the piecewise-linear ones round
   once (leaky: slope * x), or flush a denormal result to zero (FLT_MIN);
   the transcendental ones are within a few ulp of 1 + |x|. */
static inline void nr_activation_reference(kiln_activation act, float slope, size_t count, const float *x, double *y,
                                           double *tol)
{
    for (size_t i = 0; i < count; i++) {
        y[i] = kiln_conv_activate(act, x[i], slope);
        tol[i] = act <= KILN_ACT_LEAKY_RELU ? FLT_EPSILON * fabs(y[i]) + FLT_MIN
                                            : 16.0 * FLT_EPSILON * (1.0 + fabs((double)x[i]));
    }
}

#endif /* KILN_TEST_NN_REF_H */
