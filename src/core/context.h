/* What a kiln_context and a kiln_buffer hold (internal). */
#ifndef KILN_CONTEXT_H
#define KILN_CONTEXT_H

#include <stddef.h>

#include "backend/backend.h"
#include "jit/program_cache.h"
#include "kiln/kiln.h"

struct kiln_profile_set;
struct kiln_profile;

struct kiln_context {
    const struct kiln_backend *backend;
    void *dev;           /* backend device handle */
    size_t device_index; /* in kiln's enumeration; SIZE_MAX if unknown */
    /* Its index in its backend's list (SIZE_MAX if unknown), the other
       backend's listing of the same device, and why it was chosen
       (kiln_device_info's backend_index, same_device and selection). */
    size_t backend_index;
    char same_device[192];
    char selection[384];
    struct kiln_device_desc desc;
    struct kiln_profile_set *profiles;
    const struct kiln_profile *profile; /* matched or forced (owned by profiles), or overlay */
    struct kiln_profile *overlay;       /* the matched profile with the options' overlay, or NULL */
    char profile_reason[256];
    struct kiln_program_cache cache;
    int cache_ready;        /* cache initialised (its lock exists) */
    struct kiln_memo *memo; /* choices made by timing (conv find); under cache.lock */
    /* The operators may choose kernels written in OpenCL's vector syntax:
       the backend's vector_kernels, unless KILN_CUDA_ROUTES=1 asks an
       OpenCL device to choose as the CUDA backend does (for tests). */
    int vector_kernels;
};

/* A remembered choice: key -> value strings, newest first. */
struct kiln_memo {
    char *key, *value;
    struct kiln_memo *next;
};

struct kiln_buffer {
    kiln_context *ctx;
    void *handle; /* backend buffer handle */
    size_t size;
};

/* Fill the public description from a backend description and its profile
   (of `set`, or derived from one of its profiles). */
void kiln_device_info_fill(const struct kiln_device_desc *desc, size_t index, const char *backend,
                           const struct kiln_profile_set *set, const struct kiln_profile *profile, const char *reason,
                           kiln_device_info *info);

/* Finish a context whose backend, dev and device_index are set: describe the
   device, load and match profiles, set up the program cache. Frees nothing on
   failure (the caller destroys the context). */
kiln_status kiln_context_init(kiln_context *ctx, const kiln_context_options *options);

/* A context on native objects a caller owns: `backend`'s wrap adopts
   `native`, the device being `device_index` in kiln's enumeration
   (SIZE_MAX if unknown); then as kiln_context_init. */
kiln_status kiln_context_wrap_native(const struct kiln_backend *backend, size_t device_index, const void *native,
                                     const kiln_context_options *options, kiln_context **out);

struct kiln_event {
    const struct kiln_backend *backend;
    void *handle; /* backend event handle */
};

/* Wrap a backend event handle into *out (releasing it on failure). */
kiln_status kiln_event_new(const struct kiln_backend *backend, void *handle, kiln_event **out);

/* Adopt a backend-native buffer (for OpenCL a cl_mem) into a kiln_buffer. */
kiln_status kiln_buffer_wrap_native(kiln_context *ctx, void *native, kiln_buffer **out);

/* Check that [offset, offset + size) lies within `capacity` bytes, without
   overflow; OUT_OF_BOUNDS naming `func` otherwise. */
kiln_status kiln_check_range(const char *func, size_t capacity, size_t offset, size_t size);

/* Reject a NULL argument with a detail naming it. */
#define KILN_CHECK_ARG(arg)                                                                                            \
    do {                                                                                                               \
        if (!(arg))                                                                                                    \
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s must not be NULL", __func__, #arg);                 \
    } while (0)

#endif /* KILN_CONTEXT_H */
