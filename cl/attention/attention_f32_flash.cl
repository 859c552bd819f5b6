/*
 * Fused attention for GPUs, flash style: O = softmax(scale * Q K^T + mask) V
 * without the score matrix, computed by a work-group per block of query
 * rows that stages each block of keys and values through local memory
 * shared by its work-items (FlashAttention-2's partition: query blocks
 * across work-groups, key blocks in the inner loop). The arguments are
 * attention/args.h's; the rows of a (batch, kv head) (its `group` query
 * heads interleaved), the visible keys, the mask, the log-sum-exp and
 * 16-bit storage are those of attention_f32_fused.cl, whose header states
 * them.
 *
 * A work-group of WG work-items owns BM rows (rows past the last repeat it,
 * computed and never stored). It loads its queries once into local memory,
 * scaled into base 2, and then, per block of BN keys up to the last key
 * any of its rows sees:
 *   1. loads the BN keys into local memory (zeros past the last visible);
 *      barrier;
 *   2. S = Q K^T: work-item (sr, sc) of an SR x SC grid computes TM rows by
 *      TN keys (keys sc, sc + SC, ...: neighbouring work-items read
 *      neighbouring rows of the padded key tile), adds the mask, hides keys
 *      a row does not see (only in blocks past its first row's limit), and
 *      writes S to local memory; barrier;
 *   3. loads the BN values over the keys (zeros past the last visible), and
 *      the work-items of the first BM ids take one row each: the new
 *      maximum m, the factor exp2(m_old - m) for O and l, the weights
 *      P = exp2(S - m) in place and l += their sum; barrier;
 *   4. O += P V: work-item (or, oc) of an OR x OC grid keeps TO rows by TD
 *      head-dimension values (d = oc, oc + OC, ...) of O in registers,
 *      rescaled by its rows' factors; barrier (the tiles are reused).
 * At the end O / l is written, and lse = (m + log2 l) ln 2 by the row
 * work-items. A row that sees no key keeps m = -inf and takes its weights
 * against 0, so it ends with l = 0, O = 0 and lse = -inf. Every barrier is
 * reached by every work-item of the group: the loop bounds depend only on
 * the group's rows.
 *
 * With KILN_FLASH_SPLIT the keys are split (flash-decoding, for problems
 * of few row blocks): work-group dimension 2 is the split, which takes keys
 * [split * split_len, (split + 1) * split_len) only and writes its rows'
 * output normalised by its own sum (fp32) and their natural log-sum-exps to
 * part and part_lse (the layout attention_combine.cl merges).
 *
 * Parameters (-D): KILN_FLASH_BLOCK_Q (BM), KILN_FLASH_BLOCK_KV (BN),
 * KILN_FLASH_WG (WG), KILN_FLASH_S_ROWS (TM: rows of S per work-item),
 * KILN_FLASH_O_ROWS (TO: rows of O per work-item), with BM % TM == 0,
 * WG % (BM / TM) == 0, BN % (WG / (BM / TM)) == 0, BM % TO == 0 and
 * WG % (BM / TO) == 0; KILN_FLASH_SPLIT (0 or 1); KILN_ATTN_D or
 * KILN_ATTN_DMAX and the switches of attention_f32_fused.cl. Local memory: BM x (DMAX + 1) queries, BN x
 * (DMAX + 1) keys or values, BM x (BN + 1) scores and 3 x BM row values,
 * floats.
 */
#define BM KILN_FLASH_BLOCK_Q
#define BN KILN_FLASH_BLOCK_KV
#define WG KILN_FLASH_WG
#define TM KILN_FLASH_S_ROWS
#define TO KILN_FLASH_O_ROWS
#define SR (BM / TM)
#define SC (WG / SR)
#define TN (BN / SC)
#define OR (BM / TO)
#define OC (WG / OR)

#include "common/portability.h"
#include "common/storage.h"

#include "attention/args.h"
#include "attention/online_softmax.h"

#include "attention/head_dim.h"
#define TD ((DMAX + OC - 1) / OC)
#define QLD (DMAX + 1) /* padded rows of the query and key/value tiles */
#define SLD (BN + 1)   /* padded rows of the score tile */

#if BM % TM || WG % SR || BN % SC || BM % TO || WG % OR
#error "attention.flash parameters break the constraints listed in device_profiles/README.md"
#endif

