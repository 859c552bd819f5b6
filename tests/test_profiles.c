/* Device profiles: loading, validation, inheritance, overrides, architecture
   derivation and matching, on synthetic device descriptions (the hardware
   they describe is not here). */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "profiles/profile.h"
#include "profiles/profile_impl.h"
#include "profiles/schema.h"
#include "util/options.h"

static struct kiln_profile_set *embedded; /* the embedded profiles, loaded once */

static int load_embedded(void **state)
{
    (void)state;
    return kiln_profile_set_load(NULL, NULL, &embedded) == KILN_SUCCESS ? 0 : -1;
}

static int free_embedded(void **state)
{
    (void)state;
    kiln_profile_set_free(embedded);
    return 0;
}

static struct kiln_device_desc device(kiln_device_type type, unsigned vendor_id, const char *vendor, const char *name,
                                      const char *version)
{
    struct kiln_device_desc d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.vendor_id = vendor_id;
    snprintf(d.vendor, sizeof d.vendor, "%s", vendor);
    snprintf(d.name, sizeof d.name, "%s", name);
    snprintf(d.device_version, sizeof d.device_version, "%s", version);
    d.compute_units = 2;
    d.clock_mhz = 2596;
    return d;
}

static struct kiln_device_desc nvidia(const char *name, int cc_major, int cc_minor)
{
    struct kiln_device_desc d = device(KILN_DEVICE_GPU, 0x10de, "NVIDIA Corporation", name, "OpenCL 3.0 CUDA");
    d.cc_major = cc_major;
    d.cc_minor = cc_minor;
    return d;
}

static struct kiln_device_desc amd(const char *name, const char *board)
{
    struct kiln_device_desc d =
        device(KILN_DEVICE_GPU, 0x1002, "Advanced Micro Devices, Inc.", name, "OpenCL 2.0 AMD-APP (3513.0)");
    snprintf(d.board_name, sizeof d.board_name, "%s", board);
    return d;
}

static struct kiln_device_desc intel(const char *name)
{
    return device(KILN_DEVICE_GPU, 0x8086, "Intel(R) Corporation", name, "OpenCL 3.0 NEO");
}

/* POCL's CPU device: name "pthread-<llvm cpu>-<model>", the triple in HSTR. */
static struct kiln_device_desc pocl(const char *vendor, const char *name, const char *hstr)
{
    char version[128];
    snprintf(version, sizeof version, "OpenCL 3.0 PoCL HSTR: %s", hstr);
    return device(KILN_DEVICE_CPU, 0x8086, vendor, name, version);
}

/* Derive the arch, check it, match, and check the profile chosen. */
static const struct kiln_profile *expect(const struct kiln_profile_set *set, struct kiln_device_desc d,
                                         const char *arch, const char *profile)
{
    char reason[256];
    kiln_device_derive_arch(&d);
    assert_string_equal(d.arch, arch);
    const struct kiln_profile *p = kiln_profile_match(set, &d, reason, sizeof reason);
    assert_non_null(p);
    if (strcmp(kiln_profile_name(p), profile) != 0)
        print_error("%s matched %s (%s), not %s\n", d.name, kiln_profile_name(p), reason, profile);
    assert_string_equal(kiln_profile_name(p), profile);
    return p;
}

static long get_int(const struct kiln_profile *p, const char *group, const char *key)
{
    double v = -1;
    kt_assert_status(kiln_profile_get(p, group, key, &v), KILN_SUCCESS);
    return (long)v;
}

/* Load the embedded profiles plus `files` (pairs of name, text) written to a
   fresh override directory. Texts use ' for " to stay readable. */
static struct kiln_profile_set *load_with(const char *const *files, size_t count)
{
    char *dir = kt_temp_dir();
    for (size_t i = 0; i < count; i += 2) {
        char path[1024], *text = strdup(files[i + 1]);
        for (char *c = text; *c; c++)
            *c = *c == '\'' ? '"' : *c;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        kt_write_file(path, text);
        free(text);
    }
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, dir, &set), KILN_SUCCESS);
    kt_remove_tree(dir);
    free(dir);
    return set;
}

