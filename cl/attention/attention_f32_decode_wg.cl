/*
 * Decoding attention for GPUs: a work-group per split of the keys of one
 * (batch, kv head), for its few rows (query heads per kv head times query
 * positions, at most 8). Where the flash kernel (attention_f32_flash.cl)
 * gives decoding's four rows a work-group of one warp that loads a tile of
 * keys a float at a time, waits for it, computes and only then loads the
 * values, this kernel keeps the memory busy: every work-item loads its
 * share of the next tile of keys and values (four consecutive values a
 * load, neighbouring work-items neighbouring values of a row) into
 * registers while the work-group computes on the tile before it in local
 * memory.
 *
 * The arguments are attention/args.h's; the rows of a (batch, kv head) (row
 * r is query position r / group of query head kv_head * group + r % group),
 * the visible keys, the mask, the log-sum-exp and 16-bit storage are those
 * of the fused kernel (attention_f32_fused.cl), whose header states them.
 * With KILN_DWG_SPLIT, work-group dimension 0 is the split: it takes keys
 * [split * split_len, (split + 1) * split_len) only and writes its rows'
 * output normalised by its own sum (fp32) and their natural log-sum-exps to
 * part and part_lse, which attention_combine.cl merges.
 *
 * Per tile of BN keys (up to the last key any row sees):
 *   1. the tile's keys and values, held in registers since the step before,
 *      go to local memory (zeros past the last visible key); barrier;
 *   2. the loads of the next tile are issued; each work-item computes a
 *      part of a head dimension's dot product of one row and one key
 *      (PARTS parts where ROWS x BN pairs leave work-items idle; neighbouring
 *      work-items take neighbouring keys, rows of the key tile padded by one
 *      value, so they read different banks); barrier;
 *   3. a work-item per row sums its keys' parts, adds the mask, hides the
 *      keys the row does not see, and takes the online softmax step
 *      (attention/online_softmax.h): the new maximum m, the factor
 *      exp2(m_old - m) for the output and the sum, the weights exp2(s - m)
 *      in place and their sum; barrier;
 *   4. O = O * factor + P V: each work-item keeps OE values of the rows'
 *      output (row-major, so neighbours take neighbouring values of a row of
 *      the value tile); barrier (the tiles are reused).
 * Scores are in base 2 (the queries scaled by scale * log2(e) on loading);
 * a row that sees no key keeps m = -inf and takes its weights against 0,
 * ending with l = 0, O = 0 and lse = -inf. Every barrier is reached by every
 * work-item: the loop bounds depend only on the work-group's keys.
 *
 * Parameters (-D): KILN_DWG_WG (work-items), KILN_DWG_BN (keys per tile),
 * KILN_DWG_ROWS (the rows of a (batch, kv head), 1 to 8), KILN_DWG_D (the
 * head dimension, a multiple of 4), KILN_DWG_PARTS (parts of a dot
 * product, dividing the head dimension), KILN_DWG_SPLIT (0 or 1), and the
 * switches of attention_f32_fused.cl. Local memory: wg_local_bytes in
 * src/ops/attention_decode.c. Vector syntax (OpenCL only).
 */
#define WG KILN_DWG_WG
#define BN KILN_DWG_BN
#define ROWS KILN_DWG_ROWS
#define D KILN_DWG_D
#define PARTS KILN_DWG_PARTS
#define DV (D / 4)                            /* vectors of four in a row of the head dimension */
#define KLD (D + 1)                           /* padded rows of the key tile */
#define LOADS ((BN * DV + WG - 1) / WG)       /* vectors of K (and of V) a work-item moves per tile */
#define PAIRS (ROWS * BN)                     /* (row, key) pairs of a tile */
#define OE ((ROWS * D + WG - 1) / WG)         /* output values a work-item keeps */
#define DP (D / PARTS)                        /* head-dimension values of a part */

#include "common/portability.h"
#include "common/storage.h"

#include "attention/args.h"
#include "attention/online_softmax.h"

#if ROWS < 1 || ROWS > 8 || D % 4 || D % PARTS || WG < 1 || BN < 1
#error "attention_f32_decode_wg: parameters break the constraints listed in docs/attention.md"
#endif

