/* Every GPU family's search space computes correctly on the device the test
   runs on: for each kernel group a GPU profile uses and several shipped GPU
   profiles of different families, the space around the profile's values
   (the seed) with this device's limits gives the seed, some neighbours and
   some random candidates (a fixed generator seed), and each is run, on a
   context forced to that profile with the candidate's overlay, on problems
   of odd sizes that take the group's kernel. The plan must say it took the
   group's default set (so the candidate is what ran) and every output must
   be within the double-precision reference's bound. Timings on a CPU
   device mean nothing for a GPU profile; correctness does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "attention_ref.h"
#include "conv_ref.h"
#include "core/context.h"
#include "nn_ref.h"
#include "profiles/profile.h"
#include "test_util.h"
#include "tune/space.h"
#include "tune/trial.h"

/* Candidates per (profile, group) besides the seed: neighbours spread over
   the seed's list, random ones from a generator seeded per profile and
   group. A cold kernel cache compiles each one: keep them few. Each group
   has two problems, and candidate i runs problem i % 2 (each program built
   once per candidate). */
enum { NEIGHBOURS = 2, RANDOMS = 1, TRIES = 100000 };
#define SPACE_SEED 0x6b696c6e475055ULL

/* One family from each vendor, and the root every GPU profile inherits. */
static const char *const profiles[] = {"nvidia-hopper", "amd-rdna3", "intel-gen9-12", "generic-gpu"};

/* The groups of the GPU kernels: the tiled, direct and small-M GEMMs, the
   tiled implicit-GEMM convolution, fused attention (both routes: the flash
   kernel with the decoding kernel for GPUs, and the per-work-item kernel
   the GPU profiles may still name, with its decoding kernel), and the
   utility kernels (naive attention's softmax, pooling). gemm.cpu is the CPU
   GEMM's; the direct and Winograd convolutions are not covered here. */
static const enum kiln_group_id groups[] = {
    KILN_GROUP_gemm_tiled,       KILN_GROUP_gemm_direct,         KILN_GROUP_gemm_smallm,
    KILN_GROUP_conv_igemm_tiled, KILN_GROUP_attention_fused,     KILN_GROUP_attention_flash,
    KILN_GROUP_attention_decode, KILN_GROUP_attention_decode_wg, KILN_GROUP_util};
#define COUNT(a) (sizeof(a) / sizeof *(a))

struct item {
    const char *name; /* "<profile> <group>" */
    size_t profile;   /* in profiles[] */
    enum kiln_group_id group;
};

/* The plan took group g's default set: the one the overlay changed. */
static void assert_param_set(const char *param_set, enum kiln_group_id g, const char *label)
{
    char want[64];
    snprintf(want, sizeof want, "%s:default", kiln_param_groups[g].name);
    if (strcmp(param_set, want) != 0)
        fail_msg("%s: the plan took \"%s\", not %s", label, param_set, want);
}

/* GEMM problem `which` (of two) of sizes that are no multiple of any tile:
   row- and column-major, transposed operands, a batch. The small-M family
   gets few rows of C. */
static void run_gemm(kiln_context *ctx, enum kiln_group_id g, size_t which, uint64_t seed, const char *label)
{
    static const struct shape {
        kiln_layout layout;
        kiln_transpose ta, tb;
        size_t m, n, k, batch;
    } wide[] = {{KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 67, 45, 37, 1},
                {KILN_COL_MAJOR, KILN_TRANS, KILN_NO_TRANS, 33, 70, 19, 2}},
      small[] = {{KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 3, 77, 45, 1},
                 {KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, 5, 37, 67, 2}};
    const kiln_gemm_algo algo = g == KILN_GROUP_gemm_tiled    ? KILN_GEMM_TILED
                                : g == KILN_GROUP_gemm_direct ? KILN_GEMM_DIRECT
                                                              : KILN_GEMM_SMALLM;
    const size_t i = which % COUNT(wide);
    const struct shape *s = algo == KILN_GEMM_SMALLM ? &small[i] : &wide[i];
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, s->layout, s->ta, s->tb, s->m, s->n, s->k);
    d.algo = algo;
    if (s->batch > 1) {
        d.batch = s->batch;
        d.stride_a = d.m * d.k, d.stride_b = d.k * d.n, d.stride_c = d.m * d.n;
    }
    struct kiln_trial t;
    kt_assert_status(kiln_trial_gemm(ctx, &d, 1, 0.0, seed + i, &t), KILN_SUCCESS);
    if (t.verdict != KILN_TRIAL_TIMED)
        fail_msg("%s, %zux%zux%zu: %s", label, s->m, s->n, s->k, t.reason);
    assert_param_set(t.param_set, g, label);
}

