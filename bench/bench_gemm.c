/*
 * kiln-bench gemm: one GEMM on kiln and its peers (OpenBLAS, CLBlast),
 * measured in one run on the same random data, each output checked against a
 * double-precision reference on sampled entries.
 *
 * bench_gemm_run() measures one case; kiln-bench quick runs it over a fixed
 * shape table. kiln's plan creation (kernel choice and compile) is timed on
 * its own and kept out of the medians; every library gets warm-up calls
 * before timing, which also keeps CLBlast's first-call compile out.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kiln/kiln_cl.h"

/* Entries of C checked per library (two corners, the rest random): enough to
   catch a wrong tile, cheap for any K. */
enum { ERROR_SAMPLES = 256 };

/* Errors are relative to sum |a||b|. fp32: accumulation error grows like
   sqrt(K) * 2^-24, far below 1e-4 for any K here. f16 storage: rounding C
   alone costs up to 2^-11 (4.9e-4); bf16: 2^-8 (3.9e-3). fp32 storage with
   TF32 allowed: rounding A and B to TF32 costs each product up to 2^-10
   (9.8e-4) of its magnitude rounded to nearest, 2^-9 (2.0e-3) truncated. */
static double error_limit(const kiln_gemm_desc *d)
{
    return d->dtype == KILN_F16                                ? 1e-3
           : d->dtype == KILN_BF16                             ? 8e-3
           : d->dtype == KILN_F32 && d->math == KILN_MATH_TF32 ? 3e-3
                                                               : 1e-4;
}

/* ---- operands ---- */

/* Index of element (row, col) of op(X) in X stored with `layout` and `ld`. */
static size_t element(kiln_layout layout, kiln_transpose trans, size_t ld, size_t row, size_t col)
{
    if (trans == KILN_TRANS) {
        size_t t = row;
        row = col;
        col = t;
    }
    return layout == KILN_ROW_MAJOR ? row * ld + col : row + col * ld;
}

/* Elements a batch of matrices occupies: op(X) is rows x cols. */
static size_t extent(const kiln_gemm_desc *d, kiln_transpose trans, size_t rows, size_t cols, size_t ld, size_t stride)
{
    return (d->batch - 1) * stride + element(d->layout, trans, ld, rows - 1, cols - 1) + 1;
}

double bench_gemm_max_rel_err(const kiln_gemm_desc *d, const float *a, const float *b, const float *c)
{
    uint64_t rng = 1; /* the same entries for every library */
    double worst = 0.0;
    for (int s = 0; s < ERROR_SAMPLES; s++) {
        size_t i = 0, j = 0, p = 0; /* row, column, batch item */
        if (s == 1) {
            i = d->m - 1;
            j = d->n - 1;
            p = d->batch - 1;
        } else if (s > 1) {
            i = bench_random_next(&rng) % d->m;
            j = bench_random_next(&rng) % d->n;
            p = bench_random_next(&rng) % d->batch;
        }
        double sum = 0.0, magnitude = 0.0;
        for (size_t l = 0; l < d->k; l++) {
            double x = a[p * d->stride_a + element(d->layout, d->trans_a, d->lda, i, l)];
            double y = b[p * d->stride_b + element(d->layout, d->trans_b, d->ldb, l, j)];
            sum += x * y;
            magnitude += fabs(x * y);
        }
        double got = c[p * d->stride_c + element(d->layout, KILN_NO_TRANS, d->ldc, i, j)];
        double err = fabs(got - sum) / (magnitude > 0.0 ? magnitude : 1.0);
        if (isnan(err))
            return err;
        if (err > worst)
            worst = err;
    }
    return worst;
}

/* Host copies (fp32 values, exactly representable in the storage type), the
   device buffers kiln runs on, and fp32 device copies for device peers (the
   same buffers when the storage is fp32). */
struct operands {
    size_t na, nb, nc;
    float *a, *b, *c;
    uint16_t *halves; /* staging for fp16 storage */
    kiln_buffer *da, *db, *dc;
    kiln_buffer *fa, *fb, *fc;
};

