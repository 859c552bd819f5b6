/*
 * GEMM through the public API against the plain-C reference of gemm_ref.h:
 * a shape table run over AUTO and each of the CPU, TILED, DIRECT and SMALLM
 * families, and the tensor-core ones (MMA, WGMMA) for 16-bit storage and
 * for fp32 storage with TF32 allowed (one test per row and family, named by
 * its shape; AUTO's choice of
 * the small-M kernels checked against the profile on every row), CLBlast
 * where built, events, plan reuse, the one-shot call, and a table of bad
 * inputs that must fail with a specific status and write nothing.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/context.h"
#include "gemm_ref.h"
#include "kiln/kiln_cl.h"
#include "ops/gemm.h"
#include "profiles/profile.h"
#include "test_util.h"

#define POISON_PLAN ((kiln_gemm_plan *)(uintptr_t)0x5a5a)

static const char *algo_name(kiln_gemm_algo algo)
{
    static const char *const names[] = {"auto", "cpu", "tiled", "direct", "clblast", "smallm", "mma", "wgmma"};
    return (unsigned)algo < sizeof names / sizeof *names ? names[algo] : "?";
}

/* The plan chose `algo` (any concrete family for AUTO) and says what it runs. */
static void assert_plan_describes(const kiln_gemm_plan *plan, kiln_gemm_algo algo)
{
    kiln_gemm_plan_info info;
    memset(&info, 0, sizeof info);
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    if (algo == KILN_GEMM_AUTO)
        assert_true(info.algo > KILN_GEMM_AUTO && info.algo <= KILN_GEMM_WGMMA);
    else
        assert_int_equal(info.algo, algo);
    assert_string_equal(info.family, algo_name(info.algo));
    assert_true(info.kernel[0] && info.params[0] && info.profile[0] && info.reason[0]);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    assert_string_equal(info.profile, dev.profile);
}

/* ------------------------------------------------------------------------ */
/* The shape table                                                          */
/* ------------------------------------------------------------------------ */

/* One problem. Leading dimensions are the tight ones plus `pad`, batch strides
   the tight ones plus `gap`: negative makes A or B items overlap, SHARED gives
   stride 0, one operand for every item. */
struct row {
    const char *what;
    kiln_layout layout;
    kiln_transpose ta, tb;
    size_t m, n, k;
    kiln_dtype dtype;
    kiln_math math;
    size_t pad[3], off[3], batch;
    long gap[3];
    int all_scalars; /* run every (alpha, beta) pair of gr_case_run(), not just two */
};

#define RM KILN_ROW_MAJOR
#define CM KILN_COL_MAJOR
#define NO KILN_NO_TRANS
#define TR KILN_TRANS
#define SHARED LONG_MIN
#define TF32 KILN_MATH_TF32
#define SHAPE(what_, lay, a, b, m_, n_, k_) .what = what_, .layout = lay, .ta = a, .tb = b, .m = m_, .n = n_, .k = k_

/* The CPU family's micro-tile here is 6x32 with a K block of 384 (x86-64-avx512,
   256 in generic-cpu) and an N block of 4096; the tiled family's work-group
   tile 64x64x16 and the direct family's 32 (generic-cpu). The small-M
   kernels hold blocks of 4 rows (gemm.smallm_mr; 2 in generic-cpu) with
   vectors of 16 (8) along K (B transposed: 4 columns per work-item) or N (B
   as stored: chunks of one vector, as many per work-item as give each
   compute unit one, K in steps of 8), and AUTO takes them up to 16 rows
   (smallm_max). Rows straddle all. */
