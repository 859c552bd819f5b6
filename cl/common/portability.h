/*
 * The OpenCL built-ins kernels use, under kiln names, so that a second
 * backend can compile the kernels that need nothing more (in the manner of
 * CLBlast's opencl_to_cuda.h): address-space and kernel qualifiers,
 * work-item ids and sizes in dimension d (0, 1 or 2), the work-group size a
 * kernel requires, and the barrier that publishes local memory to the
 * work-group.
 *
 * Only these are mapped. Kernels that lean on OpenCL's vector syntax (floatN
 * literals, swizzles, vloadN / vstoreN, vload_half: common/vector.h,
 * common/window.h and the kernels using them) keep it; such a kernel gets
 * its own version for another API rather than a layer of macros.
 *
 * A CUDA (NVRTC) branch would go here, under #ifdef __CUDACC_RTC__, ahead of
 * the OpenCL one: extern "C" __global__ for the kernel qualifier, nothing for
 * global, __shared__ for local, __constant__, blockIdx / blockDim /
 * threadIdx / gridDim for the ids and sizes, __launch_bounds__ for the
 * work-group size and __syncthreads() for the barrier.
 */
#ifndef KILN_CL_PORTABILITY_H
#define KILN_CL_PORTABILITY_H

#define KILN_KERNEL __kernel
#define KILN_GLOBAL __global
#define KILN_LOCAL __local
#define KILN_CONSTANT __constant
#define KILN_WORK_GROUP_SIZE(x, y, z) __attribute__((reqd_work_group_size(x, y, z)))

#define KILN_GLOBAL_ID(d) get_global_id(d)
#define KILN_LOCAL_ID(d) get_local_id(d)
#define KILN_GROUP_ID(d) get_group_id(d)
#define KILN_GLOBAL_SIZE(d) get_global_size(d)
#define KILN_LOCAL_SIZE(d) get_local_size(d)
#define KILN_NUM_GROUPS(d) get_num_groups(d)

/* Every work-item of the work-group waits here; local memory written before
   it is visible to all after it. */
#define KILN_BARRIER_LOCAL() barrier(CLK_LOCAL_MEM_FENCE)

#endif
