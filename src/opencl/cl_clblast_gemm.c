/*
 * The CLBlast GEMM route: CLBlast's own SGEMM on the context's queue, for
 * devices whose profile says it beats kiln's kernels. A GEMM family
 * (src/ops/gemm.h) that lives with the OpenCL backend because it hands
 * kiln's buffers to CLBlast as cl_mem. Built only with KILN_WITH_CLBLAST;
 * otherwise it answers that it does not apply.
 */
#include "ops/gemm.h"

#if KILN_WITH_CLBLAST

#include <stdio.h>

#include <clblast_c.h>

#include "core/diag.h"
#include "kiln/kiln_cl.h"

static const char *clblast_unsupported(const struct kiln_gemm_problem *p)
{
    return p->dtype != KILN_F32 ? "the CLBlast route is fp32 only" : NULL;
}

static kiln_status clblast_prepare(struct kiln_gemm_plan *plan)
{
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "CLBlastSgemmStridedBatched");
    snprintf(plan->base.params, sizeof plan->base.params, "CLBlast's own tuning database");
    return kiln_context_get_cl(plan->base.ctx, NULL, NULL, NULL);
}

static kiln_status clblast_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    const struct kiln_gemm_problem *p = &plan->p;
    cl_command_queue queue;
    kiln_status st = kiln_context_get_cl(plan->base.ctx, NULL, NULL, &queue);
    if (st != KILN_SUCCESS)
        return st;
    CLBlastStatusCode code = CLBlastSgemmStridedBatched(
        CLBlastLayoutRowMajor, p->trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
        p->trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, p->m, p->n, p->k, x->alpha, (cl_mem)x->a, x->off_a,
        p->lda, p->stride_a, (cl_mem)x->b, x->off_b, p->ldb, p->stride_b, x->beta, (cl_mem)x->c, x->off_c, p->ldc,
        p->stride_c, p->batch, &queue, (cl_event *)event);
    if (code != CLBlastSuccess)
        return kiln_error(code == CLBlastOpenCLOutOfResources || code == CLBlastOpenCLOutOfHostMemory
                              ? KILN_ERROR_OUT_OF_MEMORY
                              : KILN_ERROR_DEVICE,
                          "CLBlastSgemmStridedBatched failed with CLBlast status %d", (int)code);
    return KILN_SUCCESS;
}

const struct kiln_gemm_algorithm kiln_gemm_clblast = {"clblast",       KILN_GEMM_CLBLAST, clblast_unsupported,
                                                      clblast_prepare, clblast_execute,   NULL};

#else

static const char *clblast_missing(const struct kiln_gemm_problem *p)
{
    (void)p;
    return "kiln was built without CLBlast (KILN_WITH_CLBLAST)";
}

const struct kiln_gemm_algorithm kiln_gemm_clblast = {"clblast", KILN_GEMM_CLBLAST, clblast_missing, NULL, NULL, NULL};

#endif
