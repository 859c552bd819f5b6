/*
 * The kernels of the naive attention algorithm besides kiln's GEMM (which
 * computes the scores S = scale * Q K^T and then O = P V):
 *
 * attention_softmax_rows: one work-item per row of S ([batch][heads][seq_q]
 * rows of seq_kv scores, in place). Adds the additive mask (KILN_ATTN_MASK),
 * hides the keys the row does not see -- j >= key_lengths[b] clamped to
 * [0, seq_kv] (KILN_ATTN_KEY_LENGTHS), j > i + seq_kv - seq_q
 * (KILN_ATTN_CAUSAL) -- and replaces the row by its softmax, the hidden keys
 * by 0. A row with no visible key, or only -inf scores, becomes all 0 with
 * lse = -inf. KILN_ATTN_LSE writes the natural log-sum-exp of each row.
 *
 * attention_widen / attention_narrow: fp16 tensors to fp32 copies and back,
 * so that the GEMMs and the softmax run on fp32 scores.
 *
 * KILN_UTIL_WG is the work-group size from the profile.
 */

#include "common/portability.h"
#include "common/storage.h"

#if KILN_WANTS(attention_softmax_rows)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void attention_softmax_rows(KILN_GLOBAL float *S, KILN_GLOBAL const float *mask, KILN_GLOBAL const int *key_lengths,
                            KILN_GLOBAL float *lse, const ulong rows, const int nq, const int nk, const int heads,
                            const ulong m_sb, const ulong m_sh)
{
    const size_t row = KILN_GLOBAL_ID(0);
    if (row >= rows)
        return;
    const int i = row % nq, h = row / nq % heads, b = row / nq / heads;
    (void)mask, (void)key_lengths, (void)lse, (void)m_sb, (void)m_sh, (void)h, (void)b, (void)i;
    int lim = nk;
#if KILN_ATTN_KEY_LENGTHS
    lim = clamp(key_lengths[b], 0, nk);
#endif
#if KILN_ATTN_CAUSAL
    lim = clamp(i + nk - nq + 1, 0, lim);
#endif
    KILN_GLOBAL float *s = S + row * nk;
#if KILN_ATTN_MASK
    KILN_GLOBAL const float *mrow = mask + b * m_sb + h * m_sh + (ulong)i * nk;
#endif
    float top = -INFINITY;
    for (int j = 0; j < lim; j++) {
#if KILN_ATTN_MASK
        s[j] += mrow[j];
#endif
        top = fmax(top, s[j]);
    }
    float sum = 0.0f;
    if (top != -INFINITY)
        for (int j = 0; j < lim; j++) {
            s[j] = exp(s[j] - top);
            sum += s[j];
        }
    const float inv = 1.0f / sum;
    for (int j = 0; j < nk; j++)
        s[j] = j < lim && sum > 0.0f ? s[j] * inv : 0.0f;
#if KILN_ATTN_LSE
    lse[row] = sum > 0.0f ? top + log(sum) : -INFINITY;
#endif
}
#endif

#if KILN_STORAGE_16
#if KILN_WANTS(attention_widen)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void attention_widen(KILN_GLOBAL const KILN_STORAGE *src, KILN_GLOBAL float *dst, const ulong count)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i < count)
        dst[i] = KILN_LOAD(src, i);
}
#endif

#if KILN_WANTS(attention_narrow)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void attention_narrow(KILN_GLOBAL const float *src, KILN_GLOBAL KILN_STORAGE *dst, const ulong count)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i < count)
        KILN_STORE(src[i], dst, i);
}
#endif
#endif
