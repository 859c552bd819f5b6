/* The tuner's search space (src/tune/space.h) against the schema: which
   fields are tuned, their ladders, and for every kernel group of every
   shipped profile on the default device, neighbours and random candidates
   that all pass the group's check and fit the device, refusals with their
   reasons, overlays that round-trip, and determinism for a seed; and the
   CUDA families' spaces (gemm.mma, gemm.wgmma, attention.mma,
   attention.decode, conv.mma) on NVIDIA GPUs described by hand (Turing,
   an A100, an H100), whose limits bound them, every candidate checked
   against the kernel's own constraints. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/context.h"
#include "profiles/profile.h"
#include "profiles/profile_impl.h"
#include "tune/space.h"
#include "tune/tune.h"

/* Random candidates drawn per group, the tries each may take, and the seed
   of their generator (fixed: the sample is the same on every run). */
enum { SAMPLES = 300, TRIES = 100000 };
#define SPACE_SEED 0x6b696c6e5475ULL

static struct kiln_profile_set *embedded;

static int load_embedded(void **state)
{
    kt_group_setup(state);
    return kiln_profile_set_load(NULL, NULL, &embedded) == KILN_SUCCESS ? 0 : -1;
}

static int free_embedded(void **state)
{
    kiln_profile_set_free(embedded);
    return kt_group_teardown(state);
}

/* Fields of group g in which a and b differ. */
static int differences(int g, const union kiln_space_values *a, const union kiln_space_values *b)
{
    int n = 0;
    for (size_t f = 0; f < kiln_param_groups[g].count; f++)
        n += kiln_param_get(g, (int)f, a) != kiln_param_get(g, (int)f, b);
    return n;
}

/* The refusals of one space: counted, and each reason must name the group
   and one of its fields. */
struct refusals {
    int g;
    size_t schema, device;
};

static void on_reject(void *user, const union kiln_space_values *c, enum kiln_space_reject kind, const char *why)
{
    struct refusals *r = user;
    const struct kiln_param_group *grp = &kiln_param_groups[r->g];
    (void)c;
    if (!strstr(why, grp->name))
        fail_msg("refusal \"%s\" does not name %s", why, grp->name);
    int named = 0;
    for (size_t f = 0; f < grp->count; f++)
        named |= strstr(why, grp->fields[f].key) != NULL;
    /* A device refusal of local memory names the limit, not a field. */
    if (!named && !(kind == KILN_SPACE_REJECT_DEVICE && strstr(why, "local memory")))
        fail_msg("refusal \"%s\" names no field of %s", why, grp->name);
    if (kind == KILN_SPACE_REJECT_SCHEMA)
        r->schema++;
    else
        r->device++;
}

static void assert_admitted(const struct kiln_space *s, const union kiln_space_values *c, const char *what)
{
    char why[512];
    const kiln_param_check check = kiln_param_groups[s->group].check;
    if (check && (check(c, NULL, why, sizeof why) != 0 || check(c, s->dev, why, sizeof why) != 0))
        fail_msg("%s of %s fails its check: %s", what, kiln_param_groups[s->group].name, why);
    for (size_t i = 0; i < s->count; i++) {
        const struct kiln_param_field *field = &kiln_param_groups[s->group].fields[s->fields[i].field];
        double v = kiln_param_get((int)s->group, s->fields[i].field, c);
        if (v < field->min || v > field->max)
            fail_msg("%s of %s: %s = %g outside [%g, %g]", what, kiln_param_groups[s->group].name, field->key, v,
                     field->min, field->max);
    }
}

/* Every neighbour of `from` passes, differs from it in one field (or two,
   repaired) and from every other neighbour. */
static size_t check_neighbours(const struct kiln_space *s, const union kiln_space_values *from)
{
    union kiln_space_values out[64];
    size_t n = kiln_space_neighbours(s, from, out, 64);
    for (size_t i = 0; i < n; i++) {
        assert_admitted(s, &out[i], "a neighbour");
        const int d = differences((int)s->group, &out[i], from);
        assert_true(d == 1 || d == 2);
        for (size_t k = 0; k < i; k++)
            assert_true(differences((int)s->group, &out[i], &out[k]) > 0);
    }
    return n;
}

/* The overlay of c applied to profile p holds c, and only c's differences
   from the seed. */