static const struct row rows[] = {
    {SHAPE("single", RM, NO, NO, 1, 1, 1)},
    /* K below, at and above the K tiles (16, 32, 64) at a full 64x64 tile. */
    {SHAPE("k", RM, NO, NO, 64, 64, 1)},
    {SHAPE("k", RM, NO, NO, 64, 64, 5)},
    {SHAPE("k", RM, NO, NO, 64, 64, 16)},
    {SHAPE("k", RM, NO, NO, 64, 64, 31)},
    {SHAPE("k", RM, NO, NO, 64, 64, 32)},
    {SHAPE("k", RM, NO, NO, 64, 64, 33)},
    {SHAPE("k", RM, NO, NO, 64, 64, 64)},
    {SHAPE("k", RM, NO, NO, 64, 64, 65)},
    /* K around the CPU family's K blocks. */
    {SHAPE("k-block", RM, NO, NO, 7, 33, 256)},
    {SHAPE("k-block", RM, NO, NO, 7, 33, 257)},
    {SHAPE("k-block", RM, NO, NO, 7, 33, 384)},
    {SHAPE("k-block", RM, NO, NO, 7, 33, 385)},
    {SHAPE("k-block", RM, NO, NO, 7, 33, 769)},
    /* M and N at, below and above the micro-tile and work-group tiles. */
    {SHAPE("mn-tile", RM, NO, NO, 6, 32, 16)},
    {SHAPE("mn-edge", RM, NO, NO, 5, 31, 16)},
    {SHAPE("mn-edge", RM, NO, NO, 7, 33, 16)},
    {SHAPE("mn-tile", RM, NO, NO, 12, 64, 16)},
    {SHAPE("mn-edge", RM, NO, NO, 63, 65, 17)},
    {SHAPE("mn-edge", RM, NO, NO, 65, 63, 33)},
    {SHAPE("mn-edge", RM, NO, NO, 127, 129, 31)},
    {SHAPE("mn-edge", RM, NO, NO, 257, 7, 65)},
    {SHAPE("mn-edge", RM, NO, NO, 7, 257, 9)},
    {SHAPE("mn-edge", RM, NO, NO, 1031, 13, 33)},
    {SHAPE("mn-edge", RM, NO, NO, 13, 1031, 7)},
    {SHAPE("n-block", RM, NO, NO, 3, 4097, 5)},
    {SHAPE("prime", RM, NO, NO, 37, 53, 41)},
    {SHAPE("prime", RM, NO, NO, 101, 97, 103)},
    {SHAPE("prime", RM, NO, NO, 211, 179, 13)},
    {SHAPE("skinny", RM, NO, NO, 16, 4096, 256)},
    {SHAPE("skinny", RM, NO, NO, 4096, 16, 64)},
    {SHAPE("gemv", RM, NO, NO, 1, 1031, 257)},
    {SHAPE("gemv", RM, NO, NO, 1031, 1, 257)},
    {SHAPE("gemv", CM, TR, NO, 1, 1031, 257)},
    {SHAPE("square", RM, NO, NO, 255, 257, 129)},
    /* Every layout and transpose on an edge shape and a tile-ish one. */
    {SHAPE("trans", RM, NO, NO, 37, 70, 19)},
    {SHAPE("trans", RM, NO, TR, 37, 70, 19)},
    {SHAPE("trans", RM, TR, NO, 37, 70, 19)},
    {SHAPE("trans", RM, TR, TR, 37, 70, 19)},
    {SHAPE("trans", CM, NO, NO, 37, 70, 19)},
    {SHAPE("trans", CM, NO, TR, 37, 70, 19)},
    {SHAPE("trans", CM, TR, NO, 37, 70, 19)},
    {SHAPE("trans", CM, TR, TR, 37, 70, 19)},
    {SHAPE("trans", RM, NO, NO, 65, 33, 64)},
    {SHAPE("trans", RM, NO, TR, 65, 33, 64)},
    {SHAPE("trans", RM, TR, NO, 65, 33, 64)},
    {SHAPE("trans", RM, TR, TR, 65, 33, 64)},
    {SHAPE("trans", CM, NO, NO, 65, 33, 64)},
    {SHAPE("trans", CM, NO, TR, 65, 33, 64)},
    {SHAPE("trans", CM, TR, NO, 65, 33, 64)},
    {SHAPE("trans", CM, TR, TR, 65, 33, 64)},
    /* alpha and beta: zero, negative, one, fractional. */
    {SHAPE("scalars", RM, NO, TR, 37, 70, 19), .all_scalars = 1},
    {SHAPE("scalars", CM, TR, NO, 64, 64, 64), .all_scalars = 1},
    /* Odd element offsets and padded leading dimensions (padding is NaN). */
    {SHAPE("offsets", RM, NO, NO, 37, 70, 19), .off = {1, 3, 5}},
    {SHAPE("offsets", CM, TR, TR, 65, 33, 64), .off = {7, 1, 3}},
    {SHAPE("ld", RM, NO, TR, 37, 70, 19), .pad = {3, 5, 7}},
    {SHAPE("ld", CM, NO, NO, 65, 33, 64), .pad = {1, 2, 9}},
    {SHAPE("ld-wide", RM, TR, NO, 9, 10, 11), .pad = {100, 200, 300}},
    {SHAPE("ld+offsets", RM, TR, TR, 63, 65, 33), .pad = {5, 1, 2}, .off = {3, 1, 7}},
    {SHAPE("ld+offsets", CM, NO, TR, 6, 32, 385), .pad = {1, 31, 3}, .off = {2, 9, 1}},
    /* Batches: tight, with NaN gaps between items, and shared operands. */
    {SHAPE("batch", RM, NO, NO, 37, 70, 19), .batch = 5},
    {SHAPE("batch", RM, NO, NO, 1, 1, 1), .batch = 7},
    {SHAPE("batch-many", CM, NO, TR, 5, 7, 3), .batch = 300, .gap = {0, SHARED, 1}},
    {SHAPE("batch-gaps", CM, NO, TR, 23, 17, 29), .batch = 5, .gap = {3, 5, 7}, .pad = {1, 0, 2}},
    {SHAPE("batch-gaps", RM, TR, NO, 64, 64, 16), .batch = 3, .gap = {1, 64, 17}, .off = {1, 2, 3}},
    {SHAPE("batch-shared-a", RM, NO, NO, 33, 65, 17), .batch = 4, .gap = {SHARED, 0, 0}},
    {SHAPE("batch-shared-b", CM, TR, NO, 33, 65, 17), .batch = 4, .gap = {0, SHARED, 0}},
    {SHAPE("batch-shared-ab", RM, NO, TR, 7, 33, 9), .batch = 3, .gap = {SHARED, SHARED, 3}},
    {SHAPE("batch-overlap-ab", RM, NO, NO, 7, 3, 5), .batch = 6, .gap = {-34, -14, 0}},
    /* Few columns, many rows: the CPU family flips the product (tiles of
       C^T stored transposed, docs/gemm.md) on the CPU profiles; in column
       major the plan's own swap is flipped back. */
    {SHAPE("flip", RM, NO, NO, 130, 7, 64)},
    {SHAPE("flip", RM, TR, TR, 130, 7, 64), .off = {1, 3, 5}, .pad = {3, 1, 2}},
    {SHAPE("flip", CM, NO, TR, 7, 130, 64)},
    {SHAPE("flip-scalars", RM, NO, TR, 200, 9, 100), .all_scalars = 1},
    {SHAPE("flip-batch", RM, NO, NO, 100, 5, 80), .batch = 3, .gap = {3, SHARED, 1}},
    {SHAPE("flip-batch", RM, TR, NO, 100, 5, 80), .batch = 3, .gap = {SHARED, 2, 0}},
    {SHAPE("flip-f16", RM, NO, NO, 130, 7, 64), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("flip-bf16", RM, NO, TR, 130, 7, 64), .dtype = KILN_BF16, .all_scalars = 1},
    /* Whole flipped tiles (5 to 8 rows of C^T by 32 columns on the
       x86-64-avx512 profiles: 8 here, 6 in flip-whole-6, 7 and 5 in the flip
       rows above), stored through a transpose in registers. */
    {SHAPE("flip-whole", RM, NO, NO, 96, 40, 64), .all_scalars = 1},
    {SHAPE("flip-whole-6", RM, NO, NO, 96, 18, 64), .all_scalars = 1},
    {SHAPE("flip-whole-batch", RM, NO, NO, 96, 40, 64), .batch = 3, .gap = {3, SHARED, 1}},
    {SHAPE("flip-whole-f16", RM, NO, NO, 96, 40, 64), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("flip-whole-bf16", RM, NO, NO, 96, 40, 64), .dtype = KILN_BF16, .all_scalars = 1},
    /* A K whose column panels outgrow half a second-level cache (256 KiB to
       1 MiB of a CPU's): the CPU family sums slices of K, C taking each with
       beta 1 after the first (an epilogue or 16-bit storage keeps one pass). */
    {SHAPE("k-slices", RM, NO, NO, 9, 33, 16411), .all_scalars = 1},
    {SHAPE("k-slices", CM, TR, TR, 10, 17, 16411), .batch = 2, .gap = {3, 5, 7}, .off = {1, 2, 3}},
    {SHAPE("k-slices-flip", RM, NO, TR, 33, 7, 16411), .all_scalars = 1},
    {SHAPE("k-slices-b-in-place", RM, NO, NO, 9, 64, 16411), .pad = {0, 5, 0}, .off = {1, 2, 3}},
    {SHAPE("k-slices-f16", RM, NO, NO, 9, 33, 16411), .dtype = KILN_F16},
    /* fp16 storage, fp32 arithmetic. */
    {SHAPE("f16", RM, NO, NO, 1, 1, 1), .dtype = KILN_F16},
    {SHAPE("f16", RM, NO, NO, 7, 33, 16), .dtype = KILN_F16},
    {SHAPE("f16", RM, NO, NO, 64, 64, 64), .dtype = KILN_F16},
    {SHAPE("f16", RM, NO, TR, 65, 63, 33), .dtype = KILN_F16},
    {SHAPE("f16", RM, NO, NO, 7, 33, 385), .dtype = KILN_F16},
    {SHAPE("f16", CM, TR, NO, 37, 70, 19), .dtype = KILN_F16, .off = {1, 3, 5}, .pad = {3, 1, 2}},
    {SHAPE("f16", RM, TR, TR, 23, 17, 29), .dtype = KILN_F16, .batch = 3, .gap = {3, SHARED, 1}, .off = {1, 0, 1}},
    {SHAPE("f16", RM, NO, NO, 37, 70, 19), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("bf16", RM, NO, NO, 1, 1, 1), .dtype = KILN_BF16},
    {SHAPE("bf16", RM, NO, NO, 64, 64, 64), .dtype = KILN_BF16},
    {SHAPE("bf16", RM, NO, TR, 65, 63, 33), .dtype = KILN_BF16},
    {SHAPE("bf16", CM, TR, NO, 37, 70, 19), .dtype = KILN_BF16, .off = {1, 3, 5}, .pad = {3, 1, 2}},
    {SHAPE("bf16", RM, TR, TR, 23, 17, 29), .dtype = KILN_BF16, .batch = 3, .gap = {3, SHARED, 1}, .off = {1, 0, 1}},
    {SHAPE("bf16", RM, NO, NO, 37, 70, 19), .dtype = KILN_BF16, .all_scalars = 1},
    /* Split K (tiled family): one tile, K long enough for several slices of
       gemm.tiled.split_k_min (64 here, generic-cpu's), K not a multiple of
       the slices; every transpose and layout, C of one row or column,
       scalars, batches with gaps and a shared operand, offsets and padding,
       fp16. */
    {SHAPE("split-k", RM, NO, NO, 37, 20, 777)},
    {SHAPE("split-k", RM, NO, TR, 37, 20, 777)},
    {SHAPE("split-k", RM, TR, NO, 37, 20, 777)},
    {SHAPE("split-k", RM, TR, TR, 37, 20, 777)},
    {SHAPE("split-k", CM, NO, NO, 20, 37, 777)},
    {SHAPE("split-k", CM, TR, TR, 20, 37, 777)},
    {SHAPE("split-k", RM, NO, NO, 1, 33, 1000)},
    {SHAPE("split-k", RM, NO, TR, 33, 1, 999)},
    {SHAPE("split-k", RM, NO, NO, 64, 64, 4096)},
    {SHAPE("split-k-scalars", RM, TR, TR, 9, 10, 513), .all_scalars = 1},
    {SHAPE("split-k-batch", CM, NO, TR, 20, 30, 700), .batch = 3, .gap = {3, SHARED, 5}},
    {SHAPE("split-k-ld+offsets", RM, NO, TR, 17, 19, 600), .pad = {3, 5, 7}, .off = {1, 3, 5}},
    {SHAPE("split-k-f16", RM, NO, NO, 17, 19, 600), .dtype = KILN_F16},
    {SHAPE("split-k-f16", RM, TR, NO, 17, 19, 601), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("split-k-bf16", RM, NO, TR, 17, 19, 600), .dtype = KILN_BF16, .all_scalars = 1},
    /* Few rows of C (in row-major terms: n for column-major). The classifier
       of a network at batch 1 (weights transposed or not), K and N prime,
       K below, at and above a vector, M around the row block and around
       smallm_max (17: AUTO takes another family). */
    {SHAPE("small-m", RM, NO, TR, 1, 1000, 2048)},
    {SHAPE("small-m", RM, NO, NO, 1, 1000, 2048)},
    {SHAPE("small-m", RM, NO, TR, 1, 7, 1031)},
    {SHAPE("small-m", RM, NO, NO, 1, 7, 1031)},
    {SHAPE("small-m", RM, NO, TR, 2, 33, 17)},
    {SHAPE("small-m", RM, NO, TR, 3, 4097, 5)},
    {SHAPE("small-m", RM, NO, NO, 3, 4097, 5)},
    {SHAPE("small-m", RM, NO, TR, 4, 64, 64)},
    {SHAPE("small-m", RM, NO, NO, 4, 64, 64)},
    {SHAPE("small-m", RM, NO, NO, 5, 65, 33)},
    {SHAPE("small-m", RM, NO, TR, 7, 129, 15)},
    {SHAPE("small-m", RM, NO, NO, 7, 129, 15)},
    {SHAPE("small-m", RM, NO, TR, 8, 17, 16)},
    {SHAPE("small-m", RM, NO, NO, 8, 31, 16)},
    {SHAPE("small-m", RM, NO, TR, 9, 31, 97)},
    {SHAPE("small-m", RM, NO, NO, 9, 31, 97)},
    {SHAPE("small-m", RM, NO, TR, 16, 45, 70)},
    {SHAPE("small-m", RM, NO, NO, 16, 45, 70)},
    {SHAPE("small-m", RM, NO, TR, 17, 45, 70)},
    {SHAPE("small-m", RM, NO, NO, 17, 45, 70)},
    /* Every layout and transpose with 3 rows of C in row-major terms. */
    {SHAPE("small-m-trans", RM, NO, NO, 3, 70, 37)},
    {SHAPE("small-m-trans", RM, NO, TR, 3, 70, 37)},
    {SHAPE("small-m-trans", RM, TR, NO, 3, 70, 37)},
    {SHAPE("small-m-trans", RM, TR, TR, 3, 70, 37)},
    {SHAPE("small-m-trans", CM, NO, NO, 70, 3, 37)},
    {SHAPE("small-m-trans", CM, NO, TR, 70, 3, 37)},
    {SHAPE("small-m-trans", CM, TR, NO, 70, 3, 37)},
    {SHAPE("small-m-trans", CM, TR, TR, 70, 3, 37)},
    {SHAPE("small-m-trans", RM, TR, TR, 1, 70, 37)},
    /* Padded leading dimensions (NaN), odd offsets, shared operands. */
    {SHAPE("small-m-ld+offsets", RM, NO, TR, 2, 37, 41), .pad = {3, 5, 7}, .off = {1, 3, 5}},
    {SHAPE("small-m-ld+offsets", RM, TR, NO, 3, 37, 41), .pad = {1, 2, 9}, .off = {7, 1, 3}},
    {SHAPE("small-m-ld+offsets", CM, TR, TR, 45, 2, 19), .pad = {5, 1, 2}, .off = {3, 1, 7}},
    {SHAPE("small-m-batch", RM, NO, TR, 1, 100, 67), .batch = 4, .gap = {0, SHARED, 3}},
    {SHAPE("small-m-batch", RM, NO, NO, 2, 33, 17), .batch = 3, .gap = {SHARED, 5, 0}},
    {SHAPE("small-m-batch", RM, NO, TR, 3, 33, 41), .batch = 3, .gap = {SHARED, 5, 0}},
    {SHAPE("small-m-batch", CM, NO, TR, 21, 4, 19), .batch = 3, .gap = {SHARED, SHARED, 1}},
    /* B as stored, K in steps of gemm.smallm.kc (8 here) over several chunks
       of columns per work-item: K a few steps and a part, two blocks of
       rows, the last chunk of a work-item partial and N ending inside a
       work-item's chunks; rows enough to cut the chunks (their parked sums'
       bound) with A transposed in a batch; fp16. */
    {SHAPE("small-m-steps", RM, NO, NO, 7, 1500, 70), .pad = {3, 5, 7}, .off = {1, 3, 5}},
    {SHAPE("small-m-steps", RM, TR, NO, 8, 4100, 33), .batch = 2, .gap = {SHARED, 5, 3}},
    {SHAPE("small-m-steps", RM, NO, NO, 6, 2600, 17), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("small-m-scalars", RM, NO, TR, 3, 70, 19), .all_scalars = 1},
    {SHAPE("small-m-scalars", RM, TR, NO, 4, 33, 40), .all_scalars = 1},
    {SHAPE("small-m-f16", RM, NO, TR, 1, 1000, 1024), .dtype = KILN_F16},
    {SHAPE("small-m-f16", RM, NO, NO, 1, 1000, 1024), .dtype = KILN_F16},
    {SHAPE("small-m-f16", RM, TR, TR, 3, 37, 41), .dtype = KILN_F16, .off = {1, 3, 5}, .pad = {3, 1, 2}},
    {SHAPE("small-m-f16", CM, NO, NO, 33, 2, 31), .dtype = KILN_F16, .batch = 2, .gap = {1, SHARED, 2}},
    {SHAPE("small-m-f16", RM, NO, NO, 4, 37, 19), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("small-m-bf16", RM, NO, TR, 1, 1000, 1024), .dtype = KILN_BF16},
    {SHAPE("small-m-bf16", RM, TR, NO, 3, 37, 41), .dtype = KILN_BF16, .off = {1, 3, 5}, .pad = {3, 1, 2}},
    /* The tensor-core family's blocks (128 x 128 by 32 of K) and copies:
       rows 16-byte aligned (leading dimensions multiples of 8) with K not a
       multiple of 8, so a copy stops inside a row; both operands
       transposed; batches; many K steps through the pipeline; scalars. */
    {SHAPE("mma", RM, NO, NO, 130, 140, 50), .dtype = KILN_F16, .pad = {6, 4, 0}},
    {SHAPE("mma", RM, TR, TR, 200, 72, 64), .dtype = KILN_F16, .off = {8, 16, 3}},
    {SHAPE("mma", RM, TR, NO, 129, 257, 40), .dtype = KILN_F16, .batch = 3, .gap = {8, SHARED, 5}},
    {SHAPE("mma", RM, NO, TR, 128, 128, 2048), .dtype = KILN_F16},
    {SHAPE("mma", CM, NO, NO, 64, 300, 40), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("mma", RM, NO, NO, 130, 140, 50), .dtype = KILN_BF16, .pad = {6, 4, 0}},
    {SHAPE("mma", RM, TR, NO, 129, 257, 40), .dtype = KILN_BF16, .batch = 3, .gap = {8, SHARED, 5}, .all_scalars = 1},
    /* The wgmma family's blocks (nvidia-hopper: 128 x 256 by 64 of K, four
       buffers): several blocks each way with partial ones at both edges,
       more K steps than buffers, each transpose (the four descriptor
       layouts); unaligned rows for the plain-loads kernel. */
    {SHAPE("wgmma", RM, NO, NO, 300, 520, 700), .dtype = KILN_F16},
    {SHAPE("wgmma", RM, TR, TR, 257, 300, 333), .dtype = KILN_BF16},
    {SHAPE("wgmma", RM, NO, TR, 256, 512, 1024), .dtype = KILN_F16, .batch = 2},
    {SHAPE("wgmma", RM, TR, NO, 200, 264, 520), .dtype = KILN_F16, .all_scalars = 1},
    {SHAPE("wgmma", RM, NO, NO, 150, 270, 330), .dtype = KILN_BF16, .pad = {3, 5, 1}},
    /* fp32 storage with TF32 allowed: the tensor-core families on CUDA
       (compute capability 8.0 on, wgmma 9.0), exact fp32 elsewhere; gr_bound
       allows the rounding of A and B to TF32. The mma family's blocks (128 x
       128 by 16 fp32 values of K; 32 in nvidia-hopper) with rows 16-byte
       aligned (leading dimensions multiples of 4) and K not a multiple of 4,
       each transpose, offsets, batches with a shared operand, many K steps,
       scalars, column major; unaligned rows for the plain-loads kernel, and
       aligned rows at offsets that take it at execution. Then the wgmma
       family's blocks (nvidia-hopper: 128 x 256 by 32 fp32 values of K): A
       and B read K-major as stored (row-major A, B^T), or copied K-major
       first (A^T, B), a shared B copied once, unaligned rows. */
    {SHAPE("tf32", RM, NO, NO, 130, 140, 50), .math = TF32, .pad = {2, 4, 0}},
    {SHAPE("tf32", RM, TR, TR, 200, 72, 63), .math = TF32, .pad = {0, 1, 0}, .off = {4, 8, 3}},
    {SHAPE("tf32", RM, TR, NO, 129, 257, 40), .math = TF32, .batch = 3, .gap = {4, SHARED, 5}},
    {SHAPE("tf32", RM, NO, TR, 128, 128, 2048), .math = TF32},
    {SHAPE("tf32", CM, NO, NO, 64, 300, 40), .math = TF32, .all_scalars = 1},
    {SHAPE("tf32", RM, NO, NO, 37, 70, 19), .math = TF32, .off = {1, 3, 5}, .pad = {3, 1, 2}},
    {SHAPE("tf32", RM, TR, NO, 65, 63, 33), .math = TF32, .off = {1, 0, 2}, .all_scalars = 1},
    {SHAPE("tf32", RM, NO, NO, 64, 64, 64), .math = TF32, .off = {1, 2, 0}},
    {SHAPE("tf32-wgmma", RM, NO, NO, 300, 520, 700), .math = TF32},
    {SHAPE("tf32-wgmma", RM, NO, TR, 256, 512, 1024), .math = TF32, .batch = 2},
    {SHAPE("tf32-wgmma", RM, TR, NO, 200, 264, 520), .math = TF32, .all_scalars = 1},
    {SHAPE("tf32-wgmma", CM, TR, TR, 257, 300, 333), .math = TF32},
    {SHAPE("tf32-wgmma", RM, NO, NO, 150, 270, 330), .math = TF32, .pad = {3, 5, 1}},
    {SHAPE("tf32-wgmma", RM, TR, NO, 130, 270, 101), .math = TF32, .batch = 3, .gap = {4, SHARED, 7}, .off = {1, 2, 3}},
};

