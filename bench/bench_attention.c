/*
 * kiln-bench attention: one attention problem on kiln (the fused kernel, or
 * the algorithm asked for) against kiln's own naive path (GEMM, softmax,
 * GEMM through a score matrix) and a host three-step attention with
 * OpenBLAS, measured in one run on the same random data. Each output is
 * checked against a double-precision reference on sampled rows.
 *
 * GFLOP/s count 4 * batch * heads * seq_q * seq_kv * head_dim flops (the two
 * products), halved with causal masking, for every library alike. Plan
 * creation (kernel choice and compile, workspace allocation) is timed on its
 * own and kept out of the medians. Each library's memory beyond Q, K, V and O
 * is reported: the plan's device workspace for kiln, the host score matrix
 * of one head for the OpenBLAS peer.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* The peers of attention, in the order they are measured and printed. */
enum attn_peer { PEER_NAIVE, PEER_OPENBLAS, PEER_COUNT };
static const char *const peer_names[PEER_COUNT] = {"naive", "openblas"};

/* Rows of O checked per library (the first, the last, the rest random). */
enum { SAMPLE_ROWS = 48 };

/* Errors are relative to the largest |v| of the row's keys. fp32: the score
   error is (D + 4) * 2^-22 * |scale q.k|, about 1e-5 for these inputs; fp16
   storage rounds O to 11 bits (4.9e-4), bf16 to 8 (3.9e-3). */
static double error_limit(kiln_dtype dtype) { return dtype == KILN_F16 ? 2e-3 : dtype == KILN_BF16 ? 1e-2 : 1e-4; }

struct report {
    kiln_attention_desc desc;
    kiln_attention_plan_info plan; /* what kiln chose */
    double compile_ms;             /* kiln_attention_plan_create(), not in the medians */
    unsigned long long builds;     /* programs compiled from source by the plan */
    struct bench_result kiln, peers[PEER_COUNT];
    double device_gbps;    /* the device's measured bandwidth (0: unknown) */
    char gbps_source[160]; /* "measured", "remembered", or why there is none */
};

/* Host values (exactly representable in the storage type), the device
   buffers kiln runs on, and the host output and scratch of the host peer. */
struct operands {
    size_t nq, nkv;
    float *q, *k, *v, *o, *scores;
    uint16_t *halves;
    kiln_buffer *dq, *dk, *dv, *dout;
};

static void release_operands(struct operands *x)
{
    kiln_buffer_destroy(x->dq);
    kiln_buffer_destroy(x->dk);
    kiln_buffer_destroy(x->dv);
    kiln_buffer_destroy(x->dout);
    free(x->q);
    free(x->k);
    free(x->v);
    free(x->o);
    free(x->scores);
    free(x->halves);
}

static int prepare_operands(kiln_context *ctx, const kiln_attention_desc *d, struct operands *x, struct bench_result *r)
{
    x->nq = d->batch * d->seq_q * d->heads * d->head_dim;
    x->nkv = d->batch * d->seq_kv * d->kv_heads * d->head_dim;
    x->q = malloc(x->nq * sizeof *x->q);
    x->k = malloc(x->nkv * sizeof *x->k);
    x->v = malloc(x->nkv * sizeof *x->v);
    x->o = malloc(x->nq * sizeof *x->o);
    x->halves = d->dtype != KILN_F32 ? malloc((x->nq > x->nkv ? x->nq : x->nkv) * sizeof *x->halves) : NULL;
    if (!x->q || !x->k || !x->v || !x->o || (d->dtype != KILN_F32 && !x->halves)) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "out of host memory");
        return 1;
    }
    uint64_t rng = 42;
    bench_fill_random(x->q, x->nq, d->dtype, &rng);
    bench_fill_random(x->k, x->nkv, d->dtype, &rng);
    bench_fill_random(x->v, x->nkv, d->dtype, &rng);
    return bench_fail(bench_upload(ctx, x->q, x->nq, d->dtype, x->halves, &x->dq), r, "Q") ||
           bench_fail(bench_upload(ctx, x->k, x->nkv, d->dtype, x->halves, &x->dk), r, "K") ||
           bench_fail(bench_upload(ctx, x->v, x->nkv, d->dtype, x->halves, &x->dv), r, "V") ||
           bench_fail(bench_upload(ctx, NULL, x->nq, d->dtype, x->halves, &x->dout), r, "O");
}

