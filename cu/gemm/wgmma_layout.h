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
 * for an M- or N-major one), in chunks of 128 bytes (the swizzle's width:
 * 64 16-bit values, or 32 fp32 ones, of `size` bytes each). Chunk j holds
 * the row's bytes 128j to 128j + 127, rows 128 bytes apart; within each
 * group of 8 rows the 16-byte pieces of row r are permuted by r % 8 (the
 * 128-byte swizzle: bits 4-6 of the address XOR bits 7-9), so every tile
 * starts 1024-byte aligned. A K step is one chunk of K: KILN_WGMMA_BK(size)
 * values. fp32 operands (TF32 multiplies) are K-major only: wgmma's
 * transpose is for 16-bit types.
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

/* The K step: one swizzle row of 128 bytes, 64 16-bit values or 32 fp32. */
#define KILN_WGMMA_BK(size) (128 / (size))

/* Byte offset of stored element (r, c), of `size` bytes (2 or 4: 2^lg),
   in a tile of `rows` rows: chunk c / (128 / size), 16-byte piece
   c % (128 / size) / (16 / size), byte c % (16 / size) * size. */
KILN_WGMMA_FN int kiln_wgmma_offset(int rows, int r, int c, int size)
{
    const int lg = size >> 1;
    return (c >> (7 - lg)) * rows * 128 + r * 128 + ((((c & (127 >> lg)) >> (4 - lg)) ^ (r & 7)) << 4) +
           ((c & (15 >> lg)) << lg);
}

/* The descriptor fields of a 64 x K (A) or K x N (B) operand of one wgmma
   (K 32 bytes: 16 16-bit values, 8 fp32) at k kk of the step whose tile
   starts at byte `base`, for the warpgroup whose rows (A) begin at `first`
   (0 for B). K-major: the tile's rows are m (or n), 1024 bytes per 8 of
   them (stride byte offset); k moves the start along the swizzled rows
   (the leading byte offset is unused: 16). M- or N-major (16-bit only):
   the tile's rows are k, 1024 bytes per 8 (the stride byte offset),
   64-wide chunks of m or n 64 * 128 bytes apart (the leading byte offset);
   k moves the start by rows. */
KILN_WGMMA_FN int kiln_wgmma_desc_start(int base, int mn_major, int first, int kk, int size)
{
    return mn_major ? base + (first >> 6) * KILN_WGMMA_BK(2) * 128 + kk * 128 : base + first * 128 + kk * size;
}
KILN_WGMMA_FN int kiln_wgmma_desc_lbo(int mn_major) { return mn_major ? KILN_WGMMA_BK(2) * 128 : 16; }
KILN_WGMMA_FN int kiln_wgmma_desc_sbo(int mn_major)
{
    (void)mn_major;
    return 1024;
}

/* Accumulator i (of N / 2) of lane `lane` in warp `warp` (0-3) of a
   warpgroup's 64 x N tile (k16 and k8 alike): the m16n8 C fragment of each
   8 columns, the four warps 16 rows apart. */
KILN_WGMMA_FN int kiln_wgmma_c_row(int warp, int lane, int i) { return 16 * warp + (lane >> 2) + 8 * ((i >> 1) & 1); }
KILN_WGMMA_FN int kiln_wgmma_c_col(int lane, int i) { return 8 * (i >> 2) + 2 * (lane & 3) + (i & 1); }

#endif /* KILN_CU_WGMMA_LAYOUT_H */
