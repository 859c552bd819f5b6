/*
 * Attention split over the keys (flash-decoding), and the decoding kernel.
 *
 * Splits: a problem of few rows per (batch, kv head) gives a device too few
 * work-items (or work-groups), so the keys of each (batch, kv head) are
 * split, each split computing its rows' output normalised by its own sum and
 * their log-sum-exps into the plan's workspace (fp32), merged exactly by
 * cl/attention/attention_combine.cl. The fused algorithm's two kernels for
 * such problems take them: the decoding kernel below, and the flash kernel
 * (attention_fused.c). KILN_ATTENTION_SPLIT_KV sets the keys per split
 * instead of the plan (tests, measurements).
 *
 * On the CUDA backend, the same problems take cu/attention/attention_decode.cu
 * instead: a block of warps per split of a (batch, kv head), each warp
 * reading whole rows of keys and values, the splits as many as give one
 * wave of blocks resident together (about 8 warps per SM), no more.
 *
 * On devices of the OpenCL backend other than CPUs (and on the flash route),
 * they take cl/attention/attention_f32_decode_wg.cl where the profile's
 * attention.decode_wg allows (wg above 0) and the head dimension is whole
 * vectors of four up to 256: a work-group per split of a (batch, kv head)
 * that loads the next tile of keys and values while it computes on the
 * last, the splits giving about eight work-groups per compute unit; else the
 * flash kernel (attention_fused.c).
 *
 * The decoding kernel (cl/attention/attention_f32_decode.cl): where a
 * (batch, kv head) has at most KILN_DECODE_MAX_ROWS rows (query heads per kv
 * head times query positions: decoding, speculative and short query
 * blocks) on a CPU device whose backend runs vector kernels and whose
 * profile does not route attention to the flash kernel, one work-item takes
 * all the rows and one split of the keys; the splits give about four
 * work-items per compute unit, none shorter than the profile's
 * attention.decode split_kv.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/attention.h"
#include "profiles/profile.h"

#define SOURCE "attention/attention_f32_decode"
#define COMBINE_SOURCE "attention/attention_combine"
#define WG_SOURCE "attention/attention_f32_decode_wg"
enum { WS_PART = 0, WS_PART_LSE = 1 }; /* workspace slots */

size_t kiln_attention_splits_for(size_t units, size_t wanted, enum kiln_split_fill fill)
{
    if (units == 0 || units >= wanted)
        return 1;
    return fill == KILN_SPLIT_ONE_WAVE ? wanted / units : (wanted + units - 1) / units;
}

int kiln_attention_blocks_per_sm(long warps) { return warps >= 8 ? 1 : (int)(8 / warps); }

int kiln_attention_split_keys(const struct kiln_attention_plan *plan, size_t units, int per_cu,
                              enum kiln_split_fill fill, long min_split, long step, const char **why)
{
    const kiln_attention_desc *d = &plan->s.d;
    const long forced = kiln_env_long("KILN_ATTENTION_SPLIT_KV", 1, 1L << 30, "a number of keys from 1 to 2^30");
    const size_t whole = (d->seq_kv + (size_t)step - 1) / (size_t)step * (size_t)step;
    long len;
    if (forced > 0) {
        len = forced;
        *why = "KILN_ATTENTION_SPLIT_KV";
    } else {
        const size_t wanted = (size_t)per_cu * plan->base.ctx->desc.compute_units;
        const size_t splits = kiln_attention_splits_for(units, wanted, fill);
        len = (long)((d->seq_kv + splits - 1) / splits);
        if (len < min_split)
            len = min_split;
        static const char *const per_cu_why[2][8] = {
            {"a work-group per compute unit", "2 work-groups per compute unit", "3 work-groups per compute unit",
             "4 work-groups per compute unit", "5 work-groups per compute unit", "6 work-groups per compute unit",
             "7 work-groups per compute unit", "8 work-groups per compute unit"},
            {"one wave, a work-group per compute unit", "one wave, 2 work-groups per compute unit",
             "one wave, 3 work-groups per compute unit", "one wave, 4 work-groups per compute unit",
             "one wave, 5 work-groups per compute unit", "one wave, 6 work-groups per compute unit",
             "one wave, 7 work-groups per compute unit", "one wave, 8 work-groups per compute unit"}};
        *why = per_cu >= 1 && per_cu <= 8 ? per_cu_why[fill == KILN_SPLIT_ONE_WAVE][per_cu - 1]
                                          : "work-groups per compute unit";
    }
    len = (len + step - 1) / step * step;
    /* No more splits than KILN_ATTENTION_MAX_SPLITS. */
    const long fewest = (long)((d->seq_kv + KILN_ATTENTION_MAX_SPLITS - 1) / KILN_ATTENTION_MAX_SPLITS);
    if (len < fewest)
        len = (fewest + step - 1) / step * step;
    return len > (long)whole ? (int)whole : (int)len;
}

