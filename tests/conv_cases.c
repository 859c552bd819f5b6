#include "conv_cases.h"

#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "ops/conv2d.h"
#include "profiles/profile.h"

const kiln_conv_algo cc_all_algos[CC_ALGOS] = {KILN_CONV_AUTO,        KILN_CONV_IMPLICIT_GEMM, KILN_CONV_IM2COL,
                                               KILN_CONV_DIRECT,      KILN_CONV_GEMM_1X1,      KILN_CONV_WINOGRAD_2X2,
                                               KILN_CONV_WINOGRAD_4X4};

const struct cc_row cc_epilogue_shapes[2][2] = {
    {{CONV("3x3 pad1", NCHW, 2, 8, 9, 11, 12, 3, 3), PAD(1, 1, 1, 1)},
     {CONV("3x3 pad1", NHWC, 1, 12, 8, 8, 40, 3, 3), PAD(1, 1, 1, 1)}},
    {{CONV("1x1", NCHW, 2, 64, 3, 3, 130, 1, 1)}, {CONV("1x1", NHWC, 1, 12, 8, 8, 8, 1, 1)}},
};

const char *cc_algo_name(kiln_conv_algo algo)
{
    static const char *const names[] = {"auto",   "implicit-gemm", "winograd-2x2", "winograd-4x4",
                                        "direct", "im2col",        "gemm-1x1",     "implicit-gemm-mma"};
    return (unsigned)algo < sizeof names / sizeof *names ? names[algo] : "?";
}

/* The library's object for a concrete algorithm; NULL for AUTO. */
static const struct kiln_conv_algorithm *algorithm_of(kiln_conv_algo algo)
{
    static const struct kiln_conv_algorithm *const all[] = {
        &kiln_conv_igemm,     &kiln_conv_im2col, &kiln_conv_gemm1x1,  &kiln_conv_winograd2,
        &kiln_conv_winograd4, &kiln_conv_direct, &kiln_conv_igemm_mma};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]->algo == (int)algo)
            return all[i];
    return NULL;
}

int cc_applies(kiln_conv_algo algo, const kiln_conv2d_desc *d)
{
    struct kiln_conv_shape s;
    if (kiln_conv_shape_of(d, &s) != KILN_SUCCESS)
        return 1;
    const struct kiln_conv_algorithm *a = algorithm_of(algo);
    return !a || !kiln_conv_why_not(a, &s);
}

const struct cc_row *cc_epilogue_shape(kiln_conv_algo algo, size_t layout)
{
    kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][layout], algo);
    return &cc_epilogue_shapes[!cc_applies(algo, &d)][layout];
}

/* plan_create that must succeed, except that an algorithm not written yet
   (UNSUPPORTED, "not implemented") skips the test. */
static kiln_conv2d_plan *plan_or_skip(kiln_context *c, const kiln_conv2d_desc *d)
{
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(c, d, &plan);
    if (st == KILN_ERROR_UNSUPPORTED && strstr(kiln_last_error_detail(), "not implemented")) {
        printf("# skipped: %s\n", kiln_last_error_detail());
        skip();
    }
    kt_skip_unsupported_here(c, st);
    kt_assert_status(st, KILN_SUCCESS);
    assert_non_null(plan);
    return plan;
}

kiln_conv_algo cc_assert_plan_describes(const kiln_conv2d_plan *plan, kiln_context *c, kiln_conv_algo algo)
{
    kiln_conv2d_plan_info info;
    memset(&info, 0, sizeof info);
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    if (algo == KILN_CONV_AUTO)
        assert_true(info.algo > KILN_CONV_AUTO && info.algo <= KILN_CONV_IGEMM_MMA);
    else
        assert_int_equal(info.algo, algo);
    assert_true(info.name[0] && info.kernel[0] && info.profile[0] && info.reason[0]);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(c, &dev), KILN_SUCCESS);
    assert_string_equal(info.profile, dev.profile);
    return info.algo;
}

/* cc_check_plan's body; in_place: y holds z's values and is passed as z. */
static void check_plan(kiln_context *c, kiln_conv2d_plan *plan, const kiln_conv2d_desc *d, kiln_conv_algo algo,
                       const char *label, int in_place)
{
    struct cr_case t;
    cr_case_init(&t, c, d);
    cr_case_fill(&t, &kt_group_seed);
    if (in_place) {
        assert_int_equal(t.len[CR_Z], t.len[CR_Y]);
        kt_assert_status(kiln_buffer_write(t.buf[CR_Y], 0, t.len[CR_Z] * cr_operand_elem_size(&t, CR_Z), t.raw[CR_Z]),
                         KILN_SUCCESS);
        kt_assert_status(
            kiln_conv2d_plan_execute(plan, t.buf[CR_X], t.buf[CR_W], t.buf[CR_BIAS], t.buf[CR_Y], t.buf[CR_Y], NULL),
            KILN_SUCCESS);
    } else
        kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, kiln_conv_algo_tol(algo, t.dims.k_eff), label);
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
}

void cc_check_plan(kiln_context *c, kiln_conv2d_plan *plan, const kiln_conv2d_desc *d, kiln_conv_algo algo,
                   const char *label)
{
    check_plan(c, plan, d, algo, label, 0);
}

void cc_check_plan_in_place(kiln_context *c, kiln_conv2d_plan *plan, const kiln_conv2d_desc *d, kiln_conv_algo algo,
                            const char *label)
{
    check_plan(c, plan, d, algo, label, 1);
}

void cc_run_case(kiln_context *c, const kiln_conv2d_desc *d, const char *label)
{
    kiln_conv2d_plan *plan = plan_or_skip(c, d);
    cc_check_plan(c, plan, d, cc_assert_plan_describes(plan, c, d->algo), label);
}

kiln_conv2d_desc cc_desc_of(const struct cc_row *r, kiln_conv_algo algo)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, (kiln_tensor_layout)r->layout, r->n, r->c, r->h, r->w, r->k, r->r, r->s);
    d.stride_h = r->sh ? r->sh : 1, d.stride_w = r->sw ? r->sw : 1;
    d.pad_top = r->pad[0], d.pad_bottom = r->pad[1], d.pad_left = r->pad[2], d.pad_right = r->pad[3];
    d.dilation_h = r->dh ? r->dh : 1, d.dilation_w = r->dw ? r->dw : 1;
    d.groups = r->groups ? r->groups : 1;
    d.dtype = r->dtype;
    d.fused_maxpool = r->pool;
    d.has_bias = 1;
    d.algo = algo;
    return d;
}

int cc_takes_tiled_igemm(const kiln_context *ctx)
{
    return kiln_profile_params(ctx->profile)->select.conv_igemm_route == KILN_IGEMM_TILED || !ctx->vector_kernels;
}
