/*
 * A short network run the way an application runs one (README, "Running a
 * network"): plans executed back to back on one context's queue, each
 * layer reading the buffer the previous one wrote, no event and no wait
 * between them, and one wait at the end (on the last call's event, or
 * kiln_context_finish). The chain: a 3x3 stride-2 convolution with bias and
 * ReLU, a depthwise 3x3 adding the first one's output as its residual, a
 * pointwise 1x1, a global average pool, a classifier (GEMM) and a softmax.
 *
 * Each layer is checked against its double-precision reference computed
 * from the layer's actual input (the previous layer's output read back),
 * within the operator tests' bounds, and every output of the chain must be
 * bitwise the output of the same plans run one at a time with a wait after
 * each. Outputs start as NaN.
 */
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "conv_ref.h"
#include "nn_ref.h"
#include "test_util.h"

enum { BATCH = 2, C0 = 3, HW = 17, C1 = 8, HW1 = 9, C2 = 16, CLASSES = 10 };
enum { X0, W1, B1, Y1, W2, B2, Y2, W3, B3, Y3, Y4, WFC, Y5, Y6, TENSORS };
enum { CONV1, CONV2, CONV3, POOL, FC, SOFTMAX, LAYERS };

static const size_t counts[TENSORS] = {[X0] = BATCH * C0 * HW * HW,   [W1] = C1 * C0 * 9,    [B1] = C1,
                                       [Y1] = BATCH * C1 * HW1 * HW1, [W2] = C1 * 9,         [B2] = C1,
                                       [Y2] = BATCH * C1 * HW1 * HW1, [W3] = C2 * C1,        [B3] = C2,
                                       [Y3] = BATCH * C2 * HW1 * HW1, [Y4] = BATCH * C2,     [WFC] = CLASSES * C2,
                                       [Y5] = BATCH * CLASSES,        [Y6] = BATCH * CLASSES};
static const int outputs[LAYERS] = {Y1, Y2, Y3, Y4, Y5, Y6};

struct network {
    kiln_conv2d_desc conv[3];
    kiln_conv2d_plan *plan[3];
    kiln_pool2d_desc pool;
    kiln_gemm_plan *fc;
    kiln_buffer *buf[TENSORS];
    float *host[TENSORS];
};

static void network_init(struct network *net, kiln_context *ctx)
{
    memset(net, 0, sizeof *net);
    kiln_conv2d_desc *d = net->conv;
    kiln_conv2d_desc_init(&d[0], KILN_NCHW, BATCH, C0, HW, HW, C1, 3, 3);
    d[0].stride_h = d[0].stride_w = 2;
    d[0].pad_top = d[0].pad_bottom = d[0].pad_left = d[0].pad_right = 1;
    kiln_conv2d_desc_init(&d[1], KILN_NCHW, BATCH, C1, HW1, HW1, C1, 3, 3);
    d[1].pad_top = d[1].pad_bottom = d[1].pad_left = d[1].pad_right = 1;
    d[1].groups = C1;
    d[1].beta = 1.0f; /* the residual: the first layer's output */
    kiln_conv2d_desc_init(&d[2], KILN_NCHW, BATCH, C1, HW1, HW1, C2, 1, 1);
    for (int i = 0; i < 3; i++) {
        d[i].has_bias = 1;
        d[i].activation = KILN_ACT_RELU;
        kt_assert_status(kiln_conv2d_plan_create(ctx, &d[i], &net->plan[i]), KILN_SUCCESS);
    }
    net->pool = (kiln_pool2d_desc){.layout = KILN_NCHW,
                                   .n = BATCH,
                                   .c = C2,
                                   .h = HW1,
                                   .w = HW1,
                                   .window_h = HW1,
                                   .window_w = HW1,
                                   .stride_h = 1,
                                   .stride_w = 1,
                                   .mode = KILN_POOL_AVG};
    kiln_gemm_desc g;
    kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, BATCH, CLASSES, C2);
    kt_assert_status(kiln_gemm_plan_create(ctx, &g, &net->fc), KILN_SUCCESS);
    uint64_t seed = 11;
    for (int t = 0; t < TENSORS; t++) {
        net->host[t] = malloc(counts[t] * sizeof(float));
        assert_non_null(net->host[t]);
        kt_fill_uniform(net->host[t], counts[t], -1.0f, 1.0f, &seed);
        kt_assert_status(kiln_buffer_create(ctx, counts[t] * sizeof(float), &net->buf[t]), KILN_SUCCESS);
        kt_assert_status(kiln_buffer_write(net->buf[t], 0, counts[t] * sizeof(float), net->host[t]), KILN_SUCCESS);
    }
}

