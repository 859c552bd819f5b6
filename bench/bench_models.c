/*
 * kiln-bench conv --model: the layers of an inference network at 224x224,
 * each on kiln and a peer (oneDNN, or cuDNN for its convolutions) with the
 * epilogue inference fuses into it, and the network's total (each distinct
 * layer timed once, weighted by how often it occurs).
 *
 * MobileNet v1 (1.0, 224): every convolution with batch norm folded into a
 * bias, then ReLU. ResNet-50 (v1.5: a block's stride sits on its 3x3):
 * convolutions with bias and ReLU, the projection shortcut with bias only,
 * and the last 1x1 of each block adds the shortcut (beta 1, z) before its
 * ReLU. Pooling runs on kiln_pool2d, the classifier on kiln_gemm, the
 * probabilities on kiln_softmax; every layer gets fresh random data. Then
 * the whole network in its own order, waited on once (below).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kiln/kiln_cl.h"

enum layer_kind { CONV, MAXPOOL, AVGPOOL, FC, SOFTMAX };
enum epilogue { BIAS_RELU, BIAS, BIAS_RESIDUAL_RELU };

/* A layer with its input c x hw x hw (square). conv: k filters of rs x rs;
   pools: window rs x rs; fc: c inputs, k outputs; softmax: c classes. */
struct layer {
    const char *name;
    unsigned repeat; /* how often the network runs this layer's shape */
    enum layer_kind kind;
    size_t c, hw, k, rs, stride, pad, groups;
    enum epilogue epilogue;
};

/* Depthwise 3x3 then pointwise 1x1, at the depthwise layer's input size. */
#define DW_PW(name, repeat, c, hw, stride, k)                                                                          \
    {name "/dw", repeat, CONV, c, hw, c, 3, stride, 1, c, BIAS_RELU},                                                  \
    {                                                                                                                  \
        name "/pw", repeat, CONV, c, (hw) / (stride), k, 1, 1, 0, 1, BIAS_RELU                                         \
    }

static const struct layer mobilenet_v1[] = {
    {"conv1", 1, CONV, 3, 224, 32, 3, 2, 1, 1, BIAS_RELU},
    DW_PW("conv2_1", 1, 32, 112, 1, 64),
    DW_PW("conv2_2", 1, 64, 112, 2, 128),
    DW_PW("conv3_1", 1, 128, 56, 1, 128),
    DW_PW("conv3_2", 1, 128, 56, 2, 256),
    DW_PW("conv4_1", 1, 256, 28, 1, 256),
    DW_PW("conv4_2", 1, 256, 28, 2, 512),
    DW_PW("conv5_1-5", 5, 512, 14, 1, 512),
    DW_PW("conv5_6", 1, 512, 14, 2, 1024),
    DW_PW("conv6", 1, 1024, 7, 1, 1024),
    {"pool6", 1, AVGPOOL, 1024, 7, 0, 7, 1, 0, 1, BIAS},
    {"fc7", 1, FC, 1024, 1, 1000, 1, 1, 0, 1, BIAS},
    {"prob", 1, SOFTMAX, 1000, 1, 0, 1, 1, 0, 1, BIAS},
};

/* Names as in the original ResNet release: resNx_branch2a/2b/2c are a
   block's 1x1, 3x3, 1x1 (x: a for the stage's first block, "b+" for the
   others) and branch1 the projection. */
#define CONV1X1(name, repeat, c, hw, k, stride, epilogue)                                                              \
    {                                                                                                                  \
        name, repeat, CONV, c, hw, k, 1, stride, 0, 1, epilogue                                                        \
    }
#define CONV3X3(name, repeat, c, hw, stride)                                                                           \
    {                                                                                                                  \
        name, repeat, CONV, c, hw, c, 3, stride, 1, 1, BIAS_RELU                                                       \
    }

static const struct layer resnet50[] = {
    {"conv1", 1, CONV, 3, 224, 64, 7, 2, 3, 1, BIAS_RELU},
    {"pool1", 1, MAXPOOL, 64, 112, 0, 3, 2, 1, 1, BIAS},
    CONV1X1("res2a_branch2a", 1, 64, 56, 64, 1, BIAS_RELU),
    CONV1X1("res2b+_branch2a", 2, 256, 56, 64, 1, BIAS_RELU),
    CONV3X3("res2_branch2b", 3, 64, 56, 1),
    CONV1X1("res2_branch2c", 3, 64, 56, 256, 1, BIAS_RESIDUAL_RELU),
    CONV1X1("res2a_branch1", 1, 64, 56, 256, 1, BIAS),
    CONV1X1("res3a_branch2a", 1, 256, 56, 128, 1, BIAS_RELU),
    CONV3X3("res3a_branch2b", 1, 128, 56, 2),
    CONV1X1("res3a_branch1", 1, 256, 56, 512, 2, BIAS),
    CONV1X1("res3b+_branch2a", 3, 512, 28, 128, 1, BIAS_RELU),
    CONV3X3("res3b+_branch2b", 3, 128, 28, 1),
    CONV1X1("res3_branch2c", 4, 128, 28, 512, 1, BIAS_RESIDUAL_RELU),
    CONV1X1("res4a_branch2a", 1, 512, 28, 256, 1, BIAS_RELU),
    CONV3X3("res4a_branch2b", 1, 256, 28, 2),
    CONV1X1("res4a_branch1", 1, 512, 28, 1024, 2, BIAS),
    CONV1X1("res4b+_branch2a", 5, 1024, 14, 256, 1, BIAS_RELU),
    CONV3X3("res4b+_branch2b", 5, 256, 14, 1),
    CONV1X1("res4_branch2c", 6, 256, 14, 1024, 1, BIAS_RESIDUAL_RELU),
    CONV1X1("res5a_branch2a", 1, 1024, 14, 512, 1, BIAS_RELU),
    CONV3X3("res5a_branch2b", 1, 512, 14, 2),
    CONV1X1("res5a_branch1", 1, 1024, 14, 2048, 2, BIAS),
    CONV1X1("res5b+_branch2a", 2, 2048, 7, 512, 1, BIAS_RELU),
    CONV3X3("res5b+_branch2b", 2, 512, 7, 1),
    CONV1X1("res5_branch2c", 3, 512, 7, 2048, 1, BIAS_RESIDUAL_RELU),
    {"pool5", 1, AVGPOOL, 2048, 7, 0, 7, 1, 0, 1, BIAS},
    {"fc1000", 1, FC, 2048, 1, 1000, 1, 1, 0, 1, BIAS},
    {"prob", 1, SOFTMAX, 1000, 1, 0, 1, 1, 0, 1, BIAS},
};

/* A bottleneck network's stage (ResNet-50): its first block (a) and the
   others (b+) as rows of the table, by name. A block runs 2a, 2b, 2c, and
   2c adds the shortcut: the block's input, or in the first block the
   projection (branch1) of it. */
struct stage {
    const char *a_2a, *rest_2a, *a_2b, *rest_2b, *branch2c, *branch1;
    int blocks;
};

