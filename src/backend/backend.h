/*
 * The backend interface: what kiln needs from a compute API. Each backend
 * (the OpenCL one in src/opencl/) fills a struct kiln_backend and is listed
 * in the registry (src/backend/registry.c); the core iterates the registry
 * and never names a backend, so a CUDA backend can be added later without
 * touching the public API or the operators. Operators name kernel sources
 * without a file extension ("gemm/gemm_f32_cpu"); the backend supplies its
 * source tree and extension. Casts to a backend's native handles live in its
 * own directory only.
 *
 * Adding a backend: a directory src/<api>/ defining its struct kiln_backend,
 * its kernel sources embedded by CMakeLists.txt (kiln_embed), and one entry
 * in the registry.
 *
 * Every handle a backend hands out is an opaque `void *` owned by kiln core,
 * which frees it through the matching slot. Slots marked "optional" may be
 * NULL; callers check before use. Functions return a kiln_status and set the
 * thread's error detail (kiln_error()) on failure.
 */
#ifndef KILN_BACKEND_H
#define KILN_BACKEND_H

#include <stddef.h>

#include "kiln/kiln.h"

/* What a backend reports about a device; profiles are matched against it. */
struct kiln_device_desc {
    char platform[128];
    char name[128];
    char vendor[128];
    char device_version[128];
    char driver_version[64];
    char board_name[128];   /* AMD board name where reported, else "" */
    int cc_major, cc_minor; /* NVIDIA compute capability, 0 if unknown */
    kiln_device_type type;
    unsigned vendor_id;
    unsigned compute_units;
    unsigned clock_mhz;
    unsigned long long global_mem_bytes;
    unsigned long long local_mem_bytes;
    unsigned long long max_alloc_bytes;
    /* The cache in front of global memory (OpenCL's global memory cache, a
       CPU's last level; CUDA's L2), 0 if not reported. */
    unsigned long long cache_bytes;
    /* Shared memory a kernel may take dynamically when its backend opens it
       to more than local_mem_bytes (CUDA's opt-in maximum); 0 if none. */
    unsigned long long shared_optin_bytes;
    size_t max_work_group_size;
    int fp16, fp64;
    char arch[64]; /* filled by kiln_device_derive_arch() */
    /* The device's PCI location where its backend reports one (pci_known):
       domain, bus and device number (pci_device -1 where only the bus is
       known). A discrete GPU has a bus of its own, so the domain and bus
       say that two backends list one device (src/core/device_choice.c). */
    int pci_known;
    int pci_domain, pci_bus, pci_device;
};

/* A kernel argument: a buffer handle or a scalar by value. */
enum kiln_arg_kind { KILN_ARG_BUFFER, KILN_ARG_SCALAR };

struct kiln_arg {
    enum kiln_arg_kind kind;
    size_t size;       /* scalar size in bytes */
    const void *value; /* the backend buffer handle for KILN_ARG_BUFFER, the
                          scalar's address for KILN_ARG_SCALAR */
};

struct kiln_embedded_file;

struct kiln_backend {
    const char *name;
    /* Where to look when list_devices finds none, for error details. */
    const char *no_device_hint;
    /* The kernel source tree embedded at build time (NULL-terminated; names
       relative to its root, e.g. "util/fill.cl") and the extension that
       turns an operator's kernel source name ("util/fill") into a file name.
       $KILN_KERNEL_DIR, when set, replaces the embedded tree. */
    const struct kiln_embedded_file *kernel_sources;
    const char *kernel_extension;
    /* 1: the backend compiles kernels written in OpenCL's vector syntax
       (KILN_VECTOR_SYNTAX, cl/common/portability.h); 0: only the kernels
       shared through the portability header, and the operators choose
       those (kiln_context_vector_kernels). */
    int vector_kernels;
    /* optional: kernels written for this API alone (the CUDA backend's cu/
       tree, always the embedded copy), named with their extension
       ("gemm/gemm_f16_mma.cu"); includes inside them resolve there too. */
    const struct kiln_embedded_file *native_sources;
    /* optional (0, NULL): the PCI vendor id of the devices whose vendor's
       own API this backend is (the CUDA backend: NVIDIA's), and what that
       gives them, for kiln-info. The default device is such a device's
       listing by this backend rather than another backend's listing of
       the same device (src/core/device_choice.c). */
    unsigned native_vendor_id;
    const char *native_reason;

    /* optional: what the backend loaded, or why it lists no device. */
    void (*status)(char *text, size_t size);

    /* Devices, in a stable order. With descs == NULL only *count is set. */
    kiln_status (*list_devices)(struct kiln_device_desc *descs, size_t capacity, size_t *count);

