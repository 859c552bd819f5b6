/*
 * kiln-bench conv: one 2-D convolution on kiln (one or every algorithm) and
 * its peers (oneDNN, CLBlast, cuDNN), measured in one run on the same random
 * data, each output checked against a double-precision reference on sampled
 * entries.
 *
 * bench_conv_run() measures one case; kiln-bench conv --model runs it over a
 * network's layer table (bench_models.c). kiln's plan creation (algorithm
 * choice, kernel compiles, a find's trial runs) is timed on its own and kept
 * out of the medians; every library gets warm-up calls before timing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kiln/kiln_cl.h"

/* Entries of y checked per library (two corners, the rest random). */
enum { ERROR_SAMPLES = 256 };

/* Errors are relative to sum |x||w| (plus |bias| and |beta z|). Direct
   summation in fp32 stays far below 1e-4 for any reduction here; 16-bit
   storage adds the rounding of y, up to 2^-11 (fp16) or 2^-8 (bf16) of it.
   Winograd's transforms multiply rounding errors by their matrix norms
   (entries up to 8 for F(4x4,3x3)), which costs about a decimal digit. */
static double error_limit(kiln_conv_algo algo, kiln_dtype dtype)
{
    double limit = dtype == KILN_F16 ? 1e-3 : dtype == KILN_BF16 ? 8e-3 : 1e-4;
    return algo == KILN_CONV_WINOGRAD_2X2 || algo == KILN_CONV_WINOGRAD_4X4 ? 10.0 * limit : limit;
}

static const char *const algo_names[] = {"auto",   "implicit-gemm", "winograd-2x2", "winograd-4x4",
                                         "direct", "im2col",        "gemm-1x1",     "implicit-gemm-mma"};

const char *bench_conv_algo_name(kiln_conv_algo algo)
{
    return (size_t)algo < sizeof algo_names / sizeof *algo_names ? algo_names[algo] : "?";
}

/* ---- shapes ---- */

/* Output height and width; -1 when the dilated filter does not fit. */
static int output_size(const kiln_conv2d_desc *d, size_t *p, size_t *q)
{
    size_t span_h = d->dilation_h * (d->r - 1) + 1, span_w = d->dilation_w * (d->s - 1) + 1;
    size_t in_h = d->h + d->pad_top + d->pad_bottom, in_w = d->w + d->pad_left + d->pad_right;
    if (in_h < span_h || in_w < span_w || d->stride_h == 0 || d->stride_w == 0)
        return -1;
    *p = (in_h - span_h) / d->stride_h + 1;
    *q = (in_w - span_w) / d->stride_w + 1;
    return 0;
}

double bench_conv_flops(const kiln_conv2d_desc *d)
{
    size_t p = 0, q = 0;
    if (output_size(d, &p, &q) != 0 || d->groups == 0)
        return 0.0;
    return 2.0 * (double)d->n * (double)d->k * (double)p * (double)q * (double)(d->c / d->groups) * (double)d->r *
           (double)d->s;
}

static size_t x_index(const kiln_conv2d_desc *d, size_t n, size_t c, size_t h, size_t w)
{
    return d->layout == KILN_NHWC ? ((n * d->h + h) * d->w + w) * d->c + c : ((n * d->c + c) * d->h + h) * d->w + w;
}

/* c counts the channels of the filter's group. */
static size_t w_index(const kiln_conv2d_desc *d, size_t k, size_t c, size_t r, size_t s)
{
    size_t cg = d->c / d->groups;
    return d->layout == KILN_NHWC ? ((k * d->r + r) * d->s + s) * cg + c : ((k * cg + c) * d->r + r) * d->s + s;
}

static size_t y_index(const kiln_conv2d_desc *d, size_t p_count, size_t q_count, size_t n, size_t k, size_t p, size_t q)
{
    return d->layout == KILN_NHWC ? ((n * p_count + p) * q_count + q) * d->k + k
                                  : ((n * d->k + k) * p_count + p) * q_count + q;
}

/* ---- operands ---- */

/* Host copies (fp32 values, exactly representable in the storage type), and
   the device buffers kiln and device peers run on: x, w, z and y in the
   storage type, bias in fp32 as kiln takes it (its values too in the storage
   type's, so a peer may hold it in that type exactly). bias and z exist only
   when the epilogue reads them. */
