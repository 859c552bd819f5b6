/*
 * Storage types of tensors. Arithmetic is always fp32; with KILN_F16 set,
 * tensors are stored as fp16 and moved through vload_half/vstore_half, which
 * every OpenCL 1.2 device has (cl_khr_fp16 is needed only for fp16
 * arithmetic, which kiln does not do).
 */
#ifndef KILN_CL_STORAGE_H
#define KILN_CL_STORAGE_H

#if KILN_F16
#define KILN_STORAGE half
#define KILN_LOAD(p, i) vload_half((i), (p))
#define KILN_STORE(v, p, i) vstore_half((v), (i), (p))
#else
#define KILN_STORAGE float
#define KILN_LOAD(p, i) ((p)[i])
#define KILN_STORE(v, p, i) ((p)[i] = (v))
#endif

#endif
