/* Profile parameter sets: classes of shapes and how a plan picks one,
   overlays (in memory and through the context option), the profile writer
   and reading back what it wrote, the resolved profile as JSON, and the
   profile sets shared by the contexts of a process. */
#include "test_util.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "gemm_ref.h"
#include "ops/attention.h"
#include "profiles/profile.h"
#include "profiles/profile_impl.h"

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

/* A tile for small m on generic-gpu's tiled GEMM (64x64 on 8x8 work-items). */
static const char skinny[] =
    "{\"kernels\": {\"gemm.tiled\": {\"classes\": ["
    "{\"name\": \"skinny\", \"when\": {\"m\": [1, 16]}, \"params\": {\"mwg\": 16, \"mdimc\": 8, \"mdima\": 8, "
    "\"vwm\": 2}},"
    "{\"name\": \"long-k\", \"when\": {\"k\": [4096, null], \"n\": [1, 64]}, \"params\": {\"kwi\": 4}}]}}}";

static struct kiln_dims gemm_dims(long m, long n, long k)
{
    struct kiln_dims d = {{0}};
    d.v[KILN_DIM_M] = m, d.v[KILN_DIM_N] = n, d.v[KILN_DIM_K] = k, d.v[KILN_DIM_BATCH] = 1;
    return d;
}

static const struct kiln_param_gemm_tiled *tiled_for(const struct kiln_profile *p, long m, long n, long k,
                                                     const char **set)
{
    const struct kiln_dims d = gemm_dims(m, n, k);
    return KILN_PARAMS_FOR(p, gemm_tiled, &d, NULL, set);
}

static void test_classes_choose_by_shape(void **state)
{
    (void)state;
    const struct kiln_profile *gpu = kiln_profile_find(embedded, "generic-gpu");
    struct kiln_profile *p = NULL;
    kt_assert_status(kiln_profile_derive(gpu, skinny, &p), KILN_SUCCESS);
    const char *set = NULL;
    const struct kiln_param_gemm_tiled *t = tiled_for(p, 8, 1000, 64, &set);
    assert_string_equal(set, "skinny");
    assert_int_equal(t->mwg, 16);
    assert_int_equal(t->nwg, 64); /* the default's, not set by the class */
    assert_int_equal(t->kwi, 2);
    tiled_for(p, 16, 1000, 64, &set); /* the range's last row */
    assert_string_equal(set, "skinny");
    t = tiled_for(p, 17, 1000, 64, &set); /* one row past the range */
    assert_string_equal(set, "default");
    assert_int_equal(t->mwg, 64);
    t = tiled_for(p, 100, 64, 4096, &set); /* both ranges of the second class */
    assert_string_equal(set, "long-k");
    assert_int_equal(t->kwi, 4);
    assert_int_equal(t->mwg, 64);
    t = tiled_for(p, 100, 65, 4096, &set);
    assert_string_equal(set, "default");
    t = tiled_for(p, 0, 1000, 64, &set); /* an unknown dimension rules nothing out */
    assert_string_equal(set, "skinny");
    assert_true(KILN_PARAMS_FOR(p, gemm_tiled, NULL, NULL, &set)->mwg == 64); /* no dims: the default */
    assert_string_equal(set, "default");

    /* A child inherits the classes; their unset fields follow its default. */
    struct kiln_profile *child = NULL;
    kt_assert_status(kiln_profile_derive(p, "{\"kernels\": {\"gemm.tiled\": {\"nwg\": 32}}}", &child), KILN_SUCCESS);
    t = tiled_for(child, 8, 1000, 64, &set);
    assert_string_equal(set, "skinny");
    assert_int_equal(t->mwg, 16);
    assert_int_equal(t->nwg, 32);
    /* ...unless it lists classes of its own, which replace them. */
    struct kiln_profile *none = NULL;
    kt_assert_status(kiln_profile_derive(p, "{\"kernels\": {\"gemm.tiled\": {\"classes\": []}}}", &none), KILN_SUCCESS);
    t = tiled_for(none, 8, 1000, 64, &set);
    assert_string_equal(set, "default");
    assert_int_equal(t->mwg, 64);
    kiln_profile_free(none);
    kiln_profile_free(child);
    kiln_profile_free(p);
}

