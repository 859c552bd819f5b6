/*
 * attention_f16_mma: fused attention on tensor cores, flash style, for fp16
 * or bf16 storage (KILN_MMA_BF16=1), sm_80 and newer:
 *   O = softmax(scale * Q K^T + mask) V
 * without the score matrix. The arguments, the rows of a (batch, kv head)
 * (its `group` query heads interleaved), the visible keys (causal masking
 * aligned to the end of the keys, key lengths, the additive mask), the
 * log-sum-exp, the split over the keys and the rows that see no key are
 * those of the flash kernel (cl/attention/attention_f32_flash.cl and
 * cl/attention/args.h), which states them; this kernel differs in how it
 * multiplies.
 *
 * FlashAttention-2's partition: a block of WARPS warps owns BM query rows
 * (rows past the last repeat it, computed and never stored), each warp
 * MT x 16 of them, and walks the keys in steps of BN. Per step:
 *   1. S = Q K^T on mma.sync.m16n8k16 (fp16 or bf16 products, fp32 sums),
 *      Q and K fragments read by ldmatrix from shared memory;
 *   2. S scaled into base 2, the mask added, hidden keys set to -inf (only
 *      in steps past the first row's limit), the running maximum m of
 *      each row over the four lanes that hold it, the weights
 *      P = exp2(S - m) in place, the running sum l (each lane its part),
 *      O rescaled by exp2(m_old - m);
 *   3. O += P V: P's accumulators are the A fragments of the next mma as
 *      they stand (two 16 x 8 C tiles are one 16 x 16 A tile), rounded to
 *      the storage type as FlashAttention rounds them; V's fragments by
 *      ldmatrix.trans.
 * Keys and values are staged by cp.async: with STAGES 2 in two buffers
 * each, the next step's while this one multiplies; with STAGES 1 in one
 * each, as FlashAttention-2 does, the values while S is computed and the
 * next keys while P V is. At the end O / l is stored (or, split, the
 * partial output and its log-sum-exp, as the flash kernel writes them).
 * Fragment addresses and C elements are those of gemm/mma_layout.h, which
 * the host model in tests/test_cuda.c checks, the reuse of C as A with it.
 *
 * Tiles in shared memory as stored, DP (the head dimension rounded up to
 * 16, zeros past it) halves a row, rows padded by 8 halves so that
 * ldmatrix reads them without bank conflicts.
 *
 * Parameters (-D): KILN_AMMA_BLOCK_Q (BM), KILN_AMMA_BLOCK_KV (BN, a
 * multiple of 16), KILN_AMMA_STAGES (1 or 2), KILN_AMMA_WARPS (BM = WARPS x MT x 16, MT 1 or 2),
 * KILN_AMMA_D (the head dimension, a multiple of 8), KILN_AMMA_SPLIT (0 or
 * 1), KILN_MMA_BF16, and the switches KILN_ATTN_CAUSAL, KILN_ATTN_MASK,
 * KILN_ATTN_KEY_LENGTHS, KILN_ATTN_LSE. Every row of Q, K and V starts
 * 16-byte aligned (the head dimension a multiple of 8, buffers aligned).
 *
 * Launch: block (WARPS x 32), grid (row blocks, batch x kv_heads, splits),
 * dynamic shared memory (BM + 2 STAGES BN) x (DP + 8) x 2 bytes
 * (KILN_AMMA_SHARED_BYTES, the host's formula).
 */
#include "attention/keys.h"
#include "gemm/mma_layout.h"
#include "gemm/tensor_core.h"

#ifndef KILN_AMMA_STAGES
#define KILN_AMMA_STAGES 2
#endif
#define STAGES KILN_AMMA_STAGES
#define BM KILN_AMMA_BLOCK_Q
#define BN KILN_AMMA_BLOCK_KV
#define WARPS KILN_AMMA_WARPS
#define D KILN_AMMA_D
#define THREADS (WARPS * 32)
#define MT (BM / (WARPS * 16)) /* 16-row tiles per warp */
#define DP ((D + 15) / 16 * 16)
#define LD (DP + 8)
#define NT (BN / 8) /* 8-key tiles of S */
#define DT (DP / 8) /* 8-column tiles of O */
/* A warp of one row tile keeps its query fragments in registers; of two,
   it reads them again each step (registers for the second tile's state). */
