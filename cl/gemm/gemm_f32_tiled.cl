/*
 * gemm_f32_tiled: batched GEMM with work-group tiles staged through local
 * memory and a register tile per work-item (GPU style). Its body also serves
 * gemm_f32_direct (gemm_f32_direct.cl), which includes this file with the
 * direct parameters.
 *
 * ABI, in row-major terms, for batch item b = get_group_id(2):
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
 * Compile options: the gemm.tiled group's (KILN_GEMM_*) plus KILN_TRANS_A,
 * KILN_TRANS_B and KILN_F16, each 0 or 1.
 *
 * Launch: local  = (NDIMC, MDIMC, 1)
 *         global = (ceil(N / NWG) * NDIMC, ceil(M / MWG) * MDIMC, batch)
 * (KILN_GEMM_ prefixes omitted). Work-group (g0, g1) computes the MWG x NWG
 * tile of C at rows g1 * MWG, columns g0 * NWG. Work-item (tx, ty) holds an
 * MWI x NWI register tile (MWI = MWG / MDIMC, NWI = NWG / NDIMC): groups of
 * VWM consecutive rows ty * VWM + r * MDIMC * VWM and groups of VWN
 * consecutive columns tx * VWN + c * NDIMC * VWN, so neighbouring work-items
 * write neighbouring columns of C.
 *
 * K advances in steps of KWG. With SA (SB) the MWG x KWG tile of opA (KWG x
 * NWG of opB) is staged in local memory, loaded by the work-group re-shaped
 * to MDIMA x (threads / MDIMA) (NDIMB x (threads / NDIMB)) with neighbouring
 * work-items on the operand's contiguous dimension; without, the work-items
 * read the operand from global memory as they use it. Loads of A and B are
 * scalar (coalesced across work-items, correct for any ld and offset); KWI
 * unrolls the loop over one step.
 *
 * Edges: tiles that cross M or N, and the last, partial K step of any tile,
 * load with bounds checks that fill zeros (so out-of-range products add
 * 0 * 0); the whole K steps of a tile inside C load unchecked. A tile inside
 * C whose rows are vector-aligned (ldc and the start of C multiples of VWN;
 * the buffer base is aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN) stores its
 * rows as VWN-wide vectors; other tiles store element by element, masked to
 * rows < M and columns < N.
 */
#include "common/storage.h"

/* The parameters; gemm_f32_direct.cl defines them before including this. */
#ifndef GEMM_KERNEL
#define GEMM_KERNEL gemm_f32_tiled
#define GEMM_MWG KILN_GEMM_MWG
#define GEMM_NWG KILN_GEMM_NWG
#define GEMM_KWG KILN_GEMM_KWG
#define GEMM_MDIMC KILN_GEMM_MDIMC
#define GEMM_NDIMC KILN_GEMM_NDIMC
#define GEMM_MDIMA KILN_GEMM_MDIMA
#define GEMM_NDIMB KILN_GEMM_NDIMB
#define GEMM_KWI KILN_GEMM_KWI
#define GEMM_VWM KILN_GEMM_VWM
#define GEMM_VWN KILN_GEMM_VWN
#define GEMM_SA KILN_GEMM_SA
#define GEMM_SB KILN_GEMM_SB
#endif

#define GEMM_THREADS (GEMM_MDIMC * GEMM_NDIMC)
#define GEMM_MWI (GEMM_MWG / GEMM_MDIMC)
#define GEMM_NWI (GEMM_NWG / GEMM_NDIMC)
#define GEMM_KDIMA (GEMM_THREADS / GEMM_MDIMA)
#define GEMM_KDIMB (GEMM_THREADS / GEMM_NDIMB)

#if GEMM_MWG % (GEMM_MDIMC * GEMM_VWM) || GEMM_NWG % (GEMM_NDIMC * GEMM_VWN) || GEMM_KWG % GEMM_KWI ||                 \
    GEMM_MWG % GEMM_MDIMA || GEMM_NWG % GEMM_NDIMB || GEMM_THREADS % GEMM_MDIMA || GEMM_THREADS % GEMM_NDIMB ||        \
    GEMM_KWG % GEMM_KDIMA || GEMM_KWG % GEMM_KDIMB