/* Stage BN rows of K or V from key j0 (rows at or past kend read as 0). */
void flash_stage(KILN_LOCAL float *tile, KILN_GLOBAL const KILN_STORAGE *X, const ulong kv0, const ulong kv_ss,
                 const int j0, const int kend, const int head_dim, const int tid)
{
    (void)head_dim;
    for (int e = tid; e < BN * HEAD_DIM; e += WG) {
        const int j = e / HEAD_DIM, d = e % HEAD_DIM;
        tile[j * QLD + d] = j0 + j < kend ? KILN_LOAD(X, kv0 + (ulong)(j0 + j) * kv_ss + d) : 0.0f;
    }
}

/* Global size (row blocks x WG, batch * kv_heads, splits), local (WG, 1, 1);
   the arguments of attention/args.h. */
KILN_KERNEL KILN_WORK_GROUP_SIZE(WG, 1, 1)
void attention_f32_flash(KILN_ATTENTION_KERNEL_ARGS, KILN_ATTENTION_SPLIT_ARGS)
{
    KILN_SHARED float q_l[BM * QLD], kv_l[BN * QLD], s_l[BM * SLD];
    KILN_SHARED float m_l[BM], l_l[BM], c_l[BM]; /* per row: maximum, sum, factor of this block */
    const int rows = nq * group, blocks = (rows + BM - 1) / BM, tid = KILN_LOCAL_ID(0);
    int block = KILN_GROUP_ID(0);
#if KILN_ATTN_CAUSAL
    block = blocks - 1 - block; /* the blocks with the most keys first */
#endif
    const int kv_heads = heads / group, b = KILN_GROUP_ID(1) / kv_heads, hk = KILN_GROUP_ID(1) % kv_heads;
    (void)mask, (void)key_lengths, (void)lse, (void)m_sb, (void)m_sh, (void)head_dim, (void)blocks;
    (void)part, (void)part_lse, (void)split_len, (void)part_rows;
    int klimit = nk;
#if KILN_ATTN_KEY_LENGTHS
    klimit = clamp(key_lengths[b], 0, nk);
#endif
    /* This work-group's keys: [k0, k1). */
#if KILN_FLASH_SPLIT
    const int split = KILN_GROUP_ID(2), k0 = split * split_len;
    const int k1 = min(klimit, k0 + split_len);
#else
    const int k0 = 0, k1 = klimit;
#endif
    const int row0 = block * BM, last = min(row0 + BM, rows) - 1;
#if KILN_ATTN_CAUSAL
    const int kend = max(k0, min(k1, clamp(last / group + nk - nq + 1, 0, klimit)));
    const int kfull = min(k1, clamp(row0 / group + nk - nq + 1, 0, klimit));
#else
    const int kend = max(k0, k1), kfull = k1;
#endif
    const ulong kv0 = b * kv_sb + hk * kv_sh;

    /* The queries, scaled into base 2; the row values. */
    for (int e = tid; e < BM * HEAD_DIM; e += WG) {
        const int r = e / HEAD_DIM, d = e % HEAD_DIM, row = min(row0 + r, last);
        const ulong at = b * q_sb + (hk * group + row % group) * q_sh + (ulong)(row / group) * q_ss;
        q_l[r * QLD + d] = KILN_LOAD(Q, at + d) * scale_log2;
    }
    for (int r = tid; r < BM; r += WG)
        m_l[r] = -INFINITY, l_l[r] = 0.0f;
    KILN_BARRIER_LOCAL(); /* also where no key is visible */

    /* This work-item's rows of S: the keys they see, their mask rows. */
    const int sr = tid / SC, sc = tid % SC;
    int lim[TM];
#if KILN_ATTN_MASK
    ulong mrow[TM];
#endif
#pragma unroll
    for (int i = 0; i < TM; i++) {
        const int row = min(row0 + sr * TM + i, last);
#if KILN_ATTN_CAUSAL
        lim[i] = min(k1, clamp(row / group + nk - nq + 1, 0, klimit));
#else
        lim[i] = k1;
#endif
#if KILN_ATTN_MASK
        mrow[i] = b * m_sb + (hk * group + row % group) * m_sh + (ulong)(row / group) * nk;
#endif
    }

    /* This work-item's rows and head-dimension values of O. */
    const int orow = tid / OC, oc = tid % OC;
    float o[TO][TD];
#pragma unroll
    for (int i = 0; i < TO; i++)
#pragma unroll
        for (int t = 0; t < TD; t++)
            o[i][t] = 0.0f;

    for (int j0 = k0; j0 < kend; j0 += BN) {
        flash_stage(kv_l, K, kv0, kv_ss, j0, kend, head_dim, tid);
        KILN_BARRIER_LOCAL();

        /* 2. S for TM rows by TN keys. */
        float s[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int t = 0; t < TN; t++)
                s[i][t] = 0.0f;
        for (int d = 0; d < HEAD_DIM; d++) {
            float qv[TM], kv[TN];
#pragma unroll
            for (int i = 0; i < TM; i++)
                qv[i] = q_l[(sr * TM + i) * QLD + d];
#pragma unroll
            for (int t = 0; t < TN; t++)
                kv[t] = kv_l[(sc + t * SC) * QLD + d];
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int t = 0; t < TN; t++)
                    s[i][t] = fma(qv[i], kv[t], s[i][t]);
        }
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int t = 0; t < TN; t++) {
                const int j = j0 + sc + t * SC;
                float x = s[i][t];
#if KILN_ATTN_MASK
                x = fma(mask[mrow[i] + min(j, nk - 1)], M_LOG2E_F, x);
#endif
                if (j0 + BN > kfull && j >= lim[i]) /* a key of the block is hidden from some row */
                    x = -INFINITY;
                s_l[(sr * TM + i) * SLD + sc + t * SC] = x;
            }
        KILN_BARRIER_LOCAL();

        /* 3. The values; the weights of each row, in place. */
        flash_stage(kv_l, V, kv0, kv_ss, j0, kend, head_dim, tid);
        for (int r = tid; r < BM; r += WG)
            attention_softmax_step(s_l + r * SLD, BN, m_l + r, l_l + r, c_l + r);
        KILN_BARRIER_LOCAL();

        /* 4. O += P V for TO rows by TD values. */
