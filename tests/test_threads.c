/*
 * Threads: what docs/threads.md promises, tested as it is written there.
 *
 * - One context, several threads at once: each thread creates, executes and
 *   destroys plans of every operator (GEMM of several families, CLBlast's
 *   where kiln has it; convolution of several algorithms including AUTO in
 *   find mode, so the find database and the context's memory of choices
 *   are searched, written and read by several threads together; attention),
 *   makes one-shot calls (GEMM, convolution, attention, pooling, softmax,
 *   activations), creates, writes, reads and destroys buffers, waits on
 *   events, queries the context and the devices and finishes the context,
 *   each on its own random data with outputs poisoned first, checked
 *   against the double-precision references. All threads
 *   also read one shared input buffer at once, execute and destroy a plan
 *   the main thread created, and leave an event for the main thread to wait
 *   on.
 * - Several contexts at once, one per thread, on one empty program cache
 *   directory (KILN_CACHE_DIR), opened together; then a new context finds
 *   everything they built and chose on disk.
 * - kiln_last_error_detail() is per thread: two threads failing differently
 *   at the same time each see their own detail.
 *
 * The contexts here use a fresh cache directory each run, so the find
 * search and the disk stores happen concurrently on every run.
 *
 * cmocka reports a failed assertion by jumping back to the test's frame on
 * the main thread, which a worker thread cannot do; main() sets
 * CMOCKA_TEST_ABORT=1 so that a failure on any thread prints its message
 * and aborts the program (the test fails with that message).
 *
 * Run under ThreadSanitizer by tools/test.sh (build/tsan).
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_ref.h"
#include "conv_ref.h"
#include "gemm_ref.h"
#include "nn_ref.h"
#include "test_util.h"

#define THREADS 4
#define ROUNDS 2
/* Floats of the input every thread reads at once. */
#define SHARED_COUNT 3001

static uint64_t seed;

/* What one thread works with. */
struct worker {
    kiln_context *ctx;
    int index;
    uint64_t seed;
    pthread_barrier_t *start;
    const kiln_buffer *shared_x; /* read by every thread at once */
    const float *shared_host;    /* its values */
    kiln_gemm_plan *handed;      /* made by the main thread; executed and destroyed here */
    /* An activation of shared_x into `left` whose event the main thread
       waits on. */
    kiln_event *left_event;
    kiln_buffer *left;
    int conv_jobs; /* convolutions in find mode this thread ran */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */
/* Jobs: one operator call each, checked against its reference              */
/* ------------------------------------------------------------------------ */

/* Run `plan` (of `d`) on fresh data for two (alpha, beta) pairs, and
   destroy it. */
static void gemm_run(struct worker *w, const kiln_gemm_desc *d, kiln_gemm_plan *plan)
{
    kiln_gemm_plan_info info;
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    if (d->algo != KILN_GEMM_AUTO)
        assert_int_equal(info.algo, d->algo);
    struct gr_case t;
    gr_case_init(&t, w->ctx, d, 0, 0, 0, 0);
    gr_case_run(&t, plan, 2, &w->seed);
    gr_case_free(&t);
    kiln_gemm_plan_destroy(plan);
}

/* A GEMM of `algo` (checked to be what the plan took unless AUTO). */
static void gemm_job(struct worker *w, kiln_layout layout, kiln_transpose ta, kiln_transpose tb, size_t m, size_t n,
                     size_t k, kiln_gemm_algo algo)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, layout, ta, tb, m, n, k);
    /* A context without the CPU and small-M kernels (CUDA) runs tiled ones. */
    if (!kt_vector_kernels(w->ctx) && (algo == KILN_GEMM_CPU || algo == KILN_GEMM_SMALLM))
        algo = KILN_GEMM_TILED;
    d.algo = algo;
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(w->ctx, &d, &plan), KILN_SUCCESS);
    gemm_run(w, &d, plan);
}

static void gemm_cpu(struct worker *w)
{
    gemm_job(w, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 70, 64, 61, KILN_GEMM_CPU);
}

static void gemm_smallm(struct worker *w)
{
    gemm_job(w, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, 4, 40, 33, KILN_GEMM_SMALLM);
}

static void gemm_direct(struct worker *w)
{
    gemm_job(w, KILN_COL_MAJOR, KILN_TRANS, KILN_NO_TRANS, 33, 17, 29, KILN_GEMM_DIRECT);
}

