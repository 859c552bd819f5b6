/* What the trials of every operator share (trial.c, trial_conv.c,
   trial_attention.c): random numbers, the operands, the rejection of a
   candidate and the run, check and timing of one that was planned. */
#ifndef KILN_TUNE_TRIAL_IMPL_H
#define KILN_TUNE_TRIAL_IMPL_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/diag.h"
#include "kiln/kiln.h"
#include "ops/find.h"
#include "ref/storage.h"
#include "tune/trial.h"

/* splitmix64: the next of the sequence `*state` walks. */
static inline uint64_t kiln_trial_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A uniform value in [-1, 1). */
static inline float kiln_trial_uniform(uint64_t *state)
{
    return (float)((double)(kiln_trial_next(state) >> 11) * 0x1p-52 - 1.0);
}

/* Record a rejection: verdict, the failing call's status and the detail
   it left, after `what` ("plan", "run", "timed run"). */
static inline void kiln_trial_reject(struct kiln_trial *t, enum kiln_trial_verdict v, kiln_status st, const char *what)
{
    t->verdict = v;
    t->status = st;
    snprintf(t->reason, sizeof t->reason, "%s: %s: %s", what, kiln_status_string(st), kiln_last_error_detail());
}

/* Reject a candidate as WRONG, the reason formatted as printf does. */
static inline void kiln_trial_wrong(struct kiln_trial *t, const char *fmt, ...) KILN_PRINTF(2, 3);
static inline void kiln_trial_wrong(struct kiln_trial *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    t->verdict = KILN_TRIAL_WRONG;
    vsnprintf(t->reason, sizeof t->reason, fmt, ap);
    va_end(ap);
}

/* Whether a checked element `got` is within `bound` of the reference `ref`:
   if so |got - ref| / bound goes into t->worst; if not (NaN never is) the
   candidate is WRONG, its reason naming the element as printf formats
   `fmt`. */
static inline int kiln_trial_close(struct kiln_trial *t, double got, double ref, double bound, const char *fmt, ...)
    KILN_PRINTF(5, 6);
static inline int kiln_trial_close(struct kiln_trial *t, double got, double ref, double bound, const char *fmt, ...)
{
    const double ratio = fabs(got - ref) / bound;
    if (ratio <= 1.0) {
        t->worst = fmax(t->worst, ratio);
        return 1;
    }
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    kiln_trial_wrong(t, "%s is %.9g, the reference %.9g (bound %.3g)", what, got, ref, bound);
    return 0;
}

/* What the plan chose, from its describe call's kernel, params and
   param_set. */
static inline void kiln_trial_describe(struct kiln_trial *t, const char *kernel, const char *params,
                                       const char *param_set)
{
    snprintf(t->kernel, sizeof t->kernel, "%s", kernel);
    snprintf(t->params, sizeof t->params, "%s", params);
    snprintf(t->param_set, sizeof t->param_set, "%s", param_set);
}

/* Copy `count` values between `host` (fp32) and `buf` (elements of storage
   type t): to the buffer when `to_buffer`, else back. A 16-bit type goes
   through a staging array (OUT_OF_MEMORY when it cannot be had). */
static inline kiln_status kiln_trial_transfer(kiln_buffer *buf, kiln_dtype t, float *host, size_t count, int to_buffer)
{
    if (t == KILN_F32)
        return to_buffer ? kiln_buffer_write(buf, 0, count * sizeof(float), host)
                         : kiln_buffer_read(buf, 0, count * sizeof(float), host);
    uint16_t *bits = malloc(count * sizeof *bits);
    if (!bits)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: staging %zu 16-bit values", count);
    kiln_status st = KILN_SUCCESS;
    if (to_buffer) {
        for (size_t i = 0; i < count; i++)
            bits[i] = kiln_ref_to_16(t, host[i]);
        st = kiln_buffer_write(buf, 0, count * sizeof *bits, bits);
    } else {
        st = kiln_buffer_read(buf, 0, count * sizeof *bits, bits);
        for (size_t i = 0; st == KILN_SUCCESS && i < count; i++)
            host[i] = kiln_ref_from_16(t, bits[i]);
    }
    free(bits);
    return st;
}

/* f as storage type t holds it (rounded to fp16 or bf16; fp32 as it is). */
static inline float kiln_trial_stored(kiln_dtype t, float f)
{
    return t == KILN_F32 ? f : kiln_ref_from_16(t, kiln_ref_to_16(t, f));
}

/* `count` values of storage type t in *host (as floats) and in a new buffer
   *buf of `ctx`: uniform in [-1, 1) drawn from *rng and rounded to t, or NaN
   for an output (poisoned before it runs). OUT_OF_MEMORY, naming `what`,
   when the host memory cannot be had; the buffer's own status when it
   cannot be made or written. */
static inline kiln_status kiln_trial_operand(kiln_context *ctx, const char *what, size_t count, int output,
                                             kiln_dtype t, uint64_t *rng, float **host, kiln_buffer **buf)
{
    *host = count && count <= SIZE_MAX / sizeof(float) ? malloc(count * sizeof(float)) : NULL;
    if (!*host)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: %zu elements", what, count);
    for (size_t i = 0; i < count; i++)
        (*host)[i] = output ? NAN : kiln_trial_stored(t, kiln_trial_uniform(rng));
    kiln_status st = kiln_buffer_create(ctx, count * (t == KILN_F32 ? sizeof(float) : sizeof(uint16_t)), buf);
    if (st == KILN_SUCCESS)
        st = kiln_trial_transfer(*buf, t, *host, count, 1);
    return st;
}

/* A planned candidate's verdict: run(cookie) once, read the `count` values
   of its output `y` (of storage type `yt`) back into `host` as floats,
   check(cookie, t) them, and if right time `reps` runs cut short past
   cutoff_ms (kiln_time_runs). */
static inline void kiln_trial_check_and_time(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie,
                                             kiln_buffer *y, kiln_dtype yt, float *host, size_t count,
                                             void (*check)(void *cookie, struct kiln_trial *t), int reps,
                                             double cutoff_ms, struct kiln_trial *t)
{
    kiln_status st = run(cookie);
    if (st == KILN_SUCCESS)
        st = kiln_trial_transfer(y, yt, host, count, 0);
    if (st != KILN_SUCCESS) {
        kiln_trial_reject(t, KILN_TRIAL_RUN_FAILED, st, "run");
        return;
    }
    check(cookie, t);
    if (t->verdict != KILN_TRIAL_TIMED)
        return;
    st = kiln_time_runs(ctx, run, cookie, reps, cutoff_ms, &t->ms, &t->runs);
    if (st != KILN_SUCCESS)
        kiln_trial_reject(t, KILN_TRIAL_RUN_FAILED, st, "timed run");
}

/* Unless the candidate was rejected, `reps` timed runs of run(cookie) cut
   short past cutoff_ms (kiln_time_runs) into t->ms and t->runs. */
static inline void kiln_trial_time(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie, int reps,
                                   double cutoff_ms, struct kiln_trial *t)
{
    if (t->verdict != KILN_TRIAL_TIMED)
        return;
    kiln_status timed = kiln_time_runs(ctx, run, cookie, reps, cutoff_ms, &t->ms, &t->runs);
    if (timed != KILN_SUCCESS)
        kiln_trial_reject(t, KILN_TRIAL_RUN_FAILED, timed, "timed run");
}

#endif /* KILN_TUNE_TRIAL_IMPL_H */
