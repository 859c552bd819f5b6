/*
 * Attention: validate a descriptor, derive the strides of its layout, choose
 * an algorithm (fused unless the caller asks for naive), check the operands
 * of each execution and run it.
 */
#include "ops/attention.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "ops/nn_common.h"
#include "profiles/profile.h"

#define KILN_ATTENTION_MAX_ROWS (1 << 30)

void kiln_attention_desc_init(kiln_attention_desc *desc, kiln_attention_layout layout, size_t batch, size_t heads,
                              size_t seq_q, size_t seq_kv, size_t head_dim)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->layout = layout;
    desc->dtype = KILN_F32;
    desc->batch = batch;
    desc->heads = desc->kv_heads = heads;
    desc->seq_q = seq_q;
    desc->seq_kv = seq_kv;
    desc->head_dim = head_dim;
    desc->scale = head_dim ? (float)(1.0 / sqrt((double)head_dim)) : 1.0f;
    desc->mask = KILN_ATTENTION_MASK_NONE;
    desc->algo = KILN_ATTENTION_AUTO;
}

/* Strides of a [batch][seq][heads][dim] (BSHD) or [batch][heads][seq][dim]
   tensor: batch item, head, position. */
static void strides(kiln_attention_layout layout, size_t seq, size_t heads, size_t dim, size_t out[3])
{
    out[0] = seq * heads * dim;
    out[1] = layout == KILN_BSHD ? dim : seq * dim;
    out[2] = layout == KILN_BSHD ? heads * dim : dim;
}

static kiln_status validate(const kiln_attention_desc *d, struct kiln_attention_shape *s)
{
    if ((unsigned)d->layout > KILN_BHSD)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: layout = %d is not a valid value", (int)d->layout);
    if ((unsigned)d->dtype > KILN_BF16)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: dtype = %d is not a valid value", (int)d->dtype);
    if ((unsigned)d->math > KILN_MATH_TF32)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: math = %d is not a valid value", (int)d->math);
    if ((unsigned)d->mask > KILN_ATTENTION_MASK_BHQK)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: mask = %d is not a valid value", (int)d->mask);
    if ((unsigned)d->algo > KILN_ATTENTION_NAIVE)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: algo = %d is not a valid value", (int)d->algo);
    const size_t sizes[] = {d->batch, d->heads, d->kv_heads, d->seq_q, d->seq_kv, d->head_dim};
    static const char *const names[] = {"batch", "heads", "kv_heads", "seq_q", "seq_kv", "head_dim"};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i] == 0)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: %s must be at least 1", names[i]);
    if (d->heads % d->kv_heads)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: heads = %zu is not a multiple of kv_heads = %zu",
                          d->heads, d->kv_heads);
    if (d->head_dim > KILN_ATTENTION_MAX_HEAD_DIM)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "attention: head_dim = %zu is above the largest supported, %d",
                          d->head_dim, KILN_ATTENTION_MAX_HEAD_DIM);
    if (!isfinite(d->scale))
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: scale = %g is not finite", (double)d->scale);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (sizes[i] > INT_MAX)
            return kiln_error(KILN_ERROR_UNSUPPORTED, "attention: %s = %zu is above %d", names[i], sizes[i], INT_MAX);
    memset(s, 0, sizeof *s);
    s->d = *d;
    s->group = d->heads / d->kv_heads;
    /* The kernels index rows and keys in int, a block past the last. */
    if (s->group * d->seq_q > KILN_ATTENTION_MAX_ROWS || d->seq_kv > KILN_ATTENTION_MAX_ROWS ||
        d->batch * d->kv_heads > INT_MAX)
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "attention: seq_q * heads / kv_heads = %zu and seq_kv = %zu must not exceed %d, "
                          "batch * kv_heads = %zu not %d",
                          s->group * d->seq_q, d->seq_kv, KILN_ATTENTION_MAX_ROWS, d->batch * d->kv_heads, INT_MAX);
    strides(d->layout, d->seq_q, d->heads, d->head_dim, s->q_stride);
    strides(d->layout, d->seq_kv, d->kv_heads, d->head_dim, s->kv_stride);
    size_t per_head = d->seq_q * d->seq_kv; /* below 2^62: both are below 2^31 */
    if (d->mask == KILN_ATTENTION_MASK_BQK)
        s->mask_stride[0] = per_head;
    if (d->mask == KILN_ATTENTION_MASK_BHQK)
        s->mask_stride[0] = d->heads * per_head, s->mask_stride[1] = per_head;
    const size_t mask_items = d->mask == KILN_ATTENTION_MASK_QK    ? 1
                              : d->mask == KILN_ATTENTION_MASK_BQK ? d->batch
                                                                   : d->batch * d->heads;
    if (!kiln_tensor_elements(d->batch, d->seq_q, d->heads, d->head_dim, &s->q_elems) ||
        !kiln_tensor_elements(d->batch, d->seq_kv, d->kv_heads, d->head_dim, &s->kv_elems) ||
        !kiln_tensor_elements(mask_items, per_head, d->mask != KILN_ATTENTION_MASK_NONE, 1, &s->mask_elems) ||
        !kiln_tensor_elements(d->batch, d->heads, d->seq_q, 1, &s->lse_elems) || s->q_elems > SIZE_MAX / 4 ||
        s->kv_elems > SIZE_MAX / 4 || s->mask_elems > SIZE_MAX / 4)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "attention: a tensor of this shape overflows the address space");
    return KILN_SUCCESS;
}

