/*
 * libFuzzer harness for 2-D pooling: kiln_pool2d_output_size and
 * kiln_pool2d with descriptors and buffers drawn from the input
 * (fuzz_util.h says what is checked).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "nn_ref.h"
#include "test_util.h"

/* A padding: usually none, sometimes a little, rarely anything. */
static size_t padding(struct fz *f)
{
    unsigned b = fz_byte(f);
    return b < 160 ? 0 : b < 250 ? b % 3 : fz_size(f, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    kiln_pool2d_desc d;
    memset(&d, 0, sizeof d);
    d.layout = (kiln_tensor_layout)fz_enum(&f, 2);
    d.mode = (kiln_pool_mode)fz_enum(&f, 2);
    d.n = fz_size(&f, 3), d.c = fz_size(&f, 6), d.h = fz_size(&f, 12), d.w = fz_size(&f, 12);
    d.window_h = fz_size(&f, 4), d.window_w = fz_size(&f, 4);
    d.stride_h = fz_size(&f, 3), d.stride_w = fz_size(&f, 3);
    d.pad_top = padding(&f), d.pad_bottom = padding(&f), d.pad_left = padding(&f), d.pad_right = padding(&f);
    d.count_include_pad = fz_flag(&f);
    const int with_event = fz_one_in(&f, 3);
    uint64_t seed = fz_seed(&f);

    size_t yh = 0, yw = 0;
    fz_mark_detail();
    kiln_status shape = kiln_pool2d_output_size(&d, &yh, &yw);
    fz_count("kiln_pool2d_output_size", shape);
    if (shape != KILN_SUCCESS)
        fz_check_rejected(shape, "kiln_pool2d_output_size", NULL, NULL);
    const size_t images = fz_mul(d.n, d.c);
    const size_t nx = fz_mul(images, fz_mul(d.h, d.w)), ny = shape == KILN_SUCCESS ? fz_mul(images, fz_mul(yh, yw)) : 1;

    struct fz_pool pool = {0};
    int sx, sy;
    kiln_buffer *x = fz_operand(&f, &pool, nx, KILN_F32, &sx);
    kiln_buffer *y = fz_operand(&f, &pool, ny, KILN_F32, &sy);
    if (sx >= 0)
        for (size_t i = 0; i < pool.b[sx].bytes / sizeof(float); i++) {
            float v;
            kt_fill_uniform(&v, 1, -1.0f, 1.0f, &seed);
            fz_set(&pool, sx, i, v);
        }
    fz_upload(&pool);

    kiln_event *ev = FZ_POISON_EVENT;
    fz_mark_detail();
    kiln_status s = kiln_pool2d(fz_context(), &d, x, y, with_event ? &ev : NULL);
    fz_count("kiln_pool2d", s);
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, "kiln_pool2d", &ev, &pool);
        fz_pool_free(&pool);
        return 0;
    }
    if (with_event)
        fz_finish_event(ev);
    if (shape != KILN_SUCCESS)
        fz_fail("kiln_pool2d accepted a descriptor kiln_pool2d_output_size rejects");
    if (sx < 0 || sy < 0 || sx == sy)
        fz_fail("kiln_pool2d accepted a missing, foreign or aliased buffer");

    float *xv = malloc(nx * sizeof *xv);
    double *want = malloc(ny * sizeof *want), *tol = malloc(ny * sizeof *tol);
    if (!xv || !want || !tol)
        fz_fail("out of host memory");
    for (size_t i = 0; i < nx; i++)
        xv[i] = fz_get(&pool, sx, i);
    nr_pool_reference(&d, yh, yw, xv, want, tol);
    unsigned char *got = fz_read(&pool, sy);
    for (size_t i = 0; i < ny; i++) {
        fz_check_close(kt_stored(got, KILN_F32, i), want[i], tol[i], "pool output", i);
        fz_mark_out(&pool, sy, i);
    }
    fz_check_unchanged(&pool, "kiln_pool2d (outside y)");
    free(got), free(xv), free(want), free(tol);
    fz_pool_free(&pool);
    return 0;
}
