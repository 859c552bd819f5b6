/*
 * The profile schema: one table (profile_schema.c) of every field a profile
 * may set, with its type, bounds and a one-line description, plus the
 * cross-field constraints every resolved profile must satisfy. The loader,
 * the accessors, kiln_profile_defines() and device_profiles/README.md all
 * follow this table.
 */
#ifndef KILN_PROFILE_SCHEMA_H
#define KILN_PROFILE_SCHEMA_H

#include <stddef.h>

#include <cjson/cJSON.h>

enum kiln_param_type {
    KILN_PARAM_INT,    /* integer >= min; a -D define */
    KILN_PARAM_VW,     /* vector width: 1, 2, 4, 8 or 16; a -D define */
    KILN_PARAM_BOOL,   /* JSON true/false; a -D define of 0 or 1 */
    KILN_PARAM_NUMBER, /* real >= min; not a define */
    KILN_PARAM_STRING  /* one of `choices`; not a define */
};

struct kiln_schema_field {
    const char *family; /* "device" (the top-level "device" object) or a
                           kernel family under "kernels" */
    const char *key;
    enum kiln_param_type type;
    double min;                  /* KILN_PARAM_INT and KILN_PARAM_NUMBER */
    const char *const *choices;  /* KILN_PARAM_STRING: NULL-terminated */
    const char *doc;
};

/* One field's value in a profile. `s` points into the field's choices. */
struct kiln_param_value {
    int set; /* has a value (its own or, after inheritance, a parent's) */
    int own; /* the value was written in the profile's own file */
    long i;
    double d;
    const char *s;
};

extern const struct kiln_schema_field kiln_schema[];
extern const size_t kiln_schema_count;

/* Index of (family, key) in kiln_schema, or -1. */
int kiln_schema_find(const char *family, const char *key);

/* Non-zero if `family` has fields in the schema. */
int kiln_schema_has_family(const char *family);

/* Read the JSON object `obj` holding `family`'s keys into values[] (indexed
   like kiln_schema), marking each as set and own. Returns 0, or -1 with the reason in
   `why` (unknown key, wrong type, out of range, duplicate). */
int kiln_schema_read_family(const cJSON *obj, const char *family, const char *where,
                            struct kiln_param_value *values, char *why, size_t why_size);

/* After inheritance: every field set and every constraint holds. Returns 0,
   or -1 with the first failure in `why`. */
int kiln_schema_check(const struct kiln_param_value *values, char *why, size_t why_size);

#endif /* KILN_PROFILE_SCHEMA_H */
