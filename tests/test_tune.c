/* The GEMM search of kiln-tune (src/tune/tune.c) with a budget of a few
   seconds on two small shapes: it writes a profile into the user's profile
   directory that loads and that the next context's plans take; a resumed
   run takes every trial of the journal instead of running it again; an
   output directory that cannot be written is a clear error before any
   trial; a candidate that computes a wrong result (from a copy of the
   kernel sources, KILN_KERNEL_DIR, in which one value of a parameter packs
   A slightly wrong) is rejected and journaled with its reason, and the
   profile written computes the tuned shapes right with those kernels; the
   seed and the winners are confirmed in alternation. */
#include "gemm_ref.h"
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/context.h"
#include "ops/gemm.h"
#include "profiles/profile.h"
#include "tune/space.h"
#include "tune/tune.h"

static struct kiln_tune_shape shapes[2];

static void small_shapes(void)
{
    shapes[0].name = "gemm 96x96x96";
    shapes[0].op = KILN_TUNE_GEMM;
    kiln_gemm_desc_init(&shapes[0].gemm, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 96, 96, 96);
    shapes[1].name = "gemm 64x128x256";
    shapes[1].op = KILN_TUNE_GEMM;
    kiln_gemm_desc_init(&shapes[1].gemm, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 64, 128, 256);
}

static void options(struct kiln_tune_options *o, double budget_s)
{
    kiln_tune_options_init(o);
    small_shapes();
    o->budget_s = budget_s;
    o->shapes = shapes;
    o->shape_count = 2;
    o->seed = kt_group_seed;
    o->thresholds = 0;
    o->log = stdout;
}

/* Lines of the journal in `dir`; fails on two trials of one candidate. */
static size_t journal_lines(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, KILN_TUNE_JOURNAL);
    size_t size;
    char *text = (char *)kt_read_bytes(path, &size);
    size_t n = 0, cap = 0;
    char **keys = NULL; /* as many as the search had time for: hundreds with a warm kernel cache */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const cJSON *g = cJSON_GetObjectItem(j, "group"), *ov = cJSON_GetObjectItem(j, "overlay");
        assert_true(cJSON_IsString(g) && cJSON_IsString(ov));
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            keys = realloc(keys, cap * sizeof *keys);
            assert_non_null(keys);
        }
        keys[n] = malloc(strlen(g->valuestring) + strlen(ov->valuestring) + 2);
        assert_non_null(keys[n]);
        sprintf(keys[n], "%s %s", g->valuestring, ov->valuestring);
        for (size_t i = 0; i < n; i++)
            if (strcmp(keys[i], keys[n]) == 0)
                fail_msg("tried twice: %s", keys[n]);
        n++;
        cJSON_Delete(j);
    }
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    free(text);
    return n;
}

/* The profile at `path` is a child of `parent` (the first name of a
   "name > name" chain) holding only keys whose values differ from it. */
static void assert_only_changes(const char *path, const char *parent)
{
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(parent, " >"), parent);
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, NULL, &set), KILN_SUCCESS);
    const struct kiln_profile *p = kiln_profile_find(set, name);
    assert_non_null(p);
    size_t size;
    char *text = (char *)kt_read_bytes(path, &size);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(root, "parent")->valuestring, name);
    assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "match"), "driver"));
    const char *sections[] = {"device", "select", "kernels"};
    for (int i = 0; i < 3; i++) {
        const cJSON *sec = cJSON_GetObjectItem(root, sections[i]);
        for (const cJSON *g = i == 2 ? (sec ? sec->child : NULL) : sec; g; g = i == 2 ? g->next : NULL)
            for (const cJSON *k = g->child; k; k = k->next) {
                double was;
                if (strcmp(k->string, "classes") == 0 || !cJSON_IsNumber(k))
                    continue;
                kt_assert_status(kiln_profile_get(p, i == 2 ? g->string : sections[i], k->string, &was), KILN_SUCCESS);
                if (was == k->valuedouble)
                    fail_msg("%s holds %s.%s = %g, as %s has it", path, i == 2 ? g->string : sections[i], k->string,
                             was, name);
            }
    }
    cJSON_Delete(root);
    free(text);
    kiln_profile_set_free(set);
}

