/*
 * The plain-C attention oracle and the host side of an attention test case,
 * shared by test_attention.c and test_attention_conformance.c. Header-only
 * (static functions) because tests/CMakeLists.txt builds each test_*.c with
 * test_util.c alone.
 *
 * ar_reference_row() is the operator for one (batch item, head, query
 * position) in double precision with obvious loops, following the contract
 * of kiln_attention.h: scores scale * q.k + mask over the keys the row sees
 * (key lengths clamped to [0, seq_kv], causal masking aligned to the end of
 * the key sequence), softmax, weighted sum of V, natural log-sum-exp; a row
 * with no visible key or only -inf scores gives 0 and -inf. A case (struct
 * ar_case) owns exact-size device buffers, fills them with fresh uniform
 * values (never zeros), poisons O and lse with NaN, and checks every element
 * against its bound (NaN never passes, so an element left unwritten fails)
 * and that the inputs came back unchanged.
 */
#ifndef KILN_TEST_ATTENTION_REF_H
#define KILN_TEST_ATTENTION_REF_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Element index of (b, h, position, 0) of a tensor of `seq` positions and
   `heads` heads in the descriptor's layout. */
static inline size_t ar_at(const kiln_attention_desc *d, size_t seq, size_t heads, size_t b, size_t h, size_t pos)
{
    return (d->layout == KILN_BSHD ? (b * seq + pos) * heads + h : (b * heads + h) * seq + pos) * d->head_dim;
}

/* Elements of the mask for the descriptor's mask kind (0 without a mask). */
static inline size_t ar_mask_elems(const kiln_attention_desc *d)
{
    size_t per = d->seq_q * d->seq_kv;
    switch (d->mask) {
    case KILN_ATTENTION_MASK_QK:
        return per;
    case KILN_ATTENTION_MASK_BQK:
        return d->batch * per;
    case KILN_ATTENTION_MASK_BHQK:
        return d->batch * d->heads * per;
    default:
        return 0;
    }
}

static inline size_t ar_mask_at(const kiln_attention_desc *d, size_t b, size_t h, size_t i, size_t j)
{
    size_t row = d->mask == KILN_ATTENTION_MASK_QK    ? i
                 : d->mask == KILN_ATTENTION_MASK_BQK ? b * d->seq_q + i
                                                      : (b * d->heads + h) * d->seq_q + i;
    return row * d->seq_kv + j;
}

enum { AR_Q, AR_K, AR_V, AR_MASK, AR_KEYLEN, AR_O, AR_LSE, AR_OPERANDS };

/* Host values and device buffers of one case. val[] holds the values as the
   reference sees them (fp16-rounded for fp16 storage); raw[] the bytes
   uploaded. */
struct ar_case {
    kiln_attention_desc desc;
    size_t count[AR_OPERANDS], elem[AR_OPERANDS];
    float *val[AR_OPERANDS];
    int32_t *key_lengths;
    unsigned char *raw[AR_OPERANDS];
    kiln_buffer *buf[AR_OPERANDS]; /* NULL for operands the descriptor does not use */
};

static inline void ar_case_init(struct ar_case *t, kiln_context *ctx, const kiln_attention_desc *d)
{
    memset(t, 0, sizeof *t);
    t->desc = *d;
    const size_t es = kt_elem_size(d->dtype);
    const size_t q = d->batch * d->seq_q * d->heads * d->head_dim;
    const size_t kv = d->batch * d->seq_kv * d->kv_heads * d->head_dim;
    const size_t counts[AR_OPERANDS] = {
        q, kv, kv, ar_mask_elems(d), d->key_lengths ? d->batch : 0, q, d->lse ? d->batch * d->heads * d->seq_q : 0};
    const size_t elems[AR_OPERANDS] = {es, es, es, 4, 4, es, 4};
    for (int w = 0; w < AR_OPERANDS; w++) {
        t->count[w] = counts[w], t->elem[w] = elems[w];
        if (!counts[w])
            continue;
        t->val[w] = malloc(counts[w] * sizeof(float));
        t->raw[w] = malloc(counts[w] * elems[w]);
        assert_non_null(t->val[w]);
        assert_non_null(t->raw[w]);
        kt_assert_status(kiln_buffer_create(ctx, counts[w] * elems[w], &t->buf[w]), KILN_SUCCESS);
    }
    t->key_lengths = (int32_t *)(void *)t->raw[AR_KEYLEN];
}

static inline void ar_case_free(struct ar_case *t)
{
    for (int w = 0; w < AR_OPERANDS; w++) {
        kiln_buffer_destroy(t->buf[w]);
        free(t->val[w]);
        free(t->raw[w]);
    }
}

static inline void ar_upload(struct ar_case *t, int w)
{
    kt_assert_status(kiln_buffer_write(t->buf[w], 0, t->count[w] * t->elem[w], t->raw[w]), KILN_SUCCESS);
}

