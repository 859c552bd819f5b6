/*
 * Benchmark mode ("find") for any operator: time every candidate of a
 * problem once, keep the fastest in the context and in a find database on
 * disk (entries of the program cache's directory, written atomically), so
 * neither this context nor a later process searches that problem again.
 * The operator makes the key: it must name the device and driver, what the
 * choice depends on (kiln_find_code_hash) and the problem, so that a change
 * to any of them makes a new search.
 */
#ifndef KILN_OPS_FIND_H
#define KILN_OPS_FIND_H

#include <stddef.h>
#include <stdint.h>

#include "core/context.h"

struct kiln_find_candidates {
    const char *const *names; /* as remembered in the database */
    size_t count;
    /* Whether candidate i applies to the problem (a remembered choice that
       no longer does is searched again). */
    int (*applies)(void *cookie, size_t i);
    /* Time candidate i into *ms; UNSUPPORTED (or any error with the plan)
       when it cannot be built here: not a candidate then. Other failures of
       the timing itself end the search. */
    kiln_status (*time)(void *cookie, size_t i, double *ms, int *built);
    void *cookie;
};

/* The remembered or fastest candidate for `key` into *pick; `reason` says
   which ("find: remembered by this context", "find: fastest of ..."). */
kiln_status kiln_find(kiln_context *ctx, const char *key, const struct kiln_find_candidates *c, size_t *pick,
                      char *reason, size_t reason_size);

/* The median time of KILN_FIND_REPS runs of run(cookie), after one that
   builds and warms up, each timed on the device where the backend can (the
   summed execution time of its kernels), else by the host's clock until the
   queue is finished. */
#define KILN_FIND_REPS 3
kiln_status kiln_find_median(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie, double *ms);

/* The same with `reps` timed runs (1 to KILN_TIME_MAX_RUNS), and more until
   the runs add up to KILN_TIME_MIN_MS (KILN_TIME_MAX_RUNS at most): the median of three runs of a 0.01 ms
   layer is one outlier away from a wrong choice. Cut short once a run takes
   longer than cutoff_ms (0: never): a candidate clearly slower than the best
   so far costs one run, not all. *runs (if not NULL) receives the number of
   timed runs made; the median is of those. */
#define KILN_TIME_MIN_MS 1.0
#define KILN_TIME_MAX_RUNS 64
kiln_status kiln_time_runs(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie, int reps,
                           double cutoff_ms, double *ms, int *runs);

/* A hash of what a choice depends on besides the problem and the device:
   the backend's kernel sources and the context's profile parameters. */
uint64_t kiln_find_code_hash(const kiln_context *ctx);

#endif /* KILN_OPS_FIND_H */
