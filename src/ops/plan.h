/*
 * The plan core shared by every operator (GEMM, convolution, attention):
 * what a plan holds besides its operator's problem, and the one shape of an
 * algorithm table entry.
 *
 * An operator's plan is `struct { struct kiln_plan base; <problem>; <its
 * launch geometry>; }`. Its algorithms are a table of entries declared with
 * KILN_ALGORITHM_ENTRY: a name, the operator's enum value, whether it applies
 * to a problem, and prepare, execute and release. The operator validates a
 * descriptor, picks an entry (requested, by heuristic or by measurement),
 * creates the plan with kiln_plan_new and runs the entry's prepare; every
 * algorithm builds its kernels and workspace through the base, which the
 * plan's destruction frees. A new kernel variant is its kernel, its entry
 * and its parameter group (docs/extending.md).
 */
#ifndef KILN_OPS_PLAN_H
#define KILN_OPS_PLAN_H

#include <stddef.h>

#include "core/context.h"
#include "jit/program_cache.h"
#include "kiln/kiln.h"
#include "profiles/profile.h"
#include "util/options.h"

#define KILN_PLAN_KERNELS 4
#define KILN_PLAN_WORKSPACE 5

struct kiln_plan {
    kiln_context *ctx;
    const char *algorithm; /* its name */
    int algo;              /* the operator's enum value */
    struct kiln_kernel *kernels[KILN_PLAN_KERNELS];
    kiln_buffer *workspace[KILN_PLAN_WORKSPACE];
    size_t workspace_bytes;
    /* What describe() reports. */
    char kernel[64], params[256], param_set[48], profile[64], reason[160];
    void *impl; /* algorithm-private state, freed by the entry's release */
};

/* The members of an algorithm table entry for plans of type `plan_t` on
   problems `problem_t`, executed on operands `args_t`. unsupported (NULL for
   an algorithm that takes every problem) returns NULL when the algorithm
   applies, else a short reason; release (optional) frees what prepare made
   beyond kernels and workspace. */
#define KILN_ALGORITHM_ENTRY(plan_t, problem_t, args_t)                                                                \
    const char *name;                                                                                                  \
    int algo;                                                                                                          \
    const char *(*unsupported)(const problem_t *problem);                                                              \
    kiln_status (*prepare)(plan_t * plan);                                                                             \
    kiln_status (*execute)(plan_t * plan, const args_t *args, void **event);                                           \
    void (*release)(plan_t * plan)

/* Bytes of one stored element of `t`. */
static inline size_t kiln_dtype_size(kiln_dtype t) { return t == KILN_F32 ? 4 : 2; }

/* A kernel's storage switches, KILN_F16 and KILN_BF16 (cl/common/storage.h). */
static inline void kiln_options_storage(struct kiln_options *o, kiln_dtype t)
{
    kiln_options_add(o, "-DKILN_F16=%d -DKILN_BF16=%d", t == KILN_F16, t == KILN_BF16);
}

/* The device's NVIDIA compute capability as major * 10 + minor (0 if it
   has none). */
static inline int kiln_plan_cc(const kiln_context *ctx) { return ctx->desc.cc_major * 10 + ctx->desc.cc_minor; }

/* Whether ctx's backend compiles native CUDA sources (the CUDA backend) and
   `cc_fits` (the kernel's test of kiln_plan_cc). If not and `why` is not
   NULL, why: "<what> needs the CUDA backend[ on compute capability <need>]
   (<backend> backend, <arch>)", the clause in brackets where `need` is not
   NULL. The "runs on" predicates of the CUDA kernels (gemm_mma.c,
   attention_mma.c, attention_decode.c, conv_mma.c) say it with their own
   requirement. */
int kiln_plan_cuda_runs(const kiln_context *ctx, int cc_fits, const char *what, const char *need, char *why,
                        size_t size);

/* A zeroed plan of `size` bytes whose base names the context, algorithm and
   reason; NULL (with the error set) when out of memory. */
void *kiln_plan_new(kiln_context *ctx, size_t size, const char *algorithm, int algo, const char *reason);

/* Free the base's workspace and the plan (after the entry's release). */
void kiln_plan_free(struct kiln_plan *base);

/* Kernel `name` of `source` with `options` into kernels[slot]; reports an
   options overflow first. */
kiln_status kiln_plan_kernel(struct kiln_plan *base, int slot, const char *source, const struct kiln_options *options,
                             const char *name);

/* Workspace buffer `slot` of `bytes` (at least one), counted in
   workspace_bytes. */
kiln_status kiln_plan_workspace(struct kiln_plan *base, int slot, size_t bytes);

/* The parameter set of `group` for a problem of `dims` into *(const struct
   kiln_param_<group> **)values, recorded in param_set; UNSUPPORTED when it
   does not fit the device. */
kiln_status kiln_plan_params(struct kiln_plan *base, enum kiln_group_id group, const struct kiln_dims *dims,
                             void *values);

/* After an execute: wrap the backend event of its last launch into *event
   (when asked and the execute succeeded). */
kiln_status kiln_plan_event(const struct kiln_plan *base, kiln_status st, void *handle, kiln_event **event);

/* Fill a public plan description from the base: algo, the algorithm's name
   into the member `name_field`, kernel, params, param_set, profile, reason
   and workspace_bytes, each cut to the public field's size. */
#define KILN_PLAN_DESCRIBE(base, info, name_field)                                                                     \
    do {                                                                                                               \
        (info)->algo = (base)->algo;                                                                                   \
        kiln_text_copy((info)->name_field, sizeof(info)->name_field, (base)->algorithm);                               \
        kiln_text_copy((info)->kernel, sizeof(info)->kernel, (base)->kernel);                                          \
        kiln_text_copy((info)->params, sizeof(info)->params, (base)->params);                                          \
        kiln_text_copy((info)->param_set, sizeof(info)->param_set, (base)->param_set);                                 \
        kiln_text_copy((info)->profile, sizeof(info)->profile, (base)->profile);                                       \
        kiln_text_copy((info)->reason, sizeof(info)->reason, (base)->reason);                                          \
        (info)->workspace_bytes = (base)->workspace_bytes;                                                             \
    } while (0)

/* src into dst of `size` bytes, cut to fit and terminated. */
void kiln_text_copy(char *dst, size_t size, const char *src);

#endif /* KILN_OPS_PLAN_H */
