/*
 * GEMM: validate a descriptor, turn it into a row-major problem, choose a
 * kernel family from the profile (or the caller's choice), and run it.
 */
#include "ops/gemm.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "profiles/profile.h"

void kiln_gemm_desc_init(kiln_gemm_desc *desc, kiln_layout layout, kiln_transpose trans_a, kiln_transpose trans_b,
                         size_t m, size_t n, size_t k)
{
    if (!desc)
        return;
    memset(desc, 0, sizeof *desc);
    desc->layout = layout;
    desc->trans_a = trans_a;
    desc->trans_b = trans_b;
    desc->dtype = KILN_F32;
    desc->m = m;
    desc->n = n;
    desc->k = k;
    desc->batch = 1;
    desc->algo = KILN_GEMM_AUTO;
    /* Stored shapes: row-major A is m x k (k x m transposed); column-major
       flips which dimension is contiguous. */
    int row = layout == KILN_ROW_MAJOR;
    desc->lda = (row != (trans_a == KILN_TRANS)) ? k : m;
    desc->ldb = (row != (trans_b == KILN_TRANS)) ? n : k;
    desc->ldc = row ? n : m;
    desc->stride_a = m * k;
    desc->stride_b = k * n;
    desc->stride_c = m * n;
}

/* Elements spanned by `batch` items of a rows x cols matrix with leading
   dimension ld and the given stride; SIZE_MAX on overflow. */
static size_t footprint(size_t rows, size_t cols, size_t ld, size_t stride, size_t batch)
{
    size_t a, b, total;
    if (__builtin_mul_overflow(rows - 1, ld, &a) || __builtin_mul_overflow(batch - 1, stride, &b) ||
        __builtin_add_overflow(a, b, &total) || __builtin_add_overflow(total, cols, &total))
        return SIZE_MAX;
    return total;
}

/* Check the descriptor and produce the row-major problem. */
static kiln_status normalise(const kiln_gemm_desc *d, struct kiln_gemm_problem *p)
{
    if ((unsigned)d->layout > KILN_COL_MAJOR || (unsigned)d->trans_a > KILN_TRANS ||
        (unsigned)d->trans_b > KILN_TRANS || (unsigned)d->dtype > KILN_BF16 || (unsigned)d->algo > KILN_GEMM_WGMMA ||
        (unsigned)d->math > KILN_MATH_TF32)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "gemm: layout, transpose, dtype, algo or math is not a valid value");
    if (d->m == 0 || d->n == 0 || d->k == 0 || d->batch == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "gemm: m, n, k and batch must be at least 1 (m=%zu n=%zu k=%zu batch=%zu)", d->m, d->n, d->k,
                          d->batch);
    if (d->m > INT_MAX || d->n > INT_MAX || d->k > INT_MAX || d->lda > INT_MAX || d->ldb > INT_MAX || d->ldc > INT_MAX)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "gemm: dimensions and leading dimensions above %d", INT_MAX);

    memset(p, 0, sizeof *p);
    p->dtype = d->dtype;
    p->math = d->math;
    p->k = d->k;
    p->batch = d->batch;
    p->ldc = d->ldc;
    p->stride_c = d->stride_c;
    p->swapped = d->layout == KILN_COL_MAJOR;
    if (!p->swapped) {
        p->m = d->m, p->n = d->n;
        p->trans_a = d->trans_a == KILN_TRANS, p->trans_b = d->trans_b == KILN_TRANS;
        p->lda = d->lda, p->ldb = d->ldb;
        p->stride_a = d->stride_a, p->stride_b = d->stride_b;
    } else {
        p->m = d->n, p->n = d->m;
        p->trans_a = d->trans_b == KILN_TRANS, p->trans_b = d->trans_a == KILN_TRANS;
        p->lda = d->ldb, p->ldb = d->lda;
        p->stride_a = d->stride_b, p->stride_b = d->stride_a;
    }
    /* Row lengths of the stored (row-major) matrices. */
    size_t cols_a = p->trans_a ? p->m : p->k, cols_b = p->trans_b ? p->k : p->n;
    const char *name_a = p->swapped ? "ldb" : "lda", *name_b = p->swapped ? "lda" : "ldb";
    if (p->lda < cols_a)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "gemm: %s = %zu is smaller than the stored A's %zu", name_a,
                          p->lda, cols_a);
    if (p->ldb < cols_b)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "gemm: %s = %zu is smaller than the stored B's %zu", name_b,
                          p->ldb, cols_b);
    if (p->ldc < p->n)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "gemm: ldc = %zu is smaller than C's %zu", p->ldc, p->n);
    if (p->batch > 1 && p->stride_c < footprint(p->m, p->n, p->ldc, 0, 1))
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "gemm: stride_c = %zu makes the %zu batch items of C overlap (each spans %zu elements)",
                          p->stride_c, p->batch, footprint(p->m, p->n, p->ldc, 0, 1));
    return KILN_SUCCESS;
}