/* Whatever the search found best is written (min_gain below -1, max_loss
   huge), into the user's profile directory, and is what the next context
   takes. */
static void test_writes_a_profile_the_next_context_uses(void **state)
{
    (void)state;
    char *base = kt_temp_dir(), *saved = strdup(getenv("XDG_CONFIG_HOME") ? getenv("XDG_CONFIG_HOME") : "");
    assert_non_null(saved);
    assert_int_equal(setenv("XDG_CONFIG_HOME", base, 1), 0);
    struct kiln_tune_options o;
    options(&o, 6);
    o.min_gain = -2;
    o.max_loss = o.select_max_loss = 1e9; /* nor refuted by a noisy table */
    struct kiln_tune_result r;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    printf("# %zu trials, %zu refused, %zu rejected; wrote %s: %s\n", r.trials, r.refused, r.rejected, r.profile,
           r.changes);
    /* The seed and at least one other candidate, timed or refused before
       compiling: on NVIDIA's OpenCL (nvidia-hopper's gemm.direct, wg =
       mdimc * vwm) every neighbour the budget left time for broke a
       constraint. */
    assert_true(r.timed >= 1 && r.timed + r.refused >= 2);
    assert_true(r.profile[0] != '\0');
    assert_non_null(strstr(r.path, base));
    assert_true(r.peak_gflops > 0 && r.peak_gbps > 0);
    for (size_t i = 0; i < 2; i++)
        assert_true(r.shapes[i].before_ms > 0 && r.shapes[i].after_ms > 0);

    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.profile, r.profile);
    assert_non_null(strstr(info.profile_reason, "driver '")); /* matched to this driver */
    assert_non_null(strstr(info.profile_provenance, "\"tool\":\"kiln-tune\""));
    assert_string_equal(info.peak_source, "measured");
    assert_non_null(strstr(info.profile_provenance, "gemm 96x96x96 GFLOP/s"));
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(ctx, &shapes[0].gemm, &plan), KILN_SUCCESS);
    kiln_gemm_plan_info pi;
    kt_assert_status(kiln_gemm_plan_describe(plan, &pi), KILN_SUCCESS);
    printf("# %s %s (%s)\n", pi.kernel, pi.params, pi.profile);
    assert_string_equal(pi.profile, r.profile);
    kiln_gemm_plan_destroy(plan);
    kiln_context_destroy(ctx);
    assert_only_changes(r.path, r.matched);

    /* Tuned again, from the tuned profile: the same profile is replaced,
       still a child of the profile it was tuned from. */
    char first[80];
    snprintf(first, sizeof first, "%s", r.profile);
    o.seed++;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    printf("# tuned again from %s: wrote %s: %s\n", r.matched, r.profile, r.changes);
    assert_string_equal(r.matched, first);
    assert_string_equal(r.profile, first);
    assert_only_changes(r.path, info.profile_parents);

    assert_int_equal(setenv("XDG_CONFIG_HOME", saved, 1), 0);
    free(saved);
    kt_remove_tree(base);
    free(base);
}

/* A resumed run takes every trial of the journal and runs none of them
   again: the search replays the same candidates in the same order. */
static void test_resume_runs_no_trial_twice(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    struct kiln_tune_options o;
    options(&o, 3);
    o.out = dir;
    o.min_gain = 1e9; /* nothing written: the matched profile stays */
    struct kiln_tune_result r;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    assert_string_equal(r.profile, "");
    size_t first = journal_lines(dir);
    assert_int_equal(first, r.trials);
    assert_true(first >= 1);

    o.resume = 1;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    printf("# first run %zu trials; resumed: %zu from the journal, %zu in all\n", first, r.journaled, r.trials);
    assert_int_equal(r.journaled, first);
    assert_int_equal(journal_lines(dir), r.trials);
    kt_remove_tree(dir);
    free(dir);
}

/* An output directory that cannot be created is an IO error naming it,
   returned before any of the budget is spent. */
