/*
 * GEMM for OpenCL on CPUs: pack, then a register micro-tile.
 *
 * The problem arrives in row-major terms (the plan turns column-major into
 * row-major by swapping the operands): C(i,j) = alpha * sum_k opA(i,k) opB(k,j)
 * + beta * C(i,j), with opA(i,k) = A[off + i*a_ri + k*a_rk] and opB(k,j) =
 * B[off + k*b_rk + j*b_rj], which covers both transposes and any leading
 * dimension.
 *
 * 1. gemm_f32_cpu_pack_a copies opA into panels of MR rows, k-major inside a
 *    panel (Ap[panel][k][MR]); gemm_f32_cpu_pack_b copies opB into panels of
 *    NR columns (Bp[panel][k][NR]). Rows and columns past M and N are zero,
 *    so the micro-kernel never tests bounds while accumulating. An operand
 *    whose K is contiguous is packed by gemm_f32_cpu_pack_a_kv / _b_kv
 *    instead, VW values of K at a time (PACK_KV below).
 * 2. gemm_f32_cpu_micro: one work-item per MR x NR tile of C (dimension 0 runs
 *    over row panels, 1 over column panels, 2 over batch items: work-items
 *    next to each other share a B panel, which stays in L2 while the small A
 *    panels stream past; for a skinny M this reads B once). Per k it
 *    loads NR/VW vectors of B and broadcasts MR values of A into MR * NR/VW
 *    vector accumulators: with MR = 6, NR = 32, VW = 16 that is 12 of the 32
 *    AVX-512 registers, 12 FMAs per 2 vector loads and 6 broadcasts. Panels
 *    are read sequentially, so the whole K runs from cache-friendly streams.
 *    The epilogue scales by alpha, adds beta * C only when beta != 0 (C is
 *    never read otherwise) and masks the edge tiles.
 *
 * 3. KILN_TILE_FLIP 1: the host has flipped the product, C^T = opB^T opA^T,
 *    packing opB^T as the row panels and opA^T as the column panels (M and
 *    N exchanged in the micro kernel's arguments). The tile is then one of
 *    C^T, stored into C (row-major, ldc), where each of its rows is a run of
 *    MR consecutive elements of one row of C: a whole tile of 5 to 8 rows
 *    by 16-lane vectors transposed in registers and stored in runs of MR
 *    (flip_store_whole), others element by element; bias and z keep C's
 *    indexing. Where B is fp32 and untransposed, its MR
 *    consecutive columns per k are read in place instead of packed
 *    (KILN_A_DIRECT; gemm_f32_cpu_micro says how). Then KILN_TILE_RB > 1
 *    gives a work-item RB row panels (dimension 0 of the grid runs over
 *    groups of RB, the last one shorter) and takes them KC values of K at a
 *    time: the column panel's KC rows and the rows' KC-long slices stay in
 *    L1 while the panels pass, each panel's partial sums parked in private
 *    memory between slices (the host sizes RB so that the slices of a
 *    group's rows and its parked sums fit L1).
 *
 * 4. The straight tile reads an fp32 A in place the same way (KILN_A_DIRECT:
 *    1 for a transposed A, each k's rows side by side; 2 for an untransposed
 *    one, MR rows along K), and an untransposed B (KILN_B_DIRECT): with
 *    both, no packing launch runs.
 *
 * Parameters (-D): KILN_TILE_MR, KILN_TILE_NR, KILN_TILE_VW (NR % VW == 0;
 * the profile's gemm.cpu tile or its narrow one, common/register_tile.h),
 * KILN_TILE_FLIP, KILN_A_DIRECT, KILN_TILE_RB and KILN_TILE_KC (with
 * KILN_A_DIRECT 1, flipped), KILN_B_DIRECT (the straight tile's B read in
 * place: gemm_f32_cpu_micro) and KILN_B_FETCH (its rows fetched that many ahead),
 * KILN_F16 or KILN_BF16 for 16-bit storage of A, B and C.
 *
 * Fused epilogue, used when convolutions lower onto this GEMM (all off for a
 * plain GEMM): KILN_EPI_BIAS 1 adds bias[off_bias + row], 2 adds
 * bias[off_bias + column]; KILN_EPI_Z makes beta scale z (indexed like C)
 * instead of C, which is then never read; KILN_ACT applies an activation
 * (common/epilogue.h) last.
 */
