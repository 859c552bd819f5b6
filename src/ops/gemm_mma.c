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
 * known at execution). Its blocks, warps and pipeline depth are the
 * profile's gemm.mma group.
 */
#include <stdio.h>

#include "core/diag.h"
#include "ops/gemm.h"
#include "profiles/profile.h"

#define MMA_SOURCE "gemm/gemm_f16_mma.cu"
enum { ASYNC = 0, LOADS = 1 }; /* kernel slots */

static const char *mma_unsupported(const struct kiln_gemm_problem *p)
{
    if (!p->f16)
        return "the tensor-core family takes fp16 storage (fp32 storage keeps exact fp32 arithmetic)";
    if (p->epi.bias || p->epi.residual || p->epi.act)
        return "the tensor-core family has no fused epilogue";
    return NULL;
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
    const struct kiln_param_gemm_mma *t;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_mma, &t);
    if (st != KILN_SUCCESS)
        return st;
    const struct kiln_gemm_problem *p = &plan->p;
    const long threads = (long)t->warps_m * t->warps_n * 32;
    const long shared = kiln_gemm_mma_shared_bytes(t, p->trans_a, p->trans_b);
    if (d->shared_optin_bytes && (unsigned long long)shared > d->shared_optin_bytes)
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "gemm: gemm.mma's blocks take %ld bytes of shared memory, the device %llu", shared,
                          d->shared_optin_bytes);
    struct kiln_options options = {0};
    kiln_options_add(&options, "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d", p->trans_a, p->trans_b);
    kiln_profile_defines(&options, KILN_GROUP_gemm_mma, t);
    /* Rows 16-byte aligned whatever the offsets: then the cp.async kernel,
       for offsets that keep them so. */
    const int rows_aligned = p->lda % 8 == 0 && p->ldb % 8 == 0 && (p->batch == 1 || p->stride_a % 8 == 0) &&
                             (p->batch == 1 || p->stride_b % 8 == 0);
    for (int slot = rows_aligned ? ASYNC : LOADS; slot <= LOADS && st == KILN_SUCCESS; slot++) {
        struct kiln_options o = {0};
        kiln_options_add(&o, "%s -DKILN_MMA_ASYNC=%d", kiln_options_text(&options), slot == ASYNC);
        st = kiln_plan_kernel(&plan->base, slot, MMA_SOURCE, &o, "gemm_f16_mma");
        kiln_options_free(&o);
    }
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;
    plan->dims[0][0] = kiln_div_up(p->n, (size_t)t->bn) * (size_t)threads;
    plan->dims[0][1] = kiln_div_up(p->m, (size_t)t->bm);
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = (size_t)threads;
    plan->dims[1][1] = plan->dims[1][2] = 1;
    plan->aux[0] = (size_t)shared;
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "gemm_f16_mma");
    snprintf(plan->base.params, sizeof plan->base.params,
             "tile %dx%dx%d, %dx%d warps, %d stages, %ld bytes of shared memory%s", t->bm, t->bn, t->bk, t->warps_m,
             t->warps_n, t->stages, shared, rows_aligned ? "" : ", plain loads (rows unaligned)");
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