/* ---- the reference ---- */

static size_t at(const kiln_attention_desc *d, size_t seq, size_t heads, size_t b, size_t h, size_t pos)
{
    return (d->layout == KILN_BSHD ? (b * seq + pos) * heads + h : (b * heads + h) * seq + pos) * d->head_dim;
}

/* Largest error of sampled rows of o against a double reference, relative
   to the largest |v| over the row's keys; NaN if any sampled value is NaN. */
static double max_rel_err(const kiln_attention_desc *d, const struct operands *x, const float *o)
{
    const size_t D = d->head_dim, rows = d->batch * d->heads * d->seq_q;
    double *s = malloc(d->seq_kv * sizeof *s), *ref = malloc(D * sizeof *ref);
    double worst = s && ref ? 0.0 : NAN;
    uint64_t rng = 7; /* the same rows for every library */
    for (int n = 0; n < SAMPLE_ROWS && s && ref; n++) {
        const size_t row = n == 0 ? 0 : n == 1 ? rows - 1 : bench_random_next(&rng) % rows;
        const size_t i = row % d->seq_q, h = row / d->seq_q % d->heads, b = row / d->seq_q / d->heads;
        const size_t hk = h / (d->heads / d->kv_heads);
        long lim = d->causal ? (long)i + (long)d->seq_kv - (long)d->seq_q + 1 : (long)d->seq_kv;
        lim = lim < 0 ? 0 : lim;
        const float *q = x->q + at(d, d->seq_q, d->heads, b, h, i);
        double top = -INFINITY, sum = 0.0, vmax = 0.0;
        for (long j = 0; j < lim; j++) {
            const float *k = x->k + at(d, d->seq_kv, d->kv_heads, b, hk, (size_t)j);
            double dot = 0.0;
            for (size_t c = 0; c < D; c++)
                dot += (double)q[c] * k[c];
            s[j] = d->scale * dot;
            top = s[j] > top ? s[j] : top;
        }
        for (size_t c = 0; c < D; c++)
            ref[c] = 0.0;
        for (long j = 0; j < lim; j++) {
            const float *v = x->v + at(d, d->seq_kv, d->kv_heads, b, hk, (size_t)j);
            const double p = exp(s[j] - top);
            sum += p;
            for (size_t c = 0; c < D; c++) {
                ref[c] += p * v[c];
                vmax = fabs(v[c]) > vmax ? fabs(v[c]) : vmax;
            }
        }
        const float *got = o + at(d, d->seq_q, d->heads, b, h, i);
        for (size_t c = 0; c < D; c++) {
            double err = fabs(got[c] - (sum > 0.0 ? ref[c] / sum : 0.0)) / (vmax > 0.0 ? vmax : 1.0);
            worst = isnan(err) || err > worst ? err : worst;
        }
    }
    free(s);
    free(ref);
    return worst;
}

/* ---- measuring ---- */

static double flops(const kiln_attention_desc *d)
{
    double f = 4.0 * (double)d->batch * (double)d->heads * (double)d->seq_q * (double)d->seq_kv * (double)d->head_dim;
    return d->causal ? f / 2.0 : f;
}

static void finish_result(const kiln_attention_desc *d, const struct bench_timing *t, const struct operands *x,
                          struct bench_result *r)
{
    r->state = BENCH_MEASURED;
    r->median_ms = t->median_ms;
    r->reps = t->reps;
    r->gflops = flops(d) / (t->median_ms * 1e6);
    r->max_rel_err = max_rel_err(d, x, x->o);
}

