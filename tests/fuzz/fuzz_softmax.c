/*
 * libFuzzer harness for kiln_softmax: shapes [outer][dim][inner], logits of
 * several ranges, in place or not, buffers drawn from the input
 * (fuzz_util.h says what is checked).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "nn_ref.h"
#include "test_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    const size_t outer = fz_size(&f, 4), dim = fz_size(&f, 200), inner = fz_size(&f, 6);
    static const float centre[] = {0.0f, 0.0f, 1000.0f, -1000.0f}, half[] = {1.0f, 30.0f, 10.0f, 10.0f};
    const unsigned range = fz_byte(&f) % 4;
    const int with_event = fz_one_in(&f, 3);
    uint64_t seed = fz_seed(&f);
    const size_t n = fz_mul(outer, fz_mul(dim, inner));

    struct fz_pool pool = {0};
    int sx, sy;
    kiln_buffer *x = fz_operand(&f, &pool, n, KILN_F32, &sx);
    kiln_buffer *y = fz_operand(&f, &pool, n, KILN_F32, &sy);
    if (sx >= 0)
        for (size_t i = 0; i < pool.b[sx].bytes / sizeof(float); i++) {
            float v;
            kt_fill_uniform(&v, 1, centre[range] - half[range], centre[range] + half[range], &seed);
            fz_set(&pool, sx, i, v);
        }
    fz_upload(&pool);

    kiln_event *ev = FZ_POISON_EVENT;
    fz_mark_detail();
    kiln_status s = kiln_softmax(fz_context(), outer, dim, inner, x, y, with_event ? &ev : NULL);
    fz_count("kiln_softmax", s);
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, "kiln_softmax", &ev, &pool);
        fz_pool_free(&pool);
        return 0;
    }
    if (with_event)
        fz_finish_event(ev);
    if (sx < 0 || sy < 0)
        fz_fail("kiln_softmax accepted a missing or foreign buffer");

    float *xv = malloc(n * sizeof *xv);
    double *want = malloc(n * sizeof *want), *tol = malloc(n * sizeof *tol);
    if (!xv || !want || !tol)
        fz_fail("out of host memory");
    for (size_t i = 0; i < n; i++)
        xv[i] = fz_get(&pool, sx, i);
    nr_softmax_reference(outer, dim, inner, xv, want, tol);
    unsigned char *got = fz_read(&pool, sy);
    for (size_t i = 0; i < n; i++) {
        fz_check_close(kt_stored(got, KILN_F32, i), want[i], tol[i], "softmax output", i);
        fz_mark_out(&pool, sy, i);
    }
    fz_check_unchanged(&pool, "kiln_softmax (outside y)");
    free(got), free(xv), free(want), free(tol);
    fz_pool_free(&pool);
    return 0;
}