#error "gemm parameters break the constraints listed in device_profiles/README.md"
#endif

/* Row length of the local tiles (A as [KWG][MWG], B as [KWG][NWG]). An
   operand whose contiguous dimension is K is written to local memory down a
   column; padding the rows by one vector spreads those writes over the banks
   and keeps the rows vector-aligned. */
#define GEMM_ALD (GEMM_MWG + (KILN_TRANS_A ? 0 : GEMM_VWM))
#define GEMM_BLD (GEMM_NWG + (KILN_TRANS_B ? GEMM_VWN : 0))

#if KILN_TRANS_A
#define GEMM_A_INDEX(i, k, ld) ((size_t)(k) * (ld) + (size_t)(i))
#else
#define GEMM_A_INDEX(i, k, ld) ((size_t)(i) * (ld) + (size_t)(k))
#endif
#if KILN_TRANS_B
#define GEMM_B_INDEX(k, j, ld) ((size_t)(j) * (ld) + (size_t)(k))
#else
#define GEMM_B_INDEX(k, j, ld) ((size_t)(k) * (ld) + (size_t)(j))
#endif

/* Tile row of register row mi of work-item ty, tile column of register
   column ni of work-item tx. */
#define GEMM_ROW(mi, ty) (((mi) / GEMM_VWM * GEMM_MDIMC + (ty)) * GEMM_VWM + (mi) % GEMM_VWM)
#define GEMM_COL(ni, tx) (((ni) / GEMM_VWN * GEMM_NDIMC + (tx)) * GEMM_VWN + (ni) % GEMM_VWN)

#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)

/* Copy n consecutive floats between float arrays (local, private). */
#define GEMM_COPY1(src, dst) ((dst)[0] = (src)[0])
#define GEMM_COPY2(src, dst) vstore2(vload2(0, src), 0, dst)
#define GEMM_COPY4(src, dst) vstore4(vload4(0, src), 0, dst)
#define GEMM_COPY8(src, dst) vstore8(vload8(0, src), 0, dst)
#define GEMM_COPY16(src, dst) vstore16(vload16(0, src), 0, dst)
#define GEMM_COPY(n, src, dst) GEMM_CAT(GEMM_COPY, n)(src, dst)

/* VWN-wide loads and stores of C at addresses aligned to the vector. */
#if GEMM_VWN > 1
typedef GEMM_CAT(float, GEMM_VWN) gemm_floatn;
#if KILN_F16
#define GEMM_CLOAD(p) GEMM_CAT(vloada_half, GEMM_VWN)(0, p)
#define GEMM_CSTORE(v, p) GEMM_CAT(vstorea_half, GEMM_VWN)(v, 0, p)
#else
#define GEMM_CLOAD(p) (*(__global const gemm_floatn *)(p))
#define GEMM_CSTORE(v, p) (*(__global gemm_floatn *)(p) = (v))
#endif
#endif

/* Stage the MWG x KWG tile of opA whose origin A points at into
   als[k * ALD + i]; with `guard`, elements at i >= mrem or k >= krem read as 0. */
void gemm_stage_a(__local float *als, __global const KILN_STORAGE *A, const int lda, const int mrem, const int krem,
                  const int tid, const int guard)
{
#if KILN_TRANS_A
    const int i0 = tid % GEMM_MDIMA, k0 = tid / GEMM_MDIMA;
#else
    const int k0 = tid % GEMM_KDIMA, i0 = tid / GEMM_KDIMA;
#endif
#pragma unroll
    for (int p = 0; p < GEMM_MWG / GEMM_MDIMA; p++) {
#pragma unroll
        for (int q = 0; q < GEMM_KWG / GEMM_KDIMA; q++) {
            const int i = i0 + p * GEMM_MDIMA, k = k0 + q * GEMM_KDIMA;
            als[k * GEMM_ALD + i] = (!guard || (i < mrem && k < krem)) ? KILN_LOAD(A, GEMM_A_INDEX(i, k, lda)) : 0.0f;
        }
    }
}

