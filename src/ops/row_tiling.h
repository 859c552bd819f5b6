/*
 * Row tiles of the NCHW window kernels (the direct convolution and pooling;
 * the kernel side is cl/common/window.h): a work-item computes VW
 * consecutive outputs of TH rows of one plane. Chosen here: VW and TH, which
 * tiles of a row read only columns inside it, and which edge tiles the
 * kernel compiles with their columns as constants.
 */
#ifndef KILN_OPS_ROW_TILING_H
#define KILN_OPS_ROW_TILING_H

#include <stddef.h>

/* What a kernel slides over each plane. */
struct kiln_row_window {
    size_t h, w;         /* input height and width */
    size_t p_ext, q_ext; /* output rows and columns the tiles cover */
    size_t stride_w, window_w, dilation_w, pad_left;
    int pairs; /* rows and columns in pairs (a fused 2x2 pool) */
};

struct kiln_row_tiling {
    size_t vw, th;                 /* a tile's output columns (vector lanes) and rows */
    size_t tiles_p, tiles_q;       /* tiles per plane */
    size_t inner_first, inner_end; /* tiles of a row that read no column outside it */
    long edge[3];                  /* other tiles compiled apart, -1 for none */
    int edge_rest;                 /* edge tiles beyond those three */
};

/*
 * Tile the planes of `win`: `planes` of them, at most `vw_max` lanes and
 * `rows_max` rows (the vector accumulators a tile may keep), in work-groups
 * of `wg`. One row tile per plane when the rows fit and the tiles still fill
 * 8 work-groups; rows no wider than the tile's loads unless then.
 */
void kiln_row_tiling(const struct kiln_row_window *win, size_t planes, size_t vw_max, size_t rows_max, size_t wg,
                     struct kiln_row_tiling *t);

struct kiln_options;
/* Append the kernel's options for `t` (-DKILN_ROW_TILES_Q=... and the tile
   classes). */
void kiln_row_tiling_options(const struct kiln_row_tiling *t, struct kiln_options *o);

#endif /* KILN_OPS_ROW_TILING_H */
