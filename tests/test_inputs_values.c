/* Every way the values kiln reads can be wrong (docs/inputs.md): the
   environment variables with values (KILN_LOG, KILN_DEVICE, KILN_PROFILE,
   KILN_FIND), the context options, and every key of every group of a
   profile, including the schema's bounds on what a parameter set costs to
   compile. Each answer is a specific status or a warning naming the input,
   the value and the reason; each test runs under a watchdog. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "kiln/kiln_cl.h"
#include "profiles/profile.h"
#include "profiles/schema.h"

#define WATCHED(test) cmocka_unit_test_setup_teardown(test, kt_watchdog_arm, kt_watchdog_disarm)

/* The variables this file sets, as the suite was started with them. */
static const char *const saved_names[] = {
    "KILN_DEVICE",       "KILN_PROFILE",    "KILN_PROFILE_DIR", "KILN_FIND",          "KILN_ATTENTION_SPLIT_KV",
    "KILN_WAIT_POLL_US", "KILN_POCL_BATCH", "KILN_LARGE_PAGES", "KILN_CACHE_PROGRAMS"};
static char *saved_values[sizeof saved_names / sizeof *saved_names];

static int save_env(void **state)
{
    for (size_t i = 0; i < sizeof saved_names / sizeof *saved_names; i++) {
        const char *v = getenv(saved_names[i]);
        saved_values[i] = v ? strdup(v) : NULL;
    }
    return kt_group_setup(state);
}

static void restore_env(void)
{
    for (size_t i = 0; i < sizeof saved_names / sizeof *saved_names; i++) {
        if (saved_values[i])
            setenv(saved_names[i], saved_values[i], 1);
        else
            unsetenv(saved_names[i]);
    }
}

static int free_env(void **state)
{
    restore_env();
    for (size_t i = 0; i < sizeof saved_names / sizeof *saved_names; i++)
        free(saved_values[i]);
    return kt_group_teardown(state);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* A string of n copies of c (malloc'd). */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* kiln_context_create with `opt` must answer `expected` with every string
   of `causes` (NULL-terminated) in the detail, and no context. */
static void expect_create(const kiln_context_options *opt, kiln_status expected, const char *const *causes)
{
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(opt, &ctx);
    const char *detail = kiln_last_error_detail();
    int ok = st == expected;
    for (const char *const *c = causes; ok && c && *c; c++)
        ok = strstr(detail, *c) != NULL;
    if (!ok)
        fail_msg("%s: \"%.300s\" (wanted %s with \"%s\")", kiln_status_string(st), detail, kiln_status_string(expected),
                 causes && *causes ? *causes : "");
    assert_true(strlen(detail) < 4096); /* a long value is shown shortened */
    if (expected == KILN_SUCCESS)
        kiln_context_destroy(ctx);
    else
        assert_null(ctx);
}

/* The text kiln wrote to stderr between kt_capture_begin and _end. */
static char *captured(const struct kt_capture *c)
{
    size_t size;
    return (char *)kt_read_bytes(c->path, &size);
}

/* Ends a capture begun in dir (then removed and freed): one warning
   "NAME="VALUE" is not ACCEPTS" where `warned`, else none. */
static void expect_env_warning(struct kt_capture *cap, char *dir, const char *name, const char *value,
                               const char *accepts, int warned)
{
    int warnings = kt_capture_end(cap);
    char *text = captured(cap);
    kt_remove_tree(dir);
    free(dir);
    char want[128];
    snprintf(want, sizeof want, "%s=\"%s\" is not %s", name, value, accepts);
    if (warned ? warnings != 1 || !strstr(text, want) : warnings != 0)
        fail_msg("%s=\"%s\": %d warnings (%s), wanted %s", name, value, warnings, text, warned ? want : "none");
    free(text);
}

/* ---- KILN_LOG ---- */

/* A value that is not a level keeps the default, warnings, and says so:
   the malformed profile of KILN_PROFILE_DIR is still reported. */
static void test_log_not_a_level(void **state)
{
    (void)state;
    char *long_value = repeat('9', 100000);
    const char *const bad[] = {"verbose", "4", "-1", "1x", " 2", "1.0", long_value};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *dir = kt_temp_dir(), path[1024];
        snprintf(path, sizeof path, "%s/broken.json", dir);
        kt_write_file(path, "{\"name\": ");
        setenv("KILN_PROFILE_DIR", dir, 1);
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv("KILN_LOG", bad[i], 1);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        kiln_context_destroy(ctx);
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS); /* warned once per value */
        kiln_context_destroy(ctx);
        int warnings = kt_capture_end(&cap);
        char *text = captured(&cap);
        char want[128];
        snprintf(want, sizeof want, "KILN_LOG=\"%.64s%s\" is not a level", bad[i], strlen(bad[i]) > 64 ? "..." : "");
        if (warnings != 2 || !strstr(text, want) || !strstr(text, "broken.json: JSON syntax error"))
            fail_msg("KILN_LOG=\"%.20s\": %d warnings, wanted one for the value and one for the profile", bad[i],
                     warnings);
        assert_true(strlen(text) < 2000);
        free(text);
        kt_remove_tree(dir);
        free(dir);
    }
    restore_env();
    free(long_value);
}

/* The levels themselves: 0 silences the warning, 2 adds information, and
   empty is unset (warnings). */
static void test_log_levels(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int warnings, info;
    } cases[] = {{"0", 0, 0}, {"1", 1, 0}, {"2", 1, 1}, {"3", 1, 1}, {"", 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = kt_temp_dir(), path[1024];
        snprintf(path, sizeof path, "%s/broken.json", dir);
        kt_write_file(path, "[");
        setenv("KILN_PROFILE_DIR", dir, 1);
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv("KILN_LOG", cases[i].value, 1);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        kiln_context_destroy(ctx);
        int warnings = kt_capture_end(&cap);
        char *text = captured(&cap);
        assert_int_equal(warnings, cases[i].warnings);
        assert_int_equal(strstr(text, "kiln info:") != NULL, cases[i].info);
        assert_null(strstr(text, "KILN_LOG"));
        free(text);
        kt_remove_tree(dir);
        free(dir);
    }
    restore_env();
}

/* ---- KILN_DEVICE and the device option ---- */

static const char *const *causes2(const char *a, const char *b)
{
    static const char *list[3];
    list[0] = a, list[1] = b, list[2] = NULL;
    return list;
}

