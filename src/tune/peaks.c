/* Measured fp32 peak and memory bandwidth; see peaks.h. */
#include "tune/peaks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/diag.h"
#include "jit/args.h"
#include "jit/program_cache.h"
#include "ops/find.h"
#include "profiles/profile.h"
#include "util/options.h"

/* Each multiply-add kernel of cl/util/peak.cl and its vector width: a
   work-item's round is FMA_CHAINS (PEAK_CHAINS there) multiply-adds of
   `lanes` floats, and it stores the chains' converged sum, FMA_CHAINS,
   when right. Backends without OpenCL's vector syntax run the one-lane
   kernel. */
struct fma_kernel {
    const char *name;
    int lanes;
};
static const struct fma_kernel vector_fma[] = {{"util_peak_fma", 8}, {"util_peak_fma16", 16}},
                               lane_fma[] = {{"util_peak_fma1", 1}};
#define FMA_CHAINS 8
#define FMA_CONVERGED ((float)FMA_CHAINS)
/* A launch this long or longer is timed without the launch cost mattering. */
#define TARGET_MS 20.0
#define MAX_ITERS (1 << 22)
/* The copy's buffers: 256 MiB each, or twice the cache in front of the
   device's memory where that is larger (a server CPU's last level reaches
   hundreds of MiB: 260 on an Emerald Rapids Xeon), so that the copy and the
   read stream from memory, not from that cache. */
#define COPY_MAX_BYTES ((size_t)256 << 20)
#define COPY_MIN_BYTES ((size_t)1 << 20)

struct launch {
    kiln_context *ctx;
    struct kiln_kernel *kernel;
    struct kiln_args args;
    size_t global, local;
};

static kiln_status run_launch(void *cookie)
{
    struct launch *l = cookie;
    return kiln_kernel_launch(l->ctx, l->kernel, &l->args, 1, &l->global, &l->local, 0, NULL);
}

static kiln_status kernel_of(kiln_context *ctx, const char *name, struct kiln_kernel **kernel)
{
    const struct kiln_param_util *util = &kiln_profile_params(ctx->profile)->util;
    struct kiln_options options = {0};
    kiln_profile_defines(&options, KILN_GROUP_util, util);
    kiln_options_only(&options, &name, 1);
    kiln_status st = kiln_options_status(&options, "kiln_measure_peaks");
    if (st == KILN_SUCCESS)
        st = kiln_kernel_get(ctx, "util/peak", kiln_options_text(&options), name, kernel);
    kiln_options_free(&options);
    return st;
}

/* One multiply-add kernel `k`, timed with launches grown to TARGET_MS. */
static kiln_status measure_fma_kernel(kiln_context *ctx, const struct fma_kernel *k, double *gflops, double *ms_out,
                                      float *checksum)
{
    struct launch l = {.ctx = ctx};
    l.local = (size_t)kiln_profile_params(ctx->profile)->util.wg;
    /* Enough work-groups for every compute unit several times over. */
    l.global = l.local * 16 * (ctx->desc.compute_units ? ctx->desc.compute_units : 1);
    kiln_buffer *result = NULL;
    kiln_status st = kernel_of(ctx, k->name, &l.kernel);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, l.global * sizeof(float), &result);
    int iters = 256;
    double ms = 0.0;
    while (st == KILN_SUCCESS) {
        l.args = (struct kiln_args){0};
        kiln_args_buffer(&l.args, result->handle);
        kiln_args_int(&l.args, iters);
        st = kiln_find_median(ctx, run_launch, &l, &ms);
        if (st != KILN_SUCCESS || ms >= TARGET_MS || iters >= MAX_ITERS)
            break;
        /* Grow towards the target in one step once a time is measurable. */
        double grow = ms > 1.0 ? ceil(TARGET_MS / ms) : 16.0;
        iters = (int)fmin((double)MAX_ITERS, iters * fmax(2.0, grow));
    }
    float first = 0.0f;
    if (st == KILN_SUCCESS)
        st = kiln_buffer_read(result, 0, sizeof first, &first);
    kiln_buffer_destroy(result);
    if (st != KILN_SUCCESS)
        return st;
    /* The chains converge to 1 from 0..0.875 (0.999^256 leaves at most 0.77
       of the start's distance, far less after more rounds). */
    if (!(first > 0.6f * FMA_CONVERGED && first <= FMA_CONVERGED * 1.001f))
        return kiln_error(KILN_ERROR_DEVICE, "kiln_measure_peaks: %s computed %g, not about %g", k->name, (double)first,
                          (double)FMA_CONVERGED);
    *gflops = 2.0 * FMA_CHAINS * k->lanes * iters * (double)l.global / (ms * 1e6);
    *ms_out = ms;
    *checksum = first;
    return KILN_SUCCESS;
}

/* The fastest of the multiply-add kernels. */
static kiln_status measure_fma(kiln_context *ctx, struct kiln_peaks *out)
{
    const struct fma_kernel *kernels = ctx->vector_kernels ? vector_fma : lane_fma;
    const size_t count = ctx->vector_kernels ? sizeof vector_fma / sizeof *vector_fma : 1;
    for (size_t k = 0; k < count; k++) {
        double gflops = 0, ms = 0;
        float checksum = 0;
        kiln_status st = measure_fma_kernel(ctx, &kernels[k], &gflops, &ms, &checksum);
        if (st != KILN_SUCCESS)
            return st;
        if (gflops > out->gflops) {
            out->gflops = gflops;
            out->fma_ms = ms;
            out->fma_checksum = checksum;
            out->fma_lanes = kernels[k].lanes;
        }
    }
    return KILN_SUCCESS;
}

