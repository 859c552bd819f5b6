/*
 * kiln OpenCL interoperation: run kiln on a caller's OpenCL objects and reach
 * the OpenCL objects behind kiln's handles.
 */
#ifndef KILN_KILN_CL_H
#define KILN_KILN_CL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Create a kiln context on a caller's OpenCL context, device and in-order
 * command queue. kiln retains the three objects and releases them in
 * kiln_context_destroy(); the caller keeps its own references and must still
 * release them itself (kiln does not take ownership).
 * @param options  only `profile`, `profile_overlay`, `cache_dir` and
 *                 `disable_disk_cache` are used; NULL for defaults.
 * @param out      receives a new context owned by the caller.
 * @return KILN_ERROR_INVALID_ARGUMENT for NULL objects, a cl_context or
 *         queue OpenCL does not recognise, a device that is not in the
 *         context, a queue on another context or device, or an out-of-order
 *         queue (kiln orders its work by the queue); KILN_ERROR_DEVICE if
 *         OpenCL fails a query on valid objects.
 */
KILN_API kiln_status kiln_context_wrap_cl(cl_context context, cl_device_id device, cl_command_queue queue,
                                          const kiln_context_options *options, kiln_context **out);

/** The OpenCL objects behind a context (not retained for the caller).
    Any of the out pointers may be NULL.
    @return KILN_ERROR_UNSUPPORTED if the context is not an OpenCL one. */
KILN_API kiln_status kiln_context_get_cl(const kiln_context *ctx, cl_context *context, cl_device_id *device,
                                         cl_command_queue *queue);

/**
 * Wrap a caller's cl_mem, which must belong to the context's cl_context. kiln
 * retains it and releases it in kiln_buffer_destroy(); the caller's reference
 * is untouched.
 * @param out  receives a new buffer handle owned by the caller.
 * @return KILN_ERROR_INVALID_ARGUMENT for NULL or a cl_mem of another context;
 *         KILN_ERROR_UNSUPPORTED if the context is not an OpenCL one.
 */
KILN_API kiln_status kiln_buffer_wrap_cl(kiln_context *ctx, cl_mem mem, kiln_buffer **out);

/** The cl_mem behind a buffer (not retained for the caller); NULL if none. */
KILN_API cl_mem kiln_buffer_get_cl(const kiln_buffer *buf);

/** The cl_event behind a kiln event (not retained for the caller). */
KILN_API cl_event kiln_event_get_cl(const kiln_event *event);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_CL_H */
