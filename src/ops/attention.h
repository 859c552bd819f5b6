/*
 * Attention planning internals shared by the operator (attention.c) and its
 * algorithms (attention_fused.c, attention_naive.c).
 */
#ifndef KILN_OPS_ATTENTION_H
#define KILN_OPS_ATTENTION_H

#include "core/context.h"
#include "kiln/kiln.h"
#include "profiles/profile.h"
#include "util/options.h"

/* A validated descriptor and what follows from it. Strides count elements:
   [0] between batch items, [1] between heads, [2] between positions. */
struct kiln_attention_shape {
    kiln_attention_desc d;
    size_t group;          /* query heads per key/value head */
    size_t q_stride[3];    /* Q and O */
    size_t kv_stride[3];   /* K and V */
    size_t mask_stride[2]; /* batch item and head of the mask (0: shared);
                              its rows are seq_kv apart */
    size_t q_elems, kv_elems, mask_elems, lse_elems;
};

/* Operands of one execution: backend buffer handles, NULL when unused. */
struct kiln_attention_args {
    void *q, *k, *v, *mask, *key_lengths, *o, *lse;
};

struct kiln_attention_plan;

/* An algorithm: prepare builds kernels and allocates workspace, filling
   info.kernel, info.params and info.workspace_bytes; execute queues the work
   and, if asked, returns the backend event of its last launch; release frees
   what prepare made beyond kernels and workspace (optional). */
struct kiln_attention_algorithm {
    const char *name;
    kiln_attention_algo algo;
    kiln_status (*prepare)(struct kiln_attention_plan *plan);
    kiln_status (*execute)(struct kiln_attention_plan *plan, const struct kiln_attention_args *args, void **event);
    void (*release)(struct kiln_attention_plan *plan);
};

#define KILN_ATTENTION_MAX_KERNELS 3
#define KILN_ATTENTION_MAX_WORKSPACE 5

struct kiln_attention_plan {
    kiln_context *ctx;
    struct kiln_attention_shape s;
    const struct kiln_attention_algorithm *algorithm;
    kiln_attention_plan_info info;
    struct kiln_kernel *kernels[KILN_ATTENTION_MAX_KERNELS];
    kiln_buffer *workspace[KILN_ATTENTION_MAX_WORKSPACE];
    size_t global[2], local[2]; /* launch geometry of the main kernel */
    void *impl;                 /* algorithm-private state, freed by release */
};

extern const struct kiln_attention_algorithm kiln_attention_fused, kiln_attention_naive;

/* Append the shape's switches to compiler options: KILN_F16,
   KILN_ATTN_CAUSAL, KILN_ATTN_MASK, KILN_ATTN_KEY_LENGTHS, KILN_ATTN_LSE. */
void kiln_attention_switches(const struct kiln_attention_shape *s, struct kiln_options *o);

/* The plan's parameter set of `group` for its shape into *(const struct
   kiln_param_<group> **)values, recorded in info.param_set; UNSUPPORTED if
   it does not fit the device. */
kiln_status kiln_attention_params(struct kiln_attention_plan *plan, enum kiln_group_id group, void *values);

/* Allocate workspace buffer `slot` of `bytes`, counted in info.workspace_bytes. */
kiln_status kiln_attention_workspace(struct kiln_attention_plan *plan, int slot, size_t bytes);

#endif /* KILN_OPS_ATTENTION_H */