static void test_device_env_values(void **state)
{
    (void)state;
    char *long_value = repeat('x', 100000);
    setenv("KILN_DEVICE", "no-such-device-anywhere", 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("KILN_DEVICE \"no-such-device-anywhere\"", "no device matches"));
    setenv("KILN_DEVICE", "99999999999999999999999", 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("KILN_DEVICE", "the index is out of range"));
    setenv("KILN_DEVICE", "4294967296", 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("\"4294967296\"", "no device has that index"));
    setenv("KILN_DEVICE", "12abc", 1);
    expect_create(NULL, KILN_ERROR_INVALID_ARGUMENT, causes2("KILN_DEVICE \"12abc\"", "neither an index"));
    setenv("KILN_DEVICE", "-1", 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("KILN_DEVICE \"-1\"", "no device matches"));
    setenv("KILN_DEVICE", long_value, 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("xxx...\": no device matches", NULL));
    setenv("KILN_DEVICE", "", 1); /* empty is unset: the best device */
    expect_create(NULL, KILN_SUCCESS, NULL);
    /* A backend, alone or with an index among its devices. */
    setenv("KILN_DEVICE", "opencl", 1);
    expect_create(NULL, KILN_SUCCESS, NULL);
    setenv("KILN_DEVICE", "OpenCL:0", 1);
    expect_create(NULL, KILN_SUCCESS, NULL);
    setenv("KILN_DEVICE", "opencl:4294967296", 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("KILN_DEVICE \"opencl:4294967296\"", "no device matches"));
    static const char *const malformed[] = {"cuda:", "cuda:x", "opencl:-1", "opencl:1x",
                                            "cuda:99999999999999999999999"};
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
        setenv("KILN_DEVICE", malformed[i], 1);
        expect_create(NULL, KILN_ERROR_INVALID_ARGUMENT, causes2("comes a device index", NULL));
    }
    kiln_backend_info cuda;
    kt_assert_status(kiln_backend_get_info(1, &cuda), KILN_SUCCESS);
    assert_string_equal(cuda.name, "cuda");
    setenv("KILN_DEVICE", "cuda", 1);
    if (cuda.devices == 0) /* why there is none, in the detail */
        expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("no device matches (cuda: driver", NULL));
    else
        expect_create(NULL, KILN_SUCCESS, NULL);
    restore_env();
    free(long_value);
}

static void test_backend_info(void **state)
{
    (void)state;
    kiln_backend_info info, before;
    memset(&info, 0x3c, sizeof info);
    before = info;
    kt_assert_status(kiln_backend_get_info(0, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_backend_get_info(2, &info), KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_backend_get_info(SIZE_MAX, &info), KILN_ERROR_NOT_FOUND);
    assert_memory_equal(&info, &before, sizeof info); /* a refusal writes nothing */
    size_t total = 0, count = 0;
    for (size_t i = 0; i < 2; i++) {
        kt_assert_status(kiln_backend_get_info(i, &info), KILN_SUCCESS);
        assert_string_equal(info.name, i ? "cuda" : "opencl");
        printf("# %s: %zu devices; %s\n", info.name, info.devices, info.status);
        total += info.devices;
    }
    kt_assert_status(kiln_device_count(&count), KILN_SUCCESS);
    assert_int_equal(total, count);
    /* The CUDA backend says what it loaded or why it has no device. */
    kt_assert_status(kiln_backend_get_info(1, &info), KILN_SUCCESS);
    assert_non_null(strstr(info.status, "driver"));
    assert_non_null(strstr(info.status, "NVRTC"));
}

static void test_device_option_values(void **state)
{
    (void)state;
    char *long_value = repeat('x', 100000);
    setenv("KILN_DEVICE", "0", 1); /* the option wins over the environment */
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.device = "";
    expect_create(&opt, KILN_ERROR_INVALID_ARGUMENT, causes2("the device option is empty", NULL));
    opt.device = "no-such-device-anywhere";
    expect_create(&opt, KILN_ERROR_NOT_FOUND, causes2("the device option \"no-such-device-anywhere\"", NULL));
    opt.device = "18446744073709551616";
    expect_create(&opt, KILN_ERROR_NOT_FOUND, causes2("the device option", "the index is out of range"));
    opt.device = "0x0";
    expect_create(&opt, KILN_ERROR_INVALID_ARGUMENT, causes2("neither an index", NULL));
    opt.device = long_value;
    expect_create(&opt, KILN_ERROR_NOT_FOUND, causes2("xxx...\": no device matches", NULL));
    restore_env();
    free(long_value);
}

/* ---- KILN_PROFILE and the profile option ---- */

static void test_profile_env_values(void **state)
{
    (void)state;
    char *long_value = repeat('p', 100000);
    setenv("KILN_PROFILE", "no-such-profile", 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("KILN_PROFILE: profile \"no-such-profile\"", "does not exist"));
    setenv("KILN_PROFILE", "nvidia", 1);
    expect_create(NULL, KILN_ERROR_INVALID_ARGUMENT, causes2("KILN_PROFILE: profile \"nvidia\" is abstract", NULL));
    setenv("KILN_PROFILE", long_value, 1);
    expect_create(NULL, KILN_ERROR_NOT_FOUND, causes2("ppp...\" (forced) does not exist", NULL));
    kiln_device_info info;
    kt_assert_status(kiln_device_get_info(0, &info), KILN_ERROR_NOT_FOUND);
    setenv("KILN_PROFILE", "", 1); /* empty is unset: matched */
    expect_create(NULL, KILN_SUCCESS, NULL);
    restore_env();
    free(long_value);
}

static void test_profile_option_values(void **state)
{
    (void)state;
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile = "";
    expect_create(&opt, KILN_ERROR_INVALID_ARGUMENT, causes2("the profile option is empty", NULL));
    opt.profile = "no-such-profile";
    expect_create(&opt, KILN_ERROR_NOT_FOUND, causes2("the profile option: profile \"no-such-profile\"", NULL));
    opt.profile = "intel-gpu";
    expect_create(&opt, KILN_ERROR_INVALID_ARGUMENT, causes2("is abstract", NULL));
}

/* ---- switches: KILN_CACHE_PROGRAMS, KILN_FIND ---- */

/* For each of the n values of switch `name` in bad: a context opens and
   `use` runs on it, and the value costs one warning, that it is not a switch
   and reads as 0. */
static void check_not_a_switch(const char *name, const char *const *bad, size_t n, void (*use)(kiln_context *ctx))
{
    for (size_t i = 0; i < n; i++) {
        char *dir = kt_temp_dir();
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv(name, bad[i], 1);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        use(ctx);
        kiln_context_destroy(ctx);
        int warnings = kt_capture_end(&cap);
        char *text = captured(&cap);
        char want[96];
        snprintf(want, sizeof want, "%s=\"%s\" is not 0 or 1: using 0", name, bad[i]);
        if (warnings != 1 || !strstr(text, want))
            fail_msg("%s=\"%s\": %d warnings, wanted one saying \"%s\"", name, bad[i], warnings, want);
        free(text);
        kt_remove_tree(dir);
        free(dir);
    }
    restore_env();
}

/* A fill runs (its program left to a driver that keeps programs). */
static void fill_runs(kiln_context *ctx)
{
    kiln_buffer *b = NULL;
    kt_assert_status(kiln_buffer_create(ctx, 64 * sizeof(float), &b), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(b, 0, 64, 1.5f), KILN_SUCCESS);
    float y[64];
    kt_assert_status(kiln_buffer_read(b, 0, sizeof y, y), KILN_SUCCESS);
    for (int j = 0; j < 64; j++)
        assert_float_equal(y[j], 1.5f, 0.0f);
    kiln_buffer_destroy(b);
}

static void test_cache_programs_not_a_switch(void **state)
{
    (void)state;
    const char *const bad[] = {"yes", "2", "on"};
    check_not_a_switch("KILN_CACHE_PROGRAMS", bad, sizeof bad / sizeof *bad, fill_runs);
}

/* A convolution plan with algorithm AUTO does not search: the default, 0. */
static void plan_does_not_search(kiln_context *ctx)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 4, 6, 6, 4, 3, 3);
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    assert_null(strstr(info.reason, "find"));
    kiln_conv2d_plan_destroy(plan);
}

