/*
 * The fused algorithm on tensor cores (cu/attention/attention_f16_mma.cu):
 * fp16 or bf16 storage on the CUDA backend, compute capability 8.0 and
 * newer, head dimensions that are multiples of 8 up to 128. The kernel
 * takes the flash kernel's arguments and splits the keys the same way
 * (attention_decode.c); its blocks are the profile's attention.mma group,
 * halved for problems with fewer rows per (batch, kv head) than a block,
 * and the keys per step halved while the tiles exceed the device's shared
 * memory.
 *
 * Its weights P are rounded to the storage type before P V, as
 * FlashAttention's are: README ("Storage and arithmetic") states what that
 * costs.
 */
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/attention.h"
#include "profiles/profile.h"

#define SOURCE "attention/attention_f16_mma.cu"
#define MAX_HEAD_DIM 128

int kiln_attention_mma_runs_on(const kiln_context *ctx, char *why, size_t size)
{
    return kiln_plan_cuda_runs(ctx, kiln_plan_cc(ctx) >= 80, "the tensor-core attention kernel", "8.0 or newer", why,
                               size);
}

int kiln_attention_mma_applies(const struct kiln_attention_plan *plan)
{
    const kiln_attention_desc *d = &plan->s.d;
    return kiln_attention_mma_runs_on(plan->base.ctx, NULL, 0) && (d->dtype == KILN_F16 || d->dtype == KILN_BF16) &&
           d->head_dim % 8 == 0 && d->head_dim <= MAX_HEAD_DIM;
}

kiln_status kiln_attention_mma_prepare(struct kiln_attention_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const struct kiln_param_attention_mma *a;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_attention_mma, &a);
    if (st != KILN_SUCCESS)
        return st;
    /* Half the rows while half a block holds a (batch, kv head)'s rows:
       a warp's second tile first, then half the warps. */
    long bq = a->block_q, bk = a->block_kv, warps = a->warps, tiles = bq / (warps * 16);
    /* Past head dimension 64 a warp's second row tile does not fit its
       registers: twice the warps of one tile each. */
    if (tiles == 2 && d->head_dim > 64 && (size_t)(2 * warps * 32) <= ctx->desc.max_work_group_size)
        tiles = 1, warps *= 2;
    const long rows = (long)(s->group * d->seq_q);
    while (bq > 16 && bq / 2 >= rows) {
        if (tiles == 2)
            tiles = 1;
        else
            warps /= 2;
        bq /= 2;
    }
    const unsigned long long optin = ctx->desc.shared_optin_bytes;
    long shared = kiln_attention_mma_shared_bytes(bq, bk, a->stages, (long)d->head_dim);
    while (optin && (unsigned long long)shared > optin && bk > 16) {
        bk /= 2;
        shared = kiln_attention_mma_shared_bytes(bq, bk, a->stages, (long)d->head_dim);
    }
    if (optin && (unsigned long long)shared > optin)
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "attention: the tensor-core kernel's %ld bytes of shared memory exceed the device's %llu",
                          shared, optin);
    /* Splits of the keys where the row blocks leave the device fewer than
       about eight warps per compute unit (decoding, short query blocks:
       prefill's blocks already fill the device, and a split would only
       add the combine's pass), each at least four steps; the combine
       kernel in slot 1. Then the group again: the plan's param_set names
       it. */
    const size_t blocks = (s->group * d->seq_q + (size_t)bq - 1) / (size_t)bq;
    const char *split_why = NULL;
    const int split_len =
        kiln_attention_split_keys(plan, blocks * d->batch * d->kv_heads, kiln_attention_blocks_per_sm(warps),
                                  KILN_SPLIT_FILL, 4 * bk, bk, &split_why);
    if ((st = kiln_attention_split_prepare(plan, split_len, 1)) != KILN_SUCCESS ||
        (st = kiln_attention_params(plan, KILN_GROUP_attention_mma, &a)) != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_options_add(&options,
                     "-DKILN_AMMA_BLOCK_Q=%ld -DKILN_AMMA_BLOCK_KV=%ld -DKILN_AMMA_WARPS=%ld -DKILN_AMMA_STAGES=%d "
                     "-DKILN_AMMA_D=%zu -DKILN_AMMA_SPLIT=%d -DKILN_MMA_BF16=%d -DKILN_MIN_ARCH=80",
                     bq, bk, warps, a->stages, d->head_dim, plan->splits > 1, d->dtype == KILN_BF16);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, 0, SOURCE, &options, "attention_f16_mma");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_f16_mma_%ldx%ld", bq, bk);
    snprintf(plan->base.params, sizeof plan->base.params,
             "BM=%ld BN=%ld warps=%ld (%ld rows each) stages=%d D=%zu shared=%ld", bq, bk, warps, bq / warps, a->stages,
             d->head_dim, shared);
    kiln_attention_split_describe(plan, split_len, split_why);
    plan->local[0] = (size_t)warps * 32, plan->local[1] = plan->local[2] = 1;
    plan->global[0] = blocks * plan->local[0];
    plan->global[1] = d->batch * d->kv_heads;
    plan->global[2] = (size_t)plan->splits;
    plan->flash = 1;
    plan->shared = (size_t)shared;
    const size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len, "; tensor cores (%s storage, %s)",
             d->dtype == KILN_BF16 ? "bf16" : "fp16", ctx->desc.arch);
    return KILN_SUCCESS;
}
