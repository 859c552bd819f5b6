/*
 * Convolution plans through the public API, checked against conv_ref.h:
 * describe() for every algorithm, the profile's default algorithm under
 * AUTO, the implicit GEMM's kernel variants and their balanced tiles,
 * strided 1x1 layers under AUTO, the one-shot call with and without an
 * event, one plan executed on several sets of buffers, an algorithm entry
 * without unsupported(), constant weights, and the find mode with its
 * database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conv_cases.h"
#include "core/context.h"
#include "cpu_tile.h"
#include "ops/conv2d.h"

/* ------------------------------------------------------------------------ */
/* describe, the profile's default, one-shot, events, reuse                 */
/* ------------------------------------------------------------------------ */

static void test_describe(void **state)
{
    (void)state;
    static const kiln_conv_algo algos[] = {KILN_CONV_AUTO,   KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL,
                                           KILN_CONV_DIRECT, KILN_CONV_WINOGRAD_2X2,  KILN_CONV_WINOGRAD_4X4};
    size_t described = 0;
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], algos[i]); /* 3x3 pad 1 */
        kiln_conv2d_plan *plan = NULL;
        kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if ((st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) ||
            kt_unsupported_here(kt_ctx, st))
            continue;
        kt_assert_status(st, KILN_SUCCESS);
        cc_assert_plan_describes(plan, kt_ctx, algos[i]);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        if (algos[i] != KILN_CONV_AUTO)
            assert_string_equal(info.name, cc_algo_name(algos[i]));
        assert_non_null(strstr(info.reason, algos[i] == KILN_CONV_AUTO ? "heuristic" : "requested"));
        printf("# %s: %s %s [%s] profile %s, %s, workspace %zu bytes\n", cc_algo_name(algos[i]), info.name, info.kernel,
               info.params, info.profile, info.reason, info.workspace_bytes);
        kiln_conv2d_plan_destroy(plan);
        described++;
    }
    assert_true(described > 0);

    kiln_conv2d_plan_info info, before;
    memset(&info, 0x3c, sizeof info);
    before = info;
    kt_assert_status(kiln_conv2d_plan_describe(NULL, &info), KILN_ERROR_INVALID_ARGUMENT);
    assert_memory_equal(&info, &before, sizeof info);
    kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], KILN_CONV_AUTO);
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kt_assert_status(kiln_conv2d_plan_describe(plan, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_conv2d_plan_destroy(plan);
    kiln_conv2d_plan_destroy(NULL);
}

/* The profile's conv.algo is what AUTO falls back on where no rule of the
   heuristic applies (a 3x3 stride-2 layer with 8 channels). A profile
   directory adds a child of the matched profile whose default is im2col. */
static void test_profile_default_algo(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    char dir[] = "/tmp/kiln-conv-algo-XXXXXX", path[sizeof dir + 32];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/conv-algo-im2col.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"name\": \"conv-algo-im2col\", \"parent\": \"%s\", \"provenance\": {\"basis\": \"test_conv_plans\"},\n"
            " \"match\": {\"type\": \"cpu\", \"name\": [\"no device has this name\"]},\n"
            " \"select\": {\"conv_algo\": \"im2col\"}}\n",
            dev.profile);
    fclose(f);
    setenv("KILN_PROFILE_DIR", dir, 1);
    kiln_context_options o = {.device = "0", .profile = "conv-algo-im2col", .disable_disk_cache = 1};
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&o, &ctx);
    unsetenv("KILN_PROFILE_DIR");
    remove(path);
    rmdir(dir);
    kt_assert_status(st, KILN_SUCCESS);

    const struct cc_row stride2 = {CONV("3x3 stride2 pad1", NCHW, 1, 8, 15, 15, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
                                   .sw = 2};
    kiln_context *contexts[] = {kt_ctx, ctx};
    /* The CUDA backend (and KILN_CUDA_ROUTES) has one algorithm: no default to follow. */
    const char *routes = getenv("KILN_CUDA_ROUTES");
    const int one_algorithm = strcmp(dev.backend, "opencl") != 0 || (routes && strcmp(routes, "1") == 0);
    for (int i = 0; i < 2 && !one_algorithm; i++) {
        kiln_conv2d_desc d = cc_desc_of(&stride2, KILN_CONV_AUTO);
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(contexts[i], &d, &plan), KILN_SUCCESS);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        assert_string_equal(info.name, i ? "im2col" : "implicit-gemm");
        assert_non_null(strstr(info.reason, "conv.algo"));
        kiln_conv2d_plan_destroy(plan);
    }
    kiln_context_destroy(ctx);
}

