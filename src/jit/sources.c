/*
 * Kernel sources of the context's backend: the copies embedded at build time
 * (the backend's kernel_sources), or files under $KILN_KERNEL_DIR while
 * developing. `#include "path"` lines (paths relative to the backend's source
 * tree, e.g. cl/) are expanded here, since an embedded source has no
 * directory for the device compiler to search. A native source (cu/) includes
 * from its own tree first, then from the shared one (the epilogue and shape
 * headers of cl/common and cl/conv), so that both APIs' kernels share them.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "jit/program_cache.h"
#include "util/embedded.h"
#include "util/fs.h"
#include "util/hash.h"

#define KILN_INCLUDE_DEPTH 8

int kiln_source_embedded(void)
{
    const char *dir = getenv("KILN_KERNEL_DIR");
    return !dir || !*dir;
}

kiln_status kiln_source_dir_check(void)
{
    const char *dir = getenv("KILN_KERNEL_DIR");
    if (!dir || !*dir)
        return KILN_SUCCESS;
    kiln_status st = kiln_fs_check_dir(dir);
    if (st != KILN_SUCCESS) {
        char why[256];
        snprintf(why, sizeof why, "%s", kiln_last_error_detail());
        return kiln_error(KILN_ERROR_IO, "KILN_KERNEL_DIR '%.200s%s' %s", dir, strlen(dir) > 200 ? "..." : "", why);
    }
    return KILN_SUCCESS;
}

/* A file of kernel source under $KILN_KERNEL_DIR. The directory must be
   usable and hold the file: a developer who points kiln at a tree expects
   its kernels, so anything else is an IO error naming the variable, the
   file and the reason, never a silent fall back to the embedded copy. */
static kiln_status read_from_dir(const char *dir, const char *name, const char **text, size_t *length, char **owned)
{
    kiln_status st = kiln_source_dir_check();
    if (st != KILN_SUCCESS)
        return st;
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        return kiln_error(KILN_ERROR_IO, "KILN_KERNEL_DIR: the path of %s is too long (%d bytes, the system allows %d)",
                          name, n, PATH_MAX - 1);
    char *data = NULL;
    size_t size = 0;
    st = kiln_fs_read(path, 0, KILN_SOURCE_MAX_BYTES, &data, &size);
    if (st != KILN_SUCCESS) {
        char why[256];
        snprintf(why, sizeof why, "%s", kiln_last_error_detail());
        return kiln_error(st == KILN_ERROR_OUT_OF_MEMORY ? st : KILN_ERROR_IO, "KILN_KERNEL_DIR: kernel source %s %s",
                          path, why);
    }
    *text = *owned = data;
    *length = size;
    return KILN_SUCCESS;
}

/* A native source: a name of the backend's native tree (docs/extending.md). */
static int native_name(const struct kiln_backend *backend, const char *name)
{
    if (!backend->native_sources)
        return 0;
    for (const struct kiln_embedded_file *f = backend->native_sources; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return 1;
    return 0;
}

static kiln_status source_get(const struct kiln_backend *backend, const char *name, int native, const char **text,
                              size_t *length, char **owned)
{
    *owned = NULL;
    if (native) {
        for (const struct kiln_embedded_file *f = backend->native_sources; f->name; f++)
            if (strcmp(f->name, name) == 0) {
                *text = f->data;
                *length = f->size;
                return KILN_SUCCESS;
            }
        return kiln_error(KILN_ERROR_NOT_FOUND, "no %s kernel source named %s", backend->name, name);
    }
    return kiln_source_get(backend, name, text, length, owned);
}

kiln_status kiln_source_get(const struct kiln_backend *backend, const char *name, const char **text, size_t *length,
                            char **owned)
{
    *owned = NULL;
    if (!kiln_source_embedded())
        return read_from_dir(getenv("KILN_KERNEL_DIR"), name, text, length, owned);
    for (const struct kiln_embedded_file *f = backend->kernel_sources; f->name; f++) {
        if (strcmp(f->name, name) == 0) {
            *text = f->data;
            *length = f->size;
            return KILN_SUCCESS;
        }
    }
    return kiln_error(KILN_ERROR_NOT_FOUND, "no kernel source named %s", name);
}

uint64_t kiln_source_hash(const struct kiln_backend *backend, uint64_t seed)
{
    uint64_t h = seed;
    for (const struct kiln_embedded_file *f = backend->kernel_sources; f->name; f++)
        h = kiln_hash64(f->data, f->size, h);
    for (const struct kiln_embedded_file *f = backend->native_sources; f && f->name; f++)
        h = kiln_hash64(f->data, f->size, h);
    const char *dir = getenv("KILN_KERNEL_DIR");
    if (dir)
        h = kiln_hash64(dir, strlen(dir), h);
    return h;
}

/* A growing output buffer. */
struct text {
    char *data;
    size_t length, capacity;
};

static int append(struct text *t, const char *s, size_t n)
{
    if (t->length + n + 1 > t->capacity) {
        size_t cap = (t->length + n + 1) * 2;
        char *p = realloc(t->data, cap);
        if (!p)
            return 0;
        t->data = p;
        t->capacity = cap;
    }
    memcpy(t->data + t->length, s, n);
    t->length += n;
    t->data[t->length] = '\0';
    return 1;
}

static kiln_status expand(const struct kiln_backend *backend, const char *name, int native, struct text *out, int depth)
{
    if (depth > KILN_INCLUDE_DEPTH)
        return kiln_error(KILN_ERROR_BUILD, "kernel source %s: includes nest deeper than %d", name, KILN_INCLUDE_DEPTH);
    const char *text = "";
    size_t length = 0;
    char *owned = NULL;
    kiln_status st = source_get(backend, name, native, &text, &length, &owned);
    for (const char *line = text, *end = text + length; st == KILN_SUCCESS && line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        const char *next = eol ? eol + 1 : end;
        static const char directive[] = "#include \"";
        const char *quote;
        if ((size_t)(next - line) > sizeof directive && strncmp(line, directive, sizeof directive - 1) == 0 &&
            (quote = memchr(line + sizeof directive - 1, '"', (size_t)(next - line) - (sizeof directive - 1)))) {
            char included[256];
            const size_t name_len = (size_t)(quote - line) - (sizeof directive - 1);
            if (name_len >= sizeof included)
                st = kiln_error(KILN_ERROR_BUILD, "kernel source %s: an included name is longer than %zu bytes", name,
                                sizeof included - 1);
            else
                snprintf(included, sizeof included, "%.*s", (int)name_len, line + sizeof directive - 1);
            if (st == KILN_SUCCESS)
                st = expand(backend, included, native && native_name(backend, included), out, depth + 1);
            if (st == KILN_SUCCESS && !append(out, "\n", 1))
                st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "expanding kernel source %s", name);
        } else if (!append(out, line, (size_t)(next - line))) {
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "expanding kernel source %s", name);
        }
        line = next;
    }
    free(owned);
    return st;
}

kiln_status kiln_source_expand(const struct kiln_backend *backend, const char *name, char **text, size_t *length)
{
    char file[256];
    const int native = native_name(backend, name);
    if (snprintf(file, sizeof file, "%s%s", name, native ? "" : backend->kernel_extension) >= (int)sizeof file)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kernel source name \"%s\" is too long", name);
    struct text out = {0};
    kiln_status st = expand(backend, file, native, &out, 0);
    if (st == KILN_SUCCESS && !out.data && !append(&out, "", 0))
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "expanding kernel source %s", name);
    if (st != KILN_SUCCESS) {
        free(out.data);
        return st;
    }
    *text = out.data;
    *length = out.length;
    return KILN_SUCCESS;
}
