/*
 * The profile schema, built from the table in params.h: per group its JSON
 * name, define prefix, fields (type, bounds, role, offset in the group's
 * struct) and a check of the cross-field constraints and device limits that
 * every resolved parameter set must satisfy.
 */
#ifndef KILN_PROFILE_SCHEMA_H
#define KILN_PROFILE_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "profiles/params.h"

enum kiln_param_type { KILN_PARAM_INT, KILN_PARAM_VW, KILN_PARAM_BOOL, KILN_PARAM_NUMBER, KILN_PARAM_CHOICE };

struct kiln_param_field {
    const char *key;
    enum kiln_param_type type;
    double min, max;            /* INT, VW, NUMBER */
    const char *const *choices; /* CHOICE: NULL-terminated */
    int define;                 /* a -D option of the group's kernels */
    size_t offset;              /* in the group's struct */
    const char *doc;
};

/* Checks a group's resolved values; `dev` NULL checks what holds on any
   device, else also the device's limits. Returns 0, or -1 with `why`. */
typedef int (*kiln_param_check)(const void *values, const struct kiln_device_desc *dev, char *why, size_t size);

struct kiln_param_group {
    const char *name;   /* "gemm.tiled" */
    const char *prefix; /* "KILN_GEMM_" ("" for none) */
    unsigned dims;      /* KILN_DIM_* bits its classes may bound; 0: no classes */
    size_t size;        /* of its struct */
    size_t offset;      /* in struct kiln_params */
    const struct kiln_param_field *fields;
    size_t count;
    kiln_param_check check; /* NULL: no constraints */
    const char *doc;
};

extern const struct kiln_param_group kiln_param_groups[KILN_GROUP_COUNT];
extern const char *const kiln_dim_names[KILN_DIM_COUNT];

/* The group of a JSON name, or -1. */
int kiln_param_group_find(const char *name);
/* The field of a key in group g, or -1. */
int kiln_param_field_find(int g, const char *key);

/* Field f of group g inside a group struct, as a double (any type). */
double kiln_param_get(int g, int f, const void *values);

/* Read the JSON object `obj` of group g's keys into `values` (the group's
   struct), or-ing each field read into *own. `where` names the object in
   messages. Returns 0, or -1 with `why` (unknown key, wrong type or range,
   duplicate). */
int kiln_param_read(const cJSON *obj, int g, const char *where, void *values, uint32_t *own, char *why,
                    size_t why_size);

/* Write field f of group g to a JSON object. */
void kiln_param_write(int g, int f, const void *values, cJSON *obj);

#endif /* KILN_PROFILE_SCHEMA_H */
