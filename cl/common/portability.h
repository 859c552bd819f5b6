/*
 * The OpenCL built-ins kernels use, under kiln names, so that the CUDA
 * backend compiles the kernels that need nothing more with NVRTC (in the
 * manner of CLBlast's opencl_to_cuda.h): address-space and kernel
 * qualifiers, work-item ids and sizes in dimension d (0, 1 or 2), the
 * work-group size a kernel requires, the barrier that publishes local memory
 * to the work-group, and fp16 storage conversions.
 *
 *   KILN_LOCAL       a pointer into local memory (a parameter, a variable)
 *   KILN_SHARED      the declaration of a local-memory array or struct in a
 *                    kernel's body (CUDA tells the two apart: __shared__
 *                    qualifies declarations only)
 *   KILN_VECTOR_SYNTAX
 *                    1 where OpenCL's vector types and vloadN / vstoreN
 *                    exist; a kernel shared with CUDA keeps such code under
 *                    #if KILN_VECTOR_SYNTAX with a scalar alternative
 *   KILN_PREFETCH(p) a hint to fetch the cache line at global pointer p for
 *                    reading: the compiler's prefetch built-in where the
 *                    OpenCL compiler is clang (POCL and other CPU drivers;
 *                    OpenCL's own prefetch() does nothing on POCL), else
 *                    nothing
 *   KILN_PREFETCH_L1(p)
 *                    the same, into the nearest cache (locality 3) rather
 *                    than the second level
 *   KILN_WANTS(name) for #if around each kernel of a source that holds
 *                    several: true unless the host built the program for
 *                    named kernels only (-DKILN_ONLY=1 and
 *                    -DKILN_WANT_<name>=1 for each, kiln_options_only in
 *                    src/util/options.h) and left this one out. POCL
 *                    generates machine code for every kernel of a program
 *                    when kiln takes its binary for the disk cache, so a
 *                    kernel that a plan never launches would cost its
 *                    compilation all the same
 *
 * Kernels that lean on OpenCL's vector syntax throughout (floatN literals,
 * swizzles: common/vector.h, common/window.h and the kernels using them)
 * keep it; the CUDA backend does not choose them (docs/cuda.md).
 *
 * The CUDA branch is compiled by NVRTC with -default-device, so helper
 * functions need no __device__; fp16 storage is the raw 16 bits (half is an
 * unsigned short there), converted by the PTX cvt instructions.
 */
#ifndef KILN_CL_PORTABILITY_H
#define KILN_CL_PORTABILITY_H

#ifndef KILN_ONLY
#define KILN_ONLY 0
#endif
/* Two steps, so that a name given by a macro (Winograd's KERNEL(_in)) is
   expanded before it is pasted. */
#define KILN_WANTS(name) KILN_WANTS_NAMED(name)
#define KILN_WANTS_NAMED(name) (!KILN_ONLY || KILN_WANT_##name)

#ifdef __CUDACC_RTC__

#define KILN_CUDA 1
#define KILN_VECTOR_SYNTAX 0
#define KILN_KERNEL extern "C" __global__
#define KILN_GLOBAL
#define KILN_LOCAL
#define KILN_SHARED __shared__
#define KILN_CONSTANT const
#define KILN_WORK_GROUP_SIZE(x, y, z) __launch_bounds__((x) * (y) * (z))

#define KILN_DIM_(v, d) ((d) == 0 ? (v).x : (d) == 1 ? (v).y : (v).z)
#define KILN_GLOBAL_ID(d) ((size_t)KILN_DIM_(blockIdx, d) * KILN_DIM_(blockDim, d) + KILN_DIM_(threadIdx, d))
#define KILN_LOCAL_ID(d) ((size_t)KILN_DIM_(threadIdx, d))
#define KILN_GROUP_ID(d) ((size_t)KILN_DIM_(blockIdx, d))
#define KILN_LOCAL_SIZE(d) ((size_t)KILN_DIM_(blockDim, d))

#define KILN_BARRIER_LOCAL() __syncthreads()
#define KILN_PREFETCH(p) ((void)(p))
#define KILN_PREFETCH_L1(p) ((void)(p))

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef unsigned short half;

#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#define M_LOG2E_F 1.442695040888963f
#define M_LN2_F 0.693147180559945f

inline float vload_half(size_t i, const half *p)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(p[i]));
    return f;
}
inline void vstore_half(float f, size_t i, half *p)
{
    half h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    p[i] = h;
}
inline float clamp(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }
inline int clamp(int x, int lo, int hi) { return min(max(x, lo), hi); }
inline float mad(float a, float b, float c) { return fmaf(a, b, c); }
#define convert_float(x) ((float)(x))
#define convert_int(x) ((int)(x))
#define as_float(x) __int_as_float(x)
#define as_int(x) __float_as_int(x)
#define as_uint(x) ((uint)__float_as_int(x))
#define native_exp(x) __expf(x)
#define native_exp2(x) exp2f(x)
#define native_recip(x) (1.0f / (x))
#define native_divide(x, y) __fdividef((x), (y))

#else

#define KILN_VECTOR_SYNTAX 1
#define KILN_KERNEL __kernel
#define KILN_GLOBAL __global
#define KILN_LOCAL __local
#define KILN_SHARED __local
#define KILN_CONSTANT __constant
#define KILN_WORK_GROUP_SIZE(x, y, z) __attribute__((reqd_work_group_size(x, y, z)))
#ifdef __clang__ /* through an integer: the built-in takes a pointer of no address space */
#define KILN_PREFETCH(p) __builtin_prefetch((const void *)(size_t)(p), 0, 2)
#define KILN_PREFETCH_L1(p) __builtin_prefetch((const void *)(size_t)(p), 0, 3)
#else
#define KILN_PREFETCH(p) ((void)(p))
#define KILN_PREFETCH_L1(p) ((void)(p))
#endif

/* A kernel knows its position in the NDRange, never its size: where kiln's
   own threads run a launch on a CPU (docs/pocl.md, "kiln's threads"), the
   launch is split into runs of whole work-groups along one dimension, each
   launched with a global offset on a device of its own, and get_global_size
   and get_num_groups would give a run's. Sizes come from the kernel's
   arguments. Ids need nothing here: there a prelude before the source makes
   get_global_id and get_group_id the launch's (src/opencl/cl_backend.c). */
#define KILN_GLOBAL_ID(d) get_global_id(d)
#define KILN_LOCAL_ID(d) get_local_id(d)
#define KILN_GROUP_ID(d) get_group_id(d)
#define KILN_LOCAL_SIZE(d) get_local_size(d)

/* Every work-item of the work-group waits here; local memory written before
   it is visible to all after it. */
#define KILN_BARRIER_LOCAL() barrier(CLK_LOCAL_MEM_FENCE)

#endif

#endif
