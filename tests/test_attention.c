/*
 * Attention through the public API against the plain-C reference of
 * attention_ref.h: a shape table run with the fused and the naive algorithm
 * (one test per row and algorithm, named by its shape) -- sequence lengths
 * around the blocks, decoding, query and key lengths that differ, causal
 * masking with both, grouped- and multi-query heads, head dimensions 1 to
 * 256, key lengths, the three mask extents, both layouts, fp16 storage, and
 * logits large enough to overflow a naive exp -- then AUTO, events, plan
 * reuse, the one-shot call, the naive algorithm's memory limit, and tables
 * of bad descriptors and bad executions that must fail with a specific
 * status and write nothing.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "core/context.h"
#include "ops/attention.h"
#include "profiles/profile.h"
#include "test_util.h"

#define POISON_PLAN ((kiln_attention_plan *)(uintptr_t)0x5a5a)

#define BSHD KILN_BSHD
#define BHSD KILN_BHSD
#define F16 KILN_F16
#define BF16 KILN_BF16
#define M_QK KILN_ATTENTION_MASK_QK
#define M_BQK KILN_ATTENTION_MASK_BQK
#define M_BHQK KILN_ATTENTION_MASK_BHQK

/* Q scale of the numerically hard rows: scores reach several hundred, and
   exp of them overflows fp32 unless the row maximum is subtracted first. */
#define HARD 2000.0f

/* ------------------------------------------------------------------------ */
/* The shape table                                                          */
/* ------------------------------------------------------------------------ */

/* On this machine's profile the fused kernel takes 32 query rows (2 vectors
   of 16) per work-item and 8 keys per block; generic-cpu 8 rows and 4 keys.
   Lengths below, at and past those, and not multiples of either. */
static const struct ar_row rows[] = {
    /* Sequence lengths. */
    {AR_SHAPE("seq 1", BSHD, 1, 2, 2, 1, 1, 64), .lse = 1},
    {AR_SHAPE("seq 17", BSHD, 2, 2, 2, 17, 17, 64)},
    {AR_SHAPE("seq 100", BHSD, 1, 3, 3, 100, 100, 64), .lse = 1},
    {AR_SHAPE("seq 255", BSHD, 1, 2, 2, 255, 255, 64)},
    {AR_SHAPE("seq 1000", BHSD, 1, 2, 2, 1000, 1000, 64), .lse = 1},
    /* Query length 1 (decoding) and lengths that differ. */
    {AR_SHAPE("decode", BSHD, 2, 4, 4, 1, 1000, 128), .lse = 1},
    {AR_SHAPE("decode gqa", BHSD, 2, 8, 2, 1, 300, 64), .lse = 1},
    {AR_SHAPE("decode mqa", BSHD, 1, 8, 1, 1, 255, 128)},
    {AR_SHAPE("q < kv", BSHD, 1, 2, 2, 17, 100, 64)},
    {AR_SHAPE("q > kv", BHSD, 1, 2, 2, 100, 17, 64), .lse = 1},
    /* Short query blocks (speculative decoding), lengths a split of keys
       does not divide, keys shorter than one split. */
    {AR_SHAPE("short q causal", BSHD, 1, 4, 2, 3, 200, 64), .causal = 1, .lse = 1},
    {AR_SHAPE("short q mask", BHSD, 2, 2, 2, 4, 90, 32), .mask = M_BHQK, .causal = 1, .lse = 1},
    {AR_SHAPE("decode key lengths", BSHD, 4, 4, 2, 1, 300, 64), .key_lengths = 1, .lse = 1},
    {AR_SHAPE("decode short keys", BHSD, 1, 8, 8, 1, 9, 128), .lse = 1},
    {AR_SHAPE("decode dim 80", BSHD, 1, 6, 2, 2, 150, 80), .causal = 1, .mask = M_QK, .lse = 1},
    /* Grouped-query decoding whose kv heads share a work-item and whose
       rows (4) take the streaming prefetch on CPU devices, with key lengths
       ending the rows streamed ahead, in each storage. */
    {AR_SHAPE("decode gqa streamed", BSHD, 3, 8, 2, 1, 300, 128), .key_lengths = 1, .lse = 1},
    /* Causal masking, aligned to the end of the keys. */
    {AR_SHAPE("causal", BSHD, 1, 2, 2, 100, 100, 64), .causal = 1, .lse = 1},
    {AR_SHAPE("causal q < kv", BHSD, 1, 2, 2, 33, 255, 64), .causal = 1, .lse = 1},
    {AR_SHAPE("causal q > kv", BSHD, 1, 2, 2, 100, 17, 64), .causal = 1, .lse = 1},
    {AR_SHAPE("causal decode", BSHD, 2, 4, 4, 1, 100, 64), .causal = 1, .lse = 1},
    {AR_SHAPE("causal 1000", BSHD, 1, 1, 1, 1000, 1000, 64), .causal = 1},
    /* Grouped-query and multi-query heads. */
    {AR_SHAPE("gqa", BSHD, 2, 8, 2, 100, 100, 64)},
    {AR_SHAPE("gqa causal", BHSD, 1, 6, 2, 77, 77, 80), .causal = 1, .lse = 1},
    {AR_SHAPE("mqa causal", BHSD, 1, 4, 1, 64, 64, 64), .causal = 1},
    /* Head dimensions (64 and 128 compiled in, the others a run-time bound). */
    {AR_SHAPE("dim 1", BSHD, 1, 2, 2, 33, 40, 1), .lse = 1},
    {AR_SHAPE("dim 16", BSHD, 1, 2, 2, 100, 100, 16)},
    {AR_SHAPE("dim 80", BSHD, 1, 2, 1, 100, 100, 80)},
    {AR_SHAPE("dim 128", BHSD, 1, 2, 2, 100, 100, 128), .causal = 1},
    {AR_SHAPE("dim 200", BHSD, 1, 1, 1, 65, 70, 200)},
    {AR_SHAPE("dim 256", BSHD, 1, 1, 1, 100, 100, 256), .lse = 1},
    /* Key lengths (the first batch item full, the second above seq_kv, the
       third negative: both clamped), with and without causal masking. */
    {AR_SHAPE("key lengths", BSHD, 4, 2, 2, 50, 100, 64), .key_lengths = 1, .lse = 1},
    {AR_SHAPE("key lengths causal", BHSD, 3, 2, 1, 100, 100, 64), .causal = 1, .key_lengths = 1, .lse = 1},
    /* Additive masks of each extent (about one entry in eight -inf). */
    {AR_SHAPE("mask qk", BSHD, 1, 2, 2, 33, 100, 64), .mask = M_QK, .lse = 1},
    {AR_SHAPE("mask bqk", BHSD, 2, 2, 2, 33, 100, 64), .mask = M_BQK},
    {AR_SHAPE("mask bhqk", BSHD, 2, 4, 2, 40, 40, 64), .mask = M_BHQK, .causal = 1, .key_lengths = 1, .lse = 1},
    /* Logits that overflow a naive exp in fp32. */
    {AR_SHAPE("hard", BSHD, 1, 2, 2, 100, 100, 64), .logits = HARD, .lse = 1},
    {AR_SHAPE("hard causal", BHSD, 1, 2, 2, 100, 100, 128), .causal = 1, .logits = HARD, .lse = 1},
    {AR_SHAPE("hard mask", BSHD, 1, 2, 2, 33, 70, 64), .mask = M_BHQK, .logits = HARD, .lse = 1},
    /* fp16 storage, fp32 arithmetic. */
    {AR_SHAPE("f16", BSHD, 1, 2, 2, 100, 100, 64), .dtype = F16},
    {AR_SHAPE("f16 gqa causal", BHSD, 2, 4, 2, 33, 255, 80), .dtype = F16, .causal = 1, .lse = 1},
    {AR_SHAPE("f16 decode", BSHD, 2, 4, 1, 1, 300, 128), .dtype = F16, .key_lengths = 1},
    {AR_SHAPE("f16 decode gqa", BSHD, 2, 8, 2, 1, 200, 64), .dtype = F16, .mask = M_BHQK, .lse = 1},
    {AR_SHAPE("f16 hard", BSHD, 1, 2, 2, 64, 64, 64), .dtype = F16, .logits = HARD, .lse = 1},
    {AR_SHAPE("bf16", BSHD, 1, 2, 2, 100, 100, 64), .dtype = BF16},
    {AR_SHAPE("bf16 gqa causal", BHSD, 2, 4, 2, 33, 255, 80), .dtype = BF16, .causal = 1, .lse = 1},
    {AR_SHAPE("bf16 decode", BSHD, 2, 4, 1, 1, 300, 128), .dtype = BF16, .key_lengths = 1},
    {AR_SHAPE("bf16 decode gqa", BSHD, 2, 8, 2, 1, 200, 64), .dtype = BF16, .key_lengths = 1, .lse = 1},
    {AR_SHAPE("bf16 mask", BHSD, 1, 2, 2, 17, 40, 32), .dtype = BF16, .mask = M_BQK},
};

