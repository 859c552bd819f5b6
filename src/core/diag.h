/*
 * Diagnostics shared by every layer: the per-thread error detail behind
 * kiln_last_error_detail() and the KILN_LOG logger.
 */
#ifndef KILN_DIAG_H
#define KILN_DIAG_H

#include "kiln/kiln.h"

#if defined(__GNUC__)
#define KILN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define KILN_PRINTF(fmt, args)
#endif

/* Record a printf-style detail for the calling thread and return `status`,
   so failures read `return kiln_error(KILN_ERROR_..., "...", ...);`. */
kiln_status kiln_error(kiln_status status, const char *fmt, ...) KILN_PRINTF(2, 3);

/* Append to the current detail (e.g. a build log after its headline). */
void kiln_error_append(const char *text);

/* Forget the calling thread's detail (public entry points call this first). */
void kiln_error_clear(void);

enum kiln_log_level { KILN_LOG_WARN = 1, KILN_LOG_INFO = 2, KILN_LOG_DEBUG = 3 };

/* Log to stderr when level <= KILN_LOG (unset: warnings only; 0: silent;
   1 warn, 2 info, 3 debug). */
void kiln_log(enum kiln_log_level level, const char *fmt, ...) KILN_PRINTF(2, 3);

/* The level KILN_LOG sets: 0 to 3; unset, empty or anything else 1, with
   one warning per bad value naming it. */
int kiln_log_level(void);

/* Warn once per process for each (variable, value) that environment
   variable `name` holds `value`, which is not `accepts`, and that kiln uses
   `instead`. */
void kiln_env_warn(const char *name, const char *value, const char *accepts, const char *instead);

/* A switch in the environment: "1" is 1; unset, empty or "0" is 0; anything
   else is 0 with a warning. */
int kiln_env_flag(const char *name);

/* An environment variable holding an integer from lo to hi (lo >= 1), or 0
   when it is unset or empty; any other value costs one warning (saying it
   is not `accepts`) and reads as 0, the caller's default. */
long kiln_env_long(const char *name, long lo, long hi, const char *accepts);

#endif /* KILN_DIAG_H */