struct operands {
    size_t p, q, nx, nw, ny;
    float *x, *w, *bias, *z, *y;
    uint16_t *halves; /* staging for 16-bit storage */
    kiln_buffer *dx, *dw, *dbias, *dz, *dy;
};

static void release_operands(struct operands *o)
{
    kiln_buffer_destroy(o->dx);
    kiln_buffer_destroy(o->dw);
    kiln_buffer_destroy(o->dbias);
    kiln_buffer_destroy(o->dz);
    kiln_buffer_destroy(o->dy);
    free(o->x);
    free(o->w);
    free(o->bias);
    free(o->z);
    free(o->y);
    free(o->halves);
}

static int prepare_operands(kiln_context *ctx, const kiln_conv2d_desc *d, struct operands *o, struct bench_result *r)
{
    /* kiln's own check first: its detail names the field that is wrong. The
       reference here has no pooling stage. */
    size_t p, q, h, w;
    if (bench_fail(kiln_conv2d_output_size(d, &p, &q, &h, &w), r, "shape"))
        return 1;
    if (output_size(d, &o->p, &o->q) != 0 || d->fused_maxpool) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "shape: not measured by kiln-bench");
        return 1;
    }
    o->nx = d->n * d->c * d->h * d->w;
    o->nw = d->k * (d->c / d->groups) * d->r * d->s;
    o->ny = d->n * d->k * o->p * o->q;
    size_t most = o->nx > o->nw ? o->nx : o->nw;
    most = most > o->ny ? most : o->ny;
    o->x = malloc(o->nx * sizeof *o->x);
    o->w = malloc(o->nw * sizeof *o->w);
    o->bias = d->has_bias ? malloc(d->k * sizeof *o->bias) : NULL;
    o->z = d->beta != 0.0f ? malloc(o->ny * sizeof *o->z) : NULL;
    o->y = malloc(o->ny * sizeof *o->y);
    o->halves = d->dtype != KILN_F32 ? malloc(most * sizeof *o->halves) : NULL;
    if (!o->x || !o->w || (d->has_bias && !o->bias) || (d->beta != 0.0f && !o->z) || !o->y ||
        (d->dtype != KILN_F32 && !o->halves)) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "out of host memory");
        return 1;
    }
    uint64_t rng = 42;
    bench_fill_random(o->x, o->nx, d->dtype, &rng);
    bench_fill_random(o->w, o->nw, d->dtype, &rng);
    if (o->bias)
        bench_fill_random(o->bias, d->k, d->dtype, &rng);
    if (o->z)
        bench_fill_random(o->z, o->ny, d->dtype, &rng);
    return bench_fail(bench_upload(ctx, o->x, o->nx, d->dtype, o->halves, &o->dx), r, "x") ||
           bench_fail(bench_upload(ctx, o->w, o->nw, d->dtype, o->halves, &o->dw), r, "w") ||
           (o->bias && bench_fail(bench_upload(ctx, o->bias, d->k, KILN_F32, NULL, &o->dbias), r, "bias")) ||
           (o->z && bench_fail(bench_upload(ctx, o->z, o->ny, d->dtype, o->halves, &o->dz), r, "z")) ||
           bench_fail(bench_upload(ctx, NULL, o->ny, d->dtype, o->halves, &o->dy), r, "y");
}

/* ---- checking ---- */

/* Largest error of sampled entries of o->y against a double reference,
   relative to the sum of the magnitudes that make up each. NaN if any sampled
   entry is NaN. */
