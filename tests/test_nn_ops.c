/*
 * Pooling, softmax and activations through the public API against plain-C
 * double references: shape tables run one test per row (named by its shape)
 * on fresh random data with poisoned outputs, in-place runs, events, and a
 * table of bad inputs that must fail with a specific status and a detail,
 * leave their outputs untouched and queue nothing.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_ref.h"
#include "test_util.h"

#define POISON_EVENT ((kiln_event *)(uintptr_t)0x5b5b)
/* Poisoned floats after every output, which must come back unchanged. */
#define GUARD 5

static kiln_context *ctx, *other_ctx;
static uint64_t seed;

static int group_setup(void **state)
{
    (void)state;
    seed = kt_seed();
    if (kiln_context_create(NULL, &ctx) != KILN_SUCCESS)
        return -1;
    return kiln_context_create(NULL, &other_ctx) == KILN_SUCCESS ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    kiln_context_destroy(other_ctx);
    kiln_context_destroy(ctx);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                  */
/* ------------------------------------------------------------------------ */

/* A NaN with a payload no kernel computes. */
static const uint32_t poison_bits = 0x7fc0dea1u;

static float *host_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

/* A buffer of n floats holding `src`, or poison where src is NULL. */
static kiln_buffer *device_floats(kiln_context *c, const float *src, size_t n)
{
    float *tmp = host_floats(n);
    for (size_t i = 0; i < n; i++)
        if (src)
            tmp[i] = src[i];
        else
            memcpy(&tmp[i], &poison_bits, sizeof poison_bits);
    kiln_buffer *b = NULL;
    kt_assert_status(kiln_buffer_create(c, n * sizeof(float), &b), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(b, 0, n * sizeof(float), tmp), KILN_SUCCESS);
    free(tmp);
    return b;
}

static float *read_floats(const kiln_buffer *b, size_t n)
{
    float *p = host_floats(n);
    kt_assert_status(kiln_buffer_read(b, 0, n * sizeof(float), p), KILN_SUCCESS);
    return p;
}

/* Floats [from, to) of got still hold the poison. */
static void assert_poison_range(const float *got, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        uint32_t bits;
        memcpy(&bits, &got[i], sizeof bits);
        if (bits != poison_bits)
            fail_msg("element %zu was written (%g) but should hold the poison", i, (double)got[i]);
    }
}

static void assert_still_poisoned(const kiln_buffer *b, size_t n)
{
    float *got = read_floats(b, n);
    assert_poison_range(got, 0, n);
    free(got);
}

/* got[i] within abs_tol[i] of want[i] for i < n, and the GUARD floats after
   them still poisoned. */
static void assert_close(const float *got, const double *want, const double *tol, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol[i]))
            fail_msg("%s: element %zu is %.9g, the reference %.9g (tolerance %.3g)", what, i, (double)got[i], want[i],
                     tol[i]);
    assert_poison_range(got, n, n + GUARD);
}

/* ------------------------------------------------------------------------ */
/* Pooling                                                                  */
/* ------------------------------------------------------------------------ */

struct pool_row {
    const char *what;
    kiln_tensor_layout layout;
    size_t n, c, h, w;
    size_t wh, ww, sh, sw;
    size_t pt, pb, pl, pr;
    kiln_pool_mode mode;
    int count_pad;
};

#define NCHW KILN_NCHW
#define NHWC KILN_NHWC
#define MAX KILN_POOL_MAX
#define AVG KILN_POOL_AVG

