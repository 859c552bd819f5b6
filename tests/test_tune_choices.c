/* The tuner's decisions from its measurements, on made-up times (no
   device): where a threshold between two algorithms goes on a ladder of
   sizes (kiln_tune_place), where a class of shapes splits off a group and
   which candidates its parts take (kiln_tune_best_split), the --ops
   list (kiln_tune_parse_ops), and which kept changes the before/after
   table refutes (kiln_tune_refuted, kiln_tune_select_refuted). */
#include "test_util.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "profiles/schema.h"
#include "tune/tune.h"

static const long rows[] = {1, 2, 4, 8, 16, 32, 64};
enum { RUNGS = 7 };

/* The small side's times where it wins on the first `wins` rungs. */
static void ladder(size_t wins, double *small, double *large)
{
    for (size_t i = 0; i < RUNGS; i++) {
        large[i] = 1.0;
        small[i] = i < wins ? 0.5 : 2.0;
    }
}

#define PLACE_MAX(current) kiln_tune_place(1, rows, small, large, RUNGS, (current), 0, 0.03)

static void test_maximum(void **state)
{
    (void)state;
    double small[RUNGS], large[RUNGS];
    ladder(4, small, large); /* small wins up to 8 rows, loses from 16 */
    assert_int_equal(PLACE_MAX(64), 8);
    assert_int_equal(PLACE_MAX(2), 8);
    /* Anywhere from 8 up to 15 splits the ladder there: it stays. */
    assert_int_equal(PLACE_MAX(12), 12);
    assert_int_equal(PLACE_MAX(16), 8);
    ladder(0, small, large); /* never */
    assert_int_equal(PLACE_MAX(8), 0);
    assert_int_equal(PLACE_MAX(0), 0);
    ladder(RUNGS, small, large); /* always, as far as the ladder goes */
    assert_int_equal(PLACE_MAX(8), 64);
    assert_int_equal(PLACE_MAX(1000), 1000);
    /* One rung lost by a little among wins does not move it. */
    ladder(4, small, large);
    small[1] = 1.1;
    assert_int_equal(PLACE_MAX(8), 8);
    assert_int_equal(PLACE_MAX(64), 8);
    /* A gain within min_gain over the rungs leaves it where it is. */
    ladder(4, small, large);
    small[4] = 0.97;
    assert_int_equal(PLACE_MAX(8), 8);
    assert_int_equal(kiln_tune_place(1, rows, small, large, RUNGS, 8, 0, 0.0), 16);
    /* A side that does not apply loses. */
    ladder(RUNGS, small, large);
    small[3] = INFINITY;
    assert_int_equal(PLACE_MAX(64), 4);
}

#define PLACE_MIN(current) kiln_tune_place(0, channels, small, large, 5, (current), 1L << 30, 0.03)

static void test_minimum(void **state)
{
    (void)state;
    const long channels[] = {16, 32, 64, 128, 256};
    double small[5] = {1, 1, 1, 1, 1}, large[5] = {2, 2, 0.5, 0.5, 0.5};
    /* The large side wins from 64 channels on. */
    assert_int_equal(PLACE_MIN(32), 64);
    assert_int_equal(PLACE_MIN(64), 64);
    assert_int_equal(PLACE_MIN(48), 48);
    assert_int_equal(PLACE_MIN(200), 64);
    /* One slow rung at the top does not undo the two before it. */
    large[4] = 3;
    assert_int_equal(PLACE_MIN(32), 64);
    /* It wins nowhere: never. */
    for (int i = 0; i < 5; i++)
        large[i] = 2;
    assert_int_equal(PLACE_MIN(64), 1L << 30);
    /* It wins everywhere. */
    for (int i = 0; i < 5; i++)
        large[i] = 0.5;
    assert_int_equal(PLACE_MIN(64), 16);
    assert_int_equal(PLACE_MIN(8), 8);
}

/* Four shapes along m (16, 64, 512, 2048) and three candidates: the seed,
   one fast on the two small shapes only, one a little faster everywhere. */
