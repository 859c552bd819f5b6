/*
 * The CPU GEMM family (cl/gemm/gemm_f32_cpu.cl): pack A and B into zero-padded
 * panels of MR rows and NR columns, then one MR x NR register tile per
 * work-item over the whole K. An operand with batch stride 0 is packed once.
 *
 * Where C's columns fill the tile's vectors worse than its rows would (a
 * 1x1 convolution over 7x7 pixels: 49 columns in two tiles of 32), the plan
 * flips the product, C^T = op(B)^T op(A)^T: B is packed as the row panels,
 * A as the column panels, and the tile is stored transposed into C.
 *
 * The micro kernel reads an fp32 operand in place instead of its packed
 * panels where the plan counts that cheaper (kiln_cpu_tile_orient): B as
 * the flipped tile's rows or the straight one's columns, A as the straight
 * tile's rows. Reading in place writes no workspace for every core to read
 * back (docs/gemm.md).
 *
 * Where a column panel over the whole K would not stay in the second-level
 * cache while the row panels stream past it, the product runs
 * as launches over slices of K that do, each adding its part to C (beta 1
 * after the first): for an fp32 C without an epilogue, so that the parts
 * add exactly as the sums of one launch would, in fp32.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/diag.h"
#include "ops/gemm.h"

#define SOURCE "gemm/gemm_f32_cpu"

enum { PACK_A, PACK_B, MICRO };

/* The plan's orientation (aux[2], flags): the tile of C^T (flipped) or of
   C, and which of the micro kernel's operands it reads in place instead of
   packed: its rows (B flipped, A straight), its columns (B, straight). */
enum { ORIENT_FLIPPED = 1, ORIENT_ROWS_IN_PLACE = 2, ORIENT_COLS_IN_PLACE = 4 };

static int orient(const struct kiln_gemm_plan *plan, int flag) { return (plan->aux[2] & (size_t)flag) != 0; }

/* A work-group of one work-item: the micro kernel's and the packing along
   K's (POCL's loop over the items of a larger one would vectorise across
   them: docs/gemm.md, "Packing along K"). */
static const size_t one[3] = {1, 1, 1};

/* A cache of one core of the host (sysconf's name for it), where the device
   is the host's CPU (POCL's CPU device) and the C library knows it; else
   `otherwise` bytes. */
static size_t host_cache(const kiln_context *ctx, int name, size_t otherwise)
{
    long bytes = -1;
    if (ctx->desc.type == KILN_DEVICE_CPU && name >= 0)
        bytes = sysconf(name);
    return bytes > 0 ? (size_t)bytes : otherwise;
}

#ifdef _SC_LEVEL2_CACHE_SIZE
#define L2_NAME _SC_LEVEL2_CACHE_SIZE
#else
#define L2_NAME -1
#endif
#ifdef _SC_LEVEL1_DCACHE_SIZE
#define L1_NAME _SC_LEVEL1_DCACHE_SIZE
#else
#define L1_NAME -1
#endif

/* The second-level cache of a core: 1 MiB where unknown. */
static size_t l2_bytes(const kiln_context *ctx) { return host_cache(ctx, L2_NAME, (size_t)1 << 20); }

/* The most bytes of B that the flipped product reads in place:
   gemm.cpu.in_place_l2 percent of l2_bytes. Its row panels take MR
   elements of every one of B's K rows, a stride apart, which come from the
   caches near the core or slowly: how near depends on the machine
   (docs/profiles.md has the measurements), hence a tuned field. */
static size_t l2_percent(const kiln_context *ctx) { return l2_bytes(ctx) / 100; }

static size_t in_place_span(const kiln_context *ctx, const struct kiln_param_gemm_cpu *cpu)
{
    return l2_percent(ctx) * (size_t)cpu->in_place_l2;
}

long kiln_gemm_cpu_in_place_l2(const kiln_context *ctx, size_t bytes)
{
    const size_t percent = l2_percent(ctx);
    return percent ? (long)kiln_div_up(bytes, percent) : 1;
}

/* Whether the operand that packing kernel `which` (PACK_A: the row panels,
   PACK_B: the column panels) reads has its K contiguous, so that it is
   packed VW values of K at a time (gemm_f32_cpu_pack_a_kv, _b_kv): A
   untransposed or B transposed, flipped or not. */