static const struct pool_row pool_rows[] = {
    {"max 2x2/2", NCHW, 1, 3, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, MAX, 0},
    {"max 2x2/2 odd", NHWC, 2, 5, 9, 7, 2, 2, 2, 2, 0, 0, 0, 0, MAX, 0},
    {"max 2x2/1", NCHW, 1, 4, 6, 5, 2, 2, 1, 1, 0, 0, 0, 0, MAX, 0},
    {"max 3x3/2 pad 1", NCHW, 2, 5, 13, 11, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0},
    {"max 3x3/2 pad 1", NHWC, 2, 5, 13, 11, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0},
    {"max 3x3/1 pad 1", NHWC, 1, 16, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, MAX, 0},
    {"max 3x3/2 asymmetric pad", NCHW, 1, 3, 10, 9, 3, 3, 2, 2, 0, 2, 1, 0, MAX, 0},
    {"max global", NCHW, 2, 7, 5, 6, 5, 6, 1, 1, 0, 0, 0, 0, MAX, 0},
    {"avg 2x2/2", NCHW, 1, 3, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, AVG, 0},
    {"avg 2x2/2 odd", NHWC, 3, 7, 9, 7, 2, 2, 2, 2, 0, 0, 0, 0, AVG, 0},
    {"avg 3x3/1 pad 1", NCHW, 2, 4, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 0},
    {"avg 3x3/1 pad 1 count-pad", NCHW, 2, 4, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 1},
    {"avg 3x3/2 pad 1", NHWC, 1, 6, 11, 12, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 0},
    {"avg 3x3/2 pad 1 count-pad", NHWC, 1, 6, 11, 12, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 1},
    {"avg 3x3/2 asymmetric pad", NCHW, 1, 5, 9, 10, 3, 3, 2, 2, 2, 0, 0, 1, AVG, 0},
    {"avg 3x3/2 asymmetric pad count-pad", NHWC, 1, 5, 9, 10, 3, 3, 2, 2, 2, 0, 0, 1, AVG, 1},
    {"avg 2x3/1x2 non-square", NCHW, 1, 3, 8, 11, 2, 3, 1, 2, 1, 0, 2, 1, AVG, 1},
    {"avg global 7x7", NCHW, 2, 64, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, AVG, 0},
    {"avg global 7x7", NHWC, 1, 1024, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, AVG, 0},
    {"avg global 13x17", NHWC, 3, 5, 13, 17, 13, 17, 1, 1, 0, 0, 0, 0, AVG, 0},
    {"max 1x1/2 subsample", NHWC, 1, 3, 7, 8, 1, 1, 2, 2, 0, 0, 0, 0, MAX, 0},
    {"max window 5x5/3 pad 2", NCHW, 1, 2, 17, 16, 5, 5, 3, 3, 2, 2, 2, 2, MAX, 0},
    /* NCHW row tiles (cl/common/window.h) with the CPU profiles' vector of 8
       and work-groups of 64. Rows wide enough for interior tiles: stride 2
       takes the window's columns out of one load of 2 * 8 (3 and 5 wide).
       Output rows of 24, where no tile overlaps an interior one, and of 19
       and 20, where the last tile of a row overlaps its neighbour. */
    {"max 3x3/2 pad 1 wide", NCHW, 1, 4, 48, 47, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0},
    {"avg 3x3/2 pad 1 wide", NCHW, 2, 3, 48, 48, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 0},
    {"avg 3x3/2 pad 1 wide, last tile shifted", NCHW, 2, 3, 40, 37, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 0},
    {"avg 3x3/2 pad 1 wide count-pad", NCHW, 2, 3, 40, 37, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 1},
    {"max 5x5/2 pad 2 wide", NCHW, 1, 3, 48, 48, 5, 5, 2, 2, 2, 2, 2, 2, MAX, 0},
    {"avg 5x5/2 pad 2 wide", NCHW, 1, 3, 48, 48, 5, 5, 2, 2, 2, 2, 2, 2, AVG, 0},
    {"avg 3x3/1 pad 1 wide", NCHW, 1, 3, 21, 35, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 0},
    /* 512 planes of at most 16 rows: one row tile per plane; rows narrower
       than a vector load clamped into the plane and the last row stores a
       vector of several rows' values. */
    {"max 3x3/1 pad 1 one row tile", NCHW, 1, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, MAX, 0},
    {"avg 3x3/2 pad 1 one row tile", NCHW, 1, 512, 14, 14, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 0},
    {"avg 3x3/1 pad 1 one row tile 5x6", NCHW, 2, 256, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 0},
    {"avg 3x3/1 pad 1 one row tile count-pad", NCHW, 1, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 1},
    {"avg 11x11/2 pad 5 one row tile", NCHW, 1, 512, 16, 16, 11, 11, 2, 2, 5, 5, 5, 5, AVG, 0},
    /* Global pooling a plane per work-item: tails of 1, of all of a plane
       under a vector, and none. */
    {"max global 2x3", NCHW, 2, 7, 2, 3, 2, 3, 1, 1, 0, 0, 0, 0, MAX, 0},
    {"avg global 4x4", NCHW, 1, 9, 4, 4, 4, 4, 1, 1, 0, 0, 0, 0, AVG, 0},
    {"avg 3x3/1 pad 1 on 3x3 count-pad", NCHW, 1, 5, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 1},
    /* NHWC: three vectors of channels. */
    {"avg 3x3/2 pad 1", NHWC, 2, 24, 9, 9, 3, 3, 2, 2, 1, 1, 1, 1, AVG, 0},
    {"max 3x3/2 pad 1 count-pad", NHWC, 1, 24, 9, 9, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 1},
    /* ResNet-50's pool1 and pool5. */
    {"max 3x3/2 pad 1 resnet pool1", NCHW, 1, 64, 112, 112, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0},
    {"avg global 7x7 resnet pool5", NCHW, 1, 2048, 7, 7, 7, 7, 1, 1, 0, 0, 0, 0, AVG, 0},
};
enum { POOL_ROWS = sizeof pool_rows / sizeof *pool_rows };