static void check_overlay(const struct kiln_space *s, const struct kiln_profile *p, const union kiln_space_values *c)
{
    const int g = (int)s->group;
    char *text = kiln_space_overlay(s, c);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    const cJSON *obj =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "kernels"), kiln_param_groups[g].name);
    assert_true(cJSON_IsObject(obj));
    assert_int_equal(cJSON_GetArraySize(obj), differences(g, c, &s->seed));
    cJSON_Delete(root);
    struct kiln_profile *child = NULL;
    kt_assert_status(kiln_profile_derive(p, text, &child), KILN_SUCCESS);
    const void *got = (const char *)kiln_profile_params(child) + kiln_param_groups[g].offset;
    if (differences(g, got, c) != 0)
        fail_msg("overlay %s does not give back its candidate", text);
    kiln_profile_free(child);
    free(text);
}

/* Through the public API: a context on profile `name` with c's overlay
   reports c in its resolved profile. */
static void check_overlay_context(const struct kiln_space *s, const char *name, const union kiln_space_values *c)
{
    const int g = (int)s->group;
    char *text = kiln_space_overlay(s, c);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile = name;
    opt.profile_overlay = text;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    size_t length = 0;
    kt_assert_status(kiln_context_get_profile_json(ctx, NULL, 0, &length), KILN_SUCCESS);
    char *json = malloc(length + 1);
    assert_non_null(json);
    kt_assert_status(kiln_context_get_profile_json(ctx, json, length + 1, &length), KILN_SUCCESS);
    cJSON *root = cJSON_Parse(json);
    const cJSON *obj =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "kernels"), kiln_param_groups[g].name);
    assert_true(cJSON_IsObject(obj));
    union kiln_space_values got = s->seed;
    uint32_t own = 0;
    char why[512];
    cJSON *copy = cJSON_Duplicate(obj, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "classes");
    if (kiln_param_read(copy, g, kiln_param_groups[g].name, &got, &own, why, sizeof why) != 0)
        fail_msg("the context's profile: %s", why);
    if (differences(g, &got, c) != 0)
        fail_msg("a context with overlay %s reports other parameters", text);
    cJSON_Delete(copy);
    cJSON_Delete(root);
    free(json);
    kiln_context_destroy(ctx);
    free(text);
}

static void test_profile_space(void **state)
{
    const char *name = *state;
    const struct kiln_profile *p = kiln_profile_find(embedded, name);
    assert_non_null(p);
    char why[KILN_PROFILE_WHY_SIZE];
    const int fits = kiln_profile_fits(p, &kt_ctx->desc, why) == 0;
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        if (!kiln_space_kernel_group((enum kiln_group_id)g))
            continue;
        const struct kiln_param_group *grp = &kiln_param_groups[g];
        struct refusals r = {g, 0, 0};
        struct kiln_space s;
        kt_assert_status(kiln_space_init(&s, (enum kiln_group_id)g, (const char *)kiln_profile_params(p) + grp->offset,
                                         &kt_ctx->desc),
                         KILN_SUCCESS);
        s.on_reject = on_reject;
        s.user = &r;
        size_t neighbours = check_neighbours(&s, &s.seed);

        uint64_t rng = SPACE_SEED, again = SPACE_SEED;
        union kiln_space_values first = s.seed;
        int context_checked = 0;
        for (int i = 0; i < SAMPLES; i++) {
            union kiln_space_values c, d;
            if (kiln_space_random(&s, &rng, TRIES, &c) != 0)
                fail_msg("%s %s: no random candidate passed in %d tries", name, grp->name, TRIES);
            assert_admitted(&s, &c, "a random candidate");
            /* The same seed draws the same candidates (on_reject off: the
               counts above are of the first draw). */
            s.on_reject = NULL;
            assert_int_equal(kiln_space_random(&s, &again, TRIES, &d), 0);
            s.on_reject = on_reject;
            assert_int_equal(differences(g, &c, &d), 0);
            assert_true(rng == again);
            neighbours += check_neighbours(&s, &c);
            check_overlay(&s, p, &c);
            if (i == 0)
                first = c;
            if (fits && !context_checked && differences(g, &c, &s.seed) > 0) {
                check_overlay_context(&s, name, &c);
                context_checked = 1;
            }
        }
        check_overlay(&s, p, &s.seed);
        printf("# %s %s: %zu fields tuned, %zu neighbours, %zu refused by the schema, %zu by the device; "
               "first sample differs in %d fields%s\n",
               name, grp->name, s.count, neighbours, r.schema, r.device, differences(g, &first, &s.seed),
               fits ? "" : " (profile does not fit the device: no context)");
    }
}

