/*
 * tools/kiln-report on its tiny suite: the report directory holds the JSON
 * lines of every command (the peaks, a GEMM, a convolution, an attention),
 * a markdown summary naming the device, and, where matplotlib can be
 * imported by the interpreter the tool runs under, the roofline and speed
 * plots (their presence and SVG header checked, not their pixels); without
 * matplotlib the summary says why there are none. And the report rendered
 * from an earlier run's results (--from), with the host's peers set apart
 * on a device that is not a CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#if defined(KT_KILN_REPORT) && defined(KT_KILN_INFO) && defined(KT_KILN_BENCH)
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char text[1 << 20];
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *copy = strdup(text);
    assert_non_null(copy);
    return copy;
}

/* Whether the tool will plot: matplotlib in the PATH's python3 or in
   Debian's (the tool moves there for it). */
static int can_plot(void)
{
    return system("python3 -c 'import matplotlib' 2>/dev/null") == 0 ||
           system("/usr/bin/python3 -c 'import matplotlib' 2>/dev/null") == 0;
}

/* Runs kiln-report with args (its output into dir/out); its exit status. */
static int run_report(const char *dir, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s/out' 2>&1", KT_KILN_REPORT, args, dir);
    return system(cmd);
}

/* The number after "key": in line, or -1 where the line has none. */
static double json_number(const char *line, const char *key)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":", key);
    const char *at = strstr(line, quoted);
    return at ? strtod(at + strlen(quoted), NULL) : -1.0;
}

/* The attention row says whether what it moves fits the device's cache
   (cache_bytes, reported by the device: its bandwidth_fraction is then the
   cache's speed), and says it right; whether it fits. */
static int check_fits_cache(const char *lines)
{
    const char *line = strstr(lines, "\"op\": \"attention\"");
    assert_non_null(line);
    while (line > lines && line[-1] != '\n')
        line--;
    const char *end = strchr(line, '\n');
    char *row = strndup(line, end ? (size_t)(end - line) : strlen(line));
    assert_non_null(row);
    const double cache = json_number(row, "cache_bytes"), bytes = json_number(row, "bytes");
    const int fits = strstr(row, "\"fits_cache\": true") != NULL,
              does_not = strstr(row, "\"fits_cache\": false") != NULL;
    printf("# the attention row moves %.0f bytes; the device's cache: %.0f bytes (%s)\n", bytes, cache,
           fits       ? "fits"
           : does_not ? "does not fit"
                      : "not said");
    if (cache > 0.0) {
        if (bytes <= 0.0 || fits == does_not || fits != (bytes <= cache))
            fail_msg("fits_cache is wrong or missing:\n%s", row);
    } else if (fits || does_not) {
        fail_msg("fits_cache without the device's cache:\n%s", row);
    }
    free(row);
    return fits;
}

/* Fails, with what the tool said, unless kiln-report with args succeeds. */
static void report_ok(const char *dir, const char *args)
{
    const int rc = run_report(dir, args);
    if (rc != 0) {
        char path[1200];
        snprintf(path, sizeof path, "%s/out", dir);
        char *out = slurp(path);
        fail_msg("kiln-report %s exited with %d:\n%s", args, rc, out ? out : "");
    }
}

static void test_tiny_report(void **state)
{
    (void)state;
    char *dir = kt_temp_dir(), cmd[4096], path[1200];
    const char *device = getenv("KILN_DEVICE");
    snprintf(cmd, sizeof cmd, "--suite tiny --out '%s/r' --devices '%s' --bench '%s' --info '%s'", dir,
             device && *device ? device : "default", KT_KILN_BENCH, KT_KILN_INFO);
    report_ok(dir, cmd);

    snprintf(path, sizeof path, "%s/r/results.jsonl", dir);
    char *lines = slurp(path);
    assert_non_null(lines);
    static const char *const ops[] = {"\"op\": \"peak\"", "\"op\": \"gemm\"", "\"op\": \"conv\"",
                                      "\"op\": \"attention\""};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strstr(lines, ops[i]))
            fail_msg("results.jsonl has no line with %s:\n%s", ops[i], lines);
    assert_non_null(strstr(lines, "\"bandwidth_fraction\"")); /* the attention row's, against the measured bandwidth */
    assert_non_null(strstr(lines, "\"launch_floor_us\""));    /* the peak line's: an empty call and its wait */
    const int fits = check_fits_cache(lines);
    free(lines);

    snprintf(path, sizeof path, "%s/r/report.md", dir);
    char *md = slurp(path);
    assert_non_null(md);
    assert_non_null(strstr(md, "# kiln report"));
    assert_non_null(strstr(md, "| row | kiln ms |"));
    if (fits && !strstr(md, "(fits the "))
        fail_msg("report.md does not say the attention row fits the cache:\n%s", md);
    if (can_plot()) {
        static const char *const plots[] = {"roofline-0.svg", "speed-0.svg"};
        for (size_t i = 0; i < sizeof plots / sizeof *plots; i++) {
            if (!strstr(md, plots[i]))
                fail_msg("report.md does not show %s:\n%s", plots[i], md);
            snprintf(path, sizeof path, "%s/r/%s", dir, plots[i]);
            char *svg = slurp(path);
            if (!svg || strncmp(svg, "<?xml", 5) != 0 || !strstr(svg, "<svg"))
                fail_msg("%s is missing or not SVG", plots[i]);
            free(svg);
        }
    } else {
        printf("# matplotlib is not installed: checking the report says so\n");
        assert_non_null(strstr(md, "no plots: matplotlib is not installed"));
    }
    free(md);
    kt_remove_tree(dir);
    free(dir);
}

