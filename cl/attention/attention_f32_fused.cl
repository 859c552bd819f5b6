/*
 * Fused attention, flash style: O = softmax(scale * Q K^T + mask) V without
 * the score matrix. fp32 arithmetic; KILN_F16 (KILN_BF16) stores Q, K, V and
 * O as fp16 (bf16)
 * (each block of K and V rows is converted to fp32 in private memory once,
 * where vector conversions do it, rather than at every broadcast).
 *
 * The rows of one (batch, kv head) are the query positions of its `group`
 * query heads, interleaved: row r is query position r / group of head
 * kv_head * group + r % group, so a grouped-query or multi-query block shares
 * every K and V load between its heads, and the rows of a block sit at
 * neighbouring positions (what causal skipping needs).
 *
 * A block of BQ rows is held as QV = BQ / VW vectors whose lanes are rows.
 * For each step of BK keys it computes the BQ x BK scores S as QV x BK
 * vector accumulators: per head-dimension index d, QV vectors of the
 * transposed queries (kept in private memory, pre-scaled by
 * scale * log2(e)) times BK keys broadcast one scalar each from K. Then per
 * lane: the running maximum m (moved lazily, see below), P = exp2(S - m),
 * the running sum l, and O += P V with O (D x BQ, transposed, private)
 * updated per d from BK broadcast values of V. Every softmax statistic is a
 * vector over rows: no horizontal reductions. O is divided by l and written
 * once, at the end. Memory beyond Q, K, V and O: none (the log-sum-exp only
 * when asked).
 *
 * A work-item owns NB such blocks (fewer at the end of the rows) and walks
 * the keys in chunks of CK: each block in turn takes the whole chunk, so K
 * and V are read from memory once per NB * BQ rows and from cache by the
 * other blocks (the blocks' private state and the chunk are sized for L2).
 *
 * Keys visible to row r: j < lim_r = min(key limit, i_r + seq_kv - seq_q + 1)
 * with causal masking (aligned to the end of the key sequence), else the key
 * limit (key_lengths[b] clamped to [0, seq_kv], or seq_kv). A block never
 * visits keys past its largest lim; steps below its smallest need no
 * masking; only the steps in between compare keys with lim. A row that sees
 * no key (or only -inf masks) gets O = 0 and lse = -inf.
 *
 * P V comes in two forms (KILN_ATTENTION_PV_ROWS, PR):
 *  - PR = 0, per step: after each step's softmax, O += P V per head-dimension
 *    index, O held transposed (D x BQ) as vectors of rows. Nothing but the
 *    step's scores is kept: the form for work-items of a GPU work-group.
 *  - PR > 0, per chunk (the form for CPUs): the chunk's scores go to a
 *    private tile S (CK x BQ), the softmax runs once per chunk (one check
 *    of the lazy maximum, then the weights in place, by a polynomial 2^x),
 *    and O (BQ x D, rows of vectors along d) += P V runs as a register tile
 *    of PR rows by PD vectors of VW head-dimension values over every key of
 *    the chunk: V rows are vector loads, P broadcasts, and the accumulators
 *    stay in registers for the whole chunk, as in a GEMM micro-kernel. The
 *    chunk's values are copied once per work-item to a private fp32 tile
 *    (zero past head_dim; with 16-bit storage the keys too), shared by its blocks.
 *
 * On CPUs the work-group is one work-item (wg = 1) and the vectors are the
 * SIMD registers: with VW = 16, BQ = 32, BK = 8 the scores are 16 of the 32
 * AVX-512 registers.
 *
 * Parameters (-D): KILN_ATTENTION_BLOCK_Q (BQ, a multiple of VW),
 * KILN_ATTENTION_BLOCK_KV (BK), KILN_ATTENTION_CHUNK_KV (CK, a multiple of
 * BK), KILN_ATTENTION_VW (VW), KILN_ATTENTION_WG (work-group size),
 * KILN_ATTENTION_PV_ROWS (PR, 0 or a divisor of BQ), KILN_ATTENTION_PV_VECS
 * (PD, a power of two no larger than DMAX / VW),
 * KILN_ATTN_BLOCKS (NB, chosen by the plan from the profile's q_blocks),
 * KILN_ATTN_D (a head dimension fixed at compile time) or else KILN_ATTN_DMAX
 * (the bound of the run-time head_dim), and the switches KILN_ATTN_CAUSAL,
 * KILN_ATTN_MASK (additive fp32 mask), KILN_ATTN_KEY_LENGTHS (per-batch int32
 * key lengths), KILN_ATTN_LSE (write the per-row natural log-sum-exp),
 * KILN_F16, KILN_BF16.
 */
