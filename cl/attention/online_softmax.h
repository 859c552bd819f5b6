/*
 * The online softmax step of one row over a tile of its scores, shared by
 * the kernels that stage tiles in local memory (attention_f32_flash.cl,
 * attention_f32_decode_wg.cl): scores s[0..n) in base 2 (hidden keys
 * -inf); the row's running maximum m, its sum l and the tile's factor c for
 * the row's output. The new maximum, the factor exp2(m_old - m_new), the
 * weights exp2(s - m_new) in place of the scores, and l = l * factor + their
 * sum. A row that has seen no key keeps m = -inf and takes its weights
 * against 0 (so exp2(-inf - base) is 0, not NaN).
 */
#ifndef KILN_ATTENTION_ONLINE_SOFTMAX_H
#define KILN_ATTENTION_ONLINE_SOFTMAX_H

#include "common/portability.h"

/* Inlined always: n is then the caller's constant, which the loops below
   unroll by. */
static inline __attribute__((always_inline)) void
attention_softmax_step(KILN_LOCAL float *s, const int n, KILN_LOCAL float *m, KILN_LOCAL float *l, KILN_LOCAL float *c)
{
    const float m_old = *m;
    float top = m_old;
    /* Loops unrolled by 4 at most: fully unrolled, a GPU's compiler kept all
       n scores in registers from one loop to the next (62 more registers a
       work-item of the decoding kernel at 32 keys, for work one work-item
       a row does). */
#pragma unroll 4
    for (int j = 0; j < n; j++)
        top = fmax(top, s[j]);
    const float base = top == -INFINITY ? 0.0f : top;
    float sum = 0.0f;
#pragma unroll 4
    for (int j = 0; j < n; j++) {
        const float p = exp2(s[j] - base);
        s[j] = p;
        sum += p;
    }
    const float corr = exp2(m_old - base);
    *m = top, *l = *l * corr + sum, *c = corr;
}

#endif /* KILN_ATTENTION_ONLINE_SOFTMAX_H */