void kiln_attention_switches(const struct kiln_attention_shape *s, struct kiln_options *o)
{
    const kiln_attention_desc *d = &s->d;
    kiln_options_storage(o, d->dtype);
    kiln_options_add(o, "-DKILN_ATTN_CAUSAL=%d -DKILN_ATTN_MASK=%d -DKILN_ATTN_KEY_LENGTHS=%d -DKILN_ATTN_LSE=%d",
                     d->causal != 0, d->mask != KILN_ATTENTION_MASK_NONE, d->key_lengths != 0, d->lse != 0);
}

void kiln_attention_kernel_args(const struct kiln_attention_plan *plan, const struct kiln_attention_args *x,
                                struct kiln_args *a)
{
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    kiln_args_buffer(a, x->q);
    kiln_args_buffer(a, x->k);
    kiln_args_buffer(a, x->v);
    kiln_args_buffer_or(a, x->mask, x->o); /* O stands in for the operands not used (never read) */
    kiln_args_buffer_or(a, x->key_lengths, x->o);
    kiln_args_buffer(a, x->o);
    kiln_args_buffer_or(a, x->lse, x->o);
    kiln_args_int(a, (int32_t)d->seq_q);
    kiln_args_int(a, (int32_t)d->seq_kv);
    kiln_args_int(a, (int32_t)d->head_dim);
    kiln_args_int(a, (int32_t)d->heads);
    kiln_args_int(a, (int32_t)s->group);
    for (int i = 0; i < 3; i++)
        kiln_args_ulong(a, s->q_stride[i]);
    for (int i = 0; i < 3; i++)
        kiln_args_ulong(a, s->kv_stride[i]);
    kiln_args_ulong(a, s->mask_stride[0]);
    kiln_args_ulong(a, s->mask_stride[1]);
    kiln_args_float(a, (float)(d->scale * M_LOG2E));
}

static struct kiln_dims desc_dims(const kiln_attention_desc *d)
{
    struct kiln_dims dims = {{0}};
    dims.v[KILN_DIM_BATCH] = (long)(d->batch * d->heads);
    dims.v[KILN_DIM_SEQ_Q] = (long)d->seq_q;
    dims.v[KILN_DIM_SEQ_KV] = (long)d->seq_kv;
    dims.v[KILN_DIM_HEAD_DIM] = (long)d->head_dim;
    return dims;
}

kiln_status kiln_attention_desc_dims(const kiln_attention_desc *desc, struct kiln_dims *dims)
{
    struct kiln_attention_shape s;
    kiln_status st = validate(desc, &s);
    if (st == KILN_SUCCESS)
        *dims = desc_dims(desc);
    return st;
}

kiln_status kiln_attention_params(struct kiln_attention_plan *plan, enum kiln_group_id group, void *values)
{
    const struct kiln_dims dims = desc_dims(&plan->s.d);
    return kiln_plan_params(&plan->base, group, &dims, values);
}

kiln_status kiln_attention_plan_create(kiln_context *ctx, const kiln_attention_desc *desc, kiln_attention_plan **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(desc);
    KILN_CHECK_ARG(out);
    struct kiln_attention_shape s;
    kiln_status st = validate(desc, &s);
    if (st != KILN_SUCCESS)
        return st;

    /* AUTO takes the first entry: the fused kernel needs no score matrix. */
    static const struct kiln_attention_algorithm *const algorithms[] = {&kiln_attention_fused, &kiln_attention_naive};
    const struct kiln_attention_algorithm *algorithm = algorithms[0];
    for (size_t i = 0; i < sizeof algorithms / sizeof *algorithms; i++)
        if (algorithms[i]->algo == (int)desc->algo)
            algorithm = algorithms[i];
    const char *why = algorithm->unsupported ? algorithm->unsupported(&s) : NULL;
    if (why)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "attention: %s does not apply: %s", algorithm->name, why);
    kiln_attention_plan *plan =
        kiln_plan_new(ctx, sizeof *plan, algorithm->name, algorithm->algo,
                      desc->algo == KILN_ATTENTION_AUTO ? "auto: the fused kernel needs no score matrix" : "requested");
    if (!plan)
        return KILN_ERROR_OUT_OF_MEMORY;
    plan->s = s;
    plan->algorithm = algorithm;
    st = algorithm->prepare(plan);
    if (st != KILN_SUCCESS) {
        kiln_attention_plan_destroy(plan);
        return st;
    }
    kiln_log(KILN_LOG_INFO, "attention b%zu h%zu/%zu q%zu kv%zu d%zu%s: %s %s [%s] (%s)", desc->batch, desc->heads,
             desc->kv_heads, desc->seq_q, desc->seq_kv, desc->head_dim, desc->causal ? " causal" : "", algorithm->name,
             plan->base.kernel, plan->base.params, plan->base.reason);
    *out = plan;
    return KILN_SUCCESS;
}

