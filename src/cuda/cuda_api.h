/*
 * The CUDA driver API and NVRTC, loaded at run time.
 *
 * kiln includes no CUDA header and links no CUDA library: a program linked
 * with libcuda cannot even start where no driver is installed, and the
 * toolkit's stub library only answers CUDA_ERROR_STUB_LIBRARY. The few types,
 * constants and entry points kiln uses are declared here, with the values of
 * the CUDA 11 to 13 headers, and resolved with dlopen/dlsym:
 *  - the driver, libcuda.so.1, from the loader path or $KILN_CUDA_LIB_DIR;
 *  - NVRTC, libnvrtc.so.13 (then .12, .11.2, unversioned), from
 *    $KILN_CUDA_LIB_DIR, the loader path, or a toolkit's lib64 or
 *    targets/x86_64-linux/lib under /usr/local/cuda*.
 * Any failure to load or initialise the driver (no library, the stub, no
 * device) means zero CUDA devices, with the reason kept for reports; NVRTC
 * works without a driver, compiling CUDA C to a CUBIN for a given sm_XY.
 *
 * The CUDA backend (cuda_backend.c, docs/cuda.md) runs on what is loaded
 * here.
 */
#ifndef KILN_CUDA_API_H
#define KILN_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/kiln.h"
#include "kiln/kiln_cuda.h" /* CUdevice, CUstream, CUdeviceptr */

typedef int CUresult;
typedef struct CUctx_st *CUcontext;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;

enum {
    KILN_CUDA_SUCCESS = 0,
    KILN_CUDA_ERROR_NO_DEVICE = 100,
    KILN_CUDA_ERROR_NOT_FOUND = 500,
    KILN_CUDA_ERROR_STUB_LIBRARY = 34,
    KILN_NVRTC_SUCCESS = 0,
};

/* cuDeviceGetAttribute's attributes kiln reads (CUdevice_attribute). */
enum {
    KILN_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    KILN_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    KILN_CU_ATTR_CLOCK_RATE = 13,
    KILN_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    KILN_CU_ATTR_PCI_BUS_ID = 33,
    KILN_CU_ATTR_PCI_DEVICE_ID = 34,
    KILN_CU_ATTR_L2_CACHE_SIZE = 38,
    KILN_CU_ATTR_PCI_DOMAIN_ID = 50,
    KILN_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    KILN_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    KILN_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum {
    KILN_CU_STREAM_NON_BLOCKING = 1,
    KILN_CU_EVENT_DEFAULT = 0,
    KILN_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    /* CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion. */
    KILN_CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1,
    KILN_CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7,
    KILN_CU_TENSOR_MAP_SWIZZLE_128B = 3,
    KILN_CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2,
};

/* What was loaded. A member NULL where its library is missing (and
   cuDriverGetVersion, cuGetErrorName where the driver lacks them). */
struct kiln_cuda_api {
    void *cuda_lib, *nvrtc_lib;
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuDeviceGetCount)(int *count);
    CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
    CUresult (*cuDeviceGetName)(char *name, int length, CUdevice device);
    CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
    CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice device);
    CUresult (*cuGetErrorName)(CUresult error, const char **name);
    /* What the backend runs with (cuda_backend.c); without any of them the
       driver counts as having no device. */
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
    CUresult (*cuCtxPushCurrent)(CUcontext ctx);
    CUresult (*cuCtxPopCurrent)(CUcontext *ctx);
    CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags);
    CUresult (*cuStreamDestroy)(CUstream stream);
    CUresult (*cuStreamSynchronize)(CUstream stream);
    CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*cuMemFree)(CUdeviceptr ptr);
    CUresult (*cuMemGetAddressRange)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
    CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
    CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
    CUresult (*cuModuleUnload)(CUmodule module);
    CUresult (*cuModuleGetFunction)(CUfunction *function, CUmodule module, const char *name);
    CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared_bytes, CUstream stream, void **params, void **extra);
    CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
    CUresult (*cuEventRecord)(CUevent event, CUstream stream);
    CUresult (*cuEventSynchronize)(CUevent event);
    CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
    CUresult (*cuEventDestroy)(CUevent event);
    /* The tensor memory accelerator's descriptors (CUDA 12 on; NULL before):
       cuTensorMapEncodeTiled(map, data type, rank, address, dims, strides
       (bytes, from the second dimension), box, element strides, interleave,
       swizzle, L2 promotion, out-of-bounds fill). */
    CUresult (*cuTensorMapEncodeTiled)(void *map, int type, unsigned rank, void *address, const uint64_t *dims,
                                       const uint64_t *strides, const unsigned *box, const unsigned *element_strides,
                                       int interleave, int swizzle, int l2_promotion, int oob_fill);

    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *source, const char *name, int headers,
                                      const char *const *header_sources, const char *const *header_names);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int count, const char *const *options);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);

    int devices;        /* CUDA devices the driver reports; 0 on any failure */
    int driver_version; /* cuDriverGetVersion, 0 without a driver */
    int nvrtc_major, nvrtc_minor;
    char driver[512]; /* the driver library loaded, or why there is none */
    char nvrtc[512];  /* the NVRTC library loaded (its path), or why there is none */
};

/* Load the driver and NVRTC, and count the driver's devices, into *api
   (every member set; never fails: what is missing says why). */
void kiln_cuda_load(struct kiln_cuda_api *api);

/* The process's API, loaded on first use (by the CUDA backend). */
const struct kiln_cuda_api *kiln_cuda_api_get(void);

/* Forget what kiln_cuda_load loaded (the libraries stay loaded until the
   process exits, as the CUDA libraries expect). */
void kiln_cuda_unload(struct kiln_cuda_api *api);

/* Compile CUDA C `source` (named `name` in messages) with NVRTC for sm_<sm>
   (75 for sm_75) and `options` (NVRTC's, separated by spaces;
   may be NULL) into a CUBIN, *cubin malloc'd for the caller. Returns
   KILN_ERROR_UNSUPPORTED without NVRTC, KILN_ERROR_BUILD with NVRTC's log
   in the detail. */
kiln_status kiln_cuda_compile(const struct kiln_cuda_api *api, const char *source, const char *name, int sm,
                              const char *options, void **cubin, size_t *size);

/* The sm_XY a CUBIN (an ELF image for NVIDIA GPUs) was compiled for, e.g.
   90, or -1 if `image` is no CUBIN. */
int kiln_cuda_cubin_arch(const void *image, size_t size);

/* dlopen the first of `files` (NULL-terminated sonames) found in
   $KILN_CUDA_LIB_DIR, the loader's path, then the CUDA toolkits and Python
   packages where NVRTC, cuBLAS and cuDNN live; its path in `path`. NULL
   when none loads. */
void *kiln_cuda_open_toolkit_library(const char *const *files, char *path, size_t size);

#endif /* KILN_CUDA_API_H */
