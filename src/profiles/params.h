/*
 * The one table of profile parameters. Every group below becomes a C struct
 * (struct kiln_param_<group>, one int or double per field), an entry of the schema
 * that the loader validates against (profile_schema.c), the -D options of
 * the kernels that use it (only fields marked DEF, named <prefix><KEY>) and
 * a section of device_profiles/README.md (the profile tests check it names
 * every field). Host code reads the structs, never a string key.
 *
 * A kernel group belongs to one kernel variant; only that kernel's options
 * come from it, so changing another group's value recompiles nothing else.
 * `select` holds the host's routes and thresholds, never compiler options.
 *
 * Field macro: F(group, key, type, min, max, role, doc) where type is INT,
 * VW (1, 2, 4, 8 or 16), BOOL, NUMBER (a double) or CHOICE (an index into
 * the group's choice list named by max, stored as an int), role DEF (a -D
 * option of the group's kernels) or HOST (read by the host only).
 */
#ifndef KILN_PROFILE_PARAMS_H
#define KILN_PROFILE_PARAMS_H

#include <stddef.h>

/* Choice lists: the strings a CHOICE field accepts, in enum order. */
enum kiln_gemm_route { KILN_ROUTE_TILED, KILN_ROUTE_CPU, KILN_ROUTE_CLBLAST };
#define KILN_GEMM_ROUTES "tiled", "cpu", "clblast"
enum kiln_igemm_route { KILN_IGEMM_CPU, KILN_IGEMM_TILED };
#define KILN_IGEMM_ROUTES "cpu", "tiled"
enum kiln_attention_route { KILN_ATTENTION_ROUTE_CPU, KILN_ATTENTION_ROUTE_FLASH };
#define KILN_ATTENTION_ROUTES "cpu", "flash"
/* In the order of kiln_conv_algo from KILN_CONV_IMPLICIT_GEMM on. */
#define KILN_CONV_ALGOS "implicit-gemm", "winograd-2x2", "winograd-4x4", "direct", "im2col", "gemm-1x1"

#define KILN_FIELDS_device(F)                                                                                          \
    F(device, flops_per_cu_cycle, INT, 1, 1 << 20, HOST,                                                               \
      "fp32 flops per compute unit (as the driver counts them) per clock; FMA = 2")                                    \
    F(device, peak_gbps, NUMBER, 1, 1e6, HOST, "typical memory bandwidth of the family, GB/s")                         \
    F(device, clock_mhz, INT, 0, 100000, HOST,                                                                         \
      "typical sustained clock when the driver reports a base clock; 0 = the reported clock")                          \
    F(device, peak_gflops, NUMBER, 0, 1e9, HOST, "explicit fp32 peak in GFLOP/s when > 0, overriding the computed one")

#define KILN_FIELDS_select(F)                                                                                          \
    F(select, gemm_route, CHOICE, 0, gemm_routes, HOST,                                                                \
      "GEMM family of AUTO for problems past the thresholds below: the tiled kernels, the CPU micro-kernel, or "       \
      "CLBlast (tiled where kiln was built without it)")                                                               \
    F(select, gemm_direct_max, INT, 0, 2147483647, HOST,                                                               \
      "AUTO: GEMMs with M*N*K at or below this use the direct kernel (0: never)")                                      \
    F(select, gemm_smallm_max, INT, 0, 1 << 30, HOST,                                                                  \
      "AUTO: GEMMs whose C has at most this many rows (m; n if column-major) use the small-M kernels (0: never)")      \
    F(select, attention_route, CHOICE, 0, attention_routes, HOST,                                                      \
      "fused attention's kernel: rows in a work-item's vector lanes (attention.fused, for CPUs) or a work-group per "  \
      "block of rows staging keys and values in local memory (attention.flash, for GPUs)")                             \
    F(select, conv_igemm_route, CHOICE, 0, igemm_routes, HOST,                                                         \
      "implicit-GEMM convolution's kernel: the CPU register tile (gemm.cpu) or the tiled GPU kernel "                  \
      "(conv.igemm_tiled)")                                                                                            \
    F(select, conv_algo, CHOICE, 0, conv_algos, HOST,                                                                  \
      "convolution algorithm when the heuristic has no stronger preference")                                           \
    F(select, conv_wino_min_channels, INT, 1, 1 << 30, HOST,                                                           \
      "the heuristic takes Winograd for 3x3 stride 1 when C and K are at least this")                                  \
    F(select, conv_1x1_igemm_min_pixels, INT, 1, 1 << 30, HOST,                                                        \
      "the heuristic takes implicit GEMM over gemm-1x1 for a 1x1 NCHW layer of at least this many output pixels "      \
      "(batch included)")                                                                                              \
    F(select, conv_1x1_direct_min_pixels, INT, 1, 1 << 30, HOST,                                                       \
      "the heuristic takes direct over implicit GEMM for a 1x1 NCHW layer of at least this many output pixels per "    \
      "image where implicit GEMM takes its CPU kernel")

