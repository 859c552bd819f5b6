/*
 * kiln-bench peers: OpenBLAS (cblas_sgemm on the host, its default thread
 * count), CLBlast (CLBlastSgemm and CLBlastSconvgemm on kiln's own OpenCL
 * queue and buffers) and oneDNN (its CPU engine, default threads); cuBLAS
 * and cuDNN, loaded at run time, live in peer_cublas.c and peer_cudnn.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "peers.h"

#ifdef KILN_BENCH_WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_BENCH_WITH_CLBLAST
#include <clblast_c.h>
#endif
#ifdef KILN_BENCH_WITH_ONEDNN
#include <dnnl.h>
#include <dnnl_debug.h>
#endif
#ifdef KILN_BENCH_WITH_OPENMP
#include <omp.h>
#endif

static const char *const peer_names[BENCH_PEER_COUNT] = {"clblast", "cublas", "openblas"};

const char *bench_peer_name(enum bench_peer peer) { return peer < BENCH_PEER_COUNT ? peer_names[peer] : "?"; }

int bench_peer_built(enum bench_peer peer)
{
    switch (peer) {
#ifdef KILN_BENCH_WITH_CLBLAST
    case BENCH_PEER_CLBLAST:
        return 1;
#endif
#ifdef KILN_BENCH_WITH_OPENBLAS
    case BENCH_PEER_OPENBLAS:
        return 1;
#endif
    case BENCH_PEER_CUBLAS: /* loaded when run */
        return 1;
    default:
        return 0;
    }
}

int bench_peer_on_device(enum bench_peer peer) { return peer == BENCH_PEER_CLBLAST; }

int bench_parse_names(const char *list, const char *const *names, int count, unsigned *mask)
{
    *mask = 0;
    if (!*list)
        return -1;
    if (strcmp(list, "none") == 0)
        return 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < count; i++)
            if (strlen(names[i]) == len && strncmp(p, names[i], len) == 0) {
                *mask |= 1u << i;
                found = 1;
            }
        if (!found)
            return -1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int bench_peer_parse(const char *list, unsigned *mask)
{
    return bench_parse_names(list, peer_names, BENCH_PEER_COUNT, mask);
}

void bench_peer_routine(enum bench_peer peer, const kiln_gemm_desc *desc, char *buf, size_t size)
{
    if (peer == BENCH_PEER_CLBLAST)
        snprintf(buf, size, "%s", desc->batch > 1 ? "CLBlastSgemmStridedBatched" : "CLBlastSgemm");
    else if (peer == BENCH_PEER_CUBLAS)
        snprintf(buf, size, "cublasGemmStridedBatchedEx");
    else if (desc->batch > 1)
        snprintf(buf, size, "cblas_sgemm x%zu", desc->batch);
    else
        snprintf(buf, size, "cblas_sgemm");
}

int bench_peer_threads(enum bench_peer peer)
{
#ifdef KILN_BENCH_WITH_OPENBLAS
    if (peer == BENCH_PEER_OPENBLAS)
        return openblas_get_num_threads();
#endif
    (void)peer;
    return 0;
}

void bench_peer_print_config(FILE *out, unsigned mask)
{
    for (int p = 0; p < BENCH_PEER_COUNT; p++) {
        if (!(mask >> p & 1u))
            continue;
        if (!bench_peer_built((enum bench_peer)p))
            fprintf(out, "%s: not built\n", peer_names[p]);
        else if (p == BENCH_PEER_CLBLAST)
            fprintf(out, "clblast: on kiln's OpenCL queue and buffers\n");
        else if (p == BENCH_PEER_CUBLAS)
            fprintf(out, "%s\n", bench_peer_cublas_status());
#ifdef KILN_BENCH_WITH_OPENBLAS
        else {
            const char *was = getenv("KILN_BENCH_OPENBLAS_CHOSE");
            fprintf(out, "openblas: %s, %d threads", openblas_get_config(), openblas_get_num_threads());
            if (was && *was)
                fprintf(out, " (OPENBLAS_CORETYPE=%s set by kiln-bench: OpenBLAS chose %s on this CPU)",
                        getenv("OPENBLAS_CORETYPE"), was);
            fputc('\n', out);
        }
#endif
    }
}

void bench_peer_fair_openblas(char **argv)
{
#if defined(KILN_BENCH_WITH_OPENBLAS) && (defined(__x86_64__) || defined(__i386__))
    const char *set = getenv("OPENBLAS_CORETYPE");
    if ((set && *set) || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return;
    static const char *const capable[] = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof capable / sizeof *capable; i++)
        if (strcasecmp(core, capable[i]) == 0)
            return;
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    if (setenv("OPENBLAS_CORETYPE", avx512 ? "SkylakeX" : "Haswell", 1) != 0 ||
        setenv("KILN_BENCH_OPENBLAS_CHOSE", core ? core : "an unknown core", 1) != 0)
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    /* Not run again: measure with the core OpenBLAS chose, and say so. */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("KILN_BENCH_OPENBLAS_CHOSE");
#else
    (void)argv;
#endif
}

#ifdef KILN_BENCH_WITH_OPENBLAS
static void openblas_gemm(const struct bench_peer_gemm *g)
{
    const kiln_gemm_desc *d = g->desc;
    /* Batch items one after another: OpenBLAS 0.3.21 has no batched SGEMM. */
    for (size_t i = 0; i < d->batch; i++)
        cblas_sgemm(d->layout == KILN_COL_MAJOR ? CblasColMajor : CblasRowMajor,
                    d->trans_a == KILN_TRANS ? CblasTrans : CblasNoTrans,
                    d->trans_b == KILN_TRANS ? CblasTrans : CblasNoTrans, (blasint)d->m, (blasint)d->n, (blasint)d->k,
                    1.0f, g->a + i * d->stride_a, (blasint)d->lda, g->b + i * d->stride_b, (blasint)d->ldb, 0.0f,
                    g->c + i * d->stride_c, (blasint)d->ldc);
}
#endif

#ifdef KILN_BENCH_WITH_CLBLAST
/* The status of a queued CLBlast routine, then its completion. */
static int clblast_finish(CLBlastStatusCode st, cl_command_queue queue, char *err, size_t err_size)
{
    if (st != CLBlastSuccess) {
        snprintf(err, err_size, "CLBlast status %d", (int)st);
        return 1;
    }
    cl_int cl = clFinish(queue);
    if (cl != CL_SUCCESS) {
        snprintf(err, err_size, "clFinish: OpenCL error %d", (int)cl);
        return 1;
    }
    return 0;
}

