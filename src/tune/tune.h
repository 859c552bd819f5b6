/*
 * The search of kiln-tune (kiln-tune is a thin command line over it).
 *
 * Each representative shape (GEMM, convolution layers of the networks
 * kiln-bench --model has, attention prefill and decode) is planned on the
 * matched profile; the kernel group its plan takes (gemm.cpu, gemm.tiled,
 * conv.direct, conv.winograd, attention.fused, ...) is tuned over every
 * shape that takes it, whatever the operation: the CPU register tile of
 * gemm.cpu is scored on the GEMMs and on the convolutions that run on it.
 *
 * The CUDA backend's kernel families (kiln_tune_families: the tensor-core
 * GEMMs gemm.mma and, on Hopper, gemm.wgmma; tensor-core attention
 * attention.mma; the CUDA decoding kernel's attention.decode; the
 * tensor-core convolution conv.mma) run fp16 or bf16 storage, NHWC, or
 * the CUDA backend alone, which those shapes mostly do not take: where the
 * context runs a family and its operation is tuned, shapes of its own are
 * added (a shape of the same name already there is not added twice),
 * forced to it where AUTO might take another (AUTO takes wgmma over mma
 * where both run); a family the context does not run is reported as
 * skipped, with the reason.
 *
 * Per group: the seed (the matched profile's values), its neighbours, then
 * a seeded random sample and the neighbours of the best few, in turn, until
 * the group's share of the budget is spent (the seed-and-refine scheme of
 * CLBlast's and MIOpen's tuners: local steps find the nearby gains cheaply,
 * random draws keep the search from staying in one corner of the space).
 * Every candidate passes kiln_space_check before anything is compiled, and
 * is then tried (trial.h) on each of its group's shapes; a candidate
 * rejected on one shape is never chosen. A candidate scores the geometric
 * mean over its shapes of seed_ms / candidate_ms, so no shape wins at the
 * others' expense.
 *
 * Classes of shapes: where one part of a group's shapes is faster with
 * other parameters than the rest by more than KILN_TUNE_CLASS_GAIN, the
 * group gets a class of its own for that part. Its boundary is chosen from
 * the measurements: the split of the shapes along one of the group's
 * dimensions that scores best, placed at the geometric mean of the two
 * shapes nearest to it on either side.
 *
 * Thresholds between algorithms (select.gemm_smallm_max, gemm_direct_max,
 * conv_wino_min_channels, conv_1x1_igemm_min_pixels) are found by timing
 * both algorithms on a ladder of sizes, with the kernels just tuned: each
 * becomes the last size of the ladder at which the small-problem side still
 * wins (or, for a minimum, the first from which the large side wins on).
 * So is one between two ways of a kernel, gemm.cpu.in_place_l2: the CPU
 * family's flipped product reading B in place against packing it first, on
 * 1x1 convolutions whose B spans more and more of the L2.
 *
 * At the end every shape is timed with the plans AUTO makes before and
 * after (the before/after table), the device's peaks are measured, and the
 * changes are written as a child of the matched profile.
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
#include "kiln/kiln_attention.h"
#include "kiln/kiln_nn.h"
#include "profiles/params.h"

#define KILN_TUNE_JOURNAL "kiln-tune-journal.jsonl"
#define KILN_TUNE_SHAPES_MAX 32
#define KILN_TUNE_THRESHOLDS_MAX 8

/* The gain past which a part of a group's shapes gets parameters of its
   own: a class costs a second set of kernels to compile. */
#define KILN_TUNE_CLASS_GAIN 0.05

enum kiln_tune_op { KILN_TUNE_GEMM, KILN_TUNE_CONV, KILN_TUNE_ATTENTION, KILN_TUNE_OP_COUNT };
#define KILN_TUNE_OPS_ALL ((1u << KILN_TUNE_OP_COUNT) - 1)

/* One problem the search scores candidates on: the descriptor of `op`. */
struct kiln_tune_shape {
    const char *name; /* "gemm 512x512x512", unique */
    enum kiln_tune_op op;
    kiln_gemm_desc gemm;
    kiln_conv2d_desc conv;
    kiln_attention_desc attention;
};

/* What the search is at, for a progress display. */
struct kiln_tune_progress {
    double elapsed_s, budget_s;
    const char *stage; /* the group or threshold being searched */
    size_t trials, rejected;
};