/* The rule: device and select are not tuned; every DEF field is, and no
   NUMBER; every ladder ascends within the field's bounds and holds the
   seed's value. */
static void test_rule_and_ladders(void **state)
{
    (void)state;
    const struct kiln_profile *gpu = kiln_profile_find(embedded, "generic-gpu");
    struct kiln_space s;
    assert_false(kiln_space_kernel_group(KILN_GROUP_device));
    assert_false(kiln_space_kernel_group(KILN_GROUP_select));
    assert_int_equal(kiln_space_init(&s, KILN_GROUP_select, &kiln_profile_params(gpu)->select, NULL),
                     KILN_ERROR_INVALID_ARGUMENT);
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        const struct kiln_param_group *grp = &kiln_param_groups[g];
        for (size_t f = 0; f < grp->count; f++) {
            if (grp->fields[f].define)
                assert_true(kiln_space_tunable((enum kiln_group_id)g, (int)f));
            if (grp->fields[f].type == KILN_PARAM_NUMBER)
                assert_false(kiln_space_tunable((enum kiln_group_id)g, (int)f));
        }
        if (!kiln_space_kernel_group((enum kiln_group_id)g))
            continue;
        kt_assert_status(
            kiln_space_init(&s, (enum kiln_group_id)g, (const char *)kiln_profile_params(gpu) + grp->offset, NULL),
            KILN_SUCCESS);
        size_t tunable = 0;
        for (size_t f = 0; f < grp->count; f++)
            tunable += (size_t)kiln_space_tunable((enum kiln_group_id)g, (int)f);
        assert_int_equal(s.count, tunable);
        for (size_t i = 0; i < s.count; i++) {
            const struct kiln_space_field *lf = &s.fields[i];
            const struct kiln_param_field *field = &grp->fields[lf->field];
            assert_true(lf->count >= 2);
            int seed_on = 0;
            for (size_t k = 0; k < lf->count; k++) {
                assert_true(lf->ladder[k] >= field->min && lf->ladder[k] <= field->max);
                if (k)
                    assert_true(lf->ladder[k] > lf->ladder[k - 1]);
                if (field->type == KILN_PARAM_VW)
                    assert_true(lf->ladder[k] == 1 || lf->ladder[k] == 2 || lf->ladder[k] == 4 || lf->ladder[k] == 8 ||
                                lf->ladder[k] == 16);
                seed_on |= lf->ladder[k] == (int)kiln_param_get(g, lf->field, &s.seed);
            }
            assert_true(seed_on);
        }
    }
    /* The INT rule on a seed of 6 in [1, 64]: powers of two and 3, 5, 7, 9, 12. */
    union kiln_space_values v = {0};
    v.gemm_cpu = kiln_profile_params(gpu)->gemm_cpu;
    v.gemm_cpu.mr = 6;
    kt_assert_status(kiln_space_init(&s, KILN_GROUP_gemm_cpu, &v, NULL), KILN_SUCCESS);
    static const int mr[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 32, 64};
    assert_int_equal(s.fields[0].count, sizeof mr / sizeof *mr);
    assert_memory_equal(s.fields[0].ladder, mr, sizeof mr);
}

/* A candidate past a constraint, a bound or a device limit is refused with
   a reason that names it; on a small device every neighbour fits it. */
static void test_refusals(void **state)
{
    (void)state;
    const struct kiln_profile *gpu = kiln_profile_find(embedded, "generic-gpu");
    struct kiln_device_desc small = kt_ctx->desc;
    small.max_work_group_size = 16;
    small.local_mem_bytes = 4096;
    struct kiln_space s;
    kt_assert_status(kiln_space_init(&s, KILN_GROUP_gemm_tiled, &kiln_profile_params(gpu)->gemm_tiled, &small),
                     KILN_SUCCESS);
    char why[512];
    enum kiln_space_reject kind;
    union kiln_space_values c = s.seed;
    c.gemm_tiled.mwg = 60;
    assert_int_equal(kiln_space_check(&s, &c, why, sizeof why, &kind), -1);
    assert_int_equal(kind, KILN_SPACE_REJECT_SCHEMA);
    assert_non_null(strstr(why, "mwg = 60 is not a multiple of"));
    c = s.seed;
    c.gemm_tiled.kwi = 128;
    c.gemm_tiled.kwg = 128;
    assert_int_equal(kiln_space_check(&s, &c, why, sizeof why, &kind), -1);
    assert_int_equal(kind, KILN_SPACE_REJECT_SCHEMA);
    assert_non_null(strstr(why, "kwi*(mwg/mdimc)*(nwg/ndimc) = 8192 multiply-adds unrolled per K step"));
    c = s.seed; /* 8x8 work-items */
    assert_int_equal(kiln_space_check(&s, &c, why, sizeof why, &kind), -1);
    assert_int_equal(kind, KILN_SPACE_REJECT_DEVICE);
    assert_non_null(strstr(why, "mdimc*ndimc = 64 work-items per work-group, more than the device's limit of 16"));

    struct refusals r = {KILN_GROUP_gemm_tiled, 0, 0};
    s.on_reject = on_reject;
    s.user = &r;
    uint64_t rng = SPACE_SEED;
    for (int i = 0; i < SAMPLES; i++) {
        assert_int_equal(kiln_space_random(&s, &rng, TRIES, &c), 0);
        assert_admitted(&s, &c, "a random candidate on a small device");
        assert_true(c.gemm_tiled.mdimc * c.gemm_tiled.ndimc <= 16);
        check_neighbours(&s, &c);
    }
    assert_true(r.schema > 0 && r.device > 0);
}