static int clblast_gemm(const struct bench_peer_gemm *g, char *err, size_t err_size)
{
    const kiln_gemm_desc *d = g->desc;
    CLBlastLayout layout = d->layout == KILN_COL_MAJOR ? CLBlastLayoutColMajor : CLBlastLayoutRowMajor;
    CLBlastTranspose ta = d->trans_a == KILN_TRANS ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = d->trans_b == KILN_TRANS ? CLBlastTransposeYes : CLBlastTransposeNo;
    cl_command_queue queue = g->queue;
    CLBlastStatusCode st;
    if (d->batch > 1)
        st = CLBlastSgemmStridedBatched(layout, ta, tb, d->m, d->n, d->k, 1.0f, g->a_mem, 0, d->lda, d->stride_a,
                                        g->b_mem, 0, d->ldb, d->stride_b, 0.0f, g->c_mem, 0, d->ldc, d->stride_c,
                                        d->batch, &queue, NULL);
    else
        st = CLBlastSgemm(layout, ta, tb, d->m, d->n, d->k, 1.0f, g->a_mem, 0, d->lda, g->b_mem, 0, d->ldb, 0.0f,
                          g->c_mem, 0, d->ldc, &queue, NULL);
    return clblast_finish(st, queue, err, err_size);
}
#endif

int bench_peer_gemm(enum bench_peer peer, const struct bench_peer_gemm *g, char *err, size_t err_size)
{
    switch (peer) {
#ifdef KILN_BENCH_WITH_CLBLAST
    case BENCH_PEER_CLBLAST:
        return clblast_gemm(g, err, err_size);
#endif
    case BENCH_PEER_CUBLAS:
        return bench_peer_cublas_gemm(g, err, err_size);
#ifdef KILN_BENCH_WITH_OPENBLAS
    case BENCH_PEER_OPENBLAS:
        openblas_gemm(g);
        return 0;
#endif
    default:
        (void)g;
        snprintf(err, err_size, "not built");
        return 1;
    }
}

/* ---- peers of the neural-network operators ---- */

static const char *const nn_peer_names[BENCH_NN_PEER_COUNT] = {"clblast", "cudnn", "onednn"};

const char *bench_nn_peer_name(enum bench_nn_peer peer)
{
    return peer < BENCH_NN_PEER_COUNT ? nn_peer_names[peer] : "?";
}

int bench_nn_peer_built(enum bench_nn_peer peer)
{
    switch (peer) {
#ifdef KILN_BENCH_WITH_CLBLAST
    case BENCH_NN_PEER_CLBLAST:
        return 1;
#endif
#ifdef KILN_BENCH_WITH_ONEDNN
    case BENCH_NN_PEER_ONEDNN:
        return 1;
#endif
    case BENCH_NN_PEER_CUDNN: /* loaded when run */
        return 1;
    default:
        return 0;
    }
}

int bench_nn_peer_on_device(enum bench_nn_peer peer) { return peer == BENCH_NN_PEER_CLBLAST; }

int bench_nn_peer_parse(const char *list, unsigned *mask)
{
    return bench_parse_names(list, nn_peer_names, BENCH_NN_PEER_COUNT, mask);
}

int bench_nn_peer_threads(enum bench_nn_peer peer)
{
#ifdef KILN_BENCH_WITH_ONEDNN
    if (peer == BENCH_NN_PEER_ONEDNN) {
        unsigned runtime = dnnl_version()->cpu_runtime;
        if (runtime == DNNL_RUNTIME_SEQ)
            return 1;
#ifdef KILN_BENCH_WITH_OPENMP
        if (runtime == DNNL_RUNTIME_OMP)
            return omp_get_max_threads();
#endif
    }
#endif
    (void)peer;
    return 0;
}

void bench_nn_peer_print_config(FILE *out, unsigned mask)
{
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++) {
        if (!(mask >> p & 1u))
            continue;
        if (!bench_nn_peer_built((enum bench_nn_peer)p))
            fprintf(out, "%s: not built\n", nn_peer_names[p]);
        else if (p == BENCH_NN_PEER_CLBLAST)
            fprintf(out, "clblast: CLBlastSconvgemm (im2col + GEMM) on kiln's OpenCL queue and buffers; NCHW, one "
                         "group, symmetric padding, no epilogue\n");
        else if (p == BENCH_NN_PEER_CUDNN)
            fprintf(out, "%s\n", bench_peer_cudnn_status());
#ifdef KILN_BENCH_WITH_ONEDNN
        else {
            const dnnl_version_t *v = dnnl_version();
            fprintf(out,
                    "onednn: %d.%d.%d, CPU runtime %s, ISA %s, %d threads; convolution and FC weights and "
                    "activations in the layouts it picks, reorders outside the timed runs (primitive alone)\n",
                    v->major, v->minor, v->patch, dnnl_runtime2str(v->cpu_runtime),
                    dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa()), bench_nn_peer_threads(BENCH_NN_PEER_ONEDNN));
        }
#endif
    }
}

#ifdef KILN_BENCH_WITH_CLBLAST
/* CLBlastSconvgemm: a cross-correlation of an NCHW batch with KCRS filters,
   one group, the same padding on both sides, nothing fused after it. */
static int clblast_conv_check(const struct bench_nn_op *op, char *err, size_t err_size)
{
    const kiln_conv2d_desc *d = op->conv;
    const char *why =
        op->kind != BENCH_NN_CONV                                    ? "CLBlast has only convolution"
        : d->layout != KILN_NCHW                                     ? "CLBlast takes NCHW only"
        : d->groups != 1                                             ? "CLBlast has no grouped convolution"
        : d->pad_top != d->pad_bottom || d->pad_left != d->pad_right ? "CLBlast pads symmetrically only"
        : d->dtype != KILN_F32                                       ? "fp32 only here"
        : d->has_bias || d->beta != 0.0f || d->alpha != 1.0f || d->activation != KILN_ACT_NONE || d->fused_maxpool
            ? "CLBlast fuses no epilogue"
            : NULL;
    if (why)
        snprintf(err, err_size, "%s", why);
    return why != NULL;
}

static int clblast_conv(const struct bench_nn_op *op, char *err, size_t err_size)
{
    const kiln_conv2d_desc *d = op->conv;
    cl_command_queue queue = op->queue;
    CLBlastStatusCode st = CLBlastSconvgemm(CLBlastKernelModeCrossCorrelation, d->c, d->h, d->w, d->r, d->s, d->pad_top,
                                            d->pad_left, d->stride_h, d->stride_w, d->dilation_h, d->dilation_w, d->k,
                                            d->n, op->src_mem, 0, op->weights_mem, 0, op->dst_mem, 0, &queue, NULL);
    return clblast_finish(st, queue, err, err_size);
}
#endif

#ifdef KILN_BENCH_WITH_ONEDNN
enum { ONEDNN_MAX_MEMORIES = 8 };

/* A primitive with its memory objects. dst is the primitive's output, user_dst
   the caller's array (the same object when the layouts agree); residual is
   the caller's residual, NULL without one. */
struct onednn_state {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_t primitive;
    dnnl_exec_arg_t args[4];
    int nargs;
    dnnl_memory_t memories[ONEDNN_MAX_MEMORIES]; /* every one made, released together */
    int nmemories;
    dnnl_memory_t dst, user_dst, residual;
    int reordered; /* some tensor is kept in another layout than the caller's */
};