static double max_rel_err(const kiln_conv2d_desc *d, const struct operands *o)
{
    size_t cg = d->c / d->groups, kg = d->k / d->groups;
    uint64_t rng = 1; /* the same entries for every library */
    double worst = 0.0;
    for (int i = 0; i < ERROR_SAMPLES; i++) {
        size_t n = 0, k = 0, p = 0, q = 0;
        if (i == 1) {
            n = d->n - 1;
            k = d->k - 1;
            p = o->p - 1;
            q = o->q - 1;
        } else if (i > 1) {
            n = bench_random_next(&rng) % d->n;
            k = bench_random_next(&rng) % d->k;
            p = bench_random_next(&rng) % o->p;
            q = bench_random_next(&rng) % o->q;
        }
        double sum = 0.0, magnitude = 0.0;
        for (size_t c = 0; c < cg; c++)
            for (size_t r = 0; r < d->r; r++)
                for (size_t s = 0; s < d->s; s++) {
                    /* Input row and column, offset by the padding so they stay unsigned. */
                    size_t ih = p * d->stride_h + r * d->dilation_h, iw = q * d->stride_w + s * d->dilation_w;
                    if (ih < d->pad_top || ih - d->pad_top >= d->h || iw < d->pad_left || iw - d->pad_left >= d->w)
                        continue;
                    double v = (double)o->x[x_index(d, n, k / kg * cg + c, ih - d->pad_top, iw - d->pad_left)] *
                               (double)o->w[w_index(d, k, c, r, s)];
                    sum += v;
                    magnitude += fabs(v);
                }
        size_t at = y_index(d, o->p, o->q, n, k, p, q);
        double want = d->alpha * sum;
        magnitude *= fabs(d->alpha);
        if (d->has_bias) {
            want += o->bias[k];
            magnitude += fabs(o->bias[k]);
        }
        if (d->beta != 0.0f) {
            want += d->beta * (double)o->z[at];
            magnitude += fabs(d->beta * (double)o->z[at]);
        }
        if (d->activation == KILN_ACT_RELU && want < 0.0)
            want = 0.0;
        double err = fabs(o->y[at] - want) / (magnitude > 0.0 ? magnitude : 1.0);
        if (isnan(err))
            return err;
        if (err > worst)
            worst = err;
    }
    return worst;
}

/* ---- measuring ---- */

static void finish_result(const kiln_conv2d_desc *d, const struct bench_timing *t, const struct operands *o,
                          struct bench_result *r)
{
    r->state = BENCH_MEASURED;
    r->median_ms = t->median_ms;
    r->reps = t->reps;
    r->gflops = bench_conv_flops(d) / (t->median_ms * 1e6);
    r->max_rel_err = max_rel_err(d, o);
}

struct kiln_call {
    kiln_context *ctx;
    kiln_conv2d_plan *plan;
    const struct operands *o;
    int in_place; /* z is y */
    kiln_status st;
};

static int kiln_call_run(void *arg)
{
    struct kiln_call *k = arg;
    const struct operands *o = k->o;
    k->st = kiln_conv2d_plan_execute(k->plan, o->dx, o->dw, o->dbias, k->in_place ? o->dy : o->dz, o->dy, NULL);
    if (k->st == KILN_SUCCESS)
        k->st = kiln_context_finish(k->ctx);
    return k->st != KILN_SUCCESS;
}

static int measure_kiln(kiln_context *ctx, const struct bench_conv_options *opt, const struct operands *o,
                        struct bench_conv_report *rep)
{
    const kiln_conv2d_desc *d = &rep->desc;
    struct bench_result *r = &rep->kiln;
    kiln_cache_info before, after;
    /* In place, y starts as z, and each timed run adds the residual to what
       the one before stored (as oneDNN's sum post-op into its dst); the
       checked run after them starts from z again. */
    const int in_place = opt->in_place && o->z;
    struct kiln_call call = {ctx, NULL, o, in_place, KILN_SUCCESS};
    snprintf(r->algo, sizeof r->algo, "%s", bench_conv_algo_name(d->algo));
    if (bench_fail(kiln_context_get_cache_info(ctx, &before), r, "cache info"))
        return 1;
    double t0 = bench_now_ms();
    kiln_status st = kiln_conv2d_plan_create(ctx, d, &call.plan);
    rep->compile_ms = bench_now_ms() - t0;
    if (st == KILN_ERROR_UNSUPPORTED) {
        r->state = BENCH_NOT_APPLICABLE;
        snprintf(r->error, sizeof r->error, "UNSUPPORTED: %s", kiln_last_error_detail());
        return 0;
    }
    if (bench_fail(st, r, "plan") || bench_fail(kiln_conv2d_plan_describe(call.plan, &rep->plan), r, "describe") ||
        bench_fail(kiln_context_get_cache_info(ctx, &after), r, "cache info") ||
        bench_fail(in_place ? bench_write(o->dy, o->z, o->ny, d->dtype, o->halves) : bench_poison(o->dy, d->dtype), r,
                   in_place ? "y as z" : "poison y")) {
        kiln_conv2d_plan_destroy(call.plan);
        return 1;
    }
    rep->builds = (unsigned long long)(after.builds - before.builds);
    snprintf(r->algo, sizeof r->algo, d->algo == KILN_CONV_AUTO ? "%s (auto)" : "%s", rep->plan.name);
    struct bench_timing t;
    int rc = bench_measure(kiln_call_run, &call, opt->warmup, opt->reps, opt->budget_ms, &t);
    if (rc == 0 && in_place &&
        (bench_fail(bench_write(o->dy, o->z, o->ny, d->dtype, o->halves), r, "y as z") || kiln_call_run(&call)))
        rc = 1;
    kiln_conv2d_plan_destroy(call.plan);
    if (rc != 0)
        return r->state == BENCH_FAILED ? 1 : bench_fail(call.st, r, "execute");
    if (bench_fail(bench_download(o->dy, o->ny, d->dtype, o->halves, o->y), r, "y"))
        return 1;
    finish_result(d, &t, o, r);
    return 0;
}