/* Fresh values: Q, K and V uniform in [-1, 1), Q times `logits` (large
   values make scores that overflow a naive exp in fp32); a mask uniform in
   [-4, 4) with about one entry in eight -inf; key lengths drawn from
   [0, seq_kv], the first one seq_kv, and with `wild_lengths` some outside
   that range (-3, seq_kv + 5: clamped). O and lse are poisoned with NaN. */
static inline void ar_case_fill(struct ar_case *t, float logits, int wild_lengths, uint64_t *seed)
{
    const kiln_attention_desc *d = &t->desc;
    for (int w = AR_Q; w <= AR_MASK; w++) {
        if (!t->count[w])
            continue;
        float *v = t->val[w];
        if (w == AR_MASK) {
            kt_fill_uniform(v, t->count[w], -4.0f, 4.0f, seed);
            float pick[1];
            for (size_t i = 0; i < t->count[w]; i++) {
                kt_fill_uniform(pick, 1, 0.0f, 1.0f, seed);
                if (pick[0] < 0.125f)
                    v[i] = -INFINITY;
            }
            memcpy(t->raw[w], v, t->count[w] * sizeof(float));
        } else {
            kt_fill_uniform(v, t->count[w], -1.0f, 1.0f, seed);
            for (size_t i = 0; i < t->count[w]; i++) {
                float x = w == AR_Q ? v[i] * logits : v[i];
                if (d->dtype == KILN_F16) {
                    uint16_t h = kt_to_half(x);
                    v[i] = kt_from_half(h);
                    memcpy(t->raw[w] + 2 * i, &h, 2);
                } else {
                    v[i] = x;
                    memcpy(t->raw[w] + 4 * i, &x, 4);
                }
            }
        }
        ar_upload(t, w);
    }
    if (t->count[AR_KEYLEN]) {
        for (size_t b = 0; b < d->batch; b++) {
            float r[1];
            kt_fill_uniform(r, 1, 0.0f, 1.0f, seed);
            t->key_lengths[b] = (int32_t)(r[0] * (float)(d->seq_kv + 1));
        }
        t->key_lengths[0] = (int32_t)d->seq_kv;
        if (wild_lengths && d->batch > 1)
            t->key_lengths[1] = (int32_t)d->seq_kv + 5;
        if (wild_lengths && d->batch > 2)
            t->key_lengths[2] = -3;
        ar_upload(t, AR_KEYLEN);
    }
    for (int w = AR_O; w <= AR_LSE; w++)
        if (t->count[w]) {
            memset(t->raw[w], 0xff, t->count[w] * t->elem[w]); /* NaN in fp32 and fp16 */
            ar_upload(t, w);
        }
}

static inline kiln_status ar_case_execute(struct ar_case *t, kiln_attention_plan *plan, kiln_event **event)
{
    return kiln_attention_plan_execute(plan, t->buf[AR_Q], t->buf[AR_K], t->buf[AR_V], t->buf[AR_MASK],
                                       t->buf[AR_KEYLEN], t->buf[AR_O], t->buf[AR_LSE], event);
}

/* The keys row (b, i) sees: [0, limit). */
static inline size_t ar_key_limit(const kiln_attention_desc *d, const int32_t *key_lengths, size_t b, size_t i)
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

/*
 * One row in double precision: out[head_dim], *lse, and the error bounds of
 * each output (bound[head_dim]) and of the lse.
 *
 * Let A be the largest scale * sum_d |q_d k_jd| + |mask_j| over the visible
 * keys with a finite score. Each score is a dot product of head_dim terms,
 * scaled (and, in the fused kernel, moved to base 2 by one more product):
 * its absolute error is at most (head_dim + 4) * 4u * A with u = 2^-24 (the
 * 4u per term of gemm_ref.h: FMA versus separate rounding, blocked sums),
 * and exp/exp2 add a few ulp of relative error to each weight, covered by
 * 2^-20. A relative error E in every weight p_j moves an output, a weighted
 * mean of v_jd, by at most 2 E max_j |v_jd|; summing n visible keys (with
 * one rescale per block) adds (n + 4) * 4u * max_j |v_jd|. The lse is
 * max + ln(sum p_j): the score error, plus (n + 4) * 4u for the sum and the
 * rounding of the result. fp16 storage adds the rounding of each output to
 * fp16 (2^-11 relative, 2^-25 absolute); inputs are rounded before the
 * reference sees them.
 */