static int onednn_failed(dnnl_status_t st, const char *what, char *err, size_t err_size)
{
    if (st == dnnl_success)
        return 0;
    snprintf(err, err_size, "%s: %s", what, dnnl_status2str(st));
    return 1;
}

/* A memory object for md on the caller's array, or allocated by oneDNN when
   data is NULL. */
static int onednn_memory(struct onednn_state *o, const dnnl_memory_desc_t *md, const float *data, dnnl_memory_t *out,
                         char *err, size_t err_size)
{
    if (o->nmemories == ONEDNN_MAX_MEMORIES) {
        snprintf(err, err_size, "too many oneDNN memory objects");
        return 1;
    }
    /* oneDNN takes a non-const handle but only reads its inputs. */
    if (onednn_failed(dnnl_memory_create(out, md, o->engine, data ? (void *)data : DNNL_MEMORY_ALLOCATE),
                      "dnnl_memory_create", err, err_size))
        return 1;
    o->memories[o->nmemories++] = *out;
    return 0;
}

/* Copy `from` into `to`, converting the layout, to completion. */
static int onednn_convert(dnnl_engine_t engine, dnnl_stream_t stream, dnnl_memory_t from, dnnl_memory_t to, char *err,
                          size_t err_size)
{
    const dnnl_memory_desc_t *from_md, *to_md;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    int rc = onednn_failed(dnnl_memory_get_memory_desc(from, &from_md), "dnnl_memory_get_memory_desc", err, err_size) ||
             onednn_failed(dnnl_memory_get_memory_desc(to, &to_md), "dnnl_memory_get_memory_desc", err, err_size) ||
             onednn_failed(dnnl_reorder_primitive_desc_create(&pd, from_md, engine, to_md, engine, NULL), "reorder",
                           err, err_size) ||
             onednn_failed(dnnl_primitive_create(&reorder, pd), "reorder", err, err_size) ||
             onednn_failed(dnnl_primitive_execute(reorder, stream, 2, args), "reorder", err, err_size) ||
             onednn_failed(dnnl_stream_wait(stream), "dnnl_stream_wait", err, err_size);
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int onednn_reorder(struct onednn_state *o, dnnl_memory_t from, dnnl_memory_t to, char *err, size_t err_size)
{
    return onednn_convert(o->engine, o->stream, from, to, err, err_size);
}

/* The primitive's argument `arg` in layout `want`, from the caller's array
   `data` in layout `user`: the array itself when they agree, otherwise a
   converted copy (made once, here). */
static int onednn_input(struct onednn_state *o, int arg, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *user,
                        const float *data, char *err, size_t err_size)
{
    dnnl_memory_t user_mem, mem;
    if (onednn_memory(o, user, data, &user_mem, err, err_size))
        return 1;
    mem = user_mem;
    if (!dnnl_memory_desc_equal(want, user)) {
        o->reordered = 1;
        if (onednn_memory(o, want, NULL, &mem, err, err_size) || onednn_reorder(o, user_mem, mem, err, err_size))
            return 1;
    }
    o->args[o->nargs++] = (dnnl_exec_arg_t){arg, mem};
    return 0;
}

/*
 * Finish an operation described by `desc` (and `attr`, NULL for none): the
 * primitive, and memory objects on the caller's arrays for the user_* layouts
 * given (weights and bias NULL when the operation has none), converted once
 * where the primitive wants other layouts. The routine is oneDNN's
 * implementation name.
 */
static int onednn_setup(struct onednn_state *o, const void *desc, const_dnnl_primitive_attr_t attr,
                        const struct bench_nn_op *op, const dnnl_memory_desc_t *user_src,
                        const dnnl_memory_desc_t *user_weights, const dnnl_memory_desc_t *user_bias,
                        const dnnl_memory_desc_t *user_dst, char *routine, size_t routine_size, char *err,
                        size_t err_size)
{
    dnnl_primitive_desc_t pd = NULL;
    const char *impl = NULL;
    if (onednn_failed(dnnl_primitive_desc_create(&pd, desc, attr, o->engine, NULL), "dnnl_primitive_desc_create", err,
                      err_size))
        return 1;
    const dnnl_memory_desc_t *dst_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int rc =
        onednn_failed(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl), "query", err, err_size) ||
        onednn_input(o, DNNL_ARG_SRC, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), user_src, op->src, err,
                     err_size) ||
        (user_weights && onednn_input(o, DNNL_ARG_WEIGHTS, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                                      user_weights, op->weights, err, err_size)) ||
        (user_bias && onednn_input(o, DNNL_ARG_BIAS, user_bias, user_bias, op->bias, err, err_size)) ||
        onednn_memory(o, user_dst, op->dst, &o->user_dst, err, err_size);
    if (rc == 0) {
        o->dst = o->user_dst;
        if (!dnnl_memory_desc_equal(dst_md, user_dst)) {
            o->reordered = 1;
            rc = onednn_memory(o, dst_md, NULL, &o->dst, err, err_size);
        }
    }
    if (rc == 0 && op->residual)
        rc = onednn_memory(o, user_dst, op->residual, &o->residual, err, err_size) ||
             onednn_reorder(o, o->residual, o->dst, err, err_size);
    if (rc == 0) {
        o->args[o->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DST, o->dst};
        rc = onednn_failed(dnnl_primitive_create(&o->primitive, pd), "dnnl_primitive_create", err, err_size);
        snprintf(routine, routine_size, "%s%s", impl, o->reordered ? ", reorders excluded" : "");
    }
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* The post-op of a kiln activation; 0 on success, 1 for none that matches. */
static int onednn_activation(kiln_activation act, float slope, dnnl_alg_kind_t *alg, float *alpha, float *beta)
{
    *alpha = 0.0f;
    *beta = 0.0f;
    switch (act) {
    case KILN_ACT_RELU:
        *alg = dnnl_eltwise_relu;
        return 0;
    case KILN_ACT_LEAKY_RELU:
        *alg = dnnl_eltwise_relu;
        *alpha = slope;
        return 0;
    case KILN_ACT_RELU6:
        *alg = dnnl_eltwise_clip;
        *beta = 6.0f;
        return 0;
    case KILN_ACT_SIGMOID:
        *alg = dnnl_eltwise_logistic;
        return 0;
    case KILN_ACT_TANH:
        *alg = dnnl_eltwise_tanh;
        return 0;
    case KILN_ACT_GELU:
        *alg = dnnl_eltwise_gelu_tanh;
        return 0;
    default:
        return 1;
    }
}

/* The epilogue as post-ops: the residual by a sum into dst (which holds it
   before the run), then the activation. */
