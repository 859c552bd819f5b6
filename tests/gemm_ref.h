/*
 * The plain-C GEMM oracle and the host side of a GEMM test case, shared by
 * test_gemm.c and test_gemm_conformance.c. Header-only (static functions)
 * because tests/CMakeLists.txt builds each test_*.c with test_util.c alone.
 *
 * A case owns one device buffer per operand, sized exactly for its offset,
 * leading dimension, strides and batch (BLAS convention: the last stored line
 * of the last item ends at its last element). Every position of a buffer that
 * is not an element of the matrix (offset prefix, leading-dimension padding,
 * gaps between batch items) holds NaN, so a kernel that reads it shows NaN in
 * C, and C's non-element positions must come back bit for bit unchanged.
 */
#ifndef KILN_TEST_GEMM_REF_H
#define KILN_TEST_GEMM_REF_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref/gemm_operand.h"
#include "ref/storage.h"
#include "test_util.h"

/* The operands, as src/ref/gemm_operand.h numbers them. */
enum { GR_A = KILN_GEMM_A, GR_B = KILN_GEMM_B, GR_C = KILN_GEMM_C };

/* Smallest leading dimension and tight batch stride of an operand. */
static inline size_t gr_tight_ld(const struct kiln_gemm_operand *op) { return op->rowwise ? op->cols : op->rows; }
static inline size_t gr_tight_stride(const struct kiln_gemm_operand *op)
{
    return (op->rowwise ? op->rows : op->cols) * op->ld;
}

/*
 * Error bound of one element of C.
 * - Each product a*b rounds once (u = 2^-24 relative) and each of the K - 1
 *   additions at most once more, in whatever order or blocking the kernel sums
 *   in: |error| <= K * u * sum|a||b| (Higham's gamma_K to first order). We
 *   allow 4u (2^-22) per term: twice for FMA-versus-separate rounding and
 *   split-K partial sums, twice for the final scaling by alpha and the add of
 *   beta * c0, which round relative to values no larger than this sum.
 * - beta * c0 rounds once and its share of the final add once: 2u = 2^-23.
 * - FLT_MIN: a kernel may flush denormal intermediates to zero.
 * - 16-bit storage: the inputs are rounded to it before the reference sees
 *   them, so only the output's rounding is added (kiln_ref_storage_bound:
 *   2^-11 relative for fp16, 2^-8 for bf16).
 * - fp32 storage with KILN_MATH_TF32: a kernel may round each value of A
 *   and B to TF32 (10 explicit significand bits) before multiplying: at
 *   most 2^-11 relative to nearest (the mma family), 2^-10 toward zero (the
 *   wgmma family's tensor cores drop the low bits of what they read), and
 *   the product of two TF32 values is exact in fp32. Each product is then
 *   off by at most 2^-9 + 2^-20 of its magnitude, so the sum by that share
 *   of sum |a||b|, whatever K, on top of the fp32 bound above (which
 *   already covers the sums). 0x1.01p-9 rounds 2^-9 + 2^-20 up.
 */
static inline double gr_bound(size_t k, double alpha, double abs_sum, double beta, double c0, kiln_dtype dtype,
                              kiln_math math, double ref)
{
    double b = (double)k * 0x1p-22 * fabs(alpha) * abs_sum + (beta != 0.0 ? fabs(beta * c0) * 0x1p-23 : 0.0) + FLT_MIN;
    if (dtype == KILN_F32 && math == KILN_MATH_TF32)
        b += 0x1.01p-9 * fabs(alpha) * abs_sum;
    return b + kiln_ref_storage_bound(dtype, ref, b);
}

/* Host values and device buffers of one case. */
struct gr_case {
    kiln_gemm_desc desc;
    size_t off[3], len[3]; /* element offset and buffer length in elements */
    float *val[3];         /* value at every position (NaN outside the matrix) */
    unsigned char *raw[3]; /* bytes uploaded */
    unsigned char *is_c;   /* 1 where an element of C lives */
    kiln_buffer *buf[3];
};

/* Allocate buffers for `desc` with the given element offsets; `slack` more
   elements past the end of each (0 for an exact fit). */
