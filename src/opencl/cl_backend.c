/*
 * The OpenCL backend: devices of every platform, one in-order queue per
 * opened device, buffers as cl_mem, programs as cl_program, kernels as
 * cl_kernel (the backend's `void *` handles are these objects themselves).
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <CL/cl_ext.h>

#include "backend/backend.h"
#include "core/diag.h"
#include "opencl/cl_backend.h"
#include "util/embedded.h"
#include "util/fs.h"

#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#endif
#ifndef CL_DEVICE_PCI_BUS_ID_NV
#define CL_DEVICE_PCI_BUS_ID_NV 0x4008
#define CL_DEVICE_PCI_DOMAIN_ID_NV 0x400A
#endif
#ifndef CL_DEVICE_BOARD_NAME_AMD
#define CL_DEVICE_BOARD_NAME_AMD 0x4038
#endif
#ifndef CL_DEVICE_PCI_BUS_INFO_KHR
#define CL_DEVICE_PCI_BUS_INFO_KHR 0x410F
#endif

#define KILN_CL_MAX_PLATFORMS 16

/* POCL's CPU device runs its kernels on one worker thread per core, which
   Linux is free to place. Kernels of a millisecond or less leave the workers
   asleep most of the time, and once two have been woken onto the same core
   the load balancer rarely separates them: a process then runs every launch
   on one core for good, up to twice as slow
   (docs/pocl.md#worker-threads-pinned-to-cores). So kiln asks POCL to pin,
   unless the user has set POCL_AFFINITY. It does so when the library is
   loaded, before any OpenCL call lets POCL read its environment and before
   the program can start threads: setenv is unsafe while another thread
   reads the environment (docs/threads.md). Other OpenCL drivers ignore the
   variable. */
/* Where kiln runs a POCL CPU device's launches on threads of its own
   (docs/pocl.md, "kiln's threads"), the single-core devices it runs them on:
   how many (0: none), set once when the library is loaded. */
static unsigned crew_parts;

/* POCL's device list for kiln's threads: its CPU device, then one `basic`
   device (which runs a launch on the thread that waits for it) per core.
   Unless KILN_CPU_THREADS is "pocl" (POCL's workers) or "kiln:N" (N threads
   whatever the cores: the tests' way to split launches three ways or more
   on two cores), and unless the user has chosen POCL's devices; a list that
   is kiln's own (a parent process of kiln's set it) is taken as kiln's.
   More cores than kiln's threads cover are POCL's workers' unless asked
   for ("kiln" takes the first KILN_CL_MAX_PARTS). */
static void ask_for_single_core_devices(void)
{
    const char *mode = getenv("KILN_CPU_THREADS");
    if (mode && strcmp(mode, "pocl") == 0)
        return;
    long cores = 0;
    if (mode && strncmp(mode, "kiln:", 5) == 0) {
        char *end = NULL;
        errno = 0;
        cores = isdigit((unsigned char)mode[5]) ? strtol(mode + 5, &end, 10) : 0;
        if (errno || !end || *end || cores < 2 || cores > KILN_CL_MAX_PARTS)
            cores = -1;
    } else if (mode && *mode && strcmp(mode, "kiln") != 0) {
        cores = -1;
    }
    if (cores < 0) {
        kiln_env_warn("KILN_CPU_THREADS", mode, "\"pocl\", \"kiln\" or \"kiln:N\" (N from 2 to 16)", "kiln");
        cores = 0;
        mode = NULL; /* as if unset */
    }
    if (!cores) {
        cores = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef CPU_COUNT
        cpu_set_t allowed;
        if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
            cores = CPU_COUNT(&allowed);
#endif
    }
    if (cores < 2 || (cores > KILN_CL_MAX_PARTS && !(mode && *mode)))
        return;
    if (cores > KILN_CL_MAX_PARTS)
        cores = KILN_CL_MAX_PARTS;
    char list[16 + 6 * KILN_CL_MAX_PARTS] = "pthread";
    for (long i = 0; i < cores; i++)
        strcat(list, " basic");
    const char *chosen = getenv("POCL_DEVICES");
    if (chosen ? strcmp(chosen, list) == 0 : setenv("POCL_DEVICES", list, 0) == 0)
        crew_parts = (unsigned)cores;
}

__attribute__((constructor)) static void prefer_pinned_pocl_workers(void)
{
    if (!getenv("POCL_AFFINITY"))
        setenv("POCL_AFFINITY", "1", 0);
    ask_for_single_core_devices();
}

/* POCL's single-core device, which kiln's threads use and kiln's device
   list leaves out. */
static int is_single_core_pocl(cl_device_id dev)
{
    char name[256] = "";
    if (clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL) != CL_SUCCESS)
        return 0;
    name[sizeof name - 1] = '\0';
    return strncmp(name, "basic-", 6) == 0;
}

/* POCL's CPU device starts its worker threads when a program first lists
   the platform's devices, and each launch wakes them. A worker woken on the
   core of the thread that is queueing the launch preempts that thread
   inside clEnqueueNDRangeKernel while it holds POCL's scheduler lock, and
   the two hand the lock and the core back and forth: on a 2-vCPU Zen 4 a
   kernel of one work-item and its wait took 25-29 µs, 18-25 of them inside
   the enqueue. Workers of the batch policy (SCHED_BATCH: the normal weight
   and share of the processor, but a wakeup never preempts a running thread;
   the tick shares the core) wait until the caller yields or blocks, which a
   kiln wait does at once: 10 µs, 2-3 inside the enqueue
   (docs/pocl.md#the-workers-policy). Threads take their creator's policy,
   so kiln lists a POCL platform's devices with the calling thread in the
   batch policy and then restores it. Only a thread of the normal policy is
   switched (a real-time caller could not switch back unprivileged); POCL
   workers started before kiln lists the devices keep their policy;
   KILN_POCL_BATCH=0 leaves the workers the caller's policy. */
/* A switch that is on unless environment variable `name` is "0": unset,
   empty or "1" is on, anything else on with one warning saying `on` is
   used (KILN_POCL_BATCH, KILN_LARGE_PAGES). */
static int env_switch_on(const char *name, const char *on)
{
    const char *v = getenv(name);
    if (!v || !*v || strcmp(v, "1") == 0)
        return 1;
    if (strcmp(v, "0") == 0)
        return 0;
    kiln_env_warn(name, v, "0 or 1", on);
    return 1;
}

static int pocl_batch_workers(void)
{
    return env_switch_on("KILN_POCL_BATCH", "1, POCL's workers in the batch policy");
}

/* POCL's platform name (CL_PLATFORM_NAME contains it). */
#define POCL_PLATFORM "Portable Computing Language"

static int is_pocl(cl_platform_id platform)
{
    char name[64] = "";
    if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL) != CL_SUCCESS)
        return 0;
    name[sizeof name - 1] = '\0';
    return strstr(name, POCL_PLATFORM) != NULL;
}

/* The stack POCL's workers get. A worker runs a whole work-group on its
   stack, every work-item's values that live across a barrier side by side
   in one frame: 1024 work-items of a GEMM tile with 4 x 16 accumulators, K
   steps unrolled 8 times and vectors of 4 took a 9.7 MiB frame (POCL 3.1),
   and the default stack (the stack limit, 8 MiB here) crashed the process.
   Threads take the process's default stack size where their creator does
   not set one, as POCL does not, so kiln raises that default to this while
   it lists a POCL platform's devices, which starts the workers, and then
   restores it. Only address space is reserved: pages are committed as
   used. The profiles' checks keep work-groups on CPU devices far below it
   (src/profiles/params.h, KILN_CPU_MAX_GROUP_FLOATS). */