#define Q_IN_REGISTERS (MT == 1)

#if BM % (WARPS * 16) || (MT != 1 && MT != 2) || BN % 16 || D % 8 || D > 256 || (STAGES != 1 && STAGES != 2)
#error "attention_f16_mma: parameters break the constraints listed in device_profiles/README.md"
#endif
#if __CUDA_ARCH__ < 800
#error "attention_f16_mma: needs sm_80 or newer (cp.async, m16n8k16 in both types)"
#endif


/* 2^x (the MUFU's approximation, relative error about 2^-22; 2^-inf = 0). */
__device__ __forceinline__ float exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Two fp32 values as one register of the storage type: lo in the low half
   (the lower column), round to nearest even. */
__device__ __forceinline__ unsigned pack(float lo, float hi)
{
    unsigned r;
#if KILN_MMA_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

/* Stage `rows` rows of K or V from key j0 (keys at or past kend, and
   columns past D, read as 0). */
__device__ __forceinline__ void stage(unsigned short *dst, const unsigned short *X, const unsigned long kv0,
                                      const unsigned long kv_ss, const int j0, const int kend, const int tid)
{
#pragma unroll
    for (int e = tid; e < BN * (DP / 8); e += THREADS) {
        const int j = e / (DP / 8), c = e % (DP / 8) * 8;
        const int valid = j0 + j < kend && c < D;
        copy16(dst + j * LD + c, valid ? X + kv0 + (unsigned long)(j0 + j) * kv_ss + c : X, valid ? 16 : 0);
    }
}

/* The quad's (the four lanes holding a row's columns) maximum and sum. */
__device__ __forceinline__ float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* The signature keeps attention/args.h's order, one line per group. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(THREADS)
attention_f16_mma(const unsigned short *__restrict__ Q, const unsigned short *__restrict__ K,
                  const unsigned short *__restrict__ V, const float *__restrict__ mask,
                  const int *__restrict__ key_lengths, unsigned short *__restrict__ O, float *__restrict__ lse,
                  const int nq, const int nk, const int head_dim, const int heads, const int group,
                  const unsigned long q_sb, const unsigned long q_sh, const unsigned long q_ss,
                  const unsigned long kv_sb, const unsigned long kv_sh, const unsigned long kv_ss,
                  const unsigned long m_sb, const unsigned long m_sh, const float scale_log2,
                  float *__restrict__ part, float *__restrict__ part_lse, const int split_len)
/* clang-format on */
{
    extern __shared__ __align__(16) unsigned short shared[];
    unsigned short *qs = shared, *ks = qs + BM * LD, *vs = ks + STAGES * BN * LD;
    (void)mask, (void)key_lengths, (void)lse, (void)m_sb, (void)m_sh, (void)part, (void)part_lse, (void)split_len;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int rows = nq * group;
    int block = blockIdx.x;
#if KILN_ATTN_CAUSAL
    block = (rows + BM - 1) / BM - 1 - block; /* the blocks with the most keys first */
#endif
    const int kv_heads = heads / group, b = blockIdx.y / kv_heads, hk = blockIdx.y % kv_heads;
    int k0, k1, klimit;
    block_keys(key_lengths, nk, b, blockIdx.z, KILN_AMMA_SPLIT ? split_len : 0, &k0, &k1, &klimit);
    const int row0 = block * BM, last = min(row0 + BM, rows) - 1;
    const int kend = max(k0, row_keys(last / group, nq, nk, k1, klimit)), kfull = row_keys(row0 / group, nq, nk, k1, klimit);
    const unsigned long kv0 = b * kv_sb + hk * kv_sh;
    const int steps = (kend - k0 + BN - 1) / BN;

    /* This lane's rows: tile mt, half h (row g or g + 8 of the tile); the
       keys each sees and its mask row. */
    int lim[MT][2];
#if KILN_ATTN_MASK
    unsigned long mrow[MT][2];
#endif
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = min(row0 + (warp * MT + mt) * 16 + kiln_mma_c_row(lane, 2 * h), last);
            lim[mt][h] = row_keys(row / group, nq, nk, k1, klimit);
#if KILN_ATTN_MASK
            mrow[mt][h] = b * m_sb + (hk * group + row % group) * m_sh + (unsigned long)(row / group) * nk;
#endif
        }

    float o[MT][DT][4], m[MT][2], l[MT][2];
    mma_zero(o);
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        m[mt][0] = m[mt][1] = NEG_INF, l[mt][0] = l[mt][1] = 0.0f;

#if Q_IN_REGISTERS
    unsigned qf[DP / 16][4]; /* the warp's query fragments, read at the first step */
#endif

    /* The queries and the first step's keys and values. */
    if (steps > 0) {
        for (int e = tid; e < BM * (DP / 8); e += THREADS) {
            const int r = e / (DP / 8), c = e % (DP / 8) * 8, row = min(row0 + r, last);
            const unsigned long at = b * q_sb + (hk * group + row % group) * q_sh + (unsigned long)(row / group) * q_ss;
            copy16(qs + r * LD + c, c < D ? Q + at + c : Q, c < D ? 16 : 0);
        }
        stage(ks, K, kv0, kv_ss, k0, kend, tid);
#if STAGES == 2
        stage(vs, V, kv0, kv_ss, k0, kend, tid);
#endif
        asm volatile("cp.async.commit_group;");
    }

    for (int s = 0; s < steps; s++) {
        const int j0 = k0 + s * BN;
        asm volatile("cp.async.wait_group 0;");
#if STAGES == 2
        __syncthreads(); /* step s has landed; every warp is done with step s - 1 */
        if (s + 1 < steps) { /* into step s - 1's buffers */
            stage(ks + (s + 1) % 2 * BN * LD, K, kv0, kv_ss, j0 + BN, kend, tid);
            stage(vs + (s + 1) % 2 * BN * LD, V, kv0, kv_ss, j0 + BN, kend, tid);
            asm volatile("cp.async.commit_group;");
        }
        const unsigned short *kt = ks + s % 2 * BN * LD, *vt = vs + s % 2 * BN * LD;
#else
        __syncthreads(); /* the keys of step s have landed; every warp is done with the values of step s - 1 */
        stage(vs, V, kv0, kv_ss, j0, kend, tid); /* while S is computed */
        asm volatile("cp.async.commit_group;");
        const unsigned short *kt = ks, *vt = vs;
#endif

        /* 1. S = Q K^T. */
        float sc[MT][NT][4];
        mma_zero(sc);
#pragma unroll
        for (int kk = 0; kk < DP; kk += 16) {
#if Q_IN_REGISTERS
            unsigned(*a)[4] = qf + kk / 16;
            if (s == 0)
                ldsm_x4(a[0], qs + (warp * 16 + kiln_mma_ldsm_down_row(lane)) * LD + kk +
                                  kiln_mma_ldsm_down_col(lane, CHUNK));
#else
            unsigned a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldsm_x4(a[mt], qs + ((warp * MT + mt) * 16 + kiln_mma_ldsm_down_row(lane)) * LD + kk +
                                   kiln_mma_ldsm_down_col(lane, CHUNK));
#endif
#pragma unroll
            for (int nt = 0; nt < NT; nt += 2) {
                unsigned r[4];
                ldsm_x4(r, kt + (nt * 8 + kiln_mma_ldsm_across_row(lane)) * LD + kk +
                               kiln_mma_ldsm_across_col(lane, CHUNK));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma_16816(sc[mt][nt], a[mt], r);
                    mma_16816(sc[mt][nt + 1], a[mt], r + 2);
                }
            }
        }

        /* 2. Base 2, the mask, hidden keys; the online softmax. */
        const int hide = j0 + BN > kfull;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float top[2] = {m[mt][0], m[mt][1]};
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int h = e >> 1, j = j0 + nt * 8 + kiln_mma_c_col(lane, e);
                    float x = sc[mt][nt][e] * scale_log2;
#if KILN_ATTN_MASK
                    x = fmaf(mask[mrow[mt][h] + min(j, nk - 1)], LOG2E, x);
#endif
                    if (hide && j >= lim[mt][h])
                        x = NEG_INF;
                    sc[mt][nt][e] = x;
                    top[h] = fmaxf(top[h], x);
                }
