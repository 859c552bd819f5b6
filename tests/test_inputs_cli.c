/* The command lines of kiln-info, kiln-bench and kiln-tune (docs/inputs.md): every
   kind of bad argument, and each bad environment value, ends the program
   quickly with the reason on stderr and its exit status: 2 for a usage
   error, 1 for a failure. Each case runs the program with a time limit. */
#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Seconds a bad command line may take: it must fail before any kernel is
   compiled. */
#define RUN_LIMIT_S 30

struct cli_case {
    const char *name;
    const char *program;  /* "info", "bench" or "tune" */
    const char *args[20]; /* NULL-terminated */
    const char *env[3];   /* "NAME=value" settings, NULL-terminated */
    int status;           /* the exit status wanted */
    const char *out;      /* in stderr; with status 0, in stdout or stderr */
};

static char *tmp;

static int make_tmp(void **state)
{
    tmp = kt_temp_dir();
    return kt_group_setup(state);
}

static int remove_tmp(void **state)
{
    kt_remove_tree(tmp);
    free(tmp);
    return kt_group_teardown(state);
}

/* Runs the case and checks its exit status and message; returns the number
   of "kiln warning:" lines it printed on stderr. */
static int run(const struct cli_case *c)
{
#if defined(KT_KILN_INFO) && defined(KT_KILN_BENCH) && defined(KT_KILN_TUNE)
    const char *program = strcmp(c->program, "info") == 0    ? KT_KILN_INFO
                          : strcmp(c->program, "bench") == 0 ? KT_KILN_BENCH
                                                             : KT_KILN_TUNE;
#else
    (void)c;
    printf("# skipped: the tools are not built (KILN_BUILD_TOOLS=OFF)\n");
    skip();
    const char *program = "";
    return 0;
#endif
    const char *argv[22] = {program};
    for (size_t i = 0; c->args[i]; i++)
        argv[i + 1] = c->args[i];
    char out_path[4200], err_path[4200];
    snprintf(out_path, sizeof out_path, "%s/stdout", tmp);
    snprintf(err_path, sizeof err_path, "%s/stderr", tmp);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char **env = kt_environ_with(c->env);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, program, &fa, NULL, (char *const *)argv, env), 0);
    posix_spawn_file_actions_destroy(&fa);
    free(env);

    int status = 0, waited = 0;
    for (int ms = 0; ms < RUN_LIMIT_S * 1000 && !waited; ms += 10) {
        waited = waitpid(pid, &status, WNOHANG) == pid;
        if (!waited)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (!waited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("%s: still running after %d s", c->name, RUN_LIMIT_S);
    }
    size_t size;
    char *out = (char *)kt_read_bytes(out_path, &size);
    char *err = (char *)kt_read_bytes(err_path, &size);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != c->status || !(strstr(err, c->out) || (code == 0 && strstr(out, c->out))))
        fail_msg("%s: exit %d (wanted %d), stderr:\n%.2000s\n(wanted \"%s\")", c->name, code, c->status, err, c->out);
    int warnings = 0;
    for (const char *w = err; (w = strstr(w, "kiln warning:")) != NULL; w++)
        warnings++;
    free(out);
    free(err);
    return warnings;
}

static void run_case(void **state) { run(*state); }

#define INFO "info"
#define BENCH "bench"
#define TUNE "tune"
#define GEMM_OK "gemm", "--m", "8", "--n", "8", "--k", "8"
/* An argument of 80 characters, and how the programs show it: its first 64
   and "...". */
#define X16 "xxxxxxxxxxxxxxxx"
#define LONG_ARG X16 X16 X16 X16 X16
#define LONG_SHOWN "\"" X16 X16 X16 X16 "...\""