#define KILN_FIELDS_attention_flash(F)                                                                                 \
    F(attention_flash, block_q, INT, 1, 1024, DEF, "query rows per work-group (fewer for decoding)")                   \
    F(attention_flash, block_kv, INT, 1, 1024, DEF, "keys per step, staged in local memory")                           \
    F(attention_flash, wg, INT, 1, 1024, DEF, "work-items per work-group")                                             \
    F(attention_flash, s_rows, INT, 1, 1024, DEF,                                                                      \
      "rows of the scores per work-item (its keys: block_kv / (wg / (block_q / s_rows)))")                             \
    F(attention_flash, o_rows, INT, 1, 1024, DEF,                                                                      \
      "rows of the output per work-item (its head-dimension values: head_dim / (wg / (block_q / o_rows)))")            \
    F(attention_flash, min_wg, INT, 1, 1024, HOST,                                                                     \
      "fewest work-items of a work-group for a problem of few rows (decoding): where halving block_q with wg would "   \
      "take wg below this, block_q is halved alone and the work-items take fewer rows and more keys")

#define KILN_FIELDS_util(F)                                                                                            \
    F(util, wg, INT, 1, 1024, DEF, "work-group size of element-wise utility kernels (fill, copy) and pooling")         \
    F(util, vw, VW, 1, 16, HOST,                                                                                       \
      "pooling: vector width (output columns in NCHW, channels in NHWC); softmax: vectors along a column of "          \
      "contiguous values")

#define KILN_FIELDS_gemm_cpu(F)                                                                                        \
    F(gemm_cpu, mr, INT, 1, 64, HOST, "register micro-tile rows (filters in implicit-GEMM convolution's CPU kernel)")  \
    F(gemm_cpu, nr, INT, 1, 256, HOST,                                                                                 \
      "register micro-tile columns, a multiple of vw (output pixels in implicit-GEMM convolution's CPU kernel)")       \
    F(gemm_cpu, vw, VW, 1, 16, HOST, "SIMD vector width in floats")                                                    \
    F(gemm_cpu, narrow_mr, INT, 0, 64, HOST,                                                                           \
      "rows of a second register tile one vector (vw) wide, taken where a problem's columns fill it better (0: none)") \
    F(gemm_cpu, flip_mr, INT, 0, 64, HOST,                                                                             \
      "rows of the flipped tile reading B in place at most (C^T's rows: a 1x1 convolution's pixels), balanced over "   \
      "its panels as mr's are (0: mr)")                                                                                \
    F(gemm_cpu, flip_nr, INT, 0, 256, HOST,                                                                            \
      "columns of the flipped tile reading B in place (C^T's columns: a 1x1 convolution's filters), a multiple of "    \
      "vw (0: nr); where set, that tile is flip_mr (else mr) x flip_nr, and so is implicit GEMM's row variant's "      \
      "(pixels by filters), unless the tile taken otherwise pads 5 percent less")                                      \
    F(gemm_cpu, in_place_l2, INT, 0, 1000, HOST,                                                                       \
      "the flipped tile reads an untransposed fp32 B in place, unpacked, where it spans at most this percentage of a " \
      "core's second-level cache (the host's, for POCL's CPU device; else 1 MiB); 0: always packed")                   \
    F(gemm_cpu, narrow_in_place_l2, INT, 0, 10000, HOST,                                                               \
      "the straight narrow tile reads an untransposed fp32 B in place, unpacked, where it spans at most this "         \
      "percentage of a core's second-level cache (as in_place_l2); beyond, it counts packing B and the wide tile "     \
      "reading it in place is costed against it")                                                                      \
    F(gemm_cpu, a_in_place, INT, 0, 1, HOST,                                                                           \
      "1: the straight tile reads an fp32 A in place, unpacked, where the plan counts that cheaper than packing it; "  \
      "0: always packed")                                                                                              \
    F(gemm_cpu, kc, INT, 0, 4096, HOST,                                                                                \
      "values of K the flipped tile reading B in place takes at a time for all its row panels, where a slice that "    \
      "long of every row fits a core's first-level data cache (else 32 KiB); 0: each panel over all of K")

