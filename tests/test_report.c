/*
 * tools/kiln-report on its tiny suite: the report directory holds the JSON
 * lines of every command (the peaks, a GEMM, a convolution, an attention),
 * a markdown summary naming the device, and, where matplotlib can be
 * imported by the interpreter the tool runs under, the roofline and speed
 * plots (their presence and SVG header checked, not their pixels); without
 * matplotlib the summary says why there are none.
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

static void test_tiny_report(void **state)
{
    (void)state;
    char *dir = kt_temp_dir(), cmd[4096], path[1200];
    const char *device = getenv("KILN_DEVICE");
    snprintf(cmd, sizeof cmd, "'%s' --suite tiny --out '%s/r' --devices '%s' --bench '%s' --info '%s' > '%s/out' 2>&1",
             KT_KILN_REPORT, dir, device && *device ? device : "default", KT_KILN_BENCH, KT_KILN_INFO, dir);
    const int rc = system(cmd);
    snprintf(path, sizeof path, "%s/out", dir);
    char *out = slurp(path);
    if (rc != 0)
        fail_msg("kiln-report exited with %d:\n%s", rc, out ? out : "");
    free(out);

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
    free(lines);

    snprintf(path, sizeof path, "%s/r/report.md", dir);
    char *md = slurp(path);
    assert_non_null(md);
    assert_non_null(strstr(md, "# kiln report"));
    assert_non_null(strstr(md, "| row | kiln ms |"));
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
#else
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
    return kt_run("report", &tests);
}
