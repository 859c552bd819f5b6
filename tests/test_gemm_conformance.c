/*
 * Every shipped device profile's GEMM parameters compile and compute right:
 * for each non-abstract embedded profile, a context on this machine's device
 * forced to that profile runs the CPU, TILED, DIRECT and SMALLM families on
 * an edge shape, a tile-ish shape, a few-row shape and 1x1x1 through the
 * public API (and a long K, which the tiled family splits where the profile
 * lets it), checked against the plain-C reference of gemm_ref.h, and AUTO
 * takes the small-M kernels for one row of C exactly when the profile's
 * select.gemm_smallm_max allows. One test per profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "cpu_tile.h"
#include "gemm_ref.h"
#include "ops/gemm.h"
#include "profiles/profile.h"
#include "test_util.h"

static uint64_t seed;

static const kiln_gemm_algo algos[] = {KILN_GEMM_CPU, KILN_GEMM_TILED, KILN_GEMM_DIRECT, KILN_GEMM_SMALLM};

/* The edge shape also has odd offsets and padded leading dimensions, so no
   profile's vector widths may assume aligned operands. */
static const struct shape {
    kiln_transpose tb;
    size_t m, n, k, pad, off;
} shapes[] = {
    {KILN_TRANS, 37, 70, 19, 3, 1},    /* partial tiles in every dimension, B transposed */
    {KILN_NO_TRANS, 64, 96, 48, 0, 0}, /* whole tiles for most profiles */
    {KILN_NO_TRANS, 5, 67, 35, 1, 2},  /* few rows: small-M row blocks and vectors with edges */
    {KILN_NO_TRANS, 1, 1, 1, 0, 0},
    {KILN_NO_TRANS, 40, 16, 33, 1, 2}, /* 16 columns: the CPU family's narrow tile, where a profile has one */
    {KILN_TRANS, 20, 33, 1000, 1, 1},  /* one tile, long K: the tiled family splits K */
    {KILN_NO_TRANS, 130, 7, 64, 2, 3}, /* 7 columns: the CPU family flips the product, tiles of C^T */
    {KILN_TRANS, 49, 100, 24, 1, 1},   /* 49 rows: seven balanced rows per panel on 8-row tiles */
};

/* The tile of C or, where cheaper after 1 + vw/k for its element-wise
   stores and the packing of A and B on every call (none for B where the
   flipped tile reads it in place), of C^T ("t"). The straight tile reads
   A in place (its rows here never more than 32 KiB apart: 0.5% of its
   multiply-adds, docs/gemm.md) and an untransposed B whose columns fill
   whole panels (KILN_GEMM_B_IN_PLACE_COST) where cheaper than packing
   them. */
static void expected_cpu_kernel(kiln_context *ctx, const struct shape *s, size_t ldb, unsigned keep, char *name,
                                size_t size)
{
    const struct kiln_param_gemm_cpu *cpu = &kiln_profile_params(ctx->profile)->gemm_cpu;
    long mr, nr, fmr, fnr;
    const double k = (double)s->k;
    const double pack_a = keep & KILN_GEMM_KEEP_A ? 0.0 : (double)s->m * k,
                 pack_b = keep & KILN_GEMM_KEEP_B ? 0.0 : (double)s->n * k;
    const int in_place_b =
        s->tb == KILN_NO_TRANS && kiln_gemm_cpu_in_place_l2(ctx, s->k * ldb * sizeof(float)) <= cpu->in_place_l2;
    const double micro = kt_cpu_tile(cpu, (long)s->m, (long)s->n, &mr, &nr) * k;
    double read_a = KILN_GEMM_PACK_COST * pack_a, read_b = KILN_GEMM_PACK_COST * pack_b;
    if (cpu->a_in_place && (long)s->m >= mr && 0.005 * micro < read_a)
        read_a = 0.005 * micro;
    if (s->tb == KILN_NO_TRANS && (long)s->n % nr == 0 && KILN_GEMM_B_IN_PLACE_COST * micro < read_b)
        read_b = KILN_GEMM_B_IN_PLACE_COST * micro;
    const double straight = micro + read_a + read_b;
    const double flipped =
        kt_cpu_flip_tile(cpu, in_place_b, (long)s->n, (long)s->m, &fmr, &fnr) * (k + (double)cpu->vw) +
        KILN_GEMM_PACK_COST * (pack_a + (in_place_b && fmr <= (long)s->n ? 0.0 : pack_b));
    if (flipped < straight)
        snprintf(name, size, "gemm_f32_cpu_%ldx%ldt", fmr, fnr);
    else
        snprintf(name, size, "gemm_f32_cpu_%ldx%ld", mr, nr);
}