#define LOAD_WITH(...)                                                                                                 \
    load_with((const char *const[]){__VA_ARGS__}, sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

static void assert_warning(const struct kiln_profile_set *set, const char *file, const char *cause)
{
    const char *w = kiln_profile_set_warnings(set);
    const char *line = strstr(w, file);
    if (!line || !strstr(line, cause))
        print_error("no warning for %s mentioning \"%s\" in:\n%s\n", file, cause, w);
    assert_non_null(line);
    assert_non_null(strstr(line, cause));
}

/* ---- the embedded profiles ------------------------------------------------ */

static void test_embedded_load_without_warnings(void **state)
{
    (void)state;
    assert_string_equal(kiln_profile_set_warnings(embedded), "");
    assert_true(kiln_profile_set_count(embedded) >= 20);
    assert_non_null(kiln_profile_find(embedded, "generic-gpu"));
    assert_non_null(kiln_profile_find(embedded, "generic-cpu"));
    assert_true(kiln_profile_is_abstract(kiln_profile_find(embedded, "nvidia")));
    assert_string_equal(kiln_profile_parent_name(kiln_profile_find(embedded, "generic-cpu")), "");
    assert_null(kiln_profile_find(embedded, "no-such-profile"));
}

static void test_every_profile_complete_and_valid(void **state)
{
    (void)state;
    for (size_t i = 0; i < kiln_profile_set_count(embedded); i++) {
        const struct kiln_profile *p = kiln_profile_set_at(embedded, i);
        char why[KILN_PROFILE_WHY_SIZE];
        if (kiln_profile_fits(p, NULL, why) != 0)
            print_error("%s: %s\n", kiln_profile_name(p), why);
        assert_int_equal(kiln_profile_fits(p, NULL, why), 0);
        assert_non_null(strstr(kiln_profile_provenance(p), "\"basis\":"));
        for (int g = 0; g < KILN_GROUP_COUNT; g++)
            for (size_t f = 0; f < kiln_param_groups[g].count; f++) {
                double v;
                kt_assert_status(kiln_profile_get(p, kiln_param_groups[g].name, kiln_param_groups[g].fields[f].key, &v),
                                 KILN_SUCCESS);
            }
        /* A shipped class holds every field of its group: one it left out
           would follow the default set, and a tuned overlay of the default
           would change the class with it (a field added to a group is added
           to the classes that exist). */
        for (int g = 0; g < KILN_GROUP_COUNT; g++)
            for (size_t c = 0; c < p->classes[g].count; c++) {
                const uint32_t all = (uint32_t)((1ull << kiln_param_groups[g].count) - 1);
                if (p->classes[g].items[c].own != all)
                    print_error("%s: class %s of %s leaves fields to the default set\n", kiln_profile_name(p),
                                p->classes[g].items[c].name, kiln_param_groups[g].name);
                assert_true(p->classes[g].items[c].own == all);
            }
    }
    assert_null(kiln_profile_set_at(embedded, kiln_profile_set_count(embedded)));
}

/* The template profile (device_profiles/README.md) documents every field. */
static void test_readme_documents_every_field(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *slash = strrchr(path, '/');
    assert_non_null(slash);
    snprintf(slash, sizeof path - (size_t)(slash - path), "/../device_profiles/README.md");
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    for (int g = 0; g < KILN_GROUP_COUNT; g++)
        for (size_t k = 0; k < kiln_param_groups[g].count; k++) {
            char name[96];
            snprintf(name, sizeof name, "`%s.%s`", kiln_param_groups[g].name, kiln_param_groups[g].fields[k].key);
            if (!strstr(text, name))
                print_error("README.md does not document %s\n", name);
            assert_non_null(strstr(text, name));
        }
}

/* ---- matching --------------------------------------------------------------- */

static void test_nvidia_cc86_ampere(void **state)
{
    (void)state;
    struct kiln_device_desc d = nvidia("NVIDIA GeForce RTX 3080", 8, 6);
    char reason[256];
    expect(embedded, d, "sm_86", "nvidia-ampere");
    kiln_device_derive_arch(&d);
    kiln_profile_match(embedded, &d, reason, sizeof reason);
    assert_string_equal(reason,
                        "arch 'sm_86' matches 'sm_86', vendor 'NVIDIA Corporation' contains 'nvidia', type gpu");
}

static void test_nvidia_rtx4090_name_ada(void **state)
{
    (void)state;
    expect(embedded, nvidia("NVIDIA GeForce RTX 4090", 0, 0), "sm_89", "nvidia-ada");
}

static void test_nvidia_h100_hopper(void **state)
{
    (void)state;
    expect(embedded, nvidia("NVIDIA H100 80GB HBM3", 0, 0), "sm_90", "nvidia-hopper");
    expect(embedded, nvidia("NVIDIA GH200 480GB", 9, 0), "sm_90", "nvidia-hopper");
}

static void test_nvidia_t4_turing(void **state)
{
    (void)state;
    expect(embedded, nvidia("Tesla T4", 0, 0), "sm_75", "nvidia-turing");
}

/* A child matching the same arch wins the tie by depth. */
static void test_nvidia_a100_ga100(void **state)
{
    (void)state;
    expect(embedded, nvidia("NVIDIA A100-SXM4-40GB", 0, 0), "sm_80", "nvidia-ampere-ga100");
}

static void test_nvidia_name_guesses(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"Quadro RTX 4000", "sm_75"},
        {"NVIDIA RTX 4000 Ada Generation", "sm_89"},
        {"NVIDIA RTX A3000 Laptop GPU", "sm_86"},
        {"NVIDIA A10G", "sm_86"},
        {"NVIDIA L4", "sm_89"},
        {"NVIDIA GeForce GTX 1660 SUPER", "sm_75"},
        {"NVIDIA GeForce RTX 3060", "sm_86"},
        {"Mystery NVIDIA board", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kiln_device_desc d = nvidia(cases[i][0], 0, 0);
        kiln_device_derive_arch(&d);
        if (strcmp(d.arch, cases[i][1]) != 0)
            print_error("%s: arch '%s', expected '%s'\n", cases[i][0], d.arch, cases[i][1]);
        assert_string_equal(d.arch, cases[i][1]);
    }
}

static void test_amd_gfx1030_rdna2(void **state)
{
    (void)state;
    expect(embedded, amd("gfx1030", "AMD Radeon RX 6800 XT"), "gfx1030", "amd-rdna2");
}

static void test_amd_gfx90a_cdna(void **state)
{
    (void)state;
    expect(embedded, amd("gfx90a:sramecc+:xnack-", "AMD Instinct MI250X"), "gfx90a", "amd-gcn-cdna");
}

static void test_amd_gfx1100_rdna3(void **state)
{
    (void)state;
    expect(embedded, amd("gfx1100", ""), "gfx1100", "amd-rdna3");
}

static void test_amd_board_name_guesses(void **state)
{
    (void)state;
    expect(embedded, amd("Navi", "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]"), "gfx1030", "amd-rdna2");
    expect(embedded, amd("AMD Instinct MI300X", ""), "gfx942", "amd-gcn-cdna");
    expect(embedded, amd("Ellesmere", "Radeon RX 580 Series"), "", "generic-gpu");
}

static void test_intel_arc_xe(void **state)
{
    (void)state;
    expect(embedded, intel("Intel(R) Arc(TM) A770 Graphics"), "xe-hpg", "intel-xe-arc");
    expect(embedded, intel("Intel(R) Data Center GPU Max 1550"), "xe-hpc", "intel-xe-hpc");
}

static void test_intel_iris_xe_gen12(void **state)
{
    (void)state;
    expect(embedded, intel("Intel(R) Iris(R) Xe Graphics"), "xe-lp", "intel-gen9-12");
    expect(embedded, intel("Intel(R) UHD Graphics 770"), "xe-lp", "intel-gen9-12");
    expect(embedded, intel("Intel(R) Iris(R) Plus Graphics G7"), "gen11", "intel-gen9-12");
}

static void test_intel_uhd630_gen9(void **state)
{
    (void)state;
    expect(embedded, intel("Intel(R) UHD Graphics 630"), "gen9", "intel-gen9-12");
}