static int onednn_conv_attr(const kiln_conv2d_desc *d, dnnl_primitive_attr_t *attr, char *err, size_t err_size)
{
    dnnl_post_ops_t ops = NULL;
    dnnl_alg_kind_t alg;
    float alpha, beta;
    int rc =
        onednn_failed(dnnl_primitive_attr_create(attr), "dnnl_primitive_attr_create", err, err_size) ||
        onednn_failed(dnnl_post_ops_create(&ops), "dnnl_post_ops_create", err, err_size) ||
        (d->beta != 0.0f &&
         onednn_failed(dnnl_post_ops_append_sum(ops, d->beta), "dnnl_post_ops_append_sum", err, err_size)) ||
        (onednn_activation(d->activation, d->leaky_slope, &alg, &alpha, &beta) == 0 &&
         onednn_failed(dnnl_post_ops_append_eltwise(ops, 1.0f, alg, alpha, beta), "dnnl_post_ops_append_eltwise", err,
                       err_size)) ||
        onednn_failed(dnnl_primitive_attr_set_post_ops(*attr, ops), "dnnl_primitive_attr_set_post_ops", err, err_size);
    dnnl_post_ops_destroy(ops);
    return rc;
}

/* A convolution in oneDNN's terms: the caller's layouts of its tensors, and
   the convolution with every layout left to oneDNN. */
struct onednn_conv_mds {
    dnnl_memory_desc_t src, weights, bias, dst;
};

static int onednn_conv_init(const kiln_conv2d_desc *d, struct onednn_conv_mds *m, dnnl_convolution_desc_t *conv,
                            char *err, size_t err_size)
{
    dnnl_dim_t n = (dnnl_dim_t)d->n, c = (dnnl_dim_t)d->c, k = (dnnl_dim_t)d->k, g = (dnnl_dim_t)d->groups;
    dnnl_dim_t r = (dnnl_dim_t)d->r, s = (dnnl_dim_t)d->s;
    dnnl_dim_t p = (dnnl_dim_t)((d->h + d->pad_top + d->pad_bottom - d->dilation_h * (d->r - 1) - 1) / d->stride_h + 1);
    dnnl_dim_t q = (dnnl_dim_t)((d->w + d->pad_left + d->pad_right - d->dilation_w * (d->s - 1) - 1) / d->stride_w + 1);
    int nhwc = d->layout == KILN_NHWC;
    dnnl_dims_t src_dims = {n, c, (dnnl_dim_t)d->h, (dnnl_dim_t)d->w}, dst_dims = {n, k, p, q}, bias_dims = {k};
    dnnl_dims_t w_dims = {k, c, r, s}, gw_dims = {g, k / g, c / g, r, s};
    dnnl_dims_t strides = {(dnnl_dim_t)d->stride_h, (dnnl_dim_t)d->stride_w};
    dnnl_dims_t dilates = {(dnnl_dim_t)d->dilation_h - 1, (dnnl_dim_t)d->dilation_w - 1};
    dnnl_dims_t pad_l = {(dnnl_dim_t)d->pad_top, (dnnl_dim_t)d->pad_left};
    dnnl_dims_t pad_r = {(dnnl_dim_t)d->pad_bottom, (dnnl_dim_t)d->pad_right};
    dnnl_format_tag_t w_tag = g > 1 ? (nhwc ? dnnl_gohwi : dnnl_goihw) : (nhwc ? dnnl_ohwi : dnnl_oihw);
    int w_ndims = g > 1 ? 5 : 4;
    dnnl_memory_desc_t any_src, any_weights, any_dst;
    return onednn_failed(dnnl_memory_desc_init_by_tag(&m->src, 4, src_dims, dnnl_f32, nhwc ? dnnl_nhwc : dnnl_nchw),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&m->weights, w_ndims, g > 1 ? gw_dims : w_dims, dnnl_f32, w_tag),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&m->bias, 1, bias_dims, dnnl_f32, dnnl_x), "memory desc", err,
                         err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&m->dst, 4, dst_dims, dnnl_f32, nhwc ? dnnl_nhwc : dnnl_nchw),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&any_src, 4, src_dims, dnnl_f32, dnnl_format_tag_any),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&any_weights, w_ndims, g > 1 ? gw_dims : w_dims, dnnl_f32,
                                                      dnnl_format_tag_any),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&any_dst, 4, dst_dims, dnnl_f32, dnnl_format_tag_any),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_dilated_convolution_forward_desc_init(
                             conv, dnnl_forward_inference, dnnl_convolution_auto, &any_src, &any_weights,
                             d->has_bias ? &m->bias : NULL, &any_dst, strides, dilates, pad_l, pad_r),
                         "dnnl_dilated_convolution_forward_desc_init", err, err_size);
}

static int onednn_conv(struct onednn_state *o, const struct bench_nn_op *op, char *routine, size_t routine_size,
                       char *err, size_t err_size)
{
    const kiln_conv2d_desc *d = op->conv;
    struct onednn_conv_mds m;
    dnnl_convolution_desc_t conv;
    dnnl_primitive_attr_t attr = NULL;
    int rc = onednn_conv_init(d, &m, &conv, err, err_size) || onednn_conv_attr(d, &attr, err, err_size) ||
             onednn_setup(o, &conv, attr, op, &m.src, &m.weights, d->has_bias ? &m.bias : NULL, &m.dst, routine,
                          routine_size, err, err_size);
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* A pooling in oneDNN's terms: its source in layout `src` (NULL: the
   descriptor's), its destination in the descriptor's layout (dst) and as
   oneDNN chooses (the pooling). */
static int onednn_pool_init(const kiln_pool2d_desc *d, const dnnl_memory_desc_t *src, dnnl_memory_desc_t *dst,
                            dnnl_pooling_desc_t *pool, char *err, size_t err_size)
{
    dnnl_dim_t p = (dnnl_dim_t)((d->h + d->pad_top + d->pad_bottom - d->window_h) / d->stride_h + 1);
    dnnl_dim_t q = (dnnl_dim_t)((d->w + d->pad_left + d->pad_right - d->window_w) / d->stride_w + 1);
    dnnl_dims_t src_dims = {(dnnl_dim_t)d->n, (dnnl_dim_t)d->c, (dnnl_dim_t)d->h, (dnnl_dim_t)d->w};
    dnnl_dims_t dst_dims = {(dnnl_dim_t)d->n, (dnnl_dim_t)d->c, p, q};
    dnnl_dims_t strides = {(dnnl_dim_t)d->stride_h, (dnnl_dim_t)d->stride_w};
    dnnl_dims_t window = {(dnnl_dim_t)d->window_h, (dnnl_dim_t)d->window_w};
    dnnl_dims_t pad_l = {(dnnl_dim_t)d->pad_top, (dnnl_dim_t)d->pad_left};
    dnnl_dims_t pad_r = {(dnnl_dim_t)d->pad_bottom, (dnnl_dim_t)d->pad_right};
    dnnl_format_tag_t tag = d->layout == KILN_NHWC ? dnnl_nhwc : dnnl_nchw;
    dnnl_alg_kind_t alg = d->mode == KILN_POOL_MAX ? dnnl_pooling_max
                          : d->count_include_pad   ? dnnl_pooling_avg_include_padding
                                                   : dnnl_pooling_avg_exclude_padding;
    dnnl_memory_desc_t user_src, any_dst;
    return onednn_failed(dnnl_memory_desc_init_by_tag(&user_src, 4, src_dims, dnnl_f32, tag), "memory desc", err,
                         err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(dst, 4, dst_dims, dnnl_f32, tag), "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&any_dst, 4, dst_dims, dnnl_f32, dnnl_format_tag_any),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_pooling_forward_desc_init(pool, dnnl_forward_inference, alg, src ? src : &user_src,
                                                        src ? &any_dst : dst, strides, window, pad_l, pad_r),
                         "dnnl_pooling_forward_desc_init", err, err_size);
}

