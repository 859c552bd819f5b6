/*
 * libFuzzer harness for buffers: a sequence of kiln_buffer_create, write,
 * read, fill_f32 and size calls drawn from the input, with offsets and
 * lengths past the end, overflowing sums, NULL buffers and host pointers.
 * A host copy follows every successful call; after each call the device
 * contents must equal it, and a rejected call must change nothing and say
 * why (fuzz_util.h).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

/* Largest buffer the harness keeps a host copy of. */
#define MIRROR_MAX 65536

/* A byte offset or length relative to a buffer of `size` bytes: inside,
   at the end, just past it, or an edge value. */
static size_t position(struct fz *f, size_t size)
{
    unsigned b = fz_byte(f);
    if (b < 200)
        return size ? fz_byte(f) * (size_t)257 % (size + 1) : 0;
    if (b < 220)
        return size;
    if (b < 240)
        return size + 1 + b % 4;
    return fz_size(f, 1);
}

static void check_contents(kiln_buffer *buf, const unsigned char *mirror, size_t size, const char *after)
{
    unsigned char *got = malloc(size);
    if (!got)
        fz_fail("out of host memory");
    kiln_status s = kiln_buffer_read(buf, 0, size, got);
    if (s != KILN_SUCCESS)
        fz_fail("kiln_buffer_read of the whole buffer: %s", kiln_last_error_detail());
    for (size_t i = 0; i < size; i++)
        if (got[i] != mirror[i])
            fz_fail("after %s, byte %zu of %zu is 0x%02x, expected 0x%02x", after, i, size, got[i], mirror[i]);
    free(got);
}