/* The device of this project's test machine, as POCL 3.1 reports it. */
static void test_pocl_epyc_zen4(void **state)
{
    (void)state;
    expect(embedded,
           pocl("AuthenticAMD", "pthread-skylake-avx512-AMD EPYC", "pthread-x86_64-pc-linux-gnu-skylake-avx512"),
           "x86_64:skylake-avx512", "amd-zen4");
}

/* POCL 3.1's LLVM 15 calls Zen 4 and Zen 5 skylake-avx512: on the host's
   own CPU device, CPUID tells them apart (Zen 5's two 512-bit FMA units
   are x86-64-avx512's, which amd-zen5 inherits, not amd-zen4's half-width
   ones); any other device or CPU keeps the derived arch. */
static void test_pocl_host_cpuid(void **state)
{
    (void)state;
    static const struct {
        const char *vendor, *name, *hstr; /* the device */
        struct kiln_host_cpu cpu;         /* the host */
        const char *arch, *profile;
    } cases[] = {
        {"AuthenticAMD",
         "pthread-skylake-avx512-AMD EPYC",
         "pthread-x86_64-pc-linux-gnu-skylake-avx512",
         {"AuthenticAMD", 0x1a, 0x02, 1},
         "x86_64:znver5",
         "amd-zen5"},
        {"AuthenticAMD",
         "pthread-skylake-avx512-AMD EPYC",
         "pthread-x86_64-pc-linux-gnu-skylake-avx512",
         {"AuthenticAMD", 0x19, 0x11, 1},
         "x86_64:znver4",
         "amd-zen4"},
        {"AuthenticAMD",
         "cpu-skylake-avx512-AMD Ryzen 9 7950X",
         "cpu-x86_64-pc-linux-gnu-skylake-avx512",
         {"AuthenticAMD", 0x19, 0x61, 1},
         "x86_64:znver4",
         "amd-zen4"},
        /* Zen 3 (family 19h, no AVX-512) and a driver that knows the CPU. */
        {"AuthenticAMD",
         "pthread-haswell-AMD EPYC",
         "pthread-x86_64-pc-linux-gnu-haswell",
         {"AuthenticAMD", 0x19, 0x01, 0},
         "x86_64:haswell",
         "x86-64-avx2"},
        {"AuthenticAMD",
         "pthread-znver4-AMD EPYC 9654",
         "pthread-x86_64-pc-linux-gnu-znver4",
         {"AuthenticAMD", 0x1a, 0x02, 1},
         "x86_64:znver4",
         "amd-zen4"},
        /* Not the host's CPU: another vendor, a remote device. */
        {"AuthenticAMD",
         "pthread-skylake-avx512-AMD EPYC",
         "pthread-x86_64-pc-linux-gnu-skylake-avx512",
         {"GenuineIntel", 0x6, 0xcf, 1},
         "x86_64:skylake-avx512",
         "amd-zen4"},
        {"AuthenticAMD",
         "remote-skylake-avx512-AMD EPYC",
         "remote-x86_64-pc-linux-gnu-skylake-avx512",
         {"AuthenticAMD", 0x1a, 0x02, 1},
         "x86_64:skylake-avx512",
         "amd-zen4"},
        {"GenuineIntel",
         "pthread-skylake-avx512-Intel(R) Xeon(R) Processor",
         "pthread-x86_64-pc-linux-gnu-skylake-avx512",
         {"GenuineIntel", 0x6, 0xcf, 1},
         "x86_64:skylake-avx512",
         "x86-64-avx512"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kiln_device_desc d = pocl(cases[i].vendor, cases[i].name, cases[i].hstr);
        kiln_device_derive_arch(&d);
        kiln_device_refine_host_arch(&d, &cases[i].cpu);
        char reason[256];
        const struct kiln_profile *p = kiln_profile_match(embedded, &d, reason, sizeof reason);
        assert_non_null(p);
        if (strcmp(d.arch, cases[i].arch) != 0 || strcmp(kiln_profile_name(p), cases[i].profile) != 0)
            print_error("case %zu: %s on a %s family %#x host: arch '%s', profile %s; expected '%s', %s\n", i,
                        cases[i].name, cases[i].cpu.vendor, cases[i].cpu.family, d.arch, kiln_profile_name(p),
                        cases[i].arch, cases[i].profile);
        assert_string_equal(d.arch, cases[i].arch);
        assert_string_equal(kiln_profile_name(p), cases[i].profile);
    }
    /* This host: CPUID reads on x86 and gives a vendor. */
    struct kiln_host_cpu cpu;
#if defined(__x86_64__) || defined(__i386__)
    assert_int_equal(kiln_host_cpu_read(&cpu), 1);
    assert_true(strlen(cpu.vendor) == 12 && cpu.family > 0);
    printf("# host CPU: %s family %#x model %#x, AVX-512F %s\n", cpu.vendor, cpu.family, cpu.model,
           cpu.avx512f ? "yes" : "no");
#else
    assert_int_equal(kiln_host_cpu_read(&cpu), 0);
#endif
}

static void test_pocl_xeon_avx512(void **state)
{
    (void)state;
    expect(embedded,
           pocl("GenuineIntel", "pthread-skylake-avx512-Intel(R) Xeon(R) Platinum 8168 CPU @ 2.70GHz",
                "pthread-x86_64-pc-linux-gnu-skylake-avx512"),
           "x86_64:skylake-avx512", "x86-64-avx512");
}

static void test_pocl_haswell_avx2(void **state)
{
    (void)state;
    expect(embedded,
           pocl("GenuineIntel", "pthread-haswell-Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz",
                "pthread-x86_64-pc-linux-gnu-haswell"),
           "x86_64:haswell", "x86-64-avx2");
}

static void test_pocl_neoverse_arm(void **state)
{
    (void)state;
    expect(embedded, pocl("ARM", "pthread-neoverse-n1-ARM", "pthread-aarch64-unknown-linux-gnu-neoverse-n1"),
           "aarch64:neoverse-n1", "arm-cpu");
}

static void test_unknown_cpu_generic(void **state)
{
    (void)state;
    char reason[256];
    struct kiln_device_desc d = device(KILN_DEVICE_CPU, 0, "Mystery Silicon", "Mystery CPU", "OpenCL 1.2");
    expect(embedded, d, "", "generic-cpu");
    kiln_profile_match(embedded, &d, reason, sizeof reason);
    assert_string_equal(reason, "type cpu"); /* the root's own rule */
    expect(embedded, device(KILN_DEVICE_CPU, 0, "GenuineIntel", "Intel(R) Xeon(R) Gold", "OpenCL 3.0"),
           "x86_64:unknown", "generic-cpu");
}

static void test_unknown_gpu_generic(void **state)
{
    (void)state;
    expect(embedded, device(KILN_DEVICE_GPU, 0x13b5, "ARM", "Mali-G78", "OpenCL 3.0"), "", "generic-gpu");
}

static void test_accelerator_generic_gpu(void **state)
{
    (void)state;
    char reason[256];
    struct kiln_device_desc d = device(KILN_DEVICE_ACCELERATOR, 0, "Xilinx", "xilinx_u250", "OpenCL 1.2");
    expect(embedded, d, "", "generic-gpu");
    kiln_profile_match(embedded, &d, reason, sizeof reason);
    assert_string_equal(reason, "no profile matches; generic fallback for type accelerator");
}

/* ---- accessors ----------------------------------------------------------- */

static void test_defines(void **state)
{
    (void)state;
    const struct kiln_params *p = kiln_profile_params(kiln_profile_find(embedded, "generic-gpu"));
    /* Only a group's own kernel fields, never host fields or other groups. */
    struct kiln_options o = {0};
    kiln_profile_defines(&o, KILN_GROUP_gemm_tiled, &p->gemm_tiled);
    kt_assert_status(kiln_options_status(&o, "test"), KILN_SUCCESS);
    assert_string_equal(kiln_options_text(&o), "-DKILN_GEMM_MWG=64 -DKILN_GEMM_NWG=64 -DKILN_GEMM_KWG=16 "
                                               "-DKILN_GEMM_MDIMC=8 -DKILN_GEMM_NDIMC=8 -DKILN_GEMM_MDIMA=8 "
                                               "-DKILN_GEMM_NDIMB=8 -DKILN_GEMM_KWI=2 -DKILN_GEMM_VWM=2 "
                                               "-DKILN_GEMM_VWN=2 -DKILN_GEMM_SA=1 -DKILN_GEMM_SB=1");
    kiln_options_free(&o);
    kiln_profile_defines(&o, KILN_GROUP_attention_fused, &p->attention_fused);
    assert_string_equal(kiln_options_text(&o), "-DKILN_ATTENTION_BLOCK_Q=4 -DKILN_ATTENTION_BLOCK_KV=8 "
                                               "-DKILN_ATTENTION_CHUNK_KV=64 -DKILN_ATTENTION_WG=64 "
                                               "-DKILN_ATTENTION_VW=4 -DKILN_ATTENTION_PV_ROWS=0 "
                                               "-DKILN_ATTENTION_PV_VECS=1");
    kiln_options_free(&o);
    kiln_profile_defines(&o, KILN_GROUP_gemm_direct, &p->gemm_direct);
    assert_int_equal(strncmp(kiln_options_text(&o), "-DKILN_GEMM_DIRECT_WG=32 ", 25), 0);
    kiln_options_free(&o);
    kiln_profile_defines(&o, KILN_GROUP_gemm_cpu, &p->gemm_cpu); /* host fields only */
    kiln_profile_defines(&o, KILN_GROUP_select, &p->select);
    assert_string_equal(kiln_options_text(&o), "");
    /* The builder grows past any fixed size. */
    for (int i = 0; i < 200; i++)
        kiln_options_add(&o, "-DKILN_TEST_OPTION_NUMBER_%d=%d", i, i);
    kt_assert_status(kiln_options_status(&o, "test"), KILN_SUCCESS);
    assert_non_null(strstr(kiln_options_text(&o), "-DKILN_TEST_OPTION_NUMBER_0=0 -DKILN_TEST_OPTION_NUMBER_1=1 "));
    assert_non_null(strstr(kiln_options_text(&o), " -DKILN_TEST_OPTION_NUMBER_199=199"));
    kiln_options_free(&o);
}

static void test_get_typed_values(void **state)
{
    (void)state;
    const struct kiln_profile *p = kiln_profile_find(embedded, "generic-cpu");
    double v;
    assert_int_equal(kiln_profile_params(p)->select.gemm_route, KILN_ROUTE_CPU);
    assert_int_equal(get_int(p, "select", "gemm_route"), KILN_ROUTE_CPU);
    assert_int_equal(get_int(p, "gemm.tiled", "sa"), 0);
    kt_assert_status(kiln_profile_get(p, "device", "peak_gbps", &v), KILN_SUCCESS);
    assert_true(v == 20.0);
    assert_true(kiln_profile_params(p)->device.peak_gbps == 20.0);
    kt_assert_status(kiln_profile_get(p, "gemm.tiled", "nope", &v), KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_profile_get(p, "gemm", "mwg", &v), KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_profile_get(p, "nope", "mwg", &v), KILN_ERROR_NOT_FOUND);
}

static void test_peaks(void **state)
{
    (void)state;
    struct kiln_device_desc d =
        pocl("AuthenticAMD", "pthread-skylake-avx512-AMD EPYC", "pthread-x86_64-pc-linux-gnu-skylake-avx512");
    const struct kiln_profile *zen4 = kiln_profile_find(embedded, "amd-zen4");
    assert_true(fabs(kiln_profile_peak_gflops(zen4, &d) - 230.4) < 1e-9); /* 32 x 2 cores x 3600 MHz */
    assert_true(kiln_profile_peak_gbps(zen4, &d) > 0);
    /* Without a clock override the reported clock counts: 84 SMs x 256 x 1695 MHz. */
    struct kiln_device_desc rtx = nvidia("NVIDIA GeForce RTX 3090", 8, 6);
    rtx.compute_units = 84;
    rtx.clock_mhz = 1695;
    assert_true(fabs(kiln_profile_peak_gflops(kiln_profile_find(embedded, "nvidia-ampere"), &rtx) - 36449.28) < 1e-6);
}

/* A child overriding a few keys keeps every other value of its parent. */
static void test_inheritance(void **state)
{
    (void)state;
    const struct kiln_profile *child = kiln_profile_find(embedded, "nvidia-ampere-ga100");
    const struct kiln_profile *parent = kiln_profile_find(embedded, kiln_profile_parent_name(child));
    assert_string_equal(kiln_profile_name(parent), "nvidia-ampere");
    assert_int_equal(get_int(child, "device", "flops_per_cu_cycle"), 128);
    assert_int_equal(get_int(parent, "device", "flops_per_cu_cycle"), 256);
    assert_int_equal(get_int(child, "gemm.tiled", "mwg"), 128); /* from "nvidia", two levels up */
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        if (g == KILN_GROUP_device)
            continue;
        const struct kiln_param_group *grp = &kiln_param_groups[g];
        assert_memory_equal((const char *)kiln_profile_params(child) + grp->offset,
                            (const char *)kiln_profile_params(parent) + grp->offset, grp->size);
    }
}

