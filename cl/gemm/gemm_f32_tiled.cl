/*
 * gemm_f32_tiled: batched GEMM with work-group tiles staged through local
 * memory and a register tile per work-item (GPU style). Its body also serves
 * gemm_f32_direct (gemm_f32_direct.cl), which includes this file with the
 * direct parameters.
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
 * Compile options: the gemm.tiled group's (KILN_GEMM_*) plus KILN_TRANS_A,
 * KILN_TRANS_B, KILN_F16 and KILN_BF16, each 0 or 1.
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
 * read the operand from global memory as they use it. The register tile,
 * the local tiles' layout and the multiply over them are common/local_tile.h. Loads of A and B are
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
#include "common/portability.h"

/* The parameters: the local tile's (common/local_tile.h) and the staging
   work-group shapes. gemm_f32_direct.cl defines them before including this. */
#ifndef GEMM_KERNEL
#define GEMM_KERNEL gemm_f32_tiled
#define GEMM_SPLIT_KERNELS 1
#define LTILE_MWG KILN_GEMM_MWG
#define LTILE_NWG KILN_GEMM_NWG
#define LTILE_KWG KILN_GEMM_KWG
#define LTILE_MDIMC KILN_GEMM_MDIMC
#define LTILE_NDIMC KILN_GEMM_NDIMC
#define LTILE_KWI KILN_GEMM_KWI
#define LTILE_VWM KILN_GEMM_VWM
#define LTILE_VWN KILN_GEMM_VWN
#define LTILE_SA KILN_GEMM_SA
#define LTILE_SB KILN_GEMM_SB
#define GEMM_MDIMA KILN_GEMM_MDIMA
#define GEMM_NDIMB KILN_GEMM_NDIMB
#endif
/* An operand whose contiguous dimension is K is staged down the columns of
   its local tile. */
#define LTILE_A_ALONG_K (!KILN_TRANS_A)
#define LTILE_B_ALONG_K KILN_TRANS_B
#include "common/local_tile.h"

#define GEMM_KDIMA (LTILE_THREADS / GEMM_MDIMA)
#define GEMM_KDIMB (LTILE_THREADS / GEMM_NDIMB)

#if LTILE_MWG % GEMM_MDIMA || LTILE_NWG % GEMM_NDIMB || LTILE_THREADS % GEMM_MDIMA || LTILE_THREADS % GEMM_NDIMB ||   \
    LTILE_KWG % GEMM_KDIMA || LTILE_KWG % GEMM_KDIMB
#error "gemm parameters break the constraints listed in device_profiles/README.md"
#endif

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

/* VWN-wide loads and stores of C at addresses aligned to the vector. */
#if LTILE_VWN > 1 && KILN_VECTOR_SYNTAX
typedef CAT(float, LTILE_VWN) gemm_floatn;
#if KILN_F16
#define GEMM_CLOAD(p) CAT(vloada_half, LTILE_VWN)(0, p)
#define GEMM_CSTORE(v, p) CAT(vstorea_half, LTILE_VWN)(v, 0, p)
#elif KILN_BF16
#define GEMM_CLOAD(p) KILN_VLOADN(LTILE_VWN, p)
#define GEMM_CSTORE(v, p) KILN_VSTOREN(v, LTILE_VWN, p)
#else
#define GEMM_CLOAD(p) (*(KILN_GLOBAL const gemm_floatn *)(p))
#define GEMM_CSTORE(v, p) (*(KILN_GLOBAL gemm_floatn *)(p) = (v))
#endif
#endif

/* Stage the MWG x KWG tile of opA whose origin A points at into the local
   tile als; with `guard`, elements at i >= mrem or k >= krem read as 0. */
void gemm_stage_a(KILN_LOCAL float *als, KILN_GLOBAL const KILN_STORAGE *A, const int lda, const int mrem,
                  const int krem, const int tid, const int guard)
{
#if KILN_TRANS_A
    const int i0 = tid % GEMM_MDIMA, k0 = tid / GEMM_MDIMA;
#else
    const int k0 = tid % GEMM_KDIMA, i0 = tid / GEMM_KDIMA;
#endif
#pragma unroll
    for (int p = 0; p < LTILE_MWG / GEMM_MDIMA; p++) {
#pragma unroll
        for (int q = 0; q < LTILE_KWG / GEMM_KDIMA; q++) {
            const int i = i0 + p * GEMM_MDIMA, k = k0 + q * GEMM_KDIMA;
            als[LTILE_A_AT(i, k)] = (!guard || (i < mrem && k < krem)) ? KILN_LOAD(A, GEMM_A_INDEX(i, k, lda)) : 0.0f;
        }
    }
}

