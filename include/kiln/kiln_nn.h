/*
 * kiln neural-network operators: 2-D convolution with fused epilogues,
 * pooling, softmax and activations. Included by kiln/kiln.h.
 *
 * Tensors are dense, start at offset 0 of their buffers, and use one of two
 * layouts: NCHW (weights KCRS) or NHWC (weights KRSC), where C in the weights
 * is the channels of one group.
 */
#ifndef KILN_KILN_NN_H
#define KILN_KILN_NN_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_tensor_layout { KILN_NCHW = 0, KILN_NHWC = 1 } kiln_tensor_layout;

/** Element-wise activation functions. GELU is the tanh approximation. */
typedef enum kiln_activation {
    KILN_ACT_NONE = 0,
    KILN_ACT_RELU = 1,
    KILN_ACT_RELU6 = 2,
    KILN_ACT_LEAKY_RELU = 3, /**< x < 0 ? slope * x : x */
    KILN_ACT_SIGMOID = 4,
    KILN_ACT_TANH = 5,
    KILN_ACT_GELU = 6
} kiln_activation;

/** Convolution algorithms. AUTO uses the profile's heuristic, or times every
    applicable algorithm once per shape in benchmark mode (find). */
typedef enum kiln_conv_algo {
    KILN_CONV_AUTO = 0,
    KILN_CONV_IMPLICIT_GEMM = 1, /**< GEMM over the implicit im2col matrix (no fused pool) */
    KILN_CONV_WINOGRAD_2X2 = 2,  /**< F(2x2,3x3): 3x3, stride 1, dilation 1, groups = 1 only */
    KILN_CONV_WINOGRAD_4X4 = 3,  /**< F(4x4,3x3): 3x3, stride 1, dilation 1, groups = 1 only */
    KILN_CONV_DIRECT = 4,        /**< direct loops: depthwise, few channels */
    KILN_CONV_IM2COL = 5,        /**< explicit im2col matrix, then GEMM (no fused pool) */
    KILN_CONV_GEMM_1X1 = 6,      /**< 1x1, stride 1, no padding: a plain GEMM (no fused pool) */
    KILN_CONV_IGEMM_MMA = 7      /**< implicit GEMM on tensor cores: the CUDA backend on compute
                                      capability 8.0 on, fp16 or bf16 NHWC, one group, c a
                                      multiple of 8 (no fused pool); AUTO takes it there */
} kiln_conv_algo;

/**
 * A 2-D convolution with its epilogue:
 *   y = pool(act(alpha * conv(x, w) + beta * z + bias))
 * where z (the residual, shaped like the convolution's output) is read only
 * when beta != 0, bias (k floats) only when has_bias, and pool is an
 * optional 2x2 stride-2 max pool (output P/2 x Q/2, rounding down).
 * Fill with kiln_conv2d_desc_init() and change what differs.
 */
typedef struct kiln_conv2d_desc {
    kiln_tensor_layout layout;
    kiln_dtype dtype;
    size_t n, c, h, w; /**< input batch, channels, height, width */
    size_t k, r, s;    /**< filters, filter height and width */
    size_t stride_h, stride_w;
    size_t pad_top, pad_bottom, pad_left, pad_right;
    size_t dilation_h, dilation_w;
    size_t groups; /**< divides c and k; c == k == groups is depthwise */
    float alpha, beta;
    int has_bias;
    kiln_activation activation;
    float leaky_slope; /**< for KILN_ACT_LEAKY_RELU */
    int fused_maxpool; /**< non-zero: 2x2 stride-2 max pool of the result
                            (direct and Winograd; the other algorithms
                            answer KILN_ERROR_UNSUPPORTED, AUTO avoids them) */
    kiln_conv_algo algo;
    int constant_weights; /**< non-zero: w holds the same values at every
                               execution of the plan (inference), so kiln
                               may pack or transform them once; passing
                               another weights buffer repacks */
    int find;             /**< non-zero (or KILN_FIND=1): with AUTO, time
                               every applicable algorithm once per shape
                               and remember the fastest, also on disk */
    kiln_math math;       /**< what fp32 storage allows (kiln_math) */
} kiln_conv2d_desc;

/** A convolution of n x c x h x w by k filters of r x s: stride 1, no
    padding, dilation 1, one group, alpha 1, beta 0, no bias, no activation,
    no pooling, fp32 with exact arithmetic, algorithm AUTO. */
KILN_API void kiln_conv2d_desc_init(kiln_conv2d_desc *desc, kiln_tensor_layout layout, size_t n, size_t c, size_t h,
                                    size_t w, size_t k, size_t r, size_t s);

/**
 * Output height and width of the convolution (p, q) and of the stored result
 * y (after the fused pool, if any).
 * @return KILN_ERROR_INVALID_ARGUMENT for an invalid descriptor (the detail
 *         says which field), KILN_ERROR_UNSUPPORTED for a size of 2^29 or more
 *         (INT_MAX / 4), as kiln_conv2d_plan_create() would.
 */
KILN_API kiln_status kiln_conv2d_output_size(const kiln_conv2d_desc *desc, size_t *p, size_t *q, size_t *y_h,
                                             size_t *y_w);

/** A convolution prepared once (algorithm chosen, kernels compiled,
    workspace owned by the plan) and executed many times. Not for concurrent
    use from several threads: one thread at a time, as kiln_gemm_plan. Plans
    in find mode may be created by several threads at once: a shape not yet
    remembered is searched by each (docs/threads.md). */
typedef struct kiln_conv2d_plan kiln_conv2d_plan;

