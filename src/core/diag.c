#include "core/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int log_threshold(void)
{
    const char *env = getenv("KILN_LOG");
    if (!env || !*env)
        return KILN_LOG_WARN;
    return atoi(env);
}

void kiln_log(enum kiln_log_level level, const char *fmt, ...)
{
    if ((int)level > log_threshold())
        return;
    static const char *const names[] = {"", "warning", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "kiln %s: %s\n", names[level], line);
}
