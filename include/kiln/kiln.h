/*
 * kiln — portable kernels for the heavy operations of deep networks.
 *
 * Conventions of this API:
 *  - every function returns a kiln_status (0 = KILN_SUCCESS) unless it is a
 *    destroy function or a pure query that cannot fail;
 *  - on failure nothing is written to outputs or device buffers, and
 *    kiln_last_error_detail() describes the failure for the calling thread;
 *  - handles are opaque; inputs are const; outputs come last;
 *  - every create has a destroy; ownership is stated per function;
 *  - threads (docs/threads.md): a context, its buffers and events may be
 *    used from several threads at once, a plan by one thread at a time; the
 *    declarations below say where a call has limits.
 *
 * Neural-network operators are declared in kiln/kiln_nn.h and attention in
 * kiln/kiln_attention.h, both included here. OpenCL interoperation (wrapping
 * a caller's context, queue or cl_mem) is declared in kiln/kiln_cl.h.
 */
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KILN_API
#else
#define KILN_API __attribute__((visibility("default")))
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/*
 * Status codes. The list is the single source of the enum and of the
 * strings returned by kiln_status_string(); values are assigned in order, so
 * two codes cannot collide. New codes are appended, never inserted.
 */
#define KILN_STATUS_LIST(X)                                                                                            \
    X(KILN_SUCCESS, "success")                                                                                         \
    X(KILN_ERROR_INVALID_ARGUMENT, "invalid argument")                                                                 \
    X(KILN_ERROR_OUT_OF_BOUNDS, "size or offset outside the buffer")                                                   \
    X(KILN_ERROR_UNSUPPORTED, "unsupported on this device or for this shape")                                          \
    X(KILN_ERROR_OUT_OF_MEMORY, "out of memory")                                                                       \
    X(KILN_ERROR_DEVICE, "device or OpenCL runtime error")                                                             \
    X(KILN_ERROR_BUILD, "kernel build failed")                                                                         \
    X(KILN_ERROR_IO, "file input/output error")                                                                        \
    X(KILN_ERROR_NOT_FOUND, "not found")                                                                               \
    X(KILN_ERROR_INVALID_PROFILE, "invalid device profile")                                                            \
    X(KILN_ERROR_CORRUPT_CACHE, "corrupt or foreign cache entry")                                                      \
    X(KILN_ERROR_INTERNAL, "internal error")

typedef enum kiln_status {
#define KILN_STATUS_ENUM_(name, text) name,
    KILN_STATUS_LIST(KILN_STATUS_ENUM_)
#undef KILN_STATUS_ENUM_
        KILN_STATUS_COUNT_
} kiln_status;

/** Human-readable, static text for a status ("unknown status" if out of range). */
KILN_API const char *kiln_status_string(kiln_status status);

/**
 * Detail of the last failure on the calling thread: which argument was wrong,
 * the OpenCL error name, the compiler build log. Empty string if the last
 * call succeeded or gave no detail. Valid until the next kiln call on this
 * thread. Each thread has its own: calls on other threads, failing or not,
 * never change it.
 */
KILN_API const char *kiln_last_error_detail(void);

/** Library version, e.g. "0.1.0". */
KILN_API const char *kiln_version_string(void);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

typedef enum kiln_device_type {
    KILN_DEVICE_CPU = 1,
    KILN_DEVICE_GPU = 2,
    KILN_DEVICE_ACCELERATOR = 3,
    KILN_DEVICE_OTHER = 4
} kiln_device_type;

/** "cpu", "gpu", "accelerator" or "other": the type's lower-case name, as
    KILN_DEVICE takes the first three (static storage; "other" for a value
    outside the enum). */
KILN_API const char *kiln_device_type_string(kiln_device_type type);