struct kiln_call {
    kiln_context *ctx;
    kiln_attention_plan *plan;
    const struct operands *x;
    kiln_status st;
};

static int kiln_call_run(void *arg)
{
    struct kiln_call *c = arg;
    c->st = kiln_attention_plan_execute(c->plan, c->x->dq, c->x->dk, c->x->dv, NULL, NULL, c->x->dout, NULL, NULL);
    if (c->st == KILN_SUCCESS)
        c->st = kiln_context_finish(c->ctx);
    return c->st != KILN_SUCCESS;
}

/* Plan `d` (with its algo), time it and check it into r; plan info, compile
   time and programs built go to the optional outputs. */
static int measure_kiln(kiln_context *ctx, const kiln_attention_desc *d, int warmup, int reps, double budget_ms,
                        struct operands *x, struct bench_result *r, struct report *rep)
{
    kiln_cache_info before, after;
    kiln_attention_plan_info info;
    struct kiln_call call = {ctx, NULL, x, KILN_SUCCESS};
    snprintf(r->algo, sizeof r->algo, "%s", d->algo == KILN_ATTENTION_NAIVE ? "naive" : "fused");
    if (bench_fail(kiln_context_get_cache_info(ctx, &before), r, "cache info"))
        return 1;
    double t0 = bench_now_ms();
    kiln_status st = kiln_attention_plan_create(ctx, d, &call.plan);
    double compile_ms = bench_now_ms() - t0;
    if (bench_fail(st, r, "plan") || bench_fail(kiln_attention_plan_describe(call.plan, &info), r, "describe") ||
        bench_fail(kiln_context_get_cache_info(ctx, &after), r, "cache info") ||
        bench_fail(bench_poison(x->dout, d->dtype), r, "poison O")) {
        kiln_attention_plan_destroy(call.plan);
        return 1;
    }
    r->has_workspace = 1;
    r->workspace_bytes = info.workspace_bytes;
    if (rep) {
        rep->plan = info;
        rep->compile_ms = compile_ms;
        rep->builds = (unsigned long long)(after.builds - before.builds);
    }
    struct bench_timing t;
    int rc = bench_measure(kiln_call_run, &call, warmup, reps, budget_ms, &t);
    kiln_attention_plan_destroy(call.plan);
    if (rc != 0)
        return bench_fail(call.st, r, "execute");
    if (bench_fail(bench_download(x->dout, x->nq, d->dtype, x->halves, x->o), r, "O"))
        return 1;
    finish_result(d, &t, x, r);
    return 0;
}

static int host_peer_run(void *arg) { return bench_peer_attention(arg, NULL, 0); }

static void measure_openblas(const kiln_attention_desc *d, int warmup, int reps, double budget_ms, struct operands *x,
                             struct bench_result *r)
{
    if (!bench_peer_attention_built()) {
        r->state = BENCH_NOT_BUILT;
        return;
    }
    bench_peer_attention_routine(r->algo, sizeof r->algo);
    if (d->dtype != KILN_F32 || d->mask || d->key_lengths) {
        r->state = BENCH_NOT_APPLICABLE;
        snprintf(r->error, sizeof r->error, "fp32 without masks or key lengths only");
        return;
    }
    x->scores = malloc(d->seq_q * d->seq_kv * sizeof *x->scores);
    if (!x->scores) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "out of host memory for the %zux%zu score matrix", d->seq_q, d->seq_kv);
        return;
    }
    r->has_workspace = 1;
    r->workspace_bytes = d->seq_q * d->seq_kv * sizeof *x->scores;
    memset(x->o, 0xff, x->nq * sizeof *x->o); /* NaN */
    struct bench_peer_attention a = {d, x->q, x->k, x->v, x->o, x->scores};
    struct bench_timing t;
    if (bench_measure(host_peer_run, &a, warmup, reps, budget_ms, &t) != 0) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "failed");
        return;
    }
    finish_result(d, &t, x, r);
}

struct options {
    int warmup, reps, peer_reps;
    double budget_ms;
    unsigned peers;
};