static kiln_pool2d_desc pool_desc_of(const struct pool_row *r)
{
    kiln_pool2d_desc d;
    memset(&d, 0, sizeof d);
    d.layout = r->layout;
    d.n = r->n, d.c = r->c, d.h = r->h, d.w = r->w;
    d.window_h = r->wh, d.window_w = r->ww, d.stride_h = r->sh, d.stride_w = r->sw;
    d.pad_top = r->pt, d.pad_bottom = r->pb, d.pad_left = r->pl, d.pad_right = r->pr;
    d.mode = r->mode;
    d.count_include_pad = r->count_pad;
    return d;
}

/* Run a pool row on context c; with `event`, through an event waited on. */
static void run_pool_on(kiln_context *c, const struct pool_row *r, int event)
{
    kiln_pool2d_desc d = pool_desc_of(r);
    size_t yh = 0, yw = 0;
    kt_assert_status(kiln_pool2d_output_size(&d, &yh, &yw), KILN_SUCCESS);
    assert_int_equal(yh, (r->h + r->pt + r->pb - r->wh) / r->sh + 1);
    assert_int_equal(yw, (r->w + r->pl + r->pr - r->ww) / r->sw + 1);
    size_t nx = r->n * r->c * r->h * r->w, ny = r->n * r->c * yh * yw;
    float *x = host_floats(nx);
    kt_fill_uniform(x, nx, -1.0f, 1.0f, &seed);
    double *want = malloc(ny * sizeof *want), *tol = malloc(ny * sizeof *tol);
    assert_true(want && tol);
    nr_pool_reference(&d, yh, yw, x, want, tol);
    kiln_buffer *bx = device_floats(c, x, nx), *by = device_floats(c, NULL, ny + GUARD);
    kiln_event *ev = POISON_EVENT;
    kiln_status st = kiln_pool2d(c, &d, bx, by, event ? &ev : NULL);
    if (kt_unsupported_here(c, st)) {
        kiln_buffer_destroy(bx), kiln_buffer_destroy(by), free(x), free(want), free(tol);
        skip();
    }
    kt_assert_status(st, KILN_SUCCESS);
    if (event) {
        assert_true(ev != NULL && ev != POISON_EVENT);
        kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
        kiln_event_destroy(ev);
    }
    float *got = read_floats(by, ny + GUARD);
    assert_close(got, want, tol, ny, r->what);
    free(got), free(x), free(want), free(tol);
    kiln_buffer_destroy(bx), kiln_buffer_destroy(by);
}

static void run_pool(const struct pool_row *r, int event) { run_pool_on(ctx, r, event); }

static void test_pool_row(void **state) { run_pool(*state, 0); }

static void test_pool_event(void **state)
{
    (void)state;
    run_pool(&pool_rows[3], 1);
}

/* Planes of one row tile, narrower than a vector of 16 (stride 1) or of
   32 columns (stride 2), under the profile's util.vw set to 16: where the
   compiler targets AVX-512, their rows are read with the lanes outside the
   row masked (common/window.h's row_load and row_taps), which the CPU
   profiles' vectors of 8 never reach. */
