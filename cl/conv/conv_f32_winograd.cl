/*
 * Winograd convolution F(m x m, 3 x 3), m = KILN_WINO_M (2 or 4), for 3x3
 * filters with stride 1, dilation 1 and one group.
 *
 * With a = m + 2 (the transform size) and T tiles of m x m outputs
 * (n * ceil(P/m) * ceil(Q/m), numbered (n, tile row, tile column)), each
 * output tile is
 *   Y = A^T [ sum_c (G g_c G^T) .* (B^T d_c B) ] A
 * over the a x a input patches d_c (zero outside the image) and the 3x3
 * filters g_c. The products summed over channels are a*a independent
 * matrix products, which the plan runs as one batched kiln GEMM between the
 * kernels of this file:
 *
 *   _filter  U[t] = (G g G^T)[t] for each (c, k)       a*a x C x K
 *   _in      V[t] = (B^T d B)[t] for each (c, tile)    a*a x C x T
 *   GEMM     M[t] = U[t]^T V[t]    (NCHW: K x T)        a*a x K x T
 *            M[t] = V[t] U[t]      (NHWC: T x K)
 *   _out     y = pool(act(alpha * A^T M A + beta * z + bias)), written once
 *
 * Workspace layout (fp32), chosen so the GEMM reads and writes whole rows
 * and every transform moves vectors along a contiguous axis of both the
 * tensor and the workspace:
 *   U[t][c][k] in both layouts; lanes are VW filters of one channel.
 *   NCHW: V[t][c][tile], M[t][k][tile]; lanes are VW tiles of one tile row,
 *         i.e. pixels m apart in an image row, gathered with swizzles.
 *   NHWC: V[t][tile][c], M[t][tile][k]; lanes are VW channels of a pixel.
 * Matrix t of a buffer starts at t * plane (a kernel argument): the matrix
 * rounded up to an odd number of 64-byte lines, so the a*a store streams of
 * a work-item do not share cache sets.
 *
 * The matrices follow from Toom-Cook interpolation at 0, 1, -1 (m = 2) or
 * 0, 1, -1, 2, -2 (m = 4) and the point at infinity (Lavin & Gray, "Fast
 * algorithms for convolutional neural networks", 2016; derived in
 * docs/winograd.md): A is the Vandermonde matrix of the points, row i of
 * B^T the coefficients of prod_{j != i} (x - a_j) (of prod_j (x - a_j) for
 * infinity), and G = D Gi with Gi the points' Vandermonde matrix for the
 * filter and D = diag(1 / prod_{j != i} (a_i - a_j)) (up to the sign of a
 * row). B^T, A^T and Gi are small integers, so the per-tile transforms are
 * adds and multiplies by 2, 4, 5 and 8, exact but for the rounding of the
 * sums; the fractions of D (1/6 and 1/24 for m = 4) are applied once per
 * element of U as one correctly rounded division by den_i * den_j.
 *
 * Defines: KILN_WINO_M, KILN_WINO_VW (vector width; NCHW needs m <= VW <= 8),
 * KILN_NHWC, KILN_F16, KILN_BF16 and the epilogue switches KILN_ACT, KILN_HAS_BIAS,
 * KILN_HAS_Z, KILN_POOL. Every kernel runs one work-item per work-group on
 * CPUs.
 */
#include "common/epilogue.h"
#include "common/portability.h"
#include "common/storage.h"

#define WM KILN_WINO_M
#define WA (WM + 2)
#define VW KILN_WINO_VW

#include "common/vector.h"
/* Kernel names carry the tile: conv_f32_wino4x4_in. */
#define KERNEL(suffix) CAT(CAT(CAT(conv_f32_wino, WM), CAT(x, WM)), suffix)

#include "conv/winograd_1d.h"

/* ------------------------------------------------------------------------ */
/* Loads and stores                                                         */
/* ------------------------------------------------------------------------ */

/* load_ws and store_ws, and in NHWC load_vec and store_vec: conv/winograd_1d.h. */
#if !KILN_NHWC
/*
 * NCHW moves VW tiles of an image row at once: lane v of a vector is tile
 * v, whose column j is pixel v*m + j of a contiguous segment. Gathering
 * every m-th pixel of m consecutive vectors is a swizzle: .even/.odd once
 * for m = 2, twice for m = 4 (VW >= m, VW <= 8).
 */
