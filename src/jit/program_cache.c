#include "jit/program_cache.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/diag.h"
#include "jit/disk_cache.h"
#include "util/hash.h"

struct kiln_program {
    uint64_t hash; /* of source and options, to skip most compares */
    char *source;  /* copy of the source text: the exact key */
    size_t length;
    char *options;
    char *embedded; /* the embedded source's name, NULL for other text */
    char *label;    /* names it in logs */
    void *handle;
    int from_disk; /* handle was loaded from a disk cache entry */
    struct kiln_kernel *kernels;
    struct kiln_program *next;
};

kiln_status kiln_program_cache_init(struct kiln_program_cache *cache, const char *dir, const char *reason)
{
    memset(cache, 0, sizeof *cache);
    atomic_init(&cache->disk_failures, 0);
    if (dir && *dir) {
        if (strlen(dir) >= sizeof cache->dir)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "cache directory path is longer than %zu bytes",
                              sizeof cache->dir - 1);
        strcpy(cache->dir, dir);
        cache->programs_on_disk = 1;
    } else if (reason) {
        snprintf(cache->disk_reason, sizeof cache->disk_reason, "%s", reason);
    }
    if (pthread_mutex_init(&cache->lock, NULL) != 0)
        return kiln_error(KILN_ERROR_INTERNAL, "pthread_mutex_init failed");
    return KILN_SUCCESS;
}

void kiln_program_cache_store(struct kiln_program_cache *cache, const char *what, const char *key, const void *payload,
                              size_t size)
{
    if (!cache->dir[0])
        return;
    if (kiln_disk_cache_store(cache->dir, key, payload, size) == KILN_SUCCESS) {
        kiln_log(KILN_LOG_DEBUG, "stored %s (%zu bytes) in %s", what, size, cache->dir);
    } else if (atomic_fetch_add(&cache->disk_failures, 1) == 0) {
        kiln_log(KILN_LOG_WARN,
                 "cannot store %s in the cache directory %s: %s; it stays in memory (later failures are counted "
                 "in kiln_context_get_cache_info, not logged)",
                 what, cache->dir, kiln_last_error_detail());
    }
}

void kiln_program_cache_release(struct kiln_program_cache *cache, const struct kiln_backend *backend)
{
    struct kiln_program *p = cache->programs;
    while (p) {
        struct kiln_program *next_program = p->next;
        struct kiln_kernel *k = p->kernels;
        while (k) {
            struct kiln_kernel *next_kernel = k->next;
            backend->kernel_free(k->handle);
            pthread_mutex_destroy(&k->lock);
            free(k);
            k = next_kernel;
        }
        backend->program_free(p->handle);
        free(p->source);
        free(p->options);
        free(p->embedded);
        free(p->label);
        free(p);
        p = next_program;
    }
    cache->programs = NULL;
    pthread_mutex_destroy(&cache->lock);
}

/* The disk key names everything a binary depends on. */
void kiln_program_cache_each(kiln_context *ctx,
                             void (*fn)(void *user, const char *label, const char *source, size_t length,
                                        const char *options),
                             void *user)
{
    pthread_mutex_lock(&ctx->cache.lock);
    for (const struct kiln_program *p = ctx->cache.programs; p; p = p->next)
        fn(user, p->label, p->source, p->length, p->options);
    pthread_mutex_unlock(&ctx->cache.lock);
}

static char *disk_key(const kiln_context *ctx, const char *source, size_t length, const char *options)
{
    const struct kiln_device_desc *d = &ctx->desc;
    uint64_t source_hash = kiln_hash64(source, length, KILN_HASH_SEED);
    size_t size = strlen(options) + 1024;
    char *key = malloc(size);
    if (key)
        snprintf(key, size,
                 "backend=%s\nplatform=%s\ndevice=%s\ndevice_version=%s\ndriver=%s\nsource=%016" PRIx64
                 ":%zu\noptions=%s\n",
                 ctx->backend->name, d->platform, d->name, d->device_version, d->driver_version, source_hash, length,
                 options);
    return key;
}

