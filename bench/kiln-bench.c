/* kiln-bench: benchmarks of kiln against its peers, measured in one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

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

int bench_measure(int (*fn)(void *arg), void *arg, int warmup, int reps, double budget_ms, struct bench_timing *out)
{
    double times[BENCH_MAX_REPS];
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

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"jit", bench_jit, "first-call latency of a kernel: cold (empty caches) and warm (second process)"},
    {"gemm", bench_gemm, "one GEMM shape on kiln and its peers (OpenBLAS, CLBlast), same data, one run"},
    {"quick", bench_quick, "a fixed set of GEMM shapes against the peers: the main benchmark, under a minute"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: kiln-bench <command> [options]   (kiln-bench <command> --help for its options)\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "kiln-bench: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
