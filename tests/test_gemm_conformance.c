/*
 * Every shipped device profile's GEMM parameters compile and compute right:
 * for each non-abstract embedded profile, a context on this machine's device
 * forced to that profile runs the CPU, TILED and DIRECT families on an edge
 * shape, a tile-ish shape and 1x1x1 through the public API, checked against
 * the plain-C reference of gemm_ref.h. One test per profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_ref.h"
#include "profiles/profile.h"
#include "test_util.h"

static uint64_t seed;

static const kiln_gemm_algo algos[] = {KILN_GEMM_CPU, KILN_GEMM_TILED, KILN_GEMM_DIRECT};

/* The edge shape also has odd offsets and padded leading dimensions, so no
   profile's vector widths may assume aligned operands. */
static const struct shape {
    kiln_transpose tb;
    size_t m, n, k, pad, off;
} shapes[] = {
    {KILN_TRANS, 37, 70, 19, 3, 1},    /* partial tiles in every dimension, B transposed */
    {KILN_NO_TRANS, 64, 96, 48, 0, 0}, /* whole tiles for most profiles */
    {KILN_NO_TRANS, 1, 1, 1, 0, 0},
};

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
            if (st != KILN_SUCCESS)
                fail_msg("profile %s, algo %d, %zux%zux%zu: plan_create: %s: %s", name, algos[a], d.m, d.n, d.k,
                         kiln_status_string(st), kiln_last_error_detail());
            kiln_gemm_plan_info info;
            kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
            assert_int_equal(info.algo, algos[a]);
            assert_string_equal(info.profile, name);
            printf("# %s %zux%zux%zu: %s %s\n", name, d.m, d.n, d.k, info.kernel, info.params);

            struct gr_case t;
            const size_t off = shapes[s].off;
            gr_case_init(&t, ctx, &d, off, 2 * off, 3 * off, 0);
            gr_case_run(&t, plan, 2, &seed);
            gr_case_free(&t);
            kiln_gemm_plan_destroy(plan);
        }
    kiln_context_destroy(ctx);
}

int main(void)
{
    seed = kt_seed();
    return kt_run_per_profile("gemm_conformance", test_profile, NULL, NULL, 0);
}
