/*
 * The convolution epilogue, y = pool(act(alpha * conv + beta * z + bias)),
 * through the public API against conv_ref.h: a table of switch sets (bias,
 * residual, each activation, the fused pool) on two shapes per algorithm
 * that alternate layouts (one test per set and algorithm), the direct
 * kernel's epilogue on planes narrower than a vector, implicit GEMM's on
 * its row variant in NCHW, and fp16 storage with the residual and the pool
 * (bf16 too on the row variant).
 *
 * Compile budget: each switch set is one build per algorithm, so a set runs
 * on one of the two shapes rather than on both.
 */
#include <stdio.h>

#include "conv_cases.h"

/* Algorithms as bits, for the epilogue table. */
#define B(algo) (1u << (algo))
#define ON_GEMMS (B(KILN_CONV_IMPLICIT_GEMM) | B(KILN_CONV_IM2COL) | B(KILN_CONV_GEMM_1X1))
#define ON_ACTS (B(KILN_CONV_IMPLICIT_GEMM) | B(KILN_CONV_GEMM_1X1))
#define ON_WINO (B(KILN_CONV_WINOGRAD_2X2) | B(KILN_CONV_WINOGRAD_4X4))
#define ON_ALL (ON_GEMMS | ON_WINO | B(KILN_CONV_DIRECT))

/*
 * Switch sets of the epilogue, and the algorithms each runs on where the
 * algorithm applies (cc_applies asks the library: the pool sets run on
 * those with the fused pool, direct and the Winograds). Each set is one
 * kernel build per algorithm: about 0.3 s for implicit GEMM and the GEMM
 * that im2col and GEMM-1x1 share, 1 s for direct and the Winograds. Every
 * algorithm runs the structural cases (residual without bias, bias with
 * residual, pool after the identity and after ReLU); the rows add bias
 * without residual. The activation is one function (cl/common/epilogue.h)
 * that every kernel includes, and what differs per algorithm is only where
 * it is applied, so each activation runs on implicit GEMM, on the GEMM
 * epilogue (through GEMM-1x1; im2col adds only its own unfolding kernel,
 * which has no epilogue) and on one of direct and the Winograds (direct
 * with GELU alone builds for 2.2 s).
 * alpha and beta are run-time values: alpha 8 with ReLU6 drives many outputs
 * past 6 so the clamp is exercised.
 */
static const struct epilogue {
    const char *name;
    int bias;
    float alpha, beta;
    kiln_activation act;
    int pool;
    unsigned algos;
} epilogues[] = {
    {"alpha1.5", 0, 1.5f, 0.0f, KILN_ACT_NONE, 0, ON_GEMMS},
    {"bias alpha1.5", 1, 1.5f, 0.0f, KILN_ACT_NONE, 0, ON_GEMMS | ON_WINO}, /* the rows' define set */
    {"residual", 0, 1.5f, 0.5f, KILN_ACT_NONE, 0, ON_ALL},
    {"bias+residual", 1, 1.5f, 0.5f, KILN_ACT_NONE, 0, ON_GEMMS},
    {"bias+residual relu", 1, 1.5f, 0.5f, KILN_ACT_RELU, 0, ON_ACTS},
    {"bias+residual relu6 alpha8", 1, 8.0f, 0.5f, KILN_ACT_RELU6, 0, ON_ACTS | B(KILN_CONV_DIRECT)},
    {"bias+residual leaky0.1", 1, 1.5f, 0.5f, KILN_ACT_LEAKY_RELU, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_2X2)},
    {"bias+residual sigmoid", 1, 1.5f, 0.5f, KILN_ACT_SIGMOID, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_4X4)},
    {"bias+residual tanh", 1, 1.5f, 0.5f, KILN_ACT_TANH, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_2X2)},
    {"bias+residual gelu", 1, 1.5f, 0.5f, KILN_ACT_GELU, 0, ON_ACTS | B(KILN_CONV_WINOGRAD_4X4)},
    {"bias+residual pool", 1, 1.5f, 0.5f, KILN_ACT_NONE, 1, ON_ALL},
    {"bias+residual relu pool", 1, 1.5f, 0.5f, KILN_ACT_RELU, 1, ON_ALL},
    {"pool", 0, 1.0f, 0.0f, KILN_ACT_NONE, 1, ON_ALL},
};

