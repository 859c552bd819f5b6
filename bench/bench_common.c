/*
 * kiln-bench: helpers every subcommand shares -- timing, random operands in
 * device buffers (fp32 or fp16 storage), result records with their JSON and
 * table forms, and command-line parsing.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "ref/storage.h"
#include "tune/peaks.h"

/* ---- timing ---- */

double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *values, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(values, n, sizeof *values, compare_double);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Whether a thread of this process other than the caller is running or
   waiting for a core ('R' in /proc/self/task/TID/stat). Elsewhere: never. */
static int other_thread_running(void)
{
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return 0;
    const long self = (long)gettid();
    int running = 0;
    for (struct dirent *e; !running && (e = readdir(dir)) != NULL;) {
        char *end;
        const long tid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || tid <= 0 || tid == self)
            continue;
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        const size_t len = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[len] = '\0';
        const char *state = strrchr(line, ')'); /* the name may hold spaces and parentheses */
        running = state && state[1] == ' ' && state[2] == 'R';
    }
    closedir(dir);
    return running;
}

double bench_quiesce(double limit_ms)
{
    const double start = bench_now_ms();
    while (other_thread_running() && bench_now_ms() - start < limit_ms) {
        const struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return bench_now_ms() - start;
}

int bench_measure(int (*fn)(void *arg), void *arg, int warmup, int reps, double budget_ms, struct bench_timing *out)
{
    double times[BENCH_MAX_REPS];
    bench_quiesce(BENCH_QUIESCE_MS);
    for (int i = 0; i < warmup; i++) {
        int rc = fn(arg);
        if (rc != 0)
            return rc;
    }
    int n = 0;
    double start = bench_now_ms();
    while (n < BENCH_MAX_REPS && (reps > 0 ? n < reps : n < BENCH_MIN_REPS || bench_now_ms() - start < budget_ms)) {
        double t0 = bench_now_ms();
        int rc = fn(arg);
        if (rc != 0)
            return rc;
        times[n++] = bench_now_ms() - t0;
    }
    out->reps = n;
    out->median_ms = bench_median(times, (size_t)n);
    return 0;
}

int bench_open_context(const char *command, kiln_context **ctx, kiln_device_info *device)
{
    *ctx = NULL;
    kiln_status st = kiln_context_create(NULL, ctx);
    if (st == KILN_SUCCESS)
        st = kiln_context_get_device_info(*ctx, device);
    if (st == KILN_SUCCESS)
        return 0;
    fprintf(stderr, "kiln-bench %s: %s: %s\n", command, kiln_status_string(st), kiln_last_error_detail());
    kiln_context_destroy(*ctx);
    *ctx = NULL;
    return 1;
}

/* ---- the device's bandwidth ---- */

/* The remembered figure's file: the cache directory, and the device's name
   with every character but letters and digits made '_'. 0 without a disk
   cache. */
static int bandwidth_path(kiln_context *ctx, const kiln_device_info *device, char *path, size_t size)
{
    kiln_cache_info cache;
    if (kiln_context_get_cache_info(ctx, &cache) != KILN_SUCCESS || !cache.disk_enabled || !cache.dir[0])
        return 0;
    char name[96];
    size_t n = 0;
    for (const char *c = device->name; *c && n + 1 < sizeof name; c++, n++)
        name[n] = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ? *c : '_';
    name[n] = '\0';
    return snprintf(path, size, "%s/memory-%s.txt", cache.dir, name) < (int)size;
}

double bench_device_gbps(kiln_context *ctx, const kiln_device_info *device, int fresh, char *source, size_t size)
{
    char path[700];
    const int remembered = bandwidth_path(ctx, device, path, sizeof path);
    if (remembered && !fresh) {
        FILE *f = fopen(path, "r");
        double gbps = 0.0;
        char tail = 0;
        const int got = f ? fscanf(f, "gbps %lf %c", &gbps, &tail) : 0;
        if (f)
            fclose(f);
        if (got == 1 && gbps > 0.0 && gbps < 1e6) {
            snprintf(source, size, "remembered");
            return gbps;
        }
        if (f)
            fprintf(stderr, "kiln-bench: warning: %s is not \"gbps <number>\": measuring again\n", path);
    }
    struct kiln_peaks p;
    kiln_status st = kiln_measure_bandwidth(ctx, &p);
    if (st != KILN_SUCCESS) {
        snprintf(source, size, "not measured: %s", kiln_last_error_detail());
        return 0.0;
    }
    snprintf(source, size, fresh ? "measured in this run" : "measured");
    bench_remember_gbps(ctx, device, p.gbps);
    return p.gbps;
}

int bench_remember_gbps(kiln_context *ctx, const kiln_device_info *device, double gbps)
{
    char path[700], tmp[720];
    if (!(gbps > 0.0 && gbps < 1e6) || !bandwidth_path(ctx, device, path, sizeof path))
        return 0;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int done = 0;
    if (f) {
        const int written = fprintf(f, "gbps %.3f\n", gbps) > 0;
        done = fclose(f) == 0 && written && rename(tmp, path) == 0; /* whole or not at all */
        remove(tmp);
    }
    return done;
}

struct empty_call {
    kiln_context *ctx;
    kiln_buffer *one;
};

static int empty_call(void *arg)
{
    const struct empty_call *e = arg;
    kiln_status st = kiln_buffer_fill_f32(e->one, 0, 1, 0.0f);
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(e->ctx);
    return st != KILN_SUCCESS;
}

double bench_launch_floor_us(kiln_context *ctx)
{
    struct empty_call e = {ctx, NULL};
    struct bench_timing t = {0};
    const int ok = kiln_buffer_create(ctx, sizeof(float), &e.one) == KILN_SUCCESS &&
                   bench_measure(empty_call, &e, 10, 0, 300.0, &t) == 0;
    kiln_buffer_destroy(e.one);
    return ok ? t.median_ms * 1e3 : 0.0;
}

/* ---- operands ---- */

uint64_t bench_random_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* The nearest half-precision value (ties to even); magnitudes below the
   smallest normal half become 0. Only for |f| <= 1, as the inputs here are. */
static float round_to_half(float f)
{
    if (fabsf(f) < 0x1p-14f)
        return 0.0f;
    int e;
    float m = frexpf(f, &e);
    return ldexpf(nearbyintf(m * 2048.0f), e - 11);
}

/* Encode a float that round_to_half() produced (a normal half or zero). */
static uint16_t half_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    if ((x & 0x7fffffffu) == 0)
        return sign;
    return (uint16_t)(sign | ((((x >> 23) & 0xffu) - 112u) << 10) | ((x >> 13) & 0x3ffu));
}