struct kiln_tune_options {
    double budget_s;                      /* wall-clock seconds for the whole run */
    const char *out;                      /* profile and journal directory; NULL: kiln_profile_user_dir() */
    int resume;                           /* take the trials of an existing journal */
    uint64_t seed;                        /* of the random sample */
    const char *device;                   /* kiln_context_options.device (NULL: the default) */
    unsigned ops;                         /* 1 << KILN_TUNE_*: whose representative shapes are taken */
    const struct kiln_tune_shape *shapes; /* NULL: kiln_tune_shapes(ops) for the device's type */
    size_t shape_count;
    int thresholds; /* search the select thresholds of the operations in ops */
    /* The least gain over the seed for a group's change to be kept: 0.03,
       since differences of a few percent are run-to-run noise on a CPU.
       Tests set it below -1 to keep whatever the search found best. */
    double min_gain;
    /* The most a kept change may slow one of its group's shapes in the
       before/after table before it is refuted and left out
       (KILN_TUNE_REGRESSION_MAX). Tests that force a write set it huge. */
    double max_loss;
    /* The most the select thresholds' change may slow the shapes it moves
       to another kernel, their times summed, before it is refuted
       (KILN_TUNE_SELECT_LOSS_MAX). Tests that force a write set it huge. */
    double select_max_loss;
    /* Kernel groups to search, comma-separated ("gemm.wgmma"); NULL: every
       group the shapes' plans take. With a list, only the shapes whose
       plans take a listed group are run (every shape where it names
       "select", for the before/after table), and the thresholds are
       searched only if it names "select". */
    const char *groups;
    int measure_peaks; /* measure and write device.peak_gflops and peak_gbps */
    FILE *log;         /* a plain line per trial; NULL: quiet */
    void (*progress)(void *user, const struct kiln_tune_progress *p); /* after each trial; NULL: none */
    void *progress_user;
};

/* Fill `o` with the defaults: 600 s, the user's profile directory, seed 1,
   every operation, thresholds searched, min_gain 0.03, max_loss
   KILN_TUNE_REGRESSION_MAX, select_max_loss KILN_TUNE_SELECT_LOSS_MAX,
   peaks measured, quiet. */
void kiln_tune_options_init(struct kiln_tune_options *o);

/* The representative shapes of the operations in `ops`: GEMM square,
   skinny, tall-K and batched; convolution layers of MobileNet v1 and
   ResNet-50 at batch 1; attention prefill at head dimensions 64 and 128
   and a decode step. Sized for a few CPU cores, or (gpu non-zero) for a
   GPU. */
const struct kiln_tune_shape *kiln_tune_shapes(unsigned ops, int gpu, size_t *count);

/* "gemm,conv,attention" (any of them, comma-separated) as ops bits; -1 for
   an unknown name or an empty list. */
int kiln_tune_parse_ops(const char *list, unsigned *ops);

/* KILN_SUCCESS if every name of the comma-separated `list` is a kernel
   group (space.h: kiln_space_kernel_group) or "select"; else
   INVALID_ARGUMENT naming the first that is not. */
kiln_status kiln_tune_check_groups(const char *list);

/* The families of the CUDA backend's kernels, in this order: gemm.mma,
   gemm.wgmma, attention.mma, attention.decode, conv.mma. */
#define KILN_TUNE_FAMILIES 5
/* The most shapes of a family's own, sized for the GPUs it runs on. */
#define KILN_TUNE_FAMILY_SHAPES_MAX 4

struct kiln_tune_family {
    enum kiln_group_id group; /* KILN_GROUP_gemm_mma, ... */
    enum kiln_tune_op op;     /* the operation of its shapes: it is searched where that one is tuned */
    int algo;                 /* what forces a plan onto it: a kiln_gemm_algo, kiln_attention_algo or
                                 kiln_conv_algo (AUTO where the storage type and shape choose it) */
    int runs;                 /* the context runs it in fp16 storage */
    int bf16;                 /* ... and in bf16 */
    char why_not[256];        /* when it does not run: why ("" when it does) */
};

/* Which families `ctx` runs (kiln_gemm_mma_runs_on, kiln_gemm_wgmma_runs_on,
   kiln_attention_mma_runs_on, kiln_attention_decode_cuda_runs_on,
   kiln_conv_mma_runs_on), and why not where it does not. */
void kiln_tune_families(const kiln_context *ctx, struct kiln_tune_family out[KILN_TUNE_FAMILIES]);

