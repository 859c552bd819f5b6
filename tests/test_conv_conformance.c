/*
 * Every shipped device profile's convolution parameters compile and compute
 * right: for each non-abstract embedded profile, a context on this machine's
 * device forced to that profile runs every algorithm that applies to a 3x3
 * pad 1 shape (NCHW) and to a 1x1 shape (NHWC), as the library's algorithm
 * table says (cc_applies), through the public API, checked against the
 * plain-C reference of conv_ref.h. One test per profile.
 *
 * Both shapes carry bias and ReLU and leave partial tiles (odd pixel counts,
 * filter counts that are not multiples of 4, 6 or 8) so no profile's tile or
 * vector width can assume whole tiles. Algorithms still being written
 * (UNSUPPORTED "not implemented") are listed and passed over; a profile whose
 * every algorithm is unwritten is skipped.
 *
 * Implicit GEMM runs the GPU-style tiled kernel on profiles whose
 * select.conv_igemm_route is "tiled" and the CPU kernel on the others
 * (src/ops/conv_igemm.c); each profile checks that its plan names the
 * kernel the rule gives. On this CPU
 * device the GPU profiles' tiles run nowhere else, so those profiles also
 * run the implicit-GEMM table below (the CPU kernel has test_conv_shapes.c's
 * table under the device's own profile).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv_cases.h"
#include "core/context.h"
#include "profiles/profile.h"

static uint64_t seed;

static const struct shape {
    const char *what;
    kiln_tensor_layout layout;
    size_t n, c, h, w, k, r, pad;
} shapes[] = {
    {"3x3 pad1", KILN_NCHW, 2, 12, 9, 11, 13, 3, 1},
    {"1x1", KILN_NHWC, 1, 20, 7, 9, 13, 1, 0},
};

/*
 * The implicit-GEMM table, for the tiled kernel's tiles: 64 or 128 pixels,
 * 64 filters and K steps of 16 in the shipped GPU profiles. Pixel counts,
 * filters per group and K = C/groups * R * S are mostly not multiples of
 * those and span several tiles (198 pixels, 70 filters, K 108), with one row
 * of whole tiles and a whole single K step, rows whose K is below one step
 * (depthwise, a grouped 1x1), and stride, asymmetric padding, dilation and
 * groups in both layouts.
 *
 * Compile budget: a layout, storage type and epilogue switch set is one
 * build per distinct set of tile parameters (three among the shipped GPU
 * profiles), and POCL compiles the tiled kernel's unrolled epilogue slowly:
 * about 2 s for fp32 and 5 s for fp16 under a cold cache, most of it the
 * fp16 conversions of the MWI x NWI outputs each work-item stores. So the
 * fp32 rows use bias and ReLU, the switch set the shapes above already
 * build, and the fp16 rows, all NHWC, carry the rest of the epilogue: a
 * residual with alpha and beta, and leaky ReLU with its slope. The kernel's
 * storage and epilogue code does not depend on the layout.
 */
enum epilogue { BIAS_RELU, RESIDUAL_LEAKY };