/* Fields tied by constraints move together: from the nvidia family's tiled
   GEMM (128x128 tiles, 16x16 work-items, float4 in M), the step of mwg
   from 64 to 32 is refused alone (32 is no multiple of mdimc*vwm = 64)
   and repaired with a second field; a work-group of 128 steps to 64 and
   192; random candidates spread over the space instead of staying at the
   seed. */
static void test_coupled_fields(void **state)
{
    (void)state;
    const struct kiln_profile *p = kiln_profile_find(embedded, "nvidia");
    assert_non_null(p);
    struct kiln_space s;
    kt_assert_status(kiln_space_init(&s, KILN_GROUP_gemm_tiled, &kiln_profile_params(p)->gemm_tiled, NULL),
                     KILN_SUCCESS);
    assert_int_equal(s.seed.gemm_tiled.mwg, 128);
    assert_int_equal(s.seed.gemm_tiled.mdimc * s.seed.gemm_tiled.vwm, 64);
    union kiln_space_values from = s.seed, out[64];
    from.gemm_tiled.mwg = 64;
    size_t n = kiln_space_neighbours(&s, &from, out, 64);
    int repaired = 0;
    for (size_t i = 0; i < n; i++)
        if (out[i].gemm_tiled.mwg == 32) {
            assert_int_equal(differences(KILN_GROUP_gemm_tiled, &out[i], &from), 2);
            repaired = 1;
        }
    assert_true(repaired);

    kt_assert_status(kiln_space_init(&s, KILN_GROUP_attention_fused, &kiln_profile_params(p)->attention_fused, NULL),
                     KILN_SUCCESS);
    assert_int_equal(s.seed.attention_fused.wg, 128);
    n = kiln_space_neighbours(&s, &s.seed, out, 64);
    int wg64 = 0, wg192 = 0;
    for (size_t i = 0; i < n; i++) {
        const int wg = out[i].attention_fused.wg;
        assert_true(wg != 127 && wg != 129);
        wg64 |= wg == 64, wg192 |= wg == 192;
    }
    assert_true(wg64 && wg192);

    kt_assert_status(kiln_space_init(&s, KILN_GROUP_gemm_tiled, &kiln_profile_params(p)->gemm_tiled, NULL),
                     KILN_SUCCESS);
    uint64_t rng = SPACE_SEED;
    union kiln_space_values drawn[100];
    int far = 0, distinct = 0;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(kiln_space_random(&s, &rng, TRIES, &drawn[i]), 0);
        far += differences(KILN_GROUP_gemm_tiled, &drawn[i], &s.seed) >= 4;
        int seen = 0;
        for (int k = 0; k < i && !seen; k++)
            seen = differences(KILN_GROUP_gemm_tiled, &drawn[i], &drawn[k]) == 0;
        distinct += !seen;
    }
    assert_true(far >= 50);
    assert_true(distinct >= 90);
}

/* A step no second field can repair goes on along the ladder: from
   amd-zen4's CPU GEMM (flip_nr 0, vw 16) flip_nr's step up is the first
   value that passes alone or with one other field a step away (8, with vw
   8), where 1, 2 and 4 are refused whatever else moves; the search used to
   report the refusal of 1 and never leave 0. */