struct row_test {
    const struct ar_row *row;
    kiln_attention_algo algo;
    int flash; /* the fused algorithm on the flash route (select.attention_route) */
};

static void run_case_on(kiln_context *ctx, kiln_attention_plan *plan, const kiln_attention_desc *d, float logits,
                        const char *label)
{
    struct ar_case t;
    ar_case_init(&t, ctx, d);
    ar_case_fill(&t, logits > 0.0f ? logits : 1.0f, 1, &kt_group_seed);
    kt_assert_status(ar_case_execute(&t, plan, NULL), KILN_SUCCESS);
    ar_case_check(&t, label);
    ar_case_free(&t);
}

static void run_case(kiln_attention_plan *plan, const kiln_attention_desc *d, float logits, const char *label)
{
    run_case_on(kt_ctx, plan, d, logits, label);
}

/* Whether `kernel` (a plan's kernel name, "attention_f32_decode_4x8") is
   of `family` ("attention_f32_decode", a trailing '_' allowed): the family
   followed by '_' and its block's digits, so that the CPU's decoding
   kernel is not taken for the work-group one ("attention_f32_decode_wg_4x32"). */
static int kernel_of(const char *kernel, const char *family)
{
    size_t n = strlen(family);
    if (n && family[n - 1] == '_')
        n--;
    return strncmp(kernel, family, n) == 0 && kernel[n] == '_' && kernel[n + 1] >= '0' && kernel[n + 1] <= '9';
}

/* Whether ctx's device runs `d` on the CUDA backend's decoding kernel: at
   most 8 rows per (batch, kv head), a head dimension of whole vectors of 4
   up to 256, bf16 from compute capability 8.0 (src/ops/attention_decode.c). */
static int cuda_decodes_here(kiln_context *ctx, const kiln_attention_desc *d)
{
    const int cc = kt_cuda_cc(ctx);
    return cc > 0 && d->heads / d->kv_heads * d->seq_q <= 8 && d->head_dim % 4 == 0 && d->head_dim <= 256 &&
           (d->dtype != KILN_BF16 || cc >= 80);
}

/* Whether ctx runs `d` on the work-group decoding kernel for GPUs: at most
   8 rows per (batch, kv head), a head dimension of whole vectors of 4 up to
   256, a backend with vector kernels, where the CPU's decoding kernel does
   not take it (a device other than a CPU, or the flash route) and the
   profile's attention.decode_wg wg is above 0 (src/ops/attention_decode.c). */
static int wg_decodes_here(kiln_context *ctx, const kiln_attention_desc *d)
{
    const struct kiln_params *p = kiln_profile_params(ctx->profile);
    return ctx->vector_kernels &&
           (ctx->desc.type != KILN_DEVICE_CPU || p->select.attention_route == KILN_ATTENTION_ROUTE_FLASH) &&
           p->attention_decode_wg.wg > 0 && d->heads / d->kv_heads * d->seq_q <= 8 && d->head_dim % 4 == 0 &&
           d->head_dim <= 256;
}

/* Whether ctx's device runs `d` on the tensor-core kernel (and not the
   decoding one): the CUDA backend
   on compute capability 8.0 or newer, 16-bit storage, a head dimension a
   multiple of 8 up to 128 (src/ops/attention_mma.c). */
static int mma_runs_here(kiln_context *ctx, const kiln_attention_desc *d)
{
    return kt_cuda_cc(ctx) >= 80 && d->dtype != KILN_F32 && d->head_dim % 8 == 0 && d->head_dim <= 128 &&
           !cuda_decodes_here(ctx, d);
}

/* The plan for `d` chose `algo` (FUSED for AUTO) and says what it runs: the
   fused kernel holds no memory, the naive algorithm at least its score
   matrix. */
static void assert_plan_describes(const kiln_attention_plan *plan, const kiln_attention_desc *d)
{
    kiln_attention_plan_info info;
    memset(&info, 0, sizeof info);
    kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
    const kiln_attention_algo want = d->algo == KILN_ATTENTION_NAIVE ? KILN_ATTENTION_NAIVE : KILN_ATTENTION_FUSED;
    assert_int_equal(info.algo, want);
    assert_string_equal(info.name, want == KILN_ATTENTION_FUSED ? "fused" : "naive");
    assert_true(info.kernel[0] && info.params[0] && info.profile[0] && info.reason[0]);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    assert_string_equal(info.profile, dev.profile);
    /* Decoding off a CPU: a kernel that splits the keys whatever the
       profile's route (the CUDA backend's decoding or tensor-core kernels,
       the work-group decoding kernel, else the flash kernel where its
       blocks fit the device). */
    const char *split_kernel = wg_decodes_here(kt_ctx, d) ? "attention_f32_decode_wg_" : "attention_f32_flash_";
    if (want == KILN_ATTENTION_FUSED && dev.type != KILN_DEVICE_CPU && d->heads / d->kv_heads * d->seq_q <= 8 &&
        !cuda_decodes_here(kt_ctx, d) && !mma_runs_here(kt_ctx, d) && !strstr(info.reason, "flash blocks:") &&
        !kernel_of(info.kernel, split_kernel))
        fail_msg("decoding on this device planned %s (%s; %s), not %s", info.kernel, info.params, info.reason,
                 split_kernel);
    /* The fused kernels hold no memory but their splits' partial outputs. */
    if (want == KILN_ATTENTION_FUSED)
        assert_true((info.workspace_bytes == 0) ==
                    (!strstr(info.params, "splits=") || strstr(info.params, "splits=1 ") != NULL));
    else
        assert_true(info.workspace_bytes >= d->batch * d->heads * d->seq_q * d->seq_kv * sizeof(float));
}