static void test_split_along_m(void **state)
{
    (void)state;
    struct kiln_dims dims[4] = {{{0}}};
    const long m[4] = {16, 64, 512, 2048};
    for (int i = 0; i < 4; i++) {
        dims[i].v[KILN_DIM_M] = m[i];
        dims[i].v[KILN_DIM_N] = 1024; /* the same for all: never a split */
    }
    const double ms[3 * 4] = {
        1.0, 1.0, 1.0, 1.0, /* the seed */
        0.4, 0.5, 1.5, 1.5, /* fast on m 16 and 64 */
        0.9, 0.9, 0.8, 0.8, /* a little faster everywhere */
    };
    const int ok[3] = {1, 1, 1};
    const unsigned mask = 1u << KILN_DIM_M | 1u << KILN_DIM_N;
    /* The fast candidate scores best over all four (1.22 against 1.18):
       it is the default, and the large shapes get a class of their own. */
    struct kiln_tune_split sp = kiln_tune_best_split(ms, ok, 3, 4, dims, mask);
    assert_int_equal(sp.dim, KILN_DIM_M);
    assert_int_equal(sp.def, 1);
    assert_int_equal(sp.cls, 2);
    assert_int_equal(sp.lo, 182); /* past sqrt(64 * 512), between the two parts */
    assert_int_equal(sp.hi, LONG_MAX);
    assert_true(!sp.in[0] && !sp.in[1] && sp.in[2] && sp.in[3]);
    double expect = exp((log(1 / 0.4) + log(1 / 0.5) + 2 * log(1 / 0.8)) / 4);
    assert_true(fabs(sp.score - expect) < 1e-12);

    /* With the fast candidate rejected the other is best on every part:
       no split. */
    const int without[3] = {1, 0, 1};
    assert_true(kiln_tune_best_split(ms, without, 3, 4, dims, mask).score == 0.0);

    /* Fast on the large shapes (1.49 over all): the default, and the small
       shapes get the class. */
    const double high[3 * 4] = {1.0, 1.0, 1.0, 1.0, 1.5, 1.5, 0.3, 0.3, 0.9, 0.9, 0.8, 0.8};
    sp = kiln_tune_best_split(high, ok, 3, 4, dims, mask);
    assert_int_equal(sp.def, 1);
    assert_int_equal(sp.cls, 2);
    assert_int_equal(sp.lo, 1);
    assert_int_equal(sp.hi, 181);
    assert_true(sp.in[0] && sp.in[1] && !sp.in[2] && !sp.in[3]);

    /* The same parts along k, farther apart (k 64 and 128 against 4096):
       the split is along k. */
    const long k[4] = {64, 128, 4096, 8192};
    for (int i = 0; i < 4; i++)
        dims[i].v[KILN_DIM_K] = k[i];
    sp = kiln_tune_best_split(high, ok, 3, 4, dims, mask | 1u << KILN_DIM_K);
    assert_int_equal(sp.dim, KILN_DIM_K);
    assert_int_equal(sp.hi, 724); /* sqrt(128 * 4096) */
    sp = kiln_tune_best_split(high, ok, 3, 4, dims, mask);
    assert_int_equal(sp.dim, KILN_DIM_M);

    /* A rejected seed, or a dimension outside the mask: no split. */
    const int no_seed[3] = {0, 1, 1};
    assert_true(kiln_tune_best_split(ms, no_seed, 3, 4, dims, mask).score == 0.0);
    assert_true(kiln_tune_best_split(ms, ok, 3, 4, dims, 1u << KILN_DIM_N).score == 0.0);
}

