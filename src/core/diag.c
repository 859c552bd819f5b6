#include "core/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "util/hash.h"

/* Large enough for a headline plus a useful stretch of a compiler log. */
#define KILN_DETAIL_SIZE 16384

static _Thread_local char detail[KILN_DETAIL_SIZE];

static const char *const status_text[] = {
#define KILN_STATUS_TEXT_(name, text) text,
    KILN_STATUS_LIST(KILN_STATUS_TEXT_)
#undef KILN_STATUS_TEXT_
};

const char *kiln_status_string(kiln_status status)
{
    if ((unsigned)status >= (unsigned)KILN_STATUS_COUNT_)
        return "unknown status";
    return status_text[status];
}

const char *kiln_last_error_detail(void) { return detail; }

const char *kiln_version_string(void) { return KILN_VERSION; }

kiln_status kiln_error(kiln_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    kiln_log(KILN_LOG_DEBUG, "%s: %s", kiln_status_string(status), detail);
    return status;
}

void kiln_error_append(const char *text)
{
    size_t used = strlen(detail);
    if (used + 1 < sizeof detail)
        snprintf(detail + used, sizeof detail - used, "%s", text);
}

void kiln_error_clear(void) { detail[0] = '\0'; }

/* The values already warned about, one per variable, so that a bad value
   read at every call is reported once (and again when it changes). */
static struct {
    const char *name;
    uint64_t value_hash;
} warned[8];
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;

static int first_warning(const char *name, const char *value)
{
    uint64_t h = kiln_hash64(value, strlen(value), KILN_HASH_SEED);
    int first = 1;
    pthread_mutex_lock(&warned_lock);
    size_t i = 0;
    while (i < sizeof warned / sizeof *warned && warned[i].name && strcmp(warned[i].name, name) != 0)
        i++;
    if (i < sizeof warned / sizeof *warned) {
        first = !warned[i].name || warned[i].value_hash != h;
        warned[i].name = name;
        warned[i].value_hash = h;
    }
    pthread_mutex_unlock(&warned_lock);
    return first;
}

void kiln_env_warn(const char *name, const char *value, const char *accepts, const char *instead)
{
    if (first_warning(name, value))
        kiln_log(KILN_LOG_WARN, "%s=\"%.64s%s\" is not %s: using %s", name, value, strlen(value) > 64 ? "..." : "",
                 accepts, instead);
}

int kiln_log_level(void)
{
    const char *env = getenv("KILN_LOG");
    if (!env || !*env)
        return KILN_LOG_WARN;
    if (env[0] >= '0' && env[0] <= '3' && !env[1])
        return env[0] - '0';
    /* Warned at the default level: the recursion into kiln_log finds the
       value already recorded. */
    kiln_env_warn("KILN_LOG", env, "a level (0 silent, 1 warnings, 2 info, 3 debug)", "1");
    return KILN_LOG_WARN;
}

int kiln_env_flag(const char *name)
{
    const char *env = getenv(name);
    if (!env || !*env || strcmp(env, "0") == 0)
        return 0;
    if (strcmp(env, "1") == 0)
        return 1;
    kiln_env_warn(name, env, "0 or 1", "0");
    return 0;
}

long kiln_env_long(const char *name, long lo, long hi, const char *accepts)
{
    const char *env = getenv(name);
    if (!env || !*env)
        return 0;
    long v = 0;
    const char *p = env;
    for (; *p >= '0' && *p <= '9' && v <= hi; p++)
        v = v * 10 + (*p - '0');
    if (*p || v < lo || v > hi) {
        kiln_env_warn(name, env, accepts, "the default");
        return 0;
    }
    return v;
}

void kiln_log(enum kiln_log_level level, const char *fmt, ...)
{
    if ((int)level > kiln_log_level())
        return;
    static const char *const names[] = {"", "warning", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "kiln %s: %s\n", names[level], line);
}
