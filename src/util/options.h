/* A growing string of compiler options ("-DKILN_X=1 -DKILN_Y=2"). Appending
   never fails on the spot: an allocation failure is remembered and reported
   once, by kiln_options_status. */
#ifndef KILN_UTIL_OPTIONS_H
#define KILN_UTIL_OPTIONS_H

#include <stddef.h>

#include "kiln/kiln.h"

struct kiln_options {
    char *text; /* NUL-terminated; "" before the first append */
    size_t length, capacity;
    int failed;
};

/* Append one option, space-separated from the previous ones. */
void kiln_options_add(struct kiln_options *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Restrict the program these options build to the kernels named (NULL
   entries skipped): -DKILN_ONLY=1 and -DKILN_WANT_<name>=1 for each. A
   source of several kernels compiles only those (KILN_WANTS,
   cl/common/portability.h), so that a plan compiles no kernel it never
   launches: POCL generates machine code for every kernel of a program when
   its binary is taken for kiln's disk cache. Without these options a
   program holds all its source's kernels. */
void kiln_options_only(struct kiln_options *o, const char *const names[], size_t count);

/* Whether a program built with options `text` holds kernel `name`: all
   without KILN_ONLY, else those kiln_options_only named. */
int kiln_options_holds(const char *text, const char *name);

/* SUCCESS, or OUT_OF_MEMORY naming `what` if an append failed. */
kiln_status kiln_options_status(const struct kiln_options *o, const char *what);

/* The text ("" if empty). */
const char *kiln_options_text(const struct kiln_options *o);

void kiln_options_free(struct kiln_options *o);

#endif /* KILN_UTIL_OPTIONS_H */
