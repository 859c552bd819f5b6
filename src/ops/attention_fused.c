/*
 * The fused attention algorithm (cl/attention/attention_f32_fused.cl): one
 * kernel, no workspace. The profile's attention parameters give the rows of
 * a register block (block_q, in vectors of vw rows), the keys per step
 * (block_kv), the blocks per work-item sharing each chunk of chunk_kv keys
 * (q_blocks, adjusted here to the head dimension and the problem) and the
 * work-group size (wg); head dimensions 64 and 128 are compiled as
 * constants, others as a run-time bound within a power of two. pv_rows and
 * pv_vecs choose the form of P V (per step, or per chunk as a register tile
 * of pv_rows x pv_vecs vectors), adjusted here to the block and the head
 * dimension.
 *
 * A (batch, kv head) of at most eight rows (decoding) takes the decoding
 * kernel instead, split over the keys (attention_decode.c), on a CPU device
 * whose backend runs vector kernels and whose profile does not route
 * attention to flash; the flash kernel splits such problems' keys too, and
 * takes them on other devices whatever the route (the per-work-item kernel
 * cannot split them).
 *
 * On the CUDA backend, fp16 and bf16 storage take the tensor-core kernel
 * where it applies (attention_mma.c), whatever the route.
 *
 * Where the profile's select.attention_route is "flash", the same algorithm
 * runs cl/attention/attention_f32_flash.cl instead (the same arguments): a
 * work-group per block of rows staging keys and values in local memory,
 * with the attention.flash group's blocks, shrunk here to the rows of a
 * decoding problem and to the device's local memory at large head
 * dimensions.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/attention.h"
#include "profiles/profile.h"

#define SOURCE "attention/attention_f32_fused"

/* Parameters of one plan's kernel. */
struct fused_params {
    long bq, bk, vw, wg, chunk;
    long blocks; /* row blocks per work-item */
    long pr, pd; /* P V per chunk: tile of pr rows x pd vectors (pr 0: per step) */
    size_t dmax; /* bound of the private arrays; the head dimension itself for 64 and 128 */
    int exact;   /* head_dim compiled in */
};

/* The bound of a kernel's arrays for head dimension d: d itself where it is
   compiled in (*exact: 64 and 128), else the next power of two from 16. */
static size_t head_dim_bound(size_t d, int *exact)
{
    *exact = d == 64 || d == 128;
    size_t dmax = 16;
    while (dmax < d)
        dmax *= 2;
    return dmax;
}

static kiln_status fused_params(struct kiln_attention_plan *plan, struct fused_params *p)
{
    const struct kiln_param_attention_fused *a;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_attention_fused, &a);
    if (st != KILN_SUCCESS)
        return st;
    p->bq = a->block_q, p->bk = a->block_kv, p->vw = a->vw, p->wg = a->wg, p->blocks = a->q_blocks;
    p->chunk = a->chunk_kv, p->pr = a->pv_rows, p->pd = a->pv_vecs;
    /* A (batch, kv head) with fewer rows than a block (decoding) takes as
       few vectors of rows as hold them. */
    const kiln_attention_desc *d = &plan->s.d;
    const long rows = (long)(plan->s.group * d->seq_q);
    if (rows < p->bq)
        p->bq = (rows + p->vw - 1) / p->vw * p->vw;
    p->dmax = head_dim_bound(d->head_dim, &p->exact);
    /* Row blocks per work-item: the profile's for head dimensions up to 64,
       fewer above so that their private state stays the same size; no more
       than the rows hold, and fewer while that leaves under four work-items
       per compute unit. */
    const long row_blocks = (rows + p->bq - 1) / p->bq;
    const size_t items_wanted = 4 * (size_t)plan->base.ctx->desc.compute_units;
    if (p->dmax > 64)
        p->blocks = p->blocks * 64 / (long)p->dmax;
    /* The per-chunk form: a tile of rows dividing the block (which decoding
       may have shortened), no wider than a row of the head dimension, and a
       chunk holding as many bytes of keys and values as 64-wide rows would. */
    if (p->pr > 0) {
        while (p->bq % p->pr != 0)
            p->pr--;
        while (p->pd > 1 && (size_t)(p->pd * p->vw) > p->dmax)
            p->pd /= 2;
        if (p->dmax > 64)
            p->chunk = p->chunk * 64 / (long)p->dmax / p->bk * p->bk;
        p->chunk = p->chunk < p->bk ? p->bk : p->chunk;
    }
    p->blocks = p->blocks < 1 ? 1 : p->blocks > row_blocks ? row_blocks : p->blocks;
    while (p->blocks > 1 && (size_t)((row_blocks + p->blocks - 1) / p->blocks) * d->batch * d->kv_heads < items_wanted)
        p->blocks /= 2;
    return KILN_SUCCESS;
}