struct peer_call {
    bench_nn_prepared *prepared;
    char *err;
    size_t err_size;
};

static int peer_call_run(void *arg)
{
    const struct peer_call *p = arg;
    return bench_nn_peer_run(p->prepared, p->err, p->err_size);
}

int bench_nn_peer_time(enum bench_nn_peer peer, const struct bench_nn_op *op, int warmup, int reps, double budget_ms,
                       int output, struct bench_result *r)
{
    if (!bench_nn_peer_built(peer)) {
        r->state = BENCH_NOT_BUILT;
        return 1;
    }
    bench_nn_prepared *prepared = NULL;
    char why[200];
    int ready = bench_nn_peer_prepare(peer, op, &prepared, r->algo, sizeof r->algo, why, sizeof why);
    if (ready != BENCH_NN_READY) {
        r->state = ready == BENCH_NN_UNSUPPORTED ? BENCH_NOT_APPLICABLE : BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "%s%s", ready == BENCH_NN_UNSUPPORTED ? "n/a: " : "", why);
        return 1;
    }
    struct peer_call call = {prepared, r->error, sizeof r->error};
    struct bench_timing t;
    r->state = BENCH_FAILED;
    if (bench_measure(peer_call_run, &call, warmup, reps, budget_ms, &t) == 0 &&
        (!output || bench_nn_peer_output(prepared, r->error, sizeof r->error) == 0)) {
        r->state = BENCH_MEASURED;
        r->median_ms = t.median_ms;
        r->reps = t.reps;
        r->has_workspace = bench_nn_peer_workspace(prepared, &r->workspace_bytes);
    }
    bench_nn_peer_release(prepared);
    return r->state != BENCH_MEASURED;
}

static void measure_peer(kiln_context *ctx, enum bench_nn_peer peer, const kiln_conv2d_desc *d,
                         const struct bench_conv_options *opt, struct operands *o, struct bench_result *r)
{
    struct bench_nn_op op = {.kind = BENCH_NN_CONV,
                             .conv = d,
                             .src = o->x,
                             .weights = o->w,
                             .bias = o->bias,
                             .residual = o->z,
                             .dst = o->y,
                             .src_mem = kiln_buffer_get_cl(o->dx),
                             .weights_mem = kiln_buffer_get_cl(o->dw),
                             .dst_mem = kiln_buffer_get_cl(o->dy),
                             .ctx = ctx,
                             .kx = o->dx,
                             .kw = o->dw,
                             .kz = o->dz,
                             .ky = o->dy};
    const int cuda = peer == BENCH_NN_PEER_CUDNN; /* on kiln's own operands, after kiln's y was checked */
    if (cuda) {
        if (bench_fail(bench_poison(o->dy, d->dtype), r, "poison y"))
            return;
    } else if (bench_nn_peer_on_device(peer)) {
        if (bench_fail(kiln_context_get_cl(ctx, NULL, NULL, &op.queue), r, "OpenCL queue") ||
            bench_fail(bench_poison(o->dy, KILN_F32), r, "poison y"))
            return;
    } else {
        memset(o->y, 0xff, o->ny * sizeof *o->y); /* NaN */
    }
    if (bench_nn_peer_time(peer, &op, opt->warmup, opt->peer_reps[peer], opt->budget_ms, 1, r) != 0)
        return;
    if ((cuda || bench_nn_peer_on_device(peer)) &&
        bench_fail(bench_download(o->dy, o->ny, d->dtype, o->halves, o->y), r, "y"))
        return;
    struct bench_timing t = {r->median_ms, r->reps};
    finish_result(d, &t, o, r);
}