static int pack_kv(const struct kiln_gemm_problem *p, int which, int flipped)
{
    return (which == PACK_A) != !!flipped ? !p->trans_a : p->trans_b;
}

static kiln_status cpu_prepare(struct kiln_gemm_plan *plan)
{
    const struct kiln_gemm_problem *p = &plan->p;
    const struct kiln_param_gemm_cpu *cpu;
    kiln_status st = kiln_gemm_params(plan, KILN_GROUP_gemm_cpu, &cpu);
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_options options = {0};
    kiln_gemm_options(plan, &options);
    /* Flipped, an fp32 B whose columns are contiguous (untransposed) is
       read in place as the row operand, unpacked: one launch fewer, where
       the rows it spans stay near the core (in_place_span). */
    const size_t b_span = p->k * p->ldb * sizeof(float);
    const int in_place_b = !p->trans_b && p->dtype == KILN_F32 && b_span <= in_place_span(plan->base.ctx, cpu);
    /* Straight, the narrow tile reads B in place where it spans at most
       gemm.cpu.narrow_in_place_l2 percent of the L2 (the same measure). */
    const int narrow_b = b_span <= l2_percent(plan->base.ctx) * (size_t)cpu->narrow_in_place_l2;
    const struct kiln_cpu_tile tile = kiln_cpu_tile_orient(cpu, p, in_place_b, narrow_b, &options);
    const size_t mr = (size_t)tile.mr, nr = (size_t)tile.nr;
    const int direct = tile.in_place;
    /* Straight, A and B read in place as well where kiln_cpu_tile_orient
       says so: each k's MR rows of A side by side (A transposed) or each
       row along K (untransposed), each k's NR columns a run of B's row. */
    const int rows_direct = direct || tile.rows_in_place, cols_direct = tile.cols_in_place;
    /* KILN_A_DIRECT: 2 where the rows read in place run along K (A
       untransposed, straight), 1 where each k's rows sit side by side. */
    const int a_direct = !rows_direct ? 0 : tile.rows_in_place && !p->trans_a ? 2 : 1;
    /* Reading in place, a work-item takes a group of row panels kc values
       of K at a time, as many panels as a slice that long of their rows and
       their parked sums (MR x NR each) fit a core's L1 (all of them where
       they fit, else groups as even as that allows): the slice and the
       column panel's kc rows stay there while the panels pass, instead of
       each panel streaming its column panel over all of K from L2. */
    const size_t rows_all = tile.flipped ? p->n : p->m, kc = (size_t)cpu->kc;
    const size_t panels_all = kiln_div_up(rows_all, mr);
    const size_t fit =
        kc ? host_cache(plan->base.ctx, L1_NAME, (size_t)32 << 10) / ((kc + nr) * mr * sizeof(float)) : 0;
    const int blocked = direct && p->k > kc && fit >= 2;
    const size_t rb = blocked ? kiln_div_up(panels_all, kiln_div_up(panels_all, fit)) : 1;
    /* Straight, a row panel's column panels are consecutive work-groups
       (the kernel's first dimension) where all of B's fit half the L2, so
       that one worker takes a row panel's columns and writes whole rows of
       C; otherwise a column panel's row panels are, and its B stays near
       the core. With the row panels first, POCL gave a row's column panels
       to different workers call after call, and where the two cores sit in
       different L3 domains every line of C went back and forth between
       them (docs/gemm.md, "Column panels first"). */
    const int cols_first =
        !tile.flipped && kiln_div_up(p->n, nr) >= 2 && p->n * p->k * sizeof(float) <= l2_bytes(plan->base.ctx) / 2;
    /* A B read in place whose rows lie more than 128 floats apart: the k
       loop (unrolled by 4) steps each load of B by 2 KiB or more, beyond
       the stride the hardware's prefetchers followed, so every k of a tile
       waited on its row; the kernel fetches it 16 rows ahead. On the 2-vCPU
       Xeon with AMX (GFLOP/s, before -> after): 256 x 256 x 16384
       108-110 -> 128-132, 256 x 1024 x 4096 89 -> 112, 256 x 512 x 2048
       134 -> 169, 64 x 4096 x 1024 116 -> 166, 128 x 256 x 4096 126 -> 121;
       the quick set's 128 x 128 x 128 x64 (128 apart) lost a third with
       it, so not there. 4 or 8 rows ahead gained less, 32 and 64 lost
       (docs/gemm.md). */
    const int fetch_b = cols_direct && p->ldb > 128 ? 16 : 0; /* rows ahead, 0: none */
    /* The flipped tile's rows read in place (a 1x1 convolution's pixels)
       more than 128 floats apart: each k's MR values come from a line of
       their own, which the prefetchers reached too late; the kernel fetches
       them 16 values of K ahead. On the 2-vCPU Xeon with AMX, alternating
       calls in one process, 1x1 layers with bias and ReLU at 14x14 (196
       apart): 512 -> 512 1.00-1.02x on the 8 x 32 tile, 1.02x on 6 x 64,
       1024 -> 256 1.03-1.05x and 1.03x; at 7x7 (49 apart, lines shared
       between k) nothing to gain. A C loop of the 6 x 64 tile on the same
       data: 146 -> 154 GFLOP/s on one core (8 ahead 150, 32 ahead 147),
       where the rows packed first ran at 157. */
    const int fetch_a = direct && tile.flipped && p->ldb > 128 ? 16 : 0; /* values of K ahead, 0: none */
    kiln_options_add(&options,
                     "-DKILN_A_DIRECT=%d -DKILN_B_DIRECT=%d -DKILN_B_FETCH=%d -DKILN_TILE_RB=%zu -DKILN_TILE_KC=%zu "
                     "-DKILN_TILE_COLS_FIRST=%d -DKILN_A_FETCH=%d",
                     a_direct, cols_direct, fetch_b, rb, blocked ? kc : 1, cols_first, fetch_a);
    snprintf(plan->base.kernel, sizeof plan->base.kernel, "gemm_f32_cpu_%zux%zu%s", mr, nr, tile.flipped ? "t" : "");
    snprintf(plan->base.params, sizeof plan->base.params, "MR=%zu NR=%zu VW=%ld%s", mr, nr, tile.vw,
             direct                       ? ", flipped: tiles of C^T, B read in place"
             : tile.flipped               ? ", flipped: tiles of C^T"
             : rows_direct && cols_direct ? ", A and B read in place"
             : rows_direct                ? ", A read in place"
             : cols_direct                ? ", B read in place"
                                          : "");
    if (blocked) {
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, ", %zu row panels a work-item by %zu of K",
                 rb, kc);
    }
    if (cols_first) {
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, ", column panels first");
    }
    if (fetch_b) {
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, ", B's rows fetched %d ahead", fetch_b);
    }
    if (fetch_a) {
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, ", rows fetched %d of K ahead", fetch_a);
    }
    /* The packing kernels of the operands it packs (none read in place). */
    const char *const names[] = {rows_direct                        ? NULL
                                 : pack_kv(p, PACK_A, tile.flipped) ? "gemm_f32_cpu_pack_a_kv"
                                                                    : "gemm_f32_cpu_pack_a",
                                 cols_direct                        ? NULL
                                 : pack_kv(p, PACK_B, tile.flipped) ? "gemm_f32_cpu_pack_b_kv"
                                                                    : "gemm_f32_cpu_pack_b",
                                 "gemm_f32_cpu_micro"};
    kiln_options_only(&options, names, 3);
    for (int i = 0; i < 3 && st == KILN_SUCCESS; i++)
        if (names[i])
            st = kiln_plan_kernel(&plan->base, i, SOURCE, &options, names[i]);
    kiln_options_free(&options);
    if (st != KILN_SUCCESS)
        return st;

    /* The orientation, and what is read in place: rows from A (B flipped),
       columns from B (A flipped). */
    plan->aux[2] = (tile.flipped ? ORIENT_FLIPPED : 0) | (rows_direct ? ORIENT_ROWS_IN_PLACE : 0) |
                   (cols_direct ? ORIENT_COLS_IN_PLACE : 0);
    /* Slices of K (aux[3] their length), a column panel of each at most half
       the second-level cache: measured on the 2-vCPU Xeon, 256 x 256 by K,
       201-203 GFLOP/s at K = 2048 to 8192 (column panels of 256 KiB to 1 MiB),
       152 at 16384 (2 MiB, its whole L2). */
    const size_t span_k = l2_bytes(plan->base.ctx) / 2 / (nr * sizeof(float));
    const int plain = p->dtype == KILN_F32 && !p->epi.bias && !p->epi.residual && p->epi.act == KILN_ACT_NONE;
    plan->aux[3] = p->k;
    if (!direct && plain && span_k > 0 && p->k > span_k) {
        const size_t slices = kiln_div_up(p->k, span_k);
        plan->aux[3] = kiln_div_up(p->k, slices);
        const size_t len = strlen(plan->base.params);
        snprintf(plan->base.params + len, sizeof plan->base.params - len, ", K in %zu slices of %zu", slices,
                 plan->aux[3]);
    }
    const size_t cols = tile.flipped ? p->m : p->n;
    const size_t stride_r = tile.flipped ? p->stride_b : p->stride_a,
                 stride_c = tile.flipped ? p->stride_a : p->stride_b;
    const size_t panels_m = panels_all, panels_n = kiln_div_up(cols, nr);
    size_t batch_a = stride_r ? p->batch : 1, batch_b = stride_c ? p->batch : 1;
    const size_t k_a = pack_kv(p, PACK_A, tile.flipped) ? kiln_div_up(p->k, (size_t)tile.vw) : p->k,
                 k_b = pack_kv(p, PACK_B, tile.flipped) ? kiln_div_up(p->k, (size_t)tile.vw) : p->k;
    size_t geometry[3][3] = {
        {k_a, panels_m, batch_a},
        {k_b, panels_n, batch_b},
        {cols_first ? panels_n : kiln_div_up(panels_m, rb), cols_first ? panels_m : panels_n, p->batch}};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 3; d++)
            plan->dims[i][d] = geometry[i][d];
    /* Floats between batch items' panels; 0 for an operand packed once. */
    size_t span_a = panels_m * mr * p->k, span_b = panels_n * nr * p->k;
    plan->aux[0] = stride_r ? span_a : 0;
    plan->aux[1] = stride_c ? span_b : 0;
    if (rows_direct) /* the operand's own batch stride, no row panels */
        plan->aux[0] = stride_r, span_a = 0;
    if (cols_direct) /* B's own batch stride, no column panels */
        plan->aux[1] = p->stride_b, span_b = 0;
    if ((st = kiln_plan_workspace(&plan->base, 0, batch_a * span_a * sizeof(float))) != KILN_SUCCESS)
        return st;
    return kiln_plan_workspace(&plan->base, 1, batch_b * span_b * sizeof(float));
}

