/*
 * The kernels a program holds: a plan builds its programs for the kernels
 * it launches only (kiln_options_only, KILN_WANTS in
 * cl/common/portability.h), so that no kernel it never runs is compiled.
 * Plans of the kinds that use sources of several kernels (GEMM on the
 * register tile and the small-M kernels, direct, Winograd and implicit-GEMM
 * convolution, naive attention in fp32 and fp16, pooling, softmax) are
 * created on the default device; then every program in the context's cache
 * that was built for named kernels is checked: each kernel its options
 * name is in it, and each other kernel its source guards is not. Which
 * plans leave kernels out depends on the device's choices, so the test
 * asks that some program did, wherever a plan took a source of several
 * kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "jit/program_cache.h"
#include "kiln/kiln_attention.h"
#include "kiln/kiln_nn.h"
#include "ops/plan.h"
#include "test_util.h"
#include "util/options.h"

/* ------------------------------------------------------------------------ */
/* kiln_options_only and kiln_options_holds                                 */
/* ------------------------------------------------------------------------ */

static void test_options_name_the_kernels(void **state)
{
    (void)state;
    struct kiln_options o = {0};
    kiln_options_add(&o, "-DKILN_TILE_MR=8");
    const char *const names[] = {"gemm_f32_cpu_pack_a", NULL, "gemm_f32_cpu_micro"};
    kiln_options_only(&o, names, 3);
    kt_assert_status(kiln_options_status(&o, "test"), KILN_SUCCESS);
    const char *text = kiln_options_text(&o);
    assert_string_equal(
        text, "-DKILN_TILE_MR=8 -DKILN_ONLY=1 -DKILN_WANT_gemm_f32_cpu_pack_a=1 -DKILN_WANT_gemm_f32_cpu_micro=1");
    assert_true(kiln_options_holds(text, "gemm_f32_cpu_pack_a"));
    assert_true(kiln_options_holds(text, "gemm_f32_cpu_micro"));
    /* A name that only starts like a wanted one, or is part of one. */
    assert_false(kiln_options_holds(text, "gemm_f32_cpu_pack_a_kv"));
    assert_false(kiln_options_holds(text, "gemm_f32_cpu_pack"));
    assert_false(kiln_options_holds(text, "gemm_f32_cpu_pack_b"));
    kiln_options_free(&o);
    /* Without KILN_ONLY a program holds every kernel of its source. */
    assert_true(kiln_options_holds("-DKILN_TILE_MR=8", "anything"));
    assert_true(kiln_options_holds("", "anything"));
}

/* ------------------------------------------------------------------------ */
/* The programs plans build                                                 */
/* ------------------------------------------------------------------------ */

#define MAX_PROGRAMS 64

struct program {
    char *label, *source, *options;
};

struct programs {
    struct program p[MAX_PROGRAMS];
    size_t count;
};

static void collect(void *user, const char *label, const char *source, size_t length, const char *options)
{
    struct programs *all = user;
    if (all->count == MAX_PROGRAMS)
        return;
    struct program *p = &all->p[all->count++];
    p->label = strdup(label);
    p->source = strndup(source, length);
    p->options = strdup(options);
    assert_non_null(p->label);
    assert_non_null(p->source);
    assert_non_null(p->options);
}

/* The integer value of -D<name>= in options, or -1. */
static long define_value(const char *options, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "-D%s=", name);
    const char *at = strstr(options, key);
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* The kernel names a source guards with KILN_WANTS(...), Winograd's
   KERNEL(_x) spelt out for the program's KILN_WINO_M; returns the count. */
