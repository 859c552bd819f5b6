/*
 * 2-D convolution through the public API against the plain-C reference of
 * conv_ref.h, over a table of shapes: every row runs under AUTO and every
 * algorithm that applies to it (one test per row and algorithm, named by
 * both). Every row uses the same epilogue (bias, no residual, no
 * activation), so each algorithm, layout and dtype is one build; the
 * epilogues have test_conv_epilogue.c.
 *
 * Algorithms still being written answer UNSUPPORTED "not implemented"; their
 * rows are reported as skipped.
 *
 * The tensor-core implicit GEMM (implicit-gemm-mma) has a table of its own,
 * run where the device runs it (below).
 */
#include <stdio.h>

#include "conv_cases.h"

#define D .direct = 1

/*
 * Every row runs under AUTO, IMPLICIT_GEMM and IM2COL, and under the
 * algorithms that apply to it as the library's table says (cc_applies):
 * GEMM_1X1 on 1x1 stride-1 unpadded rows, both Winograds on 3x3 stride-1
 * undilated ungrouped rows. Those build one kernel
 * per define set, shared by all rows. DIRECT builds one per shape (filter,
 * strides, dilation, width and padding are compile-time constants), about
 * 1 s under a cold POCL cache and 3 s for the 7x7 stem, so it runs on the
 * rows marked D: every row AUTO sends to it (fewer than 4 channels and
 * 8 filters per group: depthwise, the single pixel), the stems, plus one
 * row for each of asymmetric padding, uneven strides, uneven dilation, a
 * 1-wide filter, groups and a strided 1x1, and the NCHW epilogue shape
 * (cc_epilogue_shapes[0][0]), which the describe, find and constant-weights
 * tests reuse. The 7x7 stems are 16x16 because the direct NCHW build grows
 * with the width (8 s at 32x32).
 *
 * Winograd tiles: F(2x2) outputs 2x2 and F(4x4) 4x4 per tile, so outputs of
 * 5, 6, 7, 9, 13 and 17 leave partial tiles; the implicit-GEMM tile is 6
 * filters by 32 pixels here (x86-64-avx512), so k of 7, 9, 12 and 24 and odd
 * pixel counts leave partial tiles too; its gather copies whole vectors of
 * input rows at strides 1 and 2 where a run of pixels is 16 or more wide and
 * clear of the padding (the "wide" rows), and small images split the
 * filters over several work-groups (every row with fewer than 16 tiles).
 * The implicit GEMM's row variant runs every NHWC row, and the NCHW rows
 * with a stride and a filter wider than 1x1 whose images are that small
 * (3x3 stride2 pad1, the stems, the 32ch rows): tiles of 8 or 12 pixels by
 * 16 or 32 filters, which partial tiles and panels leave here too.
 */
