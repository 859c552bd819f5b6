/*
 * The naive attention algorithm, for comparison and testing: three passes
 * over a batch * heads * seq_q * seq_kv score matrix held in the plan's
 * workspace, through kiln's own kernels:
 *   1. S = scale * Q K^T, one GEMM per (batch item, head), whatever GEMM
 *      family the profile picks;
 *   2. a softmax over each row of S in place, applying the mask, the key
 *      lengths and causal masking, and writing the log-sum-exp
 *      (cl/attention/attention_naive.cl);
 *   3. O = P V, one GEMM per (batch item, head).
 * With fp16 storage Q, K and V are first widened to fp32 copies and O is
 * narrowed at the end, so the scores are never rounded to fp16.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ops/attention.h"
#include "ops/gemm.h"
#include "ops/nn_common.h"
#include "profiles/profile.h"

#define SOURCE "attention/attention_naive"

enum { SOFTMAX, WIDEN, NARROW };       /* plan->kernels */
enum { WS_S, WS_Q, WS_K, WS_V, WS_O }; /* plan->workspace; Q to O only for fp16 */

/* The two GEMMs: scores (S = scale Q K^T) and values (O = P V). */
struct naive {
    kiln_gemm_plan *scores, *values;
};

static kiln_status plan_gemm(struct kiln_attention_plan *plan, kiln_transpose trans_b, size_t m, size_t n, size_t k,
                             size_t lda, size_t ldb, size_t ldc, kiln_gemm_plan **out)
{
    kiln_gemm_desc g;
    kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, trans_b, m, n, k);
    g.lda = lda, g.ldb = ldb, g.ldc = ldc;
    kiln_status st = kiln_gemm_plan_create(plan->base.ctx, &g, out);
    if (st == KILN_SUCCESS)
        plan->base.workspace_bytes += (*out)->base.workspace_bytes;
    return st;
}

static kiln_status naive_prepare(struct kiln_attention_plan *plan)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    size_t scores, bytes;
    if (!kiln_tensor_elements(d->batch, d->heads, d->seq_q, d->seq_kv, &scores) ||
        __builtin_mul_overflow(scores, sizeof(float), &bytes) || bytes > plan->base.ctx->desc.max_alloc_bytes)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY,
                          "attention: the naive algorithm's score matrix (batch * heads * seq_q * seq_kv = %zu floats) "
                          "exceeds the device's largest allocation, %llu bytes",
                          scores, plan->base.ctx->desc.max_alloc_bytes);
    struct naive *n = calloc(1, sizeof *n);
    if (!n)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a naive attention plan");
    plan->base.impl = n;

    const struct kiln_param_util *util;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_util, &util);
    if (st != KILN_SUCCESS)
        return st;
    const long wg = util->wg;
    const int f16 = d->dtype != KILN_F32; /* 16-bit storage, widened */
    struct kiln_options options = {0};
    kiln_profile_defines(&options, KILN_GROUP_util, util);
    kiln_attention_switches(s, &options);
    static const char *const names[] = {"attention_softmax_rows", "attention_widen", "attention_narrow"};
    kiln_options_only(&options, names, f16 ? 3 : 1);
    st = kiln_options_status(&options, "attention");
    for (int i = SOFTMAX; i <= (f16 ? NARROW : SOFTMAX) && st == KILN_SUCCESS; i++)
        st = kiln_plan_kernel(&plan->base, i, SOURCE, &options, names[i]);
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    plan->local[0] = (size_t)wg;

    if ((st = kiln_plan_workspace(&plan->base, WS_S, bytes)) != KILN_SUCCESS)
        return st;
    for (int w = WS_Q; f16 && w <= WS_O; w++)
        if ((st = kiln_plan_workspace(
                 &plan->base, w, (w == WS_K || w == WS_V ? s->kv_elems : s->q_elems) * sizeof(float))) != KILN_SUCCESS)
            return st;
    if ((st = plan_gemm(plan, KILN_TRANS, d->seq_q, d->seq_kv, d->head_dim, s->q_stride[2], s->kv_stride[2], d->seq_kv,
                        &n->scores)) != KILN_SUCCESS ||
        (st = plan_gemm(plan, KILN_NO_TRANS, d->seq_q, d->head_dim, d->seq_kv, d->seq_kv, s->kv_stride[2],
                        s->q_stride[2], &n->values)) != KILN_SUCCESS)
        return st;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "%s", n->scores->base.kernel);
    snprintf(plan->base.params, sizeof plan->base.params,
             "scores %s %.60s, attention_softmax_rows WG=%ld, values %s %.60s, score matrix %.1f MiB",
             n->scores->base.algorithm, n->scores->base.params, wg, n->values->base.algorithm, n->values->base.params,
             (double)bytes / (1 << 20));
    return KILN_SUCCESS;
}