static const struct stage resnet50_stages[] = {
    {"res2a_branch2a", "res2b+_branch2a", "res2_branch2b", "res2_branch2b", "res2_branch2c", "res2a_branch1", 3},
    {"res3a_branch2a", "res3b+_branch2a", "res3a_branch2b", "res3b+_branch2b", "res3_branch2c", "res3a_branch1", 4},
    {"res4a_branch2a", "res4b+_branch2a", "res4a_branch2b", "res4b+_branch2b", "res4_branch2c", "res4a_branch1", 6},
    {"res5a_branch2a", "res5b+_branch2a", "res5a_branch2b", "res5b+_branch2b", "res5_branch2c", "res5a_branch1", 3},
};

/* A network: its table, and for its whole-network pass the stages of a
   bottleneck network (none: a chain, every layer reading the one before's
   output). */
struct model {
    const char *name;
    const struct layer *layers;
    size_t count;
    const struct stage *stages;
    size_t nstages;
};

static const struct model models[] = {
    {"mobilenet_v1", mobilenet_v1, sizeof mobilenet_v1 / sizeof *mobilenet_v1, NULL, 0},
    {"resnet50", resnet50, sizeof resnet50 / sizeof *resnet50, resnet50_stages,
     sizeof resnet50_stages / sizeof *resnet50_stages},
};

/* Timed runs per library and layer: about RUN_BUDGET_MS at an assumed
   ASSUMED_GFLOPS, within [MIN_RUNS, MAX_RUNS]; the operators around the
   convolutions are cheap and get MAX_RUNS. */
enum { MIN_RUNS = 5, MAX_RUNS = 50 };
/* Passes over the per-layer table (--rounds). */
enum { MAX_ROUNDS = 100 };
static const double RUN_BUDGET_MS = 400.0, ASSUMED_GFLOPS = 20.0;

static int runs_for(double flops)
{
    double runs = RUN_BUDGET_MS / (flops / (ASSUMED_GFLOPS * 1e6));
    return runs < MIN_RUNS ? MIN_RUNS : runs > MAX_RUNS ? MAX_RUNS : (int)runs;
}

/* One layer's outcome. */
struct row {
    char shape[128];
    char algo[32]; /* kiln's algorithm or operator */
    struct bench_result kiln, peer;
};

/* ---- convolutions ---- */

static void conv_desc(const struct layer *l, size_t n, kiln_tensor_layout layout, kiln_conv2d_desc *d)
{
    kiln_conv2d_desc_init(d, layout, n, l->c, l->hw, l->hw, l->k, l->rs, l->rs);
    d->stride_h = d->stride_w = l->stride;
    d->pad_top = d->pad_bottom = d->pad_left = d->pad_right = l->pad;
    d->groups = l->groups;
    d->has_bias = 1;
    d->activation = l->epilogue == BIAS ? KILN_ACT_NONE : KILN_ACT_RELU;
    d->beta = l->epilogue == BIAS_RESIDUAL_RELU ? 1.0f : 0.0f;
    d->constant_weights = 1; /* inference: as oneDNN's weights, reordered once outside the timing */
}

/* A pooling layer's descriptor. */
static kiln_pool2d_desc pool_desc(const struct layer *l, size_t n, kiln_tensor_layout layout)
{
    return (kiln_pool2d_desc){.layout = layout,
                              .n = n,
                              .c = l->c,
                              .h = l->hw,
                              .w = l->hw,
                              .window_h = l->rs,
                              .window_w = l->rs,
                              .stride_h = l->stride,
                              .stride_w = l->stride,
                              .pad_top = l->pad,
                              .pad_bottom = l->pad,
                              .pad_left = l->pad,
                              .pad_right = l->pad,
                              .mode = l->kind == MAXPOOL ? KILN_POOL_MAX : KILN_POOL_AVG};
}

/* `peer` is BENCH_NN_PEER_COUNT for none. */
static int run_conv(kiln_context *ctx, const struct layer *l, size_t n, kiln_tensor_layout layout,
                    enum bench_nn_peer peer, struct row *row, struct bench_conv_report *rep)
{
    kiln_conv2d_desc d;
    conv_desc(l, n, layout, &d);
    int runs = runs_for(bench_conv_flops(&d));
    /* The shortcut is summed in place, as in the whole network and as
       oneDNN's sum post-op does. */
    struct bench_conv_options opt = {
        .warmup = 1, .reps = runs, .peers = peer < BENCH_NN_PEER_COUNT ? 1u << peer : 0, .in_place = d.beta != 0.0f};
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++)
        opt.peer_reps[p] = runs;
    const kiln_conv_algo algo = KILN_CONV_AUTO;
    int failed = bench_conv_run(ctx, &d, &algo, 1, &opt, rep);
    bench_conv_shape(&d, row->shape, sizeof row->shape);
    snprintf(row->algo, sizeof row->algo, "%s", rep->kiln.state == BENCH_MEASURED ? rep->plan.name : "-");
    row->kiln = rep->kiln;
    if (peer < BENCH_NN_PEER_COUNT)
        row->peer = rep->peers[peer];
    bench_conv_check_errors(rep);
    return failed;
}

/* ---- pooling, classifier, softmax ---- */

/* Operands of a layer other than a convolution: x (and w for fc) random, y
   written; host arrays for oneDNN, device buffers for kiln. */
struct other {
    kiln_context *ctx;
    const struct layer *l;
    size_t n;
    kiln_pool2d_desc pool;
    kiln_gemm_plan *gemm;
    float *x, *w, *y;
    kiln_buffer *dx, *dw, *dy;
    kiln_status st;
};

static int other_run(void *arg)
{
    struct other *o = arg;
    if (o->l->kind == FC)
        o->st = kiln_gemm_plan_execute(o->gemm, 1.0f, o->dx, 0, o->dw, 0, 0.0f, o->dy, 0, NULL);
    else if (o->l->kind == SOFTMAX)
        o->st = kiln_softmax(o->ctx, o->n, o->l->c, 1, o->dx, o->dy, NULL);
    else
        o->st = kiln_pool2d(o->ctx, &o->pool, o->dx, o->dy, NULL);
    if (o->st == KILN_SUCCESS)
        o->st = kiln_context_finish(o->ctx);
    return o->st != KILN_SUCCESS;
}

static void print_other_json(const kiln_device_info *device, const char *model, const struct layer *l,
                             enum bench_nn_peer peer, const struct row *row)
{
    static const char *const ops[] = {[MAXPOOL] = "pool", [AVGPOOL] = "pool", [FC] = "fc", [SOFTMAX] = "softmax"};
    fprintf(stdout, "{\"op\":\"%s\",\"model\":\"%s\",\"layer\":\"%s\",\"repeat\":%u,\"shape\":", ops[l->kind], model,
            l->name, l->repeat);
    bench_json_string(stdout, row->shape);
    fputs(",\"device\":", stdout);
    bench_json_string(stdout, device->name);
    fprintf(stdout, ",\"algo\":\"%s\"", row->algo);
    if (row->kiln.state == BENCH_MEASURED) {
        bench_json_number(stdout, "median_ms", row->kiln.median_ms);
        bench_json_number(stdout, "gflops", row->kiln.gflops);
        fprintf(stdout, ",\"reps\":%d", row->kiln.reps);
    } else {
        fputs(",\"error\":", stdout);
        bench_json_string(stdout, row->kiln.error);
    }
    fputs(",\"peers\":{", stdout);
    if (row->peer.state != BENCH_NOT_REQUESTED) {
        fprintf(stdout, "\"%s\":", bench_nn_peer_name(peer));
        bench_json_result(stdout, &row->peer, bench_nn_peer_threads(peer));
    }
    fputs("}}\n", stdout);
    fflush(stdout);
}