/* The families, each defined in a file of its own (gemm_<name>.c; wgmma beside mma). */
extern const struct kiln_gemm_algorithm kiln_gemm_cpu, kiln_gemm_tiled, kiln_gemm_direct, kiln_gemm_clblast,
    kiln_gemm_smallm, kiln_gemm_mma, kiln_gemm_wgmma;
static const struct kiln_gemm_algorithm *const algorithms[] = {&kiln_gemm_cpu,     &kiln_gemm_tiled,  &kiln_gemm_direct,
                                                               &kiln_gemm_clblast, &kiln_gemm_smallm, &kiln_gemm_mma,
                                                               &kiln_gemm_wgmma};

static const struct kiln_gemm_algorithm *algorithm_of(kiln_gemm_algo algo)
{
    for (size_t i = 0; i < sizeof algorithms / sizeof *algorithms; i++)
        if (algorithms[i]->algo == (int)algo)
            return algorithms[i];
    return NULL;
}

static const char *why_not(const struct kiln_gemm_algorithm *a, const struct kiln_gemm_problem *p)
{
    return a->unsupported ? a->unsupported(p) : NULL;
}

/* AUTO: few rows of C (in row-major terms) go to the small-M kernels, other
   small problems to the direct kernel; the rest take the profile's route
   (CLBlast's only where kiln was built with it). Fused epilogues never come
   here: kiln_gemm_plan_create_fused asks for the CPU family. */
static const struct kiln_gemm_algorithm *choose(const kiln_context *ctx, const struct kiln_gemm_problem *p,
                                                char *reason, size_t size)
{
    const struct kiln_param_select *sel = &kiln_profile_params(ctx->profile)->select;
    const long smallm_max = sel->gemm_smallm_max, direct_max = sel->gemm_direct_max;
    double volume = (double)p->m * (double)p->n * (double)p->k;
    if (p->m <= (size_t)smallm_max && ctx->vector_kernels) {
        snprintf(reason, size, "%s = %zu <= smallm_max %ld", p->swapped ? "n" : "m", p->m, smallm_max);
        return &kiln_gemm_smallm;
    }
    if (volume <= (double)direct_max) {
        snprintf(reason, size, "m*n*k = %.0f <= direct_max %ld", volume, direct_max);
        return &kiln_gemm_direct;
    }
    /* Tensor cores: 16-bit storage, or fp32 storage whose descriptor allows
       TF32 (the families refuse fp32 storage otherwise). */
    const char *storage = p->dtype == KILN_BF16  ? "bf16 storage"
                          : p->dtype == KILN_F16 ? "fp16 storage"
                                                 : "fp32 storage as TF32";
    if (!why_not(&kiln_gemm_wgmma, p) && kiln_gemm_wgmma_runs_on(ctx, NULL, 0)) {
        snprintf(reason, size, "%s on Hopper's warpgroup tensor cores (%s)", storage, ctx->desc.arch);
        return &kiln_gemm_wgmma;
    }
    if (!why_not(&kiln_gemm_mma, p) && kiln_gemm_mma_runs_on(ctx, p->dtype, NULL, 0)) {
        snprintf(reason, size, "%s on tensor cores (%s)", storage, ctx->desc.arch);
        return &kiln_gemm_mma;
    }
    static const char *const routes[] = {KILN_GEMM_ROUTES};
    const int opencl = strcmp(ctx->backend->name, "opencl") == 0;
    if (sel->gemm_route == KILN_ROUTE_CLBLAST && opencl && !why_not(&kiln_gemm_clblast, p)) {
        snprintf(reason, size, "profile route clblast");
        return &kiln_gemm_clblast;
    }
    if (!ctx->vector_kernels && sel->gemm_route != KILN_ROUTE_TILED) {
        snprintf(reason, size, "profile route %s, tiled on the %s backend", routes[sel->gemm_route],
                 ctx->backend->name);
        return &kiln_gemm_tiled;
    }
    snprintf(reason, size, "profile route %s%s", routes[sel->gemm_route],
             sel->gemm_route == KILN_ROUTE_CLBLAST
                 ? (opencl ? " (kiln built without CLBlast: tiled)" : " (CLBlast is OpenCL's: tiled)")
                 : "");
    return sel->gemm_route == KILN_ROUTE_CPU ? &kiln_gemm_cpu : &kiln_gemm_tiled;
}

