/* The measured peaks (src/tune/peaks.c): both figures positive and finite,
   the multiply-add kernel's result and the read's sums right (kiln_measure_peaks
   checks both: they would expose a kernel the compiler reduced to nothing),
   and NULL arguments refused. Their size is a
   property of the device, not checked here; kiln-bench peak shows them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "core/context.h"
#include "test_util.h"
#include "tune/peaks.h"

static void test_peaks_are_measured(void **state)
{
    (void)state;
    struct kiln_peaks p;
    kiln_status st = kiln_measure_peaks(kt_ctx, &p);
    kt_skip_unsupported_here(kt_ctx, st);
    kt_assert_status(st, KILN_SUCCESS);
    printf("# %.1f GFLOP/s fp32 (float%d chains), %.1f GB/s: copy %.1f, read %.1f (launches of %.2f, %.2f and %.2f "
           "ms)\n",
           p.gflops, p.fma_lanes, p.gbps, p.copy_gbps, p.read_gbps, p.fma_ms, p.copy_ms, p.read_ms);
    assert_true(isfinite(p.gflops) && p.gflops > 0.0);
    assert_true(isfinite(p.copy_gbps) && p.copy_gbps > 0.0);
    assert_true(isfinite(p.read_gbps) && p.read_gbps > 0.0);
    assert_true(p.gbps == fmax(p.copy_gbps, p.read_gbps));
    assert_true(p.fma_checksum > 0.6 * 8.0 && p.fma_checksum <= 8.0 * 1.001);
    /* Vectors of 8 or 16 floats, one lane without OpenCL's vector syntax. */
    assert_true(kt_ctx->vector_kernels ? p.fma_lanes == 8 || p.fma_lanes == 16 : p.fma_lanes == 1);
    assert_true(p.copy_bytes >= (size_t)1 << 20);
}

/* The largest buffers measure_memory may take on this device: half the
   largest allocation, an eighth of its memory. */
static uint64_t copy_bound(const kiln_context *ctx)
{
    uint64_t bound = UINT64_MAX;
    if (ctx->desc.max_alloc_bytes)
        bound = ctx->desc.max_alloc_bytes / 2;
    if (ctx->desc.global_mem_bytes && ctx->desc.global_mem_bytes / 8 < bound)
        bound = ctx->desc.global_mem_bytes / 8;
    return bound & ~(uint64_t)15;
}

/* The copy streams from memory: its buffers are twice the cache in front
   of it where that exceeds 256 MiB and the device allows it, 256 MiB
   otherwise. Run with the device's own cache (kiln_device_get_info reports
   the backend's figure), then with 300 MiB and 1 MiB in its place. */
static void test_copy_outgrows_the_cache(void **state)
{
    (void)state;
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &info), KILN_SUCCESS);
    assert_true(info.cache_bytes == kt_ctx->desc.cache_bytes);
    printf("# the device's cache: %.1f MiB\n", (double)info.cache_bytes / (1 << 20));
    const unsigned long long own = kt_ctx->desc.cache_bytes;
    const unsigned long long caches[] = {own, 300ull << 20, 1ull << 20};
    for (size_t i = 0; i < sizeof caches / sizeof *caches; i++) {
        kt_ctx->desc.cache_bytes = caches[i];
        const uint64_t want = caches[i] * 2 > (256ull << 20) ? caches[i] * 2 : 256ull << 20, bound = copy_bound(kt_ctx);
        if (i && want > bound) {
            printf("# %.0f MiB of cache: the device holds no two %.0f MiB buffers\n", (double)caches[i] / (1 << 20),
                   (double)want / (1 << 20));
            continue;
        }
        struct kiln_peaks p;
        kiln_status st = kiln_measure_peaks(kt_ctx, &p);
        kt_ctx->desc.cache_bytes = own;
        kt_skip_unsupported_here(kt_ctx, st);
        kt_assert_status(st, KILN_SUCCESS);
        printf("# %.0f MiB of cache: buffers of %.0f MiB (%.1f GB/s)\n", (double)caches[i] / (1 << 20),
               (double)p.copy_bytes / (1 << 20), p.gbps);
        assert_true(p.copy_bytes == (want < bound ? want : bound));
    }
    kt_ctx->desc.cache_bytes = own;
}

static void test_null_arguments(void **state)
{
    (void)state;
    struct kiln_peaks p;
    kt_assert_status(kiln_measure_peaks(NULL, &p), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_measure_peaks(kt_ctx, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_peaks_are_measured));
    kt_add(&tests, cmocka_unit_test(test_copy_outgrows_the_cache));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    return kt_run("peaks", &tests);
}