static void test_row(void **state)
{
    const struct row_test *rt = *state;
    kiln_attention_desc d = ar_desc_of(rt->row, rt->algo);
    kiln_attention_plan *plan = NULL;
    if (!rt->flash) {
        kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        assert_plan_describes(plan, &d);
        run_case(plan, &d, rt->row->logits, rt->row->what);
        kiln_attention_plan_destroy(plan);
        return;
    }
    /* This profile's attention.flash blocks on this device; where the
       work-group decoding kernel takes the row, again without it (its wg
       0), on the flash kernel. */
    for (int wg = 1; wg >= 0; wg--) {
        kiln_context *ctx = kt_overlay_context("{\"select\": {\"attention_route\": \"flash\"}%s}",
                                               wg ? "" : ", \"kernels\": {\"attention.decode_wg\": {\"wg\": 0}}");
        kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_attention_plan_info info;
        kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
        /* The CUDA backend's decoding and tensor-core kernels whatever the
           route. */
        const int by_wg = wg_decodes_here(ctx, &d);
        const char *want = cuda_decodes_here(ctx, &d) ? "attention_decode_"
                           : mma_runs_here(ctx, &d)   ? "attention_f16_mma_"
                           : by_wg                    ? "attention_f32_decode_wg_"
                                                      : "attention_f32_flash_";
        const int split = strstr(info.params, "splits=") && !strstr(info.params, "splits=1 ");
        if (!kernel_of(info.kernel, want) || (info.workspace_bytes != 0) != split)
            fail_msg("the flash route (decode wg %d) planned %s (%s, %s), workspace %zu", wg, info.kernel, info.params,
                     info.reason, info.workspace_bytes);
        char label[160];
        snprintf(label, sizeof label, "%s on %s", rt->row->what, info.kernel);
        run_case_on(ctx, plan, &d, rt->row->logits, label);
        kiln_attention_plan_destroy(plan);
        kiln_context_destroy(ctx);
        if (!by_wg)
            break;
    }
}

/* Keys split over work-items (KILN_ATTENTION_SPLIT_KV), on the decoding
   kernel and on the flash route: short splits, a length no key count here
   is a multiple of, and longer than some rows' keys; key lengths and
   causal masking leave whole splits hidden. Where this context does not
   run the decoding kernel (the flash route, no vector kernels), that half
   is skipped. */
static void split_kv_on(kiln_context *ctx, const struct ar_row *r, const char *kernel)
{
    static const char *const lengths[] = {"16", "40", "1"};
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        setenv("KILN_ATTENTION_SPLIT_KV", lengths[i], 1);
        kiln_attention_desc d = ar_desc_of(r, KILN_ATTENTION_AUTO);
        kiln_attention_plan *plan = NULL;
        kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        unsetenv("KILN_ATTENTION_SPLIT_KV");
        kiln_attention_plan_info info;
        kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
        if (!kernel_of(info.kernel, kernel)) {
            kiln_attention_plan_destroy(plan);
            printf("# %s: not %s here (%s)\n", r->what, kernel, info.kernel);
            return;
        }
        /* The splits the plan took ("splits=1" or none: one). */
        const char *splits = strstr(info.params, "splits=");
        long n = 1, keys = (long)d.seq_kv;
        if (splits)
            n = strtol(splits + 7, NULL, 10), keys = strtol(strstr(splits, " of ") + 4, NULL, 10);
        /* The length asked for, rounded up to the kernel's step (the
           decoding kernel's VW keys, the flash kernel's BN), at most all
           the keys rounded so. */
        const char *step_at = strstr(info.params, strstr(info.params, "VW=") ? "VW=" : "BN=");
        assert_non_null(step_at);
        const long step = atol(step_at + 3), whole = ((long)d.seq_kv + step - 1) / step * step;
        long want = (atol(lengths[i]) + step - 1) / step * step;
        want = want > whole ? whole : want;
        if (n != ((long)d.seq_kv + want - 1) / want || (n > 1 && keys != want))
            fail_msg("%s: %s, %ld splits of %ld keys, wanted splits of %ld (step %ld)", r->what, info.params, n, keys,
                     want, step);
        assert_true((info.workspace_bytes == 0) == (n == 1));
        /* The combine's work-items: an element of O each on GPUs, a row on
           CPUs (src/ops/attention_decode.c). */
        const char *merged = ctx->desc.type == KILN_DEVICE_CPU ? "merged a row" : "merged an element";
        if (n > 1 && !strstr(info.params, merged))
            fail_msg("%s: %s, wanted \"%s\"", r->what, info.params, merged);
        char label[96];
        snprintf(label, sizeof label, "%s, %s, %ld splits of %ld keys", r->what, kernel, n, keys);
        run_case_on(ctx, plan, &d, r->logits, label);
        kiln_attention_plan_destroy(plan);
    }
}

/* The decoding kernel taking several kv heads per work-item
   (attention.decode heads): the largest divisor of the kv heads up to the
   profile's value where K's heads are adjacent in a key's row (BSHD), one
   in BHSD; with several and at least 4 rows it prefetches each line
   `stream` keys on beside its load (attention.decode stream, none at 0),
   else whole pages `ahead` (several kv heads) or touches rows ahead (one);
   each with the splits above. */
static void decode_heads_on(const struct ar_row *r, int heads, int stream)
{
    kiln_context *ctx =
        kt_overlay_context("{\"kernels\": {\"attention.decode\": {\"heads\": %d, \"stream\": %d}}}", heads, stream);
    kiln_attention_desc d = ar_desc_of(r, KILN_ATTENTION_AUTO);
    kiln_attention_plan *plan = NULL;
    kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_attention_plan_info info;
    kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
    if (kernel_of(info.kernel, "attention_f32_decode")) {
        size_t want = 1;
        for (size_t c = (size_t)heads; d.layout == KILN_BSHD && c > 1 && want == 1; c--)
            if (d.kv_heads % c == 0)
                want = c;
        const char *at = strstr(info.params, "kv heads=");
        if (!at || strtoul(at + 9, NULL, 10) != want)
            fail_msg("%s, heads %d: \"%s\", wanted %zu kv heads a work-item", r->what, heads, info.params, want);
        char fetch[32];
        const size_t nrows = d.heads / d.kv_heads * d.seq_q;
        if (want > 1 && nrows >= 4 && stream > 0)
            snprintf(fetch, sizeof fetch, " stream=%d ", stream);
        else
            snprintf(fetch, sizeof fetch, " %s=", want > 1 ? "prefetch" : "ahead");
        if (!strstr(info.params, fetch))
            fail_msg("%s, heads %d, stream %d: \"%s\", wanted \"%s\"", r->what, heads, stream, info.params, fetch);
        split_kv_on(ctx, r, "attention_f32_decode");
    }
    kiln_attention_plan_destroy(plan);
    kiln_context_destroy(ctx);
}