static kiln_gemm_desc desc_of(const struct row *r, kiln_gemm_algo algo)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, r->layout, r->ta, r->tb, r->m, r->n, r->k);
    d.dtype = r->dtype;
    d.math = r->math;
    d.algo = algo;
    d.batch = r->batch ? r->batch : 1;
    size_t *ld[3] = {&d.lda, &d.ldb, &d.ldc}, *stride[3] = {&d.stride_a, &d.stride_b, &d.stride_c};
    for (int w = GR_A; w <= GR_C; w++) {
        struct kiln_gemm_operand op = kiln_gemm_operand_of(&d, w);
        *ld[w] = gr_tight_ld(&op) + r->pad[w];
        op = kiln_gemm_operand_of(&d, w);
        *stride[w] = r->gap[w] == SHARED ? 0 : (size_t)((long)gr_tight_stride(&op) + r->gap[w]);
    }
    return d;
}

struct row_test {
    const struct row *row;
    kiln_gemm_algo algo;
};

/* Run a plan made for row `r` and release it. */
static void run_row_plan(kiln_gemm_plan *plan, const kiln_gemm_desc *d, const struct row *r)
{
    struct gr_case t;
    gr_case_init(&t, kt_ctx, d, r->off[GR_A], r->off[GR_B], r->off[GR_C], 0);
    gr_case_run(&t, plan, r->all_scalars ? GR_SCALAR_PAIRS : 2, &kt_group_seed);
    gr_case_free(&t);
    kiln_gemm_plan_destroy(plan);
}

/* AUTO takes the small-M kernels exactly when C has at most the profile's
   smallm_max rows in row-major terms, and a small-M plan runs the kernel of
   its B: dot products along K for B transposed (row-major terms), else rows
   of B along N. */
static void assert_small_m_choice(const kiln_gemm_plan *plan, const kiln_gemm_desc *d)
{
    kiln_gemm_plan_info info;
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    const int row_major = d->layout == KILN_ROW_MAJOR;
    const size_t c_rows = row_major ? d->m : d->n;
    const kiln_transpose tb = row_major ? d->trans_b : d->trans_a;
    if (d->algo == KILN_GEMM_AUTO && kt_ctx->vector_kernels) {
        const long smallm_max = kiln_profile_params(kt_ctx->profile)->select.gemm_smallm_max;
        if (c_rows > (size_t)smallm_max) {
            assert_int_not_equal(info.algo, KILN_GEMM_SMALLM);
            return;
        }
        assert_int_equal(info.algo, KILN_GEMM_SMALLM);
        assert_non_null(strstr(info.reason, "smallm_max"));
    }
    if (info.algo == KILN_GEMM_SMALLM)
        assert_string_equal(info.kernel, tb == KILN_TRANS ? "gemm_f32_smallm_dot" : "gemm_f32_smallm_axpy");
}

/* AUTO never takes the tensor cores for fp32 storage without TF32; with
   TF32 allowed it takes them where they run (the CUDA backend, compute
   capability 8.0 on) for every product above the direct family's size. */
static void assert_tensor_core_choice(const kiln_gemm_plan *plan, const kiln_gemm_desc *d)
{
    if (d->algo != KILN_GEMM_AUTO || d->dtype != KILN_F32)
        return;
    kiln_gemm_plan_info info;
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    const int tensor_cores = info.algo == KILN_GEMM_MMA || info.algo == KILN_GEMM_WGMMA;
    if (d->math != KILN_MATH_TF32)
        assert_false(tensor_cores);
    else if (kiln_gemm_mma_runs_on(kt_ctx, KILN_F32, NULL, 0) && info.algo != KILN_GEMM_DIRECT && !tensor_cores)
        fail_msg("AUTO chose %s for fp32 storage with TF32 allowed on %s (%s)", info.family, kt_ctx->desc.arch,
                 info.reason);
}

static void test_row(void **state)
{
    const struct row_test *rt = *state;
    kiln_gemm_desc d = desc_of(rt->row, rt->algo);
    kiln_gemm_plan *plan = NULL;
    kiln_status st = kiln_gemm_plan_create(kt_ctx, &d, &plan);
    kt_skip_unsupported_here(kt_ctx, st);
    /* The tensor cores: CUDA only, bf16 and TF32 from compute capability
       8.0, wgmma on 9.0 only. */
    if (((rt->algo == KILN_GEMM_MMA &&
          (!kt_ctx->backend->native_sources || (rt->row->dtype != KILN_F16 && kt_ctx->desc.cc_major < 8))) ||
         (rt->algo == KILN_GEMM_WGMMA && !kiln_gemm_wgmma_runs_on(kt_ctx, NULL, 0))) &&
        st == KILN_ERROR_UNSUPPORTED) {
        printf("# %s\n", kiln_last_error_detail());
        skip();
    }
    kt_assert_status(st, KILN_SUCCESS);
    assert_plan_describes(plan, rt->algo);
    assert_small_m_choice(plan, &d);
    assert_tensor_core_choice(plan, &d);
    run_row_plan(plan, &d, rt->row);
}

static void row_name(char *buf, size_t size, const struct row *r, kiln_gemm_algo algo)
{
    int n = snprintf(buf, size, "%s %s %zux%zux%zu %s-%c%c%s%s%s", algo_name(algo), r->what, r->m, r->n, r->k,
                     r->layout == RM ? "row" : "col", r->ta == TR ? 'T' : 'N', r->tb == TR ? 'T' : 'N',
                     r->dtype != KILN_F32 ? " " : "", r->dtype != KILN_F32 ? kt_dtype_name(r->dtype) : "",
                     r->math == TF32 ? " math=tf32" : "");
    if (r->pad[0] || r->pad[1] || r->pad[2])
        n += snprintf(buf + n, size - (size_t)n, " ld+%zu,%zu,%zu", r->pad[0], r->pad[1], r->pad[2]);
    if (r->off[0] || r->off[1] || r->off[2])
        n += snprintf(buf + n, size - (size_t)n, " off=%zu,%zu,%zu", r->off[0], r->off[1], r->off[2]);
    if (r->batch) {
        n += snprintf(buf + n, size - (size_t)n, " batch=%zu gaps", r->batch);
        for (int w = GR_A; w <= GR_C; w++)
            if (r->gap[w] == SHARED)
                n += snprintf(buf + n, size - (size_t)n, "%sshared", w ? "," : "=");
            else
                n += snprintf(buf + n, size - (size_t)n, "%s%ld", w ? "," : "=", r->gap[w]);
    }
    if (r->all_scalars)
        snprintf(buf + n, size - (size_t)n, " all-alpha-beta");
}

