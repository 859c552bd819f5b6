/*
 * Where the elements of a GEMM operand are stored, for code that checks a
 * GEMM on the host with plain loops: the tuner's check of each candidate
 * (src/tune/trial.c) and the tests' reference (tests/gemm_ref.h).
 * Header-only.
 */
#ifndef KILN_REF_GEMM_OPERAND_H
#define KILN_REF_GEMM_OPERAND_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

enum kiln_gemm_operand_id { KILN_GEMM_A, KILN_GEMM_B, KILN_GEMM_C };

/* One operand as stored: op(X) is rows x cols. */
struct kiln_gemm_operand {
    size_t rows, cols, ld, stride;
    int rowwise; /* op(X)(r, c) at r * ld + c; otherwise at c * ld + r */
};

static inline struct kiln_gemm_operand kiln_gemm_operand_of(const kiln_gemm_desc *d, int which)
{
    struct kiln_gemm_operand op;
    kiln_transpose t = which == KILN_GEMM_A ? d->trans_a : which == KILN_GEMM_B ? d->trans_b : KILN_NO_TRANS;
    op.rows = which == KILN_GEMM_B ? d->k : d->m;
    op.cols = which == KILN_GEMM_A ? d->k : d->n;
    op.ld = which == KILN_GEMM_A ? d->lda : which == KILN_GEMM_B ? d->ldb : d->ldc;
    op.stride = which == KILN_GEMM_A ? d->stride_a : which == KILN_GEMM_B ? d->stride_b : d->stride_c;
    op.rowwise = (d->layout == KILN_ROW_MAJOR) != (t == KILN_TRANS);
    return op;
}

/* Index of op(X)(r, c) within one batch item. */
static inline size_t kiln_gemm_operand_at(const struct kiln_gemm_operand *op, size_t r, size_t c)
{
    return op->rowwise ? r * op->ld + c : c * op->ld + r;
}

/* Elements from the start of the operand to its last element over the
   batch: 0 for an empty operand, SIZE_MAX if that does not fit in a size_t. */
static inline size_t kiln_gemm_operand_extent(const kiln_gemm_desc *d, int which)
{
    struct kiln_gemm_operand op = kiln_gemm_operand_of(d, which);
    if (op.rows == 0 || op.cols == 0 || d->batch == 0)
        return 0;
    size_t line = op.rowwise ? op.rows - 1 : op.cols - 1, col = op.rowwise ? op.cols - 1 : op.rows - 1, span;
    if (__builtin_mul_overflow(line, op.ld, &line) || __builtin_mul_overflow(d->batch - 1, op.stride, &span) ||
        __builtin_add_overflow(span, line, &span) || __builtin_add_overflow(span, col, &span) ||
        __builtin_add_overflow(span, 1, &span))
        return SIZE_MAX;
    return span;
}

#endif /* KILN_REF_GEMM_OPERAND_H */
