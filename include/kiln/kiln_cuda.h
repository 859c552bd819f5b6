/*
 * kiln CUDA interoperation: run kiln on a caller's CUDA device and stream,
 * and on its device memory, and reach the CUDA objects behind kiln's handles.
 *
 * kiln loads the CUDA driver at run time and links no CUDA library; this
 * header declares the three CUDA driver types it needs as cuda.h does, so it
 * may be included with or without cuda.h.
 */
#ifndef KILN_KILN_CUDA_H
#define KILN_KILN_CUDA_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUdevice;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

/**
 * Create a kiln context on CUDA device `device` (the driver's ordinal, as
 * cuDeviceGet takes it), in the device's primary context (which kiln
 * retains while the kiln context lives), queueing its work on `stream`: a
 * stream of the caller's in that context, which must outlive the kiln
 * context, or NULL for a stream of kiln's own. kiln never destroys a
 * caller's stream.
 * @param options  only `profile`, `profile_overlay`, `cache_dir` and
 *                 `disable_disk_cache` are used; NULL for defaults.
 * @return KILN_ERROR_NOT_FOUND if kiln has no CUDA device of that ordinal
 *         (no driver, no NVRTC, or fewer devices: the detail says which).
 */
KILN_API kiln_status kiln_context_wrap_cuda(CUdevice device, CUstream stream, const kiln_context_options *options,
                                            kiln_context **out);

/** The device ordinal and stream behind a context (the stream is kiln's own
    unless the caller gave one). Either out pointer may be NULL.
    @return KILN_ERROR_UNSUPPORTED if the context is not a CUDA one. */
KILN_API kiln_status kiln_context_get_cuda(const kiln_context *ctx, CUdevice *device, CUstream *stream);

/**
 * Wrap a caller's device allocation: `ptr` must be the start of an
 * allocation (cuMemAlloc, cudaMalloc) visible in the context's device
 * context; the buffer's size is the allocation's. kiln never frees it; the
 * caller frees it after kiln_buffer_destroy().
 * @return KILN_ERROR_INVALID_ARGUMENT for 0, a pointer that is no
 *         allocation or lies inside one; KILN_ERROR_UNSUPPORTED if the
 *         context is not a CUDA one.
 */
KILN_API kiln_status kiln_buffer_wrap_cuda(kiln_context *ctx, CUdeviceptr ptr, kiln_buffer **out);

/** The device pointer behind a buffer of a CUDA context; 0 otherwise. */
KILN_API CUdeviceptr kiln_buffer_get_cuda(const kiln_buffer *buf);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_CUDA_H */