static void test_profile(void **state)
{
    const char *name = *state;
    kiln_context *ctx = kt_profile_context(name);

    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            kiln_gemm_desc d;
            kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, shapes[s].tb, shapes[s].m, shapes[s].n, shapes[s].k);
            d.algo = algos[a];
            d.lda += shapes[s].pad, d.ldb += shapes[s].pad, d.ldc += shapes[s].pad;
            kiln_gemm_plan *plan = NULL;
            kiln_status st = kiln_gemm_plan_create(ctx, &d, &plan);
            if (kt_unsupported_here(ctx, st))
                continue;
            if (st != KILN_SUCCESS)
                fail_msg("profile %s, algo %d, %zux%zux%zu: plan_create: %s: %s", name, algos[a], d.m, d.n, d.k,
                         kiln_status_string(st), kiln_last_error_detail());
            kiln_gemm_plan_info info;
            kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
            assert_int_equal(info.algo, algos[a]);
            assert_string_equal(info.profile, name);
            printf("# %s %zux%zux%zu: %s %s\n", name, d.m, d.n, d.k, info.kernel, info.params);
            if (algos[a] == KILN_GEMM_CPU) {
                char kernel[64];
                expected_cpu_kernel(ctx, &shapes[s], d.ldb, 0, kernel, sizeof kernel);
                assert_string_equal(info.kernel, kernel);
            }

            struct gr_case t;
            const size_t off = shapes[s].off;
            gr_case_init(&t, ctx, &d, off, 2 * off, 3 * off, 0);
            gr_case_run(&t, plan, 2, &seed);
            gr_case_free(&t);
            kiln_gemm_plan_destroy(plan);
        }

    /* kiln's operators tell the CPU family which operand they keep (constant
       weights, packed once); the orientation counts no packing for it. */
    for (size_t s = 0; ctx->vector_kernels && s < sizeof shapes / sizeof *shapes; s++)
        for (unsigned keep = KILN_GEMM_KEEP_A; keep <= KILN_GEMM_KEEP_B; keep++) {
            kiln_gemm_desc d;
            kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, shapes[s].tb, shapes[s].m, shapes[s].n, shapes[s].k);
            d.algo = KILN_GEMM_CPU;
            d.ldb += shapes[s].pad;
            kiln_gemm_plan *plan = NULL;
            kt_assert_status(kiln_gemm_plan_create_fused(ctx, &d, NULL, keep, &plan), KILN_SUCCESS);
            kiln_gemm_plan_info info;
            kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
            char kernel[64];
            expected_cpu_kernel(ctx, &shapes[s], d.ldb, keep, kernel, sizeof kernel);
            printf("# %s %zux%zux%zu keep %u: %s %s\n", name, d.m, d.n, d.k, keep, info.kernel, info.params);
            assert_string_equal(info.kernel, kernel);
            kiln_gemm_plan_destroy(plan);
        }

    const long smallm_max = kiln_profile_params(ctx->profile)->select.gemm_smallm_max;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, 1, 1000, 1024);
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_gemm_plan_info info;
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    printf("# %s AUTO 1x1000x1024: %s (%s)\n", name, info.kernel, info.reason);
    if (smallm_max >= 1 && ctx->vector_kernels)
        assert_int_equal(info.algo, KILN_GEMM_SMALLM);
    else
        assert_int_not_equal(info.algo, KILN_GEMM_SMALLM);
    kiln_gemm_plan_destroy(plan);
    kiln_context_destroy(ctx);
}

int main(void)
{
    seed = kt_seed();
    struct kt_list tests = {0};
    kt_add_profiles(&tests, test_profile, NULL);
    return kt_run_with("gemm_conformance", &tests, NULL, NULL);
}