/* CLBlast's SGEMM where kiln was built with it (UNSUPPORTED otherwise). */
static void gemm_clblast(struct worker *w)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 40, 36, 28);
    d.algo = KILN_GEMM_CLBLAST;
    kiln_gemm_plan *plan = NULL;
    kiln_status st = kiln_gemm_plan_create(w->ctx, &d, &plan);
    if (st != KILN_ERROR_UNSUPPORTED) {
        kt_assert_status(st, KILN_SUCCESS);
        gemm_run(w, &d, plan);
    }
}

static void gemm_auto(struct worker *w)
{
    gemm_job(w, KILN_ROW_MAJOR, KILN_TRANS, KILN_TRANS, 20, 24, 16, KILN_GEMM_AUTO);
}

/* The plan the main thread made for this thread, on fresh data, with an
   event waited on here. */
static void gemm_handed(struct worker *w)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 24, 40, 36);
    struct gr_case t;
    gr_case_init(&t, w->ctx, &d, 0, 0, 0, 0);
    gr_case_fill(&t, 1, &w->seed);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(gr_case_execute(&t, w->handed, 1.0f, 0.0f, &ev), KILN_SUCCESS);
    kt_wait_and_release(ev);
    gr_case_check(&t, 1.0f, 0.0f);
    gr_case_free(&t);
}

/* The convolution `d` (of d->algo, checked to be what the plan took unless
   AUTO), checked with the tolerance of the algorithm the plan took; the
   plan's reason into `reason` when it is not NULL. */
static void conv_job(struct worker *w, const kiln_conv2d_desc *desc, char *reason, size_t reason_size)
{
    /* A context with implicit GEMM alone (CUDA) runs every requested job with it. */
    kiln_conv2d_desc copy = *desc;
    if (!kt_vector_kernels(w->ctx) && copy.algo != KILN_CONV_AUTO)
        copy.algo = KILN_CONV_IMPLICIT_GEMM;
    const kiln_conv2d_desc *d = &copy;
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(w->ctx, d, &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    if (d->algo != KILN_CONV_AUTO)
        assert_int_equal(info.algo, d->algo);
    if (reason)
        snprintf(reason, reason_size, "%s", info.reason);
    struct cr_case t;
    cr_case_init(&t, w->ctx, d);
    cr_case_fill(&t, &w->seed);
    kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, kiln_conv_algo_tol(info.algo, t.dims.k_eff), info.name);
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
}

/* 8 channels of 10 x 10 by 8 filters of 3 x 3, padded: every algorithm
   but gemm-1x1 applies. */
static void conv_3x3(struct worker *w, kiln_tensor_layout layout, kiln_conv_algo algo)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, layout, 1, 8, 10, 10, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.has_bias = 1;
    d.algo = algo;
    conv_job(w, &d, NULL, 0);
}

static void conv_igemm(struct worker *w) { conv_3x3(w, KILN_NCHW, KILN_CONV_IMPLICIT_GEMM); }

static void conv_igemm_nhwc(struct worker *w) { conv_3x3(w, KILN_NHWC, KILN_CONV_IMPLICIT_GEMM); }

static void conv_winograd(struct worker *w) { conv_3x3(w, KILN_NCHW, KILN_CONV_WINOGRAD_2X2); }

static void conv_direct(struct worker *w) { conv_3x3(w, KILN_NCHW, KILN_CONV_DIRECT); }

static void conv_im2col(struct worker *w) { conv_3x3(w, KILN_NCHW, KILN_CONV_IM2COL); }

static void conv_1x1(struct worker *w)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 16, 7, 7, 8, 1, 1);
    d.algo = KILN_CONV_GEMM_1X1;
    conv_job(w, &d, NULL, 0);
}

/* AUTO in find mode on one shape for every thread: the first threads to
   get here search together; the reason says where the choice came from. */
static void conv_find(struct worker *w)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 8, 14, 14, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.activation = KILN_ACT_RELU;
    d.find = 1;
    char reason[160];
    conv_job(w, &d, reason, sizeof reason);
    if (strncmp(reason, "find: ", 6) != 0)
        fail_msg("thread %d: the find convolution's reason is \"%s\"", w->index, reason);
    w->conv_jobs++;
}

