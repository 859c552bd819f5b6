/*
 * The tensor-core GEMM families: mma (cu/gemm/gemm_f16_mma.cu) and, on
 * Hopper, wgmma (cu/gemm/gemm_f16_wgmma.cu).
 *
 * mma: fp16 or bf16
 * storage, multiplies of that type with fp32 accumulation on mma.sync, for
 * backends with native CUDA sources (the CUDA backend) on devices of compute
 * capability 7.5 and newer (8.0 for bf16). The products of fp16 and of bf16
 * values are exact in fp32, so the family computes as precisely as the
 * fp32-arithmetic families on the same data, up to the order of the
 * additions. fp32 storage comes here only where the descriptor allows TF32
 * (KILN_MATH_TF32), on compute capability 8.0 and newer: the same kernel
 * with -DKILN_MMA_TF32=1 rounds A and B to TF32 and multiplies on
 * m16n8k8; with KILN_MATH_FP32 it keeps exact fp32 arithmetic elsewhere.
 *
 * It reads A, B and C in place with the in-place GEMM's arguments
 * (kiln_gemm_inplace_args). Operands whose rows all start 16-byte aligned
 * (leading dimensions, batch strides and offsets multiples of 16 bytes: 8
 * 16-bit values, 4 fp32 ones) are copied with cp.async; others with plain
 * loads, a second kernel built at the first execution whose offsets need it
 * (or at planning, where the leading dimensions or strides already do). Its
 * blocks, warps and pipeline depth are the profile's gemm.mma group (with
 * TF32 a K step of bk/2 fp32 values: the same bytes as bk 16-bit ones).
 *
 * wgmma: the same products on wgmma.mma_async, for compute capability 9.0
 * only (the instruction is sm_90a's, which no other architecture has); its
 * blocks and pipeline depth are the profile's gemm.wgmma group. Where the
 * tensor memory accelerator can read the operands as stored (rows 16-byte
 * aligned, batch strides too and not 0), its first kernel copies tiles
 * through tensor maps the execution encodes for its buffers and offsets;
 * else the cp.async kernel with the mma family's arguments. Offsets that
 * break the alignment take the plain-loads kernel, as in the mma family.
 * fp32 storage with TF32 allowed: wgmma takes tf32 operands K-major only
 * (A stored M x K, B stored N x K), so each execution first copies an
 * operand stored the other way, transposed, into the plan's workspace
 * (gemm_f32_transpose.cu, rows of K padded to 16 bytes), and the GEMM
 * kernel reads that copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "cuda/cuda_backend.h"
#include "ops/gemm.h"
#include "profiles/profile.h"

enum { ASYNC = 0, LOADS = 1, TRANSPOSE = 2 }; /* kernel slots */
enum { STAGED_A = 0, STAGED_B = 1 };          /* workspace slots of the copies read K-major */
/* aux[1] of a wgmma plan: what its ASYNC slot holds. */
enum { NO_TMA = 0, TMA = 1, TMA_REFUSED = 2 /* the TMA kernel, whose maps the driver refused */ };

static const char *mma_unsupported(const struct kiln_gemm_problem *p)
{
    if (p->dtype == KILN_F32 && p->math != KILN_MATH_TF32)
        return "the tensor-core families take fp16 or bf16 storage, or fp32 storage whose descriptor allows TF32 "
               "(math KILN_MATH_TF32); exact fp32 arithmetic runs on the other families";
    if (p->epi.bias || p->epi.residual || p->epi.act)
        return "the tensor-core families have no fused epilogue";
    return NULL;
}

int kiln_gemm_mma_runs_on(const kiln_context *ctx, kiln_dtype dtype, char *why, size_t size)
{
    return kiln_plan_cuda_runs(ctx, kiln_plan_cc(ctx) >= (dtype == KILN_F16 ? 75 : 80), "the tensor-core family",
                               dtype == KILN_BF16  ? "8.0 or newer for bf16"
                               : dtype == KILN_F32 ? "8.0 or newer for TF32"
                                                   : "7.5 or newer",
                               why, size);
}

int kiln_gemm_wgmma_runs_on(const kiln_context *ctx, char *why, size_t size)
{
    return kiln_plan_cuda_runs(ctx, kiln_plan_cc(ctx) == 90, "the wgmma family", "9.0", why, size);
}