static void network_free(struct network *net)
{
    for (int i = 0; i < 3; i++)
        kiln_conv2d_plan_destroy(net->plan[i]);
    kiln_gemm_plan_destroy(net->fc);
    for (int t = 0; t < TENSORS; t++) {
        kiln_buffer_destroy(net->buf[t]);
        free(net->host[t]);
    }
}

/* Run the chain; with `wait_each`, wait after every layer; else return the
   last call's event. Outputs are NaN before. */
static kiln_event *network_run(struct network *net, kiln_context *ctx, int wait_each)
{
    for (int l = 0; l < LAYERS; l++)
        kt_assert_status(kiln_buffer_fill_f32(net->buf[outputs[l]], 0, counts[outputs[l]], NAN), KILN_SUCCESS);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    kiln_buffer **b = net->buf;
    kiln_event *ev = NULL;
    for (int l = 0; l < LAYERS; l++) {
        kiln_status st;
        if (l == CONV1)
            st = kiln_conv2d_plan_execute(net->plan[0], b[X0], b[W1], b[B1], NULL, b[Y1], NULL);
        else if (l == CONV2)
            st = kiln_conv2d_plan_execute(net->plan[1], b[Y1], b[W2], b[B2], b[Y1], b[Y2], NULL);
        else if (l == CONV3)
            st = kiln_conv2d_plan_execute(net->plan[2], b[Y2], b[W3], b[B3], NULL, b[Y3], NULL);
        else if (l == POOL)
            st = kiln_pool2d(ctx, &net->pool, b[Y3], b[Y4], NULL);
        else if (l == FC)
            st = kiln_gemm_plan_execute(net->fc, 1.0f, b[Y4], 0, b[WFC], 0, 0.0f, b[Y5], 0, NULL);
        else
            st = kiln_softmax(ctx, BATCH, CLASSES, 1, b[Y5], b[Y6], wait_each ? NULL : &ev);
        kt_assert_status(st, KILN_SUCCESS);
        if (wait_each)
            kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    }
    return ev;
}

static float *read_back(const struct network *net, int t)
{
    float *v = malloc(counts[t] * sizeof *v);
    assert_non_null(v);
    kt_assert_status(kiln_buffer_read(net->buf[t], 0, counts[t] * sizeof *v, v), KILN_SUCCESS);
    return v;
}

static void check_close(const char *what, const float *got, const double *ref, const double *bound, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= bound[i]) && bad++ < 5)
            print_error("%s[%zu] = %.9g, reference %.9g, bound %.3g\n", what, i, got[i], ref[i], bound[i]);
    if (bad)
        fail_msg("%s: %zu of %zu outputs outside their bounds", what, bad, n);
}