/* ---- driver rules and exact rules ------------------------------------------ */

/* d with its arch derived and driver version set; kiln_profile_match's
   choice, its explanation in `reason` (256 bytes). */
static const char *match_on(const struct kiln_profile_set *set, struct kiln_device_desc d, const char *driver,
                            char *reason)
{
    snprintf(d.driver_version, sizeof d.driver_version, "%s", driver);
    if (!d.arch[0])
        kiln_device_derive_arch(&d);
    const struct kiln_profile *p = kiln_profile_match(set, &d, reason, 256);
    assert_non_null(p);
    printf("# %s, driver %s: %s (%s)\n", d.name, driver, kiln_profile_name(p), reason);
    return kiln_profile_name(p);
}

/* A driver rule holds for the versions its globs match and refuses the
   others; it weighs least, so a profile naming the device's name as well as
   its arch beats one naming its driver instead. */
static void test_match_driver(void **state)
{
    (void)state;
    struct kiln_profile_set *set =
        LOAD_WITH("ada-550.json",
                  "{'name': 'ada-550', 'parent': 'nvidia-ada',"
                  " 'match': {'type': 'gpu', 'vendor': ['nvidia'], 'arch': ['sm_89'], 'driver': ['550.*', '555.4?']}}",
                  "rtx-4090.json",
                  "{'name': 'rtx-4090', 'parent': 'nvidia-ada',"
                  " 'match': {'type': 'gpu', 'vendor': ['nvidia'], 'arch': ['sm_89'], 'name': ['RTX 4090']}}");
    assert_string_equal(kiln_profile_set_warnings(set), "");
    char reason[256];
    struct kiln_device_desc l4 = nvidia("NVIDIA L4", 8, 9);
    assert_string_equal(match_on(set, l4, "550.54.14", reason), "ada-550");
    assert_string_equal(reason,
                        "arch 'sm_89' matches 'sm_89', vendor 'NVIDIA Corporation' contains 'nvidia', type gpu, "
                        "driver '550.54.14' matches '550.*'");
    assert_string_equal(match_on(set, l4, "555.42", reason), "ada-550");
    assert_string_equal(match_on(set, l4, "545.29.06", reason), "nvidia-ada");
    assert_string_equal(match_on(set, l4, "555.58", reason), "nvidia-ada");
    assert_string_equal(match_on(set, l4, "", reason), "nvidia-ada");
    assert_string_equal(match_on(set, nvidia("NVIDIA GeForce RTX 4090", 8, 9), "550.54.14", reason), "rtx-4090");
    kiln_profile_set_free(set);
}

