/*
 * Run-time loading of the CUDA driver API and NVRTC (cuda_api.h).
 */
#include "cuda/cuda_api.h"

#include <dlfcn.h>
#include <glob.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"

/* dlopen `file` in `dir` ("" for the loader's own search). */
static void *open_in(const char *dir, const char *file, char *path, size_t size)
{
    if (dir[0])
        snprintf(path, size, "%s/%s", dir, file);
    else
        snprintf(path, size, "%s", file);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

/* The first of `files` that loads from $KILN_CUDA_LIB_DIR, the loader's
   path, then each of `dirs` (glob patterns); its path in `path`. */
static void *open_first(const char *const *files, const char *const *dirs, char *path, size_t size)
{
    const char *env = getenv("KILN_CUDA_LIB_DIR");
    for (const char *const *f = files; env && env[0] && *f; f++) {
        void *lib = open_in(env, *f, path, size);
        if (lib)
            return lib;
    }
    for (const char *const *f = files; *f; f++) {
        void *lib = open_in("", *f, path, size);
        if (lib)
            return lib;
    }
    for (const char *const *d = dirs; *d; d++) {
        glob_t g;
        if (glob(*d, 0, NULL, &g) != 0)
            continue;
        void *lib = NULL;
        for (size_t i = g.gl_pathc; i-- > 0 && !lib;) /* the newest toolkit first */
            for (const char *const *f = files; *f && !lib; f++)
                lib = open_in(g.gl_pathv[i], *f, path, size);
        globfree(&g);
        if (lib)
            return lib;
    }
    return NULL;
}

/* An entry point of a library: where its pointer goes in struct
   kiln_cuda_api, and whether kiln cannot do without it. */
struct symbol {
    size_t at;
    const char *name;
    int required;
};
#define SYMBOL(member, name, required)                                                                                 \
    {                                                                                                                  \
        offsetof(struct kiln_cuda_api, member), name, required                                                         \
    }

/* Resolve `count` symbols of `lib` into *api; 0 if a required one is
   missing. */
static int resolve(void *lib, struct kiln_cuda_api *api, const struct symbol *symbols, size_t count)
{
    int found = 1;
    for (size_t i = 0; i < count; i++) {
        void *f = dlsym(lib, symbols[i].name);
        memcpy((char *)api + symbols[i].at, &f, sizeof f);
        found &= f != NULL || !symbols[i].required;
    }
    return found;
}

static void load_driver(struct kiln_cuda_api *api)
{
    static const char *const files[] = {"libcuda.so.1", "libcuda.so", NULL};
    static const char *const dirs[] = {NULL};
    char path[512];
    api->cuda_lib = open_first(files, dirs, path, sizeof path);
    if (!api->cuda_lib) {
        snprintf(api->driver, sizeof api->driver, "no CUDA driver (libcuda.so.1 not found)");
        return;
    }
    static const struct symbol symbols[] = {
        SYMBOL(cuInit, "cuInit", 1),
        SYMBOL(cuDriverGetVersion, "cuDriverGetVersion", 0),
        SYMBOL(cuDeviceGetCount, "cuDeviceGetCount", 1),
        SYMBOL(cuDeviceGet, "cuDeviceGet", 1),
        SYMBOL(cuDeviceGetName, "cuDeviceGetName", 1),
        SYMBOL(cuDeviceGetAttribute, "cuDeviceGetAttribute", 1),
        SYMBOL(cuDeviceTotalMem, "cuDeviceTotalMem_v2", 1),
        SYMBOL(cuGetErrorName, "cuGetErrorName", 0),
        SYMBOL(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 1),
        SYMBOL(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", 1),
        SYMBOL(cuCtxPushCurrent, "cuCtxPushCurrent_v2", 1),
        SYMBOL(cuCtxPopCurrent, "cuCtxPopCurrent_v2", 1),
        SYMBOL(cuStreamCreate, "cuStreamCreate", 1),
        SYMBOL(cuStreamDestroy, "cuStreamDestroy_v2", 1),
        SYMBOL(cuStreamSynchronize, "cuStreamSynchronize", 1),
        SYMBOL(cuMemAlloc, "cuMemAlloc_v2", 1),
        SYMBOL(cuMemFree, "cuMemFree_v2", 1),
        SYMBOL(cuMemGetAddressRange, "cuMemGetAddressRange_v2", 1),
        SYMBOL(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 1),
        SYMBOL(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 1),
        SYMBOL(cuModuleLoadData, "cuModuleLoadData", 1),
        SYMBOL(cuModuleUnload, "cuModuleUnload", 1),
        SYMBOL(cuModuleGetFunction, "cuModuleGetFunction", 1),
        SYMBOL(cuFuncSetAttribute, "cuFuncSetAttribute", 1),
        SYMBOL(cuLaunchKernel, "cuLaunchKernel", 1),
        SYMBOL(cuEventCreate, "cuEventCreate", 1),
        SYMBOL(cuEventRecord, "cuEventRecord", 1),
        SYMBOL(cuEventSynchronize, "cuEventSynchronize", 1),
        SYMBOL(cuEventElapsedTime, "cuEventElapsedTime_v2", 0),
        SYMBOL(cuEventDestroy, "cuEventDestroy_v2", 1),
        SYMBOL(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", 0),
    };
    if (!resolve(api->cuda_lib, api, symbols, sizeof symbols / sizeof *symbols)) {
        snprintf(api->driver, sizeof api->driver, "%.400s lacks the driver API kiln needs", path);
        return;
    }
    /* cuEventElapsedTime_v2 is CUDA 12.8's name; before it, the plain one. */
    if (!api->cuEventElapsedTime) {
        void *f = dlsym(api->cuda_lib, "cuEventElapsedTime");
        memcpy(&api->cuEventElapsedTime, &f, sizeof f);
    }
    CUresult r = api->cuInit(0);
    const char *what = NULL;
    if (r != KILN_CUDA_SUCCESS && api->cuGetErrorName)
        api->cuGetErrorName(r, &what);
    if (r == KILN_CUDA_ERROR_STUB_LIBRARY) {
        snprintf(api->driver, sizeof api->driver, "%.400s is the toolkit's stub, not a driver", path);
        return;
    }
    int count = 0;
    if (r == KILN_CUDA_SUCCESS)
        r = api->cuDeviceGetCount(&count);
    if (r != KILN_CUDA_SUCCESS) {
        snprintf(api->driver, sizeof api->driver, "%.400s: cuInit failed: %.40s (%d)", path, what ? what : "error", r);
        return;
    }
    if (api->cuDriverGetVersion)
        api->cuDriverGetVersion(&api->driver_version);
    api->devices = count;
    snprintf(api->driver, sizeof api->driver, "%s", path);
}

void *kiln_cuda_open_toolkit_library(const char *const *files, char *path, size_t size)
{
    /* A toolkit's, then a Python package's (nvidia-cuda-nvrtc: nvidia/cuda_nvrtc/lib, or nvidia/cu13/lib). */
    static const char *const dirs[] = {"/usr/local/cuda/lib64",
                                       "/usr/local/cuda/targets/x86_64-linux/lib",
                                       "/usr/local/cuda-*/lib64",
                                       "/usr/local/cuda-*/targets/x86_64-linux/lib",
                                       "/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
                                       "/usr/lib/python3/dist-packages/nvidia/*/lib",
                                       "/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
                                       NULL};
    return open_first(files, dirs, path, size);
}

static void load_nvrtc(struct kiln_cuda_api *api)
{
    static const char *const files[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so", NULL};
    char path[512];
    api->nvrtc_lib = kiln_cuda_open_toolkit_library(files, path, sizeof path);
    if (!api->nvrtc_lib) {
        snprintf(api->nvrtc, sizeof api->nvrtc, "no NVRTC (libnvrtc.so.13, .12 or .11.2 not found)");
        return;
    }
    static const struct symbol symbols[] = {
        SYMBOL(nvrtcVersion, "nvrtcVersion", 1),
        SYMBOL(nvrtcCreateProgram, "nvrtcCreateProgram", 1),
        SYMBOL(nvrtcCompileProgram, "nvrtcCompileProgram", 1),
        SYMBOL(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", 1),
        SYMBOL(nvrtcGetProgramLog, "nvrtcGetProgramLog", 1),
        SYMBOL(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", 1),
        SYMBOL(nvrtcGetCUBIN, "nvrtcGetCUBIN", 1),
        SYMBOL(nvrtcDestroyProgram, "nvrtcDestroyProgram", 1),
    };
    if (!resolve(api->nvrtc_lib, api, symbols, sizeof symbols / sizeof *symbols)) {
        snprintf(api->nvrtc, sizeof api->nvrtc, "%.400s lacks the NVRTC functions kiln needs (CUBIN output: 11.1 on)",
                 path);
        dlclose(api->nvrtc_lib);
        api->nvrtc_lib = NULL;
        return;
    }
    api->nvrtcVersion(&api->nvrtc_major, &api->nvrtc_minor);
    char resolved[512];
    const char *where = dlinfo(api->nvrtc_lib, RTLD_DI_ORIGIN, resolved) == 0 ? resolved : NULL;
    const char *base = strrchr(path, '/');
    if (where)
        snprintf(api->nvrtc, sizeof api->nvrtc, "%.300s/%.100s", where, base ? base + 1 : path);
    else
        snprintf(api->nvrtc, sizeof api->nvrtc, "%s", path);
}

void kiln_cuda_load(struct kiln_cuda_api *api)
{
    memset(api, 0, sizeof *api);
    load_driver(api);
    load_nvrtc(api);
    kiln_log(KILN_LOG_INFO, "CUDA: %d device%s (%s); NVRTC %d.%d (%s)", api->devices, api->devices == 1 ? "" : "s",
             api->driver, api->nvrtc_major, api->nvrtc_minor, api->nvrtc);
}

/* The libraries stay loaded: the driver and NVRTC keep state until the
   process exits (NVRTC's compiler allocations among it), and a later load
   takes the same handles back from the loader. */
void kiln_cuda_unload(struct kiln_cuda_api *api) { memset(api, 0, sizeof *api); }

kiln_status kiln_cuda_compile(const struct kiln_cuda_api *api, const char *source, const char *name, int sm,
                              const char *options, void **cubin, size_t *size)
{
    *cubin = NULL, *size = 0;
    if (!api->nvrtc_lib)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "CUDA: %s", api->nvrtc);
    nvrtcProgram prog = NULL;
    nvrtcResult r = api->nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
    if (r != KILN_NVRTC_SUCCESS)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "CUDA: nvrtcCreateProgram of %s failed (%d)", name, r);
    /* The architecture (sm's, unless the options name one: an
       arch-specific target such as sm_90a), then `options` split at spaces. */
    char arch[32];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d", sm);
    const int named = options && strstr(options, "--gpu-architecture=") != NULL;
    char *opts = strdup(options ? options : "");
    const char **argv = opts ? malloc((strlen(opts) / 2 + 2) * sizeof *argv) : NULL;
    if (!argv) {
        free(opts);
        api->nvrtcDestroyProgram(&prog);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "CUDA: the options of %s", name);
    }
    int argc = 0;
    if (!named)
        argv[argc++] = arch;
    for (char *save = NULL, *tok = strtok_r(opts, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    r = api->nvrtcCompileProgram(prog, argc, argv);
    free(argv);
    free(opts);
    kiln_status st = KILN_SUCCESS;
    if (r != KILN_NVRTC_SUCCESS) {
        size_t log_size = 0;
        api->nvrtcGetProgramLogSize(prog, &log_size);
        char *log = malloc(log_size + 1);
        if (log) {
            log[0] = '\0';
            api->nvrtcGetProgramLog(prog, log);
            log[log_size] = '\0';
        }
        st = kiln_error(KILN_ERROR_BUILD, "CUDA: NVRTC could not compile %s for sm_%d: %s", name, sm,
                        log ? log : "(no log)");
        free(log);
    } else if (api->nvrtcGetCUBINSize(prog, size) != KILN_NVRTC_SUCCESS || *size == 0) {
        st = kiln_error(KILN_ERROR_BUILD, "CUDA: NVRTC gave no CUBIN for %s on sm_%d", name, sm);
    } else if (!(*cubin = malloc(*size))) {
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "CUDA: a CUBIN of %zu bytes", *size);
    } else if (api->nvrtcGetCUBIN(prog, *cubin) != KILN_NVRTC_SUCCESS) {
        free(*cubin), *cubin = NULL;
        st = kiln_error(KILN_ERROR_BUILD, "CUDA: nvrtcGetCUBIN of %s failed", name);
    }
    if (st != KILN_SUCCESS)
        *size = 0;
    api->nvrtcDestroyProgram(&prog);
    return st;
}

int kiln_cuda_cubin_arch(const void *image, size_t size)
{
    /* A 64-bit little-endian ELF for EM_CUDA (190); e_flags at offset 48. */
    const unsigned char *e = image;
    if (size < 64 ||
        memcmp(e,
               "\x7f"
               "ELF",
               4) != 0 ||
        e[4] != 2 || e[5] != 1 || (e[18] | e[19] << 8) != 190)
        return -1;
    const uint32_t flags = (uint32_t)e[48] | (uint32_t)e[49] << 8 | (uint32_t)e[50] << 16 | (uint32_t)e[51] << 24;
    /* From ELF ABI version 8 (CUDA 12.8 on) the arch is bits 8 to 15, before
       it the low byte. */
    return (int)(e[8] >= 8 ? flags >> 8 & 0xff : flags & 0xff);
}
