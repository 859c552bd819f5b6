/*
 * Profile conformance of the tiled and direct GEMM kernels
 * (cl/gemm/gemm_f32_tiled.cl, cl/gemm/gemm_f32_direct.cl), below the plan
 * code: for every shipped non-abstract profile, a context forced to it builds
 * both kernels with its parameters and launches them with their documented
 * geometry over a shape table built around the profile's own tile sizes,
 * checked element by element against the plain-C reference of gemm_ref.h
 * (double accumulation; its error bound gr_bound() grows with K and says
 * why), with NaN in C for beta = 0 and around every matrix, so reads outside
 * A and B and writes outside C show. One test per profile, so a failure names
 * the profile; the teardown names the family, shape, transposes and storage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "gemm_ref.h"
#include "jit/program_cache.h"
#include "profiles/profile.h"
#include "profiles/schema.h"
#include "test_util.h"
#include "util/options.h"

static uint64_t seed;
/* The case running, named by the teardown if a check fails inside it. */
static char current[256];

/* A kernel family: its source, its parameter group, and the keys of its
   tile edges (M, N, K step) and work-group shape (M, N) there. */
static const struct family {
    const char *name, *source, *kernel;
    enum kiln_group_id group;
    const char *tile_m, *tile_n, *tile_k, *wg_m, *wg_n;
} families[] = {
    {"tiled", "gemm/gemm_f32_tiled", "gemm_f32_tiled", KILN_GROUP_gemm_tiled, "mwg", "nwg", "kwg", "mdimc", "ndimc"},
    {"direct", "gemm/gemm_f32_direct", "gemm_f32_direct", KILN_GROUP_gemm_direct, "wg", "wg", "wg", "mdimc", "ndimc"},
};

/* A shape relative to the family's tile: m = tm * tile_m + m, and so on. pad
   is both the extra elements per stored line and each operand's element
   offset; strides leave pad elements between batch items. fp32 rows run all
   four transpose combinations; fp16 rows run A and B as stored. */
static const struct shape {
    int tm, m, tn, n, tk, k;
    size_t pad, batch;
    int shared_b;
    float alpha, beta;
    kiln_dtype dtype;
    const char *what;
} shapes[] = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "1x1x1"},
    {0, 7, 0, 63, 0, 65, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "partial tiles"},
    {0, 7, 0, 63, 0, 65, 0, 1, 0, 0.0f, -1.0f, KILN_F32, "alpha = 0: C = beta * C"},
    {1, 0, 1, 0, 0, 64, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "one whole tile (vector stores of C)"},
    {2, 0, 1, 0, 2, 0, 16, 1, 0, 0.75f, -1.5f, KILN_F32, "whole tiles, ld and offsets +16, beta != 0"},
    {0, 127, 0, 257, 0, 31, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "primes"},
    {0, 19, 0, 33, 1, -1, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "K one short of the K step"},
    {0, 19, 0, 33, 1, 0, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "K equal to the K step"},
    {0, 19, 0, 33, 1, 1, 0, 1, 0, 1.0f, 0.0f, KILN_F32, "K one past the K step"},
    {1, 5, 1, 7, 0, 37, 5, 1, 0, 1.5f, 0.5f, KILN_F32, "ld and offsets +5 (unaligned interior), beta != 0"},
    {1, 0, 1, 0, 1, 3, 0, 3, 1, 1.0f, 0.0f, KILN_F32, "batch 3 sharing B (stride 0)"},
    {0, 19, 0, 33, 0, 21, 3, 2, 0, 1.0f, 0.5f, KILN_F32, "batch 2, gaps between items, beta != 0"},
    {0, 127, 0, 257, 0, 31, 0, 1, 0, 1.0f, 0.0f, KILN_F16, "primes"},
    {1, 0, 1, 0, 2, 0, 0, 1, 0, 0.5f, 2.0f, KILN_F16, "one whole tile, beta != 0"},
    {1, 5, 1, 7, 0, 37, 5, 1, 0, 1.5f, 0.5f, KILN_F16, "ld and offsets +5, beta != 0"},
    {0, 127, 0, 257, 0, 31, 0, 1, 0, 1.0f, 0.0f, KILN_BF16, "primes"},
    {1, 5, 1, 7, 0, 37, 5, 1, 0, 1.5f, 0.5f, KILN_BF16, "ld and offsets +5, beta != 0"},
};

static long param(const kiln_context *ctx, const struct family *f, const char *key)
{
    double v = 0;
    kt_assert_status(kiln_profile_get(ctx->profile, kiln_param_groups[f->group].name, key, &v), KILN_SUCCESS);
    return (long)v;
}

static size_t extent(int tiles, long tile, int add)
{
    long v = tiles * tile + add;
    return v < 1 ? 1 : (size_t)v;
}

/* The description of shape s with the given transposes: row-major, lines
   `pad` longer than needed, batch items `pad` apart. */
