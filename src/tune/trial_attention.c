/* A candidate tried on one attention problem; see trial.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ops/plan.h"
#include "ref/attention_operand.h"
#include "tune/trial.h"
#include "tune/trial_impl.h"

struct run {
    kiln_attention_plan *plan;
    kiln_buffer *buf[KILN_ATTENTION_OPERANDS]; /* NULL for operands the descriptor does not use */
};

static kiln_status run_once(void *cookie)
{
    struct run *r = cookie;
    return kiln_attention_plan_execute(r->plan, r->buf[KILN_ATTENTION_OP_Q], r->buf[KILN_ATTENTION_OP_K],
                                       r->buf[KILN_ATTENTION_OP_V], r->buf[KILN_ATTENTION_OP_MASK],
                                       r->buf[KILN_ATTENTION_OP_KEY_LENGTHS], r->buf[KILN_ATTENTION_OP_O],
                                       r->buf[KILN_ATTENTION_OP_LSE], NULL);
}

/* Host values of every operand (4-byte elements: fp32, key lengths int32)
   and their counts. Q, K, V and O are stored in the descriptor's type (the
   host keeps them as floats, rounded to it), the mask and lse in fp32. */
struct host {
    size_t count[KILN_ATTENTION_OPERANDS];
    float *val[KILN_ATTENTION_OPERANDS];
    int32_t *key_lengths; /* val[KILN_ATTENTION_OP_KEY_LENGTHS] as int32 */
};

/*
 * Fresh values for the inputs and NaN for the outputs. Q, K and V are
 * uniform in [-1, 1) with Q times 6 / (|scale| sqrt(head_dim)), so that the
 * scores have a standard deviation of about 2 whatever the scale: softmax
 * weights neither flat nor one-hot. The mask is uniform in [-2, 2) with
 * about one entry in eight -inf (the keys a boolean mask hides); key lengths
 * are drawn from [0, seq_kv], the first seq_kv.
 */
static void fill(const kiln_attention_desc *d, struct host *h, uint64_t *rng)
{
    const double spread = fabs((double)d->scale) * sqrt((double)d->head_dim);
    const float logits = spread > 0.0 ? (float)(6.0 / spread) : 1.0f;
    for (int w = 0; w < KILN_ATTENTION_OPERANDS; w++)
        for (size_t i = 0; i < h->count[w]; i++)
            switch (w) {
            case KILN_ATTENTION_OP_Q:
                h->val[w][i] = kiln_trial_uniform(rng) * logits;
                break;
            case KILN_ATTENTION_OP_MASK:
                h->val[w][i] = kiln_trial_next(rng) % 8 == 0 ? -INFINITY : 2.0f * kiln_trial_uniform(rng);
                break;
            case KILN_ATTENTION_OP_KEY_LENGTHS:
                h->key_lengths[i] = (int32_t)(i == 0 ? d->seq_kv : kiln_trial_next(rng) % (d->seq_kv + 1));
                break;
            case KILN_ATTENTION_OP_O:
            case KILN_ATTENTION_OP_LSE:
                h->val[w][i] = NAN;
                break;
            default: /* K and V */
                h->val[w][i] = kiln_trial_uniform(rng);
            }
    for (int w = KILN_ATTENTION_OP_Q; w <= KILN_ATTENTION_OP_V; w++)
        for (size_t i = 0; i < h->count[w]; i++)
            h->val[w][i] = kiln_trial_stored(d->dtype, h->val[w][i]);
}

/* The storage type of operand w. */
static kiln_dtype operand_type(const kiln_attention_desc *d, int w)
{
    return w <= KILN_ATTENTION_OP_V || w == KILN_ATTENTION_OP_O ? d->dtype : KILN_F32;
}

/* Record a wrong result. */
static void wrong(struct kiln_trial *t, const char *what, size_t b, size_t h, size_t i, double got, double ref,
                  double bound)
{
    t->verdict = KILN_TRIAL_WRONG;
    snprintf(t->reason, sizeof t->reason,
             "%s of batch item %zu, head %zu, query %zu is %.9g, the reference %.9g (bound %.3g)", what, b, h, i, got,
             ref, bound);
}

/* Row (b, h, i) against the reference: its outputs (and lse) within their
   bounds, the largest ratio into t->worst. Returns 0 when wrong. */
static int check_row(const kiln_attention_desc *d, const struct host *hs, size_t b, size_t h, size_t i, double *scratch,
                     struct kiln_trial *t)
{
    const struct kiln_attention_inputs in = {hs->val[KILN_ATTENTION_OP_Q], hs->val[KILN_ATTENTION_OP_K],
                                             hs->val[KILN_ATTENTION_OP_V], hs->val[KILN_ATTENTION_OP_MASK],
                                             hs->key_lengths};
    struct kiln_attention_row row = {scratch + d->seq_kv, scratch + d->seq_kv + d->head_dim, 0.0, 0.0};
    kiln_attention_reference_row(d, &in, b, h, i, scratch, &row);
    const float *o = hs->val[KILN_ATTENTION_OP_O] + kiln_attention_at(d, d->seq_q, d->heads, b, h, i);
    for (size_t x = 0; x < d->head_dim; x++) {
        const double ratio = fabs(o[x] - row.out[x]) / row.bound[x];
        if (!(ratio <= 1.0)) {
            char what[32];
            snprintf(what, sizeof what, "O[%zu]", x);
            wrong(t, what, b, h, i, o[x], row.out[x], row.bound[x]);
            return 0;
        }
        t->worst = fmax(t->worst, ratio);
    }
    if (!d->lse)
        return 1;
    const double got = hs->val[KILN_ATTENTION_OP_LSE][(b * d->heads + h) * d->seq_q + i];
    if (isinf(row.lse) ? got != row.lse : !(fabs(got - row.lse) <= row.lse_bound)) {
        wrong(t, "lse", b, h, i, got, row.lse, row.lse_bound);
        return 0;
    }
    if (!isinf(row.lse))
        t->worst = fmax(t->worst, fabs(got - row.lse) / row.lse_bound);
    return 1;
}

