/*
 * kiln-bench quick: a short fixed set of GEMM shapes on kiln and its peers,
 * one table. The shapes cover a large square problem, a skinny inference
 * product (few rows, large weights), a deep reduction, a batch of small
 * matrices and a mid-size square; the whole run aims at under a minute on a
 * 2-core CPU. CLBlast on a CPU OpenCL device is slow, so it gets a fixed
 * small number of timed calls.
 */
#include <string.h>

#include "bench.h"

static const struct {
    size_t m, n, k, batch;
} shapes[] = {
    {2048, 2048, 2048, 1}, {16, 4096, 4096, 1}, {256, 256, 16384, 1}, {128, 128, 128, 64}, {512, 512, 512, 1},
};

enum { CLBLAST_REPS = 3 };

/* A GFLOP/s figure, or a dash when the library was not measured. */
static void print_gflops(const struct bench_result *r)
{
    if (r->state == BENCH_MEASURED)
        printf(" %9.1f", r->gflops);
    else
        printf(" %9s", r->state == BENCH_NOT_BUILT ? "n/b" : "-");
}

static void print_ratio(const struct bench_result *kiln, const struct bench_result *peer)
{
    if (peer->state == BENCH_MEASURED)
        printf(" %8.2f", kiln->gflops / peer->gflops);
    else
        printf(" %8s", "-");
}

static void print_row(const struct bench_gemm_report *rep)
{
    const struct bench_result *k = &rep->kiln, *cb = &rep->peers[BENCH_PEER_CLBLAST],
                              *ob = &rep->peers[BENCH_PEER_OPENBLAS];
    char shape[96];
    bench_gemm_shape(&rep->desc, shape, sizeof shape);
    printf("%-22s %-7s", shape, k->state == BENCH_MEASURED ? k->algo : "FAILED");
    print_gflops(k);
    print_gflops(ob);
    print_gflops(cb);
    print_ratio(k, ob);
    print_ratio(k, cb);
    if (k->state == BENCH_MEASURED)
        printf(" %11.1e %10.1f\n", k->max_rel_err, rep->compile_ms);
    else
        printf("  %s\n", k->error);
    for (int p = 0; p < BENCH_PEER_COUNT; p++)
        if (rep->peers[p].state == BENCH_FAILED)
            printf("%22s %s failed: %s\n", "", bench_peer_name((enum bench_peer)p), rep->peers[p].error);
    fflush(stdout);
}

int bench_quick(int argc, char **argv)
{
    int json = 0;
    struct bench_gemm_options opt = {.warmup = 1, .budget_ms = 300.0};
    opt.peer_reps[BENCH_PEER_CLBLAST] = CLBLAST_REPS;
    for (int p = 0; p < BENCH_PEER_COUNT; p++) /* cuBLAS only when asked: CUDA contexts */
        if (bench_peer_built((enum bench_peer)p) && p != BENCH_PEER_CUBLAS)
            opt.peers |= 1u << p;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--compare") == 0 && bench_option_value("quick", argc, argv, &i, &v) == 0 &&
                 bench_peer_parse(v, &opt.peers) == 0)
            continue;
        else {
            int help = strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
            if (!help)
                fprintf(stderr, "kiln-bench quick: bad argument \"%.64s%s%.64s\"\n", a, v ? " " : "", v ? v : "");
            fprintf(help ? stdout : stderr,
                    "usage: kiln-bench quick [--json] [--compare clblast,cublas,openblas|none]\n"
                    "GEMM (row-major, fp32, C = A*B) on %zu fixed shapes, kiln against the peers built in\n"
                    "(default: all of them). kiln and OpenBLAS: median of at least %d calls and ~%.0f ms;\n"
                    "CLBlast: median of %d calls. kiln's compile time is reported apart.\n",
                    sizeof shapes / sizeof *shapes, BENCH_MIN_REPS, opt.budget_ms, CLBLAST_REPS);
            return help ? 0 : 2;
        }
    }

    kiln_context *ctx = NULL;
    kiln_device_info device;
    if (bench_open_context("quick", &ctx, &device) != 0)
        return 1;
    if (!json) {
        printf("kiln %s on %s (%s), profile %s, peak %.0f GFLOP/s fp32 (%s)\n", kiln_version_string(), device.name,
               device.platform, device.profile, device.peak_gflops, device.peak_source);
        bench_peer_print_config(stdout, opt.peers);
        printf("\nGEMM row-major fp32, C = A*B; GFLOP/s of warm calls (median); compile ms = kiln plan creation\n");
        printf("%-22s %-7s %9s %9s %9s %8s %8s %11s %10s\n", "shape", "algo", "kiln", "OpenBLAS", "CLBlast", "k/OBLAS",
               "k/CLB", "max rel err", "compile ms");
    }

    int failures = 0;
    double start = bench_now_ms();
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        kiln_gemm_desc desc;
        bench_gemm_desc(&desc, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, shapes[s].m, shapes[s].n, shapes[s].k,
                        shapes[s].batch);
        struct bench_gemm_report report;
        failures += bench_gemm_run(ctx, &desc, &opt, &report) != 0;
        if (json)
            bench_gemm_print_json(stdout, &device, &report);
        else
            print_row(&report);
        bench_gemm_check_errors(&report);
    }
    kiln_context_destroy(ctx);
    if (!json)
        printf("(n/b: peer not built; k/X: kiln GFLOP/s over X's; errors relative to sum |a||b|; %.1f s in all)\n",
               (bench_now_ms() - start) / 1e3);
    return failures ? 1 : 0;
}
