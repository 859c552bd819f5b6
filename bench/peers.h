/*
 * kiln-bench peers: the libraries kiln is measured against, each compiled in
 * only when CMake found it (KILN_BENCH_WITH_OPENBLAS, KILN_BENCH_WITH_CLBLAST,
 * KILN_BENCH_WITH_ONEDNN) or, for the CUDA peers (cuBLAS, cuDNN), loaded at
 * run time. GEMM has one set of peers, the neural-network operators
 * (convolution and what a model needs around it) another.
 */
#ifndef KILN_BENCH_PEERS_H
#define KILN_BENCH_PEERS_H

#include <stddef.h>
#include <stdio.h>

#include "kiln/kiln.h"
#include "kiln/kiln_cl.h"

/* In the order they are measured and printed. Device peers come first: OpenBLAS
   leaves its threads spinning for a while after a call. */
enum bench_peer { BENCH_PEER_CLBLAST, BENCH_PEER_CUBLAS, BENCH_PEER_OPENBLAS, BENCH_PEER_COUNT };

/* One GEMM as a peer runs it: the layout, transposes, sizes, leading
   dimensions and batch strides of `desc`; alpha 1, beta 0. A host peer uses
   a, b, c and an OpenCL device peer the buffers on `queue` (the queue kiln
   runs on), on fp32 storage whatever desc->dtype says; the CUDA peer
   (cuBLAS) runs on kiln's own buffers ka, kb, kc of context ctx, in their
   storage type. */
struct bench_peer_gemm {
    const kiln_gemm_desc *desc;
    const float *a, *b;
    float *c;
    cl_command_queue queue;
    cl_mem a_mem, b_mem, c_mem;
    kiln_context *ctx;
    const kiln_buffer *ka, *kb;
    kiln_buffer *kc;
};

/* Bits 1u << i of the names[i] in a comma-separated list, or "none".
   Returns 0, or -1 for a name not in the list. */
int bench_parse_names(const char *list, const char *const *names, int count, unsigned *mask);

/* "clblast", "cublas", "openblas". */
const char *bench_peer_name(enum bench_peer peer);

/* Non-zero when the peer was compiled in. */
int bench_peer_built(enum bench_peer peer);

/* Non-zero when the peer writes c_mem (an OpenCL device) rather than c. */
int bench_peer_on_device(enum bench_peer peer);

/* Parse a comma-separated list of peer names (or "none") into bits
   1u << enum bench_peer. Returns 0, or -1 for an unknown name. */
int bench_peer_parse(const char *list, unsigned *mask);

/* The routine that runs `desc`, e.g. "cblas_sgemm x64" for a batch of 64. */
void bench_peer_routine(enum bench_peer peer, const kiln_gemm_desc *desc, char *buf, size_t size);

/* One line per peer in `mask` on how it runs here ("not built", OpenBLAS's
   build, core and threads, ...). */
void bench_peer_print_config(FILE *out, unsigned mask);

/* OpenBLAS 0.3.21 picks its kernels by CPU model (DYNAMIC_ARCH) and falls
   back to its SSE3 kernels (Prescott) on a processor newer than it knows,
   such as an Emerald Rapids Xeon: a fifth of its speed there, no peer at
   all. Where OPENBLAS_CORETYPE is unset and OpenBLAS chose a core without
   AVX2 on a CPU that has it, this sets OPENBLAS_CORETYPE to the newest
   core the CPU's instructions allow (SkylakeX with AVX-512, Haswell with
   AVX2) and runs the program again with argv (OpenBLAS reads it when it
   loads); the config line then says so. Returns only when nothing is to be
   done, or the run again failed. A user's OPENBLAS_CORETYPE always wins. */
void bench_peer_fair_openblas(char **argv);

/* Threads the peer computes with; 0 when not applicable or not built. */
int bench_peer_threads(enum bench_peer peer);

/* Run the GEMM once, complete on return. Returns 0, or 1 with `err` filled
   ("not built" when the peer was not compiled in). */
int bench_peer_gemm(enum bench_peer peer, const struct bench_peer_gemm *g, char *err, size_t err_size);

/* cuBLAS (peer_cublas.c), loaded at run time: its GEMM, and a line on where
   it was loaded from or why it was not. */
int bench_peer_cublas_gemm(const struct bench_peer_gemm *g, char *err, size_t err_size);
const char *bench_peer_cublas_status(void);