#define KILN_FIELDS_gemm_tiled(F)                                                                                      \
    F(gemm_tiled, mwg, INT, 1, 1024, DEF, "work-group tile size in M")                                                 \
    F(gemm_tiled, nwg, INT, 1, 1024, DEF, "work-group tile size in N")                                                 \
    F(gemm_tiled, kwg, INT, 1, 1024, DEF, "K step of the work-group tile (staged per iteration)")                      \
    F(gemm_tiled, mdimc, INT, 1, 1024, DEF, "work-group shape in M (work-items)")                                      \
    F(gemm_tiled, ndimc, INT, 1, 1024, DEF, "work-group shape in N (work-items)")                                      \
    F(gemm_tiled, mdima, INT, 1, 1024, DEF, "M extent of the work-item re-shape used to load A")                       \
    F(gemm_tiled, ndimb, INT, 1, 1024, DEF, "N extent of the work-item re-shape used to load B")                       \
    F(gemm_tiled, kwi, INT, 1, 1024, DEF, "K loop unroll factor")                                                      \
    F(gemm_tiled, vwm, VW, 1, 16, DEF, "vector width in M for loads and stores of A and C")                            \
    F(gemm_tiled, vwn, VW, 1, 16, DEF, "vector width in N for loads and stores of B and C")                            \
    F(gemm_tiled, sa, BOOL, 0, 1, DEF, "stage the A tile in local memory")                                             \
    F(gemm_tiled, sb, BOOL, 0, 1, DEF, "stage the B tile in local memory")                                             \
    F(gemm_tiled, split_k_min, INT, 0, 1 << 30, HOST,                                                                  \
      "split K: a product with fewer tiles than split_k_waves work-groups per compute unit is computed as slices of "  \
      "K of at least this many (then added in a fixed order); 0: never")                                               \
    F(gemm_tiled, split_k_waves, INT, 1, 64, HOST, "split K: work-groups wanted per compute unit")

#define KILN_FIELDS_gemm_direct(F)                                                                                     \
    F(gemm_direct, wg, INT, 1, 256, DEF, "square work-group tile size in M, N and K")                                  \
    F(gemm_direct, mdimc, INT, 1, 1024, DEF, "work-group shape in M (work-items)")                                     \
    F(gemm_direct, ndimc, INT, 1, 1024, DEF, "work-group shape in N (work-items)")                                     \
    F(gemm_direct, vwm, VW, 1, 16, DEF, "vector width in M")                                                           \
    F(gemm_direct, vwn, VW, 1, 16, DEF, "vector width in N")                                                           \
    F(gemm_direct, kwi, INT, 1, 256, DEF, "K loop unroll factor")

#define KILN_FIELDS_gemm_smallm(F)                                                                                     \
    F(gemm_smallm, mr, INT, 1, 64, HOST, "rows of C a work-item accumulates at once")                                  \
    F(gemm_smallm, nc, INT, 1, 256, HOST,                                                                              \
      "columns of C per work-item (B not transposed: rounded up to a multiple of vw)")                                 \
    F(gemm_smallm, vw, VW, 1, 16, DEF, "vector width in floats, along K (B transposed) or N")                          \
    F(gemm_smallm, chunks, INT, 1, 1024, HOST,                                                                         \
      "B not transposed, with kc: the most chunks of nc columns a work-item owns (the plan gives each compute unit "   \
      "one work-item where this allows), read together a kc-row step at a time")                                       \
    F(gemm_smallm, kc, INT, 0, 1 << 20, HOST,                                                                          \
      "B not transposed: rows of B per step over all of a work-item's chunks and rows (sums parked in private "        \
      "memory between steps, at most 32 KiB a work-group: fewer chunks where M is large, kc ignored where wg "         \
      "work-items cannot park one chunk's); 0: one chunk over all of K")                                               \
    F(gemm_smallm, wg, INT, 1, 1024, HOST,                                                                             \
      "work-items per work-group (1 on CPUs: a work-group is one thread's task; a GPU runs a work-group of 1 on one "  \
      "lane of a warp)")

#define KILN_FIELDS_gemm_mma(F)                                                                                        \
    F(gemm_mma, bm, INT, 16, 256, DEF, "block tile in M (rows of C)")                                                  \
    F(gemm_mma, bn, INT, 16, 256, DEF, "block tile in N (columns of C)")                                               \
    F(gemm_mma, bk, INT, 32, 128, DEF,                                                                                 \
      "K step: columns of A and rows of B staged per buffer (16-bit storage; TF32 stages bk/2 fp32 values, the same "  \
      "bytes)")                                                                                                        \
    F(gemm_mma, warps_m, INT, 1, 8, DEF, "warps of a block along M")                                                   \
    F(gemm_mma, warps_n, INT, 1, 8, DEF, "warps of a block along N")                                                   \
    F(gemm_mma, stages, INT, 2, 5, DEF, "shared-memory buffers of the copy pipeline (copies run stages-1 steps ahead)")