static void test_match_driver_invalid(void **state)
{
    (void)state;
    struct kiln_profile_set *set =
        LOAD_WITH("driver-string.json", "{'name': 'driver-string', 'parent': 'nvidia', 'match': {'driver': '550.*'}}",
                  "driver-empty.json", "{'name': 'driver-empty', 'parent': 'nvidia', 'match': {'driver': []}}",
                  "driver-number.json", "{'name': 'driver-number', 'parent': 'nvidia', 'match': {'driver': [550]}}",
                  "driver-blank.json", "{'name': 'driver-blank', 'parent': 'nvidia', 'match': {'driver': ['']}}",
                  "driver-twice.json",
                  "{'name': 'driver-twice', 'parent': 'nvidia', 'match': {'driver': ['1'], 'driver': ['2']}}");
    assert_warning(set, "driver-string.json", "'match.driver' must be a non-empty list of strings");
    assert_warning(set, "driver-empty.json", "'match.driver' must be a non-empty list of strings");
    assert_warning(set, "driver-number.json", "'match.driver' must be a non-empty list of non-empty strings");
    assert_warning(set, "driver-blank.json", "'match.driver' must be a non-empty list of non-empty strings");
    assert_warning(set, "driver-twice.json", "unknown or repeated key 'match.driver'");
    assert_null(kiln_profile_find(set, "driver-string"));
    kiln_profile_set_free(set);
}

/* Load the embedded profiles plus one written by kiln_profile_write with
   match rules naming `d` exactly: "exact", a child of generic-gpu. */
static struct kiln_profile_set *load_exact(const struct kiln_device_desc *d)
{
    struct kiln_profile *rules = NULL;
    kt_assert_status(kiln_profile_exact_match(d, &rules), KILN_SUCCESS);
    const struct kiln_profile_provenance pv = {"kiln-tune", NULL, d->name, d->driver_version, NULL, NULL, NULL, 0};
    char *dir = kt_temp_dir(), path[1024];
    snprintf(path, sizeof path, "%s/exact.json", dir);
    kt_assert_status(kiln_profile_write(path, "exact", "generic-gpu", rules, kiln_profile_find(embedded, "generic-gpu"),
                                        0, NULL, &pv),
                     KILN_SUCCESS);
    kiln_profile_free(rules);
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, dir, &set), KILN_SUCCESS);
    assert_string_equal(kiln_profile_set_warnings(set), "");
    kt_remove_tree(dir);
    free(dir);
    return set;
}

