/*
 * Device profiles: JSON files (device_profiles/) that say which devices they
 * match and hold the device facts and kernel parameters for them, in the
 * groups of params.h. A profile may name a parent and override only what it
 * tunes; the generic-gpu and generic-cpu roots fill every field.
 *
 * A profile set holds the profiles embedded at build time, then every *.json
 * of the user's profile directory (kiln_profile_user_dir), then every *.json
 * of an override directory (KILN_PROFILE_DIR); a later one adds a profile or
 * replaces the earlier one of the same name. A file that does not parse or
 * validate is skipped with a warning naming the file and the reason; it
 * never aborts the load. Contexts share one set per process and state of
 * the two directories (kiln_profile_set_shared).
 */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include <stddef.h>

#include "backend/backend.h"
#include "kiln/kiln.h"
#include "profiles/params.h"

#define KILN_CLASS_NAME_MAX 32 /* a class name with its terminator */
#define KILN_CLASS_MAX 16      /* classes per group */

struct kiln_profile_set;
struct kiln_profile;

/* Where a profile came from, by precedence: a later origin replaces an
   earlier profile of the same name. */
enum kiln_profile_origin {
    KILN_PROFILE_BUILTIN, /* embedded at build time */
    KILN_PROFILE_USER,    /* the user's profile directory */
    KILN_PROFILE_DIR,     /* KILN_PROFILE_DIR */
    KILN_PROFILE_OVERLAY  /* a context's profile overlay (kiln_profile_derive) */
};

/* The user's profile directory, malloc'd: $XDG_CONFIG_HOME/kiln/profiles
   when XDG_CONFIG_HOME is absolute (a relative or empty one is ignored, as
   the XDG base directory spec says), else $HOME/.config/kiln/profiles; NULL
   when neither is set (or out of memory). */
char *kiln_profile_user_dir(void);

/* Load the embedded profiles, then those in `user_dir`, then those in
   `override_dir` (each NULL or "" for none). A missing user directory is
   none; one that cannot be used (not a directory, unreadable) is skipped
   with a warning. Fails only for an unusable override directory (IO) or out
   of memory; invalid files become warnings. *out is owned by the caller
   (kiln_profile_set_free). */
kiln_status kiln_profile_set_load(const char *user_dir, const char *override_dir, struct kiln_profile_set **out);
void kiln_profile_set_free(struct kiln_profile_set *set);

/* The same, parsed once per process: a set loaded earlier for the same
   directories, unchanged since (names, sizes and times of their files), is
   shared. Release with kiln_profile_set_release. */
kiln_status kiln_profile_set_shared(const char *user_dir, const char *override_dir, struct kiln_profile_set **out);
void kiln_profile_set_release(struct kiln_profile_set *set);

/* Warnings gathered while loading, one per line ("" if none). */
const char *kiln_profile_set_warnings(const struct kiln_profile_set *set);

size_t kiln_profile_set_count(const struct kiln_profile_set *set);
const struct kiln_profile *kiln_profile_set_at(const struct kiln_profile_set *set, size_t i);
const struct kiln_profile *kiln_profile_find(const struct kiln_profile_set *set, const char *name);

/* The best profile for a device: the most specific one whose match rules all
   hold; the generic root of the device's type if none does. Writes a one-line
   explanation to `reason`. Returns NULL only if the set lacks the generic
   roots. */
const struct kiln_profile *kiln_profile_match(const struct kiln_profile_set *set, const struct kiln_device_desc *desc,
                                              char *reason, size_t reason_size);

const char *kiln_profile_name(const struct kiln_profile *p);
const char *kiln_profile_parent_name(const struct kiln_profile *p);                  /* "" for a root */
const char *kiln_profile_provenance(const struct kiln_profile *p);                   /* a JSON object */
size_t kiln_profile_class_count(const struct kiln_profile *p, enum kiln_group_id g); /* after inheritance */
int kiln_profile_is_abstract(const struct kiln_profile *p);                          /* no match rules: a parent only */

/* Where p came from, for people: "built-in", "<file> (user profile
   directory)", "<file> (KILN_PROFILE_DIR)" or "profile overlay". */
void kiln_profile_origin(const struct kiln_profile *p, char *buf, size_t size);

/* p's parents in `set`, nearest first: "amd-zen4 <- x86-64-avx512 <-
   generic-cpu"; "" for a root. */
void kiln_profile_chain(const struct kiln_profile_set *set, const struct kiln_profile *p, char *buf, size_t size);

/* Every group's default parameter set. */
const struct kiln_params *kiln_profile_params(const struct kiln_profile *p);

/* The parameter set of `group` for a problem: the first of the group's
   classes whose ranges hold the problem's dimensions (and, with `dev`, fits
   the device's limits), else the default. *set_name (if not NULL) becomes
   the class's name or "default". dims NULL takes the default. */
const void *kiln_profile_choose(const struct kiln_profile *p, enum kiln_group_id group, const struct kiln_dims *dims,
                                const struct kiln_device_desc *dev, const char **set_name);