static int run_other(kiln_context *ctx, const struct layer *l, size_t n, kiln_tensor_layout layout,
                     enum bench_nn_peer peer, struct row *row)
{
    struct other o = {.ctx = ctx, .l = l, .n = n};
    struct bench_nn_op op = {.rows = n, .in = l->c, .out = l->k};
    size_t nx = n * l->c, ny = n * (l->kind == FC ? l->k : l->c);
    if (l->kind == MAXPOOL || l->kind == AVGPOOL) {
        kiln_pool2d_desc *p = &o.pool;
        *p = pool_desc(l, n, layout);
        size_t out = (l->hw + 2 * l->pad - l->rs) / l->stride + 1;
        nx *= l->hw * l->hw;
        ny *= out * out;
        op.kind = BENCH_NN_POOL;
        op.pool = p;
        snprintf(row->shape, sizeof row->shape, "%zux%zux%zux%zu,%s%zux%zu,stride=%zu,pad=%zu", n, l->c, l->hw, l->hw,
                 l->kind == MAXPOOL ? "max" : "avg", l->rs, l->rs, l->stride, l->pad);
        snprintf(row->algo, sizeof row->algo, "kiln_pool2d");
    } else if (l->kind == FC) {
        op.kind = BENCH_NN_FC;
        snprintf(row->shape, sizeof row->shape, "%zux%zu,out=%zu", n, l->c, l->k);
        snprintf(row->algo, sizeof row->algo, "kiln_gemm");
    } else {
        op.kind = BENCH_NN_SOFTMAX;
        snprintf(row->shape, sizeof row->shape, "%zux%zu", n, l->c);
        snprintf(row->algo, sizeof row->algo, "kiln_softmax");
    }
    snprintf(row->kiln.algo, sizeof row->kiln.algo, "%s", row->algo);
    uint64_t rng = 7;
    int have_operands = !(bench_operand(ctx, nx, &rng, &o.x, &o.dx, &row->kiln, "x") ||
                          (l->kind == FC && bench_operand(ctx, l->k * l->c, &rng, &o.w, &o.dw, &row->kiln, "w")) ||
                          bench_operand(ctx, ny, NULL, &o.y, &o.dy, &row->kiln, "y"));
    kiln_gemm_desc g;
    kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, n, l->k, l->c);
    /* GFLOP/s only where they mean something: the classifier's GEMM. Outputs
       are not checked here (that is the operators' tests' work). */
    double flops = l->kind == FC ? 2.0 * (double)n * (double)l->c * (double)l->k : NAN;
    struct bench_timing t;
    if (have_operands && (l->kind != FC || !bench_fail(kiln_gemm_plan_create(ctx, &g, &o.gemm), &row->kiln, "plan"))) {
        if (bench_measure(other_run, &o, 1, MAX_RUNS, 0.0, &t) != 0)
            bench_fail(o.st, &row->kiln, "run");
        else
            row->kiln = (struct bench_result){.state = BENCH_MEASURED,
                                              .median_ms = t.median_ms,
                                              .reps = t.reps,
                                              .gflops = flops / (t.median_ms * 1e6),
                                              .max_rel_err = NAN};
        snprintf(row->kiln.algo, sizeof row->kiln.algo, "%s", row->algo);
    }
    if (have_operands && peer < BENCH_NN_PEER_COUNT) {
        op.src = o.x;
        op.weights = o.w;
        op.dst = o.y;
        if (bench_nn_peer_time(peer, &op, 1, MAX_RUNS, 0.0, 0, &row->peer) == 0) {
            row->peer.gflops = flops / (row->peer.median_ms * 1e6);
            row->peer.max_rel_err = NAN;
        }
    }
    kiln_gemm_plan_destroy(o.gemm);
    kiln_buffer_destroy(o.dx);
    kiln_buffer_destroy(o.dw);
    kiln_buffer_destroy(o.dy);
    free(o.x);
    free(o.w);
    free(o.y);
    return row->kiln.state != BENCH_MEASURED;
}

/* ---- rounds ---- */

/* A layer over the rounds of the per-layer table: its row (the first
   round's, or the first failure's), its convolution's report, and each
   round's median times. Once the last round is in, the row holds the
   medians of the rounds' medians, the sum of their runs and the largest
   error. */
struct layer_runs {
    struct row row;
    struct bench_conv_report rep;
    double *kiln_ms, *peer_ms; /* a value per round */
};

static void result_add(struct bench_result *into, const struct bench_result *r, double *ms, int round)
{
    if (round == 0 || into->state != BENCH_MEASURED)
        return;
    if (r->state != BENCH_MEASURED) {
        *into = *r; /* a failure in any round stands */
        return;
    }
    ms[round] = r->median_ms;
    into->reps += r->reps;
    if (r->max_rel_err > into->max_rel_err)
        into->max_rel_err = r->max_rel_err;
}

static void layer_runs_add(struct layer_runs *lr, int round, const struct row *row, const struct bench_conv_report *rep)
{
    if (round == 0) {
        lr->row = *row;
        if (rep)
            lr->rep = *rep;
        lr->kiln_ms[0] = row->kiln.median_ms;
        lr->peer_ms[0] = row->peer.median_ms;
        return;
    }
    result_add(&lr->row.kiln, &row->kiln, lr->kiln_ms, round);
    result_add(&lr->row.peer, &row->peer, lr->peer_ms, round);
}

static void result_finish(struct bench_result *r, double *ms, int rounds)
{
    if (r->state != BENCH_MEASURED)
        return;
    const double first = r->median_ms, median = bench_median(ms, (size_t)rounds);
    r->median_ms = median;
    r->gflops *= first / median; /* the same flops in a new time (NAN stays NAN) */
}

static void layer_runs_finish(struct layer_runs *lr, int rounds)
{
    result_finish(&lr->row.kiln, lr->kiln_ms, rounds);
    result_finish(&lr->row.peer, lr->peer_ms, rounds);
}

static void print_conv_json(const kiln_device_info *device, const char *model, const struct layer *l,
                            enum bench_nn_peer peer, struct layer_runs *lr)
{
    lr->rep.kiln = lr->row.kiln;
    if (peer < BENCH_NN_PEER_COUNT)
        lr->rep.peers[peer] = lr->row.peer;
    char extra[160];
    snprintf(extra, sizeof extra, "\"model\":\"%s\",\"layer\":\"%s\",\"repeat\":%u,", model, l->name, l->repeat);
    bench_conv_print_json(stdout, device, &lr->rep, extra);
}

/* ---- the whole network, one wait ---- */

/* The whole network as an application runs it (README, "Running a
   network"): every layer in the network's order, each occurrence with
   weights of its own, enqueued one after another and waited on once at the
   end. Activations live in NET_SLOTS buffers of the largest activation's
   size, as an inference runtime reuses its activation memory: a layer reads
   the output of the layer that produced its input, and ResNet-50's last 1x1
   of a block adds a shortcut written a few layers before, so both come from
   cache as they would. With a buffer per output, MobileNet v1's outputs
   alone (18 MB) and its weights (17 MB) outgrow the last-level cache and
   every layer writes to lines fetched from memory. Weights are random in
   [0, 2 / the filter volume), the image in [0, 1) and biases 0.01, so the
   values neither grow to infinity over ResNet-50's shortcuts nor shrink
   into denormals, and the classes' probabilities differ: the peer's pass
   over the same graph and values (below) must end with the same ones. */