/* Every malformed class is refused with a reason that names it. */
static void test_bad_classes_and_overlays(void **state)
{
    (void)state;
    const struct kiln_profile *gpu = kiln_profile_find(embedded, "generic-gpu");
    static const struct {
        const char *overlay, *cause;
    } bad[] = {
        {"{\"kernels\": {\"gemm.tiled\": {\"classes\": [{\"name\": \"a\", \"when\": {\"seq_q\": [1, 2]}, "
         "\"params\": {}}]}}}",
         "'kernels.gemm.tiled.classes[0].when.seq_q' is not one of m n k batch"},
        {"{\"kernels\": {\"gemm.tiled\": {\"classes\": [{\"name\": \"a\", \"when\": {\"m\": [5, 2]}, "
         "\"params\": {}}]}}}",
         "'kernels.gemm.tiled.classes[0].when.m' must be [low, high]"},
        {"{\"kernels\": {\"gemm.tiled\": {\"classes\": [{\"name\": \"a\", \"when\": {\"m\": [1, 2]}, \"params\": {}},"
         "{\"name\": \"a\", \"when\": {\"m\": [3, 4]}, \"params\": {}}]}}}",
         "a second class named 'a'"},
        {"{\"kernels\": {\"gemm.tiled\": {\"classes\": [{\"name\": \"default\", \"when\": {\"m\": [1, 2]}, "
         "\"params\": {}}]}}}",
         "a name other than \"default\""},
        {"{\"kernels\": {\"gemm.tiled\": {\"classes\": [{\"name\": \"odd\", \"when\": {\"m\": [1, 2]}, "
         "\"params\": {\"mwg\": 60}}]}}}",
         "gemm.tiled constraint fails: mwg = 60 is not a multiple of mdimc * vwm = 16 (class 'odd')"},
        {"{\"kernels\": {\"gemm.tiled\": {\"classes\": [{\"name\": \"a\", \"when\": {\"m\": [1, 2]}, "
         "\"params\": {\"route\": 1}}]}}}",
         "unknown key 'kernels.gemm.tiled.classes[0].params.route'"},
        {"{\"kernels\": {\"util\": {\"classes\": []}}}", "'kernels.util' has no classes"},
        {"{\"name\": \"x\"}", "unknown key 'name'"},
        {"{\"select\": {\"gemm_route\": \"gpu\"}}", "'select.gemm_route' must be one of"},
        {"{\"kernels\": {\"gemm.tiled\": {\"mwg\": 100}}}", "gemm.tiled constraint fails: mwg = 100"},
        {"{\"kernels\": ", "JSON syntax error"},
        {"[1, 2]", "the top level must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct kiln_profile *p = NULL;
        kiln_status st = kiln_profile_derive(gpu, bad[i].overlay, &p);
        if (st != KILN_ERROR_INVALID_PROFILE || !strstr(kiln_last_error_detail(), bad[i].cause))
            fail_msg("overlay %s: %s, \"%s\" (wanted INVALID_PROFILE, \"%s\")", bad[i].overlay, kiln_status_string(st),
                     kiln_last_error_detail(), bad[i].cause);
        assert_null(p);
    }
}

/* Through the public API: an overlay's class runs the GEMM it covers (the
   result checked against the double reference), and the plan says so. */
static void test_overlay_context_runs_class(void **state)
{
    (void)state;
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile = "generic-gpu";
    opt.profile_overlay = skinny;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    static const struct {
        size_t m, n, k;
        const char *set, *params;
    } cases[] = {
        {8, 40, 24, "gemm.tiled:skinny", "tile 16x64, work-group 8x8"},
        {40, 40, 24, "gemm.tiled:default", "tile 64x64, work-group 8x8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, cases[i].m, cases[i].n, cases[i].k);
        d.algo = KILN_GEMM_TILED;
        kiln_gemm_plan *plan = NULL;
        kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_gemm_plan_info info;
        kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
        assert_string_equal(info.param_set, cases[i].set);
        assert_string_equal(info.params, cases[i].params);
        assert_string_equal(info.profile, "generic-gpu+overlay");
        gr_check_plan(ctx, &d, plan, 1, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
    }
    kiln_context_destroy(ctx);
}

/* An overlay the device cannot run is refused when the context opens, with
   the limit in the detail; a bad overlay gives its reason and no context. */
static void test_overlay_context_refused(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    int side = 1;
    while ((size_t)side * (size_t)side <= dev.max_work_group_size && side < 1024)
        side *= 2;
    if ((size_t)side * (size_t)side <= dev.max_work_group_size) {
        printf("# skipped: device %s takes %zu work-items per work-group, more than a profile can ask for\n", dev.name,
               dev.max_work_group_size);
        skip();
    }
    char overlay[256];
    snprintf(overlay, sizeof overlay,
             "{\"kernels\": {\"attention.fused\": {\"wg\": %d}, \"conv.direct\": {\"wg\": 1}}}",
             side * side > 1024 ? 1024 : side * side);
    /* attention.fused.wg is at most 1024 by the schema: past the device
       only where the device allows fewer. */
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile_overlay = overlay;
    kiln_context *ctx = NULL;
    if (dev.max_work_group_size < 1024) {
        kt_assert_status(kiln_context_create(&opt, &ctx), KILN_ERROR_INVALID_PROFILE);
        assert_non_null(strstr(kiln_last_error_detail(), "work-items per work-group"));
        assert_null(ctx);
    }
    snprintf(overlay, sizeof overlay,
             "{\"kernels\": {\"gemm.tiled\": {\"mwg\": %d, \"nwg\": %d, \"mdimc\": %d, \"ndimc\": %d, \"mdima\": %d, "
             "\"ndimb\": %d, \"kwg\": %d, \"kwi\": 1, \"vwm\": 1, \"vwn\": 1}}}",
             side, side, side, side, side, side, side);
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_ERROR_INVALID_PROFILE);
    assert_non_null(strstr(kiln_last_error_detail(), "work-items per work-group"));
    assert_null(ctx);
    opt.profile_overlay = "{\"kernels\": {\"gemm.tiled\": {\"vwm\": 3}}}";
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_ERROR_INVALID_PROFILE);
    assert_non_null(strstr(kiln_last_error_detail(), "'kernels.gemm.tiled.vwm' must be a vector width"));
    assert_null(ctx);
}

/* gemm.wgmma's constraints, which hold on every device: the widths wgmma
   has, the TMA kernel's register hand-over measured with one or two
   multiplying warpgroups, and accumulators within a thread's registers. */
static void test_wgmma_constraints(void **state)
{
    (void)state;
    static const struct {
        const char *overlay, *why; /* why NULL: accepted */
    } cases[] = {
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 128, \"bn\": 256, \"stages\": 4, \"tma\": 1}}}", NULL},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 64, \"bn\": 256, \"stages\": 5, \"tma\": 1}}}", NULL},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 256, \"bn\": 128, \"tma\": 1}}}",
         "the TMA kernel takes bm 64 or 128"},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 192, \"bn\": 64, \"tma\": 1}}}", "the TMA kernel takes bm 64 or 128"},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 256, \"bn\": 128, \"tma\": 0}}}", NULL},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 256, \"bn\": 256, \"tma\": 0}}}", "registers a thread"},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 128, \"bn\": 192}}}", "it must be 64, 128 or 256"},
        {"{\"kernels\": {\"gemm.wgmma\": {\"bm\": 96}}}", "bm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.profile_overlay = cases[i].overlay;
        kiln_context *ctx = NULL;
        kiln_status st = kiln_context_create(&opt, &ctx);
        if (cases[i].why ? st != KILN_ERROR_INVALID_PROFILE || !strstr(kiln_last_error_detail(), cases[i].why)
                         : st != KILN_SUCCESS)
            fail_msg("%s: status %d (%s), wanted %s", cases[i].overlay, st, kiln_last_error_detail(),
                     cases[i].why ? cases[i].why : "success");
        kiln_context_destroy(ctx);
    }
}

