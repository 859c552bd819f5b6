/* A candidate tried as the tuner tries it (src/tune/trial.c): right
   parameters are timed; a kernel variant that computes a wrong result or
   does not build is rejected with its reason and never timed. The wrong
   variants come from a copy of the kernel sources (KILN_KERNEL_DIR) in
   which one register-tile height of the CPU GEMM packs A slightly wrong and
   another does not compile: only the candidates that select them fail. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "ops/find.h"
#include "trial_checks.h"

static void test_right_parameters_are_timed(void **state)
{
    (void)state;
    static const struct {
        kiln_layout layout;
        kiln_transpose ta, tb;
        size_t m, n, k, batch;
    } shapes[] = {{KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 70, 50, 40, 1},
                  {KILN_COL_MAJOR, KILN_TRANS, KILN_NO_TRANS, 33, 17, 65, 3},
                  {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, 1, 300, 64, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, shapes[i].layout, shapes[i].ta, shapes[i].tb, shapes[i].m, shapes[i].n, shapes[i].k);
        if (shapes[i].batch > 1) {
            d.batch = shapes[i].batch;
            d.stride_a = d.m * d.k, d.stride_b = d.k * d.n, d.stride_c = d.m * d.n;
        }
        struct kiln_trial t;
        kt_assert_status(kiln_trial_gemm(kt_ctx, &d, 3, 0.0, kt_group_seed + i, &t), KILN_SUCCESS);
        tc_assert_timed(&t);
        assert_true(t.runs >= 3 &&
                    t.runs <= KILN_TIME_MAX_RUNS); /* more where three add up to under KILN_TIME_MIN_MS */
    }
}

static kiln_status run_nothing(void *cookie)
{
    (void)cookie;
    return KILN_SUCCESS;
}

/* A run of *(double *)cookie milliseconds on the host's clock (no launch:
   kiln_time_runs times it by the clock). */
static kiln_status run_busy(void *cookie)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-6 < *(double *)cookie);
    return KILN_SUCCESS;
}

/* Runs too short to time by three are timed until they add up to
   KILN_TIME_MIN_MS (KILN_TIME_MAX_RUNS at most); longer ones take the runs asked for. */
static void test_short_runs_are_timed_more(void **state)
{
    (void)state;
    double ms = 0.0, busy = 0.6 * KILN_TIME_MIN_MS;
    int runs = 0;
    kt_assert_status(kiln_time_runs(kt_ctx, run_nothing, NULL, 3, 0.0, &ms, &runs), KILN_SUCCESS);
    assert_int_equal(runs, KILN_TIME_MAX_RUNS);
    kt_assert_status(kiln_time_runs(kt_ctx, run_busy, &busy, 3, 0.0, &ms, &runs), KILN_SUCCESS);
    assert_int_equal(runs, 3);
    assert_true(ms >= busy);
}

static void test_cutoff_stops_after_one_run(void **state)
{
    (void)state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 64, 64, 64);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_gemm(kt_ctx, &d, 9, 1e-9, kt_group_seed, &t), KILN_SUCCESS);
    tc_assert_timed(&t);
    assert_int_equal(t.runs, 1);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 8, 8, 8);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_gemm(NULL, &d, 1, 0.0, 1, &t), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_trial_gemm(kt_ctx, NULL, 1, 0.0, 1, &t), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_trial_gemm(kt_ctx, &d, 1, 0.0, 1, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

/* fp16 and bf16 storage, as the tensor-core families take it: operands
   drawn in the storage type, C checked with its own rounding added to the
   bound. */
static void test_16_bit_storage(void **state)
{
    (void)state;
    for (kiln_dtype t = KILN_F16; t <= KILN_BF16; t++) {
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, 67, 45, 130);
        d.dtype = t;
        struct kiln_trial trial;
        kt_assert_status(kiln_trial_gemm(kt_ctx, &d, 2, 0.0, kt_group_seed + t, &trial), KILN_SUCCESS);
        tc_assert_16_bit(&trial, t, "gemm");
    }
}

/* A trial of the CPU GEMM with register tiles `mr` rows high. */
static void trial_mr(int mr, struct kiln_trial *t)
{
    char overlay[128];
    snprintf(overlay, sizeof overlay, "{\"kernels\": {\"gemm.cpu\": {\"mr\": %d}}}", mr);
    kiln_context *ctx = kt_overlay_context("%s", overlay);
    kiln_gemm_desc d;
    /* n wide enough for the profile's tile (narrow problems take its narrow tile). */
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 45, 256, 33);
    d.algo = KILN_GEMM_CPU;
    kt_assert_status(kiln_trial_gemm(ctx, &d, 2, 0.0, kt_group_seed, t), KILN_SUCCESS);
    kiln_context_destroy(ctx);
}

static void test_wrong_and_broken_variants_are_rejected(void **state)
{
    (void)state;
    if (!kt_ctx->vector_kernels) {
        printf("# the CPU GEMM's kernels use OpenCL vector syntax, which the %s backend does not compile\n",
               kt_ctx->backend->name);
        skip();
    }
    char *dir = tc_kernels_begin(KT_CL_DIR), path[4200];
    snprintf(path, sizeof path, "%s/gemm/gemm_f32_cpu.cl", dir);
    /* Wrong for MR 5 in the micro kernel's alpha, which every orientation
       of the tile runs (a flipped plan that reads B in place never packs A,
       and which orientation a plan takes depends on the device's caches). */
    kt_edit_file(path, "KILN_TILE_HOLD(held, alpha_arg, beta_arg, slope_arg);",
                 "KILN_TILE_HOLD(held, alpha_arg * (MR == 5 ? 1.001f : 1.0f), beta_arg, slope_arg);");
    kt_edit_file(path, "#include \"common/epilogue.h\"",
                 "#if KILN_TILE_MR == 3\n#error a variant that does not build\n#endif\n"
                 "#include \"common/epilogue.h\"");

    struct kiln_trial t;
    trial_mr(4, &t);
    tc_assert_timed(&t);
    assert_non_null(strstr(t.params, "MR=4"));
    trial_mr(5, &t);
    tc_assert_rejected(&t, KILN_TRIAL_WRONG, "mr 5");
    trial_mr(3, &t);
    tc_assert_rejected(&t, KILN_TRIAL_NO_PLAN, "mr 3");
    assert_int_equal(t.status, KILN_ERROR_BUILD);

    tc_kernels_end(dir);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_right_parameters_are_timed));
    kt_add(&tests, cmocka_unit_test(test_cutoff_stops_after_one_run));
    kt_add(&tests, cmocka_unit_test(test_short_runs_are_timed_more));
    kt_add(&tests, cmocka_unit_test(test_bad_arguments));
    kt_add(&tests, cmocka_unit_test(test_16_bit_storage));
    kt_add(&tests, cmocka_unit_test(test_wrong_and_broken_variants_are_rejected));
    return kt_run("tune_trial", &tests);
}