#pragma unroll
        for (int i = 0; i < TO; i++) {
            const float corr = c_l[orow * TO + i];
#pragma unroll
            for (int t = 0; t < TD; t++)
                o[i][t] *= corr;
        }
        for (int c = 0; c < BN; c++) {
            float p[TO], v[TD];
#pragma unroll
            for (int i = 0; i < TO; i++)
                p[i] = s_l[(orow * TO + i) * SLD + c];
#pragma unroll
            for (int t = 0; t < TD; t++)
                v[t] = oc + t * OC < HEAD_DIM ? kv_l[c * QLD + oc + t * OC] : 0.0f;
#pragma unroll
            for (int i = 0; i < TO; i++)
#pragma unroll
                for (int t = 0; t < TD; t++)
                    o[i][t] = fma(p[i], v[t], o[i][t]);
        }
        KILN_BARRIER_LOCAL();
    }

    /* O = acc / l, written once; lse = (m + log2 l) ln 2. Split: both to
       the split's part of the workspace, rows numbered as lse. */
#if KILN_FLASH_SPLIT
    const ulong part0 = (ulong)split * part_rows;
#endif
#pragma unroll
    for (int i = 0; i < TO; i++) {
        const int r = orow * TO + i, row = row0 + r;
        if (row > last)
            break;
        const float l = l_l[r], inv = l > 0.0f ? 1.0f / l : 0.0f;
#if KILN_FLASH_SPLIT
        const ulong at = (part0 + ((ulong)b * heads + hk * group + row % group) * nq + row / group) * head_dim;
#else
        const ulong at = b * q_sb + (hk * group + row % group) * q_sh + (ulong)(row / group) * q_ss;
#endif
#pragma unroll
        for (int t = 0; t < TD; t++) {
            const int d = oc + t * OC;
            if (d < HEAD_DIM) {
#if KILN_FLASH_SPLIT
                part[at + d] = o[i][t] * inv;
#else
                KILN_STORE(o[i][t] * inv, O, at + d);
#endif
            }
        }
    }
#if KILN_ATTN_LSE || KILN_FLASH_SPLIT
    for (int r = tid; r < BM && row0 + r <= last; r += WG) {
        const int row = row0 + r, i = row / group, h = hk * group + row % group;
        const float v = l_l[r] > 0.0f ? (m_l[r] + log2(l_l[r])) * M_LN2_F : -INFINITY;
#if KILN_FLASH_SPLIT
        part_lse[part0 + ((ulong)b * heads + h) * nq + i] = v;
#else
        lse[((ulong)b * heads + h) * nq + i] = v;
#endif
    }
#endif
}
