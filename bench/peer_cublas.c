/*
 * The cuBLAS peer of kiln-bench gemm and quick, for a context on the CUDA
 * backend: cuBLAS (libcublas.so.13, .12 or .11) loaded at run time, found
 * where kiln finds NVRTC (src/cuda/cuda_api.c), never linked. It runs on
 * kiln's stream and kiln's own operands, in their storage type: fp32
 * (cublasGemmStridedBatchedEx with exact fp32 compute, or TF32 where the
 * descriptor allows it), fp16 and bf16 (their multiplies, fp32 sums), as
 * kiln's tensor-core GEMM computes.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_api.h"
#include "kiln/kiln_cuda.h"
#include "peers.h"

typedef struct cublasContext *cublasHandle_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_PEDANTIC = 69, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum { CUBLAS_GEMM_DEFAULT = -1 };

static struct {
    int tried;
    void *lib;
    char path[512], why[600];
    cublasHandle_t handle;
    int (*create)(cublasHandle_t *handle);
    int (*set_stream)(cublasHandle_t handle, CUstream stream);
    int (*gemm)(cublasHandle_t handle, int transa, int transb, int m, int n, int k, const void *alpha, const void *a,
                int a_type, int lda, long long stride_a, const void *b, int b_type, int ldb, long long stride_b,
                const void *beta, void *c, int c_type, int ldc, long long stride_c, int batch, int compute, int algo);
} cublas;

/* Load cuBLAS and make a handle once; 0 with `why` set when it cannot. */
static int load(void)
{
    if (cublas.tried)
        return cublas.handle != NULL;
    cublas.tried = 1;
    static const char *const files[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", NULL};
    cublas.lib = kiln_cuda_open_toolkit_library(files, cublas.path, sizeof cublas.path);
    if (!cublas.lib) {
        snprintf(cublas.why, sizeof cublas.why, "cuBLAS not found (libcublas.so.13, .12 or .11)");
        return 0;
    }
    *(void **)&cublas.create = dlsym(cublas.lib, "cublasCreate_v2");
    *(void **)&cublas.set_stream = dlsym(cublas.lib, "cublasSetStream_v2");
    *(void **)&cublas.gemm = dlsym(cublas.lib, "cublasGemmStridedBatchedEx");
    int st = -1;
    if (!cublas.create || !cublas.set_stream || !cublas.gemm)
        snprintf(cublas.why, sizeof cublas.why,
                 "%.400s lacks cublasCreate_v2, cublasSetStream_v2 or "
                 "cublasGemmStridedBatchedEx",
                 cublas.path);
    else if ((st = cublas.create(&cublas.handle)) != 0)
        snprintf(cublas.why, sizeof cublas.why, "cublasCreate_v2 returned %d", st);
    if (!cublas.handle) {
        dlclose(cublas.lib);
        cublas.lib = NULL;
    }
    return cublas.handle != NULL;
}

const char *bench_peer_cublas_status(void)
{
    static char line[700];
    if (!load())
        snprintf(line, sizeof line, "cublas: %s", cublas.why);
    else
        snprintf(line, sizeof line, "cublas: %s, on kiln's CUDA stream and buffers (CUDA contexts only)", cublas.path);
    return line;
}

int bench_peer_cublas_gemm(const struct bench_peer_gemm *g, char *err, size_t err_size)
{
    CUdevice device;
    CUstream stream;
    if (!g->ctx || kiln_context_get_cuda(g->ctx, &device, &stream) != KILN_SUCCESS) {
        snprintf(err, err_size, "not applicable: kiln does not run on the CUDA backend here");
        return 1;
    }
    if (!load()) {
        snprintf(err, err_size, "%s", cublas.why);
        return 1;
    }
    const kiln_gemm_desc *d = g->desc;
    const int type = d->dtype == KILN_F16 ? CUDA_R_16F : d->dtype == KILN_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const int compute = d->dtype != KILN_F32        ? CUBLAS_COMPUTE_32F
                        : d->math == KILN_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                    : CUBLAS_COMPUTE_32F_PEDANTIC;
    const CUdeviceptr a = kiln_buffer_get_cuda(g->ka), b = kiln_buffer_get_cuda(g->kb), c = kiln_buffer_get_cuda(g->kc);
    const float alpha = 1.0f, beta = 0.0f;
    /* cuBLAS is column-major: a row-major C = op(A) op(B) is the
       column-major C^T = op(B)^T op(A)^T, the operands swapped. */
    const int row = d->layout == KILN_ROW_MAJOR;
    const int ta = d->trans_a == KILN_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int tb = d->trans_b == KILN_TRANS ? CUBLAS_OP_T : CUBLAS_OP_N;
    int st = cublas.set_stream(cublas.handle, stream);
    if (st == 0 && row)
        st = cublas.gemm(cublas.handle, tb, ta, (int)d->n, (int)d->m, (int)d->k, &alpha, (const void *)b, type,
                         (int)d->ldb, (long long)d->stride_b, (const void *)a, type, (int)d->lda,
                         (long long)d->stride_a, &beta, (void *)c, type, (int)d->ldc, (long long)d->stride_c,
                         (int)d->batch, compute, CUBLAS_GEMM_DEFAULT);
    else if (st == 0)
        st = cublas.gemm(cublas.handle, ta, tb, (int)d->m, (int)d->n, (int)d->k, &alpha, (const void *)a, type,
                         (int)d->lda, (long long)d->stride_a, (const void *)b, type, (int)d->ldb,
                         (long long)d->stride_b, &beta, (void *)c, type, (int)d->ldc, (long long)d->stride_c,
                         (int)d->batch, compute, CUBLAS_GEMM_DEFAULT);
    if (st != 0) {
        snprintf(err, err_size, "cublasGemmStridedBatchedEx returned %d", st);
        return 1;
    }
    const kiln_status done = kiln_context_finish(g->ctx); /* the same stream */
    if (done != KILN_SUCCESS) {
        snprintf(err, err_size, "%s", kiln_status_string(done));
        return 1;
    }
    return 0;
}