/* The same for the KWG x NWG tile of opB, into bls. */
void gemm_stage_b(KILN_LOCAL float *bls, KILN_GLOBAL const KILN_STORAGE *B, const int ldb, const int nrem,
                  const int krem, const int tid, const int guard)
{
#if KILN_TRANS_B
    const int k0 = tid % GEMM_KDIMB, j0 = tid / GEMM_KDIMB;
#else
    const int j0 = tid % GEMM_NDIMB, k0 = tid / GEMM_NDIMB;
#endif
#pragma unroll
    for (int p = 0; p < LTILE_NWG / GEMM_NDIMB; p++) {
#pragma unroll
        for (int q = 0; q < LTILE_KWG / GEMM_KDIMB; q++) {
            const int j = j0 + p * GEMM_NDIMB, k = k0 + q * GEMM_KDIMB;
            bls[LTILE_B_AT(k, j)] = (!guard || (j < nrem && k < krem)) ? KILN_LOAD(B, GEMM_B_INDEX(k, j, ldb)) : 0.0f;
        }
    }
}

/* One K step: acc += opA(tile rows, k0 .. k0+KWG) * opB(k0 .. k0+KWG, tile
   columns), with A and B pointing at the step's origin in each operand and
   mrem, nrem, krem the extents left from it. An operand not staged is read
   from memory as its fragments are used. */
void gemm_step(float acc[LTILE_MWI][LTILE_NWI], KILN_GLOBAL const KILN_STORAGE *A, const int lda,
               KILN_GLOBAL const KILN_STORAGE *B, const int ldb, const int mrem, const int nrem, const int krem,
               KILN_LOCAL float *als, KILN_LOCAL float *bls, const int tx, const int ty, const int guard)
{
#if LTILE_SA
    gemm_stage_a(als, A, lda, mrem, krem, ty * LTILE_NDIMC + tx, guard);
#define GEMM_A_FRAGMENT(a, k) ltile_a_fragment(a, als, k, ty)
#else
#define GEMM_A_FRAGMENT(a, k)                                                                                          \
    _Pragma("unroll") for (int mi = 0; mi < LTILE_MWI; mi++)                                                           \
    {                                                                                                                  \
        const int i = LTILE_ROW(mi, ty);                                                                               \
        a[mi] = (!guard || (i < mrem && (k) < krem)) ? KILN_LOAD(A, GEMM_A_INDEX(i, k, lda)) : 0.0f;                   \
    }
#endif
#if LTILE_SB
    gemm_stage_b(bls, B, ldb, nrem, krem, ty * LTILE_NDIMC + tx, guard);
#define GEMM_B_FRAGMENT(b, k) ltile_b_fragment(b, bls, k, tx)
#else
#define GEMM_B_FRAGMENT(b, k)                                                                                          \
    _Pragma("unroll") for (int ni = 0; ni < LTILE_NWI; ni++)                                                           \
    {                                                                                                                  \
        const int j = LTILE_COL(ni, tx);                                                                               \
        b[ni] = (!guard || (j < nrem && (k) < krem)) ? KILN_LOAD(B, GEMM_B_INDEX(k, j, ldb)) : 0.0f;                   \
    }
#endif
    LTILE_STEP(acc, GEMM_A_FRAGMENT, GEMM_B_FRAGMENT);
}

/* C = alpha * acc + beta * C over the tile C points at (beta == 0: C is not
   read). `vec`: the tile is inside C and its rows are vector-aligned, so move
   VWN-wide vectors; otherwise elements, only those at rows < mrem and
   columns < nrem. */
void gemm_store(float acc[LTILE_MWI][LTILE_NWI], KILN_GLOBAL KILN_STORAGE *C, const int ldc, const int mrem,
                const int nrem, const float alpha, const float beta, const int tx, const int ty, const int vec)
{
#pragma unroll
    for (int mi = 0; mi < LTILE_MWI; mi++) {
        const int i = LTILE_ROW(mi, ty);
        if (i >= mrem)
            break;
        KILN_GLOBAL KILN_STORAGE *row = C + (size_t)i * ldc;
#pragma unroll
        for (int nv = 0; nv < LTILE_NWI / LTILE_VWN; nv++) {
            const int j = (nv * LTILE_NDIMC + tx) * LTILE_VWN;
#if LTILE_VWN > 1 && KILN_VECTOR_SYNTAX
            if (vec) {
                gemm_floatn r = alpha * CAT(vload, LTILE_VWN)(0, &acc[mi][nv * LTILE_VWN]);
                if (beta != 0.0f)
                    r += beta * GEMM_CLOAD(row + j);
                GEMM_CSTORE(r, row + j);
                continue;
            }
#endif
#pragma unroll
            for (int w = 0; w < LTILE_VWN; w++) {
                if (j + w >= nrem)
                    break;
                float r = alpha * acc[mi][nv * LTILE_VWN + w];
                if (beta != 0.0f)
                    r += beta * KILN_LOAD(row, j + w);
                KILN_STORE(r, row, j + w);
            }
        }
    }
}

