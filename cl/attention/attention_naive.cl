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

__kernel __attribute__((reqd_work_group_size(KILN_UTIL_WG, 1, 1)))
void attention_softmax_rows(__global float *S, __global const float *mask, __global const int *key_lengths,
                            __global float *lse, const ulong rows, const int nq, const int nk, const int heads,
                            const ulong m_sb, const ulong m_sh)
{
    const size_t row = get_global_id(0);
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
    __global float *s = S + row * nk;
#if KILN_ATTN_MASK
    __global const float *mrow = mask + b * m_sb + h * m_sh + (ulong)i * nk;
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

#if KILN_F16
__kernel __attribute__((reqd_work_group_size(KILN_UTIL_WG, 1, 1)))
void attention_widen(__global const half *src, __global float *dst, const ulong count)
{
    const size_t i = get_global_id(0);
    if (i < count)
        dst[i] = vload_half(i, src);
}

__kernel __attribute__((reqd_work_group_size(KILN_UTIL_WG, 1, 1)))
void attention_narrow(__global const float *src, __global half *dst, const ulong count)
{
    const size_t i = get_global_id(0);
    if (i < count)
        vstore_half(src[i], i, dst);
}
#endif