/* What the writer writes loads as a profile with the same values, holding
   only the groups it was given and the provenance as data. */
static void test_writer_round_trip(void **state)
{
    (void)state;
    const struct kiln_profile *parent = kt_ctx->profile;
    struct kiln_profile *tuned = NULL;
    kt_assert_status(
        kiln_profile_derive(parent,
                            "{\"select\": {\"gemm_direct_max\": 12345}, \"kernels\": {\"util\": {\"wg\": 32},"
                            " \"gemm.tiled\": {\"kwi\": 1, \"classes\": [{\"name\": \"skinny\", \"when\": "
                            "{\"m\": [1, 16], \"k\": [64, null]}, \"params\": {\"kwi\": 2}}]}}}",
                            &tuned),
        KILN_SUCCESS);
    const struct kiln_profile_measurement m[] = {{"gemm 8x4096x4096 GFLOP/s", 61.5, 40.25}, {"note", 1, 0}};
    const struct kiln_profile_provenance prov = {
        "kiln-test", "1.2.3", "test device", "test driver", "2026-11-25", "a round trip", m, 2};
    char *dir = kt_temp_dir(), path[1024];
    snprintf(path, sizeof path, "%s/tuned-test.json", dir);
    kt_assert_status(kiln_profile_write(path, "tuned-test", kiln_profile_name(parent), parent, tuned,
                                        1u << KILN_GROUP_select | 1u << KILN_GROUP_gemm_tiled, NULL, &prov),
                     KILN_SUCCESS);
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, dir, &set), KILN_SUCCESS);
    assert_string_equal(kiln_profile_set_warnings(set), "");
    const struct kiln_profile *back = kiln_profile_find(set, "tuned-test");
    assert_non_null(back);
    assert_false(kiln_profile_is_abstract(back));
    assert_string_equal(kiln_profile_parent_name(back), kiln_profile_name(parent));
    const struct kiln_params *got = kiln_profile_params(back), *want = kiln_profile_params(tuned);
    assert_memory_equal(&got->select, &want->select, sizeof got->select);
    assert_memory_equal(&got->gemm_tiled, &want->gemm_tiled, sizeof got->gemm_tiled);
    assert_int_equal(got->select.gemm_direct_max, 12345);
    /* util was not written: the parent's, not the overlay's 32. */
    assert_memory_equal(&got->util, &kiln_profile_params(parent)->util, sizeof got->util);
    const char *set_name = NULL;
    const struct kiln_param_gemm_tiled *t = tiled_for(back, 8, 100, 64, &set_name);
    assert_string_equal(set_name, "skinny");
    assert_int_equal(t->kwi, 2);
    tiled_for(back, 8, 100, 63, &set_name);
    assert_string_equal(set_name, "default");
    const char *pv = kiln_profile_provenance(back);
    assert_non_null(strstr(pv, "\"tool\":\"kiln-test\""));
    assert_non_null(strstr(pv, "\"date\":\"2026-11-25\""));
    assert_non_null(strstr(pv, "{\"what\":\"gemm 8x4096x4096 GFLOP/s\",\"value\":61.5,\"baseline\":40.25}"));
    assert_non_null(strstr(pv, "{\"what\":\"note\",\"value\":1}"));
    /* The same device matches it (same rules, one level deeper). */
    char reason[256];
    assert_ptr_equal(kiln_profile_match(set, &kt_ctx->desc, reason, sizeof reason), back);

    /* Against its parent: only what differs, and the same values back. */
    char changes[1024];
    snprintf(changes, sizeof changes, "%s/changes.json", dir);
    kt_assert_status(
        kiln_profile_write(changes, "changes", kiln_profile_name(parent), parent, tuned, ~0u, parent, &prov),
        KILN_SUCCESS);
    size_t size;
    char *text = (char *)kt_read_bytes(changes, &size);
    cJSON *root = cJSON_Parse(text), *kernels = cJSON_GetObjectItem(root, "kernels");
    assert_non_null(root);
    assert_null(cJSON_GetObjectItem(root, "device"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "select")), 1);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "select"), "gemm_direct_max"));
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(kernels, "util")), 1);
    assert_null(cJSON_GetObjectItem(kernels, "gemm.cpu"));
    cJSON *tiled = cJSON_GetObjectItem(kernels, "gemm.tiled");
    assert_non_null(cJSON_GetObjectItem(tiled, "classes"));
    assert_null(cJSON_GetObjectItem(tiled, "mwg"));
    cJSON_Delete(root);
    free(text);
    struct kiln_profile_set *again = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, dir, &again), KILN_SUCCESS);
    const struct kiln_profile *changed = kiln_profile_find(again, "changes");
    assert_non_null(changed);
    assert_memory_equal(kiln_profile_params(changed), kiln_profile_params(tuned), sizeof(struct kiln_params));
    tiled_for(changed, 8, 100, 64, &set_name);
    assert_string_equal(set_name, "skinny");
    kiln_profile_set_free(again);

    kt_assert_status(kiln_profile_write("/nonexistent/dir/x.json", "x", "", NULL, tuned, 0, NULL, &prov),
                     KILN_ERROR_IO);
    kt_assert_status(kiln_profile_write(path, "", "", NULL, tuned, 0, NULL, &prov), KILN_ERROR_INVALID_ARGUMENT);
    kiln_profile_set_free(set);
    kiln_profile_free(tuned);
    kt_remove_tree(dir);
    free(dir);
}

