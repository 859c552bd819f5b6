/*
 * Every shipped device profile's attention parameters compile and compute
 * right: for each non-abstract embedded profile, a context on this machine's
 * device forced to that profile runs the fused kernel on two shapes and the
 * naive algorithm (its softmax kernel and the profile's GEMM route) on the
 * first, through the public API, checked against the plain-C reference of
 * attention_ref.h. One test per profile.
 *
 * The first shape turns every switch on (causal, a full mask, key lengths,
 * the lse, grouped-query heads) with lengths that fill no profile's blocks
 * (37 queries x 3 heads per key/value head, 45 keys); the second is fp16
 * decoding with a head dimension compiled as a run-time bound, so no
 * profile's row vectors can assume a full block, over more keys than one
 * chunk of any profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "profiles/profile.h"
#include "test_util.h"

static uint64_t seed;

static const struct shape {
    const char *what;
    kiln_attention_layout layout;
    kiln_dtype dtype;
    size_t batch, heads, kv_heads, seq_q, seq_kv, dim;
    int everything; /* causal, BHQK mask, key lengths, lse */
    int naive;      /* also run the naive algorithm */
} shapes[] = {
    {"all switches", KILN_BSHD, KILN_F32, 3, 6, 2, 37, 45, 64, 1, 1},
    {"f16 decode", KILN_BHSD, KILN_F16, 2, 4, 1, 1, 300, 80, 0, 0},
};

static void run(kiln_context *ctx, const char *profile, const struct shape *sh, kiln_attention_algo algo)
{
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, sh->layout, sh->batch, sh->heads, sh->seq_q, sh->seq_kv, sh->dim);
    d.kv_heads = sh->kv_heads;
    d.dtype = sh->dtype;
    d.causal = d.key_lengths = d.lse = sh->everything;
    d.mask = sh->everything ? KILN_ATTENTION_MASK_BHQK : KILN_ATTENTION_MASK_NONE;
    d.algo = algo;
    kiln_attention_plan *plan = NULL;
    kiln_status st = kiln_attention_plan_create(ctx, &d, &plan);
    if (st != KILN_SUCCESS)
        fail_msg("profile %s, %s, algo %d: plan_create: %s: %s", profile, sh->what, (int)algo, kiln_status_string(st),
                 kiln_last_error_detail());
    kiln_attention_plan_info info;
    kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
    assert_int_equal(info.algo, algo);
    assert_string_equal(info.profile, profile);
    printf("# %s %s: %s %s [%s]\n", profile, sh->what, info.name, info.kernel, info.params);

    char label[160];
    snprintf(label, sizeof label, "profile %s, %s, %s", profile, sh->what, info.name);
    struct ar_case t;
    ar_case_init(&t, ctx, &d);
    ar_case_fill(&t, 1.0f, 1, &seed);
    kt_assert_status(ar_case_execute(&t, plan, NULL), KILN_SUCCESS);
    ar_case_check(&t, label);
    ar_case_free(&t);
    kiln_attention_plan_destroy(plan);
}

static void test_profile(void **state)
{
    const char *name = *state;
    kiln_context *ctx = kt_profile_context(name);
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        run(ctx, name, &shapes[i], KILN_ATTENTION_FUSED);
        if (shapes[i].naive)
            run(ctx, name, &shapes[i], KILN_ATTENTION_NAIVE);
    }
    kiln_context_destroy(ctx);
}

int main(void)
{
    seed = kt_seed();
    struct kt_list tests = {0};
    kt_add_profiles(&tests, test_profile, NULL);
    return kt_run_with("attention_conformance", &tests, NULL, NULL);
}
