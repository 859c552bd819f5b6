/*
 * Decoding attention (cl/attention/attention_f32_decode.cl), the fused
 * algorithm's kernel for problems whose (batch, kv head) has at most
 * KILN_DECODE_MAX_ROWS rows (query heads per kv head times query positions:
 * decoding, speculative and short query blocks) on backends with vector
 * kernels whose profile does not route attention to the flash kernel.
 *
 * The keys of each (batch, kv head) are split so that the device has about
 * four work-items per compute unit: split_len keys each (a multiple of the
 * step, at least the profile's attention.decode split_kv), their partial
 * outputs and
 * log-sum-exps kept in the plan's workspace and combined by a second kernel.
 * One split needs neither. KILN_ATTENTION_SPLIT_KV sets the keys per split
 * instead (tests, measurements).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ops/attention.h"
#include "profiles/profile.h"

#define SOURCE "attention/attention_f32_decode"
#define KILN_DECODE_MAX_ROWS 8
enum { DECODE = 0, COMBINE = 1 };      /* kernel slots */
enum { WS_PART = 0, WS_PART_LSE = 1 }; /* workspace slots */

struct decode {
    int splits, split_len;
    size_t rows; /* batch * heads * seq_q */
    size_t combine_local;
};

int kiln_attention_decode_applies(const struct kiln_attention_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    return ctx->vector_kernels && plan->s.group * plan->s.d.seq_q <= KILN_DECODE_MAX_ROWS &&
           kiln_profile_params(ctx->profile)->select.attention_route != KILN_ATTENTION_ROUTE_FLASH;
}

/* Keys per split: KILN_ATTENTION_SPLIT_KV when set, else enough splits for
   about four work-items per compute unit, none shorter than min_split
   keys; a multiple of the step either way. */
static int split_keys(const struct kiln_attention_plan *plan, long min_split, int step, const char **why)
{
    const kiln_attention_desc *d = &plan->s.d;
    const long forced = kiln_env_long("KILN_ATTENTION_SPLIT_KV", 1, 1L << 30, "a number of keys from 1 to 2^30");
    long len;
    if (forced > 0) {
        len = forced;
        *why = "KILN_ATTENTION_SPLIT_KV";
    } else {
        const size_t items = d->batch * d->kv_heads, wanted = 4 * (size_t)plan->base.ctx->desc.compute_units;
        const size_t splits = items >= wanted ? 1 : (wanted + items - 1) / items;
        len = (long)((d->seq_kv + splits - 1) / splits);
        if (len < min_split)
            len = min_split;
        *why = "4 work-items per compute unit";
    }
    len = (len + step - 1) / step * step;
    return len > (long)d->seq_kv ? (int)((d->seq_kv + (size_t)step - 1) / (size_t)step * (size_t)step) : (int)len;
}

kiln_status kiln_attention_decode_prepare(struct kiln_attention_plan *plan)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const struct kiln_param_attention_decode *a;
    const struct kiln_param_util *util;
    /* The decoding group last: the plan's param_set names it. */
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_util, &util);
    if (st == KILN_SUCCESS)
        st = kiln_attention_params(plan, KILN_GROUP_attention_decode, &a);
    if (st != KILN_SUCCESS)
        return st;
    /* The profile's vector width, halved until it divides the head
       dimension; the kernel's steps are one vector of keys. */
    long vw = a->vw;
    while (d->head_dim % (size_t)vw != 0)
        vw /= 2;
    const long step = vw;
    const char *why = NULL;
    const int split_len = split_keys(plan, a->split_kv, (int)step, &why);
    const int splits = (int)((d->seq_kv + (size_t)split_len - 1) / (size_t)split_len);
    struct decode *x = calloc(1, sizeof *x);
    if (!x)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "attention: the decoding plan");
    plan->base.impl = x;
    x->splits = splits, x->split_len = split_len;
    x->rows = s->lse_elems;
    x->combine_local = (size_t)util->wg;

    struct kiln_options options = {0};
    kiln_options_add(&options, "-DKILN_DECODE_VW=%ld -DKILN_DECODE_D=%zu -DKILN_DECODE_ROWS=%zu -DKILN_DECODE_SPLIT=%d",
                     vw, d->head_dim, s->group * d->seq_q, splits > 1);
    kiln_profile_defines(&options, KILN_GROUP_util, util);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, DECODE, SOURCE, &options, "attention_f32_decode");
    if (st == KILN_SUCCESS && splits > 1)
        st = kiln_plan_kernel(&plan->base, COMBINE, SOURCE, &options, "attention_decode_combine");
    kiln_options_free(&options);
    if (st == KILN_SUCCESS && splits > 1)
        st = kiln_plan_workspace(&plan->base, WS_PART, (size_t)splits * x->rows * d->head_dim * sizeof(float));
    if (st == KILN_SUCCESS && splits > 1)
        st = kiln_plan_workspace(&plan->base, WS_PART_LSE, (size_t)splits * x->rows * sizeof(float));
    if (st != KILN_SUCCESS)
        return st;
    plan->global[0] = (size_t)splits, plan->global[1] = d->batch * d->kv_heads;
    plan->local[0] = plan->local[1] = 1;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_f32_decode_%zux%ld", s->group * d->seq_q, step);
    snprintf(plan->base.params, sizeof plan->base.params, "rows=%zu VW=%ld D=%zu splits=%d of %d keys (%s)",
             s->group * d->seq_q, vw, d->head_dim, splits, split_len, why);
    size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len, "; decoding: %zu rows per kv head",
             s->group * d->seq_q);
    return KILN_SUCCESS;
}

kiln_status kiln_attention_decode_execute(struct kiln_attention_plan *plan, const struct kiln_attention_args *x,
                                          void **event)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const struct decode *dc = plan->base.impl;
    const int split = dc->splits > 1;
    void *part = split ? plan->base.workspace[WS_PART]->handle : x->o;
    void *part_lse = split ? plan->base.workspace[WS_PART_LSE]->handle : x->o;
    struct kiln_args a = {0};
    kiln_attention_kernel_args(plan, x, &a);
    kiln_args_buffer(&a, part);
    kiln_args_buffer(&a, part_lse);
    kiln_args_int(&a, dc->split_len);
    kiln_status st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[DECODE], &a, 2, plan->global, plan->local, 0,
                                        split ? NULL : event);
    if (st != KILN_SUCCESS || !split)
        return st;
    struct kiln_args c = {0};
    kiln_args_buffer(&c, part);
    kiln_args_buffer(&c, part_lse);
    kiln_args_buffer(&c, x->o);
    kiln_args_buffer_or(&c, x->lse, x->o);
    kiln_args_int(&c, dc->splits);
    kiln_args_ulong(&c, dc->rows);
    kiln_args_int(&c, (int32_t)d->seq_q);
    kiln_args_int(&c, (int32_t)d->heads);
    for (int i = 0; i < 3; i++)
        kiln_args_ulong(&c, s->q_stride[i]);
    const size_t local = dc->combine_local, global = (dc->rows + local - 1) / local * local;
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[COMBINE], &c, 1, &global, &local, 0, event);
}

void kiln_attention_decode_release(struct kiln_attention_plan *plan)
{
    free(plan->base.impl);
    plan->base.impl = NULL;
}
