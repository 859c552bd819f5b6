/* kiln-info: every backend and device kiln can use, the profile each device
   matches and why, its peaks, which device is the default and why, and the
   program cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/kiln.h"

static void print_device(const kiln_device_info *d, int is_default)
{
    printf("  [%zu] %s%s\n", d->index, d->name, is_default ? "  (default)" : "");
    if (d->backend_index == SIZE_MAX)
        printf("      backend    %s\n", d->backend);
    else
        printf("      backend    %s (%s:%zu%s%s)\n", d->backend, d->backend, d->backend_index,
               d->pci_address[0] ? ", PCI " : "", d->pci_address);
    if (d->same_device[0])
        printf("      same as    %s\n", d->same_device);
    printf("      platform   %s\n", d->platform);
    printf("      vendor     %s\n", d->vendor);
    printf("      type       %s, %u compute units @ %u MHz\n", kiln_device_type_string(d->type), d->compute_units,
           d->clock_mhz);
    printf("      arch       %s\n", d->arch[0] ? d->arch : "(not recognised)");
    printf("      memory     %.2f GiB global, %.0f KiB local, %.2f GiB largest allocation",
           d->global_mem_bytes / 1073741824.0, d->local_mem_bytes / 1024.0, d->max_alloc_bytes / 1073741824.0);
    if (d->cache_bytes)
        printf(", %.1f MiB cache", d->cache_bytes / 1048576.0);
    printf("\n");
    printf("      fp16/fp64  %s/%s\n", d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no");
    printf("      version    %s; driver %s\n", d->device_version, d->driver_version);
    printf("      profile    %s (%s)\n", d->profile, d->profile_reason);
    printf("        from     %s\n", d->profile_origin);
    if (d->profile_parents[0])
        printf("        parents  %s\n", d->profile_parents);
    if (strcmp(d->profile_provenance, "{}") != 0)
        printf("        source   %s\n", d->profile_provenance);
    printf("      peaks      %.1f GFLOP/s fp32, %.1f GB/s (%s)\n", d->peak_gflops, d->peak_gbps, d->peak_source);
}

/* The default device's profile as JSON, every parameter set included. */
static int print_profile(void)
{
    kiln_context *ctx = NULL;
    size_t length = 0;
    char *text = NULL;
    kiln_status st = kiln_context_create(NULL, &ctx);
    if (st == KILN_SUCCESS)
        st = kiln_context_get_profile_json(ctx, NULL, 0, &length);
    if (st == KILN_SUCCESS && !(text = malloc(length + 1)))
        st = KILN_ERROR_OUT_OF_MEMORY;
    if (st == KILN_SUCCESS)
        st = kiln_context_get_profile_json(ctx, text, length + 1, &length);
    if (st == KILN_SUCCESS)
        printf("%s\n", text);
    else
        fprintf(stderr, "kiln-info: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
    free(text);
    kiln_context_destroy(ctx);
    return st != KILN_SUCCESS;
}

static const char usage[] = "usage: kiln-info [--profile]\n"
                            "Lists every backend, what it loaded or why it has no device, and every device\n"
                            "kiln can use with its matched profile (why it matched, the file it came from,\n"
                            "its parents and provenance) and peaks; the default device and why it is the\n"
                            "default (KILN_DEVICE selects another); a device two backends list, once per\n"
                            "backend (the default takes a GPU through its vendor's own API); the program\n"
                            "cache.\n"
                            "--profile prints the default device's profile as resolved: every parameter group\n"
                            "with its parameter sets (classes of shapes), as JSON.\n"
                            "Exit status: 0 success, 1 a failure (no device, a bad KILN_DEVICE or KILN_PROFILE,\n"
                            "an error of kiln), 2 a usage error.\n";

int main(int argc, char **argv)
{
    int profile = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--profile") == 0 && !profile) {
            profile = 1;
            continue;
        }
        fprintf(stderr, "kiln-info: bad argument \"%.64s%s\"\n%s", argv[i], strlen(argv[i]) > 64 ? "..." : "", usage);
        return 2;
    }
    if (profile)
        return print_profile();
    printf("kiln %s\n", kiln_version_string());
    size_t count = 0;
    kiln_status st = kiln_device_count(&count);
    if (st != KILN_SUCCESS) {
        fprintf(stderr, "kiln-info: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
        return 1;
    }
    kiln_context *ctx = NULL;
    kiln_device_info def;
    st = kiln_context_create(NULL, &ctx);
    if (st == KILN_SUCCESS)
        st = kiln_context_get_device_info(ctx, &def);
    if (st != KILN_SUCCESS) {
        fprintf(stderr, "kiln-info: default device: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
        kiln_context_destroy(ctx);
        return 1;
    }

    printf("backends:\n");
    kiln_backend_info be;
    for (size_t i = 0; kiln_backend_get_info(i, &be) != KILN_ERROR_NOT_FOUND; i++)
        printf("  %-7s %zu device%s%s%s\n", be.name, be.devices, be.devices == 1 ? "" : "s", be.status[0] ? ": " : "",
               be.status);
    printf("default: [%zu] %s\n", def.index, def.selection);
    printf("devices: %zu\n", count);
    int failed = 0;
    for (size_t i = 0; i < count; i++) {
        kiln_device_info info;
        st = kiln_device_get_info(i, &info);
        if (st != KILN_SUCCESS) {
            printf("  [%zu] %s: %s\n", i, kiln_status_string(st), kiln_last_error_detail());
            failed = 1;
            continue;
        }
        print_device(&info, info.index == def.index);
    }

    kiln_cache_info cache;
    st = kiln_context_get_cache_info(ctx, &cache);
    if (st != KILN_SUCCESS) {
        printf("program cache: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
        failed = 1;
    } else if (!cache.disk_enabled) {
        printf("program cache: memory only (%s)\n", cache.disk_reason);
    } else if (cache.disk_reason[0]) {
        printf("program cache: %s (%s)\n", cache.dir, cache.disk_reason);
    } else {
        printf("program cache: %s (%llu entries, %.1f KiB)\n", cache.dir, (unsigned long long)cache.disk_entries,
               cache.disk_bytes / 1024.0);
    }
    kiln_context_destroy(ctx);
    return failed;
}
