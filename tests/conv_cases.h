/*
 * What the convolution test programs (test_conv_*.c) share: the problem
 * row that their tables are made of and the descriptor it stands for, the
 * algorithms by name, whether an algorithm applies to a descriptor, the two
 * epilogue shapes that several programs reuse, and one planned, executed
 * and checked case (conv_ref.h is the oracle).
 *
 * Compile budget: every (algorithm, layout, dtype, epilogue switches) is one
 * POCL build, while shapes, alpha, beta and the leaky slope are run-time
 * arguments; the programs choose their tables' switch sets with that in mind.
 */
#ifndef KILN_TEST_CONV_CASES_H
#define KILN_TEST_CONV_CASES_H

#include "conv_ref.h"
#include "test_util.h"

enum { NCHW = KILN_NCHW, NHWC = KILN_NHWC };

/* One problem: pads are top, bottom, left, right; zero stride, dilation and
   groups mean 1. */
struct cc_row {
    const char *what;
    int layout;
    size_t n, c, h, w, k, r, s;
    size_t sh, sw, pad[4], dh, dw, groups;
    kiln_dtype dtype;
    int direct; /* run DIRECT on this row too (test_conv_shapes.c) */
    int pool;   /* fused max pool */
};

#define CONV(what_, lay, n_, c_, h_, w_, k_, r_, s_)                                                                   \
    .what = what_, .layout = lay, .n = n_, .c = c_, .h = h_, .w = w_, .k = k_, .r = r_, .s = s_
#define PAD(t, b, l, r) .pad = {t, b, l, r}

/* The row's descriptor for `algo`, with bias, alpha 1, no residual and no
   activation. */
kiln_conv2d_desc cc_desc_of(const struct cc_row *r, kiln_conv_algo algo);

/* AUTO and every algorithm, in the order the tables run them. */
#define CC_ALGOS 7
extern const kiln_conv_algo cc_all_algos[CC_ALGOS];

/* The public name of an algorithm ("implicit-gemm", ...). */
const char *cc_algo_name(kiln_conv_algo algo);

/* Whether `algo` applies to the descriptor, asked of the library's own
   table (the algorithm's unsupported() in src/ops/conv2d.h on the shape
   plan creation validates). AUTO applies to every shape; so does every
   algorithm to a descriptor the library rejects, so that a test made of it
   runs and fails. */
int cc_applies(kiln_conv_algo algo, const kiln_conv2d_desc *d);

/* The two shapes of each algorithm: 3x3 pad 1 (every algorithm but
   GEMM-1x1; cc_epilogue_shape picks) or 1x1, odd output sizes (partial tiles, a pool that drops a row
   and a column) in NCHW with a batch, and even ones in NHWC. Epilogue i runs
   on shape i % 2 (test_conv_epilogue.c), so every switch set is built once
   per algorithm and both layouts see the epilogue and the pool; the
   describe, reuse, find, batch-norm and bad-execution tests take their
   problems from here too. The 1x1 shapes' GEMMs (130 filters by 9 pixels
   in NCHW, 64 pixels by 8 filters in NHWC) are flipped by the CPU GEMM
   family on the CPU profiles (docs/gemm.md), so its transposed store runs
   every epilogue, bias per row and per column. The NHWC 3x3 shape has 40
   filters: whole and partial panels of the implicit GEMM's row variant
   (16 + 16 + 8 on x86-64-avx512), so its vector and its scalar stores both
   run every epilogue. */
extern const struct cc_row cc_epilogue_shapes[2][2];

/* The epilogue shape of `algo` in layout 0 (NCHW) or 1 (NHWC): the 3x3 one
   where the algorithm applies to it, else the 1x1 one. */
const struct cc_row *cc_epilogue_shape(kiln_conv_algo algo, size_t layout);

/* describe(): the requested algorithm (a concrete one for AUTO), its name, a
   kernel, the context's profile and a reason. Returns the algorithm run. */
kiln_conv_algo cc_assert_plan_describes(const kiln_conv2d_plan *plan, kiln_context *c, kiln_conv_algo algo);

/* Plan, fill, execute, check against the reference; `label` names the case.
   An algorithm not written yet (UNSUPPORTED, "not implemented") skips the
   test. */
void cc_run_case(kiln_context *c, const kiln_conv2d_desc *d, const char *label);

/* Runs plan (of d) on random data, checks it against the reference with
   algo's tolerance (kiln_conv_algo_tol) under label, and destroys it. */
void cc_check_plan(kiln_context *c, kiln_conv2d_plan *plan, const kiln_conv2d_desc *d, kiln_conv_algo algo,
                   const char *label);

/* The same with the residual read from y itself (z is y: an in-place
   residual add): y holds z's values when the plan runs. */
void cc_check_plan_in_place(kiln_context *c, kiln_conv2d_plan *plan, const kiln_conv2d_desc *d, kiln_conv_algo algo,
                            const char *label);

/* Whether ctx's profile sends implicit GEMM to the tiled kernel (a GPU
   profile, or KILN_CUDA_ROUTES) rather than the CPU kernel and its row
   variant: the rule of src/ops/conv_igemm.c. */
int cc_takes_tiled_igemm(const kiln_context *ctx);

#endif /* KILN_TEST_CONV_CASES_H */
