/*
 * The CUDA driver and NVRTC, loaded at run time (src/cuda/cuda_api.h): no
 * driver and the toolkit's stub library both mean zero CUDA devices, with
 * the reason; NVRTC, where a toolkit is installed, compiles CUDA C to a
 * CUBIN for each architecture kiln's NVIDIA profiles cover, and the CUBIN's
 * ELF header names that architecture; a compile error comes back as
 * KILN_ERROR_BUILD with NVRTC's log. Parts that need a toolkit are skipped,
 * saying so, where there is none.
 *
 * The tensor-core GEMM (cu/gemm/gemm_f16_mma.cu): a plain-C model of its
 * tiling, fragments loaded and stored through cu/gemm/mma_layout.h as the
 * kernel does, multiplied by an emulated mma.m16n8k16 that reads and writes
 * registers as the PTX ISA lays them out, must give the exact product (a
 * swapped register in mma_layout.h fails it), also as the two m16n8k8 of
 * Turing and, for fp32 storage, as TF32's m16n8k8 on fp32 values held in
 * shared memory as pairs of 16-bit units (what ldmatrix moves); and the
 * kernel compiles for sm_75, sm_80, sm_86, sm_89 and sm_90 (TF32: sm_80
 * on) with HMMA instructions of its type, no local memory (no spills) and
 * registers and shared memory within the limits, as cuobjdump reads them
 * (installed from PyPI; skipped without it).
 *
 * The tensor-core convolution (cu/conv/conv_f16_igemm_mma.cu): a plain-C
 * model of a block, its A tiles gathered from an NHWC input through
 * cu/conv/igemm_gather.h as the kernel's threads gather them and multiplied
 * as above, must give a direct convolution exactly (padding, strides,
 * dilations, taps across and within a K step); the kernel compiles for
 * sm_80 to sm_90 in fp16 and bf16, with and without its epilogue, to the
 * expected HMMA and LDSM counts, cp.async copies and no spills.
 *
 * The CUDA backend compiles kiln's shared OpenCL C kernels through
 * cl/common/portability.h: on the test device, with an NVIDIA profile forced
 * and KILN_CUDA_ROUTES=1 (the operators choose as they do on the CUDA
 * backend), a set of operator plans builds its programs, and each program,
 * with its options, must compile with NVRTC for every architecture.
 *
 * kiln_cuda.h: on a context of another backend its entry points answer
 * UNSUPPORTED, and without a CUDA device wrapping one answers NOT_FOUND with
 * the reason. Where a CUDA device is present: a context on it and on a
 * stream of the caller's, a caller's allocation wrapped, the CUBIN disk
 * cache round-tripped and a cached CUBIN of another arch rejected and
 * rebuilt.
 */
#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv/igemm_gather.h"
#include "core/context.h"
#include "cuda/cuda_api.h"
#include "gemm/mma_layout.h"
#include "gemm/wgmma_layout.h"
#include "jit/disk_cache.h"
#include "jit/program_cache.h"
#include "kiln/kiln_attention.h"
#include "kiln/kiln_cuda.h"
#include "kiln/kiln_nn.h"
#include "profiles/profile.h"
#include "test_util.h"
#include "tune/peaks.h"
#include "util/options.h"

static const char kernel[] = "extern \"C\" __global__ void scale(float *x, float a, int n)\n"
                             "{\n"
                             "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "    if (i < n)\n"
                             "        x[i] *= a;\n"
                             "}\n";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* A directory holding the toolkit's stub libcuda.so, or NULL. */
static char *stub_dir(void)
{
    static const char *const patterns[] = {"/usr/local/cuda*/lib64/stubs/libcuda.so",
                                           "/usr/local/cuda*/targets/*/lib/stubs/libcuda.so", NULL};
    for (const char *const *p = patterns; *p; p++) {
        glob_t g;
        if (glob(*p, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
            char *dir = strdup(g.gl_pathv[0]);
            globfree(&g);
            *strrchr(dir, '/') = '\0';
            return dir;
        }
    }
    return NULL;
}

/* Load the CUDA libraries; skip the test, saying why, without NVRTC. */
static void load_nvrtc_or_skip(struct kiln_cuda_api *api)
{
    kiln_cuda_load(api);
    if (!api->nvrtc_lib) {
        printf("# skipped: %s\n", api->nvrtc);
        kiln_cuda_unload(api);
        skip();
    }
}

static void test_without_a_driver_no_devices(void **state)
{
    (void)state;
    struct kiln_cuda_api api;
    kiln_cuda_load(&api);
    printf("# driver: %s (%d devices); NVRTC %d.%d: %s\n", api.driver, api.devices, api.nvrtc_major, api.nvrtc_minor,
           api.nvrtc);
    if (!api.cuda_lib) {
        assert_int_equal(api.devices, 0);
        assert_non_null(strstr(api.driver, "no CUDA driver"));
    }
    assert_true(api.devices >= 0);
    assert_true(api.driver[0] && api.nvrtc[0]);
    kiln_cuda_unload(&api);
}

static void test_stub_library_no_devices(void **state)
{
    (void)state;
    char *dir = stub_dir();
    if (!dir) {
        printf("# skipped: no CUDA toolkit stub library under /usr/local/cuda*\n");
        skip();
    }
    const char *old = getenv("KILN_CUDA_LIB_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("KILN_CUDA_LIB_DIR", dir, 1);
    struct kiln_cuda_api api;
    kiln_cuda_load(&api);
    printf("# %s\n", api.driver);
    assert_non_null(api.cuda_lib);
    assert_int_equal(api.devices, 0);
    assert_non_null(strstr(api.driver, "stub"));
    kiln_cuda_unload(&api);
    if (saved)
        setenv("KILN_CUDA_LIB_DIR", saved, 1);
    else
        unsetenv("KILN_CUDA_LIB_DIR");
    free(saved);
    free(dir);
}

static void test_nvrtc_compiles_each_arch(void **state)
{
    (void)state;
    struct kiln_cuda_api api;
    load_nvrtc_or_skip(&api);
    static const int archs[] = {75, 80, 86, 89, 90};
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
        void *cubin = NULL;
        size_t size = 0;
        const double t0 = now_ms();
        kt_assert_status(kiln_cuda_compile(&api, kernel, "scale.cu", archs[i], "-default-device", &cubin, &size),
                         KILN_SUCCESS);
        printf("# sm_%d: CUBIN of %zu bytes in %.0f ms\n", archs[i], size, now_ms() - t0);
        assert_int_equal(kiln_cuda_cubin_arch(cubin, size), archs[i]);
        free(cubin);
    }
    /* NVRTC's log comes back in the detail. */
    void *cubin = (void *)&api;
    size_t size = 1;
    kt_assert_status(
        kiln_cuda_compile(&api, "__global__ void k() { undeclared_name = 1; }", "broken.cu", 80, NULL, &cubin, &size),
        KILN_ERROR_BUILD);
    assert_null(cubin);
    assert_int_equal(size, 0);
    assert_non_null(strstr(kiln_last_error_detail(), "undeclared_name"));
    kiln_cuda_unload(&api);
}

static void test_cubin_arch_rejects_other_files(void **state)
{
    (void)state;
    static const unsigned char not_elf[64] = "not an ELF image";
    assert_int_equal(kiln_cuda_cubin_arch(not_elf, sizeof not_elf), -1);
    unsigned char host_elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    host_elf[18] = 62; /* EM_X86_64 */
    assert_int_equal(kiln_cuda_cubin_arch(host_elf, sizeof host_elf), -1);
    assert_int_equal(kiln_cuda_cubin_arch(host_elf, 10), -1);
}

/* ---- the tensor-core GEMM ------------------------------------------------ */

/* The PTX ISA's fragments of mma.m16n8k16 with .f16 A and B and .f32 C and
   D (groupID = lane >> 2, threadID_in_group = lane % 4), written from its
   tables independently of mma_layout.h: register j of A holds elements 2j
   (low half) and 2j + 1. */
static void isa_a(int lane, int e, int *row, int *col)
{
    const int g = lane >> 2, t = lane % 4;
    static const int row_plus[8] = {0, 0, 8, 8, 0, 0, 8, 8}, col_plus[8] = {0, 1, 0, 1, 8, 9, 8, 9};
    *row = g + row_plus[e], *col = t * 2 + col_plus[e];
}
static void isa_b(int lane, int e, int *row, int *col)
{
    const int g = lane >> 2, t = lane % 4;
    static const int row_plus[4] = {0, 1, 8, 9};
    *row = t * 2 + row_plus[e], *col = g;
}
static void isa_c(int lane, int e, int *row, int *col)
{
    const int g = lane >> 2, t = lane % 4;
    *row = g + (e < 2 ? 0 : 8), *col = t * 2 + (e & 1);
}

/* D += A B over the first kdim columns of A (rows of B), D in the lanes'
   registers as the ISA lays out C and D. */
static void accumulate(const float am[16][16], const float bm[16][8], int kdim, float d[32][4])
{
    float dm[16][8];
    for (int lane = 0; lane < 32; lane++)
        for (int e = 0; e < 4; e++) {
            int r, c;
            isa_c(lane, e, &r, &c);
            dm[r][c] = d[lane][e];
        }
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++)
            for (int k = 0; k < kdim; k++)
                dm[i][j] += am[i][k] * bm[k][j];
    for (int lane = 0; lane < 32; lane++)
        for (int e = 0; e < 4; e++) {
            int r, c;
            isa_c(lane, e, &r, &c);
            d[lane][e] = dm[r][c];
        }
}

/* One mma of a warp: a[lane][8], b[lane][4] and d[lane][4] as the lanes'
   registers hold them; d += A B with A, B and D laid out by the ISA. */
static void emulated_mma(const float a[32][8], const float b[32][4], float d[32][4])
{
    float am[16][16], bm[16][8];
    for (int lane = 0; lane < 32; lane++) {
        int r, c;
        for (int e = 0; e < 8; e++)
            isa_a(lane, e, &r, &c), am[r][c] = a[lane][e];
        for (int e = 0; e < 4; e++)
            isa_b(lane, e, &r, &c), bm[r][c] = b[lane][e];
    }
    accumulate((const float(*)[16])am, (const float(*)[8])bm, 16, d);
}

/* The same for mma.m16n8k8 (Turing): A 16 x 8 in two registers (elements
   0-1 row g, 2-3 row g + 8, columns 2t, 2t + 1), B 8 x 8 in one (rows 2t,
   2t + 1, column g), C as above. */
static void emulated_mma_k8(const float a[32][4], const float b[32][2], float d[32][4])
{
    float am[16][16], bm[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane % 4;
        for (int e = 0; e < 4; e++)
            am[g + (e < 2 ? 0 : 8)][t * 2 + (e & 1)] = a[lane][e];
        for (int e = 0; e < 2; e++)
            bm[t * 2 + e][g] = b[lane][e];
    }
    accumulate((const float(*)[16])am, (const float(*)[8])bm, 8, d);
}

/* The kernel's mma_tile on sm_75: two m16n8k8, on A's registers 0-1
   (elements 0-3) and B's register 0 (elements 0-1), then A's 2-3 and B's
   1. */
static void emulated_mma_turing(const float a[32][8], const float b[32][4], float d[32][4])
{
    for (int half = 0; half < 2; half++) {
        float ah[32][4], bh[32][2];
        for (int lane = 0; lane < 32; lane++) {
            for (int e = 0; e < 4; e++)
                ah[lane][e] = a[lane][4 * half + e];
            for (int e = 0; e < 2; e++)
                bh[lane][e] = b[lane][2 * half + e];
        }
        emulated_mma_k8((const float(*)[4])ah, (const float(*)[2])bh, d);
    }
}

