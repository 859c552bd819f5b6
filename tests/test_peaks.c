/* The measured peaks (src/tune/peaks.c): both figures positive and finite,
   the multiply-add kernel's result and the read's sums right (kiln_measure_peaks
   checks both: they would expose a kernel the compiler reduced to nothing),
   and NULL arguments refused. Their size is a
   property of the device, not checked here; kiln-bench peak shows them. */
#include <math.h>
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
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    return kt_run("peaks", &tests);
}
