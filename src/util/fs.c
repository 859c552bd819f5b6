#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/diag.h"

/* mkdir that treats "already there" as success; the caller checks at the end
   that what is there is a directory. */
static int make_one(const char *path, mode_t mode)
{
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

kiln_status kiln_mkdir_p(const char *path, mode_t mode)
{
    if (!path || !*path)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_mkdir_p: path is %s", path ? "empty" : "NULL");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return KILN_SUCCESS;

    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len >= sizeof buf)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_mkdir_p: path longer than %d bytes: %.64s...",
                          PATH_MAX - 1, path);
    memcpy(buf, path, len + 1);

    /* Each prefix ending before a '/' (skipping the root and repeated
       slashes), then the whole path. */
    for (size_t i = 1; i < len; i++) {
        if (buf[i] != '/' || buf[i - 1] == '/')
            continue;
        buf[i] = '\0';
        if (make_one(buf, mode) != 0)
            return kiln_error(KILN_ERROR_IO, "cannot create directory %s: %s", buf, strerror(errno));
        buf[i] = '/';
    }
    if (make_one(path, mode) != 0)
        return kiln_error(KILN_ERROR_IO, "cannot create directory %s: %s", path, strerror(errno));
    if (stat(path, &st) != 0)
        return kiln_error(KILN_ERROR_IO, "cannot stat directory %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return kiln_error(KILN_ERROR_IO, "%s exists and is not a directory", path);
    return KILN_SUCCESS;
}

const char *kiln_fs_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "a file of unknown type";
}

/* The error of an open() of `path` that failed with `err`; *st gets what
   lstat says is there (st_mode 0 if nothing can be said). */
static kiln_status open_failure(const char *path, int err, int flags, struct stat *st)
{
    if (lstat(path, st) != 0)
        st->st_mode = 0;
    if (err == ENOENT || err == ENOTDIR)
        return kiln_error(KILN_ERROR_NOT_FOUND, "does not exist");
    if (err == ELOOP && (flags & KILN_FS_NOFOLLOW) && S_ISLNK(st->st_mode))
        return kiln_error(KILN_ERROR_IO, "is a symbolic link (not followed here)");
    if (err == ELOOP)
        return kiln_error(KILN_ERROR_IO, "is a symbolic link loop");
    if (err == ENAMETOOLONG)
        return kiln_error(KILN_ERROR_IO, "has a path too long for the system (%zu bytes)", strlen(path));
    if (st->st_mode && !S_ISREG(st->st_mode) && !S_ISLNK(st->st_mode))
        return kiln_error(KILN_ERROR_IO, "is %s, not a regular file", kiln_fs_kind(st->st_mode));
    return kiln_error(KILN_ERROR_IO, "cannot be opened (%s)", strerror(err));
}

kiln_status kiln_fs_open_regular(const char *path, int flags, uint64_t max_size, int *fd, struct stat *st)
{
    memset(st, 0, sizeof *st);
    *fd = -1;
    if (!path || !*path)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_fs_open_regular: path is %s", path ? "empty" : "NULL");
    /* O_NONBLOCK: opening a FIFO without a writer, or some devices, would
       otherwise wait for ever; it changes nothing for a regular file. */
    int oflags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | ((flags & KILN_FS_NOFOLLOW) ? O_NOFOLLOW : 0);
    int f = open(path, oflags);
    if (f < 0)
        return open_failure(path, errno, flags, st);
    if (fstat(f, st) != 0) {
        int err = errno;
        close(f);
        st->st_mode = 0;
        return kiln_error(KILN_ERROR_IO, "cannot be examined (%s)", strerror(err));
    }
    if (!S_ISREG(st->st_mode)) {
        close(f);
        return kiln_error(KILN_ERROR_IO, "is %s, not a regular file", kiln_fs_kind(st->st_mode));
    }
    if ((uint64_t)st->st_size > max_size) {
        close(f);
        return kiln_error(KILN_ERROR_IO, "is %lld bytes, more than the %llu allowed", (long long)st->st_size,
                          (unsigned long long)max_size);
    }
    *fd = f;
    return KILN_SUCCESS;
}

