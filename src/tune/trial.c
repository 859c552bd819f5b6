/* A candidate tried on one GEMM; see trial.h. */
#include "tune/trial.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ref/gemm_operand.h"
#include "tune/trial_impl.h"

enum { OP_A = KILN_GEMM_A, OP_B = KILN_GEMM_B, OP_C = KILN_GEMM_C };

struct run {
    kiln_gemm_plan *plan;
    kiln_buffer *buf[3];
};

static kiln_status run_once(void *cookie)
{
    struct run *r = cookie;
    return kiln_gemm_plan_execute(r->plan, 1.0f, r->buf[OP_A], 0, r->buf[OP_B], 0, 0.0f, r->buf[OP_C], 0, NULL);
}

/* Every element of C written, and the checked ones right: the verdict. */
static void check(const kiln_gemm_desc *d, float *const host[3], uint64_t *rng, struct kiln_trial *t)
{
    struct kiln_gemm_operand a = kiln_gemm_operand_of(d, OP_A), b = kiln_gemm_operand_of(d, OP_B),
                             c = kiln_gemm_operand_of(d, OP_C);
    for (size_t bi = 0; bi < d->batch; bi++)
        for (size_t i = 0; i < d->m; i++)
            for (size_t j = 0; j < d->n; j++)
                if (isnan(host[OP_C][bi * c.stride + kiln_gemm_operand_at(&c, i, j)])) {
                    t->verdict = KILN_TRIAL_WRONG;
                    snprintf(t->reason, sizeof t->reason, "C(%zu, %zu) of batch item %zu was not written", i, j, bi);
                    return;
                }
    const size_t total = d->batch * d->m * d->n, checks = total < KILN_TRIAL_CHECKS ? total : KILN_TRIAL_CHECKS;
    for (size_t s = 0; s < checks; s++) {
        size_t e = checks == total ? s : kiln_trial_next(rng) % total;
        const size_t bi = e / (d->m * d->n), i = e / d->n % d->m, j = e % d->n;
        double sum = 0.0, abs_sum = 0.0;
        for (size_t p = 0; p < d->k; p++) {
            double prod = (double)host[OP_A][bi * a.stride + kiln_gemm_operand_at(&a, i, p)] *
                          host[OP_B][bi * b.stride + kiln_gemm_operand_at(&b, p, j)];
            sum += prod;
            abs_sum += fabs(prod);
        }
        const double got = host[OP_C][bi * c.stride + kiln_gemm_operand_at(&c, i, j)];
        const double bound = (double)d->k * 0x1p-22 * abs_sum + FLT_MIN, ratio = fabs(got - sum) / bound;
        if (!(ratio <= 1.0)) {
            t->verdict = KILN_TRIAL_WRONG;
            snprintf(t->reason, sizeof t->reason,
                     "C(%zu, %zu) of batch item %zu is %.9g, the reference %.9g (bound %.3g)", i, j, bi, got, sum,
                     bound);
            return;
        }
        t->worst = fmax(t->worst, ratio);
    }
}

kiln_status kiln_trial_gemm(kiln_context *ctx, const kiln_gemm_desc *desc, int reps, double cutoff_ms, uint64_t seed,
                            struct kiln_trial *out)
{
    if (!ctx || !desc || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_trial_gemm: NULL argument");
    if (desc->dtype != KILN_F32)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_trial_gemm: fp32 storage only");
    memset(out, 0, sizeof *out);
    struct run r = {0};
    kiln_status st = kiln_gemm_plan_create(ctx, desc, &r.plan);
    if (st != KILN_SUCCESS) {
        kiln_trial_reject(out, KILN_TRIAL_NO_PLAN, st, "plan");
        return KILN_SUCCESS;
    }
    kiln_gemm_plan_info info;
    if (kiln_gemm_plan_describe(r.plan, &info) == KILN_SUCCESS)
        kiln_trial_chose(out, info.kernel, info.params, info.param_set);

    float *host[3] = {0};
    size_t count[3];
    uint64_t rng = seed;
    for (int w = OP_A; w <= OP_C && st == KILN_SUCCESS; w++) {
        count[w] = kiln_gemm_operand_extent(desc, w);
        host[w] = count[w] && count[w] <= SIZE_MAX / sizeof(float) ? malloc(count[w] * sizeof(float)) : NULL;
        if (!host[w]) {
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_trial_gemm: %zu elements of operand %d", count[w], w);
            break;
        }
        for (size_t i = 0; i < count[w]; i++)
            host[w][i] = w == OP_C ? NAN : kiln_trial_uniform(&rng);
        st = kiln_buffer_create(ctx, count[w] * sizeof(float), &r.buf[w]);
        if (st == KILN_SUCCESS)
            st = kiln_buffer_write(r.buf[w], 0, count[w] * sizeof(float), host[w]);
    }
    if (st == KILN_SUCCESS) {
        kiln_status ran = run_once(&r);
        if (ran == KILN_SUCCESS)
            ran = kiln_buffer_read(r.buf[OP_C], 0, count[OP_C] * sizeof(float), host[OP_C]);
        if (ran != KILN_SUCCESS)
            kiln_trial_reject(out, KILN_TRIAL_RUN_FAILED, ran, "run");
        else
            check(desc, host, &rng, out);
    }
    if (st == KILN_SUCCESS)
        kiln_trial_time(ctx, run_once, &r, reps, cutoff_ms, out);
    for (int w = OP_A; w <= OP_C; w++) {
        kiln_buffer_destroy(r.buf[w]);
        free(host[w]);
    }
    kiln_gemm_plan_destroy(r.plan);
    return st;
}