static const struct cli_case cases[] = {
    /* kiln-info */
    {"info --help", INFO, {"--help"}, {NULL}, 0, "Exit status: 0 success, 1 a failure"},
    {"info unknown option", INFO, {"--bogus"}, {NULL}, 2, "kiln-info: bad argument \"--bogus\""},
    {"info extra argument", INFO, {"devices"}, {NULL}, 2, "bad argument \"devices\""},
    {"info long argument cut", INFO, {LONG_ARG}, {NULL}, 2, "kiln-info: bad argument " LONG_SHOWN},
    {"info --profile twice", INFO, {"--profile", "--profile"}, {NULL}, 2, "bad argument \"--profile\""},
    {"info KILN_DEVICE no match",
     INFO,
     {NULL},
     {"KILN_DEVICE=no-such-device", NULL},
     1,
     "KILN_DEVICE \"no-such-device\": no device matches"},
    {"info KILN_DEVICE huge index",
     INFO,
     {NULL},
     {"KILN_DEVICE=99999999999999999999999", NULL},
     1,
     "the index is out of range"},
    {"info KILN_DEVICE malformed", INFO, {NULL}, {"KILN_DEVICE=1x", NULL}, 1, "neither an index"},
    {"info KILN_PROFILE unknown",
     INFO,
     {NULL},
     {"KILN_PROFILE=no-such-profile", NULL},
     1,
     "KILN_PROFILE: profile \"no-such-profile\" (forced) does not exist"},
    {"info --profile KILN_PROFILE unknown",
     INFO,
     {"--profile"},
     {"KILN_PROFILE=no-such-profile", NULL},
     1,
     "does not exist"},
    {"info KILN_LOG not a level", INFO, {NULL}, {"KILN_LOG=loud", NULL}, 0, "KILN_LOG=\"loud\" is not a level"},
    {"info KILN_FIND not a switch",
     INFO,
     {NULL},
     {"KILN_FIND=yes", "KILN_LOG=1", NULL},
     0,
     "KILN_FIND=\"yes\" is not 0 or 1: using 0"},
    /* kiln-bench */
    {"bench no command", BENCH, {NULL}, {NULL}, 2, "usage: kiln-bench [--device SELECTOR] <command>"},
    {"bench --help", BENCH, {"--help"}, {NULL}, 0, "2 a usage error"},
    {"bench unknown command", BENCH, {"gem"}, {NULL}, 2, "kiln-bench: unknown command \"gem\""},
    {"bench long command cut", BENCH, {LONG_ARG}, {NULL}, 2, "kiln-bench: unknown command " LONG_SHOWN},
    {"bench gemm missing value", BENCH, {"gemm", "--m"}, {NULL}, 2, "kiln-bench gemm: --m needs a value"},
    {"bench gemm malformed", BENCH, {GEMM_OK, "--batch", "4x"}, {NULL}, 2, "bad argument \"--batch 4x\""},
    {"bench gemm zero", BENCH, {GEMM_OK, "--batch", "0"}, {NULL}, 2, "bad argument \"--batch 0\""},
    {"bench gemm negative", BENCH, {"gemm", "--m", "-8", "--n", "8", "--k", "8"}, {NULL}, 2, "bad argument \"--m -8\""},
    {"bench gemm past 2^31",
     BENCH,
     {"gemm", "--m", "2147483649", "--n", "8", "--k", "8"},
     {NULL},
     2,
     "bad argument \"--m 2147483649\""},
    {"bench gemm overflow",
     BENCH,
     {"gemm", "--m", "99999999999999999999999", "--n", "8", "--k", "8"},
     {NULL},
     2,
     "bad argument"},
    {"bench gemm operands too large",
     BENCH,
     {"gemm", "--m", "2147483648", "--n", "2147483648", "--k", "2147483648"},
     {NULL},
     2,
     "A would hold 4.61e+18 elements, more than"},
    {"bench gemm reps zero", BENCH, {GEMM_OK, "--reps", "0"}, {NULL}, 2, "bad argument \"--reps 0\""},
    {"bench gemm reps huge", BENCH, {GEMM_OK, "--reps", "1001"}, {NULL}, 2, "bad argument \"--reps 1001\""},
    {"bench gemm warmup negative", BENCH, {GEMM_OK, "--warmup", "-1"}, {NULL}, 2, "bad argument \"--warmup -1\""},
    {"bench gemm warmup space", BENCH, {GEMM_OK, "--warmup", " 1"}, {NULL}, 2, "bad argument \"--warmup  1\""},
    {"bench gemm unknown option", BENCH, {GEMM_OK, "--bogus", "1"}, {NULL}, 2, "bad argument \"--bogus 1\""},
    {"bench gemm bad choice", BENCH, {GEMM_OK, "--layout", "diagonal"}, {NULL}, 2, "bad argument \"--layout"},
    {"bench gemm bad math", BENCH, {GEMM_OK, "--math", "tf16"}, {NULL}, 2, "bad argument \"--math tf16\""},
    {"bench gemm empty compare", BENCH, {GEMM_OK, "--compare", ""}, {NULL}, 2, "bad argument \"--compare \""},
    {"bench gemm missing required", BENCH, {"gemm", "--m", "8"}, {NULL}, 2, "--m, --n and --k are required"},
    {"bench gemm KILN_DEVICE",
     BENCH,
     {GEMM_OK},
     {"KILN_DEVICE=no-such-device", NULL},
     1,
     "kiln-bench gemm: not found: KILN_DEVICE \"no-such-device\""},
    {"bench --device no match",
     BENCH,
     {"--device", "no-such-device", GEMM_OK},
     {NULL},
     1,
     "kiln-bench gemm: not found: KILN_DEVICE \"no-such-device\""},
    {"bench --device missing value", BENCH, {"--device"}, {NULL}, 2, "--device needs a value"},
    {"bench --device no command", BENCH, {"--device", "0"}, {NULL}, 2, "usage: kiln-bench"},
    {"bench --device malformed backend index",
     BENCH,
     {"--device", "cuda:x", GEMM_OK},
     {NULL},
     1,
     "after \"cuda:\" comes a device index"},
    {"bench gemm KILN_PROFILE",
     BENCH,
     {GEMM_OK},
     {"KILN_PROFILE=no-such-profile", NULL},
     1,
     "KILN_PROFILE: profile \"no-such-profile\""},
    {"bench gemm KILN_LOG", BENCH, {GEMM_OK, "--bogus"}, {"KILN_LOG=loud", NULL}, 2, "bad argument"},
    {"bench conv missing value", BENCH, {"conv", "--n"}, {NULL}, 2, "--n needs a value"},
    {"bench conv negative pad", BENCH, {"conv", "--pad", "-1"}, {NULL}, 2, "bad argument \"--pad -1\""},
    {"bench conv zero groups", BENCH, {"conv", "--groups", "0"}, {NULL}, 2, "bad argument \"--groups 0\""},
    {"bench conv bad algo", BENCH, {"conv", "--algo", "fft"}, {NULL}, 2, "bad argument \"--algo fft\""},
    {"bench conv bad dtype", BENCH, {"conv", "--dtype", "f64"}, {NULL}, 2, "bad argument \"--dtype f64\""},
    {"bench conv unknown peer", BENCH, {"conv", "--compare", "cudnn,mkl"}, {NULL}, 2, "bad argument \"--compare"},
    {"bench conv in place without residual",
     BENCH,
     {"conv", "--n", "1", "--c", "4", "--h", "6", "--w", "6", "--k", "4", "--r", "1", "--s", "1", "--in-place"},
     {NULL},
     2,
     "--in-place needs --residual"},
    /* The cuDNN peer off the CUDA backend: its row says why and the run ends
       well, its line printed after the table (cuDNN's path, or why it is
       missing or, without a driver, cudnnCreate's refusal). */
    {"bench conv cudnn off CUDA",
     BENCH,
     {"conv", "--n", "1", "--c", "4", "--h", "6", "--w", "6", "--k", "4", "--r", "3", "--s", "3", "--reps", "1",
      "--compare", "cudnn"},
     {"KILN_DEVICE=opencl", NULL},
     0,
     "n/a: kiln does not run on the CUDA backend here"},
    {"bench conv too large",
     BENCH,
     {"conv", "--n", "65536", "--c", "65536", "--h", "65536", "--w", "1", "--k", "1", "--r", "1", "--s", "1"},
     {NULL},
     2,
     "x would hold"},
    {"bench conv --model missing", BENCH, {"conv", "--model"}, {NULL}, 2, "--model needs a value"},
    {"bench conv --model unknown", BENCH, {"conv", "--model", "vgg"}, {NULL}, 2, "unknown model \"vgg\""},
    {"bench conv --model two peers",
     BENCH,
     {"conv", "--model", "resnet50", "--compare", "onednn,cudnn"},
     {NULL},
     2,
     "bad argument \"--compare onednn,cudnn\""},
    {"bench conv --model no rounds",
     BENCH,
     {"conv", "--model", "mobilenet_v1", "--rounds", "0"},
     {NULL},
     2,
     "bad argument \"--rounds 0\""},
    {"bench conv --model too many rounds",
     BENCH,
     {"conv", "--model", "mobilenet_v1", "--rounds", "101"},
     {NULL},
     2,
     "bad argument \"--rounds 101\""},
    {"bench conv --model huge batch",
     BENCH,
     {"conv", "--model", "resnet50", "--n", "2147483648"},
     {NULL},
     2,
     "would hold"},
    {"bench attention zero", BENCH, {"attention", "--heads", "0"}, {NULL}, 2, "bad argument \"--heads 0\""},
    {"bench attention two algos", BENCH, {"attention", "--algo", "fused,naive"}, {NULL}, 2, "bad argument"},
    {"bench attention bandwidth unknown",
     BENCH,
     {"attention", "--heads", "2", "--seq-q", "1", "--head-dim", "16", "--bandwidth", "sometimes"},
     {NULL},
     2,
     "bad argument \"--bandwidth sometimes\""},
    {"bench attention bandwidth missing value",
     BENCH,
     {"attention", "--bandwidth"},
     {NULL},
     2,
     "--bandwidth needs a value"},
    {"bench attention scores too large",
     BENCH,
     {"attention", "--heads", "64", "--seq-q", "2000000", "--head-dim", "1"},
     {NULL},
     2,
     "the scores of the naive path would hold"},
    {"bench jit missing value", BENCH, {"jit", "--reps"}, {NULL}, 2, "--reps needs a value"},
    {"bench jit malformed", BENCH, {"jit", "--reps", "abc"}, {NULL}, 2, "bad argument \"--reps abc\""},
    {"bench jit zero", BENCH, {"jit", "--reps", "0"}, {NULL}, 2, "bad argument \"--reps 0\""},
    {"bench jit unknown option", BENCH, {"jit", "--bogus"}, {NULL}, 2, "bad argument \"--bogus\""},
    {"bench quick missing value", BENCH, {"quick", "--compare"}, {NULL}, 2, "--compare needs a value"},
    {"bench quick unknown peer", BENCH, {"quick", "--compare", "mkl"}, {NULL}, 2, "bad argument \"--compare mkl\""},
    {"bench quick unknown option", BENCH, {"quick", "--bogus"}, {NULL}, 2, "bad argument \"--bogus\""},
    {"bench quick KILN_DEVICE", BENCH, {"quick"}, {"KILN_DEVICE=999", NULL}, 1, "no device has that index"},
    {"bench peak unknown option", BENCH, {"peak", "--bogus"}, {NULL}, 2, "kiln-bench peak: bad argument \"--bogus\""},
    /* Paths (docs/inputs.md, "Environment variables naming paths"). */
    {"info KILN_KERNEL_DIR missing",
     INFO,
     {NULL},
     {"KILN_KERNEL_DIR=/nonexistent/kiln-kernels", NULL},
     1,
     "KILN_KERNEL_DIR"},
    {"info KILN_KERNEL_DIR a device", INFO, {NULL}, {"KILN_KERNEL_DIR=/dev/null", NULL}, 1, "KILN_KERNEL_DIR"},
    {"info KILN_PROFILE_DIR missing",
     INFO,
     {NULL},
     {"KILN_PROFILE_DIR=/nonexistent/kiln-profiles", NULL},
     1,
     "KILN_PROFILE_DIR"},
    /* kiln-tune: a bad output directory fails before any trial. */
    {"tune --help", TUNE, {"--help"}, {NULL}, 0, "2 a usage error"},
    {"tune unknown option", TUNE, {"--bogus"}, {NULL}, 2, "kiln-tune: bad argument \"--bogus\""},
    {"tune budget missing", TUNE, {"--budget"}, {NULL}, 2, "kiln-tune: --budget needs a value"},
    {"tune budget not a number", TUNE, {"--budget", "soon"}, {NULL}, 2, "--budget: not a number of seconds"},
    {"tune long argument cut", TUNE, {LONG_ARG}, {NULL}, 2, "kiln-tune: bad argument " LONG_SHOWN},
    {"tune long budget cut", TUNE, {"--budget", LONG_ARG}, {NULL}, 2, "not a number of seconds: " LONG_SHOWN},
    {"tune long seed cut", TUNE, {"--seed", LONG_ARG}, {NULL}, 2, "--seed: not a whole number: " LONG_SHOWN},
    {"tune long ops cut", TUNE, {"--ops", LONG_ARG}, {NULL}, 2, "--ops " LONG_SHOWN ": a comma-separated list"},
    {"tune ops unknown", TUNE, {"--ops", "gemm,softmax"}, {NULL}, 2, "a comma-separated list of gemm, conv, attention"},
    {"tune ops empty item", TUNE, {"--ops", "gemm,"}, {NULL}, 2, "a comma-separated list of gemm, conv, attention"},
    {"tune groups unknown",
     TUNE,
     {"--groups", "gemm.wgmma,gemm.bogus"},
     {NULL},
     2,
     "kiln-tune: --groups: \"gemm.bogus\" is not a kernel group"},
    {"tune groups not a kernel group", TUNE, {"--groups", "device"}, {NULL}, 2, "\"device\" is not a kernel group"},
    {"tune groups empty item", TUNE, {"--groups", "gemm.mma,"}, {NULL}, 2, "\"\" is not a kernel group"},
    {"tune groups missing", TUNE, {"--groups"}, {NULL}, 2, "kiln-tune: --groups needs a value"},
    {"tune out under a file", TUNE, {"--out", "/dev/null/kiln"}, {NULL}, 1, "cannot create the output directory"},
    {"info KILN_CACHE_DIR a device", INFO, {NULL}, {"KILN_CACHE_DIR=/dev/null", NULL}, 0, "memory only"},
    {"info KILN_CACHE_DIR under a file", INFO, {NULL}, {"KILN_CACHE_DIR=/dev/null/kiln", NULL}, 0, "memory only"},
    {"bench gemm KILN_KERNEL_DIR missing",
     BENCH,
     {GEMM_OK},
     {"KILN_KERNEL_DIR=/nonexistent/kiln-kernels", NULL},
     1,
     "KILN_KERNEL_DIR"},
};

