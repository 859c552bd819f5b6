/* Helpers shared by the cmocka tests. Include after <cmocka.h>'s prerequisites. */
#ifndef KILN_TEST_UTIL_H
#define KILN_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kiln/kiln.h"

/* Uniform floats in [lo, hi) from a xorshift generator seeded by *state
   (seeded from the clock by kt_seed(), and printed so a failure can be
   replayed with KILN_TEST_SEED). */
uint64_t kt_seed(void);
void kt_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *state);

/* A fresh directory under $TMPDIR (or /tmp); malloc'd path. */
char *kt_temp_dir(void);
/* rm -r. */
void kt_remove_tree(const char *path);
/* Write `text` to `path`, failing the test on error. */
void kt_write_file(const char *path, const char *text);

/* Assert that `status` is `expected` and that the error detail is non-empty
   when it is an error, printing both on failure. */
#define kt_assert_status(status, expected) kt_assert_status_((status), (expected), __FILE__, __LINE__)
void kt_assert_status_(kiln_status got, kiln_status expected, const char *file, int line);

#endif /* KILN_TEST_UTIL_H */