/** Everything kiln knows about a device, including the profile it matched. */
typedef struct kiln_device_info {
    size_t index;             /**< position in kiln's device enumeration */
    char backend[16];         /**< "opencl" or "cuda" */
    char platform[128];       /**< platform name */
    char name[128];           /**< device name */
    char vendor[128];         /**< vendor name */
    char device_version[128]; /**< e.g. "OpenCL 3.0 PoCL ..." */
    char driver_version[64];  /**< driver version string */
    char arch[64];            /**< derived architecture: "sm_86", "gfx1030",
                                   "xe-hpg", "x86_64:skylake-avx512", ... */
    kiln_device_type type;
    unsigned compute_units;
    unsigned clock_mhz;
    uint64_t global_mem_bytes;
    uint64_t local_mem_bytes;
    uint64_t max_alloc_bytes;
    size_t max_work_group_size;
    int fp16;                      /**< cl_khr_fp16 available */
    int fp64;                      /**< cl_khr_fp64 available */
    char profile[64];              /**< name of the matched device profile */
    char profile_reason[256];      /**< why it matched: the match rules that held,
                                        or "forced by name" */
    char profile_origin[512];      /**< where it came from: "built-in", "<file>
                                        (user profile directory)", "<file>
                                        (KILN_PROFILE_DIR)" or "profile overlay";
                                        a longer path is cut with "..." */
    char profile_parents[256];     /**< its parents, nearest first, "a <- b";
                                        "" for a root */
    char profile_provenance[2048]; /**< its "provenance" object as compact
                                        JSON ("{}" if none), cut with "..."
                                        if longer */
    double peak_gflops;            /**< fp32 peak, GFLOP/s */
    double peak_gbps;              /**< memory bandwidth peak, GB/s */
    char peak_source[32];          /**< "measured" when the profile is one kiln-tune wrote
                                        with the peaks it measured, else "profile" */
    size_t backend_index;          /**< its index among its backend's devices
                                        (KILN_DEVICE=<backend>:N); SIZE_MAX for a
                                        wrapped device kiln does not list */
    char pci_address[16];          /**< "0000:65:00.0" (domain:bus:device.function),
                                        "0000:65" where the backend gives the bus alone,
                                        "" where it gives none */
    char same_device[192];         /**< the other backend's listing of this very
                                        device, "[1] cuda:0 (PCI 0000:65:00.0)", or "" */
    char selection[384];           /**< why a context opened without a device option
                                        takes this device ("cuda:0, the only GPU; opencl:0
                                        is the same GPU ...", "selected by KILN_DEVICE ...");
                                        "" for a device it does not take */
    uint64_t cache_bytes;          /**< the cache in front of global memory, as the backend
                                        reports it (OpenCL's global memory cache: a CPU's
                                        last level; CUDA's L2); 0 if not reported. Data that
                                        fits it may be read faster than memory delivers */
} kiln_device_info;

/** A backend compiled into kiln: its name, how many devices it lists, and
    what it runs on or why it has no device. */
typedef struct kiln_backend_info {
    char name[16];     /**< "opencl", "cuda" (what KILN_DEVICE=name:N selects by) */
    size_t devices;    /**< devices it lists (kiln's indices follow backend order) */
    char status[1024]; /**< the libraries it loaded, or why it has no device */
} kiln_backend_info;

/** Describe backend `index` (0, 1, ...); KILN_ERROR_NOT_FOUND past the last. */
KILN_API kiln_status kiln_backend_get_info(size_t index, kiln_backend_info *info);

/** Number of devices kiln can use, over all platforms. */
KILN_API kiln_status kiln_device_count(size_t *count);

/** Describe device `index` (0 <= index < kiln_device_count()). */
KILN_API kiln_status kiln_device_get_info(size_t index, kiln_device_info *info);

/* ------------------------------------------------------------------------ */
/* Contexts                                                                 */
/* ------------------------------------------------------------------------ */

/**
 * A device opened for use: queue, matched profile, program cache.
 * Thread-safe: every call that takes a context may be made from several
 * threads at once (kiln_context_destroy aside). Their work goes to the
 * context's one in-order queue in the order the calls reach it, each seeing
 * what earlier work wrote, so plans may be executed back to back with no
 * wait between them (README, "Running a network"); kiln orders nothing
 * between threads. A kernel that several threads need at once is
 * built once.
 */
typedef struct kiln_context kiln_context;