/* mma.m16n8k8 with .tf32 A and B, from the PTX ISA's tables: A 16 x 8 in
   four registers (row g for a0 and a2, g + 8 for a1 and a3; column t for
   a0 and a1, t + 4 for a2 and a3), B 8 x 8 in two (row t for b0, t + 4 for
   b1; column g), C as m16n8k16's. One value a register: a[lane][0-3],
   b[lane][0-1]. */
static void emulated_mma_tf32(const float a[32][8], const float b[32][4], float d[32][4])
{
    static const int a_row[4] = {0, 8, 0, 8}, a_col[4] = {0, 0, 4, 4}, b_row[2] = {0, 4};
    float am[16][16], bm[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane % 4;
        for (int e = 0; e < 4; e++)
            am[g + a_row[e]][t + a_col[e]] = a[lane][e];
        for (int e = 0; e < 2; e++)
            bm[t + b_row[e]][g] = b[lane][e];
    }
    accumulate((const float(*)[16])am, (const float(*)[8])bm, 8, d);
}

/* ldmatrix.m8n8.x4.b16 (.trans with `trans`) as the PTX ISA describes it,
   on shared memory as 16-bit units: lanes 8j to 8j + 7 give the rows of
   8 x 8 matrix j (here offsets into `shared`); without .trans lane l
   receives row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix j in
   register j, with .trans the same of the transposed matrix. Register j is
   out[l][2j] (low half) and out[l][2j + 1]. */
static void emulated_ldmatrix(const uint16_t *shared, const int row_at[32], int trans, uint16_t out[32][8])
{
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                const int r = trans ? 2 * (l % 4) + h : l / 4, c = trans ? l / 4 : 2 * (l % 4) + h;
                out[l][2 * j + h] = shared[row_at[8 * j + r] + c];
            }
}

/* gemm_f16_mma's tiling at its default parameters, in C: blocks of 128 x 128
   by bk 32 (32 16-bit values of K a step, 16 fp32 ones with TF32), 2 x 4
   warps of 64 x 32, tiles stored as the operands are (transposed or not)
   with rows along K padded by 16 bytes and rows along M or N by 8 values,
   in shared memory of 16-bit units (an fp32 value is two, low half first,
   as on the GPU); fragments by ldmatrix at mma_layout.h's addresses, or
   (TF32, operands stored along M or N) value by value at its element
   mapping; C stored through its element mapping. Small integers stand for
   16-bit values, exact in every mode. */
enum { MB = 128, NB = 128, KB = 32, WARPS_M = 2, WARPS_N = 4, WM = MB / WARPS_M, WN = NB / WARPS_N };
enum { WARPS = WARPS_M * WARPS_N, THREADS = WARPS * 32 };
enum mma_mode { MODE_F16, MODE_TURING, MODE_TF32 };

/* A block's accumulators: each warp's (WM / 16) x (WN / 8) mma tiles, as
   its lanes hold them. */
typedef float model_acc[WARPS][WM / 16][WN / 8][32][4];

/* Value i of a shared tile: 16-bit units `w` a value. */
static void put(uint16_t *shared, int w, int i, float v)
{
    if (w == 2)
        memcpy(shared + 2 * i, &v, sizeof v);
    else
        shared[i] = (uint16_t)(int16_t)v;
}
static float get(const uint16_t *shared, int w, int i)
{
    float v;
    if (w == 2)
        memcpy(&v, shared + 2 * i, sizeof v);
    else
        v = (float)(int16_t)shared[i];
    return v;
}

/* The lanes' registers of one fragment load: 16-bit values one an element,
   TF32 ones (w 2) one a register. */
static void registers_of(const uint16_t out[32][8], int w, float regs[32][8])
{
    for (int l = 0; l < 32; l++)
        for (int e = 0; e < 8 / w; e++)
            regs[l][e] = w == 2 ? get(out[l], 2, e) : get(out[l], 1, e);
}

/* One staged step (gemm/mma_pipeline.h's mma_warp_step) for every warp of
   the block: A's tile `as` stored MB x KB (KB x MB with ta), B's `bs`
   KB x NB (NB x KB with tb), KB 16-bit values of K or half as many fp32
   ones (MODE_TF32), rows ald and bld values apart. */
static void model_step(const uint16_t *as, int ald, const uint16_t *bs, int bld, int ta, int tb, enum mma_mode mode,
                       model_acc acc)
{
    const int w = mode == MODE_TF32 ? 2 : 1, chunk = 8 / w, kv = KB / w;
    for (int wi = 0; wi < WARPS; wi++) {
        const int wr = kiln_mma_warp_row(wi, WARPS_N, WM), wc = kiln_mma_warp_col(wi, WARPS_N, WN);
        for (int kk = 0; kk < kv; kk += 2 * chunk) {
            float a[WM / 16][32][8], b[WN / 8][32][4];
            uint16_t out[32][8];
            int at[32];
            for (int mi = 0; mi < WM / 16; mi++) {
                const int r0 = wr + mi * 16;
                if (w == 2 && ta) {
                    for (int l = 0; l < 32; l++)
                        for (int e = 0; e < 4; e++)
                            a[mi][l][e] =
                                get(as, w, (kk + kiln_mma_tf32_a_k(l, e)) * ald + r0 + kiln_mma_tf32_a_row(l, e));
                    continue;
                }
                for (int l = 0; l < 32; l++)
                    at[l] = w * (ta ? (kk + kiln_mma_ldsm_across_row(l)) * ald + r0 + kiln_mma_ldsm_across_col(l, chunk)
                                    : (r0 + kiln_mma_ldsm_down_row(l)) * ald + kk + kiln_mma_ldsm_down_col(l, chunk));
                emulated_ldmatrix(as, at, ta, out);
                registers_of((const uint16_t(*)[8])out, w, a[mi]);
            }
            for (int ni = 0; ni < WN / 8; ni += 2) {
                const int c0 = wc + ni * 8;
                if (w == 2 && !tb) {
                    for (int l = 0; l < 32; l++)
                        for (int e = 0; e < 2; e++) {
                            const int at_k = (kk + kiln_mma_tf32_b_k(l, e)) * bld;
                            b[ni][l][e] = get(bs, w, at_k + c0 + kiln_mma_tf32_b_col(l));
                            b[ni + 1][l][e] = get(bs, w, at_k + c0 + 8 + kiln_mma_tf32_b_col(l));
                        }
                    continue;
                }
                float r[32][8];
                for (int l = 0; l < 32; l++)
                    at[l] = w * (tb ? (c0 + kiln_mma_ldsm_across_row(l)) * bld + kk + kiln_mma_ldsm_across_col(l, chunk)
                                    : (kk + kiln_mma_ldsm_down_row(l)) * bld + c0 + kiln_mma_ldsm_down_col(l, chunk));
                emulated_ldmatrix(bs, at, !tb, out);
                registers_of((const uint16_t(*)[8])out, w, r);
                /* Registers 0-1 of the x4 are b[ni]'s, 2-3 b[ni + 1]'s. */
                for (int l = 0; l < 32; l++)
                    for (int e = 0; e < 4 / w; e++)
                        b[ni][l][e] = r[l][e], b[ni + 1][l][e] = r[l][4 / w + e];
            }
            for (int mi = 0; mi < WM / 16; mi++)
                for (int ni = 0; ni < WN / 8; ni++) {
                    const float(*fa)[8] = (const float(*)[8])a[mi], (*fb)[4] = (const float(*)[4])b[ni];
                    if (mode == MODE_TURING)
                        emulated_mma_turing(fa, fb, acc[wi][mi][ni]);
                    else if (mode == MODE_TF32)
                        emulated_mma_tf32(fa, fb, acc[wi][mi][ni]);
                    else
                        emulated_mma(fa, fb, acc[wi][mi][ni]);
                }
        }
    }
}

/* The block at (m0, n0) of C (M x N, row-major) from its accumulators,
   through the C fragment's element mapping. */
static void model_store(model_acc acc, int m0, int n0, int M, int N, float *C)
{
    for (int w = 0; w < WARPS; w++)
        for (int mi = 0; mi < WM / 16; mi++)
            for (int ni = 0; ni < WN / 8; ni++)
                for (int lane = 0; lane < 32; lane++)
                    for (int e = 0; e < 4; e++) {
                        const int r = m0 + kiln_mma_warp_row(w, WARPS_N, WM) + mi * 16 + kiln_mma_c_row(lane, e);
                        const int c = n0 + kiln_mma_warp_col(w, WARPS_N, WN) + ni * 8 + kiln_mma_c_col(lane, e);
                        if (r < M && c < N)
                            C[r * N + c] = acc[w][mi][ni][lane][e];
                    }
}

static void model_gemm(int M, int N, int K, const float *A, const float *B, float *C, int ta, int tb,
                       enum mma_mode mode)
{
    /* The stored tiles: A MB x KB (KB x MB transposed), B KB x NB (NB x KB),
       rows along K padded by 16 bytes, along M or N by 8 values. */
    const int w = mode == MODE_TF32 ? 2 : 1, chunk = 8 / w, kv = KB / w;
    const int ald = ta ? MB + 8 : kv + chunk, bld = tb ? kv + chunk : NB + 8;
    static uint16_t as[2 * MB * (MB + 8)], bs[2 * NB * (NB + 8)];
    static model_acc acc;
    for (int m0 = 0; m0 < M; m0 += MB)
        for (int n0 = 0; n0 < N; n0 += NB) {
            memset(acc, 0, sizeof acc);
            for (int k0 = 0; k0 < K; k0 += kv) {
                for (int i = 0; i < MB; i++)
                    for (int k = 0; k < kv; k++) {
                        const float v = m0 + i < M && k0 + k < K
                                            ? (ta ? A[(k0 + k) * M + m0 + i] : A[(m0 + i) * K + k0 + k])
                                            : 0.0f;
                        put(as, w, ta ? k * ald + i : i * ald + k, v);
                    }
                for (int k = 0; k < kv; k++)
                    for (int j = 0; j < NB; j++) {
                        const float v = k0 + k < K && n0 + j < N
                                            ? (tb ? B[(n0 + j) * K + k0 + k] : B[(k0 + k) * N + n0 + j])
                                            : 0.0f;
                        put(bs, w, tb ? j * bld + k : k * bld + j, v);
                    }
                model_step(as, ald, bs, bld, ta, tb, mode, acc);
            }
            model_store(acc, m0, n0, M, N, C);
        }
}

static void test_mma_tiling_model(void **state)
{
    (void)state;
    /* Edges in every dimension, several blocks and K steps; small integers,
       so every sum is exact. Operands stored M x K or K x M (A), K x N or
       N x K (B); 16-bit values on m16n8k16 and on Turing's m16n8k8, fp32
       ones on TF32's m16n8k8. */
    enum { M = 150, N = 140, K = 50 };
    static float A[M * K], B[K * N], C[M * N];
    uint64_t seed = kt_group_seed;
    kt_fill_uniform(A, M * K, -3.0f, 4.0f, &seed);
    kt_fill_uniform(B, K * N, -3.0f, 4.0f, &seed);
    for (int i = 0; i < M * K; i++)
        A[i] = floorf(A[i]);
    for (int i = 0; i < K * N; i++)
        B[i] = floorf(B[i]);
    static const char *const names[] = {"m16n8k16", "sm_75, two m16n8k8", "tf32 m16n8k8"};
    const struct kiln_param_gemm_mma params = {
        .bm = MB, .bn = NB, .bk = KB, .warps_m = WARPS_M, .warps_n = WARPS_N, .stages = 3};
    for (int variant = 0; variant < 9; variant++) {
        const int ta = variant & 1, tb = variant >> 1 & 1;
        const enum mma_mode mode = variant < 4 ? MODE_F16 : variant == 4 ? MODE_TURING : MODE_TF32;
        /* The model's tiles, the kernel's layout, take the bytes the host
           reserves (3 buffers), fp32 ones as 16-bit ones. */
        const int w = mode == MODE_TF32 ? 2 : 1, kv = KB / w;
        const long tile_bytes =
            2L * w * ((ta ? kv * (MB + 8) : MB * (kv + 8 / w)) + (tb ? NB * (kv + 8 / w) : kv * (NB + 8)));
        assert_int_equal(3 * tile_bytes, kiln_gemm_mma_shared_bytes(&params, ta, tb));
        for (int i = 0; i < M * N; i++)
            C[i] = NAN;
        model_gemm(M, N, K, A, B, C, ta, tb, mode);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0;
                for (int k = 0; k < K; k++)
                    ref += (double)(ta ? A[k * M + i] : A[i * K + k]) * (tb ? B[j * K + k] : B[k * N + j]);
                if (C[i * N + j] != ref)
                    fail_msg("model (%s, A%s, B%s) C(%d, %d) = %g, the product %g: mma_layout.h disagrees with the "
                             "PTX ISA",
                             names[mode], ta ? "^T" : "", tb ? "^T" : "", i, j, C[i * N + j], ref);
            }
    }
}