/* The kernel of the implicit GEMM's plan for `row` (skips the test where
   this device has none; printed with its parameters), and whether it is
   the CPU kernel: not the tiled one, not another backend's. */
static int igemm_kernel(kiln_context *ctx, const struct cc_row *row, kiln_conv2d_plan_info *info)
{
    kiln_conv2d_desc d = cc_desc_of(row, KILN_CONV_IMPLICIT_GEMM);
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(ctx, &d, &plan);
    if (kt_unsupported_here(ctx, st))
        skip();
    kt_assert_status(st, KILN_SUCCESS);
    kt_assert_status(kiln_conv2d_plan_describe(plan, info), KILN_SUCCESS);
    kiln_conv2d_plan_destroy(plan);
    printf("# %s %s: %s [%s]\n", row->what, row->layout == KILN_NHWC ? "nhwc" : "nchw", info->kernel, info->params);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(ctx, &dev), KILN_SUCCESS);
    return strcmp(dev.backend, "opencl") == 0 && strncmp(info->kernel, "conv_f32_igemm_", 15) == 0 &&
           !strstr(info->kernel, "tiled");
}

/* Which variant of the implicit GEMM's CPU kernel a plan takes, where the
   profile routes the implicit GEMM there: the row variant for NHWC, for a
   strided 3x3 on an image of one tile (whose filters the panel variant
   would split into blocks on any device) and for a strided filter wider
   than 1x1 with two panels of the row variant's filters or more; the panel
   variant for NCHW at stride 1, for a strided 1x1 and for a strided 3x3 of
   one panel of filters on a larger image. */
