/*
 * Every shipped device profile's convolution parameters compile and compute
 * right: for each non-abstract embedded profile, a context on this machine's
 * device forced to that profile runs every algorithm that applies to a 3x3
 * pad 1 shape (NCHW) and to a 1x1 shape (NHWC) through the public API,
 * checked against the plain-C reference of conv_ref.h. One test per profile.
 *
 * Both shapes carry bias and ReLU and leave partial tiles (odd pixel counts,
 * filter counts that are not multiples of 4, 6 or 8) so no profile's tile or
 * vector width can assume whole tiles. Algorithms still being written
 * (UNSUPPORTED "not implemented") are listed and passed over; a profile whose
 * every algorithm is unwritten is skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_ref.h"
#include "profiles/profile.h"
#include "test_util.h"

static uint64_t seed;

static const kiln_conv_algo for_3x3[] = {KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL, KILN_CONV_DIRECT,
                                         KILN_CONV_WINOGRAD_2X2, KILN_CONV_WINOGRAD_4X4};
static const kiln_conv_algo for_1x1[] = {KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL, KILN_CONV_DIRECT,
                                         KILN_CONV_GEMM_1X1};

static const struct shape {
    const char *what;
    kiln_tensor_layout layout;
    size_t n, c, h, w, k, r, pad;
    const kiln_conv_algo *algos;
    size_t algo_count;
} shapes[] = {
    {"3x3 pad1", KILN_NCHW, 2, 12, 9, 11, 13, 3, 1, for_3x3, sizeof for_3x3 / sizeof *for_3x3},
    {"1x1", KILN_NHWC, 1, 20, 7, 9, 13, 1, 0, for_1x1, sizeof for_1x1 / sizeof *for_1x1},
};

static void test_profile(void **state)
{
    const char *name = *state;
    kiln_context *ctx = kt_profile_context(name);

    size_t ran = 0, unwritten = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t a = 0; a < shapes[i].algo_count; a++) {
            const struct shape *sh = &shapes[i];
            kiln_conv2d_desc d;
            kiln_conv2d_desc_init(&d, sh->layout, sh->n, sh->c, sh->h, sh->w, sh->k, sh->r, sh->r);
            d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = sh->pad;
            d.has_bias = 1;
            d.activation = KILN_ACT_RELU;
            d.algo = sh->algos[a];
            kiln_conv2d_plan *plan = NULL;
            kiln_status st = kiln_conv2d_plan_create(ctx, &d, &plan);
            if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) {
                printf("# %s %s algo %d: %s\n", name, sh->what, (int)d.algo, kiln_last_error_detail());
                unwritten++;
                continue;
            }
            if (st != KILN_SUCCESS)
                fail_msg("profile %s, %s, algo %d: plan_create: %s: %s", name, sh->what, (int)d.algo,
                         kiln_status_string(st), kiln_last_error_detail());
            kiln_conv2d_plan_info info;
            kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
            assert_int_equal(info.algo, d.algo);
            assert_string_equal(info.profile, name);
            printf("# %s %s: %s %s [%s]\n", name, sh->what, info.name, info.kernel, info.params);

            char label[160];
            snprintf(label, sizeof label, "profile %s, %s, %s", name, sh->what, info.name);
            struct cr_case t;
            cr_case_init(&t, ctx, &d);
            cr_case_fill(&t, &seed);
            kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
            cr_case_check(&t, cr_algo_tol(d.algo, t.dims.k_eff), label);
            cr_case_free(&t);
            kiln_conv2d_plan_destroy(plan);
            ran++;
        }
    kiln_context_destroy(ctx);
    if (!ran && unwritten)
        skip();
}

int main(void)
{
    seed = kt_seed();
    return kt_run_per_profile("conv_conformance", test_profile, NULL, NULL, 0);
}