#define POCL_WORKER_STACK (64UL << 20)

/* Raise the default stack size of new threads to POCL_WORKER_STACK if it is
   smaller; 1 if it was raised (`saved` holds the default to restore). */
static int raise_default_stack(pthread_attr_t *saved)
{
    size_t size = 0;
    if (pthread_getattr_default_np(saved) != 0)
        return 0;
    if (pthread_attr_getstacksize(saved, &size) == 0 && size >= POCL_WORKER_STACK) {
        pthread_attr_destroy(saved);
        return 0;
    }
    pthread_attr_t big;
    int raised = 0;
    if (pthread_getattr_default_np(&big) == 0) {
        raised = pthread_attr_setstacksize(&big, POCL_WORKER_STACK) == 0 && pthread_setattr_default_np(&big) == 0;
        pthread_attr_destroy(&big);
    }
    if (!raised)
        pthread_attr_destroy(saved);
    return raised;
}

static cl_int list_devices(cl_platform_id platform, cl_device_id *devs, cl_uint *ndev)
{
    int switched = 0;
    const int pocl = is_pocl(platform);
#ifdef SCHED_BATCH
    const struct sched_param none = {0};
    if (pocl && sched_getscheduler(0) == SCHED_OTHER && pocl_batch_workers())
        switched = sched_setscheduler(0, SCHED_BATCH, &none) == 0;
#endif
    pthread_attr_t saved;
    const int raised = pocl && raise_default_stack(&saved);
    const cl_int err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, KILN_CL_MAX_DEVICES, devs, ndev);
    if (raised) {
        if (pthread_setattr_default_np(&saved) != 0)
            kiln_log(KILN_LOG_WARN, "could not restore the default stack size of new threads after listing POCL's "
                                    "devices");
        pthread_attr_destroy(&saved);
    }
#ifdef SCHED_BATCH
    if (switched && sched_setscheduler(0, SCHED_OTHER, &none) != 0)
        kiln_log(KILN_LOG_WARN,
                 "could not restore the calling thread's scheduling policy after listing POCL's devices");
#endif
    return err;
}

/* One thread at a time lists the devices. POCL sets its devices up at the
   first listing, and a thread that asks while another's first listing is
   under way is told the platform has none (CL_DEVICE_NOT_FOUND): eight
   threads creating their first contexts at once on the 2-vCPU Zen 4, seven
   failed "there is no device", every time in ten processes. Listing is
   rare (context creation, kiln-info), so the lock costs nothing that
   matters; it does not cover a program's own OpenCL calls from other
   threads (docs/threads.md). */
static pthread_mutex_t listing_lock = PTHREAD_MUTEX_INITIALIZER;

static kiln_status enumerate_locked(cl_platform_id *platforms, cl_device_id *devices, size_t capacity, size_t *count)
{
    cl_platform_id plats[KILN_CL_MAX_PLATFORMS];
    cl_uint nplat = 0;
    cl_int err = clGetPlatformIDs(KILN_CL_MAX_PLATFORMS, plats, &nplat);
    *count = 0;
    if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR: no ICD installed */ || (err == CL_SUCCESS && nplat == 0))
        return KILN_SUCCESS;
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetPlatformIDs");
    if (nplat > KILN_CL_MAX_PLATFORMS)
        nplat = KILN_CL_MAX_PLATFORMS;
    for (cl_uint p = 0; p < nplat; p++) {
        cl_device_id devs[KILN_CL_MAX_DEVICES];
        cl_uint ndev = 0;
        err = list_devices(plats[p], devs, &ndev);
        if (err == CL_DEVICE_NOT_FOUND)
            continue;
        if (err != CL_SUCCESS)
            return kiln_cl_fail(err, "clGetDeviceIDs");
        for (cl_uint d = 0; d < ndev && d < KILN_CL_MAX_DEVICES && *count < capacity; d++) {
            if (crew_parts && is_single_core_pocl(devs[d]))
                continue;
            platforms[*count] = plats[p];
            devices[*count] = devs[d];
            ++*count;
        }
    }
    return KILN_SUCCESS;
}

kiln_status kiln_cl_enumerate(cl_platform_id *platforms, cl_device_id *devices, size_t capacity, size_t *count)
{
    pthread_mutex_lock(&listing_lock);
    const kiln_status st = enumerate_locked(platforms, devices, capacity, count);
    pthread_mutex_unlock(&listing_lock);
    return st;
}

static void device_string(cl_device_id dev, cl_device_info what, char *buf, size_t size)
{
    buf[0] = '\0';
    if (clGetDeviceInfo(dev, what, size, buf, NULL) != CL_SUCCESS)
        buf[0] = '\0';
    buf[size - 1] = '\0';
}

static int has_extension(const char *extensions, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(extensions, name); p; p = strstr(p + 1, name))
        if ((p == extensions || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}

/* The device's PCI location: cl_khr_pci_bus_info's, else NVIDIA's
   attribute query's bus and domain (its slot id is left out: drivers differ
   on whether it holds the device number alone or with the function). */
static void pci_location(cl_device_id dev, const char *extensions, struct kiln_device_desc *d)
{
    struct {
        cl_uint domain, bus, device, function;
    } khr;
    cl_uint bus = 0, domain = 0;
    if (has_extension(extensions, "cl_khr_pci_bus_info") &&
        clGetDeviceInfo(dev, CL_DEVICE_PCI_BUS_INFO_KHR, sizeof khr, &khr, NULL) == CL_SUCCESS) {
        d->pci_known = 1;
        d->pci_domain = (int)khr.domain, d->pci_bus = (int)khr.bus, d->pci_device = (int)khr.device;
    } else if (has_extension(extensions, "cl_nv_device_attribute_query") &&
               clGetDeviceInfo(dev, CL_DEVICE_PCI_BUS_ID_NV, sizeof bus, &bus, NULL) == CL_SUCCESS) {
        /* The domain query came with later drivers; before it, domain 0. */
        if (clGetDeviceInfo(dev, CL_DEVICE_PCI_DOMAIN_ID_NV, sizeof domain, &domain, NULL) != CL_SUCCESS)
            domain = 0;
        d->pci_known = 1;
        d->pci_domain = (int)domain, d->pci_bus = (int)(bus & 0xff), d->pci_device = -1;
    }
}

/* The single-core devices that kiln's threads run `dev`'s launches on, in
   parts[] (KILN_CL_MAX_PARTS at most): their count, or 0 where kiln's
   threads do not run its launches (not a CPU device, POCL's workers asked
   for, or fewer such devices than kiln asked POCL for). */
static cl_uint crew_devices(cl_platform_id platform, cl_device_id dev, cl_device_id *parts)
{
    cl_device_type type = 0;
    if (!crew_parts || clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS ||
        !(type & CL_DEVICE_TYPE_CPU))
        return 0;
    cl_device_id all[KILN_CL_MAX_DEVICES];
    cl_uint nall = 0, n = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_CPU, KILN_CL_MAX_DEVICES, all, &nall) != CL_SUCCESS)
        return 0;
    for (cl_uint i = 0; i < nall && i < KILN_CL_MAX_DEVICES && n < crew_parts; i++)
        if (is_single_core_pocl(all[i]))
            parts[n++] = all[i];
    return n == crew_parts ? n : 0;
}

