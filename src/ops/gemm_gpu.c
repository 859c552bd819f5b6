/*
 * The GPU-style GEMM families, whose kernels (cl/gemm/gemm_f32_tiled.cl,
 * cl/gemm/gemm_f32_direct.cl) read A, B and C in place with their leading
 * dimensions, offsets and batch strides and handle edge tiles themselves, so
 * no workspace is needed; the launch of that interface, which the small-M
 * family (gemm_smallm.c) shares, is kiln_gemm_inplace_execute.
 *   tiled:  MWG x NWG tiles staged in local memory, MDIMC x NDIMC work-items;
 *   direct: WGD x WGD tiles, MDIMCD x NDIMCD work-items, for small problems.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/diag.h"
#include "ops/gemm.h"

/* Launch geometry from the tile edges along M and N and the work-group
   shape; the kernel's options from its parameter group. dims[0] is the
   global size, dims[1] the local. */
static kiln_status prepare(struct kiln_gemm_plan *plan, const char *source, const char *kernel,
                           enum kiln_group_id group, const void *values, long tm, long tn, long dm, long dn)
{
    struct kiln_options options = {0};
    kiln_gemm_options(plan, &options);
    kiln_profile_defines(&options, group, values);
    snprintf(plan->info.kernel, sizeof plan->info.kernel, "%s", kernel);
    snprintf(plan->info.params, sizeof plan->info.params, "tile %ldx%ld, work-group %ldx%ld", tm, tn, dm, dn);
    const struct kiln_gemm_problem *p = &plan->p;
    plan->dims[0][0] = kiln_div_up(p->n, (size_t)tn) * (size_t)dn;
    plan->dims[0][1] = kiln_div_up(p->m, (size_t)tm) * (size_t)dm;
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = (size_t)dn;
    plan->dims[1][1] = (size_t)dm;
    plan->dims[1][2] = 1;
    kiln_status st = kiln_options_status(&options, "gemm");
    if (st == KILN_SUCCESS)
        st = kiln_kernel_get(plan->ctx, source, kiln_options_text(&options), kernel, &plan->kernels[0]);
    kiln_options_free(&options);
    return st;
}

static kiln_status tiled_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_param_gemm_tiled *t;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_tiled, &t);
    if (st != KILN_SUCCESS)
        return st;
    return prepare(plan, "gemm/gemm_f32_tiled", "gemm_f32_tiled", KILN_GROUP_gemm_tiled, t, t->mwg, t->nwg, t->mdimc,
                   t->ndimc);
}

static kiln_status direct_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_param_gemm_direct *d;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_direct, &d);
    if (st != KILN_SUCCESS)
        return st;
    return prepare(plan, "gemm/gemm_f32_direct", "gemm_f32_direct", KILN_GROUP_gemm_direct, d, d->wg, d->wg,
                   d->mdimc, d->ndimc);
}

kiln_status kiln_gemm_inplace_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    const struct kiln_gemm_problem *p = &plan->p;
    const int32_t m = (int32_t)p->m, n = (int32_t)p->n, k = (int32_t)p->k;
    const int32_t lda = (int32_t)p->lda, ldb = (int32_t)p->ldb, ldc = (int32_t)p->ldc;
    const uint64_t off_a = x->off_a, off_b = x->off_b, off_c = x->off_c;
    const uint64_t stride_a = p->stride_a, stride_b = p->stride_b, stride_c = p->stride_c;
    const struct kiln_arg args[] = {
        {KILN_ARG_SCALAR, sizeof m, &m},
        {KILN_ARG_SCALAR, sizeof n, &n},
        {KILN_ARG_SCALAR, sizeof k, &k},
        {KILN_ARG_SCALAR, sizeof x->alpha, &x->alpha},
        {KILN_ARG_SCALAR, sizeof x->beta, &x->beta},
        {KILN_ARG_BUFFER, 0, x->a},
        {KILN_ARG_SCALAR, sizeof off_a, &off_a},
        {KILN_ARG_SCALAR, sizeof lda, &lda},
        {KILN_ARG_SCALAR, sizeof stride_a, &stride_a},
        {KILN_ARG_BUFFER, 0, x->b},
        {KILN_ARG_SCALAR, sizeof off_b, &off_b},
        {KILN_ARG_SCALAR, sizeof ldb, &ldb},
        {KILN_ARG_SCALAR, sizeof stride_b, &stride_b},
        {KILN_ARG_BUFFER, 0, x->c},
        {KILN_ARG_SCALAR, sizeof off_c, &off_c},
        {KILN_ARG_SCALAR, sizeof ldc, &ldc},
        {KILN_ARG_SCALAR, sizeof stride_c, &stride_c},
    };
    return kiln_kernel_launch(plan->ctx, plan->kernels[0], args, 17, 3, plan->dims[0], plan->dims[1], 0, event);
}

const struct kiln_gemm_family kiln_gemm_tiled = {"tiled", KILN_GEMM_TILED, tiled_prepare, kiln_gemm_inplace_execute};
const struct kiln_gemm_family kiln_gemm_direct = {"direct", KILN_GEMM_DIRECT, direct_prepare,
                                                  kiln_gemm_inplace_execute};