static void test_split_kv(void **state)
{
    const struct ar_row *r = *state;
    split_kv_on(kt_ctx, r, "attention_f32_decode");
    decode_heads_on(r, 64, 8);
    decode_heads_on(r, 3, 5);
    decode_heads_on(r, 64, 0);
    kiln_context *ctx = kt_overlay_context("{\"select\": {\"attention_route\": \"flash\"}}");
    split_kv_on(ctx, r, "attention_f32_decode_wg");
    kiln_context_destroy(ctx);
    /* The combine kernel as GPUs take it, a work-item an element of O
       merging 16 splits a pass, on this device taken for a GPU; tiles of 4
       keys, so that splits of one key (rounded to 4) make more than 16 of
       them. */
    ctx = kt_overlay_context("{\"select\": {\"attention_route\": \"flash\"}, "
                             "\"kernels\": {\"attention.decode_wg\": {\"block_kv\": 4}}}");
    ctx->desc.type = KILN_DEVICE_GPU;
    split_kv_on(ctx, r, "attention_f32_decode_wg");
    kiln_context_destroy(ctx);
    ctx = kt_overlay_context(
        "{\"select\": {\"attention_route\": \"flash\"}, \"kernels\": {\"attention.decode_wg\": {\"wg\": 0}}}");
    split_kv_on(ctx, r, "attention_f32_flash");
    kiln_context_destroy(ctx);
    /* The CUDA backend's decoding kernel, and the tensor-core kernel in
       16-bit storage, where this device runs them. */
    kiln_attention_desc d = ar_desc_of(r, KILN_ATTENTION_AUTO);
    if (cuda_decodes_here(kt_ctx, &d))
        split_kv_on(kt_ctx, r, "attention_decode_");
    struct ar_row h = *r;
    h.dtype = r->dtype == KILN_F32 ? KILN_F16 : r->dtype;
    d = ar_desc_of(&h, KILN_ATTENTION_AUTO);
    if (mma_runs_here(kt_ctx, &d))
        split_kv_on(kt_ctx, &h, "attention_f16_mma");
}

/* The work-group decoding kernel's geometry (src/ops/attention_decode.c):
   the profile's work-items halved to the device's limit, keys per tile
   halved to its local memory, the dot products in parts where the rows'
   scores would leave work-items idle, and the flash kernel (or the fused
   one) where even one key a tile does not fit. The device's limits are
   lowered in the context's description (never raised: the kernels must
   launch on it); every plan's result is checked. */