int bench_conv_run(kiln_context *ctx, const kiln_conv2d_desc *desc, const kiln_conv_algo *algos, size_t count,
                   const struct bench_conv_options *opt, struct bench_conv_report *reports)
{
    memset(reports, 0, count * sizeof *reports);
    for (size_t i = 0; i < count; i++) {
        reports[i].desc = *desc;
        reports[i].desc.algo = algos[i];
        snprintf(reports[i].kiln.algo, sizeof reports[i].kiln.algo, "%s", bench_conv_algo_name(algos[i]));
    }
    struct operands o = {0};
    int failures = 0;
    if (prepare_operands(ctx, desc, &o, &reports[0].kiln) != 0) {
        for (size_t i = 1; i < count; i++)
            reports[i].kiln = reports[0].kiln;
        release_operands(&o);
        return (int)count;
    }
    for (size_t i = 0; i < count; i++)
        failures += measure_kiln(ctx, opt, &o, &reports[i]);
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++) {
        if (!(opt->peers >> p & 1u))
            continue;
        measure_peer(ctx, (enum bench_nn_peer)p, desc, opt, &o, &reports[0].peers[p]);
        for (size_t i = 1; i < count; i++)
            reports[i].peers[p] = reports[0].peers[p];
    }
    release_operands(&o);
    return failures;
}

/* ---- output ---- */

void bench_conv_shape(const kiln_conv2d_desc *d, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%zux%zux%zux%zu,k%zu,%zux%zu", d->n, d->c, d->h, d->w, d->k, d->r, d->s);
#define APPEND(...)                                                                                                    \
    do {                                                                                                               \
        if (n >= 0 && (size_t)n < size)                                                                                \
            n += snprintf(buf + n, size - (size_t)n, __VA_ARGS__);                                                     \
    } while (0)
    if (d->stride_h != 1 || d->stride_w != 1)
        APPEND(d->stride_h == d->stride_w ? ",stride=%zu" : ",stride=%zux%zu", d->stride_h, d->stride_w);
    if (d->pad_top == d->pad_bottom && d->pad_top == d->pad_left && d->pad_top == d->pad_right) {
        if (d->pad_top)
            APPEND(",pad=%zu", d->pad_top);
    } else {
        APPEND(",pad=%zu,%zu,%zu,%zu", d->pad_top, d->pad_bottom, d->pad_left, d->pad_right);
    }
    if (d->dilation_h != 1 || d->dilation_w != 1)
        APPEND(d->dilation_h == d->dilation_w ? ",dilation=%zu" : ",dilation=%zux%zu", d->dilation_h, d->dilation_w);
    if (d->groups != 1)
        APPEND(",groups=%zu", d->groups);
#undef APPEND
}

/* "bias+residual+relu", "none" */
static void epilogue_name(const kiln_conv2d_desc *d, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s", d->has_bias ? "+bias" : "", d->beta != 0.0f ? "+residual" : "",
             d->activation == KILN_ACT_RELU ? "+relu" : "");
    if (buf[0] == '\0')
        snprintf(buf, size, "none");
    else
        memmove(buf, buf + 1, strlen(buf));
}

void bench_conv_check_errors(const struct bench_conv_report *rep)
{
    char shape[128];
    bench_conv_shape(&rep->desc, shape, sizeof shape);
    double limit = error_limit(rep->plan.algo, rep->desc.dtype),
           peer_limit = error_limit(KILN_CONV_AUTO, rep->desc.dtype);
    if (rep->kiln.state == BENCH_MEASURED && !(rep->kiln.max_rel_err <= limit))
        fprintf(stderr, "kiln-bench: warning: conv %s: kiln %s max_rel_err %.3g exceeds %.0e\n", shape, rep->kiln.algo,
                rep->kiln.max_rel_err, limit);
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++)
        if (rep->peers[p].state == BENCH_MEASURED && !(rep->peers[p].max_rel_err <= peer_limit))
            fprintf(stderr, "kiln-bench: warning: conv %s: %s max_rel_err %.3g exceeds %.0e\n", shape,
                    bench_nn_peer_name((enum bench_nn_peer)p), rep->peers[p].max_rel_err, peer_limit);
}

