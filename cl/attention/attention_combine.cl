/*
 * The merge of an attention split over the keys (flash-decoding): each
 * split wrote, for every row, its output normalised by its own sum (fp32,
 * part[split][row][d]) and its natural log-sum-exp (part_lse[split][row]),
 * rows numbered as lse: (b * heads + h) * nq + i. The result is exact:
 *   lse = log sum_s exp(lse_s),  O = sum_s exp(lse_s - lse) O_s.
 * A split a row saw no key of has lse_s = -inf and weight 0; a row that saw
 * none at all gets O = 0 and lse = -inf. A work-item merges COLS
 * consecutive elements of one row of O (the one holding d = 0 also writes
 * lse): the host takes one element on GPUs and a whole row on CPUs, where
 * each work-item would otherwise compute the row's split weights (an exp
 * per split) and its row and column (64-bit divisions) again for every
 * element. No vector syntax, so every backend compiles it.
 *
 * Parameters (-D): KILN_COMBINE_WG (the work-group size), KILN_COMBINE_COLS
 * (COLS), KILN_ATTN_LSE, and KILN_F16 or KILN_BF16 (O's storage).
 */
#include "common/portability.h"
#include "common/storage.h"

#define COLS KILN_COMBINE_COLS
/* Splits merged at once: all their loads are issued before any is used. */
#define CHUNK 16

/* Work-item e: row e / groups, elements from (e % groups) * COLS, where
   groups = ceil(head_dim / COLS). One pass over the splits, CHUNK at a
   time: the chunk's log-sum-exps (and, one element a work-item, its
   partial outputs) are loaded together, indices past the last split
   clamped to it and their lse taken as -inf, so that a GPU waits on memory
   once a chunk instead of about twice a split (the loops over runtime
   split counts unrolled by four, each partial output loaded behind its
   weight); the running maximum rescales what the chunks before summed,
   which one chunk of splits never does. */
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_COMBINE_WG, 1, 1)
void attention_combine(KILN_GLOBAL const float *part, KILN_GLOBAL const float *part_lse, KILN_GLOBAL KILN_STORAGE *O,
                       KILN_GLOBAL float *lse, const int splits, const ulong rows, const int head_dim, const int nq,
                       const int heads, const ulong q_sb, const ulong q_sh, const ulong q_ss)
{
    const ulong groups = (ulong)((head_dim + COLS - 1) / COLS), e = KILN_GLOBAL_ID(0), row = e / groups;
    if (row >= rows)
        return;
    (void)lse;
    const int d0 = (int)(e % groups) * COLS, i = (int)(row % (ulong)nq), h = (int)(row / (ulong)nq % (ulong)heads);
    const int cols = min(COLS, head_dim - d0);
    const ulong b = row / ((ulong)nq * heads);
    float top = -INFINITY, total = 0.0f, acc[COLS];
    for (int c = 0; c < COLS; c++)
        acc[c] = 0.0f;
    for (int s0 = 0; s0 < splits; s0 += CHUNK) {
        float l[CHUNK];
#if COLS == 1
        float p[CHUNK];
#endif
#pragma unroll
        for (int j = 0; j < CHUNK; j++) {
            const ulong at = (ulong)min(s0 + j, splits - 1) * rows + row;
            l[j] = part_lse[at];
#if COLS == 1
            p[j] = part[at * head_dim + d0];
#endif
        }
        float m = top;
#pragma unroll
        for (int j = 0; j < CHUNK; j++) {
            if (s0 + j >= splits)
                l[j] = -INFINITY;
            m = fmax(m, l[j]);
        }
        /* While no split so far saw a key (m = -inf), every weight below is
           exp(-inf) = 0, and so is r, of sums that are still 0. No branch
           here: one would keep a GPU's compiler from issuing the partial
           outputs' loads with the chunk's log-sum-exps. */
        const float base = m == -INFINITY ? 0.0f : m, r = exp(top - base);
        total *= r;
#if COLS == 1
        acc[0] *= r;
#else
        if (r != 1.0f)
            for (int c = 0; c < COLS; c++)
                acc[c] *= r;
#endif
        top = m;
#pragma unroll
        for (int j = 0; j < CHUNK; j++) {
            /* A split the row saw no key of: weight 0, and its output is
               not added (0 * NaN would be NaN). One element a work-item,
               the output's bits are masked rather than the multiply-add
               skipped: a condition on w let the compiler move the load
               behind the weight (NVRTC, sm_90: one of the chunk's 16). */
            const float w = exp(l[j] - base);
            total += w;
#if COLS == 1
            acc[0] = fma(w, as_float(as_uint(p[j]) & (w != 0.0f ? 0xffffffffu : 0u)), acc[0]);
#else
            if (w != 0.0f) {
                KILN_GLOBAL const float *ps = part + ((ulong)(s0 + j) * rows + row) * head_dim + d0;
                for (int c = 0; c < cols; c++)
                    acc[c] = fma(w, ps[c], acc[c]);
            }
#endif
        }
    }
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    KILN_GLOBAL KILN_STORAGE *out = O + b * q_sb + h * q_sh + i * q_ss + d0;
    for (int c = 0; c < cols; c++)
        KILN_STORE(acc[c] * inv, out, c);
#if KILN_ATTN_LSE
    if (d0 == 0)
        lse[row] = total > 0.0f ? top + log(total) : -INFINITY;
#endif
}
