/* Small POSIX file-system helpers shared by the caches and loaders. */
#ifndef KILN_FS_H
#define KILN_FS_H

#include <sys/types.h>

#include "kiln/kiln.h"

/* Create `path` and any missing parents with `mode` (like `mkdir -p`).
   Directories that already exist, or that another thread or process creates
   at the same moment, are fine. KILN_ERROR_IO, with the failing path and
   strerror in the detail, if a component cannot be created or `path` exists
   but is not a directory; KILN_ERROR_INVALID_ARGUMENT if it is NULL, empty or
   longer than PATH_MAX. */
kiln_status kiln_mkdir_p(const char *path, mode_t mode);

#endif /* KILN_FS_H */
