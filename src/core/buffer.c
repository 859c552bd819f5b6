/* Buffers: device memory owned by a context, with checked sizes and offsets. */
#include <stdint.h>
#include <stdlib.h>

#include "core/context.h"
#include "core/diag.h"

kiln_status kiln_check_range(const char *func, size_t capacity, size_t offset, size_t size)
{
    if (offset > capacity || size > capacity - offset)
        return kiln_error(KILN_ERROR_OUT_OF_BOUNDS, "%s: offset %zu + size %zu exceeds the buffer's %zu bytes", func,
                          offset, size, capacity);
    return KILN_SUCCESS;
}

static kiln_status buffer_new(kiln_context *ctx, void *handle, size_t size, kiln_buffer **out)
{
    kiln_buffer *buf = malloc(sizeof *buf);
    if (!buf) {
        ctx->backend->buffer_free(handle);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a buffer handle");
    }
    buf->ctx = ctx;
    buf->handle = handle;
    buf->size = size;
    *out = buf;
    return KILN_SUCCESS;
}

kiln_status kiln_buffer_create(kiln_context *ctx, size_t size, kiln_buffer **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(out);
    if (size == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_buffer_create: size must be at least 1 byte");
    if (ctx->desc.max_alloc_bytes && size > ctx->desc.max_alloc_bytes)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY,
                          "kiln_buffer_create: %zu bytes exceed the device's largest allocation (%llu bytes)", size,
                          ctx->desc.max_alloc_bytes);
    void *handle;
    kiln_status st = ctx->backend->buffer_alloc(ctx->dev, size, &handle);
    if (st != KILN_SUCCESS)
        return st;
    return buffer_new(ctx, handle, size, out);
}

kiln_status kiln_buffer_wrap_native(kiln_context *ctx, void *native, kiln_buffer **out)
{
    if (!ctx->backend->buffer_wrap)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "the %s backend cannot wrap native buffers", ctx->backend->name);
    void *handle;
    size_t size;
    kiln_status st = ctx->backend->buffer_wrap(ctx->dev, native, &size, &handle);
    if (st != KILN_SUCCESS)
        return st;
    return buffer_new(ctx, handle, size, out);
}

void kiln_buffer_destroy(kiln_buffer *buf)
{
    if (!buf)
        return;
    buf->ctx->backend->buffer_free(buf->handle);
    free(buf);
}

size_t kiln_buffer_size(const kiln_buffer *buf) { return buf ? buf->size : 0; }

kiln_status kiln_buffer_write(kiln_buffer *buf, size_t offset, size_t size, const void *src)
{
    kiln_error_clear();
    KILN_CHECK_ARG(buf);
    KILN_CHECK_ARG(src);
    kiln_status st = kiln_check_range(__func__, buf->size, offset, size);
    if (st != KILN_SUCCESS || size == 0)
        return st;
    return buf->ctx->backend->buffer_write(buf->ctx->dev, buf->handle, offset, size, src);
}

kiln_status kiln_buffer_read(const kiln_buffer *buf, size_t offset, size_t size, void *dst)
{
    kiln_error_clear();
    KILN_CHECK_ARG(buf);
    KILN_CHECK_ARG(dst);
    kiln_status st = kiln_check_range(__func__, buf->size, offset, size);
    if (st != KILN_SUCCESS || size == 0)
        return st;
    return buf->ctx->backend->buffer_read(buf->ctx->dev, buf->handle, offset, size, dst);
}
