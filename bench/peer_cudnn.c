/*
 * The cuDNN peer of kiln-bench conv (and conv --model), for a context on the
 * CUDA backend: cuDNN (libcudnn.so.9, else .8) loaded at run time, found
 * where kiln finds NVRTC (src/cuda/cuda_api.c), never linked, through the
 * legacy convolution API cuDNN 9 still ships. It runs on kiln's stream and
 * kiln's own x, w, z and y, in their storage type, with an fp32 compute
 * type: fp16 and bf16 with tensor-op math, fp32 with FMA math (exact fp32)
 * or, where the descriptor's `math` allows TF32, cuDNN's default math (TF32
 * permitted), as frameworks set it. The epilogue kiln fuses (alpha, bias,
 * beta * z, ReLU) is fused here by cudnnConvolutionBiasActivationForward; a
 * convolution without one runs cudnnConvolutionForward. The algorithm is
 * the fastest of cudnnFindConvolutionForwardAlgorithm's trials (bias
 * without ReLU takes the one algorithm cuDNN fuses it with), chosen while
 * preparing, outside the timed runs; the workspace is a kiln buffer.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cuda/cuda_api.h"
#include "kiln/kiln_cuda.h"

/* The few cuDNN types and values used, with the values of cuDNN 9's
   cudnn_graph.h, cudnn_ops.h and cudnn_cnn.h (the same in cuDNN 8). */
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cudnnTensorStruct *cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct *cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct *cudnnConvolutionDescriptor_t;
typedef struct cudnnActivationStruct *cudnnActivationDescriptor_t;
enum { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_HALF = 2, CUDNN_DATA_BFLOAT16 = 9 };
enum { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 };
enum { CUDNN_CROSS_CORRELATION = 1 };
enum {
    CUDNN_DEFAULT_MATH = 0,
    CUDNN_TENSOR_OP_MATH = 1,
    CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
    CUDNN_FMA_MATH = 3
};
enum { CUDNN_ACTIVATION_RELU = 1, CUDNN_ACTIVATION_IDENTITY = 5 };
enum { CUDNN_PROPAGATE_NAN = 1 };
enum { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1, CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8 };

/* cudnnConvolutionFwdAlgoPerf_t; its enums are ints. */
typedef struct {
    int algo, status;
    float time;
    size_t memory;
    int determinism, math_type;
    int reserved[3];
} cudnn_fwd_perf;