static void attention_job(struct worker *w, const kiln_attention_desc *d)
{
    kiln_attention_plan *plan = NULL;
    kt_assert_status(kiln_attention_plan_create(w->ctx, d, &plan), KILN_SUCCESS);
    struct ar_case t;
    ar_case_init(&t, w->ctx, d);
    ar_case_fill(&t, 1.0f, 0, &w->seed);
    kt_assert_status(ar_case_execute(&t, plan, NULL), KILN_SUCCESS);
    ar_case_check(&t, d->algo == KILN_ATTENTION_NAIVE ? "naive" : "fused");
    ar_case_free(&t);
    kiln_attention_plan_destroy(plan);
}

static void attention_fused(struct worker *w)
{
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, KILN_BSHD, 1, 2, 16, 16, 16);
    d.causal = 1;
    d.lse = 1;
    d.algo = KILN_ATTENTION_FUSED;
    attention_job(w, &d);
}

static void attention_naive(struct worker *w)
{
    kiln_attention_desc d;
    kiln_attention_desc_init(&d, KILN_BHSD, 1, 2, 8, 16, 16);
    d.kv_heads = 1;
    d.algo = KILN_ATTENTION_NAIVE;
    attention_job(w, &d);
}

/* The one-shot forms of GEMM, convolution and attention. */
static void one_shots(struct worker *w)
{
    kiln_gemm_desc g;
    kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_TRANS, KILN_NO_TRANS, 19, 23, 17);
    struct gr_case gc;
    gr_case_init(&gc, w->ctx, &g, 0, 0, 0, 0);
    gr_case_fill(&gc, 0, &w->seed);
    kt_assert_status(kiln_gemm(w->ctx, &g, 0.5f, gc.buf[GR_A], 0, gc.buf[GR_B], 0, 2.0f, gc.buf[GR_C], 0, NULL),
                     KILN_SUCCESS);
    gr_case_check(&gc, 0.5f, 2.0f);
    gr_case_free(&gc);

    kiln_conv2d_desc c;
    kiln_conv2d_desc_init(&c, KILN_NHWC, 2, 6, 7, 7, 4, 3, 3);
    c.stride_h = c.stride_w = 2;
    c.activation = KILN_ACT_TANH;
    struct cr_case cc;
    cr_case_init(&cc, w->ctx, &c);
    cr_case_fill(&cc, &w->seed);
    kt_assert_status(kiln_conv2d(w->ctx, &c, cc.buf[CR_X], cc.buf[CR_W], NULL, NULL, cc.buf[CR_Y], NULL), KILN_SUCCESS);
    cr_case_check(&cc, kiln_conv_algo_tol(KILN_CONV_DIRECT, cc.dims.k_eff), "one-shot convolution");
    cr_case_free(&cc);

    kiln_attention_desc a;
    kiln_attention_desc_init(&a, KILN_BSHD, 2, 2, 5, 9, 8);
    struct ar_case ac;
    ar_case_init(&ac, w->ctx, &a);
    ar_case_fill(&ac, 1.0f, 0, &w->seed);
    kt_assert_status(
        kiln_attention(w->ctx, &a, ac.buf[AR_Q], ac.buf[AR_K], ac.buf[AR_V], NULL, NULL, ac.buf[AR_O], NULL, NULL),
        KILN_SUCCESS);
    ar_case_check(&ac, "one-shot attention");
    ar_case_free(&ac);
}

/* A buffer holding n random floats, and their values in *host (malloc'd). */
static kiln_buffer *random_buffer(struct worker *w, size_t n, float **host)
{
    *host = malloc(n * sizeof **host);
    assert_non_null(*host);
    kt_fill_uniform(*host, n, -1.0f, 1.0f, &w->seed);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(w->ctx, n * sizeof **host, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(buf, 0, n * sizeof **host, *host), KILN_SUCCESS);
    return buf;
}

/* Every one of the n floats of `buf` within tol[i] of want[i]; the poison
   (NaN) never is, so an output left unwritten fails. */
static void check_floats(const kiln_buffer *buf, const double *want, const double *tol, size_t n, const char *what)
{
    float *got = malloc(n * sizeof *got);
    assert_non_null(got);
    kt_assert_status(kiln_buffer_read(buf, 0, n * sizeof *got, got), KILN_SUCCESS);
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol[i]))
            fail_msg("%s: element %zu is %.9g, the reference %.9g (tolerance %.3g)", what, i, (double)got[i], want[i],
                     tol[i]);
    free(got);
}

