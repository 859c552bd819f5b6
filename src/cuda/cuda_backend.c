/*
 * The CUDA backend: NVIDIA GPUs through the driver API loaded at run time
 * (cuda_api.h), kernels compiled by NVRTC to a CUBIN for the device's exact
 * sm_XY. A device is its primary context and a stream of kiln's own (the
 * context's queue); a buffer is a device allocation; a program is a loaded
 * module, kept with its CUBIN for the disk cache; an event is a pair of CUDA
 * events recorded around one launch.
 *
 * The kernels are kiln's OpenCL C sources that need nothing beyond
 * cl/common/portability.h (its CUDA branch maps the qualifiers, ids,
 * barrier and fp16 conversions); the operators choose only those here
 * (struct kiln_backend's vector_kernels is 0). Every call makes the device's
 * context current for its duration and restores the caller's.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/diag.h"
#include "cuda/cuda_api.h"
#include "cuda/cuda_backend.h"
#include "util/embedded.h"

#define KILN_CUDA_ERROR_OUT_OF_MEMORY 2
#define KILN_CUDA_MAX_ARGS 64
#define KILN_CUDA_VENDOR_ID 0x10de

struct cuda_device {
    int ordinal;
    CUdevice device;
    CUcontext ctx;
    CUstream stream;
    int own_stream; /* kiln created the stream (else it is the caller's) */
    int sm;         /* 90 for sm_90 */
};

struct cuda_buffer {
    struct cuda_device *dev;
    CUdeviceptr ptr;
    int owned; /* kiln allocated it (else a wrapped pointer of the caller's) */
};

struct cuda_program {
    struct cuda_device *dev;
    CUmodule module;
    void *cubin; /* what was loaded, for program_binary */
    size_t size;
};

struct cuda_kernel {
    struct cuda_device *dev;
    CUfunction function;
    size_t shared_optin; /* dynamic shared memory the function was opened to */
};

struct cuda_event {
    struct cuda_device *dev;
    CUevent start, end;
};

static struct kiln_cuda_api api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void load_api(void) { kiln_cuda_load(&api); }

const struct kiln_cuda_api *kiln_cuda_api_get(void)
{
    pthread_once(&api_once, load_api);
    return &api;
}

static kiln_status fail(CUresult r, const char *what)
{
    const char *name = NULL;
    if (api.cuGetErrorName)
        api.cuGetErrorName(r, &name);
    return kiln_error(r == KILN_CUDA_ERROR_OUT_OF_MEMORY ? KILN_ERROR_OUT_OF_MEMORY : KILN_ERROR_DEVICE,
                      "CUDA: %s failed: %s (%d)", what, name ? name : "error", r);
}

/* Make d's context current for a call (pop restores the caller's). */
static kiln_status push(const struct cuda_device *d)
{
    CUresult r = api.cuCtxPushCurrent(d->ctx);
    return r == KILN_CUDA_SUCCESS ? KILN_SUCCESS : fail(r, "cuCtxPushCurrent");
}

static void pop(void)
{
    CUcontext previous;
    api.cuCtxPopCurrent(&previous);
}

static int attribute(CUdevice dev, int which)
{
    int v = 0;
    return api.cuDeviceGetAttribute(&v, which, dev) == KILN_CUDA_SUCCESS ? v : 0;
}

