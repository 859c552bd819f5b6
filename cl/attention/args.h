/*
 * The arguments of the fused attention kernels (attention_f32_fused.cl,
 * attention_f32_flash.cl, attention_f32_decode.cl), in the order
 * kiln_attention_kernel_args (src/ops/attention.c) sets them: Q, K, V, the
 * additive mask, the key lengths, O and the log-sum-exps (unused buffers are
 * never read or written); the query and key lengths, the run-time head
 * dimension, the query heads and the query heads per kv head; Q's and O's
 * element strides per batch item, head and position (q_sb, q_sh, q_ss), K's
 * and V's (kv_sb, kv_sh, kv_ss); the mask's per batch item and head (its
 * row of (b, h, i) starts at b * m_sb + h * m_sh + i * nk); the scale times
 * log2(e).
 *
 * The kernels that split the keys (flash, decoding) take after them the
 * splits' partial outputs and log-sum-exps and the keys per split
 * (kiln_attention_split_launch, src/ops/attention_decode.c).
 */
#ifndef KILN_ATTENTION_ARGS_H
#define KILN_ATTENTION_ARGS_H

#include "common/storage.h"

#define KILN_ATTENTION_KERNEL_ARGS                                                                                     \
    KILN_GLOBAL const KILN_STORAGE *Q, KILN_GLOBAL const KILN_STORAGE *K, KILN_GLOBAL const KILN_STORAGE *V,          \
        KILN_GLOBAL const float *mask, KILN_GLOBAL const int *key_lengths, KILN_GLOBAL KILN_STORAGE *O,               \
        KILN_GLOBAL float *lse, const int nq, const int nk, const int head_dim, const int heads, const int group,    \
        const ulong q_sb, const ulong q_sh, const ulong q_ss, const ulong kv_sb, const ulong kv_sh,                  \
        const ulong kv_ss, const ulong m_sb, const ulong m_sh, const float scale_log2

#define KILN_ATTENTION_SPLIT_ARGS                                                                                      \
    KILN_GLOBAL float *part, KILN_GLOBAL float *part_lse, const int split_len, const ulong part_rows

#endif /* KILN_ATTENTION_ARGS_H */
