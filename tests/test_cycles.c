/*
 * Leak cycles: each test repeats one lifecycle many times -- a context
 * opened and closed, plans of each operator made, run and released on one
 * context, buffers, and the error paths (rejected descriptors, kernel
 * sources missing or failing to build, a profile overlay that does not
 * validate) -- and fails if the heap in use grew.
 *
 * The heap is glibc's count of bytes in allocated chunks
 * (mallinfo2().uordblks), read after a warm-up round (which leaves behind
 * what is allocated once: the shared profile set, the OpenCL runtime's
 * tables, the kernels built into the context's memory) and after each of
 * two rounds of cycles, each cycle waiting for the work it queued. The
 * bound is 16 bytes per cycle: glibc's smallest chunk is 32 bytes on a
 * 64-bit system, so one allocation lost per cycle grows the heap by at
 * least twice the bound in every round, while the runtime's pools, which
 * grow in ever rarer steps, stay under it in at least one. Under
 * AddressSanitizer glibc's malloc is not the one in use and the count
 * stays still; LeakSanitizer checks those builds at exit instead.
 *
 * Cycles are cheap on purpose: small shapes, kernels built once per context
 * (the plan cycles share one context), the disk cache off for the contexts
 * made here. Failing builds are not cached, so each one runs the compiler
 * on a two-line source; those cycles are few, and the heap count does not
 * judge them (see test_kernel_dir_errors).
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_util.h"

#define CYCLES 1000
#define WARM_UP 100
#define BUILD_CYCLES 10
#define BOUND_PER_CYCLE 16

/* One cycle of a lifecycle; `ctx` is the shared context, or NULL. */
typedef void (*cycle_fn)(kiln_context *ctx);

static size_t heap_in_use(void) { return mallinfo2().uordblks; }

/* One cycle, then waiting for the work it queued: the runtime holds its
   commands until they complete. */
static void run_cycle(cycle_fn cycle, kiln_context *ctx)
{
    cycle(ctx);
    if (ctx)
        kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
}

/* The heap's growth over `cycles` cycles. */
static long long growth(cycle_fn cycle, kiln_context *ctx, size_t cycles)
{
    const size_t before = heap_in_use();
    for (size_t i = 0; i < cycles; i++)
        run_cycle(cycle, ctx);
    return (long long)heap_in_use() - (long long)before;
}

/* WARM_UP cycles, then two rounds of `cycles`; fails if the heap grew by
   more than the bound in both. A leak grows the heap in every round; the
   runtime's pools of command records grow in steps that become rarer as
   they fill (some 25 bytes a cycle over the first thousand naive attention
   cycles on POCL, 12 over the first four thousand), so one round below the
   bound clears a lifecycle. */
static void assert_no_growth(const char *what, cycle_fn cycle, kiln_context *ctx, size_t cycles)
{
    for (int i = 0; i < WARM_UP; i++)
        run_cycle(cycle, ctx);
    const long long bound = (long long)(cycles * BOUND_PER_CYCLE);
    const long long first = growth(cycle, ctx, cycles), second = growth(cycle, ctx, cycles);
    printf("# %s: %zu + %zu cycles, heap in use %+lld then %+lld bytes (bound %lld)\n", what, cycles, cycles, first,
           second, bound);
    if (first > bound && second > bound)
        fail_msg("%s: the heap grew by %lld and %lld bytes over two rounds of %zu cycles (%.1f per cycle), more than "
                 "%lld",
                 what, first, second, cycles, (double)second / (double)cycles, bound);
}

static kiln_context *open_uncached(const char *overlay, kiln_status want)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = 1;
    opt.profile_overlay = overlay;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), want);
    return ctx;
}

static kiln_buffer *buffer(kiln_context *ctx, size_t floats, float value)
{
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(ctx, floats * sizeof(float), &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(buf, 0, floats, value), KILN_SUCCESS);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Lifecycles that succeed                                                  */
/* ------------------------------------------------------------------------ */

static void context_cycle(kiln_context *unused)
{
    (void)unused;
    kiln_context *ctx = open_uncached(NULL, KILN_SUCCESS);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    kiln_context_destroy(ctx);
}

static void buffer_cycle(kiln_context *ctx)
{
    kiln_buffer *buf = buffer(ctx, 256, 1.0f);
    float x[4];
    kt_assert_status(kiln_buffer_read(buf, 0, sizeof x, x), KILN_SUCCESS);
    assert_true(x[3] == 1.0f);
    kiln_buffer_destroy(buf);
}

/* C = A B, 16 x 16 x 16, all ones: every element of C is 16. */
static void gemm_cycle(kiln_context *ctx)
{
    enum { N = 16 };
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, N, N, N);
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_buffer *a = buffer(ctx, N * N, 1.0f), *b = buffer(ctx, N * N, 1.0f), *c = buffer(ctx, N * N, 0.0f);
    kiln_event *ev = NULL;
    kt_assert_status(kiln_gemm_plan_execute(plan, 1.0f, a, 0, b, 0, 0.0f, c, 0, &ev), KILN_SUCCESS);
    kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
    kiln_event_destroy(ev);
    float last;
    kt_assert_status(kiln_buffer_read(c, (N * N - 1) * sizeof(float), sizeof last, &last), KILN_SUCCESS);
    assert_true(last == (float)N);
    kiln_buffer_destroy(a), kiln_buffer_destroy(b), kiln_buffer_destroy(c);
    kiln_gemm_plan_destroy(plan);
}