typedef struct kiln_context_options {
    /** Device selector: "cpu", "gpu", "accelerator", a backend ("opencl",
        "cuda") or one of its devices ("opencl:N", "cuda:N"), a device index
        ("0"), or a case-insensitive substring of "platform device"; "" is
        refused. NULL: the KILN_DEVICE environment variable, or if unset or
        empty the best device (a GPU before an accelerator before a CPU,
        then the highest profile peak; an NVIDIA GPU through the CUDA backend
        where that lists it: README's KILN_DEVICE). */
    const char *device;
    /** Force a profile by name; "" is refused. NULL: KILN_PROFILE, or if
        unset or empty match. */
    const char *profile;
    /** Directory of the on-disk program cache. NULL: KILN_CACHE_DIR, or if
        unset $XDG_CACHE_HOME/kiln (or ~/.cache/kiln). A directory that
        cannot be used (not a directory — a file, FIFO, socket or device —,
        a loop of symbolic links, not writable, too long) never fails
        the context: programs stay in memory, one warning is logged and
        kiln_context_get_cache_info() says why. */
    const char *cache_dir;
    /** Non-zero: keep built programs in memory only. */
    int disable_disk_cache;
    /** Parameters applied over the chosen profile, as JSON text with the
        optional keys "device", "select" and "kernels" of a profile file
        (device_profiles/README.md), e.g.
        {"kernels": {"gemm.tiled": {"mwg": 32, "nwg": 32}}}, at most 1 MiB.
        Lets a tuner or a test try a parameter set without files; a set
        past the schema's bounds on compile cost is refused before anything
        is compiled. NULL: none. */
    const char *profile_overlay;
} kiln_context_options;

/** Fill `options` with defaults (everything from the environment). */
KILN_API void kiln_context_options_init(kiln_context_options *options);

/**
 * Open a device.
 * @param options  NULL for defaults.
 * @param out      receives a new context; the caller owns it and releases it
 *                 with kiln_context_destroy().
 * @return KILN_ERROR_NOT_FOUND if no device matches the selector, there is
 *         no device, or the forced profile does not exist;
 *         KILN_ERROR_INVALID_ARGUMENT for a malformed or empty selector, an
 *         empty or abstract forced profile, or a NULL out;
 *         KILN_ERROR_INVALID_PROFILE for a profile overlay that does not
 *         validate or does not fit the device (the detail says why);
 *         KILN_ERROR_IO if KILN_PROFILE_DIR or KILN_KERNEL_DIR names a
 *         directory that cannot be read (missing, not a directory, a loop of
 *         symbolic links, too long; the detail names it and says why);
 *         KILN_ERROR_DEVICE for a backend failure.
 */
KILN_API kiln_status kiln_context_create(const kiln_context_options *options, kiln_context **out);

/** Release a context and everything it built. Its plans (of every
    operator) and buffers must be destroyed first, and every other call on
    the context and its objects must have returned. NULL is ignored. */
KILN_API void kiln_context_destroy(kiln_context *ctx);

/** Describe the context's device. */
KILN_API kiln_status kiln_context_get_device_info(const kiln_context *ctx, kiln_device_info *info);

/**
 * The context's profile, resolved (inheritance and overlay applied), as the
 * JSON of a profile file holding every parameter group with its classes:
 * what `kiln-info --profile` prints.
 * @param buf     receives the text and its terminator; NULL (with size 0)
 *                to ask for the length only.
 * @param length  receives the length without the terminator.
 * @return KILN_ERROR_OUT_OF_BOUNDS if `size` cannot hold the text (nothing
 *         written); KILN_ERROR_INVALID_ARGUMENT for a NULL ctx or length.
 */
KILN_API kiln_status kiln_context_get_profile_json(const kiln_context *ctx, char *buf, size_t size, size_t *length);

/** Wait until all work queued on the context, by any thread, before this
    call has finished. On a CPU device the wait polls, yielding its core, for
    up to 2 ms before it blocks (KILN_WAIT_POLL_US; docs/pocl.md): a short
    kernel's end is seen tens of microseconds sooner. kiln_event_wait does
    the same. */
KILN_API kiln_status kiln_context_finish(kiln_context *ctx);

typedef struct kiln_cache_info {
    char dir[512];         /**< on-disk cache directory ("" if disabled) */
    uint64_t disk_entries; /**< entries currently in the directory */
    uint64_t disk_bytes;   /**< their total size */
    uint64_t memory_hits;  /**< programs found in this context's memory */
    uint64_t disk_hits;    /**< programs loaded from disk */
    uint64_t builds;       /**< programs compiled from source */
    uint64_t discarded;    /**< corrupt or foreign disk entries thrown away */
    /** Non-zero: programs (and convolution find results) are loaded from and
        stored in `dir`. Zero: they stay in memory, and `disk_reason` says
        why. Decided when the context opens. */
    int disk_enabled;
    /** Why the disk cache is off, e.g. "disabled by the options" or
        "KILN_CACHE_DIR '/x' is a FIFO, not a directory"; while it is on, why `dir`
        could not be listed just now (disk_entries and disk_bytes are then
        0); "" otherwise. */
    char disk_reason[256];
    /** Stores to `dir` that failed since the context opened. Each leaves its
        program in memory; the first is logged as a warning. */
    uint64_t disk_failures;
} kiln_cache_info;