/* The same for the KWG x NWG tile of opB, into bls[k * BLD + j]. */
void gemm_stage_b(__local float *bls, __global const KILN_STORAGE *B, const int ldb, const int nrem, const int krem,
                  const int tid, const int guard)
{
#if KILN_TRANS_B
    const int k0 = tid % GEMM_KDIMB, j0 = tid / GEMM_KDIMB;
#else
    const int j0 = tid % GEMM_NDIMB, k0 = tid / GEMM_NDIMB;
#endif
#pragma unroll
    for (int p = 0; p < GEMM_NWG / GEMM_NDIMB; p++) {
#pragma unroll
        for (int q = 0; q < GEMM_KWG / GEMM_KDIMB; q++) {
            const int j = j0 + p * GEMM_NDIMB, k = k0 + q * GEMM_KDIMB;
            bls[k * GEMM_BLD + j] = (!guard || (j < nrem && k < krem)) ? KILN_LOAD(B, GEMM_B_INDEX(k, j, ldb)) : 0.0f;
        }
    }
}

/* One K step: acc += opA(tile rows, k0 .. k0+KWG) * opB(k0 .. k0+KWG, tile
   columns), with A and B pointing at the step's origin in each operand and
   mrem, nrem, krem the extents left from it. */
void gemm_step(float acc[GEMM_MWI][GEMM_NWI], __global const KILN_STORAGE *A, const int lda,
               __global const KILN_STORAGE *B, const int ldb, const int mrem, const int nrem, const int krem,
               __local float *als, __local float *bls, const int tx, const int ty, const int guard)
{
#if GEMM_SA
    gemm_stage_a(als, A, lda, mrem, krem, ty * GEMM_NDIMC + tx, guard);
#endif
#if GEMM_SB
    gemm_stage_b(bls, B, ldb, nrem, krem, ty * GEMM_NDIMC + tx, guard);
#endif
#if GEMM_SA || GEMM_SB
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
    for (int kb = 0; kb < GEMM_KWG; kb += GEMM_KWI) {
#pragma unroll
        for (int kw = 0; kw < GEMM_KWI; kw++) {
            const int k = kb + kw;
            float apm[GEMM_MWI], bpm[GEMM_NWI];
#if GEMM_SA
#pragma unroll
            for (int mv = 0; mv < GEMM_MWI / GEMM_VWM; mv++)
                GEMM_COPY(GEMM_VWM, als + k * GEMM_ALD + (mv * GEMM_MDIMC + ty) * GEMM_VWM, apm + mv * GEMM_VWM);
#else
#pragma unroll
            for (int mi = 0; mi < GEMM_MWI; mi++) {
                const int i = GEMM_ROW(mi, ty);
                apm[mi] = (!guard || (i < mrem && k < krem)) ? KILN_LOAD(A, GEMM_A_INDEX(i, k, lda)) : 0.0f;
            }
#endif
#if GEMM_SB
#pragma unroll
            for (int nv = 0; nv < GEMM_NWI / GEMM_VWN; nv++)
                GEMM_COPY(GEMM_VWN, bls + k * GEMM_BLD + (nv * GEMM_NDIMC + tx) * GEMM_VWN, bpm + nv * GEMM_VWN);
#else
#pragma unroll
            for (int ni = 0; ni < GEMM_NWI; ni++) {
                const int j = GEMM_COL(ni, tx);
                bpm[ni] = (!guard || (j < nrem && k < krem)) ? KILN_LOAD(B, GEMM_B_INDEX(k, j, ldb)) : 0.0f;
            }
#endif
#pragma unroll
            for (int mi = 0; mi < GEMM_MWI; mi++)
#pragma unroll
                for (int ni = 0; ni < GEMM_NWI; ni++)
                    acc[mi][ni] += apm[mi] * bpm[ni];
        }
    }
#if GEMM_SA || GEMM_SB
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
}

/* C = alpha * acc + beta * C over the tile C points at (beta == 0: C is not
   read). `vec`: the tile is inside C and its rows are vector-aligned, so move
   VWN-wide vectors; otherwise elements, only those at rows < mrem and
   columns < nrem. */