/* The arguments of a packing kernel: the operand's rows (M or N) and K, its
   buffer and offset, its two element strides in the kernel's order (a_ri,
   a_rk or b_rk, b_rj), its batch stride and the panels. */
static void pack_args(struct kiln_args *a, size_t rows, size_t k, void *src, size_t off, uint64_t step1, uint64_t step2,
                      size_t stride, void *panels)
{
    kiln_args_int(a, (int32_t)rows);
    kiln_args_int(a, (int32_t)k);
    kiln_args_buffer(a, src);
    kiln_args_ulong(a, off);
    kiln_args_ulong(a, step1);
    kiln_args_ulong(a, step2);
    kiln_args_ulong(a, stride);
    kiln_args_buffer(a, panels);
}

/* The micro kernel over K from k0, kc long (beta_k: beta for the first
   slice, 1 for those that add to it). */
static kiln_status micro_launch(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, size_t k0, size_t kc,
                                float beta_k, void **event)
{
    const struct kiln_gemm_problem *p = &plan->p;
    void *ap = plan->base.workspace[0]->handle, *bp = plan->base.workspace[1]->handle;
    const uint64_t b_rk = p->trans_b ? 1 : p->ldb;
    const int flipped = orient(plan, ORIENT_FLIPPED), direct = orient(plan, ORIENT_ROWS_IN_PLACE),
              cols_direct = orient(plan, ORIENT_COLS_IN_PLACE);
    struct kiln_args m = {0};
    kiln_args_int(&m, (int32_t)(flipped ? p->n : p->m));
    kiln_args_int(&m, (int32_t)(flipped ? p->m : p->n));
    kiln_args_int(&m, (int32_t)p->k);
    kiln_args_int(&m, (int32_t)k0);
    kiln_args_int(&m, (int32_t)kc);
    kiln_args_float(&m, x->alpha);
    kiln_args_float(&m, beta_k);
    /* a_step: along K (KILN_A_DIRECT 1: B flipped, A transposed) or along
       the rows (2: A untransposed); the packed panels step by MR */
    kiln_args_buffer(&m, !direct ? ap : flipped ? x->b : x->a);
    kiln_args_ulong(&m, !direct ? 0 : flipped ? x->off_b : x->off_a);
    kiln_args_ulong(&m, !direct ? 0 : flipped ? b_rk : p->lda);
    kiln_args_ulong(&m, plan->aux[0]);
    kiln_args_buffer(&m, cols_direct ? x->b : bp);
    kiln_args_ulong(&m, plan->aux[1]);
    kiln_args_ulong(&m, cols_direct ? x->off_b : 0);
    kiln_args_ulong(&m, cols_direct ? p->ldb : 0); /* b_step: the packed panels step by NR */
    kiln_args_buffer(&m, x->c);
    kiln_args_ulong(&m, x->off_c);
    kiln_args_int(&m, (int32_t)p->ldc);
    kiln_args_ulong(&m, p->stride_c);
    kiln_args_buffer_or(&m, x->bias, x->c); /* epilogue operands: C stands in, never read */
    kiln_args_ulong(&m, x->off_bias);
    kiln_args_buffer_or(&m, x->z, x->c);
    kiln_args_float(&m, x->slope);
    return kiln_kernel_launch(plan->base.ctx, plan->base.kernels[MICRO], &m, 3, plan->dims[MICRO], one, 0, event);
}

