/* Internals of the OpenCL backend shared by its files. */
#ifndef KILN_CL_BACKEND_H
#define KILN_CL_BACKEND_H

#include <pthread.h>

#include <CL/cl.h>

#include "backend/backend.h"
#include "kiln/kiln.h"

/* The backend's table (listed in src/backend/registry.c). */
extern const struct kiln_backend kiln_opencl_backend;

/* A device opened by the backend (handle behind the backend's `dev`). */
struct kiln_cl_device {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    long poll_us;         /* how long a wait polls before it blocks (0: it blocks at once) */
    size_t large_page;    /* large pages of this size for buffers of half one or more (0: none) */
    pthread_mutex_t lock; /* guards last */
    cl_event last;        /* the last kernel queued, for finish to poll; NULL when none */
};

/* Native objects handed to kiln_opencl_backend.wrap(). */
struct kiln_cl_native {
    cl_context context;
    cl_device_id device;
    cl_command_queue queue;
};

#define KILN_CL_MAX_DEVICES 64

/* Every (platform, device) pair of every platform, in a stable order: kiln's
   device enumeration. No platform at all is 0 devices, not an error. */
kiln_status kiln_cl_enumerate(cl_platform_id *platforms, cl_device_id *devices, size_t capacity, size_t *count);

/* "CL_INVALID_VALUE" etc.; "CL_UNKNOWN_ERROR(<n>)" in a static buffer otherwise. */
const char *kiln_cl_error_name(cl_int err);

/* Map an OpenCL error to a kiln status, recording "<call>: <error name>" as
   the detail. */
kiln_status kiln_cl_fail(cl_int err, const char *call);

#endif /* KILN_CL_BACKEND_H */