#define KILN_FIELDS_gemm_wgmma(F)                                                                                      \
    F(gemm_wgmma, bm, INT, 64, 256, DEF, "block tile in M (rows of C): bm/64 warpgroups of 64 rows each")              \
    F(gemm_wgmma, bn, INT, 64, 256, DEF, "block tile in N (columns of C): 64, 128 or 256, one wgmma's width")          \
    F(gemm_wgmma, stages, INT, 3, 8, DEF,                                                                              \
      "shared-memory buffers of one step of K: 64 16-bit values or 32 fp32 (copies run stages-2 steps ahead, one "     \
      "step's multiplies in flight)")                                                                                  \
    F(gemm_wgmma, group_m, INT, 1, 64, DEF,                                                                            \
      "block rows of C taken together by consecutive blocks (their B tiles shared in L2); 1: row by row")              \
    F(gemm_wgmma, tma, INT, 0, 1, HOST,                                                                                \
      "1: a producer warpgroup copies tiles with the tensor memory accelerator where the operands allow (bm 64 or "    \
      "128); 0: every thread copies with cp.async")

#define KILN_FIELDS_attention_mma(F)                                                                                   \
    F(attention_mma, block_q, INT, 16, 256, DEF,                                                                       \
      "query rows per block (halved for problems of fewer rows): warps x 16 or warps x 32")                            \
    F(attention_mma, block_kv, INT, 16, 256, DEF, "keys per step, staged in shared memory (a multiple of 16)")         \
    F(attention_mma, warps, INT, 1, 16, DEF, "warps of a block, each owning block_q/warps query rows")                 \
    F(attention_mma, stages, INT, 1, 2, DEF,                                                                           \
      "shared-memory buffers of keys and of values: 2, the next step's copied while this one multiplies; 1, the "      \
      "values copied while S is computed and the next keys while P V is")

#define KILN_FIELDS_conv_mma(F)                                                                                        \
    F(conv_mma, bm, INT, 16, 256, DEF, "block tile in output pixels (rows of the implicit GEMM)")                      \
    F(conv_mma, bn, INT, 16, 256, DEF, "block tile in filters")                                                        \
    F(conv_mma, bk, INT, 32, 128, DEF,                                                                                 \
      "K step: channels x taps of the gathered input and the weights staged per buffer")                               \
    F(conv_mma, warps_m, INT, 1, 8, DEF, "warps of a block along the pixels")                                          \
    F(conv_mma, warps_n, INT, 1, 8, DEF, "warps of a block along the filters")                                         \
    F(conv_mma, stages, INT, 2, 5, DEF, "shared-memory buffers of the copy pipeline (copies run stages-1 steps ahead)")

#define KILN_FIELDS_attention_decode(F)                                                                                \
    F(attention_decode, vw, VW, 1, 16, HOST,                                                                           \
      "vector width along the head dimension, and keys per step (halved until it divides the head dimension)")         \
    F(attention_decode, split_kv, INT, 1, 1 << 20, HOST,                                                               \
      "fewest keys per split when a problem's keys are split to give each compute unit four work-items")               \
    F(attention_decode, ahead, INT, 0, 4096, HOST,                                                                     \
      "keys ahead of its step whose rows of K and V the OpenCL decoding kernel fetches early, so that they are on "    \
      "their way from memory when it gets there: a load per cache line where it takes one kv head, a prefetch of the " \
      "first line of each 4 KiB page where it takes several; 0: none")                                                 \
    F(attention_decode, stream, INT, 0, 4096, HOST,                                                                    \
      "keys ahead of each load whose same line of K or V the OpenCL decoding kernel prefetches beside it, where it "   \
      "takes several kv heads and at least 4 rows (then in place of ahead's page prefetch); 0: never")                 \
    F(attention_decode, stream_l2, INT, 0, 4096, HOST,                                                                 \
      "keys ahead of each load whose same line of K or V the OpenCL decoding kernel also prefetches into L2, where "   \
      "it streams (stream above 0); 0: never")                                                                         \
    F(attention_decode, heads, INT, 1, 64, HOST,                                                                       \
      "kv heads one work-item of the OpenCL decoding kernel takes, step by step (the largest divisor of the kv heads " \
      "up to this; 1 where K's heads are not adjacent in a key's row), so that it reads whole rows of BSHD")           \
    F(attention_decode, warps, INT, 1, 32, HOST,                                                                       \
      "warps of a block of the CUDA backend's decoding kernel (cu/attention/attention_decode.cu), each taking every "  \
      "warps-th key of the block's split")