/* A problem's extents along the dimensions parameter sets are chosen by. */
static struct kiln_dims problem_dims(const struct kiln_gemm_problem *p)
{
    struct kiln_dims dims = {{0}};
    dims.v[KILN_DIM_M] = (long)p->m;
    dims.v[KILN_DIM_N] = (long)p->n;
    dims.v[KILN_DIM_K] = (long)p->k;
    dims.v[KILN_DIM_BATCH] = (long)p->batch;
    return dims;
}

kiln_status kiln_gemm_desc_dims(const kiln_gemm_desc *desc, struct kiln_dims *dims)
{
    struct kiln_gemm_problem p;
    kiln_status st = normalise(desc, &p);
    if (st == KILN_SUCCESS)
        *dims = problem_dims(&p);
    return st;
}

void kiln_split_k_describe(struct kiln_plan *base, size_t splits, size_t ks, size_t tiles)
{
    size_t len = strlen(base->params);
    snprintf(base->params + len, sizeof base->params - len, ", split K %zu x %zu", splits, ks);
    len = strlen(base->reason);
    snprintf(base->reason + len, sizeof base->reason - len, "; split K: %zu tile%s for %u compute units", tiles,
             tiles == 1 ? "" : "s", base->ctx->desc.compute_units);
}

kiln_status kiln_gemm_params(struct kiln_gemm_plan *plan, enum kiln_group_id group, void *values)
{
    const struct kiln_dims dims = problem_dims(&plan->p);
    return kiln_plan_params(&plan->base, group, &dims, values);
}

void kiln_gemm_options(const struct kiln_gemm_plan *plan, struct kiln_options *o)
{
    const struct kiln_gemm_epilogue *e = &plan->p.epi;
    kiln_options_storage(o, plan->p.dtype);
    kiln_options_add(o, "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_EPI_BIAS=%d -DKILN_EPI_Z=%d -DKILN_ACT=%d",
                     plan->p.trans_a, plan->p.trans_b, e->bias, e->residual, (int)e->act);
}

/* Padded elements of a rows x cols product on tiles of tr x tc. */
static double padded(size_t rows, size_t cols, size_t tr, size_t tc)
{
    return (double)(kiln_div_up(rows, tr) * tr) * (double)(kiln_div_up(cols, tc) * tc);
}

/* The narrow tile (narrow_mr rows by one vector) in *t where it costs less
   than `wide`, counting its padded elements 6% dearer: its accumulators are
   fed by one vector load and narrow_mr broadcasts per k instead of 2 and 6
   (docs/gemm.md#the-cpu-register-tile-wide-or-narrow). Returns the cost
   taken. */
static double narrow_if_cheaper(const struct kiln_param_gemm_cpu *cpu, size_t rows, size_t cols, double wide,
                                struct kiln_cpu_tile *t)
{
    if (cpu->narrow_mr <= 0)
        return wide;
    const double thin = 1.06 * padded(rows, cols, (size_t)cpu->narrow_mr, (size_t)cpu->vw);
    if (thin >= wide)
        return wide;
    t->mr = cpu->narrow_mr, t->nr = cpu->vw, t->narrow = 1;
    return thin;
}

/* The rows of a tile of at most mr rows, balanced over the panels that
   `rows` needs: 7 for 49 rows at mr 8 (seven panels, none padded). */
static size_t balanced_rows(size_t rows, size_t mr) { return rows ? kiln_div_up(rows, kiln_div_up(rows, mr)) : mr; }

/* The cost of one orientation's tiles, in padded multiply-adds: `rows` by
   `cols` (C's m x n, or n x m flipped) on the wide tile with balanced rows
   (dearer when so few rows leave its loads, nv + rows per k, outnumbering
   its rows x nv FMAs) or on the narrow tile. */