/* Try the disk cache; KILN_SUCCESS with *handle set on a hit. */
static kiln_status load_from_disk(kiln_context *ctx, const char *label, const char *key, const char *options,
                                  void **handle)
{
    struct kiln_program_cache *cache = &ctx->cache;
    void *binary = NULL;
    size_t size = 0;
    kiln_status st = kiln_disk_cache_load(cache->dir, key, &binary, &size);
    if (st == KILN_ERROR_CORRUPT_CACHE)
        cache->discarded++;
    if (st != KILN_SUCCESS)
        return st;
    st = ctx->backend->program_load(ctx->dev, binary, size, options, handle);
    free(binary);
    if (st != KILN_SUCCESS) {
        cache->discarded++;
        kiln_log(KILN_LOG_WARN,
                 "cached binary of %s in %s rejected by the driver (%s); discarded it and building from source", label,
                 cache->dir, kiln_last_error_detail());
    }
    return st;
}

static void store_to_disk(kiln_context *ctx, const char *label, const char *key, void *handle)
{
    void *binary = NULL;
    size_t size = 0;
    if (ctx->backend->program_binary(ctx->dev, handle, &binary, &size) == KILN_SUCCESS)
        kiln_program_cache_store(&ctx->cache, label, key, binary, size);
    else
        kiln_log(KILN_LOG_WARN, "could not cache %s on disk: %s", label, kiln_last_error_detail());
    free(binary);
}

/* The program from the disk cache (*from_disk set) or built from source
   (and stored there). */
static kiln_status load_or_build(kiln_context *ctx, const char *label, const char *source, size_t length,
                                 const char *options, void **handle, int *from_disk)
{
    *from_disk = 0;
    struct kiln_program_cache *cache = &ctx->cache;
    const struct kiln_backend *be = ctx->backend;
    int use_disk = cache->programs_on_disk && be->program_load && be->program_binary;
    char *key = NULL;
    if (use_disk) {
        key = disk_key(ctx, source, length, options);
        if (!key)
            return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a cache key");
        if (load_from_disk(ctx, label, key, options, handle) == KILN_SUCCESS) {
            cache->disk_hits++;
            *from_disk = 1;
            kiln_log(KILN_LOG_INFO, "loaded %s from the disk cache", label);
            free(key);
            return KILN_SUCCESS;
        }
    }
    kiln_status st = be->program_build(ctx->dev, source, length, options, handle);
    if (st == KILN_SUCCESS) {
        cache->builds++;
        kiln_log(KILN_LOG_INFO, "built %s with \"%s\"", label, options);
        if (use_disk)
            store_to_disk(ctx, label, key, *handle);
    }
    free(key);
    return st;
}

/* kiln_program_get, recording the embedded source's name `embedded` (or
   NULL) in a program it builds. */
static kiln_status program_get(kiln_context *ctx, const char *label, const char *source, size_t length,
                               const char *options, const char *embedded, struct kiln_program **out)
{
    if (!options)
        options = "";
    uint64_t hash = kiln_hash64(options, strlen(options), kiln_hash64(source, length, KILN_HASH_SEED));
    struct kiln_program_cache *cache = &ctx->cache;
    pthread_mutex_lock(&cache->lock);
    for (struct kiln_program *p = cache->programs; p; p = p->next) {
        if (p->hash == hash && p->length == length && memcmp(p->source, source, length) == 0 &&
            strcmp(p->options, options) == 0) {
            cache->memory_hits++;
            pthread_mutex_unlock(&cache->lock);
            *out = p;
            return KILN_SUCCESS;
        }
    }
    /* Built under the lock: two threads asking for one program build it once. */
    kiln_status st;
    struct kiln_program *p = calloc(1, sizeof *p);
    if (!p || !(p->source = malloc(length + 1)) || !(p->options = strdup(options)) || !(p->label = strdup(label)) ||
        (embedded && !(p->embedded = strdup(embedded)))) {
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a program cache entry");
    } else {
        memcpy(p->source, source, length);
        p->source[length] = '\0';
        p->length = length;
        p->hash = hash;
        st = load_or_build(ctx, label, source, length, options, &p->handle, &p->from_disk);
    }
    if (st == KILN_SUCCESS) {
        p->next = cache->programs;
        cache->programs = p;
        *out = p;
    } else if (p) {
        free(p->source);
        free(p->options);
        free(p->embedded);
        free(p->label);
        free(p);
    }
    pthread_mutex_unlock(&cache->lock);
    return st;
}