/* The flash kernel's blocks for this problem: block_q and wg halved
   together (the work-item grids keep their columns) while half the rows
   would hold the problem's rows of a (batch, kv head) or the tiles exceed
   the device's local memory, block_kv halved first for the latter. Where
   wg would fall below min_wg (a warp: a work-group of 8 work-items for
   decoding's 4 rows left three quarters of one idle), block_q is halved
   alone if the grids still divide and the tiles fit: the score grid's
   columns double, block_kv rising to a multiple of them, and each
   work-item takes fewer rows of the output and more of its values. 0 with
   the reason where no halving fits. */
static int flash_blocks(const struct kiln_attention_plan *plan, const struct kiln_param_attention_flash *f, size_t dmax,
                        long *bm, long *bn, long *wg, char *why, size_t size)
{
    const kiln_context *ctx = plan->base.ctx;
    const long rows = (long)(plan->s.group * plan->s.d.seq_q);
    const unsigned long long local = ctx->desc.local_mem_bytes;
    *bm = f->block_q, *bn = f->block_kv, *wg = f->wg;
    for (;;) {
        const long half = *bm / 2, sc = *wg / (*bm / f->s_rows);
        const int halvable = half % f->s_rows == 0 && half % f->o_rows == 0 && half > 0;
        const int too_big = local && (unsigned long long)kiln_flash_local_bytes(*bm, *bn, (long)dmax) > local;
        /* Halving block_q alone: the score grid's columns and block_kv. */
        int alone = 0;
        long bn_alone = *bn;
        if (halvable && !too_big && half >= rows && *wg / 2 < f->min_wg && *wg % (half / f->s_rows) == 0 &&
            *wg % (half / f->o_rows) == 0) {
            const long sc_alone = *wg / (half / f->s_rows);
            bn_alone = (*bn + sc_alone - 1) / sc_alone * sc_alone;
            alone = !local || (unsigned long long)kiln_flash_local_bytes(half, bn_alone, (long)dmax) <= local;
        }
        if (too_big && *bn / 2 >= sc && (*bn / 2) % sc == 0)
            *bn /= 2;
        else if (alone)
            *bm = half, *bn = bn_alone;
        else if (halvable && (too_big || half >= rows))
            *bm = half, *wg /= 2;
        else if (too_big) {
            snprintf(why, size, "%ld bytes of local memory at head dimension %zu, more than the device's %llu",
                     kiln_flash_local_bytes(*bm, *bn, (long)dmax), dmax, local);
            return 0;
        } else
            return 1;
    }
}

/* The flash kernel's plan; *fits 0 (and `why`) where its blocks cannot fit
   the device at this head dimension. */
static kiln_status flash_prepare(struct kiln_attention_plan *plan, int *fits, char *why, size_t why_size)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const struct kiln_param_attention_flash *f;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_attention_flash, &f);
    if (st != KILN_SUCCESS)
        return st;
    int exact;
    const size_t dmax = head_dim_bound(d->head_dim, &exact);
    long bm, bn, wg;
    *fits = flash_blocks(plan, f, dmax, &bm, &bn, &wg, why, why_size);
    if (!*fits)
        return KILN_SUCCESS;
    /* Splits of the keys where the row blocks leave the device fewer than
       four work-groups per compute unit (decoding), each at least four
       steps of keys; the combine kernel in slot 1. Then the flash group
       again: the plan's param_set names it. */
    const size_t blocks = (s->group * d->seq_q + (size_t)bm - 1) / (size_t)bm;
    const char *split_why = NULL;
    const int split_len =
        kiln_attention_split_keys(plan, blocks * d->batch * d->kv_heads, 4, KILN_SPLIT_FILL, 4 * bn, bn, &split_why);
    if ((st = kiln_attention_split_prepare(plan, split_len, 1)) != KILN_SUCCESS ||
        (st = kiln_attention_params(plan, KILN_GROUP_attention_flash, &f)) != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_options_add(&options,
                     "-DKILN_FLASH_BLOCK_Q=%ld -DKILN_FLASH_BLOCK_KV=%ld -DKILN_FLASH_WG=%ld -DKILN_FLASH_S_ROWS=%d "
                     "-DKILN_FLASH_O_ROWS=%d -DKILN_ATTN_%s=%zu -DKILN_FLASH_SPLIT=%d",
                     bm, bn, wg, f->s_rows, f->o_rows, exact ? "D" : "DMAX", dmax, plan->splits > 1);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, 0, "attention/attention_f32_flash", &options, "attention_f32_flash");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_f32_flash_%ldx%ld", bm, bn);
    snprintf(plan->base.params, sizeof plan->base.params, "BM=%ld BN=%ld WG=%ld S=%dx%ld O=%dx%ld local=%ld %s=%zu", bm,
             bn, wg, f->s_rows, bn / (wg / (bm / f->s_rows)), f->o_rows,
             ((long)dmax + wg / (bm / f->o_rows) - 1) / (wg / (bm / f->o_rows)),
             kiln_flash_local_bytes(bm, bn, (long)dmax), exact ? "D" : "DMAX", dmax);
    kiln_attention_split_describe(plan, split_len, split_why);
    plan->local[0] = (size_t)wg, plan->local[1] = plan->local[2] = 1;
    plan->global[0] = blocks * (size_t)wg;
    plan->global[1] = d->batch * d->kv_heads;
    plan->global[2] = (size_t)plan->splits;
    plan->flash = 1;
    size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len, "; %s",
             kiln_profile_params(plan->base.ctx->profile)->select.attention_route == KILN_ATTENTION_ROUTE_FLASH
                 ? "profile route flash"
                 : "decoding off a CPU: the flash kernel, which splits the keys");
    return KILN_SUCCESS;
}