/* Family f's shapes into `out` (at most KILN_TUNE_FAMILY_SHAPES_MAX), named
   "<group> <type> <sizes>"; returns how many. The GEMM families: square,
   long K and wide M, fp16 (the long-K one bf16 where the family runs it),
   forced to the family. attention.mma: fp16 prefill of 4096 tokens, 8
   heads, head dimensions 64 and 128, each with and without causal masking.
   attention.decode: a decoding step, 32 query heads over 8 kv heads and
   8192 keys of head dimension 128, in fp32 (the representative GPU shape,
   of the same name) and fp16. conv.mma: ResNet-50 layers in NHWC fp16 at
   batch 8, 3x3 128 -> 128 at 56x56 and 1x1 256 -> 1024 at 14x14, forced
   to KILN_CONV_IGEMM_MMA. */
size_t kiln_tune_family_shapes(const struct kiln_tune_family *f, struct kiln_tune_shape *out);

/* The parameter set AUTO's plan of `shape` takes on ctx's profile
   ("gemm.tiled:default", "attention.mma:d-to-64", ...; empty where the plan
   takes none): a search tunes a group's default set, never a class's. */
kiln_status kiln_tune_shape_set(kiln_context *ctx, const struct kiln_tune_shape *shape, char *set, size_t size);

/* A GEMM shape (row-major, no transposes; `batch` > 1: packed batches), and
   a convolution layer as kiln-bench --model runs it at batch 1 (NCHW,
   padded by rs/2, folded batch norm as a bias, ReLU, constant weights). */
struct kiln_tune_shape kiln_tune_gemm_shape(const char *name, size_t m, size_t n, size_t k, size_t batch);
struct kiln_tune_shape kiln_tune_conv_shape(const char *name, size_t c, size_t hw, size_t k, size_t rs, size_t stride,
                                            size_t groups);

struct kiln_tune_shape_result {
    char name[48];
    char group[48];             /* the kernel group its plan takes ("" for none); "<group>:<set>" when it takes a
                                   class of the matched profile, which is not tuned */
    char set_after[48];         /* the set its plan takes with the tuned profile */
    char kernel_before[64];     /* the main kernel of its plan on the matched profile ("" if not measured) */
    char kernel_after[64];      /* ... and on the tuned one: another where a threshold moved the shape */
    double gflop;               /* per run */
    double before_ms, after_ms; /* AUTO's plans on the matched profile and on the tuned one */
};

struct kiln_tune_threshold {
    char field[40];     /* "select.gemm_smallm_max", "gemm.cpu.in_place_l2" */
    long before, after; /* the profile's value, the measured one */
    int measured;       /* 0: not searched (budget, route or ops) */
    char evidence[400]; /* the ladder: "m=1 0.012/0.020 ms, ..." (small-side/large-side ms) */
};

/* A kernel group the run could not search. */
struct kiln_tune_skip {
    char group[48];
    char reason[256];
};

struct kiln_tune_result {
    struct kiln_tune_shape_result shapes[KILN_TUNE_SHAPES_MAX];
    size_t shape_count;
    /* The families the context does not run, of the operations tuned. */
    struct kiln_tune_skip skipped[KILN_TUNE_FAMILIES];
    size_t skipped_count;
    struct kiln_tune_threshold thresholds[KILN_TUNE_THRESHOLDS_MAX];
    size_t threshold_count;
    size_t trials;                 /* candidates tried, from the journal included */
    size_t journaled;              /* of them, taken from the journal */
    size_t refused;                /* refused by kiln_space_check before any compile */
    size_t rejected;               /* did not build, were wrong or failed to run */
    size_t timed;                  /* timed on every shape of their group */
    size_t classes;                /* classes of shapes written */
    double seconds;                /* the run's wall-clock time */
    char matched[64];              /* the matched profile */
    char profile[80];              /* the profile written ("" if none) */
    char path[4200];               /* its file */
    char changes[1024];            /* the overlay of what changed ("" if nothing) */
    char refuted[320];             /* the groups' changes the before/after table refuted, and why ("" if none) */
    double peak_gflops, peak_gbps; /* measured (0 if not) */
};

/* A kept change may make one of its group's shapes slower than this, in
   the before/after table (after_ms over before_ms, less one): past it the
   group's change is refuted and left out of the profile written. The
   table's noise on a shared CPU is up to about 15%. */
#define KILN_TUNE_REGRESSION_MAX 0.25