/* Stored values in 16 bytes, the unit of the kernels' copies. */
static size_t chunk(const struct kiln_gemm_problem *p) { return 16 / kiln_dtype_size(p->dtype); }

/* Whether every operand row starts 16-byte aligned whatever the offsets. */
static int rows_aligned(const struct kiln_gemm_problem *p)
{
    const size_t c = chunk(p);
    return p->lda % c == 0 && p->ldb % c == 0 && (p->batch == 1 || p->stride_a % c == 0) &&
           (p->batch == 1 || p->stride_b % c == 0);
}

/* Whether the wgmma family's tensor maps can describe the operands as
   stored: rows 16-byte aligned, batch strides too and not 0 (offsets are
   checked at each execution), on the CUDA backend. */
static int tma_fits(const kiln_context *ctx, const struct kiln_gemm_problem *p)
{
    return ctx->backend == &kiln_cuda_backend && rows_aligned(p) &&
           (p->batch == 1 || (p->stride_a != 0 && p->stride_b != 0));
}

/* Build the kernel of `slot` (ASYNC or LOADS) from the options kept in impl
   (the family's kernel named in plan->base.kernel; aux[1]: the ASYNC slot
   holds the wgmma family's TMA kernel). */
static kiln_status build(struct kiln_gemm_plan *plan, int slot)
{
    char source[sizeof plan->base.kernel + 16];
    snprintf(source, sizeof source, "gemm/%s.cu", plan->base.kernel);
    struct kiln_options o = {0};
    kiln_options_add(&o, "%s -DKILN_MMA_ASYNC=%d%s", (const char *)plan->base.impl, slot == ASYNC,
                     slot == ASYNC && plan->aux[1] != NO_TMA ? " -DKILN_WGMMA_TMA=1" : "");
    kiln_status st = kiln_plan_kernel(&plan->base, slot, source, &o, plan->base.kernel);
    kiln_options_free(&o);
    return st;
}

/* Keep a plan's options, build its first kernel for problem p (the plan's,
   or the wgmma family's with staged operands) and set its launch: blocks of
   `threads` over bm x bn of C, `shared` bytes of shared memory. */
static kiln_status finish(struct kiln_gemm_plan *plan, const struct kiln_gemm_problem *p, struct kiln_options *options,
                          const char *kernel, int bm, int bn, long threads, long shared)
{
    plan->base.impl = strdup(kiln_options_text(options));
    kiln_options_free(options);
    if (!plan->base.impl)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "gemm: the %s kernel's options", kernel);
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "%s", kernel);
    /* Rows 16-byte aligned whatever the offsets: the cp.async kernel now,
       the plain-loads one only if an execution's offsets need it. */
    kiln_status st = build(plan, rows_aligned(p) ? ASYNC : LOADS);
    if (st != KILN_SUCCESS)
        return st;
    plan->dims[0][0] = kiln_div_up(p->n, (size_t)bn) * (size_t)threads;
    plan->dims[0][1] = kiln_div_up(p->m, (size_t)bm);
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = (size_t)threads;
    plan->dims[1][1] = plan->dims[1][2] = 1;
    plan->aux[0] = (size_t)shared;
    return KILN_SUCCESS;
}

/* Whether the wgmma family's plan copies operand `w` (STAGED_A, STAGED_B)
   K-major before each product: fp32 storage (TF32) with A stored K x M or
   B stored K x N. */
static int staged(const struct kiln_gemm_plan *plan, int w)
{
    const struct kiln_gemm_problem *p = &plan->p;
    return plan->base.algo == KILN_GEMM_WGMMA && p->dtype == KILN_F32 && (w == STAGED_A ? p->trans_a : !p->trans_b);
}

/* The problem the GEMM kernel runs: the plan's, with its staged operands
   read K-major from the workspace (rows of K padded to 4 values, one copy
   for an operand shared by every batch item). */
static struct kiln_gemm_problem kernel_problem(const struct kiln_gemm_plan *plan)
{
    struct kiln_gemm_problem q = plan->p;
    const size_t ld = kiln_div_up(q.k, 4) * 4;
    if (staged(plan, STAGED_A))
        q.trans_a = 0, q.lda = ld, q.stride_a = q.stride_a ? q.m * ld : 0;
    if (staged(plan, STAGED_B))
        q.trans_b = 1, q.ldb = ld, q.stride_b = q.stride_b ? q.n * ld : 0;
    return q;
}

