/*
 * Attention planning internals shared by the operator (attention.c) and its
 * algorithms (attention_fused.c, attention_naive.c).
 */
#ifndef KILN_OPS_ATTENTION_H
#define KILN_OPS_ATTENTION_H

#include "core/context.h"
#include "kiln/kiln.h"
#include "ops/plan.h"
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
struct kiln_args;

/* An algorithm (src/ops/plan.h): prepare builds kernels and allocates
   workspace, filling base.kernel and base.params; execute queues the work
   and, if asked, returns the backend event of its last launch. */
struct kiln_attention_algorithm {
    KILN_ALGORITHM_ENTRY(struct kiln_attention_plan, struct kiln_attention_shape, struct kiln_attention_args);
};

struct kiln_attention_plan {
    struct kiln_plan base;
    struct kiln_attention_shape s;
    const struct kiln_attention_algorithm *algorithm;
    size_t global[3], local[3]; /* launch geometry of the main kernel */
    int decoding, flash;        /* the fused algorithm runs the decoding kernel, the flash kernel (or
                                   the tensor-core one, which takes the same arguments) */
    size_t shared;              /* dynamic shared memory of the main kernel's launch, bytes */
    /* Keys split over work-items (attention_decode.c): splits of split_len
       keys; with more than one, the combine kernel in slot combine_slot,
       of combine_local work-items per work-group, each merging
       combine_cols elements of a row. */
    int splits, split_len, combine_slot;
    size_t combine_local, combine_cols;
};

/* Most splits of one problem's keys. */
#define KILN_ATTENTION_MAX_SPLITS 256

extern const struct kiln_attention_algorithm kiln_attention_fused, kiln_attention_naive;

/* Keys split over work-items (attention_decode.c). splits_for: how many
   splits give `units` work-groups (unsplit) about `wanted` in all: the
   fewest reaching it (KILN_SPLIT_FILL), or the most not passing it, one wave
   of work-groups resident together (KILN_SPLIT_ONE_WAVE); 1 where units
   reach it. split_keys: the keys per split for `units` work-items (or
   work-groups) without splitting, about per_cu per compute unit as `fill`
   says, at least min_split, a multiple of step (or KILN_ATTENTION_SPLIT_KV's),
   and `why`. split_prepare: the plan's splits,
   and with more than one the combine kernel (in kernel slot `slot`) and
   the workspace. split_launch: the plan's kernel `kernel` over `dims`
   dimensions of its geometry, with the fused kernel's arguments and the
   split ones (cl/attention/args.h), then the combine where there are
   splits; `event` receives the last launch's. */
enum kiln_split_fill { KILN_SPLIT_FILL, KILN_SPLIT_ONE_WAVE };
size_t kiln_attention_splits_for(size_t units, size_t wanted, enum kiln_split_fill fill);
/* The CUDA kernels' blocks of `warps` warps per SM for about eight warps an
   SM: one from 8 warps on (the per_cu of split_keys). */
int kiln_attention_blocks_per_sm(long warps);
int kiln_attention_split_keys(const struct kiln_attention_plan *plan, size_t units, int per_cu,
                              enum kiln_split_fill fill, long min_split, long step, const char **why);
kiln_status kiln_attention_split_prepare(struct kiln_attention_plan *plan, int split_len, int slot);
/* Append " splits=S of L keys (why)" to the plan's params where it splits. */
void kiln_attention_split_describe(struct kiln_attention_plan *plan, int split_len, const char *why);
kiln_status kiln_attention_split_launch(struct kiln_attention_plan *plan, unsigned dims, int kernel,
                                        const struct kiln_attention_args *x, void **event);

/* The CUDA backend's decoding kernel (attention_decode.c): whether ctx runs
   it in `dtype` storage (the CUDA backend; bf16 from compute capability
   8.0); if not, why (when `why` is not NULL). */
int kiln_attention_decode_cuda_runs_on(const kiln_context *ctx, kiln_dtype dtype, char *why, size_t size);

/* Whether a (batch, kv head) of the plan has few enough rows to decode
   (KILN_DECODE_MAX_ROWS: decoding, speculative and short query blocks). */
int kiln_attention_decodes(const struct kiln_attention_plan *plan);
/* The fused algorithm's decoding kernel (attention_decode.c): whether it
   takes the plan's problem, and its prepare (setting plan->decoding; it
   runs by kiln_attention_split_launch). */
int kiln_attention_decode_applies(struct kiln_attention_plan *plan);
kiln_status kiln_attention_decode_prepare(struct kiln_attention_plan *plan);

/* The fused algorithm on tensor cores (attention_mma.c): whether ctx runs
   it (the CUDA backend on compute capability 8.0 or newer, fp16 and bf16
   alike; if not, why when `why` is not NULL), whether it takes the plan's
   problem (fp16 or bf16 storage, a head dimension a multiple of 8 up to
   128), and its prepare (it runs by kiln_attention_split_launch). */
int kiln_attention_mma_runs_on(const kiln_context *ctx, char *why, size_t size);
int kiln_attention_mma_applies(const struct kiln_attention_plan *plan);
kiln_status kiln_attention_mma_prepare(struct kiln_attention_plan *plan);

/* Append the shape's switches to compiler options: KILN_F16,
   KILN_ATTN_CAUSAL, KILN_ATTN_MASK, KILN_ATTN_KEY_LENGTHS, KILN_ATTN_LSE. */
void kiln_attention_switches(const struct kiln_attention_shape *s, struct kiln_options *o);

/* The fused kernels' arguments (cl/attention/args.h): the operands, the
   sizes, the strides and the scale in base 2. */
void kiln_attention_kernel_args(const struct kiln_attention_plan *plan, const struct kiln_attention_args *x,
                                struct kiln_args *a);

/* The extents of `desc` by which a parameter set is chosen (its class);
   the status of validating it. */
kiln_status kiln_attention_desc_dims(const kiln_attention_desc *desc, struct kiln_dims *dims);

/* The plan's parameter set of `group` for its shape (kiln_plan_params). */
kiln_status kiln_attention_params(struct kiln_attention_plan *plan, enum kiln_group_id group, void *values);

#endif /* KILN_OPS_ATTENTION_H */
