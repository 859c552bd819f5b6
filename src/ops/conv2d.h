/*
 * Convolution planning internals shared by the operator (conv2d.c) and its
 * algorithms (conv_igemm.c, conv_winograd.c, conv_direct.c, conv_gemm.c).
 */
#ifndef KILN_OPS_CONV2D_H
#define KILN_OPS_CONV2D_H

#include "core/context.h"
#include "kiln/kiln.h"
#include "ops/plan.h"
#include "profiles/profile.h"
#include "util/options.h"

/* A validated descriptor and what follows from it. */
struct kiln_conv_shape {
    kiln_conv2d_desc d;
    size_t p, q;   /* convolution output height and width */
    size_t yh, yw; /* stored output (after the fused pool, if any) */
    size_t cg, kg; /* channels and filters per group */
};

/* Operands of one execution: backend buffer handles, NULL when unused. */
struct kiln_conv_args {
    void *x, *w, *bias, *z, *y;
};

struct kiln_conv2d_plan;

/* An algorithm (src/ops/plan.h). unsupported() returns NULL when it applies
   to the shape, else a short reason ("needs a 3x3 filter"). prepare builds
   kernels and allocates workspace, filling base.kernel and base.params;
   execute queues the work and, if asked, returns the backend event of its
   last launch. */
struct kiln_conv_algorithm {
    KILN_ALGORITHM_ENTRY(struct kiln_conv2d_plan, struct kiln_conv_shape, struct kiln_conv_args);
};

struct kiln_conv2d_plan {
    struct kiln_plan base;
    struct kiln_conv_shape s;
    const struct kiln_conv_algorithm *algorithm;
    size_t global[KILN_PLAN_KERNELS][3], local[KILN_PLAN_KERNELS][3];
    size_t local_bytes;  /* dynamic local memory of the main kernel, 0 if none */
    size_t block_panels; /* implicit GEMM, CPU kernel: weight panels per work-group (row variant: tiles) */
    int tiled;           /* implicit GEMM: the GPU-style tiled kernel runs */
    int rows;            /* implicit GEMM: the CPU row variant runs */
    size_t splits, ks;   /* implicit GEMM, tiled kernel: slices of the filter volume (1: no split), their length */
    void *packed_from;   /* weights buffer whose packed form the workspace holds
                            (constant_weights), else NULL */
};

extern const struct kiln_conv_algorithm kiln_conv_igemm, kiln_conv_im2col, kiln_conv_gemm1x1, kiln_conv_winograd2,
    kiln_conv_winograd4, kiln_conv_direct, kiln_conv_igemm_mma;

/* Whether ctx runs the tensor-core implicit GEMM (conv_mma.c): the CUDA
   backend's own sources on compute capability 8.0 or newer. If not, why
   (when `why` is not NULL). */
int kiln_conv_mma_runs_on(const kiln_context *ctx, char *why, size_t size);

/* The arguments the implicit-GEMM kernels start with (conv/igemm_shape.h's
   shape, alpha, beta, the leaky slope, x, the weights as the kernel reads
   them `w`, bias, z, y; y stands in for an unused bias or z). The tiled
   kernel and the tensor-core one take exactly these. */
void kiln_conv_igemm_args(struct kiln_args *a, const struct kiln_conv_shape *s, const struct kiln_conv_args *x,
                          void *w);

/* A 1x1 filter without padding: at stride 1 a GEMM on the input itself
   (gemm-1x1), at a larger stride one on the subsampled input (im2col). */
static inline int kiln_conv_pointwise(const kiln_conv2d_desc *d)
{
    return d->r == 1 && d->s == 1 && !d->pad_top && !d->pad_bottom && !d->pad_left && !d->pad_right;
}

/* The shape of `desc` as plan creation validates it: INVALID_ARGUMENT or
   UNSUPPORTED, with a detail, where plan creation would refuse the
   descriptor. For the tests, which ask the algorithms' unsupported(). */
kiln_status kiln_conv_shape_of(const kiln_conv2d_desc *desc, struct kiln_conv_shape *s);

/* Why `algorithm` does not apply to s (its unsupported()), NULL where it
   does: also where the entry has no unsupported, which takes every shape. */
const char *kiln_conv_why_not(const struct kiln_conv_algorithm *algorithm, const struct kiln_conv_shape *s);

/* A prepared plan for `algorithm` (UNSUPPORTED if it does not apply). */
kiln_status kiln_conv_plan_with(kiln_context *ctx, const struct kiln_conv_shape *s,
                                const struct kiln_conv_algorithm *algorithm, const char *reason,
                                kiln_conv2d_plan **out);

/* Whether the weights in `w` must be packed (again) for this execution; with
   constant_weights, only the first time a given buffer is seen. Records `w`. */
int kiln_conv_weights_stale(struct kiln_conv2d_plan *plan, void *w);

/* The shape's epilogue switches as compiler options (KILN_ACT,
   KILN_HAS_BIAS, KILN_HAS_Z, KILN_POOL, KILN_F16, KILN_NHWC). */
void kiln_conv_options(const struct kiln_conv2d_plan *plan, struct kiln_options *o);

/* The extents of `desc` by which a parameter set is chosen (its class);
   the status of validating it. */
kiln_status kiln_conv_desc_dims(const kiln_conv2d_desc *desc, struct kiln_dims *dims);

/* The plan's parameter set of `group` for its shape (kiln_plan_params). */
kiln_status kiln_conv_params(struct kiln_conv2d_plan *plan, enum kiln_group_id group, void *values);

#endif /* KILN_OPS_CONV2D_H */