static void test_steps_past_refused(void **state)
{
    (void)state;
    const struct kiln_profile *p = kiln_profile_find(embedded, "amd-zen4");
    assert_non_null(p);
    struct kiln_space s;
    kt_assert_status(kiln_space_init(&s, KILN_GROUP_gemm_cpu, &kiln_profile_params(p)->gemm_cpu, NULL), KILN_SUCCESS);
    assert_int_equal(s.seed.gemm_cpu.flip_nr, 0);
    assert_int_equal(s.seed.gemm_cpu.vw, 16);
    struct refusals r = {KILN_GROUP_gemm_cpu, 0, 0};
    s.on_reject = on_reject;
    s.user = &r;
    union kiln_space_values out[64];
    const size_t n = kiln_space_neighbours(&s, &s.seed, out, 64);
    int flipped = 0;
    for (size_t i = 0; i < n; i++) {
        assert_admitted(&s, &out[i], "a neighbour");
        if (out[i].gemm_cpu.flip_nr != 0) {
            assert_int_equal(out[i].gemm_cpu.flip_nr % out[i].gemm_cpu.vw, 0);
            flipped++;
        }
    }
    assert_int_equal(flipped, 1);
    check_neighbours(&s, &s.seed);
}

/* An NVIDIA GPU as the CUDA backend describes it: compute capability
   major.minor, `sms` multiprocessors, `optin` bytes of shared memory a
   block may take (48 KiB without opting in, its local memory). */
static struct kiln_device_desc nvidia_gpu(const char *name, int major, int minor, unsigned sms,
                                          unsigned long long optin)
{
    struct kiln_device_desc d = {0};
    snprintf(d.platform, sizeof d.platform, "CUDA");
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.vendor, sizeof d.vendor, "NVIDIA Corporation");
    d.vendor_id = 0x10de;
    d.type = KILN_DEVICE_GPU;
    d.cc_major = major, d.cc_minor = minor;
    d.compute_units = sms, d.clock_mhz = 1500;
    d.global_mem_bytes = d.max_alloc_bytes = 16ull << 30;
    d.local_mem_bytes = 48 << 10;
    d.shared_optin_bytes = optin;
    d.max_work_group_size = 1024;
    d.fp16 = d.fp64 = 1;
    kiln_device_derive_arch(&d);
    return d;
}

static const struct kiln_backend *cuda_backend(void)
{
    for (const struct kiln_backend *const *be = kiln_backends; *be; be++)
        if (strcmp((*be)->name, "cuda") == 0)
            return *be;
    fail_msg("no cuda backend in the registry");
    return NULL;
}

/* The profiles that give values to the tensor-core groups: the root every
   GPU profile inherits and the NVIDIA families. */
static const char *const nvidia_profiles[] = {"generic-gpu",         "nvidia",     "nvidia-turing", "nvidia-ampere",
                                              "nvidia-ampere-ga100", "nvidia-ada", "nvidia-hopper"};

/* Field f's value in candidate c lies on its ladder in s. */
static int on_ladder(const struct kiln_space *s, const union kiln_space_values *c, size_t i)
{
    const int v = (int)kiln_param_get((int)s->group, s->fields[i].field, c);
    for (size_t k = 0; k < s->fields[i].count; k++)
        if (s->fields[i].ladder[k] == v)
            return 1;
    return 0;
}

/* CUDA's static shared memory per block, whatever the device. */
#define CUDA_STATIC_SHARED (48 << 10)

/*
 * Whether the kernel of attention.mma, attention.decode or conv.mma builds
 * and launches candidate c as given on shape sh of its family on `dev`:
 * the conditions of its source's #error lines and the launch it makes,
 * restated here from cu/ (attention/attention_f16_mma.cu,
 * attention/attention_decode.cu, conv/conv_f16_igemm_mma.cu), not from the
 * schema's checks, so that a check that lets a candidate through which the
 * kernel refuses fails this test. 0, or -1 with the reason in `why`. Other
 * groups: 0.
 */
