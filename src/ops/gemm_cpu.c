/*
 * The CPU GEMM family (cl/gemm/gemm_f32_cpu.cl): pack A and B into zero-padded
 * panels of MR rows and NR columns, then one MR x NR register tile per
 * work-item over the whole K. An operand with batch stride 0 is packed once.
 */
#include <stdint.h>
#include <stdio.h>

#include "core/diag.h"
#include "ops/gemm.h"

#define SOURCE "gemm/gemm_f32_cpu"

enum { PACK_A, PACK_B, MICRO };

static kiln_status cpu_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_gemm_problem *p = &plan->p;
    const struct kiln_param_gemm_cpu *cpu;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_cpu, &cpu);
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_gemm_options(plan, &options);
    const struct kiln_cpu_tile tile = kiln_cpu_tile_choose(cpu, p->m, p->n, &options);
    st = kiln_options_status(&options, "gemm");
    const size_t mr = (size_t)tile.mr, nr = (size_t)tile.nr;
    snprintf(plan->info.kernel, sizeof plan->info.kernel, "gemm_f32_cpu_%zux%zu", mr, nr);
    snprintf(plan->info.params, sizeof plan->info.params, "MR=%zu NR=%zu VW=%ld", mr, nr, tile.vw);
    static const char *const names[] = {"gemm_f32_cpu_pack_a", "gemm_f32_cpu_pack_b", "gemm_f32_cpu_micro"};
    for (int i = 0; i < 3 && st == KILN_SUCCESS; i++)
        st = kiln_kernel_get(plan->ctx, SOURCE, kiln_options_text(&options), names[i], &plan->kernels[i]);
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;

    size_t panels_m = kiln_div_up(p->m, mr), panels_n = kiln_div_up(p->n, nr);
    size_t batch_a = p->stride_a ? p->batch : 1, batch_b = p->stride_b ? p->batch : 1;
    size_t geometry[3][3] = {{p->k, panels_m, batch_a}, {p->k, panels_n, batch_b}, {panels_m, panels_n, p->batch}};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 3; d++)
            plan->dims[i][d] = geometry[i][d];
    /* Floats between batch items' panels; 0 for an operand packed once. */
    size_t span_a = panels_m * mr * p->k, span_b = panels_n * nr * p->k;
    plan->aux[0] = p->stride_a ? span_a : 0;
    plan->aux[1] = p->stride_b ? span_b : 0;
    if ((st = kiln_gemm_workspace(plan, 0, batch_a * span_a * sizeof(float))) != KILN_SUCCESS)
        return st;
    return kiln_gemm_workspace(plan, 1, batch_b * span_b * sizeof(float));
}

static kiln_status cpu_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    const struct kiln_gemm_problem *p = &plan->p;
    /* Kernel int and ulong arguments. */
    const int32_t m = (int32_t)p->m, n = (int32_t)p->n, k = (int32_t)p->k, ldc = (int32_t)p->ldc;
    /* Element strides of opA(i, k) and opB(k, j) in the stored matrices. */
    const uint64_t a_ri = p->trans_a ? 1 : p->lda, a_rk = p->trans_a ? p->lda : 1;
    const uint64_t b_rk = p->trans_b ? 1 : p->ldb, b_rj = p->trans_b ? p->ldb : 1;
    const uint64_t off_a = x->off_a, off_b = x->off_b, off_c = x->off_c;
    const uint64_t stride_a = p->stride_a, stride_b = p->stride_b, stride_c = p->stride_c;
    const uint64_t span_a = plan->aux[0], span_b = plan->aux[1], off_bias = x->off_bias;
    void *ap = plan->workspace[0]->handle, *bp = plan->workspace[1]->handle;

    const struct kiln_arg pack_a[] = {
        {KILN_ARG_SCALAR, sizeof m, &m},         {KILN_ARG_SCALAR, sizeof k, &k},
        {KILN_ARG_BUFFER, 0, x->a},              {KILN_ARG_SCALAR, sizeof off_a, &off_a},
        {KILN_ARG_SCALAR, sizeof a_ri, &a_ri},   {KILN_ARG_SCALAR, sizeof a_rk, &a_rk},
        {KILN_ARG_SCALAR, sizeof stride_a, &stride_a}, {KILN_ARG_BUFFER, 0, ap},
    };
    const struct kiln_arg pack_b[] = {
        {KILN_ARG_SCALAR, sizeof n, &n},         {KILN_ARG_SCALAR, sizeof k, &k},
        {KILN_ARG_BUFFER, 0, x->b},              {KILN_ARG_SCALAR, sizeof off_b, &off_b},
        {KILN_ARG_SCALAR, sizeof b_rk, &b_rk},   {KILN_ARG_SCALAR, sizeof b_rj, &b_rj},
        {KILN_ARG_SCALAR, sizeof stride_b, &stride_b}, {KILN_ARG_BUFFER, 0, bp},
    };
    const struct kiln_arg micro[] = {
        {KILN_ARG_SCALAR, sizeof m, &m},
        {KILN_ARG_SCALAR, sizeof n, &n},
        {KILN_ARG_SCALAR, sizeof k, &k},
        {KILN_ARG_SCALAR, sizeof x->alpha, &x->alpha},
        {KILN_ARG_SCALAR, sizeof x->beta, &x->beta},
        {KILN_ARG_BUFFER, 0, ap},
        {KILN_ARG_SCALAR, sizeof span_a, &span_a},
        {KILN_ARG_BUFFER, 0, bp},
        {KILN_ARG_SCALAR, sizeof span_b, &span_b},
        {KILN_ARG_BUFFER, 0, x->c},
        {KILN_ARG_SCALAR, sizeof off_c, &off_c},
        {KILN_ARG_SCALAR, sizeof ldc, &ldc},
        {KILN_ARG_SCALAR, sizeof stride_c, &stride_c},
        /* Epilogue operands; C stands in for the unused ones (never read). */
        {KILN_ARG_BUFFER, 0, x->bias ? x->bias : x->c},
        {KILN_ARG_SCALAR, sizeof off_bias, &off_bias},
        {KILN_ARG_BUFFER, 0, x->z ? x->z : x->c},
        {KILN_ARG_SCALAR, sizeof x->slope, &x->slope},
    };
    static const size_t one[3] = {1, 1, 1};
    kiln_status st = KILN_SUCCESS;
    if (!x->reuse_a)
        st = kiln_kernel_launch(plan->ctx, plan->kernels[PACK_A], pack_a, 8, 3, plan->dims[PACK_A], NULL, 0, NULL);
    if (st == KILN_SUCCESS && !x->reuse_b)
        st = kiln_kernel_launch(plan->ctx, plan->kernels[PACK_B], pack_b, 8, 3, plan->dims[PACK_B], NULL, 0, NULL);
    if (st == KILN_SUCCESS)
        st = kiln_kernel_launch(plan->ctx, plan->kernels[MICRO], micro, 17, 3, plan->dims[MICRO], one, 0, event);
    return st;
}

const struct kiln_gemm_family kiln_gemm_cpu = {"cpu", KILN_GEMM_CPU, cpu_prepare, cpu_execute};