static kiln_gemm_desc describe(const struct shape *s, size_t m, size_t n, size_t k, int ta, int tb)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, ta ? KILN_TRANS : KILN_NO_TRANS, tb ? KILN_TRANS : KILN_NO_TRANS, m, n, k);
    d.dtype = s->dtype;
    d.batch = s->batch;
    d.lda += s->pad;
    d.ldb += s->pad;
    d.ldc += s->pad;
    d.stride_a = (ta ? k : m) * d.lda + s->pad;
    d.stride_b = s->shared_b ? 0 : (tb ? n : k) * d.ldb + s->pad;
    d.stride_c = m * d.ldc + s->pad;
    return d;
}

/* Build family f for the case's transposes and storage and launch it on t. */
static void launch(kiln_context *ctx, const struct family *f, struct gr_case *t, float alpha, float beta)
{
    const kiln_gemm_desc *d = &t->desc;
    struct kiln_options options = {0};
    kiln_profile_defines(&options, f->group, kiln_profile_choose(ctx->profile, f->group, NULL, NULL, NULL));
    kiln_options_add(&options, "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_F16=%d -DKILN_BF16=%d",
                     d->trans_a == KILN_TRANS, d->trans_b == KILN_TRANS, d->dtype == KILN_F16, d->dtype == KILN_BF16);
    struct kiln_kernel *kernel = NULL;
    kt_assert_status(kiln_kernel_get(ctx, f->source, kiln_options_text(&options), f->kernel, &kernel), KILN_SUCCESS);
    kiln_options_free(&options);

    const size_t tm = (size_t)param(ctx, f, f->tile_m), tn = (size_t)param(ctx, f, f->tile_n);
    const size_t local[3] = {(size_t)param(ctx, f, f->wg_n), (size_t)param(ctx, f, f->wg_m), 1};
    const size_t global[3] = {(d->n + tn - 1) / tn * local[0], (d->m + tm - 1) / tm * local[1], d->batch};
    /* The documented ABI, written out here rather than taken from the library. */
    struct kiln_args args = {0};
    kiln_args_int(&args, (int32_t)d->m);
    kiln_args_int(&args, (int32_t)d->n);
    kiln_args_int(&args, (int32_t)d->k);
    kiln_args_float(&args, alpha);
    kiln_args_float(&args, beta);
    const size_t ld[3] = {d->lda, d->ldb, d->ldc}, stride[3] = {d->stride_a, d->stride_b, d->stride_c};
    for (int w = GR_A; w <= GR_C; w++) {
        kiln_args_buffer(&args, t->buf[w]->handle);
        kiln_args_ulong(&args, t->off[w]);
        kiln_args_int(&args, (int32_t)ld[w - GR_A]);
        kiln_args_ulong(&args, stride[w - GR_A]);
    }
    kt_assert_status(kiln_kernel_launch(ctx, kernel, &args, 3, global, local, 0, NULL), KILN_SUCCESS);
}

static void test_profile(void **state)
{
    const char *name = *state;
    kiln_context *ctx = kt_profile_context(name);

    const clock_t start = clock();
    unsigned runs = 0;
    for (size_t fi = 0; fi < sizeof families / sizeof *families; fi++) {
        const struct family *f = &families[fi];
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            const struct shape *s = &shapes[si];
            const size_t m = extent(s->tm, param(ctx, f, f->tile_m), s->m);
            const size_t n = extent(s->tn, param(ctx, f, f->tile_n), s->n);
            const size_t k = extent(s->tk, param(ctx, f, f->tile_k), s->k);
            for (int trans = 0; trans < (s->dtype == KILN_F32 ? 4 : 1); trans++) {
                const int ta = trans >> 1, tb = trans & 1;
                snprintf(current, sizeof current, "%s %zux%zux%zu %c%c %s batch %zu (%s)", f->name, m, n, k,
                         ta ? 'T' : 'N', tb ? 'T' : 'N', kt_dtype_name(s->dtype), s->batch, s->what);
                const kiln_gemm_desc d = describe(s, m, n, k, ta, tb);
                struct gr_case t;
                gr_case_init(&t, ctx, &d, s->pad, s->pad, s->pad, 0);
                gr_case_fill(&t, s->beta == 0.0f, &seed);
                launch(ctx, f, &t, s->alpha, s->beta);
                gr_case_check(&t, s->alpha, s->beta);
                gr_case_free(&t);
                current[0] = '\0';
                runs++;
            }
        }
    }
    print_message("# %s: %u cases in %.2f s of CPU time\n", name, runs, (double)(clock() - start) / CLOCKS_PER_SEC);
    kiln_context_destroy(ctx);
}

static int report_failed_case(void **state)
{
    (void)state;
    if (current[0])
        print_error("failed case: %s\n", current);
    current[0] = '\0';
    return 0;
}

/* Every embedded profile validates, so none drops out of the tests below. */
static void test_profiles_load_cleanly(void **state)
{
    (void)state;
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, NULL, &set), KILN_SUCCESS);
    assert_string_equal(kiln_profile_set_warnings(set), "");
    kiln_profile_set_free(set);
}

int main(void)
{
    seed = kt_seed();
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_profiles_load_cleanly));
    kt_add_profiles(&tests, test_profile, report_failed_case);
    return kt_run_with("gemm_kernels", &tests, NULL, NULL);
}