static size_t guarded_kernels(const struct program *p, char names[][64], size_t most)
{
    size_t n = 0;
    for (const char *at = p->source; n < most && (at = strstr(at, "KILN_WANTS(")) != NULL;) {
        at += strlen("KILN_WANTS(");
        const char *end = at;
        while (*end && *end != '\n' && !(end[0] == ')' && (end[1] == '\n' || end[1] == ' ' || end[1] == '\0')))
            end++;
        char arg[64];
        snprintf(arg, sizeof arg, "%.*s", (int)(end - at), at);
        if (strcmp(arg, "name") == 0) /* the macro's own definition */
            continue;
        if (strncmp(arg, "KERNEL(", 7) == 0) {
            const long m = define_value(p->options, "KILN_WINO_M");
            assert_true(m > 0);
            snprintf(names[n++], 64, "conv_f32_wino%ldx%ld%.*s", m, m, (int)(strlen(arg) - 8), arg + 7);
        } else {
            snprintf(names[n++], 64, "%s", arg);
        }
    }
    return n;
}

/* Lines of a source that begin with `prefix`. */
static size_t lines_starting(const char *source, const char *prefix)
{
    size_t n = 0;
    for (const char *line = source; line; line = strchr(line, '\n')) {
        line += *line == '\n';
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    }
    return n;
}

/* Kernel definitions in a source: KILN_KERNEL at the start of a line (not
   in a macro's body), or cl/util/peak.cl's PEAK_FMA_KERNEL(...). */
static size_t kernel_definitions(const char *source)
{
    return lines_starting(source, "KILN_KERNEL") + lines_starting(source, "PEAK_FMA_KERNEL(");
}

