/* Buffers: round trips, offsets, bounds, fill, large pages, and failures
   that write nothing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kiln/kiln_cl.h"
#include "test_util.h"

#define POISON_BUF ((kiln_buffer *)(uintptr_t)0x5a5a)

static int setup(void **state)
{
    kiln_context *ctx = NULL;
    if (kiln_context_create(NULL, &ctx) != KILN_SUCCESS)
        return -1;
    *state = ctx;
    return 0;
}

static int teardown(void **state)
{
    kiln_context_destroy(*state);
    return 0;
}

static kiln_buffer *make(kiln_context *ctx, size_t size)
{
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(ctx, size, &buf), KILN_SUCCESS);
    assert_int_equal(kiln_buffer_size(buf), size);
    return buf;
}

static void test_round_trip_at_offsets(void **state)
{
    uint64_t seed = kt_seed();
    enum { N = 4099 };
    float *src = malloc(N * sizeof *src), *dst = malloc(N * sizeof *dst), *all = malloc(N * sizeof *all);
    kt_fill_uniform(src, N, -1.0f, 1.0f, &seed);
    kiln_buffer *buf = make(*state, N * sizeof(float));
    kt_assert_status(kiln_buffer_write(buf, 0, N * sizeof(float), src), KILN_SUCCESS);
    /* Overwrite an odd interior range, then check every element. */
    kt_fill_uniform(dst, 777, 5.0f, 6.0f, &seed);
    kt_assert_status(kiln_buffer_write(buf, 1001 * sizeof(float), 777 * sizeof(float), dst), KILN_SUCCESS);
    memcpy(src + 1001, dst, 777 * sizeof(float));
    kt_assert_status(kiln_buffer_read(buf, 0, N * sizeof(float), all), KILN_SUCCESS);
    assert_memory_equal(all, src, N * sizeof(float));
    /* A read at an unaligned byte offset. */
    unsigned char bytes[13];
    kt_assert_status(kiln_buffer_read(buf, 4 * 500 + 3, sizeof bytes, bytes), KILN_SUCCESS);
    assert_memory_equal(bytes, (unsigned char *)src + 4 * 500 + 3, sizeof bytes);
    /* Zero-length transfers at the end are legal no-ops. */
    kt_assert_status(kiln_buffer_write(buf, N * sizeof(float), 0, src), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(buf, N * sizeof(float), 0, dst), KILN_SUCCESS);
    kiln_buffer_destroy(buf);
    free(src), free(dst), free(all);
}

static void test_out_of_bounds_writes_nothing(void **state)
{
    enum { N = 256 };
    float poison[N], data[N], back[N];
    for (int i = 0; i < N; i++)
        poison[i] = NAN, data[i] = (float)i + 0.5f;
    kiln_buffer *buf = make(*state, sizeof poison);
    kt_assert_status(kiln_buffer_write(buf, 0, sizeof poison, poison), KILN_SUCCESS);

    const size_t size = sizeof poison;
    kt_assert_status(kiln_buffer_write(buf, 4, size, data), KILN_ERROR_OUT_OF_BOUNDS);
    assert_non_null(strstr(kiln_last_error_detail(), "exceeds"));
    kt_assert_status(kiln_buffer_write(buf, size + 1, 0, data), KILN_ERROR_OUT_OF_BOUNDS);
    kt_assert_status(kiln_buffer_write(buf, SIZE_MAX, 8, data), KILN_ERROR_OUT_OF_BOUNDS);
    kt_assert_status(kiln_buffer_write(buf, 8, SIZE_MAX, data), KILN_ERROR_OUT_OF_BOUNDS);
    kt_assert_status(kiln_buffer_fill_f32(buf, 1, N, 1.0f), KILN_ERROR_OUT_OF_BOUNDS);
    kt_assert_status(kiln_buffer_fill_f32(buf, SIZE_MAX / 2, 2, 1.0f), KILN_ERROR_OUT_OF_BOUNDS);

    kt_assert_status(kiln_buffer_read(buf, 0, size, back), KILN_SUCCESS);
    assert_memory_equal(back, poison, size); /* nothing was written */

    memcpy(back, data, size);
    kt_assert_status(kiln_buffer_read(buf, 8, size, back), KILN_ERROR_OUT_OF_BOUNDS);
    kt_assert_status(kiln_buffer_read(buf, SIZE_MAX - 2, 4, back), KILN_ERROR_OUT_OF_BOUNDS);
    assert_memory_equal(back, data, size); /* the destination is untouched */
    kiln_buffer_destroy(buf);
}

static void test_fill_writes_exactly_its_range(void **state)
{
    uint64_t seed = kt_seed();
    /* Counts that are not multiples of any work-group size, and one element. */
    static const size_t cases[][2] = {{0, 1}, {3, 1000}, {17, 4003}, {0, 5000}, {4999, 1}};
    enum { N = 5000 };
    float *init = malloc(N * sizeof *init), *back = malloc(N * sizeof *back);
    kiln_buffer *buf = make(*state, N * sizeof(float));
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t first = cases[c][0], count = cases[c][1];
        kt_fill_uniform(init, N, -1.0f, 1.0f, &seed);
        kt_assert_status(kiln_buffer_write(buf, 0, N * sizeof(float), init), KILN_SUCCESS);
        float value = 3.25f + (float)c;
        kt_assert_status(kiln_buffer_fill_f32(buf, first, count, value), KILN_SUCCESS);
        kt_assert_status(kiln_buffer_read(buf, 0, N * sizeof(float), back), KILN_SUCCESS);
        for (size_t i = 0; i < N; i++) {
            float want = i >= first && i < first + count ? value : init[i];
            if (back[i] != want)
                fail_msg("case %zu: element %zu is %g, expected %g", c, i, back[i], want);
        }
    }
    kt_assert_status(kiln_buffer_fill_f32(buf, N, 0, 1.0f), KILN_SUCCESS); /* empty range at the end */
    kiln_buffer_destroy(buf);
    free(init), free(back);
}