static void test_pool_narrow_planes_vw16(void **state)
{
    (void)state;
    static const struct pool_row rows[] = {
        {"max 3x3/1 pad 1 14x14, vw 16", NCHW, 1, 128, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, MAX, 0},
        {"avg 3x3/1 pad 1 14x14 count-pad, vw 16", NCHW, 1, 128, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, AVG, 1},
        {"max 3x3/1 pad 2,0 13x11, vw 16", NCHW, 2, 64, 13, 11, 3, 3, 1, 1, 2, 0, 2, 0, MAX, 0},
        {"avg 2x3/1 pad 1 9x15, vw 16", NCHW, 1, 128, 9, 15, 2, 3, 1, 1, 1, 0, 1, 1, AVG, 0},
        {"max 3x3/2 pad 1 28x28, vw 16", NCHW, 1, 128, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0},
        {"avg 5x5/2 pad 2 30x29 count-pad, vw 16", NCHW, 2, 64, 30, 29, 5, 5, 2, 2, 2, 2, 2, 2, AVG, 1},
        {"max 4x4/2 pad 0,3 20x25, vw 16", NCHW, 1, 128, 20, 25, 4, 4, 2, 2, 0, 0, 0, 3, MAX, 0},
        /* 16 output columns, the last lane's further taps inside the row. */
        {"max 3x3/2 pad 1 32x32, vw 16", NCHW, 1, 128, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0},
        {"avg 5x5/2 pad 2 18x32, vw 16", NCHW, 1, 128, 18, 32, 5, 5, 2, 2, 2, 2, 2, 2, AVG, 0},
    };
    /* Work-groups of 16: one row tile a plane from 128 planes on
       (src/ops/row_tiling.c). */
    kiln_context *c = kt_overlay_context("{\"kernels\": {\"util\": {\"vw\": 16, \"wg\": 16}}}");
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        run_pool_on(c, &rows[i], 0);
    kiln_context_destroy(c);
}

/* ------------------------------------------------------------------------ */
/* Softmax                                                                  */
/* ------------------------------------------------------------------------ */

struct softmax_row {
    const char *what;
    size_t outer, dim, inner;
    float lo, hi; /* logits uniform in [lo, hi) */
    int in_place;
    float column_step; /* added to column j's logits j times: a maximum
                          taken over another column's values is then far
                          off, and its exps overflow or vanish */
};

static const struct softmax_row softmax_rows[] = {
    {"single", 1, 1, 1, -1.0f, 1.0f, 0, 0.0f},
    {"dim 1", 3, 1, 5, -4.0f, 4.0f, 0, 0.0f},
    {"row of 10", 1, 10, 1, -3.0f, 3.0f, 0, 0.0f},
    {"rows of 37", 3, 37, 1, -5.0f, 5.0f, 0, 0.0f}, /* vectors and a tail, rows unaligned to a vector */
    {"classifier 1000", 4, 1000, 1, -8.0f, 8.0f, 0, 0.0f},
    {"inner", 3, 7, 5, -4.0f, 4.0f, 0, 0.0f},
    {"channels of 7x7", 2, 64, 49, -4.0f, 4.0f, 0, 0.0f},
    {"in place", 5, 33, 17, -4.0f, 4.0f, 1, 0.0f},
    {"in place 1000", 2, 1000, 1, -8.0f, 8.0f, 1, 0.0f},
    {"logits near 1000", 3, 1000, 1, 990.0f, 1010.0f, 0, 0.0f},
    {"logits near -1000", 2, 100, 3, -1010.0f, -990.0f, 0, 0.0f},
    {"logits near 1000 in place", 2, 37, 4, 995.0f, 1005.0f, 1, 0.0f},
    {"equal logits", 2, 50, 2, 3.0f, 3.0f, 0, 0.0f},
    {"columns 300 apart", 2, 50, 3, -4.0f, 4.0f, 0, 300.0f},
    {"contiguous columns 300 apart", 3, 40, 1, -4.0f, 4.0f, 0, 300.0f},
    {"80 columns 300 apart", 2, 20, 40, -4.0f, 4.0f, 0, 300.0f}, /* more columns than a work-group */
};
enum { SOFTMAX_ROWS = sizeof softmax_rows / sizeof *softmax_rows };