static double oriented_cost(const struct kiln_param_gemm_cpu *cpu, size_t rows, size_t cols, struct kiln_cpu_tile *t)
{
    const size_t nv = (size_t)(cpu->nr / cpu->vw), mr = balanced_rows(rows, (size_t)cpu->mr);
    const double loads = (double)(mr + nv) / (double)(mr * nv);
    t->mr = (long)mr, t->nr = cpu->nr, t->vw = cpu->vw, t->narrow = 0;
    return narrow_if_cheaper(cpu, rows, cols, (loads > 1.0 ? loads : 1.0) * padded(rows, cols, mr, (size_t)cpu->nr), t);
}

/* The profile's tile with its rows balanced over the row panels, or its
   narrow tile where that is cheaper, and its cost in *cost; with `half`,
   also the half-width tile
   (narrow_mr rows by half the wide tile's columns, where those are an even
   number of at least 4 vectors) where that is cheaper still, its padded
   elements counted 3% dearer than the wide tile's (its narrow_mr x nv / 2
   accumulators take narrow_mr + nv / 2 loads per k: 10 for 16 at 8 x 32,
   where 5 x 64 takes 9 for 20 and 8 x 16 9 for 8) and so cheaper than the
   narrow tile's at the same padding (docs/gemm.md#the-half-width-tile). */
static struct kiln_cpu_tile tile_cost(const struct kiln_param_gemm_cpu *cpu, size_t m, size_t n, int half, double *cost)
{
    struct kiln_cpu_tile tile = {0};
    *cost = oriented_cost(cpu, m, n, &tile);
    const long nv = cpu->nr / cpu->vw;
    if (!half || cpu->narrow_mr <= 0 || nv < 4 || nv % 2 != 0)
        return tile;
    const double halved = 1.03 * padded(m, n, (size_t)cpu->narrow_mr, (size_t)(cpu->nr / 2));
    if (halved < *cost) {
        tile.mr = cpu->narrow_mr, tile.nr = cpu->nr / 2, tile.vw = cpu->vw, tile.narrow = 0;
        *cost = halved;
    }
    return tile;
}

static struct kiln_cpu_tile tile_options(struct kiln_cpu_tile tile, struct kiln_options *o)
{
    kiln_options_add(o, "-DKILN_TILE_MR=%ld -DKILN_TILE_NR=%ld -DKILN_TILE_VW=%ld", tile.mr, tile.nr, tile.vw);
    return tile;
}

struct kiln_cpu_tile kiln_cpu_tile_choose(const struct kiln_param_gemm_cpu *cpu, size_t m, size_t n,
                                          struct kiln_options *o)
{
    double cost;
    return tile_options(tile_cost(cpu, m, n, 0, &cost), o);
}

/* The tile whose rows are pixels and whose columns are filters, where
   gemm.cpu.flip_nr is set: flip_mr (else mr) x flip_nr, its rows balanced,
   unless `other` (the cost of the tile the caller would take otherwise)
   is more than KILN_PIXEL_TILE_MARGIN cheaper: 1 with the tile in *t and
   its cost in *cost, 0 where flip_nr is 0 or the other tile wins. */
static int pixel_tile(const struct kiln_param_gemm_cpu *cpu, size_t pixels, size_t filters, double other,
                      struct kiln_cpu_tile *t, double *cost)
{
    if (cpu->flip_nr <= 0)
        return 0;
    struct kiln_param_gemm_cpu own = *cpu;
    if (cpu->flip_mr > 0)
        own.mr = cpu->flip_mr;
    own.nr = cpu->flip_nr;
    struct kiln_cpu_tile tile = {0};
    const double c = oriented_cost(&own, pixels, filters, &tile);
    if (c > KILN_PIXEL_TILE_MARGIN * other)
        return 0;
    *t = tile, *cost = c;
    return 1;
}

struct kiln_cpu_tile kiln_cpu_tile_choose_pixels(const struct kiln_param_gemm_cpu *cpu, size_t pixels, size_t filters,
                                                 struct kiln_options *o)
{
    double cost, own;
    struct kiln_cpu_tile tile = tile_cost(cpu, pixels, filters, 1, &cost);
    pixel_tile(cpu, pixels, filters, cost, &tile, &own);
    return tile_options(tile, o);
}