static inline void ar_reference_row(const struct ar_case *t, size_t b, size_t h, size_t i, double *out, double *bound,
                                    double *lse, double *lse_bound)
{
    const kiln_attention_desc *d = &t->desc;
    const size_t D = d->head_dim, hk = h / (d->heads / d->kv_heads);
    const size_t lim = ar_key_limit(d, t->key_lengths, b, i);
    const float *q = t->val[AR_Q] + ar_at(d, d->seq_q, d->heads, b, h, i);
    double *s = malloc((lim ? lim : 1) * sizeof *s);
    assert_non_null(s);
    double top = -INFINITY, a_max = 0.0;
    for (size_t j = 0; j < lim; j++) {
        const float *k = t->val[AR_K] + ar_at(d, d->seq_kv, d->kv_heads, b, hk, j);
        double dot = 0.0, mag = 0.0;
        for (size_t x = 0; x < D; x++) {
            dot += (double)q[x] * k[x];
            mag += fabs((double)q[x] * k[x]);
        }
        s[j] = d->scale * dot, mag *= fabs(d->scale);
        if (d->mask) {
            double m = t->val[AR_MASK][ar_mask_at(d, b, h, i, j)];
            s[j] += m;
            mag += isfinite(m) ? fabs(m) : 0.0;
        }
        if (isfinite(s[j]) && mag > a_max)
            a_max = mag;
        top = s[j] > top ? s[j] : top;
    }
    for (size_t x = 0; x < D; x++)
        out[x] = 0.0, bound[x] = 0.0;
    double sum = 0.0;
    size_t n = 0;
    if (top != -INFINITY)
        for (size_t j = 0; j < lim; j++) {
            const float *v = t->val[AR_V] + ar_at(d, d->seq_kv, d->kv_heads, b, hk, j);
            double p = exp(s[j] - top);
            sum += p;
            n += isfinite(s[j]) != 0;
            for (size_t x = 0; x < D; x++) {
                out[x] += p * v[x];
                if (isfinite(s[j]) && fabs(v[x]) > bound[x])
                    bound[x] = fabs(v[x]); /* max |v_jd| for now */
            }
        }
    free(s);
    const double score_err = (double)(D + 4) * 0x1p-22 * a_max + 0x1p-20;
    const double sum_err = (double)(n + 4) * 0x1p-22;
    for (size_t x = 0; x < D; x++) {
        out[x] = sum > 0.0 ? out[x] / sum : 0.0;
        bound[x] = (2.0 * score_err + sum_err) * bound[x] + FLT_MIN;
        if (d->dtype == KILN_F16)
            bound[x] += (fabs(out[x]) + bound[x]) * 0x1p-11 + 0x1p-25;
    }
    *lse = sum > 0.0 ? top + log(sum) : -INFINITY;
    *lse_bound = sum > 0.0 ? score_err + sum_err + 0x1p-22 * fabs(*lse) : 0.0;
}

/* Read everything back after the attention ran on the filled case: every
   output and lse within its bound of the reference (an lse of -inf must be
   -inf), the inputs bit for bit as uploaded. `label` names the case. */
static inline void ar_case_check(const struct ar_case *t, const char *label)
{
    const kiln_attention_desc *d = &t->desc;
    unsigned char *got[AR_OPERANDS] = {0};
    for (int w = 0; w < AR_OPERANDS; w++) {
        if (!t->count[w])
            continue;
        got[w] = malloc(t->count[w] * t->elem[w]);
        assert_non_null(got[w]);
        kt_assert_status(kiln_buffer_read(t->buf[w], 0, t->count[w] * t->elem[w], got[w]), KILN_SUCCESS);
        if (w < AR_O && memcmp(got[w], t->raw[w], t->count[w] * t->elem[w]) != 0)
            fail_msg("%s: input %d was modified", label, w);
    }
    double *ref = malloc(d->head_dim * sizeof *ref), *bound = malloc(d->head_dim * sizeof *bound);
    assert_non_null(ref);
    assert_non_null(bound);
    size_t bad = 0, rows = 0;
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++)
            for (size_t i = 0; i < d->seq_q; i++, rows++) {
                double lse, lse_bound;
                ar_reference_row(t, b, h, i, ref, bound, &lse, &lse_bound);
                const size_t at = ar_at(d, d->seq_q, d->heads, b, h, i);
                for (size_t x = 0; x < d->head_dim; x++) {
                    double v = kt_stored(got[AR_O], t->elem[AR_O], at + x), err = fabs(v - ref[x]);
                    if (!(err <= bound[x]) && bad++ < 5)
                        print_error("%s: O(b%zu h%zu i%zu d%zu) = %.9g, reference %.9g, error %.3g > bound %.3g\n",
                                    label, b, h, i, x, v, ref[x], err, bound[x]);
                }
                if (!d->lse)
                    continue;
                double v = kt_stored(got[AR_LSE], 4, rows);
                int ok = isinf(lse) ? v == lse : fabs(v - lse) <= lse_bound;
                if (!ok && bad++ < 5)
                    print_error("%s: lse(b%zu h%zu i%zu) = %.9g, reference %.9g, bound %.3g\n", label, b, h, i, v, lse,
                                lse_bound);
            }
    free(ref);
    free(bound);
    for (int w = 0; w < AR_OPERANDS; w++)
        free(got[w]);
    if (bad)
        fail_msg("%s: %zu outputs wrong", label, bad);
}

#endif /* KILN_TEST_ATTENTION_REF_H */
