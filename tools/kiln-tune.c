/* kiln-tune: search a device's kernel parameters and the thresholds
   between its algorithms by measurement (src/tune/tune.h) and write the
   best as a child of its matched profile. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tune/tune.h"

static const char usage[] =
    "usage: kiln-tune [--budget SECONDS] [--ops LIST] [--groups LIST] [--device SEL] [--out DIR] [--resume]\n"
    "                 [--seed N] [--json]\n"
    "Searches the kernel parameters of a device's matched profile on representative shapes,\n"
    "checking every candidate against a reference before timing it, then the thresholds\n"
    "between its algorithms, and writes what beats the profile by more than 3% as the\n"
    "profile \"<matched>-tuned\" that kiln loads from then on. Where the device runs the\n"
    "CUDA backend's families (gemm.mma, gemm.wgmma on Hopper, attention.mma,\n"
    "attention.decode, conv.mma) and their operation is tuned, shapes of their own are\n"
    "added (fp16 and bf16 GEMMs, fp16 attention prefill and decoding, NHWC fp16\n"
    "convolutions); a family it does not run is reported as not searched, with the reason.\n"
    "--budget SECONDS  wall-clock time of the whole run (default 600)\n"
    "--ops LIST        operations to tune, comma-separated: gemm, conv, attention (default all)\n"
    "--groups LIST     kernel groups to search, comma-separated (gemm.wgmma, gemm.tiled, ...;\n"
    "                  select for the thresholds, gemm.cpu.in_place_l2 among them): only the\n"
    "                  shapes that take one are run (all where it names select)\n"
    "                  (default: every group the shapes take, and the thresholds)\n"
    "--device SEL      the device, as KILN_DEVICE selects it (default: KILN_DEVICE, else the default)\n"
    "--out DIR         where the profile and the journal go (default: the user's profile\n"
    "                  directory, $XDG_CONFIG_HOME/kiln/profiles or ~/.config/kiln/profiles)\n"
    "--resume          take the trials of DIR/" KILN_TUNE_JOURNAL " instead of running them again\n"
    "--seed N          seed of the random sample (default 1)\n"
    "--json            print the result as one JSON object instead of a table\n"
    "Exit status: 0 success, 1 a failure, 2 a usage error.\n";

/* A usage error: the message, with `arg` (an argument as given) cut after
   64 characters, as kiln-info and kiln-bench show theirs. */