static void test_find_not_a_switch(void **state)
{
    (void)state;
    const char *const bad[] = {"yes", "2", "-1", "true", "01"};
    check_not_a_switch("KILN_FIND", bad, sizeof bad / sizeof *bad, plan_does_not_search);
}

/* ---- KILN_ATTENTION_SPLIT_KV ---- */

static void test_split_kv_not_a_number(void **state)
{
    (void)state;
    const char *const bad[] = {"0", "-5", "12x", "2000000000", "many"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *dir = kt_temp_dir();
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv("KILN_ATTENTION_SPLIT_KV", bad[i], 1);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        kiln_attention_desc d;
        kiln_attention_desc_init(&d, KILN_BSHD, 1, 4, 1, 300, 64);
        d.kv_heads = 1;
        kiln_attention_plan *plan = NULL;
        kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_attention_plan_info info;
        kt_assert_status(kiln_attention_plan_describe(plan, &info), KILN_SUCCESS);
        kiln_attention_plan_destroy(plan);
        kiln_context_destroy(ctx);
        int warnings = kt_capture_end(&cap);
        char *text = captured(&cap);
        kt_remove_tree(dir);
        free(dir);
        if (strncmp(info.kernel, "attention_f32_decode", 20) != 0) { /* the variable is not read here */
            free(text);
            restore_env();
            skip();
        }
        assert_null(strstr(info.params, "KILN_ATTENTION_SPLIT_KV")); /* the plan's own choice */
        char want[128];
        snprintf(want, sizeof want, "KILN_ATTENTION_SPLIT_KV=\"%s\" is not a number of keys", bad[i]);
        if (warnings != 1 || !strstr(text, want))
            fail_msg("KILN_ATTENTION_SPLIT_KV=\"%s\": %d warnings, wanted one saying \"%s\"", bad[i], warnings, want);
        free(text);
    }
    restore_env();
}

/* ---- KILN_WAIT_POLL_US ---- */

/* Two 96 x 96 x 96 GEMMs of ones into C1 and C2, the first waited on through
   its event, the second through kiln_context_finish: whichever way a wait
   polls or blocks, it returns only when the GEMM's command is complete, and
   the products are right (96 everywhere; C starts poisoned with NaN). */
static void gemms_waited(kiln_context *ctx)
{
    enum { N = 96 };
    static float ones[N * N], nan[N * N], c[N * N];
    for (size_t i = 0; i < N * N; i++)
        ones[i] = 1.0f, nan[i] = NAN;
    kiln_buffer *a = NULL, *c1 = NULL, *c2 = NULL;
    kt_assert_status(kiln_buffer_create(ctx, sizeof ones, &a), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof ones, &c1), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof ones, &c2), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(a, 0, sizeof ones, ones), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(c1, 0, sizeof nan, nan), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(c2, 0, sizeof nan, nan), KILN_SUCCESS);
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, N, N, N);
    kiln_event *ev = NULL;
    kt_assert_status(kiln_gemm(ctx, &d, 1.0f, a, 0, a, 0, 0.0f, c1, 0, &ev), KILN_SUCCESS);
    kt_wait_and_release(ev); /* complete when the wait returns */
    kt_assert_status(kiln_gemm(ctx, &d, 1.0f, a, 0, a, 0, 0.0f, c2, 0, &ev), KILN_SUCCESS);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    if (strcmp(ev->backend->name, "opencl") == 0) { /* complete when finish returns */
        cl_int status = CL_QUEUED;
        assert_int_equal(
            clGetEventInfo(kiln_event_get_cl(ev), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL),
            CL_SUCCESS);
        assert_int_equal(status, CL_COMPLETE);
    }
    kiln_event_destroy(ev);
    kiln_buffer *cs[2] = {c1, c2};
    for (int j = 0; j < 2; j++) {
        kt_assert_status(kiln_buffer_read(cs[j], 0, sizeof c, c), KILN_SUCCESS);
        for (size_t i = 0; i < N * N; i++)
            if (c[i] != (float)N)
                fail_msg("C%d[%zu] = %g after the wait, not %d", j + 1, i, c[i], N);
    }
    kiln_buffer_destroy(a);
    kiln_buffer_destroy(c1);
    kiln_buffer_destroy(c2);
}

static void test_wait_poll_values(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int bad;
    } cases[] = {{"0", 0},  {"1", 0},       {"1000000", 0}, {"", 0},   {"-1", 1},
                 {"1x", 1}, {"2000000", 1}, {"soon", 1},    {"1.5", 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = kt_temp_dir();
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv("KILN_WAIT_POLL_US", cases[i].value, 1);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        gemms_waited(ctx);
        /* The OpenCL backend's waits poll; the CUDA backend's block and never
           read the variable. */
        const int read = strcmp(ctx->backend->name, "opencl") == 0;
        kiln_context_destroy(ctx);
        expect_env_warning(&cap, dir, "KILN_WAIT_POLL_US", cases[i].value, "a number of microseconds",
                           cases[i].bad && read);
    }
    restore_env();
}