/* Kilobytes of the mapping at `at` that the kernel backs with huge pages
   (/proc/self/smaps), -1 where it cannot say. */
static long huge_kib_at(const void *at)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int inside = 0;
    long kib = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = (uintptr_t)at >= lo && (uintptr_t)at < hi;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib;
}

/* A CPU device's buffer of half a large page or more lies in host memory
   kiln maps at a large page's boundary, rounded up to whole large pages
   advised as such (src/opencl/cl_backend.c, large_page_buffer), and is
   unmapped when the buffer goes; one a float smaller is the driver's.
   Either way its contents round-trip, across a large page's boundary too. */
static void test_large_buffers_in_large_pages(void **state)
{
    kiln_context *ctx = *state;
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    const size_t big = kt_large_page_bytes(),
                 sizes[3] = {2 * big + 4099 * sizeof(float), big / 2, big / 2 - sizeof(float)};
    uint64_t seed = kt_seed();
    for (int s = 0; s < 3; s++) {
        const size_t n = sizes[s] / sizeof(float), mid = s == 0 ? big / sizeof(float) - 100 : n - 300;
        float *src = malloc(sizes[s]), *back = malloc(sizes[s]);
        kt_fill_uniform(src, n, -1.0f, 1.0f, &seed);
        kiln_buffer *buf = make(ctx, sizes[s]);
        kt_assert_status(kiln_buffer_write(buf, 0, sizes[s], src), KILN_SUCCESS);
        /* across the first large page's end, or before the buffer's */
        kt_fill_uniform(src + mid, 200, 3.0f, 4.0f, &seed);
        kt_assert_status(kiln_buffer_write(buf, mid * sizeof(float), 200 * sizeof(float), src + mid), KILN_SUCCESS);
        kt_assert_status(kiln_buffer_fill_f32(buf, n - 5, 5, 7.0f), KILN_SUCCESS);
        for (size_t i = n - 5; i < n; i++)
            src[i] = 7.0f;
        kt_assert_status(kiln_buffer_read(buf, 0, sizes[s], back), KILN_SUCCESS);
        assert_memory_equal(back, src, sizes[s]);
        cl_mem mem = kiln_buffer_get_cl(buf);
        void *host = NULL;
        if (mem)
            assert_int_equal(clGetMemObjectInfo(mem, CL_MEM_HOST_PTR, sizeof host, &host, NULL), CL_SUCCESS);
        const char *off = getenv("KILN_LARGE_PAGES");
        if (mem && info.type == KILN_DEVICE_CPU && !(off && strcmp(off, "0") == 0) && s < 2) {
            if (!host || (uintptr_t)host % big != 0)
                fail_msg("a buffer of %zu bytes on a CPU device: host memory %p, not at a %zu-byte boundary", sizes[s],
                         host, big);
            print_message("%zu bytes: the kernel backs %ld KiB in huge pages\n", sizes[s], huge_kib_at(host));
        } else if (mem && s == 2) {
            assert_null(host); /* the driver's own */
        }
        kiln_buffer_destroy(buf);
        if (host) { /* unmapped with the buffer */
            errno = 0;
            assert_int_equal(msync(host, (size_t)sysconf(_SC_PAGESIZE), MS_ASYNC), -1);
            assert_int_equal(errno, ENOMEM);
        }
        free(src), free(back);
    }
}

static void test_bad_creation(void **state)
{
    kiln_context *ctx = *state;
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    kiln_buffer *buf = POISON_BUF;
    kt_assert_status(kiln_buffer_create(ctx, 0, &buf), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_create(ctx, (size_t)info.max_alloc_bytes + 1, &buf), KILN_ERROR_OUT_OF_MEMORY);
    kt_assert_status(kiln_buffer_create(NULL, 16, &buf), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(buf, POISON_BUF);
    kt_assert_status(kiln_buffer_create(ctx, 16, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_null_arguments(void **state)
{
    float x[4] = {1, 2, 3, 4};
    kiln_buffer *buf = make(*state, sizeof x);
    kt_assert_status(kiln_buffer_write(NULL, 0, sizeof x, x), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_write(buf, 0, sizeof x, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_read(NULL, 0, sizeof x, x), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_read(buf, 0, sizeof x, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_fill_f32(NULL, 0, 1, 0.0f), KILN_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kiln_buffer_size(NULL), 0);
    kiln_buffer_destroy(NULL);
    kiln_buffer_destroy(buf);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_round_trip_at_offsets));
    kt_add(&tests, cmocka_unit_test(test_out_of_bounds_writes_nothing));
    kt_add(&tests, cmocka_unit_test(test_fill_writes_exactly_its_range));
    kt_add(&tests, cmocka_unit_test(test_large_buffers_in_large_pages));
    kt_add(&tests, cmocka_unit_test(test_bad_creation));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    return kt_run_with("buffer", &tests, setup, teardown);
}
