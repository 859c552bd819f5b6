/*
 * Convolution benchmark mode ("find"): time every applicable algorithm once
 * for a shape (by the device's own timing of its kernels where the backend
 * offers it, else by the host's clock), keep the fastest in the context and
 * in a find database on disk (entries of the program cache's directory,
 * written atomically), so neither this context nor a later process searches
 * that shape again. The key names the device and driver, the profile's
 * parameters, every kernel source and the shape with its epilogue: a change
 * to any of them makes a new search.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/diag.h"
#include "jit/disk_cache.h"
#include "jit/program_cache.h"
#include "ops/conv2d.h"
#include "profiles/profile.h"
#include "util/hash.h"

enum { FIND_REPS = 3 };

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Hash of what the choice depends on besides the shape and device. */
static uint64_t code_hash(const kiln_context *ctx)
{
    uint64_t h = kiln_source_hash(ctx->backend, KILN_HASH_SEED);
    char *params = NULL;
    if (kiln_profile_to_json(ctx->profile, &params) == KILN_SUCCESS)
        h = kiln_hash64(params, strlen(params), h);
    free(params);
    return h;
}

static void make_key(const kiln_context *ctx, const struct kiln_conv_shape *s, char *key, size_t size)
{
    const kiln_conv2d_desc *d = &s->d;
    snprintf(key, size,
             "conv-find 2\ndevice=%s\nversion=%s\ndriver=%s\nprofile=%s\ncode=%016" PRIx64
             "\nshape=%d %d %zu %zu %zu %zu %zu %zu %zu s%zu,%zu p%zu,%zu,%zu,%zu d%zu,%zu g%zu\n"
             "epilogue=bias%d z%d act%d pool%d\n",
             ctx->desc.name, ctx->desc.device_version, ctx->desc.driver_version, kiln_profile_name(ctx->profile),
             code_hash(ctx), (int)d->layout, (int)d->dtype, d->n, d->c, d->h, d->w, d->k, d->r, d->s, d->stride_h,
             d->stride_w, d->pad_top, d->pad_bottom, d->pad_left, d->pad_right, d->dilation_h, d->dilation_w, d->groups,
             d->has_bias != 0, d->beta != 0.0f, (int)d->activation, d->fused_maxpool != 0);
}

static const struct kiln_conv_algorithm *by_name(const struct kiln_conv_algorithm *const *algorithms, size_t count,
                                                 const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(algorithms[i]->name, name) == 0)
            return algorithms[i];
    return NULL;
}

/* A remembered choice: from the context's memo, else from disk. */
static const struct kiln_conv_algorithm *recall(kiln_context *ctx, const char *key,
                                                const struct kiln_conv_algorithm *const *algorithms, size_t count,
                                                const char **where)
{
    const struct kiln_conv_algorithm *pick = NULL;
    pthread_mutex_lock(&ctx->cache.lock);
    for (struct kiln_memo *m = ctx->memo; m && !pick; m = m->next)
        if (strcmp(m->key, key) == 0)
            pick = by_name(algorithms, count, m->value), *where = "remembered by this context";
    pthread_mutex_unlock(&ctx->cache.lock);
    if (pick || !ctx->cache.dir[0])
        return pick;
    void *payload = NULL;
    size_t size = 0;
    if (kiln_disk_cache_load(ctx->cache.dir, key, &payload, &size) == KILN_SUCCESS) {
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(size < sizeof name ? size : sizeof name - 1), (char *)payload);
        pick = by_name(algorithms, count, name);
        *where = "from the find database";
    }
    free(payload);
    return pick;
}

static void remember(kiln_context *ctx, const char *key, const char *name)
{
    struct kiln_memo *m = calloc(1, sizeof *m);
    if (m && (m->key = strdup(key)) && (m->value = strdup(name))) {
        pthread_mutex_lock(&ctx->cache.lock);
        m->next = ctx->memo;
        ctx->memo = m;
        pthread_mutex_unlock(&ctx->cache.lock);
    } else if (m) {
        free(m->key);
        free(m);
    }
    if (ctx->cache.dir[0] && kiln_disk_cache_store(ctx->cache.dir, key, name, strlen(name)) != KILN_SUCCESS)
        kiln_log(KILN_LOG_WARN, "could not write the find database: %s", kiln_last_error_detail());
}

/* One execution of a plan on scratch tensors, timed on the device where the
   backend can (the summed execution time of its kernels), else by the host's
   clock until the queue is finished. */