kiln_status kiln_attention_split_prepare(struct kiln_attention_plan *plan, int split_len, int slot)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    plan->split_len = split_len;
    plan->splits = (int)((d->seq_kv + (size_t)split_len - 1) / (size_t)split_len);
    plan->combine_slot = slot;
    if (plan->splits <= 1)
        return KILN_SUCCESS;
    const struct kiln_param_util *util;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_util, &util);
    if (st != KILN_SUCCESS)
        return st;
    /* The combine's work-items: an element of O each on GPUs; a whole row
       each on CPUs, where a work-item per element repeated its row's
       weights (an exp per split) and 64-bit divisions for every element
       (H32/KV8, one query, 8 splits, d128, on the Zen 5: 20% of a decoding
       step at 2048 keys in perf), in work-groups small enough to give each
       compute unit two. */
    const size_t rows = s->lse_elems;
    plan->combine_local = (size_t)util->wg;
    plan->combine_cols = 1;
    if (plan->base.ctx->desc.type == KILN_DEVICE_CPU) {
        plan->combine_cols = d->head_dim;
        const size_t wanted = 2 * (size_t)plan->base.ctx->desc.compute_units;
        while (plan->combine_local > 1 && rows < wanted * plan->combine_local)
            plan->combine_local /= 2;
    }
    struct kiln_options options = {0};
    kiln_options_add(&options, "-DKILN_COMBINE_COLS=%zu -DKILN_COMBINE_WG=%zu", plan->combine_cols,
                     plan->combine_local);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, slot, COMBINE_SOURCE, &options, "attention_combine");
    kiln_options_free(&options);
    if (st == KILN_SUCCESS)
        st = kiln_plan_workspace(&plan->base, WS_PART, (size_t)plan->splits * rows * d->head_dim * sizeof(float));
    if (st == KILN_SUCCESS)
        st = kiln_plan_workspace(&plan->base, WS_PART_LSE, (size_t)plan->splits * rows * sizeof(float));
    return st;
}

/* How the combine kernel's work-items merge the splits, for the plan's
   parameters ("" without splits). */
static const char *merged(const struct kiln_attention_plan *plan)
{
    return plan->splits <= 1         ? ""
           : plan->combine_cols == 1 ? ", merged an element a work-item"
                                     : ", merged a row a work-item";
}

void kiln_attention_split_describe(struct kiln_attention_plan *plan, int split_len, const char *why)
{
    if (plan->splits <= 1)
        return;
    const size_t n = strlen(plan->base.params);
    snprintf(plan->base.params + n, sizeof plan->base.params - n, " splits=%d of %d keys (%s)%s", plan->splits,
             split_len, why, merged(plan));
}

/* The split arguments after the fused kernel's: the partial outputs, their
   log-sum-exps (O stands in without splits, never written), split_len. */
static void split_args(const struct kiln_attention_plan *plan, const struct kiln_attention_args *x, struct kiln_args *a)
{
    const int split = plan->splits > 1;
    kiln_args_buffer(a, split ? plan->base.workspace[WS_PART]->handle : x->o);
    kiln_args_buffer(a, split ? plan->base.workspace[WS_PART_LSE]->handle : x->o);
    kiln_args_int(a, plan->split_len);
    kiln_args_ulong(a, plan->s.lse_elems); /* rows of one split: [batch][head][query] */
}

