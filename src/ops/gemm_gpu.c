/*
 * The GPU-style GEMM families, whose kernels (cl/gemm/gemm_f32_tiled.cl,
 * cl/gemm/gemm_f32_direct.cl) read A, B and C in place with their leading
 * dimensions, offsets and batch strides and handle edge tiles themselves, so
 * no workspace is needed; the launch of that interface, which the small-M
 * family (gemm_smallm.c) shares, is kiln_gemm_inplace_execute.
 *   tiled:  MWG x NWG tiles staged in local memory, MDIMC x NDIMC work-items;
 *           split K where the tiles cannot fill the device (below);
 *   direct: WGD x WGD tiles, MDIMCD x NDIMCD work-items, for small problems.
 *
 * Split K: a product of fewer tiles (batch items included) than
 * split_k_waves work-groups per compute unit, and at least two slices of
 * split_k_min along K, runs as S slices of KS (a multiple of KWG) whose fp32
 * products go to a workspace of batch x S x M x N floats; a second kernel
 * adds them in a fixed order and applies alpha and beta. S is as many
 * slices as fill that many work-groups, no more than K allows.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/diag.h"
#include "ops/gemm.h"

/* Launch geometry from the tile edges along M and N and the work-group
   shape; the kernel's options from its parameter group. dims[0] is the
   global size, dims[1] the local. With `kept` (split K) the kernel is not
   built: its options go to *kept for the split program. */
static kiln_status prepare(struct kiln_gemm_plan *plan, const char *source, const char *kernel,
                           enum kiln_group_id group, const void *values, long tm, long tn, long dm, long dn,
                           struct kiln_options *kept)
{
    struct kiln_options options = {0};
    kiln_gemm_options(plan, &options);
    kiln_profile_defines(&options, group, values);
    if (kept) {
        *kept = options;
        options = (struct kiln_options){0};
    }
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "%s", kernel);
    snprintf(plan->base.params, sizeof plan->base.params, "tile %ldx%ld, work-group %ldx%ld", tm, tn, dm, dn);
    const struct kiln_gemm_problem *p = &plan->p;
    plan->dims[0][0] = kiln_div_up(p->n, (size_t)tn) * (size_t)dn;
    plan->dims[0][1] = kiln_div_up(p->m, (size_t)tm) * (size_t)dm;
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = (size_t)dn;
    plan->dims[1][1] = (size_t)dm;
    plan->dims[1][2] = 1;
    kiln_status st = kept ? KILN_SUCCESS : kiln_plan_kernel(&plan->base, 0, source, &options, kernel);
    kiln_options_free(&options);
    return st;
}

#define TILED_SOURCE "gemm/gemm_f32_tiled"
enum { SPLIT = 1, REDUCE = 2 }; /* kernel slots of a split plan (0: unused) */

/* Slices of K for the tiled kernel: 1 (no split), or S >= 2 slices of KS,
   into aux[0] and aux[1]; the problem's tiles. */
static size_t split_k(struct kiln_gemm_plan *plan, const struct kiln_param_gemm_tiled *t)
{
    const struct kiln_gemm_problem *p = &plan->p;
    const size_t tiles = kiln_div_up(p->m, (size_t)t->mwg) * kiln_div_up(p->n, (size_t)t->nwg) * p->batch;
    plan->aux[0] = kiln_split_k(tiles, p->k, (size_t)t->kwg, t->split_k_min, t->split_k_waves,
                                plan->base.ctx->desc.compute_units, &plan->aux[1]);
    return tiles;
}

