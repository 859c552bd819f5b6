#include "test_util.h"

#include "kiln/kiln_cl.h"
#include "profiles/profile.h"

#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t kt_seed(void)
{
    const char *env = getenv("KILN_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    if (seed == 0)
        seed = 1;
    printf("# KILN_TEST_SEED=%llu\n", (unsigned long long)seed);
    return seed;
}

void kt_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t s = *state;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *state = s;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

char *kt_temp_dir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/kiln-test-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    return strdup(dir);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void kt_remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

void kt_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

void kt_assert_status_(kiln_status got, kiln_status expected, const char *file, int line)
{
    if (got != expected) {
        print_error("%s:%d: status %d (%s) where %d (%s) was expected; detail: %s\n", file, line, got,
                    kiln_status_string(got), expected, kiln_status_string(expected), kiln_last_error_detail());
        _fail(file, line);
    }
    if (expected != KILN_SUCCESS && kiln_last_error_detail()[0] == '\0') {
        print_error("%s:%d: status %s without a detail message\n", file, line, kiln_status_string(got));
        _fail(file, line);
    }
}

size_t kt_elem_size(kiln_dtype t) { return t == KILN_F16 ? 2 : 4; }

/* fp32 -> fp16, round to nearest even, NaN and overflow kept. */
uint16_t kt_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, shift, h;
    if (e >= 113) { /* normal half: drop 13 mantissa bits */
        shift = 13;
        h = ((e - 112) << 10) | ((a & 0x7fffffu) >> 13);
    } else { /* subnormal half: units of 2^-24 */
        shift = 126 - e;
        if (shift > 24)
            return (uint16_t)sign;
        h = mant >> shift;
    }
    uint32_t rem = (shift == 13 ? a : mant) & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
        h++; /* a carry into the exponent is the correct rounding */
    return (uint16_t)(sign | h);
}

float kt_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (e == 0) {
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    x = sign | (e == 31 ? 0x7f800000u | (mant << 13) : ((e + 112) << 23) | (mant << 13));
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

float kt_stored(const unsigned char *raw, size_t elem_size, size_t i)
{
    if (elem_size == 2) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, sizeof h);
        return kt_from_half(h);
    }
    float f;
    memcpy(&f, raw + 4 * i, sizeof f);
    return f;
}

kiln_buffer *kt_poisoned_buffer(kiln_context *ctx, size_t bytes)
{
    unsigned char *poison = malloc(bytes);
    assert_non_null(poison);
    memset(poison, 0xff, bytes);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(ctx, bytes, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(buf, 0, bytes, poison), KILN_SUCCESS);
    free(poison);
    return buf;
}

void kt_assert_still_poisoned(const kiln_buffer *buf)
{
    size_t n = kiln_buffer_size(buf);
    unsigned char *back = malloc(n);
    assert_non_null(back);
    kt_assert_status(kiln_buffer_read(buf, 0, n, back), KILN_SUCCESS);
    for (size_t i = 0; i < n; i++)
        if (back[i] != 0xff)
            fail_msg("byte %zu of %zu of a buffer was written (0x%02x)", i, n, back[i]);
    free(back);
}

kiln_context *kt_ctx;
uint64_t kt_group_seed;

int kt_group_setup(void **state)
{
    (void)state;
    kt_group_seed = kt_seed();
    return kiln_context_create(NULL, &kt_ctx) == KILN_SUCCESS ? 0 : -1;
}

int kt_group_teardown(void **state)
{
    (void)state;
    kiln_context_destroy(kt_ctx);
    return 0;
}

kiln_context *kt_profile_context(const char *name)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile = name;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(ctx, &dev), KILN_SUCCESS);
    assert_string_equal(dev.profile, name);
    return ctx;
}

void kt_wait_and_release(kiln_event *ev)
{
    assert_true(ev != NULL && ev != KT_POISON_EVENT);
    cl_event cl = kiln_event_get_cl(ev);
    assert_non_null(cl);
    kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
    cl_int status = CL_QUEUED;
    assert_int_equal(clGetEventInfo(cl, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL), CL_SUCCESS);
    assert_int_equal(status, CL_COMPLETE);
    kiln_event_destroy(ev);
}

size_t kt_add_named(struct CMUnitTest *tests, char *names, size_t name_size, size_t t, const char *prefix,
                    CMUnitTestFunction fn, const void *items, size_t count, size_t size)
{
    for (size_t i = 0; i < count; i++, t++) {
        const void *item = (const char *)items + i * size;
        char *name = names + t * name_size;
        snprintf(name, name_size, "%s%s", prefix, *(const char *const *)item);
        tests[t] = (struct CMUnitTest){name, fn, NULL, NULL, (void *)item};
    }
    return t;
}

int kt_run_per_profile(const char *group, CMUnitTestFunction test, CMFixtureFunction teardown,
                       const struct CMUnitTest *first, size_t first_count)
{
    struct kiln_profile_set *set = NULL;
    if (kiln_profile_set_load(NULL, &set) != KILN_SUCCESS) {
        fprintf(stderr, "cannot load the embedded profiles: %s\n", kiln_last_error_detail());
        return 1;
    }
    const size_t count = kiln_profile_set_count(set);
    struct CMUnitTest *tests = calloc(first_count + count, sizeof *tests);
    char(*names)[96] = calloc(count, sizeof *names);
    if (!tests || !names)
        return 1;
    size_t n = 0;
    for (; n < first_count; n++)
        tests[n] = first[n];
    for (size_t i = 0; i < count; i++) {
        const struct kiln_profile *p = kiln_profile_set_at(set, i);
        if (kiln_profile_is_abstract(p))
            continue;
        snprintf(names[i], sizeof names[i], "profile %s", kiln_profile_name(p));
        tests[n++] = (struct CMUnitTest){names[i], test, NULL, teardown, (void *)kiln_profile_name(p)};
    }
    int failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
    free(tests);
    free(names);
    kiln_profile_set_free(set);
    return failed;
}