/* Workspace and the transposing kernel for the staged operands. */
static kiln_status stage_prepare(struct kiln_gemm_plan *plan, const struct kiln_gemm_problem *q)
{
    kiln_status st = KILN_SUCCESS;
    for (int w = STAGED_A; w <= STAGED_B && st == KILN_SUCCESS; w++) {
        if (!staged(plan, w))
            continue;
        const size_t rows = w == STAGED_A ? q->m : q->n, stride = w == STAGED_A ? q->stride_a : q->stride_b;
        st =
            kiln_plan_workspace(&plan->base, w, (stride ? q->batch : 1) * rows * (w == STAGED_A ? q->lda : q->ldb) * 4);
        if (st == KILN_SUCCESS && !plan->base.kernels[TRANSPOSE]) {
            struct kiln_options o = {0};
            st = kiln_plan_kernel(&plan->base, TRANSPOSE, "gemm/gemm_f32_transpose.cu", &o, "gemm_f32_transpose");
            kiln_options_free(&o);
        }
    }
    return st;
}

/* Queue the copies of the staged operands of x into the workspace (stored
   K x M or K x N; copied M x K or N x K, rows q->lda or q->ldb apart) and
   point y at them. */
static kiln_status stage_operands(struct kiln_gemm_plan *plan, const struct kiln_gemm_problem *q,
                                  const struct kiln_gemm_args *x, struct kiln_gemm_args *y)
{
    const struct kiln_gemm_problem *p = &plan->p;
    *y = *x;
    for (int w = STAGED_A; w <= STAGED_B; w++) {
        if (!staged(plan, w))
            continue;
        const int a = w == STAGED_A;
        const size_t cols = a ? p->m : p->n, stride = a ? p->stride_a : p->stride_b;
        void *copy = plan->base.workspace[w]->handle;
        struct kiln_args args = {0};
        kiln_args_int(&args, (int32_t)p->k);
        kiln_args_int(&args, (int32_t)cols);
        kiln_args_buffer(&args, a ? x->a : x->b);
        kiln_args_ulong(&args, a ? x->off_a : x->off_b);
        kiln_args_int(&args, (int32_t)(a ? p->lda : p->ldb));
        kiln_args_ulong(&args, stride);
        kiln_args_buffer(&args, copy);
        kiln_args_int(&args, (int32_t)(a ? q->lda : q->ldb));
        kiln_args_ulong(&args, a ? q->stride_a : q->stride_b);
        const size_t global[3] = {kiln_div_up(cols, 32) * 32, kiln_div_up(p->k, 32) * 8, stride ? p->batch : 1},
                     local[3] = {32, 8, 1};
        kiln_status st =
            kiln_kernel_launch(plan->base.ctx, plan->base.kernels[TRANSPOSE], &args, 3, global, local, 0, NULL);
        if (st != KILN_SUCCESS)
            return st;
        if (a)
            y->a = copy, y->off_a = 0;
        else
            y->b = copy, y->off_b = 0;
    }
    return KILN_SUCCESS;
}

static kiln_status mma_prepare(struct kiln_gemm_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    char why[256];
    if (!kiln_gemm_mma_runs_on(ctx, plan->p.dtype, why, sizeof why))
        return kiln_error(KILN_ERROR_UNSUPPORTED, "gemm: %s", why);
    const struct kiln_param_gemm_mma *t;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_mma, &t);
    if (st != KILN_SUCCESS)
        return st;
    const struct kiln_gemm_problem *p = &plan->p;
    const long threads = (long)t->warps_m * t->warps_n * 32;
    /* The schema's check (run by kiln_gemm_params) has fitted the largest
       layout's shared memory to the device. */
    const long shared = kiln_gemm_mma_shared_bytes(t, p->trans_a, p->trans_b);
    const int tf32 = p->dtype == KILN_F32;
    struct kiln_options options = {0};
    kiln_options_add(&options, "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_BF16=%d -DKILN_MMA_TF32=%d%s",
                     p->trans_a, p->trans_b, p->dtype == KILN_BF16, tf32,
                     p->dtype == KILN_F16 ? "" : " -DKILN_MIN_ARCH=80"); /* bf16 and TF32 from sm_80 */
    kiln_profile_defines(&options, KILN_GROUP_gemm_mma, t);
    st = finish(plan, p, &options, "gemm_f16_mma", t->bm, t->bn, threads, shared);
    if (st != KILN_SUCCESS)
        return st;
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %dx%dx%d, %dx%d warps, %d stages, %ld bytes of shared memory%s%s", t->bm, t->bn,
             tf32 ? t->bk / 2 : t->bk, t->warps_m, t->warps_n, t->stages, shared, tf32 ? ", TF32 multiplies" : "",
             rows_aligned(p) ? "" : ", plain loads (rows unaligned)");
    return KILN_SUCCESS;
}