/* ---- KILN_POCL_BATCH ---- */

/* Read when kiln lists a POCL platform's devices (docs/pocl.md): anything
   but unset, empty, 0 or 1 costs one warning and reads as 1. */
static void test_pocl_batch_values(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int bad;
    } cases[] = {{"0", 0}, {"1", 0}, {"", 0}, {"yes", 1}, {"2", 1}, {"-1", 1}, {" 1", 1}, {"10", 1}};
    int pocl = 0;
    size_t n = 0;
    kt_assert_status(kiln_device_count(&n), KILN_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        kiln_device_info info;
        kt_assert_status(kiln_device_get_info(i, &info), KILN_SUCCESS);
        pocl |= strstr(info.platform, "Portable Computing Language") != NULL;
    }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = kt_temp_dir();
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv("KILN_POCL_BATCH", cases[i].value, 1);
        kt_assert_status(kiln_device_count(&n), KILN_SUCCESS);
        expect_env_warning(&cap, dir, "KILN_POCL_BATCH", cases[i].value, "0 or 1", cases[i].bad && pocl);
    }
    restore_env();
}

/* ---- KILN_LARGE_PAGES ---- */

/* Read when a context opens on an OpenCL CPU device: 0 leaves every buffer
   to the driver; unset, empty or 1 maps one of half a large page or more
   in memory kiln maps at a large page's boundary (docs/pocl.md); anything
   else costs one warning and reads as 1. */
static void test_large_pages_values(void **state)
{
    (void)state;
    static const struct {
        const char *value;
        int bad;
    } cases[] = {{"0", 0}, {"1", 0}, {"", 0}, {"yes", 1}, {"2", 1}, {"-1", 1}, {" 1", 1}, {"01", 1}};
    const size_t big = kt_large_page_bytes();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = kt_temp_dir();
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        setenv("KILN_LARGE_PAGES", cases[i].value, 1);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        kiln_device_info info;
        kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
        const int read = strcmp(ctx->backend->name, "opencl") == 0 && info.type == KILN_DEVICE_CPU;
        kiln_buffer *buf = NULL;
        kt_assert_status(kiln_buffer_create(ctx, big, &buf), KILN_SUCCESS);
        kt_assert_status(kiln_buffer_fill_f32(buf, 0, big / sizeof(float), 1.0f), KILN_SUCCESS);
        void *host = NULL;
        if (read) {
            assert_int_equal(clGetMemObjectInfo(kiln_buffer_get_cl(buf), CL_MEM_HOST_PTR, sizeof host, &host, NULL),
                             CL_SUCCESS);
            const int kilns = strcmp(cases[i].value, "0") != 0;
            if (kilns != (host != NULL && (uintptr_t)host % big == 0))
                fail_msg("KILN_LARGE_PAGES=\"%s\": a buffer of one large page has host memory %p", cases[i].value,
                         host);
        }
        kiln_buffer_destroy(buf);
        kiln_context_destroy(ctx);
        expect_env_warning(&cap, dir, "KILN_LARGE_PAGES", cases[i].value, "0 or 1", cases[i].bad && read);
    }
    restore_env();
}

/* ---- cache_dir and disable_disk_cache (as values) ---- */

static void test_cache_options_values(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    char *long_value = repeat('c', 100000);
    static const struct {
        int use_long, disable;
        const char *cache_dir, *reason;
        int warnings;
    } cases[] = {
        {0, 0, "", "disabled by the options", 0},
        {0, -1, NULL, "disabled by the options", 0},
        {0, 7, NULL, "disabled by the options", 0},
        {1, 0, NULL, "path too long", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.cache_dir = cases[i].use_long ? long_value : cases[i].cache_dir;
        opt.disable_disk_cache = cases[i].disable;
        struct kt_capture cap;
        kt_capture_begin(&cap, dir);
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
        kiln_cache_info info;
        kt_assert_status(kiln_context_get_cache_info(ctx, &info), KILN_SUCCESS);
        kiln_context_destroy(ctx);
        assert_int_equal(kt_capture_end(&cap), cases[i].warnings);
        assert_false(info.disk_enabled);
        assert_non_null(strstr(info.disk_reason, cases[i].reason));
    }
    free(long_value);
    kt_remove_tree(dir);
    free(dir);
}

/* ---- profile_overlay ---- */

/* Each malformed overlay: INVALID_PROFILE with the cause in the detail. */
static void expect_overlay(const char *overlay, const char *cause)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile_overlay = overlay;
    expect_create(&opt, KILN_ERROR_INVALID_PROFILE, causes2("profile overlay: ", cause));
}