enum { NET_SLOTS = 4, NET_IMAGE = NET_SLOTS }; /* act[NET_IMAGE]: the input image, never written */

struct net_step {
    size_t row;  /* the table's layer */
    int x, y, z; /* activation slots: input, output, shortcut (-1: none) */
    kiln_conv2d_plan *conv;
    kiln_gemm_plan *gemm;
    kiln_pool2d_desc pool;
    kiln_buffer *w, *bias;
};

struct network {
    kiln_context *ctx;
    const struct model *model;
    size_t n, steps;
    kiln_tensor_layout layout;
    struct net_step *step;
    kiln_buffer *act[NET_SLOTS + 1];
    kiln_status st;
    char error[160]; /* a graph that does not fit the table */
    float *scores;   /* the classifier's output in the last pass (NULL: no classifier before a softmax) */
    size_t nscores;
};

/* The lowest slot not in mask (a bit per slot). */
static int net_free_slot(unsigned mask)
{
    int s = 0;
    while (mask >> s & 1u)
        s++;
    return s;
}

static size_t net_row(const struct network *net, const char *name)
{
    for (size_t i = 0; i < net->model->count; i++)
        if (strcmp(net->model->layers[i].name, name) == 0)
            return i;
    return net->model->count;
}

/* Appends one step reading slot x, adding slot z (-1: none) and writing a
   slot outside x and keep (a bit per slot, the activations still to be
   read); returns that slot. A shortcut is summed in place, into the slot
   that holds it (z is y), as oneDNN's pass does. */
static int net_add(struct network *net, size_t row, int x, int z, unsigned keep)
{
    const int y = z >= 0 ? z : net_free_slot(1u << NET_IMAGE | keep | 1u << x);
    if (row >= net->model->count && !net->error[0])
        snprintf(net->error, sizeof net->error, "the graph names a layer the table lacks");
    if (net->step && row < net->model->count)
        net->step[net->steps] = (struct net_step){.row = row, .x = x, .y = y, .z = z};
    net->steps++;
    return y;
}

/* The network's steps (only counted while net->step is NULL): the rows
   outside the stages in table order, as often as they occur; the stages'
   blocks in place of their rows. */
static void net_graph(struct network *net)
{
    const struct stage *stages = net->model->stages;
    const size_t nstages = net->model->nstages;
    size_t first = net->model->count, last = 0;
    for (size_t i = 0; i < nstages; i++) {
        const char *names[] = {stages[i].a_2a,    stages[i].rest_2a,  stages[i].a_2b,
                               stages[i].rest_2b, stages[i].branch2c, stages[i].branch1};
        for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
            const size_t r = net_row(net, names[k]);
            first = r < first ? r : first;
            last = r < net->model->count && r > last ? r : last;
        }
    }
    net->steps = 0;
    int x = NET_IMAGE; /* the slot of the current activation */
    for (size_t i = 0; i < net->model->count; i++) {
        if (i == first)
            for (size_t s = 0; s < nstages; s++)
                for (int b = 0; b < stages[s].blocks; b++) {
                    const int shortcut = b ? x : net_add(net, net_row(net, stages[s].branch1), x, -1, 0);
                    const unsigned keep = 1u << shortcut;
                    const int t1 = net_add(net, net_row(net, b ? stages[s].rest_2a : stages[s].a_2a), x, -1, keep);
                    const int t2 = net_add(net, net_row(net, b ? stages[s].rest_2b : stages[s].a_2b), t1, -1, keep);
                    x = net_add(net, net_row(net, stages[s].branch2c), t2, shortcut, 0);
                }
        if (nstages && i >= first && i <= last)
            continue;
        /* Consecutive rows of one repeat count above 1 are a block that
           repeats (MobileNet v1's five depthwise and pointwise pairs). */
        const unsigned repeat = net->model->layers[i].repeat;
        size_t end = i + 1;
        while (repeat > 1 && end < net->model->count && net->model->layers[end].repeat == repeat)
            end++;
        for (unsigned r = 0; r < repeat; r++)
            for (size_t j = i; j < end; j++)
                x = net_add(net, j, x, -1, 0);
        i = end - 1;
    }
}

/* A buffer of floats, each value v. */
static kiln_status net_buffer(kiln_context *ctx, size_t floats, float v, kiln_buffer **out)
{
    kiln_status st = kiln_buffer_create(ctx, floats * sizeof(float), out);
    return st == KILN_SUCCESS ? kiln_buffer_fill_f32(*out, 0, floats, v) : st;
}

/* `floats` random values in [0, top), the same for the same seed (a step's
   index, or the image's): kiln's weights and the peer's. NULL when out of
   memory. */
static float *net_random(uint64_t seed, size_t floats, float top)
{
    float *a = malloc(floats * sizeof *a);
    uint64_t state = seed * 0x9e3779b97f4a7c15u + 1u;
    for (size_t i = 0; a && i < floats; i++)
        a[i] = (float)(bench_random_next(&state) >> 40) * 0x1p-24f * top;
    return a;
}

enum { NET_IMAGE_SEED = 1u << 30 };

/* A buffer of net_random(seed, floats, top). */
static kiln_status net_random_buffer(kiln_context *ctx, uint64_t seed, size_t floats, float top, kiln_buffer **out)
{
    float *a = net_random(seed, floats, top);
    kiln_status st = a ? kiln_buffer_create(ctx, floats * sizeof(float), out) : KILN_ERROR_OUT_OF_MEMORY;
    if (st == KILN_SUCCESS)
        st = kiln_buffer_write(*out, 0, floats * sizeof(float), a);
    free(a);
    return st;
}

/* Sizes of a layer's input and output (elements), and its step's plan and
   weights. */
static kiln_status net_layer(struct network *net, struct net_step *x, size_t *nx, size_t *ny)
{
    const struct layer *l = &net->model->layers[x->row];
    const size_t n = net->n;
    *nx = n * l->c * l->hw * l->hw;
    kiln_status st = KILN_SUCCESS;
    if (l->kind == CONV) {
        kiln_conv2d_desc d;
        conv_desc(l, n, net->layout, &d);
        size_t p, q, yh, yw;
        st = kiln_conv2d_output_size(&d, &p, &q, &yh, &yw);
        const size_t volume = (l->c / l->groups) * l->rs * l->rs;
        *ny = n * l->k * yh * yw;
        if (st == KILN_SUCCESS)
            st = kiln_conv2d_plan_create(net->ctx, &d, &x->conv);
        if (st == KILN_SUCCESS)
            st = net_random_buffer(net->ctx, (uint64_t)(x - net->step), l->k * volume, 2.0f / (float)volume, &x->w);
        if (st == KILN_SUCCESS)
            st = net_buffer(net->ctx, l->k, 0.01f, &x->bias);
    } else if (l->kind == FC) {
        kiln_gemm_desc g;
        kiln_gemm_desc_init(&g, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_TRANS, n, l->k, l->c);
        *nx = n * l->c, *ny = n * l->k;
        st = kiln_gemm_plan_create(net->ctx, &g, &x->gemm);
        if (st == KILN_SUCCESS)
            st = net_random_buffer(net->ctx, (uint64_t)(x - net->step), l->k * l->c, 2.0f / (float)l->c, &x->w);
    } else if (l->kind == SOFTMAX) {
        *nx = *ny = n * l->c;
    } else {
        x->pool = pool_desc(l, n, net->layout);
        size_t yh, yw;
        st = kiln_pool2d_output_size(&x->pool, &yh, &yw);
        *ny = n * l->c * yh * yw;
    }
    return st;
}