#include "common/epilogue.h"
#include "common/portability.h"
/* KILN_B_FETCH: a B read in place (KILN_B_DIRECT) whose rows lie far apart
   has each k of the tile's loop fetch the row KILN_B_FETCH rows ahead into
   L1, its NR columns a 64-byte line at a time (the host's rule and
   measurements: src/ops/gemm_cpu.c). */
#if KILN_B_FETCH
#define KILN_TILE_FETCH_B(b, b_step, k)                                                                                \
    do {                                                                                                               \
        _Pragma("unroll") for (int l_ = 0; l_ < NR; l_ += 16)                                                          \
            KILN_PREFETCH_L1((b) + (size_t)((k) + KILN_B_FETCH) * (b_step) + l_);                                     \
    } while (0)
#endif
/* KILN_A_FETCH: the flipped tile's rows read in place (KILN_A_DIRECT 1,
   each k's MR rows side by side, a leading dimension apart) have each k of
   the loop fetch the rows KILN_A_FETCH values of K ahead into L1 (the
   host's rule and measurements: src/ops/gemm_cpu.c). */
#if KILN_A_FETCH
#define KILN_TILE_FETCH_A(a, a_step, k) KILN_PREFETCH_L1((a) + (size_t)((k) + KILN_A_FETCH) * (a_step))
#endif
#include "common/register_tile.h"
#include "common/tile_runs.h"

#ifndef KILN_EPI_BIAS
#define KILN_EPI_BIAS 0
#endif
#ifndef KILN_EPI_Z
#define KILN_EPI_Z 0
#endif
#ifndef KILN_TILE_FLIP
#define KILN_TILE_FLIP 0
#endif
#ifndef KILN_A_DIRECT
#define KILN_A_DIRECT 0
#endif
#ifndef KILN_B_DIRECT
#define KILN_B_DIRECT 0
#endif
#if KILN_B_FETCH && !KILN_B_DIRECT
#error "KILN_B_FETCH: only with KILN_B_DIRECT"
#endif
#if KILN_B_DIRECT && (KILN_TILE_FLIP || KILN_STORAGE_16)
#error "KILN_B_DIRECT: only the straight tile, on fp32 operands"
#endif
/* The distance between a column panel's rows of K: NR packed, B's own
   leading dimension read in place (KILN_B_DIRECT). */
#if KILN_B_DIRECT
#define B_STEP b_step
#else
#define B_STEP NR
#endif
#ifndef KILN_TILE_RB
#define KILN_TILE_RB 1
#endif
#if KILN_TILE_RB > 1 && !(KILN_A_DIRECT == 1 && KILN_TILE_FLIP)
#error "KILN_TILE_RB: only with KILN_A_DIRECT 1, flipped"
#endif
#define RB KILN_TILE_RB
#define KC KILN_TILE_KC
/* KILN_A_DIRECT: the rows of row panel `it` that another panel stores (the
   last panel, when partial, reads the MR rows that end at M). */
#define PANEL_FIRST(it) (M - (it) * MR < MR ? MR - (M - (it) * MR) : 0)
#if KILN_A_DIRECT && KILN_STORAGE_16
#error "KILN_A_DIRECT: only on fp32 operands"
#endif
/* KILN_A_DIRECT: row r of the row operand and its k, a_step apart along K
   (1: each k's rows side by side) or along the rows (2: each row's K
   contiguous). */
#if KILN_A_DIRECT == 2
#define A_STEP_K 1
#define A_STEP_ROW a_step
#else
#define A_STEP_K a_step
#define A_STEP_ROW 1
#endif

KILN_ACTIVATION_FUNCTION(VEC, activate_vec)

