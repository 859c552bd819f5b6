/*
 * Implicit-GEMM convolution for GPUs: work-group tiles staged through local
 * memory and a register tile per work-item, in the manner of
 * gemm/gemm_f32_tiled.cl (conv_f32_igemm.cl is the CPU counterpart).
 *
 * GEMM view, per group g: Y[pixel][k] = sum_kk X[pixel][kk] * W[k][kk], with
 * M = output pixels n*P*Q, N = the group's filters K/groups, K = kk over the
 * filter volume KK = C/groups * R * S in the weights' own order ((c, r, s)
 * for KCRS, (r, s, c) for KRSC). So W is the weights tensor read in place, a
 * row-major K/groups x KK matrix per group, and X is the im2col matrix, never
 * stored: its elements are gathered from x by index arithmetic (stride,
 * padding, dilation, groups, either layout), zero outside the image.
 *
 * Launch: local  = (MDIMC * NDIMC, 1, 1)
 *         global = (ceil(n*P*Q / MWG) * MDIMC * NDIMC, ceil(K/groups / NWG), groups)
 * Work-group (tm, tn, g) computes the MWG x NWG output tile of pixels
 * tm * MWG .. and filters tn * NWG .. of group g. Its work-items form an
 * MDIMC x NDIMC grid, neighbouring along pixels in NCHW and along filters in
 * NHWC (the output's contiguous dimension, so neighbours store neighbours).
 * Work-item (im, in) holds an MWI x NWI register tile (MWI = MWG / MDIMC,
 * NWI = NWG / NDIMC): groups of VW consecutive pixels (mi / VW * MDIMC + im)
 * * VW + mi % VW and likewise of filters, read from local memory as vectors.
 *
 * K advances in steps of KWG: the work-group stages the KWG x MWG block of X
 * and the KWG x NWG block of W in local memory (zeros past the last pixel,
 * filter or kk), barrier, every work-item multiplies, barrier. The register
 * tile, the local blocks' layout, the multiply and its barriers are the
 * GEMM's (common/local_tile.h, X as its A and W as its B). Staging keeps
 * neighbouring work-items on neighbouring addresses of x (pixels in NCHW,
 * channels in NHWC) and of w (kk). The gather reads two small tables in
 * local memory: each tile pixel's input origin (offset, top row, left
 * column), made once, and each of the step's kk decoded into its offset
 * within the window and its tap's row and column. The kk table is double
 * buffered: while a step is staged from one half, KWG work-items decode the
 * next step's kk into the other, so the decode adds no barrier and no
 * division to the gather.
 *
 * The epilogue y = act(alpha * acc + beta * z + bias) (common/epilogue.h) is
 * applied before the only store of y; no fused pool.
 *
 * Defines: KILN_CONV_IGEMM_MWG, _NWG, _KWG, _MDIMC, _NDIMC, _VW (the
 * profile's conv.igemm_*), KILN_NHWC, KILN_F16, KILN_BF16 and the epilogue switches.
 * The host (src/ops/conv_igemm.c) checks MWG % (MDIMC * VW) == 0 and
 * NWG % (NDIMC * VW) == 0, and the work-group size and the local memory
 * declared here against the device. The weights are read in place, so
 * constant_weights changes nothing for this kernel.
 */
#include "common/epilogue.h"
#include "common/portability.h"
#include "conv/igemm_shape.h"

/* The local tile (common/local_tile.h): X is its A (pixels x kk), staged
   along K in NHWC; W its B (kk x filters), always along K; one vector width
   for both; no unroll over a step. */
#define LTILE_MWG KILN_CONV_IGEMM_MWG
#define LTILE_NWG KILN_CONV_IGEMM_NWG
#define LTILE_KWG KILN_CONV_IGEMM_KWG
#define LTILE_MDIMC KILN_CONV_IGEMM_MDIMC
#define LTILE_NDIMC KILN_CONV_IGEMM_NDIMC
#define LTILE_KWI 1
#define LTILE_VWM KILN_CONV_IGEMM_VW
#define LTILE_VWN KILN_CONV_IGEMM_VW
#define LTILE_SA 1
#define LTILE_SB 1
#define LTILE_A_ALONG_K KILN_NHWC
#define LTILE_B_ALONG_K 1
#include "common/local_tile.h"