/* acc = opA(tile rows, 0 .. K) * opB(0 .. K, tile columns) for the tile at
   (m0, n0) of a product whose A and B point at k = 0: whole K steps
   unchecked when the tile is inside C (not `edge`); then, checked, the
   partial K step or, in an edge tile, every step. */
void gemm_tile(float acc[LTILE_MWI][LTILE_NWI], KILN_GLOBAL const KILN_STORAGE *A, const int lda,
               KILN_GLOBAL const KILN_STORAGE *B, const int ldb, const int m0, const int n0, const int mrem,
               const int nrem, const int K, const int edge, KILN_LOCAL float *als, KILN_LOCAL float *bls,
               const int tx, const int ty)
{
    ltile_zero(acc);
    int k0 = 0;
    if (!edge)
        for (; K - k0 >= LTILE_KWG; k0 += LTILE_KWG)
            gemm_step(acc, A + GEMM_A_INDEX(m0, k0, lda), lda, B + GEMM_B_INDEX(k0, n0, ldb), ldb, mrem, nrem, K - k0,
                      als, bls, tx, ty, 0);
    for (; k0 < K; k0 += LTILE_KWG)
        gemm_step(acc, A + GEMM_A_INDEX(m0, k0, lda), lda, B + GEMM_B_INDEX(k0, n0, ldb), ldb, mrem, nrem, K - k0, als,
                  bls, tx, ty, 1);
}

/* One program holds the main kernel, or (KILN_GEMM_SPLIT=1) the split-K
   kernels: each program's local memory is then its one kernel's (a
   simulator that counts a program's local arrays together, as Oclgrind
   does, sees the same). */
#ifndef KILN_GEMM_SPLIT
#define KILN_GEMM_SPLIT 0
#endif

#if !KILN_GEMM_SPLIT
/* The signature keeps one line per operand. */
/* clang-format off */
KILN_KERNEL KILN_WORK_GROUP_SIZE(LTILE_NDIMC, LTILE_MDIMC, 1)
void GEMM_KERNEL(const int M, const int N, const int K, const float alpha, const float beta,
                 KILN_GLOBAL const KILN_STORAGE *A, const ulong off_a, const int lda, const ulong stride_a,
                 KILN_GLOBAL const KILN_STORAGE *B, const ulong off_b, const int ldb, const ulong stride_b,
                 KILN_GLOBAL KILN_STORAGE *C, const ulong off_c, const int ldc, const ulong stride_c)
/* clang-format on */
{
    /* Local tiles of one element when not staged, so every path passes them. */
    KILN_SHARED float als[LTILE_SA ? LTILE_KWG * LTILE_ALD : 1];
    KILN_SHARED float bls[LTILE_SB ? LTILE_KWG * LTILE_BLD : 1];
    const int tx = KILN_LOCAL_ID(0), ty = KILN_LOCAL_ID(1);
    const int m0 = KILN_GROUP_ID(1) * LTILE_MWG, n0 = KILN_GROUP_ID(0) * LTILE_NWG;
    const int mrem = M - m0, nrem = N - n0;
    const ulong batch = KILN_GROUP_ID(2);
    A += off_a + batch * stride_a;
    B += off_b + batch * stride_b;
    C += off_c + batch * stride_c;

    /* No step at all with alpha == 0. */
    const int edge = mrem < LTILE_MWG || nrem < LTILE_NWG;
    float acc[LTILE_MWI][LTILE_NWI];
    gemm_tile(acc, A, lda, B, ldb, m0, n0, mrem, nrem, alpha == 0.0f ? 0 : K, edge, als, bls, tx, ty);

    C += (size_t)m0 * ldc + n0;
    gemm_store(acc, C, ldc, mrem, nrem, alpha, beta, tx, ty,
               !edge && ldc % LTILE_VWN == 0 && (off_c + batch * stride_c) % LTILE_VWN == 0);
}
#endif