#define BQ KILN_ATTENTION_BLOCK_Q
#define BK KILN_ATTENTION_BLOCK_KV
#define VW KILN_ATTENTION_VW
#define QV (BQ / VW)
#define NB KILN_ATTN_BLOCKS
#define CK KILN_ATTENTION_CHUNK_KV
#define PR KILN_ATTENTION_PV_ROWS
#define PD KILN_ATTENTION_PV_VECS

#include "common/portability.h"
#include "common/vector.h"

#include "attention/args.h"
#include "attention/head_dim.h"
#include "attention/weights.h"

/* Scores are in base 2 (Q is scaled by scale * log2(e)); the running
   maximum lags by up to SLACK, so weights reach 2^SLACK. */
#define SLACK 8.0f
/* The base a row's weights are taken against: its maximum, or 0 while that
   is still -inf (so that exp2(-inf - base) is 0, not NaN). */
#define BASE(top) select((top), (VEC)(0.0f), (top) == (VEC)(-INFINITY))

#if PR > 0
#define DV (DMAX / VW) /* vectors in a row of O */
#endif

/* What a work-item keeps for each of its blocks of BQ rows. */
typedef struct {
    float qt[DMAX * BQ];   /* the queries, transposed (qt[d][r]), scaled into base 2 */
#if PR > 0
    VEC o[BQ * DV];        /* the output accumulators, rows of vectors along d (o[r][e]) */
#else
    VEC acc[DMAX * QV];    /* the output accumulators, transposed (acc[d][v]: rows v * VW ..) */
#endif
    VEC m[QV], l[QV];      /* running maximum and sum of each row */
    IVEC lim[QV];          /* each row sees keys [0, lim) */
    int row0, last;        /* first and last row */
    int kend, kfull;       /* the block visits keys [0, kend); those below kfull all its rows see */
#if KILN_ATTN_MASK
    ulong mrow[BQ];        /* start of each row's mask row */
#endif
} row_block;