/* kiln-bench with a cache directory it cannot use measures every row (kiln
   and the peer) and says so once. */
static void test_bench_with_unusable_cache_measures_every_row_with_one_warning(void **state)
{
    (void)state;
    static const struct cli_case c = {"bench gemm KILN_CACHE_DIR unusable",
                                      BENCH,
                                      {GEMM_OK, "--reps", "5", "--compare", "openblas"},
                                      {"KILN_CACHE_DIR=/dev/null/kiln", "KILN_LOG=1", NULL},
                                      0,
                                      "cblas_sgemm"};
    assert_int_equal(run(&c), 1);
}

/* The device's remembered bandwidth file in dir (memory-<device>.txt),
   its figure in *gbps; 0 if there is none. */
static int remembered_gbps(const char *dir, char *path, size_t size, double *gbps)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, "memory-", 7) == 0 && !strstr(e->d_name, ".tmp")) {
            snprintf(path, size, "%s/%s", dir, e->d_name);
            found = 1;
        }
    if (d)
        closedir(d);
    size_t n;
    char *text = found ? (char *)kt_read_bytes(path, &n) : NULL;
    found = text && sscanf(text, "gbps %lf", gbps) == 1;
    free(text);
    return found;
}

/* kiln-bench peak replaces the bandwidth kiln-bench attention remembers for
   the device (its bandwidth_fraction) with the one it measured: a stale
   figure is not kept. */