/* Pads are top, bottom, left, right; zero stride, dilation and groups mean 1. */
static const struct igemm_row {
    const char *what;
    kiln_tensor_layout layout;
    kiln_dtype dtype;
    size_t n, c, h, w, k, r, s;
    size_t sh, sw, pad[4], dh, dw, groups;
    enum epilogue epilogue;
    int split; /* few tiles and a long K: the plan splits K (split_k_min 256) */
} igemm_rows[] = {
#define ROW(what_, lay, type, n_, c_, h_, w_, k_, r_, s_)                                                              \
    .what = what_, .layout = KILN_##lay, .dtype = KILN_##type, .n = n_, .c = c_, .h = h_, .w = w_, .k = k_, .r = r_,   \
    .s = s_
    {ROW("3x3 pad1 n2, 198 pixels, 70 filters, K 108", NCHW, F32, 2, 12, 9, 11, 70, 3, 3), PAD(1, 1, 1, 1)},
    {ROW("3x3 pad1 n2, 198 pixels, 70 filters, K 108", NHWC, F32, 2, 12, 9, 11, 70, 3, 3), PAD(1, 1, 1, 1)},
    {ROW("1x1 whole tiles: 128 pixels, 64 filters, K 16", NCHW, F32, 2, 16, 8, 8, 64, 1, 1)},
    {ROW("3x3 stride2 pad1, 13 filters, K 72", NCHW, F32, 1, 8, 17, 23, 13, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {ROW("3x3 dilation2 pad t2b1l2r0", NCHW, F32, 1, 6, 13, 14, 20, 3, 3), PAD(2, 1, 2, 0), .dh = 2, .dw = 2},
    {ROW("3x3 groups3, 6 channels and 9 filters per group", NCHW, F32, 1, 18, 10, 10, 27, 3, 3), PAD(1, 1, 1, 1),
     .groups = 3},
    {ROW("7x7 stride2 pad3 stem, K 147", NCHW, F32, 1, 3, 16, 16, 70, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2},
    {ROW("3x3 depthwise stride2 n2, K 9", NCHW, F32, 2, 16, 14, 13, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2,
     .groups = 16},
    {ROW("3x3 stride1x2 dilation2x1 pad t1b0l2r1", NHWC, F32, 2, 5, 9, 12, 13, 3, 3), PAD(1, 0, 2, 1), .sw = 2,
     .dh = 2},
    {ROW("1x1 groups2, K 5, 70 filters per group", NHWC, F32, 1, 10, 9, 15, 140, 1, 1), .groups = 2},
    {ROW("5x5 pad2, K 200", NHWC, F32, 1, 8, 11, 11, 24, 5, 5), PAD(2, 2, 2, 2)},
    {ROW("3x3 pad1 n2, 198 pixels, 70 filters, K 108", NHWC, F16, 2, 12, 9, 11, 70, 3, 3), PAD(1, 1, 1, 1),
     .epilogue = RESIDUAL_LEAKY},
    {ROW("1x1, 63 pixels, K 20", NHWC, F16, 1, 20, 7, 9, 13, 1, 1), .epilogue = RESIDUAL_LEAKY},
    {ROW("3x3 stride2 pad1 groups2 n2, 70 filters per group", NHWC, F16, 2, 16, 11, 13, 140, 3, 3), PAD(1, 1, 1, 1),
     .sh = 2, .sw = 2, .groups = 2, .epilogue = RESIDUAL_LEAKY},
    /* One tile of pixels and filters (per group), K of several slices of
       split_k_min: the layers of a network's last stage at batch 1; K a
       multiple of the slices and not, groups, both layouts, fp16 with the
       whole epilogue. */
    {ROW("3x3 stride2 pad1, 49 pixels, K 1152, split", NCHW, F32, 1, 128, 14, 14, 40, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .split = 1},
    {ROW("3x3 pad1 groups2, 49 pixels, K 576, split", NHWC, F32, 1, 128, 7, 7, 40, 3, 3), PAD(1, 1, 1, 1), .groups = 2,
     .split = 1},
    {ROW("3x3 pad1, 49 pixels, K 900, split", NHWC, F16, 1, 100, 7, 7, 20, 3, 3), PAD(1, 1, 1, 1),
     .epilogue = RESIDUAL_LEAKY, .split = 1},
#undef ROW
};

static size_t or_one(size_t v) { return v ? v : 1; }

/* Plan `d` on ctx, run it on fresh inputs and check it; `label` names the
   case; the plan's parameters must say `want` where it is not NULL. Returns
   0 if the algorithm is not written yet. */
static int run_case(kiln_context *ctx, const kiln_conv2d_desc *d, const char *want, const char *label)
{
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(ctx, d, &plan);
    if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) {
        printf("# %s: %s\n", label, kiln_last_error_detail());
        return 0;
    }
    if (kt_unsupported_here(ctx, st))
        return 0;
    if (st != KILN_SUCCESS)
        fail_msg("%s: plan_create: %s: %s", label, kiln_status_string(st), kiln_last_error_detail());
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    assert_int_equal(info.algo, d->algo);
    assert_string_equal(info.profile, kiln_profile_name(ctx->profile));
    if (d->algo == KILN_CONV_IMPLICIT_GEMM &&
        (strncmp(info.kernel, "conv_f32_igemm_tiled_", 21) == 0) != cc_takes_tiled_igemm(ctx))
        fail_msg("%s: implicit GEMM runs %s, not the kernel its GEMM route gives", label, info.kernel);
    printf("# %s: %s [%s]\n", label, info.kernel, info.params);
    if (want && !strstr(info.params, want))
        fail_msg("%s: the plan's parameters [%s] do not say \"%s\"", label, info.params, want);

    struct cr_case t;
    cr_case_init(&t, ctx, d);
    cr_case_fill(&t, &seed);
    kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, kiln_conv_algo_tol(d->algo, t.dims.k_eff), label);
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
    return 1;
}

static kiln_conv2d_desc igemm_desc(const struct igemm_row *row)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, row->layout, row->n, row->c, row->h, row->w, row->k, row->r, row->s);
    d.dtype = row->dtype;
    d.stride_h = or_one(row->sh), d.stride_w = or_one(row->sw);
    d.pad_top = row->pad[0], d.pad_bottom = row->pad[1], d.pad_left = row->pad[2], d.pad_right = row->pad[3];
    d.dilation_h = or_one(row->dh), d.dilation_w = or_one(row->dw);
    d.groups = or_one(row->groups);
    d.algo = KILN_CONV_IMPLICIT_GEMM;
    d.has_bias = 1;
    d.activation = row->epilogue == BIAS_RELU ? KILN_ACT_RELU : KILN_ACT_LEAKY_RELU;
    if (row->epilogue == RESIDUAL_LEAKY) {
        d.alpha = 0.75f;
        d.beta = -1.25f;
        d.leaky_slope = 0.125f;
    }
    return d;
}

static void test_profile(void **state)
{
    const char *name = *state;
    kiln_context *ctx = kt_profile_context(name);

    size_t ran = 0, unwritten = 0;
    char label[256];
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (size_t a = 1; a < CC_ALGOS; a++) { /* every algorithm but AUTO */
            const struct shape *sh = &shapes[i];
            kiln_conv2d_desc d;
            kiln_conv2d_desc_init(&d, sh->layout, sh->n, sh->c, sh->h, sh->w, sh->k, sh->r, sh->r);
            d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = sh->pad;
            d.has_bias = 1;
            d.activation = KILN_ACT_RELU;
            d.algo = cc_all_algos[a];
            if (!cc_applies(d.algo, &d))
                continue;
            snprintf(label, sizeof label, "profile %s, %s, algo %d", name, sh->what, (int)d.algo);
            if (run_case(ctx, &d, NULL, label))
                ran++;
            else
                unwritten++;
        }
    if (cc_takes_tiled_igemm(ctx))
        for (size_t i = 0; i < sizeof igemm_rows / sizeof *igemm_rows; i++) {
            const struct igemm_row *row = &igemm_rows[i];
            const kiln_conv2d_desc d = igemm_desc(row);
            snprintf(label, sizeof label, "profile %s, implicit GEMM, %s %s %s", name, row->what,
                     row->layout == KILN_NHWC ? "NHWC" : "NCHW", kt_dtype_name(row->dtype));
            assert_true(run_case(ctx, &d, row->split ? "split K" : NULL, label));
            ran++;
        }
    kiln_context_destroy(ctx);
    if (!ran && unwritten) {
        printf("# skipped: profile %s: no algorithm that applies to the shapes is written yet\n", name);
        skip();
    }
}

/* A profile whose implicit-GEMM parameters the tiled kernel cannot use is
   refused when forced, with a reason naming the profile and the parameters;
   one whose parameters the device cannot run still loads, and makes that
   algorithm UNSUPPORTED with such a reason. The work-group and the local
   memory past the device's limits are derived from the device: a square
   work-group of the smallest power of two a side that exceeds it, and tiles
   of 1024 pixels and filters with the smallest power-of-two K step whose
   local memory (4 kwg (mwg + nwg + 2 vw) + 16 mwg + 48 kwg bytes, vw = 2 from
   generic-gpu) exceeds the device's. */
static void test_igemm_parameters_checked(void **state)
{
    (void)state;
    kiln_context *def = NULL;
    kiln_device_info dev;
    kt_assert_status(kiln_context_create(NULL, &def), KILN_SUCCESS);
    kt_assert_status(kiln_context_get_device_info(def, &dev), KILN_SUCCESS);
    kiln_context_destroy(def);
    long side = 1, kwg = 1;
    while (side <= 512 && (size_t)(side * side) <= dev.max_work_group_size)
        side *= 2;
    /* Tiles of 256 x 256 on 16 x 16 work-items: 256 accumulators each,
       within the schema's bound. */
    while (kwg <= 1024 && (uint64_t)(4 * kwg * (256 + 256 + 4) + 16 * 256 + 48 * kwg) <= dev.local_mem_bytes)
        kwg *= 2;
    struct {
        const char *name;
        char conv[160], cause[96];
        kiln_status create;
        int applies;
    } bad[] = {
        {"igemm-mwg", "\"mwg\": 60", "mwg = 60 is not a multiple of mdimc * vw = 16", KILN_ERROR_NOT_FOUND, 1},
        {"igemm-nwg", "\"nwg\": 8, \"vw\": 4", "nwg = 8 is not a multiple of ndimc * vw = 32", KILN_ERROR_NOT_FOUND, 1},
        {"igemm-threads", "", "", KILN_SUCCESS, side <= 512},
        {"igemm-local", "", "bytes of local memory", KILN_SUCCESS, kwg <= 1024 && dev.max_work_group_size >= 256},
    };
    snprintf(bad[2].conv, sizeof bad[2].conv, "\"mwg\": %ld, \"nwg\": %ld, \"mdimc\": %ld, \"ndimc\": %ld", 2 * side,
             2 * side, side, side);
    snprintf(bad[2].cause, sizeof bad[2].cause, "%ld work-items per work-group", side * side);
    snprintf(bad[3].conv, sizeof bad[3].conv, "\"mwg\": 256, \"nwg\": 256, \"mdimc\": 16, \"ndimc\": 16, \"kwg\": %ld",
             kwg);
    if (!bad[2].applies)
        printf("# skipped igemm-threads: device %s takes %zu work-items per work-group, more than a profile can ask "
               "for\n",
               dev.name, dev.max_work_group_size);
    if (!bad[3].applies)
        printf("# skipped igemm-local: device %s has %llu bytes of local memory, more than a profile can ask for\n",
               dev.name, (unsigned long long)dev.local_mem_bytes);
    char *dir = kt_temp_dir();
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (!bad[i].applies)
            continue;
        char path[1024], text[512];
        snprintf(path, sizeof path, "%s/%s.json", dir, bad[i].name);
        snprintf(text, sizeof text,
                 "{\"name\": \"%s\", \"parent\": \"generic-gpu\", \"match\": {\"name\": [\"no such device\"]},"
                 " \"kernels\": {\"conv.igemm_tiled\": {%s}}}",
                 bad[i].name, bad[i].conv);
        kt_write_file(path, text);
    }
    assert_int_equal(setenv("KILN_PROFILE_DIR", dir, 1), 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (!bad[i].applies)
            continue;
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.profile = bad[i].name;
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(&opt, &ctx), bad[i].create);
        if (bad[i].create != KILN_SUCCESS) {
            const char *detail = kiln_last_error_detail();
            if (!strstr(detail, bad[i].name) || !strstr(detail, bad[i].cause))
                fail_msg("profile %s: \"%s\" does not name the profile and \"%s\"", bad[i].name, detail, bad[i].cause);
            continue;
        }
        kiln_conv2d_desc d;
        kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 8, 9, 9, 8, 3, 3);
        d.algo = KILN_CONV_IMPLICIT_GEMM;
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_ERROR_UNSUPPORTED);
        assert_null(plan);
        const char *detail = kiln_last_error_detail();
        if (!strstr(detail, bad[i].name) || !strstr(detail, bad[i].cause))
            fail_msg("profile %s: \"%s\" does not name the profile and \"%s\"", bad[i].name, detail, bad[i].cause);
        kiln_context_destroy(ctx);
    }
    assert_int_equal(unsetenv("KILN_PROFILE_DIR"), 0);
    kt_remove_tree(dir);
    free(dir);
}