/* A device's driver version, and where kiln's threads run its launches,
   how many: their programs are not the driver's own (a copy per part, after
   a prelude), so their cached binaries must not be taken for its. */
static void name_parts(struct kiln_device_desc *desc, unsigned parts)
{
    if (parts) {
        size_t used = strlen(desc->driver_version);
        snprintf(desc->driver_version + used, sizeof desc->driver_version - used, " (kiln's threads: %u)", parts);
    }
}

static void describe_device(cl_platform_id platform, cl_device_id dev, struct kiln_device_desc *d)
{
    memset(d, 0, sizeof *d);
    if (clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof d->platform, d->platform, NULL) != CL_SUCCESS)
        d->platform[0] = '\0';
    d->platform[sizeof d->platform - 1] = '\0';
    device_string(dev, CL_DEVICE_NAME, d->name, sizeof d->name);
    device_string(dev, CL_DEVICE_VENDOR, d->vendor, sizeof d->vendor);
    device_string(dev, CL_DEVICE_VERSION, d->device_version, sizeof d->device_version);
    device_string(dev, CL_DRIVER_VERSION, d->driver_version, sizeof d->driver_version);

    cl_device_type type = 0;
    cl_uint u = 0;
    cl_ulong ul = 0;
    size_t sz = 0;
    clGetDeviceInfo(dev, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    d->type = (type & CL_DEVICE_TYPE_GPU)           ? KILN_DEVICE_GPU
              : (type & CL_DEVICE_TYPE_CPU)         ? KILN_DEVICE_CPU
              : (type & CL_DEVICE_TYPE_ACCELERATOR) ? KILN_DEVICE_ACCELERATOR
                                                    : KILN_DEVICE_OTHER;
    if (clGetDeviceInfo(dev, CL_DEVICE_VENDOR_ID, sizeof u, &u, NULL) == CL_SUCCESS)
        d->vendor_id = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof u, &u, NULL) == CL_SUCCESS)
        d->compute_units = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof u, &u, NULL) == CL_SUCCESS)
        d->clock_mhz = u;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS)
        d->global_mem_bytes = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS)
        d->local_mem_bytes = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS)
        d->max_alloc_bytes = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof ul, &ul, NULL) == CL_SUCCESS)
        d->cache_bytes = ul;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof sz, &sz, NULL) == CL_SUCCESS)
        d->max_work_group_size = sz;

    size_t ext_size = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_size) == CL_SUCCESS && ext_size > 0) {
        char *ext = calloc(1, ext_size + 1);
        if (ext && clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, ext_size, ext, NULL) == CL_SUCCESS) {
            d->fp16 = has_extension(ext, "cl_khr_fp16");
            d->fp64 = has_extension(ext, "cl_khr_fp64");
            if (has_extension(ext, "cl_nv_device_attribute_query")) {
                cl_uint major = 0, minor = 0;
                if (clGetDeviceInfo(dev, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major, NULL) ==
                        CL_SUCCESS &&
                    clGetDeviceInfo(dev, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof minor, &minor, NULL) ==
                        CL_SUCCESS) {
                    d->cc_major = (int)major;
                    d->cc_minor = (int)minor;
                }
            }
            if (has_extension(ext, "cl_amd_device_attribute_query"))
                device_string(dev, CL_DEVICE_BOARD_NAME_AMD, d->board_name, sizeof d->board_name);
            pci_location(dev, ext, d);
        }
        free(ext);
    }
    kiln_device_derive_arch(d);
    struct kiln_host_cpu cpu;
    if (d->type == KILN_DEVICE_CPU && kiln_host_cpu_read(&cpu))
        kiln_device_refine_host_arch(d, &cpu);
}

/* POCL's kernel cache directory, which it makes when it sets its devices up
   and without which it lists none: POCL_CACHE_DIR, else
   $XDG_CACHE_HOME/pocl, else $HOME/.cache/pocl. */
static void pocl_cache_dir(char *path, size_t size)
{
    const char *dir = getenv("POCL_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && dir[0])
        snprintf(path, size, "%s", dir);
    else if (xdg && xdg[0])
        snprintf(path, size, "%s/pocl", xdg);
    else
        snprintf(path, size, "%s/.cache/pocl", home ? home : "");
}

/* The platforms and how many devices each lists; for a POCL platform that
   lists none, the cache directory it needs (pocl_cache_dir). */
static void cl_status(char *text, size_t size)
{
    text[0] = '\0';
    pthread_mutex_lock(&listing_lock);
    cl_platform_id plats[KILN_CL_MAX_PLATFORMS];
    cl_uint nplat = 0;
    const cl_int err = clGetPlatformIDs(KILN_CL_MAX_PLATFORMS, plats, &nplat);
    size_t used = 0;
    if (err != CL_SUCCESS || nplat == 0)
        snprintf(text, size, "no OpenCL platform (no ICD listed in /etc/OpenCL/vendors or OCL_ICD_VENDORS)");
    for (cl_uint p = 0; err == CL_SUCCESS && p < nplat && p < KILN_CL_MAX_PLATFORMS && used < size; p++) {
        char name[128] = "";
        if (clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name, name, NULL) != CL_SUCCESS)
            name[0] = '\0';
        name[sizeof name - 1] = '\0';
        cl_device_id devs[KILN_CL_MAX_DEVICES];
        cl_uint ndev = 0;
        if (list_devices(plats[p], devs, &ndev) != CL_SUCCESS)
            ndev = 0;
        int n = snprintf(text + used, size - used, "%splatform \"%s\": %u device%s", p ? "; " : "", name, ndev,
                         ndev == 1 ? "" : "s");
        used += n > 0 ? (size_t)n : 0;
        if (ndev == 0 && strstr(name, POCL_PLATFORM) && used < size) {
            char path[1024], why[1300] = "";
            pocl_cache_dir(path, sizeof path);
            kiln_fs_dir_creatable(path, why, sizeof why);
            n = snprintf(text + used, size - used,
                         " (POCL lists none when it cannot make its cache directory, POCL_CACHE_DIR, else "
                         "$XDG_CACHE_HOME/pocl, else $HOME/.cache/pocl: here %s%s%s)",
                         path, why[0] ? ", which " : "", why);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    pthread_mutex_unlock(&listing_lock);
}

static kiln_status cl_list_devices(struct kiln_device_desc *descs, size_t capacity, size_t *count)
{
    cl_platform_id plats[KILN_CL_MAX_DEVICES];
    cl_device_id devs[KILN_CL_MAX_DEVICES];
    kiln_status st = kiln_cl_enumerate(plats, devs, KILN_CL_MAX_DEVICES, count);
    if (st != KILN_SUCCESS || !descs)
        return st;
    for (size_t i = 0; i < *count && i < capacity; i++) {
        describe_device(plats[i], devs[i], &descs[i]);
        cl_device_id parts[KILN_CL_MAX_PARTS];
        name_parts(&descs[i], crew_devices(plats[i], devs[i], parts));
    }
    return KILN_SUCCESS;
}

/* How long a wait polls before it blocks, in microseconds (docs/pocl.md,
   "Waiting"): KILN_WAIT_POLL_US, else 2 ms on a CPU device and 0 (block at
   once) elsewhere. */
static long wait_poll_us(cl_device_id device)
{
    const char *env = getenv("KILN_WAIT_POLL_US");
    if (env && strcmp(env, "0") == 0)
        return 0;
    const long v = kiln_env_long("KILN_WAIT_POLL_US", 1, 1000000, "a number of microseconds from 0 to 1000000");
    if (v > 0)
        return v;
    cl_device_type type = 0;
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    return (type & CL_DEVICE_TYPE_CPU) ? 2000 : 0;
}

static double monotonic_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Poll ev until it completes (or fails), yielding the core between looks,
   for at most poll_us; the caller then blocks, which returns at once if it
   has. The yield hands the core to a worker thread of the device whenever
   one is ready to run there. */
static void poll_event(cl_event ev, long poll_us)
{
    if (poll_us <= 0)
        return;
    const double end = monotonic_us() + (double)poll_us;
    for (;;) {
        cl_int status = CL_COMPLETE;
        if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) != CL_SUCCESS ||
            status <= CL_COMPLETE || monotonic_us() > end)
            return;
        sched_yield();
    }
}

