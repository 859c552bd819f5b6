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

#include "../cu/gemm/mma_layout.h"
#include "../cu/gemm/wgmma_layout.h"
#include "core/context.h"
#include "cuda/cuda_api.h"
#include "jit/disk_cache.h"
#include "jit/program_cache.h"
#include "kiln/kiln_attention.h"
#include "kiln/kiln_cuda.h"
#include "kiln/kiln_nn.h"
#include "profiles/profile.h"
#include "test_util.h"
#include "tune/peaks.h"

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
enum mma_mode { MODE_F16, MODE_TURING, MODE_TF32 };

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

static void model_gemm(int M, int N, int K, const float *A, const float *B, float *C, int ta, int tb,
                       enum mma_mode mode)
{
    const int w = mode == MODE_TF32 ? 2 : 1, chunk = 8 / w, kv = KB / w;
    const int ald = ta ? MB + 8 : kv + chunk, bld = tb ? kv + chunk : NB + 8;
    static uint16_t as[2 * MB * (MB + 8)], bs[2 * NB * (NB + 8)];
    static float acc[WARPS_M * WARPS_N][WM / 16][WN / 8][32][4];
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
                for (int wi = 0; wi < WARPS_M * WARPS_N; wi++) {
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
                                            get(as, w,
                                                (kk + kiln_mma_tf32_a_k(l, e)) * ald + r0 + kiln_mma_tf32_a_row(l, e));
                                continue;
                            }
                            for (int l = 0; l < 32; l++)
                                at[l] = w * (ta ? (kk + kiln_mma_ldsm_across_row(l)) * ald + r0 +
                                                      kiln_mma_ldsm_across_col(l, chunk)
                                                : (r0 + kiln_mma_ldsm_down_row(l)) * ald + kk +
                                                      kiln_mma_ldsm_down_col(l, chunk));
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
                                at[l] = w * (tb ? (c0 + kiln_mma_ldsm_across_row(l)) * bld + kk +
                                                      kiln_mma_ldsm_across_col(l, chunk)
                                                : (kk + kiln_mma_ldsm_down_row(l)) * bld + c0 +
                                                      kiln_mma_ldsm_down_col(l, chunk));
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
            for (int wi = 0; wi < WARPS_M * WARPS_N; wi++)
                for (int mi = 0; mi < WM / 16; mi++)
                    for (int ni = 0; ni < WN / 8; ni++)
                        for (int lane = 0; lane < 32; lane++)
                            for (int e = 0; e < 4; e++) {
                                const int r =
                                    m0 + kiln_mma_warp_row(wi, WARPS_N, WM) + mi * 16 + kiln_mma_c_row(lane, e);
                                const int c =
                                    n0 + kiln_mma_warp_col(wi, WARPS_N, WN) + ni * 8 + kiln_mma_c_col(lane, e);
                                if (r < M && c < N)
                                    C[r * N + c] = acc[wi][mi][ni][lane][e];
                            }
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

/* A kernel source of cu/gemm, read whole. */
static void read_kernel(const char *name, char *source, size_t size)
{
    char file[1200];
    snprintf(file, sizeof file, "%s", __FILE__);
    *strrchr(file, '/') = '\0';
    strcat(file, "/../cu/gemm/");
    strcat(file, name);
    FILE *f = fopen(file, "rb");
    assert_non_null(f);
    const size_t n = fread(source, 1, size - 1, f);
    fclose(f);
    source[n] = '\0';
}

/* What cuobjdump read from a compiled kernel. */
struct sass_report {
    double ms;
    int reg, stack, shared, local;
    char *sass; /* NULL where cuobjdump is missing */
};

/* Compile `source` for sm_`arch` with `options` (the cu/ include path
   added), check the CUBIN's arch and, where cuobjdump was found, read its
   SASS and resources. */
static struct sass_report compile_and_read(const struct kiln_cuda_api *api, const char *tool, const char *dir,
                                           const char *name, const char *source, int arch, const char *options)
{
    char root[1024], all[1600];
    snprintf(root, sizeof root, "%s", __FILE__);
    *strrchr(root, '/') = '\0';
    snprintf(all, sizeof all, "--include-path=%s/../cu %s", root, options);
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
    const char *u = strstr(usage, "REG:");
    if (u)
        sscanf(u, "REG:%d STACK:%d SHARED:%d LOCAL:%d", &r.reg, &r.stack, &r.shared, &r.local);
    free(usage);
    return r;
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
    struct kiln_cuda_api api;
    load_nvrtc_or_skip(&api);
    static char source[1 << 16];
    read_kernel("gemm_f16_mma.cu", source, sizeof source);
    char tool[1024];
    find_cuobjdump(tool, sizeof tool);
    if (!tool[0])
        printf("# cuobjdump not found (pip install nvidia-cuda-cuobjdump): compiling only\n");
    char *dir = kt_temp_dir();
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
    for (size_t i = 0; i < sizeof builds / sizeof *builds; i++) {
        const int arch = builds[i].arch, tf32 = builds[i].type == TF32;
        char type[32];
        snprintf(type, sizeof type, "%s%s%s%s", type_names[builds[i].type], builds[i].ta ? " A^T" : "",
                 builds[i].tb ? " B^T" : "", builds[i].async ? "" : " loads");
        char options[200];
        snprintf(options, sizeof options,
                 "-DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_ASYNC=%d -DKILN_MMA_BF16=%d -DKILN_MMA_TF32=%d",
                 builds[i].ta, builds[i].tb, builds[i].async, builds[i].type == BF16, tf32);
        struct sass_report r = compile_and_read(&api, tool, dir, "gemm_f16_mma.cu", source, arch, options);
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
    kt_remove_tree(dir);
    free(dir);
    kiln_cuda_unload(&api);
}

/* The wgmma kernels for sm_90a, in each transpose (the four descriptor
   layouts), bf16, TF32 (A and B K-major), each way of copying (the tensor
   memory accelerator, cp.async, plain loads), and block shapes of the
   schema: warpgroup multiplies (HGMMA, four a K step) of the storage's type
   and no HMMA, the copies asked for, no spills. */
static void test_wgmma_kernel_sass(void **state)
{
    (void)state;
    struct kiln_cuda_api api;
    load_nvrtc_or_skip(&api);
    static char source[1 << 16];
    read_kernel("gemm_f16_wgmma.cu", source, sizeof source);
    char tool[1024];
    find_cuobjdump(tool, sizeof tool);
    if (!tool[0])
        printf("# cuobjdump not found (pip install nvidia-cuda-cuobjdump): compiling only\n");
    char *dir = kt_temp_dir();
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
    for (size_t i = 0; i < sizeof builds / sizeof *builds; i++) {
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
        struct sass_report r = compile_and_read(&api, tool, dir, "gemm_f16_wgmma.cu", source, 90, options);
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
    kt_remove_tree(dir);
    free(dir);
    kiln_cuda_unload(&api);
}

struct nvrtc_sweep {
    const struct kiln_cuda_api *api;
    int programs, failures;
    double ms;
    int first_arch; /* the oldest architecture a program builds for (0: every one) */
};

static void compile_for_each_arch(void *user, const char *label, const char *source, size_t length, const char *options)
{
    struct nvrtc_sweep *w = user;
    static const int archs[] = {75, 80, 86, 89, 90};
    char *text = strndup(source, length), *opts = malloc(strlen(options) + 32);
    assert_true(text && opts);
    sprintf(opts, "-default-device %s", options);
    w->programs++;
    /* A program that names its target (wgmma's sm_90a) builds for it alone. */
    const int named = strstr(options, "--gpu-architecture=sm_90a") != NULL;
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++) {
        if ((named && archs[i] != 90) || archs[i] < w->first_arch)
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
    static const char *const profiles[] = {"nvidia-hopper", "nvidia-turing"};
    setenv("KILN_CUDA_ROUTES", "1", 1);
    for (size_t i = 0; i < sizeof profiles / sizeof *profiles; i++) {
        kiln_context *ctx = kt_profile_context(profiles[i]);
        assert_false(ctx->vector_kernels);
        build_shared_programs(ctx);
        struct nvrtc_sweep sweep = {&api, 0, 0, 0.0, 0};
        kiln_program_cache_each(ctx, compile_for_each_arch, &sweep);
        printf("# %s: %d programs, each compiled by NVRTC for sm_75, 80, 86, 89 and 90 in %.1f s, %d failed\n",
               profiles[i], sweep.programs, sweep.ms / 1e3, sweep.failures);
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
    struct nvrtc_sweep sweep = {&api, 0, 0, 0.0, 0};
    compile_for_each_arch(&sweep, "gemm/gemm_f16_mma.cu", text, length, "-DKILN_TRANS_A=1 -DKILN_MMA_ASYNC=1");
    /* TF32 (sm_80 on), each transpose. */
    sweep.first_arch = 80;
    for (int t = 0; t < 4; t++) {
        char options[100];
        snprintf(options, sizeof options, "-DKILN_MMA_TF32=1 -DKILN_TRANS_A=%d -DKILN_TRANS_B=%d -DKILN_MMA_ASYNC=1",
                 t & 1, t >> 1);
        compile_for_each_arch(&sweep, "gemm/gemm_f16_mma.cu", text, length, options);
    }
    free(text);
    /* The copy the wgmma family's TF32 plans make of operands stored along
       M or N, from the embedded tree too. */
    sweep.first_arch = 0;
    kt_assert_status(kiln_source_expand(&kiln_cuda_backend, "gemm/gemm_f32_transpose.cu", &text, &length),
                     KILN_SUCCESS);
    compile_for_each_arch(&sweep, "gemm/gemm_f32_transpose.cu", text, length, "");
    printf("# gemm_f16_mma.cu: fp16 for sm_75 to 90, TF32 in each transpose for sm_80 to 90; "
           "gemm_f32_transpose.cu for sm_75 to 90: %.1f s, %d failed\n",
           sweep.ms / 1e3, sweep.failures);
    assert_int_equal(sweep.failures, 0);
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
    kt_add(&tests, cmocka_unit_test(test_shared_kernels_compile_with_nvrtc));
    kt_add(&tests, cmocka_unit_test(test_interop_elsewhere));
    kt_add(&tests, cmocka_unit_test(test_interop_on_a_cuda_device));
    kt_add(&tests, cmocka_unit_test(test_cubin_cache_round_trip));
    return kt_run("cuda", &tests);
}