static kiln_status describe_ordinal(int ordinal, struct kiln_device_desc *d, CUdevice *out)
{
    memset(d, 0, sizeof *d);
    CUdevice dev;
    CUresult r = api.cuDeviceGet(&dev, ordinal);
    if (r != KILN_CUDA_SUCCESS)
        return fail(r, "cuDeviceGet");
    if (out)
        *out = dev;
    snprintf(d->platform, sizeof d->platform, "CUDA");
    if (api.cuDeviceGetName(d->name, (int)sizeof d->name, dev) != KILN_CUDA_SUCCESS)
        d->name[0] = '\0';
    d->name[sizeof d->name - 1] = '\0';
    snprintf(d->vendor, sizeof d->vendor, "NVIDIA Corporation");
    d->cc_major = attribute(dev, KILN_CU_ATTR_COMPUTE_CAPABILITY_MAJOR);
    d->cc_minor = attribute(dev, KILN_CU_ATTR_COMPUTE_CAPABILITY_MINOR);
    snprintf(d->device_version, sizeof d->device_version, "CUDA sm_%d%d", d->cc_major, d->cc_minor);
    /* The disk cache's key holds this: a CUBIN is NVRTC's and the arch's. */
    snprintf(d->driver_version, sizeof d->driver_version, "driver %d.%d, NVRTC %d.%d", api.driver_version / 1000,
             api.driver_version % 1000 / 10, api.nvrtc_major, api.nvrtc_minor);
    d->type = KILN_DEVICE_GPU;
    d->vendor_id = KILN_CUDA_VENDOR_ID;
    d->compute_units = (unsigned)attribute(dev, KILN_CU_ATTR_MULTIPROCESSOR_COUNT);
    d->clock_mhz = (unsigned)(attribute(dev, KILN_CU_ATTR_CLOCK_RATE) / 1000);
    size_t total = 0;
    if (api.cuDeviceTotalMem(&total, dev) == KILN_CUDA_SUCCESS)
        d->global_mem_bytes = total;
    /* Static shared memory per block: what a kernel's local arrays may use. */
    d->local_mem_bytes = (unsigned long long)attribute(dev, KILN_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK);
    d->shared_optin_bytes = (unsigned long long)attribute(dev, KILN_CU_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    d->max_alloc_bytes = d->global_mem_bytes;
    const int l2 = attribute(dev, KILN_CU_ATTR_L2_CACHE_SIZE);
    d->cache_bytes = l2 > 0 ? (unsigned long long)l2 : 0;
    d->max_work_group_size = (size_t)attribute(dev, KILN_CU_ATTR_MAX_THREADS_PER_BLOCK);
    d->fp16 = d->fp64 = 1;
    int v = 0;
    d->pci_known = api.cuDeviceGetAttribute(&v, KILN_CU_ATTR_PCI_BUS_ID, dev) == KILN_CUDA_SUCCESS;
    d->pci_bus = v;
    d->pci_domain = attribute(dev, KILN_CU_ATTR_PCI_DOMAIN_ID);
    d->pci_device = attribute(dev, KILN_CU_ATTR_PCI_DEVICE_ID);
    kiln_device_derive_arch(d);
    return KILN_SUCCESS;
}

static void cuda_status(char *text, size_t size)
{
    const struct kiln_cuda_api *a = kiln_cuda_api_get();
    if (a->devices > 0)
        snprintf(text, size, "driver %s (CUDA %d.%d); NVRTC %d.%d from %s", a->driver, a->driver_version / 1000,
                 a->driver_version % 1000 / 10, a->nvrtc_major, a->nvrtc_minor, a->nvrtc);
    else
        snprintf(text, size, "driver: %s; NVRTC: %s", a->driver, a->nvrtc);
    if (a->devices > 0 && !a->nvrtc_lib) {
        size_t n = strlen(text);
        snprintf(text + n, size - n, " (without NVRTC no device is listed)");
    }
}

static kiln_status cuda_list_devices(struct kiln_device_desc *descs, size_t capacity, size_t *count)
{
    const struct kiln_cuda_api *a = kiln_cuda_api_get();
    /* No NVRTC: nothing could be compiled, so no device is usable. */
    *count = a->nvrtc_lib ? (size_t)a->devices : 0;
    for (size_t i = 0; descs && i < *count && i < capacity; i++) {
        kiln_status st = describe_ordinal((int)i, &descs[i], NULL);
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

/* Device `index` in its primary context, on `stream` (NULL: a new one). */
static kiln_status open_on(size_t index, CUstream stream, void **dev)
{
    const struct kiln_cuda_api *a = kiln_cuda_api_get();
    if (!a->nvrtc_lib || index >= (size_t)a->devices)
        return kiln_error(KILN_ERROR_NOT_FOUND, "CUDA device %zu does not exist (%d devices; %s; NVRTC: %s)", index,
                          a->devices, a->driver, a->nvrtc);
    struct cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a CUDA device record");
    struct kiln_device_desc desc;
    kiln_status st = describe_ordinal((int)index, &desc, &d->device);
    d->ordinal = (int)index;
    d->sm = desc.cc_major * 10 + desc.cc_minor;
    CUresult r = KILN_CUDA_SUCCESS;
    if (st == KILN_SUCCESS && (r = api.cuDevicePrimaryCtxRetain(&d->ctx, d->device)) != KILN_CUDA_SUCCESS)
        st = fail(r, "cuDevicePrimaryCtxRetain");
    if (st == KILN_SUCCESS && stream) {
        d->stream = stream;
    } else if (st == KILN_SUCCESS && (st = push(d)) == KILN_SUCCESS) {
        if ((r = api.cuStreamCreate(&d->stream, KILN_CU_STREAM_NON_BLOCKING)) != KILN_CUDA_SUCCESS)
            st = fail(r, "cuStreamCreate");
        d->own_stream = 1;
        pop();
        if (st != KILN_SUCCESS)
            api.cuDevicePrimaryCtxRelease(d->device);
    }
    if (st != KILN_SUCCESS) {
        free(d);
        return st;
    }
    *dev = d;
    return KILN_SUCCESS;
}

static kiln_status cuda_open(size_t index, void **dev) { return open_on(index, NULL, dev); }

static kiln_status cuda_wrap(const void *native, void **dev)
{
    const struct kiln_cuda_native *n = native;
    return open_on((size_t)n->device, n->stream, dev);
}

kiln_status kiln_cuda_device_native(const void *dev, CUdevice *device, CUstream *stream)
{
    const struct cuda_device *d = dev;
    if (device)
        *device = d->ordinal;
    if (stream)
        *stream = d->stream;
    return KILN_SUCCESS;
}

CUdeviceptr kiln_cuda_buffer_pointer(const void *buf) { return ((const struct cuda_buffer *)buf)->ptr; }

kiln_status kiln_cuda_tensor_map(const void *buf, size_t offset, size_t size, const uint64_t dims[3],
                                 const uint64_t strides[2], const unsigned box[3], void *map)
{
    if (!api.cuTensorMapEncodeTiled)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "CUDA: the driver has no cuTensorMapEncodeTiled");
    const struct cuda_buffer *b = buf;
    static const unsigned ones[3] = {1, 1, 1};
    /* The driver checks the address in the current context. */
    kiln_status st = push(b->dev);
    if (st != KILN_SUCCESS)
        return st;
    CUresult r = api.cuTensorMapEncodeTiled(
        map, size == 4 ? KILN_CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : KILN_CU_TENSOR_MAP_DATA_TYPE_UINT16, 3,
        (void *)(uintptr_t)(b->ptr + offset), dims, strides, box, ones, 0, KILN_CU_TENSOR_MAP_SWIZZLE_128B,
        KILN_CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0);
    pop();
    if (r != KILN_CUDA_SUCCESS) {
        const char *name = NULL;
        if (api.cuGetErrorName)
            api.cuGetErrorName(r, &name);
        return kiln_error(KILN_ERROR_UNSUPPORTED,
                          "CUDA: cuTensorMapEncodeTiled refused a %llux%llux%llu array: %s (%d)",
                          (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[2],
                          name ? name : "error", r);
    }
    return KILN_SUCCESS;
}

static void cuda_close(void *dev)
{
    struct cuda_device *d = dev;
    if (!d)
        return;
    if (push(d) == KILN_SUCCESS) {
        api.cuStreamSynchronize(d->stream);
        if (d->own_stream)
            api.cuStreamDestroy(d->stream);
        pop();
    }
    api.cuDevicePrimaryCtxRelease(d->device);
    free(d);
}

static kiln_status cuda_describe(void *dev, struct kiln_device_desc *desc)
{
    struct cuda_device *d = dev;
    return describe_ordinal(d->ordinal, desc, NULL);
}

static kiln_status cuda_finish(void *dev)
{
    struct cuda_device *d = dev;
    kiln_status st = push(d);
    if (st != KILN_SUCCESS)
        return st;
    CUresult r = api.cuStreamSynchronize(d->stream);
    pop();
    return r == KILN_CUDA_SUCCESS ? KILN_SUCCESS : fail(r, "cuStreamSynchronize");
}

static kiln_status cuda_buffer_alloc(void *dev, size_t size, void **buf)
{
    struct cuda_device *d = dev;
    struct cuda_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a CUDA buffer record");
    kiln_status st = push(d);
    if (st == KILN_SUCCESS) {
        CUresult r = api.cuMemAlloc(&b->ptr, size ? size : 1);
        pop();
        if (r != KILN_CUDA_SUCCESS)
            st = fail(r, "cuMemAlloc");
    }
    if (st != KILN_SUCCESS) {
        free(b);
        return st;
    }
    b->dev = d;
    b->owned = 1;
    *buf = b;
    return KILN_SUCCESS;
}

/* native: the address of a CUdeviceptr that starts an allocation of the
   device's context; its size is the allocation's. */
static kiln_status cuda_buffer_wrap(void *dev, void *native, size_t *size, void **buf)
{
    struct cuda_device *d = dev;
    const CUdeviceptr ptr = *(const CUdeviceptr *)native;
    kiln_status st = push(d);
    if (st != KILN_SUCCESS)
        return st;
    CUdeviceptr base = 0;
    size_t bytes = 0;
    CUresult r = api.cuMemGetAddressRange(&base, &bytes, ptr);
    pop();
    if (r != KILN_CUDA_SUCCESS)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "CUDA: device pointer 0x%llx is not an allocation of this device's context (%d)", ptr, r);
    if (base != ptr)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                          "CUDA: device pointer 0x%llx is inside the allocation at 0x%llx, not its start (pass the "
                          "start and an offset)",
                          ptr, base);
    struct cuda_buffer *b = calloc(1, sizeof *b);
    if (!b)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a CUDA buffer record");
    b->dev = d;
    b->ptr = ptr;
    *size = bytes;
    *buf = b;
    return KILN_SUCCESS;
}

static void cuda_buffer_free(void *buf)
{
    struct cuda_buffer *b = buf;
    if (!b)
        return;
    if (b->owned && push(b->dev) == KILN_SUCCESS) {
        api.cuMemFree(b->ptr);
        pop();
    }
    free(b);
}

/* A copy on the stream, after the work before it, waited for. */
static kiln_status copy(struct cuda_device *d, struct cuda_buffer *b, size_t offset, size_t size, const void *src,
                        void *dst)
{
    kiln_status st = push(d);
    if (st != KILN_SUCCESS)
        return st;
    CUresult r = src ? api.cuMemcpyHtoDAsync(b->ptr + offset, src, size, d->stream)
                     : api.cuMemcpyDtoHAsync(dst, b->ptr + offset, size, d->stream);
    if (r == KILN_CUDA_SUCCESS)
        r = api.cuStreamSynchronize(d->stream);
    pop();
    return r == KILN_CUDA_SUCCESS ? KILN_SUCCESS : fail(r, src ? "copy to the device" : "copy from the device");
}

static kiln_status cuda_buffer_write(void *dev, void *buf, size_t offset, size_t size, const void *src)
{
    return copy(dev, buf, offset, size, src, NULL);
}

static kiln_status cuda_buffer_read(void *dev, void *buf, size_t offset, size_t size, void *dst)
{
    return copy(dev, buf, offset, size, NULL, dst);
}

/* A program of `cubin` (taken over) loaded into d's context. */
static kiln_status load_module(struct cuda_device *d, void *cubin, size_t size, void **prog)
{
    struct cuda_program *p = calloc(1, sizeof *p);
    kiln_status st = p ? push(d) : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a CUDA program record");
    if (st == KILN_SUCCESS) {
        CUresult r = api.cuModuleLoadData(&p->module, cubin);
        pop();
        if (r != KILN_CUDA_SUCCESS)
            st = fail(r, "cuModuleLoadData");
    }
    if (st != KILN_SUCCESS) {
        free(p);
        free(cubin);
        return st;
    }
    p->dev = d;
    p->cubin = cubin;
    p->size = size;
    *prog = p;
    return KILN_SUCCESS;
}

/* NVRTC's options for kiln's: helper functions are device functions
   (OpenCL C has no execution spaces), then the operator's -D options. */
#define KILN_NVRTC_BASE_OPTIONS "-default-device"

static kiln_status cuda_program_build(void *dev, const char *source, size_t length, const char *options, void **prog)
{
    struct cuda_device *d = dev;
    size_t olen = options ? strlen(options) : 0;
    char *text = malloc(length + 1), *opts = malloc(sizeof KILN_NVRTC_BASE_OPTIONS + 1 + olen);
    if (!text || !opts) {
        free(text);
        free(opts);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "CUDA: copying a %zu-byte source", length);
    }
    memcpy(text, source, length);
    text[length] = '\0';
    sprintf(opts, "%s %s", KILN_NVRTC_BASE_OPTIONS, options ? options : "");
    void *cubin = NULL;
    size_t size = 0;
    kiln_status st = kiln_cuda_compile(&api, text, "kiln kernel", d->sm, opts, &cubin, &size);
    if (st == KILN_ERROR_BUILD) {
        kiln_error_append("; options \"");
        kiln_error_append(opts);
        kiln_error_append("\"");
    }
    free(text);
    free(opts);
    return st == KILN_SUCCESS ? load_module(d, cubin, size, prog) : st;
}

