/*
 * libFuzzer harness for GEMM: kiln_gemm_plan_create, kiln_gemm_plan_execute
 * and kiln_gemm with descriptors, scalars, offsets and buffers drawn from
 * the input (fuzz_util.h says what is checked).
 */
#include "fuzz_util.h"
#include "gemm_ref.h"

/* Elements from an operand's offset to its last element, or SIZE_MAX if
   that does not fit in a size_t; 0 for an empty operand. */
static size_t extent(const kiln_gemm_desc *d, int which, size_t offset)
{
    size_t e = kiln_gemm_operand_extent(d, which);
    return e ? fz_add(offset, e) : 0;
}

/* A leading dimension or stride: usually the given tight one, sometimes a
   little more, sometimes anything. */
static size_t vary(struct fz *f, size_t tight)
{
    unsigned b = fz_byte(f);
    if (b < 192)
        return tight;
    if (b < 240)
        return fz_add(tight, b % 5);
    return b < 244 ? 0 : fz_size(f, 64);
}

/* Fresh values at every element of an operand (or of the whole buffer when
   the operand has too many elements to visit): NaN stays everywhere else. */
static void fill(struct fz_pool *pool, int slot, const kiln_gemm_desc *d, int which, size_t offset, uint64_t *seed)
{
    struct kiln_gemm_operand op = kiln_gemm_operand_of(d, which);
    const size_t have = pool->b[slot].bytes / pool->b[slot].elem_size;
    float v;
    if (op.rows == 0 || op.cols == 0 || d->batch == 0)
        return; /* nothing to fill, and no loop over the others */
    if (fz_mul(fz_mul(d->batch, op.rows), op.cols) > ((size_t)1 << 20) || extent(d, which, offset) > have) {
        for (size_t i = 0; i < have; i++) {
            kt_fill_uniform(&v, 1, -1.0f, 1.0f, seed);
            fz_set(pool, slot, i, v);
        }
        return;
    }
    for (size_t bi = 0; bi < d->batch; bi++)
        for (size_t r = 0; r < op.rows; r++)
            for (size_t c = 0; c < op.cols; c++) {
                kt_fill_uniform(&v, 1, -1.0f, 1.0f, seed);
                fz_set(pool, slot, offset + bi * op.stride + kiln_gemm_operand_at(&op, r, c), v);
            }
}

/* After a successful execution: every element of C within gr_bound of the
   double-precision reference, every other byte of every buffer unchanged. */