static void test_decode_wg_geometry(void **state)
{
    (void)state;
    static const struct ar_row eight = {AR_SHAPE("8 rows d256", BSHD, 2, 8, 1, 1, 300, 256), .key_lengths = 1,
                                        .lse = 1},
                               one = {AR_SHAPE("1 row d64", BHSD, 1, 2, 2, 1, 150, 64), .causal = 1};
    static const struct {
        const struct ar_row *row;
        unsigned long long local;
        size_t max_wg;
        const char *want; /* in the params; NULL: not this kernel */
    } cases[] = {
        {&eight, 48 << 10, 0, "WG=256 BN=16 D=256 parts=2 "}, {&eight, 48 << 10, 64, "WG=64 BN=16 D=256 parts=1 "},
        {&eight, 16 << 10, 0, "WG=256 BN=2 D=256 parts=16 "}, {&eight, 10 << 10, 0, NULL},
        {&one, 32 << 10, 0, "WG=256 BN=32 D=64 parts=8 "},    {&one, 32 << 10, 100, "WG=64 BN=32 D=64 parts=2 "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* The combine kernel's work-groups (util wg, 256 in the GPU
           profiles) within the lowered limits too. */
        kiln_context *ctx =
            kt_overlay_context("{\"select\": {\"attention_route\": \"flash\"}, \"kernels\": {\"util\": {\"wg\": 64}}}");
        kiln_attention_desc d = ar_desc_of(cases[i].row, KILN_ATTENTION_AUTO);
        if (!wg_decodes_here(ctx, &d)) {
            printf("# skipped: this device does not run the work-group decoding kernel\n");
            kiln_context_destroy(ctx);
            skip();
        }
        /* Limits at or below any GPU's this test expects (32 KiB of local
           memory, 256 work-items), so the kernels also launch there. */
        if (ctx->desc.local_mem_bytes < cases[i].local || ctx->desc.max_work_group_size < 256) {
            printf("# skipped: the device has less than %llu bytes of local memory or 256 work-items a work-group\n",
                   cases[i].local);
            kiln_context_destroy(ctx);
            skip();
        }
        ctx->desc.local_mem_bytes = cases[i].local;
        if (cases[i].max_wg)
            ctx->desc.max_work_group_size = cases[i].max_wg;
        kiln_attention_plan *plan = NULL;
        const kiln_status st = kiln_attention_plan_create(ctx, &d, &plan);
        if (!cases[i].want && st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "attention.flash")) {
            /* The flash kernel, next in line, does not fit either. */
            kiln_context_destroy(ctx);
            continue;
        }
        kt_assert_status(st, KILN_SUCCESS);
        kiln_attention_plan_info info;
        kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
        const int wg = kernel_of(info.kernel, "attention_f32_decode_wg");
        if (cases[i].want ? !wg || !strstr(info.params, cases[i].want) : wg)
            fail_msg("%s, local %llu, work-groups up to %zu: %s [%s], wanted %s", cases[i].row->what, cases[i].local,
                     cases[i].max_wg, info.kernel, info.params, cases[i].want ? cases[i].want : "another kernel");
        char label[400];
        snprintf(label, sizeof label, "%s on %s [%s]", cases[i].row->what, info.kernel, info.params);
        run_case_on(ctx, plan, &d, 0.0f, label);
        kiln_attention_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

/* 16-bit storage takes the tensor-core kernel wherever it runs: every row
   of the table in fp16 and in bf16 (the rows whose head dimension it
   takes and that the decoding kernel does not), the plan naming it.
   Skipped on devices before compute capability 8.0, decided by the device
   alone: a probe row would skip the test wherever another kernel takes
   that row (the first row decodes). */
static void test_rows_on_tensor_cores(void **state)
{
    (void)state;
    if (kt_cuda_cc(kt_ctx) < 80) {
        printf("# skipped: the device has no tensor-core attention kernel (the CUDA backend, compute capability "
               "8.0 on)\n");
        skip();
    }
    int ran = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        for (int dtype = KILN_F16; dtype <= KILN_BF16; dtype++) {
            struct ar_row h = rows[i];
            h.dtype = (kiln_dtype)dtype;
            kiln_attention_desc d = ar_desc_of(&h, KILN_ATTENTION_AUTO);
            if (!mma_runs_here(kt_ctx, &d))
                continue;
            kiln_attention_plan *plan = NULL;
            kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
            kiln_attention_plan_info info;
            kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
            if (!kernel_of(info.kernel, "attention_f16_mma"))
                fail_msg("%s in %s: planned %s (%s)", h.what, kt_dtype_name(h.dtype), info.kernel, info.reason);
            char label[120];
            snprintf(label, sizeof label, "%s in %s on %s", h.what, kt_dtype_name(h.dtype), info.kernel);
            run_case(plan, &d, h.logits, label);
            kiln_attention_plan_destroy(plan);
            ran++;
        }
    printf("# %d rows on the tensor-core kernel\n", ran);
    assert_true(ran > 0);
}

static void row_name(char *buf, size_t size, const struct ar_row *r, kiln_attention_algo algo, int flash)
{
    static const char *const masks[] = {"", " mask=qk", " mask=bqk", " mask=bhqk"};
    snprintf(buf, size, "%s %s: b%zu h%zu/%zu q%zu kv%zu d%zu %s%s%s%s%s%s%s%s",
             algo == KILN_ATTENTION_NAIVE ? "naive"
             : flash                      ? "flash"
                                          : "fused",
             r->what, r->batch, r->heads, r->kv_heads, r->seq_q, r->seq_kv, r->dim, r->layout == BSHD ? "bshd" : "bhsd",
             r->causal ? " causal" : "", masks[r->mask], r->key_lengths ? " key-lengths" : "", r->lse ? " lse" : "",
             r->dtype != KILN_F32 ? " " : "", r->dtype != KILN_F32 ? kt_dtype_name(r->dtype) : "",
             r->logits > 0.0f ? " hard" : "");
}

/* ------------------------------------------------------------------------ */
/* Defaults, AUTO, events, reuse, one-shot, memory, rows that see nothing   */
/* ------------------------------------------------------------------------ */

/* The splits for a wanted count of work-groups: FILL the fewest reaching
   it, ONE_WAVE the most not passing it; one where the work-groups unsplit
   reach it. ONE_WAVE's rows are an H200's decoding steps (132 SMs, one block
   a SM; H32/KV8 from batch 1 to 32), each the best of splits of 256 to 8192
   keys measured there (docs/cuda.md). */
static void test_split_rule(void **state)
{
    (void)state;
    static const struct {
        size_t units, wanted, fill, one_wave;
    } cases[] = {
        {8, 132, 17, 16}, {16, 132, 9, 8}, {32, 132, 5, 4}, {64, 132, 3, 2}, {128, 132, 2, 1}, {256, 132, 1, 1},
        {132, 132, 1, 1}, {1, 8, 8, 8},    {3, 8, 3, 2},    {0, 8, 1, 1},    {5, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const size_t fill = kiln_attention_splits_for(cases[i].units, cases[i].wanted, KILN_SPLIT_FILL),
                     wave = kiln_attention_splits_for(cases[i].units, cases[i].wanted, KILN_SPLIT_ONE_WAVE);
        if (fill != cases[i].fill || wave != cases[i].one_wave)
            fail_msg("%zu work-groups, %zu wanted: %zu and %zu splits, wanted %zu and %zu", cases[i].units,
                     cases[i].wanted, fill, wave, cases[i].fill, cases[i].one_wave);
    }
}

static void test_desc_init(void **state)
{
    (void)state;
    kiln_attention_desc d;
    memset(&d, 0xa5, sizeof d);
    kiln_attention_desc_init(&d, BHSD, 2, 8, 5, 7, 64);
    assert_int_equal(d.layout, BHSD);
    assert_int_equal(d.dtype, KILN_F32);
    assert_int_equal(d.batch, 2);
    assert_int_equal(d.heads, 8);
    assert_int_equal(d.kv_heads, 8);
    assert_int_equal(d.seq_q, 5);
    assert_int_equal(d.seq_kv, 7);
    assert_int_equal(d.head_dim, 64);
    assert_true(d.scale == 0.125f);
    assert_int_equal(d.causal, 0);
    assert_int_equal(d.mask, KILN_ATTENTION_MASK_NONE);
    assert_int_equal(d.key_lengths, 0);
    assert_int_equal(d.lse, 0);
    assert_int_equal(d.algo, KILN_ATTENTION_AUTO);
    kiln_attention_desc_init(&d, BSHD, 1, 1, 1, 1, 80);
    assert_true(fabsf(d.scale - 0.1118034f) < 1e-7f);
    kiln_attention_desc_init(NULL, BSHD, 1, 1, 1, 1, 80); /* ignored */
}

static void test_auto_is_fused(void **state)
{
    (void)state;
    static const struct ar_row r = {AR_SHAPE("auto", BSHD, 2, 4, 2, 37, 45, 64), .causal = 1, .lse = 1};
    kiln_attention_desc d = ar_desc_of(&r, KILN_ATTENTION_AUTO);
    kiln_attention_plan *plan = NULL;
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    assert_plan_describes(plan, &d);
    kiln_attention_plan_info info;
    kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
    assert_non_null(strstr(info.reason, "auto"));
    run_case(plan, &d, 1.0f, "auto");
    kiln_attention_plan_destroy(plan);
}

/* The event of an execution covers all of its work: the result is complete
   when it has been waited for (fp16 makes the naive algorithm end with a
   conversion kernel, fp32 with a GEMM). */
static void test_event_completes_the_work(void **state)
{
    (void)state;
    static const struct ar_row r = {AR_SHAPE("event", BHSD, 2, 2, 1, 65, 70, 64), .causal = 1, .lse = 1};
    for (int algo = KILN_ATTENTION_FUSED; algo <= KILN_ATTENTION_NAIVE; algo++)
        for (int dtype = KILN_F32; dtype <= KILN_BF16; dtype++) {
            kiln_attention_desc d = ar_desc_of(&r, (kiln_attention_algo)algo);
            d.dtype = (kiln_dtype)dtype;
            kiln_attention_plan *plan = NULL;
            kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
            struct ar_case t;
            ar_case_init(&t, kt_ctx, &d);
            ar_case_fill(&t, 1.0f, 0, &kt_group_seed);
            kiln_event *ev = KT_POISON_EVENT;
            kt_assert_status(ar_case_execute(&t, plan, &ev), KILN_SUCCESS);
            kt_wait_and_release(ev);
            ar_case_check(&t, "event");
            ar_case_free(&t);
            kiln_attention_plan_destroy(plan);
        }
}

/* One plan, two sets of buffers, executions queued back to back before
   anything is read: each result reflects its own inputs. */
static void test_plan_reuse(void **state)
{
    (void)state;
    static const struct ar_row r = {AR_SHAPE("reuse", BSHD, 2, 4, 2, 33, 40, 80), .key_lengths = 1, .lse = 1};
    for (int algo = KILN_ATTENTION_FUSED; algo <= KILN_ATTENTION_NAIVE; algo++) {
        kiln_attention_desc d = ar_desc_of(&r, (kiln_attention_algo)algo);
        kiln_attention_plan *plan = NULL;
        kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        struct ar_case t1, t2;
        ar_case_init(&t1, kt_ctx, &d);
        ar_case_init(&t2, kt_ctx, &d);
        for (int round = 0; round < 3; round++) {
            ar_case_fill(&t1, 1.0f, 1, &kt_group_seed);
            ar_case_fill(&t2, 3.0f, 0, &kt_group_seed);
            kt_assert_status(ar_case_execute(&t1, plan, NULL), KILN_SUCCESS);
            kt_assert_status(ar_case_execute(&t2, plan, NULL), KILN_SUCCESS);
            ar_case_check(&t1, "reuse, first buffers");
            ar_case_check(&t2, "reuse, second buffers");
        }
        ar_case_free(&t1);
        ar_case_free(&t2);
        kiln_attention_plan_destroy(plan);
    }
}

static void test_one_shot(void **state)
{
    (void)state;
    static const struct ar_row r = {AR_SHAPE("one-shot", BHSD, 1, 4, 4, 20, 30, 64), .mask = M_BQK, .dtype = F16};
    for (int algo = KILN_ATTENTION_AUTO; algo <= KILN_ATTENTION_NAIVE; algo++) {
        kiln_attention_desc d = ar_desc_of(&r, (kiln_attention_algo)algo);
        struct ar_case t;
        ar_case_init(&t, kt_ctx, &d);
        ar_case_fill(&t, 1.0f, 0, &kt_group_seed);
        kiln_event *ev = KT_POISON_EVENT;
        kt_assert_status(kiln_attention(kt_ctx, &d, t.buf[AR_Q], t.buf[AR_K], t.buf[AR_V], t.buf[AR_MASK], NULL,
                                        t.buf[AR_O], NULL, &ev),
                         KILN_SUCCESS);
        kt_wait_and_release(ev);
        ar_case_check(&t, "one-shot");
        ar_case_free(&t);
    }
}

/* B = 1, H = 8, D = 64 and seq_q = seq_kv = the smallest power of two from
   16384 whose score matrix (8 * seq^2 floats) exceeds both the device's
   largest allocation and its whole memory: the naive plan is refused with
   OUT_OF_MEMORY, whatever the device, and the fused plan, which holds no
   memory, is made. seq stops at 2^30, the fused kernel's row limit; there
   the score matrix's bytes overflow 64 bits, which the naive plan refuses
   alike. */
static void test_naive_memory_limit(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    const uint64_t limit = dev.max_alloc_bytes > dev.global_mem_bytes ? dev.max_alloc_bytes : dev.global_mem_bytes;
    size_t seq = 16384;
    while (seq < ((size_t)1 << 30) && (uint64_t)seq * seq <= limit / (8 * sizeof(float)))
        seq *= 2;
    printf("# seq %zu: score matrix %.1f GiB, largest allocation %.1f GiB, device memory %.1f GiB\n", seq,
           8.0 * sizeof(float) * (double)seq * (double)seq / (1 << 30), (double)dev.max_alloc_bytes / (1 << 30),
           (double)dev.global_mem_bytes / (1 << 30));
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, BSHD, 1, 8, seq, seq, 64);
    d.algo = KILN_ATTENTION_NAIVE;
    kiln_attention_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_ERROR_OUT_OF_MEMORY);
    assert_ptr_equal(plan, POISON_PLAN);
    assert_non_null(strstr(kiln_last_error_detail(), "score matrix"));
    d.algo = KILN_ATTENTION_FUSED;
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    assert_plan_describes(plan, &d);
    kiln_attention_plan_destroy(plan);
}

