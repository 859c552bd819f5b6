/*
 * Shared parts of kiln's libFuzzer harnesses (tests/fuzz/fuzz_*.c): turning
 * the fuzzer's bytes into descriptor fields, a pool of device buffers whose
 * expected contents the harness keeps on the host, and the checks every
 * harness makes.
 *
 * Each harness builds a descriptor and its buffers from one input, calls the
 * entry point, and then:
 *  - rejected: the status is an error, kiln_last_error_detail() was set by
 *    this call, no event was handed out, and every buffer holds what it held;
 *  - accepted: the outputs match a double-precision reference within the
 *    tests' bounds, every other byte of every buffer is unchanged.
 * A failed check prints what differed and aborts, which libFuzzer reports
 * with the input that caused it. Sizes are drawn mostly small and valid,
 * sometimes from a list of edge values (0, 2^31, SIZE_MAX, products that
 * overflow); a buffer is exact, larger, one element short, missing, an
 * alias of another operand's, or from another context.
 */
#ifndef KILN_FUZZ_UTIL_H
#define KILN_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

/* ------------------------------------------------------------------------ */
/* The fuzzer's bytes                                                       */
/* ------------------------------------------------------------------------ */

/* What is left of one input; reads past the end give zeros. */
struct fz {
    const uint8_t *p;
    size_t n;
};

unsigned fz_byte(struct fz *f);
/* 1 with probability about 1 / `in`. */
int fz_one_in(struct fz *f, unsigned in);
/* A size: usually 1 to `small`, sometimes an edge value (0, 2^31 - 1, 2^31,
   2^32 + 1, SIZE_MAX / 2 + 1, SIZE_MAX, ...). */
size_t fz_size(struct fz *f, size_t small);
/* 0 to `count` - 1, sometimes a value outside the enum (-1, count, INT_MAX). */
int fz_enum(struct fz *f, int count);
/* 0 or 1, sometimes another non-zero int. */
int fz_flag(struct fz *f);
/* A scalar: usually one of a few finite values or uniform in [-2, 2],
   sometimes 0, a huge value, an infinity or NaN. */
float fz_scalar(struct fz *f);
/* A seed for the data, from the input. */
uint64_t fz_seed(struct fz *f);

/* a * b, or SIZE_MAX if it overflows; fz_add likewise. */
size_t fz_mul(size_t a, size_t b);
size_t fz_add(size_t a, size_t b);

/* ------------------------------------------------------------------------ */
/* Context and buffers                                                      */
/* ------------------------------------------------------------------------ */

/* The context every input runs on (the default device), created once. */
kiln_context *fz_context(void);

/* Elements of a buffer the harness computes with at most: a descriptor
   whose operands need more gets buffers that are too small, so that an
   accepted problem is small enough for the reference. */
#define FZ_MAX_ELEMENTS 16384

enum { FZ_MAX_BUFFERS = 8 };

/* The buffers of one input and what each must hold: `raw` is uploaded, and
   after the call every byte of a buffer is compared with it, except the
   elements a harness marks as output (`is_out`, one flag per element). */
struct fz_buffer {
    kiln_buffer *buf;
    size_t bytes;
    unsigned char *raw;
    unsigned char *is_out;
    kiln_dtype type; /* of its elements */
    size_t elem_size;
};

struct fz_pool {
    struct fz_buffer b[FZ_MAX_BUFFERS];
    int count;
    kiln_buffer *foreign; /* a buffer of another context, if one was drawn */
};

/*
 * One operand: usually a new buffer of `elements` elements of type `type`
 * (plus a few spare bytes) when that is at most FZ_MAX_ELEMENTS,
 * otherwise a small one; sometimes one element short, missing (NULL), the
 * buffer of an earlier operand, or one of another context. New buffers start
 * as bytes 0xff (NaN in every type). Returns the buffer, or NULL; *slot
 * receives its index in the pool, or -1 (NULL or foreign).
 */
kiln_buffer *fz_operand(struct fz *f, struct fz_pool *pool, size_t elements, kiln_dtype type, int *slot);
/* The storage type a descriptor's dtype field stands for: itself when
   valid, fp32 for the invalid values a harness also tries. */
kiln_dtype fz_storage(kiln_dtype dtype);
/* Element i of slot's expected contents as a float, and setting it (stored
   in the slot's type, so what the reference reads is what the device
   holds). */
float fz_get(const struct fz_pool *pool, int slot, size_t i);
void fz_set(struct fz_pool *pool, int slot, size_t i, float v);
/* The same for an operand whose elements are of type `type` whatever the
   buffer was made for: operands of different types may share a buffer. */
float fz_get_as(const struct fz_pool *pool, int slot, size_t i, kiln_dtype type);
void fz_set_as(struct fz_pool *pool, int slot, size_t i, kiln_dtype type, float v);
/* Element i of an int32 operand in slot, and setting it. */
int32_t fz_get_i32(const struct fz_pool *pool, int slot, size_t i);
void fz_set_i32(struct fz_pool *pool, int slot, size_t i, int32_t v);
/* Marks element i of slot as an output the harness checks itself. */
void fz_mark_out(struct fz_pool *pool, int slot, size_t i);
/* Uploads every buffer's expected contents. */
void fz_upload(struct fz_pool *pool);
/* Reads slot back into a new malloc'd array of bytes. */
unsigned char *fz_read(const struct fz_pool *pool, int slot);
/* Aborts unless every byte of every buffer that is not a marked output
   element holds its expected value. */
void fz_check_unchanged(const struct fz_pool *pool, const char *when);
void fz_pool_free(struct fz_pool *pool);

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

/* Sets the thread's error detail to a marker, so that a rejection can be
   seen to write its own. Call right before the call under test. */
void fz_mark_detail(void);
/* `status` came from a call that must fail cleanly: an error status, a new
   detail, *event untouched (`event` may be NULL), every buffer unchanged. */
void fz_check_rejected(kiln_status status, const char *call, kiln_event *const *event, const struct fz_pool *pool);
/* Waits for and releases an event a successful call handed out (aborting
   if it is NULL or the poison value). */
void fz_finish_event(kiln_event *event);
/* An event handle no call returns: passed in so that a rejection can be
   seen to leave it alone. */
#define FZ_POISON_EVENT ((kiln_event *)(uintptr_t)0x5b5b)

/* got within bound of want (NaN only where want is NaN), else abort with
   `what` and the element index. */
void fz_check_close(double got, double want, double bound, const char *what, size_t index);
/* Prints the message and aborts. */
void fz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Counts of accepted and rejected inputs by status, printed at exit when
   KILN_FUZZ_STATS is set: a harness whose inputs are nearly all rejected
   tests little. */
void fz_count(const char *what, kiln_status status);

#endif /* KILN_FUZZ_UTIL_H */
