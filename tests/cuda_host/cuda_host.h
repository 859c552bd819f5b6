/*
 * cuda_host.h: enough of CUDA's built-ins to run a kernel of cu/ on the host,
 * so that the suite checks a CUDA kernel's results where no GPU is (POCL's
 * machines, CI). A block's threads run as host threads, a warp's 32 in
 * lockstep at each shuffle (a barrier per warp before and after the
 * exchange), the block's at __syncthreads; __shared__ arrays are the
 * kernel's static locals, so blocks run one after another
 * (cuda_host_launch). The kernel's source is included after this header
 * (tests/test_cuda_host.cpp), compiled as C++ by the host's compiler.
 *
 * What a kernel may use here: thread and block ids, __shfl_xor_sync and
 * __shfl_sync over whole warps at warp-uniform points, __syncthreads,
 * __threadfence, atomicAdd on unsigned, __ldcg, float4 and uint2, exp2f,
 * log2f, fmaf, fmaxf, min and max on int. Not inline PTX: fp16 storage
 * (converted by PTX) stays with the GPU suite; bf16 is plain bit shifts.
 * gemm/tensor_core.h is left out (its PTX) and its to_storage given here,
 * by src/ref/storage.h's bf16 rounding (to nearest even, as
 * cvt.rn.bf16.f32).
 */
#ifndef KILN_TESTS_CUDA_HOST_H
#define KILN_TESTS_CUDA_HOST_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ref/storage.h"

#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__ __restrict
#define __launch_bounds__(threads, blocks)
#define __shared__ static
#define KILN_CU_TENSOR_CORE_H 1

struct float4 {
    float x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
struct dim3 {
    unsigned x, y, z;
};

static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline float __int_as_float(int i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

extern thread_local dim3 threadIdx, blockIdx;
extern dim3 gridDim, blockDim;

float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
float __shfl_sync(unsigned mask, float v, int lane);
void __syncthreads();
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline float __ldcg(const float *p) { return *(const volatile float *)p; }

/* gemm/tensor_core.h's store of a value in 16-bit storage, as
   cvt.rn.bf16.f32 rounds (bf16 alone: fp16 takes PTX elsewhere too). */
static inline unsigned short to_storage(float f) { return kiln_ref_to_bf16(f); }

/* Runs `body(arg)` on every thread of every block of `grid` x `block`
   threads (at most 1024 a block), blocks one after another. 0, or -1 where
   a thread could not be started. */
int cuda_host_launch(dim3 grid, dim3 block, void (*body)(void *arg), void *arg);

#endif /* KILN_TESTS_CUDA_HOST_H */