#define KILN_FIELDS_attention_decode_wg(F)                                                                             \
    F(attention_decode_wg, wg, INT, 0, 1024, HOST,                                                                     \
      "work-items of a work-group; halved to the device's limit; 0: the flash kernel takes these problems instead")    \
    F(attention_decode_wg, block_kv, INT, 1, 128, HOST,                                                                \
      "keys per tile, staged in local memory while the next tile's loads are in flight; halved while the tiles "       \
      "exceed the device's local memory")

#define KILN_FIELDS_conv_igemm_tiled(F)                                                                                \
    F(conv_igemm_tiled, mwg, INT, 1, 1024, DEF, "work-group tile in output pixels")                                    \
    F(conv_igemm_tiled, nwg, INT, 1, 1024, DEF, "work-group tile in filters (of one group)")                           \
    F(conv_igemm_tiled, kwg, INT, 1, 1024, DEF,                                                                        \
      "K step: input channels x filter taps staged in local memory per iteration")                                     \
    F(conv_igemm_tiled, mdimc, INT, 1, 1024, DEF, "work-group shape along pixels (work-items)")                        \
    F(conv_igemm_tiled, ndimc, INT, 1, 1024, DEF, "work-group shape along filters (work-items)")                       \
    F(conv_igemm_tiled, vw, VW, 1, 16, DEF, "vector width of the register tile's reads, in pixels and filters")        \
    F(conv_igemm_tiled, split_k_min, INT, 0, 1 << 30, HOST,                                                            \
      "split K: a layer with fewer tiles than split_k_waves work-groups per compute unit is computed as slices of "    \
      "the filter volume C/groups*R*S of at least this many (then added in a fixed order, with the epilogue); 0: "     \
      "never")                                                                                                         \
    F(conv_igemm_tiled, split_k_waves, INT, 1, 64, HOST, "split K: work-groups wanted per compute unit")

#define KILN_FIELDS_conv_direct(F)                                                                                     \
    F(conv_direct, wg, INT, 1, 1024, HOST, "work-group size")                                                          \
    F(conv_direct, vw, VW, 1, 16, HOST, "vector width (output columns in NCHW, filters or channels in NHWC)")          \
    F(conv_direct, acc, INT, 2, 64, HOST,                                                                              \
      "vector accumulators of a work-item's tile (filters x rows in NCHW, rows x columns in NHWC): about half the "    \
      "vector registers, which also hold the window's inputs and the weights")                                         \
    F(conv_direct, kt, INT, 1, 64, HOST,                                                                               \
      "NCHW: the most filters of a work-item's tile (a power of two dividing the group's filters, at most acc); acc "  \
      "/ filters rows")                                                                                                \
    F(conv_direct, rows, INT, 1, 64, HOST,                                                                             \
      "NCHW, tiles of one filter over one input channel (depthwise): the most output rows of a work-item's tile, in "  \
      "place of acc")

#define KILN_FIELDS_conv_winograd(F)                                                                                   \
    F(conv_winograd, vw, VW, 1, 16, HOST,                                                                              \
      "vector width of the input and output transforms (tiles in a row; narrower for rows of fewer tiles)")

#define KILN_FIELDS_attention_fused(F)                                                                                 \
    F(attention_fused, block_q, INT, 1, 1024, DEF,                                                                     \
      "query rows per work-item, as block_q / vw vectors of vw rows (fewer when a batch item's key/value head has "    \
      "fewer rows)")                                                                                                   \
    F(attention_fused, block_kv, INT, 1, 1024, DEF,                                                                    \
      "keys per block: a work-item's scores are block_q / vw x block_kv "                                              \
      "vectors")                                                                                                       \
    F(attention_fused, q_blocks, INT, 1, 1024, HOST,                                                                   \
      "blocks of block_q rows per work-item, taking each chunk of keys in turn while it is in cache (fewer for head "  \
      "dimensions above 64, small problems)")                                                                          \
    F(attention_fused, chunk_kv, INT, 1, 1 << 20, DEF, "keys per chunk (a multiple of block_kv)")                      \
    F(attention_fused, wg, INT, 1, 1024, DEF,                                                                          \
      "work-items per work-group (1 on CPUs: a work-group is one thread's task)")                                      \
    F(attention_fused, vw, VW, 1, 16, DEF, "vector width: query rows per vector")                                      \
    F(attention_fused, pv_rows, INT, 0, 64, DEF,                                                                       \
      "P V per step of block_kv keys, O held as vectors of rows (0: the form for GPU work-items), or per chunk: a "    \
      "register tile of this many rows by pv_vecs vectors of the head dimension over the chunk's keys (the form for "  \
      "CPUs; a divisor of block_q)")                                                                                   \
    F(attention_fused, pv_vecs, VW, 1, 16, DEF, "vectors of vw head-dimension values in that tile (pv_rows > 0)")