static int run(kiln_context *ctx, const kiln_attention_desc *desc, const struct options *opt, struct report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->desc = *desc;
    struct operands x;
    memset(&x, 0, sizeof x);
    int rc = prepare_operands(ctx, desc, &x, &rep->kiln);
    if (rc == 0) {
        rc = measure_kiln(ctx, desc, opt->warmup, opt->reps, opt->budget_ms, &x, &rep->kiln, rep);
        if (opt->peers >> PEER_NAIVE & 1u) {
            kiln_attention_desc naive = *desc;
            naive.algo = KILN_ATTENTION_NAIVE;
            measure_kiln(ctx, &naive, opt->warmup, opt->peer_reps, opt->budget_ms, &x, &rep->peers[PEER_NAIVE], NULL);
        }
        if (opt->peers >> PEER_OPENBLAS & 1u)
            measure_openblas(desc, opt->warmup, opt->peer_reps, opt->budget_ms, &x, &rep->peers[PEER_OPENBLAS]);
    }
    release_operands(&x);
    return rc;
}

/* ---- output ---- */

static void shape(const kiln_attention_desc *d, char *buf, size_t size)
{
    snprintf(buf, size, "b%zu,h%zu,kv%zu,q%zu,k%zu,d%zu%s,%s", d->batch, d->heads, d->kv_heads, d->seq_q, d->seq_kv,
             d->head_dim, d->causal ? ",causal" : "", d->layout == KILN_BSHD ? "bshd" : "bhsd");
}

/* The bytes an attention must move at least: Q, K, V and O once each, the
   mask, the key lengths and the log-sum-exps. */
static double bytes_moved(const kiln_attention_desc *d)
{
    const double es = d->dtype == KILN_F32 ? 4.0 : 2.0, rows = (double)(d->batch * d->heads * d->seq_q);
    double mask = 0.0;
    if (d->mask == KILN_ATTENTION_MASK_QK)
        mask = (double)(d->seq_q * d->seq_kv);
    else if (d->mask == KILN_ATTENTION_MASK_BQK)
        mask = (double)(d->batch * d->seq_q * d->seq_kv);
    else if (d->mask == KILN_ATTENTION_MASK_BHQK)
        mask = rows * (double)d->seq_kv;
    return es * (2.0 * rows + 2.0 * (double)(d->batch * d->kv_heads * d->seq_kv)) * (double)d->head_dim + 4.0 * mask +
           (d->key_lengths ? 4.0 * (double)d->batch : 0.0) + (d->lse ? 4.0 * rows : 0.0);
}

/* Whether what an attention moves fits the cache in front of the device's
   memory (kiln_device_info's cache_bytes): a CPU's last-level cache of
   hundreds of MiB holds a decoding step's keys and values, and the timed
   calls, one after another, then read them from there. */
static int fits_cache(const kiln_device_info *device, const kiln_attention_desc *d)
{
    return device->cache_bytes && bytes_moved(d) <= (double)device->cache_bytes;
}

