/*
 * Helpers shared by the standalone neural-network operators (pool.c,
 * softmax.c, activation.c) and the direct convolution: overflow-safe tensor
 * sizes, operand checks, the powers of two their tilings pick and the
 * one-dimensional launch they all use.
 */
#ifndef KILN_OPS_NN_COMMON_H
#define KILN_OPS_NN_COMMON_H

#include <stddef.h>

#include "core/context.h"
#include "jit/args.h"

/* *out = a * b * c * d; 0 if the product overflows size_t (*out is then
   SIZE_MAX), 1 otherwise. */
int kiln_tensor_elements(size_t a, size_t b, size_t c, size_t d, size_t *out);

/* Check an operand `name` of `func`: it belongs to ctx (INVALID_ARGUMENT
   otherwise) and holds `elements` values of `elem_size` bytes
   (OUT_OF_BOUNDS otherwise, also when the byte count overflows). */
kiln_status kiln_tensor_check(const char *func, const char *name, const kiln_context *ctx, const kiln_buffer *buf,
                              size_t elements, size_t elem_size);

static inline size_t kiln_min_size(size_t a, size_t b) { return a < b ? a : b; }

/* The largest power of two <= cap that divides n. */
static inline size_t kiln_pow2_divisor(size_t n, size_t cap)
{
    size_t v = 1;
    while (v * 2 <= cap && n % (v * 2) == 0)
        v *= 2;
    return v;
}

/* The largest power of two <= n (n >= 1). */
static inline size_t kiln_pow2_floor(size_t n)
{
    size_t v = 1;
    while (v * 2 <= n)
        v *= 2;
    return v;
}

/* The smallest power of two >= n. */
static inline size_t kiln_pow2_ceil(size_t n)
{
    size_t v = 1;
    while (v < n)
        v *= 2;
    return v;
}

/* Launch kernel `name` of `source` (built once with the profile's `util`
   defines followed by `defines`) over `items` work-items in work-groups of
   `wg` (0: the profile's util.wg, which the kernel then declares as
   reqd_work_group_size(KILN_UTIL_WG, 1, 1); another size, the caller
   compiles into the kernel through `defines`), and if `event` is not NULL
   wrap the launch's event into *event. Nothing is queued when the build
   fails. */
kiln_status kiln_nn_launch(kiln_context *ctx, const char *source, const char *name, const char *defines,
                           const struct kiln_args *args, size_t items, size_t wg, kiln_event **event);

#endif /* KILN_OPS_NN_COMMON_H */