/* Global size (work-items rounded up to the work-group, batch * kv_heads);
   the arguments of attention/args.h. */
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_ATTENTION_WG, 1, 1)
void attention_f32_fused(KILN_ATTENTION_KERNEL_ARGS)
{
    const int rows = nq * group, items = (rows + NB * BQ - 1) / (NB * BQ);
    int item = KILN_GLOBAL_ID(0);
    if (item >= items)
        return;
#if KILN_ATTN_CAUSAL
    item = items - 1 - item; /* the work-items with the most keys first */
#endif
    const int kv_heads = heads / group, b = KILN_GLOBAL_ID(1) / kv_heads, hk = KILN_GLOBAL_ID(1) % kv_heads;
    (void)mask, (void)key_lengths, (void)lse, (void)m_sb, (void)m_sh, (void)head_dim;
    int klimit = nk;
#if KILN_ATTN_KEY_LENGTHS
    klimit = clamp(key_lengths[b], 0, nk);
#endif

    /* Set up the row blocks. Tail rows past `rows` repeat the last row
       (computed, never stored). */
    row_block blocks[NB];
    int nb = 0, kend = 0;
    for (int t = 0; t < NB && (item * NB + t) * BQ < rows; t++, nb++) {
        row_block *x = &blocks[t];
        x->row0 = (item * NB + t) * BQ;
        x->last = min(x->row0 + BQ, rows) - 1;
#pragma unroll
        for (int v = 0; v < QV; v++) {
#if KILN_ATTN_CAUSAL
            const IVEC pos = min((IVEC)(x->row0 + v * VW) + IOTA, (IVEC)(x->last)) / group;
            /* Vector bounds: Oclgrind's clamp of an integer vector by scalar
               bounds gave lanes outside them. */
            x->lim[v] = clamp(pos + (nk - nq + 1), (IVEC)(0), (IVEC)(klimit));
#else
            x->lim[v] = (IVEC)(klimit);
#endif
            x->m[v] = (VEC)(-INFINITY);
            x->l[v] = (VEC)(0.0f);
        }
#if KILN_ATTN_CAUSAL
        x->kend = clamp(x->last / group + nk - nq + 1, 0, klimit);
        x->kfull = clamp(x->row0 / group + nk - nq + 1, 0, klimit);
#else
        x->kend = x->kfull = klimit;
#endif
        kend = max(kend, x->kend);
        for (int r = 0; r < BQ; r++) {
            const int row = min(x->row0 + r, x->last), i = row / group, h = hk * group + row % group;
            const ulong at = b * q_sb + h * q_sh + i * q_ss;
            for (int d = 0; d < HEAD_DIM; d++)
                x->qt[d * BQ + r] = KILN_LOAD(Q, at + d) * scale_log2;
#if KILN_ATTN_MASK
            x->mrow[r] = b * m_sb + h * m_sh + (ulong)i * nk;
#endif
        }
#if PR > 0
        for (int e = 0; e < BQ * DV; e++)
            x->o[e] = (VEC)(0.0f);
#else
        for (int e = 0; e < HEAD_DIM * QV; e++)
            x->acc[e] = (VEC)(0.0f);
#endif
    }

    /* Keys in chunks of CK; every row block takes each chunk in turn, so the
       chunk is read from memory once and from cache by the other blocks. */
    const ulong kv0 = b * kv_sb + hk * kv_sh;
#if PR > 0
    /* One block's scores, then weights, of a chunk: st[j][v]. */
    VEC st[CK * QV];
    /* The tiles of P V cover head-dimension values [0, dpad). */
    const int dpad = min(DMAX, (HEAD_DIM + PD * VW - 1) / (PD * VW) * (PD * VW));
#if KILN_STORAGE_16 || !defined(KILN_ATTN_D)
    /* The chunk's keys and values in fp32 in rows of DMAX, taken once for
       all blocks (values zero from head_dim to dpad, keys zero past the
       chunk's last visible one up to a whole step). Otherwise P V reads the
       values in place, and the scores the keys, as the per-step form does. */
#define PACKED 1
    float kc[CK * DMAX], vc[CK * DMAX];
#define DMAX_OR_STRIDE DMAX
#define VALUE_VEC(u) VLOAD(u, vrow)
#else
#define PACKED 0
#define DMAX_OR_STRIDE kv_ss
#define VALUE_VEC(u) VLOADU_S(vrow + (u) * VW)
#endif
#endif
    for (int c0 = 0; c0 < kend; c0 += CK) {
#if PR > 0 && PACKED
        const int cn = min(CK, kend - c0);
        for (int j = 0; j < cn; j++) {
            const ulong at = kv0 + (ulong)(c0 + j) * kv_ss;
            for (int d = 0; d < HEAD_DIM; d++) {
                kc[j * DMAX + d] = KILN_LOAD(K, at + d);
                vc[j * DMAX + d] = KILN_LOAD(V, at + d);
            }
            for (int d = HEAD_DIM; d < dpad; d++)
                vc[j * DMAX + d] = 0.0f;
        }
        for (int j = cn; j < min(CK, (cn + BK - 1) / BK * BK); j++)
            for (int d = 0; d < HEAD_DIM; d++)
                kc[j * DMAX + d] = 0.0f;
#endif
        for (int t = 0; t < nb; t++) {
            row_block *x = &blocks[t];
            const int cend = min(c0 + CK, x->kend);
#if PR > 0
            VEC top[QV];
#pragma unroll
            for (int v = 0; v < QV; v++)
                top[v] = x->m[v];
#else
            VEC m[QV], l[QV];
#pragma unroll
            for (int v = 0; v < QV; v++)
                m[v] = x->m[v], l[v] = x->l[v];
#endif
            for (int j0 = c0; j0 < cend; j0 += BK) {
#if PR > 0 && PACKED
#define KEY(j, d) kc[(j0 - c0 + (j)) * DMAX + (d)]
#else
                /* Rows of this block's keys; keys past kend read the last visible one. */
                ulong kp[BK];
#pragma unroll
                for (int j = 0; j < BK; j++)
                    kp[j] = kv0 + (ulong)min(j0 + j, x->kend - 1) * kv_ss;
#if KILN_STORAGE_16 && PR == 0
                /* 16-bit K and V rows of the block, converted once (not per use). */
                float kf[BK * DMAX], vf[BK * DMAX];
                for (int j = 0; j < BK; j++)
                    for (int d = 0; d < HEAD_DIM; d++) {
                        kf[j * DMAX + d] = KILN_LOAD(K, kp[j] + d);
                        vf[j * DMAX + d] = KILN_LOAD(V, kp[j] + d);
                    }
#define KEY(j, d) kf[(j) * DMAX + (d)]
#define VALUE(j, d) vf[(j) * DMAX + (d)]
#else
                KILN_GLOBAL const float *kr[BK], *vr[BK];
#pragma unroll
                for (int j = 0; j < BK; j++)
                    kr[j] = K + kp[j], vr[j] = V + kp[j];
#define KEY(j, d) kr[j][d]
#define VALUE(j, d) vr[j][d]
#endif
#endif /* PR */

                VEC s[QV][BK];
#pragma unroll
                for (int v = 0; v < QV; v++)
#pragma unroll
                    for (int j = 0; j < BK; j++)
                        s[v][j] = (VEC)(0.0f);
                for (int d = 0; d < HEAD_DIM; d++) {
                    VEC q[QV];
#pragma unroll
                    for (int v = 0; v < QV; v++)
                        q[v] = VLOAD(0, x->qt + d * BQ + v * VW);
#pragma unroll
                    for (int j = 0; j < BK; j++) {
                        const VEC kj = (VEC)(KEY(j, d));
#pragma unroll
                        for (int v = 0; v < QV; v++)
                            s[v][j] = fma(q[v], kj, s[v][j]);
                    }
                }
#if KILN_ATTN_MASK
                {
                    float mt[BK * BQ]; /* mask block, transposed: mt[j][r] */
                    for (int r = 0; r < BQ; r++)
#pragma unroll
                        for (int j = 0; j < BK; j++)
                            mt[j * BQ + r] = mask[x->mrow[r] + min(j0 + j, nk - 1)];
#pragma unroll
                    for (int v = 0; v < QV; v++)
#pragma unroll
                        for (int j = 0; j < BK; j++)
                            s[v][j] = fma(VLOAD(0, mt + j * BQ + v * VW), (VEC)(M_LOG2E_F), s[v][j]);
                }
#endif
                if (j0 + BK > x->kfull) /* a key of the block is hidden from some row */
#pragma unroll
                    for (int v = 0; v < QV; v++)
#pragma unroll
                        for (int j = 0; j < BK; j++)
                            s[v][j] = select(s[v][j], (VEC)(-INFINITY), (IVEC)(j0 + j) >= x->lim[v]);

#if PR > 0
#pragma unroll
                for (int v = 0; v < QV; v++)
#pragma unroll
                    for (int j = 0; j < BK; j++) {
                        top[v] = select(top[v], s[v][j], s[v][j] > top[v]);
                        st[(j0 - c0 + j) * QV + v] = s[v][j];
                    }
            }
            if (cend <= c0)
                continue;

            /* The lazy maximum (see below), checked once per chunk. */
            int rescale = 0;
#pragma unroll
            for (int v = 0; v < QV; v++)
                rescale |= ANY(top[v] > x->m[v] + SLACK);
            if (rescale) {
                VEC corr[QV];
#pragma unroll
                for (int v = 0; v < QV; v++) {
                    corr[v] = exp2(x->m[v] - BASE(top[v]));
                    x->l[v] *= corr[v];
                    x->m[v] = top[v];
                }
                const float *cf = (const float *)corr;
                for (int r = 0; r < BQ; r++)
                    for (int e = 0; e < dpad / VW; e++)
                        x->o[r * DV + e] *= cf[r];
            }

            /* The weights, in place, and their sums. */
            VEC base[QV], l[QV];
#pragma unroll
            for (int v = 0; v < QV; v++)
                base[v] = BASE(x->m[v]), l[v] = x->l[v];
            for (int j = 0; j < cend - c0; j++)
#pragma unroll
                for (int v = 0; v < QV; v++) {
                    const VEC w = weight(st[j * QV + v] - base[v]);
                    l[v] += w;
                    st[j * QV + v] = w;
                }
#pragma unroll
            for (int v = 0; v < QV; v++)
                x->l[v] = l[v];

            /* O += P V: tiles of PR rows x PD vectors, each over every key of
               the chunk with its accumulators in registers. */
            for (int r0 = 0; r0 < BQ; r0 += PR)
                for (int e0 = 0; e0 < dpad / VW; e0 += PD) {
                    VEC a[PR][PD];
#pragma unroll
                    for (int r = 0; r < PR; r++)
#pragma unroll
                        for (int u = 0; u < PD; u++)
                            a[r][u] = x->o[(r0 + r) * DV + e0 + u];
                    const float *w = (const float *)st + r0;
#if PACKED
                    const float *vrow = vc + e0 * VW;
#else
                    KILN_GLOBAL const float *vrow = V + kv0 + (ulong)c0 * kv_ss + e0 * VW;
#endif
                    for (int j = c0; j < cend; j++, w += BQ, vrow += DMAX_OR_STRIDE) {
                        VEC vv[PD];
#pragma unroll
                        for (int u = 0; u < PD; u++)
                            vv[u] = VALUE_VEC(u);
#pragma unroll
                        for (int r = 0; r < PR; r++) {
                            const VEC wr = (VEC)(w[r]);
#pragma unroll
                            for (int u = 0; u < PD; u++)
                                a[r][u] = fma(wr, vv[u], a[r][u]);
                        }
                    }
#pragma unroll
                    for (int r = 0; r < PR; r++)
#pragma unroll
                        for (int u = 0; u < PD; u++)
                            x->o[(r0 + r) * DV + e0 + u] = a[r][u];
                }
        }
    }
#else
                /* Online softmax with a lazy maximum: m moves, and O and l
                   are rescaled by exp2(m_old - m_new), only when a row's
                   scores exceed it by more than SLACK; otherwise P =
                   exp2(S - m) stays below 2^SLACK, which neither overflows
                   nor costs precision. A row that has seen only -inf keeps
                   m = -inf and uses 0 as its base. */
                VEC top[QV];
                int rescale = 0;
#pragma unroll
                for (int v = 0; v < QV; v++) {
                    top[v] = m[v];
#pragma unroll
                    for (int j = 0; j < BK; j++)
                        top[v] = fmax(top[v], s[v][j]);
                    rescale |= ANY(top[v] > m[v] + SLACK);
                }
                if (rescale) {
                    VEC corr[QV];
#pragma unroll
                    for (int v = 0; v < QV; v++) {
                        corr[v] = exp2(m[v] - BASE(top[v]));
                        l[v] *= corr[v];
                        m[v] = top[v];
                    }
                    for (int d = 0; d < HEAD_DIM; d++)
#pragma unroll
                        for (int v = 0; v < QV; v++)
                            x->acc[d * QV + v] *= corr[v];
                }
#pragma unroll
                for (int v = 0; v < QV; v++) {
                    const VEC base = BASE(m[v]);
#pragma unroll
                    for (int j = 0; j < BK; j++) {
                        s[v][j] = exp2(s[v][j] - base);
                        l[v] += s[v][j];
                    }
                }

                /* O += P V, per head-dimension index. */
                for (int d = 0; d < HEAD_DIM; d++) {
                    VEC a[QV];
#pragma unroll
                    for (int v = 0; v < QV; v++)
                        a[v] = x->acc[d * QV + v];
#pragma unroll
                    for (int j = 0; j < BK; j++) {
                        const VEC vj = (VEC)(VALUE(j, d));
#pragma unroll
                        for (int v = 0; v < QV; v++)
                            a[v] = fma(s[v][j], vj, a[v]);
                    }
#pragma unroll
                    for (int v = 0; v < QV; v++)
                        x->acc[d * QV + v] = a[v];
                }
            }