/* The work-group's local memory: blocks of X and W, and the index tables.
   Pixel j of the tile reads x at pix_at[j] + kk_at[cur][kk] when its input
   row pix_h[j] + kk_h[cur][kk] and column pix_w[j] + kk_w[cur][kk] are
   inside, cur being the kk table's half of the step. */
typedef struct {
    float xs[LTILE_KWG * LTILE_ALD], ws[LTILE_KWG * LTILE_BLD];
    long pix_at[LTILE_MWG], kk_at[2][LTILE_KWG];
    int pix_h[LTILE_MWG], pix_w[LTILE_MWG], kk_h[2][LTILE_KWG], kk_w[2][LTILE_KWG];
} igemm_local;

/* The work-item's place: (im, in) in the grid, NHWC neighbours along
   filters, NCHW along pixels. */
#if KILN_NHWC
#define IGEMM_IM(lid) ((lid) / LTILE_NDIMC)
#define IGEMM_IN(lid) ((lid) % LTILE_NDIMC)
#else
#define IGEMM_IM(lid) ((lid) % LTILE_MDIMC)
#define IGEMM_IN(lid) ((lid) / LTILE_MDIMC)
#endif

/* acc = the work-group's tile (pixels pix0 .., filters f0 .. of group g)
   over kk in [kb, ke) (kb a multiple of KWG). */
void igemm_tile(IGEMM_SHAPE_ARGS, KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const KILN_STORAGE *w, const int g,
                const int pix0, const int f0, const int kb, const int ke, float acc[LTILE_MWI][LTILE_NWI],
                KILN_LOCAL igemm_local *L)
{
    const int lid = KILN_LOCAL_ID(0), im = IGEMM_IM(lid), in = IGEMM_IN(lid);
    const int cg = C / groups, kg = K / groups, PQ = P * Q, RS = R * S, KK = cg * RS;
    const int mrem = N * PQ - pix0, nrem = kg - f0;

    for (int j = lid; j < LTILE_MWG; j += LTILE_THREADS) {
        const int pix = pix0 + min(j, mrem - 1), n = pix / PQ, pq = pix - n * PQ, p = pq / Q;
        const int h0 = p * stride_h - pad_top, w0 = (pq - p * Q) * stride_w - pad_left;
#if KILN_NHWC
        L->pix_at[j] = (((long)n * H + h0) * W + w0) * C + g * cg;
#else
        L->pix_at[j] = (((long)n * C + g * cg) * H + h0) * W + w0;
#endif
        L->pix_h[j] = h0, L->pix_w[j] = w0;
    }

    /* The decode of kk in the weights' order into entry i of table half t. */
#if KILN_NHWC
#define DECODE_KK(t, i, kk)                                                                                            \
    do {                                                                                                               \
        const int k_ = kk, rs_ = k_ / cg, r_ = rs_ / S, s_ = rs_ - r_ * S;                                             \
        L->kk_h[t][i] = r_ * dil_h, L->kk_w[t][i] = s_ * dil_w;                                                        \
        L->kk_at[t][i] = ((long)L->kk_h[t][i] * W + L->kk_w[t][i]) * C + (k_ - rs_ * cg);                              \
    } while (0)
#else
#define DECODE_KK(t, i, kk)                                                                                            \
    do {                                                                                                               \
        const int k_ = kk, c_ = k_ / RS, r_ = (k_ - c_ * RS) / S, s_ = k_ - c_ * RS - r_ * S;                          \
        L->kk_h[t][i] = r_ * dil_h, L->kk_w[t][i] = s_ * dil_w;                                                        \
        L->kk_at[t][i] = ((long)c_ * H + L->kk_h[t][i]) * W + L->kk_w[t][i];                                           \
    } while (0)
#endif
    for (int i = lid; i < LTILE_KWG; i += LTILE_THREADS)
        DECODE_KK(0, i, kb + i);
    KILN_BARRIER_LOCAL();

    ltile_zero(acc);
#define X_FRAGMENT(a, kk) ltile_a_fragment(a, L->xs, kk, im)
#define W_FRAGMENT(b, kk) ltile_b_fragment(b, L->ws, kk, in)

    const KILN_GLOBAL KILN_STORAGE *wg = w + (size_t)(g * kg + f0) * KK;
    for (int k0 = kb; k0 < ke; k0 += LTILE_KWG) {
        const int krem = ke - k0, cur = (k0 - kb) / LTILE_KWG % 2;
        for (int i = lid; i < LTILE_KWG; i += LTILE_THREADS)
            DECODE_KK(1 - cur, i, k0 + LTILE_KWG + i);
        for (int e = lid; e < LTILE_KWG * LTILE_MWG; e += LTILE_THREADS) {
#if KILN_NHWC
            const int kk = e % LTILE_KWG, j = e / LTILE_KWG;
#else
            const int kk = e / LTILE_MWG, j = e % LTILE_MWG;
#endif
            const int row = L->pix_h[j] + L->kk_h[cur][kk], col = L->pix_w[j] + L->kk_w[cur][kk];
            const bool inside = j < mrem && kk < krem && (uint)row < (uint)H && (uint)col < (uint)W;
            L->xs[LTILE_A_AT(j, kk)] = inside ? KILN_LOAD(x, L->pix_at[j] + L->kk_at[cur][kk]) : 0.0f;
        }
        for (int e = lid; e < LTILE_KWG * LTILE_NWG; e += LTILE_THREADS) {
            const int kk = e % LTILE_KWG, f = e / LTILE_KWG;
            L->ws[LTILE_B_AT(kk, f)] = f < nrem && kk < krem ? KILN_LOAD(wg, (size_t)f * KK + k0 + kk) : 0.0f;
        }
        LTILE_STEP(acc, X_FRAGMENT, W_FRAGMENT);
    }
}