static void test_overlay_text(void **state)
{
    (void)state;
    static const struct {
        const char *overlay, *cause;
    } bad[] = {
        {"", "empty"},
        {"   ", "JSON syntax error at line 1"},
        {"{\"kernels\": {\"util\": {\"wg\": 64}}", "JSON syntax error at line 1"},
        {"{\"kernels\": {}}\n{}", "JSON syntax error at line 2"},
        {"{\"select\": {\"gemm_direct_max\": NaN}}", "JSON syntax error"},
        {"{\"select\": {\"gemm_direct_max\": Infinity}}", "JSON syntax error"},
        {"null", "the top level must be an object"},
        {"\"kernels\"", "the top level must be an object"},
        {"{\"kernels\": []}", "'kernels' must be an object"},
        {"{\"kernels\": {\"gemm.tiled\": 4}}", "'kernels.gemm.tiled' must be an object"},
        {"{\"device\": \"fast\"}", "'device' must be an object"},
        {"{\"name\": \"x\"}", "unknown key 'name'"},
        {"{\"match\": {\"type\": \"cpu\"}}", "unknown key 'match'"},
        {"{\"kernels\": {\"gemm.huge\": {}}}", "unknown kernel group 'kernels.gemm.huge'"},
        {"{\"kernels\": {\"select\": {}}}", "unknown kernel group 'kernels.select'"},
        {"{\"kernels\": {\"util\": {\"mwg\": 4}}}", "unknown key 'kernels.util.mwg'"},
        {"{\"kernels\": {\"util\": {\"wg\": 64, \"wg\": 64}}}", "duplicate key 'kernels.util.wg'"},
        {"{\"select\": {}, \"select\": {}}", "repeated top-level key 'select'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_overlay(bad[i].overlay, bad[i].cause);

    /* Nested past the parser's limit, and longer than an overlay may be. */
    char *deep = repeat('[', 5000);
    expect_overlay(deep, "nested deeper than the JSON parser's limit");
    free(deep);
    char *huge = repeat(' ', (1u << 20) + 1);
    huge[0] = '{';
    huge[(1u << 20) - 1] = '}';
    expect_overlay(huge, "longer than the 1048576 bytes an overlay may hold");
    /* Just within the limit, it is parsed (and here valid). */
    huge[1u << 20] = '\0';
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile_overlay = huge;
    expect_create(&opt, KILN_SUCCESS, NULL);
    free(huge);
}

/* ---- profile values: every key of every group ---- */

/* The overlay setting group g's key to the JSON text `value`. */
static void overlay_for(char *buf, size_t size, int g, const char *key, const char *value)
{
    const char *name = kiln_param_groups[g].name;
    if (g == KILN_GROUP_device || g == KILN_GROUP_select)
        snprintf(buf, size, "{\"%s\": {\"%s\": %s}}", name, key, value);
    else
        snprintf(buf, size, "{\"kernels\": {\"%s\": {\"%s\": %s}}}", name, key, value);
}

/* Wrong types, out of range, absurd: every field of the schema refuses
   each with INVALID_PROFILE naming the key and the value given (applied to
   the context's profile directly: the context option takes the same path,
   as test_overlay_text shows). */
static void test_every_key_bad_values(void **state)
{
    (void)state;
    size_t tried = 0;
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        const struct kiln_param_group *grp = &kiln_param_groups[g];
        for (size_t f = 0; f < grp->count; f++) {
            const struct kiln_param_field *field = &grp->fields[f];
            char values[12][64];
            size_t n = 0;
            snprintf(values[n++], 64, "\"12\"");
            snprintf(values[n++], 64, "null");
            snprintf(values[n++], 64, "[1]");
            snprintf(values[n++], 64, "{\"value\": 1}");
            if (field->type == KILN_PARAM_BOOL) {
                snprintf(values[n++], 64, "1");
                snprintf(values[n++], 64, "\"true\"");
            } else if (field->type == KILN_PARAM_CHOICE) {
                snprintf(values[n++], 64, "0");
                snprintf(values[n++], 64, "\"%s \"", field->choices[0]);
                snprintf(values[n++], 64, "\"%s\"", "no-such-choice");
                snprintf(values[n++], 64, "\"\"");
            } else {
                snprintf(values[n++], 64, "true");
                snprintf(values[n++], 64, "%.17g", field->min - 1);
                snprintf(values[n++], 64, "%.17g", field->type == KILN_PARAM_NUMBER ? field->max * 2 : field->max + 1);
                snprintf(values[n++], 64, "1e308");
                snprintf(values[n++], 64, "-1e308");
                snprintf(values[n++], 64, "1e999");
                if (field->type != KILN_PARAM_NUMBER)
                    snprintf(values[n++], 64, "%.17g", field->min + 0.5);
                if (field->type == KILN_PARAM_VW)
                    snprintf(values[n++], 64, "3");
            }
            for (size_t v = 0; v < n; v++) {
                char overlay[1024], cause[160];
                overlay_for(overlay, sizeof overlay, g, field->key, values[v]);
                snprintf(cause, sizeof cause, "%s%s.%s' must be",
                         g == KILN_GROUP_device || g == KILN_GROUP_select ? "'" : "'kernels.", grp->name, field->key);
                struct kiln_profile *p = NULL;
                kiln_status st = kiln_profile_derive(kt_ctx->profile, overlay, &p);
                if (st != KILN_ERROR_INVALID_PROFILE || !strstr(kiln_last_error_detail(), cause) ||
                    !strstr(kiln_last_error_detail(), "(got "))
                    fail_msg("%s: %s, \"%s\" (wanted INVALID_PROFILE, \"%s\" and the value)", overlay,
                             kiln_status_string(st), kiln_last_error_detail(), cause);
                assert_null(p);
                tried++;
            }
        }
    }
    printf("# %zu bad values refused\n", tried);
}

/* The bounds of the schema on what a parameter set costs to compile:
   each absurd set that the other checks let through is refused at once,
   naming the bound, its value and limit; the same sets took the kernel
   compiler 28 to 39 s each (a GEMM register tile 1024 x 1024, attention
   scores of 1024 x 1024 rows and keys) before these bounds; of the two
   work-group tiles, the GEMM's crashed the POCL CPU device (its work-items'
   private values overflow the stack of the thread running the work-group)
   and the convolution's took 45 s to compile; so did fused attention
   holding 256 query rows on each of 64 work-items. */
static void test_compile_cost_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *overlay, *cause;
    } absurd[] = {
        {"{\"kernels\": {\"gemm.tiled\": {\"mwg\": 1024, \"nwg\": 1024, \"kwg\": 1, \"mdimc\": 1, \"ndimc\": 1, "
         "\"mdima\": 1, \"ndimb\": 1, \"kwi\": 1, \"vwm\": 1, \"vwn\": 1, \"sa\": false, \"sb\": false}}}",
         "gemm.tiled: (mwg/mdimc)*(nwg/ndimc) = 1048576 accumulators per work-item, more than the schema's bound of "
         "512"},
        {"{\"kernels\": {\"gemm.tiled\": {\"mwg\": 64, \"nwg\": 64, \"kwg\": 32, \"mdimc\": 4, \"ndimc\": 4, "
         "\"mdima\": 4, \"ndimb\": 4, \"kwi\": 32, \"vwm\": 1, \"vwn\": 1, \"sa\": false, \"sb\": false}}}",
         "gemm.tiled: kwi*(mwg/mdimc)*(nwg/ndimc) = 8192 multiply-adds unrolled per K step, more than the schema's "
         "bound of 4096"},
        {"{\"kernels\": {\"gemm.tiled\": {\"mwg\": 128, \"nwg\": 32, \"kwg\": 1024, \"mdimc\": 8, \"ndimc\": 1, "
         "\"mdima\": 8, \"ndimb\": 8, \"kwi\": 1, \"vwm\": 1, \"vwn\": 1, \"sa\": true, \"sb\": false}}}",
         "gemm.tiled: mwg*kwg/(mdimc*ndimc) = 16384 loads unrolled per K step, more than the schema's bound of 4096"},
        {"{\"kernels\": {\"gemm.tiled\": {\"mwg\": 32, \"nwg\": 128, \"kwg\": 1024, \"mdimc\": 1, \"ndimc\": 8, "
         "\"mdima\": 8, \"ndimb\": 8, \"kwi\": 1, \"vwm\": 1, \"vwn\": 1, \"sa\": false, \"sb\": true}}}",
         "gemm.tiled: nwg*kwg/(mdimc*ndimc) = 16384 loads unrolled per K step"},
        {"{\"kernels\": {\"gemm.tiled\": {\"mwg\": 1024, \"nwg\": 1024, \"kwg\": 128, \"mdimc\": 8, \"ndimc\": 256, "
         "\"mdima\": 32, \"ndimb\": 64, \"kwi\": 8, \"vwm\": 2, \"vwn\": 1, \"sa\": false, \"sb\": true}}}",
         "gemm.tiled: mwg*nwg = 1048576 accumulators per work-group, more than the schema's bound of 65536"},
        {"{\"kernels\": {\"conv.igemm_tiled\": {\"mwg\": 512, \"nwg\": 512, \"kwg\": 32, \"mdimc\": 8, \"ndimc\": 64, "
         "\"vw\": 8}}}",
         "conv.igemm_tiled: mwg*nwg = 262144 accumulators per work-group"},
        {"{\"kernels\": {\"gemm.direct\": {\"wg\": 256, \"mdimc\": 1, \"ndimc\": 1, \"vwm\": 1, \"vwn\": 1, "
         "\"kwi\": 1}}}",
         "gemm.direct: (wg/mdimc)*(wg/ndimc) = 65536 accumulators per work-item"},
        {"{\"kernels\": {\"gemm.direct\": {\"wg\": 256, \"mdimc\": 16, \"ndimc\": 16, \"vwm\": 1, \"vwn\": 1, "
         "\"kwi\": 256}}}",
         "gemm.direct: kwi*(wg/mdimc)*(wg/ndimc) = 65536 multiply-adds unrolled per K step"},
        {"{\"kernels\": {\"gemm.direct\": {\"wg\": 128, \"mdimc\": 2, \"ndimc\": 1, \"vwm\": 1, \"vwn\": 1, "
         "\"kwi\": 1}}}",
         "gemm.direct: (wg/mdimc)*(wg/ndimc) = 8192 accumulators"},
        {"{\"kernels\": {\"gemm.direct\": {\"wg\": 256, \"mdimc\": 16, \"ndimc\": 1, \"vwm\": 1, \"vwn\": 1, "
         "\"kwi\": 1}}}",
         "gemm.direct: (wg/mdimc)*(wg/ndimc) = 4096 accumulators"},
        {"{\"kernels\": {\"gemm.cpu\": {\"mr\": 64, \"nr\": 256, \"vw\": 1}}}",
         "gemm.cpu: mr*nr = 16384 accumulators per work-item, more than the schema's bound of 512"},
        {"{\"kernels\": {\"gemm.cpu\": {\"flip_mr\": 64, \"flip_nr\": 0, \"mr\": 1, \"nr\": 16, \"vw\": 16}}}",
         "gemm.cpu: flip_mr*nr = 1024 accumulators per work-item"},
        {"{\"kernels\": {\"gemm.cpu\": {\"flip_mr\": 32, \"flip_nr\": 32, \"mr\": 1, \"nr\": 16, \"vw\": 16}}}",
         "gemm.cpu: flip_mr*flip_nr = 1024 accumulators per work-item"},
        {"{\"kernels\": {\"gemm.cpu\": {\"flip_mr\": 0, \"flip_nr\": 256, \"mr\": 8, \"nr\": 16, \"vw\": 16}}}",
         "gemm.cpu: mr*flip_nr = 2048 accumulators per work-item"},
        {"{\"kernels\": {\"gemm.cpu\": {\"narrow_mr\": 64, \"vw\": 16, \"mr\": 1, \"nr\": 16}}}",
         "gemm.cpu: narrow_mr*vw = 1024 accumulators per work-item"},
        {"{\"kernels\": {\"gemm.smallm\": {\"mr\": 64, \"nc\": 256, \"vw\": 16}}}",
         "gemm.smallm: mr*nc*vw = 262144 accumulators per work-item"},
        {"{\"kernels\": {\"conv.igemm_tiled\": {\"mwg\": 1024, \"nwg\": 1024, \"mdimc\": 1, \"ndimc\": 1, "
         "\"vw\": 1}}}",
         "conv.igemm_tiled: (mwg/mdimc)*(nwg/ndimc) = 1048576 accumulators per work-item"},
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 1024, \"block_kv\": 1024, \"q_blocks\": 1024, "
         "\"chunk_kv\": 1024, \"vw\": 1, \"wg\": 1}}}",
         "attention.fused: block_q*block_kv = 1048576 scores per work-item, more than the schema's bound of 512"},
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 512, \"block_kv\": 1, \"q_blocks\": 1024, "
         "\"chunk_kv\": 1024, \"vw\": 16, \"wg\": 1}}}",
         "attention.fused: q_blocks*block_q = 524288 query rows per work-item, more than the schema's bound of 512"},
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 2, \"block_kv\": 128, \"q_blocks\": 128, "
         "\"chunk_kv\": 256, \"vw\": 1, \"wg\": 64}}}",
         "attention.fused: q_blocks*block_q*wg = 16384 query rows per work-group, more than the schema's bound of "
         "4096"},
        /* The per-chunk form (pv_rows > 0): its register tile, a chunk's
           scores and keys, and the private memory of a work-group of them
           (32 such work-items wrote past POCL's stack into another
           thread's, giving NaN and later a crash). */
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 64, \"block_kv\": 8, \"q_blocks\": 1, \"chunk_kv\": 64, "
         "\"vw\": 16, \"wg\": 1, \"pv_rows\": 64, \"pv_vecs\": 16}}}",
         "attention.fused: pv_rows*pv_vecs*vw = 16384 accumulators per work-item, more than the schema's bound of 512"},
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 64, \"block_kv\": 8, \"q_blocks\": 1, \"chunk_kv\": 1024, "
         "\"vw\": 16, \"wg\": 1, \"pv_rows\": 4, \"pv_vecs\": 1}}}",
         "attention.fused: block_q*chunk_kv = 65536 scores a work-item keeps, more than the schema's bound of 32768"},
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 16, \"block_kv\": 8, \"q_blocks\": 1, \"chunk_kv\": 2048, "
         "\"vw\": 16, \"wg\": 1, \"pv_rows\": 4, \"pv_vecs\": 1}}}",
         "attention.fused: chunk_kv = 2048 keys a work-item keeps, more than the schema's bound of 1024"},
        {"{\"kernels\": {\"attention.fused\": {\"block_q\": 32, \"block_kv\": 8, \"q_blocks\": 1, \"chunk_kv\": 1024, "
         "\"vw\": 8, \"wg\": 32, \"pv_rows\": 1, \"pv_vecs\": 8}}}",
         "attention.fused: wg*(q_blocks*block_q*128+(block_q+128)*chunk_kv) = 5373952 private floats per work-group, "
         "more than the schema's bound of 524288"},
        /* The GPUs' decoding kernel: 128 outputs a work-item at 8 rows of
           head dimension 256 compiled for 107 s on POCL. */
        {"{\"kernels\": {\"attention.decode_wg\": {\"wg\": 16, \"block_kv\": 2}}}",
         "attention.decode_wg: 8*256/wg = 128 output values per work-item, more than the schema's bound of 64"},
        {"{\"kernels\": {\"attention.decode_wg\": {\"wg\": 64, \"block_kv\": 128}}}",
         "attention.decode_wg: (8*256/wg)*block_kv = 4096 multiply-adds unrolled per tile, more than the schema's "
         "bound of 2048"},
    };
    /* "At once": within 5 s beyond twice what opening a context takes just
       before (on an H200 through NVIDIA's OpenCL, with 15 other test
       programs on the GPU, opening one took seconds). */
    for (size_t i = 0; i < sizeof absurd / sizeof *absurd; i++) {
        double t0 = now_ms();
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
        kiln_context_destroy(ctx);
        const double open_ms = now_ms() - t0;
        t0 = now_ms();
        expect_overlay(absurd[i].overlay, absurd[i].cause);
        const double ms = now_ms() - t0;
        printf("# refused in %.1f ms (a context opened in %.1f ms): %s\n", ms, open_ms, absurd[i].cause);
        assert_true(ms < 5000 + 2 * open_ms);
    }
}

