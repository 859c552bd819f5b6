/*
 * The warp-level tiling of kiln's tensor-core GEMM on
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32, and on
 * mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 for fp32 storage
 * (gemm_f16_mma.cu): where each lane's ldmatrix row address points in a
 * block of 16 rows of 32 bytes of shared memory, which element of A and B a
 * lane holds in each tf32 register where the kernel loads them one by one,
 * which element of a 16 x 8 C tile a lane holds in its register element i,
 * and where a block's warps sit. The kernel uses these functions only, and
 * the host model in tests/test_cuda.c runs them against an emulated
 * ldmatrix and an emulated mma that read and write registers as the PTX ISA
 * lays them out, so a mapping that disagrees with the ISA fails there
 * without a GPU.
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

/* ldmatrix .x4 over a block of 16 rows of 32 bytes (16 x 16 16-bit values,
   or 16 x 8 fp32 ones) stored row by row: lanes 8j to 8j + 7 give the rows
   of 8 x 8 matrix j of 16-bit values (8 rows of 16 bytes). Columns count
   values of the stored type, `chunk` of them in 16 bytes (8 for 16-bit
   values, 4 for fp32). "Down first" takes the matrices in the order (rows
   0-7, bytes 0-15), (8-15, 0-15), (0-7, 16-31), (8-15, 16-31):
   - A stored M x K (k along a row), without .trans: registers 0-3 are A's
     fragment (16-bit: rows g and g + 8 by columns 2t and 2t + 8; tf32,
     each fp32 value a pair of 16-bit ones: (g, t), (g + 8, t), (g, t + 4),
     (g + 8, t + 4), the m16n8k8 fragment);
   - B stored K x N (n along a row), with .trans, 16-bit only: registers 0-1
     are the B fragment of the block's columns 0-7, registers 2-3 of
     columns 8-15.
   "Across first" takes (0-7, 0-15), (0-7, 16-31), (8-15, 0-15), (8-15,
   16-31):
   - A stored K x M (m along a row), with .trans, 16-bit only: A's fragment;
   - B stored N x K (k along a row), without .trans: registers 0-1 are the
     B fragment of the block's rows 0-7 (columns of C), 2-3 of rows 8-15
     (tf32: k = t and t + 4 of n = g).
   ldmatrix moves 16-bit values, so fp32 operands stored with m or n along
   a row are read one value a register (kiln_mma_tf32_*). */
KILN_MMA_FN int kiln_mma_ldsm_down_row(int lane) { return (lane & 7) + 8 * ((lane >> 3) & 1); }
KILN_MMA_FN int kiln_mma_ldsm_down_col(int lane, int chunk) { return chunk * (lane >> 4); }
KILN_MMA_FN int kiln_mma_ldsm_across_row(int lane) { return (lane & 7) + 8 * (lane >> 4); }
KILN_MMA_FN int kiln_mma_ldsm_across_col(int lane, int chunk) { return chunk * ((lane >> 3) & 1); }

/* The m16n8k8 tf32 fragments, element by element: A's register i (of 4)
   holds (row, k) = (g + 8 (i % 2), t + 4 (i / 2)); B's register i (of 2)
   holds (k, column) = (t + 4 i, g) (g = lane / 4, t = lane % 4). */
KILN_MMA_FN int kiln_mma_tf32_a_row(int lane, int i) { return (lane >> 2) + 8 * (i & 1); }
KILN_MMA_FN int kiln_mma_tf32_a_k(int lane, int i) { return (lane & 3) + 4 * (i >> 1); }
KILN_MMA_FN int kiln_mma_tf32_b_k(int lane, int i) { return (lane & 3) + 4 * i; }
KILN_MMA_FN int kiln_mma_tf32_b_col(int lane) { return lane >> 2; }

/* C and D (16 x 8, m16n8k16's and m16n8k8's alike): elements 0-1 row g,
   2-3 row g + 8; columns 2t, 2t + 1 (g = lane / 4, t = lane % 4). */
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
