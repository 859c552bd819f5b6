/* kiln-tune: search the default device's GEMM kernel parameters by
   measurement (src/tune/tune.h) and write the best as a child of its
   matched profile. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune/tune.h"

static const char usage[] =
    "usage: kiln-tune [--budget SECONDS] [--ops gemm] [--device SEL] [--out DIR] [--resume] [--seed N] [--json]\n"
    "Searches the kernel parameters of a device's matched profile on representative GEMM shapes, checking every "
    "candidate against a\n"
    "reference before timing it, and writes the best, when it beats the profile by more\n"
    "than 3%, as the profile \"<matched>-tuned\" that kiln loads from then on.\n"
    "--budget SECONDS  wall-clock time of the search (default 600)\n"
    "--ops LIST        operations to tune; only gemm for now\n"
    "--device SEL      the device, as KILN_DEVICE selects it (default: KILN_DEVICE, else the default)\n"
    "--out DIR         where the profile and the journal go (default: the user's profile\n"
    "                  directory, $XDG_CONFIG_HOME/kiln/profiles or ~/.config/kiln/profiles)\n"
    "--resume          take the trials of DIR/" KILN_TUNE_JOURNAL " instead of running them again\n"
    "--seed N          seed of the random sample (default 1)\n"
    "--json            print the result as one JSON object instead of a table\n"
    "Exit status: 0 success, 1 a failure, 2 a usage error.\n";

static int bad(const char *fmt, const char *arg)
{
    fputs("kiln-tune: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    return 2;
}

static int parse_number(const char *text, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    return errno == 0 && end != text && *end == '\0' && *out >= 0 && *out < 1e9;
}

static double gflops(double gflop, double ms) { return ms > 0 ? gflop / (ms * 1e-3) : 0.0; }

static void print_table(const struct kiln_tune_result *r)
{
    printf("\nprofile %s\n%-16s %-12s %10s %10s %8s\n", r->matched, "shape", "group", "before", "after", "ratio");
    for (size_t i = 0; i < r->shape_count; i++) {
        const struct kiln_tune_shape_result *s = &r->shapes[i];
        double before = gflops(s->gflop, s->before_ms), after = gflops(s->gflop, s->after_ms);
        if (before > 0)
            printf("%-16s %-12s %10.1f %10.1f %7.2fx  GFLOP/s\n", s->name, s->group, before, after, after / before);
        else
            printf("%-16s %-12s %10s %10s %8s\n", s->name, s->group, "-", "-", "-");
    }
    printf("trials %zu (%zu from the journal), refused before compile %zu, rejected %zu, timed %zu\n", r->trials,
           r->journaled, r->refused, r->rejected, r->timed);
    if (r->peak_gflops > 0)
        printf("measured peaks: %.1f GFLOP/s fp32, %.1f GB/s\n", r->peak_gflops, r->peak_gbps);
    if (r->profile[0])
        printf("wrote %s: %s\n", r->path, r->changes);
    else
        printf("no candidate beat the profile by more than 3%%: nothing written\n");
}

static void print_json(const struct kiln_tune_result *r)
{
    printf("{\"matched\": \"%s\", \"profile\": \"%s\", \"path\": \"%s\", \"trials\": %zu, \"journaled\": %zu, "
           "\"refused\": %zu, \"rejected\": %zu, \"timed\": %zu, \"peak_gflops\": %.3f, \"peak_gbps\": %.3f, "
           "\"shapes\": [",
           r->matched, r->profile, r->path, r->trials, r->journaled, r->refused, r->rejected, r->timed, r->peak_gflops,
           r->peak_gbps);
    for (size_t i = 0; i < r->shape_count; i++) {
        const struct kiln_tune_shape_result *s = &r->shapes[i];
        printf("%s{\"shape\": \"%s\", \"group\": \"%s\", \"before_gflops\": %.3f, \"after_gflops\": %.3f}",
               i ? ", " : "", s->name, s->group, gflops(s->gflop, s->before_ms), gflops(s->gflop, s->after_ms));
    }
    printf("]}\n");
}

int main(int argc, char **argv)
{
    struct kiln_tune_options o;
    kiln_tune_options_init(&o);
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int takes = strcmp(a, "--budget") == 0 || strcmp(a, "--ops") == 0 || strcmp(a, "--out") == 0 ||
                    strcmp(a, "--seed") == 0 || strcmp(a, "--device") == 0;
        if (takes && i + 1 == argc)
            return bad("%s needs a value", a);
        double v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--budget") == 0) {
            if (!parse_number(argv[++i], &o.budget_s))
                return bad("--budget: not a number of seconds: \"%s\"", argv[i]);
        } else if (strcmp(a, "--seed") == 0) {
            if (!parse_number(argv[++i], &v) || v != (double)(unsigned long)v)
                return bad("--seed: not a whole number: \"%s\"", argv[i]);
            o.seed = (uint64_t)v;
        } else if (strcmp(a, "--ops") == 0) {
            if (strcmp(argv[++i], "gemm") != 0)
                return bad("--ops \"%s\": not yet supported (only gemm)", argv[i]);
        } else if (strcmp(a, "--out") == 0) {
            o.out = argv[++i];
            if (!*o.out)
                return bad("--out: empty directory%s", "");
        } else if (strcmp(a, "--device") == 0) {
            o.device = argv[++i];
        } else if (strcmp(a, "--resume") == 0) {
            o.resume = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            fprintf(stderr, "kiln-tune: bad argument \"%s\"\n%s", a, usage);
            return 2;
        }
    }
    o.log = json ? NULL : stdout;
    struct kiln_tune_result r;
    kiln_status st = kiln_tune_gemm(&o, &r);
    if (st != KILN_SUCCESS) {
        fprintf(stderr, "kiln-tune: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
        return 1;
    }
    if (json)
        print_json(&r);
    else
        print_table(&r);
    return 0;
}
