/*
 * The on-disk program cache.
 *
 * Each key has one regular file directly in the cache directory, named by a
 * 128-bit hash of the key as 32 hex digits plus ".kbin" (two kiln_hash64
 * passes with different seeds). The file holds the full key, so a hash
 * collision is caught on load like any other foreign entry.
 *
 * Entry format, every integer little-endian whatever the host:
 *
 *   offset  bytes  field
 *        0      8  magic "KILNPRG1"
 *        8      4  format version (ENTRY_VERSION)
 *       12      4  key length K, without a terminator
 *       16      8  payload length P
 *       24      8  checksum: kiln_hash64 from KILN_HASH_SEED over the K key
 *                  bytes, continued over the P payload bytes
 *       32      K  key
 *     32+K      P  payload
 *
 * The file is exactly 32 + K + P bytes: a shorter one is truncated, a longer
 * one has trailing garbage. Load checks, in order, the header size, magic,
 * version, lengths against the file size (before allocating anything, so a
 * damaged header cannot ask for a huge buffer), checksum and key; the first
 * failure removes the entry, logs a warning and returns CORRUPT_CACHE. So
 * does anything other than a regular file of at most ENTRY_MAX_BYTES in
 * place of an entry: it is opened with O_NONBLOCK and O_NOFOLLOW and checked
 * on the open descriptor (src/util/fs.h), so a FIFO, device node or symbolic
 * link there never blocks the reader or leads it elsewhere.
 *
 * A writer creates "<entry>.tmp.<pid>.<n>" with O_EXCL in the same
 * directory (O_EXCL also refuses a symbolic link or FIFO of that name, and
 * the writer tries the next name), writes it whole and rename()s it over the entry. Readers
 * therefore see the old file or the new one, never a partial one, and a
 * reader that has opened the old file keeps reading it intact.
 */
#include "jit/disk_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/diag.h"
#include "util/fs.h"
#include "util/hash.h"

#define ENTRY_SUFFIX ".kbin"
#define ENTRY_VERSION 1u
/* Field offsets in the header, as in the table above. */
enum { OFFSET_VERSION = 8, OFFSET_KEY_LEN = 12, OFFSET_PAYLOAD_LEN = 16, OFFSET_CHECKSUM = 24, HEADER_SIZE = 32 };
/* Seed of the second file-name hash; any constant other than KILN_HASH_SEED. */
#define NAME_SEED_HI 0x9e3779b97f4a7c15ull
/* The largest entry read: far above any program binary, far below what a
   damaged size could ask for. */
#define ENTRY_MAX_BYTES ((uint64_t)1 << 30)
/* Attempts at a fresh temporary name before giving up. */
#define TEMP_ATTEMPTS 100

static const char entry_magic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'G', '1'};

/* Distinguishes the temporary files of the threads of one process. */
static atomic_ulong temp_counter;

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t entry_checksum(const void *key, size_t key_len, const void *payload, size_t size)
{
    return kiln_hash64(payload, size, kiln_hash64(key, key_len, KILN_HASH_SEED));
}

static kiln_status null_argument(const char *function, const char *name)
{
    return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", function, name);
}

/* snprintf into buf, INVALID_ARGUMENT if it does not fit. */
KILN_PRINTF(3, 4)
static kiln_status format_path(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= size)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "path needs %d bytes, buffer has %zu", len + 1, size);
    return KILN_SUCCESS;
}

static kiln_status build_entry_path(const char *dir, const char *key, char *buf, size_t size)
{
    size_t dir_len = strlen(dir);
    if (dir_len == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "cache directory is empty");
    size_t key_len = strlen(key);
    unsigned long long lo = kiln_hash64(key, key_len, KILN_HASH_SEED);
    unsigned long long hi = kiln_hash64(key, key_len, NAME_SEED_HI);
    const char *sep = dir[dir_len - 1] == '/' ? "" : "/";
    return format_path(buf, size, "%s%s%016llx%016llx" ENTRY_SUFFIX, dir, sep, hi, lo);
}

static int write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

