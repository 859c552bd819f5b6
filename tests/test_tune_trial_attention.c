/* An attention candidate tried as the tuner tries it
   (src/tune/trial_attention.c): right parameters are timed on every kind of
   problem the descriptor allows; a kernel variant that computes a wrong
   result is rejected with its reason and never timed. The wrong variant
   comes from a copy of the kernel sources (KILN_KERNEL_DIR) in which the
   fused kernel compiled with four keys per block (block_kv 4) weighs the
   values 1% too heavily: only the candidate that selects it fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "core/context.h"
#include "ops/find.h"
#include "trial_checks.h"

/* A problem and the algorithm it asks for. */
struct shape {
    struct ar_row row;
    kiln_attention_algo algo;
};

static const struct shape shapes[] = {
    {{AR_SHAPE("prefill d64", KILN_BSHD, 2, 4, 4, 100, 100, 64)}, KILN_ATTENTION_FUSED},
    {{AR_SHAPE("prefill d128", KILN_BHSD, 1, 2, 2, 77, 77, 128)}, KILN_ATTENTION_FUSED},
    {{AR_SHAPE("causal chunk after a cache", KILN_BSHD, 1, 4, 4, 64, 96, 64), .causal = 1, .lse = 1},
     KILN_ATTENTION_AUTO},
    {{AR_SHAPE("grouped-query d40", KILN_BHSD, 2, 8, 2, 50, 70, 40)}, KILN_ATTENTION_FUSED},
    {{AR_SHAPE("multi-query decode, long keys", KILN_BSHD, 2, 8, 1, 1, 3000, 128), .causal = 1, .key_lengths = 1,
      .lse = 1},
     KILN_ATTENTION_FUSED},
    {{AR_SHAPE("mask per head", KILN_BSHD, 2, 3, 3, 33, 47, 64), .mask = KILN_ATTENTION_MASK_BHQK, .lse = 1},
     KILN_ATTENTION_FUSED},
    {{AR_SHAPE("mask shared, causal", KILN_BHSD, 1, 2, 1, 40, 40, 32), .causal = 1, .mask = KILN_ATTENTION_MASK_QK},
     KILN_ATTENTION_FUSED},
    {{AR_SHAPE("key lengths", KILN_BSHD, 3, 4, 2, 20, 90, 64), .key_lengths = 1, .lse = 1}, KILN_ATTENTION_FUSED},
    {{AR_SHAPE("naive, mask per batch item, causal", KILN_BSHD, 2, 4, 4, 30, 45, 64), .causal = 1,
      .mask = KILN_ATTENTION_MASK_BQK, .lse = 1},
     KILN_ATTENTION_NAIVE},
    {{AR_SHAPE("naive grouped-query, key lengths", KILN_BHSD, 3, 4, 2, 17, 64, 128), .key_lengths = 1},
     KILN_ATTENTION_NAIVE},
    {{AR_SHAPE("naive decode", KILN_BHSD, 1, 4, 4, 1, 500, 64), .lse = 1}, KILN_ATTENTION_NAIVE},
};

static void test_right_parameters_are_timed(void **state)
{
    const struct shape *s = *state;
    const kiln_attention_desc d = ar_desc_of(&s->row, s->algo);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_attention(kt_ctx, &d, 3, 0.0, kt_group_seed, &t), KILN_SUCCESS);
    printf("# %s: %s (%s), worst %.3f, %.3f ms\n", s->row.what, t.kernel, t.params, t.worst, t.ms);
    tc_assert_timed(&t);
    assert_true(t.runs >= 3 && t.runs <= KILN_TIME_MAX_RUNS); /* more where three add up to under KILN_TIME_MIN_MS */
    /* AUTO takes a fused kernel (the decoding one for decoding, where the
       profile's route is "cpu" or on the CUDA backend; the tensor-core one
       there for 16-bit storage); the naive algorithm names its GEMM's. */
    const int fused = strstr(t.kernel, "attention_f32_fused") || strstr(t.kernel, "attention_f32_decode") ||
                      strstr(t.kernel, "attention_f32_flash") || strstr(t.kernel, "attention_decode") ||
                      strstr(t.kernel, "attention_f16_mma");
    assert_int_equal(fused, s->algo != KILN_ATTENTION_NAIVE);
}