/* ---- the tensor-core convolution ------------------------------------------ */

/* A convolution, NHWC with KRSC weights: pads top, bottom, left, right. */
struct conv_case {
    const char *what;
    int n, c, h, w, k, r, s, sh, sw, pad[4], dh, dw;
};

static int conv_p(const struct conv_case *d)
{
    return (d->h + d->pad[0] + d->pad[1] - (d->r - 1) * d->dh - 1) / d->sh + 1;
}
static int conv_q(const struct conv_case *d)
{
    return (d->w + d->pad[2] + d->pad[3] - (d->s - 1) * d->dw - 1) / d->sw + 1;
}

/* conv_f16_igemm_mma's block in C, at the tiling of model_gemm (128 x 128
   by 32 of K, 256 threads): each thread copies its pieces of 8 channels of
   the A tile where conv/igemm_gather.h says (its pixels decoded once per
   block, its tap advanced by KB a step, zeros in the padding and past
   Kdim) and its pieces of the weights as stored (the GEMM's B transposed),
   then the warps multiply (model_step) and store y, M x K (NHWC). */
static void model_conv(const struct conv_case *d, const float *x, const float *wt, float *y)
{
    enum { LD = KB + 8, A_PIECES = MB * (KB / 8) / THREADS, B_PIECES = NB * (KB / 8) / THREADS };
    const int P = conv_p(d), Q = conv_q(d), M = d->n * P * Q, KK = d->r * d->s * d->c;
    static uint16_t as[MB * LD], bs[NB * LD];
    static model_acc acc;
    static struct kiln_igemm_pixel px[THREADS][A_PIECES];
    static struct kiln_igemm_tap tap[THREADS];
    for (int m0 = 0; m0 < M; m0 += MB)
        for (int n0 = 0; n0 < d->k; n0 += NB) {
            memset(acc, 0, sizeof acc);
            for (int t = 0; t < THREADS; t++) {
                for (int i = 0; i < A_PIECES; i++)
                    px[t][i] = kiln_igemm_pixel_of(m0 + kiln_igemm_piece_row(t, i, KB, THREADS), M, P, Q, d->h, d->w,
                                                   d->c, d->sh, d->sw, d->pad[0], d->pad[2]);
                tap[t] = kiln_igemm_tap_of(kiln_igemm_piece_col(t, KB), d->c, d->s);
            }
            for (int k0 = 0; k0 < KK; k0 += KB) {
                for (int t = 0; t < THREADS; t++) {
                    const int col = kiln_igemm_piece_col(t, KB), k = k0 + col;
                    for (int i = 0; i < A_PIECES; i++) {
                        const int row = kiln_igemm_piece_row(t, i, KB, THREADS);
                        const int inside = kiln_igemm_inside(px[t][i], tap[t], d->r, d->h, d->w, d->dh, d->dw);
                        const unsigned at = inside ? kiln_igemm_at(px[t][i], tap[t], d->w, d->c, d->dh, d->dw) : 0;
                        for (int j = 0; j < 8; j++)
                            put(as, 1, row * LD + col + j, inside ? x[at + j] : 0.0f);
                    }
                    kiln_igemm_tap_next(&tap[t], KB, d->c, d->s);
                    for (int i = 0; i < B_PIECES; i++) {
                        const int row = kiln_igemm_piece_row(t, i, KB, THREADS), f = n0 + row;
                        for (int j = 0; j < 8; j++)
                            put(bs, 1, row * LD + col + j, f < d->k && k < KK ? wt[f * KK + k + j] : 0.0f);
                    }
                }
                model_step(as, LD, bs, LD, 0, 1, MODE_F16, acc);
            }
            model_store(acc, m0, n0, M, d->k, y);
        }
}

/* y(image, oh, ow, f) by the convolution's definition, in double. */
static double direct_conv(const struct conv_case *d, const float *x, const float *wt, int image, int oh, int ow, int f)
{
    double sum = 0.0;
    for (int r = 0; r < d->r; r++)
        for (int s = 0; s < d->s; s++) {
            const int ih = oh * d->sh - d->pad[0] + r * d->dh, iw = ow * d->sw - d->pad[2] + s * d->dw;
            if (ih < 0 || ih >= d->h || iw < 0 || iw >= d->w)
                continue;
            for (int c = 0; c < d->c; c++)
                sum += (double)x[((image * d->h + ih) * d->w + iw) * d->c + c] *
                       wt[((f * d->r + r) * d->s + s) * d->c + c];
        }
    return sum;
}

static void test_conv_mma_gather_model(void **state)
{
    (void)state;
    /* Small integers, so every sum is exact. Several pixel blocks with a
       partial one; steps that hold several taps (8 and 16 channels) or
       start inside one (40 channels: 5 pieces a tap, 4 a step); Kdim not a
       multiple of the step; two blocks of filters; asymmetric padding,
       strides and dilations. */
    static const struct conv_case cases[] = {
        {"3x3 stride 2 dilation 2 pad t2 b1 l1 r2, 16 channels", 3, 16, 17, 15, 24, 3, 3, 2, 2, {2, 1, 1, 2}, 2, 2},
        {"3x3 pad 1, 40 channels", 1, 40, 12, 13, 20, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1},
        {"5x3 stride 2x1 dilation 1x3 pad 2 2 3 3, 8 channels, 140 filters",
         2,
         8,
         9,
         10,
         140,
         5,
         3,
         2,
         1,
         {2, 2, 3, 3},
         1,
         3},
        {"1x1 stride 2, 24 channels", 2, 24, 9, 11, 16, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1},
    };
    uint64_t seed = kt_group_seed;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct conv_case *d = &cases[i];
        const int P = conv_p(d), Q = conv_q(d), nx = d->n * d->h * d->w * d->c, nw = d->k * d->r * d->s * d->c;
        const int ny = d->n * P * Q * d->k;
        float *x = malloc(nx * sizeof *x), *wt = malloc(nw * sizeof *wt), *y = malloc(ny * sizeof *y);
        assert_true(x && wt && y);
        kt_fill_uniform(x, (size_t)nx, -3.0f, 4.0f, &seed);
        kt_fill_uniform(wt, (size_t)nw, -3.0f, 4.0f, &seed);
        for (int j = 0; j < nx; j++)
            x[j] = floorf(x[j]);
        for (int j = 0; j < nw; j++)
            wt[j] = floorf(wt[j]);
        for (int j = 0; j < ny; j++)
            y[j] = NAN;
        model_conv(d, x, wt, y);
        for (int image = 0; image < d->n; image++)
            for (int oh = 0; oh < P; oh++)
                for (int ow = 0; ow < Q; ow++)
                    for (int f = 0; f < d->k; f++) {
                        const double ref = direct_conv(d, x, wt, image, oh, ow, f);
                        const float got = y[((image * P + oh) * Q + ow) * d->k + f];
                        if (got != ref)
                            fail_msg("conv model, %s: y[%d][%d][%d][%d] = %g, the convolution %g: "
                                     "conv/igemm_gather.h gathers the wrong input",
                                     d->what, image, oh, ow, f, got, ref);
                    }
        free(x), free(wt), free(y);
    }
}

/* gemm_f16_wgmma's layout, in C: one block of 128 x 256 by one K step of
   128 bytes (64 16-bit values, or 32 fp32 ones for TF32), tiles stored as
   the operands are (transposed or not) at wgmma_layout.h's swizzled
   offsets; each warpgroup's four m64n256k16 (k8 for TF32) read their
   operands through wgmma_layout.h's descriptor fields as the PTX ISA
   defines the 128-byte-swizzled canonical layouts (K-major: 8 rows of 128
   bytes, 8-row groups the stride byte offset apart, k along a row, `size`
   bytes a value; M- or N-major, 16-bit only: 64 values of m or n in a row,
   64-wide groups the leading byte offset apart, rows of k 128 bytes apart
   and 8-row groups the stride byte offset apart; then bits 4-6 of the
   address XOR bits 7-9), and C is written through its accumulator mapping,
   checked against the ISA's m64nNk16 and m64nNk8 D fragments (row
   16 warp + lane / 4 + 8 for registers 2 and 3 of each 4, column
   8 (i / 4) + 2 (lane % 4) + i % 2). */
enum { WG_M = 128, WG_N = 256, WG_K = 64 /* the most values of K a step holds */ };

/* The value of `size` bytes wgmma reads at byte `addr` of shared memory
   (one float a value, at its byte offset / size). */
static float swizzled(const float *shared, int addr, int size)
{
    return shared[(addr ^ ((addr >> 7 & 7) << 4)) / size];
}

/* Operand element (mn, k) of a wgmma through a descriptor's fields. */
static float operand(const float *shared, int size, int mn_major, int start, int lbo, int sbo, int mn, int k)
{
    return swizzled(shared,
                    mn_major ? start + mn % 64 * 2 + mn / 64 * lbo + k % 8 * 128 + k / 8 * sbo
                             : start + mn % 8 * 128 + mn / 8 * sbo + k * size,
                    size);
}

