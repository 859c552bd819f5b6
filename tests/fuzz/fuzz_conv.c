/*
 * libFuzzer harness for 2-D convolution: kiln_conv2d_output_size,
 * kiln_conv2d_plan_create, kiln_conv2d_plan_execute and kiln_conv2d with
 * descriptors, epilogues, algorithms and buffers drawn from the input
 * (fuzz_util.h says what is checked). A plan with constant weights runs a
 * second time on another weights buffer, which it must repack.
 */
#include "conv_ref.h"
#include "fuzz_util.h"

/* Elements of each operand, saturating (0 for an empty output). */
static void counts_of(const kiln_conv2d_desc *d, const struct kiln_conv_dims *m, size_t count[CR_OPERANDS])
{
    for (int o = CR_X; o <= CR_Y; o++)
        count[o] = kiln_conv_tensor_count(d, m, o);
}

/* A size that is usually `common`, sometimes another small one, rarely
   anything fz_size draws. */
static size_t usually(struct fz *f, size_t common, size_t small)
{
    unsigned b = fz_byte(f);
    if (b < 160)
        return common;
    return b < 224 ? 1 + b % small : fz_size(f, small);
}

/* A size: usually 1 to `small`, `zero` when the input has run out, rarely
   anything fz_size draws. */
static size_t dim(struct fz *f, size_t small, size_t zero)
{
    unsigned b = fz_byte(f);
    return b < 224 ? 1 + (b + zero - 1) % small : fz_size(f, small);
}

/* A padding: usually none or half the filter (same-size output), sometimes
   anything small. */
static size_t padding(struct fz *f, size_t r)
{
    unsigned b = fz_byte(f);
    if (b < 96)
        return 0;
    if (b < 200)
        return (r - 1) / 2;
    return b < 240 ? b % 4 : fz_size(f, 4);
}

/* Fresh uniform values in [-a, a) at the operand's elements that its
   buffer holds (elements of type `es`, whatever the buffer was made for). */
static void fill(struct fz_pool *pool, int slot, size_t count, kiln_dtype es, float a, uint64_t *seed)
{
    const size_t have = pool->b[slot].bytes / kt_elem_size(es);
    for (size_t i = 0; i < count && i < have; i++) {
        float v;
        kt_fill_uniform(&v, 1, -a, a, seed);
        fz_set_as(pool, slot, i, es, v);
    }
}

/* An operand's values as the device sees them, in a new array. */
static float *values_of(const struct fz_pool *pool, int slot, size_t count, kiln_dtype es)
{
    float *v = malloc((count ? count : 1) * sizeof *v);
    if (!v)
        fz_fail("out of host memory");
    for (size_t i = 0; i < count; i++)
        v[i] = fz_get_as(pool, slot, i, es);
    return v;
}

/* After a successful execution by `algo`: every element of y within
   kiln_conv_bound of the double-precision reference, every other byte of every
   buffer unchanged. Values are compared only for sane scalars and a
   reference of bounded cost. */
static void check_result(struct fz_pool *pool, const kiln_conv2d_desc *d, const int slot[CR_OPERANDS],
                         kiln_conv_algo algo)
{
    for (int o = CR_X; o <= CR_Y; o++)
        if (slot[o] < 0 && kiln_conv_tensor_used(d, o))
            fz_fail("conv2d accepted a missing or foreign buffer (operand %d)", o);
    for (int o = CR_X; o < CR_Y; o++)
        if (slot[o] == slot[CR_Y])
            fz_fail("conv2d accepted y in the buffer of input %d", o);
    const struct kiln_conv_dims m = kiln_conv_dims_of(d);
    size_t count[CR_OPERANDS];
    counts_of(d, &m, count);
    const kiln_dtype es = fz_storage(d->dtype);
    const int values = fabsf(d->alpha) <= 4.0f && fabsf(d->beta) <= 4.0f && fabsf(d->leaky_slope) <= 4.0f &&
                       fz_mul(fz_mul(count[CR_Y], m.k_eff), d->fused_maxpool ? 4 : 1) <= ((size_t)1 << 24);
    unsigned char *got = fz_read(pool, slot[CR_Y]);
    for (size_t i = 0; i < count[CR_Y]; i++)
        fz_mark_out(pool, slot[CR_Y], i);
    if (values) {
        float *x = values_of(pool, slot[CR_X], count[CR_X], es), *w = values_of(pool, slot[CR_W], count[CR_W], es);
        float *bias = d->has_bias ? values_of(pool, slot[CR_BIAS], count[CR_BIAS], KILN_F32) : NULL;
        float *z = d->beta != 0.0f ? values_of(pool, slot[CR_Z], count[CR_Z], es) : NULL;
        double *ref = malloc(count[CR_Y] * sizeof *ref), *bound = malloc(count[CR_Y] * sizeof *bound);
        if (!ref || !bound)
            fz_fail("out of host memory");
        cr_reference(d, x, w, bias, z, kiln_conv_algo_tol(algo, m.k_eff), ref, bound);
        for (size_t i = 0; i < count[CR_Y]; i++)
            fz_check_close(kt_stored(got, d->dtype, i), ref[i], bound[i], "y", i);
        free(x), free(w), free(bias), free(z), free(ref), free(bound);
    }
    free(got);
    fz_check_unchanged(pool, "conv2d (outside y)");
}

