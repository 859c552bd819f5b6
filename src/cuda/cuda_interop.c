/* The public CUDA interoperation entry points (kiln/kiln_cuda.h). */
#include <stdint.h>
#include <stdlib.h>

#include "core/context.h"
#include "core/diag.h"
#include "cuda/cuda_api.h"
#include "cuda/cuda_backend.h"
#include "kiln/kiln_cuda.h"

kiln_status kiln_context_wrap_cuda(CUdevice device, CUstream stream, const kiln_context_options *options,
                                   kiln_context **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(out);
    const struct kiln_cuda_api *api = kiln_cuda_api_get();
    const int devices = api->nvrtc_lib ? api->devices : 0;
    if (device < 0 || device >= devices)
        return kiln_error(KILN_ERROR_NOT_FOUND, "CUDA device %d: kiln has %d CUDA devices (driver: %s; NVRTC: %s)",
                          device, devices, api->driver, api->nvrtc);
    const struct kiln_cuda_native native = {device, stream};
    return kiln_context_wrap_native(&kiln_cuda_backend, kiln_backend_device_index(&kiln_cuda_backend, (size_t)device),
                                    &native, options, out);
}

kiln_status kiln_context_get_cuda(const kiln_context *ctx, CUdevice *device, CUstream *stream)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    if (ctx->backend != &kiln_cuda_backend)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "the context runs on the %s backend, not CUDA", ctx->backend->name);
    return kiln_cuda_device_native(ctx->dev, device, stream);
}

kiln_status kiln_buffer_wrap_cuda(kiln_context *ctx, CUdeviceptr ptr, kiln_buffer **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(ptr);
    KILN_CHECK_ARG(out);
    if (ctx->backend != &kiln_cuda_backend)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "the context runs on the %s backend, not CUDA", ctx->backend->name);
    return kiln_buffer_wrap_native(ctx, &ptr, out);
}

CUdeviceptr kiln_buffer_get_cuda(const kiln_buffer *buf)
{
    return buf && buf->ctx->backend == &kiln_cuda_backend ? kiln_cuda_buffer_pointer(buf->handle) : 0;
}