/* Remove the damaged entry `path` (found as `opened`) and report why, in
   one warning. The file is removed only while `path` still names it, so an
   intact entry that another writer renamed into place meanwhile survives;
   lstat, so that a symbolic link in place of an entry is itself removed. */
KILN_PRINTF(3, 4)
static kiln_status reject_entry(const char *path, const struct stat *opened, const char *fmt, ...)
{
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);

    struct stat now;
    if (lstat(path, &now) == 0 && now.st_dev == opened->st_dev && now.st_ino == opened->st_ino &&
        (S_ISDIR(now.st_mode) ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT)
        kiln_log(KILN_LOG_WARN, "corrupt cache entry %s: %s; it cannot be removed (%s), so it is ignored", path, reason,
                 strerror(errno));
    else
        kiln_log(KILN_LOG_WARN, "removed corrupt cache entry %s: %s", path, reason);
    return kiln_error(KILN_ERROR_CORRUPT_CACHE, "cache entry %s: %s", path, reason);
}

/* Validate the entry open on fd and return its payload. */
static kiln_status read_entry(int fd, const struct stat *opened, const char *path, const char *key, void **payload,
                              size_t *size)
{
    const struct stat st = *opened;
    uint64_t file_size = (uint64_t)st.st_size;

    unsigned char header[HEADER_SIZE];
    ssize_t got = kiln_fs_read_full(fd, header, sizeof header);
    if (got < 0)
        return kiln_error(KILN_ERROR_IO, "cannot read cache entry %s: %s", path, strerror(errno));
    if ((size_t)got < sizeof header || file_size < HEADER_SIZE)
        return reject_entry(path, &st, "truncated (%zd bytes, the header alone is %d)", got, HEADER_SIZE);
    if (memcmp(header, entry_magic, sizeof entry_magic) != 0)
        return reject_entry(path, &st, "bad magic");
    uint32_t version = (uint32_t)get_le(header + OFFSET_VERSION, 4);
    if (version != ENTRY_VERSION)
        return reject_entry(path, &st, "format version %u (this build reads %u)", (unsigned)version, ENTRY_VERSION);
    uint64_t key_len = get_le(header + OFFSET_KEY_LEN, 4);
    uint64_t payload_len = get_le(header + OFFSET_PAYLOAD_LEN, 8);
    uint64_t sum = get_le(header + OFFSET_CHECKSUM, 8);

    uint64_t body = file_size - HEADER_SIZE;
    if (key_len > body || payload_len > body - key_len)
        return reject_entry(path, &st,
                            "truncated (header gives a %llu-byte key and %llu-byte payload, %llu bytes follow it)",
                            (unsigned long long)key_len, (unsigned long long)payload_len, (unsigned long long)body);
    if (payload_len < body - key_len)
        return reject_entry(path, &st, "trailing garbage (%llu bytes after the payload)",
                            (unsigned long long)(body - key_len - payload_len));
    if (payload_len > SIZE_MAX - 1)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "cache entry %s is too large for this host", path);

    char *stored_key = malloc((size_t)key_len + 1);
    unsigned char *data = malloc(payload_len ? (size_t)payload_len : 1);
    if (!stored_key || !data) {
        free(stored_key);
        free(data);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "cannot allocate %llu bytes for cache entry %s",
                          (unsigned long long)(key_len + payload_len), path);
    }
    kiln_status status = KILN_SUCCESS;
    ssize_t got_key = kiln_fs_read_full(fd, stored_key, (size_t)key_len);
    ssize_t got_data = got_key == (ssize_t)key_len ? kiln_fs_read_full(fd, data, (size_t)payload_len) : 0;
    if (got_key < 0 || got_data < 0)
        status = kiln_error(KILN_ERROR_IO, "cannot read cache entry %s: %s", path, strerror(errno));
    else if (got_key < (ssize_t)key_len || got_data < (ssize_t)payload_len)
        status = reject_entry(path, &st, "truncated while reading");
    else if (entry_checksum(stored_key, (size_t)key_len, data, (size_t)payload_len) != sum)
        status = reject_entry(path, &st, "checksum mismatch");
    else if (key_len != strlen(key) || memcmp(stored_key, key, (size_t)key_len) != 0)
        status = reject_entry(path, &st, "foreign key (the entry was written for another key)");
    free(stored_key);
    if (status != KILN_SUCCESS) {
        free(data);
        return status;
    }
    *payload = data;
    *size = (size_t)payload_len;
    return KILN_SUCCESS;
}

