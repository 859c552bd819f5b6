/*
 * conv_f16_igemm_mma: 2-D convolution as an implicit GEMM on tensor cores,
 * NHWC input and output, KRSC weights, fp16 storage (bf16 with
 * KILN_MMA_BF16=1), fp32 accumulation on mma.sync.m16n8k16, sm_80 on. The
 * products of fp16 (bf16) values are exact in fp32, so it computes as
 * precisely as the fp32-arithmetic kernels do on the same data, up to the
 * order of the additions.
 *
 *   y[pixel][k] = act(alpha * sum_kk A[pixel][kk] * W[k][kk] + beta * z[pixel][k] + bias[k])
 *
 * GEMM view: C = A W^T, M = n * P * Q output pixels (y's rows: NHWC output
 * is C stored M x K), N = K filters, Kdim = R * S * C. A is the im2col
 * matrix, never stored: each step's BM x BK tile is gathered from x by
 * 16-byte cp.async copies of 8 channels of one tap, zero-filled in the
 * padding and past Kdim (conv/igemm_gather.h, which the host model in
 * tests/test_cuda.c checks). The weights, K x Kdim with Kdim contiguous,
 * are the GEMM's B transposed, copied as stored by the same pieces. Both
 * tiles sit in shared memory rows padded by 8 halves, through a ring of
 * STAGES buffers filled STAGES - 1 steps ahead; a block's warps multiply
 * as gemm_f16_mma does (gemm/mma_pipeline.h, fragments by ldmatrix at
 * gemm/mma_layout.h's addresses).
 *
 * Epilogue: alpha, beta * z (z in y's layout, read only with KILN_HAS_Z),
 * bias per filter (fp32, KILN_HAS_BIAS), the activation KILN_ACT of
 * cl/common/epilogue.h, in the order of conv_f32_igemm_tiled.cl's
 * igemm_epilogue; y stored once, in the storage type (pairs of filters as
 * one 32-bit store where K is even).
 *
 * ABI: conv_f32_igemm_tiled's arguments (conv/igemm_shape.h, then alpha,
 * beta, the leaky slope, x, w, bias, z, y); groups must be 1. The host
 * (src/ops/conv_mma.c) takes NHWC, groups 1, C % 8 == 0 (so every piece is
 * 16-byte aligned), bounds the shapes as conv/igemm_gather.h needs, and
 * x, the weights and y within 2^31 - 1 values, so offsets are 32-bit.
 *
 * Parameters (-D): KILN_CONV_MMA_BM, BN, BK, WARPS_M, WARPS_N, STAGES (the
 * profile's conv.mma group, constraints in device_profiles/README.md),
 * KILN_MMA_BF16, and the epilogue switches KILN_ACT, KILN_HAS_BIAS,
 * KILN_HAS_Z.
 *
 * Launch: block (WARPS_M * WARPS_N * 32), grid (ceil(M / BM), ceil(K / BN)),
 * dynamic shared memory STAGES * (BM + BN) * (BK + 8) * 2 bytes
 * (kiln_conv_mma_shared_bytes, the host's formula).
 */
#include "common/epilogue.h"
#include "conv/igemm_gather.h"
#include "conv/igemm_shape.h"

#if __CUDA_ARCH__ < 800
#error "conv_f16_igemm_mma: needs sm_80 or newer (cp.async, m16n8k16 in both types)"
#endif
#define KILN_MMA_ASYNC 1
#include "gemm/mma_pipeline.h"

#ifndef KILN_HAS_BIAS
#define KILN_HAS_BIAS 0
#endif
#ifndef KILN_HAS_Z
#define KILN_HAS_Z 0
#endif

#define BM KILN_CONV_MMA_BM
#define BN KILN_CONV_MMA_BN
#define BK KILN_CONV_MMA_BK
#define STAGES KILN_CONV_MMA_STAGES
#define WARPS_N KILN_CONV_MMA_WARPS_N
#define THREADS (KILN_CONV_MMA_WARPS_M * KILN_CONV_MMA_WARPS_N * 32)
#define WM (BM / KILN_CONV_MMA_WARPS_M)
#define WN (BN / KILN_CONV_MMA_WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
/* Both tiles as stored: A BM rows of BK, the weights BN rows of BK. */
#define LD (BK + 8)
#define A_TILE (BM * LD)
#define B_TILE (BN * LD)
/* A thread's pieces of each A tile and each weight tile. */
#define A_PIECES (BM * (BK / 8) / THREADS)
#define B_PIECES (BN * (BK / 8) / THREADS)

#if BK % 32 || BM % 16 || BN % 16 || WM % 16 || WN % 16 || STAGES < 2 || STAGES > 5 || THREADS % (BK / 8) ||           \
    BM * (BK / 8) % THREADS || BN * (BK / 8) % THREADS
#error "conv_f16_igemm_mma: parameters break the constraints listed in device_profiles/README.md"
#endif

