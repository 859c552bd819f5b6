/*
 * kiln-bench attention's host peer: three-step attention with OpenBLAS's
 * SGEMM and a C softmax, per (batch item, head). The softmax subtracts the
 * row maximum (so large logits do not overflow) and runs its rows in
 * parallel with OpenMP where kiln-bench links it, as OpenBLAS runs its SGEMM
 * on all cores.
 */
#include <math.h>
#include <stdio.h>

#include "peers.h"

#ifdef KILN_BENCH_WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_BENCH_WITH_OPENMP
#include <omp.h>
#endif

int bench_peer_attention_built(void)
{
#ifdef KILN_BENCH_WITH_OPENBLAS
    return 1;
#else
    return 0;
#endif
}

static int softmax_threads(void)
{
#ifdef KILN_BENCH_WITH_OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void bench_peer_attention_routine(char *buf, size_t size)
{
    snprintf(buf, size, "sgemm + C softmax (%d thr) + sgemm", softmax_threads());
}

#ifdef KILN_BENCH_WITH_OPENBLAS
/* Softmax of each row of s (rows x cols) in place; with causal masking row i
   sees the keys j <= i + offset, the others become 0. */
static void softmax_rows(float *s, long rows, long cols, int causal, long offset)
{
#ifdef KILN_BENCH_WITH_OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (long i = 0; i < rows; i++) {
        float *row = s + i * cols;
        long lim = causal ? i + offset + 1 : cols;
        lim = lim < 0 ? 0 : lim > cols ? cols : lim;
        float top = -INFINITY, sum = 0.0f;
        for (long j = 0; j < lim; j++)
            top = row[j] > top ? row[j] : top;
        for (long j = 0; j < lim; j++) {
            row[j] = expf(row[j] - top);
            sum += row[j];
        }
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (long j = 0; j < cols; j++)
            row[j] = j < lim ? row[j] * inv : 0.0f;
    }
}
#endif

int bench_peer_attention(const struct bench_peer_attention *a, char *err, size_t err_size)
{
#ifdef KILN_BENCH_WITH_OPENBLAS
    const kiln_attention_desc *d = a->desc;
    const size_t D = d->head_dim, group = d->heads / d->kv_heads;
    const int bshd = d->layout == KILN_BSHD;
    /* Element strides of batch item, head and position (Q and O; K and V). */
    const size_t q_sb = d->seq_q * d->heads * D, q_sh = bshd ? D : d->seq_q * D, q_ss = bshd ? d->heads * D : D;
    const size_t kv_sb = d->seq_kv * d->kv_heads * D, kv_sh = bshd ? D : d->seq_kv * D,
                 kv_ss = bshd ? d->kv_heads * D : D;
    const blasint nq = (blasint)d->seq_q, nk = (blasint)d->seq_kv, dim = (blasint)D;
    for (size_t b = 0; b < d->batch; b++)
        for (size_t h = 0; h < d->heads; h++) {
            const size_t q = b * q_sb + h * q_sh, kv = b * kv_sb + h / group * kv_sh;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nk, dim, d->scale, a->q + q, (blasint)q_ss,
                        a->k + kv, (blasint)kv_ss, 0.0f, a->scores, nk);
            softmax_rows(a->scores, nq, nk, d->causal, (long)nk - (long)nq);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, dim, nk, 1.0f, a->scores, nk, a->v + kv,
                        (blasint)kv_ss, 0.0f, a->o + q, (blasint)q_ss);
        }
    (void)err, (void)err_size;
    return 0;
#else
    (void)a;
    snprintf(err, err_size, "not built");
    return 1;
#endif
}