/* A is WG_M x bk, B bk x WG_N, row-major, bk = KILN_WGMMA_BK(size). */
static void model_wgmma(const float *A, const float *B, float *C, int ta, int tb, int size)
{
    static float as[WG_M * WG_K], bs[WG_N * WG_K], d[WG_M / 64][4][32][WG_N / 2];
    const int bk = KILN_WGMMA_BK(size), kstep = 32 / size;
    /* The stored tiles: A M x K (K x M transposed), B K x N (N x K). */
    for (int i = 0; i < WG_M; i++)
        for (int k = 0; k < bk; k++)
            as[(ta ? kiln_wgmma_offset(bk, k, i, size) : kiln_wgmma_offset(WG_M, i, k, size)) / size] = A[i * bk + k];
    for (int k = 0; k < bk; k++)
        for (int j = 0; j < WG_N; j++)
            bs[(tb ? kiln_wgmma_offset(WG_N, j, k, size) : kiln_wgmma_offset(bk, k, j, size)) / size] = B[k * WG_N + j];
    memset(d, 0, sizeof d);
    for (int wg = 0; wg < WG_M / 64; wg++)
        for (int kk = 0; kk < bk; kk += kstep) {
            const int a0 = kiln_wgmma_desc_start(0, ta, wg * 64, kk, size),
                      b0 = kiln_wgmma_desc_start(0, !tb, 0, kk, size);
            for (int w = 0; w < 4; w++)
                for (int l = 0; l < 32; l++)
                    for (int i = 0; i < WG_N / 2; i++) {
                        const int row = 16 * w + l / 4 + 8 * (i % 4 >= 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
                        for (int k = 0; k < kstep; k++)
                            d[wg][w][l][i] +=
                                operand(as, size, ta, a0, kiln_wgmma_desc_lbo(ta), kiln_wgmma_desc_sbo(ta), row, k) *
                                operand(bs, size, !tb, b0, kiln_wgmma_desc_lbo(!tb), kiln_wgmma_desc_sbo(!tb), col, k);
                    }
        }
    for (int wg = 0; wg < WG_M / 64; wg++)
        for (int w = 0; w < 4; w++)
            for (int l = 0; l < 32; l++)
                for (int i = 0; i < WG_N / 2; i++)
                    C[(wg * 64 + kiln_wgmma_c_row(w, l, i)) * WG_N + kiln_wgmma_c_col(l, i)] = d[wg][w][l][i];
}

static void test_wgmma_layout_model(void **state)
{
    (void)state;
    static float A[WG_M * WG_K], B[WG_K * WG_N], C[WG_M * WG_N];
    uint64_t seed = kt_group_seed;
    kt_fill_uniform(A, WG_M * WG_K, -3.0f, 4.0f, &seed);
    kt_fill_uniform(B, WG_K * WG_N, -3.0f, 4.0f, &seed);
    for (int i = 0; i < WG_M * WG_K; i++)
        A[i] = floorf(A[i]);
    for (int i = 0; i < WG_K * WG_N; i++)
        B[i] = floorf(B[i]);
    /* 16-bit values in the four transposes; fp32 ones (TF32) K-major. */
    static const struct {
        int size, ta, tb;
    } variants[] = {{2, 0, 0}, {2, 1, 0}, {2, 0, 1}, {2, 1, 1}, {4, 0, 1}};
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        const int size = variants[v].size, ta = variants[v].ta, tb = variants[v].tb, bk = KILN_WGMMA_BK(size);
        for (int i = 0; i < WG_M * WG_N; i++)
            C[i] = NAN;
        model_wgmma(A, B, C, ta, tb, size);
        for (int i = 0; i < WG_M; i++)
            for (int j = 0; j < WG_N; j++) {
                double ref = 0;
                for (int k = 0; k < bk; k++)
                    ref += (double)A[i * bk + k] * B[k * WG_N + j];
                if (C[i * WG_N + j] != ref)
                    fail_msg("wgmma model (%s, A%s, B%s) C(%d, %d) = %g, the product %g: wgmma_layout.h disagrees "
                             "with the PTX ISA",
                             size == 4 ? "tf32" : "16-bit", ta ? "^T" : "", tb ? "^T" : "", i, j, C[i * WG_N + j], ref);
            }
    }
}

/* The path of cuobjdump: $KILN_CUOBJDUMP, the PATH, or the one PyPI's
   nvidia-cuda-cuobjdump installs; "" if none. */
static void find_cuobjdump(char *path, size_t size)
{
    path[0] = '\0';
    const char *env = getenv("KILN_CUOBJDUMP");
    const char *cmd = env && env[0] ? NULL
                                    : "command -v cuobjdump 2>/dev/null || python3 -c \"import glob, os, nvidia; "
                                      "print(next(iter(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], "
                                      "'cu*', 'bin', 'cuobjdump')))), ''))\" 2>/dev/null";
    if (!cmd) {
        snprintf(path, size, "%s", env);
        return;
    }
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (!fgets(path, (int)size, p))
        path[0] = '\0';
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
}

/* Run `tool args file` and return its output (malloc'd), or NULL. */
static char *run_tool(const char *tool, const char *args, const char *file)
{
    char cmd[1536];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' 2>&1", tool, args, file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 16 << 20, n = 0;
    char *out = malloc(cap);
    if (out)
        n = fread(out, 1, cap - 1, p);
    pclose(p);
    if (out)
        out[n] = '\0';
    return out;
}

/* A kernel source of cu/ ("gemm/gemm_f16_mma.cu"), read whole. */
/* The source of `name` in the kernel tree `tree` (cu or cl). */
static void read_tree_kernel(const char *tree, const char *name, char *source, size_t size)
{
    char file[1200];
    snprintf(file, sizeof file, "%s", __FILE__);
    *strrchr(file, '/') = '\0';
    strcat(file, "/../");
    strcat(file, tree);
    strcat(file, "/");
    strcat(file, name);
    FILE *f = fopen(file, "rb");
    assert_non_null(f);
    const size_t n = fread(source, 1, size - 1, f);
    fclose(f);
    source[n] = '\0';
}

static void read_kernel(const char *name, char *source, size_t size) { read_tree_kernel("cu", name, source, size); }

/* What cuobjdump read from a compiled kernel. */
struct sass_report {
    double ms;
    int reg, stack, shared, local;
    char *sass; /* NULL where cuobjdump is missing */
};

/* Compile `source` for sm_`arch` with `options` as the backend does
   (-default-device, includes from cu/ first, then cl/), check the CUBIN's
   arch and, where cuobjdump was found, read its SASS and resources. */
static struct sass_report compile_and_read(const struct kiln_cuda_api *api, const char *tool, const char *dir,
                                           const char *name, const char *source, int arch, const char *options)
{
    char root[1024], all[3200];
    snprintf(root, sizeof root, "%s", __FILE__);
    *strrchr(root, '/') = '\0';
    snprintf(all, sizeof all, "-default-device --include-path=%s/../cu --include-path=%s/../cl %s", root, root,
             options);
    struct sass_report r = {0, -1, -1, -1, -1, NULL};
    void *cubin = NULL;
    size_t size = 0;
    const double t0 = now_ms();
    kt_assert_status(kiln_cuda_compile(api, source, name, arch, all, &cubin, &size), KILN_SUCCESS);
    r.ms = now_ms() - t0;
    assert_int_equal(kiln_cuda_cubin_arch(cubin, size), arch);
    if (!tool[0]) {
        free(cubin);
        return r;
    }
    static int serial;
    char path[1300];
    snprintf(path, sizeof path, "%s/kernel_%d_sm%d.cubin", dir, serial++, arch);
    FILE *o = fopen(path, "wb");
    assert_non_null(o);
    assert_int_equal(fwrite(cubin, 1, size, o), size);
    fclose(o);
    free(cubin);
    char *usage = run_tool(tool, "-res-usage", path);
    r.sass = run_tool(tool, "-sass", path);
    assert_true(r.sass && usage);
    /* cuobjdump from CUDA 13.1 on disassembles through nvdisasm, which it
       looks for beside itself and on the PATH; without it, say so (once)
       and compile only, as without cuobjdump. */
    const char *fatal = strstr(r.sass, "fatal");
    if (fatal && !strstr(r.sass, "Function :")) {
        static int said;
        if (!said++)
            printf("# cuobjdump cannot disassemble (pip install nvidia-cuda-nvdisasm): compiling only: %.*s\n",
                   (int)strcspn(fatal, "\n"), fatal);
        free(r.sass);
        r.sass = NULL;
    }
    const char *u = strstr(usage, "REG:");
    if (u)
        sscanf(u, "REG:%d STACK:%d SHARED:%d LOCAL:%d", &r.reg, &r.stack, &r.shared, &r.local);
    free(usage);
    return r;
}

/* Under AddressSanitizer, whose allocator doubles NVRTC's time and which
   sees kiln's side of every compile take the same path, each sweep takes
   the oldest and the newest architecture alone, the sweep of a second
   profile is left out, and each SASS test reads its first build alone: what
   the rest check is NVRTC's output, which the build without it checks in
   full. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif
#define SWEEP_ENDS_ONLY UNDER_ASAN

/* The builds a SASS test reads out of its table's n. */
static size_t sass_builds(size_t n) { return UNDER_ASAN && n > 1 ? 1 : n; }

/* What each SASS test starts with: NVRTC (else the test is skipped), the
   source of `name` in the kernel tree `tree` (cu/ for sass_begin),
   cuobjdump's path ("" without it: compiling only) and a scratch directory
   for the CUBINs; sass_end releases them. */
struct sass_test {
    struct kiln_cuda_api api;
    char source[1 << 16], tool[1024];
    char *dir;
};

static void sass_begin_tree(struct sass_test *t, const char *tree, const char *name)
{
    load_nvrtc_or_skip(&t->api);
    read_tree_kernel(tree, name, t->source, sizeof t->source);
    find_cuobjdump(t->tool, sizeof t->tool);
    if (!t->tool[0])
        printf("# cuobjdump not found (pip install nvidia-cuda-cuobjdump): compiling only\n");
    t->dir = kt_temp_dir();
}

static void sass_begin(struct sass_test *t, const char *name) { sass_begin_tree(t, "cu", name); }

static void sass_end(struct sass_test *t)
{
    kt_remove_tree(t->dir);
    free(t->dir);
    kiln_cuda_unload(&t->api);
}

static int count_of(const char *text, const char *what)
{
    int n = 0;
    for (const char *s = text; (s = strstr(s, what)) != NULL; s += strlen(what))
        n++;
    return n;
}

static void test_mma_kernel_sass(void **state)
{
    (void)state;
    static struct sass_test t;
    sass_begin(&t, "gemm/gemm_f16_mma.cu");
    /* fp16 from sm_75, bf16 (KILN_MMA_BF16) and TF32 (KILN_MMA_TF32) from
       sm_80; transposed operands; plain loads where rows are not 16-byte
       aligned (async 0). */
    enum { F16, BF16, TF32 };
    static const char *const type_names[] = {"f16", "bf16", "tf32"};
    static const struct {
        int arch, type, ta, tb, async;
    } builds[] = {{75, F16, 0, 0, 1},  {80, F16, 0, 0, 1},  {86, F16, 0, 0, 1},  {89, F16, 0, 0, 1},
                  {90, F16, 0, 0, 1},  {80, BF16, 0, 0, 1}, {90, BF16, 0, 0, 1}, {90, F16, 1, 1, 1},
                  {90, F16, 0, 1, 0},  {80, F16, 1, 0, 0},  {80, TF32, 0, 0, 1}, {86, TF32, 0, 0, 1},
                  {89, TF32, 0, 0, 1}, {90, TF32, 0, 0, 1}, {90, TF32, 1, 1, 1}, {80, TF32, 0, 1, 1},
                  {80, TF32, 1, 0, 0}, {90, TF32, 0, 1, 0}};
    for (size_t i = 0; i < sass_builds(sizeof builds / sizeof *builds); i++) {
        const int arch = builds[i].arch, tf32 = builds[i].type == TF32;
        char type[32];
        snprintf(type, sizeof type, "%s%s%s%s", type_names[builds[i].type], builds[i].ta ? " A^T" : "",
                 builds[i].tb ? " B^T" : "", builds[i].async ? "" : " loads");
        char options[200];
        snprintf(options, sizeof options,
                 "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_ASYNC=%d -DKILN_MMA_BF16=%d -DKILN_MMA_TF32=%d",
                 builds[i].ta, builds[i].tb, builds[i].async, builds[i].type == BF16, tf32);
        struct sass_report r = compile_and_read(&t.api, t.tool, t.dir, "gemm_f16_mma.cu", t.source, arch, options);
        if (!r.sass) {
            printf("# gemm_f16_mma %s sm_%d: compiled in %.0f ms\n", type, arch, r.ms);
            continue;
        }
        const int hmma = count_of(r.sass, "HMMA"), ldsm = count_of(r.sass, "LDSM"), ldgsts = count_of(r.sass, "LDGSTS");
        /* bf16 multiplies show as HMMA with a .BF16 suffix, TF32 ones as
           HMMA.1688.F32.TF32. */
        const int typed =
            (strstr(r.sass, "BF16") != NULL) == (builds[i].type == BF16) && (strstr(r.sass, "TF32") != NULL) == tf32;
        printf("# gemm_f16_mma %s sm_%d: %.0f ms, %d HMMA, %d LDSM, %d LDGSTS, %d registers, %d bytes static shared, "
               "%d local, %d stack\n",
               type, arch, r.ms, hmma, ldsm, ldgsts, r.reg, r.shared, r.local, r.stack);
        /* Fragments by ldmatrix, but for TF32 operands stored along M (A^T)
           or N (B), read value by value; asynchronous copies from sm_80
           where asked. */
        const int ldsm_ok = tf32 && builds[i].ta && !builds[i].tb ? ldsm == 0 : ldsm > 0;
        const int copies_ok = (builds[i].async && arch >= 80) == (ldgsts > 0);
        if (!ldsm_ok || !copies_ok)
            fail_msg("gemm_f16_mma %s on sm_%d: %d LDSM, %d LDGSTS", type, arch, ldsm, ldgsts);
        if (hmma == 0 || !typed || r.reg < 0 || r.reg > 255 || r.local != 0 || r.stack != 0 || r.shared > 48 * 1024)
            fail_msg("gemm_f16_mma %s on sm_%d: %d HMMA (%s), %d registers, %d local and %d stack bytes (spills), %d "
                     "shared",
                     type, arch, hmma, typed ? "of its type" : "not of its type", r.reg, r.local, r.stack, r.shared);
        free(r.sass);
    }
    sass_end(&t);
}

