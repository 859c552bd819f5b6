/*
 * libFuzzer harness for attention: kiln_attention_plan_create,
 * kiln_attention_plan_execute and kiln_attention with descriptors (head
 * groupings, masks, causal masking, key lengths in and out of range, lse,
 * algorithms) and buffers drawn from the input (fuzz_util.h says what is
 * checked).
 */
#include "attention_ref.h"
#include "fuzz_util.h"

/* Elements of each operand (attention_ref.h's order), saturating. */
static void counts_of(const kiln_attention_desc *d, size_t count[AR_OPERANDS])
{
    const size_t per_head = fz_mul(d->seq_q, d->seq_kv);
    count[AR_Q] = count[AR_O] = fz_mul(fz_mul(d->batch, d->seq_q), fz_mul(d->heads, d->head_dim));
    count[AR_K] = count[AR_V] = fz_mul(fz_mul(d->batch, d->seq_kv), fz_mul(d->kv_heads, d->head_dim));
    count[AR_MASK] = d->mask == KILN_ATTENTION_MASK_QK    ? per_head
                     : d->mask == KILN_ATTENTION_MASK_BQK ? fz_mul(d->batch, per_head)
                                                          : fz_mul(fz_mul(d->batch, d->heads), per_head);
    count[AR_KEYLEN] = d->batch;
    count[AR_LSE] = fz_mul(fz_mul(d->batch, d->heads), d->seq_q);
}

/* Whether the descriptor uses operand w (q, k, v and o always). */
static int wanted(const kiln_attention_desc *d, int w)
{
    return w == AR_MASK     ? d->mask != KILN_ATTENTION_MASK_NONE
           : w == AR_KEYLEN ? d->key_lengths != 0
           : w == AR_LSE    ? d->lse != 0
                            : 1;
}

/* The type of operand w's elements. */
static kiln_dtype type_of(const kiln_attention_desc *d, int w)
{
    return w == AR_Q || w == AR_K || w == AR_V || w == AR_O ? fz_storage(d->dtype) : KILN_F32;
}

/* A size: usually 1 to `small`, `zero` when the input has run out, rarely
   anything fz_size draws. */
static size_t dim(struct fz *f, size_t small, size_t zero)
{
    unsigned b = fz_byte(f);
    return b < 224 ? 1 + (b + zero - 1) % small : fz_size(f, small);
}

/* Key/value heads: usually heads (multi-head), sometimes 1 (multi-query),
   a divisor (grouped-query) or anything. */
static size_t kv_heads_of(struct fz *f, size_t heads)
{
    unsigned b = fz_byte(f);
    if (b < 128)
        return heads;
    if (b < 176)
        return 1;
    if (b < 224 && heads >= 1 && heads <= 64) {
        size_t g = 1 + fz_byte(f) % heads;
        while (heads % g)
            g--;
        return g;
    }
    return fz_size(f, 8);
}

/* A head dimension: usually small, sometimes one of the specialised sizes,
   rarely 0, just above the largest or anything. */
static size_t head_dim_of(struct fz *f)
{
    unsigned b = fz_byte(f);
    if (b < 200)
        return 1 + (b + 15) % 40;
    if (b < 212)
        return b % 2 ? 128 : 64;
    if (b < 216)
        return b % 2 ? 0 : KILN_ATTENTION_MAX_HEAD_DIM + 1 + b % 3;
    if (b < 220)
        return KILN_ATTENTION_MAX_HEAD_DIM;
    return fz_size(f, 48);
}

/* Fresh values for operand w where its buffer holds them: Q, K and V
   uniform in [-1, 1) (Q times `logits`), a mask uniform in [-4, 4) with one
   entry in eight -inf (attention_ref.h's ar_case_fill), key lengths from -3
   to seq_kv + 5, sometimes INT32_MIN or INT32_MAX (clamped). */
static void fill(struct fz_pool *pool, int slot, const kiln_attention_desc *d, int w, size_t count, float logits,
                 int wild, uint64_t *seed)
{
    const kiln_dtype es = type_of(d, w);
    const size_t have = pool->b[slot].bytes / kt_elem_size(es);
    for (size_t i = 0; i < count && i < have; i++) {
        float r[2];
        kt_fill_uniform(r, 2, 0.0f, 1.0f, seed);
        if (w == AR_KEYLEN) {
            const double x = (double)r[0] * ((double)d->seq_kv + 9.0) - 3.0;
            int32_t len = x >= (double)INT32_MAX ? INT32_MAX : (int32_t)x;
            if (wild && r[1] < 0.25f)
                len = r[1] < 0.125f ? INT32_MIN : INT32_MAX;
            fz_set_i32(pool, slot, i, len);
        } else if (w == AR_MASK) {
            fz_set_as(pool, slot, i, es, r[1] < 0.125f ? -INFINITY : -4.0f + 8.0f * r[0]);
        } else {
            fz_set_as(pool, slot, i, es, (2.0f * r[0] - 1.0f) * (w == AR_Q ? logits : 1.0f));
        }
    }
}

