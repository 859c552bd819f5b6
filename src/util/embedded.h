/* Files compiled into the library by cmake/embed.cmake (kernel sources,
   device profiles). */
#ifndef KILN_EMBEDDED_H
#define KILN_EMBEDDED_H

#include <stddef.h>

struct kiln_embedded_file {
    const char *name; /* path relative to its folder, e.g. "util/fill.cl" */
    const char *data; /* NUL-terminated contents */
    size_t size;      /* length without the terminator */
};

/* Each table ends with an entry whose name is NULL (not counted). */
extern const struct kiln_embedded_file kiln_embedded_cl_kernels[];
extern const struct kiln_embedded_file kiln_embedded_cu_kernels[];
extern const struct kiln_embedded_file kiln_embedded_profiles[];
extern const size_t kiln_embedded_profiles_count;

#endif /* KILN_EMBEDDED_H */
