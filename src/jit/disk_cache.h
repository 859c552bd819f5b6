/*
 * The on-disk program cache: one file per key under a directory, written
 * atomically (temporary file, then rename) with a header carrying a format
 * version, the full key and a checksum, so a truncated, corrupt or foreign
 * entry is detected, removed and reported instead of being used.
 */
#ifndef KILN_DISK_CACHE_H
#define KILN_DISK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"

/* The default directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
   $HOME/.cache/kiln. NOT_FOUND if none of these variables is set;
   INVALID_ARGUMENT if the path does not fit `size` bytes. *origin (when not
   NULL) names where the path came from ("KILN_CACHE_DIR",
   "$XDG_CACHE_HOME/kiln" or "$HOME/.cache/kiln"), also when it is too long. */
kiln_status kiln_disk_cache_default_dir(char *buf, size_t size, const char **origin);

/* Whether `dir` can hold the cache now: it is a writable directory, or its
   nearest existing ancestor is one (a store creates the rest). IO with the
   reason as the detail, phrased to follow the directory's name ("is a FIFO,
   not a directory", "is under /x, which is a regular file, not a
   directory", "is or lies under a symbolic link loop", "is not writable
   (Permission denied)", ...); INVALID_ARGUMENT for a NULL or empty dir. */
kiln_status kiln_disk_cache_check(const char *dir);

/* Read the payload stored under `key` into a malloc'd *payload.
   NOT_FOUND: no entry. CORRUPT_CACHE: an entry existed but was truncated,
   damaged, of another format version or for another key, or something other
   than a regular file of at most 1 GiB (a FIFO, socket, device node,
   directory or symbolic link, never followed or blocked on) was in its
   place; it is removed, with one warning. IO: it could not be opened or
   read (e.g. no permission). */
kiln_status kiln_disk_cache_load(const char *dir, const char *key, void **payload, size_t *size);

/* Store `payload` under `key`, creating `dir` (and parents) as needed. Safe
   against concurrent writers of the same key in threads or processes: each
   writes its own temporary file and renames it over the entry. */
kiln_status kiln_disk_cache_store(const char *dir, const char *key, const void *payload, size_t size);

/* Number and total bytes of entries in `dir` (0, 0 if it does not exist). */
kiln_status kiln_disk_cache_usage(const char *dir, uint64_t *entries, uint64_t *bytes);

/* Path of the entry file for `key` (for tests and tools). */
kiln_status kiln_disk_cache_entry_path(const char *dir, const char *key, char *buf, size_t size);

#endif /* KILN_DISK_CACHE_H */