#pragma unroll
            for (int h = 0; h < 2; h++) {
                top[h] = quad_max(top[h]);
                /* Weights against 0 while the maximum is still -inf. */
                const float base = top[h] == NEG_INF ? 0.0f : top[h], corr = exp2_approx(m[mt][h] - base);
                m[mt][h] = top[h], l[mt][h] *= corr;
#pragma unroll
                for (int dt = 0; dt < DT; dt++)
                    o[mt][dt][2 * h] *= corr, o[mt][dt][2 * h + 1] *= corr;
                top[h] = base;
            }
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float p = exp2_approx(sc[mt][nt][e] - top[e >> 1]);
                    sc[mt][nt][e] = p;
                    l[mt][e >> 1] += p;
                }
        }

#if STAGES == 1
        asm volatile("cp.async.wait_group 0;");
        __syncthreads(); /* the values have landed; every warp is done with the keys */
        if (s + 1 < steps) { /* while P V is computed */
            stage(ks, K, kv0, kv_ss, j0 + BN, kend, tid);
            asm volatile("cp.async.commit_group;");
        }
#endif

        /* 3. O += P V, 16 keys at a time: C tiles 2kk and 2kk + 1 of S are
           the A fragment of keys 16kk to 16kk + 15 (gemm/mma_layout.h). */
