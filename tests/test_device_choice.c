/* The default device and the selectors' ranking (src/core/device_choice.h)
   on machines described by hand: an NVIDIA GPU listed by OpenCL and by
   CUDA, an AMD GPU that OpenCL alone lists, a CPU, two NVIDIA GPUs that the
   two APIs list in different orders, and a driver that gives no PCI
   address. The choice is a function of the list alone, so no device is
   needed. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/device_choice.h"
#include "test_util.h"

enum { NVIDIA = 0x10de, AMD = 0x1002 };

static const struct kiln_backend *backend(const char *name)
{
    for (const struct kiln_backend *const *be = kiln_backends; *be; be++)
        if (strcmp((*be)->name, name) == 0)
            return *be;
    fail_msg("no backend \"%s\" in the registry", name);
    return NULL;
}

/* A listing of `name` by backend `be` (its device `index` there) at PCI
   domain 0, `bus` (-1: no address) and `device` (-1: the bus alone). */
static struct kiln_listing listing(const char *be, size_t index, const char *name, kiln_device_type type,
                                   unsigned vendor, int bus, int device, double peak)
{
    struct kiln_listing l = {.backend = backend(be), .index = index, .peak_gflops = peak};
    snprintf(l.desc.name, sizeof l.desc.name, "%s", name);
    l.desc.type = type;
    l.desc.vendor_id = vendor;
    l.desc.pci_known = bus >= 0;
    l.desc.pci_bus = bus;
    l.desc.pci_device = device;
    return l;
}

static int gpus(const void *user, const struct kiln_listing *l)
{
    (void)user;
    return l->desc.type == KILN_DEVICE_GPU;
}

static int of_backend(const void *user, const struct kiln_listing *l) { return l->backend == user; }

static void assert_says(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("\"%s\" does not say \"%s\"", text, part);
}

/* OpenCL lists an H100 (its bus, as NVIDIA's attribute query gives it), an
   AMD GPU and a CPU; CUDA lists the H100 again. */