/* The largest sets within the bounds are accepted (each bound is a bound,
   not a ban), and a profile file past a bound is skipped with a warning
   that names the bound. */
static void test_compile_cost_bounds_edges(void **state)
{
    (void)state;
    static const char *const within[] = {
        ("{\"kernels\": {\"gemm.tiled\": {\"mwg\": 32, \"nwg\": 16, \"kwg\": 8, \"mdimc\": 1, \"ndimc\": 1, "
         "\"mdima\": 1, \"ndimb\": 1, \"kwi\": 8, \"vwm\": 1, \"vwn\": 1, \"sa\": false, \"sb\": false}}}"),
        "{\"kernels\": {\"gemm.cpu\": {\"mr\": 32, \"nr\": 16, \"vw\": 1, \"narrow_mr\": 32}}}",
        "{\"kernels\": {\"gemm.smallm\": {\"mr\": 8, \"nc\": 4, \"vw\": 16}}}",
        "{\"kernels\": {\"attention.fused\": {\"block_q\": 32, \"block_kv\": 16, \"q_blocks\": 16, \"vw\": 16, "
        "\"wg\": 8, \"pv_rows\": 0}}}",
        "{\"kernels\": {\"attention.fused\": {\"block_q\": 32, \"block_kv\": 16, \"q_blocks\": 1, \"chunk_kv\": 1024, "
        "\"vw\": 16, \"wg\": 1, \"pv_rows\": 4, \"pv_vecs\": 8}}}",
        "{\"kernels\": {\"attention.decode_wg\": {\"wg\": 32, \"block_kv\": 32}}}",
        "{\"kernels\": {\"attention.decode_wg\": {\"wg\": 0, \"block_kv\": 128}}}",
    };
    for (size_t i = 0; i < sizeof within / sizeof *within; i++) {
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.profile_overlay = within[i];
        expect_create(&opt, KILN_SUCCESS, NULL);
    }

    char *dir = kt_temp_dir(), path[1024];
    snprintf(path, sizeof path, "%s/absurd-cpu.json", dir);
    kt_write_file(path, "{\"name\": \"absurd-cpu\", \"parent\": \"generic-cpu\", \"match\": {\"name\": [\"none\"]},"
                        " \"kernels\": {\"gemm.cpu\": {\"mr\": 64, \"nr\": 64}}}");
    setenv("KILN_PROFILE_DIR", dir, 1);
    struct kt_capture cap;
    kt_capture_begin(&cap, dir);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile = "absurd-cpu";
    expect_create(&opt, KILN_ERROR_NOT_FOUND,
                  causes2("is invalid: gemm.cpu: mr*nr = 4096 accumulators per work-item, more than the schema's "
                          "bound of 512",
                          NULL));
    assert_int_equal(kt_capture_end(&cap), 1);
    restore_env();
    kt_remove_tree(dir);
    free(dir);
}

