/*
 * Decoding attention, split over the keys (flash-decoding): the rows of one
 * (batch, kv head) are few (its query heads times a short block of query
 * positions, at most 8), so one work-item takes all of them and vectorises
 * along the head dimension instead of along rows, and the keys of each
 * (batch, kv head) are split among several work-items so that even one
 * (batch, kv head) uses the whole device.
 *
 * Work-item (split, (b * kv_heads + kv head) / HK) walks keys [split *
 * split_len, (split + 1) * split_len) in steps of VW keys, for HK kv heads
 * (KILN_DECODE_HEADS): where K's heads are adjacent in a key's row (BSHD),
 * taking several reads whole runs of HK heads from each row instead of one
 * head a row apart. A step has three phases:
 *
 * 1. The scores, G keys at a time (about 16 accumulators: G keys by RB
 *    rows, R in blocks of at most 4), for each kv head in turn: each key
 *    vector loaded feeds RB rows at once, and the G keys' rows are read
 *    whole (from cache for the second block of rows) and in address
 *    order (in BSHD), G pages at a time, which the hardware prefetchers
 *    follow. Each row's G accumulators are folded into partial sums
 *    (LANE_SUMS_G), and a row's VW / G partials into one vector whose lanes
 *    are the step's keys (LANE_SUMS_GROUPS: VW - 1 pairwise lane sums in
 *    all, not VW horizontal sums).
 * 2. The online softmax, vectorised over the step's keys, per kv head and
 *    row: the running maximum m (rescaling the output by exp2(m_old -
 *    m_new) when it moves), the weights 2^(s - m) by a polynomial, their
 *    running sum as a vector.
 * 3. O += P V in the same order as the scores, GV keys' rows at a time
 *    (8, or VW if fewer), each kv head in turn, E2 vectors of the head
 *    dimension of every row at a time in registers, each value vector
 *    loaded once for all rows. With 4 keys a pass (as the scores), the
 *    accumulators' loads and stores cost more: on a 2-vCPU Zen 5, one
 *    query, 8192 keys, d128, 8 keys a pass against 4: H32/KV8 1.00-1.09x
 *    (16 keys: 0.92x), fp16 1.09x, KV4 1.05x, H8/KV8 1.12x.
 *
 * K and V are read from memory once, whatever the number of rows. The
 * loops over groups, heads and vectors stay loops (unroll 1): unrolled, the
 * compiler kept every key vector of a step for the next rows and spilled
 * them.
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
 * Fetching ahead. With one kv head a work-item (HK = 1), each step first
 * loads one byte of every cache line of the K and V rows KILN_DECODE_AHEAD
 * keys further on (clamped to the last key it reads; their sum goes to a
 * volatile private variable so the loads stay): in BSHD such rows are a
 * page apart, which hardware prefetchers do not follow. POCL's prefetch()
 * did nothing measurable there. On a 2-vCPU Zen 3 (POCL 3.1), H32/KV8, one
 * query, 8192 keys, d128: fp32 14.4 -> 9.1 ms touching 32 keys ahead (16:
 * 9.8, 64: 10.6), 8.5 -> 7.2 ms in BHSD; fp16 7.2-8.0 -> 5.8-6.1 ms
 * (touching by converted fp16 loads instead of bytes took 10.2 ms). With
 * several (whole rows read in order), touching every line cost more than
 * it saved; instead each step prefetches (KILN_PREFETCH, a compiler
 * built-in) the first line of each 4 KiB page of the rows
 * KILN_DECODE_PREFETCH keys further on, which starts the hardware
 * prefetcher on each page early. On a 2-vCPU Zen 5 (POCL 3.1, BSHD as
 * above): 1.82-1.93 -> 1.75-1.80 ms; every line instead, 1.96-2.03 ms
 * (the prefetches queue behind the core's few outstanding misses); 32 to
 * 192 keys ahead alike.
 *
 * Streaming (KILN_DECODE_STREAM keys, with several kv heads a work-item):
 * every load of K in the scores (first block of rows) and of V in O += P V
 * is paired with a prefetch into the nearest cache (KILN_PREFETCH_L1) of the
 * same line of the row KILN_DECODE_STREAM keys further on (clamped to the
 * last key read), in place of the page prefetch. Spread through the
 * arithmetic so, the misses are in flight while the core computes: on that
 * Zen 5 a core that computes otherwise fetches nothing (a C loop summing 64
 * MiB with two multiply-adds a vector took the sum of its time from cache
 * and its time from memory), and a burst of prefetches at the start of a
 * step stalled instead. Alternating rounds there (eight for H32/KV8, three
 * for the others), one query, 8192 keys, d128, BSHD, 8 keys ahead against
 * the page prefetch: H32/KV8 1.71-1.87 -> 1.40-1.67 ms, fp16 0.95-1.04 ->
 * 0.67-0.68, H32/KV4 1.18-1.28 -> 0.73-0.77, d64 0.94-0.96 -> 0.58-0.59;
 * 12 keys alike, 4 and 16-32 slower, the second level's prefetch about 5%
 * slower. With two rows or one (H16/KV8, H8/KV8)
 * a key has too little arithmetic to hide anything and the prefetches only
 * cost (H8/KV8 1.12-1.15 -> 1.47-1.53 ms), so the plan streams from four
 * rows up (src/ops/attention_decode.c). With KILN_DECODE_STREAM_L2, each
 * such load also prefetches into L2 the same line of the row that many
 * keys on: the L1's few outstanding misses alone left a Zen 4 EPYC's
 * kernel at about 31 GB/s when a read measured 52 (docs/attention.md).
 *
 * Parameters (-D): KILN_DECODE_VW (VW, dividing the head dimension; also
 * the keys per step), KILN_DECODE_D (the head dimension), KILN_DECODE_ROWS
 * (R: group * seq_q), KILN_DECODE_HEADS (HK, dividing the kv heads),
 * KILN_DECODE_SPLIT (0 or 1), KILN_DECODE_AHEAD and KILN_DECODE_PREFETCH
 * (keys, multiples of VW) and KILN_DECODE_STREAM (keys; all three 0: none;
 * at most one of them), KILN_DECODE_STREAM_L2 (keys, with
 * KILN_DECODE_STREAM; 0: none), the
 * switches KILN_ATTN_CAUSAL, KILN_ATTN_MASK, KILN_ATTN_KEY_LENGTHS,
 * KILN_ATTN_LSE, and KILN_F16 or KILN_BF16.
 */
