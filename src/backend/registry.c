/*
 * The registry of backends: the backends compiled into this library, in the
 * order kiln enumerates their devices. Adding a backend is one declaration
 * and one entry here.
 */
#include <stdint.h>

#include "backend/backend.h"

extern const struct kiln_backend kiln_opencl_backend, kiln_cuda_backend;

/* OpenCL first, so that the OpenCL devices keep their indices whether or not
   a CUDA driver is present. A GPU listed by both is the default through CUDA
   (src/core/device_choice.c, docs/cuda.md#choosing-the-device). */
const struct kiln_backend *const kiln_backends[] = {
    &kiln_opencl_backend,
    &kiln_cuda_backend,
    NULL,
};

size_t kiln_backend_device_index(const struct kiln_backend *backend, size_t index)
{
    size_t first = 0;
    for (const struct kiln_backend *const *be = kiln_backends; *be; be++) {
        if (*be == backend)
            return first + index;
        size_t count = 0;
        if ((*be)->list_devices(NULL, 0, &count) != KILN_SUCCESS)
            return SIZE_MAX;
        first += count;
    }
    return SIZE_MAX;
}