/**
 * Program cache location, state, size and this context's hit/miss counters.
 * A disk cache that is off or fails is reported in `info`, never as an error.
 * @return KILN_ERROR_INVALID_ARGUMENT for a NULL ctx or info; else success.
 */
KILN_API kiln_status kiln_context_get_cache_info(const kiln_context *ctx, kiln_cache_info *info);

/* ------------------------------------------------------------------------ */
/* Buffers                                                                  */
/* ------------------------------------------------------------------------ */

/**
 * Device memory. Belongs to one context; destroy before the context.
 * Different buffers may be used from different threads at once, and several
 * calls may read one buffer at once (as an input, or kiln_buffer_read); a
 * call that writes a buffer (an output, kiln_buffer_write,
 * kiln_buffer_fill_f32) must not overlap another call on that buffer.
 */
typedef struct kiln_buffer kiln_buffer;

/**
 * Allocate `size` bytes of device memory. On an OpenCL CPU device a buffer
 * of half a large page (1 MiB on x86-64) or more lies in host memory kiln
 * maps at a large page's boundary, rounded up to whole large pages advised
 * as such (KILN_LARGE_PAGES=0: the driver's memory; docs/pocl.md).
 * @param out  receives a new buffer owned by the caller (kiln_buffer_destroy).
 * @return KILN_ERROR_INVALID_ARGUMENT for size 0 or NULL pointers;
 *         KILN_ERROR_OUT_OF_MEMORY if the device cannot hold it.
 */
KILN_API kiln_status kiln_buffer_create(kiln_context *ctx, size_t size, kiln_buffer **out);

/** Release a buffer (a wrapped cl_mem is released, not freed), once no call
    on any thread uses it. NULL is ignored. */
KILN_API void kiln_buffer_destroy(kiln_buffer *buf);

/** Size in bytes (0 for NULL). */
KILN_API size_t kiln_buffer_size(const kiln_buffer *buf);

/**
 * Copy `size` bytes from host memory into the buffer at byte `offset`;
 * returns when the copy is complete.
 * @return KILN_ERROR_OUT_OF_BOUNDS if offset + size exceeds the buffer.
 */
KILN_API kiln_status kiln_buffer_write(kiln_buffer *buf, size_t offset, size_t size, const void *src);

/** Copy `size` bytes at byte `offset` into host memory; blocking, after the
    work queued on the context before it (README, "Running a network").
    @return KILN_ERROR_OUT_OF_BOUNDS if offset + size exceeds the buffer. */
KILN_API kiln_status kiln_buffer_read(const kiln_buffer *buf, size_t offset, size_t size, void *dst);

/**
 * Set `count` floats starting at float index `first` to `value` on the
 * device (used to poison outputs and clear accumulators).
 * @return KILN_ERROR_OUT_OF_BOUNDS if the range exceeds the buffer.
 */
KILN_API kiln_status kiln_buffer_fill_f32(kiln_buffer *buf, size_t first, size_t count, float value);

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

/** Completion of queued work. Returned by asynchronous calls on request; it
    completes when its call's work, and all work queued on the context before
    it, has. It may be waited on and destroyed from any thread, not only the
    one whose call returned it. */
typedef struct kiln_event kiln_event;

/** Block until the work behind `event` has finished. INVALID_ARGUMENT for NULL. */
KILN_API kiln_status kiln_event_wait(kiln_event *event);

/** Release an event (the work it tracks is not affected), once, when no
    thread waits on it. NULL is ignored. */
KILN_API void kiln_event_destroy(kiln_event *event);

/* ------------------------------------------------------------------------ */
/* GEMM: C = alpha * op(A) * op(B) + beta * C                               */
/* ------------------------------------------------------------------------ */

typedef enum kiln_layout { KILN_ROW_MAJOR = 0, KILN_COL_MAJOR = 1 } kiln_layout;
typedef enum kiln_transpose { KILN_NO_TRANS = 0, KILN_TRANS = 1 } kiln_transpose;

/** Storage type of tensors. Sums are always fp32; the products of fp16 and
    bf16 values are exact in fp32, whatever unit computes them. */
typedef enum kiln_dtype {
    KILN_F32 = 0,
    KILN_F16 = 1, /**< IEEE binary16 */
    KILN_BF16 = 2 /**< bfloat16: fp32's exponent, 8 significant bits; stored
                       by rounding to nearest even, NaN kept NaN */
} kiln_dtype;