static void pool(struct worker *w)
{
    kiln_pool2d_desc d;
    memset(&d, 0, sizeof d);
    d.layout = KILN_NCHW;
    d.n = 1, d.c = 4, d.h = 9, d.w = 9;
    d.window_h = d.window_w = 3;
    d.stride_h = d.stride_w = 2;
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.mode = w->index % 2 ? KILN_POOL_AVG : KILN_POOL_MAX;
    size_t yh = 0, yw = 0;
    kt_assert_status(kiln_pool2d_output_size(&d, &yh, &yw), KILN_SUCCESS);
    const size_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * yh * yw;
    float *x;
    kiln_buffer *bx = random_buffer(w, nx, &x), *by = kt_poisoned_buffer(w->ctx, ny * sizeof(float));
    double *want = malloc(ny * sizeof *want), *tol = malloc(ny * sizeof *tol);
    assert_true(want && tol);
    nr_pool_reference(&d, yh, yw, x, want, tol);
    const kiln_status st = kiln_pool2d(w->ctx, &d, bx, by, NULL);
    if (kt_vector_kernels(w->ctx) || st != KILN_ERROR_UNSUPPORTED) { /* CUDA has no pooling kernel yet */
        kt_assert_status(st, KILN_SUCCESS);
        check_floats(by, want, tol, ny, "pool");
    }
    free(x), free(want), free(tol);
    kiln_buffer_destroy(bx), kiln_buffer_destroy(by);
}

static void softmax(struct worker *w)
{
    enum { OUTER = 3, DIM = 37, INNER = 5, N = OUTER * DIM * INNER };
    float *x;
    kiln_buffer *bx = random_buffer(w, N, &x), *by = kt_poisoned_buffer(w->ctx, N * sizeof(float));
    double want[N], tol[N];
    nr_softmax_reference(OUTER, DIM, INNER, x, want, tol);
    kt_assert_status(kiln_softmax(w->ctx, OUTER, DIM, INNER, bx, by, NULL), KILN_SUCCESS);
    check_floats(by, want, tol, N, "softmax");
    free(x);
    kiln_buffer_destroy(bx), kiln_buffer_destroy(by);
}

/* An activation of the input every thread reads, into a new buffer; its
   event is returned (NULL: waited on here) and the buffer in *out. */
static kiln_buffer *activation_of_shared(struct worker *w, kiln_activation act, kiln_event **event)
{
    kiln_buffer *y = kt_poisoned_buffer(w->ctx, SHARED_COUNT * sizeof(float));
    kt_assert_status(kiln_activation_forward(w->ctx, act, 0.1f, SHARED_COUNT, w->shared_x, y, event), KILN_SUCCESS);
    return y;
}

static void check_activation_of_shared(const struct worker *w, kiln_activation act, const kiln_buffer *y)
{
    double *want = malloc(SHARED_COUNT * sizeof *want), *tol = malloc(SHARED_COUNT * sizeof *tol);
    assert_true(want && tol);
    nr_activation_reference(act, 0.1f, SHARED_COUNT, w->shared_host, want, tol);
    check_floats(y, want, tol, SHARED_COUNT, "activation of the shared input");
    free(want), free(tol);
}

static kiln_activation activation_of(const struct worker *w)
{
    static const kiln_activation acts[] = {KILN_ACT_RELU, KILN_ACT_GELU, KILN_ACT_LEAKY_RELU, KILN_ACT_TANH};
    return acts[w->index % 4];
}

/* An activation of the shared input, and the shared input read back. */
static void activation(struct worker *w)
{
    kiln_buffer *y = activation_of_shared(w, activation_of(w), NULL);
    check_activation_of_shared(w, activation_of(w), y);
    kiln_buffer_destroy(y);
    float *back = malloc(SHARED_COUNT * sizeof *back);
    assert_non_null(back);
    kt_assert_status(kiln_buffer_read(w->shared_x, 0, SHARED_COUNT * sizeof *back, back), KILN_SUCCESS);
    assert_memory_equal(back, w->shared_host, SHARED_COUNT * sizeof *back);
    free(back);
}

