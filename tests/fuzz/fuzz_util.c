/* Shared parts of the fuzz harnesses; see fuzz_util.h. */
#include "fuzz_util.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* The fuzzer's bytes                                                       */
/* ------------------------------------------------------------------------ */

unsigned fz_byte(struct fz *f)
{
    if (f->n == 0)
        return 0;
    f->n--;
    return *f->p++;
}

int fz_one_in(struct fz *f, unsigned in) { return fz_byte(f) % in == in - 1; }

size_t fz_size(struct fz *f, size_t small)
{
    static const size_t edges[] = {
        0,
        (size_t)INT_MAX,
        (size_t)INT_MAX + 1,
        (size_t)UINT_MAX,
        (size_t)UINT_MAX + 2,
        (size_t)1 << 40,
        SIZE_MAX / 2 + 1,
        SIZE_MAX,
        SIZE_MAX - 1,
        (size_t)65536,
        (size_t)1 << 30,
        (size_t)3037000500, /* its square overflows 64 bits */
    };
    unsigned b = fz_byte(f);
    if (b >= 240)
        return edges[(b - 240) % (sizeof edges / sizeof *edges)];
    return 1 + b % small;
}

int fz_enum(struct fz *f, int count)
{
    unsigned b = fz_byte(f);
    if (b >= 250)
        return b == 250 ? -1 : b == 251 ? count : b == 252 ? INT_MAX : INT_MIN;
    return (int)(b % (unsigned)count);
}

int fz_flag(struct fz *f)
{
    unsigned b = fz_byte(f);
    return b == 255 ? -7 : (int)(b & 1);
}

float fz_scalar(struct fz *f)
{
    static const float common[] = {1.0f, 0.0f, -1.0f, 0.5f, 2.0f, 0.25f, -1.5f};
    unsigned b = fz_byte(f);
    if (b < 160)
        return common[b % (sizeof common / sizeof *common)];
    if (b < 248)
        return -2.0f + 4.0f * (float)fz_byte(f) / 255.0f;
    static const float odd[] = {-0.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, 1e-40f, 65504.0f};
    return odd[b - 248];
}

uint64_t fz_seed(struct fz *f)
{
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 4; i++)
        s = s * 1099511628211u + fz_byte(f);
    return s | 1;
}

size_t fz_mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

