/* What the trials of every operator share (trial.c, trial_conv.c,
   trial_attention.c): random numbers, the rejection of a candidate, what
   its plan chose and its timing. */
#ifndef KILN_TUNE_TRIAL_IMPL_H
#define KILN_TUNE_TRIAL_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"
#include "ops/find.h"
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

/* What the plan chose, from its describe call. */
static inline void kiln_trial_chose(struct kiln_trial *t, const char *kernel, const char *params, const char *param_set)
{
    snprintf(t->kernel, sizeof t->kernel, "%s", kernel);
    snprintf(t->params, sizeof t->params, "%s", params);
    snprintf(t->param_set, sizeof t->param_set, "%s", param_set);
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