/* Bounds of the schema on what a parameter set costs to compile, whatever
   the device (profile_schema.c applies them per group): values a work-item
   holds in registers (accumulators, scores), multiply-adds or loads in one
   unrolled loop body, and query rows a fused-attention work-item keeps (in
   private memory). Past them the kernel compiler runs for minutes. */
#define KILN_MAX_TILE_VALUES 512
#define KILN_MAX_UNROLLED 4096
#define KILN_MAX_ATTENTION_ROWS 512
/* The decoding kernels' problems: at most this many rows a (batch, kv
   head) (query heads per kv head times query positions), and for the GPUs'
   and the CUDA backend's kernels a head dimension up to this
   (src/ops/attention_decode.c). */
#define KILN_DECODE_MAX_ROWS 8
#define KILN_DECODE_MAX_HEAD_DIM 256
/* attention.decode_wg at its kernel's largest problem (8 rows of head
   dimension 256): the output values a work-item keeps and the multiply-adds
   of its unrolled update of them per tile of keys. The plans compiled on POCL 3.1
   (rows 8, d 256): 8 outputs x 32 keys 3.4 s, 32 x 32 14 s, 64 x 32 22 s,
   128 x 32 107 s. */
#define KILN_MAX_DECODE_WG_OUTPUTS 64
#define KILN_MAX_DECODE_WG_UNROLLED 2048
/* The per-chunk form of fused attention (pv_rows > 0) keeps a chunk's
   scores (block_q x chunk_kv) and its keys and values (2 x chunk_kv x 64
   floats; the plan shortens the chunk for larger head dimensions) in
   private memory: at most 128 KiB of scores and 512 KiB of keys and
   values per work-item. */
#define KILN_MAX_ATTENTION_SCORES 32768
#define KILN_MAX_ATTENTION_CHUNK 1024

/* The local memory of an attention.flash work-group, in bytes, for blocks
   of bm rows and bn keys at a head dimension bounded by dmax (padded
   query and key/value tiles, the scores, three values per row). */
static inline long kiln_flash_local_bytes(long bm, long bn, long dmax)
{
    return 4 * (bm * (dmax + 1) + bn * (dmax + 1) + bm * (bn + 1) + 3 * bm);
}

/* Bound of the schema on the accumulators of a whole work-group (its tile,
   mwg x nwg), whatever the device: every work-item's private values live at
   once, in a GPU's register file (64K 32-bit registers is NVIDIA's limit per
   work-group) and on a CPU in the stack of the one thread that runs the
   work-group (POCL keeps each work-item's private values across barriers
   there: a 1024x1024 tile overflows its 8 MiB stack). */
#define KILN_MAX_GROUP_VALUES 65536
/* On a CPU device, the work-groups of the local-tile kernels (the GEMM's
   tiled and direct families, the tiled implicit GEMM): POCL runs a
   work-group on one thread whose stack frame holds every work-item's values
   live across a barrier, several times the count below, so a work-group
   stays within a GPU's 1024 work-items and those work-items' accumulators
   and fragments of the unrolled K step (kwi x (rows + columns)) within 2^18
   floats. Measured on POCL 3.1 (gemm.direct, 8 MiB stacks): 4096 work-items
   of 2 x 8 accumulators took frames of 4.9, 7.3 and 9.2 MiB at kwi 1, 2 and
   4 (the last crashed), 1024 work-items of 4 x 16 at kwi 16 (393,216 floats
   by this count) 6.6 MiB, 1024 of 4 x 4 at kwi 16 (147,456) 2.8 MiB. */
#define KILN_CPU_MAX_GROUP_ITEMS 1024
#define KILN_CPU_MAX_GROUP_FLOATS (1L << 18)
/* The same for the query rows a fused-attention work-group holds (each 512
   bytes of private memory): 4096 rows are 2 MiB; 16384 (256 rows on each of
   64 work-items) overflowed POCL's stack. */