/**
 * Arithmetic a caller allows for fp32 storage (fp16 and bf16 storage are
 * unaffected: their products are exact in fp32 sums anyway).
 * - KILN_MATH_FP32: exact fp32 multiplies, the default everywhere.
 * - KILN_MATH_TF32: the operands of the multiplies may be rounded to TF32
 *   (10 explicit significand bits, about 2^-11 relative) where a backend has
 *   tensor cores for it; sums stay fp32. A permission, not a demand: kernels
 *   without TF32 units (every OpenCL kernel) compute exactly as with FP32,
 *   which is at least as precise. Today the GEMM's tensor-core families
 *   take it (KILN_GEMM_MMA on the CUDA backend from compute capability 8.0,
 *   rounding to nearest; KILN_GEMM_WGMMA on 9.0, dropping the low bits):
 *   AUTO chooses them there for fp32 storage with TF32 allowed.
 */
typedef enum kiln_math { KILN_MATH_FP32 = 0, KILN_MATH_TF32 = 1 } kiln_math;

/**
 * Kernel family of a GEMM. AUTO lets the device profile choose: SMALLM when
 * C has at most select.gemm_smallm_max rows (m; n for a column-major GEMM;
 * 16 on the CPU profiles, 0 on the GPU ones but nvidia-hopper's 1), else
 * DIRECT when m*n*k is at most select.gemm_direct_max, else the profile's
 * select.gemm_route. Where a family runs, it runs every valid descriptor;
 * which families run where is kiln_gemm_plan_create()'s list (CPU and
 * SMALLM not on the CUDA backend, CLBLAST fp32 on OpenCL only, MMA and
 * WGMMA on their NVIDIA devices only).
 */
typedef enum kiln_gemm_algo {
    KILN_GEMM_AUTO = 0,
    KILN_GEMM_CPU = 1,     /**< packed panels and a register micro-tile (CPUs) */
    KILN_GEMM_TILED = 2,   /**< local-memory tiles, register blocking (GPUs) */
    KILN_GEMM_DIRECT = 3,  /**< no packing or padding: small problems */
    KILN_GEMM_CLBLAST = 4, /**< CLBlast's SGEMM, where kiln was built with it */
    KILN_GEMM_SMALLM = 5,  /**< operands read in place, a few rows of C per
                                work-item: matrix-vector-like products (CPUs) */
    KILN_GEMM_MMA = 6,     /**< tensor cores (mma.sync), fp16 storage (7.5 and
                                newer) or bf16 (8.0 and newer): the CUDA
                                backend; the products are exact in its fp32
                                sums. fp32 storage where math is
                                KILN_MATH_TF32 (8.0 and newer): TF32
                                multiplies, fp32 sums */
    KILN_GEMM_WGMMA = 7    /**< Hopper's warpgroup tensor cores (wgmma), fp16
                                or bf16 storage, compute capability 9.0: the
                                CUDA backend; as exact as MMA. fp32 storage
                                where math is KILN_MATH_TF32: TF32
                                multiplies, fp32 sums */
} kiln_gemm_algo;

/**
 * A GEMM problem: op(A) is m x k, op(B) is k x n, C is m x n, in `layout`,
 * repeated `batch` times with per-operand strides between batch items.
 * Leading dimensions and strides count elements. Fill it with
 * kiln_gemm_desc_init() and change what differs.
 */
typedef struct kiln_gemm_desc {
    kiln_layout layout;
    kiln_transpose trans_a, trans_b;
    kiln_dtype dtype;
    size_t m, n, k;
    size_t lda, ldb, ldc;                /**< at least the stored rows' length */
    size_t batch;                        /**< >= 1 */
    size_t stride_a, stride_b, stride_c; /**< elements between batch items;
                                          0 repeats the operand (not for C) */
    kiln_gemm_algo algo;
    kiln_math math; /**< what fp32 storage allows (kiln_math) */
} kiln_gemm_desc;

/** Describe one fp32 GEMM with tight leading dimensions and strides, batch 1,
    algorithm AUTO, exact fp32 arithmetic. */
KILN_API void kiln_gemm_desc_init(kiln_gemm_desc *desc, kiln_layout layout, kiln_transpose trans_a,
                                  kiln_transpose trans_b, size_t m, size_t n, size_t k);

