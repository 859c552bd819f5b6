/*
 * Where the elements of an attention problem's tensors are stored, which
 * keys a row sees, and one row of the operator in double precision with its
 * error bounds, for code that checks attention on the host with plain
 * loops: the tuner's check of each candidate (src/tune/trial_attention.c)
 * and the tests' reference (tests/attention_ref.h). Header-only.
 *
 * kiln_attention_reference_row() follows the contract of kiln_attention.h:
 * scores scale * q.k + mask over the keys the row sees (key lengths clamped
 * to [0, seq_kv], causal masking aligned to the end of the key sequence),
 * softmax, weighted sum of V, natural log-sum-exp; a row with no visible key
 * or only -inf scores gives 0 and -inf.
 */
#ifndef KILN_REF_ATTENTION_OPERAND_H
#define KILN_REF_ATTENTION_OPERAND_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"
#include "ref/storage.h"

enum kiln_attention_operand_id {
    KILN_ATTENTION_OP_Q,
    KILN_ATTENTION_OP_K,
    KILN_ATTENTION_OP_V,
    KILN_ATTENTION_OP_MASK,
    KILN_ATTENTION_OP_KEY_LENGTHS,
    KILN_ATTENTION_OP_O,
    KILN_ATTENTION_OP_LSE,
    KILN_ATTENTION_OPERANDS
};

/* Element index of (b, h, position, 0) of a tensor of `seq` positions and
   `heads` heads in the descriptor's layout. */
static inline size_t kiln_attention_at(const kiln_attention_desc *d, size_t seq, size_t heads, size_t b, size_t h,
                                       size_t pos)
{
    return (d->layout == KILN_BSHD ? (b * seq + pos) * heads + h : (b * heads + h) * seq + pos) * d->head_dim;
}

/* Index of the mask entry of (b, h, query i, key j) for the descriptor's
   mask kind. */
static inline size_t kiln_attention_mask_at(const kiln_attention_desc *d, size_t b, size_t h, size_t i, size_t j)
{
    size_t row = d->mask == KILN_ATTENTION_MASK_QK    ? i
                 : d->mask == KILN_ATTENTION_MASK_BQK ? b * d->seq_q + i
                                                      : (b * d->heads + h) * d->seq_q + i;
    return row * d->seq_kv + j;
}

/* Elements of operand `which` (0 for one the descriptor does not use):
   SIZE_MAX if that does not fit in a size_t. */
static inline size_t kiln_attention_operand_count(const kiln_attention_desc *d, int which)
{
    const int kv_per_item = which == KILN_ATTENTION_OP_K || which == KILN_ATTENTION_OP_V;
    size_t factors[4] = {d->batch, kv_per_item ? d->seq_kv : d->seq_q, kv_per_item ? d->kv_heads : d->heads,
                         d->head_dim};
    switch (which) {
    case KILN_ATTENTION_OP_MASK:
        factors[0] = d->mask == KILN_ATTENTION_MASK_NONE ? 0 : d->mask == KILN_ATTENTION_MASK_QK ? 1 : d->batch;
        factors[2] = d->mask == KILN_ATTENTION_MASK_BHQK ? d->heads : 1;
        factors[3] = d->seq_kv;
        break;
    case KILN_ATTENTION_OP_KEY_LENGTHS:
        factors[0] = d->key_lengths ? d->batch : 0;
        factors[1] = factors[2] = factors[3] = 1;
        break;
    case KILN_ATTENTION_OP_LSE:
        factors[0] = d->lse ? d->batch : 0;
        factors[3] = 1;
        break;
    default:
        break;
    }
    size_t n = 1;
    for (int f = 0; f < 4; f++)
        if (__builtin_mul_overflow(n, factors[f], &n))
            return SIZE_MAX;
    return n;
}

/* The keys row (b, i) sees: [0, limit). key_lengths is read only when the
   descriptor takes key lengths. */
static inline size_t kiln_attention_key_limit(const kiln_attention_desc *d, const int32_t *key_lengths, size_t b,
                                              size_t i)
{
    long lim = (long)d->seq_kv;
    if (d->key_lengths)
        lim = key_lengths[b] < 0 ? 0 : key_lengths[b] > lim ? lim : key_lengths[b];
    if (d->causal) {
        long c = (long)i + (long)d->seq_kv - (long)d->seq_q + 1;
        lim = c < 0 ? 0 : c < lim ? c : lim;
    }
    return (size_t)lim;
}

/* The inputs as the reference sees them (fp16-rounded for fp16 storage):
   mask and key_lengths only when the descriptor takes them. */
struct kiln_attention_inputs {
    const float *q, *k, *v, *mask;
    const int32_t *key_lengths;
};