/* Rows that see no key -- a key length of 0, a mask row of -inf only, the
   first rows of a causal problem with more queries than keys -- give O = 0
   and lse = -inf, from both algorithms. */
static void test_rows_that_see_nothing(void **state)
{
    (void)state;
    static const struct ar_row r = {AR_SHAPE("nothing", BSHD, 3, 2, 2, 40, 20, 64), .causal = 1, .mask = M_BQK,
                                    .key_lengths = 1, .lse = 1};
    for (int algo = KILN_ATTENTION_FUSED; algo <= KILN_ATTENTION_NAIVE; algo++) {
        kiln_attention_desc d = ar_desc_of(&r, (kiln_attention_algo)algo);
        kiln_attention_plan *plan = NULL;
        kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        struct ar_case t;
        ar_case_init(&t, kt_ctx, &d);
        ar_case_fill(&t, 1.0f, 0, &kt_group_seed);
        t.key_lengths[1] = 0;
        ar_upload(&t, AR_KEYLEN);
        for (size_t j = 0; j < d.seq_kv; j++) /* batch item 2, query 30: all -inf */
            t.val[AR_MASK][kiln_attention_mask_at(&d, 2, 0, 30, j)] = -INFINITY;
        memcpy(t.raw[AR_MASK], t.val[AR_MASK], t.count[AR_MASK] * sizeof(float));
        ar_upload(&t, AR_MASK);
        kt_assert_status(ar_case_execute(&t, plan, NULL), KILN_SUCCESS);
        ar_case_check(&t, "rows that see nothing");
        float lse[3];
        const size_t at[3] = {0 * 40 + 0, (1 * 2 + 0) * 40 + 35, (2 * 2 + 1) * 40 + 30}; /* causal, length 0, mask */
        for (int i = 0; i < 3; i++) {
            kt_assert_status(kiln_buffer_read(t.buf[AR_LSE], at[i] * sizeof(float), sizeof(float), &lse[i]),
                             KILN_SUCCESS);
            assert_true(isinf(lse[i]) && lse[i] < 0.0f);
        }
        ar_case_free(&t);
        kiln_attention_plan_destroy(plan);
    }
}

/* Keys past a batch item's key length play no part in the fused algorithm
   even when K and V hold NaN or infinity there (a key/value cache whose
   unused tail is garbage), in either storage type, causal rows included.
   (The naive one multiplies hidden values by 0: kiln_attention.h.) */
static void test_hidden_keys_with_non_finite_values(void **state)
{
    (void)state;
    static const struct ar_row r = {AR_SHAPE("hidden", BHSD, 2, 2, 1, 12, 24, 32), .causal = 1, .key_lengths = 1,
                                    .lse = 1};
    for (int dtype = KILN_F32; dtype <= KILN_BF16; dtype++) {
        kiln_attention_desc d = ar_desc_of(&r, KILN_ATTENTION_FUSED);
        d.dtype = (kiln_dtype)dtype;
        kiln_attention_plan *plan = NULL;
        kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        struct ar_case t;
        ar_case_init(&t, kt_ctx, &d);
        ar_case_fill(&t, 1.0f, 0, &kt_group_seed);
        t.key_lengths[0] = 20, t.key_lengths[1] = 7; /* batch 0: keys 20..23 hidden by length only */
        ar_upload(&t, AR_KEYLEN);
        const float garbage[2] = {NAN, INFINITY};
        for (int w = AR_K; w <= AR_V; w++) {
            for (size_t b = 0; b < d.batch; b++)
                for (size_t j = (size_t)t.key_lengths[b]; j < d.seq_kv; j++)
                    for (size_t x = 0; x < d.head_dim; x++) {
                        const size_t i = kiln_attention_at(&d, d.seq_kv, d.kv_heads, b, 0, j) + x;
                        const float g = garbage[(j + x) % 2];
                        t.val[w][i] = g;
                        kt_store(t.raw[w], d.dtype, i, g);
                    }
            ar_upload(&t, w);
        }
        kt_assert_status(ar_case_execute(&t, plan, NULL), KILN_SUCCESS);
        char label[32];
        snprintf(label, sizeof label, "%s, hidden keys", kt_dtype_name(d.dtype));
        ar_case_check(&t, label);
        ar_case_free(&t);
        kiln_attention_plan_destroy(plan);
    }
}