/* Large pages for large buffers of a CPU device (docs/pocl.md, "Large
   pages"): the size of the host's transparent huge pages (its
   hpage_pmd_size; 2 MiB where the kernel does not say), or 0 for none: not
   a CPU device, no madvise(MADV_HUGEPAGE), or KILN_LARGE_PAGES=0. A
   buffer's pages are mapped by the processor's TLB, whose entries cover
   4 KiB each in small pages: a 1x1 convolution reading 4 MiB of weights a
   call walked the page tables for every 4 KiB of them. */
static size_t large_page_bytes(cl_device_id device)
{
    cl_device_type type = 0;
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (!(type & CL_DEVICE_TYPE_CPU))
        return 0;
#ifdef MADV_HUGEPAGE
    if (!env_switch_on("KILN_LARGE_PAGES", "1, large buffers of a CPU device in large pages"))
        return 0;
    size_t bytes = (size_t)2 << 20;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
    if (f) {
        unsigned long long n = 0;
        if (fscanf(f, "%llu", &n) == 1 && n >= (unsigned long long)sysconf(_SC_PAGESIZE) && (n & (n - 1)) == 0 &&
            n <= ((unsigned long long)1 << 30))
            bytes = (size_t)n;
        fclose(f);
    }
    return bytes;
#else
    return 0;
#endif
}

static kiln_status make_device(cl_platform_id platform, cl_device_id device, cl_context context, cl_command_queue queue,
                               void **dev)
{
    struct kiln_cl_device *d = calloc(1, sizeof *d);
    if (!d)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating an OpenCL device record");
    d->platform = platform;
    d->device = device;
    d->context = context;
    d->queue = queue;
    d->poll_us = wait_poll_us(device);
    d->large_page = large_page_bytes(device);
    pthread_mutex_init(&d->lock, NULL);
    *dev = d;
    return KILN_SUCCESS;
}

static void stop_crew(struct kiln_cl_device *d)
{
    kiln_cl_crew_stop(d->crew);
    d->crew = NULL;
    for (unsigned i = 0; i < d->parts; i++)
        if (d->part_queue[i])
            clReleaseCommandQueue(d->part_queue[i]);
    d->parts = 0;
}

/* kiln's threads over the single-core devices `parts` of d's context. */
static kiln_status start_crew(struct kiln_cl_device *d, const cl_device_id *parts, unsigned n)
{
    d->parts = n;
    for (unsigned i = 0; i < n; i++) {
        cl_int err;
        d->part_device[i] = parts[i];
        d->part_queue[i] = clCreateCommandQueue(d->context, parts[i], CL_QUEUE_PROFILING_ENABLE, &err);
        if (err != CL_SUCCESS) {
            stop_crew(d);
            return kiln_cl_fail(err, "clCreateCommandQueue");
        }
    }
    kiln_status st = kiln_cl_crew_start(n, &d->crew);
    if (st != KILN_SUCCESS)
        stop_crew(d);
    return st;
}

static kiln_status cl_open(size_t index, void **dev)
{
    cl_platform_id plats[KILN_CL_MAX_DEVICES];
    cl_device_id devs[KILN_CL_MAX_DEVICES];
    size_t count = 0;
    kiln_status st = kiln_cl_enumerate(plats, devs, KILN_CL_MAX_DEVICES, &count);
    if (st != KILN_SUCCESS)
        return st;
    if (index >= count)
        return kiln_error(KILN_ERROR_NOT_FOUND, "OpenCL device %zu does not exist (%zu devices)", index, count);

    cl_int err;
    /* The device first, then the single-core devices of kiln's threads. */
    cl_device_id members[1 + KILN_CL_MAX_PARTS] = {devs[index]};
    const cl_uint nmembers = 1 + crew_devices(plats[index], devs[index], members + 1);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plats[index], 0};
    cl_context context = clCreateContext(props, nmembers, members, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clCreateContext");
    /* Profiling on, so event_elapsed can time launches (conv find). */
    cl_command_queue queue = clCreateCommandQueue(context, devs[index], CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) {
        clReleaseContext(context);
        return kiln_cl_fail(err, "clCreateCommandQueue");
    }
    st = make_device(plats[index], devs[index], context, queue, dev);
    if (st != KILN_SUCCESS) {
        clReleaseCommandQueue(queue);
        clReleaseContext(context);
        return st;
    }
    if (nmembers > 1 && start_crew(*dev, members + 1, nmembers - 1) != KILN_SUCCESS)
        kiln_log(KILN_LOG_WARN, "kiln's CPU threads could not start (%s); POCL's workers run the launches",
                 kiln_last_error_detail());
    return KILN_SUCCESS;
}

static kiln_status cl_wrap(const void *native, void **dev)
{
    const struct kiln_cl_native *n = native;
    cl_platform_id platform = NULL;
    cl_int err = clGetDeviceInfo(n->device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL);
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetDeviceInfo(CL_DEVICE_PLATFORM)");
    if ((err = clRetainContext(n->context)) != CL_SUCCESS)
        return kiln_cl_fail(err, "clRetainContext");
    if ((err = clRetainCommandQueue(n->queue)) != CL_SUCCESS) {
        clReleaseContext(n->context);
        return kiln_cl_fail(err, "clRetainCommandQueue");
    }
    kiln_status st = make_device(platform, n->device, n->context, n->queue, dev);
    if (st != KILN_SUCCESS) {
        clReleaseCommandQueue(n->queue);
        clReleaseContext(n->context);
    }
    return st;
}

static void cl_close(void *dev)
{
    struct kiln_cl_device *d = dev;
    if (!d)
        return;
    clFinish(d->queue);
    stop_crew(d);
    if (d->last)
        clReleaseEvent(d->last);
    pthread_mutex_destroy(&d->lock);
    clReleaseCommandQueue(d->queue);
    clReleaseContext(d->context);
    free(d);
}

static kiln_status cl_describe(void *dev, struct kiln_device_desc *desc)
{
    struct kiln_cl_device *d = dev;
    describe_device(d->platform, d->device, desc);
    name_parts(desc, d->parts);
    return KILN_SUCCESS;
}