kiln_status kiln_attention_split_launch(struct kiln_attention_plan *plan, unsigned dims, int kernel,
                                        const struct kiln_attention_args *x, void **event)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    struct kiln_args a = {0};
    kiln_attention_kernel_args(plan, x, &a);
    split_args(plan, x, &a);
    const int split = plan->splits > 1;
    kiln_status st = kiln_kernel_launch(plan->base.ctx, plan->base.kernels[kernel], &a, dims, plan->global, plan->local,
                                        plan->shared, split ? NULL : event);
    if (st != KILN_SUCCESS || !split)
        return st;
    struct kiln_args c = {0};
    kiln_args_buffer(&c, plan->base.workspace[WS_PART]->handle);
    kiln_args_buffer(&c, plan->base.workspace[WS_PART_LSE]->handle);
    kiln_args_buffer(&c, x->o);
    kiln_args_buffer_or(&c, x->lse, x->o);
    kiln_args_int(&c, plan->splits);
    kiln_args_ulong(&c, s->lse_elems);
    kiln_args_int(&c, (int32_t)d->head_dim);
    kiln_args_int(&c, (int32_t)d->seq_q);
    kiln_args_int(&c, (int32_t)d->heads);
    for (int i = 0; i < 3; i++)
        kiln_args_ulong(&c, s->q_stride[i]);
    const size_t local = plan->combine_local,
                 count = s->lse_elems * ((d->head_dim + plan->combine_cols - 1) / plan->combine_cols);
    const size_t global = (count + local - 1) / local * local;
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[plan->combine_slot], &c, 1, &global, &local, 0, event);
}

int kiln_attention_decode_cuda_runs_on(const kiln_context *ctx, kiln_dtype dtype, char *why, size_t size)
{
    /* bf16 from compute capability 8.0: its conversions. */
    return kiln_plan_cuda_runs(ctx, dtype != KILN_BF16 || kiln_plan_cc(ctx) >= 80, "the CUDA decoding kernel",
                               dtype == KILN_BF16 ? "8.0 or newer for bf16" : NULL, why, size);
}

/* The CUDA backend's decoding kernel: where it runs, a head dimension of
   whole vectors of four up to 256. */
static int cuda_decode_applies(const struct kiln_attention_plan *plan)
{
    const kiln_attention_desc *d = &plan->s.d;
    return kiln_attention_decode_cuda_runs_on(plan->base.ctx, d->dtype, NULL, 0) && d->head_dim % 4 == 0 &&
           d->head_dim <= KILN_DECODE_MAX_HEAD_DIM;
}

int kiln_attention_decodes(const struct kiln_attention_plan *plan)
{
    return plan->s.group * plan->s.d.seq_q <= KILN_DECODE_MAX_ROWS;
}

/* The CPU's decoding kernel: a CPU device of a backend that runs vector
   kernels, whose profile does not route attention to flash. */
static int cpu_decode_applies(const struct kiln_attention_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    return ctx->vector_kernels && ctx->desc.type == KILN_DEVICE_CPU &&
           kiln_profile_params(ctx->profile)->select.attention_route != KILN_ATTENTION_ROUTE_FLASH;
}

static long wg_local_bytes(long bn, long rows, long head_dim, long parts)
{
    /* The queries, the padded key tile, the value tile, the scores' parts
       and three values per row, floats. */
    return 4 * (rows * head_dim + bn * (head_dim + 1) + bn * head_dim + parts * rows * bn + 3 * rows);
}

/* The parts of a dot product of head dimension d for wg work-items scoring
   rows x bn (row, key) pairs: the most, a power of two dividing d with
   parts of at least four values, that the work-items hold at once. */
static long wg_parts(long wg, long rows, long bn, long d)
{
    long parts = 1;
    while (parts * 2 * rows * bn <= wg && d % (parts * 2) == 0 && d / (parts * 2) >= 4)
        parts *= 2;
    return parts;
}

/* The work-group decoding kernel's geometry for this problem: the profile's
   work-items halved to the device's limit, its keys per tile halved while
   the tiles exceed the device's local memory, and the parts of a dot
   product (wg_parts) that keep the work-items busy with the rows' scores;
   0 where even one key a tile does not fit. */