kiln_status kiln_program_get(kiln_context *ctx, const char *label, const char *source, size_t length,
                             const char *options, struct kiln_program **out)
{
    return program_get(ctx, label, source, length, options, NULL, out);
}

/* The program built from embedded source `name` with `options`, or NULL. */
static struct kiln_program *find_embedded(kiln_context *ctx, const char *name, const char *options)
{
    struct kiln_program_cache *cache = &ctx->cache;
    pthread_mutex_lock(&cache->lock);
    struct kiln_program *p = cache->programs;
    while (p && !(p->embedded && strcmp(p->embedded, name) == 0 && strcmp(p->options, options) == 0))
        p = p->next;
    if (p)
        cache->memory_hits++;
    pthread_mutex_unlock(&cache->lock);
    return p;
}

/* Kernel `name` could not be made from a program loaded from the disk
   cache. If a build from source has it, the entry's binary is not the
   program it claims to be and nothing of it is trusted: the kernels already
   made move onto the new build (each under its lock, so a launch in
   progress finishes first), the build is stored over the entry, *kernel is
   the new kernel, and the discard is counted and warned about. If the build
   lacks it too, the name is wrong, not the entry: the build is dropped and
   the error stays. Called with the cache's lock held. */
static kiln_status rebuild_from_source(kiln_context *ctx, struct kiln_program *prog, const char *name, void **kernel)
{
    struct kiln_program_cache *cache = &ctx->cache;
    const struct kiln_backend *be = ctx->backend;
    char why[256];
    snprintf(why, sizeof why, "%s", kiln_last_error_detail());
    void *handle = NULL;
    kiln_status st = be->program_build(ctx->dev, prog->source, prog->length, prog->options, &handle);
    if (st != KILN_SUCCESS)
        return st;
    st = be->kernel_create(handle, name, kernel);
    if (st != KILN_SUCCESS) {
        be->program_free(handle);
        return st;
    }
    cache->discarded++;
    cache->builds++;
    kiln_log(KILN_LOG_WARN, "cached binary of %s in %s lacks kernel %s (%s); discarded it and built from source",
             prog->label, cache->dir, name, why);
    for (struct kiln_kernel *k = prog->kernels; k && st == KILN_SUCCESS; k = k->next) {
        void *fresh = NULL;
        st = be->kernel_create(handle, k->name, &fresh);
        if (st == KILN_SUCCESS) {
            pthread_mutex_lock(&k->lock);
            void *old = k->handle;
            k->handle = fresh;
            pthread_mutex_unlock(&k->lock);
            be->kernel_free(old);
        }
    }
    if (st != KILN_SUCCESS) {
        be->kernel_free(*kernel);
        be->program_free(handle);
        return st;
    }
    be->program_free(prog->handle);
    prog->handle = handle;
    prog->from_disk = 0;
    char *key = disk_key(ctx, prog->source, prog->length, prog->options);
    if (key)
        store_to_disk(ctx, prog->label, key, handle);
    free(key);
    return KILN_SUCCESS;
}

