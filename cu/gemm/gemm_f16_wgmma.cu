/*
 * gemm_f16_wgmma: batched C = alpha A B + beta C on Hopper's warpgroup
 * tensor cores (wgmma.mma_async, sm_90a), fp16 storage of A, B and C (bf16
 * multiplies with KILN_MMA_BF16=1), fp32 accumulation. The products of fp16
 * (or bf16) values are exact in fp32, so this computes as precisely as the
 * fp32-arithmetic GEMM on the same storage, up to the order of the
 * additions.
 *
 * With KILN_MMA_TF32=1 A, B and C are fp32 and the multiplies TF32
 * (m64nNk8.f32.tf32.tf32), A and B K-major only (KILN_TRANS_A 0,
 * KILN_TRANS_B 1: wgmma transposes 16-bit types alone; the host transposes
 * other operands first). wgmma reads the fp32 values from shared memory as
 * stored: the tensor cores take their TF32 part (sign, exponent and the 10
 * high significand bits), dropping the 13 low bits, so a product is off by
 * at most 2^-9 of its magnitude; the sums are fp32. The caller's descriptor
 * allows it (KILN_MATH_TF32).
 *
 * ABI: the in-place GEMM's, as gemm_f16_mma.cu's (row-major terms):
 *   C(i,j) = alpha * sum_k opA(i,k) * opB(k,j) + beta * C(i,j)
 *   opA(i,k) = KILN_TRANS_A ? A[k*lda + i] : A[i*lda + k]
 *   opB(k,j) = KILN_TRANS_B ? B[j*ldb + k] : B[k*ldb + j]
 * every index offset by off_x + b * stride_x for batch item b = blockIdx.z;
 * any M, N, K >= 1; beta == 0: C is not read; alpha == 0: A and B are not.
 *
 * BM / 64 warpgroups compute a block's BM x BN of C, each warpgroup 64
 * rows by BN, in steps of 128 bytes along K (64 16-bit values, 32 fp32).
 * Each step's tiles of A and B are copied to shared memory as stored, in the
 * 128-byte-swizzled layout of gemm/wgmma_layout.h, through a ring of STAGES
 * buffers. A warpgroup issues a step's four m64nBNk16 (TF32: k8) wgmma on
 * the buffers' descriptors (A K-major, or
 * M-major when transposed; B N-major, or K-major when transposed: the
 * instruction's transpose flags) and lets one step's group run while the
 * next is issued. C is written from the accumulators as the PTX ISA lays
 * them out (wgmma_layout.h). Three ways to fill the buffers:
 *
 * - KILN_WGMMA_TMA: the tensor memory accelerator. One more warpgroup, the
 *   producer, gives its registers to the others (setmaxnreg) and one of its
 *   threads issues each step's tile copies (cp.async.bulk.tensor through
 *   the host's tensor maps, which swizzle and zero-fill past the edges) up
 *   to STAGES - 1 steps ahead; each buffer has a "full" mbarrier the copies
 *   complete and an "empty" one every multiplying warpgroup arrives at once
 *   its multiplies of that buffer are done (after wgmma.wait_group 1 of the
 *   next step).
 * - KILN_MMA_ASYNC (and no TMA): every thread issues 16-byte cp.async
 *   copies that zero-fill past the edges, STAGES - 2 steps ahead: the copies
 *   of step s + STAGES - 2 go to step s - 2's buffer after the barrier of
 *   step s, which every warpgroup reaches only once its wgmma of step s - 2
 *   have completed (wgmma.wait_group 1 at the end of step s - 1). Copies
 *   land through the generic proxy and wgmma reads through the async proxy:
 *   each thread fences its copies before that barrier.
 * - neither: plain loads, in the cp.async kernel's order.
 *
 * Blocks are numbered down groups of KILN_WGMMA_GROUP_M block rows, then
 * across: the blocks running at once share fewer B tiles than a row by row
 * order would stream through L2.
 *
 * Parameters (-D): KILN_WGMMA_BM (64, 128, 192 or 256: BM / 64
 * warpgroups), KILN_WGMMA_BN (64, 128 or 256), KILN_WGMMA_STAGES (3 to 8),
 * KILN_WGMMA_GROUP_M (1 to 64),
 * KILN_TRANS_A, KILN_TRANS_B, KILN_MMA_BF16, KILN_MMA_TF32, KILN_MMA_ASYNC:
 * 1 when every operand row starts 16-byte aligned (the host checks), and
 * KILN_WGMMA_TMA: 1 for the tensor memory accelerator's kernel, whose A and
 * B arguments are tensor maps (the host's, by value: 16-bit or fp32 values,
 * 3-D as stored, the contiguous dimension first, then rows, then batch
 * items; boxes of 128 bytes of values by BM (A, not transposed) or BN (B,
 * transposed) rows, else 64 values by 64; 128-byte swizzle) in place of the
 * pointer, offset, leading dimension and batch stride of each.
 *
 * Launch: block (BM / 64 * 128, one more warpgroup with TMA), grid
 * (ceil(N / BN), ceil(M / BM), batch), dynamic shared memory
 * STAGES * ((BM + BN) * 128 + 16) + 1024 bytes (the host's formula: the
 * tiles, the TMA kernel's mbarriers, and room to align the tiles to 1024
 * bytes).
 */