/* Four consecutive values from p as one aligned load (a row of K or V
   starts at a multiple of four values: the head dimension is, and kiln's
   buffers are whole allocations), fp32. A float4 of 4-byte alignment
   (KILN_VLOADN) compiles to four scalar loads in PTX (clang's NVPTX back
   end, sm_90). */
#if KILN_F16
#define LOAD4(p) vload_half4(0, (p))
#elif KILN_BF16
#define LOAD4(p) KILN_BF16_WIDEN(4, *(KILN_GLOBAL const ushort4 *)(p))
#else
#define LOAD4(p) (*(KILN_GLOBAL const float4 *)(p))
#endif

/* The keys row r of the work-group sees: those below k1, and with causal
   masking up to its query position's diagonal. */
#if KILN_ATTN_CAUSAL
#define ROW_KEYS(r) min(k1, clamp((r) / group + nk - nq + 1, 0, klimit))
#else
#define ROW_KEYS(r) k1
#endif

/* This work-item's vectors of the tile from key j0 into registers (zeros at
   or past kend). */
#define LOAD_TILE(j0)                                                                                                  \
    _Pragma("unroll") for (int x = 0; x < LOADS; x++) {                                                                \
        const int f = tid + x * WG, jj = f / DV;                                                                       \
        kr[x] = vr[x] = (float4)(0.0f);                                                                                \
        if (f < BN * DV && (j0) + jj < kend) {                                                                         \
            const ulong at = kv0 + (ulong)((j0) + jj) * kv_ss + 4 * (f % DV);                                          \
            kr[x] = LOAD4(K + at);                                                                                     \
            vr[x] = LOAD4(V + at);                                                                                     \
        }                                                                                                              \
    }