static void release_operands(struct operands *o)
{
    if (o->fa != o->da)
        kiln_buffer_destroy(o->fa);
    if (o->fb != o->db)
        kiln_buffer_destroy(o->fb);
    if (o->fc != o->dc)
        kiln_buffer_destroy(o->fc);
    kiln_buffer_destroy(o->da);
    kiln_buffer_destroy(o->db);
    kiln_buffer_destroy(o->dc);
    free(o->a);
    free(o->b);
    free(o->c);
    free(o->halves);
}

static int prepare_operands(kiln_context *ctx, const kiln_gemm_desc *d, int device_peers, struct operands *o,
                            struct bench_result *r)
{
    o->na = extent(d, d->trans_a, d->m, d->k, d->lda, d->stride_a);
    o->nb = extent(d, d->trans_b, d->k, d->n, d->ldb, d->stride_b);
    o->nc = extent(d, KILN_NO_TRANS, d->m, d->n, d->ldc, d->stride_c);
    size_t most = o->na > o->nb ? o->na : o->nb;
    most = most > o->nc ? most : o->nc;
    o->a = malloc(o->na * sizeof *o->a);
    o->b = malloc(o->nb * sizeof *o->b);
    o->c = malloc(o->nc * sizeof *o->c);
    o->halves = d->dtype != KILN_F32 ? malloc(most * sizeof *o->halves) : NULL;
    if (!o->a || !o->b || !o->c || (d->dtype != KILN_F32 && !o->halves)) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "out of host memory");
        return 1;
    }
    uint64_t rng = 42;
    bench_fill_random(o->a, o->na, d->dtype, &rng);
    bench_fill_random(o->b, o->nb, d->dtype, &rng);
    if (bench_fail(bench_upload(ctx, o->a, o->na, d->dtype, o->halves, &o->da), r, "A") ||
        bench_fail(bench_upload(ctx, o->b, o->nb, d->dtype, o->halves, &o->db), r, "B") ||
        bench_fail(bench_upload(ctx, NULL, o->nc, d->dtype, o->halves, &o->dc), r, "C"))
        return 1;
    if (d->dtype == KILN_F32 || !device_peers) {
        o->fa = o->da;
        o->fb = o->db;
        o->fc = o->dc;
        return 0;
    }
    return bench_fail(bench_upload(ctx, o->a, o->na, KILN_F32, NULL, &o->fa), r, "A (fp32 copy)") ||
           bench_fail(bench_upload(ctx, o->b, o->nb, KILN_F32, NULL, &o->fb), r, "B (fp32 copy)") ||
           bench_fail(bench_upload(ctx, NULL, o->nc, KILN_F32, NULL, &o->fc), r, "C (fp32 copy)");
}

/* ---- measuring ---- */

static void finish_result(const kiln_gemm_desc *d, const struct bench_timing *t, const struct operands *o,
                          struct bench_result *r)
{
    r->state = BENCH_MEASURED;
    r->median_ms = t->median_ms;
    r->reps = t->reps;
    r->gflops = 2.0 * (double)d->m * (double)d->n * (double)d->k * (double)d->batch / (t->median_ms * 1e6);
    r->max_rel_err = bench_gemm_max_rel_err(d, o->a, o->b, o->c);
}

struct kiln_call {
    kiln_context *ctx;
    kiln_gemm_plan *plan;
    const struct operands *o;
    kiln_status st;
};

static int kiln_call_run(void *arg)
{
    struct kiln_call *k = arg;
    k->st = kiln_gemm_plan_execute(k->plan, 1.0f, k->o->da, 0, k->o->db, 0, 0.0f, k->o->dc, 0, NULL);
    if (k->st == KILN_SUCCESS)
        k->st = kiln_context_finish(k->ctx);
    return k->st != KILN_SUCCESS;
}

