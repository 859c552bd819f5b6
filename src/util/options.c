#include "util/options.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"

void kiln_options_add(struct kiln_options *o, const char *fmt, ...)
{
    if (o->failed)
        return;
    for (;;) {
        size_t room = o->capacity - o->length;
        va_list ap;
        va_start(ap, fmt);
        int n = room ? vsnprintf(o->text + o->length + (o->length > 0), room - (o->length > 0), fmt, ap) : -2;
        va_end(ap);
        if (n == -1) {
            o->failed = 1;
            return;
        }
        size_t need = o->length + (o->length > 0) + (size_t)(n < 0 ? 0 : n) + 1;
        if (n >= 0 && need <= o->capacity) {
            if (o->length > 0)
                o->text[o->length] = ' ';
            o->length = need - 1;
            return;
        }
        size_t capacity = o->capacity ? 2 * o->capacity : 256;
        while (capacity < need)
            capacity *= 2;
        char *text = realloc(o->text, capacity);
        if (!text) {
            o->failed = 1;
            return;
        }
        o->text = text;
        o->capacity = capacity;
    }
}

void kiln_options_only(struct kiln_options *o, const char *const names[], size_t count)
{
    kiln_options_add(o, "-DKILN_ONLY=1");
    for (size_t i = 0; i < count; i++)
        if (names[i])
            kiln_options_add(o, "-DKILN_WANT_%s=1", names[i]);
}

int kiln_options_holds(const char *text, const char *name)
{
    if (!strstr(text, "-DKILN_ONLY=1"))
        return 1;
    const size_t n = strlen(name);
    for (const char *at = text; (at = strstr(at, "-DKILN_WANT_")) != NULL; at++) {
        const char *end = at + strlen("-DKILN_WANT_");
        if (strncmp(end, name, n) == 0 && strncmp(end + n, "=1", 2) == 0)
            return 1;
    }
    return 0;
}

kiln_status kiln_options_status(const struct kiln_options *o, const char *what)
{
    if (o->failed)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "%s: out of memory building compiler options", what);
    return KILN_SUCCESS;
}

const char *kiln_options_text(const struct kiln_options *o) { return o->text ? o->text : ""; }

void kiln_options_free(struct kiln_options *o)
{
    free(o->text);
    o->text = NULL;
    o->length = o->capacity = 0;
    o->failed = 0;
}
