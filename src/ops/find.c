#include "ops/find.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/diag.h"
#include "jit/disk_cache.h"
#include "jit/program_cache.h"
#include "profiles/profile.h"
#include "util/hash.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

uint64_t kiln_find_code_hash(const kiln_context *ctx)
{
    uint64_t h = kiln_source_hash(ctx->backend, KILN_HASH_SEED);
    char *params = NULL;
    if (kiln_profile_to_json(ctx->profile, &params) == KILN_SUCCESS)
        h = kiln_hash64(params, strlen(params), h);
    free(params);
    return h;
}

static size_t by_name(const struct kiln_find_candidates *c, const char *name)
{
    for (size_t i = 0; i < c->count; i++)
        if (strcmp(c->names[i], name) == 0)
            return i;
    return c->count;
}

/* A remembered choice: from the context's memo, else from disk; c->count if
   none. */
static size_t recall(kiln_context *ctx, const char *key, const struct kiln_find_candidates *c, const char **where)
{
    size_t pick = c->count;
    pthread_mutex_lock(&ctx->cache.lock);
    for (struct kiln_memo *m = ctx->memo; m && pick == c->count; m = m->next)
        if (strcmp(m->key, key) == 0)
            pick = by_name(c, m->value), *where = "remembered by this context";
    pthread_mutex_unlock(&ctx->cache.lock);
    if (pick < c->count || !ctx->cache.dir[0])
        return pick;
    void *payload = NULL;
    size_t size = 0;
    kiln_status st = kiln_disk_cache_load(ctx->cache.dir, key, &payload, &size);
    int discard = st == KILN_ERROR_CORRUPT_CACHE; /* removed by the load, which warned */
    if (st == KILN_SUCCESS) {
        /* An intact entry names one of the candidates, exactly: anything else
           (a name this build does not have, a NUL, an over-long name) is
           searched again and the new choice stored over it. */
        char name[64];
        int text = size < sizeof name;
        for (size_t i = 0; text && i < size; i++)
            text = isprint(((const unsigned char *)payload)[i]);
        if (text) {
            memcpy(name, payload, size);
            name[size] = '\0';
            pick = by_name(c, name);
        } else {
            snprintf(name, sizeof name, "%zu bytes that are not a name", size);
        }
        if (pick < c->count) {
            *where = "from the find database";
        } else {
            discard = 1;
            kiln_log(KILN_LOG_WARN,
                     "find database entry in %s names no algorithm of this problem ('%s'); searching again",
                     ctx->cache.dir, name);
        }
    }
    if (discard) {
        pthread_mutex_lock(&ctx->cache.lock);
        ctx->cache.discarded++;
        pthread_mutex_unlock(&ctx->cache.lock);
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
    kiln_program_cache_store(&ctx->cache, "a find database entry", key, name, strlen(name));
}

kiln_status kiln_find(kiln_context *ctx, const char *key, const struct kiln_find_candidates *c, size_t *pick,
                      char *reason, size_t reason_size)
{
    const char *where = NULL;
    size_t known = recall(ctx, key, c, &where);
    if (known < c->count && c->applies(c->cookie, known)) {
        *pick = known;
        snprintf(reason, reason_size, "find: %s", where);
        return KILN_SUCCESS;
    }
    size_t best = c->count;
    double best_ms = 0.0;
    char timings[96] = "";
    kiln_status st = KILN_SUCCESS;
    for (size_t i = 0; i < c->count && st == KILN_SUCCESS; i++) {
        double ms = 0.0;
        int built = 0;
        if (!c->applies(c->cookie, i))
            continue;
        st = c->time(c->cookie, i, &ms, &built);
        if (!built)
            continue; /* cannot be built here: not a candidate */
        if (st == KILN_SUCCESS && (best == c->count || ms < best_ms))
            best = i, best_ms = ms;
        size_t used = strlen(timings);
        snprintf(timings + used, sizeof timings - used, "%s%s %.2f", used ? ", " : "", c->names[i], ms);
    }
    if (st != KILN_SUCCESS)
        return st;
    if (best == c->count)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "find: no candidate could be built for this problem");
    remember(ctx, key, c->names[best]);
    *pick = best;
    snprintf(reason, reason_size, "find: fastest of %s ms", timings);
    return KILN_SUCCESS;
}

/* One run, timed on the device where the backend can, else by the host's
   clock until the queue is finished. */
static kiln_status time_once(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie, double *ms)
{
    struct kiln_launch_timing timing;
    kiln_launch_timing_begin(ctx, &timing);
    double t0 = now_ms();
    kiln_status st = run(cookie);
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(ctx);
    *ms = now_ms() - t0;
    double device_ms;
    if (kiln_launch_timing_end(&timing, &device_ms) == KILN_SUCCESS)
        *ms = device_ms;
    return st;
}

kiln_status kiln_time_runs(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie, int reps,
                           double cutoff_ms, double *ms, int *runs)
{
    if (reps < 1 || reps > KILN_TIME_MAX_RUNS)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_time_runs: %d runs (1 to %d)", reps, KILN_TIME_MAX_RUNS);
    double times[KILN_TIME_MAX_RUNS];
    int made = 0;
    kiln_status st = run(cookie);
    if (st == KILN_SUCCESS)
        st = kiln_context_finish(ctx);
    double total = 0.0;
    while (st == KILN_SUCCESS && made < KILN_TIME_MAX_RUNS && (made < reps || total < KILN_TIME_MIN_MS)) {
        st = time_once(ctx, run, cookie, &times[made]);
        if (st == KILN_SUCCESS && cutoff_ms > 0 && times[made] > cutoff_ms) {
            made++;
            break;
        }
        if (st == KILN_SUCCESS)
            total += times[made++];
    }
    if (st != KILN_SUCCESS)
        return st;
    for (int i = 1; i < made; i++)
        for (int j = i; j > 0 && times[j] < times[j - 1]; j--) {
            double x = times[j];
            times[j] = times[j - 1], times[j - 1] = x;
        }
    *ms = times[made / 2];
    if (runs)
        *runs = made;
    return KILN_SUCCESS;
}

kiln_status kiln_find_median(kiln_context *ctx, kiln_status (*run)(void *cookie), void *cookie, double *ms)
{
    return kiln_time_runs(ctx, run, cookie, KILN_FIND_REPS, 0.0, ms, NULL);
}