/* The wgmma kernels for sm_90a, in each transpose (the four descriptor
   layouts), bf16, TF32 (A and B K-major), each way of copying (the tensor
   memory accelerator, cp.async, plain loads), and block shapes of the
   schema: warpgroup multiplies (HGMMA, four a K step) of the storage's type
   and no HMMA, the copies asked for, no spills. */
static void test_wgmma_kernel_sass(void **state)
{
    (void)state;
    static struct sass_test t;
    sass_begin(&t, "gemm/gemm_f16_wgmma.cu");
    enum { LOADS, ASYNC, TMA };
    enum { F16, BF16, TF32 };
    static const char *const type_names[] = {"f16", "bf16", "tf32"};
    static const struct {
        int bm, bn, stages, type, ta, tb, copies;
    } builds[] = {{128, 256, 4, F16, 0, 0, TMA},    {128, 256, 4, F16, 1, 1, TMA},   {128, 256, 4, F16, 0, 1, TMA},
                  {128, 256, 4, BF16, 1, 0, TMA},   {64, 256, 5, F16, 0, 0, TMA},    {64, 64, 3, BF16, 0, 1, TMA},
                  {128, 256, 4, F16, 0, 0, ASYNC},  {128, 256, 4, F16, 1, 1, ASYNC}, {128, 128, 6, F16, 0, 0, ASYNC},
                  {128, 256, 4, F16, 0, 0, LOADS},  {64, 64, 3, BF16, 0, 1, LOADS},  {128, 256, 4, TF32, 0, 1, TMA},
                  {64, 256, 5, TF32, 0, 1, TMA},    {64, 64, 3, TF32, 0, 1, TMA},    {128, 256, 4, TF32, 0, 1, ASYNC},
                  {128, 128, 6, TF32, 0, 1, ASYNC}, {128, 256, 4, TF32, 0, 1, LOADS}};
    static const char *const copy_names[] = {"loads", "cp.async", "TMA"};
    for (size_t i = 0; i < sass_builds(sizeof builds / sizeof *builds); i++) {
        char type[80];
        snprintf(type, sizeof type, "%dx%d %d stages %s%s%s %s", builds[i].bm, builds[i].bn, builds[i].stages,
                 type_names[builds[i].type], builds[i].ta ? " A^T" : "", builds[i].tb ? " B^T" : "",
                 copy_names[builds[i].copies]);
        char options[300];
        snprintf(options, sizeof options,
                 "--gpu-architecture=sm_90a -DKILN_WGMMA_BM=%d -DKILN_WGMMA_BN=%d -DKILN_WGMMA_STAGES=%d "
                 "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_ASYNC=%d -DKILN_WGMMA_TMA=%d -DKILN_MMA_BF16=%d "
                 "-DKILN_MMA_TF32=%d",
                 builds[i].bm, builds[i].bn, builds[i].stages, builds[i].ta, builds[i].tb, builds[i].copies != LOADS,
                 builds[i].copies == TMA, builds[i].type == BF16, builds[i].type == TF32);
        struct sass_report r = compile_and_read(&t.api, t.tool, t.dir, "gemm_f16_wgmma.cu", t.source, 90, options);
        if (!r.sass) {
            printf("# gemm_f16_wgmma %s sm_90a: compiled in %.0f ms\n", type, r.ms);
            continue;
        }
        const int hgmma = count_of(r.sass, "HGMMA"), hmma = count_of(r.sass, "HMMA"),
                  ldgsts = count_of(r.sass, "LDGSTS"), utmaldg = count_of(r.sass, "UTMALDG");
        /* bf16 and TF32 multiplies show as HGMMA with .BF16 and .TF32. */
        const int typed = (strstr(r.sass, "BF16") != NULL) == (builds[i].type == BF16) &&
                          (strstr(r.sass, "TF32") != NULL) == (builds[i].type == TF32);
        const int copies_ok = (builds[i].copies == ASYNC) == (ldgsts > 0) && (builds[i].copies == TMA) == (utmaldg > 0);
        printf("# gemm_f16_wgmma %s sm_90a: %.0f ms, %d HGMMA, %d LDGSTS, %d UTMALDG, %d registers, %d local, %d "
               "stack\n",
               type, r.ms, hgmma, ldgsts, utmaldg, r.reg, r.local, r.stack);
        if (hgmma == 0 || hgmma % 4 || hmma != 0 || !typed || !copies_ok || r.reg < 0 || r.reg > 255 || r.local != 0 ||
            r.stack != 0)
            fail_msg("gemm_f16_wgmma %s: %d HGMMA (a multiple of 4 wanted, %s), %d HMMA, %d LDGSTS, %d UTMALDG, %d "
                     "registers, %d local and %d stack bytes (spills)",
                     type, hgmma, typed ? "of its type" : "not of its type", hmma, ldgsts, utmaldg, r.reg, r.local,
                     r.stack);
        free(r.sass);
    }
    sass_end(&t);
}

/* ---- attention on tensor cores ------------------------------------------- */

/* attention_f16_mma's multiplies for one warp's 16 rows, in C: S = Q K^T
   over AT_D of the head dimension, with Q's fragments by ldmatrix (rows of
   the query tile) and K's by ldmatrix without .trans (keys stored as rows),
   then S's accumulators reused as the A fragments of P V (mma_layout.h's
   C-as-A mapping) with V's fragments by ldmatrix.trans, tiles padded by 8
   as the kernel's. P is S itself here (no softmax): the model checks where
   the values go. */
enum { AT_KEYS = 32, AT_D = 32, AT_LD = AT_D + 8 };

static void model_attention_warp(const float *Q, const float *K, const float *V, float *O)
{
    static uint16_t qs[16 * AT_LD], ks[AT_KEYS * AT_LD], vs[AT_KEYS * AT_LD];
    for (int r = 0; r < 16; r++)
        for (int d = 0; d < AT_D; d++)
            put(qs, 1, r * AT_LD + d, Q[r * AT_D + d]);
    for (int j = 0; j < AT_KEYS; j++)
        for (int d = 0; d < AT_D; d++)
            put(ks, 1, j * AT_LD + d, K[j * AT_D + d]), put(vs, 1, j * AT_LD + d, V[j * AT_D + d]);
    uint16_t out[32][8];
    float sc[AT_KEYS / 8][32][4], o[AT_D / 8][32][4];
    memset(sc, 0, sizeof sc);
    memset(o, 0, sizeof o);
    int at[32];
    for (int kk = 0; kk < AT_D; kk += 16) {
        float a[32][8], r[32][8];
        for (int l = 0; l < 32; l++)
            at[l] = kiln_mma_ldsm_down_row(l) * AT_LD + kk + kiln_mma_ldsm_down_col(l, 8);
        emulated_ldmatrix(qs, at, 0, out);
        registers_of((const uint16_t(*)[8])out, 1, a);
        for (int nt = 0; nt < AT_KEYS / 8; nt += 2) {
            for (int l = 0; l < 32; l++)
                at[l] = (nt * 8 + kiln_mma_ldsm_across_row(l)) * AT_LD + kk + kiln_mma_ldsm_across_col(l, 8);
            emulated_ldmatrix(ks, at, 0, out);
            registers_of((const uint16_t(*)[8])out, 1, r);
            float b0[32][4], b1[32][4];
            for (int l = 0; l < 32; l++)
                for (int e = 0; e < 4; e++)
                    b0[l][e] = r[l][e], b1[l][e] = r[l][4 + e];
            emulated_mma((const float(*)[8])a, (const float(*)[4])b0, sc[nt]);
            emulated_mma((const float(*)[8])a, (const float(*)[4])b1, sc[nt + 1]);
        }
    }
    for (int kk = 0; kk < AT_KEYS / 16; kk++) {
        float a[32][8], r[32][8];
        for (int l = 0; l < 32; l++)
            for (int e = 0; e < 8; e++)
                a[l][e] = sc[2 * kk + kiln_mma_a_from_c_tile(e)][l][kiln_mma_a_from_c_elem(e)];
        for (int dt = 0; dt < AT_D / 8; dt += 2) {
            for (int l = 0; l < 32; l++)
                at[l] = (kk * 16 + kiln_mma_ldsm_down_row(l)) * AT_LD + dt * 8 + kiln_mma_ldsm_down_col(l, 8);
            emulated_ldmatrix(vs, at, 1, out);
            registers_of((const uint16_t(*)[8])out, 1, r);
            float b0[32][4], b1[32][4];
            for (int l = 0; l < 32; l++)
                for (int e = 0; e < 4; e++)
                    b0[l][e] = r[l][e], b1[l][e] = r[l][4 + e];
            emulated_mma((const float(*)[8])a, (const float(*)[4])b0, o[dt]);
            emulated_mma((const float(*)[8])a, (const float(*)[4])b1, o[dt + 1]);
        }
    }
    for (int dt = 0; dt < AT_D / 8; dt++)
        for (int l = 0; l < 32; l++)
            for (int e = 0; e < 4; e++)
                O[kiln_mma_c_row(l, e) * AT_D + dt * 8 + kiln_mma_c_col(l, e)] = o[dt][l][e];
}

static void test_attention_mma_model(void **state)
{
    (void)state;
    /* Small integers: S and (Q K^T) V are exact in float. */
    static float Q[16 * AT_D], K[AT_KEYS * AT_D], V[AT_KEYS * AT_D], O[16 * AT_D];
    uint64_t seed = kt_group_seed;
    kt_fill_uniform(Q, 16 * AT_D, -2.0f, 3.0f, &seed);
    kt_fill_uniform(K, AT_KEYS * AT_D, -2.0f, 3.0f, &seed);
    kt_fill_uniform(V, AT_KEYS * AT_D, -2.0f, 3.0f, &seed);
    for (int i = 0; i < 16 * AT_D; i++)
        Q[i] = floorf(Q[i]);
    for (int i = 0; i < AT_KEYS * AT_D; i++)
        K[i] = floorf(K[i]), V[i] = floorf(V[i]);
    for (int i = 0; i < 16 * AT_D; i++)
        O[i] = NAN;
    model_attention_warp(Q, K, V, O);
    for (int i = 0; i < 16; i++)
        for (int x = 0; x < AT_D; x++) {
            double ref = 0;
            for (int j = 0; j < AT_KEYS; j++) {
                double s = 0;
                for (int d = 0; d < AT_D; d++)
                    s += (double)Q[i * AT_D + d] * K[j * AT_D + d];
                ref += s * V[j * AT_D + x];
            }
            if (O[i * AT_D + x] != ref)
                fail_msg("attention model O(%d, %d) = %g, (Q K^T) V = %g: mma_layout.h disagrees with the PTX ISA", i,
                         x, O[i * AT_D + x], ref);
        }
}