static void print_json(FILE *out, const kiln_device_info *device, const struct report *rep)
{
    const kiln_attention_desc *d = &rep->desc;
    char name[128];
    shape(d, name, sizeof name);
    fputs("{\"op\":\"attention\",\"shape\":", out);
    bench_json_string(out, name);
    fprintf(out,
            ",\"batch\":%zu,\"heads\":%zu,\"kv_heads\":%zu,\"seq_q\":%zu,\"seq_kv\":%zu,\"head_dim\":%zu,"
            "\"causal\":%s,\"layout\":\"%s\",\"dtype\":\"%s\"",
            d->batch, d->heads, d->kv_heads, d->seq_q, d->seq_kv, d->head_dim, d->causal ? "true" : "false",
            d->layout == KILN_BSHD ? "bshd" : "bhsd", bench_dtype_name(d->dtype));
    bench_json_number(out, "flops", flops(d));
    fputs(",\"device\":", out);
    bench_json_string(out, device->name);
    if (rep->kiln.state != BENCH_MEASURED) {
        fputs(",\"error\":", out);
        bench_json_string(out, rep->kiln.error);
    } else {
        const char *keys[] = {"algo", "kernel", "params", "profile", "reason"};
        const char *values[] = {rep->plan.name, rep->plan.kernel, rep->plan.params, rep->plan.profile,
                                rep->plan.reason};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            fprintf(out, ",\"%s\":", keys[i]);
            bench_json_string(out, values[i]);
        }
        bench_json_number(out, "median_ms", rep->kiln.median_ms);
        bench_json_number(out, "gflops", rep->kiln.gflops);
        const double gbps = bytes_moved(d) / (rep->kiln.median_ms * 1e6);
        bench_json_number(out, "bytes", bytes_moved(d));
        bench_json_number(out, "gbps", gbps);
        bench_json_number(out, "device_gbps", rep->device_gbps);
        if (rep->device_gbps > 0.0)
            bench_json_number(out, "bandwidth_fraction", gbps / rep->device_gbps);
        fputs(",\"device_gbps_source\":", out);
        bench_json_string(out, rep->gbps_source);
        if (device->cache_bytes) {
            fprintf(out, ",\"cache_bytes\":%llu,\"fits_cache\":%s", (unsigned long long)device->cache_bytes,
                    fits_cache(device, d) ? "true" : "false");
        }
        bench_json_number(out, "max_rel_err", rep->kiln.max_rel_err);
        bench_json_number(out, "compile_ms", rep->compile_ms);
        fprintf(out, ",\"builds\":%llu,\"reps\":%d,\"workspace_bytes\":%zu", rep->builds, rep->kiln.reps,
                rep->kiln.workspace_bytes);
    }
    fputs(",\"peers\":{", out);
    const char *sep = "";
    for (int p = 0; p < PEER_COUNT; p++) {
        const struct bench_result *r = &rep->peers[p];
        if (r->state == BENCH_NOT_REQUESTED)
            continue;
        fprintf(out, "%s\"%s\":", sep, peer_names[p]);
        bench_json_result(out, r, p == PEER_OPENBLAS ? bench_peer_threads(BENCH_PEER_OPENBLAS) : 0);
        sep = ",";
    }
    fputs("}}\n", out);
    fflush(out);
}

static void print_memory(const char *library, const struct bench_result *r, const char *where)
{
    if (r->has_workspace)
        printf("  %-9s %10.1f MiB %s\n", library, (double)r->workspace_bytes / (1 << 20), where);
}

static void print_table(const kiln_device_info *device, const struct report *rep)
{
    const kiln_attention_desc *d = &rep->desc;
    char name[128];
    shape(d, name, sizeof name);
    printf("attention %s, %s storage, on %s (profile %s), %.3g GFLOP\n", name, bench_dtype_name(d->dtype), device->name,
           device->profile, flops(d) * 1e-9);
    if (rep->kiln.state == BENCH_MEASURED) {
        printf("kiln plan: %s / %s [%s], profile %s; %s\n", rep->plan.name, rep->plan.kernel, rep->plan.params,
               rep->plan.profile, rep->plan.reason);
        printf("kiln compile_ms %.1f (%llu programs built), not in the medians\n", rep->compile_ms, rep->builds);
    }
    printf("\n");
    bench_print_result_header();
    bench_print_result_row("kiln", &rep->kiln, &rep->kiln);
    for (int p = 0; p < PEER_COUNT; p++)
        bench_print_result_row(peer_names[p], &rep->peers[p], &rep->kiln);
    if (rep->kiln.state == BENCH_MEASURED) {
        const double gbps = bytes_moved(d) / (rep->kiln.median_ms * 1e6);
        printf("\nkiln moves at least %.1f MB: %.1f GB/s", bytes_moved(d) * 1e-6, gbps);
        if (rep->device_gbps > 0.0)
            printf(", %.2f of the device's %.1f GB/s (the faster of a copy and a read, %s%s)\n",
                   gbps / rep->device_gbps, rep->device_gbps, rep->gbps_source,
                   strcmp(rep->gbps_source, "remembered") == 0 ? "; kiln-bench peak measures it again" : "");
        else
            printf(" (the device's bandwidth: %s)\n", rep->gbps_source);
        if (fits_cache(device, d))
            printf("all of it fits the device's %.0f MiB cache, where the repeated calls may find it: a "
                   "fraction above 1 is the cache's speed, not the memory's\n",
                   (double)device->cache_bytes / (1 << 20));
    }
    const double operands = (double)(2 * d->batch * d->seq_q * d->heads + 2 * d->batch * d->seq_kv * d->kv_heads) *
                            (double)d->head_dim * (d->dtype == KILN_F32 ? 4 : 2);
    printf("\nmemory beyond Q, K, V and O (%.1f MiB):\n", operands / (1 << 20));
    print_memory("kiln", &rep->kiln, "device");
    print_memory("naive", &rep->peers[PEER_NAIVE], "device");
    print_memory("openblas", &rep->peers[PEER_OPENBLAS], "host (one head's scores)");
}

