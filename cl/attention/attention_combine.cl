/*
 * The merge of an attention split over the keys (flash-decoding): each
 * split wrote, for every row, its output normalised by its own sum (fp32,
 * part[split][row][d]) and its natural log-sum-exp (part_lse[split][row]),
 * rows numbered as lse: (b * heads + h) * nq + i. The result is exact:
 *   lse = log sum_s exp(lse_s),  O = sum_s exp(lse_s - lse) O_s.
 * A split a row saw no key of has lse_s = -inf and weight 0; a row that saw
 * none at all gets O = 0 and lse = -inf. One work-item per element of O
 * (the one of d = 0 also writes lse); no vector syntax, so every backend
 * compiles it.
 *
 * Parameters (-D): KILN_UTIL_WG (the work-group size), KILN_ATTN_LSE, and
 * KILN_F16 or KILN_BF16 (O's storage).
 */
#include "common/portability.h"
#include "common/storage.h"

KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void attention_combine(KILN_GLOBAL const float *part, KILN_GLOBAL const float *part_lse, KILN_GLOBAL KILN_STORAGE *O,
                       KILN_GLOBAL float *lse, const int splits, const ulong rows, const int head_dim, const int nq,
                       const int heads, const ulong q_sb, const ulong q_sh, const ulong q_ss)
{
    const ulong e = KILN_GLOBAL_ID(0), row = e / (ulong)head_dim;
    if (row >= rows)
        return;
    (void)lse;
    const int d = (int)(e % (ulong)head_dim), i = (int)(row % (ulong)nq), h = (int)(row / (ulong)nq % (ulong)heads);
    const ulong b = row / ((ulong)nq * heads);
    float top = -INFINITY;
    for (int s = 0; s < splits; s++)
        top = fmax(top, part_lse[(ulong)s * rows + row]);
    float acc = 0.0f, total = 0.0f;
    if (top != -INFINITY)
        for (int s = 0; s < splits; s++) {
            const float w = exp(part_lse[(ulong)s * rows + row] - top);
            total += w;
            if (w != 0.0f)
                acc = fma(w, part[((ulong)s * rows + row) * head_dim + d], acc);
        }
    KILN_STORE(total > 0.0f ? acc / total : 0.0f, O, b * q_sb + h * q_sh + i * q_ss + d);
#if KILN_ATTN_LSE
    if (d == 0)
        lse[row] = total > 0.0f ? top + log(total) : -INFINITY;
#endif
}