static int bad(const char *fmt, const char *arg)
{
    char shown[72];
    snprintf(shown, sizeof shown, "%.64s%s", arg, strlen(arg) > 64 ? "..." : "");
    fputs("kiln-tune: ", stderr);
    fprintf(stderr, fmt, shown);
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

/* [#####.....]  42%  gemm.cpu  trials 37 (rejected 2)  about 5 min 12 s left */
static void progress_bar(void *user, const struct kiln_tune_progress *p)
{
    (void)user;
    double f = p->budget_s > 0 ? p->elapsed_s / p->budget_s : 1.0;
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    char bar[31];
    for (int i = 0; i < 30; i++)
        bar[i] = i < (int)(f * 30) ? '#' : '.';
    bar[30] = '\0';
    double left = p->budget_s - p->elapsed_s;
    left = left > 0 ? left : 0;
    fprintf(stderr, "\r[%s] %3.0f%%  %-16.16s trials %zu (rejected %zu)  at most %d min %02d s left ", bar, 100 * f,
            p->stage, p->trials, p->rejected, (int)left / 60, (int)left % 60);
    fflush(stderr);
}

static double gflops(double gflop, double ms) { return ms > 0 ? gflop / (ms * 1e-3) : 0.0; }

static void print_table(const struct kiln_tune_result *r)
{
    printf("\nprofile %s: GFLOP/s of AUTO's plans before and after\n%-36s %-28s %9s %9s %7s\n", r->matched, "shape",
           "group", "before", "after", "ratio");
    for (size_t i = 0; i < r->shape_count; i++) {
        const struct kiln_tune_shape_result *s = &r->shapes[i];
        double before = gflops(s->gflop, s->before_ms), after = gflops(s->gflop, s->after_ms);
        const int moved = s->kernel_before[0] && s->kernel_after[0] && strcmp(s->kernel_before, s->kernel_after);
        if (before > 0)
            printf("%-36s %-28s %9.1f %9.1f %6.2fx%s%s%s%s\n", s->name, s->group, before, after, after / before,
                   moved ? "  " : "", moved ? s->kernel_before : "", moved ? " -> " : "", moved ? s->kernel_after : "");
        else
            printf("%-36s %-28s %9s %9s %7s\n", s->name, s->group, "-", "-", "-");
    }
    for (size_t i = 0; i < r->skipped_count; i++)
        printf("%s: the CUDA family not searched: %s\n", r->skipped[i].group, r->skipped[i].reason);
    for (size_t i = 0; i < r->threshold_count; i++) {
        const struct kiln_tune_threshold *t = &r->thresholds[i];
        if (t->measured)
            printf("%s: %ld -> %ld (ms small/large side: %s)\n", t->field, t->before, t->after, t->evidence);
        else
            printf("%s: %ld, not measured (out of budget)\n", t->field, t->before);
    }
    printf("trials %zu (%zu from the journal), refused before compile %zu, rejected %zu, timed %zu, classes %zu; "
           "%.0f s\n",
           r->trials, r->journaled, r->refused, r->rejected, r->timed, r->classes, r->seconds);
    if (r->peak_gflops > 0)
        printf("measured peaks: %.1f GFLOP/s fp32, %.1f GB/s\n", r->peak_gflops, r->peak_gbps);
    if (r->refuted[0])
        printf("the before/after table refuted a change: %s\n", r->refuted);
    if (r->profile[0])
        printf("wrote %s: %s\n", r->path, r->changes);
    else
        printf("no candidate beat the profile by more than 3%%: nothing written\n");
}

static void print_json(const struct kiln_tune_result *r)
{
    printf("{\"matched\": \"%s\", \"profile\": \"%s\", \"path\": \"%s\", \"trials\": %zu, \"journaled\": %zu, "
           "\"refused\": %zu, \"rejected\": %zu, \"timed\": %zu, \"classes\": %zu, \"seconds\": %.1f, "
           "\"peak_gflops\": %.3f, \"peak_gbps\": %.3f, \"shapes\": [",
           r->matched, r->profile, r->path, r->trials, r->journaled, r->refused, r->rejected, r->timed, r->classes,
           r->seconds, r->peak_gflops, r->peak_gbps);
    for (size_t i = 0; i < r->shape_count; i++) {
        const struct kiln_tune_shape_result *s = &r->shapes[i];
        printf("%s{\"shape\": \"%s\", \"group\": \"%s\", \"set_after\": \"%s\", \"kernel_before\": \"%s\", "
               "\"kernel_after\": \"%s\", \"before_gflops\": %.3f, \"after_gflops\": %.3f}",
               i ? ", " : "", s->name, s->group, s->set_after, s->kernel_before, s->kernel_after,
               gflops(s->gflop, s->before_ms), gflops(s->gflop, s->after_ms));
    }
    printf("], \"skipped\": [");
    for (size_t i = 0; i < r->skipped_count; i++)
        printf("%s{\"group\": \"%s\", \"reason\": \"%s\"}", i ? ", " : "", r->skipped[i].group, r->skipped[i].reason);
    printf("], \"thresholds\": [");
    for (size_t i = 0; i < r->threshold_count; i++) {
        const struct kiln_tune_threshold *t = &r->thresholds[i];
        printf("%s{\"field\": \"%s\", \"before\": %ld, \"after\": %ld, \"measured\": %s}", i ? ", " : "", t->field,
               t->before, t->after, t->measured ? "true" : "false");
    }
    printf("], \"refuted\": \"%s\"}\n", r->refuted);
}

int main(int argc, char **argv)
{
    struct kiln_tune_options o;
    kiln_tune_options_init(&o);
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int takes = strcmp(a, "--budget") == 0 || strcmp(a, "--ops") == 0 || strcmp(a, "--out") == 0 ||
                    strcmp(a, "--seed") == 0 || strcmp(a, "--device") == 0 || strcmp(a, "--groups") == 0;
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
            if (kiln_tune_parse_ops(argv[++i], &o.ops) != 0)
                return bad("--ops \"%s\": a comma-separated list of gemm, conv, attention", argv[i]);
        } else if (strcmp(a, "--out") == 0) {
            o.out = argv[++i];
            if (!*o.out)
                return bad("--out: empty directory%s", "");
        } else if (strcmp(a, "--device") == 0) {
            o.device = argv[++i];
        } else if (strcmp(a, "--groups") == 0) {
            o.groups = argv[++i];
            if (kiln_tune_check_groups(o.groups) != KILN_SUCCESS) { /* the detail cuts the group's name */
                fprintf(stderr, "kiln-tune: --%s\n", kiln_last_error_detail());
                return 2;
            }
        } else if (strcmp(a, "--resume") == 0) {
            o.resume = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else {
            bad("bad argument \"%s\"", a);
            fputs(usage, stderr);
            return 2;
        }
    }
    /* On a terminal a progress bar on stderr; elsewhere a plain line per
       trial on stdout (unless --json). */
    const int bar = isatty(STDERR_FILENO);
    o.log = json || bar ? NULL : stdout;
    o.progress = bar ? progress_bar : NULL;
    struct kiln_tune_result r;
    kiln_status st = kiln_tune(&o, &r);
    if (bar)
        fputs("\n", stderr);
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