/* ------------------------------------------------------------------------ */
/* Descriptor defaults, CLBlast, events, reuse, one-shot                    */
/* ------------------------------------------------------------------------ */

static void test_desc_init_is_tight(void **state)
{
    (void)state;
    for (int combo = 0; combo < 8; combo++) {
        kiln_layout lay = combo & 4 ? CM : RM;
        kiln_transpose ta = combo & 2 ? TR : NO, tb = combo & 1 ? TR : NO;
        kiln_gemm_desc d;
        memset(&d, 0xa5, sizeof d);
        kiln_gemm_desc_init(&d, lay, ta, tb, 5, 7, 3);
        assert_int_equal(d.layout, lay);
        assert_int_equal(d.trans_a, ta);
        assert_int_equal(d.trans_b, tb);
        assert_int_equal(d.dtype, KILN_F32);
        assert_int_equal(d.algo, KILN_GEMM_AUTO);
        assert_int_equal(d.m, 5);
        assert_int_equal(d.n, 7);
        assert_int_equal(d.k, 3);
        assert_int_equal(d.batch, 1);
        size_t ld[3] = {d.lda, d.ldb, d.ldc}, stride[3] = {d.stride_a, d.stride_b, d.stride_c};
        for (int w = GR_A; w <= GR_C; w++) {
            struct kiln_gemm_operand op = kiln_gemm_operand_of(&d, w);
            assert_int_equal(ld[w], gr_tight_ld(&op));
            assert_int_equal(stride[w], gr_tight_stride(&op));
        }
    }
}

static void test_clblast_runs_or_is_unsupported(void **state)
{
    (void)state;
    static const struct row cases[] = {
        {SHAPE("clblast", RM, NO, NO, 37, 70, 19)},
        {SHAPE("clblast", CM, TR, NO, 65, 33, 64), .off = {1, 2, 3}, .pad = {1, 0, 2}},
        {SHAPE("clblast", RM, NO, TR, 23, 17, 29), .batch = 3, .gap = {3, SHARED, 1}},
        {SHAPE("clblast", RM, TR, NO, 65, 63, 33), .dtype = KILN_F16, .off = {1, 0, 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_gemm_desc d = desc_of(&cases[i], KILN_GEMM_CLBLAST);
        kiln_gemm_plan *plan = POISON_PLAN;
        kiln_status st = kiln_gemm_plan_create(kt_ctx, &d, &plan);
        if (st == KILN_ERROR_UNSUPPORTED) {
            kt_assert_status(st, KILN_ERROR_UNSUPPORTED);
            assert_ptr_equal(plan, POISON_PLAN);
            printf("# CLBlast unsupported: %s\n", kiln_last_error_detail());
            continue;
        }
        kt_assert_status(st, KILN_SUCCESS);
        assert_plan_describes(plan, KILN_GEMM_CLBLAST);
        run_row_plan(plan, &d, &cases[i]);
    }
}

static void test_event_completes_the_work(void **state)
{
    (void)state;
    static const kiln_gemm_algo algos[] = {KILN_GEMM_AUTO, KILN_GEMM_CPU, KILN_GEMM_TILED, KILN_GEMM_DIRECT,
                                           KILN_GEMM_SMALLM};
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, RM, NO, TR, 65, 70, 33);
        d.algo = algos[i];
        kiln_gemm_plan *plan = NULL;
        kiln_status st = kiln_gemm_plan_create(kt_ctx, &d, &plan);
        if (kt_unsupported_here(kt_ctx, st))
            continue;
        kt_assert_status(st, KILN_SUCCESS);
        struct gr_case t;
        gr_case_init(&t, kt_ctx, &d, 0, 0, 0, 0);
        gr_case_fill(&t, 1, &kt_group_seed);
        kiln_event *ev = KT_POISON_EVENT;
        kt_assert_status(gr_case_execute(&t, plan, 1.0f, 0.0f, &ev), KILN_SUCCESS);
        kt_wait_and_release(ev);
        gr_case_check(&t, 1.0f, 0.0f);
        gr_case_free(&t);
        kiln_gemm_plan_destroy(plan);
    }
}

/* One plan, several buffers and offsets, executions queued back to back
   before anything is read: each result reflects its own inputs. */
static void test_plan_reuse_gives_fresh_results(void **state)
{
    (void)state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, CM, TR, NO, 37, 70, 19);
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    struct gr_case t1, t2;
    gr_case_init(&t1, kt_ctx, &d, 0, 0, 0, 0);
    gr_case_init(&t2, kt_ctx, &d, 5, 2, 9, 3);
    for (int round = 0; round < 3; round++) {
        gr_case_fill(&t1, 1, &kt_group_seed);
        gr_case_fill(&t2, 0, &kt_group_seed);
        kt_assert_status(gr_case_execute(&t1, plan, 1.0f, 0.0f, NULL), KILN_SUCCESS);
        kt_assert_status(gr_case_execute(&t2, plan, 0.5f, -1.0f, NULL), KILN_SUCCESS);
        gr_case_check(&t1, 1.0f, 0.0f);
        gr_case_check(&t2, 0.5f, -1.0f);
    }
    gr_case_free(&t1);
    gr_case_free(&t2);
    kiln_gemm_plan_destroy(plan);
}

/* The tiled family's split of K follows docs of gemm.tiled.split_k_min and
   split_k_waves on this device's compute units: S = min(waves x CU / tiles,
   K / split_k_min) slices of K / S rounded up to the K step, only when S >=
   2; its workspace is batch x S x M x N floats; the results stay right. */