/* The CUDA backend's own attention kernels for sm_80 to sm_90, fp16 and
   bf16 (and fp32 for decoding), each switch and split: the tensor-core
   kernel at the shipped blocks and the smallest (HMMA of its type,
   fragments by ldmatrix, cp.async copies), the decoding kernel at 1, 4 and
   8 rows and head dimensions to 256 (no HMMA); no spills. */
static void test_attention_kernels_sass(void **state)
{
    (void)state;
    static struct sass_test t;
    sass_begin(&t, "attention/attention_f16_mma.cu");
    static char decode_source[1 << 16];
    read_kernel("attention/attention_decode.cu", decode_source, sizeof decode_source);
    enum { F32, F16, BF16 };
    static const struct {
        int decode, arch, bq, bk, warps, d, dtype, causal, mask, lengths, lse, split;
    } builds[] = {
        /* decode, arch, block_q (rows), block_kv, warps, d, dtype, causal, mask, lengths, lse, split */
        {0, 80, 64, 64, 4, 128, F16, 0, 0, 0, 0, 0},   {0, 86, 64, 64, 4, 64, F16, 1, 0, 0, 1, 0},
        {0, 89, 64, 64, 4, 80, BF16, 0, 1, 1, 0, 0},   {0, 90, 128, 64, 8, 128, F16, 0, 0, 0, 0, 0},
        {0, 90, 128, 64, 8, 128, BF16, 1, 1, 1, 1, 1}, {0, 90, 128, 64, 4, 64, F16, 1, 0, 0, 1, 0},
        {0, 90, 16, 64, 1, 128, F16, 0, 0, 1, 1, 1},   {0, 80, 32, 16, 1, 8, BF16, 1, 1, 1, 0, 1},
        {1, 80, 4, 0, 4, 128, F32, 0, 0, 0, 0, 1},     {1, 90, 8, 0, 4, 128, F16, 1, 1, 1, 1, 1},
        {1, 86, 1, 0, 8, 256, BF16, 0, 0, 0, 1, 0},    {1, 89, 4, 0, 2, 20, F32, 1, 1, 0, 0, 1},
    };
    static const char *const types[] = {"f32", "f16", "bf16"};
    for (size_t i = 0; i < sass_builds(sizeof builds / sizeof *builds); i++) {
        const int arch = builds[i].arch, decode = builds[i].decode;
        const char *what = decode ? "attention_decode" : "attention_f16_mma";
        char type[120], options[500], switches[200];
        snprintf(type, sizeof type, "%d%s %d warps%s d%d %s%s%s%s%s%s", builds[i].bq, decode ? " rows" : "",
                 builds[i].warps,
                 decode  ? ""
                 : i % 2 ? " 2 stages"
                         : " 1 stage",
                 builds[i].d, types[builds[i].dtype], builds[i].causal ? " causal" : "", builds[i].mask ? " mask" : "",
                 builds[i].lengths ? " key-lengths" : "", builds[i].lse ? " lse" : "", builds[i].split ? " split" : "");
        snprintf(switches, sizeof switches,
                 "-DKILN_F16=%d -DKILN_BF16=%d -DKILN_MMA_BF16=%d -DKILN_ATTN_CAUSAL=%d -DKILN_ATTN_MASK=%d "
                 "-DKILN_ATTN_KEY_LENGTHS=%d -DKILN_ATTN_LSE=%d",
                 builds[i].dtype == F16, builds[i].dtype == BF16, builds[i].dtype == BF16, builds[i].causal,
                 builds[i].mask, builds[i].lengths, builds[i].lse);
        if (decode)
            snprintf(options, sizeof options,
                     "-DKILN_DECODE_WARPS=%d -DKILN_DECODE_ROWS=%d -DKILN_DECODE_D=%d -DKILN_DECODE_SPLIT=%d %s",
                     builds[i].warps, builds[i].bq, builds[i].d, builds[i].split, switches);
        else
            snprintf(options, sizeof options,
                     "-DKILN_AMMA_BLOCK_Q=%d -DKILN_AMMA_BLOCK_KV=%d -DKILN_AMMA_WARPS=%d -DKILN_AMMA_D=%d "
                     "-DKILN_AMMA_SPLIT=%d -DKILN_AMMA_STAGES=%d %s",
                     builds[i].bq, builds[i].bk, builds[i].warps, builds[i].d, builds[i].split, 1 + (int)(i % 2),
                     switches);
        char file[64];
        snprintf(file, sizeof file, "%s.cu", what);
        struct sass_report r =
            compile_and_read(&t.api, t.tool, t.dir, file, decode ? decode_source : t.source, arch, options);
        if (!r.sass) {
            printf("# %s %s sm_%d: compiled in %.0f ms\n", what, type, arch, r.ms);
            continue;
        }
        const int hmma = count_of(r.sass, "HMMA"), ldsm = count_of(r.sass, "LDSM"), ldgsts = count_of(r.sass, "LDGSTS");
        const int typed = builds[i].dtype == BF16 ? strstr(r.sass, "BF16") != NULL : strstr(r.sass, "BF16") == NULL;
        printf("# %s %s sm_%d: %.0f ms, %d HMMA, %d LDSM, %d LDGSTS, %d registers, %d local, %d stack\n", what, type,
               arch, r.ms, hmma, ldsm, ldgsts, r.reg, r.local, r.stack);
        const int shape_ok = decode ? hmma == 0 : hmma > 0 && typed && ldsm > 0 && ldgsts > 0;
        if (!shape_ok || r.reg < 0 || r.reg > 255 || r.local != 0 || r.stack != 0)
            fail_msg("%s %s on sm_%d: %d HMMA (%s), %d LDSM, %d LDGSTS, %d registers, %d local and %d stack bytes "
                     "(spills)",
                     what, type, arch, hmma, typed ? "of its type" : "not of its type", ldsm, ldgsts, r.reg, r.local,
                     r.stack);
        free(r.sass);
    }
    sass_end(&t);
}

/* The merge of split attention (cl/attention/attention_combine.cl) as GPUs
   take it, a thread an element of O: each chunk of 16 splits has all its
   loads, 16 log-sum-exps and 16 partial outputs, issued before the first
   is used, so that a thread waits
   on memory once a chunk: all 32 loads come before the first exp (MUFU.EX2,
   which waits for the chunk's maximum). Before, it waited about twice a
   split: the loops over the runtime split count were unrolled by four, and
   each partial output was loaded behind its weight. sm_80 and sm_90, fp32 and fp16
   storage, with and without the log-sum-exp; no spills. */
static void test_combine_kernel_sass(void **state)
{
    (void)state;
    static struct sass_test t;
    sass_begin_tree(&t, "cl", "attention/attention_combine.cl");
    static const int archs[] = {80, 90};
    for (size_t i = 0; i < sass_builds(sizeof archs / sizeof *archs * 4); i++) {
        const size_t a = i / 4;
        const int v = (int)(i % 4);
        char options[160];
        snprintf(options, sizeof options,
                 "-DKILN_COMBINE_COLS=1 -DKILN_COMBINE_WG=256 -DKILN_F16=%d -DKILN_ATTN_LSE=%d", v & 1, v >> 1);
        struct sass_report r =
            compile_and_read(&t.api, t.tool, t.dir, "attention_combine.cl", t.source, archs[a], options);
        if (!r.sass) {
            printf("# attention_combine %s sm_%d: compiled in %.0f ms\n", options, archs[a], r.ms);
            continue;
        }
        const char *first_use = strstr(r.sass, "MUFU.EX2");
        int loads = 0;
        for (const char *at = r.sass; (at = strstr(at, "LDG")) != NULL && (!first_use || at < first_use); at++)
            loads++;
        printf("# attention_combine %s sm_%d: %d loads before the first exp, %d registers\n", options, archs[a], loads,
               r.reg);
        if (!first_use || loads < 32 || r.local != 0 || r.stack != 0)
            fail_msg("attention_combine %s on sm_%d: %d loads before the chunk's first use (32 wanted), %d local "
                     "and %d stack bytes",
                     options, archs[a], loads, r.local, r.stack);
        free(r.sass);
    }
    sass_end(&t);
}

/* The tensor-core convolution for sm_80 to sm_90, fp16 and bf16, without
   and with its epilogue (bias, residual, an activation), with the -D
   options of its conv.mma group in the NVIDIA profile of each architecture
   (the roots' blocks, nvidia-hopper's): one HMMA of its type per mma tile
   and 16 of K, fragments by ldmatrix (4 for A and 2 for B per 16 of K, for
   warps of 4 x 4 tiles), cp.async copies, no spills. */
static void test_conv_mma_kernel_sass(void **state)
{
    (void)state;
    static struct sass_test t;
    sass_begin(&t, "conv/conv_f16_igemm_mma.cu");
    static const struct {
        int arch;
        const char *profile;
    } archs[] = {{80, "nvidia-ampere-ga100"}, {86, "nvidia-ampere"}, {89, "nvidia-ada"}, {90, "nvidia-hopper"}};
    for (size_t i = 0; i < sass_builds(sizeof archs / sizeof *archs * 4); i++) {
        const int arch = archs[i / 4].arch, bf16 = i & 1, epilogue = i >> 1 & 1;
        kiln_context *ctx = kt_profile_context(archs[i / 4].profile);
        const struct kiln_param_conv_mma *p = &kiln_profile_params(ctx->profile)->conv_mma;
        const int bk = p->bk, mi = p->bm / p->warps_m / 16, ni = p->bn / p->warps_n / 8;
        struct kiln_options o = {0};
        kiln_profile_defines(&o, KILN_GROUP_conv_mma, p);
        kiln_options_add(&o, "-DKILN_MMA_BF16=%d -DKILN_HAS_BIAS=%d -DKILN_HAS_Z=%d -DKILN_ACT=%d", bf16, epilogue,
                         epilogue, epilogue ? (bf16 ? KILN_ACT_LEAKY_RELU : KILN_ACT_GELU) : 0);
        char type[160];
        snprintf(type, sizeof type, "%s %dx%dx%d %s%s", archs[i / 4].profile, p->bm, p->bn, bk, bf16 ? "bf16" : "f16",
                 epilogue ? (bf16 ? " bias+residual leaky" : " bias+residual gelu") : "");
        struct sass_report r =
            compile_and_read(&t.api, t.tool, t.dir, "conv_f16_igemm_mma.cu", t.source, arch, kiln_options_text(&o));
        kiln_options_free(&o);
        kiln_context_destroy(ctx);
        if (!r.sass) {
            printf("# conv_f16_igemm_mma %s sm_%d: compiled in %.0f ms\n", type, arch, r.ms);
            continue;
        }
        const int hmma = count_of(r.sass, "HMMA"), ldsm = count_of(r.sass, "LDSM"), ldgsts = count_of(r.sass, "LDGSTS");
        const int typed = bf16 ? strstr(r.sass, "BF16") != NULL : strstr(r.sass, "BF16") == NULL;
        printf("# conv_f16_igemm_mma %s sm_%d: %.0f ms, %d HMMA, %d LDSM, %d LDGSTS, %d registers, %d local, %d "
               "stack\n",
               type, arch, r.ms, hmma, ldsm, ldgsts, r.reg, r.local, r.stack);
        /* Per 16 of K, a warp's mi x ni mma tiles and mi + ni/2 ldmatrix. */
        if (hmma != mi * ni * bk / 16 || !typed || ldsm != (mi + ni / 2) * bk / 16 || ldgsts == 0 || r.reg < 0 ||
            r.reg > 255 || r.local != 0 || r.stack != 0)
            fail_msg("conv_f16_igemm_mma %s on sm_%d: %d HMMA (%s), %d LDSM, %d LDGSTS, %d registers, %d local and "
                     "%d stack bytes (spills)",
                     type, arch, hmma, typed ? "of its type" : "not of its type", ldsm, ldgsts, r.reg, r.local,
                     r.stack);
        free(r.sass);
    }
    sass_end(&t);
}