static int measure_kiln(kiln_context *ctx, const kiln_gemm_desc *d, const struct bench_gemm_options *opt,
                        const struct operands *o, struct bench_gemm_report *rep)
{
    struct bench_result *r = &rep->kiln;
    kiln_cache_info before, after;
    struct kiln_call call = {ctx, NULL, o, KILN_SUCCESS};
    if (bench_fail(kiln_context_get_cache_info(ctx, &before), r, "cache info"))
        return 1;
    double t0 = bench_now_ms();
    kiln_status st = kiln_gemm_plan_create(ctx, d, &call.plan);
    rep->compile_ms = bench_now_ms() - t0;
    if (bench_fail(st, r, "plan") || bench_fail(kiln_gemm_plan_describe(call.plan, &rep->plan), r, "describe") ||
        bench_fail(kiln_context_get_cache_info(ctx, &after), r, "cache info") ||
        bench_fail(bench_poison(o->dc, d->dtype), r, "poison C")) {
        kiln_gemm_plan_destroy(call.plan);
        return 1;
    }
    rep->builds = (unsigned long long)(after.builds - before.builds);
    snprintf(r->algo, sizeof r->algo, "%s", rep->plan.family);
    struct bench_timing t;
    int rc = bench_measure(kiln_call_run, &call, opt->warmup, opt->reps, opt->budget_ms, &t);
    kiln_gemm_plan_destroy(call.plan);
    if (rc != 0)
        return bench_fail(call.st, r, "execute");
    if (bench_fail(bench_download(o->dc, o->nc, d->dtype, o->halves, o->c), r, "C"))
        return 1;
    finish_result(d, &t, o, r);
    return 0;
}

struct peer_call {
    enum bench_peer peer;
    const struct bench_peer_gemm *gemm;
    char *err;
    size_t err_size;
};

static int peer_call_run(void *arg)
{
    const struct peer_call *p = arg;
    return bench_peer_gemm(p->peer, p->gemm, p->err, p->err_size);
}

static void measure_peer(kiln_context *ctx, enum bench_peer peer, const kiln_gemm_desc *d,
                         const struct bench_gemm_options *opt, struct operands *o, struct bench_result *r)
{
    if (!bench_peer_built(peer)) {
        r->state = BENCH_NOT_BUILT;
        return;
    }
    bench_peer_routine(peer, d, r->algo, sizeof r->algo);
    struct bench_peer_gemm g = {
        d,   o->a,  o->b,  o->c, NULL, kiln_buffer_get_cl(o->fa), kiln_buffer_get_cl(o->fb), kiln_buffer_get_cl(o->fc),
        ctx, o->da, o->db, o->dc};
    const int cuda = peer == BENCH_PEER_CUBLAS; /* on kiln's own operands, after kiln's C was checked */
    if (cuda) {
        if (bench_fail(bench_poison(o->dc, d->dtype), r, "poison C"))
            return;
    } else if (bench_peer_on_device(peer)) {
        if (bench_fail(kiln_context_get_cl(ctx, NULL, NULL, &g.queue), r, "OpenCL queue") ||
            bench_fail(bench_poison(o->fc, KILN_F32), r, "poison C"))
            return;
    } else {
        memset(o->c, 0xff, o->nc * sizeof *o->c); /* NaN */
    }
    struct peer_call call = {peer, &g, r->error, sizeof r->error};
    struct bench_timing t;
    if (bench_measure(peer_call_run, &call, opt->warmup, opt->peer_reps[peer], opt->budget_ms, &t) != 0) {
        r->state = BENCH_FAILED;
        return;
    }
    if (bench_peer_on_device(peer) && bench_fail(bench_download(o->fc, o->nc, KILN_F32, NULL, o->c), r, "C"))
        return;
    if (cuda && bench_fail(bench_download(o->dc, o->nc, d->dtype, o->halves, o->c), r, "C"))
        return;
    finish_result(d, &t, o, r);
}