/* A buffer written, partly filled on the device and read back. */
static void buffer(struct worker *w)
{
    enum { N = 4096, FROM = 1000, COUNT = 777 };
    float *x, *back = malloc(N * sizeof *back);
    assert_non_null(back);
    kiln_buffer *buf = random_buffer(w, N, &x);
    const float value = (float)(w->index + 1);
    kt_assert_status(kiln_buffer_fill_f32(buf, FROM, COUNT, value), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(buf, 0, N * sizeof *back, back), KILN_SUCCESS);
    for (size_t i = 0; i < N; i++) {
        const float want = i >= FROM && i < FROM + COUNT ? value : x[i];
        if (memcmp(&back[i], &want, sizeof want) != 0)
            fail_msg("thread %d: buffer element %zu is %g, not %g", w->index, i, (double)back[i], (double)want);
    }
    kiln_buffer_destroy(buf);
    free(x), free(back);
}

/* The context's queries and a finish, while other threads queue work. */
static void context_queries(struct worker *w)
{
    kiln_device_info dev, listed;
    kt_assert_status(kiln_context_get_device_info(w->ctx, &dev), KILN_SUCCESS);
    assert_true(dev.profile[0] != '\0');
    size_t count = 0;
    kt_assert_status(kiln_device_count(&count), KILN_SUCCESS);
    assert_true(dev.index < count);
    kt_assert_status(kiln_device_get_info(dev.index, &listed), KILN_SUCCESS);
    assert_string_equal(listed.name, dev.name);
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_cache_info(w->ctx, &cache), KILN_SUCCESS);
    assert_true(cache.disk_enabled);
    size_t length = 0;
    kt_assert_status(kiln_context_get_profile_json(w->ctx, NULL, 0, &length), KILN_SUCCESS);
    assert_true(length > 0);
    kt_assert_status(kiln_context_finish(w->ctx), KILN_SUCCESS);
}

struct job {
    const char *name;
    void (*run)(struct worker *w);
};

static const struct job jobs[] = {
    {"gemm cpu", gemm_cpu},
    {"conv find", conv_find},
    {"attention fused", attention_fused},
    {"pool", pool},
    {"gemm smallm", gemm_smallm},
    {"conv implicit-gemm", conv_igemm},
    {"buffer", buffer},
    {"attention naive", attention_naive},
    {"gemm direct", gemm_direct},
    {"conv winograd-2x2", conv_winograd},
    {"softmax", softmax},
    {"gemm handed over", gemm_handed},
    {"conv direct", conv_direct},
    {"activation", activation},
    {"gemm auto", gemm_auto},
    {"gemm clblast", gemm_clblast},
    {"conv im2col", conv_im2col},
    {"context queries", context_queries},
    {"conv implicit-gemm nhwc", conv_igemm_nhwc},
    {"conv gemm-1x1", conv_1x1},
    {"one-shot calls", one_shots},
};
enum { JOBS = sizeof jobs / sizeof *jobs };

/* ------------------------------------------------------------------------ */
/* One context shared by several threads                                    */
/* ------------------------------------------------------------------------ */

/* Every job ROUNDS times, thread t starting a quarter of the list further
   on than thread t - 1, so different operators run at the same time; then
   an activation whose event is left for the main thread, and the handed
   plan destroyed. */
static void *shared_context_worker(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int r = 0; r < ROUNDS; r++)
        for (size_t j = 0; j < JOBS; j++)
            jobs[(j + (size_t)w->index * JOBS / THREADS) % JOBS].run(w);
    w->left = activation_of_shared(w, activation_of(w), &w->left_event);
    kiln_gemm_plan_destroy(w->handed);
    return NULL;
}

static kiln_context *open_on(const char *dir)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.cache_dir = dir;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    return ctx;
}

/* Start THREADS threads running `main_fn` on workers[t] (index t, a seed
   of its own) after a common barrier, and join them. */