#include "gemm/tensor_core.h"
#include "gemm/wgmma_layout.h"

#ifndef KILN_WGMMA_BM
#define KILN_WGMMA_BM 128
#endif
#ifndef KILN_WGMMA_BN
#define KILN_WGMMA_BN 256
#endif
#ifndef KILN_WGMMA_STAGES
#define KILN_WGMMA_STAGES 4
#endif
#ifndef KILN_TRANS_A
#define KILN_TRANS_A 0
#endif
#ifndef KILN_TRANS_B
#define KILN_TRANS_B 0
#endif
#ifndef KILN_MMA_ASYNC
#define KILN_MMA_ASYNC 1
#endif
#ifndef KILN_WGMMA_TMA
#define KILN_WGMMA_TMA 0
#endif
#ifndef KILN_WGMMA_GROUP_M
#define KILN_WGMMA_GROUP_M 8
#endif
#define BM KILN_WGMMA_BM
#define BN KILN_WGMMA_BN
#define BK KILN_WGMMA_BK((int)sizeof(storage_t))
#define STAGES KILN_WGMMA_STAGES
#define THREADS (BM / 64 * 128)
#define A_BYTES (BM * 128)
#define B_BYTES (BN * 128)

#if BM % 64 || BM > 256 || (BN != 64 && BN != 128 && BN != 256) || STAGES < 3 || STAGES > 8
#error "gemm_f16_wgmma: parameters break the constraints listed in device_profiles/README.md"
#endif
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm_f16_wgmma: wgmma needs sm_90a"
#endif
#if KILN_MMA_TF32 && (KILN_TRANS_A || !KILN_TRANS_B)
#error "gemm_f16_wgmma: tf32 takes A and B K-major (KILN_TRANS_A 0, KILN_TRANS_B 1)"
#endif

/* The shape's K, and the transpose operands tf32 takes none of. */
#if KILN_MMA_TF32
#define WGMMA_K "k8"
#define WGMMA_TRANS(a, b) ""
#else
#define WGMMA_K "k16"
#define WGMMA_TRANS(a, b) ", %" #a ", %" #b
#endif

/* d (64 x 64: 32 registers a lane) += A (64 x K) B (K x 64), K of 32 bytes, both read from shared memory
   through their descriptors. */
__device__ __forceinline__ void wgmma_n64(float *d, const unsigned long long da, const unsigned long long db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64" WGMMA_K ".f32." MMA_TYPE "." MMA_TYPE " {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1" WGMMA_TRANS(35, 36) ";\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "n"(1), "n"(KILN_TRANS_A), "n"(1 - KILN_TRANS_B));
}