/* Each layer against its reference, from the inputs it actually read. */
static void check_layers(const struct network *net, float *const out[LAYERS])
{
    const float *in[LAYERS] = {net->host[X0], out[CONV1], out[CONV2], out[CONV3], out[POOL], out[FC]};
    const int weights[3] = {W1, W2, W3}, biases[3] = {B1, B2, B3};
    for (int l = 0; l < LAYERS; l++) {
        const size_t n = counts[outputs[l]];
        double *ref = malloc(n * sizeof *ref), *bound = malloc(n * sizeof *bound);
        assert_true(ref && bound);
        char what[32];
        snprintf(what, sizeof what, "layer %d", l + 1);
        if (l <= CONV3) {
            kiln_conv2d_plan_info info;
            kt_assert_status(kiln_conv2d_plan_describe(net->plan[l], &info), KILN_SUCCESS);
            const kiln_conv2d_desc *d = &net->conv[l];
            cr_reference(d, in[l], net->host[weights[l]], net->host[biases[l]], l == CONV2 ? out[CONV1] : NULL,
                         kiln_conv_algo_tol(info.algo, kiln_conv_dims_of(d).k_eff), ref, bound);
        } else if (l == POOL) {
            /* The reference's bound is for values in [-1, 1]: scaled by the
               largest input. */
            nr_pool_reference(&net->pool, 1, 1, in[l], ref, bound);
            double largest = 1.0;
            for (size_t i = 0; i < counts[Y3]; i++)
                largest = fmax(largest, fabs((double)in[l][i]));
            for (size_t i = 0; i < n; i++)
                bound[i] = bound[i] * largest + FLT_MIN;
        } else if (l == FC) {
            for (size_t r = 0; r < BATCH; r++)
                for (size_t c = 0; c < CLASSES; c++) {
                    double s = 0.0, a = 0.0;
                    for (size_t k = 0; k < C2; k++) {
                        const double p = (double)in[l][r * C2 + k] * net->host[WFC][c * C2 + k];
                        s += p, a += fabs(p);
                    }
                    ref[r * CLASSES + c] = s, bound[r * CLASSES + c] = C2 * 0x1p-22 * a + FLT_MIN;
                }
        } else {
            nr_softmax_reference(BATCH, CLASSES, 1, in[l], ref, bound);
        }
        check_close(what, out[l], ref, bound, n);
        free(ref);
        free(bound);
    }
}

static void test_chain_without_waits(void **state)
{
    (void)state;
    struct network net;
    network_init(&net, kt_ctx);
    /* One layer at a time, a wait after each: the reference run. */
    assert_null(network_run(&net, kt_ctx, 1));
    float *step[LAYERS], *chain[LAYERS];
    for (int l = 0; l < LAYERS; l++)
        step[l] = read_back(&net, outputs[l]);
    check_layers(&net, step);
    /* Back to back, twice: waiting on the last call's event, then with
       kiln_context_finish (the event released unwaited). */
    for (int round = 0; round < 2; round++) {
        kiln_event *ev = network_run(&net, kt_ctx, 0);
        assert_non_null(ev);
        if (round == 0)
            kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
        else
            kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
        kiln_event_destroy(ev);
        for (int l = 0; l < LAYERS; l++) {
            chain[l] = read_back(&net, outputs[l]);
            if (memcmp(chain[l], step[l], counts[outputs[l]] * sizeof(float)) != 0)
                fail_msg("round %d: layer %d's output differs from the run with waits", round, l + 1);
            free(chain[l]);
        }
    }
    for (int l = 0; l < LAYERS; l++)
        free(step[l]);
    network_free(&net);
}

/* A network's plans and runs say nothing on a working device: in a fresh
   context, so that every kernel is created while kiln's warnings are
   counted. On kiln's threads (tools/test.sh runs this test with
   KILN_CPU_THREADS=kiln:3) each kernel's local memory and work-group size
   are read from the copy's device, which the context's other devices
   share the program with; read from the program's device list as one
   device, they failed, and every kernel warned (and ran on one thread
   fewer). */
static void test_chain_says_nothing(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    struct kt_capture cap;
    kt_capture_begin(&cap, dir);
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    struct network net;
    network_init(&net, ctx);
    assert_null(network_run(&net, ctx, 1));
    network_free(&net);
    kiln_context_destroy(ctx);
    assert_int_equal(kt_capture_end(&cap), 0);
    kt_remove_tree(dir);
    free(dir);
}

/* The one core thread `tid` of this process may run on, or -1. */
static int pinned_core(pid_t tid)
{
    cpu_set_t set;
    if (sched_getaffinity(tid, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1)
        return -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set))
            return cpu;
    return -1;
}

/* A thread of kiln's (named "kiln-crew") pinned to one core: its id, and
   its core in *cpu; 0 where there is none. */