/* ------------------------------------------------------------------------ */
/* Bad inputs: a specific status, a detail, nothing written                 */
/* ------------------------------------------------------------------------ */

enum field {
    F_NONE,
    F_BATCH,
    F_HEADS,
    F_KV_HEADS,
    F_SEQ_Q,
    F_SEQ_KV,
    F_DIM,
    F_SCALE,
    F_LAYOUT,
    F_DTYPE,
    F_MASK,
    F_ALGO,
    F_MATH
};

/* A descriptor plan_create (and the one-shot call) rejects: the base problem
   b2 h4/2 q5 kv7 d16 with up to two fields changed. */
static const struct bad_desc {
    const char *name;
    enum field f1;
    double v1;
    enum field f2;
    double v2;
    kiln_status want;
} bad_descs[] = {
    {"batch = 0", F_BATCH, 0, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"heads = 0", F_HEADS, 0, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"kv_heads = 0", F_KV_HEADS, 0, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"seq_q = 0", F_SEQ_Q, 0, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"seq_kv = 0", F_SEQ_KV, 0, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"head_dim = 0", F_DIM, 0, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"heads 6 not a multiple of kv_heads 4", F_HEADS, 6, F_KV_HEADS, 4, KILN_ERROR_INVALID_ARGUMENT},
    {"kv_heads 8 above heads 4", F_KV_HEADS, 8, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"head_dim = 257", F_DIM, 257, F_NONE, 0, KILN_ERROR_UNSUPPORTED},
    {"head_dim = 4096", F_DIM, 4096, F_NONE, 0, KILN_ERROR_UNSUPPORTED},
    {"scale = NaN", F_SCALE, NAN, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"scale = inf", F_SCALE, INFINITY, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"layout = 2", F_LAYOUT, 2, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"dtype = 3", F_DTYPE, 3, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"math = 2", F_MATH, 2, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"mask = 4", F_MASK, 4, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"algo = 3", F_ALGO, 3, F_NONE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"seq_q = 2^31", F_SEQ_Q, 2147483648.0, F_NONE, 0, KILN_ERROR_UNSUPPORTED},
    {"seq_kv = 2^32", F_SEQ_KV, 4294967296.0, F_NONE, 0, KILN_ERROR_UNSUPPORTED},
    {"seq_q * group above 2^30", F_SEQ_Q, 268435457.0, F_KV_HEADS, 1, KILN_ERROR_UNSUPPORTED},
    {"seq_kv above 2^30", F_SEQ_KV, 1073741825.0, F_NONE, 0, KILN_ERROR_UNSUPPORTED},
};

static void set_field(kiln_attention_desc *d, enum field f, double v)
{
    switch (f) {
    case F_NONE:
        break;
    case F_BATCH:
        d->batch = (size_t)v;
        break;
    case F_HEADS:
        d->heads = (size_t)v;
        break;
    case F_KV_HEADS:
        d->kv_heads = (size_t)v;
        break;
    case F_SEQ_Q:
        d->seq_q = (size_t)v;
        break;
    case F_SEQ_KV:
        d->seq_kv = (size_t)v;
        break;
    case F_DIM:
        d->head_dim = (size_t)v;
        break;
    case F_SCALE:
        d->scale = (float)v;
        break;
    case F_LAYOUT:
        d->layout = (kiln_attention_layout)v;
        break;
    case F_DTYPE:
        d->dtype = (kiln_dtype)v;
        break;
    case F_MASK:
        d->mask = (kiln_attention_mask)v;
        break;
    case F_MATH:
        d->math = (kiln_math)v;
        break;
    case F_ALGO:
        d->algo = (kiln_attention_algo)v;
        break;
    }
}

static void test_bad_desc(void **state)
{
    const struct bad_desc *b = *state;
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, BSHD, 2, 4, 5, 7, 16);
    d.kv_heads = 2;
    set_field(&d, b->f1, b->v1);
    set_field(&d, b->f2, b->v2);
    kiln_attention_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), b->want);
    assert_ptr_equal(plan, POISON_PLAN);
    /* The one-shot call fails the same way, with buffers large enough for
       the base problem, and leaves O alone. */
    kiln_buffer *q = kt_poisoned_buffer(kt_ctx, 4096), *k = kt_poisoned_buffer(kt_ctx, 4096),
                *v = kt_poisoned_buffer(kt_ctx, 4096), *o = kt_poisoned_buffer(kt_ctx, 4096);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_attention(kt_ctx, &d, q, k, v, NULL, NULL, o, NULL, &ev), b->want);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    kt_assert_still_poisoned(o);
    kiln_buffer_destroy(q), kiln_buffer_destroy(k), kiln_buffer_destroy(v), kiln_buffer_destroy(o);
}

/* Executions the plan must reject. The base problem uses every operand:
   b2 h4/2 q5 kv7 d16, causal, a [batch][heads][q][kv] mask, key lengths and
   the lse; buffers are exact, and each row gets one thing wrong. */
enum bad_exec_kind {
    X_NULL_PLAN,
    X_NULL,  /* operand `which` NULL */
    X_SHORT, /* operand `which` one element short */
    X_ALIAS, /* operand `which` is operand `other`'s buffer */
    X_OTHER_CONTEXT,
    X_SUPERFLUOUS, /* operand `which` given though the descriptor does not use it */
};

static const struct bad_exec {
    const char *name;
    enum bad_exec_kind kind;
    int which, other;
    kiln_status want;
} bad_execs[] = {
    {"NULL plan", X_NULL_PLAN, 0, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL q", X_NULL, AR_Q, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL k", X_NULL, AR_K, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL v", X_NULL, AR_V, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL o", X_NULL, AR_O, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"mask missing", X_NULL, AR_MASK, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"key_lengths missing", X_NULL, AR_KEYLEN, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"lse missing", X_NULL, AR_LSE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"mask superfluous", X_SUPERFLUOUS, AR_MASK, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"key_lengths superfluous", X_SUPERFLUOUS, AR_KEYLEN, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"lse superfluous", X_SUPERFLUOUS, AR_LSE, 0, KILN_ERROR_INVALID_ARGUMENT},
    {"q one element short", X_SHORT, AR_Q, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"k one element short", X_SHORT, AR_K, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"v one element short", X_SHORT, AR_V, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"mask one element short", X_SHORT, AR_MASK, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"key_lengths one short", X_SHORT, AR_KEYLEN, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"o one element short", X_SHORT, AR_O, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"lse one element short", X_SHORT, AR_LSE, 0, KILN_ERROR_OUT_OF_BOUNDS},
    {"o is q's buffer", X_ALIAS, AR_O, AR_Q, KILN_ERROR_INVALID_ARGUMENT},
    {"o is k's buffer", X_ALIAS, AR_O, AR_K, KILN_ERROR_INVALID_ARGUMENT},
    {"o is v's buffer", X_ALIAS, AR_O, AR_V, KILN_ERROR_INVALID_ARGUMENT},
    {"o is the mask's buffer", X_ALIAS, AR_O, AR_MASK, KILN_ERROR_INVALID_ARGUMENT},
    {"lse is o's buffer", X_ALIAS, AR_LSE, AR_O, KILN_ERROR_INVALID_ARGUMENT},
    {"lse is q's buffer", X_ALIAS, AR_LSE, AR_Q, KILN_ERROR_INVALID_ARGUMENT},
    {"k from another context", X_OTHER_CONTEXT, AR_K, 0, KILN_ERROR_INVALID_ARGUMENT},
};