ssize_t kiln_fs_read_full(int fd, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = read(fd, (char *)buf + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

kiln_status kiln_fs_read(const char *path, int flags, size_t max_size, char **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    int fd;
    struct stat st;
    if (max_size > SIZE_MAX - 1)
        max_size = SIZE_MAX - 1;
    kiln_status status = kiln_fs_open_regular(path, flags, max_size, &fd, &st);
    if (status != KILN_SUCCESS)
        return status;
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "cannot be read into memory (%zu bytes)", n + 1);
    }
    /* One byte more than the size fstat gave: a file that grew meanwhile is
       caught rather than read in part. */
    ssize_t got = kiln_fs_read_full(fd, buf, n + 1);
    int err = errno;
    close(fd);
    if (got < 0 || (size_t)got != n) {
        free(buf);
        if (got < 0)
            return kiln_error(KILN_ERROR_IO, "cannot be read (%s)", strerror(err));
        return kiln_error(KILN_ERROR_IO, "changed size while being read (%zd bytes, expected %zu)", got, n);
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return KILN_SUCCESS;
}

/* Cut `path` back to its parent: trailing slashes, then the last component
   ("." for a relative name without a slash, "/" for one under the root). */
static void to_parent(char *path)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash)
        strcpy(path, ".");
    else if (slash == path)
        path[1] = '\0';
    else
        *slash = '\0';
}

/* The directory `dir`, or the nearest ancestor of it that exists (what a
   mkdir -p would create the rest under), into path with its stat: 0, or -1
   with the reason in why, phrased as kiln_fs_dir_creatable's. */
static int nearest_existing(const char *dir, char path[PATH_MAX], struct stat *st, char *why, size_t why_size)
{
    const size_t len = strlen(dir);
    if (len >= PATH_MAX) {
        snprintf(why, why_size, "is too long (%zu bytes, the system allows %d)", len, PATH_MAX - 1);
        return -1;
    }
    memcpy(path, dir, len + 1);
    while (stat(path, st) != 0) {
        if (errno == ELOOP) {
            snprintf(why, why_size, "is or lies under a symbolic link loop");
            return -1;
        }
        if (errno == ENAMETOOLONG) {
            snprintf(why, why_size, "has a name too long for the system");
            return -1;
        }
        if ((errno != ENOENT && errno != ENOTDIR) || strcmp(path, "/") == 0 || strcmp(path, ".") == 0) {
            snprintf(why, why_size, "cannot be used (%s)", strerror(errno));
            return -1;
        }
        to_parent(path);
    }
    return 0;
}

kiln_status kiln_fs_check_dir(const char *path)
{
    if (!path || !*path)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_fs_check_dir: path is %s", path ? "empty" : "NULL");
    size_t len = strlen(path);
    if (len >= PATH_MAX)
        return kiln_error(KILN_ERROR_IO, "is too long (%zu bytes, the system allows %d)", len, PATH_MAX - 1);
    struct stat st;
    if (stat(path, &st) != 0) {
        int err = errno;
        if (err == ENOTDIR) { /* an ancestor is no directory: say which */
            char near[PATH_MAX], why[160];
            struct stat ast;
            if (nearest_existing(path, near, &ast, why, sizeof why) == 0 && strcmp(near, path) != 0 &&
                !S_ISDIR(ast.st_mode))
                return kiln_error(KILN_ERROR_IO, "does not exist: it is under %s, which is %s, not a directory", near,
                                  kiln_fs_kind(ast.st_mode));
        }
        if (err == ENOENT || err == ENOTDIR)
            return kiln_error(KILN_ERROR_IO, "does not exist");
        if (err == ELOOP)
            return kiln_error(KILN_ERROR_IO, "is a symbolic link loop");
        if (err == ENAMETOOLONG)
            return kiln_error(KILN_ERROR_IO, "has a name too long for the system");
        return kiln_error(KILN_ERROR_IO, "cannot be used (%s)", strerror(err));
    }
    if (!S_ISDIR(st.st_mode))
        return kiln_error(KILN_ERROR_IO, "is %s, not a directory", kiln_fs_kind(st.st_mode));
    if (access(path, R_OK | X_OK) != 0)
        return kiln_error(KILN_ERROR_IO, "cannot be read (%s)", strerror(errno));
    return KILN_SUCCESS;
}

int kiln_fs_dir_creatable(const char *dir, char *why, size_t why_size)
{
    why[0] = '\0';
    char path[PATH_MAX];
    struct stat st;
    if (nearest_existing(dir, path, &st, why, why_size) != 0)
        return -1;
    const int itself = strcmp(path, dir) == 0;
    if (!S_ISDIR(st.st_mode)) {
        if (itself)
            snprintf(why, why_size, "is %s, not a directory", kiln_fs_kind(st.st_mode));
        else
            snprintf(why, why_size, "is under %s, which is %s, not a directory", path, kiln_fs_kind(st.st_mode));
        return -1;
    }
    if (faccessat(AT_FDCWD, path, W_OK | X_OK, AT_EACCESS) != 0) {
        if (itself)
            snprintf(why, why_size, "is not writable (%s)", strerror(errno));
        else
            snprintf(why, why_size, "cannot be created: %s is not writable (%s)", path, strerror(errno));
        return -1;
    }
    return 0;
}