/* After a successful execution: every element of O and lse within
   attention_ref.h's bounds of its double-precision reference, every other
   byte of every buffer unchanged. Values are compared only for a sane scale
   and a reference of bounded cost. */
static void check_result(struct fz_pool *pool, const kiln_attention_desc *d, const int slot[AR_OPERANDS])
{
    for (int w = 0; w < AR_OPERANDS; w++)
        if (slot[w] < 0 && wanted(d, w))
            fz_fail("attention accepted a missing or foreign buffer (operand %d)", w);
    for (int out = AR_O; out <= AR_LSE; out++)
        for (int w = 0; w < out; w++)
            if (wanted(d, out) && wanted(d, w) && slot[w] == slot[out])
                fz_fail("attention accepted output %d in the buffer of operand %d", out, w);
    size_t count[AR_OPERANDS];
    counts_of(d, count);
    /* Values are compared for a sane scale, a reference of bounded cost,
       finite Q and K and no NaN in the mask (a NaN or infinite score is the
       caller's and goes where IEEE arithmetic takes it; the reference drops
       NaN scores), and finite V: the naive algorithm multiplies hidden keys'
       values by 0, as kiln_attention.h says (test_attention checks that the
       fused kernel ignores garbage at hidden keys). Operands sharing a
       buffer put such values there: a mask's -inf in K's buffer, or read as
       fp16 keys, where it is NaN. */
    int values = fabsf(d->scale) <= 4.0f && fz_mul(count[AR_O], d->seq_kv) <= ((size_t)1 << 24);
    for (int w = AR_Q; w <= AR_MASK; w++)
        for (size_t i = 0; values && wanted(d, w) && i < count[w]; i++) {
            const float v = fz_get_as(pool, slot[w], i, type_of(d, w));
            values = w == AR_MASK ? !isnan(v) : isfinite(v);
        }
    unsigned char *got_o = fz_read(pool, slot[AR_O]), *got_lse = d->lse ? fz_read(pool, slot[AR_LSE]) : NULL;
    for (size_t i = 0; i < count[AR_O]; i++)
        fz_mark_out(pool, slot[AR_O], i);
    for (size_t i = 0; d->lse && i < count[AR_LSE]; i++)
        fz_mark_out(pool, slot[AR_LSE], i);
    if (values) {
        /* The reference reads an ar_case's host values; no device buffers. */
        struct ar_case t;
        memset(&t, 0, sizeof t);
        t.desc = *d;
        for (int w = AR_Q; w <= AR_MASK; w++) {
            if (!wanted(d, w))
                continue;
            t.val[w] = malloc(count[w] * sizeof(float));
            if (!t.val[w])
                fz_fail("out of host memory");
            for (size_t i = 0; i < count[w]; i++)
                t.val[w][i] = fz_get_as(pool, slot[w], i, type_of(d, w));
        }
        if (d->key_lengths) {
            t.key_lengths = malloc(d->batch * sizeof *t.key_lengths);
            if (!t.key_lengths)
                fz_fail("out of host memory");
            for (size_t b = 0; b < d->batch; b++)
                t.key_lengths[b] = fz_get_i32(pool, slot[AR_KEYLEN], b);
        }
        double *ref = malloc(d->head_dim * sizeof *ref), *bound = malloc(d->head_dim * sizeof *bound);
        if (!ref || !bound)
            fz_fail("out of host memory");
        size_t row = 0;
        for (size_t b = 0; b < d->batch; b++)
            for (size_t h = 0; h < d->heads; h++)
                for (size_t i = 0; i < d->seq_q; i++, row++) {
                    double lse, lse_bound;
                    ar_reference_row(&t, b, h, i, ref, bound, &lse, &lse_bound);
                    const size_t at = kiln_attention_at(d, d->seq_q, d->heads, b, h, i);
                    for (size_t x = 0; x < d->head_dim; x++)
                        fz_check_close(kt_stored(got_o, d->dtype, at + x), ref[x], bound[x], "O", at + x);
                    if (d->lse)
                        fz_check_close(kt_stored(got_lse, KILN_F32, row), lse, lse_bound, "lse", row);
                }
        for (int w = AR_Q; w <= AR_MASK; w++)
            free(t.val[w]);
        free(t.key_lengths), free(ref), free(bound);
    }
    free(got_o), free(got_lse);
    fz_check_unchanged(pool, "attention (outside O and lse)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    kiln_attention_desc d;
    const kiln_attention_layout layout = (kiln_attention_layout)fz_enum(&f, 2);
    const size_t batch = dim(&f, 3, 1), heads = dim(&f, 4, 2), seq_q = dim(&f, 12, 5), seq_kv = dim(&f, 16, 7);
    kiln_attention_desc_init(&d, layout, batch, heads, seq_q, seq_kv, head_dim_of(&f));
    d.kv_heads = kv_heads_of(&f, heads);
    d.dtype = (kiln_dtype)fz_enum(&f, 3);
    if (fz_one_in(&f, 4))
        d.scale = fz_scalar(&f);
    d.causal = fz_flag(&f);
    d.mask = fz_one_in(&f, 2) ? KILN_ATTENTION_MASK_NONE : (kiln_attention_mask)fz_enum(&f, 4);
    d.key_lengths = fz_one_in(&f, 3) ? fz_flag(&f) : 0;
    d.lse = fz_flag(&f);
    d.algo = (kiln_attention_algo)fz_enum(&f, 3);
    const unsigned mode = fz_byte(&f) % 3; /* plan, plan with an event, one-shot */
    const float logits = fz_one_in(&f, 8) ? 16.0f : 1.0f;
    const int wild = fz_one_in(&f, 4);
    int spare[AR_OPERANDS];
    for (int w = 0; w < AR_OPERANDS; w++)
        spare[w] = fz_one_in(&f, 12);
    uint64_t seed = fz_seed(&f);

    size_t count[AR_OPERANDS];
    counts_of(&d, count);
    struct fz_pool pool = {0};
    int slot[AR_OPERANDS];
    kiln_buffer *buf[AR_OPERANDS] = {0};
    for (int w = 0; w < AR_OPERANDS; w++) {
        slot[w] = -1;
        if (wanted(&d, w) || spare[w])
            buf[w] = fz_operand(&f, &pool, count[w], type_of(&d, w), &slot[w]);
    }
    for (int w = AR_Q; w <= AR_KEYLEN; w++)
        if (slot[w] >= 0)
            fill(&pool, slot[w], &d, w, count[w], logits, wild, &seed);
    fz_upload(&pool);

    kiln_context *ctx = fz_context();
    kiln_event *ev = FZ_POISON_EVENT;
    kiln_status s;
    if (mode == 2) {
        fz_mark_detail();
        s = kiln_attention(ctx, &d, buf[AR_Q], buf[AR_K], buf[AR_V], buf[AR_MASK], buf[AR_KEYLEN], buf[AR_O],
                           buf[AR_LSE], &ev);
        fz_count("kiln_attention", s);
    } else {
        kiln_attention_plan *plan = (kiln_attention_plan *)(uintptr_t)0x5a5a;
        fz_mark_detail();
        s = kiln_attention_plan_create(ctx, &d, &plan);
        fz_count("kiln_attention_plan_create", s);
        if (s != KILN_SUCCESS) {
            fz_check_rejected(s, "kiln_attention_plan_create", NULL, &pool);
            if (plan != (kiln_attention_plan *)(uintptr_t)0x5a5a)
                fz_fail("kiln_attention_plan_create failed but wrote the plan handle");
            fz_pool_free(&pool);
            return 0;
        }
        fz_mark_detail();
        s = kiln_attention_plan_execute(plan, buf[AR_Q], buf[AR_K], buf[AR_V], buf[AR_MASK], buf[AR_KEYLEN], buf[AR_O],
                                        buf[AR_LSE], mode == 1 ? &ev : NULL);
        fz_count("kiln_attention_plan_execute", s);
        kiln_attention_plan_destroy(plan);
    }
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, mode == 2 ? "kiln_attention" : "kiln_attention_plan_execute", &ev, &pool);
    } else {
        if (mode != 0)
            fz_finish_event(ev);
        check_result(&pool, &d, slot);
    }
    fz_pool_free(&pool);
    return 0;
}
