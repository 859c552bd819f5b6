/*
 * POSIX file-system helpers shared by the caches and loaders. Every file
 * kiln reads (kernel sources under KILN_KERNEL_DIR, profile files, program
 * cache and find database entries) is opened by kiln_fs_open_regular or read
 * by kiln_fs_read: opened without blocking (O_NONBLOCK, so a FIFO or a device
 * node cannot hang the process), then checked on the open descriptor (fstat:
 * no window between the check and the use), required to be a regular file no
 * larger than the caller's limit, then read.
 */
#ifndef KILN_FS_H
#define KILN_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "kiln/kiln.h"

/* Create `path` and any missing parents with `mode` (like `mkdir -p`).
   Directories that already exist, or that another thread or process creates
   at the same moment, are fine. KILN_ERROR_IO, with the failing path and
   strerror in the detail, if a component cannot be created or `path` exists
   but is not a directory; KILN_ERROR_INVALID_ARGUMENT if it is NULL, empty or
   longer than PATH_MAX. */
kiln_status kiln_mkdir_p(const char *path, mode_t mode);

/* What a file of type `mode` (st_mode) is, for messages: "a regular file",
   "a directory", "a FIFO", "a socket", "a character device", "a block
   device", "a symbolic link", or "a file of unknown type". */
const char *kiln_fs_kind(mode_t mode);

/* kiln_fs_open_regular flags. */
enum {
    KILN_FS_NOFOLLOW = 1 /* a symbolic link as the last component is refused, not followed */
};

/* Open the regular file `path` for reading (O_RDONLY | O_NONBLOCK |
   O_CLOEXEC, and O_NOFOLLOW with KILN_FS_NOFOLLOW), check the descriptor's
   type and that its size is at most `max_size`. On success *fd is open and
   *st describes it. Otherwise nothing stays open, *st describes what is at
   `path` when that is known (st_mode 0 when not) so a caller can tell a
   file of the wrong kind from an unreadable one, and the detail is the
   reason, phrased to follow the path:
   NOT_FOUND: nothing there ("does not exist", also for a dangling symbolic
   link or a parent that is not a directory);
   IO: "is a FIFO, not a regular file" (any other type likewise), "is a
   symbolic link" (with KILN_FS_NOFOLLOW), "is a symbolic link loop", "has a
   path too long", "is 123 bytes, more than the 100 allowed", "cannot be
   opened (Permission denied)" and other errors with strerror. */
kiln_status kiln_fs_open_regular(const char *path, int flags, uint64_t max_size, int *fd, struct stat *st);

/* The whole regular file `path` in a malloc'd buffer *data with a NUL after
   its *size bytes (text can be read as a string). Opened and checked as by
   kiln_fs_open_regular, with its statuses; the allocation is the file's size
   plus one, so never more than max_size + 1 bytes. IO also for a read error
   or a file that changed size while it was read; OUT_OF_MEMORY. */
kiln_status kiln_fs_read(const char *path, int flags, size_t max_size, char **data, size_t *size);

/* Read up to n bytes from fd, retrying short reads and EINTR; the count
   read (< n at the end of the file), or -1 with errno set. */
ssize_t kiln_fs_read_full(int fd, void *buf, size_t n);

/* Whether `path` names a directory kiln can list and read files from
   (following symbolic links). KILN_SUCCESS, or IO with the reason phrased to
   follow the path: "does not exist", "is a FIFO, not a directory",
   "is a symbolic link loop", "is too long (5000 bytes, the system allows
   4095)", "cannot be read (Permission denied)", ...; INVALID_ARGUMENT for a
   NULL or empty path. */
kiln_status kiln_fs_check_dir(const char *path);

/* Whether directory `dir` exists or mkdir -p could make it, as far as a look
   that writes nothing can tell: 0 when it, or the nearest ancestor that
   exists, is a directory this process can write; else -1 with the reason in
   `why`, phrased to follow the path: "is too long (5000 bytes, the system
   allows 4095)", "is a FIFO, not a directory", "is under /h, which is a
   regular file, not a directory", "is or lies under a symbolic link loop",
   "is not writable (Permission denied)", "cannot be created: /h is not
   writable (...)", "cannot be used (...)". Sets no error detail. */
int kiln_fs_dir_creatable(const char *dir, char *why, size_t why_size);

#endif /* KILN_FS_H */
