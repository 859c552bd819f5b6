/*
 * kiln-bench jit: how long the first call of a kernel takes in a new process.
 *
 * Each trial makes empty program-cache directories (kiln's and POCL's own) and
 * runs this program as a child four times:
 *   cold       both caches empty: kiln compiles from source;
 *   warm       a second process on the same caches: kiln loads the binary;
 *   kiln-only  kiln's cache warm, the driver's cache emptied again;
 *   kiln-off   kiln's disk cache off, the driver's cache warm.
 * A child times context creation and the first kernel call (build or load,
 * launch, finish) and reports its cache counters, so "warm" visibly compiled
 * nothing. The children run with KILN_CACHE_PROGRAMS=1, so that kiln's cache
 * holds the binary even where the driver keeps its own (POCL: docs/pocl.md);
 * "kiln-off" is then what a POCL user gets by default.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "kiln/kiln.h"

struct child_result {
    double create_ms, first_ms;
    unsigned long long builds, disk_hits;
};

static int child(int no_disk)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = no_disk;
    double t0 = bench_now_ms();
    kiln_context *ctx = NULL;
    kiln_buffer *buf = NULL;
    kiln_status st = kiln_context_create(&opt, &ctx);
    double t1 = bench_now_ms();
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, 1 << 20, &buf);
    double t2 = bench_now_ms();
    if (st == KILN_SUCCESS)
        st = kiln_buffer_fill_f32(buf, 0, (1 << 20) / sizeof(float), 1.0f);
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(ctx);
    double t3 = bench_now_ms();
    kiln_cache_info cache;
    if (st == KILN_SUCCESS)
        st = kiln_context_get_cache_info(ctx, &cache);
    if (st == KILN_SUCCESS)
        printf("%.3f %.3f %llu %llu\n", t1 - t0, t3 - t2, (unsigned long long)cache.builds,
               (unsigned long long)cache.disk_hits);
    else
        fprintf(stderr, "kiln-bench jit: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    return st == KILN_SUCCESS ? 0 : 1;
}

static int run_child(const char *self, int no_disk, struct child_result *r)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "'%s' jit --child%s", self, no_disk ? " --no-disk-cache" : "");
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int n = fscanf(p, "%lf %lf %llu %llu", &r->create_ms, &r->first_ms, &r->builds, &r->disk_hits);
    int rc = pclose(p);
    return n == 4 && rc == 0 ? 0 : -1;
}

static void remove_dir(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "kiln-bench jit: could not remove %s\n", dir);
}

int bench_jit(int argc, char **argv)
{
    int reps = 5, json = 0, no_disk = 0, is_child = 0;
    static const char usage[] = "usage: kiln-bench jit [--reps R] [--json]   (R: 1 to 1000, default 5)\n";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--child") == 0)
            is_child = 1;
        else if (strcmp(argv[i], "--no-disk-cache") == 0)
            no_disk = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--reps") != 0 || bench_option_value("jit", argc, argv, &i, &v) != 0 ||
                   bench_parse_int(v, 1, 1000, &reps) != 0) {
            fprintf(stderr, "kiln-bench jit: bad argument \"%.64s%s%.64s\"\n%s", a, v ? " " : "", v ? v : "", usage);
            return 2;
        }
    }
    if (is_child)
        return child(no_disk);

    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';

    enum { CASES = 4 };
    static const struct {
        const char *name;
        int no_disk, fresh_driver_cache;
    } cases[CASES] = {{"cold", 0, 0}, {"warm", 0, 0}, {"kiln-only", 0, 1}, {"kiln-off", 1, 0}};
    double *create = calloc(CASES * (size_t)reps, sizeof *create);
    double *first = calloc(CASES * (size_t)reps, sizeof *first);
    struct child_result last[CASES];
    int failed = !create || !first;
    for (int r = 0; r < reps && !failed; r++) {
        char kiln_dir[] = "/tmp/kiln-bench-jit-XXXXXX", pocl_dir[] = "/tmp/kiln-bench-pocl-XXXXXX";
        if (!mkdtemp(kiln_dir) || !mkdtemp(pocl_dir)) {
            failed = 1;
            break;
        }
        setenv("KILN_CACHE_DIR", kiln_dir, 1);
        setenv("POCL_CACHE_DIR", pocl_dir, 1);
        setenv("KILN_CACHE_PROGRAMS", "1", 1);
        for (int c = 0; c < CASES && !failed; c++) {
            if (cases[c].fresh_driver_cache) {
                remove_dir(pocl_dir);
                failed = !mkdtemp(strcpy(pocl_dir, "/tmp/kiln-bench-pocl-XXXXXX"));
                setenv("POCL_CACHE_DIR", pocl_dir, 1);
            }
            failed = failed || run_child(self, cases[c].no_disk, &last[c]) != 0;
            create[c * reps + r] = last[c].create_ms;
            first[c * reps + r] = last[c].first_ms;
        }
        remove_dir(kiln_dir);
        remove_dir(pocl_dir);
    }
    if (failed) {
        fprintf(stderr, "kiln-bench jit: a child process failed\n");
        free(create);
        free(first);
        return 1;
    }
    if (!json)
        printf("first call of util/fill.cl in a new process, median of %d trials (KILN_CACHE_PROGRAMS=1)\n"
               "%-9s %12s %15s %7s %10s\n",
               reps, "case", "create ms", "first call ms", "builds", "disk hits");
    for (int c = 0; c < CASES; c++) {
        double cm = bench_median(create + c * reps, (size_t)reps), fm = bench_median(first + c * reps, (size_t)reps);
        if (json)
            printf("{\"op\":\"jit\",\"shape\":\"util/fill.cl\",\"case\":\"%s\",\"create_ms\":%.3f,\"median_ms\":%.3f,"
                   "\"builds\":%llu,\"disk_hits\":%llu,\"reps\":%d}\n",
                   cases[c].name, cm, fm, last[c].builds, last[c].disk_hits, reps);
        else
            printf("%-9s %12.2f %15.2f %7llu %10llu\n", cases[c].name, cm, fm, last[c].builds, last[c].disk_hits);
    }
    free(create);
    free(first);
    return 0;
}
