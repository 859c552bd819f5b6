/*
 * Device profiles: JSON files (device_profiles/) that say which devices they
 * match and hold the kernel parameters and device facts for them. A profile
 * may name a parent and override only what it tunes; the generic-gpu and
 * generic-cpu roots fill every field of the schema (profile_schema.c).
 *
 * A profile set is loaded per context: the profiles embedded at build time,
 * then every *.json in an override directory (KILN_PROFILE_DIR), which adds
 * profiles or replaces embedded ones of the same name. A file that does not
 * parse or validate is skipped with a warning naming the file and the reason;
 * it never aborts the load.
 */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include <stddef.h>

#include "backend/backend.h"
#include "kiln/kiln.h"

struct kiln_profile_set;
struct kiln_profile;

/* Load the embedded profiles plus those in `override_dir` (NULL or "" for
   none). Fails only for an unreadable override directory or out of memory;
   invalid files become warnings. *out is owned by the caller. */
kiln_status kiln_profile_set_load(const char *override_dir, struct kiln_profile_set **out);
void kiln_profile_set_free(struct kiln_profile_set *set);

/* Warnings gathered while loading, one per line ("" if none). */
const char *kiln_profile_set_warnings(const struct kiln_profile_set *set);

size_t kiln_profile_set_count(const struct kiln_profile_set *set);
const struct kiln_profile *kiln_profile_set_at(const struct kiln_profile_set *set, size_t i);
const struct kiln_profile *kiln_profile_find(const struct kiln_profile_set *set, const char *name);

/* The best profile for a device: the most specific one whose match rules all
   hold; the generic root of the device's type if none does. Writes a one-line
   explanation to `reason`. Returns NULL only if the set lacks the generic
   roots. */
const struct kiln_profile *kiln_profile_match(const struct kiln_profile_set *set,
                                              const struct kiln_device_desc *desc, char *reason,
                                              size_t reason_size);

const char *kiln_profile_name(const struct kiln_profile *p);
const char *kiln_profile_parent_name(const struct kiln_profile *p); /* "" for a root */
const char *kiln_profile_source(const struct kiln_profile *p);      /* where its numbers come from */
int kiln_profile_is_abstract(const struct kiln_profile *p);         /* no match rules: a parent only */

/* Kernel parameters, after inheritance, by family ("gemm", "conv", ...) and
   key. NOT_FOUND if absent, INVALID_PROFILE if of another type. */
kiln_status kiln_profile_get_int(const struct kiln_profile *p, const char *family, const char *key, long *value);
kiln_status kiln_profile_get_string(const struct kiln_profile *p, const char *family, const char *key,
                                    const char **value);

/* Compiler options "-DKILN_<FAMILY>_<KEY>=<value> ..." for every integer and
   boolean parameter of `family` (upper-cased names). OUT_OF_MEMORY if the
   buffer is too small, NOT_FOUND for an unknown family. */
kiln_status kiln_profile_defines(const struct kiln_profile *p, const char *family, char *buf, size_t size);

/* Device peaks from the profile's "device" facts: fp32 GFLOP/s from
   flops_per_cu_cycle * compute units * clock (or an explicit peak_gflops),
   and the typical memory bandwidth in GB/s. */
double kiln_profile_peak_gflops(const struct kiln_profile *p, const struct kiln_device_desc *desc);
double kiln_profile_peak_gbps(const struct kiln_profile *p, const struct kiln_device_desc *desc);

#endif /* KILN_PROFILE_H */
