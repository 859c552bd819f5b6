/* Status codes and the per-thread error detail. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"

static void test_status_strings_are_distinct(void **state)
{
    (void)state;
    assert_int_equal(KILN_SUCCESS, 0);
    for (int a = 0; a < KILN_STATUS_COUNT_; a++) {
        const char *sa = kiln_status_string((kiln_status)a);
        assert_non_null(sa);
        assert_true(strlen(sa) > 0);
        assert_string_not_equal(sa, "unknown status");
        for (int b = a + 1; b < KILN_STATUS_COUNT_; b++)
            assert_string_not_equal(sa, kiln_status_string((kiln_status)b));
    }
    assert_string_equal(kiln_status_string(KILN_STATUS_COUNT_), "unknown status");
    assert_string_equal(kiln_status_string((kiln_status)-1), "unknown status");
}

/* The device types' names are the ones KILN_DEVICE takes; anything else is
   "other", never NULL. */
static void test_device_type_strings(void **state)
{
    (void)state;
    assert_string_equal(kiln_device_type_string(KILN_DEVICE_CPU), "cpu");
    assert_string_equal(kiln_device_type_string(KILN_DEVICE_GPU), "gpu");
    assert_string_equal(kiln_device_type_string(KILN_DEVICE_ACCELERATOR), "accelerator");
    assert_string_equal(kiln_device_type_string(KILN_DEVICE_OTHER), "other");
    assert_string_equal(kiln_device_type_string((kiln_device_type)0), "other");
    assert_string_equal(kiln_device_type_string((kiln_device_type)99), "other");
}

static void test_version_string(void **state)
{
    (void)state;
    char expect[32];
    snprintf(expect, sizeof expect, "%d.%d.%d", KILN_VERSION_MAJOR, KILN_VERSION_MINOR, KILN_VERSION_PATCH);
    assert_string_equal(kiln_version_string(), expect);
}

static void test_detail_names_the_argument_and_clears_on_success(void **state)
{
    (void)state;
    size_t count = 0;
    kt_assert_status(kiln_device_count(NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error_detail(), "count"));
    kt_assert_status(kiln_device_count(&count), KILN_SUCCESS);
    assert_string_equal(kiln_last_error_detail(), "");
}

static void *fail_in_thread(void *arg)
{
    (void)arg;
    kiln_device_count(NULL);
    return strstr(kiln_last_error_detail(), "count") ? (void *)1 : NULL;
}

static void test_detail_is_per_thread(void **state)
{
    (void)state;
    size_t count;
    assert_int_equal(kiln_device_count(&count), KILN_SUCCESS);
    pthread_t t;
    void *seen = NULL;
    assert_int_equal(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &seen), 0);
    assert_non_null(seen);                             /* the thread saw its own failure */
    assert_string_equal(kiln_last_error_detail(), ""); /* and it did not leak here */
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_status_strings_are_distinct));
    kt_add(&tests, cmocka_unit_test(test_device_type_strings));
    kt_add(&tests, cmocka_unit_test(test_version_string));
    kt_add(&tests, cmocka_unit_test(test_detail_names_the_argument_and_clears_on_success));
    kt_add(&tests, cmocka_unit_test(test_detail_is_per_thread));
    return kt_run_with("status", &tests, NULL, NULL);
}