/* Implicit-GEMM convolution `which` (of two; the profile routes them to the
   tiled kernel): both layouts, padding, a stride and a bias. */
static void run_conv(kiln_context *ctx, size_t which, uint64_t seed, const char *label)
{
    kiln_conv2d_desc d[2];
    kiln_conv2d_desc_init(&d[0], KILN_NCHW, 2, 5, 9, 11, 7, 3, 3);
    d[0].pad_top = d[0].pad_bottom = d[0].pad_left = d[0].pad_right = 1;
    kiln_conv2d_desc_init(&d[1], KILN_NHWC, 1, 6, 10, 7, 9, 3, 2);
    d[1].stride_h = d[1].stride_w = 2;
    d[1].pad_top = d[1].pad_left = 1;
    d[1].has_bias = 1;
    const size_t i = which % COUNT(d);
    d[i].algo = KILN_CONV_IMPLICIT_GEMM;
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(ctx, &d[i], &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    assert_param_set(info.param_set, KILN_GROUP_conv_igemm_tiled, label);
    struct cr_case t;
    cr_case_init(&t, ctx, &d[i]);
    cr_case_fill(&t, &seed);
    kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, kiln_conv_algo_tol(KILN_CONV_IMPLICIT_GEMM, t.dims.k_eff), label);
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
}

/* Attention problem `which` (of two) with `algo` (fused, or naive for the
   util group's softmax) at odd lengths: grouped heads, causal masking, a
   mask, key lengths (some out of range) and the log-sum-exp. */
static void run_attention(kiln_context *ctx, kiln_attention_algo algo, enum kiln_group_id g, size_t which,
                          uint64_t seed, const char *label)
{
    kiln_attention_desc d[2];
    const int decoding = g == KILN_GROUP_attention_decode || g == KILN_GROUP_attention_decode_wg;
    /* Few query rows (fewer than a block; for the decoding kernel, at most
       its 8 per kv head), at a head dimension with a kernel of its own. */
    kiln_attention_desc_init(&d[0], KILN_BHSD, 3, 2, decoding ? 5 : 9, 70, 64);
    d[0].mask = KILN_ATTENTION_MASK_BQK;
    d[0].key_lengths = 1;
    /* Enough query rows that a work-item keeps several blocks of them
       (q_blocks) on a device of a few compute units, or for the decoding
       kernel a group of 4 query heads at 2 positions and keys split several
       ways; the candidates of odd index (the first neighbour, the random
       one) take this one. */
    kiln_attention_desc_init(&d[1], KILN_BSHD, 2, decoding ? 8 : 4, decoding ? 2 : 301, decoding ? 3001 : 37, 24);
    d[1].kv_heads = 2;
    d[1].causal = 1;
    d[1].lse = 1;
    const size_t i = which % COUNT(d);
    d[i].algo = algo;
    kiln_attention_plan *plan = NULL;
    kt_assert_status(kiln_attention_plan_create(ctx, &d[i], &plan), KILN_SUCCESS);
    kiln_attention_plan_info info;
    kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
    assert_param_set(info.param_set, g, label);
    struct ar_case t;
    ar_case_init(&t, ctx, &d[i]);
    ar_case_fill(&t, 1.0f, 1, &seed);
    kt_assert_status(ar_case_execute(&t, plan, NULL), KILN_SUCCESS);
    ar_case_check(&t, label);
    ar_case_free(&t);
    kiln_attention_plan_destroy(plan);
}

