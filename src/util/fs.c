#include "util/fs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

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
