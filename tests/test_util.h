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
/* A fresh directory (as kt_temp_dir) holding a copy of everything in the
   directory `src`; malloc'd path. */
char *kt_copy_dir(const char *src);
/* rm -r. */
void kt_remove_tree(const char *path);
/* Write `text` to `path`, failing the test on error. */
void kt_write_file(const char *path, const char *text);
/* Write `size` bytes to `path` (replacing it), failing the test on error. */
void kt_write_bytes(const char *path, const void *data, size_t size);
/* The bytes of the file `path` in a malloc'd buffer with one spare byte
   after them (a NUL, so text can be read as a string); fails the test on
   error. */
unsigned char *kt_read_bytes(const char *path, size_t *size);
/* Replace the first `from` in the file `path` by `to`; fails the test when
   the file holds no `from`. */
void kt_edit_file(const char *path, const char *from, const char *to);

/* The layout of an entry of the on-disk program cache (src/jit/disk_cache.c):
   little-endian header fields at these byte offsets, the key right after the
   header, then the payload. */
enum { KT_ENTRY_VERSION = 8, KT_ENTRY_KEY_LEN = 12, KT_ENTRY_PAYLOAD_LEN = 16, KT_ENTRY_HEADER = 32 };

/* kiln's warnings, counted from stderr: kt_capture_begin sets KILN_LOG=1
   and redirects stderr to a file in `dir`; kt_capture_end restores both and
   returns the number of "kiln warning:" lines, echoing them as comments so
   a failure shows what was said. */
struct kt_capture {
    char path[4096];
    int saved;
    char *log_env;
};
void kt_capture_begin(struct kt_capture *c, const char *dir);
int kt_capture_end(struct kt_capture *c);

/* A watchdog per test, as cmocka setup and teardown fixtures: a test still
   running KT_WATCHDOG_SECONDS after its setup ends the process with a message
   naming the limit, so a hang fails fast instead of at ctest's timeout. */
#define KT_WATCHDOG_SECONDS 60
int kt_watchdog_arm(void **state);
int kt_watchdog_disarm(void **state);

/* Assert that `status` is `expected` and that the error detail is non-empty
   when it is an error, printing both on failure. */
#define kt_assert_status(status, expected) kt_assert_status_((status), (expected), __FILE__, __LINE__)
void kt_assert_status_(kiln_status got, kiln_status expected, const char *file, int line);

/* Whether `status` is the UNSUPPORTED a context answers for an algorithm
   whose kernels its backend cannot compile (the CUDA backend, or
   KILN_CUDA_ROUTES=1: no OpenCL vector syntax); the detail is printed as a
   comment. kt_skip_unsupported_here skips the test then. */
int kt_unsupported_here(const kiln_context *ctx, kiln_status status);
/* The compute capability of ctx's device times 10 (80 for sm_80) where it is
   the CUDA backend's, as kiln_context_get_device_info reports it (backend
   "cuda", arch "sm_XY"); 0 elsewhere. The tensor-core kernels run from 80. */
int kt_cuda_cc(kiln_context *ctx);
/* Whether ctx's operators may choose kernels in OpenCL's vector syntax (the
   CPU GEMM, direct and Winograd convolutions, pooling...): not on the CUDA
   backend or under KILN_CUDA_ROUTES=1. */
int kt_vector_kernels(const kiln_context *ctx);
#define kt_skip_unsupported_here(ctx, status)                                                                          \
    do {                                                                                                               \
        if (kt_unsupported_here((ctx), (status)))                                                                      \
            skip();                                                                                                    \
    } while (0)

/* Put before a test's own OpenCL C kernel text so that NVRTC (the CUDA
   backend) compiles it too: the qualifiers and the one id such kernels use. */
#define KT_PORTABLE_KERNEL                                                                                             \
    "#ifdef __CUDACC_RTC__\n"                                                                                          \
    "#define __kernel extern \"C\" __global__\n"                                                                       \
    "#define __global\n"                                                                                               \
    "#define get_global_id(d) ((size_t)blockIdx.x * blockDim.x + threadIdx.x)\n"                                       \
    "#endif\n"

/* Bytes of one element of a storage type. */
size_t kt_elem_size(kiln_dtype t);
/* fp32 -> fp16 bits, rounding to nearest even; NaN and overflow kept. */
uint16_t kt_to_half(float f);
float kt_from_half(uint16_t h);
/* fp32 -> bf16 bits, rounding to nearest even; NaN kept (quiet). */
uint16_t kt_to_bf16(float f);
float kt_from_bf16(uint16_t h);
/* f as type t stores it: rounded to fp16 or bf16, unchanged for fp32. */
float kt_round_to(kiln_dtype t, float f);
/* Element i of raw bytes holding elements of type t: write f, read back. */
void kt_store(unsigned char *raw, kiln_dtype t, size_t i, float f);
float kt_stored(const unsigned char *raw, kiln_dtype t, size_t i);
/* The storage types' names: "f32", "f16", "bf16". */
const char *kt_dtype_name(kiln_dtype t);