#define VW KILN_DECODE_VW
#define D KILN_DECODE_D
#define DV (D / VW)
#define R KILN_DECODE_ROWS
#define HK KILN_DECODE_HEADS
/* The scores are computed for G keys and RB rows at once: about 16
   accumulators. */
#if R <= 4
#define RB R
#else
#define RB 4
#endif
#if RB == 1
#define G 16
#elif RB == 2
#define G 8
#else
#define G 4
#endif
#if G > VW
#undef G
#define G VW
#endif
/* VW / G as a literal, for pasting. */
#if VW == G
#define GROUPS 1
#elif VW == 2 * G
#define GROUPS 2
#elif VW == 4 * G
#define GROUPS 4
#elif VW == 8 * G
#define GROUPS 8
#else
#define GROUPS 16
#endif
/* Keys and vectors of the head dimension per pass of O += P V. */
#if VW > 8
#define GV 8
#else
#define GV VW
#endif
#if DV % 2 == 0
#define E2 2
#else
#define E2 1
#endif

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
    (void)mask, (void)key_lengths, (void)O, (void)lse, (void)part, (void)part_lse, (void)part_rows, (void)m_sb, (void)m_sh;
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
    /* The rows of key 0 for the work-item's first kv head; kv head c is
       c * kv_sh further on. */
    const ulong kv0 = b * kv_sb + hk0 * kv_sh;
    for (int j0 = k0; j0 < kend; j0 += VW) {
#if KILN_DECODE_AHEAD
        {
            /* A byte of each 64-byte line, as stored: no conversion. */
            uint t = 0;
            for (int c = 0; c < HK; c++) {
#pragma unroll
                for (int j = 0; j < VW; j++) {
                    const ulong at_j = kv0 + c * kv_sh + (ulong)min(j0 + KILN_DECODE_AHEAD + j, kend - 1) * kv_ss;
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
#if KILN_DECODE_PREFETCH
        /* The first line of each 4 KiB page of the rows of the keys
           KILN_DECODE_PREFETCH further on (clamped to the last key read). */
#pragma unroll 1
        for (int j = 0; j < VW; j++) {
            const ulong at_j = kv0 + (ulong)min(j0 + KILN_DECODE_PREFETCH + j, kend - 1) * kv_ss;
#pragma unroll
            for (int e = 0; e < HK * D * (int)sizeof(KILN_STORAGE); e += 4096) {
                KILN_PREFETCH((KILN_GLOBAL const uchar *)(K + at_j) + e);
                KILN_PREFETCH((KILN_GLOBAL const uchar *)(V + at_j) + e);
            }
        }
#endif
        /* The step's keys for the first kv head (those past kend reading
           the last visible one, hidden below). */
        KILN_GLOBAL const KILN_STORAGE *kr[VW], *vr[VW];
#pragma unroll
        for (int j = 0; j < VW; j++) {
            const ulong at_j = kv0 + (ulong)min(j0 + j, kend - 1) * kv_ss;
            kr[j] = K + at_j, vr[j] = V + at_j;
        }
#if KILN_DECODE_STREAM
        /* The rows KILN_DECODE_STREAM keys further on, fetched line by line
           beside the step's own loads (and those KILN_DECODE_STREAM_L2 keys
           on, into L2). */
        KILN_GLOBAL const KILN_STORAGE *kn[VW], *vn[VW];
#if KILN_DECODE_STREAM_L2
        KILN_GLOBAL const KILN_STORAGE *kf[VW], *vf[VW];
#endif
#pragma unroll
        for (int j = 0; j < VW; j++) {
            const ulong at_j = kv0 + (ulong)min(j0 + KILN_DECODE_STREAM + j, kend - 1) * kv_ss;
            kn[j] = K + at_j, vn[j] = V + at_j;
#if KILN_DECODE_STREAM_L2
            const ulong far_j = kv0 + (ulong)min(j0 + KILN_DECODE_STREAM_L2 + j, kend - 1) * kv_ss;
            kf[j] = K + far_j, vf[j] = V + far_j;
#endif
        }
#endif
        /* The scores, G keys at a time for every kv head and row: where the
           kv heads are adjacent in a key's row (BSHD), the G rows are read
           whole and in order. */
        VEC sums[HK][R][GROUPS];
#pragma unroll 1
        for (int g = 0; g < GROUPS; g++)
#pragma unroll 1
            for (int c = 0; c < HK; c++)
#pragma unroll
                for (int r0 = 0; r0 < R; r0 += RB) {
                    VEC acc[RB][G];
#pragma unroll
                    for (int r = 0; r < RB; r++)
#pragma unroll
                        for (int j = 0; j < G; j++)
                            acc[r][j] = (VEC)(0.0f);
#pragma unroll 1
                    for (int e = 0; e < DV; e++) {
                        VEC kv[G];
#pragma unroll
                        for (int j = 0; j < G; j++)
                            kv[j] = VLOADU_S(kr[g * G + j] + c * kv_sh + e * VW);
#if KILN_DECODE_STREAM
                        if (r0 == 0)
#pragma unroll
                            for (int j = 0; j < G; j++) {
                                KILN_PREFETCH_L1(kn[g * G + j] + c * kv_sh + e * VW);
#if KILN_DECODE_STREAM_L2
                                KILN_PREFETCH(kf[g * G + j] + c * kv_sh + e * VW);
#endif
                            }
#endif
#pragma unroll
                        for (int r = 0; r < RB && r0 + r < R; r++) {
                            const VEC qe = q[c][r0 + r][e];
#pragma unroll
                            for (int j = 0; j < G; j++)
                                acc[r][j] = fma(qe, kv[j], acc[r][j]);
                        }
                    }
#pragma unroll
                    for (int r = 0; r < RB && r0 + r < R; r++)
                        sums[c][r0 + r][g] = CAT(LANE_SUMS_, G)(acc[r], 0);
                }
        float p[HK][R][VW]; /* the step's weights, lanes of keys */
#pragma unroll 1
        for (int c = 0; c < HK; c++)
#pragma unroll
            for (int r = 0; r < R; r++) {
                VEC s = CAT(LANE_SUMS_, GROUPS)(sums[c][r], 0);
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
                VSTORE(w, 0, p[c][r]);
            }
        /* O += P V, GV keys (read in order, as above) and E2 vectors of the
           head dimension at a time. */
#pragma unroll 1
        for (int g = 0; g < VW / GV; g++)
#pragma unroll 1
            for (int c = 0; c < HK; c++)
#pragma unroll 1
                for (int e = 0; e < DV; e += E2) {
                    VEC a[E2][R];
#pragma unroll
                    for (int x = 0; x < E2; x++)
#pragma unroll
                        for (int r = 0; r < R; r++)
                            a[x][r] = o[c][r][e + x];
#pragma unroll
                    for (int j = 0; j < GV; j++)
#pragma unroll
                        for (int x = 0; x < E2; x++) {
                            const VEC ve = VLOADU_S(vr[g * GV + j] + c * kv_sh + (e + x) * VW);
#if KILN_DECODE_STREAM
                            KILN_PREFETCH_L1(vn[g * GV + j] + c * kv_sh + (e + x) * VW);
#if KILN_DECODE_STREAM_L2
                            KILN_PREFETCH(vf[g * GV + j] + c * kv_sh + (e + x) * VW);
#endif
#endif
#pragma unroll
                            for (int r = 0; r < R; r++)
                                a[x][r] = fma((VEC)(p[c][r][g * GV + j]), ve, a[x][r]);
                        }
#pragma unroll
                    for (int x = 0; x < E2; x++)
#pragma unroll
                        for (int r = 0; r < R; r++)
                            o[c][r][e + x] = a[x][r];
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
            KILN_GLOBAL float *out = part + ((ulong)split * part_rows + row) * D;
#pragma unroll
            for (int e = 0; e < DV; e++)
                VSTORE(o[c][r][e] * inv, e, out);
            part_lse[(ulong)split * part_rows + row] = row_lse;
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