static int kernel_refuses(enum kiln_group_id g, const union kiln_space_values *c, const struct kiln_tune_shape *sh,
                          const struct kiln_device_desc *dev, char *why, size_t size)
{
    why[0] = '\0';
    long threads = 0, shared = 0, static_shared = 0;
    if (g == KILN_GROUP_attention_mma) {
        const struct kiln_param_attention_mma *p = &c->attention_mma;
        const long bm = p->block_q, bn = p->block_kv, warps = p->warps, d = (long)sh->attention.head_dim;
        const long mt = bm / (warps * 16);
        if (bm % (warps * 16) || (mt != 1 && mt != 2) || bn % 16 || (p->stages != 1 && p->stages != 2))
            snprintf(why, size, "BM %ld, BN %ld, WARPS %ld, STAGES %d break attention_f16_mma.cu's #error", bm, bn,
                     warps, p->stages);
        threads = warps * 32 * (mt == 2 && d > 64 ? 2 : 1); /* the plan's doubling past d64 */
        shared = (bm + 2 * p->stages * bn) * ((d + 15) / 16 * 16 + 8) * 2;
    } else if (g == KILN_GROUP_attention_decode) {
        const struct kiln_param_attention_decode *p = &c->attention_decode;
        const long rows = (long)(sh->attention.heads / sh->attention.kv_heads * sh->attention.seq_q);
        const long d = (long)sh->attention.head_dim;
        if (p->warps < 1 || p->warps > 32 || rows > 8 || d % 4 || d > 256)
            snprintf(why, size, "WARPS %d, ROWS %ld, D %ld break attention_decode.cu's #error", p->warps, rows, d);
        threads = p->warps * 32L;
        static_shared = 4L * p->warps * rows * (d + 2); /* m_s, l_s and o_s */
    } else if (g == KILN_GROUP_conv_mma) {
        const struct kiln_param_conv_mma *p = &c->conv_mma;
        threads = (long)p->warps_m * p->warps_n * 32;
        const long wm = p->bm / p->warps_m, wn = p->bn / p->warps_n;
        if (p->bk % 32 || p->bm % 16 || p->bn % 16 || wm % 16 || wn % 16 || p->stages < 2 || p->stages > 5 ||
            threads % (p->bk / 8) || p->bm * (p->bk / 8) % threads || p->bn * (p->bk / 8) % threads)
            snprintf(why, size, "BM %d, BN %d, BK %d, %dx%d warps, STAGES %d break conv_f16_igemm_mma.cu's #error",
                     p->bm, p->bn, p->bk, p->warps_m, p->warps_n, p->stages);
        else if (wm * p->warps_m != p->bm || wn * p->warps_n != p->bn)
            snprintf(why, size, "%dx%d warps do not divide the %dx%d block", p->warps_m, p->warps_n, p->bm, p->bn);
        shared = (long)p->stages * (p->bm + p->bn) * (p->bk + 8) * 2;
    }
    if (!why[0] && (unsigned long)threads > dev->max_work_group_size)
        snprintf(why, size, "%ld threads a block, past the device's %zu", threads, dev->max_work_group_size);
    if (!why[0] && (unsigned long long)shared > dev->shared_optin_bytes)
        snprintf(why, size, "%ld bytes of dynamic shared memory, past the device's %llu", shared,
                 dev->shared_optin_bytes);
    if (!why[0] && static_shared > CUDA_STATIC_SHARED)
        snprintf(why, size, "%ld bytes of static shared memory, past CUDA's %d", static_shared, CUDA_STATIC_SHARED);
    return why[0] ? -1 : 0;
}

/* Candidate c of family f's space runs on every shape of the family. */
static void assert_kernel_takes(const struct kiln_space *s, const union kiln_space_values *c,
                                const struct kiln_tune_shape *shapes, size_t count, const char *what)
{
    char why[256];
    for (size_t i = 0; i < count; i++)
        if (kernel_refuses(s->group, c, &shapes[i], s->dev, why, sizeof why) != 0) {
            char *overlay = kiln_space_overlay(s, c);
            fail_msg("%s %s of %s on %s: %s", what, overlay, kiln_param_groups[s->group].name, shapes[i].name, why);
        }
}

/* Family f's shapes are of its operation, in the storage its kernel takes,
   forced to it where AUTO might take another, and of a kind its kernel
   takes; named after the group (or, the decoding family's fp32 step, the
   representative GPU shape). */