struct nvrtc_sweep {
    const struct kiln_cuda_api *api;
    int programs, failures;
    double ms;
    int ends_only; /* the oldest and the newest architecture alone */
};

/* The architectures every shared program is compiled for: the oldest kiln
   supports, and each one at which a source's __CUDA_ARCH__ test changes
   its answer, and the newest. sm_86 and sm_89 take sm_80's branches and
   are compiled in the SASS tests and in test_nvrtc_compiles_each_arch;
   sweep_archs_cover fails when a source tests another architecture. */
static const int sweep_archs[] = {75, 80, 90};

/* Each "__CUDA_ARCH__ <op> N" in the program's source names an
   architecture the sweep must compile for. */
static void sweep_archs_cover(const char *label, const char *text)
{
    for (const char *s = text; (s = strstr(s, "__CUDA_ARCH__")) != NULL;) {
        s += strlen("__CUDA_ARCH__");
        const char *p = s + strspn(s, " \t");
        p += strspn(p, "<>=!");
        p += strspn(p, " \t");
        if (*p < '0' || *p > '9')
            continue;
        const int arch = atoi(p) / 10;
        int swept = 0;
        for (size_t i = 0; i < sizeof sweep_archs / sizeof *sweep_archs; i++)
            swept |= sweep_archs[i] == arch;
        if (!swept)
            fail_msg("%s tests __CUDA_ARCH__ against %d: add sm_%d to sweep_archs", label, arch * 10, arch);
    }
}

static void compile_for_each_arch(void *user, const char *label, const char *source, size_t length, const char *options)
{
    struct nvrtc_sweep *w = user;
    const int *archs = sweep_archs;
    char *text = strndup(source, length), *opts = malloc(strlen(options) + 32);
    assert_true(text && opts);
    sweep_archs_cover(label, text);
    sprintf(opts, "-default-device %s", options);
    w->programs++;
    /* A program that names its target (wgmma's sm_90a) builds for it alone;
       one that states its oldest (KILN_MIN_ARCH) for that and newer. */
    const int named = strstr(options, "--gpu-architecture=sm_90a") != NULL;
    const char *min = strstr(options, "-DKILN_MIN_ARCH=");
    const int oldest = min ? atoi(min + 16) : 0;
    for (size_t i = 0; i < sizeof sweep_archs / sizeof *sweep_archs; i++) {
        if ((named && archs[i] != 90) || archs[i] < oldest ||
            (w->ends_only && archs[i] != 90 && archs[i] != (oldest > 75 ? oldest : 75)))
            continue;
        void *cubin = NULL;
        size_t size = 0;
        const double t0 = now_ms();
        if (kiln_cuda_compile(w->api, text, label, archs[i], opts, &cubin, &size) != KILN_SUCCESS) {
            printf("# %s for sm_%d with \"%s\": %.2000s\n", label, archs[i], options, kiln_last_error_detail());
            w->failures++;
        } else if (kiln_cuda_cubin_arch(cubin, size) != archs[i]) {
            w->failures++;
        }
        w->ms += now_ms() - t0;
        free(cubin);
    }
    free(text);
    free(opts);
}

/* Plans whose programs cover every shared kernel: GEMM families, split K and
   16-bit storage; flash attention with every switch; tiled implicit GEMM with
   its epilogue, both layouts and split K; direct convolution and pooling
   with one vector lane; softmax, activation and fill; the peak kernels. */
static void build_shared_programs(kiln_context *ctx)
{
    static const size_t gemms[][5] = {
        /* m, n, k, trans_b, dtype */
        {1, 300, 70, 0, KILN_F32},     {130, 70, 40, 1, KILN_F32},  {64, 64, 20000, 0, KILN_F16},
        {512, 512, 256, 0, KILN_F16},  {16, 1000, 64, 1, KILN_F32}, {200, 300, 64, 1, KILN_BF16},
        {64, 64, 20000, 0, KILN_BF16},
    };
    for (size_t i = 0; i < sizeof gemms / sizeof *gemms; i++) {
        kiln_gemm_desc d;
        kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, gemms[i][3] ? KILN_TRANS : KILN_NO_TRANS, gemms[i][0],
                            gemms[i][1], gemms[i][2]);
        d.dtype = (kiln_dtype)gemms[i][4];
        kiln_gemm_plan *plan = NULL;
        kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_gemm_plan_destroy(plan);
    }
    for (int variant = 0; variant < 4; variant++) {
        kiln_attention_desc d;
        kiln_attention_desc_init(&d, variant ? KILN_BHSD : KILN_BSHD, 1, 4, variant == 2 ? 1 : 70, 90,
                                 variant == 1 ? 128 : 64);
        d.kv_heads = variant == 2 ? 1 : 2;
        d.dtype = variant == 0 ? KILN_F16 : variant == 3 ? KILN_BF16 : KILN_F32;
        d.causal = variant != 1;
        d.mask = variant == 0 ? KILN_ATTENTION_MASK_BHQK : KILN_ATTENTION_MASK_NONE;
        d.key_lengths = d.lse = variant == 0;
        kiln_attention_plan *plan = NULL;
        kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_attention_plan_destroy(plan);
        d.algo = KILN_ATTENTION_NAIVE;
        kt_assert_status(kiln_attention_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_attention_plan_destroy(plan);
    }
    for (int variant = 0; variant < 3; variant++) {
        kiln_conv2d_desc d;
        kiln_conv2d_desc_init(&d, variant == 1 ? KILN_NCHW : KILN_NHWC, 1, 64, variant == 1 ? 7 : 20,
                              variant == 1 ? 7 : 20, 32, 3, 3);
        d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
        d.has_bias = 1;
        d.activation = KILN_ACT_RELU;
        d.beta = variant == 1 ? 0.0f : 1.0f;
        d.dtype = variant == 1 ? KILN_F32 : variant == 2 ? KILN_BF16 : KILN_F16;
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_SUCCESS);
        kiln_conv2d_plan_destroy(plan);
    }
    /* Direct convolution with one lane: depthwise in both layouts. A fused
       pool, which takes column pairs as vectors, is refused. */
    for (int variant = 0; variant < 3; variant++) {
        kiln_conv2d_desc d;
        kiln_conv2d_desc_init(&d, variant == 1 ? KILN_NHWC : KILN_NCHW, 1, 32, 14, 14, 32, 3, 3);
        d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
        d.groups = variant < 2 ? 32 : 1;
        d.fused_maxpool = variant == 2;
        d.has_bias = 1;
        d.activation = KILN_ACT_RELU;
        kiln_conv2d_plan *plan = NULL;
        kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), variant == 2 ? KILN_ERROR_UNSUPPORTED : KILN_SUCCESS);
        kiln_conv2d_plan_destroy(plan);
    }
    kiln_buffer *x = NULL, *y = NULL;
    kt_assert_status(kiln_buffer_create(ctx, 4096 * sizeof(float), &x), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, 4096 * sizeof(float), &y), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(x, 0, 4096, 0.5f), KILN_SUCCESS);
    kt_assert_status(kiln_softmax(ctx, 4, 1000, 1, x, y, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_activation_forward(ctx, KILN_ACT_GELU, 0.0f, 4096, x, y, NULL), KILN_SUCCESS);
    /* Pooling with one lane: max and average, both layouts. */
    for (int variant = 0; variant < 2; variant++) {
        const kiln_pool2d_desc pd = {variant ? KILN_NHWC : KILN_NCHW,         1, 16, 15, 15, 3, 3, 2, 2, 1, 1, 1, 1,
                                     variant ? KILN_POOL_AVG : KILN_POOL_MAX, 0};
        kt_assert_status(kiln_pool2d(ctx, &pd, x, y, NULL), KILN_SUCCESS);
    }
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    kiln_buffer_destroy(x);
    kiln_buffer_destroy(y);
    /* The peak kernels, with one lane. */
    struct kiln_peaks peaks;
    kt_assert_status(kiln_measure_peaks(ctx, &peaks), KILN_SUCCESS);
    assert_int_equal(peaks.fma_lanes, 1);
}

static void test_shared_kernels_compile_with_nvrtc(void **state)
{
    (void)state;
    struct kiln_cuda_api api;
    load_nvrtc_or_skip(&api);
    /* Hopper's tiles for every architecture of the sweep; Turing's, whose
       programs differ from them in their parameters alone, for the oldest
       and the newest (not under AddressSanitizer). */
    static const char *const profiles[] = {"nvidia-hopper", "nvidia-turing"};
    setenv("KILN_CUDA_ROUTES", "1", 1);
    for (size_t i = 0; i < (UNDER_ASAN ? 1 : sizeof profiles / sizeof *profiles); i++) {
        kiln_context *ctx = kt_profile_context(profiles[i]);
        assert_false(ctx->vector_kernels);
        build_shared_programs(ctx);
        struct nvrtc_sweep sweep = {&api, 0, 0, 0.0, i > 0 || SWEEP_ENDS_ONLY};
        kiln_program_cache_each(ctx, compile_for_each_arch, &sweep);
        printf("# %s: %d programs, each compiled by NVRTC for sm_%s in %.1f s, %d failed\n", profiles[i],
               sweep.programs, sweep.ends_only ? "75 (or its oldest) and 90" : "75, 80 and 90", sweep.ms / 1e3,
               sweep.failures);
        assert_true(sweep.programs >= 12);
        assert_int_equal(sweep.failures, 0);
        kiln_context_destroy(ctx);
    }
    unsetenv("KILN_CUDA_ROUTES");
    /* The CUDA backend's own sources: gemm_f16_mma.cu from the embedded cu/
       tree, its include resolved there. */
    extern const struct kiln_backend kiln_cuda_backend;
    char *text = NULL;
    size_t length = 0;
    kt_assert_status(kiln_source_expand(&kiln_cuda_backend, "gemm/gemm_f16_mma.cu", &text, &length), KILN_SUCCESS);
    assert_non_null(strstr(text, "kiln_mma_ldsm_down_row"));
    struct nvrtc_sweep sweep = {&api, 0, 0, 0.0, SWEEP_ENDS_ONLY};
    compile_for_each_arch(&sweep, "gemm/gemm_f16_mma.cu", text, length, "-DKILN_TRANS_A=1 -DKILN_MMA_ASYNC=1");
    /* TF32 (sm_80 on), each transpose. */
    for (int t = 0; t < 4; t++) {
        char options[120];
        snprintf(options, sizeof options,
                 "-DKILN_MMA_TF32=1 -DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_ASYNC=1 -DKILN_MIN_ARCH=80", t & 1,
                 t >> 1);
        compile_for_each_arch(&sweep, "gemm/gemm_f16_mma.cu", text, length, options);
    }
    free(text);
    /* The copy the wgmma family's TF32 plans make of operands stored along
       M or N, from the embedded tree too. */
    kt_assert_status(kiln_source_expand(&kiln_cuda_backend, "gemm/gemm_f32_transpose.cu", &text, &length),
                     KILN_SUCCESS);
    compile_for_each_arch(&sweep, "gemm/gemm_f32_transpose.cu", text, length, "");
    printf("# gemm_f16_mma.cu (fp16; TF32 in each transpose, from sm_80) and gemm_f32_transpose.cu for sm_%s: "
           "%.1f s, %d failed\n",
           sweep.ends_only ? "75 (or the oldest) and 90" : "75, 80 and 90", sweep.ms / 1e3, sweep.failures);
    assert_int_equal(sweep.failures, 0);
    free(text);
    /* conv_f16_igemm_mma.cu: its includes from cu/ (the gather, the
       pipeline) and from the shared tree cl/ (the epilogue, the shape
       arguments); sm_80 on. */
    kt_assert_status(kiln_source_expand(&kiln_cuda_backend, "conv/conv_f16_igemm_mma.cu", &text, &length),
                     KILN_SUCCESS);
    assert_true(strstr(text, "kiln_igemm_tap_next") && strstr(text, "mma_warp_step") &&
                strstr(text, "KILN_ACTIVATION_FUNCTION") && strstr(text, "IGEMM_SHAPE_ARGS"));
    static const int conv_archs[] = {80, 86, 89, 90};
    for (size_t i = 0; i < sizeof conv_archs / sizeof *conv_archs; i++) {
        void *cubin = NULL;
        size_t size = 0;
        kt_assert_status(kiln_cuda_compile(&api, text, "conv/conv_f16_igemm_mma.cu", conv_archs[i],
                                           "-default-device -DKILN_CONV_MMA_BM=64 -DKILN_CONV_MMA_BN=64 "
                                           "-DKILN_CONV_MMA_BK=32 -DKILN_CONV_MMA_WARPS_M=2 -DKILN_CONV_MMA_WARPS_N=2 "
                                           "-DKILN_CONV_MMA_STAGES=2 -DKILN_ACT=4 -DKILN_HAS_BIAS=1",
                                           &cubin, &size),
                         KILN_SUCCESS);
        assert_int_equal(kiln_cuda_cubin_arch(cubin, size), conv_archs[i]);
        free(cubin);
    }
    free(text);
    kiln_cuda_unload(&api);
}