static int onednn_pool(struct onednn_state *o, const struct bench_nn_op *op, char *routine, size_t routine_size,
                       char *err, size_t err_size)
{
    dnnl_memory_desc_t dst;
    dnnl_pooling_desc_t pool;
    return onednn_pool_init(op->pool, NULL, &dst, &pool, err, err_size) ||
           onednn_setup(o, &pool, NULL, op, &pool.src_desc, NULL, NULL, &dst, routine, routine_size, err, err_size);
}

static int onednn_fc(struct onednn_state *o, const struct bench_nn_op *op, char *routine, size_t routine_size,
                     char *err, size_t err_size)
{
    dnnl_dims_t src_dims = {(dnnl_dim_t)op->rows, (dnnl_dim_t)op->in};
    dnnl_dims_t w_dims = {(dnnl_dim_t)op->out, (dnnl_dim_t)op->in};
    dnnl_dims_t dst_dims = {(dnnl_dim_t)op->rows, (dnnl_dim_t)op->out};
    dnnl_memory_desc_t src, weights, any_weights, dst;
    dnnl_inner_product_desc_t ip;
    return onednn_failed(dnnl_memory_desc_init_by_tag(&src, 2, src_dims, dnnl_f32, dnnl_nc), "memory desc", err,
                         err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&weights, 2, w_dims, dnnl_f32, dnnl_oi), "memory desc", err,
                         err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&any_weights, 2, w_dims, dnnl_f32, dnnl_format_tag_any),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&dst, 2, dst_dims, dnnl_f32, dnnl_nc), "memory desc", err,
                         err_size) ||
           onednn_failed(
               dnnl_inner_product_forward_desc_init(&ip, dnnl_forward_inference, &src, &any_weights, NULL, &dst),
               "dnnl_inner_product_forward_desc_init", err, err_size) ||
           onednn_setup(o, &ip, NULL, op, &src, &weights, NULL, &dst, routine, routine_size, err, err_size);
}

static int onednn_softmax(struct onednn_state *o, const struct bench_nn_op *op, char *routine, size_t routine_size,
                          char *err, size_t err_size)
{
    dnnl_dims_t dims = {(dnnl_dim_t)op->rows, (dnnl_dim_t)op->in};
    dnnl_memory_desc_t md;
    dnnl_softmax_desc_t softmax;
    return onednn_failed(dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_nc), "memory desc", err, err_size) ||
           onednn_failed(dnnl_softmax_forward_desc_init(&softmax, dnnl_forward_inference, &md, 1),
                         "dnnl_softmax_forward_desc_init", err, err_size) ||
           onednn_setup(o, &softmax, NULL, op, &md, NULL, NULL, &md, routine, routine_size, err, err_size);
}

static int onednn_unsupported(const struct bench_nn_op *op, char *err, size_t err_size)
{
    const kiln_conv2d_desc *d = op->conv;
    dnnl_alg_kind_t alg;
    float alpha, beta;
    const char *why = op->kind != BENCH_NN_CONV ? NULL
                      : d->dtype != KILN_F32    ? "fp32 only here"
                      : d->alpha != 1.0f        ? "alpha other than 1 is not mapped"
                      : d->fused_maxpool        ? "no fused pooling"
                      : d->activation != KILN_ACT_NONE && onednn_activation(d->activation, 0.0f, &alg, &alpha, &beta)
                          ? "activation not mapped"
                          : NULL;
    if (why)
        snprintf(err, err_size, "%s", why);
    return why != NULL;
}

static int onednn_run(struct onednn_state *o, char *err, size_t err_size)
{
    return onednn_failed(dnnl_primitive_execute(o->primitive, o->stream, o->nargs, o->args), "dnnl_primitive_execute",
                         err, err_size) ||
           onednn_failed(dnnl_stream_wait(o->stream), "dnnl_stream_wait", err, err_size);
}

static void onednn_release(struct onednn_state *o)
{
    dnnl_primitive_destroy(o->primitive);
    for (int i = 0; i < o->nmemories; i++)
        dnnl_memory_destroy(o->memories[i]);
    if (o->stream)
        dnnl_stream_destroy(o->stream);
    if (o->engine)
        dnnl_engine_destroy(o->engine);
}

/* ---- oneDNN: a whole network ---- */

/* A network as a framework runs it on oneDNN: each step's primitive with
   the layouts oneDNN picks, a conversion in the pass wherever a step's
   input is not in the layout its primitive wants, a shortcut summed into
   the destination that holds it (in place), activation buffers reused as
   the caller's slots say. Memory objects on activation buffers are made
   before the buffers (whose size is the largest layout any step puts there)
   and pointed at them at the end. */
enum { NET_MAX_BUFFERS = 16 };

struct net_primitive {
    dnnl_primitive_t p;
    dnnl_exec_arg_t args[4];
    int nargs;
};

struct onednn_network {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    struct net_primitive *prims;
    dnnl_memory_t *mems;
    int *mem_buffer; /* the activation buffer a memory object lies on, -1: its own */
    size_t nprims, nmems, cap;
    int nbuffers, image, scratch; /* buffers: the slots', then one for conversions */
    int map[NET_MAX_BUFFERS];     /* slot -> buffer */
    void *buffer[NET_MAX_BUFFERS];
    size_t bytes[NET_MAX_BUFFERS];
    dnnl_memory_desc_t held[NET_MAX_BUFFERS]; /* the layout each buffer holds */
};

/* A memory object of layout md: on activation buffer b (>= 0), or on the
   caller's array data (b -1; NULL: allocated by oneDNN). */
static int net_memory(struct onednn_network *net, const dnnl_memory_desc_t *md, int b, const float *data,
                      dnnl_memory_t *out, char *err, size_t err_size)
{
    if (net->nmems == net->cap) {
        snprintf(err, err_size, "too many oneDNN memory objects");
        return 1;
    }
    void *handle = DNNL_MEMORY_NONE; /* on an activation buffer, pointed at it at the end */
    if (b < 0)
        handle = data ? (void *)data : DNNL_MEMORY_ALLOCATE;
    else if (b == net->image)
        handle = net->buffer[b];
    if (onednn_failed(dnnl_memory_create(out, md, net->engine, handle), "dnnl_memory_create", err, err_size))
        return 1;
    if (b >= 0) {
        const size_t bytes = dnnl_memory_desc_get_size(md);
        net->bytes[b] = bytes > net->bytes[b] ? bytes : net->bytes[b];
    }
    net->mem_buffer[net->nmems] = b;
    net->mems[net->nmems++] = *out;
    return 0;
}