/* The algorithm a plan for d runs (for the one-shot call, which hands out
   no plan: a new plan chooses the same). */
static kiln_conv_algo algo_of(const kiln_conv2d_plan *plan, const kiln_conv2d_desc *d)
{
    kiln_conv2d_plan *own = NULL;
    if (!plan) {
        kiln_status s = kiln_conv2d_plan_create(fz_context(), d, &own);
        if (s != KILN_SUCCESS)
            fz_fail("kiln_conv2d succeeded but a plan for it fails: %s: %s", kiln_status_string(s),
                    kiln_last_error_detail());
        plan = own;
    }
    kiln_conv2d_plan_info info;
    kiln_status s = kiln_conv2d_plan_describe(plan, &info);
    if (s != KILN_SUCCESS)
        fz_fail("kiln_conv2d_plan_describe: %s", kiln_status_string(s));
    if (info.algo == KILN_CONV_AUTO || (d->algo != KILN_CONV_AUTO && info.algo != d->algo))
        fz_fail("a plan for algorithm %d runs %d (%s)", (int)d->algo, (int)info.algo, info.name);
    kiln_conv2d_plan_destroy(own);
    return info.algo;
}

/* kiln_conv2d_output_size agrees with the documented formula, or fails
   cleanly; returns its status, which plan creation must then return too. */
static kiln_status check_output_size(const kiln_conv2d_desc *d)
{
    size_t p = 0, q = 0, yh = 0, yw = 0;
    fz_mark_detail();
    kiln_status s = kiln_conv2d_output_size(d, &p, &q, &yh, &yw);
    fz_count("kiln_conv2d_output_size", s);
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, "kiln_conv2d_output_size", NULL, NULL);
        return s;
    }
    const struct kiln_conv_dims m = kiln_conv_dims_of(d);
    if (p != m.p || q != m.q || yh != m.yh || yw != m.yw || p == 0 || q == 0 || yh == 0 || yw == 0)
        fz_fail("kiln_conv2d_output_size: %zux%zu (stored %zux%zu), the formula %zux%zu (%zux%zu)", p, q, yh, yw, m.p,
                m.q, m.yh, m.yw);
    return s;
}

/* Groups, channels and filters: usually one group, sometimes a few,
   sometimes depthwise, sometimes anything. */