#define KILN_PARAMS_FOR(profile, group, dims, dev, set_name)                                                           \
    ((const struct kiln_param_##group *)kiln_profile_choose((profile), KILN_GROUP_##group, (dims), (dev), (set_name)))

/* kiln_profile_choose for a plan on device `dev`: *values is the set, `label`
   (48 bytes) becomes "<group>:<set>". UNSUPPORTED, naming the profile and
   the limit, when even the default set does not fit the device. */
kiln_status kiln_profile_plan_set(const struct kiln_profile *p, enum kiln_group_id group, const struct kiln_dims *dims,
                                  const struct kiln_device_desc *dev, const void **values, char *label);

/* A field of a group's default set by name ("gemm.tiled", "mwg"), as a
   double (a choice as its index), for tools and tests. NOT_FOUND for an
   unknown group or key. */
kiln_status kiln_profile_get(const struct kiln_profile *p, const char *group, const char *key, double *value);

struct kiln_options;
/* Append group's -D options (its DEF fields, named <prefix><KEY>) for the
   parameter set `values` (a struct kiln_param_<group>). */
void kiln_profile_defines(struct kiln_options *o, enum kiln_group_id group, const void *values);

/* Check every parameter set of p against a device's limits; -1 with the
   first failure in `why` (KILN_PROFILE_WHY_SIZE bytes). */
int kiln_profile_fits(const struct kiln_profile *p, const struct kiln_device_desc *dev, char *why);

/* Bytes of shared memory a block of the tensor-core GEMM (gemm.mma) takes
   for operands stored as trans_a and trans_b say: stages buffers of the A
   and B tiles, rows padded by 16 bytes (8 halves). The same for TF32 on
   fp32 storage, whose K step of bk/2 values pads rows along K by 16 bytes
   and rows along M or N by 8 values (32 bytes). */
long kiln_gemm_mma_shared_bytes(const struct kiln_param_gemm_mma *p, int trans_a, int trans_b);
/* Dynamic shared memory of the wgmma GEMM kernel (cu/gemm/gemm_f16_wgmma.cu). */
long kiln_gemm_wgmma_shared_bytes(const struct kiln_param_gemm_wgmma *p);
/* Dynamic shared memory of the tensor-core convolution (cu/conv/conv_f16_igemm_mma.cu). */
long kiln_conv_mma_shared_bytes(const struct kiln_param_conv_mma *p);
/* The attention.mma kernel's dynamic shared memory at a head dimension. */
long kiln_attention_mma_shared_bytes(long block_q, long block_kv, long stages, long head_dim);
/* The CUDA decoding kernel's static shared memory (cu/attention/attention_decode.cu):
   each of `warps` warps' running maximum, sum and output of `rows` rows. */
long kiln_attention_decode_shared_bytes(long warps, long rows, long head_dim);

/* A child of `parent` holding the parameters of `overlay`, a JSON object
   with the optional keys "device", "select" and "kernels" of a profile file
   (no name, parent or match). INVALID_PROFILE with the reason in the detail
   if the overlay does not validate. *out is freed with kiln_profile_free. */
kiln_status kiln_profile_derive(const struct kiln_profile *parent, const char *overlay, struct kiln_profile **out);
void kiln_profile_free(struct kiln_profile *p);

/* Device peaks from the profile's "device" facts: fp32 GFLOP/s from
   flops_per_cu_cycle * compute units * clock (or an explicit peak_gflops),
   and the typical memory bandwidth in GB/s. */
double kiln_profile_peak_gflops(const struct kiln_profile *p, const struct kiln_device_desc *desc);
double kiln_profile_peak_gbps(const struct kiln_profile *p, const struct kiln_device_desc *desc);

/* What a written profile holds besides its parameters. */
struct kiln_profile_measurement {
    const char *what;       /* "gemm 16x4096x4096 GFLOP/s" */
    double value, baseline; /* baseline: the parent's value, 0 if none */
};
struct kiln_profile_provenance {
    const char *tool, *version, *device, *driver, *date, *basis; /* NULL: left out */
    const struct kiln_profile_measurement *measurements;
    size_t measurement_count;
};

/* Write `name`, a child of `values`'s profile parent (or of `parent`), as a
   profile file at `path` (atomically): its match rules copied from
   `match_from` (NULL: none, an abstract profile), the groups whose bits are
   set in `groups` (1u << KILN_GROUP_x) with every field and class of
   `values` or, when `base` is not NULL (the parent, resolved), only the
   fields that differ from base's and the classes of the groups whose
   classes differ, and the provenance. */
kiln_status kiln_profile_write(const char *path, const char *name, const char *parent,
                               const struct kiln_profile *match_from, const struct kiln_profile *values,
                               unsigned groups, const struct kiln_profile *base,
                               const struct kiln_profile_provenance *provenance);

/* Match rules naming one device exactly, as kiln_profile_write's
   `match_from`: its type, its vendor and name as items it must equal
   ("=<vendor>", "=<name>", the board name where the driver reports one),
   its arch and driver version as globs that match them alone (* ? [ and
   backslash escaped); rules for fields the device leaves empty are left out. *out
   holds no parameters and is freed with kiln_profile_free. */
kiln_status kiln_profile_exact_match(const struct kiln_device_desc *desc, struct kiln_profile **out);

/* The resolved profile as the JSON of a profile file holding every group;
 *text is malloc'd. */
kiln_status kiln_profile_to_json(const struct kiln_profile *p, char **text);

#endif /* KILN_PROFILE_H */