static void check_family_shapes(const struct kiln_tune_family *f, const struct kiln_tune_shape *shapes, size_t n)
{
    const char *group = kiln_param_groups[f->group].name;
    size_t reps = 0;
    const struct kiln_tune_shape *rep = kiln_tune_shapes(1u << f->op, 1, &reps);
    int bf16 = 0;
    for (size_t i = 0; i < n; i++) {
        const struct kiln_tune_shape *sh = &shapes[i];
        assert_int_equal(sh->op, f->op);
        int representative = 0;
        for (size_t k = 0; k < reps; k++)
            representative |= strcmp(rep[k].name, sh->name) == 0;
        if (!representative) {
            assert_ptr_equal(strstr(sh->name, group), sh->name);
            assert_int_equal(sh->name[strlen(group)], ' ');
        }
        const kiln_attention_desc *a = &sh->attention;
        switch (f->group) {
        case KILN_GROUP_attention_mma:
            assert_int_equal(a->dtype, KILN_F16);
            assert_true(a->head_dim % 8 == 0 && a->head_dim <= 128);
            assert_true(a->heads / a->kv_heads * a->seq_q > 8); /* not a decoding step */
            break;
        case KILN_GROUP_attention_decode:
            assert_true(a->dtype == KILN_F16 || (a->dtype == KILN_F32 && representative));
            assert_true(a->heads / a->kv_heads * a->seq_q <= 8);
            break;
        case KILN_GROUP_conv_mma:
            assert_int_equal(sh->conv.dtype, KILN_F16);
            assert_int_equal(sh->conv.layout, KILN_NHWC);
            assert_int_equal(sh->conv.groups, 1);
            assert_int_equal(sh->conv.c % 8, 0);
            assert_int_equal(sh->conv.algo, f->algo);
            break;
        default:
            assert_int_equal(sh->gemm.algo, f->algo);
            assert_true(sh->gemm.dtype == KILN_F16 || sh->gemm.dtype == KILN_BF16);
            assert_non_null(strstr(sh->name, sh->gemm.dtype == KILN_BF16 ? " bf16 " : " f16 "));
            bf16 |= sh->gemm.dtype == KILN_BF16;
        }
    }
    if (f->op == KILN_TUNE_GEMM)
        assert_int_equal(bf16, f->bf16);
}

/* Candidates drawn per space, besides the seed and its neighbours: random
   ones, and the neighbours of each. */
enum { FAMILY_SAMPLES = 100 };

/* For each described GPU: the families the tuner searches there (the CUDA
   backend on its compute capability), the shapes it adds for them, and for
   each family it searches the space around the matched profile's values
   with the GPU's limits: non-empty; the seed, its neighbours, random
   candidates and their neighbours all passing the group's check with the
   device and, for attention.mma, attention.decode and conv.mma, taken by
   the kernel on every shape of the family (kernel_refuses); and every
   shipped NVIDIA profile's values that fit the GPU passing the check and
   lying on the ladders. */