/* cudnnConvolutionFwdAlgo_t's values in order. */
static const char *const algo_names[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {
    "implicit-gemm", "implicit-precomp-gemm", "gemm", "direct", "fft", "fft-tiling", "winograd", "winograd-nonfused"};

static struct {
    int tried;
    void *lib;
    char path[512], version[32], why[600];
    cudnnHandle_t handle;
    CUdevice device;   /* the device the handle was made on */
    char refused[160]; /* why cudnnCreate failed, once it has */
    size_t (*get_version)(void);
    const char *(*error_string)(int status);
    int (*create)(cudnnHandle_t *handle);
    int (*destroy)(cudnnHandle_t handle);
    int (*set_stream)(cudnnHandle_t handle, CUstream stream);
    int (*create_tensor)(cudnnTensorDescriptor_t *desc);
    int (*set_tensor)(cudnnTensorDescriptor_t desc, int format, int type, int n, int c, int h, int w);
    int (*destroy_tensor)(cudnnTensorDescriptor_t desc);
    int (*create_filter)(cudnnFilterDescriptor_t *desc);
    int (*set_filter)(cudnnFilterDescriptor_t desc, int type, int format, int k, int c, int h, int w);
    int (*destroy_filter)(cudnnFilterDescriptor_t desc);
    int (*create_conv)(cudnnConvolutionDescriptor_t *desc);
    int (*set_conv)(cudnnConvolutionDescriptor_t desc, int pad_h, int pad_w, int u, int v, int dilation_h,
                    int dilation_w, int mode, int compute_type);
    int (*set_groups)(cudnnConvolutionDescriptor_t desc, int groups);
    int (*set_math)(cudnnConvolutionDescriptor_t desc, int math);
    int (*destroy_conv)(cudnnConvolutionDescriptor_t desc);
    int (*create_activation)(cudnnActivationDescriptor_t *desc);
    int (*set_activation)(cudnnActivationDescriptor_t desc, int mode, int nan, double coef);
    int (*destroy_activation)(cudnnActivationDescriptor_t desc);
    int (*find)(cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int requested, int *returned,
                cudnn_fwd_perf *results);
    int (*workspace_size)(cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                          cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, int algo, size_t *bytes);
    int (*forward)(cudnnHandle_t handle, const void *alpha, cudnnTensorDescriptor_t x_desc, const void *x,
                   cudnnFilterDescriptor_t w_desc, const void *w, cudnnConvolutionDescriptor_t conv, int algo,
                   void *workspace, size_t workspace_bytes, const void *beta, cudnnTensorDescriptor_t y_desc, void *y);
    int (*bias_activation)(cudnnHandle_t handle, const void *alpha1, cudnnTensorDescriptor_t x_desc, const void *x,
                           cudnnFilterDescriptor_t w_desc, const void *w, cudnnConvolutionDescriptor_t conv, int algo,
                           void *workspace, size_t workspace_bytes, const void *alpha2, cudnnTensorDescriptor_t z_desc,
                           const void *z, cudnnTensorDescriptor_t bias_desc, const void *bias,
                           cudnnActivationDescriptor_t activation, cudnnTensorDescriptor_t y_desc, void *y);
} cudnn;

/* Load cuDNN and resolve what the peer calls, once; 0 with `why` set when
   it cannot. */
static int load(void)
{
    if (cudnn.tried)
        return cudnn.lib != NULL;
    cudnn.tried = 1;
    static const char *const files[] = {"libcudnn.so.9", "libcudnn.so.8", NULL};
    cudnn.lib = kiln_cuda_open_toolkit_library(files, cudnn.path, sizeof cudnn.path);
    if (!cudnn.lib) {
        snprintf(cudnn.why, sizeof cudnn.why, "cuDNN not found (libcudnn.so.9 or .8)");
        return 0;
    }
    const struct {
        void **slot;
        const char *name;
    } symbols[] = {
        {(void **)&cudnn.get_version, "cudnnGetVersion"},
        {(void **)&cudnn.error_string, "cudnnGetErrorString"},
        {(void **)&cudnn.create, "cudnnCreate"},
        {(void **)&cudnn.destroy, "cudnnDestroy"},
        {(void **)&cudnn.set_stream, "cudnnSetStream"},
        {(void **)&cudnn.create_tensor, "cudnnCreateTensorDescriptor"},
        {(void **)&cudnn.set_tensor, "cudnnSetTensor4dDescriptor"},
        {(void **)&cudnn.destroy_tensor, "cudnnDestroyTensorDescriptor"},
        {(void **)&cudnn.create_filter, "cudnnCreateFilterDescriptor"},
        {(void **)&cudnn.set_filter, "cudnnSetFilter4dDescriptor"},
        {(void **)&cudnn.destroy_filter, "cudnnDestroyFilterDescriptor"},
        {(void **)&cudnn.create_conv, "cudnnCreateConvolutionDescriptor"},
        {(void **)&cudnn.set_conv, "cudnnSetConvolution2dDescriptor"},
        {(void **)&cudnn.set_groups, "cudnnSetConvolutionGroupCount"},
        {(void **)&cudnn.set_math, "cudnnSetConvolutionMathType"},
        {(void **)&cudnn.destroy_conv, "cudnnDestroyConvolutionDescriptor"},
        {(void **)&cudnn.create_activation, "cudnnCreateActivationDescriptor"},
        {(void **)&cudnn.set_activation, "cudnnSetActivationDescriptor"},
        {(void **)&cudnn.destroy_activation, "cudnnDestroyActivationDescriptor"},
        {(void **)&cudnn.find, "cudnnFindConvolutionForwardAlgorithm"},
        {(void **)&cudnn.workspace_size, "cudnnGetConvolutionForwardWorkspaceSize"},
        {(void **)&cudnn.forward, "cudnnConvolutionForward"},
        {(void **)&cudnn.bias_activation, "cudnnConvolutionBiasActivationForward"},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof *symbols; i++)
        if ((*symbols[i].slot = dlsym(cudnn.lib, symbols[i].name)) == NULL) {
            snprintf(cudnn.why, sizeof cudnn.why, "%.400s lacks %s", cudnn.path, symbols[i].name);
            dlclose(cudnn.lib);
            cudnn.lib = NULL;
            return 0;
        }
    /* 9.19.0 is 91900; cuDNN 8 counted 8.9.7 as 8907. */
    const size_t v = cudnn.get_version();
    if (v >= 90000)
        snprintf(cudnn.version, sizeof cudnn.version, "%zu.%zu.%zu", v / 10000, v % 10000 / 100, v % 100);
    else
        snprintf(cudnn.version, sizeof cudnn.version, "%zu.%zu.%zu", v / 1000, v % 1000 / 100, v % 100);
    return 1;
}

/* Non-zero with "what: CUDNN_STATUS_... (code)" in err for a failed call. */
static int failed(int st, const char *what, char *err, size_t err_size)
{
    if (st == 0)
        return 0;
    snprintf(err, err_size, "%s: %s (%d)", what, cudnn.error_string(st), st);
    return 1;
}

/* cudnnCreate's answer once it has been asked: 0, or 1 with the reason in
   cudnn.refused. A handle belongs to the device current when it is made. */
static int create_handle(cudnnHandle_t *handle)
{
    if (cudnn.refused[0])
        return 1;
    int st = cudnn.create(handle);
    if (st != 0) {
        *handle = NULL;
        failed(st, "cudnnCreate", cudnn.refused, sizeof cudnn.refused);
    }
    return st != 0;
}

const char *bench_peer_cudnn_status(void)
{
    static char line[900];
    if (!load()) {
        snprintf(line, sizeof line, "cudnn: %s", cudnn.why);
        return line;
    }
    /* Where no convolution made the handle, ask cudnnCreate once: without a
       driver this is where cuDNN says so. */
    cudnnHandle_t probe = NULL;
    if (!cudnn.handle && create_handle(&probe) == 0)
        cudnn.destroy(probe);
    if (cudnn.refused[0])
        snprintf(line, sizeof line, "cudnn: %.400s (cuDNN %s): %s", cudnn.path, cudnn.version, cudnn.refused);
    else
        snprintf(line, sizeof line,
                 "cudnn: %.400s (cuDNN %s), on kiln's CUDA stream and buffers (CUDA contexts only); fastest of "
                 "cudnnFindConvolutionForwardAlgorithm; fp16/bf16 tensor-op math, fp32 FMA math (TF32 only where "
                 "the descriptor allows it); bias, residual and ReLU fused by cudnnConvolutionBiasActivationForward",
                 cudnn.path, cudnn.version);
    return line;
}

/* One convolution prepared on cuDNN. */
struct bench_peer_cudnn {
    const struct bench_nn_op *op;
    CUdevice device;
    CUcontext cu; /* the device's primary context, kiln's, retained */
    int fused, algo, math;
    cudnnTensorDescriptor_t x_desc, y_desc, bias_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnActivationDescriptor_t activation;
    kiln_buffer *bias, *workspace; /* bias in the storage type (zeros without one) */
    size_t workspace_bytes;
    const void *x, *w, *z, *b;
    void *y, *ws;
};

/* cuDNN works in the current context: kiln's, made current around each of
   its calls that touch the device. */
static int enter(const struct bench_peer_cudnn *c, char *err, size_t err_size)
{
    CUresult r = kiln_cuda_api_get()->cuCtxPushCurrent(c->cu);
    if (r != KILN_CUDA_SUCCESS)
        snprintf(err, err_size, "cuCtxPushCurrent failed (%d)", r);
    return r != KILN_CUDA_SUCCESS;
}

static void leave(void)
{
    CUcontext previous;
    kiln_cuda_api_get()->cuCtxPopCurrent(&previous);
}

static void *device_pointer(const kiln_buffer *buf)
{
    return buf ? (void *)(uintptr_t)kiln_buffer_get_cuda(buf) : NULL;
}

/* Why cuDNN's legacy API cannot run the operation as described, or NULL. */
static const char *unsupported(const struct bench_nn_op *op)
{
    const kiln_conv2d_desc *d = op->conv;
    if (op->kind != BENCH_NN_CONV)
        return "the cuDNN peer runs convolutions only";
    const size_t sizes[] = {d->n,       d->c,        d->h,        d->w,        d->k,          d->r,          d->s,
                            d->pad_top, d->pad_left, d->stride_h, d->stride_w, d->dilation_h, d->dilation_w, d->groups};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i] > INT_MAX)
            return "a size past cuDNN's int";
    return d->fused_maxpool                                                   ? "cuDNN fuses no pooling"
           : d->activation != KILN_ACT_NONE && d->activation != KILN_ACT_RELU ? "cuDNN fuses ReLU only"
           : d->pad_top != d->pad_bottom || d->pad_left != d->pad_right       ? "cuDNN pads symmetrically only"
                                                                              : NULL;
}