/* The output element of pixel pix (of n * P * Q) and filter k: NHWC rows
   of K filters, NCHW planes of P * Q pixels. */
size_t igemm_out_at(const int pix, const int k, const int K, const int PQ)
{
#if KILN_NHWC
    (void)PQ;
    return (size_t)pix * K + k;
#else
    const int n = pix / PQ;
    return ((size_t)n * K + k) * PQ + (pix - n * PQ);
#endif
}

/* y = act(alpha * acc + beta * z + bias) at `at`, filter k. */
void igemm_epilogue(const float acc, const size_t at, const int k, const float alpha, const float beta,
                    const float slope, KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z,
                    KILN_GLOBAL KILN_STORAGE *y)
{
    float r = alpha * acc;
#if KILN_HAS_Z
    r = fma(beta, KILN_LOAD(z, at), r);
#endif
#if KILN_HAS_BIAS
    r += bias[k];
#endif
    (void)beta, (void)bias, (void)z;
    KILN_STORE(kiln_activate(r, slope), y, at);
}

#define IGEMM_SHAPE_PASS N, C, H, W, K, R, S, P, Q, stride_h, stride_w, pad_top, pad_left, dil_h, dil_w, groups

/* One program holds the main kernel, or (KILN_CONV_SPLIT=1) the split-K
   kernels, so that its local memory is its one kernel's. */
#ifndef KILN_CONV_SPLIT
#define KILN_CONV_SPLIT 0
#endif

#if !KILN_CONV_SPLIT
/* clang-format off */
KILN_KERNEL KILN_WORK_GROUP_SIZE(LTILE_THREADS, 1, 1)
void conv_f32_igemm_tiled(IGEMM_SHAPE_ARGS, const float alpha, const float beta, const float slope,
                          KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const KILN_STORAGE *w,
                          KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z, KILN_GLOBAL KILN_STORAGE *y)
