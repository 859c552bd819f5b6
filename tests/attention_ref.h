/*
 * The host side of an attention test case, shared by test_attention.c,
 * test_attention_conformance.c and test_threads.c. Header-only (static
 * functions) because tests/CMakeLists.txt builds each test_*.c with
 * test_util.c alone.
 *
 * ar_reference_row() is the operator for one (batch item, head, query
 * position) in double precision with obvious loops and its error bounds:
 * kiln_attention_reference_row() of src/ref/attention_operand.h, which the
 * tuner's check shares. A case (struct ar_case) owns exact-size device
 * buffers, fills them with fresh uniform values (never zeros), poisons O and
 * lse with NaN, and checks every element against its bound (NaN never
 * passes, so an element left unwritten fails) and that the inputs came back
 * unchanged.
 */
#ifndef KILN_TEST_ATTENTION_REF_H
#define KILN_TEST_ATTENTION_REF_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/attention_operand.h"
#include "test_util.h"

/* The operands of src/ref/attention_operand.h under the tests' short names. */
enum {
    AR_Q = KILN_ATTENTION_OP_Q,
    AR_K = KILN_ATTENTION_OP_K,
    AR_V = KILN_ATTENTION_OP_V,
    AR_MASK = KILN_ATTENTION_OP_MASK,
    AR_KEYLEN = KILN_ATTENTION_OP_KEY_LENGTHS,
    AR_O = KILN_ATTENTION_OP_O,
    AR_LSE = KILN_ATTENTION_OP_LSE,
    AR_OPERANDS = KILN_ATTENTION_OPERANDS
};

/* A row of a shape table: a problem's sizes and what differs from
   kiln_attention_desc_init's defaults. */
struct ar_row {
    const char *what;
    kiln_attention_layout layout;
    size_t batch, heads, kv_heads, seq_q, seq_kv, dim;
    int causal;
    kiln_attention_mask mask;
    int key_lengths, lse;
    kiln_dtype dtype;
    float logits; /* Q scale; 0 means 1 */
};

#define AR_SHAPE(what_, lay, b, h, hk, nq, nk, d)                                                                      \
    .what = what_, .layout = lay, .batch = b, .heads = h, .kv_heads = hk, .seq_q = nq, .seq_kv = nk, .dim = d

static inline kiln_attention_desc ar_desc_of(const struct ar_row *r, kiln_attention_algo algo)
{
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, r->layout, r->batch, r->heads, r->seq_q, r->seq_kv, r->dim);
    d.kv_heads = r->kv_heads;
    d.causal = r->causal;
    d.mask = r->mask;
    d.key_lengths = r->key_lengths;
    d.lse = r->lse;
    d.dtype = r->dtype;
    d.algo = algo;
    return d;
}

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
    const size_t elems[AR_OPERANDS] = {es, es, es, 4, 4, es, 4};
    for (int w = 0; w < AR_OPERANDS; w++) {
        t->count[w] = kiln_attention_operand_count(d, w), t->elem[w] = elems[w];
        if (!t->count[w])
            continue;
        t->val[w] = malloc(t->count[w] * sizeof(float));
        t->raw[w] = malloc(t->count[w] * elems[w]);
        assert_non_null(t->val[w]);
        assert_non_null(t->raw[w]);
        kt_assert_status(kiln_buffer_create(ctx, t->count[w] * elems[w], &t->buf[w]), KILN_SUCCESS);
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
                v[i] = kt_round_to(d->dtype, x);
                kt_store(t->raw[w], d->dtype, i, x);
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

/* One row in double precision (kiln_attention_reference_row): out[head_dim],
   *lse, and the error bounds of each output (bound[head_dim]) and of the
   lse. */
static inline void ar_reference_row(const struct ar_case *t, size_t b, size_t h, size_t i, double *out, double *bound,
                                    double *lse, double *lse_bound)
{
    const struct kiln_attention_inputs in = {t->val[AR_Q], t->val[AR_K], t->val[AR_V], t->val[AR_MASK], t->key_lengths};
    double *scores = malloc((t->desc.seq_kv ? t->desc.seq_kv : 1) * sizeof *scores);
    assert_non_null(scores);
    struct kiln_attention_row row = {out, bound, 0.0, 0.0};
    kiln_attention_reference_row(&t->desc, &in, b, h, i, scores, &row);
    free(scores);
    *lse = row.lse, *lse_bound = row.lse_bound;
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
                const size_t at = kiln_attention_at(d, d->seq_q, d->heads, b, h, i);
                for (size_t x = 0; x < d->head_dim; x++) {
                    double v = kt_stored(got[AR_O], d->dtype, at + x), err = fabs(v - ref[x]);
                    if (!(err <= bound[x]) && bad++ < 5)
                        print_error("%s: O(b%zu h%zu i%zu d%zu) = %.9g, reference %.9g, error %.3g > bound %.3g\n",
                                    label, b, h, i, x, v, ref[x], err, bound[x]);
                }
                if (!d->lse)
                    continue;
                double v = kt_stored(got[AR_LSE], KILN_F32, rows);
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
