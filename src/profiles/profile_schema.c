/* The schema of params.h made into tables, and each group's constraints. */
#include "profiles/profile.h"
#include "profiles/schema.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const gemm_routes[] = {KILN_GEMM_ROUTES, NULL};
static const char *const igemm_routes[] = {KILN_IGEMM_ROUTES, NULL};
static const char *const attention_routes[] = {KILN_ATTENTION_ROUTES, NULL};
static const char *const conv_algos[] = {KILN_CONV_ALGOS, NULL};

#define KILN_MAX_INT(x) (double)(x)
#define KILN_MAX_VW(x) (double)(x)
#define KILN_MAX_BOOL(x) (double)(x)
#define KILN_MAX_NUMBER(x) (double)(x)
#define KILN_MAX_CHOICE(x) 0.0
#define KILN_CHOICES_INT(x) NULL
#define KILN_CHOICES_VW(x) NULL
#define KILN_CHOICES_BOOL(x) NULL
#define KILN_CHOICES_NUMBER(x) NULL
#define KILN_CHOICES_CHOICE(x) x
#define KILN_ROLE_DEF 1
#define KILN_ROLE_HOST 0

#define FIELD(group, key, type, min, max, role, doc)                                                                   \
    {#key,                                                                                                             \
     KILN_PARAM_##type,                                                                                                \
     (double)(min),                                                                                                    \
     KILN_MAX_##type(max),                                                                                             \
     KILN_CHOICES_##type(max),                                                                                         \
     KILN_ROLE_##role,                                                                                                 \
     offsetof(struct kiln_param_##group, key),                                                                         \
     doc},
#define FIELD_TABLE(group, json, prefix, dims, check, doc)                                                             \
    static const struct kiln_param_field group##_fields[] = {KILN_FIELDS_##group(FIELD)};
KILN_PARAM_GROUPS(FIELD_TABLE)

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* "p->mwg" as "mwg". */
static void field_names(char *dst, size_t size, const char *expr)
{
    size_t n = 0;
    for (; *expr && n + 1 < size; expr++) {
        if (strncmp(expr, "p->", 3) == 0)
            expr += 3;
        dst[n++] = *expr;
    }
    dst[n] = '\0';
}

static int not_multiple(char *why, size_t size, const char *group, const char *lhs_expr, long lhs, const char *rhs_expr,
                        long rhs)
{
    char l[64], r[64];
    field_names(l, sizeof l, lhs_expr);
    field_names(r, sizeof r, rhs_expr);
    return fail(why, size, "%s constraint fails: %s = %ld is not a multiple of %s = %ld", group, l, lhs, r, rhs);
}

/* lhs must be a multiple of rhs. */
#define MULTIPLE(group, lhs, rhs)                                                                                      \
    if ((rhs) <= 0 || (lhs) % (rhs) != 0)                                                                              \
        return not_multiple(why, size, group, #lhs, (long)(lhs), #rhs, (long)(rhs));

/* A bound of the schema on what a parameter set costs to compile: the
   product `expr` (`value`) of `what` at most `limit`. Such products are
   unrolled by the kernel compiler, which takes minutes (and spills every
   register) well before a single field reaches its own maximum. */
static int bounded(char *why, size_t size, const char *group, const char *expr, long value, const char *what,
                   long limit)
{
    if (value <= limit)
        return 0;
    return fail(why, size, "%s: %s = %ld %s, more than the schema's bound of %ld", group, expr, value, what, limit);
}

/* The register tile of the local-tile kernels (cl/common/local_tile.h):
   mwi x nwi accumulators per work-item (the product `names`) and kwi x mwi
   x nwi multiply-adds in the unrolled body of a K step. */
static int register_tile(char *why, size_t size, const char *group, long mwi, long nwi, long kwi, const char *names)
{
    if (bounded(why, size, group, names, mwi * nwi, "accumulators per work-item", KILN_MAX_TILE_VALUES))
        return -1;
    char expr[96];
    snprintf(expr, sizeof expr, "kwi*%s", names);
    return bounded(why, size, group, expr, kwi * mwi * nwi, "multiply-adds unrolled per K step", KILN_MAX_UNROLLED);
}

/* The accumulators of a whole work-group, the tile `names` (`value`) at
   most KILN_MAX_GROUP_VALUES (params.h says why). */
static int group_tile(char *why, size_t size, const char *group, const char *names, long value)
{
    return bounded(why, size, group, names, value, "accumulators per work-group", KILN_MAX_GROUP_VALUES);
}

/* Work-items of a work-group (`threads`, the product `threads_expr`) and
   local memory within the device's limits. */
static int fits(const char *group, const struct kiln_device_desc *dev, const char *threads_expr, long work_items,
                long local_bytes, char *why, size_t size)
{
    if (!dev)
        return 0;
    if (dev->max_work_group_size && (unsigned long)work_items > dev->max_work_group_size)
        return fail(why, size, "%s: %s = %ld work-items per work-group, more than the device's limit of %zu", group,
                    threads_expr, work_items, dev->max_work_group_size);
    if (dev->local_mem_bytes && (unsigned long long)local_bytes > dev->local_mem_bytes)
        return fail(why, size, "%s: %ld bytes of local memory, more than the device's %llu", group, local_bytes,
                    dev->local_mem_bytes);
    return 0;
}

/* On a CPU device, a local-tile work-group of `threads` work-items
   (mdimc*ndimc in each of these groups) each holding mwi x nwi
   accumulators and, per unrolled K step, kwi fragments of mwi + nwi values:
   at most KILN_CPU_MAX_GROUP_ITEMS work-items and KILN_CPU_MAX_GROUP_FLOATS
   of those values (params.h says why). `tile_expr` names the fields that
   make mwi and nwi. */
static int cpu_group(const char *group, const struct kiln_device_desc *dev, long threads, const char *tile_expr,
                     long mwi, long nwi, long kwi, char *why, size_t size)
{
    if (!dev || dev->type != KILN_DEVICE_CPU)
        return 0;
    if (threads > KILN_CPU_MAX_GROUP_ITEMS)
        return fail(
            why, size,
            "%s: mdimc*ndimc = %ld work-items per work-group, more than the %d kiln allows on a CPU device (where a "
            "work-group's values share one thread's stack)",
            group, threads, KILN_CPU_MAX_GROUP_ITEMS);
    const long floats = threads * (mwi * nwi + kwi * (mwi + nwi));
    if (floats > KILN_CPU_MAX_GROUP_FLOATS)
        return fail(
            why, size,
            "%s: mdimc*ndimc*(mwi*nwi+kwi*(mwi+nwi)) = %ld floats per work-group (%s: mwi %ld, nwi %ld, kwi %ld), more "
            "than the %ld kiln allows on a CPU device (where a work-group's values share one thread's stack)",
            group, floats, tile_expr, mwi, nwi, kwi, KILN_CPU_MAX_GROUP_FLOATS);
    return 0;
}

static int check_util(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_util *p = values;
    return fits("util", dev, "wg", p->wg, 0, why, size);
}

static int check_gemm_cpu(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_gemm_cpu *p = values;
    (void)dev;
    MULTIPLE("gemm.cpu", p->nr, p->vw);
    if (bounded(why, size, "gemm.cpu", "mr*nr", (long)p->mr * p->nr, "accumulators per work-item",
                KILN_MAX_TILE_VALUES))
        return -1;
    MULTIPLE("gemm.cpu", p->flip_nr, p->vw);
    /* The flipped tile's rows and columns, each the plain tile's where unset
       (mr*nr above where both are). */
    static const char *const flip_names[2][2] = {{"mr*nr", "mr*flip_nr"}, {"flip_mr*nr", "flip_mr*flip_nr"}};
    const long flip_rows = p->flip_mr > 0 ? p->flip_mr : p->mr, flip_cols = p->flip_nr > 0 ? p->flip_nr : p->nr;
    if (bounded(why, size, "gemm.cpu", flip_names[p->flip_mr > 0][p->flip_nr > 0], flip_rows * flip_cols,
                "accumulators per work-item", KILN_MAX_TILE_VALUES))
        return -1;
    return bounded(why, size, "gemm.cpu", "narrow_mr*vw", (long)p->narrow_mr * p->vw, "accumulators per work-item",
                   KILN_MAX_TILE_VALUES);
}

static int check_gemm_tiled(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_gemm_tiled *p = values;
    const int threads = p->mdimc * p->ndimc;
    MULTIPLE("gemm.tiled", p->mwg, p->mdimc * p->vwm);
    MULTIPLE("gemm.tiled", p->nwg, p->ndimc * p->vwn);
    MULTIPLE("gemm.tiled", p->kwg, p->kwi);
    MULTIPLE("gemm.tiled", p->mwg, p->mdima);
    MULTIPLE("gemm.tiled", p->nwg, p->ndimb);
    MULTIPLE("gemm.tiled", threads, p->mdima);
    MULTIPLE("gemm.tiled", threads, p->ndimb);
    MULTIPLE("gemm.tiled", p->kwg, threads / p->mdima);
    MULTIPLE("gemm.tiled", p->kwg, threads / p->ndimb);
    if (register_tile(why, size, "gemm.tiled", p->mwg / p->mdimc, p->nwg / p->ndimc, p->kwi,
                      "(mwg/mdimc)*(nwg/ndimc)") ||
        group_tile(why, size, "gemm.tiled", "mwg*nwg", (long)p->mwg * p->nwg))
        return -1;
    /* Each work-item's share of a staged tile is an unrolled loop. */
    if (p->sa && bounded(why, size, "gemm.tiled", "mwg*kwg/(mdimc*ndimc)", (long)p->mwg * p->kwg / threads,
                         "loads unrolled per K step", KILN_MAX_UNROLLED))
        return -1;
    if (p->sb && bounded(why, size, "gemm.tiled", "nwg*kwg/(mdimc*ndimc)", (long)p->nwg * p->kwg / threads,
                         "loads unrolled per K step", KILN_MAX_UNROLLED))
        return -1;
    /* Tiles of kwg rows of mwg (nwg) floats, padded by a vector. */
    long local = 4L * p->kwg * ((p->sa ? p->mwg + p->vwm : 0) + (p->sb ? p->nwg + p->vwn : 0));
    /* Without a staged tile the kernel has no barrier, and POCL keeps no
       work-item's values apart. */
    if ((p->sa || p->sb) && cpu_group("gemm.tiled", dev, threads, "mwi = mwg/mdimc, nwi = nwg/ndimc", p->mwg / p->mdimc,
                                      p->nwg / p->ndimc, p->kwi, why, size))
        return -1;
    return fits("gemm.tiled", dev, "mdimc*ndimc", threads, local, why, size);
}

static int check_gemm_direct(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_gemm_direct *p = values;
    MULTIPLE("gemm.direct", p->wg, p->mdimc * p->vwm);
    MULTIPLE("gemm.direct", p->wg, p->ndimc * p->vwn);
    MULTIPLE("gemm.direct", p->wg, p->kwi);
    /* Its staged loads per work-item, wg*wg/(mdimc*ndimc), are as many as
       its accumulators. */
    if (register_tile(why, size, "gemm.direct", p->wg / p->mdimc, p->wg / p->ndimc, p->kwi, "(wg/mdimc)*(wg/ndimc)"))
        return -1;
    long local = 4L * p->wg * (2L * p->wg + p->vwm + p->vwn);
    const long threads = (long)p->mdimc * p->ndimc;
    if (cpu_group("gemm.direct", dev, threads, "mwi = wg/mdimc, nwi = wg/ndimc", p->wg / p->mdimc, p->wg / p->ndimc,
                  p->kwi, why, size))
        return -1;
    return fits("gemm.direct", dev, "mdimc*ndimc", threads, local, why, size);
}

static int check_gemm_smallm(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_gemm_smallm *p = values;
    /* With B transposed each of the mr x nc accumulators is a vector. */
    if (bounded(why, size, "gemm.smallm", "mr*nc*vw", (long)p->mr * p->nc * p->vw, "accumulators per work-item",
                KILN_MAX_TILE_VALUES))
        return -1;
    return fits("gemm.smallm", dev, "wg", p->wg, 0, why, size);
}

long kiln_gemm_mma_shared_bytes(const struct kiln_param_gemm_mma *p, int trans_a, int trans_b)
{
    const long a = trans_a ? (long)p->bk * (p->bm + 8) : (long)p->bm * (p->bk + 8);
    const long b = trans_b ? (long)p->bn * (p->bk + 8) : (long)p->bk * (p->bn + 8);
    return 2L * p->stages * (a + b);
}

static int check_gemm_mma(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_gemm_mma *p = values;
    MULTIPLE("gemm.mma", p->bm, p->warps_m * 16);
    MULTIPLE("gemm.mma", p->bn, p->warps_n * 16);
    MULTIPLE("gemm.mma", p->bk, 32);
    /* A lane's accumulators: (bm/warps_m) x (bn/warps_n) over 32 lanes. */
    if (bounded(why, size, "gemm.mma", "(bm/warps_m)*(bn/warps_n)/32",
                (long)p->bm / p->warps_m * p->bn / p->warps_n / 32, "accumulators per lane", 128))
        return -1;
    long bytes = 0;
    for (int t = 0; t < 4; t++) {
        long b = kiln_gemm_mma_shared_bytes(p, t & 1, t >> 1);
        bytes = b > bytes ? b : bytes;
    }
    if (dev && dev->shared_optin_bytes && (unsigned long long)bytes > dev->shared_optin_bytes)
        return fail(why, size,
                    "gemm.mma: 2*stages*(bm*(bk+8) + bk*(bn+8)) and the transposed layouts' = %ld bytes of shared "
                    "memory, more than the device's %llu",
                    bytes, dev->shared_optin_bytes);
    return fits("gemm.mma", dev, "warps_m*warps_n*32", (long)p->warps_m * p->warps_n * 32, 0, why, size);
}

long kiln_gemm_wgmma_shared_bytes(const struct kiln_param_gemm_wgmma *p)
{
    /* Tiles of 64 16-bit values of K, two mbarriers a buffer, and room to
       align the tiles to 1024 bytes. */
    return (long)p->stages * ((p->bm + p->bn) * 128 + 16) + 1024;
}

static int check_gemm_wgmma(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_gemm_wgmma *p = values;
    MULTIPLE("gemm.wgmma", p->bm, 64);
    if (p->bn != 64 && p->bn != 128 && p->bn != 256)
        return fail(why, size, "gemm.wgmma: bn is %d; it must be 64, 128 or 256", p->bn);
    const long bytes = kiln_gemm_wgmma_shared_bytes(p);
    if (dev && dev->shared_optin_bytes && (unsigned long long)bytes > dev->shared_optin_bytes)
        return fail(why, size,
                    "gemm.wgmma: stages*((bm+bn)*128 + 16) + 1024 = %ld bytes of shared memory, more than the device's "
                    "%llu",
                    bytes, dev->shared_optin_bytes);
    /* The TMA kernel's producer hands registers to the multiplying
       warpgroups (setmaxnreg); measured on an H100 with one and two of them. */
    if (p->tma && p->bm > 128)
        return fail(why, size, "gemm.wgmma: bm is %d with tma 1; the TMA kernel takes bm 64 or 128", p->bm);
    /* A block is alone on its SM: its threads share the 64 K registers, and
       each multiplying thread holds bn/2 accumulators and about 24 more. */
    const long threads = (long)(p->bm / 64 + p->tma) * 128, registers = 65536 / threads / 8 * 8;
    if (p->bn / 2 + 24 > (registers < 255 ? registers : 255))
        return fail(why, size,
                    "gemm.wgmma: bn/2 + 24 = %d registers a thread, more than the %ld that (bm/64+tma)*128 = %ld "
                    "threads of a block get",
                    p->bn / 2 + 24, registers, threads);
    return fits("gemm.wgmma", dev, "(bm/64+tma)*128", threads, 0, why, size);
}

long kiln_attention_mma_shared_bytes(long block_q, long block_kv, long stages, long head_dim)
{
    /* The queries and `stages` buffers of keys and of values, 16-bit values
       in rows of the head dimension rounded up to 16 and padded by 8. */
    return (block_q + 2 * stages * block_kv) * ((head_dim + 15) / 16 * 16 + 8) * 2;
}

static int check_attention_mma(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_attention_mma *p = values;
    MULTIPLE("attention.mma", p->block_q, p->warps * 16);
    MULTIPLE("attention.mma", p->block_kv, 16);
    const long tiles = p->block_q / (p->warps * 16);
    if (tiles > 2)
        return fail(why, size, "attention.mma: block_q/(warps*16) is %ld; a warp owns 16 or 32 rows", tiles);
    /* A lane's accumulators at head dimension 64: its rows' scores of a
       step and their outputs (past 64 the plan gives a warp one row tile). */
    if (bounded(why, size, "attention.mma", "block_q/(warps*16)*(block_kv/2 + 32)", tiles * (p->block_kv / 2 + 32),
                "accumulators per lane", 128))
        return -1;
    const long bytes = kiln_attention_mma_shared_bytes(p->block_q, p->block_kv, p->stages, 128);
    if (dev && dev->shared_optin_bytes && (unsigned long long)bytes > dev->shared_optin_bytes)
        return fail(why, size,
                    "attention.mma: (block_q + 2*stages*block_kv)*136*2 = %ld bytes of shared memory at head "
                    "dimension 128, more than the device's %llu",
                    bytes, dev->shared_optin_bytes);
    return fits("attention.mma", dev, "warps*32", (long)p->warps * 32, 0, why, size);
}

long kiln_attention_decode_shared_bytes(long warps, long rows, long head_dim)
{
    return 4 * warps * rows * (head_dim + 2);
}

/* vw, split_kv and ahead hold on any device. warps shape the CUDA decoding
   kernel alone, so they are checked on devices of the CUDA backend only
   (the only ones with opt-in shared memory): warps*32 threads a block, and
   the warps' states in static shared memory (the device's local memory) at
   8 rows of head dimension 128; the plan halves the warps for larger
   problems. */
static int check_attention_decode(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_attention_decode *p = values;
    if (!dev || !dev->shared_optin_bytes)
        return 0;
    return fits("attention.decode", dev, "warps*32", (long)p->warps * 32,
                kiln_attention_decode_shared_bytes(p->warps, 8, 128), why, size);
}

static int check_attention_decode_wg(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_attention_decode_wg *p = values;
    (void)dev;
    if (!p->wg)
        return 0;
    /* At the kernel's largest problem, 8 rows of head dimension 256 (the
       group does not know the problem's). */
    const long outputs = (KILN_DECODE_MAX_ROWS * KILN_DECODE_MAX_HEAD_DIM + p->wg - 1) / p->wg;
    if (bounded(why, size, "attention.decode_wg", "8*256/wg", outputs, "output values per work-item",
                KILN_MAX_DECODE_WG_OUTPUTS))
        return -1;
    return bounded(why, size, "attention.decode_wg", "(8*256/wg)*block_kv", outputs * p->block_kv,
                   "multiply-adds unrolled per tile", KILN_MAX_DECODE_WG_UNROLLED);
}

long kiln_conv_mma_shared_bytes(const struct kiln_param_conv_mma *p)
{
    /* Tiles of the gathered input and of the weights, bk values a row
       padded by 8, stages of each. */
    return 2L * p->stages * (p->bm + p->bn) * (p->bk + 8);
}

static int check_conv_mma(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_conv_mma *p = values;
    const long threads = (long)p->warps_m * p->warps_n * 32;
    MULTIPLE("conv.mma", p->bm, p->warps_m * 16);
    MULTIPLE("conv.mma", p->bn, p->warps_n * 16);
    MULTIPLE("conv.mma", p->bk, 32);
    /* A thread's 16-byte pieces of each tile: always the same column of
       bk/8, so the tiles split evenly into them. */
    MULTIPLE("conv.mma", threads, p->bk / 8);
    MULTIPLE("conv.mma", (long)p->bm * (p->bk / 8), threads);
    MULTIPLE("conv.mma", (long)p->bn * (p->bk / 8), threads);
    if (bounded(why, size, "conv.mma", "(bm/warps_m)*(bn/warps_n)/32",
                (long)p->bm / p->warps_m * p->bn / p->warps_n / 32, "accumulators per lane", 128))
        return -1;
    const long bytes = kiln_conv_mma_shared_bytes(p);
    if (dev && dev->shared_optin_bytes && (unsigned long long)bytes > dev->shared_optin_bytes)
        return fail(why, size,
                    "conv.mma: 2*stages*(bm + bn)*(bk + 8) = %ld bytes of shared memory, more than the device's %llu",
                    bytes, dev->shared_optin_bytes);
    return fits("conv.mma", dev, "warps_m*warps_n*32", threads, 0, why, size);
}

static int check_igemm_tiled(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_conv_igemm_tiled *p = values;
    MULTIPLE("conv.igemm_tiled", p->mwg, p->mdimc * p->vw);
    MULTIPLE("conv.igemm_tiled", p->nwg, p->ndimc * p->vw);
    if (register_tile(why, size, "conv.igemm_tiled", p->mwg / p->mdimc, p->nwg / p->ndimc, 1,
                      "(mwg/mdimc)*(nwg/ndimc)") ||
        group_tile(why, size, "conv.igemm_tiled", "mwg*nwg", (long)p->mwg * p->nwg))
        return -1;
    /* Input and weight tiles plus the per-pixel and per-tap index tables. */
    long local = 4L * p->kwg * (p->mwg + p->vw + p->nwg + p->vw) + 16L * p->mwg + 48L * p->kwg;
    const long threads = (long)p->mdimc * p->ndimc;
    if (cpu_group("conv.igemm_tiled", dev, threads, "mwi = mwg/mdimc, nwi = nwg/ndimc, kwi 1", p->mwg / p->mdimc,
                  p->nwg / p->ndimc, 1, why, size))
        return -1;
    return fits("conv.igemm_tiled", dev, "mdimc*ndimc", threads, local, why, size);
}

static int check_conv_direct(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_conv_direct *p = values;
    return fits("conv.direct", dev, "wg", p->wg, 0, why, size);
}

static int check_attention(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_attention_fused *p = values;
    MULTIPLE("attention.fused", p->block_q, p->vw);
    MULTIPLE("attention.fused", p->chunk_kv, p->block_kv);
    /* The scores, and the unrolled loops over them per head-dimension index. */
    if (bounded(why, size, "attention.fused", "block_q*block_kv", (long)p->block_q * p->block_kv,
                "scores per work-item", KILN_MAX_TILE_VALUES))
        return -1;
    /* Each row held costs 2 x 64 floats of private memory (queries and
       output accumulators; q_blocks shrinks for larger head dimensions). */
    if (bounded(why, size, "attention.fused", "q_blocks*block_q", (long)p->q_blocks * p->block_q,
                "query rows per work-item", KILN_MAX_ATTENTION_ROWS) ||
        bounded(why, size, "attention.fused", "q_blocks*block_q*wg", (long)p->q_blocks * p->block_q * p->wg,
                "query rows per work-group", KILN_MAX_ATTENTION_GROUP_ROWS))
        return -1;
    /* The per-chunk form keeps a chunk's scores (block_q x chunk_kv) and its
       keys and values (2 x chunk_kv x 64 floats, for larger head dimensions
       as many bytes in fewer keys) in private memory too: every work-item
       of the group (past POCL's stack, a group's private memory overwrote
       another thread's). */
    if (p->pv_rows > 0) {
        MULTIPLE("attention.fused", p->block_q, p->pv_rows);
        const long per_item = (long)p->q_blocks * p->block_q * 128 + (long)(p->block_q + 128) * p->chunk_kv;
        if (bounded(why, size, "attention.fused", "pv_rows*pv_vecs*vw", (long)p->pv_rows * p->pv_vecs * p->vw,
                    "accumulators per work-item", KILN_MAX_TILE_VALUES) ||
            bounded(why, size, "attention.fused", "block_q*chunk_kv", (long)p->block_q * p->chunk_kv,
                    "scores a work-item keeps", KILN_MAX_ATTENTION_SCORES) ||
            bounded(why, size, "attention.fused", "chunk_kv", p->chunk_kv, "keys a work-item keeps",
                    KILN_MAX_ATTENTION_CHUNK) ||
            bounded(why, size, "attention.fused", "wg*(q_blocks*block_q*128+(block_q+128)*chunk_kv)", p->wg * per_item,
                    "private floats per work-group", KILN_MAX_ATTENTION_GROUP_FLOATS))
            return -1;
    }
    return fits("attention.fused", dev, "wg", p->wg, 0, why, size);
}

/* The flash kernel's two grids of work-items (scores, output) tile its
   block; its local memory is sized here at head dimension 64 (the plan
   shrinks the blocks for larger ones), its output registers at 256. */
static int check_flash(const void *values, const struct kiln_device_desc *dev, char *why, size_t size)
{
    const struct kiln_param_attention_flash *p = values;
    MULTIPLE("attention.flash", p->block_q, p->s_rows);
    MULTIPLE("attention.flash", p->wg, p->block_q / p->s_rows);
    MULTIPLE("attention.flash", p->block_kv, p->wg / (p->block_q / p->s_rows));
    MULTIPLE("attention.flash", p->block_q, p->o_rows);
    MULTIPLE("attention.flash", p->wg, p->block_q / p->o_rows);
    const long score_cols = p->wg / (p->block_q / p->s_rows), out_cols = p->wg / (p->block_q / p->o_rows);
    if (bounded(why, size, "attention.flash", "s_rows*block_kv/(wg/(block_q/s_rows))",
                (long)p->s_rows * (p->block_kv / score_cols), "scores per work-item", KILN_MAX_TILE_VALUES) ||
        bounded(why, size, "attention.flash", "o_rows*256/(wg/(block_q/o_rows))",
                (long)p->o_rows * ((256 + out_cols - 1) / out_cols),
                "output values per work-item at head dimension 256", KILN_MAX_TILE_VALUES))
        return -1;
    return fits("attention.flash", dev, "wg", p->wg, kiln_flash_local_bytes(p->block_q, p->block_kv, 64), why, size);
}

#define GROUP(group, json, prefix, dims, check, doc)                                                                   \
    {json,                                                                                                             \
     prefix,                                                                                                           \
     dims,                                                                                                             \
     sizeof(struct kiln_param_##group),                                                                                \
     offsetof(struct kiln_params, group),                                                                              \
     group##_fields,                                                                                                   \
     sizeof group##_fields / sizeof group##_fields[0],                                                                 \
     check,                                                                                                            \
     doc},
const struct kiln_param_group kiln_param_groups[KILN_GROUP_COUNT] = {KILN_PARAM_GROUPS(GROUP)};

#define DIM_NAME(id, name, doc) name,
const char *const kiln_dim_names[KILN_DIM_COUNT] = {KILN_DIMENSIONS(DIM_NAME)};

int kiln_param_group_find(const char *name)
{
    for (int g = 0; g < KILN_GROUP_COUNT; g++)
        if (strcmp(kiln_param_groups[g].name, name) == 0)
            return g;
    return -1;
}

int kiln_param_field_find(int g, const char *key)
{
    for (size_t f = 0; f < kiln_param_groups[g].count; f++)
        if (strcmp(kiln_param_groups[g].fields[f].key, key) == 0)
            return (int)f;
    return -1;
}

double kiln_param_get(int g, int f, const void *values)
{
    const struct kiln_param_field *field = &kiln_param_groups[g].fields[f];
    const char *at = (const char *)values + field->offset;
    if (field->type == KILN_PARAM_NUMBER) {
        double d;
        memcpy(&d, at, sizeof d);
        return d;
    }
    int i;
    memcpy(&i, at, sizeof i);
    return i;
}

static void set_int(char *at, int value) { memcpy(at, &value, sizeof value); }

/* A JSON value as a message shows it: numbers and short strings as given,
   long strings cut, other types by name. */
static void describe(const cJSON *item, char *buf, size_t size)
{
    if (cJSON_IsNumber(item))
        snprintf(buf, size, "%.17g", item->valuedouble);
    else if (cJSON_IsString(item))
        snprintf(buf, size, "\"%.40s\"%s", item->valuestring, strlen(item->valuestring) > 40 ? "..." : "");
    else
        snprintf(buf, size, "%s",
                 cJSON_IsBool(item)     ? (cJSON_IsTrue(item) ? "true" : "false")
                 : cJSON_IsNull(item)   ? "null"
                 : cJSON_IsArray(item)  ? "a list"
                 : cJSON_IsObject(item) ? "an object"
                                        : "an invalid value");
}

static int read_value(const cJSON *item, const struct kiln_param_field *f, const char *where, void *values, char *why,
                      size_t size)
{
    char *at = (char *)values + f->offset;
    char got[64];
    describe(item, got, sizeof got);
    switch (f->type) {
    case KILN_PARAM_BOOL:
        if (!cJSON_IsBool(item))
            return fail(why, size, "'%s.%s' must be true or false (got %s)", where, f->key, got);
        set_int(at, cJSON_IsTrue(item) ? 1 : 0);
        return 0;
    case KILN_PARAM_CHOICE:
        if (cJSON_IsString(item))
            for (int c = 0; f->choices[c]; c++)
                if (strcmp(f->choices[c], item->valuestring) == 0) {
                    set_int(at, c);
                    return 0;
                }
        snprintf(why, size, "'%s.%s' must be one of", where, f->key);
        for (const char *const *c = f->choices; *c; c++)
            snprintf(why + strlen(why), size - strlen(why), "%s \"%s\"", c == f->choices ? "" : ",", *c);
        snprintf(why + strlen(why), size - strlen(why), " (got %s)", got);
        return -1;
    case KILN_PARAM_NUMBER:
        if (!cJSON_IsNumber(item) || !(item->valuedouble >= f->min) || !(item->valuedouble <= f->max))
            return fail(why, size, "'%s.%s' must be a number from %g to %g (got %s)", where, f->key, f->min, f->max,
                        got);
        memcpy(at, &item->valuedouble, sizeof item->valuedouble);
        return 0;
    case KILN_PARAM_INT:
    case KILN_PARAM_VW: {
        double d = cJSON_IsNumber(item) ? item->valuedouble : -1;
        int ok = cJSON_IsNumber(item) && d == floor(d) && d >= f->min && d <= f->max && d <= INT_MAX;
        if (f->type == KILN_PARAM_VW) {
            if (!(ok && (d == 1 || d == 2 || d == 4 || d == 8 || d == 16)))
                return fail(why, size, "'%s.%s' must be a vector width: 1, 2, 4, 8 or 16 (got %s)", where, f->key, got);
        } else if (!ok) {
            return fail(why, size, "'%s.%s' must be an integer from %g to %g (got %s)", where, f->key, f->min,
                        fmin(f->max, INT_MAX), got);
        }
        set_int(at, (int)d);
        return 0;
    }
    }
    return -1;
}

int kiln_param_read(const cJSON *obj, int g, const char *where, void *values, uint32_t *own, char *why, size_t why_size)
{
    if (!cJSON_IsObject(obj))
        return fail(why, why_size, "'%s' must be an object", where);
    uint32_t seen = 0;
    for (const cJSON *item = obj->child; item; item = item->next) {
        int f = kiln_param_field_find(g, item->string);
        if (f < 0)
            return fail(why, why_size, "unknown key '%s.%s'", where, item->string);
        if (seen & (1u << f))
            return fail(why, why_size, "duplicate key '%s.%s'", where, item->string);
        if (read_value(item, &kiln_param_groups[g].fields[f], where, values, why, why_size) != 0)
            return -1;
        seen |= 1u << f;
    }
    *own |= seen;
    return 0;
}

void kiln_param_write(int g, int f, const void *values, cJSON *obj)
{
    const struct kiln_param_field *field = &kiln_param_groups[g].fields[f];
    double v = kiln_param_get(g, f, values);
    switch (field->type) {
    case KILN_PARAM_BOOL:
        cJSON_AddBoolToObject(obj, field->key, v != 0);
        break;
    case KILN_PARAM_CHOICE:
        cJSON_AddStringToObject(obj, field->key, field->choices[(int)v]);
        break;
    default:
        cJSON_AddNumberToObject(obj, field->key, v);
        break;
    }
}