static void test_cutoff_stops_after_one_run(void **state)
{
    (void)state;
    const kiln_attention_desc d = ar_desc_of(&shapes[0].row, shapes[0].algo);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_attention(kt_ctx, &d, 9, 1e-9, kt_group_seed, &t), KILN_SUCCESS);
    tc_assert_timed(&t);
    assert_int_equal(t.runs, 1);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kiln_attention_desc d = ar_desc_of(&shapes[0].row, shapes[0].algo);
    struct kiln_trial t;
    kt_assert_status(kiln_trial_attention(NULL, &d, 1, 0.0, 1, &t), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_trial_attention(kt_ctx, NULL, 1, 0.0, 1, &t), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_trial_attention(kt_ctx, &d, 1, 0.0, 1, NULL), KILN_ERROR_INVALID_ARGUMENT);
    /* A descriptor the plan refuses is a verdict, not a failed trial. */
    d.kv_heads = 3;
    kt_assert_status(kiln_trial_attention(kt_ctx, &d, 1, 0.0, 1, &t), KILN_SUCCESS);
    assert_int_equal(t.verdict, KILN_TRIAL_NO_PLAN);
    assert_int_equal(t.status, KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(t.reason, "kv_heads"));
    assert_int_equal(t.runs, 0);
}

/* fp16 and bf16 storage, as the tensor-core and CUDA decoding kernels take
   it: q, k and v drawn in the storage type, o checked with the weights'
   and its own rounding in the bound; a causal prefill with lse, and a
   grouped-query decoding step. */
static void test_16_bit_storage(void **state)
{
    (void)state;
    static const struct ar_row rows[] = {
        {AR_SHAPE("prefill causal", KILN_BSHD, 1, 2, 2, 70, 70, 64), .causal = 1, .lse = 1},
        {AR_SHAPE("decode h8/2", KILN_BSHD, 1, 8, 2, 1, 300, 128)},
    };
    for (kiln_dtype t = KILN_F16; t <= KILN_BF16; t++)
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
            kiln_attention_desc d = ar_desc_of(&rows[i], KILN_ATTENTION_AUTO);
            d.dtype = t;
            struct kiln_trial trial;
            kt_assert_status(kiln_trial_attention(kt_ctx, &d, 2, 0.0, kt_group_seed + t, &trial), KILN_SUCCESS);
            tc_assert_16_bit(&trial, t, rows[i].what);
        }
}

/* A trial of the fused attention with `block_kv` keys per block. */
static void trial_block_kv(int block_kv, struct kiln_trial *t)
{
    kiln_context *ctx = kt_overlay_context("{\"kernels\": {\"attention.fused\": {\"block_kv\": %d}}}", block_kv);
    kiln_attention_desc d = ar_desc_of(&shapes[0].row, shapes[0].algo);
    d.causal = 1;
    d.lse = 1;
    kt_assert_status(kiln_trial_attention(ctx, &d, 2, 0.0, kt_group_seed, t), KILN_SUCCESS);
    kiln_context_destroy(ctx);
}

static void test_wrong_variant_is_rejected(void **state)
{
    (void)state;
    if (!kt_ctx->vector_kernels) {
        printf("# the per-work-item attention kernel uses OpenCL vector syntax, which the %s backend does not "
               "compile\n",
               kt_ctx->backend->name);
        skip();
    }
    char *dir = tc_kernels_begin(KT_CL_DIR), path[4200];
    snprintf(path, sizeof path, "%s/attention/attention_f32_fused.cl", dir);
    kt_edit_file(path, "const VEC kj = (VEC)(KEY(j, d));",
                 "#if KILN_ATTENTION_BLOCK_KV == 4\n"
                 "                        const VEC kj = (VEC)(KEY(j, d) * 1.01f);\n"
                 "#else\n"
                 "                        const VEC kj = (VEC)(KEY(j, d));\n"
                 "#endif");

    struct kiln_trial t;
    trial_block_kv(8, &t);
    tc_assert_timed(&t);
    assert_non_null(strstr(t.params, "BK=8"));
    trial_block_kv(4, &t);
    tc_assert_rejected(&t, KILN_TRIAL_WRONG, "block_kv 4");
    assert_non_null(strstr(t.params, "BK=4"));

    tc_kernels_end(dir);
}

int main(void)
{
    struct kt_list tests = {0};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        kt_addf(&tests, test_right_parameters_are_timed, &shapes[i], "timed: %s", shapes[i].row.what);
    kt_add(&tests, cmocka_unit_test(test_cutoff_stops_after_one_run));
    kt_add(&tests, cmocka_unit_test(test_bad_arguments));
    kt_add(&tests, cmocka_unit_test(test_16_bit_storage));
    kt_add(&tests, cmocka_unit_test(test_wrong_variant_is_rejected));
    return kt_run("tune_trial_attention", &tests);
}
