/*
 * One candidate parameter set tried on one problem, as the tuner tries it:
 * the plan is made on a context opened with the candidate's profile overlay,
 * run once on random data with its output poisoned and checked against a
 * double-precision reference, and timed only if right (CLBlast's tuner
 * verifies each candidate against a reference kernel the same way). A
 * candidate that does not build or computes a wrong result is rejected with
 * its reason and never timed.
 */
#ifndef KILN_TUNE_TRIAL_H
#define KILN_TUNE_TRIAL_H

#include <stdint.h>

#include "kiln/kiln.h"
#include "kiln/kiln_attention.h"
#include "kiln/kiln_nn.h"

enum kiln_trial_verdict {
    KILN_TRIAL_TIMED = 0,  /* right, and timed */
    KILN_TRIAL_NO_PLAN,    /* the plan could not be made (build failure, unsupported, ...) */
    KILN_TRIAL_WRONG,      /* computed a wrong result, or left an output unwritten */
    KILN_TRIAL_RUN_FAILED, /* the plan failed to run */
};

struct kiln_trial {
    enum kiln_trial_verdict verdict;
    kiln_status status; /* of the failing call, for NO_PLAN and RUN_FAILED */
    char reason[320];   /* why it was rejected ("" when timed) */
    double ms;          /* median of the timed runs */
    int runs;           /* timed runs made (fewer when cut off) */
    double worst;       /* largest |error| / bound over the elements checked */
    /* What the plan chose, from its describe call (every operator's info
       has these three). */
    char kernel[64];
    char params[256];
    char param_set[48]; /* "<group>:<set>" */
};

/* Elements of C checked against the reference per trial (all of C when it
   has fewer): each costs one dot product of length k on the host. Attention
   checks whole query rows, as many as hold this many outputs (at least
   one). */
#define KILN_TRIAL_CHECKS 512

/*
 * Try `ctx`'s parameters on the GEMM `desc` (alpha 1, beta 0) in its
 * storage type (fp32, or fp16 or bf16: the operands drawn in that type,
 * whose products are exact in fp32): every element of C must be written,
 * the checked ones within k * 2^-22 * sum |a b| (+ FLT_MIN), and C's own
 * rounding for a 16-bit C, of the reference (the bound of tests/gemm_ref.h),
 * then `reps` timed runs cut short past cutoff_ms (0: never). Returns
 * KILN_SUCCESS when the trial could be carried out, whatever its verdict;
 * INVALID_ARGUMENT for NULL pointers; OUT_OF_MEMORY for the host or device
 * memory of the operands.
 */
kiln_status kiln_trial_gemm(kiln_context *ctx, const kiln_gemm_desc *desc, int reps, double cutoff_ms, uint64_t seed,
                            struct kiln_trial *out);

/*
 * The same for the convolution `desc` (trial_conv.c) in its storage type
 * (fp32, fp16 or bf16; the bias fp32): random x, w (and bias and z when the
 * descriptor's epilogue takes them) in [-1, 1), rounded to their type, y
 * poisoned; every element of y must be written, a sample of
 * KILN_TRIAL_CHECKS outputs (all when fewer) within the bound of
 * tests/conv_ref.h (src/ref/conv_operand.h) for the algorithm the plan took,
 * with the whole epilogue applied: alpha, beta * z, bias, activation and
 * the fused pool, for both layouts, groups, strides, dilation and padding.
 * Batch normalisation is not part of a descriptor (kiln_fold_batchnorm
 * folds it into w and bias on the host), so a trial of a folded layer is a
 * trial of its plain descriptor. Returns KILN_SUCCESS when the trial could
 * be carried out, whatever its verdict; INVALID_ARGUMENT for NULL pointers;
 * OUT_OF_MEMORY for the host or device memory of the tensors.
 */
kiln_status kiln_trial_conv(kiln_context *ctx, const kiln_conv2d_desc *desc, int reps, double cutoff_ms, uint64_t seed,
                            struct kiln_trial *out);

/*
 * The same for the attention `desc` (trial_attention.c), with everything
 * the descriptor allows (fp32, fp16 or bf16 storage of q, k, v and o, their
 * values rounded to it; either layout, grouped- and multi-query
 * heads, causal masking, key lengths, additive masks with -inf entries, lse,
 * decoding, either algorithm): random q, k, v (q scaled so that the scores
 * spread over a few units: softmax neither flat nor one-hot), a mask and key
 * lengths when the descriptor takes them, o and lse poisoned. Every element
 * of o and lse must be written, and a sample of query rows within the bound
 * of src/ref/attention_operand.h (the tests' bound) of a double-precision
 * reference of the row; an lse of -inf must be -inf.
 */
kiln_status kiln_trial_attention(kiln_context *ctx, const kiln_attention_desc *desc, int reps, double cutoff_ms,
                                 uint64_t seed, struct kiln_trial *out);

#endif /* KILN_TUNE_TRIAL_H */