/* A device's limit names the parameters, the value and the device. */
static void test_device_bound_named(void **state)
{
    (void)state;
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    /* Within the schema's bounds (a 256x256 work-group tile), one value per
       work-item. */
    opt.profile_overlay = "{\"kernels\": {\"gemm.tiled\": {\"mwg\": 256, \"nwg\": 256, \"kwg\": 256, "
                          "\"mdimc\": 256, \"ndimc\": 256, \"mdima\": 256, \"ndimb\": 256, \"kwi\": 1, "
                          "\"vwm\": 1, \"vwn\": 1, \"sa\": false, \"sb\": false}}}";
    expect_create(&opt, KILN_ERROR_INVALID_PROFILE,
                  causes2("gemm.tiled: mdimc*ndimc = 65536 work-items per work-group, more than the device's limit "
                          "of",
                          NULL));
}

/* On a CPU device the local-tile kernels' work-groups stay within 1024
   work-items and 2^18 floats of their values (params.h): 4096 work-items of
   gemm.direct crashed POCL's thread running the work-group (a 9.2 MiB stack
   frame at kwi 4) or wrote past its stack's guard page; both limits are
   named. Within them, a set is accepted. Elsewhere the device's own limits
   apply (test_device_bound_named). */
static void test_cpu_group_bound(void **state)
{
    (void)state;
    if (kt_ctx->desc.type != KILN_DEVICE_CPU) {
        printf("# skipped: not a CPU device\n");
        skip();
    }
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile_overlay = "{\"kernels\": {\"gemm.direct\": {\"wg\": 256, \"mdimc\": 128, \"ndimc\": 32, \"vwm\": 1, "
                          "\"vwn\": 1, \"kwi\": 4}}}";
    expect_create(&opt, KILN_ERROR_INVALID_PROFILE,
                  causes2("gemm.direct: mdimc*ndimc = 4096 work-items per work-group, more than the 1024 kiln allows "
                          "on a CPU device",
                          NULL));
    opt.profile_overlay = "{\"kernels\": {\"gemm.direct\": {\"wg\": 256, \"mdimc\": 64, \"ndimc\": 16, \"vwm\": 1, "
                          "\"vwn\": 1, \"kwi\": 16}}}";
    expect_create(&opt, KILN_ERROR_INVALID_PROFILE,
                  causes2("gemm.direct: mdimc*ndimc*(mwi*nwi+kwi*(mwi+nwi)) = 393216 floats per work-group (mwi = "
                          "wg/mdimc, nwi = wg/ndimc: mwi 4, nwi 16, kwi 16), more than the 262144 kiln allows on a CPU "
                          "device",
                          NULL));
    opt.profile_overlay = "{\"kernels\": {\"gemm.tiled\": {\"mwg\": 256, \"nwg\": 256, \"kwg\": 128, \"mdimc\": 128, "
                          "\"ndimc\": 32, \"mdima\": 128, \"ndimb\": 32, \"kwi\": 4, \"vwm\": 1, \"vwn\": 1, "
                          "\"sa\": true, \"sb\": true}}}";
    expect_create(&opt, KILN_ERROR_INVALID_PROFILE,
                  causes2("gemm.tiled: mdimc*ndimc = 4096 work-items per work-group, more than the 1024", NULL));
    /* Within: 1024 x (16 + 16 x 8) = 147456 floats (a 2.8 MiB frame). */
    opt.profile_overlay = "{\"kernels\": {\"gemm.direct\": {\"wg\": 128, \"mdimc\": 32, \"ndimc\": 32, \"vwm\": 1, "
                          "\"vwn\": 1, \"kwi\": 16}}}";
    expect_create(&opt, KILN_SUCCESS, NULL);
    /* The tiled family without a staged tile has no barrier: not bounded. */
    opt.profile_overlay = "{\"kernels\": {\"gemm.tiled\": {\"mwg\": 256, \"nwg\": 256, \"kwg\": 128, \"mdimc\": 128, "
                          "\"ndimc\": 32, \"mdima\": 128, \"ndimb\": 32, \"kwi\": 32, \"vwm\": 1, \"vwn\": 1, "
                          "\"sa\": false, \"sb\": false}}}";
    expect_create(&opt, KILN_SUCCESS, NULL);
}