/* A buffer of `bytes` on ctx, all 0xff: NaN as fp32 and as fp16. */
kiln_buffer *kt_poisoned_buffer(kiln_context *ctx, size_t bytes);
/* Fail unless every byte of buf is still 0xff (nothing was written). */
void kt_assert_still_poisoned(const kiln_buffer *buf);

/* The host's large page, as kiln's OpenCL backend reads it for a CPU
   device's large buffers: its transparent huge pages' size, 2 MiB where the
   kernel does not say. */
size_t kt_large_page_bytes(void);

/* Group fixtures for test files that share one context on the default
   device and one random seed (printed for replay) across their tests. */
extern kiln_context *kt_ctx;
extern uint64_t kt_group_seed;
int kt_group_setup(void **state);
int kt_group_teardown(void **state);

/* A context on the default device forced to profile `name` (the test fails
   unless the context reports it); the caller destroys it. A profile whose
   work-groups or local memory exceed the device's limits skips the test,
   saying why. */
kiln_context *kt_profile_context(const char *name);

/* A context on the default device with the profile overlay that `fmt`
   formats (kiln_context_options.profile_overlay); the caller destroys it. */
kiln_context *kt_overlay_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A copy of environ (the array only; the caller frees it) with `set`
   applied, a NULL-terminated list: "NAME=value" replaces NAME or adds it,
   "NAME" alone removes it. For execve in a child. */
char **kt_environ_with(const char *const *set);

/* A value no event handle has: event outputs are set to it before a call
   that must not touch them. */
#define KT_POISON_EVENT ((kiln_event *)(uintptr_t)0x5b5b)

/* ev is a real event (not NULL, not the poison), complete once
   kiln_event_wait returns (an OpenCL event's status is read too); destroys
   it. */
void kt_wait_and_release(kiln_event *ev);

/*
 * The test list of a test program. Zero-initialise one, add tests, and hand
 * it to kt_run (or kt_run_with), which runs it as one cmocka group and frees
 * it. The list owns every name (and the state copies kt_add_copy makes), so
 * names may be formatted into temporary buffers. Names must be unique within
 * a program: kt_run fails before running anything if two are the same.
 */
struct kt_list {
    struct CMUnitTest *tests;
    size_t count, capacity;
    void **owned; /* names and state copies, freed with the list */
    size_t owned_count, owned_capacity;
};

/* Appends `test` as given (its fixtures and state), with its name copied:
   kt_add(&list, cmocka_unit_test(test_x)) or any cmocka_unit_test_*(). */
#define kt_add(list, test) kt_add_test_((list), (struct CMUnitTest)test)
void kt_add_test_(struct kt_list *list, struct CMUnitTest test);

/* Appends fn with `state` (not copied), named by the printf-style `fmt`. */
void kt_addf(struct kt_list *list, CMUnitTestFunction fn, const void *state, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Appends fn with a copy of the `size` bytes at `state`, which the list owns,
   named by `fmt`; returns the copy. */
void *kt_add_copy(struct kt_list *list, CMUnitTestFunction fn, const void *state, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Appends one test per item of an array of `count` items of `size` bytes
   whose first member is the item's name (a const char *): the test is named
   prefix + name and runs fn with the item as its state. */
void kt_add_items(struct kt_list *list, const char *prefix, CMUnitTestFunction fn, const void *items, size_t count,
                  size_t size);

/* Appends fn with `state` (not copied; its first member is the test's name,
   a const char *) as test prefix + that name, under the watchdog. */
void kt_add_watched(struct kt_list *list, const char *prefix, CMUnitTestFunction fn, const void *state);

/* Appends `test` once for every shipped non-abstract device profile (its
   name as the state, "profile <name>" as the test name) with `teardown`. */
void kt_add_profiles(struct kt_list *list, CMUnitTestFunction test, CMFixtureFunction teardown);

/* Runs the list as cmocka group `group` between kt_group_setup and
   kt_group_teardown, then frees it. Returns cmocka's failure count. */
int kt_run(const char *group, struct kt_list *list);

/* kt_run with other group fixtures (either may be NULL). */
int kt_run_with(const char *group, struct kt_list *list, CMFixtureFunction setup, CMFixtureFunction teardown);

#endif /* KILN_TEST_UTIL_H */