/* The straight tile's micro kernel reading A in place instead of its packed
   row panel: the share its cost grows by. Measured on the 2-vCPU Zen 4
   (the micro kernel's time, POCL's profiling): rows along K (A
   untransposed, MR streams) -1.8% to +0.8% with rows 4 to 32 KiB apart,
   +4.3% and +5.3% 64 KiB apart; a transposed A's MR rows side by side,
   each k a row of its own, +1.0% and +1.7% (1024^3) (docs/gemm.md#a-read-in-place-straight). */
static double a_in_place_cost(const struct kiln_gemm_problem *p)
{
    if (p->trans_a)
        return 0.02;
    return p->lda * sizeof(float) <= ((size_t)32 << 10) ? 0.005 : 0.05;
}

/* The straight tile's cost in padded multiply-adds with the packing of
   its operands, or the cost of reading them in place instead where that is
   cheaper: an fp32 A of at least mr rows (gemm.cpu.a_in_place), an fp32,
   untransposed B whose columns fill whole panels (`b_ok`: the caller's
   bound on B's span). Says which it reads in place in *t. */
static double straight_cost(const struct kiln_param_gemm_cpu *cpu, const struct kiln_gemm_problem *p, double micro,
                            int b_ok, struct kiln_cpu_tile *t)
{
    const double k = (double)p->k, pack_a = p->kept_a ? 0.0 : (double)p->m * k,
                 pack_b = p->kept_b ? 0.0 : (double)p->n * k;
    const double read_a = a_in_place_cost(p) * micro, read_b = KILN_GEMM_B_IN_PLACE_COST * micro;
    t->rows_in_place = cpu->a_in_place && p->dtype == KILN_F32 && !p->kept_a && p->m >= (size_t)t->mr &&
                       read_a < KILN_GEMM_PACK_COST * pack_a;
    t->cols_in_place = b_ok && !p->trans_b && p->dtype == KILN_F32 && !p->kept_b && p->n % (size_t)t->nr == 0 &&
                       read_b < KILN_GEMM_PACK_COST * pack_b;
    return micro + (t->rows_in_place ? read_a : KILN_GEMM_PACK_COST * pack_a) +
           (t->cols_in_place ? read_b : KILN_GEMM_PACK_COST * pack_b);
}

/* Flipped, the tile is stored transposed: vw multiply-adds' worth per
   element, so the flipped cost is scaled by 1 + vw / k. An operand the
   caller keeps is packed once; otherwise each execution packs it, unless
   the flipped tile reads B in place (in_place_b). The straight tile reads
   an fp32, untransposed B whose columns fill whole panels in place where
   its micro kernel's KILN_GEMM_B_IN_PLACE_COST costs less than packing B
   (the narrow tile only where narrow_b allows: otherwise the wide tile
   reading B in place is costed against it packing B), and an fp32 A of at
   least mr rows where a_in_place_cost does (gemm.cpu.a_in_place 1); the
   orientations are compared so. */
struct kiln_cpu_tile kiln_cpu_tile_orient(const struct kiln_param_gemm_cpu *cpu, const struct kiln_gemm_problem *p,
                                          int in_place_b, int narrow_b, struct kiln_options *o)
{
    struct kiln_cpu_tile tile = {0}, flip = {0};
    const double k = (double)p->k, pack_a = p->kept_a ? 0.0 : (double)p->m * k,
                 pack_b = p->kept_b ? 0.0 : (double)p->n * k;
    const double micro = oriented_cost(cpu, p->m, p->n, &tile) * k;
    double straight = straight_cost(cpu, p, micro, tile.narrow ? narrow_b : 1, &tile);
    /* The narrow tile takes one line of each of B's rows per k: read in
       place from beyond the caches near the core, every k waits on memory
       (docs/gemm.md#the-narrow-tile-and-a-large-b). Where B spans more than
       narrow_b allows, the wide tile reading it in place is costed against
       the narrow tile packing it. */
    if (tile.narrow && !narrow_b) {
        struct kiln_param_gemm_cpu wide_only = *cpu;
        wide_only.narrow_mr = 0;
        struct kiln_cpu_tile wide = {0};
        const double other = straight_cost(cpu, p, oriented_cost(&wide_only, p->m, p->n, &wide) * k, 1, &wide);
        if (other < straight)
            tile = wide, straight = other;
    }
    /* The rows of a flipped tile that reads B in place: gemm.cpu.flip_mr;
       with flip_nr, the pixel tile below.
       One that packs B keeps mr: the cost below counts packing alike in
       both orientations, where packing op(A)^T's column panels from a
       row-major A gathered NR of its rows per k before it was packed a
       vector of K at a time (256 x 256 x 16384 on a Zen 4: 5.9 ms a call
       against 2.8 for the straight tile's row panels of 5), and a flip that
       mr would not take cost more than its rows won (docs/gemm.md). */
    struct kiln_param_gemm_cpu rows_are_columns = *cpu;
    if (cpu->flip_mr > 0 && in_place_b)
        rows_are_columns.mr = cpu->flip_mr;
    double flipped = oriented_cost(&rows_are_columns, p->n, p->m, &flip);
    /* With flip_nr set, flip_mr x flip_nr (pixel_tile) unless mr x nr costs
       more than KILN_PIXEL_TILE_MARGIN less. */
    if (in_place_b && cpu->flip_nr > 0) {
        flipped = oriented_cost(cpu, p->n, p->m, &flip);
        pixel_tile(cpu, p->n, p->m, flipped, &flip, &flipped);
    }
    flipped *= k + (double)cpu->vw;
    flip.in_place = in_place_b && (size_t)flip.mr <= p->n;
    flipped += KILN_GEMM_PACK_COST * (pack_a + (flip.in_place ? 0.0 : pack_b));
    if (flipped < straight)
        tile = flip, tile.flipped = 1;
    kiln_options_add(o, "-DKILN_TILE_MR=%ld -DKILN_TILE_NR=%ld -DKILN_TILE_VW=%ld -DKILN_TILE_FLIP=%d", tile.mr,
                     tile.nr, tile.vw, tile.flipped);
    return tile;
}