int bench_gemm_run(kiln_context *ctx, const kiln_gemm_desc *desc, const struct bench_gemm_options *opt,
                   struct bench_gemm_report *report)
{
    memset(report, 0, sizeof *report);
    report->desc = *desc;
    int device_peers = 0;
    for (int p = 0; p < BENCH_PEER_COUNT; p++)
        device_peers |= (opt->peers >> p & 1u) && bench_peer_on_device((enum bench_peer)p);
    struct operands o = {0};
    int rc = prepare_operands(ctx, desc, device_peers, &o, &report->kiln);
    if (rc == 0) {
        rc = measure_kiln(ctx, desc, opt, &o, report);
        for (int p = 0; p < BENCH_PEER_COUNT; p++)
            if (opt->peers >> p & 1u)
                measure_peer(ctx, (enum bench_peer)p, desc, opt, &o, &report->peers[p]);
    }
    release_operands(&o);
    return rc;
}

void bench_gemm_desc(kiln_gemm_desc *desc, kiln_layout layout, kiln_transpose trans_a, kiln_transpose trans_b, size_t m,
                     size_t n, size_t k, size_t batch)
{
    kiln_gemm_desc_init(desc, layout, trans_a, trans_b, m, n, k);
    desc->batch = batch;
    desc->stride_a = m * k;
    desc->stride_b = k * n;
    desc->stride_c = m * n;
}

/* ---- output ---- */

void bench_gemm_shape(const kiln_gemm_desc *d, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%zux%zux%zu", d->m, d->n, d->k);
    if (d->batch > 1 && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ",batch=%zu", d->batch);
    if (d->trans_a == KILN_TRANS && n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, ",trans_a");
    if (d->trans_b == KILN_TRANS && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, ",trans_b");
}

void bench_gemm_check_errors(const struct bench_gemm_report *rep)
{
    char shape[96];
    bench_gemm_shape(&rep->desc, shape, sizeof shape);
    const double limit = error_limit(&rep->desc);
    if (rep->kiln.state == BENCH_MEASURED && !(rep->kiln.max_rel_err <= limit))
        fprintf(stderr, "kiln-bench: warning: %s: kiln max_rel_err %.3g exceeds %.0e\n", shape, rep->kiln.max_rel_err,
                limit);
    /* cuBLAS computes in kiln's storage and math; the others in fp32 on
       fp32 copies. */
    kiln_gemm_desc exact = rep->desc;
    exact.dtype = KILN_F32, exact.math = KILN_MATH_FP32;
    for (int p = 0; p < BENCH_PEER_COUNT; p++) {
        const double peer_limit = p == BENCH_PEER_CUBLAS ? limit : error_limit(&exact);
        if (rep->peers[p].state == BENCH_MEASURED && !(rep->peers[p].max_rel_err <= peer_limit))
            fprintf(stderr, "kiln-bench: warning: %s: %s max_rel_err %.3g exceeds %.0e\n", shape,
                    bench_peer_name((enum bench_peer)p), rep->peers[p].max_rel_err, peer_limit);
    }
}