kiln_status kiln_disk_cache_load(const char *dir, const char *key, void **payload, size_t *size)
{
    if (!dir)
        return null_argument(__func__, "dir");
    if (!key)
        return null_argument(__func__, "key");
    if (!payload)
        return null_argument(__func__, "payload");
    if (!size)
        return null_argument(__func__, "size");
    *payload = NULL;
    *size = 0;

    char path[PATH_MAX];
    kiln_status status = build_entry_path(dir, key, path, sizeof path);
    if (status != KILN_SUCCESS)
        return status;
    /* kiln writes only regular files here: a symbolic link, FIFO, socket,
       device node or directory in place of an entry is discarded like a
       damaged one, without following or blocking on it. */
    int fd;
    struct stat st;
    status = kiln_fs_open_regular(path, KILN_FS_NOFOLLOW, ENTRY_MAX_BYTES, &fd, &st);
    if (status == KILN_ERROR_NOT_FOUND)
        return kiln_error(KILN_ERROR_NOT_FOUND, "no cache entry %s", path);
    if (status != KILN_SUCCESS) {
        char why[256];
        snprintf(why, sizeof why, "%s", kiln_last_error_detail());
        if (st.st_mode != 0 && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > ENTRY_MAX_BYTES))
            return reject_entry(path, &st, "%s", why);
        return kiln_error(KILN_ERROR_IO, "cache entry %s %s", path, why);
    }
    status = read_entry(fd, &st, path, key, payload, size);
    close(fd);
    return status;
}

/* Create a temporary file next to `path` that no other thread or process
   uses; O_EXCL makes the name ours even if pids repeat (PID namespaces
   sharing a directory, or a file left behind by a writer that died). */
static kiln_status create_temp(const char *path, char *tmp, size_t size, int *fd)
{
    for (int attempt = 0; attempt < TEMP_ATTEMPTS; attempt++) {
        unsigned long n = atomic_fetch_add(&temp_counter, 1);
        kiln_status status = format_path(tmp, size, "%s.tmp.%ld.%lu", path, (long)getpid(), n);
        if (status != KILN_SUCCESS)
            return status;
        *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (*fd >= 0)
            return KILN_SUCCESS;
        if (errno != EEXIST)
            return kiln_error(KILN_ERROR_IO, "cannot create %s: %s", tmp, strerror(errno));
    }
    return kiln_error(KILN_ERROR_IO, "cannot create a temporary file for %s: %d names taken", path, TEMP_ATTEMPTS);
}