size_t fz_add(size_t a, size_t b)
{
    size_t r;
    return __builtin_add_overflow(a, b, &r) ? SIZE_MAX : r;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

enum { FZ_STATS = 64 };
static struct {
    const char *what;
    kiln_status status;
    unsigned long count;
} stats[FZ_STATS];

static void print_stats(void)
{
    for (int i = 0; i < FZ_STATS && stats[i].what; i++)
        fprintf(stderr, "fuzz stats: %-28s %-28s %lu\n", stats[i].what, kiln_status_string(stats[i].status),
                stats[i].count);
}

void fz_count(const char *what, kiln_status status)
{
    static int registered;
    if (!getenv("KILN_FUZZ_STATS"))
        return;
    if (!registered) {
        registered = 1;
        atexit(print_stats);
    }
    for (int i = 0; i < FZ_STATS; i++) {
        if (!stats[i].what) {
            stats[i].what = what;
            stats[i].status = status;
        }
        if (strcmp(stats[i].what, what) == 0 && stats[i].status == status) {
            stats[i].count++;
            return;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz check failed: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    /* A trap, not abort(): libFuzzer saves the failing input when the
       process dies of SIGILL, and this process's SIGABRT ends it silently. */
    __builtin_trap();
}

kiln_context *fz_context(void)
{
    static kiln_context *ctx;
    if (!ctx) {
        kiln_status s = kiln_context_create(NULL, &ctx);
        if (s != KILN_SUCCESS)
            fz_fail("kiln_context_create: %s: %s", kiln_status_string(s), kiln_last_error_detail());
    }
    return ctx;
}

/* The detail fz_mark_detail() leaves, which the call under test must
   replace if it fails. */
static char marker[512];

void fz_mark_detail(void)
{
    /* The only public way to write the detail is to make a call fail. */
    if (kiln_context_get_cache_info(NULL, NULL) == KILN_SUCCESS)
        fz_fail("kiln_context_get_cache_info(NULL, NULL) succeeded");
    snprintf(marker, sizeof marker, "%s", kiln_last_error_detail());
}

void fz_check_rejected(kiln_status status, const char *call, kiln_event *const *event, const struct fz_pool *pool)
{
    if (status == KILN_SUCCESS)
        fz_fail("%s: expected a failure", call);
    const char *detail = kiln_last_error_detail();
    if (!detail || !*detail || strcmp(detail, marker) == 0)
        fz_fail("%s failed with %s but set no detail of its own (\"%s\")", call, kiln_status_string(status),
                detail ? detail : "(null)");
    if (event && *event != FZ_POISON_EVENT)
        fz_fail("%s failed (%s) but wrote the event handle", call, kiln_status_string(status));
    if (pool)
        fz_check_unchanged(pool, call);
}

void fz_finish_event(kiln_event *event)
{
    if (!event || event == FZ_POISON_EVENT)
        fz_fail("a successful call handed out no event");
    kiln_status s = kiln_event_wait(event);
    if (s != KILN_SUCCESS)
        fz_fail("kiln_event_wait: %s: %s", kiln_status_string(s), kiln_last_error_detail());
    kiln_event_destroy(event);
}

void fz_check_close(double got, double want, double bound, const char *what, size_t index)
{
    if (isnan(want) ? isnan(got) : fabs(got - want) <= bound || got == want)
        return;
    fz_fail("%s: element %zu is %.9g, the reference %.9g (bound %.3g)", what, index, got, want, bound);
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                  */
/* ------------------------------------------------------------------------ */

static kiln_buffer *foreign_buffer(struct fz_pool *pool)
{
    static kiln_context *other;
    if (!other) {
        kiln_status s = kiln_context_create(NULL, &other);
        if (s != KILN_SUCCESS)
            fz_fail("second kiln_context_create: %s: %s", kiln_status_string(s), kiln_last_error_detail());
    }
    if (!pool->foreign && kiln_buffer_create(other, 4096, &pool->foreign) != KILN_SUCCESS)
        fz_fail("buffer on the second context: %s", kiln_last_error_detail());
    return pool->foreign;
}

static void *alloc_or_die(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        fz_fail("out of host memory (%zu bytes)", bytes);
    return p;
}

kiln_dtype fz_storage(kiln_dtype dtype) { return dtype == KILN_F16 || dtype == KILN_BF16 ? dtype : KILN_F32; }

kiln_buffer *fz_operand(struct fz *f, struct fz_pool *pool, size_t elements, kiln_dtype type, int *slot)
{
    *slot = -1;
    unsigned how = fz_byte(f);
    if (how >= 248 && how < 250)
        return NULL;
    if (how >= 250 && how < 253 && pool->count > 0) {
        *slot = (int)(fz_byte(f) % (unsigned)pool->count);
        return pool->b[*slot].buf;
    }
    if (how == 253)
        return foreign_buffer(pool);
    if (pool->count == FZ_MAX_BUFFERS)
        return NULL;
    const size_t elem_size = kt_elem_size(type);
    size_t n = elements <= FZ_MAX_ELEMENTS ? elements : 1 + fz_byte(f) % 64;
    if (how >= 254 && n > 0)
        n--;
    size_t bytes = n * elem_size + (how % 8 == 7 ? fz_byte(f) % 16 : 0);
    struct fz_buffer *b = &pool->b[pool->count];
    memset(b, 0, sizeof *b);
    kiln_status s = kiln_buffer_create(fz_context(), bytes, &b->buf);
    fz_count("kiln_buffer_create", s);
    if (s != KILN_SUCCESS) {
        if (bytes != 0)
            fz_fail("kiln_buffer_create of %zu bytes: %s: %s", bytes, kiln_status_string(s), kiln_last_error_detail());
        return NULL;
    }
    b->bytes = bytes;
    b->type = type;
    b->elem_size = elem_size;
    b->raw = alloc_or_die(bytes);
    memset(b->raw, 0xff, bytes);
    b->is_out = calloc(bytes / elem_size + 1, 1);
    if (!b->is_out)
        fz_fail("out of host memory");
    *slot = pool->count++;
    return b->buf;
}

float fz_get_as(const struct fz_pool *pool, int slot, size_t i, kiln_dtype type)
{
    return kt_stored(pool->b[slot].raw, type, i);
}

void fz_set_as(struct fz_pool *pool, int slot, size_t i, kiln_dtype type, float v)
{
    kt_store(pool->b[slot].raw, type, i, v);
}

float fz_get(const struct fz_pool *pool, int slot, size_t i) { return fz_get_as(pool, slot, i, pool->b[slot].type); }

void fz_set(struct fz_pool *pool, int slot, size_t i, float v) { fz_set_as(pool, slot, i, pool->b[slot].type, v); }

int32_t fz_get_i32(const struct fz_pool *pool, int slot, size_t i)
{
    int32_t v;
    memcpy(&v, pool->b[slot].raw + i * 4, 4);
    return v;
}

void fz_set_i32(struct fz_pool *pool, int slot, size_t i, int32_t v) { memcpy(pool->b[slot].raw + i * 4, &v, 4); }

void fz_mark_out(struct fz_pool *pool, int slot, size_t i) { pool->b[slot].is_out[i] = 1; }

void fz_upload(struct fz_pool *pool)
{
    for (int i = 0; i < pool->count; i++) {
        kiln_status s = kiln_buffer_write(pool->b[i].buf, 0, pool->b[i].bytes, pool->b[i].raw);
        if (s != KILN_SUCCESS)
            fz_fail("kiln_buffer_write: %s", kiln_last_error_detail());
    }
}

unsigned char *fz_read(const struct fz_pool *pool, int slot)
{
    const struct fz_buffer *b = &pool->b[slot];
    unsigned char *got = alloc_or_die(b->bytes);
    kiln_status s = kiln_buffer_read(b->buf, 0, b->bytes, got);
    if (s != KILN_SUCCESS)
        fz_fail("kiln_buffer_read: %s", kiln_last_error_detail());
    return got;
}

void fz_check_unchanged(const struct fz_pool *pool, const char *when)
{
    for (int i = 0; i < pool->count; i++) {
        const struct fz_buffer *b = &pool->b[i];
        unsigned char *got = fz_read(pool, i);
        for (size_t j = 0; j < b->bytes; j++)
            if (got[j] != b->raw[j] && !b->is_out[j / b->elem_size])
                fz_fail("%s: byte %zu of buffer %d (%zu bytes) changed from 0x%02x to 0x%02x", when, j, i, b->bytes,
                        b->raw[j], got[j]);
        free(got);
    }
}

void fz_pool_free(struct fz_pool *pool)
{
    for (int i = 0; i < pool->count; i++) {
        kiln_buffer_destroy(pool->b[i].buf);
        free(pool->b[i].raw);
        free(pool->b[i].is_out);
    }
    kiln_buffer_destroy(pool->foreign);
    memset(pool, 0, sizeof *pool);
}