static kiln_status net_prepare(struct network *net)
{
    net_graph(net);
    if (net->error[0])
        return KILN_ERROR_INTERNAL;
    net->step = calloc(net->steps, sizeof *net->step);
    if (!net->step)
        return KILN_ERROR_OUT_OF_MEMORY;
    net_graph(net);
    /* What each slot holds (elements), to check that every layer reads what
       the graph gives it: the image first. */
    size_t held[NET_SLOTS + 1] = {0}, most = 1;
    held[NET_IMAGE] = net->n * net->model->layers[0].c * net->model->layers[0].hw * net->model->layers[0].hw;
    for (size_t i = 0; i < net->steps; i++) {
        struct net_step *x = &net->step[i];
        size_t nx = 0, ny = 0;
        kiln_status st = net_layer(net, x, &nx, &ny);
        if (st != KILN_SUCCESS)
            return st;
        if (held[x->x] != nx || (x->z >= 0 && held[x->z] != ny)) {
            snprintf(net->error, sizeof net->error, "%s reads %zu values where the graph holds %zu",
                     net->model->layers[x->row].name, nx, held[x->x]);
            return KILN_ERROR_INTERNAL;
        }
        held[x->y] = ny;
        most = ny > most ? ny : most;
    }
    for (int b = 0; b <= NET_SLOTS; b++) {
        kiln_status st = b == NET_IMAGE
                             ? net_random_buffer(net->ctx, NET_IMAGE_SEED, held[NET_IMAGE], 1.0f, &net->act[b])
                             : net_buffer(net->ctx, most, 0.01f, &net->act[b]);
        if (st != KILN_SUCCESS)
            return st;
    }
    return kiln_context_finish(net->ctx);
}

/* One pass: every step, no event, one wait. */
static int net_pass(void *arg)
{
    struct network *net = arg;
    kiln_status st = KILN_SUCCESS;
    for (size_t i = 0; i < net->steps && st == KILN_SUCCESS; i++) {
        const struct net_step *x = &net->step[i];
        const struct layer *l = &net->model->layers[x->row];
        kiln_buffer *in = net->act[x->x], *out = net->act[x->y], *z = x->z >= 0 ? net->act[x->z] : NULL;
        if (l->kind == CONV)
            st = kiln_conv2d_plan_execute(x->conv, in, x->w, x->bias, z, out, NULL);
        else if (l->kind == FC)
            st = kiln_gemm_plan_execute(x->gemm, 1.0f, in, 0, x->w, 0, 0.0f, out, 0, NULL);
        else if (l->kind == SOFTMAX)
            st = kiln_softmax(net->ctx, net->n, l->c, 1, in, out, NULL);
        else
            st = kiln_pool2d(net->ctx, &x->pool, in, out, NULL);
    }
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(net->ctx);
    net->st = st;
    return st != KILN_SUCCESS;
}

/* Each of n images' `classes` probabilities finite and summing to 1; writes
   why not. */
static int net_sums_to_one(const float *p, size_t n, size_t classes, char *why, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        double sum = 0.0;
        for (size_t j = 0; j < classes; j++)
            sum += p[i * classes + j];
        if (!(fabs(sum - 1.0) < 1e-3)) {
            snprintf(why, size, "image %zu's probabilities sum to %g, not 1", i, sum);
            return 1;
        }
    }
    return 0;
}

/* The classifier before the softmax a network ends with, or NULL. */
static const struct net_step *net_classifier(const struct network *net)
{
    const struct net_step *x = net->steps > 1 ? &net->step[net->steps - 2] : NULL;
    return x && net->model->layers[x->row].kind == FC && net->model->layers[x[1].row].kind == SOFTMAX ? x : NULL;
}