/* A rejected call: a detail of its own, and nothing changed. */
static void rejected(kiln_status s, const char *call, kiln_buffer *buf, const unsigned char *mirror, size_t size)
{
    fz_check_rejected(s, call, NULL, NULL);
    if (buf && mirror)
        check_contents(buf, mirror, size, call);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = {data, size};
    kiln_context *ctx = fz_context();
    const unsigned big = fz_one_in(&f, 16);
    const size_t bytes = big ? fz_size(&f, 1) : fz_size(&f, 4096);
    kiln_buffer *buf = (kiln_buffer *)(uintptr_t)0x5c5c;
    fz_mark_detail();
    kiln_status s = kiln_buffer_create(ctx, bytes, &buf);
    fz_count("kiln_buffer_create", s);
    if (s != KILN_SUCCESS) {
        rejected(s, "kiln_buffer_create", NULL, NULL, 0);
        if (buf != (kiln_buffer *)(uintptr_t)0x5c5c)
            fz_fail("kiln_buffer_create failed but wrote the buffer handle");
        if (bytes != 0 && bytes <= MIRROR_MAX)
            fz_fail("kiln_buffer_create of %zu bytes failed: %s", bytes, kiln_last_error_detail());
        return 0;
    }
    if (kiln_buffer_size(buf) != bytes)
        fz_fail("kiln_buffer_size is %zu, created with %zu", kiln_buffer_size(buf), bytes);
    if (bytes > MIRROR_MAX) {
        kiln_buffer_destroy(buf);
        return 0;
    }
    unsigned char *mirror = malloc(bytes), *host = malloc(bytes + 64);
    if (!mirror || !host)
        fz_fail("out of host memory");
    memset(mirror, 0xa5, bytes);
    if (kiln_buffer_write(buf, 0, bytes, mirror) != KILN_SUCCESS)
        fz_fail("kiln_buffer_write of the whole buffer: %s", kiln_last_error_detail());

    for (int op = 0; op < 12 && f.n > 0; op++) {
        const unsigned what = fz_byte(&f) % 8;
        const size_t off = position(&f, bytes), len = position(&f, bytes);
        const int fits = off <= bytes && len <= bytes - off;
        kiln_buffer *target = fz_one_in(&f, 16) ? NULL : buf;
        fz_mark_detail();
        switch (what) {
        case 0:
        case 1: { /* write */
            const unsigned char fillv = (unsigned char)fz_byte(&f);
            const void *src = fz_one_in(&f, 16) ? NULL : host;
            memset(host, fillv, len <= bytes ? len : bytes);
            s = kiln_buffer_write(target, off, len, src);
            fz_count("kiln_buffer_write", s);
            if (s != KILN_SUCCESS) {
                rejected(s, "kiln_buffer_write", buf, mirror, bytes);
                if (target && src && fits)
                    fz_fail("kiln_buffer_write(%zu, %zu) of a %zu-byte buffer failed", off, len, bytes);
                break;
            }
            if (!target || !src || !fits)
                fz_fail("kiln_buffer_write(%s, %zu, %zu, %s) of a %zu-byte buffer succeeded", target ? "buf" : "NULL",
                        off, len, src ? "src" : "NULL", bytes);
            memset(mirror + off, fillv, len);
            check_contents(buf, mirror, bytes, "kiln_buffer_write");
            break;
        }
        case 2:
        case 3: { /* read */
            void *dst = fz_one_in(&f, 16) ? NULL : host;
            memset(host, 0x3c, bytes + 64);
            s = kiln_buffer_read(target, off, len, dst);
            fz_count("kiln_buffer_read", s);
            if (s != KILN_SUCCESS) {
                rejected(s, "kiln_buffer_read", buf, mirror, bytes);
                for (size_t i = 0; i < bytes + 64; i++)
                    if (host[i] != 0x3c)
                        fz_fail("kiln_buffer_read failed but wrote host byte %zu", i);
                if (target && dst && fits)
                    fz_fail("kiln_buffer_read(%zu, %zu) of a %zu-byte buffer failed", off, len, bytes);
                break;
            }
            if (!target || !dst || !fits)
                fz_fail("kiln_buffer_read(%zu, %zu) of a %zu-byte buffer succeeded", off, len, bytes);
            if (memcmp(host, mirror + off, len) != 0)
                fz_fail("kiln_buffer_read(%zu, %zu) returned other bytes than were written", off, len);
            for (size_t i = len; i < bytes + 64; i++)
                if (host[i] != 0x3c)
                    fz_fail("kiln_buffer_read of %zu bytes wrote host byte %zu", len, i);
            break;
        }
        case 4:
        case 5: { /* fill_f32, in floats */
            const size_t first = off / 4 + (what == 5 ? off % 4 : 0), count = len / 4;
            const float value = fz_scalar(&f);
            const int in = first <= bytes / 4 && count <= bytes / 4 - first;
            s = kiln_buffer_fill_f32(target, first, count, value);
            fz_count("kiln_buffer_fill_f32", s);
            if (s != KILN_SUCCESS) {
                rejected(s, "kiln_buffer_fill_f32", buf, mirror, bytes);
                if (target && in)
                    fz_fail("kiln_buffer_fill_f32(%zu, %zu) of a %zu-byte buffer failed", first, count, bytes);
                break;
            }
            if (!target || !in)
                fz_fail("kiln_buffer_fill_f32(%zu, %zu) of a %zu-byte buffer succeeded", first, count, bytes);
            for (size_t i = 0; i < count; i++)
                memcpy(mirror + (first + i) * 4, &value, 4);
            check_contents(buf, mirror, bytes, "kiln_buffer_fill_f32");
            break;
        }
        case 6: /* sizes */
            if (kiln_buffer_size(target) != (target ? bytes : 0))
                fz_fail("kiln_buffer_size is %zu", kiln_buffer_size(target));
            break;
        default: /* NULL everywhere */
            s = kiln_buffer_create(target ? NULL : ctx, len, NULL);
            fz_count("kiln_buffer_create (NULL)", s);
            rejected(s, "kiln_buffer_create", buf, mirror, bytes);
            break;
        }
    }
    kiln_buffer_destroy(buf);
    kiln_buffer_destroy(NULL);
    free(mirror), free(host);
    return 0;
}
