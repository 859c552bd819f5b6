/* Row tiles of the NCHW window kernels (see row_tiling.h). */
#include "ops/row_tiling.h"

#include "util/options.h"

#include <stdio.h>
#include <string.h>

#include "ops/gemm.h"
#include "ops/nn_common.h"

/* First output column of tile tq: the last tile of a row ends at the row's
   end (as the kernel's TILE_Q0), so no tile is partial. */
static size_t tile_q0(size_t vw, size_t q_ext, size_t tq)
{
    const size_t last = q_ext > vw ? q_ext - vw : 0;
    return tq * vw < last ? tq * vw : last;
}

void kiln_row_tiling(const struct kiln_row_window *win, size_t planes, size_t vw_max, size_t rows_max, size_t wg,
                     struct kiln_row_tiling *t)
{
    memset(t, 0, sizeof *t);
    const size_t sw = win->stride_w, span = sw <= 2 ? win->w / sw : 0;
    t->vw = kiln_min_size(vw_max, kiln_pow2_ceil(win->q_ext));
    const int one_row_tile = win->p_ext <= rows_max && planes * kiln_div_up(win->q_ext, t->vw) >= 8 * wg;
    /* Edge tiles permute one load of vw * sw columns, clamped into the row,
       or into the plane when one row tile makes its rows constants. */
    if (span > 0 && t->vw > span && !(one_row_tile && win->h * win->w >= t->vw * sw))
        t->vw = kiln_pow2_floor(span);
    if (win->pairs && t->vw < 2)
        t->vw = 2;
    if (one_row_tile) {
        t->th = win->p_ext;
    } else {
        t->th = rows_max;
        while (t->th > 2 && win->p_ext <= t->th) /* at least two row tiles */
            t->th /= 2;
    }
    /* Rows shared evenly between the row tiles (in pairs for the pool). */
    t->tiles_p = kiln_div_up(win->p_ext, t->th);
    t->th = kiln_div_up(win->p_ext, t->tiles_p);
    if (win->pairs)
        t->th += t->th % 2;
    t->tiles_q = kiln_div_up(win->q_ext, t->vw);

    /* Interior tile tq reads columns tile_q0(tq) * sw - pad_left + [0, reach)
       (as window.h's row_taps): at stride 1, a vector load per window
       column; at stride 2 and dilation 1, the 2 * vw columns and the ones
       past them the window needs; at stride 2 otherwise, 2 * vw columns per
       window column; lane by lane beyond. */
    const size_t step = t->vw * sw, last = t->tiles_q - 1, pl = win->pad_left, w = win->w, s = win->window_w;
    const size_t exact = (t->vw - 1) * sw + 1 + (s - 1) * win->dilation_w;
    size_t reach = exact;
    if (t->vw > 1 && sw == 2 && win->dilation_w == 1)
        reach = step + (s > 2 ? s - 2 : 0);
    else if (t->vw > 1 && sw == 2)
        reach = step + (s - 1) * win->dilation_w;
    /* Tiles [inner_first, inner_end) read no padding: among the tiles at
       multiples of the step, then the last one, which may sit further left
       but no further than its neighbour. */
    t->inner_first = kiln_min_size(last, kiln_div_up(pl, step));
    t->inner_end = w + pl < reach ? 0 : kiln_min_size(last, (w + pl - reach) / step + 1);
    const size_t last_col = tile_q0(t->vw, win->q_ext, last) * sw;
    if (last_col >= pl && last_col - pl + reach <= w)
        t->inner_end = t->tiles_q;
    /* The edge tiles: the first ones from the left, then from the right. */
    const size_t right = t->inner_end > t->inner_first ? t->inner_end : t->inner_first;
    size_t count = 0;
    for (size_t e = 0; e < t->inner_first && count < 3; e++)
        t->edge[count++] = (long)e;
    for (size_t e = t->tiles_q; e > right && count < 3; e--)
        t->edge[count++] = (long)e - 1;
    for (size_t i = count; i < 3; i++)
        t->edge[i] = -1;
    t->edge_rest = t->inner_first + (t->tiles_q - right) > count;
}

void kiln_row_tiling_options(const struct kiln_row_tiling *t, struct kiln_options *o)
{
    kiln_options_add(o,
                     "-DKILN_ROW_TILES_Q=%zu -DKILN_ROW_INNER_FIRST=%zu -DKILN_ROW_INNER_END=%zu -DKILN_ROW_EDGE_A=%ld"
                     " -DKILN_ROW_EDGE_B=%ld -DKILN_ROW_EDGE_C=%ld -DKILN_ROW_EDGE_REST=%d",
                     t->tiles_q, t->inner_first, t->inner_end, t->edge[0], t->edge[1], t->edge[2], t->edge_rest);
}