/* Average pooling, the util group's other kernel (its vector width): odd
   planes, padding, a window that does not divide them. */
static void run_pool(kiln_context *ctx, uint64_t seed, const char *label)
{
    kiln_pool2d_desc d = {KILN_NCHW, 2, 3, 13, 11, 3, 3, 2, 2, 1, 1, 1, 0, KILN_POOL_AVG, 0};
    size_t yh, yw;
    kt_assert_status(kiln_pool2d_output_size(&d, &yh, &yw), KILN_SUCCESS);
    const size_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * yh * yw;
    float *x = malloc(nx * sizeof *x), *y = malloc(ny * sizeof *y);
    double *ref = malloc(ny * sizeof *ref), *tol = malloc(ny * sizeof *tol);
    assert_true(x && y && ref && tol);
    kt_fill_uniform(x, nx, -1.0f, 1.0f, &seed);
    kiln_buffer *bx = NULL, *by = kt_poisoned_buffer(ctx, ny * sizeof *y);
    kt_assert_status(kiln_buffer_create(ctx, nx * sizeof *x, &bx), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(bx, 0, nx * sizeof *x, x), KILN_SUCCESS);
    kt_assert_status(kiln_pool2d(ctx, &d, bx, by, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(by, 0, ny * sizeof *y, y), KILN_SUCCESS);
    nr_pool_reference(&d, yh, yw, x, ref, tol);
    for (size_t i = 0; i < ny; i++)
        if (!(fabs(y[i] - ref[i]) <= tol[i]))
            fail_msg("%s: pooled output %zu is %.9g, the reference %.9g", label, i, y[i], ref[i]);
    kiln_buffer_destroy(bx);
    kiln_buffer_destroy(by);
    free(x), free(y), free(ref), free(tol);
}

/* Run candidate c of space s on a context forced to `profile` with its
   overlay, and no classes in the group (a profile's class for short rows,
   say, would take a problem from the candidate). */
static void run_candidate(const struct kiln_space *s, const char *profile, const union kiln_space_values *c,
                          size_t which, uint64_t seed, const char *what)
{
    char *text = kiln_space_overlay(s, c);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *group = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "kernels"), kiln_param_groups[s->group].name);
    assert_non_null(group);
    if (kiln_param_groups[s->group].dims)
        cJSON_AddArrayToObject(group, "classes");
    /* The route whose kernel takes the group. */
    if (s->group == KILN_GROUP_attention_fused || s->group == KILN_GROUP_attention_flash ||
        s->group == KILN_GROUP_attention_decode || s->group == KILN_GROUP_attention_decode_wg)
        cJSON_AddStringToObject(
            cJSON_AddObjectToObject(root, "select"), "attention_route",
            s->group == KILN_GROUP_attention_flash || s->group == KILN_GROUP_attention_decode_wg ? "flash" : "cpu");
    char *overlay = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    assert_non_null(overlay);
    char label[512];
    snprintf(label, sizeof label, "%s %s %s %s (problem %zu)", profile, kiln_param_groups[s->group].name, what, overlay,
             which % 2);
    printf("# %s\n", label);
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.profile = profile;
    o.profile_overlay = overlay;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&o, &ctx), KILN_SUCCESS);
    switch (s->group) {
    case KILN_GROUP_conv_igemm_tiled:
        run_conv(ctx, which, seed, label);
        break;
    case KILN_GROUP_attention_fused:
    case KILN_GROUP_attention_flash:
    case KILN_GROUP_attention_decode:
    case KILN_GROUP_attention_decode_wg:
        run_attention(ctx, KILN_ATTENTION_FUSED, s->group, which, seed, label);
        break;
    case KILN_GROUP_util:
        run_attention(ctx, KILN_ATTENTION_NAIVE, s->group, which, seed, label);
        run_pool(ctx, seed, label);
        break;
    default:
        run_gemm(ctx, s->group, which, seed, label);
        break;
    }
    kiln_context_destroy(ctx);
    free(overlay);
}