/* A 3x3 convolution of ones, 4 channels into 4 filters, 8x8 unpadded
   (AUTO's algorithm): every output is 36. */
static void conv_cycle(kiln_context *ctx)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 4, 8, 8, 4, 3, 3);
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_buffer *x = buffer(ctx, 4 * 8 * 8, 1.0f), *w = buffer(ctx, 4 * 4 * 9, 1.0f), *y = buffer(ctx, 4 * 6 * 6, 0.0f);
    kt_assert_status(kiln_conv2d_plan_execute(plan, x, w, NULL, NULL, y, NULL), KILN_SUCCESS);
    float last;
    kt_assert_status(kiln_buffer_read(y, (4 * 6 * 6 - 1) * sizeof(float), sizeof last, &last), KILN_SUCCESS);
    assert_true(last == 36.0f);
    kiln_buffer_destroy(x), kiln_buffer_destroy(w), kiln_buffer_destroy(y);
    kiln_conv2d_plan_destroy(plan);
}

/* Attention of `algo` over V of ones: every output is 1. */
static void attention_cycle(kiln_context *ctx, kiln_attention_algo algo)
{
    enum { B = 1, H = 2, S = 8, D = 16, ELEMS = B * H * S * D };
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, KILN_BSHD, B, H, S, S, D);
    d.algo = algo;
    kiln_attention_plan *plan = NULL;
    kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_buffer *q = buffer(ctx, ELEMS, 0.5f), *k = buffer(ctx, ELEMS, 0.25f), *v = buffer(ctx, ELEMS, 1.0f),
                *o = buffer(ctx, ELEMS, 0.0f);
    kt_assert_status(kiln_attention_plan_execute(plan, q, k, v, NULL, NULL, o, NULL, NULL), KILN_SUCCESS);
    float last;
    kt_assert_status(kiln_buffer_read(o, (ELEMS - 1) * sizeof(float), sizeof last, &last), KILN_SUCCESS);
    assert_true(last > 0.999f && last < 1.001f);
    kiln_buffer_destroy(q), kiln_buffer_destroy(k), kiln_buffer_destroy(v), kiln_buffer_destroy(o);
    kiln_attention_plan_destroy(plan);
}

static void fused_attention_cycle(kiln_context *ctx) { attention_cycle(ctx, KILN_ATTENTION_FUSED); }

static void naive_attention_cycle(kiln_context *ctx) { attention_cycle(ctx, KILN_ATTENTION_NAIVE); }

/* ------------------------------------------------------------------------ */
/* Error paths                                                              */
/* ------------------------------------------------------------------------ */

/* Descriptors each operator rejects, by plan and by one-shot call. */
static void rejected_cycle(kiln_context *ctx)
{
    kiln_buffer *buf = buffer(ctx, 64, 0.0f), *out = buffer(ctx, 64, 0.0f);
    kiln_gemm_desc g;
    kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 4, 4, 4);
    g.lda = 2; /* shorter than a row */
    kiln_gemm_plan *gp = NULL;
    kt_assert_status(kiln_gemm_plan_create(ctx, &g, &gp), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_gemm(ctx, &g, 1.0f, buf, 0, buf, 0, 0.0f, out, 0, NULL), KILN_ERROR_INVALID_ARGUMENT);

    kiln_conv2d_desc c;
    kiln_conv2d_desc_init(&c, KILN_NCHW, 1, 4, 8, 8, 4, 3, 3);
    c.groups = 2;
    c.algo = KILN_CONV_WINOGRAD_2X2; /* one group only */
    kiln_conv2d_plan *cp = NULL;
    kt_assert_status(kiln_conv2d_plan_create(ctx, &c, &cp), KILN_ERROR_UNSUPPORTED);

    kiln_attention_desc a;
    kiln_attention_desc_init(&a, KILN_BSHD, 1, 6, 4, 4, 16);
    a.kv_heads = 4; /* 6 heads are not a multiple */
    kiln_attention_plan *ap = NULL;
    kt_assert_status(kiln_attention_plan_create(ctx, &a, &ap), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_attention(ctx, &a, buf, buf, buf, NULL, NULL, out, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_buffer_destroy(buf), kiln_buffer_destroy(out);
}

/* A GEMM plan and a fill while KILN_KERNEL_DIR is set: their sources are
   missing (IO) or do not compile (BUILD). */
static kiln_status kernel_dir_status;

static void kernel_dir_cycle(kiln_context *ctx)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 16, 16, 16);
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), kernel_dir_status);
    assert_null(plan);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(ctx, 64, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(buf, 0, 16, 1.0f), kernel_dir_status);
    kiln_buffer_destroy(buf);
}