static void test_split_k_choice(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(kt_ctx, &dev), KILN_SUCCESS);
    const size_t cu = kt_ctx->desc.compute_units;
    static const struct {
        long min, waves;
        size_t m, n, k, batch;
    } cases[] = {
        {16, 8, 40, 30, 1000, 1},  /* one tile of 64 x 64 */
        {16, 8, 40, 130, 1000, 2}, /* three tiles a batch item */
        {300, 8, 40, 30, 1000, 1}, /* K for three slices at most */
        {600, 8, 40, 30, 1000, 1}, /* K for one: no split */
        {0, 8, 40, 30, 100000, 1}, /* never */
        {16, 1, 40, 30, 1000, 1},  /* slices up to one work-group per compute unit */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char overlay[256];
        snprintf(overlay, sizeof overlay,
                 "{\"kernels\": {\"gemm.tiled\": {\"mwg\": 64, \"nwg\": 64, \"kwg\": 16, \"mdimc\": 4, \"ndimc\": 4, "
                 "\"mdima\": 4, \"ndimb\": 4, \"kwi\": 2, \"vwm\": 4, \"vwn\": 4, \"split_k_min\": %ld, "
                 "\"split_k_waves\": %ld, \"classes\": []}}}",
                 cases[i].min, cases[i].waves);
        kiln_context_options opt;
        kiln_context_options_init(&opt);
        opt.profile_overlay = overlay;
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, cases[i].m, cases[i].n, cases[i].k);
        d.batch = cases[i].batch;
        d.algo = KILN_GEMM_TILED;
        kiln_gemm_plan *plan = NULL;
        kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_gemm_plan_info info;
        kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);

        const size_t tiles = (d.m + 63) / 64 * ((d.n + 63) / 64) * d.batch, wanted = (size_t)cases[i].waves * cu;
        size_t s = tiles < wanted ? wanted / tiles : 1;
        if (cases[i].min == 0 || s > d.k / (size_t)cases[i].min)
            s = cases[i].min == 0 ? 1 : d.k / (size_t)cases[i].min;
        printf("# split_k_min %ld, split_k_waves %ld, %zux%zux%zu batch %zu: %s; %s\n", cases[i].min, cases[i].waves,
               d.m, d.n, d.k, d.batch, info.params, info.reason);
        if (s >= 2) {
            const size_t ks = (d.k + s - 1) / s, step = (ks + 15) / 16 * 16, slices = (d.k + step - 1) / step;
            char want[64];
            snprintf(want, sizeof want, "split K %zu x %zu", slices, step);
            if (!strstr(info.params, want))
                fail_msg("case %zu: \"%s\" does not say \"%s\"", i, info.params, want);
            assert_non_null(strstr(info.reason, "split K"));
            assert_int_equal(info.workspace_bytes, d.batch * slices * d.m * d.n * sizeof(float));
        } else {
            assert_null(strstr(info.params, "split"));
            assert_int_equal(info.workspace_bytes, 0);
        }
        if (d.k <= 1000)
            gr_check_plan(ctx, &d, plan, 2, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

/* A cache of one core of the host (sysconf's name), as the CPU family reads
   it for a CPU device; `otherwise` elsewhere or where unknown. */
static size_t host_cache(int name, size_t otherwise)
{
    const long bytes = kt_ctx->desc.type == KILN_DEVICE_CPU ? sysconf(name) : -1;
    return bytes > 0 ? (size_t)bytes : otherwise;
}

/* A core's second-level cache as the CPU family reads it: the host's for a
   CPU device, else (or where unknown) 1 MiB. */
static size_t host_l2(void)
{
#ifdef _SC_LEVEL2_CACHE_SIZE
    return host_cache(_SC_LEVEL2_CACHE_SIZE, (size_t)1 << 20);
#else
    return (size_t)1 << 20;
#endif
}

/* d's plan on the CPU family in ctx, described into info; NULL, ctx
   destroyed, where this device has no CPU kernels. */
static kiln_gemm_plan *cpu_plan(kiln_context *ctx, kiln_gemm_desc *d, kiln_gemm_plan_info *info)
{
    d->algo = KILN_GEMM_CPU;
    kiln_gemm_plan *plan = NULL;
    const kiln_status st = kiln_gemm_plan_create(ctx, d, &plan);
    if (kt_unsupported_here(ctx, st)) {
        kiln_context_destroy(ctx);
        return NULL;
    }
    kt_assert_status(st, KILN_SUCCESS);
    kt_assert_status(kiln_gemm_plan_describe(plan, info), KILN_SUCCESS);
    return plan;
}

/* The flipped CPU tile reads an untransposed fp32 B in place where it spans
   at most gemm.cpu.in_place_l2 percent of a core's second-level cache (the
   host's for a CPU device, else 1 MiB), and packs it otherwise; either way
   the results stay right. 512 x 49 x 512: 49 columns flip the 6 x 16 tile,
   B spans 100352 bytes. A is packed as a convolution's kept weights are
   (gemm.cpu.a_in_place 0: read in place, the straight tile would pack
   less). */
static void test_in_place_choice(void **state)
{
    (void)state;
    const size_t cache = host_l2(), span = 512 * 49 * sizeof(float);
    const long edge = (long)((span + cache / 100 - 1) / (cache / 100)); /* the least percentage that holds B */
    /* kiln-tune's ladder for the field counts B's span as the plan does. */
    assert_int_equal(kiln_gemm_cpu_in_place_l2(kt_ctx, span), edge);
    const long pcts[] = {0, edge - 1, edge, 1000};
    for (size_t i = 0; i < sizeof pcts / sizeof *pcts; i++) {
        if (pcts[i] < 0 || pcts[i] > 1000)
            continue;
        kiln_context *ctx =
            kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"mr\": 6, \"nr\": 16, \"vw\": 8, "
                               "\"narrow_mr\": 0, \"flip_mr\": 0, \"flip_nr\": 0, \"in_place_l2\": %ld, "
                               "\"a_in_place\": 0}}}",
                               pcts[i]);
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 512, 49, 512);
        kiln_gemm_plan_info info;
        kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
        if (!plan)
            return;
        const int in_place = cache / 100 * (size_t)pcts[i] >= span;
        printf("# in_place_l2 %ld (L2 %zu bytes): %s %s\n", pcts[i], cache, info.kernel, info.params);
        assert_string_equal(info.kernel, "gemm_f32_cpu_6x16t");
        if (!strstr(info.params, "B read in place") != !in_place)
            fail_msg("in_place_l2 %ld: \"%s\", B %s", pcts[i], info.params, in_place ? "in place" : "packed");
        gr_check_plan(ctx, &d, plan, 2, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

/* The straight narrow tile reads an untransposed fp32 B in place where it
   spans at most gemm.cpu.narrow_in_place_l2 percent of a core's
   second-level cache; beyond, the wide tile reading B in place costs less
   than the narrow one packing it and is taken. 32 x 256 x 512: 32 rows take
   the narrow 8 x 8 (the wide 5 x 32 balances them over seven panels of 5,
   padding 3), B spans 524288 bytes. A transposed B, never read in place,
   gets the same plan at either end of the field. Results right in every
   case. */
static void test_narrow_in_place_choice(void **state)
{
    (void)state;
    const size_t cache = host_l2(), span = 512 * 256 * sizeof(float);
    const long edge = (long)((span + cache / 100 - 1) / (cache / 100)); /* the least percentage that holds B */
    assert_int_equal(kiln_gemm_cpu_in_place_l2(kt_ctx, span), edge);
    const struct {
        long pct;
        kiln_transpose tb;
    } cases[] = {{0, KILN_NO_TRANS},     {edge - 1, KILN_NO_TRANS}, {edge, KILN_NO_TRANS},
                 {10000, KILN_NO_TRANS}, {0, KILN_TRANS},           {10000, KILN_TRANS}};
    char transposed[64] = "";
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].pct < 0 || cases[i].pct > 10000)
            continue;
        kiln_context *ctx = kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"mr\": 5, \"nr\": 32, \"vw\": 8, "
                                               "\"narrow_mr\": 8, \"flip_mr\": 0, \"flip_nr\": 0, \"in_place_l2\": 0, "
                                               "\"narrow_in_place_l2\": %ld, \"a_in_place\": 0}}}",
                                               cases[i].pct);
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, cases[i].tb, 32, 256, 512);
        kiln_gemm_plan_info info;
        kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
        if (!plan)
            return;
        printf("# narrow_in_place_l2 %ld%s (L2 %zu bytes): %s %s\n", cases[i].pct,
               cases[i].tb == KILN_TRANS ? ", B transposed" : "", cache, info.kernel, info.params);
        if (cases[i].tb == KILN_TRANS) {
            if (transposed[0])
                assert_string_equal(info.kernel, transposed);
            snprintf(transposed, sizeof transposed, "%s", info.kernel);
        } else {
            const int narrow = cache / 100 * (size_t)cases[i].pct >= span;
            assert_string_equal(info.kernel, narrow ? "gemm_f32_cpu_8x8" : "gemm_f32_cpu_5x32");
            if (!strstr(info.params, "B read in place"))
                fail_msg("narrow_in_place_l2 %ld: \"%s\", B should be read in place", cases[i].pct, info.params);
        }
        gr_check_plan(ctx, &d, plan, 2, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

/* The straight CPU tile's work-group order: a row panel's column panels
   first where all of B's fit half of a core's second-level cache (the
   host's for a CPU device, else 1 MiB) and there are two or more, a column
   panel's row panels first otherwise; the results right either way. The
   5 x 64 tile, B packed or read in place, one item or a batch; the last
   shape's B is one float past half the cache. */
static void test_column_panels_first(void **state)
{
    (void)state;
    const size_t cache = host_l2();
    const size_t past = cache / 2 / (256 * sizeof(float)) + 1; /* K of a 256-column B past half the cache */
    static const struct {
        size_t m, n, k, batch;
        int tb;
    } shapes[] = {
        {300, 128, 64, 1, 0}, {300, 192, 40, 1, 1}, {130, 128, 96, 3, 0}, {300, 64, 64, 1, 0}, {300, 256, 0, 1, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        kiln_context *ctx = kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"mr\": 5, \"nr\": 64, \"vw\": 16, "
                                               "\"narrow_mr\": 0, \"flip_mr\": 0, \"flip_nr\": 0}}}");
        const size_t k = shapes[i].k ? shapes[i].k : past;
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, shapes[i].tb ? KILN_TRANS : KILN_NO_TRANS, shapes[i].m,
                            shapes[i].n, k);
        d.batch = shapes[i].batch;
        d.stride_a = shapes[i].batch > 1 ? d.m * d.lda : 0;
        d.stride_b = shapes[i].batch > 1 ? (shapes[i].tb ? d.n : d.k) * d.ldb : 0;
        d.stride_c = shapes[i].batch > 1 ? d.m * d.ldc : 0;
        kiln_gemm_plan_info info;
        kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
        if (!plan)
            return;
        const int want = d.n >= 128 && d.n * d.k * sizeof(float) <= cache / 2;
        printf("# %zux%zux%zu batch %zu (L2 %zu bytes): %s %s\n", d.m, d.n, d.k, d.batch, cache, info.kernel,
               info.params);
        assert_string_equal(info.kernel, "gemm_f32_cpu_5x64");
        if (!strstr(info.params, "column panels first") != !want)
            fail_msg("%zux%zux%zu: \"%s\", wanted the %s panels first", d.m, d.n, d.k, info.params,
                     want ? "column" : "row");
        gr_check_plan(ctx, &d, plan, 2, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

/* The straight tile fetches ahead the rows of a B it reads in place exactly
   where they lie more than 128 floats apart (src/ops/gemm_cpu.c): B's
   leading dimension at the bound, past it by one, 256, and wider than its
   columns; the results right either way, the fetches past B's last row
   included. Both kinds of plan must occur. */
static void test_b_rows_fetched(void **state)
{
    (void)state;
    static const struct {
        size_t m, n, k, ldb;
    } shapes[] = {{64, 128, 300, 128}, {64, 128, 300, 129}, {64, 256, 300, 256}, {40, 128, 77, 200}};
    int fetched = 0, not_fetched = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        kiln_context *ctx = kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"mr\": 8, \"nr\": 32, \"vw\": 16, "
                                               "\"narrow_mr\": 0, \"flip_mr\": 0, \"flip_nr\": 0}}}");
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, shapes[i].m, shapes[i].n, shapes[i].k);
        d.ldb = shapes[i].ldb;
        kiln_gemm_plan_info info;
        kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
        if (!plan)
            return;
        printf("# %zux%zux%zu ldb %zu: %s %s\n", d.m, d.n, d.k, d.ldb, info.kernel, info.params);
        /* The straight tile's B read in place ("A and B" or "B"); the flipped
           tile's is the other operand's. */
        const int in_place = strstr(info.params, "B read in place") && !strstr(info.params, "flipped");
        const int want = in_place && d.ldb > 128;
        if (!strstr(info.params, "B's rows fetched") != !want)
            fail_msg("%zux%zux%zu ldb %zu: \"%s\", B's rows %s", d.m, d.n, d.k, d.ldb, info.params,
                     want ? "should be fetched ahead" : "fetched where they should not be");
        fetched += want;
        not_fetched += in_place && !want;
        gr_check_plan(ctx, &d, plan, 2, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
    if (!fetched || !not_fetched)
        fail_msg("B read in place: %d plans fetched its rows and %d did not; both kinds wanted", fetched, not_fetched);
}

/* Four CPU tiles (MR below, at and above VW; VW 16, 8, 4 and 2) with the
   gemm.cpu fields `fields`, each shape on every transpose: its plan checked
   by `check` (which returns 1 where the plan counts towards `least`, per
   tile) and its results, two scalar pairs. */
static void cpu_tile_sweep(const char *fields, const struct row *shapes, size_t count,
                           int (*check)(const struct row *, const kiln_gemm_plan_info *), int least)
{
    static const char *const tiles[] = {
        "\"mr\": 5, \"nr\": 64, \"vw\": 16", /* MR below VW, NR four vectors */
        "\"mr\": 8, \"nr\": 16, \"vw\": 8",  /* MR one vector, NR two */
        "\"mr\": 8, \"nr\": 12, \"vw\": 4",  /* MR two vectors: value by value */
        "\"mr\": 3, \"nr\": 4, \"vw\": 2",   /* no shuffles: value by value */
    };
    static const kiln_transpose trans[4][2] = {{NO, TR}, {TR, NO}, {NO, NO}, {TR, TR}};
    for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++) {
        kiln_context *ctx = kt_overlay_context(
            "{\"kernels\": {\"gemm.cpu\": {%s, \"narrow_mr\": 0, \"flip_mr\": 0, \"flip_nr\": 0, \"kc\": 0, %s}}}",
            tiles[t], fields);
        int counted = 0;
        for (size_t s = 0; s < count; s++)
            for (size_t x = 0; x < 4; x++) {
                struct row r = shapes[s];
                r.ta = trans[x][0], r.tb = trans[x][1];
                kiln_gemm_desc d = desc_of(&r, KILN_GEMM_CPU);
                kiln_gemm_plan_info info;
                kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
                if (!plan)
                    return;
                printf("# {%s} %s, A%s B%s: %s %s\n", tiles[t], r.what, r.ta == TR ? "^T" : "", r.tb == TR ? "^T" : "",
                       info.kernel, info.params);
                counted += check(&r, &info);
                struct gr_case c;
                gr_case_init(&c, ctx, &d, r.off[0], r.off[1], r.off[2], 0);
                gr_case_run(&c, plan, 2, &kt_group_seed);
                gr_case_free(&c);
                kiln_gemm_plan_destroy(plan);
            }
        kiln_context_destroy(ctx);
        if (counted < least)
            fail_msg("{%s}: %d plans of %zu as wanted, at least %d expected", tiles[t], counted, 4 * count, least);
    }
}

/* B read in place exactly where untransposed, in the shape whose columns
   fill whole panels (192). */
static int packing_check(const struct row *r, const kiln_gemm_plan_info *info)
{
    if (r->n == 192 && !strstr(info->params, "B read in place") != (r->tb == TR))
        fail_msg("%s: B %s", info->params, r->tb == TR ? "transposed, read in place" : "packed");
    return 0;
}

/* The CPU family packs an operand whose K is contiguous (A untransposed, B
   transposed; flipped, the other way round) VW values of K at a time,
   transposing blocks in registers (gemm_f32_cpu_pack_a_kv, _b_kv): a
   panel of fewer rows than VW (MR) through overlapping stores, one of a
   multiple of VW (NR, or MR = VW) a vector at a time, other widths (MR
   above VW, VW 2) value by value. Each tile on every transpose,
   with K below, past and at multiples of VW, partial panels, flipped and
   not, a batch with gaps, padding and offsets (the profile's own tile,
   16-bit storage included, in the table's rows); A is packed
   (gemm.cpu.a_in_place 0). Where C's columns fill whole panels and its
   rows are few, the straight tile reads an untransposed B in place instead
   (KILN_B_DIRECT). */
static void test_cpu_packing(void **state)
{
    (void)state;
    static const struct row shapes[] = {
        {SHAPE("k past a multiple", RM, NO, NO, 37, 70, 19)},
        {SHAPE("k below vw", RM, NO, NO, 37, 33, 3)},
        {SHAPE("k a multiple, flipped, batch", RM, NO, NO, 130, 7, 64), .batch = 3, .gap = {3, 5, 7}, .pad = {1, 2, 3},
         .off = {1, 2, 3}},
        /* Columns in whole panels of every tile, few rows: B untransposed
           is read in place (its leading dimension padded, a gap between
           its batch items, an offset). */
        {SHAPE("b in place, batch", RM, NO, NO, 37, 192, 19), .batch = 2, .gap = {1, 5, 2}, .pad = {2, 3, 1},
         .off = {3, 2, 1}},
    };
    cpu_tile_sweep("\"in_place_l2\": 0, \"a_in_place\": 0", shapes, sizeof shapes / sizeof *shapes, packing_check, 0);
}

/* A read in place wherever the tile is straight (the tile's MR, balanced
   over the row panels, never exceeds M); counts those. */
static int a_in_place_check(const struct row *r, const kiln_gemm_plan_info *info)
{
    (void)r;
    const int in_place = strstr(info->params, "A read in place") || strstr(info->params, "A and B read");
    if (!strstr(info->params, "flipped") && !in_place)
        fail_msg("%s: A packed, straight", info->params);
    return in_place;
}

/* The straight tile reads an fp32 A in place, unpacked (gemm.cpu.a_in_place
   1): A untransposed as MR rows along K, transposed as MR values side by
   side per k; the last row panel, when partial, reads the MR rows that end
   at M and stores only its own. The four tiles, every transpose, M not a
   multiple of MR, a batch with A's leading dimension padded, gaps and
   offsets, two rows; products the plan flips are run and checked too. */
static void test_a_in_place(void **state)
{
    (void)state;
    static const struct row shapes[] = {
        {SHAPE("a partial last panel", RM, NO, NO, 37, 70, 19)},
        {SHAPE("a in place, batch", RM, NO, NO, 61, 131, 40), .batch = 3, .gap = {3, 5, 7}, .pad = {5, 2, 3},
         .off = {7, 2, 3}},
        {SHAPE("two rows", RM, NO, NO, 2, 64, 33)},
    };
    /* both A layouts in two shapes at least */
    cpu_tile_sweep("\"in_place_l2\": 0, \"a_in_place\": 1", shapes, sizeof shapes / sizeof *shapes, a_in_place_check,
                   8);
}

/* The rows of a flipped tile that reads B in place (C's columns: a 1x1
   convolution's pixels) are at most gemm.cpu.flip_mr where that is set,
   else mr, balanced over their panels as mr's are: 512 x 196 x 256 with a
   tile of 5 x 16 flips (B read in place) into 5 rows (40 panels), 4 (49)
   or 7 (28) by flip_mr 0, 4 and 7; the results stay right, also with 59
   columns in 9 panels of 7 (the last reads the 7 rows that end at N).
   Its columns are gemm.cpu.flip_nr where that is set (6 x 32 at 196
   columns), and where the mr x nr tile pads less the flip takes that one
   instead (49 columns: 9 panels of 6 against 10 of 5, 54 rows against 50).
   Where B is packed (in_place_l2 0) the flipped tile keeps mr's 5. Rows
   read in place 196 floats apart are fetched 16 values of K ahead, 59
   apart not. A is
   packed (gemm.cpu.a_in_place 0), as a 1x1 convolution's kept weights
   are, so that the product flips. */
static void test_flipped_rows(void **state)
{
    (void)state;
    static const struct {
        long flip_mr, flip_nr, in_place_l2;
        size_t n;
        const char *kernel;
    } cases[] = {{0, 0, 1000, 196, "gemm_f32_cpu_5x16t"}, {4, 0, 1000, 196, "gemm_f32_cpu_4x16t"},
                 {7, 0, 1000, 196, "gemm_f32_cpu_7x16t"}, {7, 0, 1000, 59, "gemm_f32_cpu_7x16t"},
                 {7, 0, 0, 196, "gemm_f32_cpu_5x16t"},    {6, 32, 1000, 196, "gemm_f32_cpu_6x32t"},
                 {6, 32, 1000, 49, "gemm_f32_cpu_5x16t"}, {6, 32, 0, 196, "gemm_f32_cpu_5x16t"},
                 {0, 32, 1000, 196, "gemm_f32_cpu_5x32t"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_context *ctx =
            kt_overlay_context("{\"kernels\": {\"gemm.cpu\": {\"mr\": 5, \"nr\": 16, \"vw\": 8, "
                               "\"narrow_mr\": 0, \"flip_mr\": %ld, \"flip_nr\": %ld, \"in_place_l2\": %ld, "
                               "\"a_in_place\": 0}}}",
                               cases[i].flip_mr, cases[i].flip_nr, cases[i].in_place_l2);
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 512, cases[i].n, 256);
        kiln_gemm_plan_info info;
        kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
        if (!plan)
            return;
        printf("# flip_mr %ld, flip_nr %ld, in_place_l2 %ld, 512x%zux256: %s %s\n", cases[i].flip_mr, cases[i].flip_nr,
               cases[i].in_place_l2, cases[i].n, info.kernel, info.params);
        assert_string_equal(info.kernel, cases[i].kernel);
        if (!strstr(info.params, "B read in place") != !cases[i].in_place_l2)
            fail_msg("\"%s\": B %s", info.params, cases[i].in_place_l2 ? "in place" : "packed");
        /* rows read in place more than 128 floats apart are fetched ahead */
        if (!strstr(info.params, "rows fetched 16 of K ahead") != !(cases[i].in_place_l2 && cases[i].n > 128))
            fail_msg("\"%s\": rows %s", info.params, cases[i].n > 128 ? "fetched ahead" : "not fetched");
        gr_check_plan(ctx, &d, plan, 2, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

/* The flipped tile reading B in place takes its row panels gemm.cpu.kc
   values of K at a time, as many panels a work-item as a slice that long
   of their rows and their parked sums (6 x 16 floats each) fit a core's L1
   (the host's for a CPU device, else 32 KiB), in groups as even as that
   allows, where at least two fit: 130 filters by 49 pixels (9 panels of 6,
   the last partial) by K = 1500 (a last slice of 1500 % kc), batch 1 and 3
   (B and C per item, A shared, packed: gemm.cpu.a_in_place 0). kc 7 to 128
   fit all 9 panels; the next fits 5 (groups of 5 and 4), the next 5
   panels' slices but not their sums (4: groups of 3), the next 2 (groups
   of 2 and 1); one fits a single panel and kc 0 and one longer than K
   leave each panel over all of K. */
static void test_k_blocks(void **state)
{
    (void)state;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    const size_t cache = host_cache(_SC_LEVEL1_DCACHE_SIZE, (size_t)32 << 10);
#else
    const size_t cache = (size_t)32 << 10;
#endif
    /* a panel's bytes per k of its slice, and of its parked sums */
    const size_t k = 1500, panel = 6 * sizeof(float), sums = 16 * panel, panels = 9;
    const long kcs[] = {0,
                        7,
                        16,
                        128,
                        (long)((cache / 5 - sums) / panel),
                        (long)(cache / (5 * panel)),
                        (long)((cache / 2 - sums) / panel),
                        (long)((cache - sums) / panel),
                        1501};
    for (size_t i = 0; i < sizeof kcs / sizeof *kcs; i++)
        for (size_t batch = 1; batch <= 3; batch += 2) {
            kiln_context *ctx = kt_overlay_context(
                "{\"kernels\": {\"gemm.cpu\": {\"mr\": 6, \"nr\": 16, \"vw\": 8, "
                "\"narrow_mr\": 0, \"flip_mr\": 0, \"flip_nr\": 0, \"in_place_l2\": 1000, \"kc\": %ld, "
                "\"a_in_place\": 0}}}",
                kcs[i]);
            kiln_gemm_desc d;
            kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 130, 49, k);
            d.batch = batch, d.stride_a = 0, d.stride_b = k * 49, d.stride_c = 130 * 49;
            kiln_gemm_plan_info info;
            kiln_gemm_plan *plan = cpu_plan(ctx, &d, &info);
            if (!plan)
                return;
            const size_t fit = kcs[i] > 0 ? cache / ((size_t)kcs[i] * panel + sums) : 0;
            const int blocked = kcs[i] > 0 && (size_t)kcs[i] < k && fit >= 2;
            const size_t groups = blocked ? (panels + fit - 1) / fit : 1;
            char expect[64];
            snprintf(expect, sizeof expect, "%zu row panels a work-item by %ld of K", (panels + groups - 1) / groups,
                     kcs[i]);
            printf("# kc %ld, batch %zu (L1 %zu bytes): %s %s\n", kcs[i], batch, cache, info.kernel, info.params);
            assert_non_null(strstr(info.params, "B read in place"));
            if (!strstr(info.params, "row panels a work-item") != !blocked || (blocked && !strstr(info.params, expect)))
                fail_msg("kc %ld: \"%s\", %s", kcs[i], info.params, blocked ? expect : "not blocked");
            gr_check_plan(ctx, &d, plan, GR_SCALAR_PAIRS, &kt_group_seed);
            kiln_gemm_plan_destroy(plan);
            kiln_context_destroy(ctx);
        }
}

/* The small-M kernel with B as stored takes K gemm.smallm.kc rows at a time
   over as many chunks of columns as give each compute unit one work-item,
   at most gemm.smallm.chunks, and no more than
   keep the parked sums (rows of C by the work-item's columns) within 32 KiB;
   kc 0 is one chunk over all of K. Chunks of 16 columns (nc 16, vw 8): 5 x
   1000 x 100 (two blocks of rows) and 8 x 20000 x 40, whose sums cut the
   chunks to 64; the results stay right either way. The bound counts every
   work-item of a work-group (POCL keeps their private arrays on one
   stack): work-groups of 256 leave no room for even one chunk's sums, so
   kc is ignored (kiln-tune's trial of that crashed the process). */
static void test_smallm_steps(void **state)
{
    (void)state;
    const size_t units = kt_ctx->desc.compute_units ? kt_ctx->desc.compute_units : 1;
    const struct {
        size_t m, n, k;
        long chunks, kc;
        long wg;
    } cases[] = {{5, 1000, 100, 1024, 16, 1},
                 {5, 1000, 100, 3, 20, 1},
                 {5, 1000, 100, 1024, 0, 1},
                 {8, 20000, 40, 1024, 8, 1},
                 {8, 20000, 40, 1024, 8, 256}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_context *ctx = kt_overlay_context("{\"kernels\": {\"gemm.smallm\": {\"mr\": 4, \"nc\": 16, \"vw\": 8, "
                                               "\"chunks\": %ld, \"kc\": %ld, \"wg\": %ld}}}",
                                               cases[i].chunks, cases[i].kc, cases[i].wg);
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, cases[i].m, cases[i].n, cases[i].k);
        d.algo = KILN_GEMM_SMALLM;
        kiln_gemm_plan *plan = NULL;
        const kiln_status st = kiln_gemm_plan_create(ctx, &d, &plan);
        if (kt_unsupported_here(ctx, st)) {
            kiln_context_destroy(ctx);
            return;
        }
        kt_assert_status(st, KILN_SUCCESS);
        kiln_gemm_plan_info info;
        kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
        printf("# chunks %ld, kc %ld, %zux%zux%zu on %zu compute units: %s\n", cases[i].chunks, cases[i].kc, cases[i].m,
               cases[i].n, cases[i].k, units, info.params);
        char want[64] = "";
        if (cases[i].kc > 0 && cases[i].wg == 1) {
            size_t chunks = ((cases[i].n + 15) / 16 + units - 1) / units;
            if (chunks > (size_t)cases[i].chunks)
                chunks = (size_t)cases[i].chunks;
            if (cases[i].m == 8 && chunks > 64) /* 8 rows x 64 x 16 columns x 4 bytes = 32 KiB */
                chunks = 64;
            snprintf(want, sizeof want, "CHUNKS=%zu KC=%ld", chunks, cases[i].kc);
            if (!strstr(info.params, want))
                fail_msg("\"%s\": wanted %s", info.params, want);
        } else {
            assert_null(strstr(info.params, "CHUNKS"));
        }
        gr_check_plan(ctx, &d, plan, GR_SCALAR_PAIRS, &kt_group_seed);
        kiln_gemm_plan_destroy(plan);
        kiln_context_destroy(ctx);
    }
}

static void test_one_shot(void **state)
{
    (void)state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, RM, TR, NO, 63, 65, 17);
    d.dtype = KILN_F16;
    struct gr_case t;
    gr_case_init(&t, kt_ctx, &d, 1, 2, 3, 0);
    gr_case_fill(&t, 0, &kt_group_seed);
    kt_assert_status(kiln_gemm(kt_ctx, &d, 2.0f, t.buf[GR_A], 1, t.buf[GR_B], 2, 0.5f, t.buf[GR_C], 3, NULL),
                     KILN_SUCCESS);
    gr_case_check(&t, 2.0f, 0.5f);
    gr_case_fill(&t, 1, &kt_group_seed);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_gemm(kt_ctx, &d, -1.0f, t.buf[GR_A], 1, t.buf[GR_B], 2, 0.0f, t.buf[GR_C], 3, &ev),
                     KILN_SUCCESS);
    kt_wait_and_release(ev);
    gr_case_check(&t, -1.0f, 0.0f);
    gr_case_free(&t);
}