/* A utility kernel over `count` work-items. */
static kiln_status launch(struct kiln_attention_plan *plan, int kernel, const struct kiln_args *args, size_t count,
                          void **event)
{
    size_t global = (count + plan->local[0] - 1) / plan->local[0] * plan->local[0];
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[kernel], args, 1, &global, plan->local, 0, event);
}

/* Convert `count` elements from src to dst (widen or narrow). */
static kiln_status convert(struct kiln_attention_plan *plan, int kernel, void *src, void *dst, size_t count,
                           void **event)
{
    struct kiln_args a = {0};
    kiln_args_buffer(&a, src);
    kiln_args_buffer(&a, dst);
    kiln_args_ulong(&a, count);
    return launch(plan, kernel, &a, count, event);
}

/* One GEMM per (batch item, head): the scores (S = scale Q K^T) or the
   values (O = P V); `event` (may be NULL) receives the last one's. */
static kiln_status per_head(struct kiln_attention_plan *plan, int values, void *a, void *b, void *c, void **event)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const struct naive *n = plan->base.impl;
    kiln_status st = KILN_SUCCESS;
    for (size_t bi = 0; bi < d->batch && st == KILN_SUCCESS; bi++)
        for (size_t h = 0; h < d->heads && st == KILN_SUCCESS; h++) {
            const size_t q = bi * s->q_stride[0] + h * s->q_stride[1];
            const size_t kv = bi * s->kv_stride[0] + h / s->group * s->kv_stride[1];
            const size_t scores = (bi * d->heads + h) * d->seq_q * d->seq_kv;
            struct kiln_gemm_args g;
            memset(&g, 0, sizeof g);
            g.alpha = values ? 1.0f : d->scale;
            g.a = a, g.b = b, g.c = c;
            g.off_a = values ? scores : q, g.off_b = kv, g.off_c = values ? q : scores;
            const int last = bi + 1 == d->batch && h + 1 == d->heads;
            st = kiln_gemm_run(values ? n->values : n->scores, &g, last ? event : NULL);
        }
    return st;
}

static kiln_status naive_execute(struct kiln_attention_plan *plan, const struct kiln_attention_args *x, void **event)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const int f16 = d->dtype != KILN_F32; /* 16-bit storage, widened */
    void *S = plan->base.workspace[WS_S]->handle;
    void *q = x->q, *k = x->k, *v = x->v, *o = x->o;
    kiln_status st = KILN_SUCCESS;
    if (f16) {
        q = plan->base.workspace[WS_Q]->handle, k = plan->base.workspace[WS_K]->handle;
        v = plan->base.workspace[WS_V]->handle, o = plan->base.workspace[WS_O]->handle;
        if ((st = convert(plan, WIDEN, x->q, q, s->q_elems, NULL)) != KILN_SUCCESS ||
            (st = convert(plan, WIDEN, x->k, k, s->kv_elems, NULL)) != KILN_SUCCESS ||
            (st = convert(plan, WIDEN, x->v, v, s->kv_elems, NULL)) != KILN_SUCCESS)
            return st;
    }
    if ((st = per_head(plan, 0, q, k, S, NULL)) != KILN_SUCCESS)
        return st;

    struct kiln_args a = {0};
    kiln_args_buffer(&a, S);
    kiln_args_buffer_or(&a, x->mask, S); /* S stands in for the operands not used (never read) */
    kiln_args_buffer_or(&a, x->key_lengths, S);
    kiln_args_buffer_or(&a, x->lse, S);
    kiln_args_ulong(&a, s->lse_elems);
    kiln_args_int(&a, (int32_t)d->seq_q);
    kiln_args_int(&a, (int32_t)d->seq_kv);
    kiln_args_int(&a, (int32_t)d->heads);
    kiln_args_ulong(&a, s->mask_stride[0]);
    kiln_args_ulong(&a, s->mask_stride[1]);
    if ((st = launch(plan, SOFTMAX, &a, s->lse_elems, NULL)) != KILN_SUCCESS ||
        (st = per_head(plan, 1, S, v, o, f16 ? NULL : event)) != KILN_SUCCESS || !f16)
        return st;
    return convert(plan, NARROW, o, x->o, s->q_elems, event);
}

static void naive_release(struct kiln_attention_plan *plan)
{
    struct naive *n = plan->base.impl;
    if (n) {
        kiln_gemm_plan_destroy(n->scores);
        kiln_gemm_plan_destroy(n->values);
    }
    free(n);
    plan->base.impl = NULL;
}

const struct kiln_attention_algorithm kiln_attention_naive = {"naive",       KILN_ATTENTION_NAIVE, NULL,
                                                              naive_prepare, naive_execute,        naive_release};