static void test_interop_elsewhere(void **state)
{
    (void)state;
    CUdevice device = 7;
    CUstream stream = (CUstream)(uintptr_t)1;
    kt_assert_status(kiln_context_get_cuda(NULL, &device, &stream), KILN_ERROR_INVALID_ARGUMENT);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(kt_ctx, 64, &buf), KILN_SUCCESS);
    if (strcmp(kt_ctx->backend->name, "cuda") != 0) {
        kt_assert_status(kiln_context_get_cuda(kt_ctx, &device, &stream), KILN_ERROR_UNSUPPORTED);
        assert_int_equal(device, 7); /* a refusal writes nothing */
        kiln_buffer *wrapped = NULL;
        kt_assert_status(kiln_buffer_wrap_cuda(kt_ctx, 4096, &wrapped), KILN_ERROR_UNSUPPORTED);
        assert_null(wrapped);
        assert_int_equal(kiln_buffer_get_cuda(buf), 0);
    }
    assert_int_equal(kiln_buffer_get_cuda(NULL), 0);
    kiln_buffer_destroy(buf);
    kiln_backend_info cuda;
    kt_assert_status(kiln_backend_get_info(1, &cuda), KILN_SUCCESS);
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_wrap_cuda(-1, NULL, NULL, &ctx), KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_context_wrap_cuda((CUdevice)cuda.devices, NULL, NULL, &ctx), KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(kiln_last_error_detail(), "driver"));
    assert_null(ctx);
    kt_assert_status(kiln_context_wrap_cuda(0, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

/* The CUDA backend's device 0, or skip. */
static const struct kiln_cuda_api *device_or_skip(void)
{
    const struct kiln_cuda_api *api = kiln_cuda_api_get();
    if (api->devices < 1 || !api->nvrtc_lib) {
        printf("# skipped: no CUDA device (driver: %s; NVRTC: %s)\n", api->driver, api->nvrtc);
        skip();
    }
    return api;
}

/* x[i] = i through kiln's fill on ctx, read back through `buf`. */
static void fill_and_check(kiln_context *ctx, kiln_buffer *write_to, kiln_buffer *read_from, size_t count)
{
    kt_assert_status(kiln_buffer_fill_f32(write_to, 0, count, 0.25f), KILN_SUCCESS);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    float *got = malloc(count * sizeof *got);
    assert_non_null(got);
    kt_assert_status(kiln_buffer_read(read_from, 0, count * sizeof *got, got), KILN_SUCCESS);
    for (size_t i = 0; i < count; i++)
        if (got[i] != 0.25f)
            fail_msg("element %zu is %g after the fill, not 0.25", i, got[i]);
    free(got);
}

static void test_interop_on_a_cuda_device(void **state)
{
    (void)state;
    const struct kiln_cuda_api *api = device_or_skip();
    /* kiln's own stream. */
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_wrap_cuda(0, NULL, NULL, &ctx), KILN_SUCCESS);
    CUdevice device = -1;
    CUstream own = NULL;
    kt_assert_status(kiln_context_get_cuda(ctx, &device, &own), KILN_SUCCESS);
    assert_int_equal(device, 0);
    assert_non_null(own);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.backend, "cuda");
    printf("# %s, %s, profile %s\n", info.name, info.arch, info.profile);

    /* A caller's allocation: kiln's own buffer's pointer, wrapped. */
    kiln_buffer *owned = NULL, *wrapped = NULL;
    kt_assert_status(kiln_buffer_create(ctx, 1000 * sizeof(float), &owned), KILN_SUCCESS);
    const CUdeviceptr ptr = kiln_buffer_get_cuda(owned);
    assert_true(ptr != 0);
    kt_assert_status(kiln_buffer_wrap_cuda(ctx, ptr + 16, &wrapped), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error_detail(), "inside the allocation"));
    kt_assert_status(kiln_buffer_wrap_cuda(ctx, 0, &wrapped), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_wrap_cuda(ctx, ptr, &wrapped), KILN_SUCCESS);
    assert_true(kiln_buffer_size(wrapped) >= 1000 * sizeof(float));
    assert_int_equal(kiln_buffer_get_cuda(wrapped), ptr);
    fill_and_check(ctx, wrapped, owned, 1000);
    kiln_buffer_destroy(wrapped); /* frees nothing: the allocation is owned's */
    fill_and_check(ctx, owned, owned, 1000);
    kiln_buffer_destroy(owned);
    kiln_context_destroy(ctx);

    /* A caller's stream in the primary context: kiln queues on it and never
       destroys it. */
    CUcontext primary = NULL;
    CUdevice dev0 = 0;
    assert_int_equal(api->cuDeviceGet(&dev0, 0), 0);
    assert_int_equal(api->cuDevicePrimaryCtxRetain(&primary, dev0), 0);
    assert_int_equal(api->cuCtxPushCurrent(primary), 0);
    CUstream stream = NULL;
    assert_int_equal(api->cuStreamCreate(&stream, KILN_CU_STREAM_NON_BLOCKING), 0);
    kt_assert_status(kiln_context_wrap_cuda(0, stream, NULL, &ctx), KILN_SUCCESS);
    CUstream got = NULL;
    kt_assert_status(kiln_context_get_cuda(ctx, NULL, &got), KILN_SUCCESS);
    assert_ptr_equal(got, stream);
    kt_assert_status(kiln_buffer_create(ctx, 5000 * sizeof(float), &owned), KILN_SUCCESS);
    fill_and_check(ctx, owned, owned, 5000);
    kiln_buffer_destroy(owned);
    kiln_context_destroy(ctx);
    assert_int_equal(api->cuStreamSynchronize(stream), 0); /* still the caller's */
    assert_int_equal(api->cuStreamDestroy(stream), 0);
    CUcontext popped;
    api->cuCtxPopCurrent(&popped);
    api->cuDevicePrimaryCtxRelease(dev0);
}

/* One entry file in `dir`: its key (malloc'd) from the entry header. */
static char *only_entry_key(const char *dir)
{
    char pattern[1100];
    snprintf(pattern, sizeof pattern, "%s/*.kbin", dir);
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    assert_int_equal(g.gl_pathc, 1);
    size_t size = 0;
    unsigned char *entry = kt_read_bytes(g.gl_pathv[0], &size);
    globfree(&g);
    assert_true(entry && size > 32);
    const size_t key_len = (size_t)entry[12] | (size_t)entry[13] << 8 | (size_t)entry[14] << 16;
    char *key = strndup((const char *)entry + 32, key_len);
    free(entry);
    return key;
}

static void cache_counts(kiln_context *ctx, uint64_t *hits, uint64_t *builds, uint64_t *discarded)
{
    kiln_cache_info c;
    kt_assert_status(kiln_context_get_cache_info(ctx, &c), KILN_SUCCESS);
    *hits = c.disk_hits, *builds = c.builds, *discarded = c.discarded;
}

static void test_cubin_cache_round_trip(void **state)
{
    (void)state;
    const struct kiln_cuda_api *api = device_or_skip();
    char *dir = kt_temp_dir();
    kiln_context_options o;
    kiln_context_options_init(&o);
    o.cache_dir = dir;
    uint64_t hits, builds, discarded;
    for (int round = 0; round < 3; round++) {
        kiln_context *ctx = NULL;
        kt_assert_status(kiln_context_wrap_cuda(0, NULL, &o, &ctx), KILN_SUCCESS);
        kiln_buffer *b = NULL;
        kt_assert_status(kiln_buffer_create(ctx, 300 * sizeof(float), &b), KILN_SUCCESS);
        fill_and_check(ctx, b, b, 300);
        cache_counts(ctx, &hits, &builds, &discarded);
        printf("# round %d: %llu disk hits, %llu builds, %llu discarded\n", round, (unsigned long long)hits,
               (unsigned long long)builds, (unsigned long long)discarded);
        const int sm = ctx->desc.cc_major * 10 + ctx->desc.cc_minor;
        kiln_buffer_destroy(b);
        kiln_context_destroy(ctx);
        if (round == 0) { /* built and stored */
            assert_true(builds == 1 && hits == 0 && discarded == 0);
        } else if (round == 1) { /* loaded */
            assert_true(builds == 0 && hits == 1 && discarded == 0);
            /* The entry's CUBIN replaced by one for another arch, under
               the same key and with a valid checksum. */
            char *key = only_entry_key(dir);
            void *cubin = NULL;
            size_t size = 0;
            kt_assert_status(kiln_cuda_compile(api, kernel, "scale.cu", sm == 75 ? 80 : 75, NULL, &cubin, &size),
                             KILN_SUCCESS);
            kt_assert_status(kiln_disk_cache_store(dir, key, cubin, size), KILN_SUCCESS);
            free(cubin);
            free(key);
        } else { /* rejected, discarded, built again */
            assert_true(builds == 1 && hits == 0 && discarded == 1);
        }
    }
    kt_remove_tree(dir);
    free(dir);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_without_a_driver_no_devices));
    kt_add(&tests, cmocka_unit_test(test_stub_library_no_devices));
    kt_add(&tests, cmocka_unit_test(test_nvrtc_compiles_each_arch));
    kt_add(&tests, cmocka_unit_test(test_cubin_arch_rejects_other_files));
    kt_add(&tests, cmocka_unit_test(test_mma_tiling_model));
    kt_add(&tests, cmocka_unit_test(test_wgmma_layout_model));
    kt_add(&tests, cmocka_unit_test(test_mma_kernel_sass));
    kt_add(&tests, cmocka_unit_test(test_wgmma_kernel_sass));
    kt_add(&tests, cmocka_unit_test(test_attention_mma_model));
    kt_add(&tests, cmocka_unit_test(test_attention_kernels_sass));
    kt_add(&tests, cmocka_unit_test(test_combine_kernel_sass));
    kt_add(&tests, cmocka_unit_test(test_conv_mma_gather_model));
    kt_add(&tests, cmocka_unit_test(test_conv_mma_kernel_sass));
    kt_add(&tests, cmocka_unit_test(test_shared_kernels_compile_with_nvrtc));
    kt_add(&tests, cmocka_unit_test(test_interop_elsewhere));
    kt_add(&tests, cmocka_unit_test(test_interop_on_a_cuda_device));
    kt_add(&tests, cmocka_unit_test(test_cubin_cache_round_trip));
    return kt_run("cuda", &tests);
}