static int wg_geometry(const struct kiln_attention_plan *plan, const struct kiln_param_attention_decode_wg *a, long *wg,
                       long *bn, long *parts)
{
    const kiln_context *ctx = plan->base.ctx;
    const long rows = (long)(plan->s.group * plan->s.d.seq_q), d = (long)plan->s.d.head_dim;
    const unsigned long long local = ctx->desc.local_mem_bytes;
    *wg = a->wg, *bn = a->block_kv;
    while (*wg > 1 && ctx->desc.max_work_group_size && (size_t)*wg > ctx->desc.max_work_group_size)
        *wg /= 2;
    *parts = wg_parts(*wg, rows, *bn, d);
    while (local && (unsigned long long)wg_local_bytes(*bn, rows, d, *parts) > local && *bn > 1)
        *bn /= 2, *parts = wg_parts(*wg, rows, *bn, d);
    return !local || (unsigned long long)wg_local_bytes(*bn, rows, d, *parts) <= local;
}

/* The work-group decoding kernel for GPUs: where the flash kernel would
   take the problem (a device other than a CPU, or the flash route) on a
   backend that runs vector kernels, with a head dimension of whole vectors
   of four up to 256, the profile's attention.decode_wg wg above 0 and tiles
   that fit the device. */
static int wg_decode_applies(struct kiln_attention_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    const kiln_attention_desc *d = &plan->s.d;
    const struct kiln_param_attention_decode_wg *a;
    long wg, bn, parts;
    return ctx->vector_kernels && !cpu_decode_applies(plan) && d->head_dim % 4 == 0 &&
           d->head_dim <= KILN_DECODE_MAX_HEAD_DIM &&
           kiln_attention_params(plan, KILN_GROUP_attention_decode_wg, &a) == KILN_SUCCESS && a->wg > 0 &&
           wg_geometry(plan, a, &wg, &bn, &parts);
}

int kiln_attention_decode_applies(struct kiln_attention_plan *plan)
{
    /* A CPU's kernel (a work-item a work-group, vectors for lanes) where the
       profile does not route attention to flash; the CUDA backend's (warps
       over the keys); the work-group kernel for GPUs. Where none applies,
       devices of the OpenCL backend other than CPUs take the flash kernel,
       which splits the keys the same way, whatever their route
       (attention_fused.c). */
    if (!kiln_attention_decodes(plan))
        return 0;
    return cpu_decode_applies(plan) || cuda_decode_applies(plan) || wg_decode_applies(plan);
}

/* The CUDA decoding kernel's plan: blocks of the profile's warps, halved
   while their states exceed the device's static shared memory (the schema
   fits them at 8 rows of head dimension 128), splits giving about eight
   blocks per compute unit, none shorter than split_kv keys. */
static kiln_status cuda_decode_prepare(struct kiln_attention_plan *plan, const struct kiln_param_attention_decode *a)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const unsigned long long local = plan->base.ctx->desc.local_mem_bytes;
    long warps = a->warps;
    while (warps > 1 && local &&
           (unsigned long long)kiln_attention_decode_shared_bytes(warps, (long)(s->group * d->seq_q),
                                                                  (long)d->head_dim) > local)
        warps /= 2;
    const char *why = NULL;
    /* Splits giving one wave of blocks, about 8 warps per SM (a block of 8
       warps takes 222 registers a thread, so one fits an SM), the fewest
       keys per block that keeps every SM busy: on an H200 (132 SMs; H32/KV8,
       d128, fp32) the best of splits of 256 to 8192 keys at every batch
       from 1 to 32 (docs/cuda.md). */
    const int split_len = kiln_attention_split_keys(plan, d->batch * d->kv_heads, kiln_attention_blocks_per_sm(warps),
                                                    KILN_SPLIT_ONE_WAVE, a->split_kv, warps, &why);
    kiln_status st;
    if ((st = kiln_attention_split_prepare(plan, split_len, 1)) != KILN_SUCCESS ||
        (st = kiln_attention_params(plan, KILN_GROUP_attention_decode, &a)) != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_options_add(
        &options, "-DKILN_DECODE_WARPS=%ld -DKILN_DECODE_ROWS=%zu -DKILN_DECODE_D=%zu -DKILN_DECODE_SPLIT=%d%s", warps,
        s->group * d->seq_q, d->head_dim, plan->splits > 1, d->dtype == KILN_BF16 ? " -DKILN_MIN_ARCH=80" : "");
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, 0, "attention/attention_decode.cu", &options, "attention_decode");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    plan->decoding = 1;
    plan->global[0] = (size_t)plan->splits * (size_t)warps * 32, plan->global[1] = d->batch * d->kv_heads;
    plan->local[0] = (size_t)warps * 32, plan->local[1] = 1;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_decode_%zux%ld", s->group * d->seq_q, warps);
    snprintf(plan->base.params, sizeof plan->base.params, "rows=%zu warps=%ld BN=%ld D=%zu splits=%d of %d keys (%s)%s",
             s->group * d->seq_q, warps, warps, d->head_dim, plan->splits, split_len, why, merged(plan));
    size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len,
             "; decoding: %zu rows per kv head, warps over the keys", s->group * d->seq_q);
    return KILN_SUCCESS;
}

