/*
 * kiln attention: scaled dot-product attention, fused flash-style (the score
 * matrix is never stored) or naive (GEMM, softmax, GEMM) for comparison.
 * Included by kiln/kiln.h.
 *
 * For batch item b, query head h, query position i:
 *   s_j = scale * (q_i . k_j) + mask[b, h, i, j]
 *   O[b, h, i] = sum_j softmax(s)_j v_j,   lse[b, h, i] = ln sum_j exp(s_j)
 * over the keys j that row sees, with k_j and v_j those of key/value head
 * h / (heads / kv_heads): multi-head attention when kv_heads == heads,
 * grouped-query when it divides heads, multi-query when it is 1.
 *
 * Keys a row sees:
 *  - all seq_kv keys, or with key_lengths the first key_lengths[b] of them
 *    (values are clamped to [0, seq_kv]);
 *  - with causal masking, only keys j <= i + seq_kv - seq_q: the mask is
 *    aligned to the END of the key sequence, so the last query sees every
 *    key (decoding: seq_q = 1 attends to the whole cache; a chunk of seq_q
 *    new tokens after seq_kv - seq_q cached ones sees the cache and its own
 *    past). With seq_q > seq_kv the first seq_q - seq_kv rows see no key.
 *    The alignment uses seq_kv, not key_lengths.
 * A row that sees no key, or whose every score is -inf, has O = 0 and
 * lse = -inf.
 *
 * Tensors are dense, start at offset 0 of their buffers and use one layout
 * for Q, K, V and O: BSHD [batch][seq][heads][head_dim] or BHSD
 * [batch][heads][seq][head_dim] (K and V with kv_heads and seq_kv). Q, K, V
 * and O are fp32, fp16 or bf16 (storage only: arithmetic is fp32 on every
 * device);
 * the mask and lse are fp32, key_lengths int32.
 */
#ifndef KILN_KILN_ATTENTION_H
#define KILN_KILN_ATTENTION_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kiln_attention_layout {
    KILN_BSHD = 0, /**< [batch][seq][heads][head_dim] */
    KILN_BHSD = 1  /**< [batch][heads][seq][head_dim] */
} kiln_attention_layout;

/** Which scores an additive mask (fp32, rows of seq_kv) covers; the others
    share it. */
typedef enum kiln_attention_mask {
    KILN_ATTENTION_MASK_NONE = 0,
    KILN_ATTENTION_MASK_QK = 1,  /**< [seq_q][seq_kv]: one for every batch item and head */
    KILN_ATTENTION_MASK_BQK = 2, /**< [batch][seq_q][seq_kv]: one per batch item */
    KILN_ATTENTION_MASK_BHQK = 3 /**< [batch][heads][seq_q][seq_kv] */
} kiln_attention_mask;

typedef enum kiln_attention_algo {
    KILN_ATTENTION_AUTO = 0,  /**< the fused kernel */
    KILN_ATTENTION_FUSED = 1, /**< flash-style tiles with an online softmax: no
                                   score matrix; a workspace only where the
                                   keys are split over work-items (decoding,
                                   short query blocks): the splits' partial
                                   outputs */
    KILN_ATTENTION_NAIVE = 2  /**< scores by kiln's GEMM into a
                                   batch*heads*seq_q*seq_kv workspace, a
                                   softmax over each row, then GEMM with V;
                                   for comparison and testing. The GEMM
                                   multiplies the values of keys a row does
                                   not see by 0, so V must be finite at
                                   every key (the fused kernel ignores
                                   hidden keys whatever they hold) */
} kiln_attention_algo;

/** Largest head dimension. 64 and 128 have kernels specialised for them. */
#define KILN_ATTENTION_MAX_HEAD_DIM 256

/** An attention problem. Fill with kiln_attention_desc_init() and change
    what differs. */
typedef struct kiln_attention_desc {
    kiln_attention_layout layout;
    kiln_dtype dtype; /**< of Q, K, V and O */
    size_t batch;
    size_t heads;             /**< query heads */
    size_t kv_heads;          /**< key/value heads; divides heads */
    size_t seq_q, seq_kv;     /**< query and key/value lengths */
    size_t head_dim;          /**< 1 to KILN_ATTENTION_MAX_HEAD_DIM */
    float scale;              /**< multiplies q . k; finite */
    int causal;               /**< non-zero: causal masking, end-aligned */
    kiln_attention_mask mask; /**< additive mask (fp32) and its extent */
    int key_lengths;          /**< non-zero: an int32 buffer of batch key lengths */
    int lse;                  /**< non-zero: write the fp32 log-sum-exp of each
                                   row, [batch][heads][seq_q] */
    kiln_attention_algo algo;
    kiln_math math; /**< what fp32 storage allows (kiln_math) */
} kiln_attention_desc;