/** A GEMM prepared once (kernel chosen and compiled, workspace allocated) and
    executed many times. Not for concurrent use from several threads: one
    thread at a time, which may change (created on one thread, executed and
    destroyed on another). Different plans, on one context too, may be
    created, executed and destroyed at once. */
typedef struct kiln_gemm_plan kiln_gemm_plan;

/**
 * Prepare a GEMM on a context.
 * @param out  receives a new plan, owned by the caller (kiln_gemm_plan_destroy).
 * Batch items of A and B may overlap or coincide (any stride, 0 included);
 * those of C may not.
 * @return KILN_ERROR_INVALID_ARGUMENT for NULL pointers, invalid enum values,
 *         zero sizes or batch, leading dimensions smaller than the matrix, or
 *         a C stride that makes batch items overlap (0 with batch > 1
 *         included); KILN_ERROR_UNSUPPORTED for m, n, k or a leading dimension
 *         above 2^31 - 1, for KILN_GEMM_CLBLAST in a build without CLBlast, on
 *         a CUDA context or with 16-bit storage (the CLBlast route is fp32
 *         only), for KILN_GEMM_CPU and KILN_GEMM_SMALLM on the CUDA backend
 *         (their kernels use OpenCL's vector syntax), for KILN_GEMM_MMA and
 *         KILN_GEMM_WGMMA off their backend and devices or for fp32 storage
 *         with math KILN_MATH_FP32; KILN_ERROR_BUILD if a kernel fails to
 *         compile.
 */
KILN_API kiln_status kiln_gemm_plan_create(kiln_context *ctx, const kiln_gemm_desc *desc, kiln_gemm_plan **out);

/**
 * Queue the GEMM on the context's queue. A, B and C start at element offsets
 * offset_a, offset_b, offset_c of their buffers. With beta == 0, C is only
 * written, never read (NaN in C does not leak). A and B are read whatever
 * alpha is (alpha = 0 does not skip them). A buffer needs to reach only the
 * last element of the last batch item (no padding after the last row).
 * @param event  NULL, or receives an event for the caller to wait on and destroy.
 * @return KILN_ERROR_INVALID_ARGUMENT for a NULL plan or buffer, a buffer of
 *         another context, or C in the same buffer as A or B (even at a
 *         disjoint offset); KILN_ERROR_OUT_OF_BOUNDS if a buffer is too small
 *         for its offset, leading dimension, strides and batch. Nothing is
 *         queued on failure.
 */
KILN_API kiln_status kiln_gemm_plan_execute(kiln_gemm_plan *plan, float alpha, const kiln_buffer *a, size_t offset_a,
                                            const kiln_buffer *b, size_t offset_b, float beta, kiln_buffer *c,
                                            size_t offset_c, kiln_event **event);

/** What a plan chose. */
typedef struct kiln_gemm_plan_info {
    kiln_gemm_algo algo;    /**< the family chosen (never AUTO) */
    char family[16];        /**< "cpu", "tiled", "direct", "clblast", "smallm", "mma" or "wgmma" */
    char kernel[64];        /**< kernel name, e.g. "gemm_f32_cpu_6x32" */
    char params[256];       /**< its parameters, "MR=6 NR=32 ..." */
    char param_set[48];     /**< the profile parameter set they came from: "<group>:<set>", e.g.
                                 "gemm.tiled:default" or "gemm.tiled:skinny" ("" if none) */
    char profile[64];       /**< the profile that supplied them */
    char reason[128];       /**< why this family */
    size_t workspace_bytes; /**< device memory the plan holds */
} kiln_gemm_plan_info;

/** Fill `info` with what the plan chose. INVALID_ARGUMENT for NULL pointers. */
KILN_API kiln_status kiln_gemm_plan_describe(const kiln_gemm_plan *plan, kiln_gemm_plan_info *info);

/** Release a plan (work already queued completes). NULL is ignored. */
KILN_API void kiln_gemm_plan_destroy(kiln_gemm_plan *plan);

/** One-shot GEMM: create a plan, execute it, release it. Repeated calls of
    one shape should keep a plan instead. Returns what the two calls return. */
KILN_API kiln_status kiln_gemm(kiln_context *ctx, const kiln_gemm_desc *desc, float alpha, const kiln_buffer *a,
                               size_t offset_a, const kiln_buffer *b, size_t offset_b, float beta, kiln_buffer *c,
                               size_t offset_c, kiln_event **event);

#ifdef __cplusplus
}
#endif

#include "kiln_attention.h"
#include "kiln_nn.h"

#endif /* KILN_KILN_H */