/* ---- Peers of the neural-network operators (kiln-bench conv) ---- */

/* In the order they are measured and printed: the device peers first, as
   for GEMM (oneDNN's OpenMP threads also spin for a while after a call). */
enum bench_nn_peer { BENCH_NN_PEER_CLBLAST, BENCH_NN_PEER_CUDNN, BENCH_NN_PEER_ONEDNN, BENCH_NN_PEER_COUNT };

enum bench_nn_kind {
    BENCH_NN_CONV,   /* `conv`, with its epilogue (bias, beta * residual, activation) */
    BENCH_NN_POOL,   /* `pool` */
    BENCH_NN_FC,     /* dst[rows][out] = src[rows][in] * weights[out][in]^T, no bias */
    BENCH_NN_SOFTMAX /* over each row of src[rows][in] */
};

/* One operation as a peer runs it, on the data kiln runs on. Tensors use the
   layouts of the descriptors. A host peer reads src, weights, bias and
   residual (NULL when unused; fp32 values, exactly representable in the
   storage type) and writes dst; an OpenCL device peer uses the fp32 buffers
   on `queue` (the queue kiln runs on); the CUDA peer (cuDNN) runs on kiln's
   own buffers kx, kw, kz (NULL without a residual) and ky of context ctx, in
   the descriptor's storage type, and takes the bias from `bias`. */
struct bench_nn_op {
    enum bench_nn_kind kind;
    const kiln_conv2d_desc *conv;
    const kiln_pool2d_desc *pool;
    size_t rows, in, out;
    const float *src, *weights, *bias, *residual;
    float *dst;
    cl_command_queue queue;
    cl_mem src_mem, weights_mem, dst_mem;
    kiln_context *ctx;
    const kiln_buffer *kx, *kw, *kz;
    kiln_buffer *ky;
};

/* An operation prepared on a peer: primitives created, weights and inputs
   converted to the peer's preferred layouts, all outside the timed runs. */
typedef struct bench_nn_prepared bench_nn_prepared;

/* What bench_nn_peer_prepare() returns. */
enum { BENCH_NN_READY = 0, BENCH_NN_FAILED = 1, BENCH_NN_UNSUPPORTED = 2 };

/* "clblast", "cudnn", "onednn". */
const char *bench_nn_peer_name(enum bench_nn_peer peer);

/* Non-zero when the peer was compiled in. */
int bench_nn_peer_built(enum bench_nn_peer peer);

/* Non-zero when the peer works on OpenCL device buffers (src_mem, ...)
   rather than host arrays; cuDNN, on kiln's own buffers, is neither. */
int bench_nn_peer_on_device(enum bench_nn_peer peer);

/* Parse a comma-separated list of peer names (or "none") into bits
   1u << enum bench_nn_peer. Returns 0, or -1 for an unknown name. */
int bench_nn_peer_parse(const char *list, unsigned *mask);

/* One line per peer in `mask` on how it runs here. */
void bench_nn_peer_print_config(FILE *out, unsigned mask);

/* Threads the peer computes with; 0 when not applicable or not built. */
int bench_nn_peer_threads(enum bench_nn_peer peer);

/*
 * Prepare `op` (which must outlive the prepared operation) on the peer.
 * @param routine  receives what will run, e.g. "CLBlastSconvgemm".
 * @return BENCH_NN_READY with *out set; BENCH_NN_UNSUPPORTED with `err`
 *         saying why when the peer cannot run the operation as described;
 *         BENCH_NN_FAILED with `err` set otherwise ("not built" included).
 */
int bench_nn_peer_prepare(enum bench_nn_peer peer, const struct bench_nn_op *op, bench_nn_prepared **out, char *routine,
                          size_t routine_size, char *err, size_t err_size);

/* Run the prepared operation once, complete on return. A residual is added
   to what dst holds, so after the first run dst no longer starts from it:
   the timing is right, the values are not -- see bench_nn_peer_output().
   Returns 0, or 1 with `err` filled. */
int bench_nn_peer_run(bench_nn_prepared *prepared, char *err, size_t err_size);

/* Leave the result of a run from the operation's original inputs in
   op->dst (host peers, converted to the caller's layout), op->dst_mem
   (OpenCL device peers) or op->ky (cuDNN, which reads the residual from kz
   and so never accumulates), running once more when a residual made the
   runs accumulate. Returns 0, or 1 with `err` filled. */