static void test_unwritable_output_is_an_error(void **state)
{
    (void)state;
    char *dir = kt_temp_dir(), out[4300], file[4200];
    snprintf(file, sizeof file, "%s/file", dir);
    kt_write_file(file, "not a directory");
    snprintf(out, sizeof out, "%s/profiles", file);
    struct kiln_tune_options o;
    options(&o, 100);
    o.out = out;
    struct kiln_tune_result r;
    time_t start = time(NULL);
    kt_assert_status(kiln_tune(&o, &r), KILN_ERROR_IO);
    assert_true(time(NULL) - start < 10);
    printf("# %s\n", kiln_last_error_detail());
    assert_non_null(strstr(kiln_last_error_detail(), out));
    assert_int_equal(r.trials, 0);
    kt_remove_tree(dir);
    free(dir);
}

/* Whether shape `name` is one of family f's own. */
static int own_shape(const struct kiln_tune_family *f, const char *name)
{
    struct kiln_tune_shape own[KILN_TUNE_FAMILY_SHAPES_MAX];
    const size_t count = kiln_tune_family_shapes(f, own);
    for (size_t i = 0; i < count; i++)
        if (strcmp(own[i].name, name) == 0)
            return 1;
    return 0;
}

/* The CUDA families (the tensor-core GEMMs, attention and convolution, the
   CUDA decoding kernel), searched alone (groups), one operation at a time:
   where this device runs one, its own shapes are tuned, each once (the
   decoding family's fp32 step is the representative GPU shape); where it
   does not, the family is reported as skipped with the reason (that it
   needs the CUDA backend, this backend, its arch), none of its shapes is
   added and nothing is tried for it. The other shapes kept are those whose
   plans take a listed group (on a CPU, the representative decoding step
   takes the CPU decoding kernel's attention.decode). A run with the tests'
   fp32 GEMM shapes reports the GEMM families' skips alone. */
static void test_cuda_families(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    struct kiln_tune_family fam[KILN_TUNE_FAMILIES];
    kiln_tune_families(kt_ctx, fam);
    static const char *const listed[KILN_TUNE_OP_COUNT] = {"gemm.mma,gemm.wgmma", "conv.mma",
                                                           "attention.mma,attention.decode"};
    size_t skipped_gemm = 0, families = 0;
    for (int op = 0; op < KILN_TUNE_OP_COUNT; op++) {
        struct kiln_tune_options o;
        kiln_tune_options_init(&o);
        o.budget_s = 5;
        o.out = dir;
        o.ops = 1u << op;
        o.groups = listed[op];
        o.seed = kt_group_seed;
        o.min_gain = 1e9; /* nothing written */
        o.log = stdout;
        struct kiln_tune_result r;
        kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
        size_t skipped = 0, own = 0;
        for (int f = 0; f < KILN_TUNE_FAMILIES; f++) {
            if ((int)fam[f].op != op)
                continue;
            families++;
            const char *group = kiln_param_groups[fam[f].group].name;
            assert_non_null(strstr(listed[op], group));
            struct kiln_tune_shape shapes_of[KILN_TUNE_FAMILY_SHAPES_MAX];
            const size_t count = kiln_tune_family_shapes(&fam[f], shapes_of);
            assert_true(count > 0 && count <= KILN_TUNE_FAMILY_SHAPES_MAX);
            /* Kept: those whose plans take the default set of a listed
               group; a class's set (nvidia-hopper's attention.mma for head
               dimensions to 64) is not tuned. */
            size_t taken = 0, tunable = 0;
            for (size_t i = 0; i < count; i++) {
                for (size_t k = 0; k < r.shape_count; k++)
                    taken += strcmp(r.shapes[k].name, shapes_of[i].name) == 0;
                char set[48];
                if (!fam[f].runs)
                    continue;
                kt_assert_status(kiln_tune_shape_set(kt_ctx, &shapes_of[i], set, sizeof set), KILN_SUCCESS);
                printf("# %s: its plan takes %s\n", shapes_of[i].name, set);
                char *colon = strchr(set, ':');
                if (colon && strcmp(colon, ":default") == 0) {
                    *colon = '\0';
                    tunable += strstr(listed[op], set) != NULL;
                }
            }
            int reported = 0;
            for (size_t k = 0; k < r.skipped_count; k++)
                if (strcmp(r.skipped[k].group, group) == 0) {
                    printf("# %s skipped: %s\n", group, r.skipped[k].reason);
                    assert_string_equal(r.skipped[k].reason, fam[f].why_not);
                    assert_non_null(strstr(r.skipped[k].reason, "needs the CUDA backend"));
                    assert_non_null(strstr(r.skipped[k].reason, kt_ctx->backend->name));
                    reported++;
                }
            assert_int_equal(reported, !fam[f].runs);
            assert_int_equal(taken, tunable);
            if (fam[f].runs)
                assert_true(tunable > 0);
            /* Without the CUDA backend no family runs. */
            if (!kt_ctx->backend->native_sources)
                assert_false(fam[f].runs);
            skipped += (size_t)!fam[f].runs;
            own += taken;
        }
        assert_int_equal(r.skipped_count, skipped);
        size_t others = 0;
        for (size_t k = 0; k < r.shape_count; k++) {
            int of_family = 0;
            for (int f = 0; f < KILN_TUNE_FAMILIES; f++)
                of_family |= fam[f].runs && (int)fam[f].op == op && own_shape(&fam[f], r.shapes[k].name);
            if (!of_family) {
                printf("# %s: its plan takes %s\n", r.shapes[k].name, r.shapes[k].group);
                assert_true(r.shapes[k].group[0] && strstr(listed[op], r.shapes[k].group));
                others++;
            }
        }
        assert_int_equal(r.shape_count, own + others);
        if (r.shape_count == 0)
            assert_int_equal(r.trials, 0);
        assert_string_equal(r.profile, "");
        if (op == KILN_TUNE_GEMM)
            skipped_gemm = skipped;
    }
    assert_int_equal(families, KILN_TUNE_FAMILIES);

    struct kiln_tune_options o;
    struct kiln_tune_result r;
    options(&o, 1);
    o.out = dir;
    o.min_gain = 1e9;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    assert_int_equal(r.skipped_count, skipped_gemm);
    kt_remove_tree(dir);
    free(dir);
}