/* d (64 x 128: 64 registers a lane) += A (64 x K) B (K x 128), K of 32 bytes, both read from shared memory
   through their descriptors. */
__device__ __forceinline__ void wgmma_n128(float *d, const unsigned long long da, const unsigned long long db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128" WGMMA_K ".f32." MMA_TYPE "." MMA_TYPE " {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1" WGMMA_TRANS(67, 68) ";\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "n"(1), "n"(KILN_TRANS_A), "n"(1 - KILN_TRANS_B));
}

/* d (64 x 256: 128 registers a lane) += A (64 x K) B (K x 256), K of 32 bytes, both read from shared memory
   through their descriptors. */
__device__ __forceinline__ void wgmma_n256(float *d, const unsigned long long da, const unsigned long long db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256" WGMMA_K ".f32." MMA_TYPE "." MMA_TYPE " {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1" WGMMA_TRANS(131, 132) ";\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "n"(1), "n"(KILN_TRANS_A), "n"(1 - KILN_TRANS_B));
}


/* A shared-memory matrix descriptor: start, leading and stride byte offsets
   (each in 16-byte units), 128-byte swizzle. */
__device__ __forceinline__ unsigned long long descriptor(const unsigned start, const unsigned lbo, const unsigned sbo)
{
    return (unsigned long long)((start & 0x3ffff) >> 4) | (unsigned long long)(lbo >> 4) << 16 |
           (unsigned long long)(sbo >> 4) << 32 | 1ull << 62;
}

/* Keeps the compiler from moving accumulator accesses across the
   asynchronous multiplies that read and write them. */
__device__ __forceinline__ void hold(float &x) { asm volatile("" : "+f"(x)::"memory"); }

/* Copy a ROWS x COLS tile of a stored matrix (rows from row0, columns from
   col0, ld apart; rows >= rows_end and columns >= cols_end read as 0) into
   the swizzled tile at dst. */
template <int ROWS, int COLS>
__device__ __forceinline__ void stage(unsigned char *dst, const storage_t *src, const int ld, const int row0,
                                      const int col0, const int rows_end, const int cols_end, const int tid)
{
    constexpr int CHUNKS = ROWS * (COLS / CHUNK);
#pragma unroll
    for (int e = tid; e < CHUNKS; e += THREADS) {
        const int r = e / (COLS / CHUNK), c = e % (COLS / CHUNK) * CHUNK;
        const int row = row0 + r, col = col0 + c;
        unsigned char *d = dst + kiln_wgmma_offset(ROWS, r, c, (int)sizeof(storage_t));
#if KILN_MMA_ASYNC
        const int valid = row < rows_end ? min(max(cols_end - col, 0), CHUNK) : 0;
        const storage_t *s = valid ? src + (size_t)row * ld + col : src;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(d)), "l"(s),
                     "r"(valid * (int)sizeof(storage_t)));
#else
        storage_t v[CHUNK];
#pragma unroll
        for (int j = 0; j < CHUNK; j++)
            v[j] = row < rows_end && col + j < cols_end ? src[(size_t)row * ld + col + j] : (storage_t)0;
#if KILN_MMA_TF32
        *(float4 *)d = make_float4(v[0], v[1], v[2], v[3]);
#else
        *(uint4 *)d = make_uint4(v[0] | (unsigned)v[1] << 16, v[2] | (unsigned)v[3] << 16, v[4] | (unsigned)v[5] << 16,
                                 v[6] | (unsigned)v[7] << 16);
#endif
#endif
    }
}


/* One step's multiplies: the warpgroup's 64 rows of the A tile at byte `at`
   of shared memory by the B tile at `bt`, added to acc, committed as one
   group. */