/* The descriptors, the bias in the storage type, and kiln's operands. */
static int describe(struct bench_peer_cudnn *c, char *err, size_t err_size)
{
    const struct bench_nn_op *op = c->op;
    const kiln_conv2d_desc *d = op->conv;
    const int type = d->dtype == KILN_F16    ? CUDNN_DATA_HALF
                     : d->dtype == KILN_BF16 ? CUDNN_DATA_BFLOAT16
                                             : CUDNN_DATA_FLOAT;
    const int format = d->layout == KILN_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW; /* filters KRSC for NHWC */
    size_t p, q, yh, yw;
    kiln_status st = kiln_conv2d_output_size(d, &p, &q, &yh, &yw);
    if (st != KILN_SUCCESS) {
        snprintf(err, err_size, "shape: %s", kiln_last_error_detail());
        return 1;
    }
    if (failed(cudnn.create_tensor(&c->x_desc), "cudnnCreateTensorDescriptor", err, err_size) ||
        failed(cudnn.set_tensor(c->x_desc, format, type, (int)d->n, (int)d->c, (int)d->h, (int)d->w),
               "cudnnSetTensor4dDescriptor (x)", err, err_size) ||
        failed(cudnn.create_tensor(&c->y_desc), "cudnnCreateTensorDescriptor", err, err_size) ||
        failed(cudnn.set_tensor(c->y_desc, format, type, (int)d->n, (int)d->k, (int)p, (int)q),
               "cudnnSetTensor4dDescriptor (y)", err, err_size) ||
        failed(cudnn.create_filter(&c->w_desc), "cudnnCreateFilterDescriptor", err, err_size) ||
        failed(cudnn.set_filter(c->w_desc, type, format, (int)d->k, (int)(d->c / d->groups), (int)d->r, (int)d->s),
               "cudnnSetFilter4dDescriptor", err, err_size) ||
        failed(cudnn.create_conv(&c->conv_desc), "cudnnCreateConvolutionDescriptor", err, err_size) ||
        failed(cudnn.set_conv(c->conv_desc, (int)d->pad_top, (int)d->pad_left, (int)d->stride_h, (int)d->stride_w,
                              (int)d->dilation_h, (int)d->dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
               "cudnnSetConvolution2dDescriptor", err, err_size) ||
        (d->groups > 1 &&
         failed(cudnn.set_groups(c->conv_desc, (int)d->groups), "cudnnSetConvolutionGroupCount", err, err_size)))
        return 1;
    c->x = device_pointer(op->kx);
    c->w = device_pointer(op->kw);
    c->y = device_pointer(op->ky);
    /* Without a residual z is y, scaled by alpha2 = beta = 0: not read. */
    c->z = op->kz ? device_pointer(op->kz) : c->y;
    if (!c->fused)
        return 0;
    if (failed(cudnn.create_tensor(&c->bias_desc), "cudnnCreateTensorDescriptor", err, err_size) ||
        failed(cudnn.set_tensor(c->bias_desc, format, type, 1, (int)d->k, 1, 1), "cudnnSetTensor4dDescriptor (bias)",
               err, err_size) ||
        failed(cudnn.create_activation(&c->activation), "cudnnCreateActivationDescriptor", err, err_size) ||
        failed(cudnn.set_activation(c->activation,
                                    d->activation == KILN_ACT_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                    CUDNN_PROPAGATE_NAN, 0.0),
               "cudnnSetActivationDescriptor", err, err_size))
        return 1;
    /* cuDNN takes the bias in the storage type: op->bias holds values of it. */
    float *zeros = op->bias ? NULL : calloc(d->k, sizeof *zeros);
    uint16_t *halves = d->dtype != KILN_F32 ? malloc(d->k * sizeof *halves) : NULL;
    if ((!op->bias && !zeros) || (d->dtype != KILN_F32 && !halves))
        st = KILN_ERROR_OUT_OF_MEMORY;
    else
        st = bench_upload(op->ctx, op->bias ? op->bias : zeros, d->k, d->dtype, halves, &c->bias);
    free(zeros);
    free(halves);
    if (st != KILN_SUCCESS) {
        snprintf(err, err_size, "bias: %s: %s", kiln_status_string(st), kiln_last_error_detail());
        return 1;
    }
    c->b = device_pointer(c->bias);
    return 0;
}

/* One convolution on kiln's stream, queued. */
static int launch(const struct bench_peer_cudnn *c)
{
    const kiln_conv2d_desc *d = c->op->conv;
    const float alpha = d->alpha, beta = d->beta, zero = 0.0f;
    if (c->fused)
        return cudnn.bias_activation(cudnn.handle, &alpha, c->x_desc, c->x, c->w_desc, c->w, c->conv_desc, c->algo,
                                     c->ws, c->workspace_bytes, &beta, c->y_desc, c->z, c->bias_desc, c->b,
                                     c->activation, c->y_desc, c->y);
    return cudnn.forward(cudnn.handle, &alpha, c->x_desc, c->x, c->w_desc, c->w, c->conv_desc, c->algo, c->ws,
                         c->workspace_bytes, &zero, c->y_desc, c->y);
}

static const char *routine_name(const struct bench_peer_cudnn *c)
{
    return c->fused ? "cudnnConvolutionBiasActivationForward" : "cudnnConvolutionForward";
}

/* Run (algo, math) once with a workspace as large as it asks for: 0 when it
   ran to completion, else 1 with `err` set. */
static int try_algorithm(struct bench_peer_cudnn *c, int algo, int math, char *err, size_t err_size)
{
    size_t bytes = 0;
    if (failed(cudnn.set_math(c->conv_desc, math), "cudnnSetConvolutionMathType", err, err_size) ||
        failed(cudnn.workspace_size(cudnn.handle, c->x_desc, c->w_desc, c->conv_desc, c->y_desc, algo, &bytes),
               "cudnnGetConvolutionForwardWorkspaceSize", err, err_size))
        return 1;
    if (bytes > c->workspace_bytes) {
        kiln_buffer_destroy(c->workspace);
        c->workspace = NULL, c->ws = NULL, c->workspace_bytes = 0;
        kiln_status st = kiln_buffer_create(c->op->ctx, bytes, &c->workspace);
        if (st != KILN_SUCCESS) {
            snprintf(err, err_size, "workspace of %zu bytes: %s", bytes, kiln_status_string(st));
            return 1;
        }
        c->ws = device_pointer(c->workspace);
        c->workspace_bytes = bytes;
    }
    c->algo = algo;
    if (failed(launch(c), routine_name(c), err, err_size))
        return 1;
    kiln_status st = kiln_context_finish(c->op->ctx); /* the same stream */
    if (st != KILN_SUCCESS)
        snprintf(err, err_size, "%s: %s", kiln_status_string(st), kiln_last_error_detail());
    return st != KILN_SUCCESS;
}

/* The fastest algorithm of cuDNN's trials that runs, with the math type it
   was timed with: any but a down-conversion of fp32 data to fp16, and FMA
   alone where the descriptor wants exact fp32. Bias without ReLU (cuDNN's
   identity activation) is fused by implicit-precomp-gemm only. */
static int choose(struct bench_peer_cudnn *c, char *err, size_t err_size)
{
    const kiln_conv2d_desc *d = c->op->conv;
    const int exact = d->dtype == KILN_F32 && d->math != KILN_MATH_TF32;
    cudnn_fwd_perf results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    if (c->fused && d->activation == KILN_ACT_NONE) {
        results[found++] =
            (cudnn_fwd_perf){.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, .math_type = c->math};
    } else if (failed(cudnn.set_math(c->conv_desc, c->math), "cudnnSetConvolutionMathType", err, err_size) ||
               failed(cudnn.find(cudnn.handle, c->x_desc, c->w_desc, c->conv_desc, c->y_desc,
                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, results),
                      "cudnnFindConvolutionForwardAlgorithm", err, err_size)) {
        return 1;
    }
    snprintf(err, err_size, "cudnnFindConvolutionForwardAlgorithm found no algorithm for %s",
             exact ? "exact fp32 (FMA math)" : "this convolution");
    for (int i = 0; i < found; i++) {
        const cudnn_fwd_perf *r = &results[i];
        if (r->status != 0 || r->algo < 0 || r->algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT ||
            r->math_type == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || (exact && r->math_type != CUDNN_FMA_MATH))
            continue;
        if (try_algorithm(c, r->algo, r->math_type, err, err_size) == 0)
            return 0;
    }
    return 1;
}

int bench_peer_cudnn_prepare(const struct bench_nn_op *op, struct bench_peer_cudnn **out, char *routine,
                             size_t routine_size, char *err, size_t err_size)
{
    *out = NULL;
    CUdevice device;
    CUstream stream;
    const char *why = unsupported(op);
    if (!why && (!op->ctx || kiln_context_get_cuda(op->ctx, &device, &stream) != KILN_SUCCESS))
        why = "kiln does not run on the CUDA backend here";
    else if (!why && !load())
        why = cudnn.why;
    if (why) {
        snprintf(err, err_size, "%s", why);
        return BENCH_NN_UNSUPPORTED;
    }
    struct bench_peer_cudnn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_size, "out of host memory");
        return BENCH_NN_FAILED;
    }
    const kiln_conv2d_desc *d = op->conv;
    c->op = op;
    c->device = device;
    c->fused = d->has_bias || d->beta != 0.0f || d->activation == KILN_ACT_RELU;
    c->math = d->dtype != KILN_F32        ? CUDNN_TENSOR_OP_MATH
              : d->math == KILN_MATH_TF32 ? CUDNN_DEFAULT_MATH
                                          : CUDNN_FMA_MATH;
    CUresult r = kiln_cuda_api_get()->cuDevicePrimaryCtxRetain(&c->cu, device);
    if (r != KILN_CUDA_SUCCESS) {
        c->cu = NULL;
        snprintf(err, err_size, "cuDevicePrimaryCtxRetain failed (%d)", r);
        bench_peer_cudnn_release(c);
        return BENCH_NN_FAILED;
    }
    if (enter(c, err, err_size)) {
        bench_peer_cudnn_release(c);
        return BENCH_NN_FAILED;
    }
    int rc = BENCH_NN_FAILED;
    if (!cudnn.handle && create_handle(&cudnn.handle) == 0)
        cudnn.device = device;
    if (!cudnn.handle) {
        snprintf(err, err_size, "%s", cudnn.refused);
        rc = BENCH_NN_UNSUPPORTED;
    } else if (cudnn.device != device) {
        snprintf(err, err_size, "cuDNN's handle belongs to CUDA device %d", (int)cudnn.device);
        rc = BENCH_NN_UNSUPPORTED;
    } else if (!failed(cudnn.set_stream(cudnn.handle, stream), "cudnnSetStream", err, err_size) &&
               describe(c, err, err_size) == 0 && choose(c, err, err_size) == 0) {
        rc = BENCH_NN_READY;
    }
    leave();
    if (rc != BENCH_NN_READY) {
        bench_peer_cudnn_release(c);
        return rc;
    }
    snprintf(routine, routine_size, "%s %s", routine_name(c), algo_names[c->algo]);
    *out = c;
    return BENCH_NN_READY;
}