static void check_errors(const struct report *rep)
{
    const double limit = error_limit(rep->desc.dtype);
    const struct bench_result *all[] = {&rep->kiln, &rep->peers[PEER_NAIVE], &rep->peers[PEER_OPENBLAS]};
    const char *names[] = {"kiln", peer_names[PEER_NAIVE], peer_names[PEER_OPENBLAS]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]->state == BENCH_MEASURED && !(all[i]->max_rel_err <= limit))
            fprintf(stderr, "kiln-bench: warning: attention: %s max_rel_err %.3g exceeds %.0e\n", names[i],
                    all[i]->max_rel_err, limit);
}

/* ---- the subcommand ---- */

static const char attention_usage[] =
    "usage: kiln-bench attention --heads H --seq-q NQ --head-dim D [--batch B] [--kv-heads HK] [--seq-kv NK]\n"
    "                            [--causal] [--layout bshd|bhsd] [--dtype f32|f16|bf16] [--algo auto|fused|naive]\n"
    "                            [--reps R] [--warmup W] [--compare naive,openblas] [--bandwidth remembered|measure]\n"
    "                            [--json]\n"
    "softmax(Q K^T / sqrt(D)) V on random data; B defaults to 1, HK to H, NK to NQ. kiln and each peer:\n"
    "W warm-up calls (default 1), then R timed calls (default: as many as fit in about 1 s, at least 5),\n"
    "each to completion; medians reported. Peers on the same data: naive (kiln's GEMM, softmax, GEMM\n"
    "through a score matrix) and openblas (cblas_sgemm, C softmax, cblas_sgemm per head on the host,\n"
    "fp32 only). GFLOP/s count 4*B*H*NQ*NK*D flops, halved with --causal.\n"
    "kiln's bytes moved are set against the device's memory bandwidth (bandwidth_fraction): the one remembered\n"
    "for the device (kiln-bench peak measures it; measured once if none is), or with --bandwidth measure one\n"
    "measured in this run, right after kiln's timed calls, where the machine's bandwidth moves from hour to hour.\n";

