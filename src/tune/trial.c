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
    const kiln_gemm_desc *d;
    kiln_gemm_plan *plan;
    kiln_buffer *buf[3];
    float *host[3];
    uint64_t rng; /* draws the operands, then the elements checked */
};

static kiln_status run_once(void *cookie)
{
    struct run *r = cookie;
    return kiln_gemm_plan_execute(r->plan, 1.0f, r->buf[OP_A], 0, r->buf[OP_B], 0, 0.0f, r->buf[OP_C], 0, NULL);
}

/* Every element of C written, and the checked ones right: the verdict. */
static void check(void *cookie, struct kiln_trial *t)
{
    struct run *r = cookie;
    const kiln_gemm_desc *d = r->d;
    float *const *host = r->host;
    struct kiln_gemm_operand a = kiln_gemm_operand_of(d, OP_A), b = kiln_gemm_operand_of(d, OP_B),
                             c = kiln_gemm_operand_of(d, OP_C);
    for (size_t bi = 0; bi < d->batch; bi++)
        for (size_t i = 0; i < d->m; i++)
            for (size_t j = 0; j < d->n; j++)
                if (isnan(host[OP_C][bi * c.stride + kiln_gemm_operand_at(&c, i, j)])) {
                    kiln_trial_wrong(t, "C(%zu, %zu) of batch item %zu was not written", i, j, bi);
                    return;
                }
    const size_t total = d->batch * d->m * d->n, checks = total < KILN_TRIAL_CHECKS ? total : KILN_TRIAL_CHECKS;
    for (size_t s = 0; s < checks; s++) {
        size_t e = checks == total ? s : kiln_trial_next(&r->rng) % total;
        const size_t bi = e / (d->m * d->n), i = e / d->n % d->m, j = e % d->n;
        double sum = 0.0, abs_sum = 0.0;
        for (size_t p = 0; p < d->k; p++) {
            double prod = (double)host[OP_A][bi * a.stride + kiln_gemm_operand_at(&a, i, p)] *
                          host[OP_B][bi * b.stride + kiln_gemm_operand_at(&b, p, j)];
            sum += prod;
            abs_sum += fabs(prod);
        }
        const double got = host[OP_C][bi * c.stride + kiln_gemm_operand_at(&c, i, j)];
        /* A and B hold values of their storage type, whose products are
           exact in fp32: C's sums, then its own storage's rounding. */
        const double bound = (double)d->k * 0x1p-22 * abs_sum + FLT_MIN;
        if (!kiln_trial_close(t, got, sum, bound + kiln_ref_storage_bound(d->dtype, sum, bound),
                              "C(%zu, %zu) of batch item %zu", i, j, bi))
            return;
    }
}

kiln_status kiln_trial_gemm(kiln_context *ctx, const kiln_gemm_desc *desc, int reps, double cutoff_ms, uint64_t seed,
                            struct kiln_trial *out)
{
    if (!ctx || !desc || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_trial_gemm: NULL argument");
    memset(out, 0, sizeof *out);
    struct run r = {desc, NULL, {0}, {0}, seed};
    kiln_status st = kiln_gemm_plan_create(ctx, desc, &r.plan);
    if (st != KILN_SUCCESS) {
        kiln_trial_reject(out, KILN_TRIAL_NO_PLAN, st, "plan");
        return KILN_SUCCESS;
    }
    kiln_gemm_plan_info info;
    if (kiln_gemm_plan_describe(r.plan, &info) == KILN_SUCCESS)
        kiln_trial_describe(out, info.kernel, info.params, info.param_set);

    static const char *const names[] = {"kiln_trial_gemm: A", "kiln_trial_gemm: B", "kiln_trial_gemm: C"};
    for (int w = OP_A; w <= OP_C && st == KILN_SUCCESS; w++)
        st = kiln_trial_operand(ctx, names[w], kiln_gemm_operand_extent(desc, w), w == OP_C, desc->dtype, &r.rng,
                                &r.host[w], &r.buf[w]);
    if (st == KILN_SUCCESS)
        kiln_trial_check_and_time(ctx, run_once, &r, r.buf[OP_C], desc->dtype, r.host[OP_C],
                                  kiln_gemm_operand_extent(desc, OP_C), check, reps, cutoff_ms, out);
    for (int w = OP_A; w <= OP_C; w++) {
        kiln_buffer_destroy(r.buf[w]);
        free(r.host[w]);
    }
    kiln_gemm_plan_destroy(r.plan);
    return st;
}