/* One row's reference and the error bound of each of its values. */
struct kiln_attention_row {
    double *out, *bound; /* head_dim each, the caller's */
    double lse, lse_bound;
};

/*
 * Row (b, h, i) in double precision into *row; `scores` is the caller's
 * scratch of seq_kv values (at least one).
 *
 * Let A be the largest scale * sum_d |q_d k_jd| + |mask_j| over the visible
 * keys with a finite score. Each score is a dot product of head_dim terms,
 * scaled (and, in the fused kernel, moved to base 2 by one more product):
 * its absolute error is at most (head_dim + 4) * 4u * A with u = 2^-24 (the
 * 4u per term of the GEMM bound: FMA versus separate rounding, blocked
 * sums), and exp/exp2 add a few ulp of relative error to each weight,
 * covered by 2^-20. A relative error E in every weight p_j moves an output,
 * a weighted mean of v_jd, by at most 2 E max_j |v_jd|; summing n visible
 * keys (with one rescale per block) adds (n + 4) * 4u * max_j |v_jd|. The
 * lse is max + ln(sum p_j): the score error, plus (n + 4) * 4u for the sum
 * and the rounding of the result. 16-bit storage lets a kernel round the
 * weights to the storage type before P V, as the tensor-core kernel and
 * FlashAttention do: a relative error of u in each (2^-11 in fp16, with
 * 2^-25 absolute below its normal range; 2^-8 in bf16), which moves an
 * output by at most u max_j |v_jd|, doubled for the margin. 16-bit storage
 * also adds the rounding of each output (2^-11 relative, 2^-25 absolute in
 * fp16); inputs are rounded before the reference sees them.
 */
static inline void kiln_attention_reference_row(const kiln_attention_desc *d, const struct kiln_attention_inputs *in,
                                                size_t b, size_t h, size_t i, double *scores,
                                                struct kiln_attention_row *row)
{
    const size_t D = d->head_dim, hk = h / (d->heads / d->kv_heads);
    const size_t lim = kiln_attention_key_limit(d, in->key_lengths, b, i);
    const float *q = in->q + kiln_attention_at(d, d->seq_q, d->heads, b, h, i);
    double *s = scores, top = -INFINITY, a_max = 0.0;
    for (size_t j = 0; j < lim; j++) {
        const float *k = in->k + kiln_attention_at(d, d->seq_kv, d->kv_heads, b, hk, j);
        double dot = 0.0, mag = 0.0;
        for (size_t x = 0; x < D; x++) {
            dot += (double)q[x] * k[x];
            mag += fabs((double)q[x] * k[x]);
        }
        s[j] = d->scale * dot, mag *= fabs(d->scale);
        if (d->mask) {
            double m = in->mask[kiln_attention_mask_at(d, b, h, i, j)];
            s[j] += m;
            mag += isfinite(m) ? fabs(m) : 0.0;
        }
        if (isfinite(s[j]) && mag > a_max)
            a_max = mag;
        top = s[j] > top ? s[j] : top;
    }
    double *out = row->out, *bound = row->bound;
    for (size_t x = 0; x < D; x++)
        out[x] = 0.0, bound[x] = 0.0;
    double sum = 0.0;
    size_t n = 0;
    if (top != -INFINITY)
        for (size_t j = 0; j < lim; j++) {
            const float *v = in->v + kiln_attention_at(d, d->seq_kv, d->kv_heads, b, hk, j);
            double p = exp(s[j] - top);
            sum += p;
            n += isfinite(s[j]) != 0;
            for (size_t x = 0; x < D; x++) {
                out[x] += p * v[x];
                if (isfinite(s[j]) && fabs(v[x]) > bound[x])
                    bound[x] = fabs(v[x]); /* max |v_jd| for now */
            }
        }
    const double score_err = (double)(D + 4) * 0x1p-22 * a_max + 0x1p-20;
    const double sum_err = (double)(n + 4) * 0x1p-22;
    const double weight_err = d->dtype == KILN_F16    ? 0x1p-11 + (double)n * 0x1p-25
                              : d->dtype == KILN_BF16 ? 0x1p-8
                                                      : 0.0;
    for (size_t x = 0; x < D; x++) {
        out[x] = sum > 0.0 ? out[x] / sum : 0.0;
        bound[x] = (2.0 * score_err + sum_err + 2.0 * weight_err) * bound[x] + FLT_MIN;
        bound[x] += kiln_ref_storage_bound(d->dtype, out[x], bound[x]);
    }
    row->lse = sum > 0.0 ? top + log(sum) : -INFINITY;
    row->lse_bound = sum > 0.0 ? score_err + sum_err + 0x1p-22 * fabs(row->lse) : 0.0;
}

#endif /* KILN_REF_ATTENTION_OPERAND_H */
