/*
 * The shared-memory layout and register mapping of kiln's Hopper GEMM on
 * wgmma.mma_async (gemm_f16_wgmma.cu): where a stored tile's elements go in
 * shared memory, the matrix descriptors wgmma reads them through, and which
 * element of C a lane holds in its accumulator i. The kernel uses these
 * functions only, and the host model in tests/test_cuda.c reads the tiles
 * back through the PTX ISA's canonical layouts of those descriptors and
 * multiplies them as wgmma would, so a layout that disagrees with the ISA
 * fails there without a GPU.
 *
 * A tile is copied as stored: ROWS rows of the operand's contiguous
 * dimension (k for a K-major operand: A not transposed, B transposed; m or n
 * for an M- or N-major one), in chunks of 64 16-bit values (128 bytes, the
 * swizzle's width). Chunk j holds columns 64j to 64j + 63 of every row, rows
 * 128 bytes apart; within each group of 8 rows the 16-byte pieces of row r
 * are permuted by r % 8 (the 128-byte swizzle: bits 4-6 of the address
 * XOR bits 7-9), so every tile starts 1024-byte aligned.
 *
 * Plain C and CUDA C alike: functions of ints, nothing else.
 */
#ifndef KILN_CU_WGMMA_LAYOUT_H
#define KILN_CU_WGMMA_LAYOUT_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_WGMMA_FN __device__ __forceinline__
#else
#define KILN_WGMMA_FN static inline
#endif

/* The K step: 64 16-bit values, one swizzle row. */
#define KILN_WGMMA_BK 64

/* Byte offset of stored element (r, c) in a tile of `rows` rows. */
KILN_WGMMA_FN int kiln_wgmma_offset(int rows, int r, int c)
{
    return (c >> 6) * rows * 128 + r * 128 + ((((c & 63) >> 3) ^ (r & 7)) << 4) + ((c & 7) << 1);
}

/* The descriptor fields of a 64 x 16 (A) or 16 x N (B) operand of k step kk
   (0, 16, 32 or 48) whose tile starts at byte `base`, for the warpgroup
   whose rows (A) begin at `first` (0 for B). K-major: the tile's rows are
   m (or n), 1024 bytes per 8 of them (stride byte offset); a k step moves
   the start 32 bytes along the swizzled rows (the leading byte offset is
   unused: 16). M- or N-major: the tile's rows are k, 1024 bytes per 8 (the
   stride byte offset), 64-wide chunks of m or n 64 * 128 bytes apart (the
   leading byte offset); a k step moves the start 16 rows. */
KILN_WGMMA_FN int kiln_wgmma_desc_start(int base, int mn_major, int first, int kk)
{
    return mn_major ? base + (first >> 6) * KILN_WGMMA_BK * 128 + kk * 128 : base + first * 128 + kk * 2;
}
KILN_WGMMA_FN int kiln_wgmma_desc_lbo(int mn_major) { return mn_major ? KILN_WGMMA_BK * 128 : 16; }
KILN_WGMMA_FN int kiln_wgmma_desc_sbo(int mn_major)
{
    (void)mn_major;
    return 1024;
}

/* Accumulator i (of N / 2) of lane `lane` in warp `warp` (0-3) of a
   warpgroup's 64 x N tile: the m16n8 C fragment of each 8 columns, the
   four warps 16 rows apart. */
KILN_WGMMA_FN int kiln_wgmma_c_row(int warp, int lane, int i) { return 16 * warp + (lane >> 2) + 8 * ((i >> 1) & 1); }
KILN_WGMMA_FN int kiln_wgmma_c_col(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }

#endif /* KILN_CU_WGMMA_LAYOUT_H */