static kiln_status cl_finish(void *dev)
{
    struct kiln_cl_device *d = dev;
    if (d->poll_us > 0) {
        pthread_mutex_lock(&d->lock);
        cl_event last = d->last;
        d->last = NULL;
        pthread_mutex_unlock(&d->lock);
        if (last) {
            clFlush(d->queue);
            poll_event(last, d->poll_us);
            clReleaseEvent(last);
        }
    }
    cl_int err = clFinish(d->queue);
    return err == CL_SUCCESS ? KILN_SUCCESS : kiln_cl_fail(err, "clFinish");
}

/* Host memory of a buffer that kiln mapped itself (large_page_buffer),
   unmapped when its cl_mem is deleted. */
struct host_pages {
    void *at;
    size_t len;
};

static void CL_CALLBACK unmap_host_pages(cl_mem mem, void *user)
{
    (void)mem;
    struct host_pages *h = user;
    munmap(h->at, h->len);
    free(h);
}

/* A buffer of a CPU device over host memory that kiln maps at a large
   page's boundary, rounded up to whole large pages and advised as such,
   used in place by the driver (CL_MEM_USE_HOST_PTR); NULL where a step
   fails, and the caller lets the driver allocate. Whether the kernel backs
   the advised pages with large ones is its own choice (transparent huge
   pages `madvise` or `always`; `never` leaves them small). */
static cl_mem large_page_buffer(const struct kiln_cl_device *d, size_t size)
{
    const size_t big = d->large_page, len = (size + big - 1) / big * big, span = len + big;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *at = (char *)(((uintptr_t)raw + big - 1) & ~(uintptr_t)(big - 1));
    if (at > raw) /* the slack either side, given back (after: never empty) */
        munmap(raw, (size_t)(at - raw));
    munmap(at + len, (size_t)(raw + span - (at + len)));
    madvise(at, len, MADV_HUGEPAGE);
    struct host_pages *h = malloc(sizeof *h);
    cl_int err = CL_OUT_OF_HOST_MEMORY;
    cl_mem mem = h ? clCreateBuffer(d->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, size, at, &err) : NULL;
    if (err == CL_SUCCESS && clSetMemObjectDestructorCallback(mem, unmap_host_pages, h) == CL_SUCCESS) {
        h->at = at, h->len = len;
        return mem;
    }
    if (err == CL_SUCCESS)
        clReleaseMemObject(mem);
    free(h);
    munmap(at, len);
    return NULL;
}

static kiln_status cl_buffer_alloc(void *dev, size_t size, void **buf)
{
    const struct kiln_cl_device *d = dev;
    /* From half a large page: a buffer of 1 to 2 MiB takes 2 MiB, at most
       one large page more than asked for, where a 1x1 layer's 1.5 MiB of
       pixels at 56x56 (rows 12 KiB apart, a page each) ran 1.05-1.06x
       faster in large pages and its 1 MiB of weights at 14x14 1.02-1.04x
       (docs/pocl.md). */
    if (d->large_page && size >= d->large_page / 2) {
        cl_mem mem = large_page_buffer(d, size);
        if (mem) {
            *buf = mem;
            return KILN_SUCCESS;
        }
    }
    cl_int err;
    cl_mem mem = clCreateBuffer(d->context, CL_MEM_READ_WRITE, size, NULL, &err);
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clCreateBuffer");
    *buf = mem;
    return KILN_SUCCESS;
}

static kiln_status cl_buffer_wrap(void *dev, void *native, size_t *size, void **buf)
{
    cl_mem mem = native;
    cl_context owner = NULL;
    cl_int err = clGetMemObjectInfo(mem, CL_MEM_CONTEXT, sizeof owner, &owner, NULL);
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetMemObjectInfo(CL_MEM_CONTEXT)");
    if (owner != ((struct kiln_cl_device *)dev)->context)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "mem: the cl_mem belongs to another cl_context");
    if ((err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof *size, size, NULL)) != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetMemObjectInfo(CL_MEM_SIZE)");
    if ((err = clRetainMemObject(mem)) != CL_SUCCESS)
        return kiln_cl_fail(err, "clRetainMemObject");
    *buf = mem;
    return KILN_SUCCESS;
}

static void cl_buffer_free(void *buf)
{
    if (buf)
        clReleaseMemObject(buf);
}

static kiln_status cl_buffer_write(void *dev, void *buf, size_t offset, size_t size, const void *src)
{
    cl_int err =
        clEnqueueWriteBuffer(((struct kiln_cl_device *)dev)->queue, buf, CL_TRUE, offset, size, src, 0, NULL, NULL);
    return err == CL_SUCCESS ? KILN_SUCCESS : kiln_cl_fail(err, "clEnqueueWriteBuffer");
}

static kiln_status cl_buffer_read(void *dev, void *buf, size_t offset, size_t size, void *dst)
{
    cl_int err =
        clEnqueueReadBuffer(((struct kiln_cl_device *)dev)->queue, buf, CL_TRUE, offset, size, dst, 0, NULL, NULL);
    return err == CL_SUCCESS ? KILN_SUCCESS : kiln_cl_fail(err, "clEnqueueReadBuffer");
}

/* A program or kernel handle: one object, or where kiln's threads run the
   device's launches, a copy per part, each built from the same source
   (after parts_prelude) and options for its part's device: POCL compiles
   the first and finds the others in its cache, and the copies share its
   compiled kernels (crew_launch says how launches keep that safe). */
struct cl_prog {
    unsigned n;
    cl_program p[KILN_CL_MAX_PARTS];
    cl_device_id device; /* copy 0's: the program lists every device of its context */
};

struct cl_kern {
    unsigned n;
    cl_kernel k[KILN_CL_MAX_PARTS];
    cl_ulong local_bytes; /* its own local memory (CL_KERNEL_LOCAL_MEM_SIZE) */
    size_t wg[3];         /* its required work-group size, or 1s */
};

static unsigned copies(const struct kiln_cl_device *d) { return d->parts ? d->parts : 1; }

static cl_device_id copy_device(const struct kiln_cl_device *d, unsigned i)
{
    return d->parts ? d->part_device[i] : d->device;
}

/* POCL keeps every program it compiles in its kernel cache unless
   POCL_KERNEL_CACHE is 0, and compiles each kernel again, for any
   work-group size, when asked for a program's binary. */
static int cl_driver_keeps_programs(void *dev)
{
    const char *cache = getenv("POCL_KERNEL_CACHE");
    return is_pocl(((const struct kiln_cl_device *)dev)->platform) && !(cache && strcmp(cache, "0") == 0);
}

static void prog_free(struct cl_prog *p)
{
    if (!p)
        return;
    for (unsigned i = 0; i < p->n; i++)
        if (p->p[i])
            clReleaseProgram(p->p[i]);
    free(p);
}

/* clBuildProgram, turning a failure into KILN_ERROR_BUILD with the log;
   *diagnosed (if not NULL) says whether the log holds a compiler
   diagnostic ("error"), which a failure of the source itself always has. */