/* The rules kiln_profile_exact_match writes hold for the device they name
   alone: glob metacharacters and backslashes in its arch and driver version
   are literal, its vendor and name must be equal, not contain the rule. */
static void test_exact_match_is_literal(void **state)
{
    (void)state;
    struct kiln_device_desc d = device(KILN_DEVICE_GPU, 0, "Acme [Labs]*", "Weird*GPU [rev?]", "OpenCL 3.0");
    snprintf(d.arch, sizeof d.arch, "x[1]*");
    const char *driver = "2.?*\\1";
    snprintf(d.driver_version, sizeof d.driver_version, "%s", driver);
    struct kiln_profile_set *set = load_exact(&d);
    char reason[256];
    assert_string_equal(match_on(set, d, driver, reason), "exact");
    assert_string_equal(reason, "arch 'x[1]*' matches 'x\\[1]\\*', name is 'Weird*GPU [rev?]', vendor is 'Acme "
                                "[Labs]*', type gpu, driver '2.?*\\1' matches '2.\\?\\*\\\\1'");
    struct kiln_device_desc o = d; /* as any of these rules would take unescaped or as a substring */
    snprintf(o.name, sizeof o.name, "WEIRD*gpu [REV?]"); /* case does not count */
    assert_string_equal(match_on(set, o, driver, reason), "exact");
    snprintf(o.name, sizeof o.name, "Weird*GPU [rev?] 2");
    assert_string_equal(match_on(set, o, driver, reason), "generic-gpu");
    o = d;
    snprintf(o.vendor, sizeof o.vendor, "Acme [Labs]* Inc.");
    assert_string_equal(match_on(set, o, driver, reason), "generic-gpu");
    o = d;
    snprintf(o.arch, sizeof o.arch, "x1abc");
    assert_string_equal(match_on(set, o, driver, reason), "generic-gpu");
    o = d;
    o.type = KILN_DEVICE_ACCELERATOR;
    assert_string_equal(match_on(set, o, driver, reason), "generic-gpu");
    assert_string_equal(match_on(set, d, "2.5x1", reason), "generic-gpu");
    assert_string_equal(match_on(set, d, "2.?*1", reason), "generic-gpu");
    kiln_profile_set_free(set);

    /* An AMD GPU's device name is its arch, shared by a family's boards: the
       rule names the board. */
    d = amd("gfx1100", "AMD Radeon RX 7900 XTX");
    kiln_device_derive_arch(&d);
    set = load_exact(&d);
    assert_string_equal(match_on(set, d, "", reason), "exact");
    assert_string_equal(reason, "arch 'gfx1100' matches 'gfx1100', board name is 'AMD Radeon RX 7900 XTX', vendor is "
                                "'Advanced Micro Devices, Inc.', type gpu");
    snprintf(d.board_name, sizeof d.board_name, "AMD Radeon RX 7900 XT");
    assert_string_equal(match_on(set, d, "", reason), "amd-rdna3");
    kiln_profile_set_free(set);
}

/* ---- override directory --------------------------------------------------- */

static void test_override_adds_better_match(void **state)
{
    (void)state;
    struct kiln_profile_set *set = LOAD_WITH(
        "my-rtx3090.json", "{'name': 'my-rtx3090', 'parent': 'nvidia-ampere', 'provenance': {'basis': 'test'},"
                           " 'match': {'vendor': ['nvidia'], 'arch': ['sm_86'], 'name': ['RTX 3090']},"
                           " 'kernels': {'gemm.tiled': {'kwi': 4}}}");
    assert_string_equal(kiln_profile_set_warnings(set), "");
    const struct kiln_profile *p = expect(set, nvidia("NVIDIA GeForce RTX 3090", 8, 6), "sm_86", "my-rtx3090");
    assert_int_equal(get_int(p, "gemm.tiled", "kwi"), 4);
    assert_int_equal(get_int(p, "device", "flops_per_cu_cycle"), 256);
    expect(set, nvidia("NVIDIA GeForce RTX 3080", 8, 6), "sm_86", "nvidia-ampere");
    kiln_profile_set_free(set);
}

static void test_override_replaces_embedded(void **state)
{
    (void)state;
    struct kiln_profile_set *set = LOAD_WITH(
        "nvidia-ampere.json", "{'name': 'nvidia-ampere', 'parent': 'nvidia', 'provenance': {'basis': 'override'},"
                              " 'match': {'arch': ['sm_8?']}, 'device': {'flops_per_cu_cycle': 256, 'peak_gbps': 900},"
                              " 'kernels': {'gemm.tiled': {'kwi': 4}}}");
    assert_string_equal(kiln_profile_set_warnings(set), "");
    const struct kiln_profile *p = kiln_profile_find(set, "nvidia-ampere");
    assert_string_equal(kiln_profile_provenance(p), "{\"basis\":\"override\"}");
    assert_int_equal(get_int(p, "gemm.tiled", "kwi"), 4);
    /* the embedded child now inherits the replacement's value */
    assert_int_equal(get_int(kiln_profile_find(set, "nvidia-ampere-ga100"), "gemm.tiled", "kwi"), 4);
    kiln_profile_set_free(set);
}

static void test_override_broken_json(void **state)
{
    (void)state;
    struct kiln_profile_set *set = LOAD_WITH("nvidia-ampere.json", "{'name': 'nvidia-ampere',\n 'parent': }");
    assert_warning(set, "nvidia-ampere.json", "JSON syntax error at line 2");
    const struct kiln_profile *p = expect(set, nvidia("NVIDIA GeForce RTX 3080", 8, 6), "sm_86", "nvidia-ampere");
    assert_string_equal(kiln_profile_provenance(p),
                        kiln_profile_provenance(kiln_profile_find(embedded, "nvidia-ampere")));
    kiln_profile_set_free(set);
}

