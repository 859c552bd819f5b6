/*
 * attention_decode: decoding attention on the CUDA backend, a memory-bound
 * pass over the keys and values of each (batch, kv head) for its few rows
 * (query heads per kv head times query positions, at most 8), in fp32,
 * fp16 (KILN_F16=1) or bf16 (KILN_BF16=1) storage with fp32 arithmetic.
 * The arguments, the rows of a (batch, kv head), the visible keys, the
 * mask, the log-sum-exp and the split over the keys are those of the flash
 * kernel (cl/attention/attention_f32_flash.cl, cl/attention/args.h), which
 * states them.
 *
 * A block of WARPS warps takes one split of one (batch, kv head); warp w
 * takes keys w, w + WARPS, ... of it, UNROLL (8, or 4 where the rows take
 * the registers) at a time, their rows loaded before any is used and, where
 * both sets fit the registers (PREFETCH), while the last UNROLL are used.
 * Per key, each lane loads four consecutive values of the key (a warp
 * reads a whole row of the head dimension, 128 values a pass, coalesced)
 * and multiplies them with its four values of every row's query (held in
 * registers, scaled into base 2). The warp sums a row's UNROLL dot
 * products at once, transposed: each step of shuffles halves the keys a
 * lane holds, so 8 keys take 9 shuffles rather than 40, and lane l ends
 * with key l / (32 / UNROLL)'s score. The row's running maximum and sum
 * then take the batch at once (one correction of the output a batch, one
 * exp a lane), and each lane's four values a pass of the output take every
 * key's weight (a shuffle from the lane holding it) times its value row.
 * Measured on an H200 (docs/cuda.md): per-key sums of 5 shuffles and 2 exps
 * in every lane had kept the kernel at 0.39 of the memory's bandwidth,
 * fp16 storage no faster than fp32. At the end the warps' states merge
 * through shared memory (the log-sum-exp algebra of the combine kernel)
 * and the block writes its rows: O / l, or with KILN_DECODE_SPLIT the
 * partial output and log-sum-exp the combine kernel
 * (cl/attention/attention_combine.cl) merges.
 *
 * Parameters (-D): KILN_DECODE_WARPS, KILN_DECODE_ROWS (the rows of a
 * (batch, kv head), 1 to 8), KILN_DECODE_D (the head dimension, a multiple
 * of 4 up to 256), KILN_DECODE_SPLIT (0 or 1), KILN_F16, KILN_BF16 and the
 * switches KILN_ATTN_CAUSAL, KILN_ATTN_MASK, KILN_ATTN_KEY_LENGTHS,
 * KILN_ATTN_LSE. Rows of Q, K and V start aligned to four values.
 *
 * Launch: block (WARPS x 32), grid (splits, batch x kv_heads).
 */
#define WARPS KILN_DECODE_WARPS
#define ROWS KILN_DECODE_ROWS
#define D KILN_DECODE_D
#define PASSES ((D + 127) / 128) /* 128 values of the head dimension a pass of the warp */
#define UNROLL (ROWS * PASSES <= 4 ? 8 : 4) /* keys a warp has in flight: fewer where rows take the registers */
#define LOG_UNROLL (UNROLL == 8 ? 3 : 2)
/* The next UNROLL keys' rows in flight while these are used, where both
   sets and the rows' queries and outputs fit the registers. */
#define PREFETCH (16 * UNROLL * PASSES + 8 * ROWS * PASSES <= 160)

#if ROWS < 1 || ROWS > 8 || D % 4 || D > 256 || WARPS < 1 || WARPS > 32
#error "attention_decode: parameters break the constraints listed in docs/attention.md"
#endif


#ifndef KILN_MMA_BF16
#define KILN_MMA_BF16 KILN_BF16 /* gemm/tensor_core.h's conversions: bf16 from sm_80 */
#endif
#include "attention/keys.h"
#include "gemm/tensor_core.h"

#if KILN_F16 || KILN_BF16
typedef unsigned short storage;
#else
typedef float storage;
#endif

/* Four consecutive values at p (aligned to four) as fp32. */
__device__ __forceinline__ float4 load4(const storage *p)
{
#if KILN_F16 || KILN_BF16
    const uint2 u = *(const uint2 *)p;
    float4 f;
#if KILN_BF16
    f.x = __int_as_float((int)(u.x << 16)), f.y = __int_as_float((int)(u.x & 0xffff0000u));
    f.z = __int_as_float((int)(u.y << 16)), f.w = __int_as_float((int)(u.y & 0xffff0000u));
#else
    asm("{.reg .f16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n cvt.f32.f16 %1, hi;}"
        : "=f"(f.x), "=f"(f.y)
        : "r"(u.x));
    asm("{.reg .f16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n cvt.f32.f16 %1, hi;}"
        : "=f"(f.z), "=f"(f.w)
        : "r"(u.y));
#endif
    return f;
#else
    return *(const float4 *)p;
#endif
}