/* Plans and calls that build programs of multi-kernel sources. */
static void build_plans(kiln_context *ctx)
{
    kiln_gemm_desc g;
    kiln_gemm_plan *gp = NULL;
    /* Straight and flipped register tiles, packed and read in place, and
       the small-M kernels (where the device takes them). */
    static const size_t shapes[][4] = {
        {64, 64, 64, 0}, {512, 196, 512, 0}, {49, 1024, 256, 1}, {1, 256, 64, 0}, {1, 256, 64, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, shapes[i][3] ? KILN_TRANS : KILN_NO_TRANS, shapes[i][0],
                            shapes[i][1], shapes[i][2]);
        kt_assert_status(kiln_gemm_plan_create(ctx, &g, &gp), KILN_SUCCESS);
        kiln_gemm_plan_destroy(gp);
    }
    /* Convolutions: 1x1 (a GEMM), depthwise (direct, NCHW and NHWC with
       kept weights), 3x3 (Winograd), stride 2 (implicit GEMM). */
    struct {
        kiln_tensor_layout layout;
        size_t c, hw, k, r, stride, groups;
    } convs[] = {{KILN_NCHW, 512, 14, 512, 1, 1, 1}, {KILN_NCHW, 64, 28, 64, 3, 1, 64},
                 {KILN_NHWC, 64, 28, 64, 3, 1, 64},  {KILN_NCHW, 64, 28, 64, 3, 1, 1},
                 {KILN_NCHW, 64, 28, 128, 3, 2, 1},  {KILN_NHWC, 64, 28, 128, 3, 2, 1}};
    for (size_t i = 0; i < sizeof convs / sizeof *convs; i++) {
        kiln_conv2d_desc d;
        kiln_conv2d_desc_init(&d, convs[i].layout, 1, convs[i].c, convs[i].hw, convs[i].hw, convs[i].k, convs[i].r,
                              convs[i].r);
        d.stride_h = d.stride_w = convs[i].stride;
        d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = convs[i].r / 2;
        d.groups = convs[i].groups;
        d.constant_weights = 1;
        kiln_conv2d_plan *cp = NULL;
        kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &cp), KILN_SUCCESS);
        kiln_conv2d_plan_destroy(cp);
    }
    /* Naive attention, fp32 (the softmax alone) and fp16 (with the widening
       and narrowing kernels). */
    for (int f16 = 0; f16 <= 1; f16++) {
        kiln_attention_desc a;
        kiln_attention_desc_init(&a, KILN_BHSD, 1, 2, 16, 16, 32);
        a.algo = KILN_ATTENTION_NAIVE;
        a.dtype = f16 ? KILN_F16 : KILN_F32;
        kiln_attention_plan *ap = NULL;
        kiln_status st = kiln_attention_plan_create(ctx, &a, &ap);
        if (!kt_unsupported_here(ctx, st))
            kt_assert_status(st, KILN_SUCCESS);
        kiln_attention_plan_destroy(ap);
    }
    /* Pooling and softmax, which build their kernel at the call. */
    kiln_buffer *x = NULL, *y = NULL;
    kt_assert_status(kiln_buffer_create(ctx, 4 * 8 * 8 * 4, &x), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, 4 * 8 * 8 * 4, &y), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(x, 0, 4 * 8 * 8, 1.0f), KILN_SUCCESS);
    const kiln_pool2d_desc pool = {KILN_NCHW, 1, 4, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, KILN_POOL_MAX, 0};
    kt_assert_status(kiln_pool2d(ctx, &pool, x, y, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_softmax(ctx, 4, 64, 1, x, y, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    kiln_buffer_destroy(x);
    kiln_buffer_destroy(y);
}

static void test_programs_hold_what_their_plans_launch(void **state)
{
    (void)state;
    kiln_context *ctx = kt_ctx;
    build_plans(ctx);
    struct programs all = {0};
    kiln_program_cache_each(ctx, collect, &all);
    assert_true(all.count > 0 && all.count < MAX_PROGRAMS);

    size_t named = 0, left_out = 0, several = 0;
    for (size_t i = 0; i < all.count; i++) {
        const struct program *p = &all.p[i];
        char guarded[16][64];
        const size_t n = guarded_kernels(p, guarded, 16);
        if (n > 1)
            several++;
        if (!strstr(p->options, "-DKILN_ONLY=1")) {
            /* A program of a source of several kernels is built for named
               ones, whatever plan asked for it. */
            if (n > 1)
                fail_msg("%s was built for all its %zu kernels: \"%s\"", p->label, n, p->options);
            continue;
        }
        named++;
        /* Every kernel of the source is guarded, so none is compiled unasked. */
        if (kernel_definitions(p->source) != n)
            fail_msg("%s defines %zu kernels and guards %zu with KILN_WANTS", p->label, kernel_definitions(p->source),
                     n);
        for (size_t j = 0; j < n; j++) {
            struct kiln_kernel *kernel = NULL;
            const int wanted = kiln_options_holds(p->options, guarded[j]);
            const kiln_status st = kiln_kernel_get(ctx, p->label, p->options, guarded[j], &kernel);
            if (wanted && st != KILN_SUCCESS)
                fail_msg("%s: kernel %s is named but not built (%s): \"%s\"", p->label, guarded[j],
                         kiln_last_error_detail(), p->options);
            if (!wanted && st == KILN_SUCCESS)
                fail_msg("%s: kernel %s is built but not named: \"%s\"", p->label, guarded[j], p->options);
            left_out += !wanted;
        }
    }
    printf("programs: %zu, of sources of several kernels %zu, built for named kernels %zu, kernels left out %zu\n",
           all.count, several, named, left_out);
    if (several > 0)
        assert_true(left_out > 0);
    for (size_t i = 0; i < all.count; i++) {
        free(all.p[i].label);
        free(all.p[i].source);
        free(all.p[i].options);
    }
}

/* A plan that names a kernel its options leave out fails with a detail
   instead of building a program without it. */
static void test_plan_kernel_outside_the_set_fails(void **state)
{
    (void)state;
    struct kiln_plan *plan = kiln_plan_new(kt_ctx, sizeof *plan, "test", 0, "test");
    assert_non_null(plan);
    struct kiln_options o = {0};
    const char *const name = "nn_softmax";
    kiln_options_only(&o, &name, 1);
    kt_assert_status(kiln_plan_kernel(plan, 0, "nn/softmax", &o, "nn_softmax_group"), KILN_ERROR_INTERNAL);
    assert_non_null(strstr(kiln_last_error_detail(), "nn_softmax_group"));
    kiln_options_free(&o);
    kiln_plan_free(plan);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_options_name_the_kernels));
    kt_add(&tests, cmocka_unit_test(test_programs_hold_what_their_plans_launch));
    kt_add(&tests, cmocka_unit_test(test_plan_kernel_outside_the_set_fails));
    return kt_run_with("kernel_sets", &tests, kt_group_setup, kt_group_teardown);
}