__device__ __forceinline__ void multiply_step(float *acc, const unsigned at, const unsigned bt, const int wg)
{
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        hold(acc[i]);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < BK; kk += BK / 4) {
        const unsigned long long da =
            descriptor(kiln_wgmma_desc_start(at, KILN_TRANS_A, wg * 64, kk, (int)sizeof(storage_t)),
                       kiln_wgmma_desc_lbo(KILN_TRANS_A), kiln_wgmma_desc_sbo(KILN_TRANS_A));
        const unsigned long long db =
            descriptor(kiln_wgmma_desc_start(bt, !KILN_TRANS_B, 0, kk, (int)sizeof(storage_t)),
                       kiln_wgmma_desc_lbo(!KILN_TRANS_B), kiln_wgmma_desc_sbo(!KILN_TRANS_B));
#if BN == 256
        wgmma_n256(acc, da, db);
#elif BN == 128
        wgmma_n128(acc, da, db);
#else
        wgmma_n64(acc, da, db);
#endif
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Wait until at most `pending` groups of this warpgroup's multiplies run. */
template <int pending> __device__ __forceinline__ void multiplies_wait(float *acc)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(pending) : "memory");
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        hold(acc[i]);
}

/* Two neighbouring stored values of C as one store: 16-bit values in a
   32-bit word, fp32 ones in a float2. */
#if KILN_MMA_TF32
typedef float2 storage_pair_t;
__device__ __forceinline__ storage_t pair_lo(const storage_pair_t p) { return p.x; }
__device__ __forceinline__ storage_t pair_hi(const storage_pair_t p) { return p.y; }
__device__ __forceinline__ storage_pair_t pair_of(const storage_t lo, const storage_t hi) { return make_float2(lo, hi); }
#else
typedef unsigned storage_pair_t;
__device__ __forceinline__ storage_t pair_lo(const storage_pair_t p) { return (unsigned short)(p & 0xffff); }
__device__ __forceinline__ storage_t pair_hi(const storage_pair_t p) { return (unsigned short)(p >> 16); }
__device__ __forceinline__ storage_pair_t pair_of(const storage_t lo, const storage_t hi)
{
    return lo | (unsigned)hi << 16;
}
#endif

/* C = alpha acc + beta C for warpgroup wg's rows of the block at (m0, n0):
   accumulators i and i + 1 are neighbouring columns of one row. */
__device__ __forceinline__ void store_c(const float *acc, storage_t *C, const int ldc, const int M, const int N,
                                        const int m0, const int n0, const int wg, const float alpha, const float beta)
{
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < BN / 2; i += 2) {
        const int r = m0 + wg * 64 + kiln_wgmma_c_row(warp, lane, i), c = n0 + kiln_wgmma_c_col(lane, i);
        if (r >= M || c >= N)
            continue;
        storage_t *p = C + (size_t)r * ldc + c;
        float v0 = alpha * acc[i], v1 = alpha * acc[i + 1];
        if (c + 1 < N && ((size_t)p & (sizeof(storage_pair_t) - 1)) == 0) {
            if (beta != 0.0f) {
                const storage_pair_t old = *(const storage_pair_t *)p;
                v0 += beta * from_storage(pair_lo(old));
                v1 += beta * from_storage(pair_hi(old));
            }
            *(storage_pair_t *)p = pair_of(to_storage(v0), to_storage(v1));
        } else {
            if (beta != 0.0f)
                v0 += beta * from_storage(p[0]);
            p[0] = to_storage(v0);
            if (c + 1 < N) {
                if (beta != 0.0f)
                    v1 += beta * from_storage(p[1]);
                p[1] = to_storage(v1);
            }
        }
    }
}

/* This block's first row and column of C: the grid's blocks in groups of
   KILN_WGMMA_GROUP_M block rows, numbered down each group's rows first. */
