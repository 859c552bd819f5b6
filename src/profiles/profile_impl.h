/* Internals of profiles and profile sets, shared by the loader (profile.c),
   the parser (profile_parse.c), the matcher (profile_match.c) and the writer
   (profile_write.c). */
#ifndef KILN_PROFILE_IMPL_H
#define KILN_PROFILE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "profiles/profile.h"
#include "profiles/schema.h"

#define KILN_PROFILE_NAME_MAX 64 /* with the terminator, as kiln_device_info.profile */

struct kiln_str_list {
    char **items;
    size_t count;
};

/* A parameter set for a class of shapes: the group's values where every
   bounded dimension of the problem lies in [lo, hi]. */
struct kiln_param_class {
    char name[KILN_CLASS_NAME_MAX];
    long lo[KILN_DIM_COUNT], hi[KILN_DIM_COUNT];
    unsigned bounded; /* KILN_DIM_* bits with a range */
    uint32_t own;     /* fields the class sets; the rest are the group's default */
    void *raw;        /* the group's struct: the class's own values */
    void *values;     /* the group's struct, resolved */
};

struct kiln_param_classes {
    struct kiln_param_class *items;
    size_t count;
    int own; /* the file lists the group's classes (else they are the parent's) */
};

struct kiln_profile {
    char name[KILN_PROFILE_NAME_MAX];
    char parent[KILN_PROFILE_NAME_MAX]; /* "" for a root */
    char *provenance;                   /* compact JSON object ("{}" if none) */
    char *path;                         /* where it was loaded from, for warnings */
    enum kiln_profile_origin origin;
    int has_match;
    kiln_device_type match_type; /* 0: any type */
    struct kiln_str_list match_vendor, match_name, match_arch, match_driver;
    int depth;                     /* 0 for a root */
    struct kiln_profile *replaced; /* the profile of the same name an override displaced */
    struct kiln_params raw;        /* the file's own values (where own says) */
    struct kiln_params params;     /* after inheritance: every field set */
    uint32_t own[KILN_GROUP_COUNT];
    struct kiln_param_classes classes[KILN_GROUP_COUNT];
};

struct kiln_profile_set {
    struct kiln_profile **items; /* valid profiles, sorted by name */
    size_t count;
    char *warnings;
    size_t warnings_len;
};

#define KILN_PROFILE_WHY_SIZE 512                /* room for a validation failure's reason */
#define KILN_PROFILE_MAX_BYTES ((size_t)1 << 20) /* the largest profile file read, and overlay taken */

/* Parse and validate one file on its own (inheritance comes later). `text`
   is NUL-terminated at `size`; `path` names it in warnings; `file_name` is
   its base name, which the profile's name must match (NULL: no check).
   SUCCESS with a new profile in *out, INVALID_PROFILE with the reason in
   `why` (KILN_PROFILE_WHY_SIZE bytes), or OUT_OF_MEMORY. */
kiln_status kiln_profile_parse(const char *text, size_t size, const char *path, const char *file_name,
                               struct kiln_profile **out, char *why);
void kiln_profile_free(struct kiln_profile *p); /* and the profile it replaced */

/* Parse the JSON text of an overlay (the keys "device", "select" and
   "kernels" of a profile file) into a profile without name, parent or match
   rules; INVALID_PROFILE with `why`, or OUT_OF_MEMORY. */
kiln_status kiln_profile_parse_overlay(const char *text, struct kiln_profile **out, char *why);

/* Fill p's inherited values from its resolved `parent` (NULL for a root) and
   check every parameter set. Returns 0, or -1 with `why`; OUT_OF_MEMORY is
   reported as -2. */
int kiln_profile_inherit(struct kiln_profile *p, const struct kiln_profile *parent, char *why);

#endif /* KILN_PROFILE_IMPL_H */
