/*
 * The CPU kernels' register tile by the rule of docs/gemm.md, computed
 * independently of src/ops/gemm.c for the tests that check which tile a
 * plan took (test_gemm_conformance, test_conv_plans).
 */
#ifndef KILN_TESTS_CPU_TILE_H
#define KILN_TESTS_CPU_TILE_H

#include "profiles/profile.h"

/* One orientation of `rows` x `cols`: the wide tile with its rows balanced
   over its panels (dearer where its loads outnumber its FMAs) or the narrow
   one (gemm.cpu narrow_mr x vw) 6% dearer, whichever computes fewer padded
   elements. Its cost in *mr, *nr and the return value. */
static inline double kt_cpu_tile(const struct kiln_param_gemm_cpu *cpu, long rows, long cols, long *mr, long *nr)
{
    const long nv = cpu->nr / cpu->vw, panels = (rows + cpu->mr - 1) / cpu->mr;
    *mr = panels ? (rows + panels - 1) / panels : cpu->mr, *nr = cpu->nr;
    const double loads = (double)(*mr + nv) / (double)(*mr * nv);
    double cost = (loads > 1 ? loads : 1) * (double)((rows + *mr - 1) / *mr * *mr) *
                  (double)((cols + cpu->nr - 1) / cpu->nr * cpu->nr);
    const long narrow = cpu->narrow_mr, vw = cpu->vw;
    if (narrow > 0) {
        const double thin =
            1.06 * (double)((rows + narrow - 1) / narrow * narrow) * (double)((cols + vw - 1) / vw * vw);
        if (thin < cost)
            cost = thin, *mr = narrow, *nr = vw;
    }
    return cost;
}

/* kt_cpu_tile, also costing the half-width tile (the implicit GEMM's row
   variant): narrow_mr rows by half the wide tile's columns where those are
   an even number of 4 or more vectors, its padded elements counted 3%
   dearer than the wide tile's. */
static inline double kt_cpu_half_tile(const struct kiln_param_gemm_cpu *cpu, long rows, long cols, long *mr, long *nr)
{
    double cost = kt_cpu_tile(cpu, rows, cols, mr, nr);
    const long nv = cpu->nr / cpu->vw, narrow = cpu->narrow_mr, half = cpu->nr / 2;
    if (narrow > 0 && nv >= 4 && nv % 2 == 0) {
        const double c =
            1.03 * (double)((rows + narrow - 1) / narrow * narrow) * (double)((cols + half - 1) / half * half);
        if (c < cost)
            cost = c, *mr = narrow, *nr = half;
    }
    return cost;
}

/* The row variant's tile (pixels by filters): kt_cpu_half_tile's, or where
   gemm.cpu.flip_nr is set flip_mr (else mr) x flip_nr with its rows
   balanced, unless that costs more than 5% more. */
static inline double kt_cpu_pixel_tile(const struct kiln_param_gemm_cpu *cpu, long rows, long cols, long *mr, long *nr)
{
    const double other = kt_cpu_half_tile(cpu, rows, cols, mr, nr);
    if (cpu->flip_nr <= 0)
        return other;
    struct kiln_param_gemm_cpu own = *cpu;
    if (cpu->flip_mr > 0)
        own.mr = cpu->flip_mr;
    own.nr = cpu->flip_nr;
    long omr, onr;
    const double cost = kt_cpu_tile(&own, rows, cols, &omr, &onr);
    if (cost > 1.05 * other)
        return other;
    *mr = omr, *nr = onr;
    return cost;
}

/* The same for the flipped tile, whose rows (C^T's) are at most gemm.cpu
   flip_mr and whose columns are flip_nr where those are set and B can be
   read in place (`in_place_b`); with flip_nr set, the mr x nr tile where
   that costs more than 5% less. */
static inline double kt_cpu_flip_tile(const struct kiln_param_gemm_cpu *cpu, int in_place_b, long rows, long cols,
                                      long *mr, long *nr)
{
    struct kiln_param_gemm_cpu flip = *cpu;
    if (cpu->flip_mr > 0 && in_place_b)
        flip.mr = cpu->flip_mr;
    if (cpu->flip_nr <= 0 || !in_place_b)
        return kt_cpu_tile(&flip, rows, cols, mr, nr);
    flip.nr = cpu->flip_nr;
    long pmr, pnr;
    const double plain = kt_cpu_tile(cpu, rows, cols, &pmr, &pnr), own = kt_cpu_tile(&flip, rows, cols, mr, nr);
    if (own <= 1.05 * plain)
        return own;
    *mr = pmr, *nr = pnr;
    return plain;
}

#endif