__device__ __forceinline__ void block_origin(int *m0, int *n0)
{
    const int id = blockIdx.y * gridDim.x + blockIdx.x, per_group = KILN_WGMMA_GROUP_M * gridDim.x;
    const int first = id / per_group * KILN_WGMMA_GROUP_M, rows = min((int)gridDim.y - first, KILN_WGMMA_GROUP_M);
    *m0 = (first + id % per_group % rows) * BM;
    *n0 = id % per_group / rows * BN;
}

/* The tiles start 1024-byte aligned: the swizzle is a function of the address. */
__device__ __forceinline__ unsigned char *aligned_shared(unsigned char *raw)
{
    return raw + ((1024 - (shared_address(raw) & 1023)) & 1023);
}

#if KILN_WGMMA_TMA

/* A tensor map (CUtensorMap): 128 opaque bytes, 64-byte aligned. */
struct __align__(64) tensor_map {
    unsigned long long words[16];
};

/* The producer's registers and the multiplying warpgroups' (setmaxnreg):
   all of them within the 64 K registers of the SM's one block. */
#define PRODUCER_REGS 40
#define ENTRY_REGS_ALL (65536 / (THREADS + 128) / 8 * 8)
#define ENTRY_REGS (ENTRY_REGS_ALL < 248 ? ENTRY_REGS_ALL : 248)
#define CONSUMER_REGS_FIT (((ENTRY_REGS * (BM / 64 + 1) - PRODUCER_REGS) / (BM / 64)) / 8 * 8)
#define CONSUMER_REGS (CONSUMER_REGS_FIT < 232 ? CONSUMER_REGS_FIT : 232)

__device__ __forceinline__ void bar_init(const unsigned bar, const unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_expect(const unsigned bar, const unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(const unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* Wait for the completion of the barrier's phase of this parity. */
__device__ __forceinline__ void bar_wait(const unsigned bar, const unsigned parity)
{
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* One box of a tensor map at coordinates (c0, c1, c2) into shared memory at
   byte dst, completing on barrier bar. */
__device__ __forceinline__ void tma_load(const unsigned dst, const tensor_map *map, const int c0, const int c1,
                                         const int c2, const unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4}], [%5];" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
                 : "memory");
}

/* The signature keeps one line per operand. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(THREADS + 128, 1)
gemm_f16_wgmma(const int M, const int N, const int K, const float alpha, const float beta,
               const __grid_constant__ tensor_map ta,
               const __grid_constant__ tensor_map tb,
               storage_t *__restrict__ C, const unsigned long off_c, const int ldc, const unsigned long stride_c)
/* clang-format on */
{
    extern __shared__ __align__(16) unsigned char shared_raw[];
    unsigned char *shared = aligned_shared(shared_raw);
    const unsigned a_base = shared_address(shared), b_base = a_base + STAGES * A_BYTES;
    const unsigned bars = b_base + STAGES * B_BYTES; /* full[STAGES], then empty[STAGES] */
    const int tid = threadIdx.x, wg = tid >> 7, batch = blockIdx.z;
    int m0, n0;
    block_origin(&m0, &n0);
    const int steps = alpha != 0.0f ? (K + BK - 1) / BK : 0;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            bar_init(bars + 8 * s, 1);
            bar_init(bars + 8 * (STAGES + s), BM / 64);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == BM / 64) {
        /* The producer: the last warpgroup, one thread of it. */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGS));
        if (tid != THREADS)
            return;
        for (int s = 0; s < steps; s++) {
            const int buf = s % STAGES, k0 = s * BK;
            const unsigned full = bars + 8 * buf, at = a_base + buf * A_BYTES, bt = b_base + buf * B_BYTES;
            bar_wait(bars + 8 * (STAGES + buf), ((s / STAGES) & 1) ^ 1); /* its last multiplies are done */
            bar_expect(full, A_BYTES + B_BYTES);
#if KILN_TRANS_A
#pragma unroll
            for (int j = 0; j < BM / 64; j++)
                tma_load(at + j * BK * 128, &ta, m0 + 64 * j, k0, batch, full);
#else
            tma_load(at, &ta, k0, m0, batch, full);
#endif
#if KILN_TRANS_B
            tma_load(bt, &tb, k0, n0, batch, full);
#else
#pragma unroll
            for (int j = 0; j < BN / 64; j++)
                tma_load(bt + j * BK * 128, &tb, n0 + 64 * j, k0, batch, full);
#endif
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGS));
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    for (int s = 0; s < steps; s++) {
        const int buf = s % STAGES;
        bar_wait(bars + 8 * buf, (s / STAGES) & 1);
        multiply_step(acc, a_base + buf * A_BYTES, b_base + buf * B_BYTES, wg);
        multiplies_wait<1>(acc);
        /* Step s - 1's multiplies are done: its buffer may be refilled. */
        if (s > 0 && (tid & 127) == 0)
            bar_arrive(bars + 8 * (STAGES + (s - 1) % STAGES));
    }
    multiplies_wait<0>(acc);
    store_c(acc, C + off_c + (unsigned long)batch * stride_c, ldc, M, N, m0, n0, wg, alpha, beta);
}