static void test_ops(void **state)
{
    (void)state;
    unsigned ops;
    assert_int_equal(kiln_tune_parse_ops("gemm", &ops), 0);
    assert_int_equal(ops, 1u << KILN_TUNE_GEMM);
    assert_int_equal(kiln_tune_parse_ops("attention,conv", &ops), 0);
    assert_int_equal(ops, 1u << KILN_TUNE_ATTENTION | 1u << KILN_TUNE_CONV);
    assert_int_equal(kiln_tune_parse_ops("gemm,conv,attention", &ops), 0);
    assert_int_equal(ops, KILN_TUNE_OPS_ALL);
    const char *bad[] = {"", "gemm,", ",gemm", "gemm,,conv", "softmax", "GEMM", "gem", "gemmx"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (kiln_tune_parse_ops(bad[i], &ops) != -1)
            fail_msg("\"%s\" was accepted", bad[i]);
    size_t n;
    const struct kiln_tune_shape *shapes = kiln_tune_shapes(1u << KILN_TUNE_CONV, 0, &n);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(shapes[i].op, KILN_TUNE_CONV);
    for (int gpu = 0; gpu < 2; gpu++) {
        shapes = kiln_tune_shapes(KILN_TUNE_OPS_ALL, gpu, &n);
        assert_true(n <= KILN_TUNE_SHAPES_MAX);
        unsigned seen = 0;
        for (size_t i = 0; i < n; i++) {
            seen |= 1u << shapes[i].op;
            for (size_t j = 0; j < i; j++)
                assert_string_not_equal(shapes[i].name, shapes[j].name);
        }
        assert_int_equal(seen, KILN_TUNE_OPS_ALL);
    }
}

/* The before/after table refutes a kept group's change that makes one of
   its shapes slower than KILN_TUNE_REGRESSION_MAX allows (kiln_tune_refuted):
   only groups among those changed, never a shape of a matched class or
   without a group, and noise within the bound passes. */
static void test_refuted(void **state)
{
    (void)state;
    const double max = KILN_TUNE_REGRESSION_MAX;
    struct kiln_tune_shape_result shapes[] = {
        {.name = "dw 112", .group = "conv.direct", .before_ms = 0.050, .after_ms = 0.040},
        {.name = "dw 14", .group = "conv.direct", .before_ms = 0.009, .after_ms = 0.016},             /* 0.57x */
        {.name = "gemm skinny", .group = "gemm.cpu", .before_ms = 1.00, .after_ms = 1.0 + max * 0.6}, /* noise */
        {.name = "stem", .group = "gemm.cpu:seq", .before_ms = 0.1, .after_ms = 0.5}, /* a matched class */
        {.name = "none", .group = "", .before_ms = 0.1, .after_ms = 0.5},
    };
    const int direct = kiln_param_group_find("conv.direct"), cpu = kiln_param_group_find("gemm.cpu");
    assert_true(direct >= 0 && cpu >= 0);
    const unsigned both = (1u << direct) | (1u << cpu);
    char why[200] = "";
    assert_int_equal(kiln_tune_refuted(shapes, 5, max, both, why, sizeof why), 1u << direct);
    printf("# %s\n", why);
    assert_non_null(strstr(why, "dw 14 0.56x"));
    /* A group not changed is not refuted, whatever its shapes did. */
    assert_int_equal(kiln_tune_refuted(shapes, 5, max, 1u << cpu, why, sizeof why), 0);
    /* Past the bound, the skinny GEMM refutes gemm.cpu too. */
    shapes[2].after_ms = 1.0 + max * 1.2;
    assert_int_equal(kiln_tune_refuted(shapes, 5, max, both, why, sizeof why), both);
}

/* The select thresholds answer for the shapes they moved to another
   kernel, summed (kiln_tune_select_refuted): a layer moved from implicit
   GEMM to the direct kernel at 0.88x refutes them; a move that gains, or
   loses within KILN_TUNE_SELECT_LOSS_MAX over the moved shapes together,
   does not; shapes that kept their kernel, or whose own group's parameters
   changed (which may rename a kernel), are not counted, whatever their
   times; neither are shapes the table did not measure. */
static void test_select_refuted(void **state)
{
    (void)state;
    const double max = KILN_TUNE_SELECT_LOSS_MAX;
    struct kiln_tune_shape_result shapes[] = {
        {.name = "pw 28",
         .group = "gemm.cpu",
         .kernel_before = "conv_f32_igemm",
         .kernel_after = "conv_f32_direct",
         .before_ms = 0.4697,
         .after_ms = 0.5337}, /* 0.88x */
        {.name = "pw 56",
         .group = "gemm.cpu",
         .kernel_before = "conv_f32_igemm",
         .kernel_after = "conv_f32_igemm",
         .before_ms = 0.5,
         .after_ms = 0.9}, /* not moved */
        {.name = "dw 14",
         .group = "conv.direct",
         .kernel_before = "conv_f32_direct",
         .kernel_after = "conv_f32_direct_b",
         .before_ms = 0.01,
         .after_ms = 0.05}, /* renamed by its group */
        {.name = "gemm",
         .group = "gemm.cpu:seq",
         .kernel_before = "",
         .kernel_after = "gemm_f32_smallm",
         .before_ms = 0.1,
         .after_ms = 0.9}, /* not measured before */
    };
    const int direct = kiln_param_group_find("conv.direct");
    assert_true(direct >= 0);
    char why[200] = "";
    assert_int_equal(kiln_tune_select_refuted(shapes, 4, max, 1u << direct, why, sizeof why), 1);
    printf("# %s\n", why);
    assert_non_null(strstr(why, "the 1 shape the thresholds moved to another kernel 0.88x"));
    /* With conv.direct unchanged, the renamed kernel is a move too. */
    assert_int_equal(kiln_tune_select_refuted(shapes, 4, max, 0, why, sizeof why), 1);
    assert_non_null(strstr(why, "the 2 shapes"));
    /* Another moved shape that gains more than the first loses: kept. */
    struct kiln_tune_shape_result gain = {.name = "pw 14",
                                          .group = "gemm.cpu",
                                          .kernel_before = "gemm_f32_cpu_7x64t",
                                          .kernel_after = "conv_f32_igemm",
                                          .before_ms = 0.30,
                                          .after_ms = 0.20};
    struct kiln_tune_shape_result both[] = {shapes[0], gain};
    assert_int_equal(kiln_tune_select_refuted(both, 2, max, 0, why, sizeof why), 0);
    /* A loss within the bound over the moved shapes: kept. */
    shapes[0].after_ms = shapes[0].before_ms * (1.0 + max * 0.8);
    assert_int_equal(kiln_tune_select_refuted(shapes, 4, max, 1u << direct, why, sizeof why), 0);
    assert_int_equal(kiln_tune_select_refuted(shapes, 0, max, 0, why, sizeof why), 0);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_maximum));
    kt_add(&tests, cmocka_unit_test(test_minimum));
    kt_add(&tests, cmocka_unit_test(test_split_along_m));
    kt_add(&tests, cmocka_unit_test(test_ops));
    kt_add(&tests, cmocka_unit_test(test_refuted));
    kt_add(&tests, cmocka_unit_test(test_select_refuted));
    return kt_run("tune_choices", &tests);
}
