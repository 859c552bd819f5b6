/*
 * The warp-level tiling of kiln's tensor-core GEMM on
 * mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: which element of a
 * 16 x 16 A tile, a 16 x 8 B tile and a 16 x 8 C tile lane `lane` (0..31)
 * holds in its register element i (A: 8 halves, B: 4 halves, C: 4 floats).
 * The kernel (gemm_f16_mma.cu) loads and stores its fragments through these
 * functions only, and the host model in tests/test_cuda_mma.c runs them
 * against an emulated mma that reads registers as the PTX ISA lays them out,
 * so a mapping that disagrees with the ISA fails there without a GPU.
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

/* A (16 x 16, row-major): elements 0-1 row g, 2-3 row g + 8, 4-5 row g,
   6-7 row g + 8; columns 2t, 2t + 1, plus 8 for elements 4-7 (g = lane / 4,
   t = lane % 4). */
KILN_MMA_FN int kiln_mma_a_row(int lane, int i) { return (lane >> 2) + 8 * ((i >> 1) & 1); }
KILN_MMA_FN int kiln_mma_a_col(int lane, int i) { return (lane & 3) * 2 + (i & 1) + 8 * (i >> 2); }

/* B (16 x 8, "col": k down, n across): rows (k) 2t, 2t + 1, plus 8 for
   elements 2-3; column (n) g. */
KILN_MMA_FN int kiln_mma_b_row(int lane, int i) { return (lane & 3) * 2 + (i & 1) + 8 * (i >> 1); }
KILN_MMA_FN int kiln_mma_b_col(int lane, int i) { return (lane >> 2) + 0 * i; }

/* C and D (16 x 8): elements 0-1 row g, 2-3 row g + 8; columns 2t, 2t + 1. */
KILN_MMA_FN int kiln_mma_c_row(int lane, int i) { return (lane >> 2) + 8 * (i >> 1); }
KILN_MMA_FN int kiln_mma_c_col(int lane, int i) { return (lane & 3) * 2 + (i & 1); }

/* The block's warps: WARPS_M x WARPS_N warps, each WM x WN of C as
   (WM / 16) x (WN / 8) mma tiles; warp w at (w / WARPS_N, w % WARPS_N). */
KILN_MMA_FN int kiln_mma_warp_row(int warp, int warps_n, int wm) { return warp / warps_n * wm; }
KILN_MMA_FN int kiln_mma_warp_col(int warp, int warps_n, int wn) { return warp % warps_n * wn; }

#endif /* KILN_CU_MMA_LAYOUT_H */