#else /* cp.async or plain loads */

/* The signature keeps one line per operand. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_f16_wgmma(const int M, const int N, const int K, const float alpha, const float beta,
               const storage_t *__restrict__ A, const unsigned long off_a, const int lda, const unsigned long stride_a,
               const storage_t *__restrict__ B, const unsigned long off_b, const int ldb, const unsigned long stride_b,
               storage_t *__restrict__ C, const unsigned long off_c, const int ldc, const unsigned long stride_c)
/* clang-format on */
{
    extern __shared__ __align__(16) unsigned char shared_raw[];
    unsigned char *as = aligned_shared(shared_raw), *bs = as + STAGES * A_BYTES;
    const int tid = threadIdx.x, wg = tid >> 7;
    int m0, n0;
    block_origin(&m0, &n0);
    const unsigned long batch = blockIdx.z;
    A += off_a + batch * stride_a;
    B += off_b + batch * stride_b;
    C += off_c + batch * stride_c;

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;

    /* Step s's tiles into buffer s % STAGES; alpha == 0 reads neither A nor B. */
    const int steps = alpha != 0.0f ? (K + BK - 1) / BK : 0;
    auto load = [&](int s) {
        const int k0 = s * BK, buf = s % STAGES;
#if KILN_TRANS_A
        stage<BK, BM>(as + buf * A_BYTES, A, lda, k0, m0, K, M, tid);
#else
        stage<BM, BK>(as + buf * A_BYTES, A, lda, m0, k0, M, K, tid);
#endif
#if KILN_TRANS_B
        stage<BN, BK>(bs + buf * B_BYTES, B, ldb, n0, k0, N, K, tid);
#else
        stage<BK, BN>(bs + buf * B_BYTES, B, ldb, k0, n0, K, N, tid);
#endif
    };
    auto commit = [] {
#if KILN_MMA_ASYNC
        asm volatile("cp.async.commit_group;");
#endif
    };
#pragma unroll
    for (int s = 0; s < STAGES - 2; s++) {
        if (s < steps)
            load(s);
        commit();
    }

    const unsigned a_base = shared_address(as), b_base = shared_address(bs);
    for (int s = 0; s < steps; s++) {
#if KILN_MMA_ASYNC
        asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 3));
#endif
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads(); /* step s has landed; every warpgroup's step s - 2 is done */
        if (s + STAGES - 2 < steps)
            load(s + STAGES - 2);
        commit();
        multiply_step(acc, a_base + s % STAGES * A_BYTES, b_base + s % STAGES * B_BYTES, wg);
        multiplies_wait<1>(acc);
    }
    multiplies_wait<0>(acc);
    store_c(acc, C, ldc, M, N, m0, n0, wg, alpha, beta);
}

#endif