static void run_softmax(const struct softmax_row *r, int event)
{
    const size_t n = r->outer * r->dim * r->inner;
    /* x is followed by GUARD poisoned floats, so in place checks them too. */
    float *x = host_floats(n + GUARD);
    if (r->lo == r->hi)
        for (size_t i = 0; i < n; i++)
            x[i] = r->lo;
    else
        kt_fill_uniform(x, n, r->lo, r->hi, &seed);
    for (size_t i = 0; i < n; i++) /* column (outer, inner) of element i */
        x[i] += r->column_step * (float)(i / (r->dim * r->inner) * r->inner + i % r->inner);
    for (size_t i = n; i < n + GUARD; i++)
        memcpy(&x[i], &poison_bits, sizeof poison_bits);
    double *want = malloc(n * sizeof *want), *tol = malloc(n * sizeof *tol);
    assert_true(want && tol);
    nr_softmax_reference(r->outer, r->dim, r->inner, x, want, tol);
    kiln_buffer *bx = device_floats(ctx, x, n + GUARD);
    kiln_buffer *by = r->in_place ? bx : device_floats(ctx, NULL, n + GUARD);
    kiln_event *ev = POISON_EVENT;
    kt_assert_status(kiln_softmax(ctx, r->outer, r->dim, r->inner, bx, by, event ? &ev : NULL), KILN_SUCCESS);
    if (event) {
        assert_true(ev != NULL && ev != POISON_EVENT);
        kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
        kiln_event_destroy(ev);
    }
    float *got = read_floats(by, n + GUARD);
    assert_close(got, want, tol, n, r->what);
    if (!r->in_place) { /* x is an input: unchanged */
        float *back = read_floats(bx, n);
        assert_memory_equal(back, x, n * sizeof *x);
        free(back);
    }
    free(got), free(x), free(want), free(tol);
    if (by != bx)
        kiln_buffer_destroy(by);
    kiln_buffer_destroy(bx);
}

static void test_softmax_row(void **state) { run_softmax(*state, 0); }

static void test_softmax_event(void **state)
{
    (void)state;
    run_softmax(&softmax_rows[4], 1);
}

/* ------------------------------------------------------------------------ */
/* Activations                                                              */
/* ------------------------------------------------------------------------ */

struct act_row {
    kiln_activation act;
    int in_place;
};

static const char *const act_names[] = {"none", "relu", "relu6", "leaky-relu", "sigmoid", "tanh", "gelu"};
enum { ACTS = sizeof act_names / sizeof *act_names };

/* Element count: not a multiple of any work-group size. */
#define ACT_COUNT 4099

static void run_activation(const struct act_row *r, int event)
{
    /* Only leaky ReLU reads the slope; the others must ignore it. */
    const float slope = r->act == KILN_ACT_LEAKY_RELU ? 0.1f : 7.0f;
    float *x = host_floats(ACT_COUNT + GUARD);
    kt_fill_uniform(x, ACT_COUNT, -8.0f, 8.0f, &seed);
    for (size_t i = ACT_COUNT; i < ACT_COUNT + GUARD; i++)
        memcpy(&x[i], &poison_bits, sizeof poison_bits);
    double want[ACT_COUNT], tol[ACT_COUNT];
    nr_activation_reference(r->act, slope, ACT_COUNT, x, want, tol);
    kiln_buffer *bx = device_floats(ctx, x, ACT_COUNT + GUARD);
    kiln_buffer *by = r->in_place ? bx : device_floats(ctx, NULL, ACT_COUNT + GUARD);
    kiln_event *ev = POISON_EVENT;
    kt_assert_status(kiln_activation_forward(ctx, r->act, slope, ACT_COUNT, bx, by, event ? &ev : NULL), KILN_SUCCESS);
    if (event) {
        assert_true(ev != NULL && ev != POISON_EVENT);
        kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
        kiln_event_destroy(ev);
    }
    float *got = read_floats(by, ACT_COUNT + GUARD);
    assert_close(got, want, tol, ACT_COUNT, act_names[r->act]);
    free(got), free(x);
    if (by != bx)
        kiln_buffer_destroy(by);
    kiln_buffer_destroy(bx);
}

static void test_activation_row(void **state) { run_activation(*state, 0); }

static void test_activation_event(void **state)
{
    (void)state;
    static const struct act_row r = {KILN_ACT_GELU, 0};
    run_activation(&r, 1);
}

/* ------------------------------------------------------------------------ */
/* Bad inputs: a specific status, a detail, nothing written                 */
/* ------------------------------------------------------------------------ */

enum bad_kind {
    B_NULL_CTX,
    B_NULL_DESC,
    B_NULL_X,
    B_NULL_Y,
    B_ZERO_N,
    B_ZERO_C,
    B_ZERO_H,
    B_ZERO_W,
    B_ZERO_WINDOW_H,
    B_ZERO_WINDOW_W,
    B_ZERO_STRIDE_H,
    B_ZERO_STRIDE_W,
    B_PAD_TOP,
    B_PAD_RIGHT,
    B_WINDOW_TOO_BIG,
    B_LAYOUT,
    B_MODE,
    B_HUGE_DIM,
    B_OVERFLOW,
    B_ZERO_OUTER,
    B_ZERO_DIM,
    B_ZERO_INNER,
    B_ZERO_COUNT,
    B_ACT_HIGH,
    B_ACT_NEGATIVE,
    B_SHORT_X,
    B_SHORT_Y,
    B_OTHER_CTX_X,
    B_OTHER_CTX_Y,
    B_Y_IS_X,
};