static kiln_status cuda_program_load(void *dev, const void *binary, size_t size, const char *options, void **prog)
{
    (void)options;
    struct cuda_device *d = dev;
    const int arch = kiln_cuda_cubin_arch(binary, size);
    if (arch != d->sm)
        return kiln_error(KILN_ERROR_BUILD, "CUDA: the cached binary is %s sm_%d, the device is sm_%d",
                          arch < 0 ? "no CUBIN, not" : "a CUBIN for", arch < 0 ? 0 : arch, d->sm);
    void *copy_of = malloc(size);
    if (!copy_of)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "CUDA: a %zu-byte CUBIN", size);
    memcpy(copy_of, binary, size);
    return load_module(d, copy_of, size, prog);
}

static kiln_status cuda_program_binary(void *dev, void *prog, void **binary, size_t *size)
{
    (void)dev;
    struct cuda_program *p = prog;
    if (!(*binary = malloc(p->size)))
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "CUDA: a %zu-byte CUBIN", p->size);
    memcpy(*binary, p->cubin, p->size);
    *size = p->size;
    return KILN_SUCCESS;
}

static void cuda_program_free(void *prog)
{
    struct cuda_program *p = prog;
    if (!p)
        return;
    if (push(p->dev) == KILN_SUCCESS) {
        api.cuModuleUnload(p->module);
        pop();
    }
    free(p->cubin);
    free(p);
}