static void test_bench_peak_remembers_the_bandwidth(void **state)
{
    (void)state;
    static char cache[4300], env[4400];
    snprintf(cache, sizeof cache, "%s/peak-cache", tmp);
    snprintf(env, sizeof env, "KILN_CACHE_DIR=%s", cache);
    const struct cli_case c = {"bench peak", BENCH, {"peak"}, {env, NULL}, 0, "is remembered for kiln-bench attention"};
    for (int round = 0; round < 2; round++) {
        run(&c);
        char path[4600], stale[64];
        double gbps = 0.0;
        assert_true(remembered_gbps(cache, path, sizeof path, &gbps));
        printf("# round %d: %s holds %.3f GB/s\n", round, path, gbps);
        assert_true(gbps > 0.0 && gbps != 0.125);
        snprintf(stale, sizeof stale, "gbps 0.125\n");
        kt_write_file(path, stale);
    }
}

/* kiln-bench attention sets its bytes against the bandwidth remembered for
   the device, or with --bandwidth measure against one it measures in the
   run, which it then remembers in place of the old figure. */
static void test_bench_attention_measures_the_bandwidth_when_asked(void **state)
{
    (void)state;
    static char cache[4300], env[4400];
    snprintf(cache, sizeof cache, "%s/attention-cache", tmp);
    snprintf(env, sizeof env, "KILN_CACHE_DIR=%s", cache);
#define DECODE_SMALL                                                                                                   \
    "attention", "--heads", "4", "--kv-heads", "2", "--seq-q", "1", "--seq-kv", "256", "--head-dim", "16", "--reps", "5"
    const struct cli_case first = {"bench attention, none remembered",          BENCH, {DECODE_SMALL}, {env, NULL}, 0,
                                   "the faster of a copy and a read, measured)"};
    run(&first);
    char path[4600];
    double gbps = 0.0;
    assert_true(remembered_gbps(cache, path, sizeof path, &gbps));
    kt_write_file(path, "gbps 0.125\n");
    const struct cli_case stale = {"bench attention, remembered",
                                   BENCH,
                                   {DECODE_SMALL},
                                   {env, NULL},
                                   0,
                                   "of the device's 0.1 GB/s (the faster of a copy and a read, remembered"};
    run(&stale);
    assert_true(remembered_gbps(cache, path, sizeof path, &gbps));
    assert_true(gbps == 0.125);
    const struct cli_case fresh = {"bench attention --bandwidth measure",
                                   BENCH,
                                   {DECODE_SMALL, "--bandwidth", "measure"},
                                   {env, NULL},
                                   0,
                                   "(the faster of a copy and a read, measured in this run)"};
    run(&fresh);
    assert_true(remembered_gbps(cache, path, sizeof path, &gbps));
    printf("# %s holds %.3f GB/s after --bandwidth measure\n", path, gbps);
    assert_true(gbps > 0.0 && gbps != 0.125);
#undef DECODE_SMALL
}

int main(void)
{
    struct kt_list tests = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        kt_add_test_(&tests, (struct CMUnitTest){cases[i].name, run_case, kt_watchdog_arm, kt_watchdog_disarm,
                                                 (void *)&cases[i]});
    kt_add_test_(&tests, (struct CMUnitTest){"bench attention measures the bandwidth when asked",
                                             test_bench_attention_measures_the_bandwidth_when_asked, kt_watchdog_arm,
                                             kt_watchdog_disarm, NULL});
    kt_add_test_(&tests, (struct CMUnitTest){"bench with an unusable cache directory",
                                             test_bench_with_unusable_cache_measures_every_row_with_one_warning,
                                             kt_watchdog_arm, kt_watchdog_disarm, NULL});
    kt_add_test_(&tests,
                 (struct CMUnitTest){"bench peak remembers the bandwidth", test_bench_peak_remembers_the_bandwidth,
                                     kt_watchdog_arm, kt_watchdog_disarm, NULL});
    return kt_run_with("inputs_cli", &tests, make_tmp, remove_tmp);
}