static kiln_status fused_prepare(struct kiln_attention_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    if (kiln_attention_decode_applies(plan))
        return kiln_attention_decode_prepare(plan);
    if (kiln_attention_mma_applies(plan))
        return kiln_attention_mma_prepare(plan);
    /* The flash kernel on its route, on backends without vector kernels,
       and for decoding on devices other than CPUs whatever the route: the
       per-work-item kernel cannot split the keys, and a decoding problem
       would give it a work-item per (batch, kv head) and block of rows
       (16 on an H100 for 32 heads over 8 kv heads: 4.5 GB/s). */
    if (kiln_profile_params(ctx->profile)->select.attention_route == KILN_ATTENTION_ROUTE_FLASH ||
        !ctx->vector_kernels || (kiln_attention_decodes(plan) && ctx->desc.type != KILN_DEVICE_CPU)) {
        char why[160];
        int fits = 0;
        kiln_status st = flash_prepare(plan, &fits, why, sizeof why);
        if (st != KILN_SUCCESS || fits)
            return st;
        /* The per-work-item kernel is written in OpenCL's vector syntax. */
        if (!ctx->vector_kernels)
            return kiln_error(KILN_ERROR_UNSUPPORTED,
                              "attention: the flash kernel's blocks do not fit (%s), and the %s backend has no other "
                              "fused kernel (the naive algorithm runs there)",
                              why, ctx->backend->name);
        size_t len = strlen(plan->base.reason);
        snprintf(plan->base.reason + len, sizeof plan->base.reason - len, "; flash blocks: %s", why);
    }
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    struct fused_params p;
    kiln_status st = fused_params(plan, &p);
    if (st != KILN_SUCCESS)
        return st;
    /* The group's values as this problem adjusts them, not its defines. */
    struct kiln_options options = {0};
    kiln_options_add(&options,
                     "-DKILN_ATTENTION_BLOCK_Q=%ld -DKILN_ATTENTION_BLOCK_KV=%ld -DKILN_ATTENTION_VW=%ld "
                     "-DKILN_ATTENTION_WG=%ld -DKILN_ATTENTION_CHUNK_KV=%ld -DKILN_ATTENTION_PV_ROWS=%ld "
                     "-DKILN_ATTENTION_PV_VECS=%ld -DKILN_ATTN_BLOCKS=%ld -DKILN_ATTN_%s=%zu",
                     p.bq, p.bk, p.vw, p.wg, p.chunk, p.pr, p.pd, p.blocks, p.exact ? "D" : "DMAX", p.dmax);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, 0, SOURCE, &options, "attention_f32_fused");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_f32_fused_%ldx%ld", p.bq, p.bk);
    char pv[48] = "PV=step";
    if (p.pr > 0)
        snprintf(pv, sizeof pv, "PV=%ldx%ld", p.pr, p.pd);
    snprintf(plan->base.params, sizeof plan->base.params, "BQ=%ld BK=%ld VW=%ld WG=%ld blocks=%ld chunk=%ld %s %s=%zu",
             p.bq, p.bk, p.vw, p.wg, p.blocks, p.chunk, pv, p.exact ? "D" : "DMAX", p.dmax);
    const size_t rows_per_item = (size_t)(p.bq * p.blocks);
    const size_t items = (s->group * d->seq_q + rows_per_item - 1) / rows_per_item;
    plan->local[0] = (size_t)p.wg, plan->local[1] = 1;
    plan->global[0] = (items + plan->local[0] - 1) / plan->local[0] * plan->local[0];
    plan->global[1] = d->batch * d->kv_heads;
    return KILN_SUCCESS;
}

static kiln_status fused_execute(struct kiln_attention_plan *plan, const struct kiln_attention_args *x, void **event)
{
    if (plan->decoding || plan->flash) /* the kernels that take the split arguments */
        return kiln_attention_split_launch(plan, plan->decoding ? 2 : 3, 0, x, event);
    struct kiln_args a = {0};
    kiln_attention_kernel_args(plan, x, &a);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[0], &a, 2, plan->global, plan->local, 0, event);
}

const struct kiln_attention_algorithm kiln_attention_fused = {"fused",       KILN_ATTENTION_FUSED, NULL,
                                                              fused_prepare, fused_execute,        NULL};