/* The CPU implicit GEMM's panel variant (NCHW, stride 1, a filter wider than
   1x1) gathers an im2col panel of the filter volume by NR pixels in local
   memory; a filter volume too deep for it (3x3 over 512 channels by 64 pixels,
   1.18 MB against POCL's 1 MiB) takes the row variant, which keeps no panel,
   rather than failing (implicit GEMM was UNSUPPORTED there, AUTO included
   where no Winograd applied). The device's local memory is shrunk to 16 KiB,
   below a 576 x 8 panel, so a small layer shows it. */
static void test_igemm_panel_beyond_local_memory(void **state)
{
    (void)state;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    if (cc_takes_tiled_igemm(ctx)) {
        printf("# skipped: implicit GEMM takes the tiled kernel on this device's profile\n");
        kiln_context_destroy(ctx);
        skip();
    }
    if (ctx->desc.local_mem_bytes > 16384)
        ctx->desc.local_mem_bytes = 16384;
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 64, 9, 9, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.has_bias = 1;
    d.algo = KILN_CONV_IMPLICIT_GEMM;
    assert_true(run_case(ctx, &d, NULL, "3x3 over 64 channels, 16 KiB of local memory"));
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    if (!strstr(info.kernel, "igemm_rows"))
        fail_msg("the layer runs %s, not the row variant", info.kernel);
    kiln_conv2d_plan_destroy(plan);
    kiln_context_destroy(ctx);
}

int main(void)
{
    seed = kt_seed();
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_igemm_parameters_checked));
    kt_add(&tests, cmocka_unit_test(test_igemm_panel_beyond_local_memory));
    kt_add_profiles(&tests, test_profile, NULL);
    return kt_run_with("conv_conformance", &tests, NULL, NULL);
}