/* The convolution thresholds of select, searched alone (ops conv, groups
   "select"): each is measured on its ladder, reported with every rung's
   times on both sides, and placed within its field's bounds; the 1x1
   direct threshold only where implicit GEMM takes its CPU kernel. Every
   shape stays for the before/after table, which the thresholds answer to,
   and no kernel group is searched. */
static void test_conv_thresholds_measured(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    struct kiln_tune_options o;
    options(&o, 300);
    o.shapes = NULL, o.shape_count = 0; /* the operation's own */
    o.ops = 1u << KILN_TUNE_CONV, o.groups = "select", o.thresholds = 1;
    o.out = dir, o.min_gain = 1e9, o.measure_peaks = 0; /* nothing written */
    struct kiln_tune_result r;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    printf("# %zu shapes, %zu candidates timed\n", r.shape_count, r.timed);
    assert_true(r.shape_count > 0);
    assert_int_equal(r.timed, 0);
    const int cpu_kernel = kiln_profile_params(kt_ctx->profile)->select.conv_igemm_route == KILN_IGEMM_CPU;
    static const struct {
        const char *field, *metric;
        int cpu_kernel_only;
    } ladders[] = {{"select.conv_wino_min_channels", "c=", 0},
                   {"select.conv_1x1_igemm_min_pixels", "pixels=", 0},
                   {"select.conv_1x1_direct_min_pixels", "pixels=", 1}};
    for (size_t i = 0; i < sizeof ladders / sizeof *ladders; i++) {
        const struct kiln_tune_threshold *t = NULL;
        for (size_t k = 0; k < r.threshold_count; k++)
            if (strcmp(r.thresholds[k].field, ladders[i].field) == 0)
                t = &r.thresholds[k];
        if (ladders[i].cpu_kernel_only && !cpu_kernel) {
            assert_null(t);
            continue;
        }
        if (!t)
            fail_msg("%s: not among the thresholds", ladders[i].field);
        printf("# %s: %ld -> %ld (%s)\n", t->field, t->before, t->after, t->evidence);
        assert_true(t->measured);
        assert_true(t->after >= 1 && t->after <= 1L << 30);
        assert_non_null(strstr(t->evidence, ladders[i].metric));
        assert_non_null(strstr(t->evidence, "/"));
    }
    kt_remove_tree(dir);
    free(dir);
}