/* Every output written, and the checked rows right: the verdict. A row is
   head_dim outputs; KILN_TRIAL_CHECKS outputs' worth of rows are drawn (all
   of them when there are no more). */
static kiln_status check(const kiln_attention_desc *d, const struct host *hs, uint64_t *rng, struct kiln_trial *t)
{
    const size_t rows = d->batch * d->heads * d->seq_q;
    for (size_t r = 0; r < rows; r++) {
        const size_t b = r / (d->heads * d->seq_q), h = r / d->seq_q % d->heads, i = r % d->seq_q;
        const float *o = hs->val[KILN_ATTENTION_OP_O] + kiln_attention_at(d, d->seq_q, d->heads, b, h, i);
        for (size_t x = 0; x < d->head_dim; x++)
            if (isnan(o[x])) {
                t->verdict = KILN_TRIAL_WRONG;
                snprintf(t->reason, sizeof t->reason, "O[%zu] of batch item %zu, head %zu, query %zu was not written",
                         x, b, h, i);
                return KILN_SUCCESS;
            }
        if (d->lse && isnan(hs->val[KILN_ATTENTION_OP_LSE][r])) {
            t->verdict = KILN_TRIAL_WRONG;
            snprintf(t->reason, sizeof t->reason, "lse of batch item %zu, head %zu, query %zu was not written", b, h,
                     i);
            return KILN_SUCCESS;
        }
    }
    const size_t per = KILN_TRIAL_CHECKS / d->head_dim ? KILN_TRIAL_CHECKS / d->head_dim : 1;
    const size_t checks = rows < per ? rows : per;
    /* Scores of every key, then a row's outputs and their bounds. */
    double *scratch = malloc((d->seq_kv + 2 * d->head_dim) * sizeof *scratch);
    if (!scratch)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_trial_attention: reference row of %zu keys", d->seq_kv);
    for (size_t s = 0; s < checks; s++) {
        const size_t r = checks == rows ? s : kiln_trial_next(rng) % rows;
        if (!check_row(d, hs, r / (d->heads * d->seq_q), r / d->seq_q % d->heads, r % d->seq_q, scratch, t))
            break;
    }
    free(scratch);
    return KILN_SUCCESS;
}

kiln_status kiln_trial_attention(kiln_context *ctx, const kiln_attention_desc *desc, int reps, double cutoff_ms,
                                 uint64_t seed, struct kiln_trial *out)
{
    if (!ctx || !desc || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_trial_attention: NULL argument");
    memset(out, 0, sizeof *out);
    struct run r = {0};
    kiln_status st = kiln_attention_plan_create(ctx, desc, &r.plan);
    if (st != KILN_SUCCESS) {
        kiln_trial_reject(out, KILN_TRIAL_NO_PLAN, st, "plan");
        return KILN_SUCCESS;
    }
    kiln_attention_plan_info info;
    if (kiln_attention_plan_describe(r.plan, &info) == KILN_SUCCESS)
        kiln_trial_describe(out, info.kernel, info.params, info.param_set);

    struct host hs = {0};
    for (int w = 0; w < KILN_ATTENTION_OPERANDS && st == KILN_SUCCESS; w++) {
        const size_t n = hs.count[w] = kiln_attention_operand_count(desc, w);
        if (!n)
            continue;
        hs.val[w] = n <= SIZE_MAX / sizeof(float) ? malloc(n * sizeof(float)) : NULL;
        if (!hs.val[w])
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_trial_attention: %zu elements of operand %d", n, w);
        else
            st = kiln_buffer_create(ctx, n * kiln_dtype_size(operand_type(desc, w)), &r.buf[w]);
    }
    uint64_t rng = seed;
    if (st == KILN_SUCCESS) {
        hs.key_lengths = (int32_t *)(void *)hs.val[KILN_ATTENTION_OP_KEY_LENGTHS];
        fill(desc, &hs, &rng);
        for (int w = 0; w < KILN_ATTENTION_OPERANDS && st == KILN_SUCCESS; w++)
            if (hs.count[w])
                st = kiln_trial_transfer(r.buf[w], operand_type(desc, w), hs.val[w], hs.count[w], 1);
    }
    if (st == KILN_SUCCESS) {
        kiln_status ran = run_once(&r);
        for (int w = KILN_ATTENTION_OP_O; w <= KILN_ATTENTION_OP_LSE && ran == KILN_SUCCESS; w++)
            if (hs.count[w])
                ran = kiln_trial_transfer(r.buf[w], operand_type(desc, w), hs.val[w], hs.count[w], 0);
        if (ran != KILN_SUCCESS)
            kiln_trial_reject(out, KILN_TRIAL_RUN_FAILED, ran, "run");
        else
            st = check(desc, &hs, &rng, out);
    }
    if (st == KILN_SUCCESS)
        kiln_trial_time(ctx, run_once, &r, reps, cutoff_ms, out);
    for (int w = 0; w < KILN_ATTENTION_OPERANDS; w++) {
        kiln_buffer_destroy(r.buf[w]);
        free(hs.val[w]);
    }
    kiln_attention_plan_destroy(r.plan);
    return st;
}