/* A and B may be one buffer (even the same elements); only C must be apart. */
static void test_a_and_b_share_a_buffer(void **state)
{
    (void)state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, RM, NO, TR, 33, 33, 17); /* A * A^T reads B = A */
    struct gr_case t;
    gr_case_init(&t, kt_ctx, &d, 0, 0, 0, 0);
    gr_case_fill(&t, 1, &kt_group_seed);
    memcpy(t.val[GR_B], t.val[GR_A], t.len[GR_A] * sizeof(float));
    kt_assert_status(kiln_gemm(kt_ctx, &d, 1.0f, t.buf[GR_A], 0, t.buf[GR_A], 0, 0.0f, t.buf[GR_C], 0, NULL),
                     KILN_SUCCESS);
    gr_upload(&t, GR_B); /* B's buffer was not used; keep it equal for the check */
    gr_case_check(&t, 1.0f, 0.0f);
    gr_case_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Bad inputs: a specific status, a detail, nothing written                 */
/* ------------------------------------------------------------------------ */

enum field {
    F_NONE,
    F_M,
    F_N,
    F_K,
    F_BATCH,
    F_LDA,
    F_LDB,
    F_LDC,
    F_STRIDE_C,
    F_LAYOUT,
    F_TA,
    F_TB,
    F_DTYPE,
    F_ALGO,
    F_MATH
};