/* The GEMM thresholds searched alone (ops gemm, groups "select"): where the
   profile has a narrow tile and GEMMs take the CPU family, the narrow tile's
   in-place bound (gemm.cpu.narrow_in_place_l2) is among them, measured on
   its ladder (B's span in percent of L2, both sides timed on every rung)
   and placed within its field's bounds; elsewhere it is not searched. */
static void test_gemm_thresholds_measured(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    struct kiln_tune_options o;
    options(&o, 300);
    o.shapes = NULL, o.shape_count = 0;
    o.ops = 1u << KILN_TUNE_GEMM, o.groups = "select", o.thresholds = 1;
    o.out = dir, o.min_gain = 1e9, o.measure_peaks = 0; /* nothing written */
    struct kiln_tune_result r;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    const struct kiln_params *p = kiln_profile_params(kt_ctx->profile);
    const int ladder = p->gemm_cpu.narrow_mr > 0 && p->select.gemm_route == KILN_ROUTE_CPU && kt_ctx->vector_kernels;
    const struct kiln_tune_threshold *t = NULL;
    for (size_t k = 0; k < r.threshold_count; k++) {
        printf("# %s: %ld -> %ld (%s)\n", r.thresholds[k].field, r.thresholds[k].before, r.thresholds[k].after,
               r.thresholds[k].evidence);
        if (strcmp(r.thresholds[k].field, "gemm.cpu.narrow_in_place_l2") == 0)
            t = &r.thresholds[k];
    }
    if (!ladder) {
        assert_null(t);
    } else {
        if (!t)
            fail_msg("gemm.cpu.narrow_in_place_l2: not among the thresholds");
        assert_true(t->measured);
        assert_int_equal(t->before, p->gemm_cpu.narrow_in_place_l2);
        assert_true(t->after >= 0 && t->after <= 10000);
        /* Its rungs: B of 768^2 ... 3072^2 floats, those within the field's
           10000% of this L2. */
        static const size_t sides[] = {768, 1024, 1536, 2048, 3072};
        int rungs = 0, seen = 0;
        for (size_t i = 0; i < sizeof sides / sizeof *sides; i++)
            rungs += kiln_gemm_cpu_in_place_l2(kt_ctx, sides[i] * sides[i] * sizeof(float)) <= 10000;
        for (const char *at = strstr(t->evidence, "l2%="); at; at = strstr(at + 1, "l2%="))
            seen += at - t->evidence < 6 || strncmp(at - 6, "again ", 6) != 0; /* not a confirmation's */
        if (rungs == 0 || seen != rungs)
            fail_msg("%d rungs of %d in \"%s\"", seen, rungs, t->evidence);
    }
    kt_remove_tree(dir);
    free(dir);
}

/* The journal line of `overlay` in `dir`'s journal (a cJSON the caller
   deletes), or NULL. */
static cJSON *journal_line(const char *dir, const char *overlay)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, KILN_TUNE_JOURNAL);
    size_t size;
    char *text = (char *)kt_read_bytes(path, &size);
    cJSON *found = NULL;
    for (char *line = strtok(text, "\n"); line && !found; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        assert_non_null(j);
        const cJSON *ov = cJSON_GetObjectItem(j, "overlay");
        if (cJSON_IsString(ov) && strcmp(ov->valuestring, overlay) == 0)
            found = j;
        else
            cJSON_Delete(j);
    }
    free(text);
    return found;
}

/* The CPU GEMM's register tile one row lower than the matched profile's (the
   first neighbour of the seed the search tries) scales A by 1.001 as it
   packs it: the search must reject that candidate, say so in the journal,
   and never write its value. */
/* The seed and the winners are confirmed side by side: three rounds in
   which each is timed once, in an order that turns by one per round (the
   log says which it times when). The turn shows where the search found a
   winner other than the seed; the three rounds always. */
