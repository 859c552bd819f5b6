/* kiln-bench: shared helpers of the benchmark subcommands. */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"
#include "peers.h"

/* ---- Timing (bench_common.c) ---- */

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

/* Longest wait of bench_quiesce() in bench_measure(). */
enum { BENCH_QUIESCE_MS = 2000 };

/*
 * Wait until no other thread of the process runs, at most limit_ms; returns
 * the milliseconds waited. A peer's thread pool keeps spinning for a while
 * after its call returns (OpenMP's and OpenBLAS's wait policies, tens of
 * milliseconds), and a library timed then shares its cores with it.
 */
double bench_quiesce(double limit_ms);

/*
 * Run fn(arg) `warmup` times untimed, then time each run: exactly `reps`
 * runs, or with reps == 0 until at least BENCH_MIN_REPS runs and budget_ms
 * have passed (never more than BENCH_MAX_REPS). fn returns 0 on success;
 * its first non-zero return stops the measurement and is returned. It
 * starts with bench_quiesce(BENCH_QUIESCE_MS): every library is timed on
 * cores that no other library's threads are spinning on.
 */
int bench_measure(int (*fn)(void *arg), void *arg, int warmup, int reps, double budget_ms, struct bench_timing *out);

/* Open the default device (KILN_DEVICE selects another) and describe it;
   on failure prints why, prefixed with "kiln-bench <command>", and returns 1. */
int bench_open_context(const char *command, kiln_context **ctx, kiln_device_info *device);

/* The device's memory bandwidth in GB/s (the faster of a copy, bytes read
   plus written, and a read, src/tune/peaks.c), measured once per device and
   remembered in the program cache directory (memory-<device>.txt), or, with
   `fresh`, measured now whatever is remembered (and remembered in its
   place); `source` receives "measured", "measured in this run" (fresh),
   "remembered" or why there is none (then 0 is returned). */
double bench_device_gbps(kiln_context *ctx, const kiln_device_info *device, int fresh, char *source, size_t size);

/* Remember gbps as the device's bandwidth (what `kiln-bench peak` measured),
   in place of any figure remembered before. 1 if written, 0 without a disk
   cache or on a write error. */
int bench_remember_gbps(kiln_context *ctx, const kiln_device_info *device, double gbps);

/* The launch floor: the median microseconds of a kiln call that does no work
   to speak of (a fill of one float) and a wait for it, timed as
   bench_measure() times calls; 0 where it could not be measured. Every
   waited call pays about this much beside its kernels (docs/pocl.md). */
double bench_launch_floor_us(kiln_context *ctx);

/* ---- Operands (bench_common.c) ---- */

/* The next number of a splitmix64 sequence. */
uint64_t bench_random_next(uint64_t *state);

/* The storage types' names on the command line and in JSON ("f32", "f16",
   "bf16"), and parsing one (non-zero for anything else). */
const char *bench_dtype_name(kiln_dtype dtype);
int bench_parse_dtype(const char *v, kiln_dtype *out);

/* n values uniform in [-1, 1), rounded to the nearest value of a 16-bit
   dtype (so that its storage holds them exactly). */
void bench_fill_random(float *x, size_t n, kiln_dtype dtype, uint64_t *rng);

/* A buffer for n elements of `dtype`, rounded up to whole floats so that
   bench_poison() can fill all of it; written from src unless NULL. `halves`
   (n elements) stages 16-bit storage; NULL for fp32. */
kiln_status bench_upload(kiln_context *ctx, const float *src, size_t n, kiln_dtype dtype, uint16_t *halves,
                         kiln_buffer **out);

/* Write n values of src into buf as `dtype` (halves as for bench_upload). */
kiln_status bench_write(kiln_buffer *buf, const float *src, size_t n, kiln_dtype dtype, uint16_t *halves);

/* Read n elements of `dtype` from buf into dst as floats. */
kiln_status bench_download(const kiln_buffer *buf, size_t n, kiln_dtype dtype, uint16_t *halves, float *dst);