static void machine(struct kiln_listing l[4])
{
    l[0] = listing("opencl", 0, "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU, NVIDIA, 0x65, -1, 60000);
    l[1] = listing("opencl", 1, "AMD Radeon RX 7900 XTX", KILN_DEVICE_GPU, AMD, 0x03, 0, 40000);
    l[2] = listing("opencl", 2, "cpu-x86-64", KILN_DEVICE_CPU, AMD, -1, -1, 150);
    l[3] = listing("cuda", 0, "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU, NVIDIA, 0x65, 0, 60000);
}

/* The default takes the H100 through CUDA and says why; the other listing
   of it is named, with the PCI address that shows it is the same GPU. */
static void test_default_takes_cuda_for_an_nvidia_gpu(void **state)
{
    (void)state;
    struct kiln_listing l[4];
    machine(l);
    char why[512], how[192];
    assert_int_equal(kiln_device_default(l, 4, why, sizeof why), 3);
    printf("# %s\n", why);
    assert_says(why, "cuda:0, of 2 GPUs the one of highest profile peak (60000 GFLOP/s)");
    assert_says(why, "; opencl:0 is the same GPU (PCI 0000:65:00.0), and ");
    assert_says(why, backend("cuda")->native_reason);
    assert_int_equal(kiln_listing_twin(l, 4, 0, how, sizeof how), 3);
    assert_string_equal(how, "PCI 0000:65:00.0");
    assert_int_equal(kiln_listing_twin(l, 4, 3, NULL, 0), 0);
    assert_int_equal(kiln_listing_twin(l, 4, 1, NULL, 0), SIZE_MAX);
    assert_int_equal(kiln_listing_twin(l, 4, 2, NULL, 0), SIZE_MAX);
}

/* The H100 counts once against the AMD GPU: a faster AMD GPU is the
   default, and with it slower, a CPU-only list, and no list. */
static void test_each_gpu_counts_once(void **state)
{
    (void)state;
    struct kiln_listing l[4];
    machine(l);
    char why[512];
    l[1].peak_gflops = 80000;
    assert_int_equal(kiln_device_default(l, 4, why, sizeof why), 1);
    assert_string_equal(why, "opencl:1, of 2 GPUs the one of highest profile peak (80000 GFLOP/s)");
    assert_int_equal(kiln_device_default(&l[2], 1, why, sizeof why), 0);
    assert_string_equal(why, "opencl:2, the only CPU");
    assert_int_equal(kiln_device_default(l, 0, why, sizeof why), SIZE_MAX);
}

/* Without the CUDA listing (no driver) the H100 is the default through
   OpenCL. */
static void test_opencl_alone(void **state)
{
    (void)state;
    struct kiln_listing l[4];
    machine(l);
    char why[512];
    l[1].desc.type = KILN_DEVICE_ACCELERATOR;
    assert_int_equal(kiln_device_default(l, 3, why, sizeof why), 0);
    assert_string_equal(why, "opencl:0, the only GPU");
}

/* Selectors keep their ranking: `gpu` takes the OpenCL listing (vector
   syntax first), a backend takes its own. */
static void test_selectors_rank_as_before(void **state)
{
    (void)state;
    struct kiln_listing l[4];
    machine(l);
    assert_int_equal(kiln_device_best(l, 4, gpus, NULL), 0);
    assert_int_equal(kiln_device_best(l, 4, of_backend, backend("cuda")), 3);
    assert_int_equal(kiln_device_best(l, 4, of_backend, backend("opencl")), 0);
    assert_int_equal(kiln_device_best(l, 3, of_backend, backend("cuda")), SIZE_MAX);
}

/* Two H100s that OpenCL lists bus 0xb3 first and CUDA bus 0x65 first: each
   OpenCL listing is paired by its bus, not its place, and the default is
   the first CUDA listing, the other GPU's OpenCL listing named nowhere. */
static void test_two_gpus_listed_in_different_orders(void **state)
{
    (void)state;
    struct kiln_listing l[4] = {
        listing("opencl", 0, "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU, NVIDIA, 0xb3, -1, 60000),
        listing("opencl", 1, "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU, NVIDIA, 0x65, -1, 60000),
        listing("cuda", 0, "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU, NVIDIA, 0x65, 0, 60000),
        listing("cuda", 1, "NVIDIA H100 80GB HBM3", KILN_DEVICE_GPU, NVIDIA, 0xb3, 0, 60000),
    };
    char why[512], how[192];
    assert_int_equal(kiln_listing_twin(l, 4, 0, how, sizeof how), 3);
    assert_string_equal(how, "PCI 0000:b3:00.0");
    assert_int_equal(kiln_listing_twin(l, 4, 1, NULL, 0), 2);
    assert_int_equal(kiln_device_default(l, 4, why, sizeof why), 2);
    printf("# %s\n", why);
    assert_says(why, "cuda:0, of 2 GPUs the one of highest profile peak");
    assert_says(why, "; opencl:1 is the same GPU (PCI 0000:65:00.0)");
    assert_null(strstr(why, "opencl:0"));
}

/* An OpenCL driver that gives no PCI address: the same vendor and name
   pair the listings, and the reason says so. */
static void test_no_pci_address(void **state)
{
    (void)state;
    struct kiln_listing l[4];
    machine(l);
    l[0].desc.pci_known = 0;
    char why[512];
    assert_int_equal(kiln_device_default(l, 4, why, sizeof why), 3);
    assert_says(why, "; opencl:0 is the same GPU (the same name, NVIDIA H100 80GB HBM3; no PCI address to compare)");
    l[0].desc.vendor_id = AMD; /* another vendor's device of that name */
    assert_int_equal(kiln_listing_twin(l, 4, 0, NULL, 0), SIZE_MAX);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_default_takes_cuda_for_an_nvidia_gpu));
    kt_add(&tests, cmocka_unit_test(test_each_gpu_counts_once));
    kt_add(&tests, cmocka_unit_test(test_opencl_alone));
    kt_add(&tests, cmocka_unit_test(test_selectors_rank_as_before));
    kt_add(&tests, cmocka_unit_test(test_two_gpus_listed_in_different_orders));
    kt_add(&tests, cmocka_unit_test(test_no_pci_address));
    return kt_run_with("device_choice", &tests, NULL, NULL);
}