enum op { POOL, SOFTMAX, ACTIVATION };

static const struct bad {
    const char *name;
    enum op op;
    enum bad_kind kind;
    kiln_status want;
} bads[] = {
    {"NULL context", POOL, B_NULL_CTX, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL descriptor", POOL, B_NULL_DESC, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL x", POOL, B_NULL_X, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL y", POOL, B_NULL_Y, KILN_ERROR_INVALID_ARGUMENT},
    {"n = 0", POOL, B_ZERO_N, KILN_ERROR_INVALID_ARGUMENT},
    {"c = 0", POOL, B_ZERO_C, KILN_ERROR_INVALID_ARGUMENT},
    {"h = 0", POOL, B_ZERO_H, KILN_ERROR_INVALID_ARGUMENT},
    {"w = 0", POOL, B_ZERO_W, KILN_ERROR_INVALID_ARGUMENT},
    {"window_h = 0", POOL, B_ZERO_WINDOW_H, KILN_ERROR_INVALID_ARGUMENT},
    {"window_w = 0", POOL, B_ZERO_WINDOW_W, KILN_ERROR_INVALID_ARGUMENT},
    {"stride_h = 0", POOL, B_ZERO_STRIDE_H, KILN_ERROR_INVALID_ARGUMENT},
    {"stride_w = 0", POOL, B_ZERO_STRIDE_W, KILN_ERROR_INVALID_ARGUMENT},
    {"pad_top = window_h", POOL, B_PAD_TOP, KILN_ERROR_INVALID_ARGUMENT},
    {"pad_right = window_w", POOL, B_PAD_RIGHT, KILN_ERROR_INVALID_ARGUMENT},
    {"window larger than the padded input", POOL, B_WINDOW_TOO_BIG, KILN_ERROR_INVALID_ARGUMENT},
    {"layout out of range", POOL, B_LAYOUT, KILN_ERROR_INVALID_ARGUMENT},
    {"mode out of range", POOL, B_MODE, KILN_ERROR_INVALID_ARGUMENT},
    {"dimension above INT_MAX / 4", POOL, B_HUGE_DIM, KILN_ERROR_UNSUPPORTED},
    {"tensor size overflows", POOL, B_OVERFLOW, KILN_ERROR_OUT_OF_BOUNDS},
    {"x one float short", POOL, B_SHORT_X, KILN_ERROR_OUT_OF_BOUNDS},
    {"y one float short", POOL, B_SHORT_Y, KILN_ERROR_OUT_OF_BOUNDS},
    {"x of another context", POOL, B_OTHER_CTX_X, KILN_ERROR_INVALID_ARGUMENT},
    {"y of another context", POOL, B_OTHER_CTX_Y, KILN_ERROR_INVALID_ARGUMENT},
    {"y is x", POOL, B_Y_IS_X, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL context", SOFTMAX, B_NULL_CTX, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL x", SOFTMAX, B_NULL_X, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL y", SOFTMAX, B_NULL_Y, KILN_ERROR_INVALID_ARGUMENT},
    {"outer = 0", SOFTMAX, B_ZERO_OUTER, KILN_ERROR_INVALID_ARGUMENT},
    {"dim = 0", SOFTMAX, B_ZERO_DIM, KILN_ERROR_INVALID_ARGUMENT},
    {"inner = 0", SOFTMAX, B_ZERO_INNER, KILN_ERROR_INVALID_ARGUMENT},
    {"size overflows", SOFTMAX, B_OVERFLOW, KILN_ERROR_OUT_OF_BOUNDS},
    {"x one float short", SOFTMAX, B_SHORT_X, KILN_ERROR_OUT_OF_BOUNDS},
    {"y one float short", SOFTMAX, B_SHORT_Y, KILN_ERROR_OUT_OF_BOUNDS},
    {"x of another context", SOFTMAX, B_OTHER_CTX_X, KILN_ERROR_INVALID_ARGUMENT},
    {"y of another context", SOFTMAX, B_OTHER_CTX_Y, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL context", ACTIVATION, B_NULL_CTX, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL x", ACTIVATION, B_NULL_X, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL y", ACTIVATION, B_NULL_Y, KILN_ERROR_INVALID_ARGUMENT},
    {"count = 0", ACTIVATION, B_ZERO_COUNT, KILN_ERROR_INVALID_ARGUMENT},
    {"activation 7", ACTIVATION, B_ACT_HIGH, KILN_ERROR_INVALID_ARGUMENT},
    {"activation -1", ACTIVATION, B_ACT_NEGATIVE, KILN_ERROR_INVALID_ARGUMENT},
    {"size overflows", ACTIVATION, B_OVERFLOW, KILN_ERROR_OUT_OF_BOUNDS},
    {"x one float short", ACTIVATION, B_SHORT_X, KILN_ERROR_OUT_OF_BOUNDS},
    {"y one float short", ACTIVATION, B_SHORT_Y, KILN_ERROR_OUT_OF_BOUNDS},
    {"x of another context", ACTIVATION, B_OTHER_CTX_X, KILN_ERROR_INVALID_ARGUMENT},
    {"y of another context", ACTIVATION, B_OTHER_CTX_Y, KILN_ERROR_INVALID_ARGUMENT},
};
enum { BADS = sizeof bads / sizeof *bads };

/* The valid base case of each operator: a 2x3x6x5 max pool 3x3/2 with
   padding 1 (output 3x3), a 4x7x3 softmax, 60 ReLU6 activations. */
static const struct pool_row bad_pool_base = {"bad", NCHW, 2, 3, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, MAX, 0};
enum { BAD_POOL_X = 2 * 3 * 6 * 5, BAD_POOL_Y = 2 * 3 * 3 * 3, BAD_SOFTMAX = 4 * 7 * 3, BAD_ACT = 60 };

static void test_bad(void **state)
{
    const struct bad *b = *state;
    const size_t nx = b->op == POOL ? BAD_POOL_X : b->op == SOFTMAX ? BAD_SOFTMAX : BAD_ACT;
    const size_t ny = b->op == POOL ? BAD_POOL_Y : nx;
    /* Exact-fit buffers of random x and poisoned y, then the one thing the
       row gets wrong. */
    float *xv = host_floats(nx);
    kt_fill_uniform(xv, nx, -1.0f, 1.0f, &seed);
    kiln_context *xctx = b->kind == B_OTHER_CTX_X ? other_ctx : ctx;
    kiln_context *yctx = b->kind == B_OTHER_CTX_Y ? other_ctx : ctx;
    kiln_buffer *bx = device_floats(xctx, xv, nx - (b->kind == B_SHORT_X));
    kiln_buffer *by = device_floats(yctx, NULL, ny - (b->kind == B_SHORT_Y));
    const kiln_buffer *x = b->kind == B_NULL_X ? NULL : bx;
    kiln_buffer *y = b->kind == B_NULL_Y ? NULL : b->kind == B_Y_IS_X ? bx : by;
    kiln_context *c = b->kind == B_NULL_CTX ? NULL : ctx;
    kiln_event *ev = POISON_EVENT;
    kiln_status st;
    if (b->op == POOL) {
        kiln_pool2d_desc d = pool_desc_of(&bad_pool_base);
        switch (b->kind) {
        case B_ZERO_N:
            d.n = 0;
            break;
        case B_ZERO_C:
            d.c = 0;
            break;
        case B_ZERO_H:
            d.h = 0;
            break;
        case B_ZERO_W:
            d.w = 0;
            break;
        case B_ZERO_WINDOW_H:
            d.window_h = 0;
            break;
        case B_ZERO_WINDOW_W:
            d.window_w = 0;
            break;
        case B_ZERO_STRIDE_H:
            d.stride_h = 0;
            break;
        case B_ZERO_STRIDE_W:
            d.stride_w = 0;
            break;
        case B_PAD_TOP:
            d.pad_top = d.window_h;
            break;
        case B_PAD_RIGHT:
            d.pad_right = d.window_w;
            break;
        case B_WINDOW_TOO_BIG:
            d.window_h = d.h + d.pad_top + d.pad_bottom + 1, d.pad_top = d.pad_bottom = 0;
            break;
        case B_LAYOUT:
            d.layout = (kiln_tensor_layout)2;
            break;
        case B_MODE:
            d.mode = (kiln_pool_mode)2;
            break;
        case B_HUGE_DIM:
            d.c = (size_t)INT_MAX / 4 + 1;
            break;
        case B_OVERFLOW:
            d.n = d.c = d.h = d.w = (size_t)INT_MAX / 4;
            d.window_h = d.window_w = 1;
            d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 0;
            break;
        default:
            break;
        }
        st = kiln_pool2d(c, b->kind == B_NULL_DESC ? NULL : &d, x, y, &ev);
        if (b->kind != B_NULL_DESC && b->kind >= B_ZERO_N && b->kind <= B_HUGE_DIM) {
            /* output_size judges the descriptor alike and writes nothing */
            size_t yh = 12345, yw = 54321;
            kt_assert_status(kiln_pool2d_output_size(&d, &yh, &yw), b->want);
            assert_int_equal(yh, 12345);
            assert_int_equal(yw, 54321);
        }
    } else if (b->op == SOFTMAX) {
        size_t outer = 4, dim = 7, inner = 3;
        switch (b->kind) {
        case B_ZERO_OUTER:
            outer = 0;
            break;
        case B_ZERO_DIM:
            dim = 0;
            break;
        case B_ZERO_INNER:
            inner = 0;
            break;
        case B_OVERFLOW:
            outer = SIZE_MAX / 2, dim = 3;
            break;
        default:
            break;
        }
        st = kiln_softmax(c, outer, dim, inner, x, y, &ev);
    } else {
        kiln_activation act = KILN_ACT_RELU6;
        size_t count = BAD_ACT;
        switch (b->kind) {
        case B_ZERO_COUNT:
            count = 0;
            break;
        case B_ACT_HIGH:
            act = (kiln_activation)7;
            break;
        case B_ACT_NEGATIVE:
            act = (kiln_activation)-1;
            break;
        case B_OVERFLOW:
            count = SIZE_MAX / 2;
            break;
        default:
            break;
        }
        st = kiln_activation_forward(c, act, 0.1f, count, x, y, &ev);
    }
    kt_assert_status(st, b->want);
    assert_ptr_equal(ev, POISON_EVENT);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    assert_still_poisoned(by, ny - (b->kind == B_SHORT_Y));
    float *back = read_floats(bx, nx - (b->kind == B_SHORT_X)); /* x untouched too (y may be x) */
    assert_memory_equal(back, xv, (nx - (b->kind == B_SHORT_X)) * sizeof *xv);
    free(back), free(xv);
    kiln_buffer_destroy(bx), kiln_buffer_destroy(by);
}

static void test_pool_output_size_null(void **state)
{
    (void)state;
    kt_assert_status(kiln_pool2d_output_size(NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_pool2d_desc d = pool_desc_of(&bad_pool_base);
    size_t yh = 0;
    kt_assert_status(kiln_pool2d_output_size(&d, &yh, NULL), KILN_SUCCESS);
    assert_int_equal(yh, 3);
}

/* ------------------------------------------------------------------------ */

int main(void)
{
    static const char *const op_names[] = {"pool2d", "softmax", "activation"};
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_pool_event));
    kt_add(&tests, cmocka_unit_test(test_pool_narrow_planes_vw16));
    kt_add(&tests, cmocka_unit_test(test_softmax_event));
    kt_add(&tests, cmocka_unit_test(test_activation_event));
    kt_add(&tests, cmocka_unit_test(test_pool_output_size_null));
    for (size_t i = 0; i < POOL_ROWS; i++) {
        const struct pool_row *r = &pool_rows[i];
        kt_addf(&tests, test_pool_row, r, "pool2d %s %s %zux%zux%zux%zu", r->what, r->layout == NHWC ? "NHWC" : "NCHW",
                r->n, r->c, r->h, r->w);
    }
    for (size_t i = 0; i < SOFTMAX_ROWS; i++) {
        const struct softmax_row *r = &softmax_rows[i];
        kt_addf(&tests, test_softmax_row, r, "softmax %s %zux%zux%zu", r->what, r->outer, r->dim, r->inner);
    }
    for (size_t i = 0; i < 2 * ACTS; i++) {
        const struct act_row r = {(kiln_activation)(i / 2), (int)(i % 2)};
        kt_add_copy(&tests, test_activation_row, &r, sizeof r, "activation %s%s", act_names[i / 2],
                    i % 2 ? " in place" : "");
    }
    for (size_t i = 0; i < BADS; i++)
        kt_addf(&tests, test_bad, &bads[i], "bad %s: %s", op_names[bads[i].op], bads[i].name);
    return kt_run_with("nn_ops", &tests, group_setup, group_teardown);
}