#define KILN_MAX_ATTENTION_GROUP_ROWS 4096
/* All the private memory of a fused-attention work-group, in floats (those
   rows, plus the per-chunk form's scores, keys and values): 2 MiB. */
#define KILN_MAX_ATTENTION_GROUP_FLOATS (KILN_MAX_ATTENTION_GROUP_ROWS * 128L)

/* The groups: G(group, JSON name, define prefix, shape dimensions its parameter
   sets may be chosen by, check, doc). Dimensions are KILN_DIM_* bits; check
   names the function of profile_schema.c that tests the group's constraints
   and device limits (NULL for none). */
#define KILN_PARAM_GROUPS(G)                                                                                           \
    G(device, "device", "", 0, NULL, "device facts: peaks for kiln-info and kiln-bench")                               \
    G(select, "select", "", 0, NULL, "routes and thresholds the host reads to choose a kernel family or algorithm")    \
    G(util, "util", "KILN_UTIL_", 0, check_util,                                                                       \
      "element-wise kernels (fill, activations, softmax), pooling, naive attention")                                   \
    G(gemm_cpu, "gemm.cpu", "", KILN_DIMS_GEMM, check_gemm_cpu,                                                        \
      "the CPU GEMM family (cl/gemm/gemm_f32_cpu.cl) and implicit-GEMM convolution's CPU kernel: register tile")       \
    G(gemm_tiled, "gemm.tiled", "KILN_GEMM_", KILN_DIMS_GEMM, check_gemm_tiled,                                        \
      "the tiled GEMM family (cl/gemm/gemm_f32_tiled.cl): local-memory tiles in the style of CLBlast's Xgemm")         \
    G(gemm_direct, "gemm.direct", "KILN_GEMM_DIRECT_", KILN_DIMS_GEMM, check_gemm_direct,                              \
      "the direct GEMM family (cl/gemm/gemm_f32_direct.cl): small square tiles for small problems")                    \
    G(gemm_smallm, "gemm.smallm", "KILN_GEMM_SMALLM_", KILN_DIMS_GEMM, check_gemm_smallm,                              \
      "the small-M GEMM family (cl/gemm/gemm_f32_smallm.cl): a few rows of C, operands read in place")                 \
    G(conv_igemm_tiled, "conv.igemm_tiled", "KILN_CONV_IGEMM_", KILN_DIMS_GEMM, check_igemm_tiled,                     \
      "implicit-GEMM convolution's tiled GPU kernel (cl/conv/conv_f32_igemm_tiled.cl); m pixels, n filters, k "        \
      "channels x taps")                                                                                               \
    G(conv_direct, "conv.direct", "", KILN_DIMS_CONV, check_conv_direct,                                               \
      "direct convolution (cl/conv/conv_f32_direct.cl)")                                                               \
    G(conv_winograd, "conv.winograd", "", KILN_DIMS_CONV, NULL,                                                        \
      "Winograd's transforms (cl/conv/conv_f32_winograd.cl)")                                                          \
    G(attention_fused, "attention.fused", "KILN_ATTENTION_", KILN_DIMS_ATTENTION, check_attention,                     \
      "fused attention (cl/attention/attention_f32_fused.cl)")                                                         \
    G(attention_flash, "attention.flash", "KILN_FLASH_", KILN_DIMS_ATTENTION, check_flash,                             \
      "fused attention by work-groups (cl/attention/attention_f32_flash.cl)")                                          \
    G(gemm_mma, "gemm.mma", "KILN_MMA_", KILN_DIMS_GEMM, check_gemm_mma,                                               \
      "the tensor-core GEMM family (cu/gemm/gemm_f16_mma.cu, the CUDA backend): mma.sync on fp16 or bf16 storage, "    \
      "or TF32 on fp32 storage")                                                                                       \
    G(gemm_wgmma, "gemm.wgmma", "KILN_WGMMA_", KILN_DIMS_GEMM, check_gemm_wgmma,                                       \
      "Hopper's warpgroup tensor-core GEMM family (cu/gemm/gemm_f16_wgmma.cu, the CUDA backend, sm_90): wgmma on "     \
      "fp16 or bf16 storage, or TF32 on fp32 storage")                                                                 \
    G(attention_mma, "attention.mma", "KILN_AMMA_", KILN_DIMS_ATTENTION, check_attention_mma,                          \
      "fused attention on tensor cores (cu/attention/attention_f16_mma.cu, the CUDA backend, sm_80 on): mma.sync on "  \
      "fp16 or bf16 storage")                                                                                          \
    G(conv_mma, "conv.mma", "KILN_CONV_MMA_", KILN_DIMS_GEMM, check_conv_mma,                                          \
      "implicit-GEMM convolution on tensor cores (cu/conv/conv_f16_igemm_mma.cu, the CUDA backend, sm_80 on): "        \
      "mma.sync on fp16 or bf16 NHWC storage; m pixels, n filters, k channels x taps")                                 \
    G(attention_decode, "attention.decode", "KILN_DECODE_", KILN_DIMS_ATTENTION, check_attention_decode,               \
      "decoding attention split over the keys (cl/attention/attention_f32_decode.cl): a (batch, kv head) of at most "  \
      "8 rows")                                                                                                        \
    G(attention_decode_wg, "attention.decode_wg", "KILN_DWG_", KILN_DIMS_ATTENTION, check_attention_decode_wg,         \
      "decoding attention for GPUs (cl/attention/attention_f32_decode_wg.cl): a work-group per split of the keys of "  \
      "a (batch, kv head) of at most 8 rows, where the flash kernel would take it (devices other than CPUs, the "      \
      "flash route) and the head dimension is a multiple of 4 up to 256")