static pid_t crew_thread(int *cpu)
{
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks)
        return 0;
    pid_t found = 0;
    for (struct dirent *e; !found && (e = readdir(tasks));) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) && strncmp(comm, "kiln-crew", 9) == 0) {
            const pid_t tid = (pid_t)atoi(e->d_name);
            if ((*cpu = pinned_core(tid)) >= 0)
                found = tid;
        }
        fclose(f);
    }
    closedir(tasks);
    return found;
}

/* On kiln's threads pinned one a core (the default on POCL's CPU device,
   with a core for each thread and one for the caller), a thread that
   finds the caller on its core as a launch starts moves to the spare core,
   so that the caller's part of the launch and its own do not share one
   (src/opencl/cl_crew.c). The test moves itself onto a thread's core, runs
   the chain with a wait after each layer and checks it. Skipped where no
   thread of kiln's is pinned (POCL's workers, or more threads than cores). */
static void test_crew_leaves_the_callers_core(void **state)
{
    (void)state;
    struct network net;
    network_init(&net, kt_ctx);
    assert_null(network_run(&net, kt_ctx, 1)); /* the threads started */
    int cpu = -1;
    const pid_t tid = crew_thread(&cpu);
    if (!tid) {
        network_free(&net);
        print_message("# no thread of kiln's pinned to a core here: nothing to check\n");
        skip();
    }
    cpu_set_t mine, one;
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_null(network_run(&net, kt_ctx, 1));
    assert_int_equal(sched_setaffinity(0, sizeof mine, &mine), 0);
    const int now = pinned_core(tid);
    if (now == cpu)
        fail_msg("kiln's thread stayed on core %d, the caller's", cpu);
    assert_true(now >= 0);
    float *out[LAYERS];
    for (int l = 0; l < LAYERS; l++)
        out[l] = read_back(&net, outputs[l]);
    check_layers(&net, out);
    for (int l = 0; l < LAYERS; l++)
        free(out[l]);
    network_free(&net);
}

/* Launches of one kernel at ever wider grids, each split over kiln's
   threads where they run (tools/test.sh: KILN_CPU_THREADS=kiln:3 too): the
   copies of a program share POCL's compiled kernel, which POCL counts the
   launches of by kernel and work-group size alone, so the parts of a split
   launch must launch alike (crew_launch, src/opencl/cl_backend.c): with
   the first part's offset zero and the others' not, POCL aborted here.
   Each fill must write its range and nothing else: a part's work-items
   have the launch's ids. */
static size_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (size_t)(*s >> 11);
}

static void test_every_grid_size(void **state)
{
    (void)state;
    enum { MOST = 1 << 22 };
    float *host = malloc(MOST * sizeof *host);
    assert_non_null(host);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(kt_ctx, MOST * sizeof *host, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(buf, 0, MOST, -1.0f), KILN_SUCCESS);
    uint64_t seed = kt_seed() | 1;
    size_t round = 0;
    for (size_t count = 1; count < MOST / 2; count += count / 3 + 1 + next_random(&seed) % 97, round++) {
        const size_t first = next_random(&seed) % (MOST - count);
        kt_assert_status(kiln_buffer_fill_f32(buf, first, count, (float)round), KILN_SUCCESS);
        kt_assert_status(kiln_buffer_read(buf, 0, MOST * sizeof *host, host), KILN_SUCCESS);
        for (size_t i = 0; i < MOST; i++) {
            const float want = i >= first && i < first + count ? (float)round : -1.0f;
            if (host[i] != want)
                fail_msg("fill of %zu from %zu: element %zu is %g, not %g", count, first, i, host[i], want);
        }
        kt_assert_status(kiln_buffer_fill_f32(buf, first, count, -1.0f), KILN_SUCCESS);
    }
    kiln_buffer_destroy(buf);
    free(host);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_chain_without_waits));
    kt_add(&tests, cmocka_unit_test(test_chain_says_nothing));
    kt_add(&tests, cmocka_unit_test(test_crew_leaves_the_callers_core));
    kt_add(&tests, cmocka_unit_test(test_every_grid_size));
    return kt_run("network", &tests);
}
