/*
 * kiln-bench peers: the libraries kiln is measured against, each compiled in
 * only when CMake found it (KILN_BENCH_WITH_OPENBLAS, KILN_BENCH_WITH_CLBLAST).
 */
#ifndef KILN_BENCH_PEERS_H
#define KILN_BENCH_PEERS_H

#include <stddef.h>
#include <stdio.h>

#include "kiln/kiln_cl.h"

/* In the order they are measured and printed. Device peers come first: OpenBLAS
   leaves its threads spinning for a while after a call. */
enum bench_peer { BENCH_PEER_CLBLAST, BENCH_PEER_OPENBLAS, BENCH_PEER_COUNT };

/* One GEMM as a peer runs it: the layout, transposes, sizes, leading
   dimensions and batch strides of `desc`, on fp32 storage whatever
   desc->dtype says; alpha 1, beta 0. A host peer uses a, b, c; a device peer
   uses the buffers on `queue` (the queue kiln runs on). */
struct bench_peer_gemm {
    const kiln_gemm_desc *desc;
    const float *a, *b;
    float *c;
    cl_command_queue queue;
    cl_mem a_mem, b_mem, c_mem;
};

/* "clblast", "openblas". */
const char *bench_peer_name(enum bench_peer peer);

/* Non-zero when the peer was compiled in. */
int bench_peer_built(enum bench_peer peer);

/* Non-zero when the peer writes c_mem (an OpenCL device) rather than c. */
int bench_peer_on_device(enum bench_peer peer);

/* Parse a comma-separated list of peer names (or "none") into bits
   1u << enum bench_peer. Returns 0, or -1 for an unknown name. */
int bench_peer_parse(const char *list, unsigned *mask);

/* The routine that runs `desc`, e.g. "cblas_sgemm x64" for a batch of 64. */
void bench_peer_routine(enum bench_peer peer, const kiln_gemm_desc *desc, char *buf, size_t size);

/* One line per peer in `mask` on how it runs here ("not built", OpenBLAS's
   build, core and threads, ...). */
void bench_peer_print_config(FILE *out, unsigned mask);

/* Threads the peer computes with; 0 when not applicable or not built. */
int bench_peer_threads(enum bench_peer peer);

/* Run the GEMM once, complete on return. Returns 0, or 1 with `err` filled
   ("not built" when the peer was not compiled in). */
int bench_peer_gemm(enum bench_peer peer, const struct bench_peer_gemm *g, char *err, size_t err_size);

#endif /* KILN_BENCH_PEERS_H */