/* kiln-info --profile's text parses back into the same values. */
static void test_json_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < kiln_profile_set_count(embedded); i++) {
        const struct kiln_profile *p = kiln_profile_set_at(embedded, i);
        char *text = NULL, why[KILN_PROFILE_WHY_SIZE] = "";
        kt_assert_status(kiln_profile_to_json(p, &text), KILN_SUCCESS);
        struct kiln_profile *back = NULL;
        kt_assert_status(kiln_profile_parse(text, strlen(text), "json", NULL, &back, why), KILN_SUCCESS);
        back->parent[0] = '\0'; /* every field is there: a root */
        if (kiln_profile_inherit(back, NULL, why) != 0)
            fail_msg("%s: %s", kiln_profile_name(p), why);
        assert_memory_equal(kiln_profile_params(back), kiln_profile_params(p), sizeof(struct kiln_params));
        kiln_profile_free(back);
        free(text);
    }
}

/* Contexts share one parsed set per directory until its files change. */
static void test_sets_parsed_once(void **state)
{
    (void)state;
    struct kiln_profile_set *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    kt_assert_status(kiln_profile_set_shared(NULL, NULL, &a), KILN_SUCCESS);
    kt_assert_status(kiln_profile_set_shared(NULL, "", &b), KILN_SUCCESS);
    assert_ptr_equal(a, b);
    char *dir = kt_temp_dir(), path[1024];
    kt_assert_status(kiln_profile_set_shared(NULL, dir, &c), KILN_SUCCESS);
    assert_ptr_not_equal(a, c);
    kt_assert_status(kiln_profile_set_shared(NULL, dir, &d), KILN_SUCCESS);
    assert_ptr_equal(c, d);
    kiln_profile_set_release(d);
    snprintf(path, sizeof path, "%s/extra-cpu.json", dir);
    kt_write_file(path, "{\"name\": \"extra-cpu\", \"parent\": \"generic-cpu\", \"match\": {\"name\": [\"none\"]}}");
    kt_assert_status(kiln_profile_set_shared(NULL, dir, &d), KILN_SUCCESS);
    assert_ptr_not_equal(c, d);
    assert_non_null(kiln_profile_find(d, "extra-cpu"));
    assert_null(kiln_profile_find(c, "extra-cpu")); /* the old set lives on while in use */
    kiln_profile_set_release(c);
    kiln_profile_set_release(d);
    kiln_profile_set_release(b);
    kiln_profile_set_release(a);
    kt_remove_tree(dir);
    free(dir);
}