void bench_gemm_print_json(FILE *out, const kiln_device_info *device, const struct bench_gemm_report *rep)
{
    const kiln_gemm_desc *d = &rep->desc;
    char shape[96];
    bench_gemm_shape(d, shape, sizeof shape);
    fputs("{\"op\":\"gemm\",\"shape\":", out);
    bench_json_string(out, shape);
    fprintf(out, ",\"m\":%zu,\"n\":%zu,\"k\":%zu,\"batch\":%zu,\"trans_a\":%s,\"trans_b\":%s,\"layout\":\"%s\"", d->m,
            d->n, d->k, d->batch, d->trans_a == KILN_TRANS ? "true" : "false",
            d->trans_b == KILN_TRANS ? "true" : "false", d->layout == KILN_COL_MAJOR ? "col" : "row");
    fprintf(out, ",\"dtype\":\"%s\",\"math\":\"%s\",\"device\":", bench_dtype_name(d->dtype),
            d->math == KILN_MATH_TF32 ? "tf32" : "fp32");
    bench_json_string(out, device->name);
    if (rep->kiln.state != BENCH_MEASURED) {
        fputs(",\"error\":", out);
        bench_json_string(out, rep->kiln.error);
    } else {
        fputs(",\"algo\":", out);
        bench_json_string(out, rep->plan.family);
        fputs(",\"kernel\":", out);
        bench_json_string(out, rep->plan.kernel);
        fputs(",\"params\":", out);
        bench_json_string(out, rep->plan.params);
        fputs(",\"profile\":", out);
        bench_json_string(out, rep->plan.profile);
        fputs(",\"reason\":", out);
        bench_json_string(out, rep->plan.reason);
        bench_json_number(out, "median_ms", rep->kiln.median_ms);
        bench_json_number(out, "gflops", rep->kiln.gflops);
        bench_json_number(out, "max_rel_err", rep->kiln.max_rel_err);
        bench_json_number(out, "compile_ms", rep->compile_ms);
        fprintf(out, ",\"builds\":%llu,\"reps\":%d", rep->builds, rep->kiln.reps);
    }
    fputs(",\"peers\":{", out);
    const char *sep = "";
    for (int p = 0; p < BENCH_PEER_COUNT; p++) {
        const struct bench_result *r = &rep->peers[p];
        if (r->state == BENCH_NOT_REQUESTED)
            continue;
        fprintf(out, "%s\"%s\":", sep, bench_peer_name((enum bench_peer)p));
        bench_json_result(out, r, bench_peer_threads((enum bench_peer)p));
        sep = ",";
    }
    fputs("}}\n", out);
    fflush(out);
}

static void print_table(const kiln_device_info *device, const struct bench_gemm_report *rep)
{
    const kiln_gemm_desc *d = &rep->desc;
    const kiln_gemm_plan_info *plan = &rep->plan;
    char shape[96];
    bench_gemm_shape(d, shape, sizeof shape);
    printf("gemm %s, %s-major, %s storage%s, on %s (profile %s)\n", shape,
           d->layout == KILN_COL_MAJOR ? "column" : "row", bench_dtype_name(d->dtype),
           d->dtype == KILN_F32 && d->math == KILN_MATH_TF32 ? " (TF32 allowed)" : "", device->name, device->profile);
    if (rep->kiln.state == BENCH_MEASURED) {
        printf("kiln plan: %s / %s [%s], profile %s; %s\n", plan->family, plan->kernel, plan->params, plan->profile,
               plan->reason);
        printf("kiln compile_ms %.1f (%llu programs built), not in the medians\n", rep->compile_ms, rep->builds);
    }
    printf("\n");
    bench_print_result_header();
    bench_print_result_row("kiln", &rep->kiln, &rep->kiln);
    for (int p = 0; p < BENCH_PEER_COUNT; p++)
        bench_print_result_row(bench_peer_name((enum bench_peer)p), &rep->peers[p], &rep->kiln);
}

/* ---- the subcommand ---- */

static int parse_algo(const char *s, kiln_gemm_algo *out)
{
    static const char *const names[] = {"auto", "cpu", "tiled", "direct", "clblast", "smallm", "mma", "wgmma"};
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (kiln_gemm_algo)i;
            return 0;
        }
    return -1;
}

static const char gemm_usage[] =
    "usage: kiln-bench gemm --m M --n N --k K [--trans-a] [--trans-b] [--layout row|col] [--batch B]\n"
    "                       [--algo auto|cpu|tiled|direct|clblast|smallm|mma|wgmma] [--dtype f32|f16|bf16]\n"
    "                       [--math fp32|tf32] [--reps R] [--warmup W] [--compare clblast,cublas,openblas]\n"
    "                       [--json]\n"
    "C = A*B (alpha 1, beta 0) on random data, tight leading dimensions and batch strides.\n"
    "--math tf32 allows fp32 storage to multiply in TF32 (KILN_MATH_TF32): kiln's tensor-core families\n"
    "on CUDA from compute capability 8.0, cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32.\n"
    "kiln and each peer: W warm-up calls (default 1), then R timed calls (default: as many as fit\n"
    "in about 1 s, at least 5), each to completion; medians reported. Peers run on the same data:\n"
    "openblas (cblas_sgemm, default threads) and clblast (on kiln's OpenCL queue), fp32 storage.\n";

