/*
 * The one-dimensional transforms of Winograd's F(m, 3), m = WM (2 or 4),
 * on vectors VEC (defined before this, with WM and WA = m + 2): filter_1d
 * (h = Gi g), input_1d (r = B^T d), output_1d (y = A^T v), and den, the
 * divisors that turn Gi into G (docs/winograd.md derives the matrices).
 * Then output_2d (A^T M A of a tile's (m+2) x (m+2) products) and
 * pool_tile (the SIDE x SIDE values a tile stores, after the 2x2 max pool of
 * KILN_POOL), and the loads and stores of a vector's first lanes (LANE_IO). Shared by conv_f32_winograd.cl and conv_f32_winograd_fused.cl.
 */
#ifndef KILN_CL_WINOGRAD_1D_H
#define KILN_CL_WINOGRAD_1D_H

#if WM == 2
/* den_i of G = D Gi: G's rows are Gi's divided by these. */
KILN_CONSTANT float den[WA] = {1.0f, 2.0f, 2.0f, 1.0f};

/* h = Gi g: Gi rows (1 0 0), (1 1 1), (1 -1 1), (0 0 1). */
inline void filter_1d(const VEC g0, const VEC g1, const VEC g2, VEC *h)
{
    const VEC e = g0 + g2;
    h[0] = g0;
    h[1] = e + g1;
    h[2] = e - g1;
    h[3] = g2;
}

/* r = B^T d: B^T rows (1 0 -1 0), (0 1 1 0), (0 -1 1 0), (0 -1 0 1). */
inline void input_1d(const VEC *d, VEC *r)
{
    r[0] = d[0] - d[2];
    r[1] = d[1] + d[2];
    r[2] = d[2] - d[1];
    r[3] = d[3] - d[1];
}

/* y = A^T v: A^T rows (1 1 1 0), (0 1 -1 1). */
inline void output_1d(const VEC *v, VEC *y)
{
    y[0] = v[0] + v[1] + v[2];
    y[1] = v[1] - v[2] + v[3];
}
#elif WM == 4
KILN_CONSTANT float den[WA] = {4.0f, -6.0f, -6.0f, 24.0f, 24.0f, 1.0f};

/* Gi rows (1 0 0), (1 1 1), (1 -1 1), (1 2 4), (1 -2 4), (0 0 1). */
inline void filter_1d(const VEC g0, const VEC g1, const VEC g2, VEC *h)
{
    const VEC e = g0 + g2, f = fma((VEC)(4.0f), g2, g0), t = 2.0f * g1;
    h[0] = g0;
    h[1] = e + g1;
    h[2] = e - g1;
    h[3] = f + t;
    h[4] = f - t;
    h[5] = g2;
}

/* B^T rows (4 0 -5 0 1 0), (0 -4 -4 1 1 0), (0 4 -4 -1 1 0),
   (0 -2 -1 2 1 0), (0 2 -1 -2 1 0), (0 4 0 -5 0 1). */
inline void input_1d(const VEC *d, VEC *r)
{
    const VEC a = fma((VEC)(-4.0f), d[2], d[4]), b = fma((VEC)(-4.0f), d[1], d[3]);
    const VEC e = d[4] - d[2], f = 2.0f * (d[3] - d[1]);
    r[0] = fma((VEC)(4.0f), d[0], fma((VEC)(-5.0f), d[2], d[4]));
    r[1] = a + b;
    r[2] = a - b;
    r[3] = e + f;
    r[4] = e - f;
    r[5] = fma((VEC)(4.0f), d[1], fma((VEC)(-5.0f), d[3], d[5]));
}

/* A^T rows (1 1 1 1 1 0), (0 1 -1 2 -2 0), (0 1 1 4 4 0), (0 1 -1 8 -8 1). */
inline void output_1d(const VEC *v, VEC *y)
{
    const VEC s12 = v[1] + v[2], d12 = v[1] - v[2], s34 = v[3] + v[4], d34 = v[3] - v[4];
    y[0] = v[0] + s12 + s34;
    y[1] = fma((VEC)(2.0f), d34, d12);
    y[2] = fma((VEC)(4.0f), s34, s12);
    y[3] = fma((VEC)(8.0f), d34, d12) + v[5];
}
#else
#error "KILN_WINO_M must be 2 or 4"
#endif

/* Side of the stored part of a tile: m, or m / 2 after the 2x2 pool; a
   literal, which vector type names are pasted from. */
#if KILN_POOL && WM == 4
#define SIDE 2
#elif KILN_POOL
#define SIDE 1
#else
#define SIDE WM
#endif

/* acc = A^T M A of a tile's products mv: its rows, then its columns. */
inline void output_2d(VEC mv[WA][WA], VEC acc[WM][WM])
{
    VEC rows[WA][WM];
#pragma unroll
    for (int i = 0; i < WA; i++)
        output_1d(mv[i], rows[i]);
#pragma unroll
    for (int j = 0; j < WM; j++) {
        VEC col[WA], r[WM];
#pragma unroll
        for (int i = 0; i < WA; i++)
            col[i] = rows[i][j];
        output_1d(col, r);
#pragma unroll
        for (int i = 0; i < WM; i++)
            acc[i][j] = r[i];
    }
}

/*
 * The first `valid` lanes of a vector at p (the rest 0) and the store of
 * the first `valid` lanes, whole vectors when valid == VW: for the fp32
 * workspace (load_ws, store_ws) and for tensors in their storage type
 * (load_vec, store_vec).
 */
#define LANE_IO(suffix, T, VLOAD_T, VSTORE_T, LOAD_T, STORE_T)                                                         \
    inline VEC load##suffix(KILN_GLOBAL const T *p, int valid)                                                         \
    {                                                                                                                  \
        if (valid >= VW)                                                                                               \
            return VLOAD_T(0, p);                                                                                      \
        float lane[VW];                                                                                                \
        for (int l = 0; l < VW; l++)                                                                                   \
            lane[l] = l < valid ? LOAD_T(p, l) : 0.0f;                                                                 \
        return VLOAD(0, lane);                                                                                         \
    }                                                                                                                  \
    inline void store##suffix(VEC v, KILN_GLOBAL T *p, int valid)                                                      \
    {                                                                                                                  \
        if (valid >= VW) {                                                                                             \
            VSTORE_T(v, 0, p);                                                                                         \
            return;                                                                                                    \
        }                                                                                                              \
        float lane[VW];                                                                                                \
        VSTORE(v, 0, lane);                                                                                            \
        for (int l = 0; l < valid; l++)                                                                                \
            STORE_T(lane[l], p, l);                                                                                    \
    }
#define LOAD_F(p, i) ((p)[i])
#define STORE_F(v, p, i) ((p)[i] = (v))
LANE_IO(_ws, float, VLOAD, VSTORE, LOAD_F, STORE_F)

#if KILN_NHWC
LANE_IO(_vec, KILN_STORAGE, VLOAD_S, VSTORE_S, KILN_LOAD, KILN_STORE)
#endif

/* The values a tile stores: SIDE x SIDE, after the 2x2 max pool if any. */
inline void pool_tile(VEC e[WM][WM], VEC out[SIDE][SIDE])
{
#pragma unroll
    for (int i = 0; i < SIDE; i++)
#pragma unroll
        for (int j = 0; j < SIDE; j++)
#if KILN_POOL
            out[i][j] =
                fmax(fmax(e[2 * i][2 * j], e[2 * i][2 * j + 1]), fmax(e[2 * i + 1][2 * j], e[2 * i + 1][2 * j + 1]));
#else
            out[i][j] = e[i][j];
#endif
}

#endif