/* A descriptor rejected by plan_create (and by kiln_gemm): the base problem
   8x6x4 (m, n, k distinct so a check of the wrong dimension shows) with up to
   two fields changed. */
static const struct bad_desc {
    const char *name;
    kiln_layout layout;
    kiln_transpose ta, tb;
    enum field f1;
    size_t v1;
    enum field f2;
    size_t v2;
} bad_descs[] = {
    {"m = 0", RM, NO, NO, F_M, 0, F_NONE, 0},
    {"n = 0", RM, NO, NO, F_N, 0, F_NONE, 0},
    {"k = 0", CM, NO, NO, F_K, 0, F_NONE, 0},
    {"batch = 0", RM, NO, NO, F_BATCH, 0, F_NONE, 0},
    {"row-major A lda < k", RM, NO, NO, F_LDA, 3, F_NONE, 0},
    {"row-major A^T lda < m", RM, TR, NO, F_LDA, 7, F_NONE, 0},
    {"col-major A lda < m", CM, NO, NO, F_LDA, 7, F_NONE, 0},
    {"col-major A^T lda < k", CM, TR, NO, F_LDA, 3, F_NONE, 0},
    {"row-major B ldb < n", RM, NO, NO, F_LDB, 5, F_NONE, 0},
    {"row-major B^T ldb < k", RM, NO, TR, F_LDB, 3, F_NONE, 0},
    {"col-major B ldb < k", CM, NO, NO, F_LDB, 3, F_NONE, 0},
    {"col-major B^T ldb < n", CM, NO, TR, F_LDB, 5, F_NONE, 0},
    {"row-major ldc < n", RM, NO, NO, F_LDC, 5, F_NONE, 0},
    {"col-major ldc < m", CM, NO, NO, F_LDC, 7, F_NONE, 0},
    {"stride_c = 0 with batch 2", RM, NO, NO, F_BATCH, 2, F_STRIDE_C, 0},
    {"C items overlap (stride_c = 1)", RM, NO, NO, F_BATCH, 2, F_STRIDE_C, 1},
    {"C items overlap (stride_c = 47 < 48)", RM, NO, NO, F_BATCH, 2, F_STRIDE_C, 47},
    {"layout = 2", RM, NO, NO, F_LAYOUT, 2, F_NONE, 0},
    {"trans_a = 2", RM, NO, NO, F_TA, 2, F_NONE, 0},
    {"trans_b = 7", RM, NO, NO, F_TB, 7, F_NONE, 0},
    {"dtype = 3", RM, NO, NO, F_DTYPE, 3, F_NONE, 0},
    {"math = 2", RM, NO, NO, F_MATH, 2, F_NONE, 0},
    {"algo = 8", RM, NO, NO, F_ALGO, 8, F_NONE, 0},
};

static void set_field(kiln_gemm_desc *d, enum field f, size_t v)
{
    switch (f) {
    case F_NONE:
        break;
    case F_M:
        d->m = v;
        break;
    case F_N:
        d->n = v;
        break;
    case F_K:
        d->k = v;
        break;
    case F_BATCH:
        d->batch = v;
        break;
    case F_LDA:
        d->lda = v;
        break;
    case F_LDB:
        d->ldb = v;
        break;
    case F_LDC:
        d->ldc = v;
        break;
    case F_STRIDE_C:
        d->stride_c = v;
        break;
    case F_LAYOUT:
        d->layout = (kiln_layout)v;
        break;
    case F_TA:
        d->trans_a = (kiln_transpose)v;
        break;
    case F_TB:
        d->trans_b = (kiln_transpose)v;
        break;
    case F_DTYPE:
        d->dtype = (kiln_dtype)v;
        break;
    case F_ALGO:
        d->algo = (kiln_gemm_algo)v;
        break;
    case F_MATH:
        d->math = (kiln_math)v;
        break;
    }
}

static kiln_buffer *poisoned_buffer(size_t floats)
{
    float *nan = malloc(floats * sizeof *nan);
    assert_non_null(nan);
    for (size_t i = 0; i < floats; i++)
        nan[i] = NAN;
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(kt_ctx, floats * sizeof(float), &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(buf, 0, floats * sizeof(float), nan), KILN_SUCCESS);
    free(nan);
    return buf;
}

static void assert_still_poisoned(const kiln_buffer *buf)
{
    size_t n = kiln_buffer_size(buf) / sizeof(float);
    uint32_t *back = malloc(n * sizeof *back);
    assert_non_null(back);
    kt_assert_status(kiln_buffer_read(buf, 0, n * sizeof *back, back), KILN_SUCCESS);
    float nan = NAN;
    uint32_t nan_bits;
    memcpy(&nan_bits, &nan, sizeof nan_bits);
    for (size_t i = 0; i < n; i++)
        if (back[i] != nan_bits)
            fail_msg("element %zu of the output was written (0x%08x)", i, back[i]);
    free(back);
}

static void test_bad_desc(void **state)
{
    const struct bad_desc *b = *state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, b->layout, b->ta, b->tb, 8, 6, 4);
    set_field(&d, b->f1, b->v1);
    set_field(&d, b->f2, b->v2);
    kiln_gemm_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &d, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    /* The one-shot call fails the same way, with buffers large enough for
       any reading of the descriptor, and leaves C alone. */
    kiln_buffer *a = poisoned_buffer(4096), *bb = poisoned_buffer(4096), *c = poisoned_buffer(4096);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_gemm(kt_ctx, &d, 1.0f, a, 0, bb, 0, 0.0f, c, 0, &ev), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    assert_still_poisoned(c);
    kiln_buffer_destroy(a), kiln_buffer_destroy(bb), kiln_buffer_destroy(c);
}

/* Execution with arguments the plan must reject. The problem is a batch of 3
   with padded leading dimensions and gaps between items, so a bounds check
   that forgets any of them lets one of the "one short" rows through. */
enum bad_exec_kind {
    X_NULL_PLAN,
    X_NULL_A,
    X_NULL_B,
    X_NULL_C,
    X_C_IS_A,
    X_C_IS_B,
    X_C_IN_A_DISJOINT,
    X_SHORT_A,
    X_SHORT_B,
    X_SHORT_C,
    X_OFFSET_A,
    X_OFFSET_B,
    X_OFFSET_C,
    X_HUGE_OFFSET_A,
    X_HUGE_OFFSET_C,
};