#pragma unroll
        for (int kk = 0; kk < NT / 2; kk++) {
            unsigned a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    a[mt][r] = pack(sc[mt][2 * kk + kiln_mma_a_from_c_tile(2 * r)][kiln_mma_a_from_c_elem(2 * r)],
                                    sc[mt][2 * kk + kiln_mma_a_from_c_tile(2 * r + 1)][kiln_mma_a_from_c_elem(2 * r + 1)]);
#pragma unroll
            for (int dt = 0; dt < DT; dt += 2) {
                unsigned r[4];
                ldsm_x4_trans(r, vt + (kk * 16 + kiln_mma_ldsm_down_row(lane)) * LD + dt * 8 +
                                     kiln_mma_ldsm_down_col(lane, CHUNK));
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mma_16816(o[mt][dt], a[mt], r);
                    mma_16816(o[mt][dt + 1], a[mt], r + 2);
                }
            }
        }
    }

    /* O = acc / l, written once; lse = (m + log2 l) ln 2. Split: both to
       the split's part of the workspace, rows numbered as lse. */
#if KILN_AMMA_SPLIT
    const unsigned long all_rows = (unsigned long)gridDim.y * group * nq, part0 = (unsigned long)blockIdx.z * all_rows;
#endif
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int row = row0 + (warp * MT + mt) * 16 + kiln_mma_c_row(lane, 2 * h);
            const float sum = quad_sum(l[mt][h]); /* every lane of the quad, before any returns */
            if (row > last)
                continue;
            const int i = row / group, hq = hk * group + row % group;
            const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#if KILN_AMMA_SPLIT
            float *out = part + (part0 + ((unsigned long)b * heads + hq) * nq + i) * head_dim;
#else
            unsigned short *out = O + b * q_sb + hq * q_sh + (unsigned long)i * q_ss;
#endif
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                const int c = dt * 8 + kiln_mma_c_col(lane, 2 * h);
                if (c < D) {
                    const float x0 = o[mt][dt][2 * h] * inv, x1 = o[mt][dt][2 * h + 1] * inv;
#if KILN_AMMA_SPLIT
                    *(float2 *)(out + c) = make_float2(x0, x1);
#else
                    *(unsigned *)(out + c) = pack(x0, x1);
#endif
                }
            }
#if KILN_ATTN_LSE || KILN_AMMA_SPLIT
            if ((lane & 3) == 0) { /* one lane of the quad */
                const float v = sum > 0.0f ? (m[mt][h] + log2f(sum)) * LN2 : NEG_INF;
#if KILN_AMMA_SPLIT
                part_lse[part0 + ((unsigned long)b * heads + hq) * nq + i] = v;
#else
                lse[((unsigned long)b * heads + hq) * nq + i] = v;
#endif
            }
#endif
        }
}