#if WM == 2
#define PHASE0(a) (a).even
#define PHASE1(a) (a).odd
#define GATHER(PHASE, a) (VEC)(PHASE(a[0]), PHASE(a[1]))
#else
#define PHASE0(a) (a).even.even
#define PHASE1(a) (a).odd.even
#define PHASE2(a) (a).even.odd
#define PHASE3(a) (a).odd.odd
#define GATHER(PHASE, a) (VEC)(PHASE(a[0]), PHASE(a[1]), PHASE(a[2]), PHASE(a[3]))
#endif

/* Two vectors' worth (VW2, common/vector.h), for the interleaving stores. */
#define VEC2 CAT(float, VW2)
#define VSTORE2 CAT(vstore, VW2)
#if KILN_F16
#define VSTORE2_S(v, i, p) CAT(vstore_half, VW2)((v), (i), (p))
#elif KILN_BF16
#define VSTORE2_S(v, i, p) KILN_VSTOREN((v), VW2, (p) + (size_t)(i)*VW2)
#else
#define VSTORE2_S(v, i, p) VSTORE2((v), (i), (p))
#endif

/* Lanes 1.. of v, then e: the next patch's view of the same column. */
#if VW == 2
#define SHIFT1(v, e) (VEC)((v).s1, (e))
#elif VW == 4
#define SHIFT1(v, e) (VEC)((v).s123, (e))
#else
#define SHIFT1(v, e) (VEC)((v).s123, (v).s4567, (e))
#endif

/* VW pixels of a row from column c, zero outside [0, limit): a vector load
   inside, clamped scalar loads where the vector crosses an edge. */
__attribute__((always_inline)) inline VEC load_lanes(KILN_GLOBAL const KILN_STORAGE *row, int c, int limit)
{
    if (c >= 0 && c + VW <= limit)
        return VLOAD_S(0, row + c);
    float lane[VW];
#pragma unroll
    for (int l = 0; l < VW; l++) {
        const int x = c + l;
        const float v = KILN_LOAD(row, clamp(x, 0, limit - 1));
        lane[l] = x >= 0 && x < limit ? v : 0.0f;
    }
    return VLOAD(0, lane);
}

/* Lane v of d[j] (j < a) is row[col0 + v*m + j], zero outside [0, limit). */
__attribute__((always_inline)) inline void load_row(KILN_GLOBAL const KILN_STORAGE *row, int col0, int limit, VEC *d)
{
    VEC a[WM];
#pragma unroll
    for (int q = 0; q < WM; q++)
        a[q] = load_lanes(row, col0 + q * VW, limit);
    /* the two pixels after the VW tiles */
    const int c = col0 + VW * WM;
    const float t0 = c >= 0 && c < limit ? KILN_LOAD(row, c) : 0.0f;
    const float t1 = c + 1 >= 0 && c + 1 < limit ? KILN_LOAD(row, c + 1) : 0.0f;
    d[0] = GATHER(PHASE0, a);
    d[1] = GATHER(PHASE1, a);
#if WM == 4
    d[2] = GATHER(PHASE2, a);
    d[3] = GATHER(PHASE3, a);
#endif
    d[WM] = SHIFT1(d[0], t0);
    d[WM + 1] = SHIFT1(d[1], t1);
}

/* A stored row of VW tiles is SIDE * VW pixels: one vector for SIDE = 1,
   else SIDE / 2 double vectors. */
#if SIDE == 1
#define SEGS 1
#define SEG VEC
#define SEG_STORE VSTORE
#define SEG_STORE_S VSTORE_S
#else
#define SEGS (SIDE / 2)
#define SEG VEC2
#define SEG_STORE VSTORE2
#define SEG_STORE_S VSTORE2_S
#endif

/* The inverse of load_row for stored tiles of SIDE columns:
   row[col0 + v*SIDE + j] = lane v of y[j], for the columns below `limit`. */
