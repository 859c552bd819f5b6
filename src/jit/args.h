/* A kernel's arguments, built in order and counted for you: buffers by
   backend handle, scalars by value (the builder keeps them). Adding past
   KILN_ARGS_MAX is remembered and reported once, by the launch. */
#ifndef KILN_JIT_ARGS_H
#define KILN_JIT_ARGS_H

#include <stdint.h>

#include "backend/backend.h"

#define KILN_ARGS_MAX 32

struct kiln_args {
    struct kiln_arg items[KILN_ARGS_MAX];
    union {
        int32_t i;
        uint64_t u;
        float f;
    } values[KILN_ARGS_MAX];
    unsigned count;
    int overflow;
};

/* A backend buffer handle (a kernel's pointer argument). */
void kiln_args_buffer(struct kiln_args *a, void *handle);
/* A buffer that may be absent: `fallback` stands in, which the kernel must
   not read (an unused epilogue operand). */
void kiln_args_buffer_or(struct kiln_args *a, void *handle, void *fallback);
void kiln_args_int(struct kiln_args *a, int32_t v);    /* OpenCL int */
void kiln_args_ulong(struct kiln_args *a, uint64_t v); /* OpenCL ulong */
void kiln_args_float(struct kiln_args *a, float v);
/* A by-value argument of `size` bytes the caller keeps at `value` until the
   launch returns (a CUDA tensor map: backends with native sources only). */
void kiln_args_bytes(struct kiln_args *a, const void *value, size_t size);

#endif /* KILN_JIT_ARGS_H */