/* Append a primitive of pd to the pass with its arguments. */
static int net_primitive(struct onednn_network *net, const_dnnl_primitive_desc_t pd, const dnnl_exec_arg_t *args,
                         int nargs, char *err, size_t err_size)
{
    if (net->nprims == net->cap) {
        snprintf(err, err_size, "too many oneDNN primitives");
        return 1;
    }
    struct net_primitive *x = &net->prims[net->nprims];
    if (onednn_failed(dnnl_primitive_create(&x->p, pd), "dnnl_primitive_create", err, err_size))
        return 1;
    memcpy(x->args, args, (size_t)nargs * sizeof *args);
    x->nargs = nargs;
    net->nprims++;
    return 0;
}

/* Append a conversion of `from` into `to` to the pass. */
static int net_reorder(struct onednn_network *net, dnnl_memory_t from, dnnl_memory_t to, char *err, size_t err_size)
{
    const dnnl_memory_desc_t *from_md, *to_md;
    dnnl_primitive_desc_t pd = NULL;
    const dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    int rc = onednn_failed(dnnl_memory_get_memory_desc(from, &from_md), "dnnl_memory_get_memory_desc", err, err_size) ||
             onednn_failed(dnnl_memory_get_memory_desc(to, &to_md), "dnnl_memory_get_memory_desc", err, err_size) ||
             onednn_failed(dnnl_reorder_primitive_desc_create(&pd, from_md, net->engine, to_md, net->engine, NULL),
                           "reorder", err, err_size) ||
             net_primitive(net, pd, args, 2, err, err_size);
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

/* Slot x's activation in layout want: its buffer, or a conversion of it
   into the scratch buffer. */
static int net_input(struct onednn_network *net, int x, const dnnl_memory_desc_t *want, dnnl_memory_t *out, char *err,
                     size_t err_size)
{
    const int b = net->map[x];
    dnnl_memory_t held;
    if (net_memory(net, &net->held[b], b, NULL, &held, err, err_size))
        return 1;
    *out = held;
    return !dnnl_memory_desc_equal(&net->held[b], want) &&
           (net_memory(net, want, net->scratch, NULL, out, err, err_size) ||
            net_reorder(net, held, *out, err, err_size));
}

/* The caller's array `data` (layout user) in layout want, converted once
   here when they differ. */
static int net_constant(struct onednn_network *net, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *user,
                        const float *data, dnnl_memory_t *out, char *err, size_t err_size)
{
    dnnl_memory_t mem;
    if (net_memory(net, user, -1, data, &mem, err, err_size))
        return 1;
    *out = mem;
    return !dnnl_memory_desc_equal(want, user) && (net_memory(net, want, -1, NULL, out, err, err_size) ||
                                                   onednn_convert(net->engine, net->stream, mem, *out, err, err_size));
}

/* The buffer a step writes, in layout dst: slot y's, or, for a convolution
   adding slot z, z's own when it holds that layout and is not the image
   (summed in place; the slots trade buffers), else y's after a conversion
   of z into it. */
static int net_output(struct onednn_network *net, const struct bench_nn_step *step, const dnnl_memory_desc_t *dst,
                      dnnl_memory_t *out, char *err, size_t err_size)
{
    const int in_place =
        step->z >= 0 && net->map[step->z] != net->image && dnnl_memory_desc_equal(&net->held[net->map[step->z]], dst);
    if (in_place) {
        const int t = net->map[step->y];
        net->map[step->y] = net->map[step->z];
        net->map[step->z] = t;
    }
    const int b = net->map[step->y];
    if (net_memory(net, dst, b, NULL, out, err, err_size))
        return 1;
    if (step->z >= 0 && !in_place) {
        const int zb = net->map[step->z];
        dnnl_memory_t z;
        if (net_memory(net, &net->held[zb], zb, NULL, &z, err, err_size) || net_reorder(net, z, *out, err, err_size))
            return 1;
    }
    net->held[b] = *dst;
    return 0;
}

/* A step's primitive from its operation descriptor (and attr, NULL for
   none): its source from slot x, its weights and bias converted once, its
   destination as net_output() says. */
static int net_step(struct onednn_network *net, const struct bench_nn_step *step, const void *desc,
                    const_dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *user_weights,
                    const dnnl_memory_desc_t *user_bias, char *err, size_t err_size)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_exec_arg_t args[4];
    int nargs = 0;
    dnnl_memory_t mem;
    int rc = onednn_failed(dnnl_primitive_desc_create(&pd, desc, attr, net->engine, NULL), "dnnl_primitive_desc_create",
                           err, err_size) ||
             net_input(net, step->x, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), &mem, err, err_size);
    if (rc == 0) {
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, mem};
        if (user_weights) {
            rc = net_constant(net, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), user_weights,
                              step->op.weights, &mem, err, err_size);
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, mem};
        }
        if (rc == 0 && user_bias) {
            rc = net_constant(net, user_bias, user_bias, step->op.bias, &mem, err, err_size);
            args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mem};
        }
    }
    if (rc == 0)
        rc = net_output(net, step, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), &mem, err, err_size);
    if (rc == 0) {
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DST, mem};
        rc = net_primitive(net, pd, args, nargs, err, err_size);
    }
    dnnl_primitive_desc_destroy(pd);
    return rc;
}

static int net_conv(struct onednn_network *net, const struct bench_nn_step *step, char *err, size_t err_size)
{
    const kiln_conv2d_desc *d = step->op.conv;
    struct onednn_conv_mds m;
    dnnl_convolution_desc_t conv;
    dnnl_primitive_attr_t attr = NULL;
    int rc = onednn_conv_init(d, &m, &conv, err, err_size) || onednn_conv_attr(d, &attr, err, err_size) ||
             net_step(net, step, &conv, attr, &m.weights, d->has_bias ? &m.bias : NULL, err, err_size);
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* The classifier on whatever its input is (NCHW-shaped after a pooling):
   weights of the same shape, out of them. */
static int net_fc(struct onednn_network *net, const struct bench_nn_step *step, char *err, size_t err_size)
{
    const dnnl_memory_desc_t *src = &net->held[net->map[step->x]];
    dnnl_dims_t w_dims = {(dnnl_dim_t)step->op.out}, dst_dims = {(dnnl_dim_t)step->op.rows, (dnnl_dim_t)step->op.out};
    dnnl_dim_t volume = 1;
    for (int i = 1; i < src->ndims; i++)
        volume *= w_dims[i] = src->dims[i];
    if (src->dims[0] != (dnnl_dim_t)step->op.rows || volume != (dnnl_dim_t)step->op.in) {
        snprintf(err, err_size, "the classifier's input is not %zu x %zu", step->op.rows, step->op.in);
        return 1;
    }
    dnnl_memory_desc_t weights, any_weights, dst;
    dnnl_inner_product_desc_t ip;
    return onednn_failed(dnnl_memory_desc_init_by_tag(&weights, src->ndims, w_dims, dnnl_f32,
                                                      src->ndims == 4 ? dnnl_oihw : dnnl_oi),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&any_weights, src->ndims, w_dims, dnnl_f32, dnnl_format_tag_any),
                         "memory desc", err, err_size) ||
           onednn_failed(dnnl_memory_desc_init_by_tag(&dst, 2, dst_dims, dnnl_f32, dnnl_nc), "memory desc", err,
                         err_size) ||
           onednn_failed(
               dnnl_inner_product_forward_desc_init(&ip, dnnl_forward_inference, src, &any_weights, NULL, &dst),
               "dnnl_inner_product_forward_desc_init", err, err_size) ||
           net_step(net, step, &ip, NULL, &weights, NULL, err, err_size);
}