static kiln_status wgmma_prepare(struct kiln_gemm_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    char why[256];
    if (!kiln_gemm_wgmma_runs_on(ctx, why, sizeof why))
        return kiln_error(KILN_ERROR_UNSUPPORTED, "gemm: %s", why);
    const struct kiln_param_gemm_wgmma *t;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_wgmma, &t);
    if (st != KILN_SUCCESS)
        return st;
    const struct kiln_gemm_problem q = kernel_problem(plan);
    const int tf32 = q.dtype == KILN_F32;
    st = stage_prepare(plan, &q);
    if (st != KILN_SUCCESS)
        return st;
    const long shared = kiln_gemm_wgmma_shared_bytes(t);
    plan->aux[1] = t->tma && tma_fits(ctx, &q) ? TMA : NO_TMA;
    plan->aux[2] = (size_t)t->bm, plan->aux[3] = (size_t)t->bn;
    /* wgmma is sm_90a's: the arch-specific target, not the device's sm_90. */
    struct kiln_options options = {0};
    kiln_options_add(
        &options, "--gpu-architecture=sm_90a -DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_BF16=%d -DKILN_MMA_TF32=%d",
        q.trans_a, q.trans_b, q.dtype == KILN_BF16, tf32);
    kiln_profile_defines(&options, KILN_GROUP_gemm_wgmma, t);
    /* The TMA kernel's producer is one more warpgroup. */
    st = finish(plan, &q, &options, "gemm_f16_wgmma", t->bm, t->bn, (long)(t->bm / 64 + (plan->aux[1] ? 1 : 0)) * 128,
                shared);
    if (st != KILN_SUCCESS)
        return st;
    const int copied = staged(plan, STAGED_A) || staged(plan, STAGED_B);
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %dx%dx%d, %d warpgroups, %d stages, %ld bytes of shared memory, %s%s%s%s", t->bm, t->bn,
             tf32 ? 32 : 64, t->bm / 64, t->stages, shared,
             plan->aux[1]       ? "tensor memory accelerator"
             : rows_aligned(&q) ? "cp.async"
                                : "plain loads (rows unaligned)",
             tf32 ? ", TF32 multiplies" : "", copied ? ", copies K-major first: " : "",
             !copied                                            ? ""
             : staged(plan, STAGED_A) && staged(plan, STAGED_B) ? "A and B"
             : staged(plan, STAGED_A)                           ? "A"
                                                                : "B");
    return KILN_SUCCESS;
}

/* The mma family's kernels, and the wgmma family's without the tensor
   memory accelerator, on problem p (the wgmma family's staged one): the
   cp.async kernel where the offsets keep the rows aligned, else plain
   loads. The wgmma family's plain-loads kernel has no producer warpgroup:
   blocks of bm / 64 warpgroups. */
static kiln_status run_inplace(struct kiln_gemm_plan *plan, const struct kiln_gemm_problem *p,
                               const struct kiln_gemm_args *x, void **event)
{
    const size_t c = chunk(p);
    const int aligned = plan->aux[1] == NO_TMA && plan->base.kernels[ASYNC] && x->off_a % c == 0 && x->off_b % c == 0;
    kiln_status st = aligned || plan->base.kernels[LOADS] ? KILN_SUCCESS : build(plan, LOADS);
    if (st != KILN_SUCCESS)
        return st;
    size_t global[3] = {plan->dims[0][0], plan->dims[0][1], plan->dims[0][2]},
           local[3] = {plan->dims[1][0], plan->dims[1][1], plan->dims[1][2]};
    if (!aligned && plan->base.algo == KILN_GEMM_WGMMA) {
        local[0] = plan->aux[2] / 64 * 128;
        global[0] = kiln_div_up(p->n, plan->aux[3]) * local[0];
    }
    struct kiln_args a = {0};
    kiln_gemm_inplace_args(&a, p, x);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[aligned ? ASYNC : LOADS], &a, 3, global, local,
                              plan->aux[0], event);
}