static void test_tensor_core_spaces(void **state)
{
    (void)state;
    static const struct gpu {
        const char *name;
        int major, minor;
        unsigned sms;
        unsigned long long optin;
        const char *profile;
        int runs[KILN_TUNE_FAMILIES], bf16[KILN_TUNE_FAMILIES];
    } gpus[] = {
        {"Tesla T4", 7, 5, 40, 64 << 10, "nvidia-turing", {1, 0, 0, 1, 0}, {0, 0, 0, 0, 0}},
        {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 163 << 10, "nvidia-ampere-ga100", {1, 0, 1, 1, 1}, {1, 0, 1, 1, 1}},
        /* 228 KiB of shared memory an SM, 227 KiB a block. */
        {"NVIDIA H100 80GB HBM3", 9, 0, 132, 227 << 10, "nvidia-hopper", {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}},
    };
    static const enum kiln_group_id order[KILN_TUNE_FAMILIES] = {KILN_GROUP_gemm_mma, KILN_GROUP_gemm_wgmma,
                                                                 KILN_GROUP_attention_mma, KILN_GROUP_attention_decode,
                                                                 KILN_GROUP_conv_mma};
    for (size_t gi = 0; gi < sizeof gpus / sizeof *gpus; gi++) {
        const struct gpu *g = &gpus[gi];
        struct kiln_context fake = {.backend = cuda_backend(),
                                    .desc = nvidia_gpu(g->name, g->major, g->minor, g->sms, g->optin)};
        char reason[256];
        const struct kiln_profile *p = kiln_profile_match(embedded, &fake.desc, reason, sizeof reason);
        assert_non_null(p);
        printf("# %s (%s): profile %s\n", g->name, fake.desc.arch, kiln_profile_name(p));
        assert_string_equal(kiln_profile_name(p), g->profile);

        struct kiln_tune_family fam[KILN_TUNE_FAMILIES];
        kiln_tune_families(&fake, fam);
        for (int f = 0; f < KILN_TUNE_FAMILIES; f++) {
            const enum kiln_group_id gid = fam[f].group;
            const struct kiln_param_group *grp = &kiln_param_groups[gid];
            assert_int_equal(gid, order[f]);
            assert_int_equal(fam[f].runs, g->runs[f]);
            assert_int_equal(fam[f].bf16, g->bf16[f]);
            if (!fam[f].runs) {
                printf("#   %s not searched: %s\n", grp->name, fam[f].why_not);
                assert_non_null(strstr(fam[f].why_not, "compute capability"));
                assert_non_null(strstr(fam[f].why_not, fake.desc.arch));
                continue;
            }
            assert_string_equal(fam[f].why_not, "");

            /* The shapes the tuner adds. */
            struct kiln_tune_shape shapes[KILN_TUNE_FAMILY_SHAPES_MAX];
            const size_t count = kiln_tune_family_shapes(&fam[f], shapes);
            assert_true(count > 0 && count <= KILN_TUNE_FAMILY_SHAPES_MAX);
            check_family_shapes(&fam[f], shapes, count);

            struct refusals r = {(int)gid, 0, 0};
            struct kiln_space s;
            kt_assert_status(kiln_space_init(&s, gid, (const char *)kiln_profile_params(p) + grp->offset, &fake.desc),
                             KILN_SUCCESS);
            s.on_reject = on_reject;
            s.user = &r;
            assert_true(s.count > 0);
            assert_admitted(&s, &s.seed, "the matched profile's values");
            assert_kernel_takes(&s, &s.seed, shapes, count, "the matched profile's values");
            union kiln_space_values near[64];
            const size_t neighbours = check_neighbours(&s, &s.seed);
            assert_true(neighbours > 0);
            const size_t seed_near = kiln_space_neighbours(&s, &s.seed, near, 64);
            for (size_t i = 0; i < seed_near; i++)
                assert_kernel_takes(&s, &near[i], shapes, count, "a neighbour of the seed");
            uint64_t rng = SPACE_SEED;
            int distinct = 0;
            size_t tried = 1 + seed_near;
            char why[512];
            for (int i = 0; i < FAMILY_SAMPLES; i++) {
                union kiln_space_values c;
                if (kiln_space_random(&s, &rng, TRIES, &c) != 0)
                    fail_msg("%s %s: no random candidate passed in %d tries", g->name, grp->name, TRIES);
                assert_admitted(&s, &c, "a random candidate");
                assert_kernel_takes(&s, &c, shapes, count, "a random candidate");
                distinct += differences((int)gid, &c, &s.seed) > 0;
                const size_t n = check_neighbours(&s, &c);
                kiln_space_neighbours(&s, &c, near, 64);
                for (size_t k = 0; k < n; k++)
                    assert_kernel_takes(&s, &near[k], shapes, count, "a neighbour of a random candidate");
                tried += 1 + n;
            }
            assert_true(distinct > 0);
            size_t shipped = 0;
            for (size_t k = 0; k < sizeof nvidia_profiles / sizeof *nvidia_profiles; k++) {
                const struct kiln_profile *q = kiln_profile_find(embedded, nvidia_profiles[k]);
                assert_non_null(q);
                const union kiln_space_values *v = (const void *)((const char *)kiln_profile_params(q) + grp->offset);
                if (kiln_space_check(&s, v, why, sizeof why, NULL) != 0) {
                    printf("#   %s of %s does not fit: %s\n", grp->name, nvidia_profiles[k], why);
                    continue;
                }
                for (size_t i = 0; i < s.count; i++)
                    if (!on_ladder(&s, v, i))
                        fail_msg("%s %s: %s's %s is on no ladder", g->name, grp->name, nvidia_profiles[k],
                                 grp->fields[s.fields[i].field].key);
                shipped++;
            }
            assert_true(shipped > 0);
            printf("#   %s: %zu shapes, %zu fields, %zu neighbours of the seed, %d of %d samples away from it, %zu "
                   "candidates the kernel takes, %zu refused by the schema and %zu by the device, %zu shipped "
                   "profiles' values in the space\n",
                   grp->name, count, s.count, neighbours, distinct, FAMILY_SAMPLES, tried, r.schema, r.device, shipped);
        }
    }
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_tensor_core_spaces));
    kt_add(&tests, cmocka_unit_test(test_rule_and_ladders));
    kt_add(&tests, cmocka_unit_test(test_refusals));
    kt_add(&tests, cmocka_unit_test(test_coupled_fields));
    kt_add(&tests, cmocka_unit_test(test_steps_past_refused));
    kt_add_profiles(&tests, test_profile_space, NULL);
    return kt_run_with("tune_space", &tests, load_embedded, free_embedded);
}
