/* The public OpenCL interoperation entry points (kiln/kiln_cl.h). */
#include <stdint.h>
#include <stdlib.h>

#include "core/context.h"
#include "core/diag.h"
#include "kiln/kiln_cl.h"
#include "opencl/cl_backend.h"

/* Check that `device` is in `context` and `queue` is an in-order queue on both. */
static kiln_status check_native(cl_context context, cl_device_id device, cl_command_queue queue)
{
    cl_uint ndev = 0;
    cl_int err = clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof ndev, &ndev, NULL);
    if (err != CL_SUCCESS)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "context: not a valid cl_context (%s)", kiln_cl_error_name(err));
    cl_device_id devs[64];
    if (ndev > 64)
        ndev = 64;
    if ((err = clGetContextInfo(context, CL_CONTEXT_DEVICES, ndev * sizeof *devs, devs, NULL)) != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetContextInfo(CL_CONTEXT_DEVICES)");
    int found = 0;
    for (cl_uint i = 0; i < ndev; i++)
        found |= devs[i] == device;
    if (!found)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "device: not a device of the given cl_context");

    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    cl_command_queue_properties props = 0;
    if ((err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL)) != CL_SUCCESS ||
        (err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL)) != CL_SUCCESS ||
        (err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL)) != CL_SUCCESS)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "queue: not a valid cl_command_queue (%s)",
                          kiln_cl_error_name(err));
    if (qctx != context || qdev != device)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "queue: belongs to another cl_context or device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "queue: must be in-order (kiln orders its work by the queue)");
    return KILN_SUCCESS;
}

/* Position of `device` in kiln's enumeration, SIZE_MAX if absent. */
static size_t enumeration_index(cl_device_id device)
{
    cl_platform_id plats[KILN_CL_MAX_DEVICES];
    cl_device_id devs[KILN_CL_MAX_DEVICES];
    size_t count = 0;
    if (kiln_cl_enumerate(plats, devs, KILN_CL_MAX_DEVICES, &count) != KILN_SUCCESS)
        return SIZE_MAX;
    for (size_t i = 0; i < count; i++)
        if (devs[i] == device)
            return kiln_backend_device_index(&kiln_opencl_backend, i);
    return SIZE_MAX;
}

kiln_status kiln_context_wrap_cl(cl_context context, cl_device_id device, cl_command_queue queue,
                                 const kiln_context_options *options, kiln_context **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(context);
    KILN_CHECK_ARG(device);
    KILN_CHECK_ARG(queue);
    KILN_CHECK_ARG(out);
    kiln_status st = check_native(context, device, queue);
    if (st != KILN_SUCCESS)
        return st;
    const struct kiln_cl_native native = {context, device, queue};
    return kiln_context_wrap_native(&kiln_opencl_backend, enumeration_index(device), &native, options, out);
}

kiln_status kiln_context_get_cl(const kiln_context *ctx, cl_context *context, cl_device_id *device,
                                cl_command_queue *queue)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    if (ctx->backend != &kiln_opencl_backend)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "the context runs on the %s backend, not OpenCL", ctx->backend->name);
    const struct kiln_cl_device *d = ctx->dev;
    if (context)
        *context = d->context;
    if (device)
        *device = d->device;
    if (queue)
        *queue = d->queue;
    return KILN_SUCCESS;
}

kiln_status kiln_buffer_wrap_cl(kiln_context *ctx, cl_mem mem, kiln_buffer **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(mem);
    KILN_CHECK_ARG(out);
    if (ctx->backend != &kiln_opencl_backend)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "the context runs on the %s backend, not OpenCL", ctx->backend->name);
    return kiln_buffer_wrap_native(ctx, mem, out);
}

cl_event kiln_event_get_cl(const kiln_event *event)
{
    return event && event->backend == &kiln_opencl_backend ? (cl_event)event->handle : NULL;
}

cl_mem kiln_buffer_get_cl(const kiln_buffer *buf)
{
    return buf && buf->ctx->backend == &kiln_opencl_backend ? (cl_mem)buf->handle : NULL;
}