static void test_bad_exec(void **state)
{
    const struct bad_exec *x = *state;
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, BSHD, 2, 4, 5, 7, 16);
    d.kv_heads = 2;
    d.causal = 1;
    d.mask = M_BHQK;
    d.key_lengths = 1;
    d.lse = 1;
    if (x->kind == X_SUPERFLUOUS) { /* the descriptor leaves the operand out */
        d.mask = x->which == AR_MASK ? KILN_ATTENTION_MASK_NONE : d.mask;
        d.key_lengths = x->which != AR_KEYLEN;
        d.lse = x->which != AR_LSE;
    }
    const size_t counts[AR_OPERANDS] = {2 * 5 * 4 * 16, 2 * 7 * 2 * 16, 2 * 7 * 2 * 16, 2 * 4 * 5 * 7, 2,
                                        2 * 5 * 4 * 16, 2 * 4 * 5};
    kiln_attention_plan *plan = NULL;
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kiln_context *other = NULL;
    kiln_buffer *buf[AR_OPERANDS];
    for (int w = 0; w < AR_OPERANDS; w++)
        buf[w] = kt_poisoned_buffer(kt_ctx, (counts[w] - (x->kind == X_SHORT && x->which == w)) * 4);
    kiln_buffer *use[AR_OPERANDS];
    memcpy(use, buf, sizeof use);
    if (x->kind == X_NULL)
        use[x->which] = NULL;
    if (x->kind == X_ALIAS)
        use[x->which] = buf[x->other];
    if (x->kind == X_OTHER_CONTEXT) {
        kt_assert_status(kiln_context_create(NULL, &other), KILN_SUCCESS);
        kt_assert_status(kiln_buffer_create(other, counts[x->which] * 4, &use[x->which]), KILN_SUCCESS);
    }
    kiln_event *ev = KT_POISON_EVENT;
    kiln_attention_plan *p = x->kind == X_NULL_PLAN ? NULL : plan;
    kt_assert_status(kiln_attention_plan_execute(p, use[AR_Q], use[AR_K], use[AR_V], use[AR_MASK], use[AR_KEYLEN],
                                                 use[AR_O], use[AR_LSE], &ev),
                     x->want);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    if (x->kind != X_NULL_PLAN) /* the one-shot call checks the same */
        kt_assert_status(kiln_attention(kt_ctx, &d, use[AR_Q], use[AR_K], use[AR_V], use[AR_MASK], use[AR_KEYLEN],
                                        use[AR_O], use[AR_LSE], &ev),
                         x->want);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    for (int w = 0; w < AR_OPERANDS; w++) { /* all poison still: nothing ran */
        kt_assert_still_poisoned(buf[w]);
        kiln_buffer_destroy(buf[w]);
    }
    if (other) {
        kiln_buffer_destroy(use[x->which]);
        kiln_context_destroy(other);
    }
    kiln_attention_plan_destroy(plan);
}

static void test_null_arguments(void **state)
{
    (void)state;
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, BSHD, 1, 2, 5, 7, 16);
    kiln_attention_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_attention_plan_create(NULL, &d, &plan), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_attention_plan_create(kt_ctx, NULL, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_buffer *q = kt_poisoned_buffer(kt_ctx, 1024), *o = kt_poisoned_buffer(kt_ctx, 1024);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_attention(NULL, &d, q, q, q, NULL, NULL, o, NULL, &ev), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_attention(kt_ctx, NULL, q, q, q, NULL, NULL, o, NULL, &ev), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    kt_assert_still_poisoned(o);

    kiln_attention_plan_info info, before;
    memset(&info, 0x3c, sizeof info);
    before = info;
    kt_assert_status(kiln_attention_plan_describe(NULL, &info), KILN_ERROR_INVALID_ARGUMENT);
    assert_memory_equal(&info, &before, sizeof info);
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kt_assert_status(kiln_attention_plan_describe(plan, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_attention_plan_destroy(plan);
    kiln_attention_plan_destroy(NULL);
    kiln_buffer_destroy(q), kiln_buffer_destroy(o);
}

/* ------------------------------------------------------------------------ */

#define ROWS (sizeof rows / sizeof *rows)
#define ALGOS 3
#define BAD_DESCS (sizeof bad_descs / sizeof *bad_descs)
#define BAD_EXECS (sizeof bad_execs / sizeof *bad_execs)

int main(void)
{
    static const kiln_attention_algo algos[ALGOS] = {KILN_ATTENTION_FUSED, KILN_ATTENTION_NAIVE, KILN_ATTENTION_FUSED};
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_split_rule));
    kt_add(&tests, cmocka_unit_test(test_desc_init));
    kt_add(&tests, cmocka_unit_test(test_auto_is_fused));
    kt_add(&tests, cmocka_unit_test(test_rows_on_tensor_cores));
    kt_add(&tests, cmocka_unit_test(test_decode_wg_geometry));
    kt_add(&tests, cmocka_unit_test(test_event_completes_the_work));
    kt_add(&tests, cmocka_unit_test(test_plan_reuse));
    kt_add(&tests, cmocka_unit_test(test_one_shot));
    kt_add(&tests, cmocka_unit_test(test_naive_memory_limit));
    kt_add(&tests, cmocka_unit_test(test_rows_that_see_nothing));
    kt_add(&tests, cmocka_unit_test(test_hidden_keys_with_non_finite_values));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    for (size_t a = 0; a < ALGOS; a++)
        for (size_t i = 0; i < ROWS; i++) {
            const struct row_test rt = {&rows[i], algos[a], a == 2};
            char name[192];
            row_name(name, sizeof name, &rows[i], algos[a], a == 2);
            kt_add_copy(&tests, test_row, &rt, sizeof rt, "%s", name);
        }
    for (size_t i = 0; i < ROWS; i++)
        if (rows[i].heads / rows[i].kv_heads * rows[i].seq_q <= 8 || rows[i].causal || rows[i].key_lengths) {
            char name[192];
            row_name(name, sizeof name, &rows[i], KILN_ATTENTION_AUTO, 0);
            kt_add_copy(&tests, test_split_kv, &rows[i], sizeof rows[i], "split kv %s", name + 6);
        }
    kt_add_items(&tests, "bad desc: ", test_bad_desc, bad_descs, BAD_DESCS, sizeof *bad_descs);
    kt_add_items(&tests, "bad execute: ", test_bad_exec, bad_execs, BAD_EXECS, sizeof *bad_execs);
    return kt_run("attention", &tests);
}