static void check_result(struct fz_pool *pool, const kiln_gemm_desc *d, const int slot[3], const size_t off[3],
                         float alpha, float beta)
{
    if (slot[GR_A] < 0 || slot[GR_B] < 0 || slot[GR_C] < 0)
        fz_fail("GEMM accepted a missing or foreign buffer");
    if (slot[GR_C] == slot[GR_A] || slot[GR_C] == slot[GR_B])
        fz_fail("GEMM accepted C in the buffer of A or B");
    struct kiln_gemm_operand a = kiln_gemm_operand_of(d, GR_A), b = kiln_gemm_operand_of(d, GR_B),
                             c = kiln_gemm_operand_of(d, GR_C);
    const int values = fabsf(alpha) <= 4.0f && fabsf(beta) <= 4.0f &&
                       fz_mul(fz_mul(fz_mul(d->batch, d->m), d->n), d->k) <= ((size_t)1 << 24);
    unsigned char *got = fz_read(pool, slot[GR_C]);
    for (size_t bi = 0; bi < d->batch; bi++)
        for (size_t i = 0; i < d->m; i++)
            for (size_t j = 0; j < d->n; j++) {
                const size_t at = off[GR_C] + bi * c.stride + kiln_gemm_operand_at(&c, i, j);
                fz_mark_out(pool, slot[GR_C], at);
                if (!values)
                    continue;
                double sum = 0.0, abs_sum = 0.0;
                for (size_t p = 0; p < d->k; p++) {
                    double prod =
                        (double)fz_get(pool, slot[GR_A], off[GR_A] + bi * a.stride + kiln_gemm_operand_at(&a, i, p)) *
                        (double)fz_get(pool, slot[GR_B], off[GR_B] + bi * b.stride + kiln_gemm_operand_at(&b, p, j));
                    sum += prod;
                    abs_sum += fabs(prod);
                }
                double c0 = fz_get(pool, slot[GR_C], at);
                double ref = (double)alpha * sum + (beta != 0.0f ? (double)beta * c0 : 0.0);
                fz_check_close(kt_stored(got, d->dtype, at), ref,
                               gr_bound(d->k, alpha, abs_sum, beta, c0, d->dtype, d->math, ref), "C", at);
            }
    free(got);
    fz_check_unchanged(pool, "GEMM (outside C)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    kiln_gemm_desc d;
    kiln_layout layout = (kiln_layout)fz_enum(&f, 2);
    kiln_transpose ta = (kiln_transpose)fz_enum(&f, 2), tb = (kiln_transpose)fz_enum(&f, 2);
    size_t m = fz_size(&f, 20), n = fz_size(&f, 20), k = fz_size(&f, 24);
    kiln_gemm_desc_init(&d, layout, ta, tb, m, n, k);
    d.dtype = (kiln_dtype)fz_enum(&f, 3);
    d.algo = (kiln_gemm_algo)fz_enum(&f, 6);
    d.lda = vary(&f, d.lda), d.ldb = vary(&f, d.ldb), d.ldc = vary(&f, d.ldc);
    if (fz_one_in(&f, 3)) {
        d.batch = fz_size(&f, 4);
        struct kiln_gemm_operand a = kiln_gemm_operand_of(&d, GR_A), b = kiln_gemm_operand_of(&d, GR_B),
                                 c = kiln_gemm_operand_of(&d, GR_C);
        d.stride_a = vary(&f, gr_tight_stride(&a));
        d.stride_b = vary(&f, gr_tight_stride(&b));
        d.stride_c = vary(&f, gr_tight_stride(&c));
    }
    const float alpha = fz_scalar(&f), beta = fz_scalar(&f);
    size_t off[3];
    for (int w = GR_A; w <= GR_C; w++)
        off[w] = fz_one_in(&f, 4) ? (fz_one_in(&f, 4) ? fz_size(&f, 1) : fz_byte(&f) % 9) : 0;
    const unsigned mode = fz_byte(&f) % 3; /* plan, plan with an event, one-shot */
    uint64_t seed = fz_seed(&f);

    const kiln_dtype es = fz_storage(d.dtype);
    struct fz_pool pool = {0};
    int slot[3];
    kiln_buffer *buf[3];
    for (int w = GR_A; w <= GR_C; w++)
        buf[w] = fz_operand(&f, &pool, extent(&d, w, off[w]), es, &slot[w]);
    for (int w = GR_A; w <= GR_C; w++)
        if (slot[w] >= 0 && (w != GR_C || beta != 0.0f))
            fill(&pool, slot[w], &d, w, off[w], &seed);
    fz_upload(&pool);

    kiln_context *ctx = fz_context();
    kiln_event *ev = FZ_POISON_EVENT;
    kiln_status s;
    if (mode == 2) {
        fz_mark_detail();
        s = kiln_gemm(ctx, &d, alpha, buf[GR_A], off[GR_A], buf[GR_B], off[GR_B], beta, buf[GR_C], off[GR_C], &ev);
        fz_count("kiln_gemm", s);
    } else {
        kiln_gemm_plan *plan = (kiln_gemm_plan *)(uintptr_t)0x5a5a;
        fz_mark_detail();
        s = kiln_gemm_plan_create(ctx, &d, &plan);
        fz_count("kiln_gemm_plan_create", s);
        if (s != KILN_SUCCESS) {
            fz_check_rejected(s, "kiln_gemm_plan_create", NULL, &pool);
            if (plan != (kiln_gemm_plan *)(uintptr_t)0x5a5a)
                fz_fail("kiln_gemm_plan_create failed but wrote the plan handle");
            fz_pool_free(&pool);
            return 0;
        }
        fz_mark_detail();
        s = kiln_gemm_plan_execute(plan, alpha, buf[GR_A], off[GR_A], buf[GR_B], off[GR_B], beta, buf[GR_C], off[GR_C],
                                   mode == 1 ? &ev : NULL);
        fz_count("kiln_gemm_plan_execute", s);
        kiln_gemm_plan_destroy(plan);
    }
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, mode == 2 ? "kiln_gemm" : "kiln_gemm_plan_execute", &ev, &pool);
    } else {
        if (mode != 0)
            fz_finish_event(ev);
        check_result(&pool, &d, slot, off, alpha, beta);
    }
    fz_pool_free(&pool);
    return 0;
}