int bench_peer_cudnn_run(struct bench_peer_cudnn *c, char *err, size_t err_size)
{
    if (enter(c, err, err_size))
        return 1;
    const int st = launch(c);
    leave();
    if (failed(st, routine_name(c), err, err_size))
        return 1;
    const kiln_status done = kiln_context_finish(c->op->ctx); /* the same stream */
    if (done != KILN_SUCCESS) {
        snprintf(err, err_size, "%s", kiln_status_string(done));
        return 1;
    }
    return 0;
}

size_t bench_peer_cudnn_workspace(const struct bench_peer_cudnn *c) { return c->workspace_bytes; }

void bench_peer_cudnn_release(struct bench_peer_cudnn *c)
{
    if (!c)
        return;
    if (c->x_desc)
        cudnn.destroy_tensor(c->x_desc);
    if (c->y_desc)
        cudnn.destroy_tensor(c->y_desc);
    if (c->bias_desc)
        cudnn.destroy_tensor(c->bias_desc);
    if (c->w_desc)
        cudnn.destroy_filter(c->w_desc);
    if (c->conv_desc)
        cudnn.destroy_conv(c->conv_desc);
    if (c->activation)
        cudnn.destroy_activation(c->activation);
    kiln_buffer_destroy(c->bias);
    kiln_buffer_destroy(c->workspace);
    if (c->cu)
        kiln_cuda_api_get()->cuDevicePrimaryCtxRelease(c->device);
    free(c);
}