inline void store_row(const VEC *y, KILN_GLOBAL KILN_STORAGE *row, int col0, int limit)
{
    SEG seg[SEGS];
#if SIDE == 1
    seg[0] = y[0];
#elif SIDE == 2
    seg[0].even = y[0];
    seg[0].odd = y[1];
#else
    /* Four-way: the even pixels interleave columns 0 and 2, the odd ones 1
       and 3; the low lanes (tiles) first. */
    VEC t0, t1, t2, t3;
    t0.even = y[0].lo, t0.odd = y[2].lo, t1.even = y[1].lo, t1.odd = y[3].lo;
    t2.even = y[0].hi, t2.odd = y[2].hi, t3.even = y[1].hi, t3.odd = y[3].hi;
    seg[0].even = t0, seg[0].odd = t1;
    seg[1].even = t2, seg[1].odd = t3;
#endif
    if (col0 + VW * SIDE <= limit) {
#pragma unroll
        for (int i = 0; i < SEGS; i++)
            SEG_STORE_S(seg[i], i, row + col0);
        return;
    }
    float flat[VW * SIDE];
#pragma unroll
    for (int i = 0; i < SEGS; i++)
        SEG_STORE(seg[i], i, flat);
    for (int e = 0; e < limit - col0; e++)
        KILN_STORE(flat[e], row, col0 + e);
}
#endif

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

#define WINO_SHAPE_ARGS                                                                                                \
    const int N, const int C, const int H, const int W, const int K, const int P, const int Q, const int pad_top,      \
        const int pad_left, const int TH, const int TW

/*
 * U = G g G^T for VW filters of channel c: global (ceil(K/VW), C), written
 * to U[t][c][k..] in both layouts (weights KCRS or KRSC). With
 * KILN_WINO_PANEL (the fused kernel's NR, a multiple of VW) instead to
 * U[t][k / NR][c][k % NR], panels of NR filters, the last one padded with
 * zeros: global (ceil(K/NR) NR / VW, C).
 */
#if KILN_WANTS(KERNEL(_filter))
KILN_KERNEL void KERNEL(_filter)(const int K, const int C, KILN_GLOBAL const KILN_STORAGE *w, KILN_GLOBAL float *u,
                                 const ulong plane)
{
    const int k0 = KILN_GLOBAL_ID(0) * VW, c = KILN_GLOBAL_ID(1);
#if KILN_NHWC
    const size_t base = (size_t)k0 * 9 * C + c, tap_stride = C;
#else
    const size_t base = ((size_t)k0 * C + c) * 9, tap_stride = 1;
#endif
    const size_t lane_stride = (size_t)9 * C;
    const int valid = min(VW, K - k0);
#if KILN_WINO_PANEL
    const size_t out = ((size_t)(k0 / KILN_WINO_PANEL) * C + c) * KILN_WINO_PANEL + k0 % KILN_WINO_PANEL;
    const int stored = VW; /* zeros past K */
#else
    const size_t out = (size_t)c * K + k0;
    const int stored = valid;
#endif
    VEC g[9];
#pragma unroll
    for (int tap = 0; tap < 9; tap++) {
        float lane[VW];
        for (int v = 0; v < VW; v++)
            lane[v] = v < valid ? KILN_LOAD(w, base + v * lane_stride + tap * tap_stride) : 0.0f;
        g[tap] = VLOAD(0, lane);
    }
    /* Rows of g Gi^T, then columns, then the fractions of D. */
    VEC h[3][WA], col[WA];
#pragma unroll
    for (int r = 0; r < 3; r++)
        filter_1d(g[3 * r], g[3 * r + 1], g[3 * r + 2], h[r]);
#pragma unroll
    for (int j = 0; j < WA; j++) {
        filter_1d(h[0][j], h[1][j], h[2][j], col);
#pragma unroll
        for (int i = 0; i < WA; i++)
            store_ws(col[i] / (den[i] * den[j]), u + (i * WA + j) * plane + out, stored);
    }
}
#endif

/* Columns of B^T (d B) from the rows of d B, stored at v[t * plane + out]. */
__attribute__((always_inline)) inline void input_columns(VEC rows[WA][WA], KILN_GLOBAL float *v, size_t plane, size_t out, int valid)
{
#pragma unroll
    for (int j = 0; j < WA; j++) {
        VEC col[WA], r[WA];
#pragma unroll
        for (int i = 0; i < WA; i++)
            col[i] = rows[i][j];
        input_1d(col, r);
#pragma unroll
        for (int i = 0; i < WA; i++)
            store_ws(r[i], v + (i * WA + j) * plane + out, valid);
    }
}