void gemm_store(float acc[GEMM_MWI][GEMM_NWI], __global KILN_STORAGE *C, const int ldc, const int mrem, const int nrem,
                const float alpha, const float beta, const int tx, const int ty, const int vec)
{
#pragma unroll
    for (int mi = 0; mi < GEMM_MWI; mi++) {
        const int i = GEMM_ROW(mi, ty);
        if (i >= mrem)
            break;
        __global KILN_STORAGE *row = C + (size_t)i * ldc;
#pragma unroll
        for (int nv = 0; nv < GEMM_NWI / GEMM_VWN; nv++) {
            const int j = (nv * GEMM_NDIMC + tx) * GEMM_VWN;
#if GEMM_VWN > 1
            if (vec) {
                gemm_floatn r = alpha * GEMM_CAT(vload, GEMM_VWN)(0, &acc[mi][nv * GEMM_VWN]);
                if (beta != 0.0f)
                    r += beta * GEMM_CLOAD(row + j);
                GEMM_CSTORE(r, row + j);
                continue;
            }
#endif
#pragma unroll
            for (int w = 0; w < GEMM_VWN; w++) {
                if (j + w >= nrem)
                    break;
                float r = alpha * acc[mi][nv * GEMM_VWN + w];
                if (beta != 0.0f)
                    r += beta * KILN_LOAD(row, j + w);
                KILN_STORE(r, row, j + w);
            }
        }
    }
}

/* The signature keeps one line per operand. */
/* clang-format off */
__kernel __attribute__((reqd_work_group_size(GEMM_NDIMC, GEMM_MDIMC, 1)))
void GEMM_KERNEL(const int M, const int N, const int K, const float alpha, const float beta,
                 __global const KILN_STORAGE *A, const ulong off_a, const int lda, const ulong stride_a,
                 __global const KILN_STORAGE *B, const ulong off_b, const int ldb, const ulong stride_b,
                 __global KILN_STORAGE *C, const ulong off_c, const int ldc, const ulong stride_c)
/* clang-format on */
{
    /* Local tiles of one element when not staged, so every path passes them. */
    __local float als[GEMM_SA ? GEMM_KWG * GEMM_ALD : 1];
    __local float bls[GEMM_SB ? GEMM_KWG * GEMM_BLD : 1];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int m0 = get_group_id(1) * GEMM_MWG, n0 = get_group_id(0) * GEMM_NWG;
    const int mrem = M - m0, nrem = N - n0;
    const ulong batch = get_group_id(2);
    A += off_a + batch * stride_a;
    B += off_b + batch * stride_b;
    C += off_c + batch * stride_c;

    float acc[GEMM_MWI][GEMM_NWI];
#pragma unroll
    for (int mi = 0; mi < GEMM_MWI; mi++)
#pragma unroll
        for (int ni = 0; ni < GEMM_NWI; ni++)
            acc[mi][ni] = 0.0f;

    /* Whole K steps unchecked when the tile is inside C; then, checked, the
       partial K step or, in an edge tile, every step. No step at all with
       alpha == 0. */
    const int edge = mrem < GEMM_MWG || nrem < GEMM_NWG;
    int k0 = alpha == 0.0f ? K : 0;
    if (!edge)
        for (; K - k0 >= GEMM_KWG; k0 += GEMM_KWG)
            gemm_step(acc, A + GEMM_A_INDEX(m0, k0, lda), lda, B + GEMM_B_INDEX(k0, n0, ldb), ldb, mrem, nrem, K - k0,
                      als, bls, tx, ty, 0);
    for (; k0 < K; k0 += GEMM_KWG)
        gemm_step(acc, A + GEMM_A_INDEX(m0, k0, lda), lda, B + GEMM_B_INDEX(k0, n0, ldb), ldb, mrem, nrem, K - k0, als,
                  bls, tx, ty, 1);

    C += (size_t)m0 * ldc + n0;
    gemm_store(acc, C, ldc, mrem, nrem, alpha, beta, tx, ty,
               !edge && ldc % GEMM_VWN == 0 && (off_c + batch * stride_c) % GEMM_VWN == 0);
}