/* Global size (K, ceil(M/MR), batch_a): one k of one panel per work-item. */
#if KILN_WANTS(gemm_f32_cpu_pack_a)
KILN_KERNEL void gemm_f32_cpu_pack_a(const int M, const int K, KILN_GLOBAL const KILN_STORAGE *A, const ulong off_a,
                                     const ulong a_ri, const ulong a_rk, const ulong stride_a, KILN_GLOBAL float *Ap)
{
    const int k = KILN_GLOBAL_ID(0), panel = KILN_GLOBAL_ID(1), b = KILN_GLOBAL_ID(2);
    if (k >= K)
        return;
    const int row0 = panel * MR;
    const ulong src = off_a + b * stride_a + (ulong)k * a_rk;
    KILN_GLOBAL float *dst = Ap + ((size_t)b * ((M + MR - 1) / MR) + panel) * (size_t)K * MR + (size_t)k * MR;
#pragma unroll
    for (int i = 0; i < MR; i++)
        dst[i] = row0 + i < M ? KILN_LOAD(A, src + (ulong)(row0 + i) * a_ri) : 0.0f;
}
#endif

/* Global size (K, ceil(N/NR), batch_b): one k of one panel per work-item. */
#if KILN_WANTS(gemm_f32_cpu_pack_b)
KILN_KERNEL void gemm_f32_cpu_pack_b(const int N, const int K, KILN_GLOBAL const KILN_STORAGE *B, const ulong off_b,
                                     const ulong b_rk, const ulong b_rj, const ulong stride_b, KILN_GLOBAL float *Bp)
{
    const int k = KILN_GLOBAL_ID(0), panel = KILN_GLOBAL_ID(1), b = KILN_GLOBAL_ID(2);
    if (k >= K)
        return;
    const int col0 = panel * NR;
    const ulong src = off_b + b * stride_b + (ulong)k * b_rk + (ulong)col0 * b_rj;
    KILN_GLOBAL float *dst = Bp + ((size_t)b * ((N + NR - 1) / NR) + panel) * (size_t)K * NR + (size_t)k * NR;
    if (b_rj == 1 && col0 + NR <= N) { /* contiguous row segment */
#pragma unroll
        for (int v = 0; v < NV; v++)
            VSTORE(VLOAD_S(v, B + src), v, dst);
        return;
    }
#pragma unroll
    for (int j = 0; j < NR; j++)
        dst[j] = col0 + j < N ? KILN_LOAD(B, src + (ulong)j * b_rj) : 0.0f;
}
#endif

/* A square block of VW vectors transposed in registers, in log2(VW) rounds:
   round T exchanges bit T of the row (the vector) with bit T of the lane,
   one two-vector shuffle per vector (KV_LO for the row whose bit T is 0,
   KV_HI for its partner). VW 4, 8 or 16; KV_SHUFFLES 0 for other widths. */
#define KV_LO(c, t) ((((c) >> (t)) & 1) ? VW + ((c) ^ (1 << (t))) : (c))
#define KV_HI(c, t) ((((c) >> (t)) & 1) ? VW + (c) : ((c) | (1 << (t))))
#if VW == 16
#define KV_SHUFFLES 1
#define KV_SHUF(a, b, F, t)                                                                                            \
    __builtin_shufflevector(a, b, F(0, t), F(1, t), F(2, t), F(3, t), F(4, t), F(5, t), F(6, t), F(7, t), F(8, t),     \
                            F(9, t), F(10, t), F(11, t), F(12, t), F(13, t), F(14, t), F(15, t))
#elif VW == 8
#define KV_SHUFFLES 1
#define KV_SHUF(a, b, F, t) __builtin_shufflevector(a, b, F(0, t), F(1, t), F(2, t), F(3, t), F(4, t), F(5, t), F(6, t), F(7, t))
#elif VW == 4
#define KV_SHUFFLES 1
#define KV_SHUF(a, b, F, t) __builtin_shufflevector(a, b, F(0, t), F(1, t), F(2, t), F(3, t))
#else
#define KV_SHUFFLES 0
#endif

#if KV_SHUFFLES
#define KV_ROUND(x, t)                                                                                                 \
    _Pragma("unroll") for (int r_ = 0; r_ < VW; r_++) if (!(r_ & (1 << (t))))                                          \
    {                                                                                                                  \
        const VEC a_ = x[r_], b_ = x[r_ | (1 << (t))];                                                                 \
        x[r_] = KV_SHUF(a_, b_, KV_LO, t);                                                                             \
        x[r_ | (1 << (t))] = KV_SHUF(a_, b_, KV_HI, t);                                                                \
    }

inline void kv_transpose(VEC x[VW])
{
    KV_ROUND(x, 0);
    KV_ROUND(x, 1);
#if VW >= 8
    KV_ROUND(x, 2);
#endif
#if VW == 16
    KV_ROUND(x, 3);
#endif
}
#endif