static void test_igemm_variants(void **state)
{
    (void)state;
    static const struct {
        struct cc_row row;
        int rows;
    } cases[] = {
        {{CONV("3x3 pad1", NHWC, 1, 16, 12, 12, 32, 3, 3), PAD(1, 1, 1, 1)}, 1},
        {{CONV("1x1", NHWC, 1, 16, 12, 12, 32, 1, 1)}, 1},
        {{CONV("3x3 stride2 pad1 one tile", NCHW, 1, 64, 7, 7, 256, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, 1},
        {{CONV("3x3 pad1", NCHW, 1, 16, 12, 12, 32, 3, 3), PAD(1, 1, 1, 1)}, 0},
        {{CONV("1x1 stride2", NCHW, 1, 64, 7, 7, 256, 1, 1), .sh = 2, .sw = 2}, 0},
        /* -2 and -1: two panels of the profile's tile of filters and one,
           on an image whose pixel tiles give every compute unit eight (the
           panel variant does not split its filters there); -3: two panels,
           the panel variant */
        {{CONV("3x3 stride2 pad1 two panels", NCHW, 1, 32, 0, 0, 0, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, -2},
        {{CONV("3x3 stride2 pad1 one panel", NCHW, 1, 32, 0, 0, 0, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, -1},
        /* two panels over a filter volume below 256 (an RGB stem's) */
        {{CONV("3x3 stride2 pad1 volume 27", NCHW, 1, 3, 0, 0, 0, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, -3},
    };
    const size_t nr = (size_t)kiln_profile_params(kt_ctx->profile)->gemm_cpu.nr;
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    size_t side = 1;
    while (side * side < 8 * (size_t)(dev.compute_units ? dev.compute_units : 1) * nr)
        side++;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cc_row row = cases[i].row;
        if (cases[i].rows < 0)
            row.k = (size_t)(cases[i].rows == -1 ? 1 : 2) * nr, row.h = row.w = 2 * side;
        kiln_conv2d_plan_info info;
        if (!igemm_kernel(kt_ctx, &row, &info))
            skip();
        assert_int_equal(strncmp(info.kernel, "conv_f32_igemm_rows_", 20) == 0,
                         cases[i].rows < 0 ? cases[i].rows == -2 : cases[i].rows);
        kiln_conv2d_desc d = cc_desc_of(&row, KILN_CONV_IMPLICIT_GEMM);
        d.has_bias = 1, d.activation = KILN_ACT_RELU;
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        cc_check_plan(kt_ctx, plan, &d, KILN_CONV_IMPLICIT_GEMM, row.what);
    }
}

/* The CPU kernel's register tile has its rows balanced over the panels it
   needs, as the GEMM's has (tests/cpu_tile.h): 49 output pixels on the row
   variant take tiles of 7 where the profile's tile has 8 rows, 20 filters on
   the panel variant tiles of 7, or the narrow tile where that is cheaper;
   32 filters on the row variant its half-width tile where the profile's
   wide tile is 4 vectors or more (8 x 32 on amd-zen4); where the profile
   sets gemm.cpu.flip_nr, the row variant's flip_mr x flip_nr unless that
   costs 5% more (x86-64-avx512: 6 x 64 for 784 pixels by 128 filters, 7 x
   32 for 49). Results are checked against the reference. */
static void test_igemm_balanced_rows(void **state)
{
    (void)state;
    static const struct {
        struct cc_row row;
        int rows_variant;
        long tile_rows, tile_cols; /* pixels by filters (row variant) or filters by pixels */
    } cases[] = {
        {{CONV("3x3 stride2 7x7 out", NCHW, 1, 64, 14, 14, 64, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, 1, 49, 64},
        {{CONV("1x1 7x7", NHWC, 1, 32, 7, 7, 64, 1, 1)}, 1, 49, 64},
        {{CONV("3x3 20 filters", NCHW, 1, 16, 12, 12, 20, 3, 3), PAD(1, 1, 1, 1)}, 0, 20, 144},
        {{CONV("3x3 stride2 stem", NHWC, 1, 3, 32, 32, 32, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, 1, 256, 32},
        {{CONV("3x3 stride2 28x28 out", NCHW, 1, 32, 56, 56, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
         1,
         784,
         128},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_conv2d_plan_info info;
        if (!igemm_kernel(kt_ctx, &cases[i].row, &info))
            skip();
        long mr, nr;
        const struct kiln_param_gemm_cpu *cpu = &kiln_profile_params(kt_ctx->profile)->gemm_cpu;
        if (cases[i].rows_variant)
            kt_cpu_pixel_tile(cpu, cases[i].tile_rows, cases[i].tile_cols, &mr, &nr);
        else
            kt_cpu_tile(cpu, cases[i].tile_rows, cases[i].tile_cols, &mr, &nr);
        char expected[64];
        snprintf(expected, sizeof expected, "conv_f32_igemm_%s%ldx%ld", cases[i].rows_variant ? "rows_" : "", mr, nr);
        assert_string_equal(info.kernel, expected);

        kiln_conv2d_desc d = cc_desc_of(&cases[i].row, KILN_CONV_IMPLICIT_GEMM);
        d.has_bias = 1, d.activation = KILN_ACT_RELU;
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
        cc_check_plan(kt_ctx, plan, &d, KILN_CONV_IMPLICIT_GEMM, cases[i].row.what);
    }
}

/* AUTO's plan for `row` with bias and ReLU (described into *info, and
   printed) and its descriptor in *d. */
static kiln_conv2d_plan *auto_plan(kiln_context *ctx, const struct cc_row *row, kiln_conv2d_desc *d,
                                   kiln_conv2d_plan_info *info)
{
    *d = cc_desc_of(row, KILN_CONV_AUTO);
    kiln_conv2d_plan *plan = NULL;
    d->has_bias = 1, d->activation = KILN_ACT_RELU;
    kt_assert_status(kiln_conv2d_plan_create(ctx, d, &plan), KILN_SUCCESS);
    kt_assert_status(kiln_conv2d_plan_describe(plan, info), KILN_SUCCESS);
    printf("# %s %s: %s %s (%s)\n", row->what, row->layout == KILN_NHWC ? "nhwc" : "nchw", info->name, info->kernel,
           info->reason);
    return plan;
}

/* A strided 1x1 layer on an NCHW image of few output pixels takes im2col
   under AUTO (the input subsampled, then a GEMM), where the profile routes
   implicit GEMM to its CPU kernel; a large image keeps implicit GEMM, and
   NHWC and grouped layers never take it. Results are checked against the reference. */
static void test_strided_1x1_heuristic(void **state)
{
    (void)state;
    static const struct {
        struct cc_row row;
        int im2col;
    } cases[] = {
        {{CONV("1x1 stride2 7x7 out", NCHW, 1, 32, 14, 14, 64, 1, 1), .sh = 2, .sw = 2}, 1},
        {{CONV("1x1 stride2 odd", NCHW, 2, 16, 9, 11, 24, 1, 1), .sh = 2, .sw = 3}, 1},
        {{CONV("1x1 stride2 32x32 out", NCHW, 1, 16, 64, 64, 32, 1, 1), .sh = 2, .sw = 2}, 0},
        {{CONV("1x1 stride2 7x7 out", NHWC, 1, 32, 14, 14, 64, 1, 1), .sh = 2, .sw = 2}, 0},
        {{CONV("1x1 stride2 groups2", NCHW, 1, 32, 14, 14, 64, 1, 1), .sh = 2, .sw = 2, .groups = 2}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* Where implicit GEMM is not the CPU kernel, the rule does not apply. */
        kiln_conv2d_plan_info info;
        const int cpu_kernel = igemm_kernel(kt_ctx, &cases[i].row, &info);
        kiln_conv2d_desc d;
        kiln_conv2d_plan *plan = auto_plan(kt_ctx, &cases[i].row, &d, &info);
        if (cpu_kernel)
            assert_int_equal(strcmp(info.name, "im2col") == 0, cases[i].im2col);
        else
            assert_string_not_equal(info.name, "im2col");
        if (strcmp(info.name, "im2col") == 0)
            assert_non_null(strstr(info.reason, "strided 1x1"));
        cc_check_plan(kt_ctx, plan, &d, KILN_CONV_IM2COL, cases[i].row.what);
    }
}

/* Whether kt_ctx's backend compiles algorithm `algo` for the row (the CUDA
   backend compiles no kernel in OpenCL's vector syntax). */
static int compiled_here(kiln_context *ctx, const struct cc_row *row, kiln_conv_algo algo)
{
    kiln_conv2d_desc d = cc_desc_of(row, algo);
    kiln_conv2d_plan *plan = NULL;
    const kiln_status st = kiln_conv2d_plan_create(ctx, &d, &plan);
    kiln_conv2d_plan_destroy(plan);
    if (kt_unsupported_here(ctx, st))
        return 0;
    kt_assert_status(st, KILN_SUCCESS);
    return 1;
}

/* An NHWC 1x1 layer takes implicit GEMM under AUTO at any size where the
   profile routes implicit GEMM to its CPU kernel (whose row variant reads
   NHWC in place), below NCHW's pixel threshold too, unless the GEMM reads
   the input in place as well (fp32 storage, gemm.cpu.a_in_place 1); NCHW
   below it, and NHWC elsewhere, take gemm-1x1 where the backend compiles
   it, else implicit GEMM. On the profile as it is and with a_in_place 0,
   fp32 and fp16; results are checked against the reference. */
static void test_nhwc_1x1_heuristic(void **state)
{
    (void)state;
    static const struct cc_row rows[] = {
        {CONV("1x1 7x7", NHWC, 1, 64, 7, 7, 96, 1, 1)},
        {CONV("1x1 3x5 n2", NHWC, 2, 24, 3, 5, 40, 1, 1)},
        {CONV("1x1 7x7 f16", NHWC, 1, 64, 7, 7, 96, 1, 1), .dtype = KILN_F16},
        {CONV("1x1 7x7", NCHW, 1, 64, 7, 7, 96, 1, 1)},
    };
    kiln_context *packed = kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"a_in_place\": 0}}}");
    kiln_context *const contexts[] = {kt_ctx, packed};
    for (size_t c = 0; c < 2; c++) {
        kiln_context *ctx = contexts[c];
        const int in_place = kiln_profile_params(ctx->profile)->gemm_cpu.a_in_place != 0;
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
            kiln_conv2d_plan_info info;
            const int cpu_kernel = igemm_kernel(ctx, &rows[i], &info);
            kiln_conv2d_desc d;
            kiln_conv2d_plan *plan = auto_plan(ctx, &rows[i], &d, &info);
            const int gemm_reads_x = in_place && rows[i].dtype == KILN_F32;
            const int by_igemm = (cpu_kernel && rows[i].layout == KILN_NHWC && !gemm_reads_x) ||
                                 !compiled_here(ctx, &rows[i], KILN_CONV_GEMM_1X1);
            assert_string_equal(info.name, by_igemm ? "implicit-gemm" : "gemm-1x1");
            cc_check_plan(ctx, plan, &d, KILN_CONV_IMPLICIT_GEMM, rows[i].what);
        }
    }
    kiln_context_destroy(packed);
}

/* A 1x1 NCHW layer goes direct under AUTO where its output planes have
   select.conv_1x1_direct_min_pixels or more pixels (400 here) and the
   profile routes implicit GEMM to its CPU kernel: 20x20 does, 19x19 and
   two images of 15x15 (450 pixels in all) do not, nor NHWC, nor a strided
   or a padded 1x1. Results are checked against the reference. */
static void test_large_plane_1x1_heuristic(void **state)
{
    (void)state;
    static const struct {
        struct cc_row row;
        int direct; /* under implicit GEMM's CPU kernel */
    } cases[] = {
        {{CONV("1x1 20x20", NCHW, 1, 16, 20, 20, 24, 1, 1)}, 1},
        {{CONV("1x1 25x16 n2", NCHW, 2, 8, 25, 16, 16, 1, 1)}, 1},
        {{CONV("1x1 19x19", NCHW, 1, 16, 19, 19, 24, 1, 1)}, 0},
        {{CONV("1x1 15x15 n2", NCHW, 2, 16, 15, 15, 24, 1, 1)}, 0},
        {{CONV("1x1 20x20", NHWC, 1, 16, 20, 20, 24, 1, 1)}, 0},
        {{CONV("1x1 stride2 40x40", NCHW, 1, 16, 40, 40, 24, 1, 1), .sh = 2, .sw = 2}, 0},
    };
    kiln_context *ctx = kt_overlay_context("{\"select\": {\"conv_1x1_direct_min_pixels\": 400}}");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_conv2d_plan_info info;
        const int cpu_kernel = igemm_kernel(kt_ctx, &cases[i].row, &info);
        kiln_conv2d_desc d = cc_desc_of(&cases[i].row, KILN_CONV_AUTO);
        d.has_bias = 1, d.activation = KILN_ACT_RELU;
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        printf("# %s: %s %s (%s)\n", cases[i].row.what, info.name, info.kernel, info.reason);
        assert_int_equal(strcmp(info.name, "direct") == 0, cpu_kernel && cases[i].direct);
        if (cpu_kernel && cases[i].direct)
            assert_non_null(strstr(info.reason, "planes of 400 pixels or more"));
        cc_check_plan(ctx, plan, &d, KILN_CONV_DIRECT, cases[i].row.what);
    }
    kiln_context_destroy(ctx);
}

/* A thin input (under 4 channels a group) with many filters goes direct
   under AUTO below a filter volume of 16, and on NCHW at any volume where
   the profile routes implicit GEMM to its CPU kernel (an RGB 3x3 stem: 27;
   an RGB 7x7 stem: 147); elsewhere implicit GEMM above 16. Results are
   checked against the reference. */
static void test_thin_input_heuristic(void **state)
{
    (void)state;
    static const struct {
        struct cc_row row;
        int direct_cpu, direct_other; /* under implicit GEMM's CPU kernel, and elsewhere */
    } cases[] = {
        {{CONV("rgb 3x3 stem", NCHW, 1, 3, 33, 30, 32, 3, 3), .sh = 2, .sw = 2, PAD(1, 1, 1, 1)}, 1, 0},
        {{CONV("rgb 3x3 stem", NHWC, 1, 3, 33, 30, 32, 3, 3), .sh = 2, .sw = 2, PAD(1, 1, 1, 1)}, 0, 0},
        {{CONV("rgb 7x7 stem", NCHW, 1, 3, 40, 36, 64, 7, 7), .sh = 2, .sw = 2, PAD(3, 3, 3, 3)}, 1, 0},
        {{CONV("rgb 7x7 stem", NHWC, 1, 3, 40, 36, 64, 7, 7), .sh = 2, .sw = 2, PAD(3, 3, 3, 3)}, 0, 0},
        {{CONV("gray 3x3", NCHW, 1, 1, 20, 20, 32, 3, 3), PAD(1, 1, 1, 1)}, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_conv2d_plan_info info;
        const int cpu_kernel = igemm_kernel(kt_ctx, &cases[i].row, &info);
        kiln_conv2d_desc d;
        kiln_conv2d_plan *plan = auto_plan(kt_ctx, &cases[i].row, &d, &info);
        assert_int_equal(strcmp(info.name, "direct") == 0, cpu_kernel ? cases[i].direct_cpu : cases[i].direct_other);
        cc_check_plan(kt_ctx, plan, &d, KILN_CONV_DIRECT, cases[i].row.what);
    }
}

/* kiln_conv2d with and without an event, in both layouts. */
static void test_one_shot(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][i], KILN_CONV_AUTO);
        d.alpha = 1.5f, d.beta = 0.5f, d.activation = KILN_ACT_RELU;
        struct cr_case t;
        cr_case_init(&t, kt_ctx, &d);
        for (int with_event = 0; with_event < 2; with_event++) {
            cr_case_fill(&t, &kt_group_seed);
            kiln_event *ev = KT_POISON_EVENT;
            kt_assert_status(kiln_conv2d(kt_ctx, &d, t.buf[CR_X], t.buf[CR_W], t.buf[CR_BIAS], t.buf[CR_Z], t.buf[CR_Y],
                                         with_event ? &ev : NULL),
                             KILN_SUCCESS);
            if (with_event)
                kt_wait_and_release(ev);
            else
                assert_ptr_equal(ev, KT_POISON_EVENT);
            /* AUTO may pick any algorithm: allow the loosest tolerance */
            cr_case_check(&t, kiln_conv_algo_tol(KILN_CONV_WINOGRAD_4X4, t.dims.k_eff), "one-shot");
        }
        cr_case_free(&t);
    }
}

/* An algorithm entry without unsupported() takes every shape (plan.h), as
   GEMM's and attention's tables already allow: planning asks it nothing.
   Here a copy of the direct entry with none plans and computes right. */
static void test_entry_without_unsupported(void **state)
{
    (void)state;
    static struct kiln_conv_algorithm takes_all;
    takes_all = kiln_conv_direct;
    takes_all.unsupported = NULL;
    const kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], KILN_CONV_DIRECT);
    struct kiln_conv_shape s;
    kt_assert_status(kiln_conv_shape_of(&d, &s), KILN_SUCCESS);
    assert_null(kiln_conv_why_not(&takes_all, &s));
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv_plan_with(kt_ctx, &s, &takes_all, "requested", &plan);
    if (!kt_ctx->vector_kernels) { /* the copy is not the direct entry the CUDA routes compile */
        kt_assert_status(st, KILN_ERROR_UNSUPPORTED);
        return;
    }
    kt_assert_status(st, KILN_SUCCESS);
    struct cr_case t;
    cr_case_init(&t, kt_ctx, &d);
    cr_case_fill(&t, &kt_group_seed);
    kt_assert_status(
        kiln_conv2d_plan_execute(plan, t.buf[CR_X], t.buf[CR_W], t.buf[CR_BIAS], t.buf[CR_Z], t.buf[CR_Y], NULL),
        KILN_SUCCESS);
    cr_case_check(&t, kiln_conv_algo_tol(KILN_CONV_DIRECT, t.dims.k_eff), "entry without unsupported");
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
}

/* One plan, two sets of buffers, executions queued back to back before
   anything is read: each result reflects its own inputs. */
static void test_plan_reuse(void **state)
{
    (void)state;
    kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], KILN_CONV_AUTO);
    d.beta = 0.5f;
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kiln_conv_algo ran = cc_assert_plan_describes(plan, kt_ctx, KILN_CONV_AUTO);
    struct cr_case t1, t2;
    cr_case_init(&t1, kt_ctx, &d);
    cr_case_init(&t2, kt_ctx, &d);
    for (int round = 0; round < 3; round++) {
        cr_case_fill(&t1, &kt_group_seed);
        cr_case_fill(&t2, &kt_group_seed);
        kiln_event *ev = KT_POISON_EVENT;
        kt_assert_status(cr_case_execute(&t1, plan, NULL), KILN_SUCCESS);
        kt_assert_status(cr_case_execute(&t2, plan, &ev), KILN_SUCCESS);
        kt_wait_and_release(ev);
        cr_case_check(&t1, kiln_conv_algo_tol(ran, t1.dims.k_eff), "reuse, first buffers");
        cr_case_check(&t2, kiln_conv_algo_tol(ran, t2.dims.k_eff), "reuse, second buffers");
    }
    cr_case_free(&t1);
    cr_case_free(&t2);
    kiln_conv2d_plan_destroy(plan);
}

/* constant_weights: the plan may pack the weights once. Executions with the
   same weights buffer and fresh inputs stay right, and so does a switch to
   another weights buffer (which must be packed again) and back, in both
   layouts (Winograd's GEMM keeps the transformed weights packed as its A
   operand in NCHW and as B in NHWC). */
/* Winograd's batched GEMM packs its operands only above the profile's
   gemm.direct_max (64^3 on the CPU profiles): K C T > 64^3 here for both
   tile sizes (T = 81 tiles of F(4x4)). */
static const struct cc_row packed_shapes[2] = {
    {CONV("3x3 pad1 64ch", NCHW, 1, 64, 34, 34, 64, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 64ch", NHWC, 1, 64, 34, 34, 64, 3, 3), PAD(1, 1, 1, 1)},
};

/* Executions of plan (of d, constant_weights) on weights buffers a, a, b,
   a, each with fresh inputs, checked against the reference with algo's
   tolerance under label: a switch of weights buffer must pack again. */
static void check_weight_switches(kiln_conv2d_plan *plan, const kiln_conv2d_desc *d, kiln_conv_algo algo,
                                  const char *label)
{
    struct cr_case a, b;
    cr_case_init(&a, kt_ctx, d);
    cr_case_init(&b, kt_ctx, d);
    cr_case_fill(&a, &kt_group_seed);
    cr_case_fill(&b, &kt_group_seed);
    const double tol = kiln_conv_algo_tol(algo, a.dims.k_eff);
    struct cr_case *order[] = {&a, &a, &b, &a};
    for (size_t r = 0; r < sizeof order / sizeof *order; r++) {
        cr_case_refresh_x(order[r], &kt_group_seed);
        kt_assert_status(cr_case_execute(order[r], plan, NULL), KILN_SUCCESS);
        cr_case_check(order[r], tol, label);
    }
    cr_case_free(&a);
    cr_case_free(&b);
}

static void test_constant_weights(void **state)
{
    (void)state;
    const kiln_conv_algo *algos = cc_all_algos;
    size_t ran = 0;
    for (size_t run = 0; run < 2 * CC_ALGOS; run++) {
        const size_t i = run / 2, layout = run % 2;
        const int wino = algos[i] == KILN_CONV_WINOGRAD_2X2 || algos[i] == KILN_CONV_WINOGRAD_4X4;
        kiln_conv2d_desc d = cc_desc_of(wino ? &packed_shapes[layout] : cc_epilogue_shape(algos[i], layout), algos[i]);
        d.constant_weights = 1;
        kiln_conv2d_plan *plan = NULL;
        kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if ((st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) ||
            kt_unsupported_here(kt_ctx, st))
            continue;
        kt_assert_status(st, KILN_SUCCESS);
        kiln_conv_algo algo = cc_assert_plan_describes(plan, kt_ctx, algos[i]);
        char label[96];
        snprintf(label, sizeof label, "%s %s constant_weights", cc_algo_name(algos[i]), layout ? "nhwc" : "nchw");
        check_weight_switches(plan, &d, algo, label);
        kiln_conv2d_plan_destroy(plan);
        ran++;
    }
    assert_true(ran > 0);
}

/* Depthwise NHWC on the direct kernel with constant_weights: on devices
   whose vectors hold more than one filter, the taps are packed once per
   weights buffer, VW filters side by side ("taps packed once"), and the
   results stay right through a switch to another weights buffer and back:
   48 channels (three blocks of 16 on AVX-512) at stride 1 and 2, and 40 in
   fp16 storage (five blocks of 8). */
static void test_depthwise_taps_packed(void **state)
{
    (void)state;
    static const struct cc_row rows[] = {
        {CONV("dw 3x3 48ch 7x7", NHWC, 1, 48, 7, 7, 48, 3, 3), PAD(1, 1, 1, 1), .groups = 48},
        {CONV("dw 3x3 s2 48ch 13x13", NHWC, 2, 48, 13, 13, 48, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .groups = 48},
        {CONV("dw 3x3 40ch f16", NHWC, 1, 40, 9, 9, 40, 3, 3), PAD(1, 1, 1, 1), .groups = 40, .dtype = KILN_F16},
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        kiln_conv2d_desc d = cc_desc_of(&rows[i], KILN_CONV_DIRECT);
        d.constant_weights = 1;
        kiln_conv2d_plan *plan = NULL;
        const kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
        if (kt_unsupported_here(kt_ctx, st))
            continue;
        kt_assert_status(st, KILN_SUCCESS);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        printf("# %s: %s %s\n", rows[i].what, info.kernel, info.params);
        const int packed = strstr(info.params, "taps packed once") != NULL;
        if (packed != (kt_ctx->vector_kernels && !strstr(info.params, "VW=1 ")))
            fail_msg("%s: \"%s\", wanted the taps %s", rows[i].what, info.params,
                     kt_ctx->vector_kernels ? "packed" : "not packed");
        check_weight_switches(plan, &d, KILN_CONV_DIRECT, rows[i].what);
        kiln_conv2d_plan_destroy(plan);
    }
}

/* ------------------------------------------------------------------------ */
/* Find mode and its database                                               */
/* ------------------------------------------------------------------------ */

/* In a fresh cache directory: a plan with find (desc.find, or KILN_FIND=1
   in the environment) times the candidates and says so; a second context on
   the same directory takes the choice from the find database. Both compute
   the right result. */
static void find_round(int by_env)
{
    char *dir = kt_temp_dir();
    if (by_env)
        assert_int_equal(setenv("KILN_FIND", "1", 1), 0);
    kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], KILN_CONV_AUTO);
    d.find = !by_env;
    kiln_conv_algo first = KILN_CONV_AUTO;
    for (int round = 0; round < 2; round++) {
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.cache_dir = dir;
        kiln_context *c = NULL;
        kt_assert_status(kiln_context_create(&opt, &c), KILN_SUCCESS);
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(c, &d, &plan), KILN_SUCCESS);
        kiln_conv_algo ran = cc_assert_plan_describes(plan, c, KILN_CONV_AUTO);
        kiln_conv2d_plan_info info;
        kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
        printf("# find (%s) round %d: %s, %s\n", by_env ? "KILN_FIND=1" : "desc.find", round, info.name, info.reason);
        assert_non_null(strstr(info.reason, "find"));
        if (round == 0) {
            first = ran;
            /* a second plan in the same context reuses the choice */
            kiln_conv2d_plan *again = NULL;
            kt_assert_status(kiln_conv2d_plan_create(c, &d, &again), KILN_SUCCESS);
            kiln_conv2d_plan_info info2;
            kt_assert_status(kiln_conv2d_plan_describe(again, &info2), KILN_SUCCESS);
            assert_int_equal(info2.algo, ran);
            assert_non_null(strstr(info2.reason, "find"));
            kiln_conv2d_plan_destroy(again);
        } else {
            assert_non_null(strstr(info.reason, "database"));
            assert_int_equal(ran, first);
        }
        struct cr_case t;
        cr_case_init(&t, c, &d);
        cr_case_fill(&t, &kt_group_seed);
        kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
        cr_case_check(&t, kiln_conv_algo_tol(ran, t.dims.k_eff), "find");
        cr_case_free(&t);
        kiln_conv2d_plan_destroy(plan);
        kiln_context_destroy(c);
    }
    if (by_env)
        assert_int_equal(unsetenv("KILN_FIND"), 0);
    kt_remove_tree(dir);
    free(dir);
}

static void test_find_desc(void **state)
{
    (void)state;
    find_round(0);
}

static void test_find_env(void **state)
{
    (void)state;
    find_round(1);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_describe));
    kt_add(&tests, cmocka_unit_test(test_one_shot));
    kt_add(&tests, cmocka_unit_test(test_plan_reuse));
    kt_add(&tests, cmocka_unit_test(test_entry_without_unsupported));
    kt_add(&tests, cmocka_unit_test(test_constant_weights));
    kt_add(&tests, cmocka_unit_test(test_depthwise_taps_packed));
    kt_add(&tests, cmocka_unit_test(test_profile_default_algo));
    kt_add(&tests, cmocka_unit_test(test_igemm_variants));
    kt_add(&tests, cmocka_unit_test(test_igemm_balanced_rows));
    kt_add(&tests, cmocka_unit_test(test_strided_1x1_heuristic));
    kt_add(&tests, cmocka_unit_test(test_nhwc_1x1_heuristic));
    kt_add(&tests, cmocka_unit_test(test_thin_input_heuristic));
    kt_add(&tests, cmocka_unit_test(test_large_plane_1x1_heuristic));
    kt_add(&tests, cmocka_unit_test(test_find_desc));
    kt_add(&tests, cmocka_unit_test(test_find_env));
    return kt_run("conv_plans", &tests);
}
