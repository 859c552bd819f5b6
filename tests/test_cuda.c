/*
 * The CUDA driver and NVRTC, loaded at run time (src/cuda/cuda_api.h): no
 * driver and the toolkit's stub library both mean zero CUDA devices, with
 * the reason; NVRTC, where a toolkit is installed, compiles CUDA C to a
 * CUBIN for each architecture kiln's NVIDIA profiles cover, and the CUBIN's
 * ELF header names that architecture; a compile error comes back as
 * KILN_ERROR_BUILD with NVRTC's log. Parts that need a toolkit are skipped,
 * saying so, where there is none.
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_api.h"
#include "test_util.h"

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
    kiln_cuda_load(&api);
    if (!api.nvrtc_lib) {
        printf("# skipped: %s\n", api.nvrtc);
        kiln_cuda_unload(&api);
        skip();
    }
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

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_without_a_driver_no_devices));
    kt_add(&tests, cmocka_unit_test(test_stub_library_no_devices));
    kt_add(&tests, cmocka_unit_test(test_nvrtc_compiles_each_arch));
    kt_add(&tests, cmocka_unit_test(test_cubin_arch_rejects_other_files));
    return kt_run("cuda", &tests);
}