/* NaN in every element, so an entry a kernel never writes shows as an error.
   For 16-bit storage the float filled in has the bytes of two 16-bit NaNs. */
kiln_status bench_poison(kiln_buffer *buf, kiln_dtype dtype);

/* ---- Results and their output (bench_common.c) ---- */

enum bench_state { BENCH_NOT_REQUESTED = 0, BENCH_NOT_BUILT, BENCH_NOT_APPLICABLE, BENCH_FAILED, BENCH_MEASURED };

/* One library's measurement of one operation. */
struct bench_result {
    enum bench_state state;
    char algo[64];   /* what ran: kiln's algorithm, or the peer's routine */
    char error[256]; /* why it failed (BENCH_FAILED) or does not apply */
    double median_ms, gflops, max_rel_err;
    int reps;
    int has_workspace;      /* workspace_bytes is known (and written to JSON) */
    size_t workspace_bytes; /* memory the library used beyond the operands */
};

/* With st != KILN_SUCCESS: mark r failed with "what: status: detail" and
   return 1. Otherwise return 0. */
int bench_fail(kiln_status st, struct bench_result *r, const char *what);

/* n fp32 values in a host array and a device buffer: random (advancing rng)
   or, with rng NULL, unset. Returns 0, or 1 with r failed (its error naming
   `what`). */
int bench_operand(kiln_context *ctx, size_t n, uint64_t *rng, float **host, kiln_buffer **dev, struct bench_result *r,
                  const char *what);

/* A JSON string literal of s. */
void bench_json_string(FILE *out, const char *s);

/* ,"key":v -- JSON has no NaN or infinity: a non-finite v is written as null. */
void bench_json_number(FILE *out, const char *key, double v);

/* A peer's result as a JSON object; `threads` is written when positive. */
void bench_json_result(FILE *out, const struct bench_result *r, int threads);

/* One table row: library, algorithm, median ms, GFLOP/s, kiln's GFLOP/s
   over this one's, max relative error and reps; or why there is none. */
void bench_print_result_row(const char *library, const struct bench_result *r, const struct bench_result *kiln);

/* Header matching bench_print_result_row(). */
void bench_print_result_header(void);

/* ---- Command lines (bench_common.c) ---- */

/* A positive decimal size up to 2^31; 0 on success, -1 otherwise. */
int bench_parse_size(const char *s, size_t *out);

/* A decimal integer in [min, max]; 0 on success, -1 otherwise. */
int bench_parse_int(const char *s, long min, long max, int *out);

/* Elements one array of a problem may hold: 2^36 floats, 256 GiB, past
   any host kiln-bench runs on (computed in double, so the sizes of the
   command line cannot overflow). */
#define BENCH_MAX_ELEMENTS (1ull << 36)

/* 0 when an array of `elements` fits BENCH_MAX_ELEMENTS, else -1 with a
   message naming `what`, prefixed "kiln-bench <command>". */
int bench_check_elements(const char *command, const char *what, double elements);

/* Read the value of option argv[*i] into *value (advancing *i); 0 on success,
   -1 with a message prefixed "kiln-bench <command>" when it is missing. */
int bench_option_value(const char *command, int argc, char **argv, int *i, const char **value);

/* ---- GEMM: shared by kiln-bench gemm and kiln-bench quick ---- */

/* How one GEMM case is measured. */
struct bench_gemm_options {
    int warmup;                      /* untimed runs first (>= 1: first calls compile) */
    int reps;                        /* kiln's timed runs; 0: by budget_ms */
    int peer_reps[BENCH_PEER_COUNT]; /* each peer's; 0: by budget_ms */
    double budget_ms;                /* time to spend per library when reps are 0 */
    unsigned peers;                  /* peers to measure: bits 1u << enum bench_peer */
};