/* One output before it is stored, as igemm_epilogue computes it. */
__device__ __forceinline__ float epilogue(const float acc, const float alpha, const float beta, const float slope,
                                          const unsigned short *z, const int at, const float b)
{
    float r = alpha * acc;
#if KILN_HAS_Z
    r = fmaf(beta, from_storage(z[at]), r);
#endif
#if KILN_HAS_BIAS
    r += b;
#endif
    (void)beta, (void)z, (void)at, (void)b;
    return kiln_activate(r, slope);
}

/* The signature keeps conv_f32_igemm_tiled's order. z and y are not
   __restrict__: z may be y (a residual added in place), each element read
   by the thread that then stores it. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(THREADS)
conv_f16_igemm_mma(IGEMM_SHAPE_ARGS, const float alpha, const float beta, const float slope,
                   const unsigned short *__restrict__ x, const unsigned short *__restrict__ w,
                   const float *__restrict__ bias, const unsigned short *z, unsigned short *y)
/* clang-format on */
{
    extern __shared__ __align__(16) unsigned short shared[];
    unsigned short *as = shared, *bs = shared + STAGES * A_TILE;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int M = N * P * Q, KK = R * S * C;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int wr = kiln_mma_warp_row(warp, WARPS_N, WM), wc = kiln_mma_warp_col(warp, WARPS_N, WN);
    (void)groups;

    /* This thread's pieces of A: their pixels, decoded once, and the tap its
       column reads at the next step loaded. */
    const int col = kiln_igemm_piece_col(tid, BK);
    struct kiln_igemm_pixel px[A_PIECES];
#pragma unroll
    for (int i = 0; i < A_PIECES; i++)
        px[i] = kiln_igemm_pixel_of(m0 + kiln_igemm_piece_row(tid, i, BK, THREADS), M, P, Q, H, W, C, stride_h,
                                    stride_w, pad_top, pad_left);
    struct kiln_igemm_tap tap = kiln_igemm_tap_of(col, C, S);

    float acc[MI][NI][4];
    mma_zero(acc);

    /* Step s's tiles into buffer s % STAGES; steps load in order, so the
       tap advances by BK a load. */
    const int steps = (KK + BK - 1) / BK;
    auto load = [&](int s) {
        unsigned short *a = as + s % STAGES * A_TILE + col, *b = bs + s % STAGES * B_TILE + col;
#pragma unroll
        for (int i = 0; i < A_PIECES; i++) {
            const int inside = kiln_igemm_inside(px[i], tap, R, H, W, dil_h, dil_w);
            copy16(a + kiln_igemm_piece_row(tid, i, BK, THREADS) * LD,
                   x + (inside ? kiln_igemm_at(px[i], tap, W, C, dil_h, dil_w) : 0u), inside ? 16 : 0);
        }
        kiln_igemm_tap_next(&tap, BK, C, S);
        /* The weights as stored, the same pieces: filter rows, Kdim % 8 == 0. */
        const int k = s * BK + col;
#pragma unroll
        for (int i = 0; i < B_PIECES; i++) {
            const int row = kiln_igemm_piece_row(tid, i, BK, THREADS), f = n0 + row, valid = f < K && k < KK;
            copy16(b + row * LD, w + (valid ? (unsigned)f * KK + k : 0u), valid ? 16 : 0);
        }
    };
    mma_pipeline<STAGES>(steps, load, [&](int s) {
        mma_warp_step<BK, MI, NI, LD, LD, 0, 1>(acc, as + s % STAGES * A_TILE, bs + s % STAGES * B_TILE, wr, wc, lane);
    });

    /* The epilogue: a lane holds filters c and c + 1 of rows g and g + 8 of
       each mma tile (elements 0-1 and 2-3). */
#pragma unroll
    for (int ni = 0; ni < NI; ni++) {
        const int c = n0 + wc + ni * 8 + kiln_mma_c_col(lane, 0);
        float b0 = 0.0f, b1 = 0.0f;
#if KILN_HAS_BIAS
        b0 = c < K ? bias[c] : 0.0f, b1 = c + 1 < K ? bias[c + 1] : 0.0f;
#endif
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int m = m0 + wr + mi * 16 + kiln_mma_c_row(lane, 2 * h);
                if (m >= M || c >= K)
                    continue;
                const int at = m * K + c;
                const float v0 = epilogue(acc[mi][ni][2 * h], alpha, beta, slope, z, at, b0);
                if (K % 2 == 0) { /* c is even: filters c and c + 1 in one aligned store */
                    const float v1 = epilogue(acc[mi][ni][2 * h + 1], alpha, beta, slope, z, at + 1, b1);
                    *(unsigned *)(y + at) = to_storage(v0) | (unsigned)to_storage(v1) << 16;
                } else {
                    y[at] = to_storage(v0);
                    if (c + 1 < K)
                        y[at + 1] = to_storage(epilogue(acc[mi][ni][2 * h + 1], alpha, beta, slope, z, at + 1, b1));
                }
            }
    }
}