/* The rows of keys j, j + WARPS, ... (UNROLL of them) below kend: this
   lane's four values a pass of each key's row and value row, zeros past
   kend and past D. */
__device__ __forceinline__ void load_rows(const storage *__restrict__ K, const storage *__restrict__ V,
                                          const unsigned long kv0, const unsigned long kv_ss, const int j,
                                          const int kend, const int lane, float4 (&kx)[UNROLL][PASSES],
                                          float4 (&vx)[UNROLL][PASSES])
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int ju = j + u * WARPS;
        const storage *kr = K + kv0 + (unsigned long)ju * kv_ss, *vr = V + kv0 + (unsigned long)ju * kv_ss;
#pragma unroll
        for (int p = 0; p < PASSES; p++) {
            const int d = p * 128 + lane * 4;
            kx[u][p] = vx[u][p] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (ju < kend && d < D)
                kx[u][p] = load4(kr + d), vx[u][p] = load4(vr + d);
        }
    }
}

/* The warp's sums of s[0..UNROLL) (one key each) over its lanes, transposed:
   at each of the first LOG_UNROLL steps a lane keeps half its keys and
   sends the other half to its partner, so the whole sum takes
   UNROLL - 1 + 5 - LOG_UNROLL shuffles rather than 5 a key. Lane l ends
   with the sum of key l >> (5 - LOG_UNROLL). */