static kiln_status time_once(kiln_conv2d_plan *plan, kiln_buffer *const t[5], double *ms)
{
    struct kiln_launch_timing timing;
    kiln_launch_timing_begin(plan->base.ctx, &timing);
    double t0 = now_ms();
    kiln_status st = kiln_conv2d_plan_execute(plan, t[0], t[1], t[2], t[3], t[4], NULL);
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(plan->base.ctx);
    *ms = now_ms() - t0;
    double device_ms;
    if (kiln_launch_timing_end(&timing, &device_ms) == KILN_SUCCESS)
        *ms = device_ms;
    return st;
}

/* Median time of FIND_REPS executions of a prepared plan, after one that
   builds and warms up. */
static kiln_status time_plan(kiln_conv2d_plan *plan, kiln_buffer *const t[5], double *ms)
{
    double times[FIND_REPS];
    kiln_status st = kiln_conv2d_plan_execute(plan, t[0], t[1], t[2], t[3], t[4], NULL);
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(plan->base.ctx);
    for (int r = 0; r < FIND_REPS && st == KILN_SUCCESS; r++)
        st = time_once(plan, t, &times[r]);
    if (st == KILN_SUCCESS) {
        for (int i = 1; i < FIND_REPS; i++)
            for (int j = i; j > 0 && times[j] < times[j - 1]; j--) {
                double x = times[j];
                times[j] = times[j - 1], times[j - 1] = x;
            }
        *ms = times[FIND_REPS / 2];
    }
    return st;
}

/* Scratch x, w, bias, z, y for timing, filled with small values. */
static kiln_status scratch(kiln_context *ctx, const struct kiln_conv_shape *s, kiln_buffer *t[5])
{
    const kiln_conv2d_desc *d = &s->d;
    size_t elem = d->dtype == KILN_F16 ? 2 : 4;
    size_t counts[5] = {d->n * d->c * d->h * d->w, d->k * s->cg * d->r * d->s, d->has_bias ? d->k : 0,
                        d->beta != 0.0f ? d->n * d->k * s->p * s->q : 0, d->n * d->k * s->yh * s->yw};
    for (int i = 0; i < 5; i++) {
        if (!counts[i])
            continue;
        size_t bytes = counts[i] * (i == 2 ? sizeof(float) : elem);
        kiln_status st = kiln_buffer_create(ctx, bytes, &t[i]);
        if (st == KILN_SUCCESS)
            st = kiln_buffer_fill_f32(t[i], 0, bytes / sizeof(float), 0.0078125f);
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

kiln_status kiln_conv_find(kiln_context *ctx, const struct kiln_conv_shape *s,
                           const struct kiln_conv_algorithm *const *algorithms, size_t count,
                           const struct kiln_conv_algorithm **pick, char *reason, size_t reason_size)
{
    char key[1024];
    make_key(ctx, s, key, sizeof key);
    const char *where = NULL;
    const struct kiln_conv_algorithm *known = recall(ctx, key, algorithms, count, &where);
    if (known && !known->unsupported(s)) {
        *pick = known;
        snprintf(reason, reason_size, "find: %s", where);
        return KILN_SUCCESS;
    }

    kiln_buffer *t[5] = {0};
    kiln_status st = scratch(ctx, s, t);
    const struct kiln_conv_algorithm *best = NULL;
    double best_ms = 0.0;
    char timings[96] = "";
    for (size_t i = 0; i < count && st == KILN_SUCCESS; i++) {
        kiln_conv2d_plan *plan = NULL;
        double ms = 0.0;
        if (algorithms[i]->unsupported(s) || kiln_conv_plan_with(ctx, s, algorithms[i], "find", &plan) != KILN_SUCCESS)
            continue; /* does not apply, or cannot be built here: not a candidate */
        st = time_plan(plan, t, &ms);
        kiln_conv2d_plan_destroy(plan);
        if (st == KILN_SUCCESS && (!best || ms < best_ms))
            best = algorithms[i], best_ms = ms;
        size_t used = strlen(timings);
        snprintf(timings + used, sizeof timings - used, "%s%s %.2f", used ? ", " : "", algorithms[i]->name, ms);
    }
    for (int i = 0; i < 5; i++)
        kiln_buffer_destroy(t[i]);
    if (st != KILN_SUCCESS)
        return st;
    if (!best)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "conv2d find: no algorithm could be built for this shape");
    remember(ctx, key, best->name);
    *pick = best;
    snprintf(reason, reason_size, "find: fastest of %s ms", timings);
    return KILN_SUCCESS;
}