struct bench_gemm_report {
    kiln_gemm_desc desc;
    kiln_gemm_plan_info plan;  /* what kiln chose */
    double compile_ms;         /* kiln_gemm_plan_create(), not in the medians */
    unsigned long long builds; /* programs compiled from source by the plan */
    struct bench_result kiln, peers[BENCH_PEER_COUNT];
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

/* ---- Convolution: shared by kiln-bench conv and its --model mode ---- */

/* How one convolution case is measured. */
struct bench_conv_options {
    int warmup;                         /* untimed runs first (>= 1: first calls compile) */
    int reps;                           /* kiln's timed runs; 0: by budget_ms */
    int peer_reps[BENCH_NN_PEER_COUNT]; /* each peer's; 0: by budget_ms */
    double budget_ms;                   /* time to spend per library when reps are 0 */
    unsigned peers;                     /* bits 1u << enum bench_nn_peer */
    int in_place;                       /* the residual read from y itself (z is y), as oneDNN's sum post-op */
};

struct bench_conv_report {
    kiln_conv2d_desc desc;      /* desc.algo: the algorithm requested */
    kiln_conv2d_plan_info plan; /* what kiln chose (when its plan was created) */
    double compile_ms;          /* kiln_conv2d_plan_create(), not in the medians */
    unsigned long long builds;  /* programs compiled from source by the plan */
    struct bench_result kiln, peers[BENCH_NN_PEER_COUNT];
};

/* Direct-convolution flops: 2 N K P Q (C/G) R S. */
double bench_conv_flops(const kiln_conv2d_desc *desc);

/*
 * Measure `desc` with each of `count` algorithms (reports[i] for algos[i])
 * and the requested peers once (their results copied into every report),
 * all on the same random data in one run, each output checked against a
 * double-precision reference on sampled entries. An algorithm kiln reports
 * UNSUPPORTED for the shape is BENCH_NOT_APPLICABLE. Returns the number of
 * algorithms that neither ran nor were unsupported.
 */
int bench_conv_run(kiln_context *ctx, const kiln_conv2d_desc *desc, const kiln_conv_algo *algos, size_t count,
                   const struct bench_conv_options *opt, struct bench_conv_report *reports);

/* "1x128x56x56,k128,3x3", then ",stride=2", ",pad=1" (or ",pad=t,b,l,r"),
   ",dilation=2", ",groups=32" as they apply. */
void bench_conv_shape(const kiln_conv2d_desc *desc, char *buf, size_t size);

/* The report as one line of JSON; `extra` (NULL or JSON members ending in a
   comma) is written right after "op". */
void bench_conv_print_json(FILE *out, const kiln_device_info *device, const struct bench_conv_report *report,
                           const char *extra);

/* Warn on stderr when an error exceeds what fp32 explains. */
void bench_conv_check_errors(const struct bench_conv_report *report);

/* Prepare `op` on `peer` (not timed), time it as bench_measure() does and,
   when `output` is non-zero, leave its result where bench_nn_peer_output()
   does. Fills r: BENCH_MEASURED with routine, median_ms and reps, or why not.
   Returns 0 when measured. */
int bench_nn_peer_time(enum bench_nn_peer peer, const struct bench_nn_op *op, int warmup, int reps, double budget_ms,
                       int output, struct bench_result *r);

/* "implicit-gemm", ... for an algorithm; "auto" for KILN_CONV_AUTO. */
const char *bench_conv_algo_name(kiln_conv_algo algo);

/* ---- Subcommands: argc/argv start at the subcommand's own arguments ---- */

int bench_jit(int argc, char **argv);
int bench_gemm(int argc, char **argv);
int bench_quick(int argc, char **argv);
int bench_conv(int argc, char **argv);
int bench_attention(int argc, char **argv);
int bench_peak(int argc, char **argv);

/* kiln-bench conv --model NAME ... (bench_models.c); argv holds every
   argument of kiln-bench conv. */
int bench_conv_models(int argc, char **argv);

#endif /* KILN_BENCH_H */