int bench_attention(int argc, char **argv)
{
    size_t batch = 1, heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, dim = 0;
    int causal = 0, json = 0, algo = KILN_ATTENTION_AUTO, fresh_gbps = 0;
    kiln_attention_layout layout = KILN_BSHD;
    kiln_dtype dtype = KILN_F32;
    struct options opt = {.warmup = 1, .budget_ms = 1000.0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int bad = 0;
        if (strcmp(a, "--causal") == 0)
            causal = 1;
        else if (strcmp(a, "--json") == 0)
            json = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(attention_usage, stdout);
            return 0;
        } else if (strncmp(a, "--", 2) != 0 || bench_option_value("attention", argc, argv, &i, &v) != 0)
            bad = 1;
        else if (strcmp(a, "--batch") == 0)
            bad = bench_parse_size(v, &batch);
        else if (strcmp(a, "--heads") == 0)
            bad = bench_parse_size(v, &heads);
        else if (strcmp(a, "--kv-heads") == 0)
            bad = bench_parse_size(v, &kv_heads);
        else if (strcmp(a, "--seq-q") == 0)
            bad = bench_parse_size(v, &seq_q);
        else if (strcmp(a, "--seq-kv") == 0)
            bad = bench_parse_size(v, &seq_kv);
        else if (strcmp(a, "--head-dim") == 0)
            bad = bench_parse_size(v, &dim);
        else if (strcmp(a, "--layout") == 0 && (strcmp(v, "bshd") == 0 || strcmp(v, "bhsd") == 0))
            layout = strcmp(v, "bshd") == 0 ? KILN_BSHD : KILN_BHSD;
        else if (strcmp(a, "--dtype") == 0)
            bad = bench_parse_dtype(v, &dtype);
        else if (strcmp(a, "--bandwidth") == 0 && (strcmp(v, "remembered") == 0 || strcmp(v, "measure") == 0))
            fresh_gbps = strcmp(v, "measure") == 0;
        else if (strcmp(a, "--algo") == 0) {
            static const char *const algos[] = {"auto", "fused", "naive"};
            unsigned mask = 0;
            bad = bench_parse_names(v, algos, 3, &mask) || mask == 0 || (mask & (mask - 1));
            algo = mask == 4 ? KILN_ATTENTION_NAIVE : mask == 2 ? KILN_ATTENTION_FUSED : KILN_ATTENTION_AUTO;
        } else if (strcmp(a, "--reps") == 0) {
            bad = bench_parse_int(v, 1, BENCH_MAX_REPS, &opt.reps);
            opt.peer_reps = opt.reps;
        } else if (strcmp(a, "--warmup") == 0)
            bad = bench_parse_int(v, 0, BENCH_MAX_REPS, &opt.warmup);
        else if (strcmp(a, "--compare") == 0)
            bad = bench_parse_names(v, peer_names, PEER_COUNT, &opt.peers);
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "kiln-bench attention: bad argument \"%.64s%s%.64s\"\n%s", a, v ? " " : "", v ? v : "",
                    attention_usage);
            return 2;
        }
    }
    if (!heads || !seq_q || !dim) {
        fprintf(stderr, "kiln-bench attention: --heads, --seq-q and --head-dim are required\n%s", attention_usage);
        return 2;
    }
    const double nk = (double)(seq_kv ? seq_kv : seq_q), nkv = (double)(kv_heads ? kv_heads : heads);
    if (bench_check_elements("attention", "Q", (double)batch * heads * seq_q * dim) ||
        bench_check_elements("attention", "K", batch * nkv * nk * dim) ||
        bench_check_elements("attention", "the scores of the naive path", (double)batch * heads * seq_q * nk))
        return 2;
    kiln_attention_desc desc;
    kiln_attention_desc_init(&desc, layout, batch, heads, seq_q, seq_kv ? seq_kv : seq_q, dim);
    desc.kv_heads = kv_heads ? kv_heads : heads;
    desc.causal = causal;
    desc.dtype = dtype;
    desc.algo = (kiln_attention_algo)algo;

    kiln_context *ctx = NULL;
    kiln_device_info device;
    if (bench_open_context("attention", &ctx, &device) != 0)
        return 1;
    struct report report;
    int rc = run(ctx, &desc, &opt, &report);
    report.device_gbps = bench_device_gbps(ctx, &device, fresh_gbps, report.gbps_source, sizeof report.gbps_source);
    kiln_context_destroy(ctx);
    if (json) {
        print_json(stdout, &device, &report);
    } else {
        print_table(&device, &report);
        if (opt.peers >> PEER_OPENBLAS & 1u)
            bench_peer_print_config(stdout, 1u << BENCH_PEER_OPENBLAS);
    }
    check_errors(&report);
    return rc;
}