static void test_space(void **state)
{
    const struct item *it = *state;
    const char *profile = profiles[it->profile];
    if (it->group == KILN_GROUP_attention_decode && kt_ctx->desc.type != KILN_DEVICE_CPU) {
        printf("# the decoding kernel runs on CPU devices only\n");
        skip();
    }
    /* The small-M GEMM, the per-work-item attention kernel and the decoding
       kernel are written in OpenCL's vector syntax. */
    if ((it->group == KILN_GROUP_gemm_smallm || it->group == KILN_GROUP_attention_fused ||
         it->group == KILN_GROUP_attention_decode || it->group == KILN_GROUP_attention_decode_wg) &&
        !kt_ctx->vector_kernels) {
        printf("# %s's kernels use OpenCL vector syntax, which the %s backend does not compile\n",
               kiln_param_groups[it->group].name, kt_ctx->backend->name);
        skip();
    }
    /* The profile's values and this device's limits; a profile that does
       not fit the device is skipped. */
    kiln_context *ctx = kt_profile_context(profile);
    const struct kiln_param_group *grp = &kiln_param_groups[it->group];
    struct kiln_space s;
    kt_assert_status(
        kiln_space_init(&s, it->group, (const char *)kiln_profile_params(ctx->profile) + grp->offset, &kt_ctx->desc),
        KILN_SUCCESS);
    char why[512];
    if (kiln_space_check(&s, &s.seed, why, sizeof why, NULL) != 0)
        fail_msg("%s %s: the seed fails its check: %s", profile, grp->name, why);

    union kiln_space_values near[64], c[1 + NEIGHBOURS + RANDOMS];
    const char *what[COUNT(c)];
    size_t n = 0;
    c[n] = s.seed, what[n++] = "seed";
    const size_t found = kiln_space_neighbours(&s, &s.seed, near, COUNT(near));
    for (size_t i = 0; i < NEIGHBOURS && i < found; i++)
        c[n] = near[NEIGHBOURS > 1 ? i * (found - 1) / (NEIGHBOURS - 1) : 0], what[n++] = "neighbour";
    uint64_t rng = SPACE_SEED + 7919u * it->profile + (uint64_t)it->group;
    for (size_t i = 0; i < RANDOMS; i++) {
        if (kiln_space_random(&s, &rng, TRIES, &c[n]) != 0)
            fail_msg("%s %s: no random candidate passed in %d tries", profile, grp->name, TRIES);
        what[n++] = "random";
    }
    for (size_t i = 0; i < n; i++)
        run_candidate(&s, profile, &c[i], i, kt_group_seed + i, what[i]);
    kiln_context_destroy(ctx);
}

/* Not under the watchdog: a candidate at the schema's bounds on compile
   cost (an attention.fused set of 512 scores and 512 query rows per
   work-item) takes the POCL CPU device's compiler 40 s, most of a
   watchdog's minute on a busy machine; ctest's timeout still ends a hang. */
int main(void)
{
    static struct item items[COUNT(profiles) * COUNT(groups)];
    static char names[COUNT(items)][64];
    struct kt_list tests = {0};
    for (size_t p = 0; p < COUNT(profiles); p++)
        for (size_t g = 0; g < COUNT(groups); g++) {
            struct item *it = &items[p * COUNT(groups) + g];
            snprintf(names[it - items], sizeof names[0], "%s %s", profiles[p], kiln_param_groups[groups[g]].name);
            *it = (struct item){names[it - items], p, groups[g]};
            kt_addf(&tests, test_space, it, "%s", it->name);
        }
    return kt_run("tune_gpu_space", &tests);
}