    /* Open device `index` of list_devices with a queue of its own. */
    kiln_status (*open)(size_t index, void **dev);
    /* optional: adopt native objects (for OpenCL a struct kiln_cl_native). */
    kiln_status (*wrap)(const void *native, void **dev);
    void (*close)(void *dev);
    kiln_status (*describe)(void *dev, struct kiln_device_desc *desc);
    kiln_status (*finish)(void *dev);

    kiln_status (*buffer_alloc)(void *dev, size_t size, void **buf);
    /* optional: adopt a native buffer, reporting its size. */
    kiln_status (*buffer_wrap)(void *dev, void *native, size_t *size, void **buf);
    void (*buffer_free)(void *buf);
    kiln_status (*buffer_write)(void *dev, void *buf, size_t offset, size_t size, const void *src);
    kiln_status (*buffer_read)(void *dev, void *buf, size_t offset, size_t size, void *dst);

    /* Compile source text; a failure returns KILN_ERROR_BUILD with the log
       in the error detail. */
    kiln_status (*program_build)(void *dev, const char *source, size_t length, const char *options, void **prog);
    /* optional: load a binary produced by program_binary on the same device. */
    kiln_status (*program_load)(void *dev, const void *binary, size_t size, const char *options, void **prog);
    /* optional: serialise a built program; *binary is malloc'd for the caller. */
    kiln_status (*program_binary)(void *dev, void *prog, void **binary, size_t *size);
    /* optional: non-zero where the driver keeps what it compiles in a
       persistent cache of its own and taking a binary costs a compile (POCL
       with its kernel cache on): kiln's disk cache then holds no program
       binaries unless KILN_CACHE_PROGRAMS=1 (docs/pocl.md). */
    int (*driver_keeps_programs)(void *dev);
    void (*program_free)(void *prog);

    kiln_status (*kernel_create)(void *prog, const char *name, void **kernel);
    void (*kernel_free)(void *kernel);
    /* Set arguments and enqueue; asynchronous. Callers serialise launches of
       one kernel object (argument state is per kernel). local may be NULL.
       local_bytes is the launch's dynamic local (shared) memory, 0 for none:
       a kernel that takes some declares it as its last parameter, after the
       listed arguments (OpenCL: a `__local` pointer). event may be NULL,
       else it receives a handle for event_wait/release. */
    kiln_status (*launch)(void *dev, void *kernel, const struct kiln_arg *args, unsigned nargs, unsigned dims,
                          const size_t *global, const size_t *local, size_t local_bytes, void **event);
    kiln_status (*event_wait)(void *event);
    /* optional: the device execution time of a completed launch, in ms;
       KILN_ERROR_UNSUPPORTED where the queue records no timing (OpenCL: a
       wrapped queue created without profiling). Callers fall back to the
       host's clock. */
    kiln_status (*event_elapsed)(void *event, double *ms);
    void (*event_release)(void *event);
};

/* The backends compiled into this library, NULL-terminated. kiln's device
   index runs over all of them: backend 0's devices, then backend 1's, ... */
extern const struct kiln_backend *const kiln_backends[];

/* kiln's index of device `index` of `backend` (SIZE_MAX when the backend is
   not registered or a backend before it cannot count its devices). */
size_t kiln_backend_device_index(const struct kiln_backend *backend, size_t index);

/* Derive desc->arch from the other fields ("sm_86", "gfx1030", "xe-hpg",
   "x86_64:skylake-avx512", ...); "" when nothing is recognised. */
void kiln_device_derive_arch(struct kiln_device_desc *desc);

/* The host's x86 CPU as CPUID reports it. */
struct kiln_host_cpu {
    char vendor[13]; /* "AuthenticAMD", "GenuineIntel", ... */
    unsigned family, model;
    int avx512f;
};

/* Fill `cpu` from CPUID; 0 (and zeros) where the host is not x86. */
int kiln_host_cpu_read(struct kiln_host_cpu *cpu);

/* Where desc is a host CPU device (POCL's, its vendor the host's) whose
   driver's LLVM predates the host's CPU and names an older one, the arch
   the host's CPUID shows: AMD family 19h with AVX-512 "x86_64:znver4",
   family 1Ah "x86_64:znver5" (POCL 3.1's LLVM 15 calls both
   skylake-avx512). Otherwise desc->arch is left as derived. */
void kiln_device_refine_host_arch(struct kiln_device_desc *desc, const struct kiln_host_cpu *cpu);

#endif /* KILN_BACKEND_H */