int bench_gemm(int argc, char **argv)
{
    size_t m = 0, n = 0, k = 0, batch = 1;
    int trans_a = 0, trans_b = 0, json = 0;
    kiln_layout layout = KILN_ROW_MAJOR;
    kiln_dtype dtype = KILN_F32;
    kiln_math math = KILN_MATH_FP32;
    kiln_gemm_algo algo = KILN_GEMM_AUTO;
    struct bench_gemm_options opt = {.warmup = 1, .budget_ms = 1000.0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int bad = 0;
        if (strcmp(a, "--trans-a") == 0)
            trans_a = 1;
        else if (strcmp(a, "--trans-b") == 0)
            trans_b = 1;
        else if (strcmp(a, "--json") == 0)
            json = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(gemm_usage, stdout);
            return 0;
        } else if (strncmp(a, "--", 2) != 0 || bench_option_value("gemm", argc, argv, &i, &v) != 0)
            bad = 1;
        else if (strcmp(a, "--m") == 0)
            bad = bench_parse_size(v, &m);
        else if (strcmp(a, "--n") == 0)
            bad = bench_parse_size(v, &n);
        else if (strcmp(a, "--k") == 0)
            bad = bench_parse_size(v, &k);
        else if (strcmp(a, "--batch") == 0)
            bad = bench_parse_size(v, &batch);
        else if (strcmp(a, "--layout") == 0 && (strcmp(v, "row") == 0 || strcmp(v, "col") == 0))
            layout = v[0] == 'c' ? KILN_COL_MAJOR : KILN_ROW_MAJOR;
        else if (strcmp(a, "--dtype") == 0)
            bad = bench_parse_dtype(v, &dtype);
        else if (strcmp(a, "--math") == 0 && (strcmp(v, "fp32") == 0 || strcmp(v, "tf32") == 0))
            math = v[0] == 't' ? KILN_MATH_TF32 : KILN_MATH_FP32;
        else if (strcmp(a, "--algo") == 0)
            bad = parse_algo(v, &algo);
        else if (strcmp(a, "--reps") == 0) {
            bad = bench_parse_int(v, 1, BENCH_MAX_REPS, &opt.reps);
            for (int p = 0; p < BENCH_PEER_COUNT; p++)
                opt.peer_reps[p] = opt.reps;
        } else if (strcmp(a, "--warmup") == 0)
            bad = bench_parse_int(v, 0, BENCH_MAX_REPS, &opt.warmup);
        else if (strcmp(a, "--compare") == 0)
            bad = bench_peer_parse(v, &opt.peers);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "kiln-bench gemm: bad argument \"%.64s%s%.64s\"\n%s", a, v ? " " : "", v ? v : "",
                    gemm_usage);
            return 2;
        }
    }
    if (!m || !n || !k) {
        fprintf(stderr, "kiln-bench gemm: --m, --n and --k are required\n%s", gemm_usage);
        return 2;
    }
    if (bench_check_elements("gemm", "A", (double)m * k * batch) ||
        bench_check_elements("gemm", "B", (double)k * n * batch) ||
        bench_check_elements("gemm", "C", (double)m * n * batch))
        return 2;

    kiln_gemm_desc desc;
    bench_gemm_desc(&desc, layout, trans_a ? KILN_TRANS : KILN_NO_TRANS, trans_b ? KILN_TRANS : KILN_NO_TRANS, m, n, k,
                    batch);
    desc.dtype = dtype;
    desc.math = math;
    desc.algo = algo;

    kiln_context *ctx = NULL;
    kiln_device_info device;
    if (bench_open_context("gemm", &ctx, &device) != 0)
        return 1;
    struct bench_gemm_report report;
    int rc = bench_gemm_run(ctx, &desc, &opt, &report);
    kiln_context_destroy(ctx);
    if (json) {
        bench_gemm_print_json(stdout, &device, &report);
    } else {
        print_table(&device, &report);
        bench_peer_print_config(stdout, opt.peers);
    }
    bench_gemm_check_errors(&report);
    return rc;
}
