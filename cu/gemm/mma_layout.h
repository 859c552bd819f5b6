/*
 * The warp-level tiling of kiln's tensor-core GEMM on
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (gemm_f16_mma.cu):
 * where each lane's ldmatrix row address points in a 16 x 16 block of
 * shared memory, which element of a 16 x 8 C tile a lane holds in its
 * register element i, and where a block's warps sit. The kernel uses these
 * functions only, and the host model in tests/test_cuda.c runs them against
 * an emulated ldmatrix and an emulated mma that read and write registers as
 * the PTX ISA lays them out, so a mapping that disagrees with the ISA fails
 * there without a GPU.
 *
 * Plain C and CUDA C alike: functions of ints, nothing else.
 */
#ifndef KILN_CU_MMA_LAYOUT_H
#define KILN_CU_MMA_LAYOUT_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KILN_MMA_FN __device__ __forceinline__
#else
#define KILN_MMA_FN static inline
#endif

/* ldmatrix .x4 over a 16 x 16 block stored row by row: lanes 8j to 8j + 7
   give the rows of 8 x 8 matrix j. "Down first" takes the matrices in the
   order (rows 0-7, columns 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15):
   - A stored M x K (k along a row), without .trans: registers 0-3 are A's
     fragment (rows g and g + 8 by columns 2t and 2t + 8);
   - B stored K x N (n along a row), with .trans: registers 0-1 are the B
     fragment of the block's columns 0-7, registers 2-3 of columns 8-15.
   "Across first" takes (0-7, 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15):
   - A stored K x M (m along a row), with .trans: A's fragment;
   - B stored N x K (k along a row), without .trans: registers 0-1 are the
     B fragment of the block's rows 0-7 (columns of C), 2-3 of rows 8-15. */
KILN_MMA_FN int kiln_mma_ldsm_down_row(int lane) { return (lane & 7) + 8 * ((lane >> 3) & 1); }
KILN_MMA_FN int kiln_mma_ldsm_down_col(int lane) { return 8 * (lane >> 4); }
KILN_MMA_FN int kiln_mma_ldsm_across_row(int lane) { return (lane & 7) + 8 * (lane >> 4); }
KILN_MMA_FN int kiln_mma_ldsm_across_col(int lane) { return 8 * ((lane >> 3) & 1); }

/* C and D (16 x 8): elements 0-1 row g, 2-3 row g + 8; columns 2t, 2t + 1
   (g = lane / 4, t = lane % 4). */
KILN_MMA_FN int kiln_mma_c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
KILN_MMA_FN int kiln_mma_c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

/* C reused as A (attention's P V after Q K^T): the accumulators of two
   16 x 8 C tiles, columns 0-7 and 8-15 of a 16 x 16 block, are that
   block's A fragment as they stand. A's element e (register e / 2, low
   half first) is element kiln_mma_a_from_c_elem(e) of C tile
   kiln_mma_a_from_c_tile(e). */
KILN_MMA_FN int kiln_mma_a_from_c_tile(int e) { return e >> 2; }
KILN_MMA_FN int kiln_mma_a_from_c_elem(int e) { return e & 3; }

/* The block's warps: WARPS_M x WARPS_N warps, each WM x WN of C as
   (WM / 16) x (WN / 8) mma tiles; warp w at (w / WARPS_N, w % WARPS_N). */
KILN_MMA_FN int kiln_mma_warp_row(int warp, int warps_n, int wm) { return warp / warps_n * wm; }
KILN_MMA_FN int kiln_mma_warp_col(int warp, int warps_n, int wn) { return warp % warps_n * wn; }

#endif /* KILN_CU_MMA_LAYOUT_H */