static void test_confirmation_alternates(void **state)
{
    (void)state;
    char *dir = kt_temp_dir(), *text = NULL;
    size_t size = 0;
    FILE *log = open_memstream(&text, &size);
    assert_non_null(log);
    struct kiln_tune_options o;
    options(&o, 4);
    o.out = dir;
    o.min_gain = 1e9; /* nothing written */
    o.measure_peaks = 0;
    o.log = log;
    struct kiln_tune_result r;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    fclose(log);
    /* Each round's overlays in the order they were timed, per group. */
    enum { MAX = 8 };
    char group[64] = "", order[3][MAX][512];
    size_t count[3] = {0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char g[64], overlay[512];
        int round, rounds;
        if (sscanf(line, "%63[^:]: confirmation round %d of %d: %511[^\n]", g, &round, &rounds, overlay) != 4)
            continue;
        printf("# %s\n", line);
        assert_int_equal(rounds, 3);
        assert_true(round >= 1 && round <= 3);
        if (strcmp(g, group) != 0) { /* the next group's confirmation */
            snprintf(group, sizeof group, "%s", g);
            memset(count, 0, sizeof count);
        }
        assert_true(count[round - 1] < MAX);
        snprintf(order[round - 1][count[round - 1]++], sizeof order[0][0], "%s", overlay);
    }
    assert_true(group[0] != '\0'); /* at least one group was confirmed */
    const size_t n = count[0];
    assert_true(n >= 1);
    for (int round = 1; round < 3; round++) {
        assert_int_equal(count[round], n);
        for (size_t t = 0; t < n; t++) /* the same candidates, turned by one */
            assert_string_equal(order[round][t], order[0][(t + (size_t)round) % n]);
    }
    free(text);
    kt_remove_tree(dir);
    free(dir);
}

