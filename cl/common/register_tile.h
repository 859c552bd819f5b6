/*
 * The MR x NR register tile of the CPU kernels (the profile's gemm.cpu_mr,
 * cpu_nr and cpu_vw), shared by the CPU GEMM and implicit-GEMM convolution:
 * MR rows broadcast from a packed A panel (a[k][MR]) times NR columns loaded
 * as NR/VW vectors from a B panel (b[k][NR], in any address space).
 */
#ifndef KILN_CL_REGISTER_TILE_H
#define KILN_CL_REGISTER_TILE_H

#define MR KILN_GEMM_CPU_MR
#define NR KILN_GEMM_CPU_NR
#define VW KILN_GEMM_CPU_VW
#define NV (NR / VW)

#include "common/vector.h"

/* VEC acc[MR][NV] = sum over k < count of a[k][i] * b[k][v*VW ..]. */
#define KILN_TILE_MULTIPLY(acc, a, b, count)                                                                        \
    do {                                                                                                            \
        _Pragma("unroll") for (int i_ = 0; i_ < MR; i_++) _Pragma("unroll") for (int v_ = 0; v_ < NV; v_++)         \
            acc[i_][v_] = 0.0f;                                                                                     \
        for (int k_ = 0; k_ < (count); k_++) {                                                                      \
            VEC bv_[NV];                                                                                            \
            _Pragma("unroll") for (int v_ = 0; v_ < NV; v_++) bv_[v_] = VLOAD(v_, (b) + (size_t)k_ * NR);           \
            _Pragma("unroll") for (int i_ = 0; i_ < MR; i_++)                                                       \
            {                                                                                                       \
                const VEC ai_ = (VEC)((a)[(size_t)k_ * MR + i_]);                                                   \
                _Pragma("unroll") for (int v_ = 0; v_ < NV; v_++) acc[i_][v_] = fma(ai_, bv_[v_], acc[i_][v_]);     \
            }                                                                                                       \
        }                                                                                                           \
    } while (0)

#endif
