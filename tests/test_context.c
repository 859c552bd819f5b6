/* Device enumeration, context creation, selection by options and
   environment, forced profiles, and two contexts / many threads at once. */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define POISON_CTX ((kiln_context *)(uintptr_t)0x5a5a)

static kiln_context *create_with(const char *device, const char *profile)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.device = device;
    opt.profile = profile;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    assert_non_null(ctx);
    return ctx;
}

/* Expect `status` from creating a context and nothing written to out. */
static void expect_create_fails(const char *device, const char *profile, kiln_status status)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.device = device;
    opt.profile = profile;
    kiln_context *ctx = POISON_CTX;
    kt_assert_status(kiln_context_create(&opt, &ctx), status);
    assert_ptr_equal(ctx, POISON_CTX);
}

static int have_gpu(void)
{
    size_t n = 0;
    assert_int_equal(kiln_device_count(&n), KILN_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        kiln_device_info info;
        assert_int_equal(kiln_device_get_info(i, &info), KILN_SUCCESS);
        if (info.type == KILN_DEVICE_GPU)
            return 1;
    }
    return 0;
}

/* Runs first, before any OpenCL call of this process: kiln's first one asks
   POCL to pin its CPU workers (POCL_AFFINITY=1) unless the user chose. */
static void test_pocl_workers_pinned_unless_the_user_chose(void **state)
{
    (void)state;
    const char *before = getenv("POCL_AFFINITY");
    char chosen[32] = "";
    if (before)
        snprintf(chosen, sizeof chosen, "%s", before);
    size_t n = 0;
    kt_assert_status(kiln_device_count(&n), KILN_SUCCESS);
    const char *after = getenv("POCL_AFFINITY");
    assert_non_null(after);
    assert_string_equal(after, before ? chosen : "1");
}