static kiln_status build(cl_device_id device, cl_program prog, const char *options, const char *what, int *diagnosed)
{
    cl_int err = clBuildProgram(prog, 1, &device, options, NULL, NULL);
    if (err == CL_SUCCESS)
        return KILN_SUCCESS;
    int compile_error = err == CL_BUILD_PROGRAM_FAILURE || err == CL_INVALID_BUILD_OPTIONS || err == CL_INVALID_BINARY;
    kiln_status st = kiln_error(compile_error ? KILN_ERROR_BUILD : KILN_ERROR_DEVICE,
                                "clBuildProgram of %s failed: %s; options \"%s\"; build log:\n", what,
                                kiln_cl_error_name(err), options ? options : "");
    size_t log_size = 0;
    if (clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size) == CL_SUCCESS && log_size > 1) {
        char *log = malloc(log_size + 1);
        if (log && clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL) == CL_SUCCESS) {
            log[log_size] = '\0';
            kiln_error_append(log);
            if (diagnosed)
                *diagnosed = strstr(log, "error") != NULL;
        }
        free(log);
    }
    return st;
}

/* Builds of a source tried before its failure is returned (see below). */
enum { BUILD_ATTEMPTS = 3 };

/* Before the source of a program of kiln's threads, where each part runs a
   run of the launch's work-groups with a global offset (crew_launch): ids
   that count from the launch's first work-item and work-group, and an offset
   of zero, whatever the run. */
static const char parts_prelude[] =
    "static inline size_t kiln_parts_global_id(uint d) { return get_global_id(d) - (get_global_offset(d) != 0); }\n"
    "static inline size_t kiln_parts_group_id(uint d)\n"
    "{ return get_group_id(d) + (get_global_offset(d) ? (get_global_offset(d) - 1) / get_local_size(d) : 0); }\n"
    "#define get_global_id(d) kiln_parts_global_id(d)\n"
    "#define get_group_id(d) kiln_parts_group_id(d)\n"
    "#define get_global_offset(d) ((size_t)0)\n"
    "#line 1\n";

static kiln_status build_source(struct kiln_cl_device *d, cl_device_id device, const char *source, size_t length,
                                const char *options, cl_program *prog)
{
    const char *text[2] = {parts_prelude, source};
    size_t lengths[2] = {sizeof parts_prelude - 1, length};
    const unsigned first = d->parts ? 0 : 1;
    for (int attempt = 1;; attempt++) {
        cl_int err;
        cl_program p = clCreateProgramWithSource(d->context, 2 - first, text + first, lengths + first, &err);
        if (err != CL_SUCCESS)
            return kiln_cl_fail(err, "clCreateProgramWithSource");
        int diagnosed = 0;
        kiln_status st = build(device, p, options, "source", &diagnosed);
        if (st == KILN_SUCCESS) {
            *prog = p;
            return KILN_SUCCESS;
        }
        clReleaseProgram(p);
        /* POCL keeps compiled kernels in a per-user directory that every
           process writes without a lock: while another process compiles the
           same program, a build can fail with no diagnostic at all
           (docs/pocl.md). Such a failure is tried again; an error in the
           source has a diagnostic and fails at once. */
        if (st != KILN_ERROR_BUILD || diagnosed || attempt == BUILD_ATTEMPTS)
            return st;
        kiln_log(KILN_LOG_INFO, "clBuildProgram failed without a diagnostic (attempt %d of %d); building again",
                 attempt, BUILD_ATTEMPTS);
    }
}

static kiln_status cl_program_build(void *dev, const char *source, size_t length, const char *options, void **prog)
{
    struct kiln_cl_device *d = dev;
    struct cl_prog *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a program");
    p->device = copy_device(d, 0);
    for (p->n = 0; p->n < copies(d); p->n++) {
        kiln_status st = build_source(d, copy_device(d, p->n), source, length, options, &p->p[p->n]);
        if (st != KILN_SUCCESS) {
            prog_free(p);
            return st;
        }
    }
    *prog = p;
    return KILN_SUCCESS;
}

/* A program's binaries: the driver's own where there is one copy; for
   kiln's threads, "KILNPRT1", the count and each copy's size (little-endian
   64 bits), then the copies' binaries in turn. */
#define PARTS_MAGIC "KILNPRT2"

static kiln_status load_copy(struct kiln_cl_device *d, unsigned i, const unsigned char *bin, size_t size,
                             const char *options, cl_program *out)
{
    cl_int err, binary_status = CL_SUCCESS;
    cl_device_id device = copy_device(d, i);
    cl_program p = clCreateProgramWithBinary(d->context, 1, &device, &size, &bin, &binary_status, &err);
    if (err != CL_SUCCESS || binary_status != CL_SUCCESS) {
        if (p)
            clReleaseProgram(p);
        return kiln_cl_fail(err != CL_SUCCESS ? err : binary_status, "clCreateProgramWithBinary");
    }
    kiln_status st = build(device, p, options, "binary", NULL);
    if (st != KILN_SUCCESS) {
        clReleaseProgram(p);
        return st;
    }
    *out = p;
    return KILN_SUCCESS;
}

static uint64_t get_u64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void put_u64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        b[i] = (unsigned char)v;
}

static kiln_status cl_program_load(void *dev, const void *binary, size_t size, const char *options, void **prog)
{
    struct kiln_cl_device *d = dev;
    const unsigned char *bin = binary;
    struct cl_prog *p = calloc(1, sizeof *p);
    if (!p)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a program");
    p->device = copy_device(d, 0);
    kiln_status st = KILN_SUCCESS;
    if (!d->parts) {
        st = load_copy(d, 0, bin, size, options, &p->p[0]);
        p->n = st == KILN_SUCCESS;
    } else {
        const unsigned n_copies = copies(d);
        const size_t head = 8 + 8 + 8 * (size_t)n_copies;
        if (size < head || memcmp(bin, PARTS_MAGIC, 8) != 0 || get_u64(bin + 8) != n_copies) {
            prog_free(p);
            return kiln_error(KILN_ERROR_CORRUPT_CACHE, "not a program binary of %u copies", n_copies);
        }
        size_t at = head;
        for (; p->n < n_copies && st == KILN_SUCCESS; p->n++) {
            uint64_t n = get_u64(bin + 16 + 8 * (size_t)p->n);
            if (n == 0 || n > size - at) {
                st = kiln_error(KILN_ERROR_CORRUPT_CACHE, "copy %u of a program binary overruns it", p->n);
                break;
            }
            st = load_copy(d, p->n, bin + at, (size_t)n, options, &p->p[p->n]);
            if (st != KILN_SUCCESS)
                break;
            at += (size_t)n;
        }
    }
    if (st != KILN_SUCCESS) {
        prog_free(p);
        return st;
    }
    *prog = p;
    return KILN_SUCCESS;
}

static kiln_status copy_binary(cl_program prog, unsigned char **binary, size_t *size)
{
    size_t n = 0;
    cl_int err = clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL);
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES)");
    if (n == 0)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "the OpenCL driver returned no program binary");
    unsigned char *bin = malloc(n);
    if (!bin)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a %zu-byte program binary", n);
    err = clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL);
    if (err != CL_SUCCESS) {
        free(bin);
        return kiln_cl_fail(err, "clGetProgramInfo(CL_PROGRAM_BINARIES)");
    }
    *binary = bin;
    *size = n;
    return KILN_SUCCESS;
}