void bench_conv_print_json(FILE *out, const kiln_device_info *device, const struct bench_conv_report *rep,
                           const char *extra)
{
    const kiln_conv2d_desc *d = &rep->desc;
    char shape[128], epilogue[64];
    bench_conv_shape(d, shape, sizeof shape);
    epilogue_name(d, epilogue, sizeof epilogue);
    fprintf(out, "{\"op\":\"conv\",%s\"shape\":", extra ? extra : "");
    bench_json_string(out, shape);
    fprintf(out,
            ",\"n\":%zu,\"c\":%zu,\"h\":%zu,\"w\":%zu,\"k\":%zu,\"r\":%zu,\"s\":%zu,\"stride_h\":%zu,\"stride_w\":%zu,"
            "\"pad_top\":%zu,\"pad_bottom\":%zu,\"pad_left\":%zu,\"pad_right\":%zu,\"dilation_h\":%zu,"
            "\"dilation_w\":%zu,\"groups\":%zu,\"layout\":\"%s\",\"dtype\":\"%s\",\"epilogue\":\"%s\"",
            d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->stride_h, d->stride_w, d->pad_top, d->pad_bottom, d->pad_left,
            d->pad_right, d->dilation_h, d->dilation_w, d->groups, d->layout == KILN_NHWC ? "nhwc" : "nchw",
            bench_dtype_name(d->dtype), epilogue);
    fputs(",\"device\":", out);
    bench_json_string(out, device->name);
    fprintf(out, ",\"requested\":\"%s\"", bench_conv_algo_name(d->algo));
    if (rep->kiln.state != BENCH_MEASURED) {
        fputs(",\"error\":", out);
        bench_json_string(out, rep->kiln.error);
    } else {
        const kiln_conv2d_plan_info *plan = &rep->plan;
        fputs(",\"algo\":", out);
        bench_json_string(out, plan->name);
        fputs(",\"kernel\":", out);
        bench_json_string(out, plan->kernel);
        fputs(",\"params\":", out);
        bench_json_string(out, plan->params);
        fputs(",\"profile\":", out);
        bench_json_string(out, plan->profile);
        fputs(",\"reason\":", out);
        bench_json_string(out, plan->reason);
        bench_json_number(out, "median_ms", rep->kiln.median_ms);
        bench_json_number(out, "gflops", rep->kiln.gflops);
        bench_json_number(out, "max_rel_err", rep->kiln.max_rel_err);
        bench_json_number(out, "compile_ms", rep->compile_ms);
        fprintf(out, ",\"workspace_bytes\":%zu,\"builds\":%llu,\"reps\":%d", plan->workspace_bytes, rep->builds,
                rep->kiln.reps);
    }
    fputs(",\"peers\":{", out);
    const char *sep = "";
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++) {
        const struct bench_result *r = &rep->peers[p];
        if (r->state == BENCH_NOT_REQUESTED)
            continue;
        fprintf(out, "%s\"%s\":", sep, bench_nn_peer_name((enum bench_nn_peer)p));
        bench_json_result(out, r, bench_nn_peer_threads((enum bench_nn_peer)p));
        sep = ",";
    }
    fputs("}}\n", out);
    fflush(out);
}

static void print_table(const kiln_device_info *device, const struct bench_conv_report *reps, size_t count)
{
    const kiln_conv2d_desc *d = &reps[0].desc;
    char shape[128], epilogue[64];
    bench_conv_shape(d, shape, sizeof shape);
    epilogue_name(d, epilogue, sizeof epilogue);
    printf("conv %s, %s, epilogue %s, %s storage, on %s (profile %s)\n", shape,
           d->layout == KILN_NHWC ? "NHWC" : "NCHW", epilogue, bench_dtype_name(d->dtype), device->name,
           device->profile);
    printf("%.3f GFLOP per call (direct-convolution count, used for every GFLOP/s below)\n", bench_conv_flops(d) / 1e9);
    printf("kiln plans (compile ms: plan creation, not in the medians):\n");
    for (size_t i = 0; i < count; i++) {
        const struct bench_conv_report *rep = &reps[i];
        const kiln_conv2d_plan_info *plan = &rep->plan;
        if (rep->kiln.state == BENCH_MEASURED)
            printf("  %-22s %s [%s], profile %s; %s; compile_ms %.1f, %llu programs built, workspace %zu bytes\n",
                   rep->kiln.algo, plan->kernel, plan->params, plan->profile, plan->reason, rep->compile_ms,
                   rep->builds, plan->workspace_bytes);
        else
            printf("  %-22s %s\n", rep->kiln.algo, rep->kiln.error);
    }
    printf("\n");
    bench_print_result_header();
    for (size_t i = 0; i < count; i++) /* kiln/x of the first (AUTO's) over each */
        bench_print_result_row("kiln", &reps[i].kiln, &reps[0].kiln);
    for (int p = 0; p < BENCH_NN_PEER_COUNT; p++)
        bench_print_result_row(bench_nn_peer_name((enum bench_nn_peer)p), &reps[0].peers[p], &reps[0].kiln);
}