/* The work-group decoding kernel's plan: its geometry (wg_geometry), splits
   giving about eight work-groups per compute unit, none shorter than eight
   tiles, each whole tiles: the CUDA decoding kernel's rule. On an H200
   through NVIDIA's OpenCL (wg 256, 32 keys a tile; H32/KV8, d128) one query
   over 8192 keys took 0.098, 0.076, 0.069-0.073 and 0.085 ms in splits of
   64, 128, 256 and 512 keys, and batch 8 over 4096 keys 0.184 ms in splits
   of 256 against 0.212 in the 832 that two work-groups per compute unit
   (all resident in one wave) gave: more waves of work-groups, not fewer. */
static kiln_status wg_decode_prepare(struct kiln_attention_plan *plan)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const size_t rows = s->group * d->seq_q;
    const struct kiln_param_attention_decode_wg *a;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_attention_decode_wg, &a);
    if (st != KILN_SUCCESS)
        return st;
    long wg, bn, parts;
    wg_geometry(plan, a, &wg, &bn, &parts);
    const char *why = NULL;
    const int split_len = kiln_attention_split_keys(plan, d->batch * d->kv_heads, 8, KILN_SPLIT_FILL, 8 * bn, bn, &why);
    if ((st = kiln_attention_split_prepare(plan, split_len, 1)) != KILN_SUCCESS ||
        (st = kiln_attention_params(plan, KILN_GROUP_attention_decode_wg, &a)) != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_options_add(&options,
                     "-DKILN_DWG_WG=%ld -DKILN_DWG_BN=%ld -DKILN_DWG_ROWS=%zu -DKILN_DWG_D=%zu -DKILN_DWG_PARTS=%ld "
                     "-DKILN_DWG_SPLIT=%d",
                     wg, bn, rows, d->head_dim, parts, plan->splits > 1);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, 0, WG_SOURCE, &options, "attention_f32_decode_wg");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    plan->decoding = 1;
    plan->global[0] = (size_t)plan->splits * (size_t)wg, plan->global[1] = d->batch * d->kv_heads;
    plan->local[0] = (size_t)wg, plan->local[1] = 1;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_f32_decode_wg_%zux%ld", rows, bn);
    snprintf(plan->base.params, sizeof plan->base.params, "rows=%zu WG=%ld BN=%ld D=%zu parts=%ld local=%ld", rows, wg,
             bn, d->head_dim, parts, wg_local_bytes(bn, (long)rows, (long)d->head_dim, parts));
    kiln_attention_split_describe(plan, split_len, why);
    size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len,
             "; decoding: %zu rows per kv head, a work-group over each split's keys", rows);
    return KILN_SUCCESS;
}