#if GEMM_SPLIT_KERNELS && KILN_GEMM_SPLIT
/*
 * Split K (for problems with fewer tiles than the device has compute units
 * to fill, and a long K): work-group z of the launch's third dimension
 * computes slice s = z % S of batch item z / S, the K range [s * KS,
 * min(K, (s + 1) * KS)) (KS a multiple of KWG), and writes its raw products
 * in fp32 to W[z][i][j] (M x N, tight). gemm_f32_split_reduce then adds the
 * S slices of each element in order s = 0 .. S - 1 (the same sums on every
 * run) and applies alpha and beta. With alpha == 0 the host runs the
 * reduction alone, which then reads neither W nor A and B.
 *
 * Launch: as gemm_f32_tiled with batch * S for the batch; the reduction
 * over (N, M, batch), any local size.
 */
/* clang-format off */
KILN_KERNEL KILN_WORK_GROUP_SIZE(LTILE_NDIMC, LTILE_MDIMC, 1)
void gemm_f32_tiled_split(const int M, const int N, const int K, const int KS, const int S,
                          KILN_GLOBAL const KILN_STORAGE *A, const ulong off_a, const int lda, const ulong stride_a,
                          KILN_GLOBAL const KILN_STORAGE *B, const ulong off_b, const int ldb, const ulong stride_b,
                          KILN_GLOBAL float *W)
/* clang-format on */
{
    KILN_SHARED float als[LTILE_SA ? LTILE_KWG * LTILE_ALD : 1];
    KILN_SHARED float bls[LTILE_SB ? LTILE_KWG * LTILE_BLD : 1];
    const int tx = KILN_LOCAL_ID(0), ty = KILN_LOCAL_ID(1);
    const int m0 = KILN_GROUP_ID(1) * LTILE_MWG, n0 = KILN_GROUP_ID(0) * LTILE_NWG;
    const int mrem = M - m0, nrem = N - n0;
    const int z = KILN_GROUP_ID(2), s = z % S;
    const ulong batch = (ulong)(z / S);
    const int kb = s * KS, klen = min(KS, K - kb);
    A += off_a + batch * stride_a + GEMM_A_INDEX(0, kb, lda);
    B += off_b + batch * stride_b + GEMM_B_INDEX(kb, 0, ldb);

    const int edge = mrem < LTILE_MWG || nrem < LTILE_NWG;
    float acc[LTILE_MWI][LTILE_NWI];
    gemm_tile(acc, A, lda, B, ldb, m0, n0, mrem, nrem, max(klen, 0), edge, als, bls, tx, ty);

    /* The slice's products, fp32, vectors where the rows are aligned. */
    W += (ulong)z * M * N + (size_t)m0 * N + n0;
#pragma unroll
    for (int mi = 0; mi < LTILE_MWI; mi++) {
        const int i = LTILE_ROW(mi, ty);
        if (i >= mrem)
            break;
        KILN_GLOBAL float *row = W + (size_t)i * N;
#pragma unroll
        for (int nv = 0; nv < LTILE_NWI / LTILE_VWN; nv++) {
            const int j = (nv * LTILE_NDIMC + tx) * LTILE_VWN;
#if LTILE_VWN > 1 && KILN_VECTOR_SYNTAX
            if (!edge && N % LTILE_VWN == 0) {
                CAT(vstore, LTILE_VWN)(CAT(vload, LTILE_VWN)(0, &acc[mi][nv * LTILE_VWN]), 0, row + j);
                continue;
            }
#endif
#pragma unroll
            for (int w = 0; w < LTILE_VWN; w++)
                if (j + w < nrem)
                    row[j + w] = acc[mi][nv * LTILE_VWN + w];
        }
    }
}

/* C(i, j) = alpha * sum over s of W[b * S + s][i][j] + beta * C(i, j), the
   slices in order (beta == 0: C is not read; alpha == 0: W is not). */
KILN_KERNEL void gemm_f32_split_reduce(const int M, const int N, const int S, const float alpha, const float beta,
                                       KILN_GLOBAL const float *W, KILN_GLOBAL KILN_STORAGE *C, const ulong off_c,
                                       const int ldc, const ulong stride_c)
{
    const int j = KILN_GLOBAL_ID(0), i = KILN_GLOBAL_ID(1);
    const ulong b = KILN_GLOBAL_ID(2);
    if (i >= M || j >= N)
        return;
    float sum = 0.0f;
    if (alpha != 0.0f) {
        const ulong plane = (ulong)M * N;
        W += b * S * plane + (size_t)i * N + j;
        for (int s = 0; s < S; s++)
            sum += W[s * plane];
    }
    C += off_c + b * stride_c + (size_t)i * ldc + j;
    float r = alpha * sum;
    if (beta != 0.0f)
        r += beta * KILN_LOAD(C, 0);
    KILN_STORE(r, C, 0);
}
#endif
