/*
 * GEMM planning internals shared by the operator (gemm.c) and its kernel
 * families (gemm_cpu.c, gemm_gpu.c, gemm_smallm.c, and CLBlast's in
 * src/opencl/cl_clblast_gemm.c).
 *
 * A plan holds the problem in row-major form: a column-major GEMM is the
 * row-major GEMM of the transposed result, C^T = op(B)^T op(A)^T, so the plan
 * swaps the operands (and m with n) once and every kernel sees row-major.
 */
#ifndef KILN_OPS_GEMM_H
#define KILN_OPS_GEMM_H

#include "core/context.h"
#include "kiln/kiln.h"
#include "ops/plan.h"
#include "profiles/profile.h"
#include "util/options.h"

/* A fused epilogue for operators that lower onto GEMM (internal; the CPU
   family implements it): bias per row (1) or column (2) of C, beta scaling a
   residual z indexed like C instead of C itself, then an activation. */
struct kiln_gemm_epilogue {
    int bias;
    int residual;
    kiln_activation act;
};

/* The problem in row-major terms. */
struct kiln_gemm_problem {
    int trans_a, trans_b;
    kiln_dtype dtype;
    kiln_math math; /* KILN_MATH_TF32: fp32 storage may multiply in TF32 */
    struct kiln_gemm_epilogue epi;
    size_t m, n, k, batch;
    size_t lda, ldb, ldc;
    size_t stride_a, stride_b, stride_c;
    int swapped;        /* A and B exchanged from the caller's column-major problem */
    int kept_a, kept_b; /* the caller packs this operand once and passes reuse_a /
                           reuse_b after (constant weights): no packing per call */
};

/* Operands of one execution, already in the problem's (row-major) order. */
struct kiln_gemm_args {
    float alpha, beta;
    void *a, *b, *c; /* backend buffer handles */
    size_t off_a, off_b, off_c;
    void *bias, *z; /* epilogue operands, NULL when unused */
    size_t off_bias;
    float slope;          /* leaky ReLU slope */
    int reuse_a, reuse_b; /* the workspace already holds this operand packed */
};

struct kiln_gemm_plan {
    struct kiln_plan base;
    struct kiln_gemm_problem p;
    const struct kiln_gemm_algorithm *algorithm;
    size_t dims[3][3]; /* per-kernel launch geometry, algorithm-defined */
    size_t aux[4];     /* algorithm-defined values fixed at planning */
};

/* A kernel family (the public API's "family"): prepare builds kernels and
   sizes the workspace, filling base.kernel and base.params; execute queues
   the work and, if asked, returns the backend event of its last launch. */
struct kiln_gemm_algorithm {
    KILN_ALGORITHM_ENTRY(struct kiln_gemm_plan, struct kiln_gemm_problem, struct kiln_gemm_args);
};

/* Operands a caller keeps across executions (kiln_gemm_plan_create_fused). */
enum { KILN_GEMM_KEEP_A = 1, KILN_GEMM_KEEP_B = 2 };

/* A row-major GEMM plan for kiln's own operators: with a fused epilogue
   (epi not NULL) always on the CPU family (the only one with epilogues; it
   runs on any device), and told which operands the caller keeps (`keep`,
   KILN_GEMM_KEEP_A | KILN_GEMM_KEEP_B): those it packs on the first
   execution only, which the CPU family's orientation counts. */
kiln_status kiln_gemm_plan_create_fused(kiln_context *ctx, const kiln_gemm_desc *desc,
                                        const struct kiln_gemm_epilogue *epi, unsigned keep, kiln_gemm_plan **out);

/* Whether the tensor-core family (gemm_mma.c) runs `dtype` storage on ctx:
   a backend with native CUDA sources on compute capability 7.5 or newer
   (8.0 for bf16 and for fp32 storage's TF32). If not, why (when `why` is
   not NULL). */
int kiln_gemm_mma_runs_on(const kiln_context *ctx, kiln_dtype dtype, char *why, size_t size);
/* Whether the wgmma family runs on ctx: native CUDA sources on compute
   capability 9.0. If not, why (when `why` is not NULL). */
int kiln_gemm_wgmma_runs_on(const kiln_context *ctx, char *why, size_t size);

/* Queue a plan on operands the caller has already checked. */
kiln_status kiln_gemm_run(kiln_gemm_plan *plan, const struct kiln_gemm_args *args, void **event);

/* The execute of the families whose one kernel reads A, B and C in place
   with gemm_f32_tiled.cl's arguments: kernels[0] over global size dims[0],
   local size dims[1]. Its arguments, for kernels launched elsewhere (tests):
   kiln_gemm_inplace_args. */
void kiln_gemm_inplace_args(struct kiln_args *a, const struct kiln_gemm_problem *p, const struct kiln_gemm_args *x);
kiln_status kiln_gemm_inplace_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *args, void **event);

/* The problem's compiler options: transposes, storage type and epilogue. */
void kiln_gemm_options(const struct kiln_gemm_plan *plan, struct kiln_options *o);

/* The plan's parameter set of `group` for its shape (kiln_plan_params). */
/* The extents of `desc` by which a parameter set is chosen (its class);
   the status of validating it. */
kiln_status kiln_gemm_desc_dims(const kiln_gemm_desc *desc, struct kiln_dims *dims);

kiln_status kiln_gemm_params(struct kiln_gemm_plan *plan, enum kiln_group_id group, void *values);