static void test_devices_are_listed_with_profiles(void **state)
{
    (void)state;
    size_t n = 0;
    kt_assert_status(kiln_device_count(&n), KILN_SUCCESS);
    assert_true(n >= 1); /* the POCL CPU device at least */
    for (size_t i = 0; i < n; i++) {
        kiln_device_info info;
        memset(&info, 0xff, sizeof info);
        kt_assert_status(kiln_device_get_info(i, &info), KILN_SUCCESS);
        assert_int_equal(info.index, i);
        assert_string_equal(info.backend, "opencl");
        assert_true(strlen(info.name) > 0 && strlen(info.platform) > 0);
        assert_true(info.compute_units >= 1 && info.global_mem_bytes > 0 && info.max_work_group_size >= 1);
        assert_true(strlen(info.profile) > 0 && strlen(info.profile_reason) > 0);
        assert_true(info.peak_gflops > 0.0 && info.peak_gbps > 0.0);
        assert_string_equal(info.peak_source, "profile");
    }
    kiln_device_info info;
    kt_assert_status(kiln_device_get_info(n, &info), KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_device_get_info(0, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_default_context_is_the_best_device(void **state)
{
    (void)state;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    if (have_gpu())
        assert_int_equal(info.type, KILN_DEVICE_GPU);
    else
        assert_int_equal(info.type, KILN_DEVICE_CPU);
    kiln_device_info listed;
    kt_assert_status(kiln_device_get_info(info.index, &listed), KILN_SUCCESS);
    assert_string_equal(listed.name, info.name);
    assert_string_equal(listed.profile, info.profile);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    kiln_context_destroy(NULL);
}

static void test_selectors(void **state)
{
    (void)state;
    kiln_device_info first, info;
    kt_assert_status(kiln_device_get_info(0, &first), KILN_SUCCESS);

    kiln_context *ctx = create_with("0", NULL);
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_int_equal(info.index, 0);
    kiln_context_destroy(ctx);

    /* A case-changed substring of the device name selects it. */
    char sub[8] = {0};
    for (int i = 0; i < 6 && first.name[i + 1]; i++)
        sub[i] = (char)toupper((unsigned char)first.name[i + 1]);
    ctx = create_with(sub, NULL);
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_non_null(strcasestr(info.name, sub));
    kiln_context_destroy(ctx);

    if (first.type == KILN_DEVICE_CPU) {
        ctx = create_with("CPU", NULL);
        kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
        assert_int_equal(info.type, KILN_DEVICE_CPU);
        kiln_context_destroy(ctx);
    }
    if (!have_gpu())
        expect_create_fails("gpu", NULL, KILN_ERROR_NOT_FOUND);
}

static void test_bad_selectors(void **state)
{
    (void)state;
    expect_create_fails("999", NULL, KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(kiln_last_error_detail(), "[0]")); /* lists what exists */
    expect_create_fails("12abc", NULL, KILN_ERROR_INVALID_ARGUMENT);
    expect_create_fails("", NULL, KILN_ERROR_INVALID_ARGUMENT);
    expect_create_fails("no-such-device-anywhere", NULL, KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_context_create(NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_environment_selects_device_and_options_win(void **state)
{
    (void)state;
    setenv("KILN_DEVICE", "no-such-device-anywhere", 1);
    kiln_context *ctx = POISON_CTX;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_ERROR_NOT_FOUND);
    assert_ptr_equal(ctx, POISON_CTX);
    ctx = create_with("0", NULL); /* the option overrides the environment */
    kiln_context_destroy(ctx);
    setenv("KILN_DEVICE", "0", 1);
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    setenv("KILN_DEVICE", "", 1); /* empty is unset */
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    unsetenv("KILN_DEVICE");
}

static void test_forced_profile(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_device_get_info(0, &dev), KILN_SUCCESS);
    const char *other = dev.type == KILN_DEVICE_CPU ? "generic-gpu" : "generic-cpu";

    kiln_context *ctx = create_with("0", other);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.profile, other);
    assert_non_null(strstr(info.profile_reason, "forced"));
    kiln_context_destroy(ctx);

    setenv("KILN_PROFILE", other, 1);
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.profile, other);
    kiln_context_destroy(ctx);
    unsetenv("KILN_PROFILE");

    expect_create_fails("0", "no-such-profile", KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(kiln_last_error_detail(), "no-such-profile"));
}

/* Each context fills its own buffer with its own value. */
static void test_two_contexts_in_one_process(void **state)
{
    (void)state;
    kiln_context *a = create_with("0", NULL), *b = create_with("0", NULL);
    kiln_buffer *ba, *bb;
    kt_assert_status(kiln_buffer_create(a, 4096, &ba), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(b, 4096, &bb), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(ba, 0, 1024, 1.5f), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(bb, 0, 1024, -2.5f), KILN_SUCCESS);
    float ha[1024], hb[1024];
    kt_assert_status(kiln_buffer_read(ba, 0, sizeof ha, ha), KILN_SUCCESS);
    kiln_buffer_destroy(ba);
    kiln_context_destroy(a); /* b must not depend on a */
    kt_assert_status(kiln_buffer_read(bb, 0, sizeof hb, hb), KILN_SUCCESS);
    for (int i = 0; i < 1024; i++) {
        assert_true(ha[i] == 1.5f);
        assert_true(hb[i] == -2.5f);
    }
    kiln_buffer_destroy(bb);
    kiln_context_destroy(b);
}

struct worker {
    kiln_context *ctx;
    float value;
    int ok;
};

static void *fill_and_check(void *arg)
{
    struct worker *w = arg;
    enum { N = 5000 };
    static _Thread_local float host[N];
    kiln_buffer *buf = NULL;
    w->ok = kiln_buffer_create(w->ctx, N * sizeof(float), &buf) == KILN_SUCCESS;
    for (int rep = 0; rep < 20 && w->ok; rep++) {
        float v = w->value + (float)rep;
        w->ok = kiln_buffer_fill_f32(buf, 0, N, v) == KILN_SUCCESS &&
                kiln_buffer_read(buf, 0, sizeof host, host) == KILN_SUCCESS;
        for (int i = 0; i < N && w->ok; i++)
            w->ok = host[i] == v;
    }
    kiln_buffer_destroy(buf);
    return NULL;
}

static void test_one_context_many_threads(void **state)
{
    (void)state;
    kiln_context *ctx = create_with("0", NULL);
    enum { T = 4 };
    pthread_t threads[T];
    struct worker workers[T];
    for (int t = 0; t < T; t++) {
        workers[t] = (struct worker){ctx, 100.0f * (float)(t + 1), 0};
        assert_int_equal(pthread_create(&threads[t], NULL, fill_and_check, &workers[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        assert_int_equal(pthread_join(threads[t], NULL), 0);
        assert_true(workers[t].ok);
    }
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_cache_info(ctx, &cache), KILN_SUCCESS);
    assert_int_equal(cache.builds + cache.disk_hits, 1); /* one program, made once */
    kiln_context_destroy(ctx);
}

static void test_null_context_arguments(void **state)
{
    (void)state;
    kiln_device_info info;
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_device_info(NULL, &info), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_get_cache_info(NULL, &cache), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_finish(NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_context *ctx = create_with(NULL, NULL);
    kt_assert_status(kiln_context_get_device_info(ctx, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_get_cache_info(ctx, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_context_destroy(ctx);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_pocl_workers_pinned_unless_the_user_chose));
    kt_add(&tests, cmocka_unit_test(test_devices_are_listed_with_profiles));
    kt_add(&tests, cmocka_unit_test(test_default_context_is_the_best_device));
    kt_add(&tests, cmocka_unit_test(test_selectors));
    kt_add(&tests, cmocka_unit_test(test_bad_selectors));
    kt_add(&tests, cmocka_unit_test(test_environment_selects_device_and_options_win));
    kt_add(&tests, cmocka_unit_test(test_forced_profile));
    kt_add(&tests, cmocka_unit_test(test_two_contexts_in_one_process));
    kt_add(&tests, cmocka_unit_test(test_one_context_many_threads));
    kt_add(&tests, cmocka_unit_test(test_null_context_arguments));
    return kt_run_with("context", &tests, NULL, NULL);
}