/* clang-format on */
{
    KILN_SHARED igemm_local L;
    const int lid = KILN_LOCAL_ID(0), im = IGEMM_IM(lid), in = IGEMM_IN(lid), g = KILN_GROUP_ID(2);
    const int kg = K / groups, PQ = P * Q, KK = C / groups * R * S;
    const int pix0 = KILN_GROUP_ID(0) * LTILE_MWG, f0 = KILN_GROUP_ID(1) * LTILE_NWG;
    const int mrem = N * PQ - pix0, nrem = kg - f0;
    float acc[LTILE_MWI][LTILE_NWI];
    igemm_tile(IGEMM_SHAPE_PASS, x, w, g, pix0, f0, 0, KK, acc, &L);

    /* Epilogue and the only store. */
#pragma unroll
    for (int mi = 0; mi < LTILE_MWI; mi++) {
        const int j = LTILE_ROW(mi, im);
        if (j >= mrem)
            break;
#pragma unroll
        for (int ni = 0; ni < LTILE_NWI; ni++) {
            const int f = LTILE_COL(ni, in);
            if (f >= nrem)
                break;
            const int k = g * kg + f0 + f;
            igemm_epilogue(acc[mi][ni], igemm_out_at(pix0 + j, k, K, PQ), k, alpha, beta, slope, bias, z, y);
        }
    }
}
#else
/*
 * Split K, for layers with fewer tiles than the device has compute units to
 * fill: work-group (tm, tn, z) computes slice s = z % splits of group
 * g = z / splits, kk in [s * KS, min(KK, (s + 1) * KS)) (KS a multiple of
 * KWG), and writes its raw products in fp32 to part[z][pixel][filter of
 * the group] (n * P * Q x K / groups, tight). conv_f32_igemm_split_reduce
 * adds the slices of each output in order s = 0 .. splits - 1 (the same
 * sums on every run) and applies the epilogue.
 *
 * Launch: as conv_f32_igemm_tiled with groups * splits for its third
 * dimension; the reduction over (n * P * Q, K), any local size.
 */
/* clang-format off */
KILN_KERNEL KILN_WORK_GROUP_SIZE(LTILE_THREADS, 1, 1)
void conv_f32_igemm_tiled_split(IGEMM_SHAPE_ARGS, const int KS, const int splits,
                                KILN_GLOBAL const KILN_STORAGE *x, KILN_GLOBAL const KILN_STORAGE *w,
                                KILN_GLOBAL float *part)
/* clang-format on */
{
    KILN_SHARED igemm_local L;
    const int lid = KILN_LOCAL_ID(0), im = IGEMM_IM(lid), in = IGEMM_IN(lid);
    const int z = KILN_GROUP_ID(2), g = z / splits, s = z % splits;
    const int kg = K / groups, NPQ = N * P * Q, KK = C / groups * R * S;
    const int pix0 = KILN_GROUP_ID(0) * LTILE_MWG, f0 = KILN_GROUP_ID(1) * LTILE_NWG;
    const int mrem = NPQ - pix0, nrem = kg - f0;
    float acc[LTILE_MWI][LTILE_NWI];
    igemm_tile(IGEMM_SHAPE_PASS, x, w, g, pix0, f0, s * KS, min(KK, (s + 1) * KS), acc, &L);

    part += (size_t)z * NPQ * kg;
#pragma unroll
    for (int mi = 0; mi < LTILE_MWI; mi++) {
        const int j = LTILE_ROW(mi, im);
        if (j >= mrem)
            break;
#pragma unroll
        for (int ni = 0; ni < LTILE_NWI; ni++) {
            const int f = LTILE_COL(ni, in);
            if (f >= nrem)
                break;
            part[(size_t)(pix0 + j) * kg + f0 + f] = acc[mi][ni];
        }
    }
}

/* y at (pixel, filter k) = the epilogue of the sum over the slices, in
   order, of part[g * splits + s][pixel][k - g * kg]. */
KILN_KERNEL void conv_f32_igemm_split_reduce(IGEMM_SHAPE_ARGS, const int splits, const float alpha, const float beta,
                                             const float slope, KILN_GLOBAL const float *part,
                                             KILN_GLOBAL const float *bias, KILN_GLOBAL const KILN_STORAGE *z,
                                             KILN_GLOBAL KILN_STORAGE *y)
{
    const int pix = KILN_GLOBAL_ID(0), k = KILN_GLOBAL_ID(1), NPQ = N * P * Q, kg = K / groups;
    (void)C, (void)H, (void)W, (void)R, (void)S, (void)stride_h, (void)stride_w, (void)pad_top, (void)pad_left,
        (void)dil_h, (void)dil_w;
    if (pix >= NPQ || k >= K)
        return;
    const int g = k / kg;
    const size_t plane = (size_t)NPQ * kg;
    part += (size_t)g * splits * plane + (size_t)pix * kg + (k - g * kg);
    float sum = 0.0f;
    for (int s = 0; s < splits; s++)
        sum += part[s * plane];
    igemm_epilogue(sum, igemm_out_at(pix, k, K, P * Q), k, alpha, beta, slope, bias, z, y);
}
#endif