static int net_other(struct onednn_network *net, const struct bench_nn_step *step, char *err, size_t err_size)
{
    const dnnl_memory_desc_t *src = &net->held[net->map[step->x]];
    if (step->op.kind == BENCH_NN_POOL) {
        dnnl_memory_desc_t dst;
        dnnl_pooling_desc_t pool;
        return onednn_pool_init(step->op.pool, src, &dst, &pool, err, err_size) ||
               net_step(net, step, &pool, NULL, NULL, NULL, err, err_size);
    }
    if (step->op.kind == BENCH_NN_FC)
        return net_fc(net, step, err, err_size);
    dnnl_softmax_desc_t softmax;
    return onednn_failed(dnnl_softmax_forward_desc_init(&softmax, dnnl_forward_inference, src, 1),
                         "dnnl_softmax_forward_desc_init", err, err_size) ||
           net_step(net, step, &softmax, NULL, NULL, NULL, err, err_size);
}

static void net_release(struct onednn_network *net)
{
    for (size_t i = 0; i < net->nprims; i++)
        dnnl_primitive_destroy(net->prims[i].p);
    for (size_t i = 0; i < net->nmems; i++)
        dnnl_memory_destroy(net->mems[i]);
    for (int b = 0; b < net->nbuffers; b++)
        if (b != net->image)
            free(net->buffer[b]);
    if (net->stream)
        dnnl_stream_destroy(net->stream);
    if (net->engine)
        dnnl_engine_destroy(net->engine);
    free(net->prims);
    free(net->mems);
    free(net->mem_buffer);
}

static int net_prepare(struct onednn_network *net, const struct bench_nn_step *steps, size_t count, int slots,
                       int image, const float *image_data, char *err, size_t err_size)
{
    if (slots + 1 > NET_MAX_BUFFERS || image < 0 || image >= slots || !count || steps[0].x != image ||
        steps[0].op.kind != BENCH_NN_CONV) {
        snprintf(err, err_size, "a network of %d slots starting with a convolution of the image", NET_MAX_BUFFERS - 1);
        return 1;
    }
    net->cap = count * 8 + 8; /* a step: 3 primitives, 8 memory objects at most */
    net->prims = calloc(net->cap, sizeof *net->prims);
    net->mems = calloc(net->cap, sizeof *net->mems);
    net->mem_buffer = calloc(net->cap, sizeof *net->mem_buffer);
    net->nbuffers = slots + 1;
    net->image = image;
    net->scratch = slots;
    for (int b = 0; b < net->nbuffers; b++)
        net->map[b] = b;
    net->buffer[image] = (void *)image_data;
    struct onednn_conv_mds m;
    dnnl_convolution_desc_t conv;
    if (!net->prims || !net->mems || !net->mem_buffer) {
        snprintf(err, err_size, "out of host memory");
        return 1;
    }
    if (onednn_failed(dnnl_engine_create(&net->engine, dnnl_cpu, 0), "dnnl_engine_create", err, err_size) ||
        onednn_failed(dnnl_stream_create(&net->stream, net->engine, dnnl_stream_default_flags), "dnnl_stream_create",
                      err, err_size) ||
        onednn_conv_init(steps[0].op.conv, &m, &conv, err, err_size))
        return 1;
    net->held[image] = m.src; /* the image, in the first convolution's layout */
    for (size_t i = 0; i < count; i++) {
        const struct bench_nn_step *step = &steps[i];
        if (step->x < 0 || step->x >= slots || step->y < 0 || step->y >= slots || step->y == image ||
            step->z >= slots || (step->z >= 0 && step->op.kind != BENCH_NN_CONV)) {
            snprintf(err, err_size, "step %zu names slots outside 0-%d or writes the image", i, slots - 1);
            return 1;
        }
        if (step->op.kind == BENCH_NN_CONV && onednn_unsupported(&step->op, err, err_size))
            return 1;
        if (step->op.kind == BENCH_NN_CONV ? net_conv(net, step, err, err_size) : net_other(net, step, err, err_size))
            return 1;
    }
    for (int b = 0; b < net->nbuffers; b++) {
        if (b == net->image || !net->bytes[b])
            continue;
        net->buffer[b] = calloc(1, net->bytes[b]);
        if (!net->buffer[b]) {
            snprintf(err, err_size, "out of host memory");
            return 1;
        }
    }
    for (size_t i = 0; i < net->nmems; i++) {
        const int b = net->mem_buffer[i];
        if (b >= 0 && b != net->image &&
            onednn_failed(dnnl_memory_set_data_handle(net->mems[i], net->buffer[b]), "dnnl_memory_set_data_handle", err,
                          err_size))
            return 1;
    }
    return 0;
}
#endif

struct bench_nn_prepared {
    enum bench_nn_peer peer;
    const struct bench_nn_op *op;
    struct bench_peer_cudnn *cudnn;
#ifdef KILN_BENCH_WITH_ONEDNN
    struct onednn_state onednn;
#endif
};

void bench_nn_peer_release(bench_nn_prepared *prepared)
{
    if (!prepared)
        return;
    bench_peer_cudnn_release(prepared->cudnn);
#ifdef KILN_BENCH_WITH_ONEDNN
    onednn_release(&prepared->onednn);
#endif
    free(prepared);
}

int bench_nn_peer_workspace(const bench_nn_prepared *prepared, size_t *bytes)
{
    if (!prepared->cudnn)
        return 0;
    *bytes = bench_peer_cudnn_workspace(prepared->cudnn);
    return 1;
}

int bench_nn_peer_prepare(enum bench_nn_peer peer, const struct bench_nn_op *op, bench_nn_prepared **out, char *routine,
                          size_t routine_size, char *err, size_t err_size)
{
    *out = NULL;
    snprintf(routine, routine_size, "-"); /* until the peer names what it runs */
    if (!bench_nn_peer_built(peer)) {
        snprintf(err, err_size, "not built");
        return BENCH_NN_FAILED;
    }
    bench_nn_prepared *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, err_size, "out of host memory");
        return BENCH_NN_FAILED;
    }
    p->peer = peer;
    p->op = op;
    int rc = BENCH_NN_FAILED;
    if (peer == BENCH_NN_PEER_CUDNN)
        rc = bench_peer_cudnn_prepare(op, &p->cudnn, routine, routine_size, err, err_size);