static kiln_status tiled_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_param_gemm_tiled *t;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_tiled, &t);
    if (st != KILN_SUCCESS)
        return st;
    const size_t tiles = split_k(plan, t);
    if (plan->aux[0] < 2)
        return prepare(plan, TILED_SOURCE, "gemm_f32_tiled", KILN_GROUP_gemm_tiled, t, t->mwg, t->nwg, t->mdimc,
                       t->ndimc, NULL);
    struct kiln_options options = {0};
    prepare(plan, TILED_SOURCE, "gemm_f32_tiled_split", KILN_GROUP_gemm_tiled, t, t->mwg, t->nwg, t->mdimc, t->ndimc,
            &options);
    const struct kiln_gemm_problem *p = &plan->p;
    const size_t s = plan->aux[0];
    kiln_split_k_describe(&plan->base, s, plan->aux[1], tiles);
    plan->dims[0][2] = p->batch * s;
    plan->dims[2][0] = p->n, plan->dims[2][1] = p->m, plan->dims[2][2] = p->batch;
    /* The split program holds the slice and reduction kernels. */
    kiln_options_add(&options, "-DKILN_GEMM_SPLIT=1");
    st = kiln_plan_kernel(&plan->base, SPLIT, TILED_SOURCE, &options, "gemm_f32_tiled_split");
    if (st == KILN_SUCCESS)
        st = kiln_plan_kernel(&plan->base, REDUCE, TILED_SOURCE, &options, "gemm_f32_split_reduce");
    kiln_options_free(&options);
    if (st == KILN_SUCCESS)
        st = kiln_plan_workspace(&plan->base, 0, p->batch * s * p->m * p->n * sizeof(float));
    return st;
}

static kiln_status tiled_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    if (plan->aux[0] < 2)
        return kiln_gemm_inplace_execute(plan, x, event);
    const struct kiln_gemm_problem *p = &plan->p;
    void *w = plan->base.workspace[0]->handle;
    kiln_status st = KILN_SUCCESS;
    /* With alpha == 0 the reduction alone: beta * C, reading neither A and B
       nor the workspace. */
    if (x->alpha != 0.0f) {
        struct kiln_args a = {0};
        kiln_args_int(&a, (int32_t)p->m);
        kiln_args_int(&a, (int32_t)p->n);
        kiln_args_int(&a, (int32_t)p->k);
        kiln_args_int(&a, (int32_t)plan->aux[1]);
        kiln_args_int(&a, (int32_t)plan->aux[0]);
        kiln_args_buffer(&a, x->a);
        kiln_args_ulong(&a, x->off_a);
        kiln_args_int(&a, (int32_t)p->lda);
        kiln_args_ulong(&a, p->stride_a);
        kiln_args_buffer(&a, x->b);
        kiln_args_ulong(&a, x->off_b);
        kiln_args_int(&a, (int32_t)p->ldb);
        kiln_args_ulong(&a, p->stride_b);
        kiln_args_buffer(&a, w);
        st =
            kiln_kernel_launch(plan->base.ctx, plan->base.kernels[SPLIT], &a, 3, plan->dims[0], plan->dims[1], 0, NULL);
    }
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_args r = {0};
    kiln_args_int(&r, (int32_t)p->m);
    kiln_args_int(&r, (int32_t)p->n);
    kiln_args_int(&r, (int32_t)plan->aux[0]);
    kiln_args_float(&r, x->alpha);
    kiln_args_float(&r, x->beta);
    kiln_args_buffer(&r, w);
    kiln_args_buffer(&r, x->c);
    kiln_args_ulong(&r, x->off_c);
    kiln_args_int(&r, (int32_t)p->ldc);
    kiln_args_ulong(&r, p->stride_c);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[REDUCE], &r, 3, plan->dims[2], NULL, 0, event);
}

static kiln_status direct_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_param_gemm_direct *d;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_direct, &d);
    if (st != KILN_SUCCESS)
        return st;
    return prepare(plan, "gemm/gemm_f32_direct", "gemm_f32_direct", KILN_GROUP_gemm_direct, d, d->wg, d->wg, d->mdimc,
                   d->ndimc, NULL);
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

const struct kiln_gemm_algorithm kiln_gemm_tiled = {"tiled", KILN_GEMM_TILED, NULL, tiled_prepare, tiled_execute, NULL};
const struct kiln_gemm_algorithm kiln_gemm_direct = {"direct",       KILN_GEMM_DIRECT,          NULL,
                                                     direct_prepare, kiln_gemm_inplace_execute, NULL};