static inline void gr_case_init(struct gr_case *t, kiln_context *ctx, const kiln_gemm_desc *desc, size_t off_a,
                                size_t off_b, size_t off_c, size_t slack)
{
    memset(t, 0, sizeof *t);
    t->desc = *desc;
    t->off[GR_A] = off_a, t->off[GR_B] = off_b, t->off[GR_C] = off_c;
    const size_t es = kt_elem_size(desc->dtype);
    for (int w = GR_A; w <= GR_C; w++) {
        t->len[w] = t->off[w] + kiln_gemm_operand_extent(desc, w) + slack;
        t->val[w] = malloc(t->len[w] * sizeof(float));
        t->raw[w] = malloc(t->len[w] * es);
        assert_non_null(t->val[w]);
        assert_non_null(t->raw[w]);
        kt_assert_status(kiln_buffer_create(ctx, t->len[w] * es, &t->buf[w]), KILN_SUCCESS);
    }
    t->is_c = calloc(t->len[GR_C], 1);
    assert_non_null(t->is_c);
    struct kiln_gemm_operand c = kiln_gemm_operand_of(desc, GR_C);
    for (size_t bi = 0; bi < desc->batch; bi++)
        for (size_t i = 0; i < desc->m; i++)
            for (size_t j = 0; j < desc->n; j++)
                t->is_c[off_c + bi * c.stride + kiln_gemm_operand_at(&c, i, j)] = 1;
}

static inline void gr_case_free(struct gr_case *t)
{
    for (int w = GR_A; w <= GR_C; w++) {
        kiln_buffer_destroy(t->buf[w]);
        free(t->val[w]);
        free(t->raw[w]);
    }
    free(t->is_c);
}

static inline void gr_upload(struct gr_case *t, int w)
{
    const size_t n = t->len[w];
    for (size_t i = 0; i < n; i++)
        kt_store(t->raw[w], t->desc.dtype, i, t->val[w][i]);
    kt_assert_status(kiln_buffer_write(t->buf[w], 0, n * kt_elem_size(t->desc.dtype), t->raw[w]), KILN_SUCCESS);
}

/* Fresh uniform values in [-1, 1) at every element of A and B, and of C unless
   `nan_c` (then C's elements are NaN too, for beta = 0); NaN elsewhere. With
   fp16 the values are rounded to fp16 so the reference sees what is stored. */
static inline void gr_case_fill(struct gr_case *t, int nan_c, uint64_t *seed)
{
    const kiln_gemm_desc *d = &t->desc;
    for (int w = GR_A; w <= GR_C; w++) {
        struct kiln_gemm_operand op = kiln_gemm_operand_of(d, w);
        float *v = t->val[w];
        for (size_t i = 0; i < t->len[w]; i++)
            v[i] = NAN;
        if (w == GR_C && nan_c) {
            gr_upload(t, w);
            continue;
        }
        float *line = malloc(op.cols * sizeof *line);
        assert_non_null(line);
        for (size_t bi = 0; bi < d->batch; bi++)
            for (size_t r = 0; r < op.rows; r++) {
                kt_fill_uniform(line, op.cols, -1.0f, 1.0f, seed);
                for (size_t c = 0; c < op.cols; c++) {
                    float x = kt_round_to(d->dtype, line[c]);
                    v[t->off[w] + bi * op.stride + kiln_gemm_operand_at(&op, r, c)] = x;
                }
            }
        free(line);
        gr_upload(t, w);
    }
}

static inline kiln_status gr_case_execute(struct gr_case *t, kiln_gemm_plan *plan, float alpha, float beta,
                                          kiln_event **event)
{
    return kiln_gemm_plan_execute(plan, alpha, t->buf[GR_A], t->off[GR_A], t->buf[GR_B], t->off[GR_B], beta,
                                  t->buf[GR_C], t->off[GR_C], event);
}

static inline float gr_stored(const struct gr_case *t, const unsigned char *raw, size_t i)
{
    return kt_stored(raw, t->desc.dtype, i);
}

/* Read A, B and C back after C = alpha * op(A) op(B) + beta * C ran on the
   filled case: every element of C within gr_bound() of the double-precision
   reference, everything else in all three buffers bit for bit as uploaded. */