static float half_value(uint16_t h)
{
    unsigned exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    float v = exp == 0    ? ldexpf((float)mant, -24)
              : exp == 31 ? (mant ? NAN : INFINITY)
                          : ldexpf((float)(mant | 0x400u), (int)exp - 25);
    return h & 0x8000u ? -v : v;
}

static size_t dtype_size(kiln_dtype dtype) { return dtype == KILN_F32 ? 4 : 2; }

const char *bench_dtype_name(kiln_dtype dtype)
{
    return dtype == KILN_F16 ? "f16" : dtype == KILN_BF16 ? "bf16" : "f32";
}

int bench_parse_dtype(const char *v, kiln_dtype *out)
{
    for (int t = KILN_F32; t <= KILN_BF16; t++)
        if (strcmp(v, bench_dtype_name((kiln_dtype)t)) == 0) {
            *out = (kiln_dtype)t;
            return 0;
        }
    return 1;
}

void bench_fill_random(float *x, size_t n, kiln_dtype dtype, uint64_t *rng)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)(bench_random_next(rng) >> 40) * 0x1p-23f - 1.0f; /* uniform in [-1, 1) */
        x[i] = dtype == KILN_F16 ? round_to_half(v) : dtype == KILN_BF16 ? kiln_ref_from_bf16(kiln_ref_to_bf16(v)) : v;
    }
}

kiln_status bench_upload(kiln_context *ctx, const float *src, size_t n, kiln_dtype dtype, uint16_t *halves,
                         kiln_buffer **out)
{
    size_t bytes = (n * dtype_size(dtype) + 3) / 4 * 4;
    kiln_status st = kiln_buffer_create(ctx, bytes, out);
    if (st != KILN_SUCCESS || !src)
        return st;
    return bench_write(*out, src, n, dtype, halves);
}

kiln_status bench_write(kiln_buffer *buf, const float *src, size_t n, kiln_dtype dtype, uint16_t *halves)
{
    if (dtype == KILN_F32)
        return kiln_buffer_write(buf, 0, n * sizeof(float), src);
    for (size_t i = 0; i < n; i++)
        halves[i] = dtype == KILN_F16 ? half_bits(src[i]) : kiln_ref_to_bf16(src[i]);
    return kiln_buffer_write(buf, 0, n * sizeof(uint16_t), halves);
}

kiln_status bench_download(const kiln_buffer *buf, size_t n, kiln_dtype dtype, uint16_t *halves, float *dst)
{
    if (dtype == KILN_F32)
        return kiln_buffer_read(buf, 0, n * sizeof(float), dst);
    kiln_status st = kiln_buffer_read(buf, 0, n * sizeof(uint16_t), halves);
    for (size_t i = 0; st == KILN_SUCCESS && i < n; i++)
        dst[i] = dtype == KILN_F16 ? half_value(halves[i]) : kiln_ref_from_bf16(halves[i]);
    return st;
}