/* Direct NCHW planes in one row tile with rows narrower than a vector (on
   the CPU profiles): the residual loads clamped into the plane, and the
   plane's last row stores a vector of several rows' values. Every direct
   epilogue runs on one of the two. */
static const struct cc_row plane_shapes[2] = {
    {CONV("3x3 depthwise 7x7 one row tile", NCHW, 1, 128, 7, 7, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128},
    {CONV("3x3 depthwise stride2 14x14 one row tile", NCHW, 1, 128, 14, 14, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128},
};

/* Direct NCHW depthwise over planes of two row tiles of conv.direct.rows
   (16 on the CPU profiles: 20 rows as two tiles of 10), three tiles a row,
   in two images. Every epilogue runs on it. */
static const struct cc_row rows_shape = {CONV("3x3 depthwise 20x24 two row tiles", NCHW, 2, 16, 20, 24, 16, 3, 3),
                                         PAD(1, 1, 1, 1), .groups = 16};

/* Implicit GEMM's row variant in NCHW (strided 3x3 layers of images too
   small for the panel variant's tiles), whose whole tiles store each
   filter's run of pixels from the tile transposed in registers: 49 pixels
   in tiles of 7 (on 8-row tiles), and two images of 36 in tiles of 8, one
   of which spans both. Every implicit-GEMM epilogue runs on one of the
   two. */
static const struct cc_row row_variant_shapes[2] = {
    {CONV("3x3 stride2 7x7 out", NCHW, 1, 32, 14, 14, 64, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 stride2 6x6 out n2", NCHW, 2, 16, 12, 12, 96, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
};

/* An RGB stem in NHWC, whose 27-value filter the row variant compiles in
   (src/ops/conv_igemm.c's ROWS_FIXED_MAX_VOLUME): its tiles inside the
   image and at the padding, in 16-bit storage too. */
static const struct cc_row stem_shape = {CONV("3x3 stride2 pad1 stem", NHWC, 1, 3, 15, 40, 32, 3, 3), PAD(1, 1, 1, 1),
                                         .sh = 2, .sw = 2};

struct epilogue_test {
    const struct epilogue *e;
    const struct cc_row *shape;
    kiln_conv_algo algo;
    char name[192];
};

static kiln_conv2d_desc epilogue_desc(const struct epilogue *e, const struct cc_row *shape, kiln_conv_algo algo)
{
    kiln_conv2d_desc d = cc_desc_of(shape, algo);
    d.has_bias = e->bias;
    d.alpha = e->alpha;
    d.beta = e->beta;
    d.activation = e->act;
    d.leaky_slope = 0.1f;
    d.fused_maxpool = e->pool;
    return d;
}

static void test_epilogue(void **state)
{
    const struct epilogue_test *et = *state;
    kiln_conv2d_desc d = epilogue_desc(et->e, et->shape, et->algo);
    cc_run_case(kt_ctx, &d, et->name);
}

/* fp16 and bf16 with the residual (stored so) on the row variant's NCHW
   shape. */
static void test_row_variant_storage(void **state)
{
    const kiln_dtype dtype = *(const kiln_dtype *)*state;
    kiln_conv2d_desc d = cc_desc_of(&row_variant_shapes[0], KILN_CONV_IMPLICIT_GEMM);
    d.dtype = dtype;
    d.alpha = 1.5f, d.beta = 0.5f;
    d.activation = KILN_ACT_RELU;
    cc_run_case(kt_ctx, &d, dtype == KILN_F16 ? "implicit-gemm f16 row variant" : "implicit-gemm bf16 row variant");
}

/* fp16 and bf16 with the residual (stored so) on the NHWC stem, its filter
   compiled in. Only where implicit GEMM takes the CPU kernel: the tiled one
   (a GPU profile, KILN_CUDA_ROUTES) has no row variant, and its 16-bit
   NHWC builds take POCL more than a minute. */
static void test_stem_storage(void **state)
{
    if (cc_takes_tiled_igemm(kt_ctx))
        skip();
    const kiln_dtype dtype = *(const kiln_dtype *)*state;
    kiln_conv2d_desc d = cc_desc_of(&stem_shape, KILN_CONV_IMPLICIT_GEMM);
    d.dtype = dtype;
    d.alpha = 1.5f, d.beta = 0.5f;
    d.activation = KILN_ACT_RELU;
    cc_run_case(kt_ctx, &d, dtype == KILN_F16 ? "implicit-gemm f16 nhwc stem" : "implicit-gemm bf16 nhwc stem");
}

/* fp16 with the residual (stored as fp16) and the pool, on the algorithms
   that apply to a 3x3, in NCHW (the 3x3 fp16 rows are NHWC): one more define
   set each. */
static void test_f16_epilogue(void **state)
{
    const kiln_conv_algo *algo = *state;
    kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], *algo);
    d.dtype = KILN_F16;
    d.alpha = 1.5f, d.beta = 0.5f;
    d.activation = KILN_ACT_RELU;
    d.fused_maxpool = 1;
    if (!cc_applies(*algo, &d))
        d.fused_maxpool = 0; /* implicit-gemm and im2col have no fused pool */
    char label[96];
    snprintf(label, sizeof label, "%s f16 bias+residual relu%s", cc_algo_name(*algo), d.fused_maxpool ? " pool" : "");
    cc_run_case(kt_ctx, &d, label);
}

/* The residual read from y itself (z is y): every algorithm that applies,
   and AUTO, on the shapes whose tiles overlap or are stored in pieces: the
   epilogue shapes, direct's planes of one row tile (the last row stored as
   a vector ending at the plane's end) and of three tiles a row (the last
   shifted left onto the one before it), the row variant's NCHW and NHWC
   tiles, the panel variant's in-place and gathered tiles, a strided 1x1
   (im2col's flipped GEMM, its last row panel shifted onto the one before
   it) and an NHWC depthwise layer. The "residual" switch set of the table
   (alpha 1.5, beta 0.5). */
static const struct cc_row in_place_shapes[] = {
    {CONV("1x1 21x21 panel tiles", NCHW, 1, 24, 21, 21, 40, 1, 1)},
    {CONV("1x1 stride2 13x13", NCHW, 1, 16, 13, 13, 24, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 depthwise nhwc 9x9", NHWC, 1, 32, 9, 9, 32, 3, 3), PAD(1, 1, 1, 1), .groups = 32},
};

struct in_place_test {
    const struct cc_row *shape;
    kiln_conv_algo algo;
    char name[192];
};

static kiln_conv2d_desc in_place_desc(const struct cc_row *shape, kiln_conv_algo algo)
{
    kiln_conv2d_desc d = epilogue_desc(&epilogues[2], shape, algo);
    d.fused_maxpool = 0;
    return d;
}

static void test_in_place_residual(void **state)
{
    const struct in_place_test *t = *state;
    kiln_conv2d_desc d = in_place_desc(t->shape, t->algo);
    kiln_conv2d_plan *plan = NULL;
    kiln_status st = kiln_conv2d_plan_create(kt_ctx, &d, &plan);
    kt_skip_unsupported_here(kt_ctx, st);
    kt_assert_status(st, KILN_SUCCESS);
    cc_check_plan_in_place(kt_ctx, plan, &d, cc_assert_plan_describes(plan, kt_ctx, t->algo), t->name);
}

static void add_in_place(struct kt_list *tests, const struct cc_row *shape)
{
    for (size_t a = 0; a < CC_ALGOS; a++) {
        kiln_conv2d_desc d = in_place_desc(shape, cc_all_algos[a]);
        if (!cc_applies(cc_all_algos[a], &d))
            continue;
        struct in_place_test t = {shape, cc_all_algos[a], ""};
        snprintf(t.name, sizeof t.name, "%s in-place residual on %s %s n%zu c%zu %zux%zu k%zu",
                 cc_algo_name(cc_all_algos[a]), shape->what, shape->layout == NHWC ? "nhwc" : "nchw", shape->n,
                 shape->c, shape->h, shape->w, shape->k);
        kt_add_copy(tests, test_in_place_residual, &t, sizeof t, "%s", t.name);
    }
}

/* Epilogue e on `shape` under `algo`, if the table runs it there and the
   algorithm applies. */
static void add_epilogue(struct kt_list *tests, const struct epilogue *e, const struct cc_row *shape,
                         kiln_conv_algo algo)
{
    kiln_conv2d_desc d = epilogue_desc(e, shape, algo);
    if (!(e->algos & B(algo)) || !cc_applies(algo, &d))
        return;
    struct epilogue_test et = {e, shape, algo, ""};
    snprintf(et.name, sizeof et.name, "%s epilogue %s on %s %s n%zu c%zu %zux%zu k%zu", cc_algo_name(algo), e->name,
             shape->what, shape->layout == NHWC ? "nhwc" : "nchw", shape->n, shape->c, shape->h, shape->w, shape->k);
    kt_add_copy(tests, test_epilogue, &et, sizeof et, "%s", et.name);
}

int main(void)
{
    struct kt_list tests = {0};
    for (size_t a = 1; a < CC_ALGOS; a++)
        for (size_t i = 0; i < sizeof epilogues / sizeof *epilogues; i++)
            add_epilogue(&tests, &epilogues[i], cc_epilogue_shape(cc_all_algos[a], i % 2), cc_all_algos[a]);
    for (size_t i = 0; i < sizeof epilogues / sizeof *epilogues; i++) {
        add_epilogue(&tests, &epilogues[i], &plane_shapes[i % 2], KILN_CONV_DIRECT);
        add_epilogue(&tests, &epilogues[i], &row_variant_shapes[i % 2], KILN_CONV_IMPLICIT_GEMM);
        add_epilogue(&tests, &epilogues[i], &rows_shape, KILN_CONV_DIRECT);
    }
    static const kiln_dtype storage[] = {KILN_F16, KILN_BF16};
    for (size_t i = 0; i < 2; i++)
        kt_addf(&tests, test_row_variant_storage, &storage[i],
                "implicit-gemm %s epilogue bias+residual relu on %s nchw", i ? "bf16" : "f16",
                row_variant_shapes[0].what);
    for (size_t i = 0; i < 2; i++)
        kt_addf(&tests, test_stem_storage, &storage[i], "implicit-gemm %s epilogue bias+residual relu on %s nhwc",
                i ? "bf16" : "f16", stem_shape.what);
    /* fp16 on the 3x3 shape: every algorithm that applies to it */
    for (size_t a = 1; a < CC_ALGOS; a++) {
        kiln_conv2d_desc d = cc_desc_of(&cc_epilogue_shapes[0][0], cc_all_algos[a]);
        if (cc_applies(cc_all_algos[a], &d))
            kt_addf(&tests, test_f16_epilogue, &cc_all_algos[a],
                    "%s f16 epilogue bias+residual relu (pool where fused) on 3x3 pad1 nchw",
                    cc_algo_name(cc_all_algos[a]));
    }
    for (size_t i = 0; i < 4; i++)
        add_in_place(&tests, &cc_epilogue_shapes[i / 2][i % 2]);
    for (size_t i = 0; i < 2; i++) {
        add_in_place(&tests, &plane_shapes[i]);
        add_in_place(&tests, &row_variant_shapes[i]);
    }
    add_in_place(&tests, &rows_shape);
    add_in_place(&tests, &stem_shape);
    for (size_t i = 0; i < sizeof in_place_shapes / sizeof *in_place_shapes; i++)
        add_in_place(&tests, &in_place_shapes[i]);
    return kt_run("conv_epilogue", &tests);
}