static inline void gr_case_check(const struct gr_case *t, float alpha, float beta)
{
    const kiln_gemm_desc *d = &t->desc;
    const size_t es = kt_elem_size(d->dtype);
    unsigned char *got = malloc(t->len[GR_C] * es);
    assert_non_null(got);
    for (int w = GR_A; w <= GR_B; w++) {
        unsigned char *back = malloc(t->len[w] * es);
        assert_non_null(back);
        kt_assert_status(kiln_buffer_read(t->buf[w], 0, t->len[w] * es, back), KILN_SUCCESS);
        if (memcmp(back, t->raw[w], t->len[w] * es) != 0)
            fail_msg("input %c was modified", w == GR_A ? 'A' : 'B');
        free(back);
    }
    kt_assert_status(kiln_buffer_read(t->buf[GR_C], 0, t->len[GR_C] * es, got), KILN_SUCCESS);

    size_t bad = 0;
    for (size_t i = 0; i < t->len[GR_C]; i++)
        if (!t->is_c[i] && memcmp(got + i * es, t->raw[GR_C] + i * es, es) != 0 && bad++ < 5)
            print_error("C position %zu outside the matrix was written: %g\n", i, (double)gr_stored(t, got, i));
    if (bad)
        fail_msg("%zu positions of C outside the matrix were written", bad);

    struct kiln_gemm_operand a = kiln_gemm_operand_of(d, GR_A), b = kiln_gemm_operand_of(d, GR_B),
                             c = kiln_gemm_operand_of(d, GR_C);
    for (size_t bi = 0; bi < d->batch; bi++)
        for (size_t i = 0; i < d->m; i++)
            for (size_t j = 0; j < d->n; j++) {
                const float *pa = t->val[GR_A] + t->off[GR_A] + bi * a.stride;
                const float *pb = t->val[GR_B] + t->off[GR_B] + bi * b.stride;
                double sum = 0.0, abs_sum = 0.0;
                for (size_t p = 0; p < d->k; p++) {
                    double prod =
                        (double)pa[kiln_gemm_operand_at(&a, i, p)] * (double)pb[kiln_gemm_operand_at(&b, p, j)];
                    sum += prod;
                    abs_sum += fabs(prod);
                }
                size_t at = t->off[GR_C] + bi * c.stride + kiln_gemm_operand_at(&c, i, j);
                double c0 = t->val[GR_C][at];
                double ref = (double)alpha * sum + (beta != 0.0f ? (double)beta * c0 : 0.0);
                double bound = gr_bound(d->k, alpha, abs_sum, beta, c0, d->dtype, d->math, ref);
                double v = gr_stored(t, got, at), err = fabs(v - ref);
                if (!(err <= bound) && bad++ < 5)
                    print_error("batch %zu C(%zu,%zu) = %.9g, reference %.9g, error %.3g > bound %.3g\n", bi, i, j, v,
                                ref, err, bound);
            }
    free(got);
    if (bad)
        fail_msg("%zu of %zu elements of C wrong (alpha %g, beta %g)", bad, d->batch * d->m * d->n, (double)alpha,
                 (double)beta);
}

/* (alpha, beta) pairs gr_case_run() goes through: the first two are the
   common cases, the rest the special ones (alpha = 0 leaves beta * C). */
enum { GR_SCALAR_PAIRS = 6 };

/* Execute `plan` on the case once for each of the first `pairs` (alpha, beta)
   pairs, each on fresh data, and check each result. With beta = 0, C's
   elements start as NaN: C must be written, never read. */
static inline void gr_case_run(struct gr_case *t, kiln_gemm_plan *plan, size_t pairs, uint64_t *seed)
{
    static const struct {
        float alpha, beta;
        int nan_c;
    } scalars[GR_SCALAR_PAIRS] = {
        {1.0f, 0.0f, 1}, {-1.5f, 0.5f, 0}, {0.0f, 1.0f, 0}, {0.0f, 0.0f, 1}, {1.0f, 1.0f, 0}, {0.25f, -2.0f, 0},
    };
    for (size_t s = 0; s < pairs && s < GR_SCALAR_PAIRS; s++) {
        gr_case_fill(t, scalars[s].nan_c, seed);
        kt_assert_status(gr_case_execute(t, plan, scalars[s].alpha, scalars[s].beta, NULL), KILN_SUCCESS);
        gr_case_check(t, scalars[s].alpha, scalars[s].beta);
    }
}

/* gr_case_run() on unpadded operands built for `desc`, then freed. */
static inline void gr_check_plan(kiln_context *ctx, const kiln_gemm_desc *desc, kiln_gemm_plan *plan, size_t pairs,
                                 uint64_t *seed)
{
    struct gr_case t;
    gr_case_init(&t, ctx, desc, 0, 0, 0, 0);
    gr_case_run(&t, plan, pairs, seed);
    gr_case_free(&t);
}

#endif /* KILN_TEST_GEMM_REF_H */
