/*
 * Weight packing shared by the implicit GEMM's CPU kernels: row kk of the
 * zero-padded panel of `width` filters (filters panel * width ..), each
 * filter's element `src` of its cg * R * S (KCRS or KRSC, as stored), into
 * dst[0 .. width) of Wp[g][panel][kk][width]. The panel variant packs MR
 * filters in the weights' order, the row variant NR filters in (r, s, c)
 * order.
 */
#ifndef KILN_CL_IGEMM_PACK_H
#define KILN_CL_IGEMM_PACK_H

#include "common/storage.h"

inline void igemm_pack_row(const int kg, const int kk_count, const int g, const int panel, const int kk,
                           const int src, const int width, KILN_GLOBAL const KILN_STORAGE *w, KILN_GLOBAL float *wp)
{
    KILN_GLOBAL float *dst =
        wp + ((size_t)g * ((kg + width - 1) / width) + panel) * (size_t)kk_count * width + (size_t)kk * width;
#pragma unroll
    for (int j = 0; j < width; j++) {
        const int f = panel * width + j;
        dst[j] = f < kg ? KILN_LOAD(w, (size_t)(g * kg + f) * kk_count + src) : 0.0f;
    }
}

#endif