static const struct cc_row rows[] = {
    {CONV("1x1", NCHW, 1, 16, 8, 8, 24, 1, 1)},
    {CONV("1x1", NHWC, 1, 16, 8, 8, 24, 1, 1)},
    {CONV("1x1 64ch", NCHW, 1, 64, 14, 14, 64, 1, 1)},
    {CONV("1x1 n2", NCHW, 2, 16, 7, 9, 24, 1, 1)}, /* implicit-GEMM tiles cross the image boundary */
    {CONV("1x1 64ch", NHWC, 2, 64, 7, 7, 64, 1, 1)},
    /* GEMM_1X1's flipped tile whole (8 or 7 pixels by 32 filters on the
       x86-64-avx512 profiles: 40 or 49 pixels, 96 filters), stored through
       its transpose in registers (cl/gemm/gemm_f32_cpu.cl) */
    {CONV("1x1 whole flipped tiles", NCHW, 1, 64, 8, 5, 96, 1, 1)},
    {CONV("1x1 whole flipped tiles n2", NCHW, 2, 64, 5, 8, 96, 1, 1)},
    {CONV("1x1 whole flipped tiles of 7", NCHW, 1, 64, 7, 7, 96, 1, 1)},
    {CONV("1x1 stride2", NCHW, 1, 8, 9, 9, 16, 1, 1), .sh = 2, .sw = 2},
    {CONV("1x1 stride2", NHWC, 1, 8, 9, 9, 16, 1, 1), .sh = 2, .sw = 2, D},
    {CONV("3x3 pad0", NCHW, 1, 8, 10, 10, 16, 3, 3)},
    {CONV("3x3 pad0", NHWC, 1, 8, 10, 10, 16, 3, 3)},
    {CONV("3x3 pad1", NCHW, 1, 8, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1", NHWC, 1, 8, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad2", NCHW, 1, 4, 7, 7, 8, 3, 3), PAD(2, 2, 2, 2)},
    {CONV("3x3 pad2", NHWC, 1, 4, 7, 7, 8, 3, 3), PAD(2, 2, 2, 2)},
    {CONV("3x3 pad t1b0l2r1", NCHW, 1, 5, 9, 11, 7, 3, 3), PAD(1, 0, 2, 1), D},
    {CONV("3x3 pad t1b0l2r1", NHWC, 1, 5, 9, 11, 7, 3, 3), PAD(1, 0, 2, 1)},
    {CONV("3x3 pad t0b2l0r1", NCHW, 1, 6, 8, 9, 9, 3, 3), PAD(0, 2, 0, 1)},
    {CONV("3x3 pad1 out5x7", NCHW, 1, 8, 5, 7, 8, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 out6x6", NHWC, 1, 8, 6, 6, 8, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 odd 13x17", NCHW, 1, 7, 13, 17, 9, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 odd 13x17", NHWC, 1, 7, 13, 17, 9, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 n2", NCHW, 2, 8, 9, 11, 12, 3, 3), PAD(1, 1, 1, 1), D}, /* = cc_epilogue_shapes[0][0] */
    {CONV("3x3 pad1 n3", NCHW, 3, 8, 9, 10, 12, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 n3", NHWC, 3, 8, 9, 10, 12, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 64ch", NCHW, 1, 64, 16, 16, 64, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 64ch", NHWC, 1, 64, 14, 14, 64, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 pad1 c72 k56", NCHW, 2, 72, 9, 9, 56, 3, 3), PAD(1, 1, 1, 1)},
    {CONV("3x3 stride2 pad1", NCHW, 1, 8, 15, 15, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 stride2 pad1", NHWC, 1, 8, 15, 15, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 stride1x2 pad1", NHWC, 2, 6, 9, 12, 8, 3, 3), PAD(1, 1, 1, 1), .sw = 2, D},
    {CONV("3x3 stride2 pad1 wide", NCHW, 1, 8, 9, 41, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    /* NCHW rows the implicit GEMM's row variant takes (strided, few tiles):
       tiles across the two images, partial filter panels, groups, dilation,
       16-channel blocks of the channels-last copy. */
    {CONV("3x3 stride2 pad1 32ch n2", NCHW, 2, 32, 9, 9, 40, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 stride2 groups2", NCHW, 1, 32, 7, 7, 48, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .groups = 2},
    {CONV("3x3 stride2 dilation2 pad2", NCHW, 1, 16, 13, 13, 16, 3, 3), PAD(2, 2, 2, 2), .sh = 2, .sw = 2, .dh = 2,
     .dw = 2},
    {CONV("1x1 stride2 wide", NCHW, 1, 8, 5, 40, 12, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 dilation2 pad2", NCHW, 1, 8, 13, 13, 8, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 2},
    {CONV("3x3 dilation2 pad2", NHWC, 1, 8, 13, 13, 8, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 2},
    {CONV("3x3 dilation2x3 pad0", NCHW, 1, 4, 11, 14, 6, 3, 3), .dh = 2, .dw = 3, D},
    {CONV("3x1 pad1,0", NCHW, 1, 8, 10, 9, 8, 3, 1), PAD(1, 1, 0, 0), D},
    {CONV("1x3 pad0,1", NHWC, 1, 8, 10, 9, 8, 1, 3), PAD(0, 0, 1, 1)},
    {CONV("5x5 pad2", NCHW, 1, 6, 11, 11, 8, 5, 5), PAD(2, 2, 2, 2)},
    {CONV("5x5 pad2", NHWC, 1, 6, 11, 11, 8, 5, 5), PAD(2, 2, 2, 2)},
    /* MobileNet's 3x3 stem, direct: a filter tile of 16 (amd-zen4's
       conv.direct.kt) or 8 by its rows, at a width with interior tiles. */
    {CONV("3x3 stride2 pad1 stem", NCHW, 1, 3, 15, 40, 32, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, D},
    /* The same in NHWC by implicit GEMM's row variant, whose filters of at
       most 32 values (here 27) are compiled in (src/ops/conv_igemm.c), as
       are the depthwise, 1x1 and 1x3 NHWC rows' (one tap a run where a
       group or a dilation splits a filter row). */
    {CONV("3x3 stride2 pad1 stem", NHWC, 1, 3, 15, 40, 32, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2},
    {CONV("3x3 dilation2 pad2 rgb", NHWC, 1, 3, 11, 12, 8, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 2},
    {CONV("7x7 stride2 pad3 stem", NCHW, 1, 3, 16, 16, 32, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2, D},
    {CONV("7x7 stride2 pad3 stem", NHWC, 1, 3, 16, 16, 32, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2, D},
    {CONV("3x3 groups2", NCHW, 1, 8, 10, 10, 12, 3, 3), PAD(1, 1, 1, 1), .groups = 2, D},
    {CONV("3x3 groups2", NHWC, 1, 8, 10, 10, 12, 3, 3), PAD(1, 1, 1, 1), .groups = 2},
    {CONV("3x3 groups2 32 filters each", NHWC, 1, 16, 8, 8, 64, 3, 3), PAD(1, 1, 1, 1), .groups = 2},
    {CONV("3x3 groups4", NCHW, 2, 16, 8, 9, 8, 3, 3), PAD(1, 1, 1, 1), .groups = 4},
    {CONV("3x3 groups4", NHWC, 2, 16, 8, 9, 8, 3, 3), PAD(1, 1, 1, 1), .groups = 4},
    {CONV("1x1 groups4", NCHW, 1, 16, 6, 7, 32, 1, 1), .groups = 4},
    /* Direct NHWC stages a block of filters' taps in local memory 16 KiB
       at a time (conv_direct.c's cc): these take exactly two chunks, at 16
       lanes (29 channels of 3x3 taps) and at 8 (57 channels), where POCL
       once stored no output at all (conv_f32_direct.cl). */
    {CONV("3x3 pad1 two chunks of taps at 16 lanes", NHWC, 1, 29, 6, 7, 16, 3, 3), PAD(1, 1, 1, 1), D},
    {CONV("3x3 pad1 two chunks of taps at 8 lanes", NHWC, 2, 57, 5, 6, 8, 3, 3), PAD(1, 1, 1, 1), D},
    {CONV("3x3 depthwise", NCHW, 1, 16, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, D},
    {CONV("3x3 depthwise", NHWC, 1, 16, 12, 12, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, D},
    {CONV("3x3 depthwise stride2", NCHW, 2, 32, 14, 13, 32, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .groups = 32, D},
    {CONV("5x5 depthwise x2", NHWC, 1, 8, 9, 9, 16, 5, 5), PAD(2, 2, 2, 2), .groups = 8, D},
    /* Depthwise NHWC over planes the 4 x 4 tile does not divide: 14x14 in
       two images, 7x7, and stride 2's 7x7 (the last tiles partly outside). */
    {CONV("3x3 depthwise 14x14", NHWC, 2, 32, 14, 14, 32, 3, 3), PAD(1, 1, 1, 1), .groups = 32, D},
    {CONV("3x3 depthwise 7x7", NHWC, 1, 48, 7, 7, 48, 3, 3), PAD(1, 1, 1, 1), .groups = 48, D},
    {CONV("3x3 depthwise stride2 14x14", NHWC, 1, 32, 14, 14, 32, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2,
     .groups = 32, D},
    {CONV("single pixel", NCHW, 1, 1, 1, 1, 1, 1, 1), D},
    /* Direct NCHW row tiles (cl/common/window.h) with the CPU profiles'
       vectors of 8 (16 on amd-zen4) and work-groups of 16: 128 or more
       planes of at most 16 rows make one row tile per plane, whose rows the
       kernel knows; rows narrower than a vector then load clamped into the
       plane and the plane's last row stores a vector made of its last
       rows' values. */
    {CONV("3x3 depthwise 7x7 one row tile", NCHW, 1, 128, 7, 7, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128, D},
    {CONV("3x3 depthwise stride2 14x14 one row tile", NCHW, 1, 128, 14, 14, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128, D},
    {CONV("3x3 depthwise 5x6 one row tile", NCHW, 2, 64, 5, 6, 64, 3, 3), PAD(1, 1, 1, 1), .groups = 64, D},
    {CONV("1x3 depthwise 1x3 plane under a vector", NCHW, 1, 128, 1, 3, 128, 1, 3), PAD(0, 0, 1, 1), .groups = 128, D},
    {CONV("3x3 depthwise 12x20 one row tile, last tile shifted", NCHW, 1, 128, 12, 20, 128, 3, 3), PAD(1, 1, 1, 1),
     .groups = 128, D},
    {CONV("3x3 depthwise stride2 28x28 one row tile", NCHW, 1, 128, 28, 28, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128, D},
    /* 16 output columns: the last lane's third tap is column 31, past the
       2 * VW columns from the tile's first (-1), inside the row. */
    {CONV("3x3 depthwise stride2 32x32 one row tile", NCHW, 1, 128, 32, 32, 128, 3, 3), PAD(1, 1, 1, 1), .sh = 2,
     .sw = 2, .groups = 128, D},
    {CONV("5x5 depthwise stride2 32x31 one row tile", NCHW, 1, 128, 32, 31, 128, 5, 5), PAD(2, 2, 2, 2), .sh = 2,
     .sw = 2, .groups = 128, D},
    /* A window wider than a vector's lanes past the 2 * VW loaded columns
       (11 columns, vectors of 8): the taps' further columns come from
       memory one by one. */
    {CONV("11x11 depthwise stride2 16x16 one row tile", NCHW, 1, 128, 16, 16, 128, 11, 11), PAD(5, 5, 5, 5), .sh = 2,
     .sw = 2, .groups = 128, D},
    {CONV("3x3 two filters per group 7x7 one row tile", NCHW, 1, 128, 7, 7, 256, 3, 3), PAD(1, 1, 1, 1), .groups = 128,
     D},
    {CONV("3x3 depthwise 6x6 one row tile pool", NCHW, 1, 128, 6, 6, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128, D,
     .pool = 1},
    /* Stride 2 with interior tiles: the row's 2 * VW columns loaded once
       and the window's columns shuffled out of them (3, 5 and 1 wide), and
       dilated, a load per window column. Output rows of 48, so no tile
       overlaps an interior one (an overlapping tile would rewrite its
       lanes). */
    {CONV("3x3 depthwise stride2 16x96", NCHW, 1, 8, 16, 96, 8, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .groups = 8,
     D},
    {CONV("5x5 depthwise stride2 16x96", NCHW, 1, 8, 16, 96, 8, 5, 5), PAD(2, 2, 2, 2), .sh = 2, .sw = 2, .groups = 8,
     D},
    {CONV("1x1 stride2 16x96", NCHW, 1, 8, 16, 96, 16, 1, 1), .sh = 2, .sw = 2, D},
    {CONV("3x3 depthwise stride2 dilation2 16x96", NCHW, 1, 4, 16, 96, 4, 3, 3), PAD(2, 2, 2, 2), .sh = 2, .sw = 2,
     .dh = 2, .dw = 2, .groups = 4, D},
    /* One-row and one-column depthwise filters over several row tiles. */
    {CONV("3x1 depthwise 24x20", NCHW, 1, 16, 24, 20, 16, 3, 1), PAD(1, 1, 0, 0), .groups = 16, D},
    {CONV("1x3 depthwise stride2 20x40", NCHW, 1, 16, 20, 40, 16, 1, 3), PAD(0, 0, 1, 1), .sh = 2, .sw = 2,
     .groups = 16, D},
    /* MobileNet v1's last depthwise layers. */
    {CONV("3x3 depthwise 14x14 mobilenet", NCHW, 1, 512, 14, 14, 512, 3, 3), PAD(1, 1, 1, 1), .groups = 512, D},
    {CONV("3x3 depthwise 7x7 mobilenet", NCHW, 1, 1024, 7, 7, 1024, 3, 3), PAD(1, 1, 1, 1), .groups = 1024, D},
    /* fp16 storage, fp32 arithmetic. */
    {CONV("3x3 pad1", NHWC, 1, 16, 10, 10, 16, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("3x3 pad1 64ch", NHWC, 1, 64, 10, 10, 64, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("1x1", NHWC, 2, 16, 7, 9, 24, 1, 1), .dtype = KILN_F16},
    {CONV("1x1 whole flipped tiles", NCHW, 1, 64, 8, 5, 96, 1, 1), .dtype = KILN_F16},
    {CONV("3x3 pad1 wide", NCHW, 1, 8, 6, 40, 8, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_F16},
    {CONV("3x3 stride2 pad1 wide", NCHW, 1, 8, 7, 41, 8, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .dtype = KILN_F16},
    {CONV("3x3 stride2 pad1 32ch", NCHW, 1, 32, 9, 9, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .dtype = KILN_F16},
    {CONV("3x3 depthwise", NCHW, 1, 16, 9, 11, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, .dtype = KILN_F16, D},
    {CONV("3x3 depthwise 7x7 one row tile", NCHW, 1, 128, 7, 7, 128, 3, 3), PAD(1, 1, 1, 1), .groups = 128,
     .dtype = KILN_F16, D},
    /* bf16 storage, fp32 arithmetic. */
    {CONV("3x3 pad1", NHWC, 1, 16, 10, 10, 16, 3, 3), PAD(1, 1, 1, 1), .dtype = KILN_BF16},
    {CONV("1x1", NHWC, 2, 16, 7, 9, 24, 1, 1), .dtype = KILN_BF16},
    {CONV("1x1 whole flipped tiles", NCHW, 1, 64, 8, 5, 96, 1, 1), .dtype = KILN_BF16},
    {CONV("3x3 stride2 pad1 wide", NCHW, 1, 8, 7, 41, 8, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .dtype = KILN_BF16},
    {CONV("3x3 stride2 pad1 32ch", NCHW, 1, 32, 9, 9, 16, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2, .dtype = KILN_BF16},
    {CONV("3x3 depthwise", NCHW, 1, 16, 9, 11, 16, 3, 3), PAD(1, 1, 1, 1), .groups = 16, .dtype = KILN_BF16, D},
};

/*
 * The tensor-core implicit GEMM, fp16 and bf16 NHWC (each row in both, one
 * test each), on the CUDA backend at compute capability 8.0 and newer: AUTO
 * must choose it, and its result must be within the reference's bound
 * (fp16 and bf16 products are exact in fp32, so the bound of every
 * fp32-summing algorithm holds). Its blocks are 128 pixels by 128 filters
 * in steps of 32 (64 on nvidia-hopper) of K = channels x taps, so the rows
 * leave partial pixel blocks, fewer filters than a block (and 256: two),
 * K steps that hold several taps (8 and 16 channels) or start inside one
 * (24, 40), K not a multiple of the step, an odd filter count (the kernel
 * stores pairs of filters where K is even), padding on each side, strides,
 * dilations and the epilogue's switches. Elsewhere an explicit request
 * must answer UNSUPPORTED, and the test is skipped saying why.
 */
enum mma_epilogue { MMA_BIAS, MMA_PLAIN, MMA_RESIDUAL_RELU, MMA_RESIDUAL_GELU, MMA_RESIDUAL_LEAKY };

static const struct mma_row {
    struct cc_row row;
    enum mma_epilogue epilogue;
} mma_rows[] = {
    {{CONV("3x3 pad1 128 channels, 128 filters", NHWC, 1, 128, 28, 28, 128, 3, 3), PAD(1, 1, 1, 1)}, MMA_BIAS},
    {{CONV("3x3 pad1 429 pixels, 40 filters", NHWC, 3, 24, 13, 11, 40, 3, 3), PAD(1, 1, 1, 1)}, MMA_PLAIN},
    {{CONV("3x3 stride2 pad1", NHWC, 2, 32, 15, 17, 72, 3, 3), PAD(1, 1, 1, 1), .sh = 2, .sw = 2}, MMA_RESIDUAL_RELU},
    {{CONV("1x1", NHWC, 2, 64, 7, 9, 96, 1, 1)}, MMA_PLAIN},
    {{CONV("1x1 stride2 13 filters", NHWC, 1, 16, 9, 11, 13, 1, 1), .sh = 2, .sw = 2}, MMA_RESIDUAL_LEAKY},
    {{CONV("3x3 dilation2 pad2", NHWC, 1, 16, 13, 13, 24, 3, 3), PAD(2, 2, 2, 2), .dh = 2, .dw = 2}, MMA_RESIDUAL_GELU},
    {{CONV("3x3 pad t1b0l2r1 8 channels", NHWC, 1, 8, 9, 11, 8, 3, 3), PAD(1, 0, 2, 1)}, MMA_BIAS},
    {{CONV("5x5 stride1x2 pad2 8 channels", NHWC, 2, 8, 11, 12, 20, 5, 5), PAD(2, 2, 2, 2), .sw = 2},
     MMA_RESIDUAL_RELU},
    {{CONV("3x3 pad1 256 filters", NHWC, 2, 64, 14, 14, 256, 3, 3), PAD(1, 1, 1, 1)}, MMA_BIAS},
    {{CONV("7x7 stride2 pad3 8-channel stem", NHWC, 1, 8, 16, 16, 32, 7, 7), PAD(3, 3, 3, 3), .sh = 2, .sw = 2},
     MMA_RESIDUAL_RELU},
};

static const char *const mma_epilogue_names[] = {"bias", "no bias", "bias+residual relu alpha1.5",
                                                 "bias+residual gelu alpha1.5", "residual leaky0.1 beta-0.75"};

struct mma_test {
    const struct mma_row *r;
    kiln_dtype dtype;
    char name[192];
};

static kiln_conv2d_desc mma_desc(const struct mma_test *t, kiln_conv_algo algo)
{
    kiln_conv2d_desc d = cc_desc_of(&t->r->row, algo);
    d.dtype = t->dtype;
    switch (t->r->epilogue) {
    case MMA_PLAIN:
        d.has_bias = 0;
        break;
    case MMA_RESIDUAL_RELU:
        d.alpha = 1.5f, d.beta = 0.5f, d.activation = KILN_ACT_RELU;
        break;
    case MMA_RESIDUAL_GELU:
        d.alpha = 1.5f, d.beta = 0.5f, d.activation = KILN_ACT_GELU;
        break;
    case MMA_RESIDUAL_LEAKY:
        d.has_bias = 0, d.beta = -0.75f, d.activation = KILN_ACT_LEAKY_RELU, d.leaky_slope = 0.1f;
        break;
    default:
        break;
    }
    return d;
}

static void test_mma_row(void **state)
{
    const struct mma_test *t = *state;
    kiln_conv2d_desc d = mma_desc(t, KILN_CONV_IGEMM_MMA);
    kiln_conv2d_plan *plan = NULL;
    if (kt_cuda_cc(kt_ctx) < 80) {
        kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &d, &plan), KILN_ERROR_UNSUPPORTED);
        printf("# skipped: no tensor-core convolution on this device (the CUDA backend, compute capability 8.0 on): "
               "%s\n",
               kiln_last_error_detail());
        skip();
    }
    kiln_conv2d_desc automatic = mma_desc(t, KILN_CONV_AUTO);
    kt_assert_status(kiln_conv2d_plan_create(kt_ctx, &automatic, &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    if (info.algo != KILN_CONV_IGEMM_MMA)
        fail_msg("%s: AUTO planned %s (%s), not implicit-gemm-mma", t->name, info.name, info.reason);
    kiln_conv2d_plan_destroy(plan);
    cc_run_case(kt_ctx, &d, t->name);
}

static void row_name(char *buf, size_t size, const struct cc_row *r, kiln_conv_algo algo)
{
    kiln_conv2d_desc d = cc_desc_of(r, algo);
    snprintf(buf, size, "%s %s %s n%zu c%zu %zux%zu k%zu %zux%zu s%zu,%zu p%zu,%zu,%zu,%zu d%zu,%zu g%zu %s",
             cc_algo_name(algo), r->what, r->layout == NHWC ? "nhwc" : "nchw", d.n, d.c, d.h, d.w, d.k, d.r, d.s,
             d.stride_h, d.stride_w, d.pad_top, d.pad_bottom, d.pad_left, d.pad_right, d.dilation_h, d.dilation_w,
             d.groups, kt_dtype_name(d.dtype));
}

struct row_test {
    const struct cc_row *row;
    kiln_conv_algo algo;
    char name[192];
};

static void test_row(void **state)
{
    const struct row_test *rt = *state;
    kiln_conv2d_desc d = cc_desc_of(rt->row, rt->algo);
    cc_run_case(kt_ctx, &d, rt->name);
}

int main(void)
{
    struct kt_list tests = {0};
    for (size_t a = 0; a < CC_ALGOS; a++)
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
            const kiln_conv_algo algo = cc_all_algos[a];
            kiln_conv2d_desc d = cc_desc_of(&rows[i], algo);
            if (!cc_applies(algo, &d) || (algo == KILN_CONV_DIRECT && !rows[i].direct))
                continue;
            struct row_test rt = {&rows[i], algo, ""};
            row_name(rt.name, sizeof rt.name, &rows[i], algo);
            kt_add_copy(&tests, test_row, &rt, sizeof rt, "%s", rt.name);
        }
    for (size_t i = 0; i < sizeof mma_rows / sizeof *mma_rows; i++)
        for (int dtype = KILN_F16; dtype <= KILN_BF16; dtype++) {
            struct mma_test t = {&mma_rows[i], (kiln_dtype)dtype, ""};
            struct cc_row r = mma_rows[i].row;
            r.dtype = t.dtype;
            char shape[160];
            row_name(shape, sizeof shape, &r, KILN_CONV_IGEMM_MMA);
            snprintf(t.name, sizeof t.name, "%s, %s", shape, mma_epilogue_names[mma_rows[i].epilogue]);
            kt_add_copy(&tests, test_mma_row, &t, sizeof t, "%s", t.name);
        }
    return kt_run("conv_shapes", &tests);
}