/* The packing of an operand whose values along K are contiguous (A
   untransposed or B transposed; flipped, the other way round), its rows
   r_step apart, into panels of W rows (P[panel][k][W]). Global size
   (ceil(K / VW), ceil(rows / W), batch), one work-item a work-group: VW
   values of K of one panel per work-item, each row's VW values one vector
   load, and the block transposed in registers (kv_transpose, VW rows at a
   time) into the W rows of each k side by side: a vector store each where
   W is a multiple of VW, else (W < VW: MR) stores of VW values in the
   order of k, each overwriting the zeros past its W by the next k's, the
   last ones value by value. Other widths are read value by value. A
   work-item per k, as in the two kernels above, reads W values each a
   stride apart: on the 2-vCPU Zen 4 packing a 512 x 512 A^T so took 277 us
   of a 1.55-ms GEMM. */
#define PACK_KV(W, rows, K, S, off, r_step, stride, P)                                                                 \
    do {                                                                                                               \
        const int k0 = KILN_GLOBAL_ID(0) * VW, panel = KILN_GLOBAL_ID(1), b = KILN_GLOBAL_ID(2);                       \
        if (k0 >= (K))                                                                                                 \
            return;                                                                                                    \
        const int row0 = panel * (W), kn = min(VW, (K) - k0);                                                          \
        const ulong src = (off) + b * (stride) + (ulong)k0;                                                            \
        KILN_GLOBAL float *dst =                                                                                       \
            (P) + ((size_t)b * (((rows) + (W)-1) / (W)) + panel) * (size_t)(K) * (W) + (size_t)k0 * (W);                  \
        if (kn == VW && KV_SHUFFLES && ((W) % VW == 0 || (W) < VW)) {                                                  \
            KV_BLOCKS(W, rows, S, r_step);                                                                             \
            return;                                                                                                    \
        }                                                                                                              \
        for (int kk = 0; kk < kn; kk++)                                                                                \
            for (int r = 0; r < (W); r++)                                                                              \
                dst[kk * (W) + r] = row0 + r < (rows) ? KILN_LOAD(S, src + (ulong)(row0 + r) * (r_step) + kk) : 0.0f; \
    } while (0)