/* The read's launch over n float4s of src, checking the sums against the
   values (all 1): on a CPU device 16 work-items per compute unit, one a
   work-group, each summing a contiguous block; elsewhere 16 work-groups of
   util.wg per compute unit, neighbours reading neighbouring float4s. */
static kiln_status measure_read(kiln_context *ctx, kiln_buffer *src, size_t n, double *ms)
{
    struct launch l = {.ctx = ctx};
    const size_t units = ctx->desc.compute_units ? ctx->desc.compute_units : 1;
    const int cpu = ctx->desc.type == KILN_DEVICE_CPU;
    l.local = cpu ? 1 : (size_t)kiln_profile_params(ctx->profile)->util.wg;
    l.global = l.local * 16 * units;
    const size_t span = cpu ? (n + l.global - 1) / l.global : 1;
    kiln_buffer *sums = NULL;
    kiln_status st = kernel_of(ctx, "util_read_f32x4", &l.kernel);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, l.global * sizeof(float), &sums);
    if (st == KILN_SUCCESS) {
        kiln_args_buffer(&l.args, src->handle);
        kiln_args_ulong(&l.args, n);
        kiln_args_ulong(&l.args, span);
        kiln_args_ulong(&l.args, span * l.global); /* stride: a run of every work-item's span */
        kiln_args_buffer(&l.args, sums->handle);
        st = kiln_find_median(ctx, run_launch, &l, ms);
    }
    float *got = st == KILN_SUCCESS ? malloc(l.global * sizeof *got) : NULL;
    if (st == KILN_SUCCESS && !got)
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_measure_peaks: the read's %zu sums", l.global);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_read(sums, 0, l.global * sizeof *got, got);
    double total = 0.0;
    for (size_t i = 0; st == KILN_SUCCESS && i < l.global; i++)
        total += got[i];
    free(got);
    kiln_buffer_destroy(sums);
    if (st == KILN_SUCCESS && total != 4.0 * (double)n)
        st = kiln_error(KILN_ERROR_DEVICE, "kiln_measure_peaks: the read of %zu float4s of 1 summed to %.17g, not %zu",
                        n, total, 4 * n);
    return st;
}

/* A copy between two buffers as large as the device allows (at most
   COPY_MAX_BYTES or twice its cache), then a read of the first. */
static kiln_status measure_memory(kiln_context *ctx, struct kiln_peaks *out)
{
    size_t bytes = COPY_MAX_BYTES;
    if (ctx->desc.cache_bytes > bytes / 2 && ctx->desc.cache_bytes < SIZE_MAX / 4)
        bytes = (size_t)ctx->desc.cache_bytes * 2;
    if (ctx->desc.max_alloc_bytes && bytes > ctx->desc.max_alloc_bytes / 2)
        bytes = (size_t)(ctx->desc.max_alloc_bytes / 2);
    if (ctx->desc.global_mem_bytes && bytes > ctx->desc.global_mem_bytes / 8)
        bytes = (size_t)(ctx->desc.global_mem_bytes / 8);
    bytes &= ~(size_t)15;
    if (bytes < COPY_MIN_BYTES)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln_measure_peaks: the device cannot hold two %zu-byte buffers",
                          COPY_MIN_BYTES);
    struct launch l = {.ctx = ctx};
    l.local = (size_t)kiln_profile_params(ctx->profile)->util.wg;
    const size_t n = bytes / 16;
    l.global = (n + l.local - 1) / l.local * l.local;
    kiln_buffer *src = NULL, *dst = NULL;
    kiln_status st = kernel_of(ctx, "util_copy_f32x4", &l.kernel);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, bytes, &src);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, bytes, &dst);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_fill_f32(src, 0, bytes / 4, 1.0f);
    double ms = 0.0, read_ms = 0.0;
    if (st == KILN_SUCCESS) {
        kiln_args_buffer(&l.args, src->handle);
        kiln_args_buffer(&l.args, dst->handle);
        kiln_args_ulong(&l.args, n);
        st = kiln_find_median(ctx, run_launch, &l, &ms);
    }
    kiln_buffer_destroy(dst);
    if (st == KILN_SUCCESS)
        st = measure_read(ctx, src, n, &read_ms);
    kiln_buffer_destroy(src);
    if (st != KILN_SUCCESS)
        return st;
    out->copy_ms = ms;
    out->read_ms = read_ms;
    out->copy_bytes = bytes;
    out->copy_gbps = 2.0 * (double)bytes / (ms * 1e6);
    out->read_gbps = (double)bytes / (read_ms * 1e6);
    out->gbps = out->copy_gbps > out->read_gbps ? out->copy_gbps : out->read_gbps;
    return KILN_SUCCESS;
}

static kiln_status measure(kiln_context *ctx, int fma, struct kiln_peaks *out)
{
    if (!ctx || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_measure_peaks: NULL argument");
    struct kiln_peaks p;
    memset(&p, 0, sizeof p);
    kiln_status st = fma ? measure_fma(ctx, &p) : KILN_SUCCESS;
    if (st == KILN_SUCCESS)
        st = measure_memory(ctx, &p);
    if (st == KILN_SUCCESS)
        *out = p;
    return st;
}

kiln_status kiln_measure_peaks(kiln_context *ctx, struct kiln_peaks *out) { return measure(ctx, 1, out); }

kiln_status kiln_measure_bandwidth(kiln_context *ctx, struct kiln_peaks *out) { return measure(ctx, 0, out); }