static void run_workers(struct worker *workers, void *(*main_fn)(void *))
{
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t].index = t;
        workers[t].seed = seed + 7919u * (uint64_t)(t + 1);
        workers[t].start = &start;
        assert_int_equal(pthread_create(&threads[t], NULL, main_fn, &workers[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    pthread_barrier_destroy(&start);
}

static void test_one_context_many_threads(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    kiln_context *ctx = open_on(dir);
    struct worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    float *shared_host;
    workers[0].ctx = ctx;
    workers[0].seed = seed;
    kiln_buffer *shared_x = random_buffer(&workers[0], SHARED_COUNT, &shared_host);
    for (int t = 0; t < THREADS; t++) {
        workers[t].ctx = ctx;
        workers[t].shared_x = shared_x;
        workers[t].shared_host = shared_host;
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 24, 40, 36);
        kt_assert_status(kiln_gemm_plan_create(ctx, &d, &workers[t].handed), KILN_SUCCESS);
    }
    const double t0 = now_s();
    run_workers(workers, shared_context_worker);
    printf("# %d threads, %d rounds of %d jobs on one context: %.2f s\n", THREADS, ROUNDS, (int)JOBS, now_s() - t0);

    /* The activations the threads left queued: the context finished here,
       their outputs checked, their events waited on and destroyed here. */
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    for (int t = 0; t < THREADS; t++) {
        check_activation_of_shared(&workers[t], activation_of(&workers[t]), workers[t].left);
        kt_wait_and_release(workers[t].left_event);
        kiln_buffer_destroy(workers[t].left);
        assert_int_equal(workers[t].conv_jobs, ROUNDS);
    }
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_cache_info(ctx, &cache), KILN_SUCCESS);
    printf("# cache: %llu built, %llu from disk, %llu memory hits, %llu store failures, %llu disk entries\n",
           (unsigned long long)cache.builds, (unsigned long long)cache.disk_hits, (unsigned long long)cache.memory_hits,
           (unsigned long long)cache.disk_failures, (unsigned long long)cache.disk_entries);
    assert_int_equal(cache.disk_failures, 0);
    assert_int_equal(cache.discarded, 0);
    assert_true(cache.memory_hits > 0);
    /* Each program is built once, however many threads ask for it at once,
       and stored once; the one other entry is the find database's choice
       for the find convolution. A program built twice would be stored
       twice under one name. */
    assert_int_equal(cache.disk_entries, cache.builds + 1);
    kiln_buffer_destroy(shared_x);
    free(shared_host);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* Several contexts, one per thread, on one cache directory                 */
/* ------------------------------------------------------------------------ */

/* The jobs each context of test_contexts_share_a_cache_dir runs. */
static const struct job context_jobs[] = {
    {"gemm cpu", gemm_cpu},
    {"conv find", conv_find},
    {"attention fused", attention_fused},
    {"softmax", softmax},
};
enum { CONTEXT_JOBS = sizeof context_jobs / sizeof *context_jobs };

static void run_context_jobs(struct worker *w)
{
    for (size_t j = 0; j < CONTEXT_JOBS; j++)
        context_jobs[(j + (size_t)w->index) % CONTEXT_JOBS].run(w);
}

/* A context of its own from the environment (KILN_CACHE_DIR), opened when
   every thread is ready. */
static void *own_context_worker(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->start);
    kt_assert_status(kiln_context_create(NULL, &w->ctx), KILN_SUCCESS);
    run_context_jobs(w);
    kiln_context_destroy(w->ctx);
    w->ctx = NULL;
    return NULL;
}