static void test_wrong_candidate_is_rejected(void **state)
{
    (void)state;
    small_shapes();
    kiln_gemm_plan *plan = NULL;
    kiln_gemm_plan_info info;
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &shapes[0].gemm, &plan), KILN_SUCCESS);
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    kiln_gemm_plan_destroy(plan);
    if (strcmp(info.param_set, "gemm.cpu:default") != 0) {
        printf("# skipped: the shapes take %s on this device, not the CPU GEMM\n", info.param_set);
        skip();
    }
    /* The wrong value: the first neighbour of the seed with another mr, or
       another flip_mr where the first shape takes the flipped tile and the
       seed sets flip_mr (its rows then). */
    struct kiln_space space;
    kt_assert_status(
        kiln_space_init(&space, KILN_GROUP_gemm_cpu, &kiln_profile_params(kt_ctx->profile)->gemm_cpu, &kt_ctx->desc),
        KILN_SUCCESS);
    union kiln_space_values near[64];
    size_t n = kiln_space_neighbours(&space, &space.seed, near, 64), i = 0;
    const int by_flip = info.kernel[strlen(info.kernel) - 1] == 't' && space.seed.gemm_cpu.flip_mr > 0;
    while (i < n && (by_flip ? near[i].gemm_cpu.flip_mr == space.seed.gemm_cpu.flip_mr
                             : near[i].gemm_cpu.mr == space.seed.gemm_cpu.mr))
        i++;
    assert_true(i < n);
    const int wrong = by_flip ? near[i].gemm_cpu.flip_mr : near[i].gemm_cpu.mr;
    char *overlay = kiln_space_overlay(&space, &near[i]);
    assert_non_null(overlay);
    printf("# seed mr %d, flip_mr %d (%s); the kernels are wrong for %d rows: %s\n", space.seed.gemm_cpu.mr,
           space.seed.gemm_cpu.flip_mr, info.kernel, wrong, overlay);

    char *cl = kt_copy_dir(KT_CL_DIR), *out = kt_temp_dir(), path[4200], to[512];
    snprintf(path, sizeof path, "%s/gemm/gemm_f32_cpu.cl", cl);
    /* The micro kernel's alpha, which every orientation of the tile uses
       (packed or read in place). */
    snprintf(to, sizeof to, "KILN_TILE_HOLD(held, alpha_arg * (MR == %d ? 1.001f : 1.0f), beta_arg, slope_arg);",
             wrong);
    kt_edit_file(path, "KILN_TILE_HOLD(held, alpha_arg, beta_arg, slope_arg);", to);
    assert_int_equal(setenv("KILN_KERNEL_DIR", cl, 1), 0);

    struct kiln_tune_options o;
    /* The wrong flip_mr is the search's eighth trial; 10 s were not enough
       for it on a loaded 2-core CI machine (ctest -j2: 7 trials). */
    options(&o, 20);
    o.out = out;
    o.min_gain = -2; /* write whatever the search found best */
    o.max_loss = o.select_max_loss = 1e9;
    o.measure_peaks = 0;
    struct kiln_tune_result r;
    kt_assert_status(kiln_tune(&o, &r), KILN_SUCCESS);
    printf("# %zu trials, %zu rejected; wrote \"%s\": %s\n", r.trials, r.rejected, r.profile, r.changes);
    assert_true(r.rejected >= 1);
    cJSON *line = journal_line(out, overlay);
    if (!line)
        fail_msg("no journal line for %s", overlay);
    const cJSON *verdict = cJSON_GetObjectItem(line, "verdict"), *reason = cJSON_GetObjectItem(line, "reason");
    assert_true(cJSON_IsString(verdict) && cJSON_IsString(reason));
    printf("# journal: %s: %s\n", verdict->valuestring, reason->valuestring);
    assert_string_equal(verdict->valuestring, "rejected");
    assert_non_null(strstr(reason->valuestring, "the reference"));
    cJSON_Delete(line);
    /* What the tuner wrote computes the shapes it was tuned on correctly,
       with the wrong kernels still in place: it may keep the wrong mr
       where none of the shapes runs it (minimize() leaves a value no shape
       exercises as the profile had it), never where one does. */
    if (r.profile[0]) {
        assert_int_equal(setenv("KILN_PROFILE_DIR", out, 1), 0);
        kiln_context_options co = {.device = "0", .profile = r.profile, .disable_disk_cache = 1};
        kiln_context *ctx = NULL;
        kiln_status cst = kiln_context_create(&co, &ctx);
        assert_int_equal(unsetenv("KILN_PROFILE_DIR"), 0);
        kt_assert_status(cst, KILN_SUCCESS);
        uint64_t seed = kt_group_seed;
        for (size_t si = 0; si < 2; si++) {
            kiln_gemm_plan *p = NULL;
            kt_assert_status(kiln_gemm_plan_create(ctx, &shapes[si].gemm, &p), KILN_SUCCESS);
            kiln_gemm_plan_info pi;
            kt_assert_status(kiln_gemm_plan_describe(p, &pi), KILN_SUCCESS);
            printf("# %s on the profile written: %s [%s]\n", shapes[si].name, pi.kernel, pi.params);
            struct gr_case t;
            gr_case_init(&t, ctx, &shapes[si].gemm, 0, 0, 0, 0);
            gr_case_run(&t, p, 2, &seed);
            gr_case_free(&t);
            kiln_gemm_plan_destroy(p);
        }
        kiln_context_destroy(ctx);
    }

    assert_int_equal(unsetenv("KILN_KERNEL_DIR"), 0);
    free(overlay);
    kt_remove_tree(cl);
    kt_remove_tree(out);
    free(cl);
    free(out);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_writes_a_profile_the_next_context_uses));
    kt_add(&tests, cmocka_unit_test(test_confirmation_alternates));
    kt_add(&tests, cmocka_unit_test(test_resume_runs_no_trial_twice));
    kt_add(&tests, cmocka_unit_test(test_unwritable_output_is_an_error));
    kt_add(&tests, cmocka_unit_test(test_cuda_families));
    kt_add(&tests, cmocka_unit_test(test_conv_thresholds_measured));
    kt_add(&tests, cmocka_unit_test(test_gemm_thresholds_measured));
    kt_add(&tests, cmocka_unit_test(test_wrong_candidate_is_rejected));
    return kt_run("tune", &tests);
}