/* An optional operand is given exactly when the descriptor asks for it. */
static kiln_status check_presence(const char *name, const kiln_buffer *buf, int wanted, const char *field)
{
    if (!wanted != !buf)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: %s must be given %s %s", name,
                          wanted ? "when" : "only when", field);
    return KILN_SUCCESS;
}

kiln_status kiln_attention_plan_execute(kiln_attention_plan *plan, const kiln_buffer *q, const kiln_buffer *k,
                                        const kiln_buffer *v, const kiln_buffer *mask, const kiln_buffer *key_lengths,
                                        kiln_buffer *o, kiln_buffer *lse, kiln_event **event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(plan);
    KILN_CHECK_ARG(q);
    KILN_CHECK_ARG(k);
    KILN_CHECK_ARG(v);
    KILN_CHECK_ARG(o);
    const struct kiln_attention_shape *s = &plan->s;
    const kiln_attention_desc *d = &s->d;
    kiln_status st = check_presence("mask", mask, d->mask != KILN_ATTENTION_MASK_NONE, "desc.mask is not NONE");
    if (st == KILN_SUCCESS)
        st = check_presence("key_lengths", key_lengths, d->key_lengths, "desc.key_lengths is set");
    if (st == KILN_SUCCESS)
        st = check_presence("lse", lse, d->lse, "desc.lse is set");
    if (st != KILN_SUCCESS)
        return st;

    const size_t elem = kiln_dtype_size(d->dtype);
    const struct {
        const char *name;
        const kiln_buffer *buf;
        size_t elems, elem;
    } operands[] = {
        {"q", q, s->q_elems, elem},
        {"k", k, s->kv_elems, elem},
        {"v", v, s->kv_elems, elem},
        {"mask", mask, s->mask_elems, sizeof(float)},
        {"key_lengths", key_lengths, d->batch, sizeof(int32_t)},
        {"o", o, s->q_elems, elem},
        {"lse", lse, s->lse_elems, sizeof(float)},
    };
    enum { INPUTS = 5, OPERANDS = sizeof operands / sizeof *operands };
    for (size_t i = 0; i < OPERANDS; i++)
        if (operands[i].buf && operands[i].buf->ctx != plan->base.ctx)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: %s belongs to another context",
                              operands[i].name);
    for (size_t out = INPUTS; out < OPERANDS; out++)
        for (size_t i = 0; i < out && operands[out].buf; i++)
            if (operands[i].buf && operands[i].buf->handle == operands[out].buf->handle)
                return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "attention: %s must not be the same buffer as %s",
                                  operands[out].name, operands[i].name);
    for (size_t i = 0; i < OPERANDS && st == KILN_SUCCESS; i++)
        if (operands[i].buf)
            st = kiln_tensor_check("attention", operands[i].name, plan->base.ctx, operands[i].buf, operands[i].elems,
                                   operands[i].elem);
    if (st != KILN_SUCCESS)
        return st;

    const struct kiln_attention_args args = {q->handle,
                                             k->handle,
                                             v->handle,
                                             mask ? mask->handle : NULL,
                                             key_lengths ? key_lengths->handle : NULL,
                                             o->handle,
                                             lse ? lse->handle : NULL};
    void *handle = NULL;
    st = plan->algorithm->execute(plan, &args, event ? &handle : NULL);
    return kiln_plan_event(&plan->base, st, handle, event);
}

kiln_status kiln_attention_plan_describe(const kiln_attention_plan *plan, kiln_attention_plan_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(plan);
    KILN_CHECK_ARG(info);
    KILN_PLAN_DESCRIBE(&plan->base, info, name);
    return KILN_SUCCESS;
}

void kiln_attention_plan_destroy(kiln_attention_plan *plan)
{
    if (plan && plan->algorithm && plan->algorithm->release)
        plan->algorithm->release(plan);
    kiln_plan_free(plan ? &plan->base : NULL);
}

kiln_status kiln_attention(kiln_context *ctx, const kiln_attention_desc *desc, const kiln_buffer *q,
                           const kiln_buffer *k, const kiln_buffer *v, const kiln_buffer *mask,
                           const kiln_buffer *key_lengths, kiln_buffer *o, kiln_buffer *lse, kiln_event **event)
{
    kiln_attention_plan *plan = NULL;
    kiln_status st = kiln_attention_plan_create(ctx, desc, &plan);
    if (st == KILN_SUCCESS)
        st = kiln_attention_plan_execute(plan, q, k, v, mask, key_lengths, o, lse, event);
    kiln_attention_plan_destroy(plan);
    return st;
}