kiln_status kiln_attention_decode_prepare(struct kiln_attention_plan *plan)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    const struct kiln_param_attention_decode *a;
    kiln_status st = kiln_attention_params(plan, KILN_GROUP_attention_decode, &a);
    if (st != KILN_SUCCESS)
        return st;
    if (!plan->base.ctx->vector_kernels && cuda_decode_applies(plan))
        return cuda_decode_prepare(plan, a);
    if (!cpu_decode_applies(plan))
        return wg_decode_prepare(plan);
    /* The profile's vector width, halved until it divides the head
       dimension; the kernel's steps are one vector of keys. */
    long vw = a->vw;
    while (d->head_dim % (size_t)vw != 0)
        vw /= 2;
    /* kv heads per work-item: where the kv heads of a key are adjacent
       (BSHD), a work-item taking several reads a longer run of each row. */
    size_t hk = 1;
    if (s->kv_stride[1] == d->head_dim)
        for (size_t c = (size_t)a->heads; c > 1 && hk == 1; c--)
            if (d->kv_heads % c == 0)
                hk = c;
    const char *why = NULL;
    const int split_len =
        kiln_attention_split_keys(plan, d->batch * d->kv_heads / hk, 4, KILN_SPLIT_FILL, a->split_kv, vw, &why);
    /* The combine kernel in slot 1; it consults util, so the decoding group
       is consulted again last (the plan's param_set names it). */
    if ((st = kiln_attention_split_prepare(plan, split_len, 1)) != KILN_SUCCESS ||
        (st = kiln_attention_params(plan, KILN_GROUP_attention_decode, &a)) != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    /* Keys fetched ahead, whole steps: touched line by line where a
       work-item takes one kv head; where it takes several, reading whole
       rows, only the first line of each page prefetched (touching every
       line cost more than it saved: H32/KV8, 8192 keys, d128 on a Zen 3,
       8 heads a work-item: 6.2-6.9 ms without, 7.1-8.1 touching 8 to 32
       keys ahead; cl/attention/attention_f32_decode.cl has the prefetch's
       figures). */
    const long ahead = (a->ahead + vw - 1) / vw * vw;
    /* With several kv heads and at least 4 rows, each load's line stream
       keys on is prefetched beside it instead (attention.decode.stream): a
       key's arithmetic then hides the misses; with 1 or 2 rows it has too
       little, and the prefetches only cost (the kernel's comment has the
       figures). */
    const size_t rows = s->group * d->seq_q;
    const long stream = hk > 1 && rows >= 4 ? a->stream : 0;
    /* Streaming, the same lines stream_l2 keys on go to L2 as well
       (attention.decode.stream_l2): more misses in flight than the L1's. */
    const long stream_l2 = stream ? a->stream_l2 : 0;
    kiln_options_add(&options,
                     "-DKILN_DECODE_VW=%ld -DKILN_DECODE_D=%zu -DKILN_DECODE_ROWS=%zu -DKILN_DECODE_SPLIT=%d"
                     " -DKILN_DECODE_AHEAD=%ld -DKILN_DECODE_PREFETCH=%ld -DKILN_DECODE_STREAM=%ld"
                     " -DKILN_DECODE_STREAM_L2=%ld -DKILN_DECODE_HEADS=%zu",
                     vw, d->head_dim, rows, plan->splits > 1, hk > 1 ? 0 : ahead, hk > 1 && !stream ? ahead : 0, stream,
                     stream_l2, hk);
    kiln_attention_switches(s, &options);
    st = kiln_plan_kernel(&plan->base, 0, SOURCE, &options, "attention_f32_decode");
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    plan->decoding = 1;
    plan->global[0] = (size_t)plan->splits, plan->global[1] = d->batch * d->kv_heads / hk;
    plan->local[0] = plan->local[1] = 1;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "attention_f32_decode_%zux%ld", rows, vw);
    char l2[32] = "";
    if (stream_l2)
        snprintf(l2, sizeof l2, " stream_l2=%ld", stream_l2);
    snprintf(plan->base.params, sizeof plan->base.params,
             "rows=%zu VW=%ld D=%zu %s=%ld%s kv heads=%zu splits=%d of %d keys (%s)%s", rows, vw, d->head_dim,
             stream   ? "stream"
             : hk > 1 ? "prefetch"
                      : "ahead",
             stream ? stream : ahead, l2, hk, plan->splits, split_len, why, merged(plan));
    size_t len = strlen(plan->base.reason);
    snprintf(plan->base.reason + len, sizeof plan->base.reason - len, "; decoding: %zu rows per kv head", rows);
    return KILN_SUCCESS;
}
