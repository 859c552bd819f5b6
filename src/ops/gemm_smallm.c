/*
 * The small-M GEMM family (cl/gemm/gemm_f32_smallm.cl): a few rows of C from
 * A and B read in place, for CPUs, where the CPU family's packing of B costs
 * far more than the product itself when M is small (a matrix-vector product
 * reads each element of B once). The kernels take the in-place interface of
 * gemm_f32_tiled.cl and launch through kiln_gemm_inplace_execute; no
 * workspace, no epilogue.
 *
 * A work-item owns smallm_nc columns of C (B transposed: the dot kernel) or
 * ceil(smallm_nc / smallm_vw) vectors of smallm_vw columns (B as stored: the
 * axpy kernel) and runs over all M rows, MB at a time, MB the even split of M
 * into blocks of at most smallm_mr rows: its B lines, loaded for the first
 * block, are still in cache for the next. MB is a compile-time constant: one
 * program per MB (1 to smallm_mr), transposes and storage type.
 *
 * B as stored, with smallm_kc > 0: a work-item owns `chunks` such groups of
 * columns, enough for one work-item per compute unit (at most smallm_chunks),
 * and takes K smallm_kc rows at a time for all of them and all rows of C,
 * so that it reads B's rows in long runs (the kernel's comment says why);
 * their sums wait in private memory, at most SMALLM_PART_BYTES of it for a
 * work-group: fewer chunks where M or N is large, none (kc ignored) where a
 * work-group's work-items cannot all park one chunk's.
 */
#include <stdio.h>
#include <string.h>

#include "core/diag.h"
#include "ops/gemm.h"

#define SOURCE "gemm/gemm_f32_smallm"

/* The most private memory the parked sums of a work-group's work-items
   take (smallm_kc). */
#define SMALLM_PART_BYTES ((size_t)32 << 10)

static kiln_status smallm_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_gemm_problem *p = &plan->p;
    const struct kiln_param_gemm_smallm *sm;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_smallm, &sm);
    if (st != KILN_SUCCESS)
        return st;
    const long mr = sm->mr, nc = sm->nc, vw = sm->vw;
    const size_t mb = kiln_div_up(p->m, kiln_div_up(p->m, (size_t)mr));
    /* Accumulator vectors per row: columns (dot) or column vectors (axpy). */
    const size_t nb = p->trans_b ? (size_t)nc : kiln_div_up((size_t)nc, (size_t)vw);
    struct kiln_options options = {0};
    kiln_gemm_options(plan, &options);
    kiln_profile_defines(&options, KILN_GROUP_gemm_smallm, sm);
    kiln_options_add(&options, "-DKILN_SMALLM_MB=%zu -DKILN_SMALLM_NB=%zu", mb, nb);
    /* Steps of kc rows over `chunks` groups of nb vectors (B as stored): as
       many as give each compute unit one work-item, at most smallm_chunks
       and what the parked sums' bound allows, counted over a work-group's
       wg work-items (POCL keeps their private arrays on one thread's
       stack: work-groups of 256 with 32 KiB each overflowed it). */
    const size_t blocks = kiln_div_up(p->m, mb), chunk_cols = nb * (size_t)vw;
    const size_t row_bytes = (size_t)sm->wg * blocks * mb * chunk_cols * sizeof(float); /* a chunk's */
    size_t chunks = 1, kc = 0;
    if (!p->trans_b && sm->kc > 0 && row_bytes <= SMALLM_PART_BYTES) {
        const size_t units = plan->base.ctx->desc.compute_units ? plan->base.ctx->desc.compute_units : 1;
        chunks = kiln_div_up(kiln_div_up(p->n, chunk_cols), units);
        if (chunks > (size_t)sm->chunks)
            chunks = (size_t)sm->chunks;
        if (chunks > SMALLM_PART_BYTES / row_bytes)
            chunks = SMALLM_PART_BYTES / row_bytes;
        kc = (size_t)sm->kc;
    }
    if (kc)
        kiln_options_add(&options, "-DKILN_SMALLM_KC=%zu -DKILN_SMALLM_CHUNKS=%zu -DKILN_SMALLM_BLOCKS=%zu", kc, chunks,
                         blocks);
    const char *kernel = p->trans_b ? "gemm_f32_smallm_dot" : "gemm_f32_smallm_axpy";
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "%s", kernel);
    snprintf(plan->base.params, sizeof plan->base.params, "MB=%zu NB=%zu VW=%ld WG=%d", mb, nb, vw, sm->wg);
    if (kc) {
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, " CHUNKS=%zu KC=%zu", chunks, kc);
    }
    /* Work-groups of wg work-items (1 on CPUs); those past N return. */
    const size_t wg = (size_t)sm->wg;
    plan->dims[0][0] = kiln_div_up(kiln_div_up(p->n, p->trans_b ? nb : chunk_cols * chunks), wg) * wg;
    plan->dims[0][1] = 1;
    plan->dims[0][2] = p->batch;
    plan->dims[1][0] = wg, plan->dims[1][1] = plan->dims[1][2] = 1;
    kiln_options_only(&options, &kernel, 1);
    st = kiln_plan_kernel(&plan->base, 0, SOURCE, &options, kernel);
    kiln_options_free(&options);
    return st;
}

const struct kiln_gemm_algorithm kiln_gemm_smallm = {"smallm",       KILN_GEMM_SMALLM,          NULL,
                                                     smallm_prepare, kiln_gemm_inplace_execute, NULL};