/* --from renders an earlier run's results.jsonl, running nothing: two
   devices, a GPU's and a CPU's, each with a GEMM row against OpenBLAS (the
   host's) and an attention row against the naive kernel (the device's).
   On the GPU the table marks OpenBLAS as the host CPU's and the speed plot
   leaves it out; on the CPU both stay. A missing or empty file is an
   error, not a report. */
static void test_report_from_results(void **state)
{
    (void)state;
    char *dir = kt_temp_dir(), cmd[4096], path[1200];
    static const char *const lines[] = {
        "{\"op\": \"peak\", \"device\": \"A GPU\", \"device_type\": \"gpu\", \"gflops\": 50000.0, \"gbps\": 3000.0, "
        "\"report_device\": \"gpu\"}",
        "{\"op\": \"gemm\", \"m\": 512, \"n\": 512, \"k\": 512, \"device\": \"A GPU\", \"median_ms\": 0.02, "
        "\"gflops\": 13421.8, \"peers\": {\"openblas\": {\"median_ms\": 1.0}}, \"report_device\": \"gpu\"}",
        "{\"op\": \"attention\", \"device\": \"A GPU\", \"median_ms\": 0.05, \"gflops\": 100.0, \"flops\": 5e6, "
        "\"bytes\": 1e6, \"peers\": {\"naive\": {\"median_ms\": 0.5}}, \"report_device\": \"gpu\"}",
        "{\"op\": \"peak\", \"device\": \"A CPU\", \"device_type\": \"cpu\", \"gflops\": 200.0, \"gbps\": 40.0, "
        "\"report_device\": \"cpu\"}",
        "{\"op\": \"gemm\", \"m\": 512, \"n\": 512, \"k\": 512, \"device\": \"A CPU\", \"median_ms\": 1.5, "
        "\"gflops\": 179.0, \"peers\": {\"openblas\": {\"median_ms\": 1.4}}, \"report_device\": \"cpu\"}",
        "{\"op\": \"attention\", \"device\": \"A CPU\", \"median_ms\": 0.5, \"gflops\": 10.0, \"flops\": 5e6, "
        "\"bytes\": 1e6, \"peers\": {\"naive\": {\"median_ms\": 2.0}}, \"report_device\": \"cpu\"}",
    };
    snprintf(path, sizeof path, "%s/in.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        fprintf(f, "%s\n", lines[i]);
    fclose(f);
    snprintf(cmd, sizeof cmd, "--from '%s/in.jsonl' --out '%s/r'", dir, dir);
    report_ok(dir, cmd);

    snprintf(path, sizeof path, "%s/r/report.md", dir);
    char *md = slurp(path);
    assert_non_null(md);
    const char *gpu = strstr(md, "## A GPU"), *cpu = strstr(md, "## A CPU");
    if (!gpu || !cpu || cpu < gpu)
        fail_msg("report.md lacks a section per device, in order:\n%s", md);
    const char *marked = strstr(md, "openblas (host CPU) 1.000 (50.00)");
    if (!marked || marked > cpu)
        fail_msg("the GPU's table does not mark OpenBLAS as the host's:\n%s", md);
    if (strstr(cpu, "(host CPU)") || !strstr(cpu, "openblas 1.400 (0.93)"))
        fail_msg("the CPU's table marks or lacks OpenBLAS:\n%s", md);
    assert_non_null(strstr(md, "naive 0.500 (10.00)"));
    if (can_plot()) {
        snprintf(path, sizeof path, "%s/r/speed-0.svg", dir);
        char *svg = slurp(path);
        assert_non_null(svg);
        if (strstr(svg, "openblas") || !strstr(svg, "naive time / kiln time"))
            fail_msg("the GPU's speed plot should show the naive kernel and not OpenBLAS");
        free(svg);
        snprintf(path, sizeof path, "%s/r/speed-1.svg", dir);
        svg = slurp(path);
        assert_non_null(svg);
        if (!strstr(svg, "openblas time / kiln time"))
            fail_msg("the CPU's speed plot lacks OpenBLAS");
        free(svg);
    }
    free(md);

    snprintf(cmd, sizeof cmd, "--from '%s/none.jsonl' --out '%s/r2'", dir, dir);
    assert_int_not_equal(run_report(dir, cmd), 0);
    snprintf(path, sizeof path, "%s/empty.jsonl", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "--from '%s' --out '%s/r3'", path, dir);
    assert_int_not_equal(run_report(dir, cmd), 0);
    kt_remove_tree(dir);
    free(dir);
}
#else
static void test_report_from_results(void **state)
{
    (void)state;
    printf("# kiln-report not found: nothing to render\n");
    skip();
}

static void test_tiny_report(void **state)
{
    (void)state;
    printf("# kiln-info or kiln-bench not built: nothing to run the report with\n");
    skip();
}
#endif

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_tiny_report));
    kt_add(&tests, cmocka_unit_test(test_report_from_results));
    return kt_run("report", &tests);
}
