/* Internals of the OpenCL backend shared by its files. */
#ifndef KILN_CL_BACKEND_H
#define KILN_CL_BACKEND_H

#include <pthread.h>

#include <CL/cl.h>

#include "backend/backend.h"
#include "kiln/kiln.h"

/* The backend's table (listed in src/backend/registry.c). */
extern const struct kiln_backend kiln_opencl_backend;

/* The most threads kiln runs a CPU device's launches on. */
#define KILN_CL_MAX_PARTS 16

/* kiln's threads for a CPU device (cl_crew.c): kiln_cl_crew_run calls
   fn(arg, 0) on the calling thread and fn(arg, part) on each of the crew's
   parts - 1 threads (of 64 MiB stacks) that joins in time, and returns when
   all those have. A thread joins while the caller's fn(arg, 0) runs, so fn
   shares its work among the parts as they come, and fn(arg, 0) returns
   only once no work is left to take. */
struct kiln_cl_crew;
kiln_status kiln_cl_crew_start(unsigned parts, struct kiln_cl_crew **out);
void kiln_cl_crew_stop(struct kiln_cl_crew *crew);
void kiln_cl_crew_run(struct kiln_cl_crew *crew, void (*fn)(void *arg, unsigned part), void *arg);

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
    /* kiln's threads (docs/pocl.md, "kiln's threads"): parts > 1 runs every
       launch as `parts` copies, part i on part_queue[i] of POCL's single-core
       device part_device[i], part 0 on the calling thread and the others on
       the crew's; 0 where the device's own queue runs them. */
    unsigned parts;
    cl_device_id part_device[KILN_CL_MAX_PARTS];
    cl_command_queue part_queue[KILN_CL_MAX_PARTS];
    struct kiln_cl_crew *crew;
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