int bench_operand(kiln_context *ctx, size_t n, uint64_t *rng, float **host, kiln_buffer **dev, struct bench_result *r,
                  const char *what)
{
    *host = malloc(n * sizeof **host);
    if (!*host) {
        r->state = BENCH_FAILED;
        snprintf(r->error, sizeof r->error, "%s: out of host memory", what);
        return 1;
    }
    if (rng)
        bench_fill_random(*host, n, KILN_F32, rng);
    return bench_fail(bench_upload(ctx, rng ? *host : NULL, n, KILN_F32, NULL, dev), r, what);
}

kiln_status bench_poison(kiln_buffer *buf, kiln_dtype dtype)
{
    uint32_t bits = dtype == KILN_F16 ? 0x7e007e00u : dtype == KILN_BF16 ? 0x7fc07fc0u : 0x7fc00000u;
    float v;
    memcpy(&v, &bits, sizeof v);
    return kiln_buffer_fill_f32(buf, 0, kiln_buffer_size(buf) / sizeof(float), v);
}

/* ---- results ---- */

int bench_fail(kiln_status st, struct bench_result *r, const char *what)
{
    if (st == KILN_SUCCESS)
        return 0;
    r->state = BENCH_FAILED;
    snprintf(r->error, sizeof r->error, "%s: %s: %s", what, kiln_status_string(st), kiln_last_error_detail());
    return 1;
}

void bench_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(out, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(out, "\\u%04x", ch);
        else
            fputc(ch, out);
    }
    fputc('"', out);
}

void bench_json_number(FILE *out, const char *key, double v)
{
    if (isfinite(v))
        fprintf(out, ",\"%s\":%.6g", key, v);
    else
        fprintf(out, ",\"%s\":null", key);
}

void bench_json_result(FILE *out, const struct bench_result *r, int threads)
{
    if (r->state != BENCH_MEASURED) {
        fputs("{\"error\":", out);
        bench_json_string(out, r->state == BENCH_NOT_BUILT ? "not built" : r->error);
        fputc('}', out);
        return;
    }
    fputs("{\"routine\":", out);
    bench_json_string(out, r->algo);
    bench_json_number(out, "median_ms", r->median_ms);
    bench_json_number(out, "gflops", r->gflops);
    bench_json_number(out, "max_rel_err", r->max_rel_err);
    fprintf(out, ",\"reps\":%d", r->reps);
    if (r->has_workspace)
        fprintf(out, ",\"workspace_bytes\":%zu", r->workspace_bytes);
    if (threads > 0)
        fprintf(out, ",\"threads\":%d", threads);
    fputc('}', out);
}

void bench_print_result_header(void)
{
    printf("%-9s %-40s %10s %9s %7s %12s %5s\n", "library", "algo", "median ms", "GFLOP/s", "kiln/x", "max rel err",
           "reps");
}

void bench_print_result_row(const char *library, const struct bench_result *r, const struct bench_result *kiln)
{
    if (r->state == BENCH_NOT_BUILT) {
        printf("%-9s not built\n", library);
    } else if (r->state == BENCH_NOT_APPLICABLE) {
        printf("%-9s %-40s %s\n", library, r->algo, r->error);
    } else if (r->state == BENCH_FAILED) {
        printf("%-9s %-40s failed: %s\n", library, r->algo, r->error);
    } else if (r->state == BENCH_MEASURED) {
        printf("%-9s %-40s %10.3f %9.1f", library, r->algo, r->median_ms, r->gflops);
        if (kiln->state == BENCH_MEASURED)
            printf(" %7.2f", kiln->gflops / r->gflops);
        else
            printf(" %7s", "-");
        printf(" %12.2e %5d\n", r->max_rel_err, r->reps);
    }
}

/* ---- command lines ---- */

int bench_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || v == 0 || v > (1ull << 31))
        return -1;
    *out = (size_t)v;
    return 0;
}

int bench_parse_int(const char *s, long min, long max, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if ((*s != '-' && (*s < '0' || *s > '9')) || *end || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

int bench_check_elements(const char *command, const char *what, double elements)
{
    if (elements <= BENCH_MAX_ELEMENTS)
        return 0;
    fprintf(stderr, "kiln-bench %s: %s would hold %.3g elements, more than the %.3g kiln-bench allocates\n", command,
            what, elements, (double)BENCH_MAX_ELEMENTS);
    return -1;
}

int bench_option_value(const char *command, int argc, char **argv, int *i, const char **value)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "kiln-bench %s: %s needs a value\n", command, argv[*i]);
        return -1;
    }
    *value = argv[++*i];
    return 0;
}