/*
 * V = B^T d B. NHWC: global (ceil(C/VW), TW, N*TH), lanes are channels of
 * one tile. NCHW: global (TH or fewer, N*C), tile rows of channel c (every
 * th_step-th: the global size), VW tiles at a time; the last VW overlap the ones before
 * (unless the row has fewer), so every store is a whole vector.
 */
#if KILN_WANTS(KERNEL(_in))
KILN_KERNEL void KERNEL(_in)(WINO_SHAPE_ARGS, KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL float *v,
                             const ulong plane, const int th_step)
{
    VEC rows[WA][WA];
#if KILN_NHWC
    const int c0 = KILN_GLOBAL_ID(0) * VW, tw = KILN_GLOBAL_ID(1), nth = KILN_GLOBAL_ID(2);
    const int n = nth / TH, th = nth - n * TH, valid = min(VW, C - c0);
    const int h0 = th * WM - pad_top, w0 = tw * WM - pad_left;
    (void)th_step;
    KILN_GLOBAL const KILN_STORAGE *image = x + (size_t)n * H * W * C + c0;
    VEC d[WA][WA];
    if (h0 >= 0 && h0 + WA <= H && w0 >= 0 && w0 + WA <= W && valid == VW) { /* interior */
        KILN_GLOBAL const KILN_STORAGE *patch = image + ((size_t)h0 * W + w0) * C;
#pragma unroll
        for (int i = 0; i < WA; i++)
#pragma unroll
            for (int j = 0; j < WA; j++)
                d[i][j] = VLOAD_S(0, patch + ((size_t)i * W + j) * C);
    } else {
        for (int i = 0; i < WA; i++)
            for (int j = 0; j < WA; j++) {
                const int h = h0 + i, wc = w0 + j;
                d[i][j] = (uint)h < (uint)H && (uint)wc < (uint)W ? load_vec(image + ((size_t)h * W + wc) * C, valid)
                                                                  : (VEC)(0.0f);
            }
    }
#pragma unroll
    for (int i = 0; i < WA; i++)
        input_1d(d[i], rows[i]);
    input_columns(rows, v, plane, (size_t)(nth * TW + tw) * C + c0, valid);
#else
    const int nc = KILN_GLOBAL_ID(1);
    const int n = nc / C, c = nc - n * C;
    KILN_GLOBAL const KILN_STORAGE *image = x + (size_t)nc * H * W;
    for (int th = KILN_GLOBAL_ID(0); th < TH; th += th_step) {
        const int h0 = th * WM - pad_top;
        const size_t row_tiles = (size_t)c * N * TH * TW + (size_t)(n * TH + th) * TW;
        for (int next = 0; next < TW; next += VW) {
            const int tw0 = TW > VW ? min(next, TW - VW) : 0, valid = min(VW, TW - tw0);
#pragma unroll
            for (int i = 0; i < WA; i++) {
                VEC d[WA];
                const int h = h0 + i;
                if ((uint)h < (uint)H) {
                    load_row(image + (size_t)h * W, tw0 * WM - pad_left, W, d);
                } else {
#pragma unroll
                    for (int j = 0; j < WA; j++)
                        d[j] = 0.0f;
                }
                input_1d(d, rows[i]);
            }
            input_columns(rows, v, plane, row_tiles + tw0, valid);
        }
    }
#endif
}
#endif

/* alpha * acc + beta * z + bias, activated. */
inline VEC epilogue(VEC acc, VEC z, VEC bias, float alpha, float beta, float slope)
{
    VEC v = alpha * acc;
#if KILN_HAS_Z
    v = fma((VEC)(beta), z, v);
#endif
#if KILN_HAS_BIAS
    v += bias;
#endif
#if KILN_ACT
    float lane[VW];
    VSTORE(v, 0, lane);
#pragma unroll
    for (int l = 0; l < VW; l++)
        lane[l] = kiln_activate(lane[l], slope);
    v = VLOAD(0, lane);
#endif
    return v;
}

/* acc = A^T M A from m[t * plane + in]. */
inline void output_tile(KILN_GLOBAL const float *m, size_t plane, size_t in, int valid, VEC acc[WM][WM])
{
    VEC mv[WA][WA];
#pragma unroll
    for (int i = 0; i < WA; i++)
#pragma unroll
        for (int j = 0; j < WA; j++)
            mv[i][j] = load_ws(m + (i * WA + j) * plane + in, valid);
    output_2d(mv, acc);
}