static kiln_status cpu_execute(struct kiln_gemm_plan *plan, const struct kiln_gemm_args *x, void **event)
{
    const struct kiln_gemm_problem *p = &plan->p;
    void *ap = plan->base.workspace[0]->handle, *bp = plan->base.workspace[1]->handle;
    kiln_context *ctx = plan->base.ctx;
    kiln_status st = KILN_SUCCESS;
    /* opA(i, k) at i * a_ri + k * a_rk, opB(k, j) at k * b_rk + j * b_rj */
    const uint64_t a_ri = p->trans_a ? 1 : p->lda, a_rk = p->trans_a ? p->lda : 1;
    const uint64_t b_rk = p->trans_b ? 1 : p->ldb, b_rj = p->trans_b ? p->ldb : 1;
    const int flipped = orient(plan, ORIENT_FLIPPED), direct = orient(plan, ORIENT_ROWS_IN_PLACE),
              cols_direct = orient(plan, ORIENT_COLS_IN_PLACE);
    if (!direct && (flipped ? !x->reuse_b : !x->reuse_a)) { /* the row panels: A, or op(B)^T */
        struct kiln_args a = {0};
        if (flipped)
            pack_args(&a, p->n, p->k, x->b, x->off_b, b_rj, b_rk, p->stride_b, ap);
        else
            pack_args(&a, p->m, p->k, x->a, x->off_a, a_ri, a_rk, p->stride_a, ap);
        st = kiln_kernel_launch(ctx, plan->base.kernels[PACK_A], &a, 3, plan->dims[PACK_A],
                                pack_kv(p, PACK_A, flipped) ? one : NULL, 0, NULL);
    }
    if (st == KILN_SUCCESS && !cols_direct && (flipped ? !x->reuse_a : !x->reuse_b)) { /* the column panels */
        struct kiln_args b = {0};
        if (flipped)
            pack_args(&b, p->m, p->k, x->a, x->off_a, a_rk, a_ri, p->stride_a, bp);
        else
            pack_args(&b, p->n, p->k, x->b, x->off_b, b_rk, b_rj, p->stride_b, bp);
        st = kiln_kernel_launch(ctx, plan->base.kernels[PACK_B], &b, 3, plan->dims[PACK_B],
                                pack_kv(p, PACK_B, flipped) ? one : NULL, 0, NULL);
    }
    if (st != KILN_SUCCESS)
        return st;
    const size_t ks = plan->aux[3];
    for (size_t k0 = 0; st == KILN_SUCCESS && k0 < p->k; k0 += ks) {
        const int last = k0 + ks >= p->k;
        st = micro_launch(plan, x, k0, last ? p->k - k0 : ks, k0 ? 1.0f : x->beta, last ? event : NULL);
    }
    return st;
}

const struct kiln_gemm_algorithm kiln_gemm_cpu = {"cpu", KILN_GEMM_CPU, NULL, cpu_prepare, cpu_execute, NULL};