static const struct bad_exec {
    const char *name;
    enum bad_exec_kind kind;
    kiln_status want;
} bad_execs[] = {
    {"NULL plan", X_NULL_PLAN, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL A", X_NULL_A, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL B", X_NULL_B, KILN_ERROR_INVALID_ARGUMENT},
    {"NULL C", X_NULL_C, KILN_ERROR_INVALID_ARGUMENT},
    {"C is A's buffer", X_C_IS_A, KILN_ERROR_INVALID_ARGUMENT},
    {"C is B's buffer", X_C_IS_B, KILN_ERROR_INVALID_ARGUMENT},
    {"C in A's buffer, disjoint", X_C_IN_A_DISJOINT, KILN_ERROR_INVALID_ARGUMENT},
    {"A one element short", X_SHORT_A, KILN_ERROR_OUT_OF_BOUNDS},
    {"B one element short", X_SHORT_B, KILN_ERROR_OUT_OF_BOUNDS},
    {"C one element short", X_SHORT_C, KILN_ERROR_OUT_OF_BOUNDS},
    {"offset_a one too far", X_OFFSET_A, KILN_ERROR_OUT_OF_BOUNDS},
    {"offset_b one too far", X_OFFSET_B, KILN_ERROR_OUT_OF_BOUNDS},
    {"offset_c one too far", X_OFFSET_C, KILN_ERROR_OUT_OF_BOUNDS},
    {"offset_a = SIZE_MAX", X_HUGE_OFFSET_A, KILN_ERROR_OUT_OF_BOUNDS},
    {"offset_c = SIZE_MAX / 2", X_HUGE_OFFSET_C, KILN_ERROR_OUT_OF_BOUNDS},
};

static void test_bad_exec(void **state)
{
    const struct bad_exec *x = *state;
    static const struct row base = {SHAPE("bad", CM, TR, NO, 8, 6, 4), .batch = 3, .pad = {1, 2, 3}, .gap = {1, 2, 3}};
    /* checks common to every family */
    kiln_gemm_desc d = desc_of(&base, kt_ctx->vector_kernels ? KILN_GEMM_CPU : KILN_GEMM_TILED);
    size_t len[3] = {kiln_gemm_operand_extent(&d, GR_A), kiln_gemm_operand_extent(&d, GR_B),
                     kiln_gemm_operand_extent(&d, GR_C)};
    size_t off[3] = {0, 0, 0};
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);

    /* Exact-fit buffers, then the one thing the row gets wrong. */
    switch (x->kind) {
    case X_SHORT_A:
        len[GR_A]--;
        break;
    case X_SHORT_B:
        len[GR_B]--;
        break;
    case X_SHORT_C:
        len[GR_C]--;
        break;
    case X_OFFSET_A:
        off[GR_A] = 1;
        break;
    case X_OFFSET_B:
        off[GR_B] = 1;
        break;
    case X_OFFSET_C:
        off[GR_C] = 1;
        break;
    case X_HUGE_OFFSET_A:
        off[GR_A] = SIZE_MAX;
        break;
    case X_HUGE_OFFSET_C:
        off[GR_C] = SIZE_MAX / 2;
        break;
    case X_C_IN_A_DISJOINT:
        len[GR_A] += len[GR_C];
        break;
    default:
        break;
    }
    kiln_buffer *buf[3];
    for (int w = GR_A; w <= GR_C; w++)
        buf[w] = poisoned_buffer(len[w]);
    const kiln_buffer *a = buf[GR_A], *b = buf[GR_B];
    kiln_buffer *c = buf[GR_C];
    switch (x->kind) {
    case X_NULL_A:
        a = NULL;
        break;
    case X_NULL_B:
        b = NULL;
        break;
    case X_NULL_C:
        c = NULL;
        break;
    case X_C_IS_A:
        c = buf[GR_A];
        break;
    case X_C_IS_B:
        c = buf[GR_B];
        break;
    case X_C_IN_A_DISJOINT:
        c = buf[GR_A];
        off[GR_C] = kiln_gemm_operand_extent(&d, GR_A);
        break;
    default:
        break;
    }
    kiln_event *ev = KT_POISON_EVENT;
    kiln_gemm_plan *use = x->kind == X_NULL_PLAN ? NULL : plan;
    kt_assert_status(kiln_gemm_plan_execute(use, 1.0f, a, off[GR_A], b, off[GR_B], 0.0f, c, off[GR_C], &ev), x->want);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    if (x->kind != X_NULL_PLAN) { /* the one-shot call checks the same */
        kt_assert_status(kiln_gemm(kt_ctx, &d, 1.0f, a, off[GR_A], b, off[GR_B], 0.0f, c, off[GR_C], &ev), x->want);
        assert_ptr_equal(ev, KT_POISON_EVENT);
    }
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    for (int w = GR_A; w <= GR_C; w++) /* all NaN still: nothing ran */
        assert_still_poisoned(buf[w]);
    for (int w = GR_A; w <= GR_C; w++)
        kiln_buffer_destroy(buf[w]);
    kiln_gemm_plan_destroy(plan);
}

static void test_null_arguments(void **state)
{
    (void)state;
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, RM, NO, NO, 8, 6, 4);
    kiln_gemm_plan *plan = POISON_PLAN;
    kt_assert_status(kiln_gemm_plan_create(NULL, &d, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, NULL, &plan), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(plan, POISON_PLAN);
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &d, NULL), KILN_ERROR_INVALID_ARGUMENT);

    kiln_buffer *a = poisoned_buffer(32), *b = poisoned_buffer(24), *c = poisoned_buffer(48);
    kiln_event *ev = KT_POISON_EVENT;
    kt_assert_status(kiln_gemm(NULL, &d, 1.0f, a, 0, b, 0, 0.0f, c, 0, &ev), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_gemm(kt_ctx, NULL, 1.0f, a, 0, b, 0, 0.0f, c, 0, &ev), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(ev, KT_POISON_EVENT);
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    assert_still_poisoned(c);

    kiln_gemm_plan_info info, before;
    memset(&info, 0x3c, sizeof info);
    before = info;
    kt_assert_status(kiln_gemm_plan_describe(NULL, &info), KILN_ERROR_INVALID_ARGUMENT);
    assert_memory_equal(&info, &before, sizeof info);
    kt_assert_status(kiln_gemm_plan_create(kt_ctx, &d, &plan), KILN_SUCCESS);
    kt_assert_status(kiln_gemm_plan_describe(plan, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_event_wait(NULL), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(kiln_event_get_cl(NULL));
    kiln_gemm_plan_destroy(plan);
    kiln_gemm_plan_destroy(NULL);
    kiln_event_destroy(NULL);
    kiln_buffer_destroy(a), kiln_buffer_destroy(b), kiln_buffer_destroy(c);
}

/* Sizes whose buffer extents overflow size_t must be refused, at planning
   (INVALID_ARGUMENT) or at execution (OUT_OF_BOUNDS), never wrap around. */
static void test_overflowing_sizes(void **state)
{
    (void)state;
    static const struct {
        size_t m, n, k, lda, batch, stride_a;
    } cases[] = {
        {4, 4, 4, SIZE_MAX / 2, 1, 16},
        {4, 4, 4, 4, SIZE_MAX / 8, SIZE_MAX / 4},
        {(size_t)1 << 33, (size_t)1 << 33, 4, 4, 1, 0},
    };
    kiln_buffer *a = poisoned_buffer(64), *b = poisoned_buffer(64), *c = poisoned_buffer(64);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, RM, NO, NO, cases[i].m, cases[i].n, cases[i].k);
        d.lda = cases[i].lda;
        d.batch = cases[i].batch;
        d.stride_a = cases[i].stride_a;
        d.stride_c = d.batch > 1 ? 16 : d.stride_c;
        kiln_gemm_plan *plan = POISON_PLAN;
        kiln_status st = kiln_gemm_plan_create(kt_ctx, &d, &plan);
        if (st != KILN_SUCCESS) {
            if (st != KILN_ERROR_INVALID_ARGUMENT && st != KILN_ERROR_UNSUPPORTED && st != KILN_ERROR_OUT_OF_MEMORY)
                fail_msg("case %zu: plan_create returned %s", i, kiln_status_string(st));
            assert_true(kiln_last_error_detail()[0] != '\0');
            assert_ptr_equal(plan, POISON_PLAN);
            printf("# overflow case %zu refused by plan_create: %s\n", i, kiln_last_error_detail());
            continue;
        }
        kiln_event *ev = KT_POISON_EVENT;
        kt_assert_status(kiln_gemm_plan_execute(plan, 1.0f, a, 0, b, 0, 0.0f, c, 0, &ev), KILN_ERROR_OUT_OF_BOUNDS);
        assert_ptr_equal(ev, KT_POISON_EVENT);
        kiln_gemm_plan_destroy(plan);
    }
    kt_assert_status(kiln_context_finish(kt_ctx), KILN_SUCCESS);
    assert_still_poisoned(c);
    kiln_buffer_destroy(a), kiln_buffer_destroy(b), kiln_buffer_destroy(c);
}

/* ------------------------------------------------------------------------ */

#define ROWS (sizeof rows / sizeof *rows)
#define ALGOS 7
#define BAD_DESCS (sizeof bad_descs / sizeof *bad_descs)
#define BAD_EXECS (sizeof bad_execs / sizeof *bad_execs)

int main(void)
{
    static const kiln_gemm_algo algos[ALGOS] = {KILN_GEMM_AUTO,   KILN_GEMM_CPU, KILN_GEMM_TILED, KILN_GEMM_DIRECT,
                                                KILN_GEMM_SMALLM, KILN_GEMM_MMA, KILN_GEMM_WGMMA};
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_desc_init_is_tight));
    kt_add(&tests, cmocka_unit_test(test_clblast_runs_or_is_unsupported));
    kt_add(&tests, cmocka_unit_test(test_event_completes_the_work));
    kt_add(&tests, cmocka_unit_test(test_plan_reuse_gives_fresh_results));
    kt_add(&tests, cmocka_unit_test(test_one_shot));
    kt_add(&tests, cmocka_unit_test(test_split_k_choice));
    kt_add(&tests, cmocka_unit_test(test_in_place_choice));
    kt_add(&tests, cmocka_unit_test(test_narrow_in_place_choice));
    kt_add(&tests, cmocka_unit_test(test_column_panels_first));
    kt_add(&tests, cmocka_unit_test(test_b_rows_fetched));
    kt_add(&tests, cmocka_unit_test(test_cpu_packing));
    kt_add(&tests, cmocka_unit_test(test_a_in_place));
    kt_add(&tests, cmocka_unit_test(test_flipped_rows));
    kt_add(&tests, cmocka_unit_test(test_k_blocks));
    kt_add(&tests, cmocka_unit_test(test_smallm_steps));
    kt_add(&tests, cmocka_unit_test(test_a_and_b_share_a_buffer));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    kt_add(&tests, cmocka_unit_test(test_overflowing_sizes));
    for (size_t a = 0; a < ALGOS; a++)
        for (size_t i = 0; i < ROWS; i++) {
            /* The tensor-core families take 16-bit storage, or fp32 with TF32
               allowed. */
            if ((algos[a] == KILN_GEMM_MMA || algos[a] == KILN_GEMM_WGMMA) && rows[i].dtype == KILN_F32 &&
                rows[i].math != TF32)
                continue;
            const struct row_test rt = {&rows[i], algos[a]};
            char name[160];
            row_name(name, sizeof name, &rows[i], algos[a]);
            kt_add_copy(&tests, test_row, &rt, sizeof rt, "%s", name);
        }
    kt_add_items(&tests, "bad desc: ", test_bad_desc, bad_descs, BAD_DESCS, sizeof *bad_descs);
    kt_add_items(&tests, "bad execute: ", test_bad_exec, bad_execs, BAD_EXECS, sizeof *bad_execs);
    return kt_run("gemm", &tests);
}
