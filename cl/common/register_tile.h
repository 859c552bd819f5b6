/*
 * The MR x NR register tile of the CPU kernels, shared by the CPU GEMM and
 * implicit-GEMM convolution: MR rows broadcast from a packed A panel
 * (a[k][MR]) times NR columns loaded as NR/VW vectors from a B panel
 * (b[k][NR], in any address space). The host picks the tile per problem
 * (kiln_cpu_tile_choose: the profile's gemm.cpu mr x nr, or its narrow
 * cpu_narrow_mr x cpu_vw) and passes it as KILN_TILE_MR, _NR and _VW.
 */
#ifndef KILN_CL_REGISTER_TILE_H
#define KILN_CL_REGISTER_TILE_H

#define MR KILN_TILE_MR
#define NR KILN_TILE_NR
#define VW KILN_TILE_VW
#define NV (NR / VW)

#include "common/vector.h"

/* Where the k loop below sits inside another loop (the implicit-GEMM
   convolution's loop over filter panels), clang's first pass reports that it
   could not unroll it by 4, a warning on stderr at every compile, while the
   code POCL generates has the loop unrolled; the warning is silenced. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* KILN_TILE_FETCH_B(b, b_step, k): what the k loop below does first at
   each k with the B operand, nothing unless the including kernel defines
   it (the CPU GEMM fetches rows ahead of a B read in place). */
#ifndef KILN_TILE_FETCH_B
#define KILN_TILE_FETCH_B(b, b_step, k) ((void)0)
#endif
/* KILN_TILE_FETCH_A(a, a_step, k): the same with the A operand (the CPU
   GEMM fetches the rows of an A read in place ahead, k-major). */
#ifndef KILN_TILE_FETCH_A
#define KILN_TILE_FETCH_A(a, a_step, k) ((void)0)
#endif

/* The float arguments a kernel's epilogue reads after the tile (alpha,
   beta, an activation's slope), held in a volatile private array from entry
   and read back after the k loop: passed by value, they are loaded at entry
   and would stay in vector registers through the loop. AVX2 has 16 of them;
   the 6 x 16 tile (12 accumulators, 2 vectors of B, 1 broadcast) leaves
   one, so POCL's code spilled an accumulator through the stack at every k,
   the GEMM's main cost on AVX2 machines. */
#define KILN_TILE_HOLD(held, a, b, c) volatile float held[3] = {(a), (b), (c)}

/* VEC acc[MR][NV] = sum over k < count of a[k * a_step + i] * b[k][v*VW ..]:
   a packed panel (a_step MR) or, for the CPU GEMM's direct operand, the
   matrix itself (a_step its distance between k). The k loop is unrolled by
   4 (measured on POCL's AVX-512 CPU device, interleaved: GEMM 1.03-1.06x,
   a 1x1 layer at 14x14 and a stride-2 3x3 1.06x, ResNet-50 1.08x; by 8 no
   better than by 4, by 2 5% worse). */
#define KILN_TILE_MULTIPLY(acc, a, b, count) KILN_TILE_MULTIPLY_STRIDED(acc, a, MR, b, count)
#define KILN_TILE_MULTIPLY_STRIDED(acc, a, a_step, b, count) KILN_TILE_MULTIPLY_LD(acc, a, a_step, b, NR, count)
/* The same with b's rows b_step floats apart (B read in place). */
#define KILN_TILE_MULTIPLY_LD(acc, a, a_step, b, b_step, count) KILN_TILE_MULTIPLY_RLD(acc, a, a_step, 1, b, b_step, count)
/* The same with a's rows a_row floats apart, its element (k, i) at
   a[k * a_step + i * a_row]: MR rows read in place, each along its k
   (Winograd's tile-major V in NHWC). */
#define KILN_TILE_MULTIPLY_RLD(acc, a, a_step, a_row, b, b_step, count)                                             \
    do {                                                                                                            \
        _Pragma("unroll") for (int i_ = 0; i_ < MR; i_++) _Pragma("unroll") for (int v_ = 0; v_ < NV; v_++)         \
            acc[i_][v_] = 0.0f;                                                                                     \
        KILN_TILE_ACCUMULATE_RLD(acc, a, a_step, a_row, b, b_step, count);                                          \
    } while (0)
/* The same sum added to acc as it stands. */
#define KILN_TILE_ACCUMULATE_LD(acc, a, a_step, b, b_step, count)                                                   \
    KILN_TILE_ACCUMULATE_RLD(acc, a, a_step, 1, b, b_step, count)
#define KILN_TILE_ACCUMULATE_RLD(acc, a, a_step, a_row, b, b_step, count)                                           \
    do {                                                                                                            \
        _Pragma("unroll 4") for (int k_ = 0; k_ < (count); k_++) {                                                  \
            KILN_TILE_FETCH_A(a, a_step, k_);                                                                       \
            KILN_TILE_FETCH_B(b, b_step, k_);                                                                       \
            VEC bv_[NV];                                                                                            \
            _Pragma("unroll") for (int v_ = 0; v_ < NV; v_++) bv_[v_] = VLOAD(v_, (b) + (size_t)k_ * (b_step));     \
            _Pragma("unroll") for (int i_ = 0; i_ < MR; i_++)                                                       \
            {                                                                                                       \
                const VEC ai_ = (VEC)((a)[(size_t)k_ * (a_step) + (size_t)i_ * (a_row)]);                           \
                _Pragma("unroll") for (int v_ = 0; v_ < NV; v_++) acc[i_][v_] = fma(ai_, bv_[v_], acc[i_][v_]);     \
            }                                                                                                       \
        }                                                                                                           \
    } while (0)

#endif
