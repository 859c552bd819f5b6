/* kiln-bench peak: the device's fp32 peak and memory bandwidth as measured
   on it (src/tune/peaks.c), beside what its profile says. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "tune/peaks.h"

int bench_peak(int argc, char **argv)
{
    int json = 0;
    static const char usage[] =
        "usage: kiln-bench peak [--json]\n"
        "fp32 multiply-adds (GFLOP/s), a copy (GB/s, bytes read plus written) and a read (a sum) on the device,\n"
        "each the median of several launches, beside the figures of the device's profile. The memory bandwidth is\n"
        "the faster of the copy and the read; it replaces the one kiln-bench attention remembers for the device\n"
        "(its bandwidth_fraction).\n"
        "The launch floor: the median time of a kiln call with no work to speak of and its wait (microseconds).\n";
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else {
            fprintf(stderr, "kiln-bench peak: bad argument \"%.64s%s\"\n%s", argv[i], strlen(argv[i]) > 64 ? "..." : "",
                    usage);
            return 2;
        }
    }
    kiln_context *ctx = NULL;
    kiln_device_info device;
    if (bench_open_context("peak", &ctx, &device) != 0)
        return 1;
    struct kiln_peaks p;
    kiln_status st = kiln_measure_peaks(ctx, &p);
    const int remembered = st == KILN_SUCCESS && bench_remember_gbps(ctx, &device, p.gbps);
    const double floor_us = st == KILN_SUCCESS ? bench_launch_floor_us(ctx) : 0.0;
    kiln_context_destroy(ctx);
    if (st != KILN_SUCCESS) {
        fprintf(stderr, "kiln-bench peak: %s: %s\n", kiln_status_string(st), kiln_last_error_detail());
        return 1;
    }
    if (json) {
        printf("{\"op\":\"peak\",\"device\":\"%s\",\"device_type\":\"%s\",\"profile\":\"%s\",\"gflops\":%.1f,\"gbps\":%"
               ".1f,"
               "\"copy_gbps\":%.1f,\"read_gbps\":%.1f,\"profile_gflops\":%.1f,\"profile_gbps\":%.1f,"
               "\"peak_source\":\"%s\",\"gbps_remembered\":%s,\"launch_floor_us\":%.1f}\n",
               device.name, kiln_device_type_string(device.type), device.profile, p.gflops, p.gbps, p.copy_gbps,
               p.read_gbps, device.peak_gflops, device.peak_gbps, device.peak_source, remembered ? "true" : "false",
               floor_us);
        return 0;
    }
    printf("peaks of %s (profile %s)\n", device.name, device.profile);
    printf("%-22s %12s %12s %8s\n", "", "now", "profile", "ratio");
    printf("%-22s %12.1f %12.1f %8.2f\n", "fp32 GFLOP/s", p.gflops, device.peak_gflops,
           device.peak_gflops > 0 ? p.gflops / device.peak_gflops : 0.0);
    printf("%-22s %12.1f %12.1f %8.2f\n", "memory GB/s", p.gbps, device.peak_gbps,
           device.peak_gbps > 0 ? p.gbps / device.peak_gbps : 0.0);
    printf("multiply-add launch (float%d chains) %.2f ms; copy of %zu MiB %.2f ms (%.1f GB/s read plus written); "
           "read of %zu MiB %.2f ms (%.1f GB/s); the profile's figures: %s\n",
           p.fma_lanes, p.fma_ms, p.copy_bytes >> 20, p.copy_ms, p.copy_gbps, p.copy_bytes >> 20, p.read_ms,
           p.read_gbps, strcmp(device.peak_source, "measured") == 0 ? "measured by kiln-tune" : "the family's");
    if (floor_us > 0.0)
        printf("launch floor: %.1f us, a kiln call with no work to speak of (a fill of one float) and its wait\n",
               floor_us);
    if (remembered)
        printf("the memory's %.1f GB/s is remembered for kiln-bench attention's bandwidth_fraction\n", p.gbps);
    return 0;
}
