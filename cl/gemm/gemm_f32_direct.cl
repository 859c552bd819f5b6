/*
 * gemm_f32_direct: batched GEMM for small problems, with small square tiles.
 * The ABI is gemm_f32_tiled's (gemm_f32_tiled.cl, whose body this kernel is):
 *
 * ABI, in row-major terms, for batch item b = KILN_GROUP_ID(2):
 *   C(i,j) = alpha * sum_k opA(i,k) * opB(k,j) + beta * C(i,j),  i < M, j < N
 *   opA(i,k) = KILN_TRANS_A ? A[k*lda + i] : A[i*lda + k]
 *   opB(k,j) = KILN_TRANS_B ? B[j*ldb + k] : B[k*ldb + j]
 *   C(i,j)   = C[i*ldc + j]
 * where every index is offset by off_x + b * stride_x (a stride of 0 shares
 * the operand between batch items). Any M, N, K >= 1, no padding of the
 * operands; with beta == 0, C is written but never read, and with alpha == 0,
 * A and B are not read. Storage is fp32, or fp16 with KILN_F16=1; arithmetic
 * is fp32.
 *
 * Compile options: kiln_profile_defines(profile, "gemm") plus KILN_TRANS_A,
 * KILN_TRANS_B and KILN_F16, each 0 or 1.
 *
 * Launch: local  = (NDIMCD, MDIMCD, 1)
 *         global = (ceil(N / WGD) * NDIMCD, ceil(M / WGD) * MDIMCD, batch)
 * (KILN_GEMM_ prefixes omitted). A work-group computes a WGD x WGD tile of C
 * stepping K by WGD; each work-item holds a (WGD / MDIMCD) x (WGD / NDIMCD)
 * register tile with vector widths VWMD, VWND; KWID unrolls the K loop. Both
 * operand tiles are staged in local memory (WGD x WGD floats each, rows
 * padded by a vector for an operand stored along K), loaded by the
 * work-group re-shaped to MDIMCD x NDIMCD for A and NDIMCD x MDIMCD for B.
 * Edges, beta == 0 and alpha == 0 are handled as in gemm_f32_tiled.
 */
#define GEMM_KERNEL gemm_f32_direct
#define LTILE_MWG KILN_GEMM_WGD
#define LTILE_NWG KILN_GEMM_WGD
#define LTILE_KWG KILN_GEMM_WGD
#define LTILE_MDIMC KILN_GEMM_MDIMCD
#define LTILE_NDIMC KILN_GEMM_NDIMCD
#define LTILE_KWI KILN_GEMM_KWID
#define LTILE_VWM KILN_GEMM_VWMD
#define LTILE_VWN KILN_GEMM_VWND
#define LTILE_SA 1
#define LTILE_SB 1
#define GEMM_MDIMA KILN_GEMM_MDIMCD
#define GEMM_NDIMB KILN_GEMM_NDIMCD
#include "gemm/gemm_f32_tiled.cl"
