/* kiln-bench: shared helpers of the benchmark subcommands. */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "kiln/kiln.h"
#include "peers.h"

/* Monotonic time in milliseconds. */
double bench_now_ms(void);

/* Median of n values (sorts them in place). */
double bench_median(double *values, size_t n);

/* Bounds of the timed repetitions of bench_measure(). */
enum { BENCH_MIN_REPS = 5, BENCH_MAX_REPS = 1000 };

struct bench_timing {
    double median_ms; /* median of the timed runs */
    int reps;         /* how many were timed */
};

/*
 * Run fn(arg) `warmup` times untimed, then time each run: exactly `reps`
 * runs, or with reps == 0 until at least BENCH_MIN_REPS runs and budget_ms
 * have passed (never more than BENCH_MAX_REPS). fn returns 0 on success;
 * its first non-zero return stops the measurement and is returned.
 */
int bench_measure(int (*fn)(void *arg), void *arg, int warmup, int reps, double budget_ms, struct bench_timing *out);

/* Open the default device (KILN_DEVICE selects another) and describe it;
   on failure prints why, prefixed with "kiln-bench <command>", and returns 1. */
int bench_open_context(const char *command, kiln_context **ctx, kiln_device_info *device);

/* ---- GEMM: shared by kiln-bench gemm and kiln-bench quick ---- */

/* How one GEMM case is measured. */
struct bench_gemm_options {
    int warmup;                      /* untimed runs first (>= 1: first calls compile) */
    int reps;                        /* kiln's timed runs; 0: by budget_ms */
    int peer_reps[BENCH_PEER_COUNT]; /* each peer's; 0: by budget_ms */
    double budget_ms;                /* time to spend per library when reps are 0 */
    unsigned peers;                  /* peers to measure: bits 1u << enum bench_peer */
};

enum bench_state { BENCH_NOT_REQUESTED = 0, BENCH_NOT_BUILT, BENCH_FAILED, BENCH_MEASURED };

/* One library's measurement of one GEMM. */
struct bench_gemm_result {
    enum bench_state state;
    char algo[64];   /* what ran: kiln's family, or the peer's routine */
    char error[256]; /* why it failed (BENCH_FAILED) */
    double median_ms, gflops, max_rel_err;
    int reps;
};

struct bench_gemm_report {
    kiln_gemm_desc desc;
    kiln_gemm_plan_info plan;  /* what kiln chose */
    double compile_ms;         /* kiln_gemm_plan_create(), not in the medians */
    unsigned long long builds; /* programs compiled from source by the plan */
    struct bench_gemm_result kiln, peers[BENCH_PEER_COUNT];
};

/* kiln_gemm_desc_init() for a batch of `batch` tightly packed problems. */
void bench_gemm_desc(kiln_gemm_desc *desc, kiln_layout layout, kiln_transpose trans_a, kiln_transpose trans_b, size_t m,
                     size_t n, size_t k, size_t batch);

/*
 * Measure `desc` (alpha 1, beta 0) on kiln and the requested peers, on the
 * same random data in one run, and check each output against a
 * double-precision reference on sampled entries. Returns 0 when kiln was
 * measured (a peer's failure is recorded in its result), 1 otherwise with
 * report->kiln.error set.
 */
int bench_gemm_run(kiln_context *ctx, const kiln_gemm_desc *desc, const struct bench_gemm_options *opt,
                   struct bench_gemm_report *report);

/* Largest error of sampled entries of C (fp32 values) against a double
   reference, each relative to sum |a||b| of its dot product. NaN if any
   sampled entry is NaN. */
double bench_gemm_max_rel_err(const kiln_gemm_desc *desc, const float *a, const float *b, const float *c);

/* "2048x2048x2048", with ",batch=64", ",trans_a", ",trans_b" as they apply. */
void bench_gemm_shape(const kiln_gemm_desc *desc, char *buf, size_t size);

/* The report as one line of JSON. */
void bench_gemm_print_json(FILE *out, const kiln_device_info *device, const struct bench_gemm_report *report);

/* Warn on stderr when an error exceeds what the storage type explains. */
void bench_gemm_check_errors(const struct bench_gemm_report *report);

/* Subcommands: argc/argv start at the subcommand's own arguments. */
int bench_jit(int argc, char **argv);
int bench_gemm(int argc, char **argv);
int bench_quick(int argc, char **argv);

#endif /* KILN_BENCH_H */