/** Multi-head attention (kv_heads = heads) of the given sizes: fp32, scale
    1/sqrt(head_dim), no causal masking, no mask, no key lengths, no lse,
    algorithm AUTO. Set scale again if head_dim changes. */
KILN_API void kiln_attention_desc_init(kiln_attention_desc *desc, kiln_attention_layout layout, size_t batch,
                                       size_t heads, size_t seq_q, size_t seq_kv, size_t head_dim);

/** Attention prepared once (kernels compiled, workspace owned by the plan)
    and executed many times. Not for concurrent use from several threads: one
    thread at a time, as kiln_gemm_plan. */
typedef struct kiln_attention_plan kiln_attention_plan;

/**
 * Prepare attention on a context.
 * @param out  receives a new plan owned by the caller
 *             (kiln_attention_plan_destroy).
 * @return KILN_ERROR_INVALID_ARGUMENT for NULL pointers, invalid enum values,
 *         a zero size, kv_heads that do not divide heads, or a scale that is
 *         not finite; KILN_ERROR_UNSUPPORTED for head_dim above
 *         KILN_ATTENTION_MAX_HEAD_DIM, a size above 2^31 - 1, seq_kv or
 *         seq_q * heads / kv_heads above 2^30;
 *         KILN_ERROR_OUT_OF_MEMORY if the naive algorithm's workspace does
 *         not fit on the device; KILN_ERROR_BUILD if a kernel fails to
 *         compile. The detail names the field.
 */
KILN_API kiln_status kiln_attention_plan_create(kiln_context *ctx, const kiln_attention_desc *desc,
                                                kiln_attention_plan **out);

/**
 * Queue the attention on the context's queue. mask is needed when
 * desc.mask is not NONE, key_lengths (batch int32 values) when
 * desc.key_lengths is set, lse (batch * heads * seq_q floats) when desc.lse
 * is set; pass NULL otherwise.
 * @param event  NULL, or receives an event for the caller to wait on and destroy.
 * @return KILN_ERROR_INVALID_ARGUMENT for a NULL plan, q, k, v or o, a
 *         missing or superfluous mask, key_lengths or lse, a buffer of
 *         another context, or o or lse in the same buffer as an input or as
 *         each other; KILN_ERROR_OUT_OF_BOUNDS for a buffer smaller than its
 *         tensor (the detail names it). Nothing is queued on failure.
 */
KILN_API kiln_status kiln_attention_plan_execute(kiln_attention_plan *plan, const kiln_buffer *q, const kiln_buffer *k,
                                                 const kiln_buffer *v, const kiln_buffer *mask,
                                                 const kiln_buffer *key_lengths, kiln_buffer *o, kiln_buffer *lse,
                                                 kiln_event **event);

/** What a plan chose. */
typedef struct kiln_attention_plan_info {
    kiln_attention_algo algo; /**< the algorithm chosen (never AUTO) */
    char name[16];            /**< "fused" or "naive" */
    char kernel[64];          /**< main kernel, e.g. "attention_f32_fused_32x8" */
    char params[256];         /**< its parameters */
    char param_set[48];       /**< the profile parameter set they came from: "<group>:<set>", e.g.
                                   "gemm.tiled:default" or "gemm.tiled:skinny" ("" if none) */
    char profile[64];         /**< the profile that supplied them */
    char reason[128];         /**< requested, or why AUTO chose it */
    size_t workspace_bytes;   /**< device memory the plan holds beyond the tensors */
} kiln_attention_plan_info;

/** Fill `info` with what the plan chose. INVALID_ARGUMENT for NULL pointers. */
KILN_API kiln_status kiln_attention_plan_describe(const kiln_attention_plan *plan, kiln_attention_plan_info *info);

/** Release a plan (work already queued completes). NULL is ignored. */
KILN_API void kiln_attention_plan_destroy(kiln_attention_plan *plan);

/** One-shot attention: create a plan, execute it, release it. Returns what
    the two calls return. */
KILN_API kiln_status kiln_attention(kiln_context *ctx, const kiln_attention_desc *desc, const kiln_buffer *q,
                                    const kiln_buffer *k, const kiln_buffer *v, const kiln_buffer *mask,
                                    const kiln_buffer *key_lengths, kiln_buffer *o, kiln_buffer *lse,
                                    kiln_event **event);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_ATTENTION_H */
