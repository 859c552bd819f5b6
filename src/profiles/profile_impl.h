/* Internals of profiles and profile sets, shared by the loader (profile.c)
   and the matcher (profile_match.c). */
#ifndef KILN_PROFILE_IMPL_H
#define KILN_PROFILE_IMPL_H

#include <stddef.h>

#include "profiles/profile.h"
#include "profiles/schema.h"

#define KILN_PROFILE_NAME_MAX 64 /* with the terminator, as kiln_device_info.profile */

struct kiln_str_list {
    char **items;
    size_t count;
};

struct kiln_profile {
    char name[KILN_PROFILE_NAME_MAX];
    char parent[KILN_PROFILE_NAME_MAX]; /* "" for a root */
    char *source;
    char *path;  /* where it was loaded from, for warnings */
    int has_match;
    kiln_device_type match_type; /* 0: any type */
    struct kiln_str_list match_vendor, match_name, match_arch;
    int depth;   /* 0 for a root */
    struct kiln_profile *replaced; /* the embedded profile an override displaced */
    /* Indexed like kiln_schema; after inheritance every field is set. */
    struct kiln_param_value values[];
};

struct kiln_profile_set {
    struct kiln_profile **items; /* valid profiles, sorted by name */
    size_t count;
    char *warnings;
    size_t warnings_len;
};

#define KILN_PROFILE_WHY_SIZE 512 /* room for a validation failure's reason */

/* Parse and validate one file on its own (inheritance comes later). `text`
   is NUL-terminated at `size`; `path` names it in warnings; `file_name` is
   its base name, which the profile's name must match. SUCCESS with a new
   profile in *out, INVALID_PROFILE with the reason in `why`
   (KILN_PROFILE_WHY_SIZE bytes), or OUT_OF_MEMORY. */
kiln_status kiln_profile_parse(const char *text, size_t size, const char *path, const char *file_name,
                               struct kiln_profile **out, char *why);
void kiln_profile_free(struct kiln_profile *p); /* and the profile it replaced */

/* "cpu", "gpu", "accelerator", "other" (profile_match.c). */
const char *kiln_profile_type_name(kiln_device_type type);

#endif /* KILN_PROFILE_IMPL_H */