__device__ __forceinline__ float transposed_sum(float (&s)[UNROLL], const int lane)
{
#pragma unroll
    for (int h = UNROLL / 2, o = 16; h >= 1; h /= 2, o /= 2) {
        const int up = lane & o;
#pragma unroll
        for (int j = 0; j < h; j++) {
            const float send = up ? s[j] : s[j + h], keep = up ? s[j + h] : s[j];
            s[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
    float x = s[0];
#pragma unroll
    for (int o = 16 / UNROLL; o >= 1; o /= 2)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* The maximum (MAX) or the sum over the batch's keys of a value each lane
   holds for its key (transposed_sum's layout). */
template <bool MAX> __device__ __forceinline__ float over_keys(float x)
{
#pragma unroll
    for (int o = 16; o >= 32 / UNROLL; o /= 2) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = MAX ? fmaxf(x, y) : x + y;
    }
    return x;
}

/* The signature keeps attention/args.h's order, one line per group. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(WARPS * 32, 1)
attention_decode(const storage *__restrict__ Q, const storage *__restrict__ K, const storage *__restrict__ V,
                 const float *__restrict__ mask, const int *__restrict__ key_lengths, storage *__restrict__ O,
                 float *__restrict__ lse, const int nq, const int nk, const int head_dim, const int heads,
                 const int group, const unsigned long q_sb, const unsigned long q_sh, const unsigned long q_ss,
                 const unsigned long kv_sb, const unsigned long kv_sh, const unsigned long kv_ss,
                 const unsigned long m_sb, const unsigned long m_sh, const float scale_log2,
                 float *__restrict__ part, float *__restrict__ part_lse, const int split_len)
/* clang-format on */
{
    __shared__ float m_s[WARPS][ROWS], l_s[WARPS][ROWS], o_s[WARPS][ROWS][D];
    (void)O, (void)mask, (void)key_lengths, (void)lse, (void)m_sb, (void)m_sh, (void)part, (void)part_lse;
    (void)split_len, (void)head_dim;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kv_heads = heads / group, b = blockIdx.y / kv_heads, hk = blockIdx.y % kv_heads;
    int k0, k1, klimit;
    block_keys(key_lengths, nk, b, blockIdx.x, KILN_DECODE_SPLIT ? split_len : 0, &k0, &k1, &klimit);
    const unsigned long kv0 = b * kv_sb + hk * kv_sh;

    /* Each row's query (this lane's four values a pass), the keys it sees,
       its mask row; its running state. */
    float4 q[ROWS][PASSES], o[ROWS][PASSES];
    float m[ROWS], l[ROWS];
    int lim[ROWS];
#if KILN_ATTN_MASK
    unsigned long mrow[ROWS];
#endif
    int kend = k0;
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int i = r / group, h = hk * group + r % group;
#pragma unroll
        for (int p = 0; p < PASSES; p++) {
            const int d = p * 128 + lane * 4;
            float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (d < D)
                x = load4(Q + b * q_sb + h * q_sh + (unsigned long)i * q_ss + d);
            q[r][p] = make_float4(x.x * scale_log2, x.y * scale_log2, x.z * scale_log2, x.w * scale_log2);
            o[r][p] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        m[r] = NEG_INF, l[r] = 0.0f;
        lim[r] = row_keys(i, nq, nk, k1, klimit);
        kend = max(kend, lim[r]);
#if KILN_ATTN_MASK
        mrow[r] = b * m_sb + h * m_sh + (unsigned long)i * nk;
#endif
    }

    /* UNROLL keys a warp at once, their rows loaded before any is used;
       with PREFETCH, the next UNROLL keys' rows load while these are used. */
#if PREFETCH
    float4 kx[UNROLL][PASSES], vx[UNROLL][PASSES];
    load_rows(K, V, kv0, kv_ss, k0 + warp, kend, lane, kx, vx);
#endif
    for (int j0 = k0 + warp; j0 < kend; j0 += WARPS * UNROLL) {
        float4 kc[UNROLL][PASSES], vc[UNROLL][PASSES];
#if PREFETCH
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int p = 0; p < PASSES; p++)
                kc[u][p] = kx[u][p], vc[u][p] = vx[u][p];
        load_rows(K, V, kv0, kv_ss, j0 + WARPS * UNROLL, kend, lane, kx, vx);
#else
        load_rows(K, V, kv0, kv_ss, j0, kend, lane, kc, vc);
#endif
        /* After the transposed sum, this lane holds the score of key jl. */
        const int jl = j0 + (lane >> (5 - LOG_UNROLL)) * WARPS;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            float s[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                s[u] = 0.0f;
#pragma unroll
                for (int p = 0; p < PASSES; p++)
                    s[u] = fmaf(q[r][p].x, kc[u][p].x,
                                fmaf(q[r][p].y, kc[u][p].y, fmaf(q[r][p].z, kc[u][p].z, fmaf(q[r][p].w, kc[u][p].w, s[u]))));
            }
            float x = transposed_sum(s, lane);
#if KILN_ATTN_MASK
            if (jl < kend)
                x = fmaf(mask[mrow[r] + jl], LOG2E, x);
#endif
            if (jl >= lim[r])
                x = NEG_INF;
            /* The batch's maximum and weights against the new maximum (0
               while it is -inf), the sum of its weights. */
            const float top = fmaxf(m[r], over_keys<true>(x)), base = top == NEG_INF ? 0.0f : top;
            const float corr = exp2f(m[r] - base), w = exp2f(x - base);
            m[r] = top, l[r] = fmaf(l[r], corr, over_keys<false>(w));
#pragma unroll
            for (int p = 0; p < PASSES; p++) {
                float4 *a = &o[r][p];
                a->x *= corr, a->y *= corr, a->z *= corr, a->w *= corr;
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const float wu = __shfl_sync(0xffffffffu, w, u << (5 - LOG_UNROLL));
#pragma unroll
                for (int p = 0; p < PASSES; p++) {
                    float4 *a = &o[r][p];
                    a->x = fmaf(wu, vc[u][p].x, a->x), a->y = fmaf(wu, vc[u][p].y, a->y);
                    a->z = fmaf(wu, vc[u][p].z, a->z), a->w = fmaf(wu, vc[u][p].w, a->w);
                }
            }
        }
    }

    /* The warps' states to shared memory; each row merged over them. */
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        if (lane == 0)
            m_s[warp][r] = m[r], l_s[warp][r] = l[r];
#pragma unroll
        for (int p = 0; p < PASSES; p++) {
            const int d = p * 128 + lane * 4;
            if (d < D)
                *(float4 *)&o_s[warp][r][d] = o[r][p];
        }
    }
    __syncthreads();
#if KILN_DECODE_SPLIT
    const unsigned long all_rows = (unsigned long)gridDim.y * group * nq, part0 = (unsigned long)blockIdx.x * all_rows;
#endif
    for (int e = threadIdx.x; e < ROWS * D; e += WARPS * 32) {
        const int r = e / D, d = e % D, i = r / group, h = hk * group + r % group;
        float top = NEG_INF;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            top = fmaxf(top, m_s[w][r]);
        const float base = top == NEG_INF ? 0.0f : top;
        float sum = 0.0f, acc = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            const float f = exp2f(m_s[w][r] - base);
            sum = fmaf(l_s[w][r], f, sum), acc = fmaf(o_s[w][r][d], f, acc);
        }
        const float out = sum > 0.0f ? acc / sum : 0.0f;
        const unsigned long row = ((unsigned long)b * heads + h) * nq + i; /* numbered as lse */
#if KILN_DECODE_SPLIT
        part[(part0 + row) * D + d] = out;
#else
#if KILN_F16 || KILN_BF16
        O[b * q_sb + h * q_sh + (unsigned long)i * q_ss + d] = to_storage(out);
#else
        O[b * q_sb + h * q_sh + (unsigned long)i * q_ss + d] = out;
#endif
#endif
#if KILN_ATTN_LSE || KILN_DECODE_SPLIT
        if (d == 0) {
            const float v = sum > 0.0f ? (top + log2f(sum)) * LN2 : NEG_INF;
#if KILN_DECODE_SPLIT
            part_lse[part0 + row] = v;
#else
            lse[row] = v;
#endif
        }
#endif
    }
}