static inline size_t kiln_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* Split K of a tiled kernel (docs/gemm.md#split-k-in-the-tiled-family): a
   product of `tiles` work-group tiles along a reduction of length k in
   steps of kstep, on `units` compute units, takes S = min(waves x units /
   tiles, k / min_k) slices when S >= 2 (min_k 0: never). Returns the slices
   (1: no split) and their length in *ks (a multiple of kstep; the last may
   be shorter). */
static inline size_t kiln_split_k(size_t tiles, size_t k, size_t kstep, long min_k, long waves, unsigned units,
                                  size_t *ks)
{
    *ks = k;
    if (min_k <= 0 || tiles == 0)
        return 1;
    const size_t wanted = (size_t)waves * (units ? units : 1);
    size_t s = tiles < wanted ? wanted / tiles : 1;
    if (s > k / (size_t)min_k)
        s = k / (size_t)min_k;
    if (s < 2)
        return 1;
    *ks = kiln_div_up(kiln_div_up(k, s), kstep) * kstep;
    return kiln_div_up(k, *ks);
}

/* Say a split in a plan's parameters ("split K S x KS") and reason (its
   tiles and the device's compute units). */
void kiln_split_k_describe(struct kiln_plan *base, size_t splits, size_t ks, size_t tiles);

/* The CPU register tile (cl/common/register_tile.h) of gemm.cpu parameters
   for a product of m rows by n columns (filters by pixels in implicit GEMM),
   appending its compiler options KILN_TILE_MR, KILN_TILE_NR, KILN_TILE_VW. */
struct kiln_cpu_tile {
    long mr, nr, vw;
    int narrow;   /* the narrow tile: narrow_mr rows by one vector */
    int flipped;  /* the tile is of C^T (kiln_cpu_tile_orient only) */
    int in_place; /* flipped, and B read in place (kiln_cpu_tile_orient only) */
    /* straight, and B read in place: fp32, untransposed, not kept, its
       columns whole column panels (kiln_cpu_tile_orient only) */
    int cols_in_place;
    /* straight, and A read in place: fp32, not kept, at least mr rows
       (kiln_cpu_tile_orient only) */
    int rows_in_place;
};
struct kiln_cpu_tile kiln_cpu_tile_choose(const struct kiln_param_gemm_cpu *cpu, size_t m, size_t n,
                                          struct kiln_options *o);
/* The tile of a product whose rows are pixels and columns filters (the
   row variant of implicit GEMM; the flipped GEMM reading B in place takes
   the same rule): kiln_cpu_tile_choose's, also costing a half-width tile
   (narrow_mr rows by half the wide tile's columns, where those are 4 or
   more vectors: amd-zen4's 8 x 32 beside its 5 x 64 and 8 x 16, for a
   stem's 32 filters); where gemm.cpu.flip_nr is set, flip_mr (else mr) x
   flip_nr with its rows balanced instead, unless that other tile costs
   more than KILN_PIXEL_TILE_MARGIN less in padded multiply-adds.
   On the Xeon with AMX, 6 x 64 against 8 x 32: 1x1 layers at 14x14
   1.02-1.08x, strided 3x3 layers to 28x28 1.09x and to 14x14 1.05x, but
   7x7 outputs (49 pixels: 9 panels of 6 are 54 rows, 7 of 7 are 49)
   0.91-0.93x (docs/gemm.md#balanced-rows-and-the-flipped-product). */
#define KILN_PIXEL_TILE_MARGIN 1.05
struct kiln_cpu_tile kiln_cpu_tile_choose_pixels(const struct kiln_param_gemm_cpu *cpu, size_t pixels, size_t filters,
                                                 struct kiln_options *o);

/* Packing one element of an operand on an execution, in the CPU tile's
   multiply-adds (a padded element's k-step): measured about 20 as a packing
   launch's time per element over the micro kernel's per padded multiply-add
   (docs/gemm.md#operands-packed-on-every-call). */
#define KILN_GEMM_PACK_COST 20.0

/* The straight tile's micro kernel reading B's rows in place, a leading
   dimension apart, instead of its packed panel: its cost grows by this
   share (measured on the 2-vCPU Zen 4: 4.6% with rows 1 KiB apart, 8.7%
   with 8 KiB; docs/gemm.md#b-read-in-place-straight). */
#define KILN_GEMM_B_IN_PLACE_COST 0.06

/* The CPU GEMM family's tile for problem p: kiln_cpu_tile_choose's tiles,
   each with its rows balanced over its row panels, for C or for C^T
   (flipped: the tile's rows, at most gemm.cpu.flip_mr where that is set
   and B can be read in place, run over C's columns, stored transposed), the
   one whose padded multiply-adds, and packing of the operands not kept or
   the cost of reading them in place instead, cost least
   (docs/gemm.md#the-cpu-register-tile-wide-or-narrow). Straight, the tile
   reads A (`rows_in_place`) and B (`cols_in_place`) in place where that
   is cheaper than packing them.
   `in_place_b`: flipped, B can be read in place (unpacked), which the tile
   then does where it has no more rows than B has columns (`in_place`).
   `narrow_b`: straight, the narrow tile can read B in place (else the wide
   tile reading it is costed against the narrow one packing it).
   Appends KILN_TILE_FLIP too. */
struct kiln_cpu_tile kiln_cpu_tile_orient(const struct kiln_param_gemm_cpu *cpu, const struct kiln_gemm_problem *p,
                                          int in_place_b, int narrow_b, struct kiln_options *o);

/* The smallest gemm.cpu.in_place_l2 at which the flipped product of the CPU
   family reads a B of `bytes` (k * ldb floats) in place on ctx's device: B's
   span in percent of the core's second-level cache as the plan counts it
   (kiln-tune's ladder for the field is measured in these). */
long kiln_gemm_cpu_in_place_l2(const kiln_context *ctx, size_t bytes);

#endif /* KILN_OPS_GEMM_H */
