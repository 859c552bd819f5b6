/*
 * Built programs and their kernels, cached per context in memory (keyed by
 * source text and options) and on disk (keyed by platform, device, device and
 * driver versions, source hash and options), so a kernel is compiled once per
 * device and a second process loads the binary instead of compiling again.
 * Kernel sources are the context backend's (src/jit/sources.c); launches go
 * through the backend's launch slot, optionally timed on the device.
 */
#ifndef KILN_PROGRAM_CACHE_H
#define KILN_PROGRAM_CACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "jit/args.h"
#include "kiln/kiln.h"

struct kiln_program;

/* A kernel of a cached program. Launches of one kernel are serialised by its
   lock (its argument state is shared). */
struct kiln_kernel {
    void *handle;
    char name[64];
    pthread_mutex_t lock;
    struct kiln_kernel *next;
};

struct kiln_program_cache {
    pthread_mutex_t lock;
    struct kiln_program *programs; /* singly linked, newest first */
    char dir[512];                 /* "" when the disk cache is off */
    char disk_reason[256];         /* why it is off, "" when on */
    int programs_on_disk;          /* program binaries go to dir (else the driver's own cache keeps them) */
    uint64_t memory_hits, disk_hits, builds, discarded;
    atomic_uint_least64_t disk_failures; /* failed stores; needs no lock */
};

/* Call fn on each program the context's cache holds (its label, source
   text and build options), newest first, under the cache's lock: fn must
   not call into the context. */
void kiln_program_cache_each(kiln_context *ctx,
                             void (*fn)(void *user, const char *label, const char *source, size_t length,
                                        const char *options),
                             void *user);

/* Set up the cache; `dir` NULL or "" keeps programs in memory only, for
   `reason` (copied, may be NULL). */
kiln_status kiln_program_cache_init(struct kiln_program_cache *cache, const char *dir, const char *reason);

/* Store `payload` under `key` in the cache's directory, if it has one. A
   failure never fails the caller: it is counted in disk_failures, and the
   first of the cache is logged as a warning naming `what` (so a directory
   that breaks while the process runs warns once, not at every build). */
void kiln_program_cache_store(struct kiln_program_cache *cache, const char *what, const char *key, const void *payload,
                              size_t size);
void kiln_program_cache_release(struct kiln_program_cache *cache, const struct kiln_backend *backend);

/* The program built from `source` (length bytes, `label` names it in logs)
   with compiler `options`, from memory, disk or a fresh build. The program
   lives as long as the context. */
kiln_status kiln_program_get(kiln_context *ctx, const char *label, const char *source, size_t length,
                             const char *options, struct kiln_program **out);

/* Kernel `name` of a cached program (created once, then reused). */
kiln_status kiln_program_kernel(kiln_context *ctx, struct kiln_program *prog, const char *name,
                                struct kiln_kernel **out);

/* Kernel `kernel_name` of the kernel source `source_name` (a path in the
   backend's source tree without the file extension, e.g. "util/fill") built
   with `options`. */
kiln_status kiln_kernel_get(kiln_context *ctx, const char *source_name, const char *options, const char *kernel_name,
                            struct kiln_kernel **out);

/* Set the arguments and enqueue on the context's queue (asynchronous).
   local: the work-group size, or NULL to let the backend choose.
   local_bytes: dynamic local memory for the launch, 0 for none; a kernel
   that takes it declares it as its last parameter, after `args`.
   event: NULL, or receives a backend event handle of this launch. */
kiln_status kiln_kernel_launch(kiln_context *ctx, struct kiln_kernel *kernel, const struct kiln_args *args,
                               unsigned dims, const size_t *global, const size_t *local, size_t local_bytes,
                               void **event);

/* Device time of the launches the calling thread makes on one context
   between kiln_launch_timing_begin and kiln_launch_timing_end: each launch
   made with a NULL event gets one for the timer. One operator call may
   launch several kernels, and they are timed together. */
#define KILN_TIMED_LAUNCHES 64

struct kiln_launch_timing {
    kiln_context *ctx;
    void *events[KILN_TIMED_LAUNCHES];
    unsigned count;
    int incomplete; /* a launch could not be recorded */
};

/* Start recording (nothing is recorded when the backend cannot time events). */
void kiln_launch_timing_begin(kiln_context *ctx, struct kiln_launch_timing *timing);

/* Stop recording, wait for the recorded launches and sum their device time
   into *ms; releases their events. KILN_ERROR_UNSUPPORTED when the backend or
   queue cannot time them, or a launch went unrecorded, or none was made:
   time by the host's clock then. */
kiln_status kiln_launch_timing_end(struct kiln_launch_timing *timing, double *ms);

/* Whether kernel sources are the copies embedded at build time
   ($KILN_KERNEL_DIR unset or empty), which never change. */
int kiln_source_embedded(void);

/* Whether $KILN_KERNEL_DIR, when set, is a directory kiln can read: IO
   naming the variable, its value and the reason otherwise. */
kiln_status kiln_source_dir_check(void);

/* The largest kernel source file read from $KILN_KERNEL_DIR. */
#define KILN_SOURCE_MAX_BYTES ((size_t)16 << 20)

/* The text of file `name` (with its extension, e.g. "common/vector.h") of
   the backend's kernel sources: from $KILN_KERNEL_DIR when set, else the copy
   embedded at build time. *owned is set when the text was read from disk and
   must be freed by the caller. From the directory: IO when it is unusable
   (kiln_source_dir_check) or the file is missing, not a regular file, larger
   than KILN_SOURCE_MAX_BYTES or unreadable, the detail naming
   KILN_KERNEL_DIR, the file and the reason; never the embedded copy. */
kiln_status kiln_source_get(const struct kiln_backend *backend, const char *name, const char **text, size_t *length,
                            char **owned);

/* `seed` folded with every kernel source embedded for the backend and, when
   set, the $KILN_KERNEL_DIR path (not the files there): a key part that
   changes with the kernels a choice was measured with. */
uint64_t kiln_source_hash(const struct kiln_backend *backend, uint64_t seed);

/* The kernel source `name` (without extension; the backend supplies it) with
   its `#include "path"` lines replaced by the named files (recursively);
   *text is malloc'd and NUL-terminated. */
kiln_status kiln_source_expand(const struct kiln_backend *backend, const char *name, char **text, size_t *length);

#endif /* KILN_PROGRAM_CACHE_H */