static void overlay_cycle(kiln_context *unused)
{
    (void)unused;
    assert_null(open_uncached("{\"kernels\": {\"gemm.tiled\": {\"vwm\": 3}}}", KILN_ERROR_INVALID_PROFILE));
}

/* ------------------------------------------------------------------------ */

static kiln_context *shared;

static int open_shared(void **state)
{
    (void)state;
    shared = open_uncached(NULL, KILN_SUCCESS);
    return 0;
}

static int close_shared(void **state)
{
    (void)state;
    kiln_context_destroy(shared);
    return 0;
}

static void test_contexts(void **state)
{
    (void)state;
    assert_no_growth("context create/destroy", context_cycle, NULL, CYCLES);
}

static void test_buffers(void **state)
{
    (void)state;
    assert_no_growth("buffer create/destroy", buffer_cycle, shared, CYCLES);
}

static void test_gemm_plans(void **state)
{
    (void)state;
    assert_no_growth("GEMM plan create/execute/destroy", gemm_cycle, shared, CYCLES);
}

static void test_conv_plans(void **state)
{
    (void)state;
    assert_no_growth("convolution plan create/execute/destroy", conv_cycle, shared, CYCLES);
}

static void test_fused_attention_plans(void **state)
{
    (void)state;
    assert_no_growth("fused attention plan create/execute/destroy", fused_attention_cycle, shared, CYCLES);
}

static void test_naive_attention_plans(void **state)
{
    (void)state;
    assert_no_growth("naive attention plan create/execute/destroy", naive_attention_cycle, shared, CYCLES);
}

static void test_rejected_descriptors(void **state)
{
    (void)state;
    assert_no_growth("rejected descriptors", rejected_cycle, shared, CYCLES);
}

static void test_overlay_refused(void **state)
{
    (void)state;
    assert_no_growth("profile overlay that does not validate", overlay_cycle, NULL, CYCLES);
}

/* KILN_KERNEL_DIR on an empty directory, then on one whose sources do not
   compile; the shared context is used, its programs keyed by the directory. */
static void test_kernel_dir_errors(void **state)
{
    (void)state;
    char *kernel_dir = kt_temp_dir();
    assert_int_equal(setenv("KILN_KERNEL_DIR", kernel_dir, 1), 0);
    kernel_dir_status = KILN_ERROR_IO;
    assert_no_growth("kernel sources missing", kernel_dir_cycle, shared, CYCLES);

    char path[1024];
    static const char *const subdirs[] = {"gemm", "util"};
    for (size_t i = 0; i < sizeof subdirs / sizeof *subdirs; i++) {
        snprintf(path, sizeof path, "%s/%s", kernel_dir, subdirs[i]);
        assert_int_equal(mkdir(path, 0755), 0);
    }
    static const char *const files[] = {"util/fill.cl", "gemm/gemm_f32_cpu.cl", "gemm/gemm_f32_tiled.cl",
                                        "gemm/gemm_f32_direct.cl", "gemm/gemm_f32_smallm.cl"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", kernel_dir, files[i]);
        kt_write_file(path, "__kernel void broken(__global float *x)\n{ x[0] = undeclared; }\n");
    }
    /* Each failing build runs the runtime's compiler again (about 0.1 s on
       POCL), and the compiler's own state grows with every run (POCL's LLVM
       records each temporary file it would remove on a signal, some 30 bytes
       a build): the heap count cannot tell kiln's growth from that, so these
       few cycles are left to LeakSanitizer, which checks them at exit. */
    kernel_dir_status = KILN_ERROR_BUILD;
    for (int i = 0; i < BUILD_CYCLES; i++)
        run_cycle(kernel_dir_cycle, shared);
    printf("# kernel sources that do not compile: %d cycles, the heap not compared (the compiler's state grows with "
           "each build); LeakSanitizer checks them\n",
           BUILD_CYCLES);
    assert_int_equal(unsetenv("KILN_KERNEL_DIR"), 0);
    kt_remove_tree(kernel_dir);
    free(kernel_dir);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_contexts));
    kt_add(&tests, cmocka_unit_test(test_overlay_refused));
    kt_add(&tests, cmocka_unit_test(test_buffers));
    kt_add(&tests, cmocka_unit_test(test_gemm_plans));
    kt_add(&tests, cmocka_unit_test(test_conv_plans));
    kt_add(&tests, cmocka_unit_test(test_fused_attention_plans));
    kt_add(&tests, cmocka_unit_test(test_naive_attention_plans));
    kt_add(&tests, cmocka_unit_test(test_rejected_descriptors));
    kt_add(&tests, cmocka_unit_test(test_kernel_dir_errors));
    return kt_run_with("cycles", &tests, open_shared, close_shared);
}