/* `count` floats of kiln's buffer into a new array (*out), or a status. */
static kiln_status net_read(const kiln_buffer *b, size_t count, float **out)
{
    *out = malloc(count * sizeof **out);
    kiln_status st = *out ? kiln_buffer_read(b, 0, count * sizeof **out, *out) : KILN_ERROR_OUT_OF_MEMORY;
    if (st != KILN_SUCCESS) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* After the passes: the network ends in a softmax, so each image's
   probabilities are finite and sum to 1; and the classifier's scores are
   kept for the peer's (net->scores). Writes why not. */
static int net_check(struct network *net, char *why, size_t size)
{
    const struct net_step *last = &net->step[net->steps - 1], *fc = net_classifier(net);
    const struct layer *l = &net->model->layers[last->row];
    if (l->kind != SOFTMAX)
        return 0;
    float *p;
    kiln_status st = net_read(net->act[last->y], net->n * l->c, &p);
    int bad = st != KILN_SUCCESS;
    if (bad)
        snprintf(why, size, "reading the probabilities: %s", kiln_status_string(st));
    bad = bad || net_sums_to_one(p, net->n, l->c, why, size);
    free(p);
    if (!bad && fc) {
        net->nscores = net->n * net->model->layers[fc->row].k;
        if ((st = net_read(net->act[fc->y], net->nscores, &net->scores)) != KILN_SUCCESS) {
            snprintf(why, size, "reading the scores: %s", kiln_status_string(st));
            bad = 1;
        }
    }
    return bad;
}

/* ---- the same network on the peer ---- */

/* The peer's steps over kiln's graph, with arrays of their own holding
   kiln's values (net_random's weights and image, biases 0.01). */
struct peer_network {
    struct bench_nn_step *step;
    kiln_conv2d_desc *conv;
    kiln_pool2d_desc *pool;
    float **arrays; /* every step's weights and bias, then the image */
    size_t narrays;
    bench_nn_network *prepared;
    char error[160];
};

/* An array of kiln's values: net_random(seed, floats, top), or each value
   `top` when seed is PEER_CONSTANT. */
enum { PEER_CONSTANT = -1 };
static float *peer_array(struct peer_network *p, int64_t seed, size_t floats, float top)
{
    float *a = seed == PEER_CONSTANT ? malloc(floats * sizeof *a) : net_random((uint64_t)seed, floats, top);
    for (size_t i = 0; a && seed == PEER_CONSTANT && i < floats; i++)
        a[i] = top;
    p->arrays[p->narrays++] = a;
    return a;
}

/* 0 with p->step filled, or 1 with p->error set. */
static int peer_steps(const struct network *net, struct peer_network *p)
{
    p->step = calloc(net->steps, sizeof *p->step);
    p->conv = calloc(net->steps, sizeof *p->conv);
    p->pool = calloc(net->steps, sizeof *p->pool);
    p->arrays = calloc(2 * net->steps + 1, sizeof *p->arrays);
    int bad = !p->step || !p->conv || !p->pool || !p->arrays;
    for (size_t i = 0; !bad && i < net->steps; i++) {
        const struct net_step *x = &net->step[i];
        const struct layer *l = &net->model->layers[x->row];
        struct bench_nn_step *s = &p->step[i];
        *s = (struct bench_nn_step){.x = x->x, .y = x->y, .z = x->z};
        if (l->kind == CONV) {
            conv_desc(l, net->n, net->layout, &p->conv[i]);
            const size_t volume = (l->c / l->groups) * l->rs * l->rs;
            s->op = (struct bench_nn_op){.kind = BENCH_NN_CONV, .conv = &p->conv[i]};
            s->op.weights = peer_array(p, (int64_t)i, l->k * volume, 2.0f / (float)volume);
            s->op.bias = peer_array(p, PEER_CONSTANT, l->k, 0.01f);
            bad = !s->op.weights || !s->op.bias;
        } else if (l->kind == FC) {
            s->op = (struct bench_nn_op){.kind = BENCH_NN_FC, .rows = net->n, .in = l->c, .out = l->k};
            bad = !(s->op.weights = peer_array(p, (int64_t)i, l->k * l->c, 2.0f / (float)l->c));
        } else if (l->kind == SOFTMAX) {
            s->op = (struct bench_nn_op){.kind = BENCH_NN_SOFTMAX, .rows = net->n, .in = l->c};
        } else {
            p->pool[i] = pool_desc(l, net->n, net->layout);
            s->op = (struct bench_nn_op){.kind = BENCH_NN_POOL, .pool = &p->pool[i]};
        }
    }
    if (bad)
        snprintf(p->error, sizeof p->error, "out of host memory");
    return bad;
}

/* kiln's and the peer's classifier scores agree within this, relative to
   the peer's largest: each layer's result differs by a few units in the
   last place (Winograd's by more), and 30-70 layers carry the differences
   on. */
#define NET_AGREE 1e-3

/* max |a - b| / max |b|: NaN when either holds one, infinite when b is all
   zeros and a is not. */
static double net_differ(const float *a, const float *b, size_t count)
{
    double most = 0.0, top = 0.0;
    for (size_t i = 0; i < count; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        most = d > most || d != d ? d : most;
        top = fmax(top, fabs((double)b[i]));
    }
    if (most != most)
        return NAN;
    if (top == 0.0)
        return most == 0.0 ? 0.0 : INFINITY;
    return most / top;
}

static int peer_pass(void *arg)
{
    struct peer_network *p = arg;
    return bench_nn_peer_network_run(p->prepared, p->error, sizeof p->error);
}

/* The peer's whole-network time over kiln's graph (net prepared), its
   probabilities checked; BENCH_NOT_APPLICABLE where the peer has no such
   pass. */
static struct bench_result run_peer_network(const struct network *net, enum bench_nn_peer peer)
{
    struct bench_result r = {.state = BENCH_FAILED};
    struct peer_network p = {0};
    struct bench_timing t;
    const struct layer *first = &net->model->layers[0], *last = &net->model->layers[net->step[net->steps - 1].row];
    const size_t image = net->n * first->c * first->hw * first->hw, classes = last->c;
    float *probs = NULL, *scores = NULL, *image_data = NULL;
    int rc = BENCH_NN_FAILED;
    if (peer_steps(net, &p) == 0 && (image_data = peer_array(&p, NET_IMAGE_SEED, image, 1.0f)) == NULL)
        snprintf(p.error, sizeof p.error, "out of host memory");
    else if (image_data)
        rc = bench_nn_peer_network_prepare(peer, p.step, net->steps, NET_SLOTS + 1, NET_IMAGE, image_data, &p.prepared,
                                           p.error, sizeof p.error);
    if (rc == BENCH_NN_UNSUPPORTED)
        r.state = BENCH_NOT_APPLICABLE;
    else if (rc == BENCH_NN_READY && bench_measure(peer_pass, &p, 1, 0, 1000.0, &t) == 0) {
        const struct net_step *fc = net_classifier(net);
        probs = malloc(net->n * classes * sizeof *probs);
        scores = fc ? malloc(net->nscores * sizeof *scores) : NULL;
        if (!probs || (fc && !scores))
            snprintf(p.error, sizeof p.error, "out of host memory");
        else if (last->kind != SOFTMAX ||
                 (bench_nn_peer_network_output(p.prepared, net->step[net->steps - 1].y, probs, net->n * classes,
                                               p.error, sizeof p.error) == 0 &&
                  net_sums_to_one(probs, net->n, classes, p.error, sizeof p.error) == 0 &&
                  (!fc || bench_nn_peer_network_output(p.prepared, fc->y, scores, net->nscores, p.error,
                                                       sizeof p.error) == 0))) {
            r = (struct bench_result){.state = BENCH_MEASURED, .median_ms = t.median_ms, .reps = t.reps};
            const int compared = scores && net->scores;
            r.max_rel_err = compared ? net_differ(net->scores, scores, net->nscores) : NAN;
            if (compared && !(r.max_rel_err <= NET_AGREE)) {
                snprintf(p.error, sizeof p.error, "its classifier's scores and kiln's differ by %.2g of the largest",
                         r.max_rel_err);
                r.state = BENCH_FAILED;
            }
        }
    }
    if (r.state != BENCH_MEASURED)
        snprintf(r.error, sizeof r.error, "%s", p.error);
    bench_nn_peer_network_release(p.prepared);
    for (size_t i = 0; i < p.narrays; i++)
        free(p.arrays[i]);
    free(p.arrays);
    free(p.step);
    free(p.conv);
    free(p.pool);
    free(probs);
    free(scores);
    return r;
}

/* The median whole-network time, or a failed result saying why; and the
   peer's over the same graph in *peer_whole (BENCH_NOT_REQUESTED for no
   peer or when kiln's graph failed). */
static struct bench_result run_network(kiln_context *ctx, const struct model *model, size_t n,
                                       kiln_tensor_layout layout, enum bench_nn_peer peer,
                                       struct bench_result *peer_whole)
{
    *peer_whole = (struct bench_result){.state = BENCH_NOT_REQUESTED};
    struct bench_result r = {.state = BENCH_FAILED};
    struct network net = {.ctx = ctx, .model = model, .n = n, .layout = layout};
    struct bench_timing t;
    if ((net.st = net_prepare(&net)) != KILN_SUCCESS || bench_measure(net_pass, &net, 1, 0, 1000.0, &t) != 0)
        snprintf(r.error, sizeof r.error, "%s: %s", kiln_status_string(net.st),
                 net.error[0] ? net.error : kiln_last_error_detail());
    else if (net_check(&net, r.error, sizeof r.error) == 0)
        r = (struct bench_result){.state = BENCH_MEASURED, .median_ms = t.median_ms, .reps = t.reps};
    if (r.state == BENCH_MEASURED && peer < BENCH_NN_PEER_COUNT)
        *peer_whole = run_peer_network(&net, peer);
    for (size_t i = 0; net.step && i < net.steps; i++) {
        kiln_conv2d_plan_destroy(net.step[i].conv);
        kiln_gemm_plan_destroy(net.step[i].gemm);
        kiln_buffer_destroy(net.step[i].w);
        kiln_buffer_destroy(net.step[i].bias);
    }
    for (int b = 0; b <= NET_SLOTS; b++)
        kiln_buffer_destroy(net.act[b]);
    free(net.step);
    free(net.scores);
    return r;
}

/* ---- the table ---- */

/* ,"key":[v,...] */
static void print_json_rounds(const char *key, const double *ms, int rounds)
{
    printf(",\"%s\":[", key);
    for (int r = 0; r < rounds; r++)
        printf("%s%.6g", r ? "," : "", ms[r]);
    printf("]");
}

static void print_ms(const struct bench_result *r)
{
    if (r->state == BENCH_MEASURED)
        printf(" %10.3f", r->median_ms);
    else
        printf(" %10s", r->state == BENCH_NOT_APPLICABLE ? "n/a" : r->state == BENCH_NOT_REQUESTED ? "" : "-");
}

static void print_row(const struct layer *l, enum bench_nn_peer peer, const struct row *row)
{
    printf("%-17s %-46s %3u %-14s", l->name, row->shape, l->repeat, row->algo);
    print_ms(&row->kiln);
    print_ms(&row->peer);
    if (row->kiln.state == BENCH_MEASURED && row->peer.state == BENCH_MEASURED)
        printf(" %7.2f", row->peer.median_ms / row->kiln.median_ms);
    else
        printf(" %7s", "-");
    if (row->kiln.state == BENCH_MEASURED && l->kind == CONV)
        printf(" %11.1e", row->kiln.max_rel_err);
    printf("\n");
    if (row->kiln.state == BENCH_FAILED || row->kiln.state == BENCH_NOT_APPLICABLE)
        printf("%17s kiln: %s\n", "", row->kiln.error);
    if (row->peer.state == BENCH_FAILED || row->peer.state == BENCH_NOT_APPLICABLE)
        printf("%17s %s: %s\n", "", bench_nn_peer_name(peer), row->peer.error);
    fflush(stdout);
}

static const char models_usage[] =
    "usage: kiln-bench conv --model mobilenet_v1|resnet50 [--n N] [--layout nchw|nhwc]\n"
    "                       [--compare onednn|cudnn|none] [--rounds R] [--json]\n"
    "The network's layers at 224x224, batch N (default 1), fp32, each with its inference epilogue: kiln\n"
    "(convolution algorithm AUTO) against one peer: oneDNN (the default when built) or, on a CUDA\n"
    "context, cuDNN (convolutions only: the other layers are n/a and left out of its total). Each\n"
    "distinct layer is timed once (median of 5-50 runs after a warm-up, a wait after each run) and\n"
    "counted as often as the network runs it; the totals are these weighted sums. --rounds R (1-100,\n"
    "default 1) passes over the layers R times, one layer after another in each pass, and reports each\n"
    "layer's median of its R medians beside every pass's totals: a machine whose speed drifts moves a\n"
    "pass, not the medians. Then the whole\n"
    "network in its order (ResNet-50's blocks with their shortcuts), every occurrence of a layer with\n"
    "random weights of its own, each layer reading what produced its input, one wait at the end\n"
    "(median of passes for about a second; the probabilities it ends with are checked), beside\n"
    "oneDNN's own pass over the same graph and values (its layouts, conversions between them in the\n"
    "pass, one wait; its classifier's scores must agree with kiln's to 1e-3 of the largest, the\n"
    "difference shown) or, for cuDNN, the peer's sum of warm per-layer times. kiln's plan creation\n"
    "is not in the times; nor are oneDNN's conversions of the weights to its preferred layouts or\n"
    "cuDNN's algorithm search. The launch floor is the median time of a kiln\n"
    "call with no work to speak of (a fill of one float) and its wait, times the waits of the per-layer\n"
    "timing (one per layer run); \"beyond the floor\" is the layers' total less it.\n";

int bench_conv_models(int argc, char **argv)
{
    const char *name = NULL;
    size_t n = 1;
    int json = 0, rounds = 1;
    kiln_tensor_layout layout = KILN_NCHW;
    unsigned peers = bench_nn_peer_built(BENCH_NN_PEER_ONEDNN) ? 1u << BENCH_NN_PEER_ONEDNN : 0;
    const unsigned allowed = 1u << BENCH_NN_PEER_ONEDNN | 1u << BENCH_NN_PEER_CUDNN;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int bad = 0;
        if (strcmp(a, "--json") == 0)
            json = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(models_usage, stdout);
            return 0;
        } else if (strncmp(a, "--", 2) != 0 || bench_option_value("conv", argc, argv, &i, &v) != 0)
            bad = 1;
        else if (strcmp(a, "--model") == 0)
            name = v;
        else if (strcmp(a, "--n") == 0)
            bad = bench_parse_size(v, &n);
        else if (strcmp(a, "--rounds") == 0)
            bad = bench_parse_int(v, 1, MAX_ROUNDS, &rounds);
        else if (strcmp(a, "--layout") == 0 && (strcmp(v, "nchw") == 0 || strcmp(v, "nhwc") == 0))
            layout = strcmp(v, "nhwc") == 0 ? KILN_NHWC : KILN_NCHW;
        else if (strcmp(a, "--compare") == 0)
            bad = bench_nn_peer_parse(v, &peers) || (peers & ~allowed) || (peers & (peers - 1)); /* one peer */
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "kiln-bench conv: bad argument \"%.64s%s%.64s\"\n%s", a, v ? " " : "", v ? v : "",
                    models_usage);
            return 2;
        }
    }
    size_t m = 0;
    while (m < sizeof models / sizeof *models && (!name || strcmp(models[m].name, name) != 0))
        m++;
    if (m == sizeof models / sizeof *models) {
        fprintf(stderr, "kiln-bench conv: unknown model \"%.64s\"\n%s", name ? name : "", models_usage);
        return 2;
    }

    enum bench_nn_peer peer = BENCH_NN_PEER_COUNT; /* none */
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++)
        if (peers >> p & 1u)
            peer = (enum bench_nn_peer)p;
    const char *peer_name = bench_nn_peer_name(peer);
    /* The largest activation of either network: 64 x 112 x 112 per image. */
    if (bench_check_elements("conv", "the largest activation", (double)n * 64 * 112 * 112 * 4))
        return 2;
    kiln_context *ctx = NULL;
    kiln_device_info device;
    if (bench_open_context("conv", &ctx, &device) != 0)
        return 1;
    if (!json) {
        printf("%s, batch %zu, %s, fp32, on %s (profile %s)\n", models[m].name, n,
               layout == KILN_NHWC ? "NHWC" : "NCHW", device.name, device.profile);
        bench_nn_peer_print_config(stdout, peers);
        char peer_ms[32];
        snprintf(peer_ms, sizeof peer_ms, "%s ms", peers ? peer_name : "peer");
        printf("\n%-17s %-46s %3s %-14s %10s %10s %7s %11s\n", "layer", "shape", "x", "kiln algo", "kiln ms", peer_ms,
               "kiln/x", "max rel err");
    }
    double start = bench_now_ms(), kiln_total = 0.0, peer_total = 0.0;
    int failures = 0, kiln_missing = 0, peer_missing = 0;
    const size_t count = models[m].count;
    struct layer_runs *runs = calloc(count, sizeof *runs);
    double *times = calloc(2 * count * (size_t)rounds + 2 * (size_t)rounds, sizeof *times);
    if (!runs || !times) {
        fprintf(stderr, "kiln-bench conv: out of host memory\n");
        free(runs);
        free(times);
        kiln_context_destroy(ctx);
        return 1;
    }
    double *round_kiln = times + 2 * count * (size_t)rounds, *round_peer = round_kiln + rounds;
    for (size_t i = 0; i < count; i++) {
        runs[i].kiln_ms = times + 2 * i * (size_t)rounds;
        runs[i].peer_ms = runs[i].kiln_ms + rounds;
    }
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < count; i++) {
            const struct layer *l = &models[m].layers[i];
            struct row row = {0};
            struct bench_conv_report rep;
            failures += (l->kind == CONV ? run_conv(ctx, l, n, layout, peer, &row, &rep)
                                         : run_other(ctx, l, n, layout, peer, &row)) != 0;
            round_kiln[r] += row.kiln.state == BENCH_MEASURED ? row.kiln.median_ms * l->repeat : 0.0;
            round_peer[r] += row.peer.state == BENCH_MEASURED ? row.peer.median_ms * l->repeat : 0.0;
            layer_runs_add(&runs[i], r, &row, l->kind == CONV ? &rep : NULL);
            if (r + 1 < rounds)
                continue;
            layer_runs_finish(&runs[i], rounds);
            if (json && l->kind == CONV)
                print_conv_json(&device, models[m].name, l, peer, &runs[i]);
            else if (json)
                print_other_json(&device, models[m].name, l, peer, &runs[i].row);
            else if (rounds == 1)
                print_row(l, peer, &runs[i].row); /* as it is measured */
        }
        if (!json && rounds > 1) {
            printf("%-17s %-46s %3s %-14s %10.3f", "round", "(a pass over the table: ms x repeat, summed)", "", "",
                   round_kiln[r]);
            if (peers)
                printf(" %10.3f %7.2f", round_peer[r], round_kiln[r] > 0.0 ? round_peer[r] / round_kiln[r] : 0.0);
            printf("\n");
            fflush(stdout);
        }
    }
    for (size_t i = 0; i < count; i++) {
        const struct layer *l = &models[m].layers[i];
        const struct row *row = &runs[i].row;
        if (row->kiln.state == BENCH_MEASURED)
            kiln_total += row->kiln.median_ms * l->repeat;
        else
            kiln_missing++;
        if (row->peer.state == BENCH_MEASURED)
            peer_total += row->peer.median_ms * l->repeat;
        else
            peer_missing++;
        if (!json && rounds > 1)
            print_row(l, peer, row);
    }
    struct bench_result peer_whole;
    const struct bench_result whole = run_network(ctx, &models[m], n, layout, peer, &peer_whole);
    /* Each timed call of a layer waits once: the network's waits, each
       paying about the floor. */
    const double floor_us = bench_launch_floor_us(ctx);
    unsigned waits = 0;
    for (size_t i = 0; i < models[m].count; i++)
        waits += models[m].layers[i].repeat;
    const double floor_ms = floor_us * waits * 1e-3;
    kiln_context_destroy(ctx);
    if (json) {
        printf("{\"op\":\"model\",\"model\":\"%s\",\"n\":%zu,\"layout\":\"%s\",\"device\":", models[m].name, n,
               layout == KILN_NHWC ? "nhwc" : "nchw");
        bench_json_string(stdout, device.name);
        printf(",\"layers\":%zu,\"rounds\":%d", models[m].count, rounds);
        bench_json_number(stdout, "kiln_ms", kiln_total);
        if (rounds > 1)
            print_json_rounds("kiln_round_ms", round_kiln, rounds);
        printf(",\"kiln_missing\":%d", kiln_missing);
        if (floor_us > 0.0) {
            bench_json_number(stdout, "launch_floor_us", floor_us);
            printf(",\"waits\":%u", waits);
        }
        if (whole.state == BENCH_MEASURED) {
            bench_json_number(stdout, "kiln_network_ms", whole.median_ms);
            printf(",\"network_passes\":%d", whole.reps);
        } else {
            fputs(",\"network_error\":", stdout);
            bench_json_string(stdout, whole.error);
        }
        if (peers) {
            char key[32];
            snprintf(key, sizeof key, "%s_ms", peer_name);
            bench_json_number(stdout, key, peer_total);
            printf(",\"%s_missing\":%d", peer_name, peer_missing);
            if (rounds > 1) {
                snprintf(key, sizeof key, "%s_round_ms", peer_name);
                print_json_rounds(key, round_peer, rounds);
            }
            if (peer_whole.state == BENCH_MEASURED) {
                snprintf(key, sizeof key, "%s_network_ms", peer_name);
                bench_json_number(stdout, key, peer_whole.median_ms);
                if (peer_whole.max_rel_err == peer_whole.max_rel_err)
                    bench_json_number(stdout, "network_max_rel_diff", peer_whole.max_rel_err);
            } else if (peer_whole.state == BENCH_FAILED) {
                printf(",\"%s_network_error\":", peer_name);
                bench_json_string(stdout, peer_whole.error);
            }
        }
        printf("}\n");
    } else {
        printf("%-17s %-46s %3s %-14s %10.3f", "total", "(ms x repeat, summed)", "", "", kiln_total);
        if (peers)
            printf(" %10.3f %7.2f", peer_total, kiln_total > 0.0 ? peer_total / kiln_total : 0.0);
        printf("\n");
        if (floor_us > 0.0 && kiln_total > floor_ms) {
            char what[64];
            snprintf(what, sizeof what, "(%u waits x %.1f us, an empty call's)", waits, floor_us);
            printf("%-17s %-46s %3s %-14s %10.3f\n", "launch floor", what, "", "", floor_ms);
            printf("%-17s %-46s %3s %-14s %10.3f", "beyond the floor", "(the total less the launch floor)", "", "",
                   kiln_total - floor_ms);
            if (peers)
                printf(" %10.3f %7.2f", peer_total, peer_total / (kiln_total - floor_ms));
            printf("\n");
        }
        if (whole.state == BENCH_MEASURED) {
            /* Against the peer's own pass where it has one, else its sum. */
            const int own = peer_whole.state == BENCH_MEASURED;
            const double peer_ms = own ? peer_whole.median_ms : peer_total;
            printf("%-17s %-46s %3s %-14s %10.3f", "whole network", "(every layer enqueued, one wait)", "", "",
                   whole.median_ms);
            if (peers)
                printf(" %10.3f %7.2f", peer_ms, peer_ms / whole.median_ms);
            if (own && peer_whole.max_rel_err == peer_whole.max_rel_err)
                printf(" %11.1e", peer_whole.max_rel_err);
            else if (peers && !own)
                printf(" (the peer's sum)");
            printf("\n");
            if (peer_whole.state == BENCH_FAILED)
                printf("%17s %s's whole network: %s\n", "", peer_name, peer_whole.error);
        } else {
            printf("whole network: %s\n", whole.error);
        }
        if (kiln_missing || (peers && peer_missing))
            printf("(totals leave out unmeasured layers: kiln %d, %s %d)\n", kiln_missing, peers ? peer_name : "peer",
                   peers ? peer_missing : 0);
        printf("(kiln/x: the peer's time over kiln's, above 1 when kiln is faster; %.1f s in all)\n",
               (bench_now_ms() - start) / 1e3);
    }
    free(runs);
    free(times);
    return failures ? 1 : 0;
}
