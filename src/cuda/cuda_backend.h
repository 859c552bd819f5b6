/* What the CUDA interoperation (cuda_interop.c) reaches in the CUDA
   backend's handles (cuda_backend.c). */
#ifndef KILN_CUDA_BACKEND_H
#define KILN_CUDA_BACKEND_H

#include <stdint.h>

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

/* A descriptor of the tensor memory accelerator (`map`, 128 bytes, 64-byte
   aligned) for values of `size` bytes (2: 16-bit, 4: fp32) of a 3-D array
   starting `offset` bytes into buffer `buf`: dims[0] contiguous, then
   dims[1] and dims[2] strides[0] and strides[1] bytes apart; boxes of `box`,
   128-byte swizzled, zeros out of bounds. KILN_ERROR_UNSUPPORTED where the
   driver has no such descriptors or refuses these (addresses 16-byte
   aligned, strides multiples of 16, box rows of 128 bytes at most). */
kiln_status kiln_cuda_tensor_map(const void *buf, size_t offset, size_t size, const uint64_t dims[3],
                                 const uint64_t strides[2], const unsigned box[3], void *map);

#endif /* KILN_CUDA_BACKEND_H */