static kiln_status cl_program_binary(void *dev, void *prog, void **binary, size_t *size)
{
    const struct kiln_cl_device *d = dev;
    const struct cl_prog *p = prog;
    if (!d->parts) {
        unsigned char *bin = NULL;
        kiln_status st = copy_binary(p->p[0], &bin, size);
        *binary = bin;
        return st;
    }
    unsigned char *part[KILN_CL_MAX_PARTS] = {0};
    size_t part_size[KILN_CL_MAX_PARTS] = {0}, total = 16 + 8 * (size_t)p->n;
    kiln_status st = KILN_SUCCESS;
    for (unsigned i = 0; i < p->n && st == KILN_SUCCESS; i++) {
        st = copy_binary(p->p[i], &part[i], &part_size[i]);
        total += part_size[i];
    }
    unsigned char *out = st == KILN_SUCCESS ? malloc(total) : NULL;
    if (st == KILN_SUCCESS && !out)
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a %zu-byte program binary", total);
    if (st == KILN_SUCCESS) {
        memcpy(out, PARTS_MAGIC, 8);
        put_u64(out + 8, p->n);
        size_t at = 16 + 8 * (size_t)p->n;
        for (unsigned i = 0; i < p->n; i++) {
            put_u64(out + 16 + 8 * (size_t)i, part_size[i]);
            memcpy(out + at, part[i], part_size[i]);
            at += part_size[i];
        }
        *binary = out;
        *size = total;
    }
    for (unsigned i = 0; i < p->n; i++)
        free(part[i]);
    return st;
}

static void cl_program_free(void *prog) { prog_free(prog); }

static void kern_free(struct cl_kern *k)
{
    if (!k)
        return;
    for (unsigned i = 0; i < k->n; i++)
        if (k->k[i])
            clReleaseKernel(k->k[i]);
    free(k);
}

static kiln_status cl_kernel_create(void *prog, const char *name, void **kernel)
{
    const struct cl_prog *p = prog;
    struct cl_kern *k = calloc(1, sizeof *k);
    if (!k)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a kernel");
    for (; k->n < p->n; k->n++) {
        cl_int err;
        k->k[k->n] = clCreateKernel(p->p[k->n], name, &err);
        if (err != CL_SUCCESS) {
            kiln_status st = kiln_cl_fail(err, "clCreateKernel");
            kiln_error_append(" (kernel \"");
            kiln_error_append(name);
            kiln_error_append("\")");
            kern_free(k);
            return st;
        }
    }
    /* What kiln's threads split a launch by (cl_launch). Unknown, a kernel
       counts as having local memory and as requiring no work-group size,
       and kiln's threads say so. */
    const cl_int local_err = clGetKernelWorkGroupInfo(k->k[0], p->device, CL_KERNEL_LOCAL_MEM_SIZE,
                                                      sizeof k->local_bytes, &k->local_bytes, NULL);
    const cl_int wg_err =
        clGetKernelWorkGroupInfo(k->k[0], p->device, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof k->wg, k->wg, NULL);
    if (local_err != CL_SUCCESS)
        k->local_bytes = 1; /* as if it had some */
    if (wg_err != CL_SUCCESS)
        memset(k->wg, 0, sizeof k->wg);
    if (p->n > 1 && local_err != CL_SUCCESS)
        kiln_log(KILN_LOG_WARN,
                 "kernel %s: its local memory could not be read (%s); kiln's threads run its launches as if it had "
                 "some, on one thread fewer",
                 name, kiln_cl_error_name(local_err));
    if (p->n > 1 && wg_err != CL_SUCCESS)
        kiln_log(KILN_LOG_WARN,
                 "kernel %s: its required work-group size could not be read (%s); kiln's threads split its launches "
                 "by work-item",
                 name, kiln_cl_error_name(wg_err));
    for (int i = 0; i < 3; i++)
        k->wg[i] += !k->wg[i];
    *kernel = k;
    return KILN_SUCCESS;
}

static void cl_kernel_free(void *kernel) { kern_free(kernel); }

static kiln_status set_args(cl_kernel kernel, const struct kiln_arg *args, unsigned nargs, size_t local_bytes)
{
    for (unsigned i = 0; i < nargs; i++) {
        cl_int err;
        if (args[i].kind == KILN_ARG_BUFFER) {
            cl_mem mem = (cl_mem)args[i].value;
            err = clSetKernelArg(kernel, i, sizeof mem, &mem);
        } else {
            err = clSetKernelArg(kernel, i, args[i].size, args[i].value);
        }
        if (err != CL_SUCCESS)
            return kiln_cl_fail(err, "clSetKernelArg");
    }
    /* Dynamic local memory: the kernel's last parameter, a __local pointer. */
    if (local_bytes) {
        cl_int err = clSetKernelArg(kernel, nargs, local_bytes, NULL);
        if (err != CL_SUCCESS)
            return kiln_cl_fail(err, "clSetKernelArg(__local)");
    }
    return KILN_SUCCESS;
}

/* One launch on kiln's threads: the NDRange split into shares of whole
   work-groups along one dimension, a share a part, each run on the queue of
   the part that runs it and waited for there. A part runs its own share
   first and then any share nobody has taken yet, so a thread that the host
   keeps off its core for a while holds up no launch it has not started: the
   caller takes its share (kiln_cl_crew_run).

   The copies of a program are one build (POCL compiles it once and finds
   it in its cache for the other parts' devices), so POCL keeps one entry
   for a kernel's compiled code and its local size, and counts the launches
   using it. POCL 3.1 releases a launch's use by kernel and local size alone
   (pocl_release_dlhandle_cache), so two launches of one kernel at once
   must take the same entry, or one's release lands on the other's and fails
   its count. POCL takes the first entry whose global-offset kind and grid
   width fit, and makes a new one where none does; so every share is
   launched with a non-zero offset (its first work-item plus one in each
   dimension: parts_prelude takes the one off) and the same grid,
   `per_part` work-groups, and a share that holds one more runs it as a
   second launch right after, narrower than the first. */
struct crew_launch {
    struct kiln_cl_device *d;
    const struct cl_kern *k;
    unsigned dims, split; /* the dimension split */
    const size_t *global, *local;
    size_t group;                         /* work-items a work-group along `split` */
    size_t per_part;                      /* work-groups in every share's first launch */
    size_t first[KILN_CL_MAX_PARTS];      /* share i's first work-group along `split` */
    unsigned first_part;                  /* the shares and parts before run nothing */
    unsigned first_extra;                 /* the shares from here on hold one work-group more */
    _Atomic int taken[KILN_CL_MAX_PARTS]; /* share i is someone's */
    cl_event *event;                      /* the last share's last launch (never empty), where the caller asked */
    cl_int err[KILN_CL_MAX_PARTS];
};

static cl_int crew_enqueue(const struct crew_launch *l, unsigned part, size_t first, size_t groups, cl_event *event)
{
    size_t offset[3] = {1, 1, 1}, global[3];
    memcpy(global, l->global, l->dims * sizeof *global);
    offset[l->split] += first * l->group;
    global[l->split] = groups * l->group;
    return clEnqueueNDRangeKernel(l->d->part_queue[part], l->k->k[part], l->dims, offset, global, l->local, 0, NULL,
                                  event);
}

