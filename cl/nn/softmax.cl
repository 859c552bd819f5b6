/*
 * Softmax of x viewed as [outer][dim][inner] over dim: one work-item per
 * (outer, inner) column, three passes over its dim values (maximum; write
 * exp(x - max) to y and sum it; divide y by the sum), one exp per value.
 * Subtracting the maximum keeps every exp in (0, 1], so large logits
 * neither overflow nor lose the sum. y may be x: each element is read
 * before it is written, by one work-item. A column of contiguous values
 * (inner 1: a classifier's scores) takes loops of unit stride, which the
 * compiler may vectorise; with KILN_SOFTMAX_VW > 1 such a column is read in
 * vectors of that many values explicitly (exp of a vector included), which
 * POCL's work-item loops do not do for one work-item: a classifier's 1,000
 * scores are one column, one work-item.
 * KILN_UTIL_WG is the work-group size from the profile; KILN_SOFTMAX_VW the
 * profile's util.vw (1: no explicit vectors).
 *
 * nn_softmax_group gives each column a work-group of KILN_UTIL_WG
 * work-items instead (src/ops/softmax.c chooses it for fewer columns than
 * a work-group holds): each work-item walks every KILN_UTIL_WG-th value of
 * the column in the same three passes, and the work-group combines the
 * maximum and the sum in local memory between them. On a GPU, one thread
 * per column leaves a classifier's 1,000 scores to one thread of the whole
 * device. y may be x here too: a work-item writes only the values it read.
 */

#include "common/portability.h"

#ifndef KILN_SOFTMAX_VW
#define KILN_SOFTMAX_VW 1
#endif
#define VW KILN_SOFTMAX_VW
#include "common/vector.h"

#if KILN_WANTS(nn_softmax)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void nn_softmax(KILN_GLOBAL const float *x, KILN_GLOBAL float *y, const ulong columns, const ulong dim,
                const ulong inner)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i >= columns)
        return;
    const size_t base = i / inner * dim * inner + i % inner;
    KILN_GLOBAL const float *xc = x + base;
    KILN_GLOBAL float *yc = y + base;
    float m = -INFINITY, sum = 0.0f;
    if (inner == 1) {
        size_t d = 0;
#if VW > 1
        const size_t dv = dim / VW * VW;
        VEC mv = (VEC)(-INFINITY);
        for (; d < dv; d += VW)
            mv = fmax(mv, VLOAD(0, xc + d));
        m = lane_max(mv);
#endif
        for (; d < dim; d++)
            m = fmax(m, xc[d]);
        d = 0;
#if VW > 1
        VEC sv = (VEC)(0.0f);
        for (; d < dv; d += VW) {
            const VEC e = exp(VLOAD(0, xc + d) - m);
            VSTORE(e, 0, yc + d);
            sv += e;
        }
        sum = lane_sum(sv);
#endif
        for (; d < dim; d++) {
            const float e = exp(xc[d] - m);
            yc[d] = e;
            sum += e;
        }
        d = 0;
#if VW > 1
        for (; d < dv; d += VW)
            VSTORE(VLOAD(0, yc + d) / sum, 0, yc + d);
#endif
        for (; d < dim; d++)
            yc[d] = yc[d] / sum;
        return;
    }
    for (size_t d = 0; d < dim; d++)
        m = fmax(m, xc[d * inner]);
    for (size_t d = 0; d < dim; d++) {
        const float e = exp(xc[d * inner] - m);
        yc[d * inner] = e;
        sum += e;
    }
    for (size_t d = 0; d < dim; d++)
        yc[d * inner] = yc[d * inner] / sum;
}
#endif

/* part[0] = the maximum (or, with `sum`, the sum) of part[0 .. KILN_UTIL_WG),
   in rounds that each fold pairs `step` apart (any work-group size); every
   work-item of the group calls it. */
inline float group_reduce(KILN_LOCAL float *part, const int t, const float v, const bool sum)
{
    part[t] = v;
    KILN_BARRIER_LOCAL();
    for (int step = 1; step < KILN_UTIL_WG; step *= 2) {
        if (t % (2 * step) == 0 && t + step < KILN_UTIL_WG)
            part[t] = sum ? part[t] + part[t + step] : fmax(part[t], part[t + step]);
        KILN_BARRIER_LOCAL();
    }
    const float r = part[0];
    KILN_BARRIER_LOCAL(); /* part is free again once everyone has read it */
    return r;
}

#if KILN_WANTS(nn_softmax_group)
KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void nn_softmax_group(KILN_GLOBAL const float *x, KILN_GLOBAL float *y, const ulong columns, const ulong dim,
                      const ulong inner)
{
    KILN_SHARED float part[KILN_UTIL_WG];
    const size_t i = KILN_GROUP_ID(0);
    const int t = (int)KILN_LOCAL_ID(0);
    if (i >= columns)
        return; /* the whole group alike */
    const size_t base = i / inner * dim * inner + i % inner;
    KILN_GLOBAL const float *xc = x + base;
    KILN_GLOBAL float *yc = y + base;
    float m = -INFINITY;
    for (size_t d = t; d < dim; d += KILN_UTIL_WG)
        m = fmax(m, xc[d * inner]);
    m = group_reduce(part, t, m, false);
    float sum = 0.0f;
    for (size_t d = t; d < dim; d += KILN_UTIL_WG) {
        const float e = exp(xc[d * inner] - m);
        yc[d * inner] = e;
        sum += e;
    }
    sum = group_reduce(part, t, sum, true);
    for (size_t d = t; d < dim; d += KILN_UTIL_WG)
        yc[d * inner] = yc[d * inner] / sum;
}
#endif
