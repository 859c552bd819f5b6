/* What the CUDA interoperation (cuda_interop.c) reaches in the CUDA
   backend's handles (cuda_backend.c). */
#ifndef KILN_CUDA_BACKEND_H
#define KILN_CUDA_BACKEND_H

#include "backend/backend.h"
#include "kiln/kiln_cuda.h"

extern const struct kiln_backend kiln_cuda_backend;

/* What the backend's wrap slot adopts: a device ordinal and a stream of the
   caller's in its primary context (NULL: the backend makes its own). */
struct kiln_cuda_native {
    CUdevice device;
    CUstream stream;
};

/* The ordinal and stream of a backend device handle (either may be NULL). */
kiln_status kiln_cuda_device_native(const void *dev, CUdevice *device, CUstream *stream);

/* The device pointer of a backend buffer handle. */
CUdeviceptr kiln_cuda_buffer_pointer(const void *buf);

#endif /* KILN_CUDA_BACKEND_H */