/* The kernel groups among `among` (bits 1 << group id) one of whose shapes
   ran slower in the before/after table than `max` allows: after_ms >
   before_ms * (1 + max). Shapes without a group, or taking a class of the
   matched profile ("<group>:<set>", which is not tuned), are not counted.
   The first such shape and its ratio are written to why (when a group is
   found). */
unsigned kiln_tune_refuted(const struct kiln_tune_shape_result *shapes, size_t count, double max, unsigned among,
                           char *why, size_t size);

/* The select thresholds' change may make the shapes it moves to another
   kernel slower than this in the before/after table, their times summed
   (after over before, less one): past it the thresholds are refuted and the
   profile's values stay. A threshold is placed on a ladder of synthetic
   sizes (one metric, a pixel count or a channel count), and a real shape
   that differs from the ladder in another dimension can land on the wrong
   side: on a 2-vCPU Zen 4, select.conv_1x1_direct_min_pixels placed at 784
   by its ladder (32 -> 64 channels) moved MobileNet's 256 -> 256 layer at
   28x28 to the direct kernel at 0.88x, which a bound of 25% on one shape
   let through. Summed over the moved shapes, the table's noise stays well
   under this. */
#define KILN_TUNE_SELECT_LOSS_MAX 0.05

/* Whether the before/after table refutes the select thresholds' change:
   the shapes it moved, those whose plan took another main kernel
   (kernel_before and kernel_after differ) and whose own kernel group is not
   among `kernel_changed` (bits 1 << group id; a group's new parameters may
   rename its kernel), took more than (1 + max) times as long after as
   before, summed. Shapes without a group, or of a class of the matched
   profile, count by the group before the colon or not at all. The moved
   shapes' count and ratio are written to why (when refuted). */
int kiln_tune_select_refuted(const struct kiln_tune_shape_result *shapes, size_t count, double max,
                             unsigned kernel_changed, char *why, size_t size);

/* Where a threshold goes, from a ladder of n sizes `metric` (ascending, at
   most 8) and the times of its two sides there (INFINITY: the side does not
   apply, and costs as much as 10^30 ms). Each split of the ladder, the small
   side below it and the large side from it on, costs the sum of the log
   times it takes; the cheapest is chosen (of equal ones the nearest to the
   current value's), so one noisy rung moves it only as far as its times
   weigh. A maximum (is_max: the small side up to it) becomes the last size
   of the small side, `never` (0) when it has none; a minimum (the large
   side from it on) the first size of the large side, `never` (2^30) when
   it has none. `current` stays when it splits the ladder there, or when
   the chosen split beats its own by no more than min_gain in the geometric
   mean over the rungs. */
long kiln_tune_place(int is_max, const long *metric, const double *small, const double *large, size_t n, long current,
                     long never, double min_gain);

/* A split of a group's shapes in two, each part with its own candidate. */
struct kiln_tune_split {
    size_t def, cls; /* the candidates of the rest (the default) and of the class */
    int dim;         /* KILN_DIM_*: the dimension of the class's range */
    long lo, hi;     /* its range (hi LONG_MAX: no upper bound) */
    int in[KILN_TUNE_SHAPES_MAX];
    double score; /* the geometric mean of seed / time with each part's candidate; 0: no split */
    double gap;   /* the ratio of the extents on either side of the boundary */
};

/* The best split of `members` shapes with extents dims[m] along one of the
   dimensions of dim_mask, from the times ms[c * members + m] of `cands`
   candidates (c = 0 the seed; ok[c] 0: rejected): each part takes the
   candidate that scores best on it, the split that scores best overall is
   chosen (of the same parts, the one whose default scores best over all the
   shapes, then the dimension they lie farthest apart on), and its boundary
   lies at the geometric mean of the two extents nearest to it on either
   side. */
struct kiln_tune_split kiln_tune_best_split(const double *ms, const int *ok, size_t cands, size_t members,
                                            const struct kiln_dims *dims, unsigned dim_mask);

/* Run the search and write the tuned profile. INVALID_ARGUMENT for bad
   options (groups naming no kernel group among them); the statuses of opening the device; IO, before any trial, when
   the output directory or its journal cannot be written; the statuses of
   the trials' set-up; KILN_SUCCESS otherwise, with or without a profile
   written (r->profile says). */
kiln_status kiln_tune(const struct kiln_tune_options *o, struct kiln_tune_result *r);

#endif /* KILN_TUNE_TUNE_H */
