/*
 * What the CUDA backend's attention kernels (attention_f16_mma.cu,
 * attention_decode.cu) share with each other and with the flash kernel's
 * definitions (cl/attention/attention_f32_flash.cl): the keys a block sees
 * and the keys each query position sees, under the switches
 * KILN_ATTN_KEY_LENGTHS and KILN_ATTN_CAUSAL (causal masking aligned to
 * the end of the keys), and the constants of base 2.
 */
#ifndef KILN_CU_ATTENTION_KEYS_H
#define KILN_CU_ATTENTION_KEYS_H

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
#define NEG_INF __int_as_float(0xff800000) /* NVRTC has no INFINITY */

/* Batch item b's keys [*k0, *k1): those of split `split` (split_len keys
   each) where `split_len` > 0, else all; never past its key length
   (*klimit, clamped to [0, nk]). */
__device__ __forceinline__ void block_keys(const int *key_lengths, const int nk, const int b, const int split,
                                           const int split_len, int *k0, int *k1, int *klimit)
{
    (void)key_lengths, (void)b;
    *klimit = nk;
#if KILN_ATTN_KEY_LENGTHS
    *klimit = min(max(key_lengths[b], 0), nk);
#endif
    *k0 = split_len > 0 ? split * split_len : 0;
    *k1 = split_len > 0 ? min(*klimit, *k0 + split_len) : *klimit;
}

/* The keys query position i of nq sees, below k1: all of them, or with
   causal masking those up to i + nk - nq (and not past klimit). */
__device__ __forceinline__ int row_keys(const int i, const int nq, const int nk, const int k1, const int klimit)
{
    (void)i, (void)nq, (void)nk, (void)klimit;
#if KILN_ATTN_CAUSAL
    return min(k1, min(max(i + nk - nq + 1, 0), klimit));
#else
    return k1;
#endif
}

#endif /* KILN_CU_ATTENTION_KEYS_H */