/* Names in `dir` that contain `part`. */
static int names_with(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (const struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

static void test_contexts_share_a_cache_dir(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    const char *env = getenv("KILN_CACHE_DIR");
    char *saved = env ? strdup(env) : NULL;
    assert_int_equal(setenv("KILN_CACHE_DIR", dir, 1), 0);

    struct worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    const double t0 = now_s();
    run_workers(workers, own_context_worker);
    printf("# %d contexts at once on one cache directory: %.2f s\n", THREADS, now_s() - t0);
    assert_int_equal(names_with(dir, ".tmp."), 0);

    /* A new context takes the find choice and every program from disk. */
    struct worker again = {.index = 0, .seed = seed ^ 0x5bd1e995u};
    kt_assert_status(kiln_context_create(NULL, &again.ctx), KILN_SUCCESS);
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_cache_info(again.ctx, &cache), KILN_SUCCESS);
    assert_string_equal(cache.dir, dir);
    const uint64_t entries = cache.disk_entries;
    assert_true(entries > 0);
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 8, 14, 14, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.activation = KILN_ACT_RELU;
    d.find = 1;
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(again.ctx, &d, &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    kiln_conv2d_plan_destroy(plan);
    run_context_jobs(&again);
    kt_assert_status(kiln_context_get_cache_info(again.ctx, &cache), KILN_SUCCESS);
    printf("# the next context: %llu from disk, %llu built, %llu entries; convolution: %s (%s)\n",
           (unsigned long long)cache.disk_hits, (unsigned long long)cache.builds,
           (unsigned long long)cache.disk_entries, info.name, info.reason);
    assert_string_equal(info.reason, "find: from the find database");
    assert_true(cache.disk_hits > 0);
    assert_int_equal(cache.builds, 0);
    assert_int_equal(cache.discarded, 0);
    assert_int_equal(cache.disk_entries, entries);
    kiln_context_destroy(again.ctx);

    if (saved)
        assert_int_equal(setenv("KILN_CACHE_DIR", saved, 1), 0);
    else
        assert_int_equal(unsetenv("KILN_CACHE_DIR"), 0);
    free(saved);
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* kiln_last_error_detail() per thread                                      */
/* ------------------------------------------------------------------------ */

#define DETAIL_ROUNDS 200

struct failing {
    kiln_context *ctx;
    int index;
    pthread_barrier_t *step;
};

/* Thread 0 asks for a GEMM with a leading dimension too small, thread 1
   reads past the end of a buffer, at the same time; each must see its own
   detail, and keep it while the other succeeds (clearing its own). */
static void *fail_differently(void *arg)
{
    struct failing *f = arg;
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(f->ctx, 64, &buf), KILN_SUCCESS);
    const char *mine = f->index ? "exceeds the buffer" : "lda", *theirs = f->index ? "lda" : "exceeds the buffer";
    for (int r = 0; r < DETAIL_ROUNDS; r++) {
        pthread_barrier_wait(f->step);
        if (f->index) {
            float x[32];
            kt_assert_status(kiln_buffer_read(buf, 0, sizeof x, x), KILN_ERROR_OUT_OF_BOUNDS);
        } else {
            kiln_gemm_desc d;
            kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 4, 4, 4);
            d.lda = 2;
            kiln_gemm_plan *plan = NULL;
            kt_assert_status(kiln_gemm_plan_create(f->ctx, &d, &plan), KILN_ERROR_INVALID_ARGUMENT);
        }
        pthread_barrier_wait(f->step); /* both have failed */
        const char *detail = kiln_last_error_detail();
        if (!strstr(detail, mine) || strstr(detail, theirs))
            fail_msg("thread %d, round %d: the detail is \"%s\"", f->index, r, detail);
        pthread_barrier_wait(f->step);
        if (r % 2 == f->index) { /* one succeeds, clearing its detail only */
            kiln_device_info info;
            kt_assert_status(kiln_context_get_device_info(f->ctx, &info), KILN_SUCCESS);
            assert_string_equal(kiln_last_error_detail(), "");
        }
        pthread_barrier_wait(f->step);
        detail = kiln_last_error_detail();
        if (r % 2 != f->index && !strstr(detail, mine))
            fail_msg("thread %d, round %d: the other thread's success changed the detail to \"%s\"", f->index, r,
                     detail);
    }
    kiln_buffer_destroy(buf);
    return NULL;
}

static void test_error_detail_per_thread(void **state)
{
    (void)state;
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = 1;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    pthread_barrier_t step;
    assert_int_equal(pthread_barrier_init(&step, NULL, 2), 0);
    struct failing f[2] = {{ctx, 0, &step}, {ctx, 1, &step}};
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, fail_differently, &f[t]), 0);
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    pthread_barrier_destroy(&step);
    /* The main thread made no failing call: its detail is its own. */
    assert_string_equal(kiln_last_error_detail(), "");
    kiln_context_destroy(ctx);
}

int main(void)
{
    /* A failed assertion on a worker thread aborts (see the top). */
    setenv("CMOCKA_TEST_ABORT", "1", 1);
    seed = kt_seed();
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_one_context_many_threads));
    kt_add(&tests, cmocka_unit_test(test_contexts_share_a_cache_dir));
    kt_add(&tests, cmocka_unit_test(test_error_detail_per_thread));
    return kt_run_with("threads", &tests, NULL, NULL);
}