static kiln_status mma_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    return run_inplace(plan, &plan->p, x, event);
}

/* The TMA kernel's tensor map of an operand of `size`-byte values stored
   `rows` x `cols` (cols contiguous, rows ld apart, batch items stride
   apart), read in boxes of 128 bytes of columns by box_rows. */
static kiln_status tensor_map(const void *buf, size_t off, size_t size, size_t rows, size_t cols, size_t ld,
                              size_t stride, size_t batch, unsigned box_rows, void *map)
{
    const uint64_t dims[3] = {cols, rows, batch};
    const uint64_t strides[2] = {size * ld, batch > 1 ? size * stride : size * ld * rows};
    const unsigned box[3] = {128 / (unsigned)size, box_rows, 1};
    return kiln_cuda_tensor_map(buf, size * off, size, dims, strides, box, map);
}

static kiln_status wgmma_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *args, void **event)
{
    const struct kiln_gemm_problem q = kernel_problem(plan), *p = &q;
    struct kiln_gemm_args staged_args;
    kiln_status st = stage_operands(plan, p, args, &staged_args);
    if (st != KILN_SUCCESS)
        return st;
    const struct kiln_gemm_args *x = &staged_args;
    const size_t c = chunk(p), size = kiln_dtype_size(p->dtype);
    if (plan->aux[1] != TMA || x->off_a % c != 0 || x->off_b % c != 0)
        return run_inplace(plan, p, x, event);
    /* A stored m x k (k x m transposed), B k x n (n x k): boxes of 128 bytes
       by the block's rows where the stored rows are the block's, else 64
       values by 64. */
    struct {
        _Alignas(64) unsigned char a[128];
        _Alignas(64) unsigned char b[128];
    } maps;
    const unsigned bm = (unsigned)plan->aux[2], bn = (unsigned)plan->aux[3];
    st = tensor_map(x->a, x->off_a, size, p->trans_a ? p->k : p->m, p->trans_a ? p->m : p->k, p->lda, p->stride_a,
                    p->batch, p->trans_a ? 64 : bm, maps.a);
    if (st == KILN_SUCCESS)
        st = tensor_map(x->b, x->off_b, size, p->trans_b ? p->n : p->k, p->trans_b ? p->k : p->n, p->ldb, p->stride_b,
                        p->batch, p->trans_b ? bn : 64, maps.b);
    if (st != KILN_SUCCESS) {
        /* The driver would not describe these operands: plain loads. */
        kiln_log(KILN_LOG_WARN, "gemm: %s; the wgmma family copies with plain loads instead", kiln_last_error_detail());
        plan->aux[1] = TMA_REFUSED;
        return run_inplace(plan, p, x, event);
    }
    struct kiln_args a = {0};
    kiln_args_int(&a, (int32_t)p->m);
    kiln_args_int(&a, (int32_t)p->n);
    kiln_args_int(&a, (int32_t)p->k);
    kiln_args_float(&a, x->alpha);
    kiln_args_float(&a, x->beta);
    kiln_args_bytes(&a, maps.a, sizeof maps.a);
    kiln_args_bytes(&a, maps.b, sizeof maps.b);
    kiln_args_buffer(&a, x->c);
    kiln_args_ulong(&a, x->off_c);
    kiln_args_int(&a, (int32_t)p->ldc);
    kiln_args_ulong(&a, p->stride_c);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[ASYNC], &a, 3, plan->dims[0], plan->dims[1],
                              plan->aux[0], event);
}

static void mma_release(struct kiln_gemm_plan *plan) { free(plan->base.impl); }

const struct kiln_gemm_algorithm kiln_gemm_mma = {"mma",       KILN_GEMM_MMA, mma_unsupported,
                                                  mma_prepare, mma_execute,   mma_release};
const struct kiln_gemm_algorithm kiln_gemm_wgmma = {"wgmma",       KILN_GEMM_WGMMA, mma_unsupported,
                                                    wgmma_prepare, wgmma_execute,   mma_release};