static void test_override_wrong_type(void **state)
{
    (void)state;
    struct kiln_profile_set *set = LOAD_WITH(
        "nvidia-ampere.json", "{'name': 'nvidia-ampere', 'parent': 'nvidia', 'kernels': {'gemm.tiled': {'mwg': '64'}}}",
        "bad-bool.json",
        "{'name': 'bad-bool', 'parent': 'nvidia', 'match': {'type': 'gpu'}, 'kernels': {'gemm.tiled': {'sa': 1}}}",
        "bad-route.json", "{'name': 'bad-route', 'parent': 'nvidia', 'select': {'gemm_route': 'fast'}}", "bad-vw.json",
        "{'name': 'bad-vw', 'parent': 'nvidia', 'kernels': {'gemm.tiled': {'vwm': 3}}}", "bad-match.json",
        "{'name': 'bad-match', 'parent': 'nvidia', 'match': {'vendor': 'nvidia'}}", "bad-big.json",
        "{'name': 'bad-big', 'parent': 'nvidia', 'kernels': {'util': {'wg': 1e12}}}");
    assert_warning(set, "nvidia-ampere.json", "'kernels.gemm.tiled.mwg' must be an integer");
    assert_warning(set, "bad-bool.json", "'kernels.gemm.tiled.sa' must be true or false");
    assert_warning(set, "bad-route.json", "'select.gemm_route' must be one of \"tiled\", \"cpu\", \"clblast\"");
    assert_warning(set, "bad-vw.json", "'kernels.gemm.tiled.vwm' must be a vector width");
    assert_warning(set, "bad-match.json", "'match.vendor' must be a non-empty list");
    assert_warning(set, "bad-big.json", "'kernels.util.wg' must be an integer from 1 to 1024");
    assert_null(kiln_profile_find(set, "bad-bool"));
    assert_int_equal(get_int(kiln_profile_find(set, "nvidia-ampere"), "gemm.tiled", "mwg"), 128);
    kiln_profile_set_free(set);
}

static void test_override_unknown_key(void **state)
{
    (void)state;
    struct kiln_profile_set *set =
        LOAD_WITH("extra.json", "{'name': 'extra', 'parent': 'nvidia', 'kernels': {'gemm.tiled': {'foo': 1}}}",
                  "extra2.json", "{'name': 'extra2', 'parent': 'nvidia', 'colour': 'red'}", "extra3.json",
                  "{'name': 'extra3', 'parent': 'nvidia', 'kernels': {'blas': {}}}", "extra4.json",
                  "{'name': 'extra4', 'parent': 'nvidia', 'kernels': {'gemm': {'mwg': 64}}}", "extra5.json",
                  "{'name': 'extra5', 'parent': 'nvidia', 'provenance': {'tuned': 'yes'}}");
    assert_warning(set, "extra.json", "unknown key 'kernels.gemm.tiled.foo'");
    assert_warning(set, "extra2.json", "unknown top-level key 'colour'");
    assert_warning(set, "extra3.json", "unknown kernel group 'kernels.blas' (groups: util gemm.cpu gemm.tiled");
    assert_warning(set, "extra4.json", "unknown kernel group 'kernels.gemm'");
    assert_warning(set, "extra5.json", "unknown key 'provenance.tuned'");
    assert_null(kiln_profile_find(set, "extra"));
    assert_null(kiln_profile_find(set, "extra2"));
    kiln_profile_set_free(set);
}

static void test_override_name_mismatch(void **state)
{
    (void)state;
    struct kiln_profile_set *set = LOAD_WITH("foo.json", "{'name': 'bar', 'parent': 'nvidia'}");
    assert_warning(set, "foo.json", "name 'bar' differs from the file name 'foo.json'");
    assert_null(kiln_profile_find(set, "foo"));
    assert_null(kiln_profile_find(set, "bar"));
    kiln_profile_set_free(set);
}

static void test_override_missing_parent(void **state)
{
    (void)state;
    struct kiln_profile_set *set =
        LOAD_WITH("orphan.json", "{'name': 'orphan', 'parent': 'nope', 'match': {'name': ['Mystery']}}",
                  "grandchild.json", "{'name': 'grandchild', 'parent': 'orphan', 'match': {'name': ['Mystery']}}");
    assert_warning(set, "orphan.json", "parent 'nope' not found");
    assert_warning(set, "grandchild.json", "parent 'orphan' was skipped");
    assert_null(kiln_profile_find(set, "orphan"));
    assert_null(kiln_profile_find(set, "grandchild"));
    expect(set, device(KILN_DEVICE_GPU, 0, "Mystery", "Mystery GPU", ""), "", "generic-gpu");
    kiln_profile_set_free(set);
}

static void test_override_parent_cycle(void **state)
{
    (void)state;
    struct kiln_profile_set *set =
        LOAD_WITH("a.json", "{'name': 'a', 'parent': 'b', 'match': {'type': 'gpu'}}", "b.json",
                  "{'name': 'b', 'parent': 'a', 'match': {'type': 'gpu'}}", "c.json", "{'name': 'c', 'parent': 'a'}",
                  "self.json", "{'name': 'self', 'parent': 'self'}");
    assert_warning(set, "a.json", "parent cycle: a -> b -> a");
    assert_warning(set, "b.json", "parent cycle: b -> a -> b");
    assert_warning(set, "c.json", "parent 'a' was skipped");
    assert_warning(set, "self.json", "parent cycle: self -> self");
    assert_null(kiln_profile_find(set, "a"));
    assert_null(kiln_profile_find(set, "b"));
    expect(set, device(KILN_DEVICE_GPU, 0, "Mystery", "Mystery GPU", ""), "", "generic-gpu");
    kiln_profile_set_free(set);
}

/* A profile failing the GEMM or attention constraints is skipped, with its
   children; an override failing them leaves the embedded profile in place. */
