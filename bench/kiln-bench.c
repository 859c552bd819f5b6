/* kiln-bench: benchmarks of kiln against its peers, measured in one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "peers.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"jit", bench_jit, "first-call latency of a kernel: cold (empty caches) and warm (second process)"},
    {"gemm", bench_gemm, "one GEMM shape on kiln and its peers (OpenBLAS, CLBlast), same data, one run"},
    {"quick", bench_quick, "a fixed set of GEMM shapes against the peers: the main benchmark, under a minute"},
    {"conv", bench_conv, "one convolution (or a model's layers) on kiln and its peers (oneDNN, CLBlast)"},
    {"attention", bench_attention, "fused attention against kiln's naive path and OpenBLAS three-step attention"},
    {"peak", bench_peak, "the device's fp32 peak and memory bandwidth, measured, beside its profile's figures"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: kiln-bench [--device SELECTOR] <command> [options]   (kiln-bench <command> --help for its "
                 "options)\n"
                 "  --device   the device to measure, as KILN_DEVICE takes it (cpu, gpu, cuda, cuda:N, opencl:N, an\n"
                 "             index or a name); it sets KILN_DEVICE for the run\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "Exit status: 0 success, 1 a failure (no device, a bad KILN_DEVICE or KILN_PROFILE, kiln or a\n"
                 "measurement failed), 2 a usage error (an unknown command or option, a missing or bad value).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    /* --device: KILN_DEVICE for this run (and the processes it starts),
       set before anything reads the environment. */
    if (strcmp(argv[1], "--device") == 0) {
        if (argc < 3 || !argv[2][0]) {
            fprintf(stderr,
                    "kiln-bench: --device needs a value (cpu, gpu, cuda, cuda:N, opencl:N, an index, a name)\n");
            return 2;
        }
        if (setenv("KILN_DEVICE", argv[2], 1) != 0) {
            perror("kiln-bench: --device");
            return 1;
        }
        argv[2] = argv[0];
        argc -= 2, argv += 2;
        if (argc < 2) {
            usage(stderr);
            return 2;
        }
    }
    bench_peer_fair_openblas(argv);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "kiln-bench: unknown command \"%.64s%s\"\n", argv[1], strlen(argv[1]) > 64 ? "..." : "");
    usage(stderr);
    return 2;
}