static kiln_status cuda_kernel_create(void *prog, const char *name, void **kernel)
{
    struct cuda_program *p = prog;
    struct cuda_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a CUDA kernel record");
    kiln_status st = push(p->dev);
    if (st == KILN_SUCCESS) {
        CUresult r = api.cuModuleGetFunction(&k->function, p->module, name);
        pop();
        if (r == KILN_CUDA_ERROR_NOT_FOUND)
            st = kiln_error(KILN_ERROR_NOT_FOUND, "CUDA: the program has no such kernel");
        else if (r != KILN_CUDA_SUCCESS)
            st = fail(r, "cuModuleGetFunction");
        if (r != KILN_CUDA_SUCCESS) {
            kiln_error_append(" (kernel \"");
            kiln_error_append(name);
            kiln_error_append("\")");
        }
    }
    if (st != KILN_SUCCESS) {
        free(k);
        return st;
    }
    k->dev = p->dev;
    *kernel = k;
    return KILN_SUCCESS;
}

static void cuda_kernel_free(void *kernel) { free(kernel); }

/* A block for a launch that leaves it to the backend: along dimension 0,
   the largest divisor of the global size up to 256 (the grid must tile it
   exactly, as OpenCL 1.2's does); 1 along the others. */
static unsigned default_block(size_t global)
{
    for (unsigned b = 256; b > 1; b--)
        if (global % b == 0)
            return b;
    return 1;
}