static void draw_groups(struct fz *f, kiln_conv2d_desc *d)
{
    unsigned how = fz_byte(f) % 8;
    if (how < 4) {
        d->groups = 1, d->c = dim(f, 8, 4), d->k = dim(f, 8, 4);
    } else if (how < 6) {
        d->groups = 2 + fz_byte(f) % 3;
        d->c = fz_mul(d->groups, fz_size(f, 3)), d->k = fz_mul(d->groups, fz_size(f, 3));
    } else if (how == 6) {
        d->groups = d->c = d->k = fz_size(f, 8);
    } else {
        d->groups = fz_size(f, 4), d->c = fz_size(f, 8), d->k = fz_size(f, 8);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, (kiln_tensor_layout)fz_enum(&f, 2), 1, 1, 1, 1, 1, 1, 1);
    d.dtype = (kiln_dtype)fz_enum(&f, 3);
    d.n = usually(&f, 1, 3);
    draw_groups(&f, &d);
    d.h = dim(&f, 12, 8), d.w = dim(&f, 12, 8);
    d.r = usually(&f, 3, 5), d.s = fz_byte(&f) < 192 ? d.r : fz_size(&f, 5);
    d.stride_h = usually(&f, 1, 3), d.stride_w = fz_byte(&f) < 192 ? d.stride_h : usually(&f, 1, 3);
    d.dilation_h = usually(&f, 1, 3), d.dilation_w = fz_byte(&f) < 192 ? d.dilation_h : usually(&f, 1, 3);
    d.pad_top = padding(&f, d.r), d.pad_left = padding(&f, d.s);
    d.pad_bottom = fz_byte(&f) < 192 ? d.pad_top : padding(&f, d.r);
    d.pad_right = fz_byte(&f) < 192 ? d.pad_left : padding(&f, d.s);
    d.alpha = fz_scalar(&f);
    d.beta = fz_one_in(&f, 2) ? fz_scalar(&f) : 0.0f;
    d.has_bias = fz_flag(&f);
    d.activation = (kiln_activation)fz_enum(&f, 7);
    if (fz_one_in(&f, 2))
        d.leaky_slope = fz_scalar(&f);
    d.fused_maxpool = fz_one_in(&f, 4) ? fz_flag(&f) : 0;
    d.algo = fz_one_in(&f, 2) ? KILN_CONV_AUTO : (kiln_conv_algo)fz_enum(&f, 7);
    d.constant_weights = fz_one_in(&f, 3) ? fz_flag(&f) : 0;
    d.find = fz_one_in(&f, 64);            /* times every algorithm: slow */
    const unsigned mode = fz_byte(&f) % 3; /* plan, plan with an event, one-shot */
    const int spare_bias = fz_one_in(&f, 8), spare_z = fz_one_in(&f, 8);
    uint64_t seed = fz_seed(&f);

    const kiln_status sized = check_output_size(&d);
    const struct kiln_conv_dims m = kiln_conv_dims_of(&d);
    size_t count[CR_OPERANDS];
    counts_of(&d, &m, count);
    const kiln_dtype es = fz_storage(d.dtype);
    struct fz_pool pool = {0};
    int slot[CR_OPERANDS] = {-1, -1, -1, -1, -1};
    kiln_buffer *buf[CR_OPERANDS] = {0};
    for (int o = CR_X; o <= CR_Y; o++) {
        if ((o == CR_BIAS && !d.has_bias && !spare_bias) || (o == CR_Z && d.beta == 0.0f && !spare_z))
            continue;
        buf[o] = fz_operand(&f, &pool, count[o], o == CR_BIAS ? KILN_F32 : es, &slot[o]);
    }
    /* Weights of about the spread that keeps an output near one input's
       (conv_ref.h's cr_case_fill). */
    const float wa = (float)sqrt(3.0 / (double)(m.k_eff ? m.k_eff : 1));
    for (int o = CR_X; o < CR_Y; o++)
        if (slot[o] >= 0)
            fill(&pool, slot[o], count[o], o == CR_BIAS ? KILN_F32 : es, o == CR_W ? wa : 1.0f, &seed);
    fz_upload(&pool);

    kiln_context *ctx = fz_context();
    kiln_event *ev = FZ_POISON_EVENT;
    kiln_conv2d_plan *plan = NULL;
    kiln_status s;
    if (mode == 2) {
        fz_mark_detail();
        s = kiln_conv2d(ctx, &d, buf[CR_X], buf[CR_W], buf[CR_BIAS], buf[CR_Z], buf[CR_Y], &ev);
        fz_count("kiln_conv2d", s);
        if (sized != KILN_SUCCESS && s != sized)
            fz_fail("kiln_conv2d returned %s where kiln_conv2d_output_size returned %s", kiln_status_string(s),
                    kiln_status_string(sized));
    } else {
        plan = (kiln_conv2d_plan *)(uintptr_t)0x5a5a;
        fz_mark_detail();
        s = kiln_conv2d_plan_create(ctx, &d, &plan);
        fz_count("kiln_conv2d_plan_create", s);
        if (s != KILN_SUCCESS) {
            fz_check_rejected(s, "kiln_conv2d_plan_create", NULL, &pool);
            if (plan != (kiln_conv2d_plan *)(uintptr_t)0x5a5a)
                fz_fail("kiln_conv2d_plan_create failed but wrote the plan handle");
            if (sized != KILN_SUCCESS && s != sized)
                fz_fail("kiln_conv2d_plan_create returned %s where kiln_conv2d_output_size returned %s",
                        kiln_status_string(s), kiln_status_string(sized));
            fz_pool_free(&pool);
            return 0;
        }
        if (sized != KILN_SUCCESS)
            fz_fail("kiln_conv2d_plan_create accepted what kiln_conv2d_output_size rejects");
        fz_mark_detail();
        s = kiln_conv2d_plan_execute(plan, buf[CR_X], buf[CR_W], buf[CR_BIAS], buf[CR_Z], buf[CR_Y],
                                     mode == 1 ? &ev : NULL);
        fz_count("kiln_conv2d_plan_execute", s);
    }
    if (s != KILN_SUCCESS) {
        fz_check_rejected(s, mode == 2 ? "kiln_conv2d" : "kiln_conv2d_plan_execute", &ev, &pool);
    } else {
        if (mode != 0)
            fz_finish_event(ev);
        const kiln_conv_algo algo = algo_of(plan, &d);
        check_result(&pool, &d, slot, algo);
        if (plan && d.constant_weights) {
            /* Other weights in a new exact buffer (an exhausted input
               draws one): the plan must repack them. y is poisoned again. */
            struct fz none = {NULL, 0};
            kiln_buffer *w2 = fz_operand(&none, &pool, count[CR_W], es, &slot[CR_W]);
            if (w2) {
                fill(&pool, slot[CR_W], count[CR_W], es, wa, &seed);
                fz_upload(&pool);
                s = kiln_conv2d_plan_execute(plan, buf[CR_X], w2, buf[CR_BIAS], buf[CR_Z], buf[CR_Y], NULL);
                fz_count("kiln_conv2d_plan_execute (new weights)", s);
                if (s != KILN_SUCCESS)
                    fz_fail("kiln_conv2d_plan_execute with new weights: %s: %s", kiln_status_string(s),
                            kiln_last_error_detail());
                check_result(&pool, &d, slot, algo);
            }
        }
    }
    kiln_conv2d_plan_destroy(plan);
    fz_pool_free(&pool);
    return 0;
}