kiln_status kiln_program_kernel(kiln_context *ctx, struct kiln_program *prog, const char *name,
                                struct kiln_kernel **out)
{
    if (strlen(name) >= sizeof prog->kernels->name)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kernel name \"%s\" is too long", name);
    struct kiln_program_cache *cache = &ctx->cache;
    pthread_mutex_lock(&cache->lock);
    struct kiln_kernel *k = prog->kernels;
    while (k && strcmp(k->name, name) != 0)
        k = k->next;
    kiln_status st = KILN_SUCCESS;
    if (!k) {
        k = calloc(1, sizeof *k);
        if (!k) {
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating kernel %s", name);
        } else if ((st = ctx->backend->kernel_create(prog->handle, name, &k->handle)) != KILN_SUCCESS &&
                   (!prog->from_disk || (st = rebuild_from_source(ctx, prog, name, &k->handle)) != KILN_SUCCESS)) {
            free(k);
            k = NULL;
        } else {
            strcpy(k->name, name);
            pthread_mutex_init(&k->lock, NULL);
            k->next = prog->kernels;
            prog->kernels = k;
        }
    }
    pthread_mutex_unlock(&cache->lock);
    if (st == KILN_SUCCESS)
        *out = k;
    return st;
}

kiln_status kiln_kernel_get(kiln_context *ctx, const char *source_name, const char *options, const char *kernel_name,
                            struct kiln_kernel **out)
{
    /* Embedded sources never change, so a program built from one is found
       again by name and options, without expanding and hashing its text:
       operators without a plan (pooling, softmax) look their kernel up at
       every call. */
    const int embedded = kiln_source_embedded();
    struct kiln_program *prog = embedded ? find_embedded(ctx, source_name, options ? options : "") : NULL;
    if (prog)
        return kiln_program_kernel(ctx, prog, kernel_name, out);
    char *text = NULL;
    size_t length = 0;
    kiln_status st = kiln_source_expand(ctx->backend, source_name, &text, &length);
    if (st == KILN_SUCCESS)
        st = program_get(ctx, source_name, text, length, options, embedded ? source_name : NULL, &prog);
    free(text);
    if (st == KILN_SUCCESS)
        st = kiln_program_kernel(ctx, prog, kernel_name, out);
    return st;
}

/* The calling thread's timing in progress, or NULL. */
static _Thread_local struct kiln_launch_timing *thread_timing;

kiln_status kiln_kernel_launch(kiln_context *ctx, struct kiln_kernel *kernel, const struct kiln_args *args,
                               unsigned dims, const size_t *global, const size_t *local, size_t local_bytes,
                               void **event)
{
    if (args->overflow)
        return kiln_error(KILN_ERROR_INTERNAL, "kernel %s: more than %d arguments", kernel->name, KILN_ARGS_MAX);
    struct kiln_launch_timing *timing = thread_timing && thread_timing->ctx == ctx ? thread_timing : NULL;
    void *timed = NULL;
    int record = timing && !event && timing->count < KILN_TIMED_LAUNCHES;
    if (timing && !record)
        timing->incomplete = 1;
    pthread_mutex_lock(&kernel->lock);
    kiln_status st = ctx->backend->launch(ctx->dev, kernel->handle, args->items, args->count, dims, global, local,
                                          local_bytes, record ? &timed : event);
    pthread_mutex_unlock(&kernel->lock);
    if (st == KILN_SUCCESS && record)
        timing->events[timing->count++] = timed;
    return st;
}

void kiln_launch_timing_begin(kiln_context *ctx, struct kiln_launch_timing *timing)
{
    memset(timing, 0, sizeof *timing);
    timing->ctx = ctx;
    timing->incomplete = !ctx->backend->event_elapsed;
    thread_timing = timing->incomplete ? NULL : timing;
}

kiln_status kiln_launch_timing_end(struct kiln_launch_timing *timing, double *ms)
{
    thread_timing = NULL;
    const struct kiln_backend *be = timing->ctx->backend;
    kiln_status st = KILN_SUCCESS;
    if (timing->incomplete || !timing->count)
        st = kiln_error(KILN_ERROR_UNSUPPORTED, "the %s backend timed %s launch", be->name,
                        timing->count ? "not every" : "no");
    *ms = 0.0;
    for (unsigned i = 0; i < timing->count; i++) {
        double one = 0.0;
        if (st == KILN_SUCCESS && (st = be->event_wait(timing->events[i])) == KILN_SUCCESS &&
            (st = be->event_elapsed(timing->events[i], &one)) == KILN_SUCCESS)
            *ms += one;
        be->event_release(timing->events[i]);
    }
    timing->count = 0;
    return st;
}
