/* A candidate tried on one convolution; see trial.h. Every descriptor a
   plan accepts is tried: both layouts, groups, strides, dilation, padding,
   bias, activation, the residual z and the fused pool, each checked as
   src/ref/conv_operand.h computes it. */
#include "tune/trial.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ref/conv_operand.h"
#include "tune/trial_impl.h"

struct run {
    const kiln_conv2d_desc *d;
    struct kiln_conv_dims m;
    double tol; /* of the algorithm the plan took (kiln_conv_algo_tol) */
    kiln_conv2d_plan *plan;
    kiln_buffer *buf[KILN_CONV_TENSORS]; /* NULL for a tensor the epilogue does not take */
    float *host[KILN_CONV_TENSORS];
    size_t count[KILN_CONV_TENSORS];
    uint64_t rng; /* draws the tensors, then the outputs checked */
};

static kiln_status run_once(void *cookie)
{
    struct run *r = cookie;
    return kiln_conv2d_plan_execute(r->plan, r->buf[KILN_CONV_X], r->buf[KILN_CONV_W], r->buf[KILN_CONV_BIAS],
                                    r->buf[KILN_CONV_Z], r->buf[KILN_CONV_Y], NULL);
}

/* Stored output number e, counting n, k, rows, columns from the last. */
struct output {
    size_t n, k, h, w, at; /* at: its index in y */
};

static struct output output_of(const struct run *r, size_t e)
{
    struct output o;
    o.w = e % r->m.yw, e /= r->m.yw;
    o.h = e % r->m.yh, e /= r->m.yh;
    o.k = e % r->d->k, o.n = e / r->d->k;
    o.at = kiln_conv_act_at(r->d, r->d->k, r->m.yh, r->m.yw, o.n, o.k, o.h, o.w);
    return o;
}

/* Every element of y written, and the checked ones right: the verdict. */
static void check(void *cookie, struct kiln_trial *t)
{
    struct run *r = cookie;
    const float *const *h = (const float *const *)r->host;
    const size_t total = r->count[KILN_CONV_Y], checks = total < KILN_TRIAL_CHECKS ? total : KILN_TRIAL_CHECKS;
    for (size_t e = 0; e < total; e++) {
        const struct output o = output_of(r, e);
        if (isnan(h[KILN_CONV_Y][o.at])) {
            kiln_trial_wrong(t, "y[n=%zu][k=%zu][%zu][%zu] was not written", o.n, o.k, o.h, o.w);
            return;
        }
    }
    for (size_t s = 0; s < checks; s++) {
        const struct output o = output_of(r, checks == total ? s : kiln_trial_next(&r->rng) % total);
        double bound, ref = kiln_conv_output_at(r->d, &r->m, h[KILN_CONV_X], h[KILN_CONV_W], h[KILN_CONV_BIAS],
                                                h[KILN_CONV_Z], r->tol, o.n, o.k, o.h, o.w, &bound);
        if (!kiln_trial_close(t, h[KILN_CONV_Y][o.at], ref, bound, "y[n=%zu][k=%zu][%zu][%zu]", o.n, o.k, o.h, o.w))
            return;
    }
}

kiln_status kiln_trial_conv(kiln_context *ctx, const kiln_conv2d_desc *desc, int reps, double cutoff_ms, uint64_t seed,
                            struct kiln_trial *out)
{
    if (!ctx || !desc || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_trial_conv: NULL argument");
    memset(out, 0, sizeof *out);
    struct run r = {desc, kiln_conv_dims_of(desc), 0.0, NULL, {0}, {0}, {0}, seed};
    kiln_status st = kiln_conv2d_plan_create(ctx, desc, &r.plan);
    kiln_conv2d_plan_info info;
    if (st == KILN_SUCCESS && (st = kiln_conv2d_plan_describe(r.plan, &info)) != KILN_SUCCESS)
        kiln_conv2d_plan_destroy(r.plan);
    if (st != KILN_SUCCESS) {
        kiln_trial_reject(out, KILN_TRIAL_NO_PLAN, st, "plan");
        return KILN_SUCCESS;
    }
    kiln_trial_describe(out, info.kernel, info.params, info.param_set);
    r.tol = kiln_conv_algo_tol(info.algo, r.m.k_eff);

    static const char *const names[] = {"kiln_trial_conv: x", "kiln_trial_conv: w", "kiln_trial_conv: bias",
                                        "kiln_trial_conv: z", "kiln_trial_conv: y"};
    /* The bias is fp32 whatever the storage type of the others. */
    for (int i = KILN_CONV_X; i < KILN_CONV_TENSORS && st == KILN_SUCCESS; i++) {
        r.count[i] = kiln_conv_tensor_count(desc, &r.m, i);
        if (kiln_conv_tensor_used(desc, i))
            st = kiln_trial_operand(ctx, names[i], r.count[i], i == KILN_CONV_Y,
                                    i == KILN_CONV_BIAS ? KILN_F32 : desc->dtype, &r.rng, &r.host[i], &r.buf[i]);
    }
    if (st == KILN_SUCCESS)
        kiln_trial_check_and_time(ctx, run_once, &r, r.buf[KILN_CONV_Y], desc->dtype, r.host[KILN_CONV_Y],
                                  r.count[KILN_CONV_Y], check, reps, cutoff_ms, out);
    for (int i = KILN_CONV_X; i < KILN_CONV_TENSORS; i++) {
        kiln_buffer_destroy(r.buf[i]);
        free(r.host[i]);
    }
    kiln_conv2d_plan_destroy(r.plan);
    return st;
}
