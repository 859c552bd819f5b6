/*
 * Decoding attention, split over the keys (flash-decoding): the rows of one
 * (batch, kv head) are few (its query heads times a short block of query
 * positions, at most 8), so one work-item takes all of them and vectorises
 * along the head dimension instead of along rows, and the keys of each
 * (batch, kv head) are split among several work-items so that even one
 * (batch, kv head) uses the whole device.
 *
 * Work-item (split, (b * kv_heads + kv head) / HK) walks keys [split *
 * split_len, (split + 1) * split_len) in steps of VW keys, for each of its
 * HK kv heads in turn (KILN_DECODE_HEADS): where K's heads are adjacent in
 * a key's row (BSHD), a step then reads whole runs of HK heads from each
 * row instead of one head a row apart. Per row, the step's scores
 * are VW vector accumulators along the head dimension (the keys' rows read
 * from memory for the first row, from cache for the others), folded into
 * one vector whose lanes are the VW keys (LANE_SUMS: VW - 1 pairwise lane
 * sums, not VW horizontal sums). The softmax is online and vectorised over
 * the step's keys: per row the running maximum m (rescaling the output by
 * exp2(m_old - m_new) when it moves), the weights 2^(s - m) by a
 * polynomial, and their running sum as a vector. Then O += P V runs per
 * vector of the head dimension with the rows' accumulators in registers,
 * each value vector loaded once for all rows. K and V are read from memory
 * once, whatever the number of rows.
 *
 * With KILN_DECODE_SPLIT, each work-item writes its rows' partial output
 * (normalised by its own sum, fp32) and partial natural log-sum-exp to the
 * workspace, and attention_combine.cl merges the splits exactly. Without
 * it, the work-item writes O (and lse) itself.
 *
 * Rows are ordered as in the fused kernel: row r is query position r /
 * group of query head kv_head * group + r % group. Visible keys, masks and
 * key lengths follow the fused kernel (attention_f32_fused.cl): row r sees
 * keys j < min(key limit, i_r + nk - nq + 1) with causal masking.
 *
 * Each step first loads one byte of every cache line of the K and V rows
 * KILN_DECODE_AHEAD keys further on (clamped to the last key it reads;
 * their sum goes to a volatile private variable so the loads stay):
 * a kv head's rows are a page apart in BSHD, one row per page, which
 * hardware prefetchers do not follow, so without it each step waits for
 * memory. POCL's prefetch() did nothing measurable there. On a 2-vCPU Zen 3
 * (POCL 3.1), H32/KV8, one query, 8192 keys, d128: fp32 14.4 -> 9.1 ms
 * touching 32 keys ahead (16: 9.8, 64: 10.6), 8.5 -> 7.2 ms in BHSD; fp16
 * 7.2-8.0 -> 5.8-6.1 ms (touching by converted fp16 loads instead of bytes
 * took 10.2 ms).
 *
 * Parameters (-D): KILN_DECODE_VW (VW, dividing the head dimension; also
 * the keys per step), KILN_DECODE_D (the head dimension), KILN_DECODE_ROWS
 * (R: group * seq_q), KILN_DECODE_HEADS (HK, dividing the kv heads),
 * KILN_DECODE_SPLIT (0 or 1), KILN_DECODE_AHEAD (keys,
 * a multiple of VW; 0: no touching), the
 * switches KILN_ATTN_CAUSAL, KILN_ATTN_MASK, KILN_ATTN_KEY_LENGTHS,
 * KILN_ATTN_LSE, and KILN_F16 or KILN_BF16.
 */
#define VW KILN_DECODE_VW
#define D KILN_DECODE_D
#define DV (D / VW)
#define R KILN_DECODE_ROWS
#define HK KILN_DECODE_HEADS

#include "common/portability.h"
#include "common/vector.h"

#include "attention/args.h"
#include "attention/weights.h"

/* Global size (splits, batch * kv_heads / HK), one work-item per work-group; the
   arguments of attention/args.h. part (fp32, [split][row][D]) and part_lse
   ([split][row]) hold the splits' results, rows numbered as lse:
   (b * heads + h) * nq + i. */