#if KV_SHUFFLES
#define KV_BLOCKS(W, rows, S, r_step)                                                                                  \
    _Pragma("unroll") for (int blk = 0; blk < ((W) + VW - 1) / VW; blk++)                                              \
    {                                                                                                                  \
        VEC x[VW];                                                                                                     \
        _Pragma("unroll") for (int i = 0; i < VW; i++)                                                                 \
        {                                                                                                              \
            const int r = blk * VW + i;                                                                                \
            x[i] = r < (W) && row0 + r < (rows) ? VLOADU_S((S) + src + (ulong)(row0 + r) * (r_step)) : (VEC)(0.0f);    \
        }                                                                                                              \
        kv_transpose(x);                                                                                               \
        if ((W) % VW == 0) {                                                                                           \
            _Pragma("unroll") for (int kk = 0; kk < VW; kk++) VSTORE(x[kk], 0, dst + kk * (W) + blk * VW);             \
        } else {                                                                                                       \
            _Pragma("unroll") for (int kk = 0; kk < VW; kk++)                                                          \
            {                                                                                                          \
                if (kk * (W) + VW <= VW * (W)) {                                                                       \
                    VSTORE(x[kk], 0, dst + kk * (W));                                                                  \
                } else {                                                                                               \
                    float lane_[VW];                                                                                   \
                    VSTORE(x[kk], 0, lane_);                                                                           \
                    _Pragma("unroll") for (int r = 0; r < (W) % VW; r++) dst[kk * (W) + r] = lane_[r];                 \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }
#else
#define KV_BLOCKS(W, rows, S, r_step)
#endif

/* gemm_f32_cpu_pack_a's panels (MR rows), its arguments, for rows a_ri
   apart and a_rk 1. */
#if KILN_WANTS(gemm_f32_cpu_pack_a_kv)
KILN_KERNEL void gemm_f32_cpu_pack_a_kv(const int M, const int K, KILN_GLOBAL const KILN_STORAGE *A, const ulong off_a,
                                        const ulong a_ri, const ulong a_rk, const ulong stride_a, KILN_GLOBAL float *Ap)
{
    (void)a_rk;
    PACK_KV(MR, M, K, A, off_a, a_ri, stride_a, Ap);
}
#endif

/* gemm_f32_cpu_pack_b's panels (NR columns), its arguments, for b_rk 1 and
   columns b_rj apart. */
#if KILN_WANTS(gemm_f32_cpu_pack_b_kv)
KILN_KERNEL void gemm_f32_cpu_pack_b_kv(const int N, const int K, KILN_GLOBAL const KILN_STORAGE *B, const ulong off_b,
                                        const ulong b_rk, const ulong b_rj, const ulong stride_b, KILN_GLOBAL float *Bp)
{
    (void)b_rk;
    PACK_KV(NR, N, K, B, off_b, b_rj, stride_b, Bp);
}
#endif

#if KILN_TILE_FLIP && KILN_TILE_RUNS
/* A whole flipped tile, MR rows (pixels, 5 to 8) by 16-lane vectors of
   columns, into C: each vector's 16 columns become runs of MR values of C
   (rows past MR taken as zero), transposed in registers (KILN_TILE_COLUMNS,
   common/tile_runs.h) instead of one value at a time, with alpha, the bias and
   the activation applied to the vectors before (after beta * addend, C or Z,
   on each run where there is one). On a 2-vCPU Zen 5, three alternating runs,
   a 1x1 convolution of 256 -> 1024 channels at 14x14 (K = 256, 196 pixels)
   with bias and ReLU took 0.279-0.284 ms through flip_store and 0.252-0.259
   this way, with a residual too 0.302-0.303 and 0.259-0.263; 512 -> 2048 at
   7x7 (runs of 7) with bias, residual and ReLU 0.260-0.262 and 0.243-0.246. */
inline void flip_store_whole(VEC acc[MR][NV], int row0, int col0, float alpha, float beta,
                             KILN_GLOBAL KILN_STORAGE *C, size_t at0, int ldc, KILN_GLOBAL const float *bias, ulong off_bias,
                             KILN_GLOBAL const KILN_STORAGE *Z, float slope)
{
    (void)bias, (void)off_bias, (void)Z, (void)row0;
    const size_t first = at0 + (size_t)col0 * ldc; /* column col0's run */
    KILN_GLOBAL const KILN_STORAGE *addend = beta == 0.0f ? 0 : (KILN_EPI_Z ? Z : C) + first;
#if KILN_EPI_BIAS == 1
    tile_store_runs(acc, C + first, ldc, alpha, beta, addend, bias + off_bias + col0, 0, slope);
#elif KILN_EPI_BIAS == 2
    tile_store_runs(acc, C + first, ldc, alpha, beta, addend, 0, bias + off_bias + row0, slope);
#else
    tile_store_runs(acc, C + first, ldc, alpha, beta, addend, 0, 0, slope);
#endif
}
#endif

#if KILN_TILE_FLIP
/* The flipped tile t (t[i][j] = C(col0 + j, row0 + i)) into C one value at
   a time (partial tiles, other tile shapes), rows from
   `first` (those before belong to another panel) and within M x N. */
inline void flip_store(const float t[MR][NR], int M, int N, int row0, int first, int col0, float alpha, float beta,
                       KILN_GLOBAL KILN_STORAGE *C, size_t off_c, int ldc, KILN_GLOBAL const float *bias,
                       ulong off_bias, KILN_GLOBAL const KILN_STORAGE *Z, float slope)
{
    (void)bias, (void)off_bias, (void)Z;
    const int rows = min(MR, M - row0), cols = min(NR, N - col0);
    for (int j = 0; j < cols; j++) {
        const size_t at = off_c + (size_t)(col0 + j) * ldc + row0;
        for (int i = first; i < rows; i++) {
            float r = alpha * t[i][j];
            if (beta != 0.0f)
                r = fma(beta, KILN_LOAD(KILN_EPI_Z ? Z : C, at + i), r);
#if KILN_EPI_BIAS == 1
            r += bias[off_bias + col0 + j];
#elif KILN_EPI_BIAS == 2
            r += bias[off_bias + row0 + i];
#endif
            KILN_STORE(kiln_activate(r, slope), C, at + i);
        }
    }
}
#endif

/* Global size (ceil(M/MR), ceil(N/NR), batch), or (ceil(N/NR),
   ceil(M/MR), batch) with KILN_TILE_COLS_FIRST (straight tiles only); the
   sums run over the kc values of K from k0 (all of K, or one slice of it
   whose sum C takes with beta 1). panel_a / panel_b are the distances
   between batch items' packed panels (0 when an operand is shared).
   KILN_A_DIRECT: Ap is the row operand itself, fp32, its row r and k at
   Ap[off_a + r + k * a_step] (1: the flipped product of an untransposed B,
   a 1x1 convolution's pixels, or the straight one of a transposed A) or at
   Ap[off_a + r * a_step + k] (2: a straight untransposed A), panel_a its
   batch stride; M >= MR, and the last panel, when partial, reads the MR
   rows that end at M and stores only its own.
   KILN_B_DIRECT: Bp is the column operand itself, fp32 and untransposed,
   its k and column j at Bp[off_b + k * b_step + j], panel_b its batch
   stride; N is a multiple of NR (no panel reads past a row's end). Else
   off_b and b_step are not read. */
#if KILN_WANTS(gemm_f32_cpu_micro)
KILN_KERNEL void gemm_f32_cpu_micro(const int M, const int N, const int K, const int k0, const int kc,
                                    const float alpha_arg, const float beta_arg,
                                    KILN_GLOBAL const float *Ap, const ulong off_a, const ulong a_step,
                                    const ulong panel_a, KILN_GLOBAL const float *Bp, const ulong panel_b,
                                    const ulong off_b, const ulong b_step,
                                    KILN_GLOBAL KILN_STORAGE *C, const ulong off_c, const int ldc, const ulong stride_c,
                                    KILN_GLOBAL const float *bias, const ulong off_bias, KILN_GLOBAL const KILN_STORAGE *Z,
                                    const float slope_arg)
{
    KILN_TILE_HOLD(held, alpha_arg, beta_arg, slope_arg);
#if KILN_TILE_COLS_FIRST
    const int it = KILN_GLOBAL_ID(1), jt = KILN_GLOBAL_ID(0), b = KILN_GLOBAL_ID(2);
#else
    const int it = KILN_GLOBAL_ID(0), jt = KILN_GLOBAL_ID(1), b = KILN_GLOBAL_ID(2);
#endif
#if KILN_B_DIRECT
    const KILN_GLOBAL float *bp = Bp + off_b + b * panel_b + (size_t)jt * NR + (size_t)k0 * b_step;
#else
    (void)off_b, (void)b_step;
    const KILN_GLOBAL float *bp = Bp + b * panel_b + (size_t)jt * K * NR + (size_t)k0 * NR;
#endif
#if KILN_A_DIRECT && KILN_TILE_RB > 1
    {
        /* RB row panels, KC values of K at a time for all of them: the
           column panel's KC rows stay in L1 while the panels pass. */
        const int panels = (M + MR - 1) / MR, pf = it * RB, pn = min(RB, panels - pf);
        KILN_GLOBAL const float *a0 = Ap + off_a + b * panel_a + (size_t)k0 * a_step;
        float part[RB][MR][NR];
        for (int kb = 0; kb < kc; kb += KC) {
            const int kn = min(KC, kc - kb);
            for (int r = 0; r < pn; r++) {
                const int pit = pf + r, first = PANEL_FIRST(pit);
                KILN_GLOBAL const float *a = a0 + (pit * MR - first) + (size_t)kb * a_step;
                KILN_GLOBAL const float *bk = bp + (size_t)kb * B_STEP;
                VEC acc[MR][NV];
#pragma unroll
                for (int i = 0; i < MR; i++)
#pragma unroll
                    for (int v = 0; v < NV; v++)
                        acc[i][v] = kb == 0 ? (VEC)(0.0f) : VLOAD(v, part[r][i]);
                KILN_TILE_ACCUMULATE_LD(acc, a, a_step, bk, B_STEP, kn);
#pragma unroll
                for (int i = 0; i < MR; i++)
#pragma unroll
                    for (int v = 0; v < NV; v++)
                        VSTORE(acc[i][v], v, part[r][i]);
            }
        }
        for (int r = 0; r < pn; r++) {
            const int pit = pf + r, first = PANEL_FIRST(pit);
            flip_store(part[r], M, N, pit * MR - first, first, jt * NR, held[0], held[1], C, off_c + b * stride_c,
                       ldc, bias, off_bias, Z, held[2]);
        }
        return;
    }
#endif
    VEC acc[MR][NV];
#if KILN_A_DIRECT
    const int first = PANEL_FIRST(it);
    const int row0 = it * MR - first;
    KILN_TILE_MULTIPLY_RLD(acc, Ap + off_a + b * panel_a + (size_t)row0 * A_STEP_ROW + (size_t)k0 * A_STEP_K, A_STEP_K,
                           A_STEP_ROW, bp, B_STEP, kc);
#else
    const int first = 0, row0 = it * MR;
    (void)off_a, (void)a_step;
    KILN_TILE_MULTIPLY_LD(acc, Ap + b * panel_a + (size_t)it * K * MR + (size_t)k0 * MR, MR, bp, B_STEP, kc);
#endif

    const int col0 = jt * NR;
    const float alpha = held[0], beta = held[1], slope = held[2];
    (void)bias, (void)off_bias, (void)Z, (void)slope;
#if KILN_TILE_FLIP
    /* acc[i][v] lane e is C(col0 + v*VW + e, row0 + i). */
#if KILN_TILE_RUNS
    if (first == 0 && row0 + MR <= M && col0 + NR <= N) {
        flip_store_whole(acc, row0, col0, alpha, beta, C, off_c + b * stride_c + row0, ldc, bias, off_bias, Z, slope);
        return;
    }
#endif
    float t[MR][NR];
#pragma unroll
    for (int i = 0; i < MR; i++)
#pragma unroll
        for (int v = 0; v < NV; v++)
            VSTORE(acc[i][v], 0, &t[i][v * VW]);
    flip_store(t, M, N, row0, first, col0, alpha, beta, C, off_c + b * stride_c, ldc, bias, off_bias, Z, slope);
#else
    const size_t c0 = off_c + b * stride_c + (size_t)row0 * ldc + col0;
    KILN_GLOBAL KILN_STORAGE *c = C + c0;
#if KILN_EPI_Z
    KILN_GLOBAL const KILN_STORAGE *addend = Z + c0; /* beta scales z; C is only written */
#else
    KILN_GLOBAL const KILN_STORAGE *addend = c;
#endif
    if (first == 0 && row0 + MR <= M && col0 + NR <= N) {
#pragma unroll
        for (int i = 0; i < MR; i++)
#pragma unroll
            for (int v = 0; v < NV; v++) {
                const size_t at = (size_t)i * ldc + v * VW;
                VEC r = alpha * acc[i][v];
                if (beta != 0.0f)
                    r = fma((VEC)(beta), VLOAD_S(0, addend + at), r);
#if KILN_EPI_BIAS == 1
                r += bias[off_bias + row0 + i];
#elif KILN_EPI_BIAS == 2
                r += VLOAD(v, bias + off_bias + col0);
#endif
                VSTORE_S(activate_vec(r, slope), 0, c + at);
            }
        return;
    }
    /* Unrolled with the bounds inside, so that acc stays in registers in
       every tile (as in conv_f32_igemm's epilogue: a 256 x 3136 x 64 GEMM
       0.575 -> 0.539-0.544 ms on the 2-vCPU Zen 4). */
#pragma unroll
    for (int i = 0; i < MR; i++)
#pragma unroll
        for (int v = 0; v < NV; v++) {
            if (i < first || row0 + i >= M) /* another panel's, or past M */
                continue;
            float lane[VW];
            VSTORE(acc[i][v], 0, lane);
            for (int e = 0; e < VW && col0 + v * VW + e < N; e++) {
                const size_t at = (size_t)i * ldc + v * VW + e;
                float r = alpha * lane[e];
                if (beta != 0.0f)
                    r = fma(beta, KILN_LOAD(addend, at), r);
#if KILN_EPI_BIAS == 1
                r += bias[off_bias + row0 + i];
#elif KILN_EPI_BIAS == 2
                r += bias[off_bias + col0 + v * VW + e];
#endif
                KILN_STORE(kiln_activate(r, slope), c, at);
            }
        }
#endif
}
#endif