/* Share `share` of the launch on part `part`'s queue. */
static cl_int crew_share(const struct crew_launch *l, unsigned part, unsigned share)
{
    const int extra = share >= l->first_extra, last = share + 1 == l->d->parts;
    cl_int err = CL_SUCCESS;
    if (l->per_part)
        err = crew_enqueue(l, part, l->first[share], l->per_part, last && !extra ? l->event : NULL);
    if (err == CL_SUCCESS && extra)
        err = crew_enqueue(l, part, l->first[share] + l->per_part, 1, last ? l->event : NULL);
    if (err == CL_SUCCESS && (l->per_part || extra))
        err = clFinish(l->d->part_queue[part]);
    return err;
}

static void crew_part(void *arg, unsigned part)
{
    struct crew_launch *l = arg;
    const unsigned parts = l->d->parts;
    if (part < l->first_part) {
        /* The caller of a launch that runs on kiln's threads alone: it
           returns once the threads have taken every share. */
        for (unsigned i = l->first_part; i < parts; i++)
            while (!atomic_load_explicit(&l->taken[i], memory_order_acquire))
                sched_yield();
        return;
    }
    cl_int err = CL_SUCCESS;
    for (unsigned i = 0; i < parts && err == CL_SUCCESS; i++) {
        const unsigned share = i == 0 ? part : i <= part ? i - 1 : i; /* its own first */
        if (share >= l->first_part && !atomic_exchange_explicit(&l->taken[share], 1, memory_order_acq_rel))
            err = crew_share(l, part, share);
    }
    l->err[part] = err;
}

/* Where to split a launch over parts [l->first_part, parts): along the
   dimension whose work-groups divide most evenly among them, the slowest
   varying among equals (a share then the most contiguous). Every share
   gets the same whole count, and the last shares one work-group more each,
   until none is left (so the last share is never empty). */
static void plan_split(struct crew_launch *l)
{
    const unsigned parts = l->d->parts, n = parts - l->first_part;
    double best = -1.0;
    for (unsigned dim = 0; dim < l->dims; dim++) {
        const size_t wg = l->local ? l->local[dim] : l->k->wg[dim], groups = l->global[dim] / wg;
        const size_t longest = (groups + n - 1) / n;
        const double even = groups > 1 ? (double)groups / (double)(longest * n) : 0.0;
        if (even >= best)
            best = even, l->split = dim, l->group = wg;
    }
    const size_t groups = l->global[l->split] / l->group, left = groups % n;
    l->per_part = groups / n;
    l->first_extra = parts - (unsigned)left;
    size_t at = 0;
    for (unsigned i = l->first_part; i < parts; i++) {
        l->first[i] = at;
        at += l->per_part + (i >= l->first_extra);
    }
}

static kiln_status cl_launch(void *dev, void *kernel, const struct kiln_arg *args, unsigned nargs, unsigned dims,
                             const size_t *global, const size_t *local, size_t local_bytes, void **event)
{
    struct kiln_cl_device *d = dev;
    const struct cl_kern *k = kernel;
    for (unsigned i = 0; i < k->n; i++) {
        kiln_status st = set_args(k->k[i], args, nargs, local_bytes);
        if (st != KILN_SUCCESS)
            return st;
    }
    cl_event ev = NULL;
    if (d->parts) {
        /* A work-group of many work-items that share local memory, and so
           wait at barriers, runs on the stack of the thread that runs it,
           where POCL keeps each work-item's values across the barriers
           (megabytes: POCL_WORKER_STACK above), more than the caller's
           thread may have: such launches run on kiln's threads alone. */
        const size_t *wg = local ? local : k->wg;
        const int big_stack =
            (local_bytes || k->local_bytes) && wg[0] * (dims > 1 ? wg[1] : 1) * (dims > 2 ? wg[2] : 1) > 1;
        struct crew_launch l = {.d = d,
                                .k = k,
                                .dims = dims,
                                .global = global,
                                .local = local,
                                .event = event ? &ev : NULL,
                                .first_part = big_stack && d->parts > 1};
        plan_split(&l);
        kiln_cl_crew_run(d->crew, crew_part, &l);
        for (unsigned i = 0; i < d->parts; i++)
            if (l.err[i] != CL_SUCCESS) {
                if (ev)
                    clReleaseEvent(ev);
                return kiln_cl_fail(l.err[i], "clEnqueueNDRangeKernel (kiln's threads)");
            }
        if (event)
            *event = ev;
        return KILN_SUCCESS;
    }
    cl_int err = clEnqueueNDRangeKernel(d->queue, k->k[0], dims, NULL, global, local, 0, NULL,
                                        event || d->poll_us > 0 ? &ev : NULL);
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clEnqueueNDRangeKernel");
    if (d->poll_us > 0) {
        if (event)
            clRetainEvent(ev);
        pthread_mutex_lock(&d->lock);
        cl_event old = d->last;
        d->last = ev;
        pthread_mutex_unlock(&d->lock);
        if (old)
            clReleaseEvent(old);
    }
    if (event)
        *event = ev;
    return KILN_SUCCESS;
}

static kiln_status cl_event_wait(void *event)
{
    cl_event ev = event;
    cl_command_queue queue = NULL;
    cl_device_id device = NULL;
    if (clGetEventInfo(ev, CL_EVENT_COMMAND_QUEUE, sizeof queue, &queue, NULL) == CL_SUCCESS && queue &&
        clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof device, &device, NULL) == CL_SUCCESS) {
        clFlush(queue);
        poll_event(ev, wait_poll_us(device));
    }
    cl_int err = clWaitForEvents(1, &ev);
    return err == CL_SUCCESS ? KILN_SUCCESS : kiln_cl_fail(err, "clWaitForEvents");
}

static kiln_status cl_event_elapsed(void *event, double *ms)
{
    cl_ulong start = 0, end = 0;
    cl_int err = clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
    if (err == CL_SUCCESS)
        err = clGetEventProfilingInfo(event, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    if (err == CL_PROFILING_INFO_NOT_AVAILABLE)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "clGetEventProfilingInfo: %s (a queue without profiling)",
                          kiln_cl_error_name(err));
    if (err != CL_SUCCESS)
        return kiln_cl_fail(err, "clGetEventProfilingInfo");
    *ms = end > start ? (double)(end - start) * 1e-6 : 0.0;
    return KILN_SUCCESS;
}

static void cl_event_release(void *event)
{
    if (event)
        clReleaseEvent(event);
}

const struct kiln_backend kiln_opencl_backend = {
    .name = "opencl",
    .no_device_hint = "is an OpenCL ICD such as POCL installed?",
    .status = cl_status,
    .kernel_sources = kiln_embedded_cl_kernels,
    .kernel_extension = ".cl",
    .vector_kernels = 1,
    .list_devices = cl_list_devices,
    .open = cl_open,
    .wrap = cl_wrap,
    .close = cl_close,
    .describe = cl_describe,
    .finish = cl_finish,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_wrap = cl_buffer_wrap,
    .buffer_free = cl_buffer_free,
    .buffer_write = cl_buffer_write,
    .buffer_read = cl_buffer_read,
    .program_build = cl_program_build,
    .program_load = cl_program_load,
    .program_binary = cl_program_binary,
    .driver_keeps_programs = cl_driver_keeps_programs,
    .program_free = cl_program_free,
    .kernel_create = cl_kernel_create,
    .kernel_free = cl_kernel_free,
    .launch = cl_launch,
    .event_wait = cl_event_wait,
    .event_elapsed = cl_event_elapsed,
    .event_release = cl_event_release,
};