static void test_override_constraint_failure(void **state)
{
    (void)state;
    struct kiln_profile_set *set = LOAD_WITH(
        "nvidia-ampere.json",
        "{'name': 'nvidia-ampere', 'parent': 'nvidia', 'match': {'arch': ['sm_86']},"
        " 'kernels': {'gemm.tiled': {'vwm': 16}}}",
        "odd.json", "{'name': 'odd', 'parent': 'generic-gpu', 'kernels': {'gemm.tiled': {'mwg': 100}}}",
        "odd-child.json", "{'name': 'odd-child', 'parent': 'odd', 'match': {'name': ['Mystery']}}", "odd-rows.json",
        "{'name': 'odd-rows', 'parent': 'generic-cpu', 'kernels': {'attention.fused': {'block_q': 6}}}");
    assert_warning(set, "nvidia-ampere.json", "mwg = 128 is not a multiple of mdimc * vwm = 256");
    assert_warning(set, "odd-rows.json", "attention.fused constraint fails: block_q = 6 is not a multiple of vw = 4");
    assert_warning(set, "nvidia-ampere.json", "the embedded profile is kept");
    assert_warning(set, "odd.json", "gemm.tiled constraint fails");
    assert_warning(set, "odd-child.json", "parent 'odd' was skipped");
    expect(set, nvidia("NVIDIA GeForce RTX 3080", 8, 6), "sm_86", "nvidia-ampere");
    assert_int_equal(get_int(kiln_profile_find(set, "nvidia-ampere"), "gemm.tiled", "vwm"), 4);
    expect(set, device(KILN_DEVICE_GPU, 0, "Mystery", "Mystery GPU", ""), "", "generic-gpu");
    kiln_profile_set_free(set);
}

static void test_override_dir_missing(void **state)
{
    (void)state;
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, "/nonexistent/kiln-profiles", &set), KILN_ERROR_IO);
    assert_null(set);
    assert_non_null(strstr(kiln_last_error_detail(), "/nonexistent/kiln-profiles"));
}

static void test_null_arguments(void **state)
{
    (void)state;
    const struct kiln_profile *p = kiln_profile_find(embedded, "generic-gpu");
    struct kiln_device_desc d = nvidia("NVIDIA GeForce RTX 3080", 8, 6);
    double v;
    char reason[64];
    struct kiln_profile *derived = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_profile_get(NULL, "gemm.tiled", "mwg", &v), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_profile_get(p, NULL, "mwg", &v), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_profile_get(p, "gemm.tiled", "mwg", NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_profile_get(p, "gemm.tiled", NULL, &v), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_profile_derive(NULL, "{}", &derived), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_profile_derive(p, NULL, &derived), KILN_ERROR_INVALID_ARGUMENT);
    assert_null(derived);
    assert_null(kiln_profile_match(NULL, &d, reason, sizeof reason));
    assert_null(kiln_profile_match(embedded, NULL, NULL, 0));
    assert_null(kiln_profile_find(NULL, "generic-gpu"));
    assert_null(kiln_profile_find(embedded, NULL));
    assert_int_equal(kiln_profile_set_count(NULL), 0);
    assert_string_equal(kiln_profile_set_warnings(NULL), "");
    assert_true(kiln_profile_peak_gflops(NULL, &d) == 0);
    kiln_device_derive_arch(NULL);
    kiln_profile_set_free(NULL);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_embedded_load_without_warnings));
    kt_add(&tests, cmocka_unit_test(test_every_profile_complete_and_valid));
    kt_add(&tests, cmocka_unit_test(test_readme_documents_every_field));
    kt_add(&tests, cmocka_unit_test(test_nvidia_cc86_ampere));
    kt_add(&tests, cmocka_unit_test(test_nvidia_rtx4090_name_ada));
    kt_add(&tests, cmocka_unit_test(test_nvidia_h100_hopper));
    kt_add(&tests, cmocka_unit_test(test_nvidia_t4_turing));
    kt_add(&tests, cmocka_unit_test(test_nvidia_a100_ga100));
    kt_add(&tests, cmocka_unit_test(test_nvidia_name_guesses));
    kt_add(&tests, cmocka_unit_test(test_amd_gfx1030_rdna2));
    kt_add(&tests, cmocka_unit_test(test_amd_gfx90a_cdna));
    kt_add(&tests, cmocka_unit_test(test_amd_gfx1100_rdna3));
    kt_add(&tests, cmocka_unit_test(test_amd_board_name_guesses));
    kt_add(&tests, cmocka_unit_test(test_intel_arc_xe));
    kt_add(&tests, cmocka_unit_test(test_intel_iris_xe_gen12));
    kt_add(&tests, cmocka_unit_test(test_intel_uhd630_gen9));
    kt_add(&tests, cmocka_unit_test(test_pocl_epyc_zen4));
    kt_add(&tests, cmocka_unit_test(test_pocl_host_cpuid));
    kt_add(&tests, cmocka_unit_test(test_pocl_xeon_avx512));
    kt_add(&tests, cmocka_unit_test(test_pocl_haswell_avx2));
    kt_add(&tests, cmocka_unit_test(test_pocl_neoverse_arm));
    kt_add(&tests, cmocka_unit_test(test_unknown_cpu_generic));
    kt_add(&tests, cmocka_unit_test(test_unknown_gpu_generic));
    kt_add(&tests, cmocka_unit_test(test_accelerator_generic_gpu));
    kt_add(&tests, cmocka_unit_test(test_defines));
    kt_add(&tests, cmocka_unit_test(test_get_typed_values));
    kt_add(&tests, cmocka_unit_test(test_peaks));
    kt_add(&tests, cmocka_unit_test(test_inheritance));
    kt_add(&tests, cmocka_unit_test(test_match_driver));
    kt_add(&tests, cmocka_unit_test(test_match_driver_invalid));
    kt_add(&tests, cmocka_unit_test(test_exact_match_is_literal));
    kt_add(&tests, cmocka_unit_test(test_override_adds_better_match));
    kt_add(&tests, cmocka_unit_test(test_override_replaces_embedded));
    kt_add(&tests, cmocka_unit_test(test_override_broken_json));
    kt_add(&tests, cmocka_unit_test(test_override_wrong_type));
    kt_add(&tests, cmocka_unit_test(test_override_unknown_key));
    kt_add(&tests, cmocka_unit_test(test_override_name_mismatch));
    kt_add(&tests, cmocka_unit_test(test_override_missing_parent));
    kt_add(&tests, cmocka_unit_test(test_override_parent_cycle));
    kt_add(&tests, cmocka_unit_test(test_override_constraint_failure));
    kt_add(&tests, cmocka_unit_test(test_override_dir_missing));
    kt_add(&tests, cmocka_unit_test(test_null_arguments));
    return kt_run_with("profiles", &tests, load_embedded, free_embedded);
}
