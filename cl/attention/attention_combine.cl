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

/* Work-item e: row e / groups, elements from (e % groups) * COLS, where
   groups = ceil(head_dim / COLS). */
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
    float top = -INFINITY;
    for (int s = 0; s < splits; s++)
        top = fmax(top, part_lse[(ulong)s * rows + row]);
    float acc[COLS], total = 0.0f;
    for (int c = 0; c < COLS; c++)
        acc[c] = 0.0f;
    if (top != -INFINITY)
        for (int s = 0; s < splits; s++) {
            const float w = exp(part_lse[(ulong)s * rows + row] - top);
            total += w;
            if (w == 0.0f)
                continue;
            KILN_GLOBAL const float *ps = part + ((ulong)s * rows + row) * head_dim + d0;
            for (int c = 0; c < cols; c++)
                acc[c] = fma(w, ps[c], acc[c]);
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