/* ---- the subcommand ---- */

static const char conv_usage[] =
    "usage: kiln-bench conv --n N --c C --h H --w W --k K --r R --s S [--stride S] [--pad P] [--dilation D]\n"
    "                       [--groups G] [--layout nchw|nhwc] [--dtype f32|f16|bf16] [--bias] [--relu]\n"
    "                       [--residual [--in-place]] [--find] [--constant-weights]\n"
    "                       [--algo auto|implicit-gemm|winograd-2x2|winograd-4x4|direct|im2col|gemm-1x1|\n"
    "                               implicit-gemm-mma|all]\n"
    "                       [--reps R] [--warmup W] [--compare clblast,cudnn,onednn] [--json]\n"
    "       kiln-bench conv --model mobilenet_v1|resnet50 [--n N] [--layout nchw|nhwc]\n"
    "                       [--compare onednn|cudnn|none] [--rounds R] [--json]\n"
    "y = act(conv(x, w) + bias + z) on random data: x NCHW with KCRS weights, or NHWC with KRSC (C per\n"
    "group); x, w, z and y in the --dtype storage (default f32), bias in fp32. --residual adds z (beta 1),\n"
    "--in-place reads it from y itself (z is y, as oneDNN's sum post-op: each timed call adds it again, the\n"
    "checked call starts from z), --relu applies ReLU. --algo all runs every algorithm (UNSUPPORTED where\n"
    "one does not apply); --find lets AUTO time the applicable ones at plan creation.\n"
    "--constant-weights lets plans pack or transform the weights once, as inference does (--model sets it).\n"
    "kiln and each peer: W warm-up calls (default 1), then R timed calls (default: as many as fit in\n"
    "about 1 s, at least 5), each to completion; medians reported. GFLOP/s count 2*N*K*P*Q*(C/G)*R*S.\n"
    "Peers, same data: onednn (its CPU engine, default threads, layouts of its choice with reorders\n"
    "outside the timed runs) and clblast (CLBlastSconvgemm on kiln's queue: NCHW, one group, no epilogue),\n"
    "both fp32 only; cudnn (CUDA contexts: kiln's stream and buffers, any storage type, the epilogue\n"
    "fused by cudnnConvolutionBiasActivationForward).\n"
    "--model runs a network's layers with their inference epilogues; see kiln-bench conv --model help.\n";

static int parse_algo(const char *s, int *all, kiln_conv_algo *out)
{
    *all = strcmp(s, "all") == 0;
    for (size_t i = 0; !*all && i < sizeof algo_names / sizeof *algo_names; i++)
        if (strcmp(s, algo_names[i]) == 0) {
            *out = (kiln_conv_algo)i;
            return 0;
        }
    return *all ? 0 : -1;
}