static kiln_status plan_create(kiln_context *ctx, const kiln_gemm_desc *desc, const struct kiln_gemm_epilogue *epi,
                               unsigned keep, kiln_gemm_plan **out)
{
    struct kiln_gemm_problem p;
    kiln_status st = normalise(desc, &p);
    if (st != KILN_SUCCESS)
        return st;
    if (epi)
        p.epi = *epi;
    p.kept_a = (keep & KILN_GEMM_KEEP_A) != 0, p.kept_b = (keep & KILN_GEMM_KEEP_B) != 0;
    char reason[128] = "requested";
    const struct kiln_gemm_algorithm *algorithm =
        desc->algo == KILN_GEMM_AUTO ? choose(ctx, &p, reason, sizeof reason) : algorithm_of(desc->algo);
    const char *why = why_not(algorithm, &p);
    if (why)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "gemm: %s", why);
    if (!ctx->vector_kernels && (algorithm == &kiln_gemm_cpu || algorithm == &kiln_gemm_smallm))
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "gemm: the %s family's kernels use OpenCL vector syntax, which the %s backend does not "
                          "compile (tiled and direct run there)",
                          algorithm->name, ctx->backend->name);

    kiln_gemm_plan *plan = kiln_plan_new(ctx, sizeof *plan, algorithm->name, algorithm->algo, reason);
    if (!plan)
        return KILN_ERROR_OUT_OF_MEMORY;
    plan->p = p;
    plan->algorithm = algorithm;
    st = algorithm->prepare(plan);
    if (st != KILN_SUCCESS) {
        kiln_gemm_plan_destroy(plan);
        return st;
    }
    kiln_log(KILN_LOG_INFO, "gemm %zux%zux%zu batch %zu: %s %s (%s; %s)", p.m, p.n, p.k, p.batch, plan->base.kernel,
             plan->base.params, reason, plan->base.profile);
    *out = plan;
    return KILN_SUCCESS;
}

kiln_status kiln_gemm_plan_create(kiln_context *ctx, const kiln_gemm_desc *desc, kiln_gemm_plan **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(desc);
    KILN_CHECK_ARG(out);
    return plan_create(ctx, desc, NULL, 0, out);
}

kiln_status kiln_gemm_plan_create_fused(kiln_context *ctx, const kiln_gemm_desc *desc,
                                        const struct kiln_gemm_epilogue *epi, unsigned keep, kiln_gemm_plan **out)
{
    if (desc->layout != KILN_ROW_MAJOR || (epi && desc->algo != KILN_GEMM_CPU))
        return kiln_error(KILN_ERROR_INTERNAL, "gemm: fused epilogues need a row-major plan on the cpu family");
    return plan_create(ctx, desc, epi, keep, out);
}