int bench_nn_peer_output(bench_nn_prepared *prepared, char *err, size_t err_size);

/* Device memory the prepared operation uses beyond its operands, in *bytes;
   returns non-zero when the peer says (cuDNN's workspace), 0 otherwise. */
int bench_nn_peer_workspace(const bench_nn_prepared *prepared, size_t *bytes);

/* Release a prepared operation. NULL is ignored. */
void bench_nn_peer_release(bench_nn_prepared *prepared);

/* ---- A whole network on a peer (kiln-bench conv --model) ---- */

/* One step of a network: `op` (its kind, descriptor, weights and bias; src,
   dst and residual unused) reading activation slot x and writing slot y; a
   convolution whose beta is 1 adds slot z (-1: none), written by an earlier
   step and read by no later one. */
struct bench_nn_step {
    struct bench_nn_op op;
    int x, y, z;
};

typedef struct bench_nn_network bench_nn_network;

/*
 * Prepare the network of `count` steps on the peer (oneDNN only), outside
 * any timing: slot `image` of `slots` holds image_data (the first step's
 * input, in its descriptor's layout) and is never written. Each step runs
 * in the layouts the peer picks, converted in the pass wherever a step's
 * input is not in the layout it wants (as a framework runs it), weights
 * converted once here; a shortcut is summed in place into the buffer that
 * holds it. The steps' arrays must outlive the network.
 * @return BENCH_NN_READY with *out set, BENCH_NN_UNSUPPORTED (another peer)
 *         or BENCH_NN_FAILED, with `err` saying why.
 */
int bench_nn_peer_network_prepare(enum bench_nn_peer peer, const struct bench_nn_step *steps, size_t count, int slots,
                                  int image, const float *image_data, bench_nn_network **out, char *err,
                                  size_t err_size);

/* One pass: every step in order, one wait at the end. Returns 0, or 1 with
   `err` filled. */
int bench_nn_peer_network_run(bench_nn_network *net, char *err, size_t err_size);

/* What slot `slot` holds after a pass (the output of the last step that
   wrote it), `count` floats in plain row-major order of its dimensions.
   Returns 0, or 1 with `err` filled. */
int bench_nn_peer_network_output(bench_nn_network *net, int slot, float *dst, size_t count, char *err, size_t err_size);

/* Release a prepared network. NULL is ignored. */
void bench_nn_peer_network_release(bench_nn_network *net);

/* cuDNN (peer_cudnn.c), loaded at run time: its convolution, prepared, run
   and released as above, and a line on where it was loaded from or why it
   was not. */
struct bench_peer_cudnn;
int bench_peer_cudnn_prepare(const struct bench_nn_op *op, struct bench_peer_cudnn **out, char *routine,
                             size_t routine_size, char *err, size_t err_size);
int bench_peer_cudnn_run(struct bench_peer_cudnn *c, char *err, size_t err_size);
size_t bench_peer_cudnn_workspace(const struct bench_peer_cudnn *c);
void bench_peer_cudnn_release(struct bench_peer_cudnn *c);
const char *bench_peer_cudnn_status(void);

/* ---- The host peer of attention (kiln-bench attention, peer_attention.c) ---- */

/* Attention as a framework without a fused kernel computes it on the host,
   one (batch item, head) at a time: S = scale Q K^T by cblas_sgemm, a C
   softmax over the rows of S (causal masking applied; parallel over rows
   where OpenMP is available), O = P V by cblas_sgemm. desc gives the
   layout, sizes, scale and causal flag (no mask, no key lengths); the
   tensors are fp32 in that layout. `scores` is seq_q * seq_kv floats of
   scratch. */
struct bench_peer_attention {
    const kiln_attention_desc *desc;
    const float *q, *k, *v;
    float *o, *scores;
};

/* Non-zero when the peer was compiled in (it needs OpenBLAS). */
int bench_peer_attention_built(void);

/* What runs, e.g. "cblas_sgemm + C softmax (2 threads) + cblas_sgemm". */
void bench_peer_attention_routine(char *buf, size_t size);

/* Run the attention once. Returns 0, or 1 with `err` filled ("not built"
   without OpenBLAS). */
int bench_peer_attention(const struct bench_peer_attention *a, char *err, size_t err_size);

#endif /* KILN_BENCH_PEERS_H */