KILN_KERNEL KILN_WORK_GROUP_SIZE(1, 1, 1)
void attention_f32_decode(KILN_ATTENTION_KERNEL_ARGS, KILN_ATTENTION_SPLIT_ARGS)
{
    const int split = KILN_GLOBAL_ID(0), kv_heads = heads / group;
    const int b = KILN_GLOBAL_ID(1) / (kv_heads / HK), hk0 = KILN_GLOBAL_ID(1) % (kv_heads / HK) * HK;
    (void)mask, (void)key_lengths, (void)O, (void)lse, (void)part, (void)part_lse, (void)m_sb, (void)m_sh;
    (void)head_dim; /* D */
    int klimit = nk;
#if KILN_ATTN_KEY_LENGTHS
    klimit = clamp(key_lengths[b], 0, nk);
#endif
    const int k0 = split * split_len, k1 = min(klimit, k0 + split_len);

    /* Per kv head c of the work-item's HK and row r: */
    VEC q[HK][R][DV], o[HK][R][DV], lsum[HK][R];
    float m[HK][R];
    int lim[R], kend = k0;
    ulong at[HK][R];
#if KILN_ATTN_MASK
    ulong mrow[HK][R];
#endif
    for (int r = 0; r < R; r++) {
        const int i = r / group;
#if KILN_ATTN_CAUSAL
        lim[r] = min(clamp(i + nk - nq + 1, 0, klimit), k1);
#else
        lim[r] = k1;
#endif
        kend = max(kend, lim[r]);
        for (int c = 0; c < HK; c++) {
            const int h = (hk0 + c) * group + r % group;
            at[c][r] = b * q_sb + h * q_sh + i * q_ss;
#pragma unroll
            for (int e = 0; e < DV; e++) {
                q[c][r][e] = VLOADU_S(Q + at[c][r] + e * VW) * scale_log2;
                o[c][r][e] = (VEC)(0.0f);
            }
            m[c][r] = -INFINITY, lsum[c][r] = (VEC)(0.0f);
#if KILN_ATTN_MASK
            mrow[c][r] = b * m_sb + h * m_sh + (ulong)i * nk;
#endif
        }
    }

#if KILN_DECODE_AHEAD
    volatile uint touched;
#endif
    for (int j0 = k0; j0 < kend; j0 += VW) {
#if KILN_DECODE_AHEAD
        {
            /* A byte of each 64-byte line, as stored: no conversion. */
            uint t = 0;
            for (int c = 0; c < HK; c++) {
                const ulong kv0 = b * kv_sb + (hk0 + c) * kv_sh;
#pragma unroll
                for (int j = 0; j < VW; j++) {
                    const ulong at_j = kv0 + (ulong)min(j0 + KILN_DECODE_AHEAD + j, kend - 1) * kv_ss;
                    KILN_GLOBAL const uchar *kb = (KILN_GLOBAL const uchar *)(K + at_j),
                                            *vb = (KILN_GLOBAL const uchar *)(V + at_j);
#pragma unroll
                    for (int e = 0; e < D * (int)sizeof(KILN_STORAGE); e += 64)
                        t += kb[e] + vb[e];
                }
            }
            touched = t;
        }
#endif
        for (int c = 0; c < HK; c++) {
            /* The step's keys, those past kend reading the last visible one
               (and hidden below). */
            const ulong kv0 = b * kv_sb + (hk0 + c) * kv_sh;
            KILN_GLOBAL const KILN_STORAGE *kr[VW], *vr[VW];
#pragma unroll
            for (int j = 0; j < VW; j++) {
                const ulong at_j = kv0 + (ulong)min(j0 + j, kend - 1) * kv_ss;
                kr[j] = K + at_j, vr[j] = V + at_j;
            }
            float p[R][VW]; /* the step's weights, lanes of keys */
#pragma unroll
            for (int r = 0; r < R; r++) {
                VEC acc[VW];
#pragma unroll
                for (int j = 0; j < VW; j++)
                    acc[j] = (VEC)(0.0f);
#pragma unroll
                for (int e = 0; e < DV; e++) {
                    const VEC qe = q[c][r][e];
#pragma unroll
                    for (int j = 0; j < VW; j++)
                        acc[j] = fma(qe, VLOADU_S(kr[j] + e * VW), acc[j]);
                }
                VEC s = LANE_SUMS(acc);
#if KILN_ATTN_MASK
                float mk[VW];
#pragma unroll
                for (int j = 0; j < VW; j++)
                    mk[j] = mask[mrow[c][r] + min(j0 + j, nk - 1)];
                s = fma(VLOAD(0, mk), (VEC)(M_LOG2E_F), s);
#endif
                s = select(s, (VEC)(-INFINITY), (IOTA + j0) >= (IVEC)(lim[r]));
                /* The online softmax: a row that has seen only -inf keeps
                   m = -inf and takes its weights against 0. */
                const float top = fmax(m[c][r], lane_max(s));
                if (top > m[c][r]) {
                    const float corr = exp2(m[c][r] - top);
                    lsum[c][r] *= corr;
#pragma unroll
                    for (int e = 0; e < DV; e++)
                        o[c][r][e] *= corr;
                    m[c][r] = top;
                }
                const VEC w = weight(s - (VEC)(top == -INFINITY ? 0.0f : top));
                lsum[c][r] += w;
                VSTORE(w, 0, p[r]);
            }
            /* O += P V, per vector of the head dimension. */
#pragma unroll
            for (int e = 0; e < DV; e++) {
                VEC a[R];
#pragma unroll
                for (int r = 0; r < R; r++)
                    a[r] = o[c][r][e];
#pragma unroll
                for (int j = 0; j < VW; j++) {
                    const VEC ve = VLOADU_S(vr[j] + e * VW);
#pragma unroll
                    for (int r = 0; r < R; r++)
                        a[r] = fma((VEC)(p[r][j]), ve, a[r]);
                }
#pragma unroll
                for (int r = 0; r < R; r++)
                    o[c][r][e] = a[r];
            }
        }
    }

    for (int c = 0; c < HK; c++)
        for (int r = 0; r < R; r++) {
            float lf[VW];
            VSTORE(lsum[c][r], 0, lf);
            float l = 0.0f;
            for (int j = 0; j < VW; j++)
                l += lf[j];
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            const float row_lse = l > 0.0f ? (m[c][r] + log2(l)) * M_LN2_F : -INFINITY;
            const int i = r / group, h = (hk0 + c) * group + r % group;
            const ulong row = ((ulong)b * heads + h) * nq + i;
#if KILN_DECODE_SPLIT
            const ulong rows = (ulong)KILN_GLOBAL_SIZE(1) * HK * group * nq;
            KILN_GLOBAL float *out = part + ((ulong)split * rows + row) * D;
#pragma unroll
            for (int e = 0; e < DV; e++)
                VSTORE(o[c][r][e] * inv, e, out);
            part_lse[(ulong)split * rows + row] = row_lse;
#else
#pragma unroll
            for (int e = 0; e < DV; e++)
                VSTOREU_S(o[c][r][e] * inv, O + at[c][r] + e * VW);
#if KILN_ATTN_LSE
            lse[row] = row_lse;
#endif
#endif
        }
}
