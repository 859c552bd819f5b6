/*
 * What the tests of the tuner's trials (test_tune_trial*.c) share: the
 * verdicts they expect, and a copy of the kernel sources that a test edits
 * into wrong variants and points KILN_KERNEL_DIR at. Header-only (static
 * inline functions), like conv_ref.h.
 */
#ifndef KILN_TEST_TRIAL_CHECKS_H
#define KILN_TEST_TRIAL_CHECKS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tune/trial.h"

/* Right, timed, and described by its plan. */
static inline void tc_assert_timed(const struct kiln_trial *t)
{
    if (t->verdict != KILN_TRIAL_TIMED)
        fail_msg("rejected (%d): %s", t->verdict, t->reason);
    assert_true(t->ms > 0.0);
    assert_true(t->runs >= 1);
    assert_true(t->worst <= 1.0);
    assert_true(t->kernel[0] != '\0');
    assert_true(t->params[0] != '\0');
}

/* A trial in 16-bit storage type t (of `what`): right and timed, its worst
   error above 0 (the storage's rounding is seen) and within the bound. */
static inline void tc_assert_16_bit(const struct kiln_trial *t, kiln_dtype dtype, const char *what)
{
    printf("# %s %s: %s %s, worst error %.3g of the bound\n", dtype == KILN_F16 ? "fp16" : "bf16", what, t->kernel,
           t->params, t->worst);
    tc_assert_timed(t);
    assert_true(t->worst > 0.0 && t->worst <= 1.0);
}

/* Rejected with `verdict` and never timed; the reason is printed after
   `label`. A wrong result names the reference it differs from. */
static inline void tc_assert_rejected(const struct kiln_trial *t, enum kiln_trial_verdict verdict, const char *label)
{
    printf("# %s: %.120s\n", label, t->reason);
    assert_int_equal(t->verdict, verdict);
    if (verdict == KILN_TRIAL_WRONG)
        assert_non_null(strstr(t->reason, "the reference"));
    assert_int_equal(t->runs, 0);
}

/* A copy of the kernel sources `cl_dir` that kiln reads from now on
   (KILN_KERNEL_DIR); the test edits it, then hands it to tc_kernels_end. */
static inline char *tc_kernels_begin(const char *cl_dir)
{
    char *dir = kt_copy_dir(cl_dir);
    assert_int_equal(setenv("KILN_KERNEL_DIR", dir, 1), 0);
    return dir;
}

/* The library's own kernel sources again, and the copy removed. */
static inline void tc_kernels_end(char *dir)
{
    assert_int_equal(unsetenv("KILN_KERNEL_DIR"), 0);
    kt_remove_tree(dir);
    free(dir);
}

#endif /* KILN_TEST_TRIAL_CHECKS_H */
