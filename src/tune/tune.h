/*
 * The tuner's search for GEMM (kiln-tune is a thin command line over it).
 *
 * Each representative shape is planned on the matched profile; the kernel
 * group its plan takes (gemm.cpu, gemm.smallm, gemm.direct, gemm.tiled) is
 * tuned over the shapes that use it. Per group: the seed (the matched
 * profile's values), its neighbours, then a seeded random sample and the
 * neighbours of the best few, in turn, until the group's share of the
 * budget is spent (the seed-and-refine scheme of CLBlast's and MIOpen's
 * tuners: local steps find the nearby gains cheaply, random draws keep the
 * search from staying in one corner of the space). Every candidate passes
 * kiln_space_check before anything is compiled, and is then tried by
 * kiln_trial_gemm on each of its group's shapes; a candidate rejected on one
 * shape is never chosen. A candidate scores the geometric mean over its
 * shapes of seed_ms / candidate_ms, so no shape wins at the others' expense.
 *
 * Every trial is one JSON line of <out>/kiln-tune-journal.jsonl; a resumed
 * run takes the trials found there instead of running them again.
 */
#ifndef KILN_TUNE_TUNE_H
#define KILN_TUNE_TUNE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/kiln.h"

#define KILN_TUNE_JOURNAL "kiln-tune-journal.jsonl"
#define KILN_TUNE_SHAPES_MAX 8

struct kiln_tune_shape {
    const char *name; /* "512x512x512" */
    kiln_gemm_desc desc;
};

struct kiln_tune_options {
    double budget_s;                      /* wall-clock seconds for the whole search */
    const char *out;                      /* profile and journal directory; NULL: kiln_profile_user_dir() */
    int resume;                           /* take the trials of an existing journal */
    uint64_t seed;                        /* of the random sample */
    const char *device;                   /* kiln_context_options.device (NULL: the default) */
    const struct kiln_tune_shape *shapes; /* NULL: kiln_tune_gemm_shapes() */
    size_t shape_count;
    /* The least gain over the seed for a profile to be written: 0.03, since
       differences of a few percent are run-to-run noise on a CPU. Tests set
       it below -1 to write whatever the search found best. */
    double min_gain;
    int measure_peaks; /* measure and write device.peak_gflops and peak_gbps */
    FILE *log;         /* a plain line per trial; NULL: quiet */
};

/* Fill `o` with the defaults: 600 s, the user's profile directory, seed 1,
   the representative shapes, min_gain 0.03, peaks measured, quiet. */
void kiln_tune_options_init(struct kiln_tune_options *o);

/* The representative GEMM shapes: square, skinny, tall-K and batched, sized
   for a few CPU cores. */
const struct kiln_tune_shape *kiln_tune_gemm_shapes(size_t *count);

struct kiln_tune_shape_result {
    char name[48];
    char group[48];             /* the kernel group its plan takes; "<group>:<set>" when it takes a shape class's own
                                   set, not tuned yet (before_ms and after_ms stay 0) */
    double gflop;               /* per run */
    double before_ms, after_ms; /* the seed's; the chosen candidate's (the seed's if none) */
};

struct kiln_tune_result {
    struct kiln_tune_shape_result shapes[KILN_TUNE_SHAPES_MAX];
    size_t shape_count;
    size_t trials;                 /* candidates tried, from the journal included */
    size_t journaled;              /* of them, taken from the journal */
    size_t refused;                /* refused by kiln_space_check before any compile */
    size_t rejected;               /* did not build, were wrong or failed to run */
    size_t timed;                  /* timed on every shape of their group */
    char matched[64];              /* the matched profile */
    char profile[80];              /* the profile written ("" if none) */
    char path[4200];               /* its file */
    char changes[512];             /* the overlay of what changed ("" if nothing) */
    double peak_gflops, peak_gbps; /* measured (0 if not) */
};

/* Run the search and write the tuned profile. IO, before any trial, when
   the output directory or its journal cannot be written; the statuses of
   opening the device and of the trials' set-up; KILN_SUCCESS otherwise,
   with or without a profile written (r->profile says). */
kiln_status kiln_tune_gemm(const struct kiln_tune_options *o, struct kiln_tune_result *r);

#endif /* KILN_TUNE_TUNE_H */
