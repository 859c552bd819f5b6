/*
 * kiln-bench peers: OpenBLAS (cblas_sgemm on the host, its default thread
 * count) and CLBlast (CLBlastSgemm on kiln's own OpenCL queue and buffers).
 */
#include <stdio.h>
#include <string.h>

#include "peers.h"

#ifdef KILN_BENCH_WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_BENCH_WITH_CLBLAST
#include <clblast_c.h>
#endif

static const char *const peer_names[BENCH_PEER_COUNT] = {"clblast", "openblas"};

const char *bench_peer_name(enum bench_peer peer) { return peer < BENCH_PEER_COUNT ? peer_names[peer] : "?"; }

int bench_peer_built(enum bench_peer peer)
{
    switch (peer) {
#ifdef KILN_BENCH_WITH_CLBLAST
    case BENCH_PEER_CLBLAST:
        return 1;
#endif
#ifdef KILN_BENCH_WITH_OPENBLAS
    case BENCH_PEER_OPENBLAS:
        return 1;
#endif
    default:
        return 0;
    }
}

int bench_peer_on_device(enum bench_peer peer) { return peer == BENCH_PEER_CLBLAST; }

int bench_peer_parse(const char *list, unsigned *mask)
{
    *mask = 0;
    if (strcmp(list, "none") == 0)
        return 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < BENCH_PEER_COUNT; i++)
            if (strlen(peer_names[i]) == len && strncmp(p, peer_names[i], len) == 0) {
                *mask |= 1u << i;
                found = 1;
            }
        if (!found)
            return -1;
        p += len + (p[len] == ',');
    }
    return 0;
}

void bench_peer_routine(enum bench_peer peer, const kiln_gemm_desc *desc, char *buf, size_t size)
{
    if (peer == BENCH_PEER_CLBLAST)
        snprintf(buf, size, "%s", desc->batch > 1 ? "CLBlastSgemmStridedBatched" : "CLBlastSgemm");
    else if (desc->batch > 1)
        snprintf(buf, size, "cblas_sgemm x%zu", desc->batch);
    else
        snprintf(buf, size, "cblas_sgemm");
}

int bench_peer_threads(enum bench_peer peer)
{
#ifdef KILN_BENCH_WITH_OPENBLAS
    if (peer == BENCH_PEER_OPENBLAS)
        return openblas_get_num_threads();
#endif
    (void)peer;
    return 0;
}

void bench_peer_print_config(FILE *out, unsigned mask)
{
    for (int p = 0; p < BENCH_PEER_COUNT; p++) {
        if (!(mask >> p & 1u))
            continue;
        if (!bench_peer_built((enum bench_peer)p))
            fprintf(out, "%s: not built\n", peer_names[p]);
        else if (p == BENCH_PEER_CLBLAST)
            fprintf(out, "clblast: on kiln's OpenCL queue and buffers\n");
#ifdef KILN_BENCH_WITH_OPENBLAS
        else
            fprintf(out, "openblas: %s, %d threads\n", openblas_get_config(), openblas_get_num_threads());
#endif
    }
}

#ifdef KILN_BENCH_WITH_OPENBLAS
static void openblas_gemm(const struct bench_peer_gemm *g)
{
    const kiln_gemm_desc *d = g->desc;
    /* Batch items one after another: OpenBLAS 0.3.21 has no batched SGEMM. */
    for (size_t i = 0; i < d->batch; i++)
        cblas_sgemm(d->layout == KILN_COL_MAJOR ? CblasColMajor : CblasRowMajor,
                    d->trans_a == KILN_TRANS ? CblasTrans : CblasNoTrans,
                    d->trans_b == KILN_TRANS ? CblasTrans : CblasNoTrans, (blasint)d->m, (blasint)d->n, (blasint)d->k,
                    1.0f, g->a + i * d->stride_a, (blasint)d->lda, g->b + i * d->stride_b, (blasint)d->ldb, 0.0f,
                    g->c + i * d->stride_c, (blasint)d->ldc);
}
#endif

#ifdef KILN_BENCH_WITH_CLBLAST
static int clblast_gemm(const struct bench_peer_gemm *g, char *err, size_t err_size)
{
    const kiln_gemm_desc *d = g->desc;
    CLBlastLayout layout = d->layout == KILN_COL_MAJOR ? CLBlastLayoutColMajor : CLBlastLayoutRowMajor;
    CLBlastTranspose ta = d->trans_a == KILN_TRANS ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose tb = d->trans_b == KILN_TRANS ? CLBlastTransposeYes : CLBlastTransposeNo;
    cl_command_queue queue = g->queue;
    CLBlastStatusCode st;
    if (d->batch > 1)
        st = CLBlastSgemmStridedBatched(layout, ta, tb, d->m, d->n, d->k, 1.0f, g->a_mem, 0, d->lda, d->stride_a,
                                        g->b_mem, 0, d->ldb, d->stride_b, 0.0f, g->c_mem, 0, d->ldc, d->stride_c,
                                        d->batch, &queue, NULL);
    else
        st = CLBlastSgemm(layout, ta, tb, d->m, d->n, d->k, 1.0f, g->a_mem, 0, d->lda, g->b_mem, 0, d->ldb, 0.0f,
                          g->c_mem, 0, d->ldc, &queue, NULL);
    if (st != CLBlastSuccess) {
        snprintf(err, err_size, "CLBlast status %d", (int)st);
        return 1;
    }
    cl_int cl = clFinish(queue);
    if (cl != CL_SUCCESS) {
        snprintf(err, err_size, "clFinish: OpenCL error %d", (int)cl);
        return 1;
    }
    return 0;
}
#endif

int bench_peer_gemm(enum bench_peer peer, const struct bench_peer_gemm *g, char *err, size_t err_size)
{
    switch (peer) {
#ifdef KILN_BENCH_WITH_CLBLAST
    case BENCH_PEER_CLBLAST:
        return clblast_gemm(g, err, err_size);
#endif
#ifdef KILN_BENCH_WITH_OPENBLAS
    case BENCH_PEER_OPENBLAS:
        openblas_gemm(g);
        return 0;
#endif
    default:
        (void)g;
        snprintf(err, err_size, "not built");
        return 1;
    }
}