#ifdef KILN_BENCH_WITH_CLBLAST
    if (peer == BENCH_NN_PEER_CLBLAST) {
        rc = clblast_conv_check(op, err, err_size) ? BENCH_NN_UNSUPPORTED : BENCH_NN_READY;
        snprintf(routine, routine_size, "CLBlastSconvgemm");
    }
#endif
#ifdef KILN_BENCH_WITH_ONEDNN
    if (peer == BENCH_NN_PEER_ONEDNN) {
        struct onednn_state *o = &p->onednn;
        if (onednn_unsupported(op, err, err_size))
            rc = BENCH_NN_UNSUPPORTED;
        else if (onednn_failed(dnnl_engine_create(&o->engine, dnnl_cpu, 0), "dnnl_engine_create", err, err_size) ||
                 onednn_failed(dnnl_stream_create(&o->stream, o->engine, dnnl_stream_default_flags),
                               "dnnl_stream_create", err, err_size))
            rc = BENCH_NN_FAILED;
        else if (op->kind == BENCH_NN_CONV)
            rc = onednn_conv(o, op, routine, routine_size, err, err_size);
        else if (op->kind == BENCH_NN_POOL)
            rc = onednn_pool(o, op, routine, routine_size, err, err_size);
        else if (op->kind == BENCH_NN_FC)
            rc = onednn_fc(o, op, routine, routine_size, err, err_size);
        else
            rc = onednn_softmax(o, op, routine, routine_size, err, err_size);
    }
#endif
    if (rc != BENCH_NN_READY)
        bench_nn_peer_release(p);
    else
        *out = p;
    return rc;
}

int bench_nn_peer_run(bench_nn_prepared *prepared, char *err, size_t err_size)
{
    switch (prepared->peer) {
#ifdef KILN_BENCH_WITH_CLBLAST
    case BENCH_NN_PEER_CLBLAST:
        return clblast_conv(prepared->op, err, err_size);
#endif
    case BENCH_NN_PEER_CUDNN:
        return bench_peer_cudnn_run(prepared->cudnn, err, err_size);
#ifdef KILN_BENCH_WITH_ONEDNN
    case BENCH_NN_PEER_ONEDNN:
        return onednn_run(&prepared->onednn, err, err_size);
#endif
    default:
        snprintf(err, err_size, "not built");
        return 1;
    }
}

int bench_nn_peer_output(bench_nn_prepared *prepared, char *err, size_t err_size)
{
#ifdef KILN_BENCH_WITH_ONEDNN
    struct onednn_state *o = &prepared->onednn;
    if (prepared->peer == BENCH_NN_PEER_ONEDNN) {
        if (o->residual && (onednn_reorder(o, o->residual, o->dst, err, err_size) || onednn_run(o, err, err_size)))
            return 1;
        return o->dst != o->user_dst && onednn_reorder(o, o->dst, o->user_dst, err, err_size);
    }
#endif
    (void)prepared;
    (void)err;
    (void)err_size;
    return 0;
}

struct bench_nn_network {
#ifdef KILN_BENCH_WITH_ONEDNN
    struct onednn_network onednn;
#endif
    int unused;
};

void bench_nn_peer_network_release(bench_nn_network *net)
{
    if (!net)
        return;
#ifdef KILN_BENCH_WITH_ONEDNN
    net_release(&net->onednn);
#endif
    free(net);
}

int bench_nn_peer_network_prepare(enum bench_nn_peer peer, const struct bench_nn_step *steps, size_t count, int slots,
                                  int image, const float *image_data, bench_nn_network **out, char *err,
                                  size_t err_size)
{
    *out = NULL;
    if (peer != BENCH_NN_PEER_ONEDNN || !bench_nn_peer_built(peer)) {
        snprintf(err, err_size, "%s", bench_nn_peer_built(peer) ? "no whole-network pass on this peer" : "not built");
        return bench_nn_peer_built(peer) ? BENCH_NN_UNSUPPORTED : BENCH_NN_FAILED;
    }
    bench_nn_network *net = calloc(1, sizeof *net);
    if (!net) {
        snprintf(err, err_size, "out of host memory");
        return BENCH_NN_FAILED;
    }
#ifdef KILN_BENCH_WITH_ONEDNN
    if (net_prepare(&net->onednn, steps, count, slots, image, image_data, err, err_size)) {
        bench_nn_peer_network_release(net);
        return BENCH_NN_FAILED;
    }
#else
    (void)steps, (void)count, (void)slots, (void)image, (void)image_data;
#endif
    *out = net;
    return BENCH_NN_READY;
}

int bench_nn_peer_network_run(bench_nn_network *net, char *err, size_t err_size)
{
#ifdef KILN_BENCH_WITH_ONEDNN
    struct onednn_network *o = &net->onednn;
    for (size_t i = 0; i < o->nprims; i++)
        if (onednn_failed(dnnl_primitive_execute(o->prims[i].p, o->stream, o->prims[i].nargs, o->prims[i].args),
                          "dnnl_primitive_execute", err, err_size))
            return 1;
    return onednn_failed(dnnl_stream_wait(o->stream), "dnnl_stream_wait", err, err_size);
#else
    (void)net;
    snprintf(err, err_size, "not built");
    return 1;
#endif
}

int bench_nn_peer_network_output(bench_nn_network *net, int slot, float *dst, size_t count, char *err, size_t err_size)
{
#ifdef KILN_BENCH_WITH_ONEDNN
    struct onednn_network *o = &net->onednn;
    if (slot < 0 || slot >= o->nbuffers - 1 || !o->bytes[o->map[slot]]) {
        snprintf(err, err_size, "slot %d holds no step's output", slot);
        return 1;
    }
    const int b = o->map[slot];
    const dnnl_memory_desc_t *md = &o->held[b];
    dnnl_memory_desc_t plain;
    dnnl_memory_t from = NULL, to = NULL;
    size_t elements = 1;
    for (int i = 0; i < md->ndims; i++)
        elements *= (size_t)md->dims[i];
    if (elements != count || md->ndims < 1 || md->ndims > 6) {
        snprintf(err, err_size, "slot %d holds %zu values, not %zu", slot, elements, count);
        return 1;
    }
    static const dnnl_format_tag_t plain_tags[] = {dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    int rc =
        onednn_failed(dnnl_memory_desc_init_by_tag(&plain, md->ndims, md->dims, dnnl_f32, plain_tags[md->ndims - 1]),
                      "memory desc", err, err_size) ||
        onednn_failed(dnnl_memory_create(&from, md, o->engine, o->buffer[b]), "dnnl_memory_create", err, err_size) ||
        onednn_failed(dnnl_memory_create(&to, &plain, o->engine, dst), "dnnl_memory_create", err, err_size) ||
        onednn_convert(o->engine, o->stream, from, to, err, err_size);
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    return rc;
#else
    (void)net, (void)slot, (void)dst, (void)count;
    snprintf(err, err_size, "not built");
    return 1;
#endif
}