/**
 * Prepare a convolution.
 * @param out  receives a new plan owned by the caller (kiln_conv2d_plan_destroy).
 * @return KILN_ERROR_INVALID_ARGUMENT for zero sizes, an output smaller than
 *         one pixel, groups that do not divide c and k, padding not smaller
 *         than the (dilated) filter, invalid enums; KILN_ERROR_UNSUPPORTED for
 *         a size (n, c, h, w, k, r, s, strides, dilations, groups) of 2^29 or more
 *         or an algorithm that does not apply to the shape (the detail says
 *         why).
 */
KILN_API kiln_status kiln_conv2d_plan_create(kiln_context *ctx, const kiln_conv2d_desc *desc, kiln_conv2d_plan **out);

/**
 * Queue the convolution. bias (k elements) is needed when has_bias, z (the
 * convolution output's shape) when beta != 0; otherwise pass NULL. z may be
 * y itself, the residual added in place (y = act(alpha * conv + beta * y +
 * bias)), except under the fused max pool, whose y is smaller than z.
 * @return KILN_ERROR_INVALID_ARGUMENT for missing or superfluous buffers, y
 *         aliasing x, w or bias, or z aliasing a pooled y;
 *         KILN_ERROR_OUT_OF_BOUNDS for a buffer smaller than its tensor.
 *         Nothing is queued on failure.
 */
KILN_API kiln_status kiln_conv2d_plan_execute(kiln_conv2d_plan *plan, const kiln_buffer *x, const kiln_buffer *w,
                                              const kiln_buffer *bias, const kiln_buffer *z, kiln_buffer *y,
                                              kiln_event **event);

typedef struct kiln_conv2d_plan_info {
    kiln_conv_algo algo;    /**< the algorithm chosen (never AUTO) */
    char name[32];          /**< "implicit-gemm", "winograd-4x4", ... */
    char kernel[64];        /**< main kernel */
    char params[256];       /**< its parameters */
    char param_set[48];     /**< the profile parameter set they came from: "<group>:<set>", e.g.
                                 "gemm.tiled:default" or "gemm.tiled:skinny" ("" if none) */
    char profile[64];       /**< profile that supplied them */
    char reason[160];       /**< requested / heuristic / find / find database */
    size_t workspace_bytes; /**< device memory the plan holds */
} kiln_conv2d_plan_info;

KILN_API kiln_status kiln_conv2d_plan_describe(const kiln_conv2d_plan *plan, kiln_conv2d_plan_info *info);

/** Release a plan (queued work completes). NULL is ignored. */
KILN_API void kiln_conv2d_plan_destroy(kiln_conv2d_plan *plan);

/** One-shot convolution: plan, execute, release. */
KILN_API kiln_status kiln_conv2d(kiln_context *ctx, const kiln_conv2d_desc *desc, const kiln_buffer *x,
                                 const kiln_buffer *w, const kiln_buffer *bias, const kiln_buffer *z, kiln_buffer *y,
                                 kiln_event **event);

/**
 * Fold inference batch normalisation into a convolution's weights and bias,
 * on the host: w'[f] = w[f] * g, b' = (b - mean) * g + shift with
 * g = scale / sqrt(var + eps), for each of the k filters of `per_filter`
 * weights (KCRS and KRSC both keep a filter's weights together).
 * @param bias  k values, read (NULL: zero) ...
 * @param bias_out  ... and k folded values written here (may equal bias).
 * @return KILN_ERROR_INVALID_ARGUMENT for NULL arrays, k or per_filter 0,
 *         eps < 0 or a variance with var + eps <= 0 (nothing is written).
 */
KILN_API kiln_status kiln_fold_batchnorm(size_t k, size_t per_filter, float *weights, const float *bias,
                                         float *bias_out, const float *scale, const float *shift, const float *mean,
                                         const float *var, float eps);

/* ------------------------------------------------------------------------ */
/* Pooling, softmax, activations                                            */
/* ------------------------------------------------------------------------ */

/* Calls without a plan: like every call on a context, they may be made from
   several threads at once. */

typedef enum kiln_pool_mode { KILN_POOL_MAX = 0, KILN_POOL_AVG = 1 } kiln_pool_mode;

/** 2-D pooling over each channel. Average pooling divides by the window
    cells inside the input unless count_include_pad. */
typedef struct kiln_pool2d_desc {
    kiln_tensor_layout layout;
    size_t n, c, h, w;
    size_t window_h, window_w, stride_h, stride_w;
    size_t pad_top, pad_bottom, pad_left, pad_right;
    kiln_pool_mode mode;
    int count_include_pad;
} kiln_pool2d_desc;

/** Output height and width; INVALID_ARGUMENT for an invalid descriptor,
    UNSUPPORTED for a size or window of 2^29 or more. */
KILN_API kiln_status kiln_pool2d_output_size(const kiln_pool2d_desc *desc, size_t *y_h, size_t *y_w);

/** Pool x into y (fp32). INVALID_ARGUMENT / OUT_OF_BOUNDS as for convolution;
    UNSUPPORTED for a size or window of 2^29 or more or NCHW planes (h * w) of
    2^31 values or more. */
KILN_API kiln_status kiln_pool2d(kiln_context *ctx, const kiln_pool2d_desc *desc, const kiln_buffer *x, kiln_buffer *y,
                                 kiln_event **event);

/** Softmax of x viewed as [outer][dim][inner], over `dim`, into y (fp32; y
    may be x). Numerically safe: subtracts the maximum first. */
KILN_API kiln_status kiln_softmax(kiln_context *ctx, size_t outer, size_t dim, size_t inner, const kiln_buffer *x,
                                  kiln_buffer *y, kiln_event **event);

/** y = act(x) over `count` floats (y may be x). */
KILN_API kiln_status kiln_activation_forward(kiln_context *ctx, kiln_activation act, float leaky_slope, size_t count,
                                             const kiln_buffer *x, kiln_buffer *y, kiln_event **event);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_NN_H */