kiln_status kiln_gemm_run(kiln_gemm_plan *plan, const struct kiln_gemm_args *args, void **event)
{
    return plan->algorithm->execute(plan, args, event);
}

/* The buffer must hold the operand's footprint past its offset. */
static kiln_status check_operand(const char *name, const kiln_buffer *buf, size_t offset, size_t rows, size_t cols,
                                 size_t ld, size_t stride, size_t batch, size_t elem)
{
    size_t span = footprint(rows, cols, ld, stride, batch), end;
    if (span == SIZE_MAX || __builtin_add_overflow(span, offset, &end) || end > buf->size / elem)
        return kiln_error(KILN_ERROR_OUT_OF_BOUNDS,
                          "gemm: %s needs %zu elements from offset %zu (ld %zu, stride %zu, batch %zu) but its buffer "
                          "holds %zu",
                          name, span, offset, ld, stride, batch, buf->size / elem);
    return KILN_SUCCESS;
}

kiln_status kiln_gemm_plan_execute(kiln_gemm_plan *plan, float alpha, const kiln_buffer *a, size_t offset_a,
                                   const kiln_buffer *b, size_t offset_b, float beta, kiln_buffer *c, size_t offset_c,
                                   kiln_event **event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(plan);
    KILN_CHECK_ARG(a);
    KILN_CHECK_ARG(b);
    KILN_CHECK_ARG(c);
    if (a->ctx != plan->base.ctx || b->ctx != plan->base.ctx || c->ctx != plan->base.ctx)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "gemm: a buffer belongs to another context than the plan");
    if (c == a || c == b || c->handle == a->handle || c->handle == b->handle)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "gemm: C must not be the same buffer as A or B");

    const struct kiln_gemm_problem *p = &plan->p;
    struct kiln_gemm_args args = {alpha,    beta, a->handle, b->handle, c->handle, offset_a, offset_b,
                                  offset_c, NULL, NULL,      0,         0.0f,      0,        0};
    const kiln_buffer *ra = a, *rb = b; /* the row-major problem's A and B */
    if (p->swapped) {
        args.a = b->handle, args.b = a->handle;
        args.off_a = offset_b, args.off_b = offset_a;
        ra = b, rb = a;
    }
    size_t elem = kiln_dtype_size(p->dtype);
    const char *name_a = p->swapped ? "B" : "A", *name_b = p->swapped ? "A" : "B";
    kiln_status st = check_operand(name_a, ra, args.off_a, p->trans_a ? p->k : p->m, p->trans_a ? p->m : p->k, p->lda,
                                   p->stride_a, p->batch, elem);
    if (st == KILN_SUCCESS)
        st = check_operand(name_b, rb, args.off_b, p->trans_b ? p->n : p->k, p->trans_b ? p->k : p->n, p->ldb,
                           p->stride_b, p->batch, elem);
    if (st == KILN_SUCCESS)
        st = check_operand("C", c, offset_c, p->m, p->n, p->ldc, p->stride_c, p->batch, elem);
    if (st != KILN_SUCCESS)
        return st;

    void *handle = NULL;
    st = kiln_gemm_run(plan, &args, event ? &handle : NULL);
    return kiln_plan_event(&plan->base, st, handle, event);
}

kiln_status kiln_gemm_plan_describe(const kiln_gemm_plan *plan, kiln_gemm_plan_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(plan);
    KILN_CHECK_ARG(info);
    KILN_PLAN_DESCRIBE(&plan->base, info, family);
    return KILN_SUCCESS;
}

void kiln_gemm_plan_destroy(kiln_gemm_plan *plan)
{
    if (plan && plan->algorithm && plan->algorithm->release)
        plan->algorithm->release(plan);
    kiln_plan_free(plan ? &plan->base : NULL);
}

kiln_status kiln_gemm(kiln_context *ctx, const kiln_gemm_desc *desc, float alpha, const kiln_buffer *a, size_t offset_a,
                      const kiln_buffer *b, size_t offset_b, float beta, kiln_buffer *c, size_t offset_c,
                      kiln_event **event)
{
    kiln_gemm_plan *plan = NULL;
    kiln_status st = kiln_gemm_plan_create(ctx, desc, &plan);
    if (st == KILN_SUCCESS)
        st = kiln_gemm_plan_execute(plan, alpha, a, offset_a, b, offset_b, beta, c, offset_c, event);
    kiln_gemm_plan_destroy(plan);
    return st;
}