#pragma unroll
            for (int v = 0; v < QV; v++)
                x->m[v] = m[v], x->l[v] = l[v];
        }
    }
#endif

    /* O = acc / l, written once; lse = (m + log2 l) ln 2. */
    for (int t = 0; t < nb; t++) {
        const row_block *x = &blocks[t];
        float mf[BQ], lf[BQ], inv[BQ];
#if PR == 0
        float of[BQ];
#endif
        ulong at[BQ];
#pragma unroll
        for (int v = 0; v < QV; v++) {
            VSTORE(x->m[v], v, mf);
            VSTORE(x->l[v], v, lf);
        }
        for (int r = 0; x->row0 + r <= x->last; r++) {
            const int row = x->row0 + r, i = row / group, h = hk * group + row % group;
            at[r] = b * q_sb + h * q_sh + i * q_ss; /* O has Q's layout */
            inv[r] = lf[r] > 0.0f ? 1.0f / lf[r] : 0.0f;
#if KILN_ATTN_LSE
            lse[((ulong)b * heads + h) * nq + i] = lf[r] > 0.0f ? (mf[r] + log2(lf[r])) * M_LN2_F : -INFINITY;
#endif
        }
#if PR > 0
        for (int r = 0; x->row0 + r <= x->last; r++)
            for (int d = 0; d < HEAD_DIM; d++)
                KILN_STORE(((const float *)x->o)[r * DMAX + d] * inv[r], O, at[r] + d);
#else
        for (int d = 0; d < HEAD_DIM; d++) {
#pragma unroll
            for (int v = 0; v < QV; v++)
                VSTORE(x->acc[d * QV + v], v, of);
            for (int r = 0; x->row0 + r <= x->last; r++)
                KILN_STORE(of[r] * inv[r], O, at[r] + d);
        }
#endif
    }
}