int bench_conv(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--model") == 0)
            return bench_conv_models(argc, argv);
    size_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, stride = 1, pad = 0, dilation = 1, groups = 1;
    int json = 0, bias = 0, relu = 0, residual = 0, in_place = 0, find = 0, constant = 0, all = 0;
    kiln_tensor_layout layout = KILN_NCHW;
    kiln_dtype dtype = KILN_F32;
    kiln_conv_algo algo = KILN_CONV_AUTO;
    struct bench_conv_options opt = {.warmup = 1, .budget_ms = 1000.0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int bad = 0, *flag = strcmp(a, "--json") == 0               ? &json
                             : strcmp(a, "--bias") == 0             ? &bias
                             : strcmp(a, "--relu") == 0             ? &relu
                             : strcmp(a, "--residual") == 0         ? &residual
                             : strcmp(a, "--in-place") == 0         ? &in_place
                             : strcmp(a, "--find") == 0             ? &find
                             : strcmp(a, "--constant-weights") == 0 ? &constant
                                                                    : NULL;
        const struct {
            const char *name;
            size_t *value;
        } sizes[] = {{"--n", &n},          {"--c", &c},           {"--h", &h},
                     {"--w", &w},          {"--k", &k},           {"--r", &r},
                     {"--s", &s},          {"--stride", &stride}, {"--dilation", &dilation},
                     {"--groups", &groups}};
        size_t *size = NULL;
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++)
            if (strcmp(a, sizes[j].name) == 0)
                size = sizes[j].value;
        if (flag)
            *flag = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(conv_usage, stdout);
            return 0;
        } else if (strncmp(a, "--", 2) != 0 || bench_option_value("conv", argc, argv, &i, &v) != 0)
            bad = 1;
        else if (size)
            bad = bench_parse_size(v, size);
        else if (strcmp(a, "--pad") == 0) {
            int p;
            bad = bench_parse_int(v, 0, 1L << 20, &p);
            pad = (size_t)p;
        } else if (strcmp(a, "--layout") == 0 && (strcmp(v, "nchw") == 0 || strcmp(v, "nhwc") == 0))
            layout = strcmp(v, "nhwc") == 0 ? KILN_NHWC : KILN_NCHW;
        else if (strcmp(a, "--dtype") == 0)
            bad = bench_parse_dtype(v, &dtype);
        else if (strcmp(a, "--algo") == 0)
            bad = parse_algo(v, &all, &algo);
        else if (strcmp(a, "--reps") == 0) {
            bad = bench_parse_int(v, 1, BENCH_MAX_REPS, &opt.reps);
            for (int p = 0; p < BENCH_NN_PEER_COUNT; p++)
                opt.peer_reps[p] = opt.reps;
        } else if (strcmp(a, "--warmup") == 0)
            bad = bench_parse_int(v, 0, BENCH_MAX_REPS, &opt.warmup);
        else if (strcmp(a, "--compare") == 0)
            bad = bench_nn_peer_parse(v, &opt.peers);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "kiln-bench conv: bad argument \"%.64s%s%.64s\"\n%s", a, v ? " " : "", v ? v : "",
                    conv_usage);
            return 2;
        }
    }
    if (in_place && !residual) {
        fprintf(stderr, "kiln-bench conv: --in-place needs --residual\n%s", conv_usage);
        return 2;
    }
    opt.in_place = in_place;
    if (!n || !c || !h || !w || !k || !r || !s) {
        fprintf(stderr, "kiln-bench conv: --n, --c, --h, --w, --k, --r and --s are required\n%s", conv_usage);
        return 2;
    }
    /* y at most n x k x the padded input (stride 1). */
    if (bench_check_elements("conv", "x", (double)n * c * h * w) ||
        bench_check_elements("conv", "w", (double)k * c * r * s) ||
        bench_check_elements("conv", "y", (double)n * k * ((double)h + 2.0 * pad) * ((double)w + 2.0 * pad)))
        return 2;

    kiln_conv2d_desc desc;
    kiln_conv2d_desc_init(&desc, layout, n, c, h, w, k, r, s);
    desc.dtype = dtype;
    desc.stride_h = desc.stride_w = stride;
    desc.pad_top = desc.pad_bottom = desc.pad_left = desc.pad_right = pad;
    desc.dilation_h = desc.dilation_w = dilation;
    desc.groups = groups;
    desc.has_bias = bias;
    desc.activation = relu ? KILN_ACT_RELU : KILN_ACT_NONE;
    desc.beta = residual ? 1.0f : 0.0f;
    desc.find = find;
    desc.constant_weights = constant;

    /* Every algorithm, AUTO first: the peers' kiln/x compares with its choice. */
    kiln_conv_algo algos[sizeof algo_names / sizeof *algo_names];
    size_t count = 0;
    if (all)
        for (size_t i = 0; i < sizeof algo_names / sizeof *algo_names; i++)
            algos[count++] = (kiln_conv_algo)i;
    else
        algos[count++] = algo;

    kiln_context *ctx = NULL;
    kiln_device_info device;
    if (bench_open_context("conv", &ctx, &device) != 0)
        return 1;
    struct bench_conv_report reports[sizeof algo_names / sizeof *algo_names];
    int failures = bench_conv_run(ctx, &desc, algos, count, &opt, reports);
    kiln_context_destroy(ctx);
    if (json) {
        for (size_t i = 0; i < count; i++)
            bench_conv_print_json(stdout, &device, &reports[i], NULL);
    } else {
        print_table(&device, reports, count);
        bench_nn_peer_print_config(stdout, opt.peers);
    }
    for (size_t i = 0; i < count; i++)
        bench_conv_check_errors(&reports[i]);
    return failures ? 1 : 0;
}