/*
 * y = pool(epilogue(A^T M A)). NHWC: global (ceil(K/VW), TW, N*TH), lanes
 * are filters of one tile. NCHW: global (TH, N*K), one tile row of filter
 * k, VW tiles at a time as in _in. With KILN_POOL each m x m tile holds whole
 * 2x2 windows (m is even and tiles start at even rows and columns); windows
 * reaching past P or Q are not stored, and the residual is read only inside
 * P x Q.
 */
#if KILN_WANTS(KERNEL(_out))
KILN_KERNEL void KERNEL(_out)(WINO_SHAPE_ARGS, const float alpha, const float beta, const float slope,
                              KILN_GLOBAL const float *m, const ulong plane, KILN_GLOBAL const float *bias,
                              KILN_GLOBAL const KILN_STORAGE *z, KILN_GLOBAL KILN_STORAGE *y)
{
    const int T = N * TH * TW;
    const int YH = KILN_POOL ? P / 2 : P, YW = KILN_POOL ? Q / 2 : Q;
    VEC acc[WM][WM], e[WM][WM], out[SIDE][SIDE];
#if KILN_NHWC
    const int k0 = KILN_GLOBAL_ID(0) * VW, tw = KILN_GLOBAL_ID(1), nth = KILN_GLOBAL_ID(2);
    const int n = nth / TH, th = nth - n * TH, valid = min(VW, K - k0);
    const int oh0 = th * WM, ow0 = tw * WM;
#if KILN_HAS_BIAS
    const VEC b = load_ws(bias + k0, valid);
#else
    const VEC b = 0.0f;
#endif
    output_tile(m, plane, (size_t)(nth * TW + tw) * K + k0, valid, acc);
#pragma unroll
    for (int i = 0; i < WM; i++)
#pragma unroll
        for (int j = 0; j < WM; j++) {
            VEC zv = 0.0f;
#if KILN_HAS_Z
            if (oh0 + i < P && ow0 + j < Q)
                zv = load_vec(z + (((size_t)n * P + oh0 + i) * Q + ow0 + j) * K + k0, valid);
#endif
            e[i][j] = epilogue(acc[i][j], zv, b, alpha, beta, slope);
        }
    pool_tile(e, out);
    const int r0 = oh0 / (WM / SIDE), c0 = ow0 / (WM / SIDE);
    for (int i = 0; i < SIDE && r0 + i < YH; i++)
        for (int j = 0; j < SIDE && c0 + j < YW; j++)
            store_vec(out[i][j], y + (((size_t)n * YH + r0 + i) * YW + c0 + j) * K + k0, valid);
#else
    const int th = KILN_GLOBAL_ID(0), nk = KILN_GLOBAL_ID(1);
    const int n = nk / K, k = nk - n * K, oh0 = th * WM, r0 = oh0 / (WM / SIDE);
#if KILN_HAS_BIAS
    const VEC b = bias[k];
#else
    const VEC b = 0.0f;
#endif
    const size_t row_tiles = (size_t)k * T + (size_t)(n * TH + th) * TW;
    for (int next = 0; next < TW; next += VW) {
        const int tw0 = TW > VW ? min(next, TW - VW) : 0, valid = min(VW, TW - tw0), ow0 = tw0 * WM;
        output_tile(m, plane, row_tiles + tw0, valid, acc);
#pragma unroll
        for (int i = 0; i < WM; i++) {
            VEC zv[WA];
#pragma unroll
            for (int j = 0; j < WM; j++)
                zv[j] = 0.0f;
#if KILN_HAS_Z
            if (oh0 + i < P)
                load_row(z + ((size_t)nk * P + oh0 + i) * Q, ow0, Q, zv);
#endif
#pragma unroll
            for (int j = 0; j < WM; j++)
                e[i][j] = epilogue(acc[i][j], zv[j], b, alpha, beta, slope);
        }
        pool_tile(e, out);
        for (int i = 0; i < SIDE && r0 + i < YH; i++)
            store_row(out[i], y + ((size_t)nk * YH + r0 + i) * YW, ow0 / (WM / SIDE), YW);
    }
#endif
}
#endif
