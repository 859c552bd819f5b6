/*
 * libFuzzer harness for kiln_activation_forward: every activation, slopes,
 * counts, in place or not, buffers drawn from the input (fuzz_util.h says
 * what is checked).
 */
#include <stdlib.h>

#include "fuzz_util.h"
#include "nn_ref.h"
#include "test_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    const kiln_activation act = (kiln_activation)fz_enum(&f, 7);
    const float slope = fz_scalar(&f);
    const size_t count = fz_one_in(&f, 4) ? fz_mul(fz_size(&f, 64), 67) : fz_size(&f, 64);
    const int with_event = fz_one_in(&f, 3);
    uint64_t seed = fz_seed(&f);

    struct fz_pool pool = {0};
    int sx, sy;
    kiln_buffer *x = fz_operand(&f, &pool, count, KILN_F32, &sx);
    kiln_buffer *y = fz_operand(&f, &pool, count, KILN_F32, &sy);
    if (sx >= 0)
        for (size_t i = 0; i < pool.b[sx].bytes / sizeof(float); i++) {
            float v;
            kt_fill_uniform(&v, 1, -8.0f, 8.0f, &seed);
            fz_set(&pool, sx, i, v);
        }
    fz_upload(&pool);

    kiln_event *ev = FZ_POISON_EVENT;
    fz_mark_detail();
    kiln_status s = kiln_activation_forward(fz_context(), act, slope, count, x, y, with_event ? &ev : NULL);
    fz_count("kiln_activation_forward", s);
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, "kiln_activation_forward", &ev, &pool);
        fz_pool_free(&pool);
        return 0;
    }
    if (with_event)
        fz_finish_event(ev);
    if (sx < 0 || sy < 0)
        fz_fail("kiln_activation_forward accepted a missing or foreign buffer");

    float *xv = malloc(count * sizeof *xv);
    double *want = malloc(count * sizeof *want), *tol = malloc(count * sizeof *tol);
    if (!xv || !want || !tol)
        fz_fail("out of host memory");
    for (size_t i = 0; i < count; i++)
        xv[i] = fz_get(&pool, sx, i);
    nr_activation_reference(act, slope, count, xv, want, tol);
    unsigned char *got = fz_read(&pool, sy);
    for (size_t i = 0; i < count; i++) {
        fz_check_close(kt_stored(got, KILN_F32, i), want[i], tol[i], "activation output", i);
        fz_mark_out(&pool, sy, i);
    }
    fz_check_unchanged(&pool, "kiln_activation_forward (outside y)");
    free(got), free(xv), free(want), free(tol);
    fz_pool_free(&pool);
    return 0;
}