/* Global size (splits x WG, batch * kv_heads), local (WG, 1). */
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
attention_f32_decode_wg(KILN_ATTENTION_KERNEL_ARGS, KILN_ATTENTION_SPLIT_ARGS)
{
    __local float q_l[ROWS * D], k_l[BN * KLD], v_l[BN * D], s_l[PARTS * PAIRS];
    __local float m_l[ROWS], l_l[ROWS], c_l[ROWS]; /* per row: maximum, sum, factor of this tile */
    const int tid = get_local_id(0);
    const int kv_heads = heads / group, b = KILN_GROUP_ID(1) / kv_heads, hk = KILN_GROUP_ID(1) % kv_heads;
    (void)mask, (void)key_lengths, (void)lse, (void)m_sb, (void)m_sh, (void)head_dim;
    (void)part, (void)part_lse, (void)split_len, (void)part_rows;
    int klimit = nk;
#if KILN_ATTN_KEY_LENGTHS
    klimit = clamp(key_lengths[b], 0, nk);
#endif
    /* This work-group's keys: [k0, k1). */
#if KILN_DWG_SPLIT
    const int split = KILN_GROUP_ID(0), k0 = split * split_len, k1 = min(klimit, k0 + split_len);
#else
    const int k0 = 0, k1 = klimit;
#endif
    /* The last key any row sees. */
    int kend = k0;
#pragma unroll
    for (int r = 0; r < ROWS; r++)
        kend = max(kend, ROW_KEYS(r));
    const ulong kv0 = b * kv_sb + hk * kv_sh;

    /* The queries, scaled into base 2; the row values. */
    for (int e = tid; e < ROWS * D; e += WG) {
        const int r = e / D, d = e % D;
        q_l[e] = KILN_LOAD(Q, b * q_sb + (hk * group + r % group) * q_sh + (ulong)(r / group) * q_ss + d) * scale_log2;
    }
    for (int r = tid; r < ROWS; r += WG)
        m_l[r] = -INFINITY, l_l[r] = 0.0f;
    float o[OE];
#pragma unroll
    for (int x = 0; x < OE; x++)
        o[x] = 0.0f;

    float4 kr[LOADS], vr[LOADS];
    LOAD_TILE(k0)
    for (int j0 = k0; j0 < kend; j0 += BN) {
        /* 1. The tile to local memory. */
#pragma unroll
        for (int x = 0; x < LOADS; x++) {
            const int f = tid + x * WG, jj = f / DV, d = 4 * (f % DV);
            if (f < BN * DV) {
                k_l[jj * KLD + d] = kr[x].s0, k_l[jj * KLD + d + 1] = kr[x].s1;
                k_l[jj * KLD + d + 2] = kr[x].s2, k_l[jj * KLD + d + 3] = kr[x].s3;
                vstore4(vr[x], 0, v_l + jj * D + d);
            }
        }
        KILN_BARRIER_LOCAL(); /* also the queries and row values on the first tile */

        /* 2. The next tile on its way; the parts of the scores. */
        if (j0 + BN < kend)
            LOAD_TILE(j0 + BN)
        for (int e = tid; e < PARTS * PAIRS; e += WG) {
            const int p = e / PAIRS, r = e % PAIRS / BN, jj = e % BN;
            KILN_LOCAL const float *qp = q_l + r * D + p * DP, *kp = k_l + jj * KLD + p * DP;
            float acc = 0.0f;
            for (int d = 0; d < DP; d++)
                acc = fma(qp[d], kp[d], acc);
            s_l[e] = acc;
        }
        KILN_BARRIER_LOCAL();

        /* 3. The online softmax step of each row; weights in place. */
        for (int r = tid; r < ROWS; r += WG) {
#if KILN_ATTN_MASK
            const ulong mrow = b * m_sb + (hk * group + r % group) * m_sh + (ulong)(r / group) * nk;
#endif
            const int seen = ROW_KEYS(r);
#pragma unroll 4
            for (int jj = 0; jj < BN; jj++) {
                const int j = j0 + jj;
                float x = s_l[r * BN + jj];
                for (int p = 1; p < PARTS; p++)
                    x += s_l[p * PAIRS + r * BN + jj];
#if KILN_ATTN_MASK
                x = fma(mask[mrow + min(j, nk - 1)], M_LOG2E_F, x);
#endif
                s_l[r * BN + jj] = j < seen ? x : -INFINITY;
            }
            attention_softmax_step(s_l + r * BN, BN, m_l + r, l_l + r, c_l + r);
        }
        KILN_BARRIER_LOCAL();

        /* 4. O = O * factor + P V. */
#pragma unroll
        for (int x = 0; x < OE; x++) {
            const int e = tid + x * WG, r = e / D, d = e % D;
            if (e < ROWS * D) {
                float acc = o[x] * c_l[r];
                for (int jj = 0; jj < BN; jj++)
                    acc = fma(s_l[r * BN + jj], v_l[jj * D + d], acc);
                o[x] = acc;
            }
        }
        KILN_BARRIER_LOCAL();
    }
    if (kend <= k0)
        KILN_BARRIER_LOCAL(); /* no tile: the row values' barrier */

    /* O = acc / l, written once; lse = (m + log2 l) ln 2. Split: both to
       the split's part of the workspace, rows numbered as lse. */
#if KILN_DWG_SPLIT
    const ulong part0 = (ulong)split * part_rows;
#endif
#pragma unroll
    for (int x = 0; x < OE; x++) {
        const int e = tid + x * WG, r = e / D, d = e % D;
        if (e < ROWS * D) {
            const int i = r / group, h = hk * group + r % group;
            const float l = l_l[r], out = l > 0.0f ? o[x] / l : 0.0f;
#if KILN_DWG_SPLIT
            part[(part0 + ((ulong)b * heads + h) * nq + i) * D + d] = out;
#else
            KILN_STORE(out, O, b * q_sb + h * q_sh + (ulong)i * q_ss + d);
#endif
        }
    }
#if KILN_ATTN_LSE || KILN_DWG_SPLIT
    for (int r = tid; r < ROWS; r += WG) {
        const int i = r / group, h = hk * group + r % group;
        const float v = l_l[r] > 0.0f ? (m_l[r] + log2(l_l[r])) * M_LN2_F : -INFINITY;
#if KILN_DWG_SPLIT
        part_lse[part0 + ((ulong)b * heads + h) * nq + i] = v;
#else
        lse[((ulong)b * heads + h) * nq + i] = v;
#endif
    }
#endif
}