/* Shape dimensions a parameter set's class may bound. */
#define KILN_DIMENSIONS(D)                                                                                             \
    D(M, "m", "rows of C (output pixels in implicit GEMM)")                                                            \
    D(N, "n", "columns of C (filters in implicit GEMM)")                                                               \
    D(K, "k", "the reduction (channels x taps in implicit GEMM)")                                                      \
    D(BATCH, "batch", "batch items (GEMM batch, images, batch x heads in attention)")                                  \
    D(CHANNELS, "channels", "input channels per group")                                                                \
    D(FILTERS, "filters", "filters per group")                                                                         \
    D(PIXELS, "pixels", "output pixels per image")                                                                     \
    D(SEQ_Q, "seq_q", "query rows")                                                                                    \
    D(SEQ_KV, "seq_kv", "keys")                                                                                        \
    D(HEAD_DIM, "head_dim", "head dimension")

enum kiln_dim {
#define KILN_DIM_ENUM(id, name, doc) KILN_DIM_##id,
    KILN_DIMENSIONS(KILN_DIM_ENUM)
#undef KILN_DIM_ENUM
        KILN_DIM_COUNT
};

#define KILN_DIMS_GEMM (1u << KILN_DIM_M | 1u << KILN_DIM_N | 1u << KILN_DIM_K | 1u << KILN_DIM_BATCH)
#define KILN_DIMS_CONV (1u << KILN_DIM_BATCH | 1u << KILN_DIM_CHANNELS | 1u << KILN_DIM_FILTERS | 1u << KILN_DIM_PIXELS)
#define KILN_DIMS_ATTENTION                                                                                            \
    (1u << KILN_DIM_BATCH | 1u << KILN_DIM_SEQ_Q | 1u << KILN_DIM_SEQ_KV | 1u << KILN_DIM_HEAD_DIM)

/* A problem's extent along each dimension (0: not given; such a dimension
   never rules a class out). */
struct kiln_dims {
    long v[KILN_DIM_COUNT];
};

/* The typed structs: struct kiln_gemm_tiled { int mwg; ... }. */
#define KILN_CTYPE_INT int
#define KILN_CTYPE_VW int
#define KILN_CTYPE_BOOL int
#define KILN_CTYPE_CHOICE int
#define KILN_CTYPE_NUMBER double
#define KILN_STRUCT_FIELD(group, key, type, min, max, role, doc) KILN_CTYPE_##type key;
#define KILN_STRUCT(group, json, prefix, dims, check, doc)                                                             \
    struct kiln_param_##group {                                                                                        \
        KILN_FIELDS_##group(KILN_STRUCT_FIELD)                                                                         \
    };
KILN_PARAM_GROUPS(KILN_STRUCT)
#undef KILN_STRUCT

enum kiln_group_id {
#define KILN_GROUP_ENUM(group, json, prefix, dims, check, doc) KILN_GROUP_##group,
    KILN_PARAM_GROUPS(KILN_GROUP_ENUM)
#undef KILN_GROUP_ENUM
        KILN_GROUP_COUNT
};

/* Every group's values side by side: a profile's default sets. */
struct kiln_params {
#define KILN_PARAMS_MEMBER(group, json, prefix, dims, check, doc) struct kiln_param_##group group;
    KILN_PARAM_GROUPS(KILN_PARAMS_MEMBER)
#undef KILN_PARAMS_MEMBER
};

#endif /* KILN_PROFILE_PARAMS_H */
