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
 * A and B are not read. Storage is
 * fp32, fp16 (KILN_F16=1) or bf16 (KILN_BF16=1); arithmetic is fp32.
 *
 * Compile options: the gemm.direct group (KILN_GEMM_DIRECT_*) plus KILN_TRANS_A,
 * KILN_TRANS_B, KILN_F16 and KILN_BF16, each 0 or 1.
 *
 * Launch: local  = (NDIMC, MDIMC, 1)
 *         global = (ceil(N / WG) * NDIMC, ceil(M / WG) * MDIMC, batch)
 * (KILN_GEMM_DIRECT_ prefixes omitted). A work-group computes a WG x WG tile
 * of C stepping K by WG; each work-item holds a (WG / MDIMC) x (WG / NDIMC)
 * register tile with vector widths VWM, VWN; KWI unrolls the K loop. Both
 * operand tiles are staged in local memory (WG x WG floats each, rows padded
 * by a vector for an operand stored along K), loaded by the work-group
 * re-shaped to MDIMC x NDIMC for A and NDIMC x MDIMC for B.
 * Edges, beta == 0 and alpha == 0 are handled as in gemm_f32_tiled.
 */
#define GEMM_KERNEL gemm_f32_direct
#define LTILE_MWG KILN_GEMM_DIRECT_WG
#define LTILE_NWG KILN_GEMM_DIRECT_WG
#define LTILE_KWG KILN_GEMM_DIRECT_WG
#define LTILE_MDIMC KILN_GEMM_DIRECT_MDIMC
#define LTILE_NDIMC KILN_GEMM_DIRECT_NDIMC
#define LTILE_KWI KILN_GEMM_DIRECT_KWI
#define LTILE_VWM KILN_GEMM_DIRECT_VWM
#define LTILE_VWN KILN_GEMM_DIRECT_VWN
#define LTILE_SA 1
#define LTILE_SB 1
#define GEMM_MDIMA KILN_GEMM_DIRECT_MDIMC
#define GEMM_NDIMB KILN_GEMM_DIRECT_NDIMC
#include "gemm/gemm_f32_tiled.cl"
