/*
 * The tensor-core GEMM family (cu/gemm/gemm_f16_mma.cu): fp16 storage, fp16
 * multiplies with fp32 accumulation on mma.sync, for backends with native
 * CUDA sources (the CUDA backend) on devices of compute capability 7.5 and
 * newer. fp16 products are exact in fp32, so the family computes as
 * precisely as the fp32-arithmetic families on the same fp16 data, up to
 * the order of the additions; fp32 storage keeps exact fp32 arithmetic and
 * never comes here.
 *
 * It reads A, B and C in place with the in-place GEMM's arguments
 * (kiln_gemm_inplace_args). Operands whose rows all start 16-byte aligned
 * (leading dimensions, batch strides and offsets multiples of 8 halves) are
 * copied with cp.async; others with plain loads, a second kernel built only
 * when the leading dimensions and strides allow the first (the offsets are
 * known at execution). The tiles are fixed here until they become a profile
 * group: 128 x 128 by 32 of K, 2 x 4 warps, 3 stages.
 */
#include <stdio.h>

#include "core/diag.h"
#include "ops/gemm.h"

#define MMA_SOURCE "gemm/gemm_f16_mma.cu"
enum { MMA_BM = 128, MMA_BN = 128, MMA_BK = 32, MMA_WARPS_M = 2, MMA_WARPS_N = 4, MMA_STAGES = 3 };
enum { MMA_THREADS = MMA_WARPS_M * MMA_WARPS_N * 32 };
enum { ASYNC = 0, LOADS = 1 }; /* kernel slots */

static const char *mma_unsupported(const struct kiln_gemm_problem *p)
{
    if (!p->f16)
        return "the tensor-core family takes fp16 storage (fp32 storage keeps exact fp32 arithmetic)";
    if (p->epi.bias || p->epi.residual || p->epi.act)
        return "the tensor-core family has no fused epilogue";
    return NULL;
}

/* Shared memory of one launch: STAGES buffers of the A and B tiles, rows
   padded by 8 halves (the kernel's A_TILE and B_TILE). */
static size_t shared_bytes(const struct kiln_gemm_problem *p)
{
    const size_t a = p->trans_a ? (size_t)MMA_BK * (MMA_BM + 8) : (size_t)MMA_BM * (MMA_BK + 8);
    const size_t b = p->trans_b ? (size_t)MMA_BN * (MMA_BK + 8) : (size_t)MMA_BK * (MMA_BN + 8);
    return (size_t)MMA_STAGES * (a + b) * 2;
}

static kiln_status mma_prepare(struct kiln_gemm_plan *plan)
{
    const kiln_context *ctx = plan->base.ctx;
    const struct kiln_device_desc *d = &ctx->desc;
    if (!ctx->backend->native_sources || d->cc_major * 10 + d->cc_minor < 75)
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "gemm: the tensor-core family needs the CUDA backend on compute capability 7.5 or newer (%s "
                          "backend, %s)",
                          ctx->backend->name, d->arch[0] ? d->arch : "no compute capability");
    const struct kiln_gemm_problem *p = &plan->p;
    struct kiln_options options = {0};
    kiln_options_add(&options,
                     "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_BM=%d -DKILN_MMA_BN=%d -DKILN_MMA_BK=%d "
                     "-DKILN_MMA_WARPS_M=%d -DKILN_MMA_WARPS_N=%d -DKILN_MMA_STAGES=%d",
                     p->trans_a, p->trans_b, MMA_BM, MMA_BN, MMA_BK, MMA_WARPS_M, MMA_WARPS_N, MMA_STAGES);
    /* Rows 16-byte aligned whatever the offsets: then the cp.async kernel,
       for offsets that keep them so. */
    const int rows_aligned = p->lda % 8 == 0 && p->ldb % 8 == 0 && (p->batch == 1 || p->stride_a % 8 == 0) &&
                             (p->batch == 1 || p->stride_b % 8 == 0);
    kiln_status st = KILN_SUCCESS;
    for (int slot = rows_aligned ? ASYNC : LOADS; slot <= LOADS && st == KILN_SUCCESS; slot++) {
        struct kiln_options o = {0};
        kiln_options_add(&o, "%s -DKILN_MMA_ASYNC=%d", kiln_options_text(&options), slot == ASYNC);
        st = kiln_plan_kernel(&plan->base, slot, MMA_SOURCE, &o, "gemm_f16_mma");
        kiln_options_free(&o);
    }
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    plan->dims[0][0] = kiln_div_up(p->n, MMA_BN) * MMA_THREADS;
    plan->dims[0][1] = kiln_div_up(p->m, MMA_BM);
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = MMA_THREADS;
    plan->dims[1][1] = plan->dims[1][2] = 1;
    plan->aux[0] = shared_bytes(p);
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "gemm_f16_mma");
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %dx%dx%d, %dx%d warps, %d stages, %zu bytes of shared memory%s", MMA_BM, MMA_BN, MMA_BK, MMA_WARPS_M,
             MMA_WARPS_N, MMA_STAGES, plan->aux[0], rows_aligned ? "" : ", plain loads (rows unaligned)");
    return KILN_SUCCESS;
}

static kiln_status mma_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    struct kiln_args a = {0};
    kiln_gemm_inplace_args(&a, &plan->p, x);
    const int aligned = plan->base.kernels[ASYNC] && x->off_a % 8 == 0 && x->off_b % 8 == 0;
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[aligned ? ASYNC : LOADS], &a, 3, plan->dims[0],
                              plan->dims[1], plan->aux[0], event);
}

const struct kiln_gemm_algorithm kiln_gemm_mma = {"mma",       KILN_GEMM_MMA, mma_unsupported,
                                                  mma_prepare, mma_execute,   NULL};