/* Every operator's plan names the parameter set it took. */
static void test_plans_name_their_set(void **state)
{
    (void)state;
    kiln_conv2d_desc cd;
    kiln_conv2d_desc_init(&cd, KILN_NCHW, 1, 16, 9, 9, 16, 3, 3);
    cd.algo = KILN_CONV_DIRECT;
    kiln_conv2d_plan *cp = NULL;
    kiln_status cst = kiln_conv2d_plan_create(kt_ctx, &cd, &cp);
    kt_skip_unsupported_here(kt_ctx, cst);
    kt_assert_status(cst, KILN_SUCCESS);
    kiln_conv2d_plan_info ci;
    kt_assert_status(kiln_conv2d_plan_describe(cp, &ci), KILN_SUCCESS);
    assert_string_equal(ci.param_set, "conv.direct:default");
    kiln_conv2d_plan_destroy(cp);

    kiln_attention_desc ad;
    kiln_attention_desc_init(&ad, KILN_BSHD, 1, 2, 16, 16, 64);
    ad.algo = KILN_ATTENTION_FUSED;
    kiln_attention_plan *ap = NULL;
    kt_assert_status(kiln_attention_plan_create(kt_ctx, &ad, &ap), KILN_SUCCESS);
    kiln_attention_plan_info ai;
    kt_assert_status(kiln_attention_plan_describe(ap, &ai), KILN_SUCCESS);
    /* Sixteen query rows: the default set, or a class of the matched
       profile for short queries (decode). */
    struct kiln_dims dims;
    kt_assert_status(kiln_attention_desc_dims(&ad, &dims), KILN_SUCCESS);
    const char *set = NULL;
    /* The flash kernel's group where the route or the backend takes it. */
    const int flash = kiln_profile_params(kt_ctx->profile)->select.attention_route == KILN_ATTENTION_ROUTE_FLASH ||
                      !kt_vector_kernels(kt_ctx);
    const enum kiln_group_id group = flash ? KILN_GROUP_attention_flash : KILN_GROUP_attention_fused;
    kiln_profile_choose(kt_ctx->profile, group, &dims, &kt_ctx->desc, &set);
    char want[96];
    snprintf(want, sizeof want, "%s:%s", kiln_param_groups[group].name, set);
    assert_string_equal(ai.param_set, want);
    kiln_attention_plan_destroy(ap);

    kiln_gemm_desc gd;
    kiln_gemm_desc_init(&gd, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 64, 64, 64);
    gd.algo = KILN_GEMM_DIRECT;
    kiln_gemm_plan *gp = NULL;
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &gd, &gp), KILN_SUCCESS);
    kiln_gemm_plan_info gi;
    kt_assert_status(kiln_gemm_plan_describe(gp, &gi), KILN_SUCCESS);
    assert_string_equal(gi.param_set, "gemm.direct:default");
    kiln_gemm_plan_destroy(gp);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_classes_choose_by_shape));
    kt_add(&tests, cmocka_unit_test(test_bad_classes_and_overlays));
    kt_add(&tests, cmocka_unit_test(test_overlay_context_runs_class));
    kt_add(&tests, cmocka_unit_test(test_overlay_context_refused));
    kt_add(&tests, cmocka_unit_test(test_wgmma_constraints));
    kt_add(&tests, cmocka_unit_test(test_writer_round_trip));
    kt_add(&tests, cmocka_unit_test(test_json_round_trip));
    kt_add(&tests, cmocka_unit_test(test_sets_parsed_once));
    kt_add(&tests, cmocka_unit_test(test_plans_name_their_set));
    return kt_run_with("params", &tests, load_embedded, free_embedded);
}