/* Within those bounds a CPU work-group's frame can still pass the 8 MiB a
   thread's stack had by default: 1024 work-items of gemm.direct with 4 x 16
   accumulators, K steps unrolled 8 times and vectors of 4 take 9.7 MiB
   (POCL 3.1), and crashed the process until kiln listed POCL's devices, which
   starts its workers, with a larger default stack for new threads
   (src/opencl/cl_backend.c). The product is checked against a
   double-precision one. */
static void test_cpu_large_work_group_runs(void **state)
{
    (void)state;
    if (kt_ctx->desc.type != KILN_DEVICE_CPU) {
        printf("# skipped: not a CPU device\n");
        skip();
    }
    /* The set's staged tiles, 4 * wg * (2 * wg + vwm + vwn) bytes (the
       profile check's count), need more local memory than some CPU
       devices have (POCL gives a Zen 3 core's 512 KiB of L2). */
    const uint64_t local = 4 * 256 * (2 * 256 + 4 + 4);
    if (kt_ctx->desc.local_mem_bytes < local) {
        printf("# skipped: the set needs %llu bytes of local memory, the device has %llu\n", (unsigned long long)local,
               (unsigned long long)kt_ctx->desc.local_mem_bytes);
        skip();
    }
    kiln_context *ctx =
        kt_overlay_context("{\"kernels\": {\"gemm.direct\": {\"wg\": 256, \"mdimc\": 64, \"ndimc\": 16, "
                           "\"vwm\": 4, \"vwn\": 4, \"kwi\": 8, \"classes\": []}}}");
    enum { M = 53, N = 19, K = 131 };
    static float a[M * K], b[K * N], c[M * N];
    uint64_t rng = kt_seed();
    kt_fill_uniform(a, M * K, -1, 1, &rng);
    kt_fill_uniform(b, K * N, -1, 1, &rng);
    kiln_buffer *da, *db;
    kt_assert_status(kiln_buffer_create(ctx, sizeof a, &da), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof b, &db), KILN_SUCCESS);
    kiln_buffer *dc = kt_poisoned_buffer(ctx, sizeof c);
    kt_assert_status(kiln_buffer_write(da, 0, sizeof a, a), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(db, 0, sizeof b, b), KILN_SUCCESS);
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, M, N, K);
    d.algo = KILN_GEMM_DIRECT;
    kt_assert_status(kiln_gemm(ctx, &d, 1.0f, da, 0, db, 0, 0.0f, dc, 0, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(dc, 0, sizeof c, c), KILN_SUCCESS);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0, mag = 0;
            for (int k = 0; k < K; k++)
                want += (double)a[i * K + k] * b[k * N + j], mag += fabs((double)a[i * K + k] * b[k * N + j]);
            if (!(fabs(c[i * N + j] - want) <= 1e-5 * mag + 1e-30))
                fail_msg("C(%d,%d) = %g, wanted %g", i, j, c[i * N + j], want);
        }
    kiln_buffer_destroy(da);
    kiln_buffer_destroy(db);
    kiln_buffer_destroy(dc);
    kiln_context_destroy(ctx);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, WATCHED(test_log_not_a_level));
    kt_add(&tests, WATCHED(test_log_levels));
    kt_add(&tests, WATCHED(test_device_env_values));
    kt_add(&tests, WATCHED(test_backend_info));
    kt_add(&tests, WATCHED(test_device_option_values));
    kt_add(&tests, WATCHED(test_profile_env_values));
    kt_add(&tests, WATCHED(test_profile_option_values));
    kt_add(&tests, WATCHED(test_cache_programs_not_a_switch));
    kt_add(&tests, WATCHED(test_find_not_a_switch));
    kt_add(&tests, WATCHED(test_split_kv_not_a_number));
    kt_add(&tests, WATCHED(test_wait_poll_values));
    kt_add(&tests, WATCHED(test_pocl_batch_values));
    kt_add(&tests, WATCHED(test_large_pages_values));
    kt_add(&tests, WATCHED(test_cache_options_values));
    kt_add(&tests, WATCHED(test_overlay_text));
    kt_add(&tests, WATCHED(test_every_key_bad_values));
    kt_add(&tests, WATCHED(test_compile_cost_bounds));
    kt_add(&tests, WATCHED(test_compile_cost_bounds_edges));
    kt_add(&tests, WATCHED(test_cpu_group_bound));
    kt_add(&tests, WATCHED(test_cpu_large_work_group_runs));
    kt_add(&tests, WATCHED(test_device_bound_named));
    return kt_run_with("inputs_values", &tests, save_env, free_env);
}