static kiln_status cuda_launch(void *dev, void *kernel, const struct kiln_arg *args, unsigned nargs, unsigned dims,
                               const size_t *global, const size_t *local, size_t local_bytes, void **event)
{
    struct cuda_device *d = dev;
    struct cuda_kernel *k = kernel;
    if (nargs > KILN_CUDA_MAX_ARGS || dims < 1 || dims > 3)
        return kiln_error(KILN_ERROR_INTERNAL, "CUDA: a launch of %u arguments over %u dimensions", nargs, dims);
    static const unsigned long long grid_max[3] = {0x7fffffffull, 65535, 65535};
    unsigned block[3] = {1, 1, 1}, grid[3] = {1, 1, 1};
    for (unsigned i = 0; i < dims; i++) {
        size_t b = local ? local[i] : i == 0 ? default_block(global[i]) : 1;
        if (b == 0 || global[i] % b != 0 || global[i] / b > grid_max[i] || b > 1024)
            return kiln_error(KILN_ERROR_INTERNAL,
                              "CUDA: global size %zu in dimension %u is not a grid of blocks of %zu", global[i], i, b);
        block[i] = (unsigned)b;
        grid[i] = (unsigned)(global[i] / b);
    }
    static const CUdeviceptr null_pointer = 0;
    void *params[KILN_CUDA_MAX_ARGS];
    for (unsigned i = 0; i < nargs; i++) {
        const struct cuda_buffer *b = args[i].value;
        params[i] = args[i].kind == KILN_ARG_BUFFER ? (void *)(b ? &b->ptr : &null_pointer) : (void *)args[i].value;
    }
    struct cuda_event *ev = NULL;
    kiln_status st = push(d);
    if (st != KILN_SUCCESS)
        return st;
    CUresult r = KILN_CUDA_SUCCESS;
    if (local_bytes > 48 * 1024 && local_bytes > k->shared_optin) {
        r = api.cuFuncSetAttribute(k->function, KILN_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)local_bytes);
        if (r != KILN_CUDA_SUCCESS)
            st = fail(r, "cuFuncSetAttribute(dynamic shared memory)");
        else
            k->shared_optin = local_bytes;
    }
    if (st == KILN_SUCCESS && event) {
        ev = calloc(1, sizeof *ev);
        if (!ev)
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a CUDA event record");
        else if ((r = api.cuEventCreate(&ev->start, KILN_CU_EVENT_DEFAULT)) != KILN_CUDA_SUCCESS ||
                 (r = api.cuEventCreate(&ev->end, KILN_CU_EVENT_DEFAULT)) != KILN_CUDA_SUCCESS ||
                 (r = api.cuEventRecord(ev->start, d->stream)) != KILN_CUDA_SUCCESS)
            st = fail(r, "cuEventCreate");
    }
    if (st == KILN_SUCCESS &&
        (r = api.cuLaunchKernel(k->function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                (unsigned)local_bytes, d->stream, params, NULL)) != KILN_CUDA_SUCCESS)
        st = fail(r, "cuLaunchKernel");
    if (st == KILN_SUCCESS && ev && (r = api.cuEventRecord(ev->end, d->stream)) != KILN_CUDA_SUCCESS)
        st = fail(r, "cuEventRecord");
    if (ev && st != KILN_SUCCESS) {
        if (ev->start)
            api.cuEventDestroy(ev->start);
        if (ev->end)
            api.cuEventDestroy(ev->end);
        free(ev);
        ev = NULL;
    }
    pop();
    if (st == KILN_SUCCESS && event) {
        ev->dev = d;
        *event = ev;
    }
    return st;
}

