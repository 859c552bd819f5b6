#include "jit/args.h"

static void *next(struct kiln_args *a, enum kiln_arg_kind kind, size_t size)
{
    if (a->count == KILN_ARGS_MAX) {
        a->overflow = 1;
        return NULL;
    }
    unsigned i = a->count++;
    a->items[i].kind = kind;
    a->items[i].size = size;
    a->items[i].value = kind == KILN_ARG_SCALAR ? &a->values[i] : NULL;
    return &a->values[i];
}

void kiln_args_buffer(struct kiln_args *a, void *handle)
{
    if (next(a, KILN_ARG_BUFFER, 0))
        a->items[a->count - 1].value = handle;
}

void kiln_args_buffer_or(struct kiln_args *a, void *handle, void *fallback)
{
    kiln_args_buffer(a, handle ? handle : fallback);
}

void kiln_args_int(struct kiln_args *a, int32_t v)
{
    int32_t *at = next(a, KILN_ARG_SCALAR, sizeof v);
    if (at)
        *at = v;
}

void kiln_args_ulong(struct kiln_args *a, uint64_t v)
{
    uint64_t *at = next(a, KILN_ARG_SCALAR, sizeof v);
    if (at)
        *at = v;
}

void kiln_args_float(struct kiln_args *a, float v)
{
    float *at = next(a, KILN_ARG_SCALAR, sizeof v);
    if (at)
        *at = v;
}

void kiln_args_bytes(struct kiln_args *a, const void *value, size_t size)
{
    if (next(a, KILN_ARG_SCALAR, size))
        a->items[a->count - 1].value = value;
}