kiln_status kiln_disk_cache_store(const char *dir, const char *key, const void *payload, size_t size)
{
    if (!dir)
        return null_argument(__func__, "dir");
    if (!key)
        return null_argument(__func__, "key");
    if (!payload)
        return null_argument(__func__, "payload");
    size_t key_len = strlen(key);
    if (key_len > UINT32_MAX)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "cache key of %zu bytes exceeds the format's limit", key_len);

    char path[PATH_MAX], tmp[PATH_MAX];
    kiln_status status = build_entry_path(dir, key, path, sizeof path);
    if (status == KILN_SUCCESS)
        status = kiln_mkdir_p(dir, 0755);
    int fd = -1;
    if (status == KILN_SUCCESS)
        status = create_temp(path, tmp, sizeof tmp, &fd);
    if (status != KILN_SUCCESS)
        return status;

    unsigned char header[HEADER_SIZE];
    memcpy(header, entry_magic, sizeof entry_magic);
    put_le(header + OFFSET_VERSION, ENTRY_VERSION, 4);
    put_le(header + OFFSET_KEY_LEN, key_len, 4);
    put_le(header + OFFSET_PAYLOAD_LEN, size, 8);
    put_le(header + OFFSET_CHECKSUM, entry_checksum(key, key_len, payload, size), 8);

    if (write_full(fd, header, sizeof header) != 0 || write_full(fd, key, key_len) != 0 ||
        write_full(fd, payload, size) != 0) {
        status = kiln_error(KILN_ERROR_IO, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
    } else if (close(fd) != 0) {
        status = kiln_error(KILN_ERROR_IO, "cannot write %s: %s", tmp, strerror(errno));
    } else if (rename(tmp, path) != 0) {
        status = kiln_error(KILN_ERROR_IO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    }
    if (status != KILN_SUCCESS)
        unlink(tmp);
    return status;
}

kiln_status kiln_disk_cache_usage(const char *dir, uint64_t *entries, uint64_t *bytes)
{
    if (!dir)
        return null_argument(__func__, "dir");
    if (!entries)
        return null_argument(__func__, "entries");
    if (!bytes)
        return null_argument(__func__, "bytes");
    *entries = 0;
    *bytes = 0;
    DIR *d = opendir(dir);
    if (!d && errno == ENOENT)
        return KILN_SUCCESS;
    if (!d)
        return kiln_error(KILN_ERROR_IO, "cannot open cache directory %s: %s", dir, strerror(errno));

    const size_t suffix_len = strlen(ENTRY_SUFFIX);
    kiln_status status = KILN_SUCCESS;
    for (;;) {
        errno = 0;
        const struct dirent *e = readdir(d);
        if (!e) {
            if (errno != 0)
                status = kiln_error(KILN_ERROR_IO, "cannot list cache directory %s: %s", dir, strerror(errno));
            break;
        }
        size_t len = strlen(e->d_name);
        if (len <= suffix_len || strcmp(e->d_name + len - suffix_len, ENTRY_SUFFIX) != 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT) /* removed since it was listed */
                continue;
            status = kiln_error(KILN_ERROR_IO, "cannot stat %s/%s: %s", dir, e->d_name, strerror(errno));
            break;
        }
        if (S_ISREG(st.st_mode)) {
            *entries += 1;
            *bytes += (uint64_t)st.st_size;
        }
    }
    closedir(d);
    return status;
}

kiln_status kiln_disk_cache_default_dir(char *buf, size_t size, const char **origin)
{
    if (!buf)
        return null_argument(__func__, "buf");
    const char *unused;
    if (!origin)
        origin = &unused;
    const char *env = getenv("KILN_CACHE_DIR");
    if (env && *env) {
        *origin = "KILN_CACHE_DIR";
        return format_path(buf, size, "%s", env);
    }
    /* The XDG base directory spec says to ignore a relative path. */
    env = getenv("XDG_CACHE_HOME");
    if (env && env[0] == '/') {
        *origin = "$XDG_CACHE_HOME/kiln";
        return format_path(buf, size, "%s/kiln", env);
    }
    env = getenv("HOME");
    if (env && *env) {
        *origin = "$HOME/.cache/kiln";
        return format_path(buf, size, "%s/.cache/kiln", env);
    }
    *origin = "";
    return kiln_error(KILN_ERROR_NOT_FOUND,
                      "no cache directory: set KILN_CACHE_DIR, XDG_CACHE_HOME (absolute) or HOME");
}

kiln_status kiln_disk_cache_check(const char *dir)
{
    if (!dir)
        return null_argument(__func__, "dir");
    if (!dir[0])
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "cache directory is empty");
    char why[PATH_MAX + 160];
    if (kiln_fs_dir_creatable(dir, why, sizeof why) != 0)
        return kiln_error(KILN_ERROR_IO, "%s", why);
    return KILN_SUCCESS;
}

kiln_status kiln_disk_cache_entry_path(const char *dir, const char *key, char *buf, size_t size)
{
    if (!dir)
        return null_argument(__func__, "dir");
    if (!key)
        return null_argument(__func__, "key");
    if (!buf)
        return null_argument(__func__, "buf");
    return build_entry_path(dir, key, buf, size);
}