static kiln_status cuda_event_wait(void *event)
{
    struct cuda_event *ev = event;
    kiln_status st = push(ev->dev);
    if (st != KILN_SUCCESS)
        return st;
    CUresult r = api.cuEventSynchronize(ev->end);
    pop();
    return r == KILN_CUDA_SUCCESS ? KILN_SUCCESS : fail(r, "cuEventSynchronize");
}

static kiln_status cuda_event_elapsed(void *event, double *ms)
{
    struct cuda_event *ev = event;
    if (!api.cuEventElapsedTime)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "CUDA: the driver has no cuEventElapsedTime");
    kiln_status st = push(ev->dev);
    if (st != KILN_SUCCESS)
        return st;
    float t = 0.0f;
    CUresult r = api.cuEventElapsedTime(&t, ev->start, ev->end);
    pop();
    if (r != KILN_CUDA_SUCCESS)
        return fail(r, "cuEventElapsedTime");
    *ms = t;
    return KILN_SUCCESS;
}

static void cuda_event_release(void *event)
{
    struct cuda_event *ev = event;
    if (!ev)
        return;
    if (push(ev->dev) == KILN_SUCCESS) {
        api.cuEventDestroy(ev->start);
        api.cuEventDestroy(ev->end);
        pop();
    }
    free(ev);
}

const struct kiln_backend kiln_cuda_backend = {
    .name = "cuda",
    .no_device_hint = "needs an NVIDIA driver (libcuda.so.1) and NVRTC; see kiln-info",
    .kernel_sources = kiln_embedded_cl_kernels,
    .kernel_extension = ".cl",
    .vector_kernels = 0,
    .native_sources = kiln_embedded_cu_kernels,
    .native_vendor_id = KILN_CUDA_VENDOR_ID,
    .native_reason = "the CUDA backend alone has kiln's tensor-core GEMMs (mma from sm_75, wgmma on sm_90)",
    .status = cuda_status,
    .list_devices = cuda_list_devices,
    .open = cuda_open,
    .wrap = cuda_wrap,
    .close = cuda_close,
    .describe = cuda_describe,
    .finish = cuda_finish,
    .buffer_alloc = cuda_buffer_alloc,
    .buffer_wrap = cuda_buffer_wrap,
    .buffer_free = cuda_buffer_free,
    .buffer_write = cuda_buffer_write,
    .buffer_read = cuda_buffer_read,
    .program_build = cuda_program_build,
    .program_load = cuda_program_load,
    .program_binary = cuda_program_binary,
    .program_free = cuda_program_free,
    .kernel_create = cuda_kernel_create,
    .kernel_free = cuda_kernel_free,
    .launch = cuda_launch,
    .event_wait = cuda_event_wait,
    .event_elapsed = cuda_event_elapsed,
    .event_release = cuda_event_release,
};
