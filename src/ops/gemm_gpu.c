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
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "%s", kernel);
    snprintf(plan->base.params, sizeof plan->base.params, "tile %ldx%ld, work-group %ldx%ld", tm, tn, dm, dn);
    const struct kiln_gemm_problem *p = &plan->p;
    plan->dims[0][0] = kiln_div_up(p->n, (size_t)tn) * (size_t)dn;
    plan->dims[0][1] = kiln_div_up(p->m, (size_t)tm) * (size_t)dm;
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = (size_t)dn;
    plan->dims[1][1] = (size_t)dm;
    plan->dims[1][2] = 1;
    kiln_status st = kiln_plan_kernel(&plan->base, 0, source, &options, kernel);
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
    return prepare(plan, "gemm/gemm_f32_direct", "gemm_f32_direct", KILN_GROUP_gemm_direct, d, d->wg, d->wg, d->mdimc,
                   d->ndimc);
}

void kiln_gemm_inplace_args(struct kiln_args *a, const struct kiln_gemm_problem *p, const struct kiln_gemm_args *x)
{
    kiln_args_int(a, (int32_t)p->m);
    kiln_args_int(a, (int32_t)p->n);
    kiln_args_int(a, (int32_t)p->k);
    kiln_args_float(a, x->alpha);
    kiln_args_float(a, x->beta);
    kiln_args_buffer(a, x->a);
    kiln_args_ulong(a, x->off_a);
    kiln_args_int(a, (int32_t)p->lda);
    kiln_args_ulong(a, p->stride_a);
    kiln_args_buffer(a, x->b);
    kiln_args_ulong(a, x->off_b);
    kiln_args_int(a, (int32_t)p->ldb);
    kiln_args_ulong(a, p->stride_b);
    kiln_args_buffer(a, x->c);
    kiln_args_ulong(a, x->off_c);
    kiln_args_int(a, (int32_t)p->ldc);
    kiln_args_ulong(a, p->stride_c);
}

kiln_status kiln_gemm_inplace_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    struct kiln_args a = {0};
    kiln_gemm_inplace_args(&a, &plan->p, x);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[0], &a, 3, plan->dims[0], plan->dims[1], 0, event);
}

const struct kiln_gemm_algorithm kiln_gemm_tiled = {"tiled",       KILN_GEMM_TILED,           NULL,
                                                    tiled_prepare, kiln_gemm_inplace_execute, NULL};
const struct kiln_gemm_algorithm kiln_gemm_direct = {"direct",       KILN_GEMM_DIRECT,          NULL,
                                                     direct_prepare, kiln_gemm_inplace_execute, NULL};
