/* Device enumeration, context creation, selection by options and
   environment, forced profiles, two contexts / many threads at once, and
   cache directories that cannot be used, at open or later. */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

#define POISON_CTX ((kiln_context *)(uintptr_t)0x5a5a)

static kiln_context *create_with(const char *device, const char *profile)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.device = device;
    opt.profile = profile;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    assert_non_null(ctx);
    return ctx;
}

/* Expect `status` from creating a context and nothing written to out. */
static void expect_create_fails(const char *device, const char *profile, kiln_status status)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.device = device;
    opt.profile = profile;
    kiln_context *ctx = POISON_CTX;
    kt_assert_status(kiln_context_create(&opt, &ctx), status);
    assert_ptr_equal(ctx, POISON_CTX);
}

static int have_gpu(void)
{
    size_t n = 0;
    assert_int_equal(kiln_device_count(&n), KILN_SUCCESS);
    for (size_t i = 0; i < n; i++) {
        kiln_device_info info;
        assert_int_equal(kiln_device_get_info(i, &info), KILN_SUCCESS);
        if (info.type == KILN_DEVICE_GPU)
            return 1;
    }
    return 0;
}

/* What this program prints when started anew with `flag` and the variable
   `name` set to `value` (NULL: unset). */
static void output_at_start(const char *flag, const char *name, const char *value, char *out, size_t size)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
        execl("/proc/self/exe", "test_context", flag, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    for (ssize_t r; got < size - 1 && (r = read(fds[0], out + got, size - 1 - got)) > 0;)
        got += (size_t)r;
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    out[got] = '\0';
}

/* POCL_AFFINITY as it is when main starts, with the variable set to `value`
   (NULL: unset): kiln's library sets it while loading, before main, unless
   the user chose. */
static void affinity_at_start(const char *value, char *out, size_t size)
{
    output_at_start("--print-pocl-affinity", "POCL_AFFINITY", value, out, size);
}

static void test_pocl_workers_pinned_unless_the_user_chose(void **state)
{
    (void)state;
    char got[64];
    affinity_at_start(NULL, got, sizeof got);
    assert_string_equal(got, "1");
    affinity_at_start("0", got, sizeof got);
    assert_string_equal(got, "0");
}

/* --print-pocl-workers: list the devices (which starts POCL's workers) in a
   new process and print "pocl=P caller=B,A threads=..." (P: whether a POCL
   platform is listed; B, A: the calling thread's policy before and after;
   then every other thread's policy: o normal, b batch, x other). */
static char policy_letter(int policy) { return policy == SCHED_OTHER ? 'o' : policy == SCHED_BATCH ? 'b' : 'x'; }

static int print_pocl_workers(void)
{
    const int before = sched_getscheduler(0);
    size_t n = 0;
    if (kiln_device_count(&n) != KILN_SUCCESS)
        return 1;
    int pocl = 0;
    for (size_t i = 0; i < n; i++) {
        kiln_device_info info;
        if (kiln_device_get_info(i, &info) == KILN_SUCCESS && strstr(info.platform, "Portable Computing Language"))
            pocl = 1;
    }
    printf("pocl=%d caller=%c,%c threads=", pocl, policy_letter(before), policy_letter(sched_getscheduler(0)));
    const long self = syscall(SYS_gettid);
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 1;
    for (struct dirent *e; (e = readdir(d));) {
        const long tid = atol(e->d_name);
        if (tid > 0 && tid != self)
            putchar(policy_letter(sched_getscheduler((pid_t)tid)));
    }
    closedir(d);
    return 0;
}

/* What --print-pocl-workers prints with KILN_POCL_BATCH set to value
   (NULL: unset). */
static void pocl_workers_at_start(const char *value, char *out, size_t size)
{
    output_at_start("--print-pocl-workers", "KILN_POCL_BATCH", value, out, size);
}

/* POCL's workers in the batch policy (docs/pocl.md#the-workers-policy):
   where a POCL platform is listed, listing the devices starts them so and
   gives the calling thread its policy back; KILN_POCL_BATCH=0 leaves them
   the caller's. */
static void test_pocl_workers_batch_unless_the_user_chose(void **state)
{
    (void)state;
    char got[256];
    pocl_workers_at_start(NULL, got, sizeof got);
    const char *threads = strstr(got, "threads=");
    assert_non_null(threads);
    if (strncmp(got, "pocl=0 ", 7) == 0) {
        if (strchr(threads, 'b'))
            fail_msg("no POCL platform, yet threads in the batch policy: %s", got);
        skip();
    }
    if (strcmp(threads, "threads=") == 0 && strncmp(got, "pocl=1 caller=o,o ", 18) == 0)
        skip(); /* a POCL device without worker threads (POCL_DEVICES=basic) */
    if (strncmp(got, "pocl=1 caller=o,o ", 18) != 0 || !strchr(threads, 'b'))
        fail_msg("POCL's workers not in the batch policy, or the caller's not given back: %s", got);
    pocl_workers_at_start("0", got, sizeof got);
    threads = strstr(got, "threads=");
    if (strncmp(got, "pocl=1 caller=o,o ", 18) != 0 || !threads || strchr(threads, 'b'))
        fail_msg("KILN_POCL_BATCH=0, yet: %s", got);
}

static void test_devices_are_listed_with_profiles(void **state)
{
    (void)state;
    size_t n = 0;
    kt_assert_status(kiln_device_count(&n), KILN_SUCCESS);
    assert_true(n >= 1); /* the POCL CPU device at least */
    for (size_t i = 0; i < n; i++) {
        kiln_device_info info;
        memset(&info, 0xff, sizeof info);
        kt_assert_status(kiln_device_get_info(i, &info), KILN_SUCCESS);
        assert_int_equal(info.index, i);
        /* The OpenCL backend's devices, then the CUDA backend's. */
        kiln_backend_info opencl;
        kt_assert_status(kiln_backend_get_info(0, &opencl), KILN_SUCCESS);
        assert_string_equal(info.backend, i < opencl.devices ? "opencl" : "cuda");
        assert_int_equal(info.backend_index, i < opencl.devices ? i : i - opencl.devices);
        assert_true(strlen(info.name) > 0 && strlen(info.platform) > 0);
        assert_true(info.compute_units >= 1 && info.global_mem_bytes > 0 && info.max_work_group_size >= 1);
        assert_true(strlen(info.profile) > 0 && strlen(info.profile_reason) > 0);
        assert_true(info.peak_gflops > 0.0 && info.peak_gbps > 0.0);
        assert_string_equal(info.peak_source, "profile");
    }
    kiln_device_info info;
    kt_assert_status(kiln_device_get_info(n, &info), KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_device_get_info(0, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

/* KILN_DEVICE as the suite was started with (the suite runs on the device
   it selects), put back by the tests that change it. */
static void restore_device(char *selected)
{
    if (selected)
        setenv("KILN_DEVICE", selected, 1);
    else
        unsetenv("KILN_DEVICE");
    free(selected);
}

static char *take_device(void)
{
    const char *v = getenv("KILN_DEVICE");
    char *selected = v ? strdup(v) : NULL;
    unsetenv("KILN_DEVICE");
    return selected;
}

static void test_default_context_is_the_best_device(void **state)
{
    (void)state;
    char *selected = take_device(); /* the best device is what kiln picks when nothing selects one */
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    if (have_gpu())
        assert_int_equal(info.type, KILN_DEVICE_GPU);
    else
        assert_int_equal(info.type, KILN_DEVICE_CPU);
    kiln_device_info listed;
    kt_assert_status(kiln_device_get_info(info.index, &listed), KILN_SUCCESS);
    assert_string_equal(listed.name, info.name);
    assert_string_equal(listed.profile, info.profile);
    /* Why it is the default, the same said of it listed and opened. */
    printf("# default: %s\n", info.selection);
    char name[48];
    snprintf(name, sizeof name, "%s:%zu, ", info.backend, info.backend_index);
    assert_ptr_equal(strstr(info.selection, name), info.selection);
    assert_string_equal(listed.selection, info.selection);
    assert_string_equal(listed.same_device, info.same_device);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    kiln_context_destroy(NULL);
    restore_device(selected);
}

static void test_selectors(void **state)
{
    (void)state;
    kiln_device_info first, info;
    kt_assert_status(kiln_device_get_info(0, &first), KILN_SUCCESS);

    kiln_context *ctx = create_with("0", NULL);
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_int_equal(info.index, 0);
    kiln_context_destroy(ctx);

    /* A case-changed substring of the device name selects it. */
    char sub[8] = {0};
    for (int i = 0; i < 6 && first.name[i + 1]; i++)
        sub[i] = (char)toupper((unsigned char)first.name[i + 1]);
    ctx = create_with(sub, NULL);
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_non_null(strcasestr(info.name, sub));
    kiln_context_destroy(ctx);

    if (first.type == KILN_DEVICE_CPU) {
        ctx = create_with("CPU", NULL);
        kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
        assert_int_equal(info.type, KILN_DEVICE_CPU);
        kiln_context_destroy(ctx);
    }
    if (!have_gpu())
        expect_create_fails("gpu", NULL, KILN_ERROR_NOT_FOUND);
}

static void test_bad_selectors(void **state)
{
    (void)state;
    expect_create_fails("999", NULL, KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(kiln_last_error_detail(), "[0]")); /* lists what exists */
    expect_create_fails("12abc", NULL, KILN_ERROR_INVALID_ARGUMENT);
    expect_create_fails("", NULL, KILN_ERROR_INVALID_ARGUMENT);
    expect_create_fails("no-such-device-anywhere", NULL, KILN_ERROR_NOT_FOUND);
    kt_assert_status(kiln_context_create(NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_environment_selects_device_and_options_win(void **state)
{
    (void)state;
    char *selected = take_device();
    setenv("KILN_DEVICE", "no-such-device-anywhere", 1);
    kiln_context *ctx = POISON_CTX;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_ERROR_NOT_FOUND);
    assert_ptr_equal(ctx, POISON_CTX);
    ctx = create_with("0", NULL); /* the option overrides the environment */
    kiln_context_destroy(ctx);
    setenv("KILN_DEVICE", "0", 1);
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.selection, "selected by KILN_DEVICE \"0\", an index");
    kt_assert_status(kiln_device_get_info(0, &info), KILN_SUCCESS);
    assert_string_equal(info.selection, "selected by KILN_DEVICE \"0\", an index");
    kiln_context_destroy(ctx);
    setenv("KILN_DEVICE", "", 1); /* empty is unset */
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    restore_device(selected);
}

static void test_forced_profile(void **state)
{
    (void)state;
    kiln_device_info dev;
    kt_assert_status(kiln_device_get_info(0, &dev), KILN_SUCCESS);
    const char *other = dev.type == KILN_DEVICE_CPU ? "generic-gpu" : "generic-cpu";

    kiln_context *ctx = create_with("0", other);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.profile, other);
    assert_non_null(strstr(info.profile_reason, "forced"));
    kiln_context_destroy(ctx);

    setenv("KILN_PROFILE", other, 1);
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_string_equal(info.profile, other);
    kiln_context_destroy(ctx);
    unsetenv("KILN_PROFILE");

    expect_create_fails("0", "no-such-profile", KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(kiln_last_error_detail(), "no-such-profile"));
}

/* Each context fills its own buffer with its own value. */
static void test_two_contexts_in_one_process(void **state)
{
    (void)state;
    kiln_context *a = create_with("0", NULL), *b = create_with("0", NULL);
    kiln_buffer *ba, *bb;
    kt_assert_status(kiln_buffer_create(a, 4096, &ba), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(b, 4096, &bb), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(ba, 0, 1024, 1.5f), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(bb, 0, 1024, -2.5f), KILN_SUCCESS);
    float ha[1024], hb[1024];
    kt_assert_status(kiln_buffer_read(ba, 0, sizeof ha, ha), KILN_SUCCESS);
    kiln_buffer_destroy(ba);
    kiln_context_destroy(a); /* b must not depend on a */
    kt_assert_status(kiln_buffer_read(bb, 0, sizeof hb, hb), KILN_SUCCESS);
    for (int i = 0; i < 1024; i++) {
        assert_true(ha[i] == 1.5f);
        assert_true(hb[i] == -2.5f);
    }
    kiln_buffer_destroy(bb);
    kiln_context_destroy(b);
}

struct worker {
    kiln_context *ctx;
    float value;
    int ok;
};

static void *fill_and_check(void *arg)
{
    struct worker *w = arg;
    enum { N = 5000 };
    static _Thread_local float host[N];
    kiln_buffer *buf = NULL;
    w->ok = kiln_buffer_create(w->ctx, N * sizeof(float), &buf) == KILN_SUCCESS;
    for (int rep = 0; rep < 20 && w->ok; rep++) {
        float v = w->value + (float)rep;
        w->ok = kiln_buffer_fill_f32(buf, 0, N, v) == KILN_SUCCESS &&
                kiln_buffer_read(buf, 0, sizeof host, host) == KILN_SUCCESS;
        for (int i = 0; i < N && w->ok; i++)
            w->ok = host[i] == v;
    }
    kiln_buffer_destroy(buf);
    return NULL;
}

static void test_one_context_many_threads(void **state)
{
    (void)state;
    kiln_context *ctx = create_with("0", NULL);
    enum { T = 4 };
    pthread_t threads[T];
    struct worker workers[T];
    for (int t = 0; t < T; t++) {
        workers[t] = (struct worker){ctx, 100.0f * (float)(t + 1), 0};
        assert_int_equal(pthread_create(&threads[t], NULL, fill_and_check, &workers[t]), 0);
    }
    for (int t = 0; t < T; t++) {
        assert_int_equal(pthread_join(threads[t], NULL), 0);
        assert_true(workers[t].ok);
    }
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_cache_info(ctx, &cache), KILN_SUCCESS);
    assert_int_equal(cache.builds + cache.disk_hits, 1); /* one program, made once */
    kiln_context_destroy(ctx);
}

static void test_null_context_arguments(void **state)
{
    (void)state;
    kiln_device_info info;
    kiln_cache_info cache;
    kt_assert_status(kiln_context_get_device_info(NULL, &info), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_get_cache_info(NULL, &cache), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_finish(NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_context *ctx = create_with(NULL, NULL);
    kt_assert_status(kiln_context_get_device_info(ctx, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_get_cache_info(ctx, NULL), KILN_ERROR_INVALID_ARGUMENT);
    kiln_context_destroy(ctx);
}

/* A fill and a small GEMM (two programs) on ctx, both checked. */
static void fill_and_gemm(kiln_context *ctx)
{
    enum { M = 5, N = 7, K = 9 };
    float a[M * K], b[K * N], c[M * N];
    uint64_t seed = kt_seed();
    kt_fill_uniform(a, M * K, -1.0f, 1.0f, &seed);
    kt_fill_uniform(b, K * N, -1.0f, 1.0f, &seed);
    kiln_buffer *ba, *bb, *bc;
    kt_assert_status(kiln_buffer_create(ctx, sizeof a, &ba), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof b, &bb), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof c, &bc), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(ba, 0, sizeof a, a), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(bb, 0, sizeof b, b), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(bc, 0, M * N, 42.5f), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(bc, 0, sizeof c, c), KILN_SUCCESS);
    for (int i = 0; i < M * N; i++)
        assert_true(c[i] == 42.5f);
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, M, N, K);
    kt_assert_status(kiln_gemm(ctx, &d, 1.0f, ba, 0, bb, 0, 0.0f, bc, 0, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(bc, 0, sizeof c, c), KILN_SUCCESS);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double ref = 0.0;
            for (int p = 0; p < K; p++)
                ref += (double)a[i * K + p] * b[p * N + j];
            /* K = 9 products of |x| < 1 in fp32: a few ulps of K. */
            assert_float_equal(c[i * N + j], ref, 1e-5 * K);
        }
    }
    kiln_buffer_destroy(ba);
    kiln_buffer_destroy(bb);
    kiln_buffer_destroy(bc);
}

/* A cache directory that cannot be used, made under `base` into dir; NULL
   when the case cannot be made here (the reason in *skip). */
struct unusable {
    const char *name;
    void (*make)(const char *base, char *dir, size_t size, const char **skip);
    const char *says; /* in the reason */
};

static void make_regular_file(const char *base, char *dir, size_t size, const char **skip)
{
    (void)skip;
    snprintf(dir, size, "%s/file", base);
    kt_write_file(dir, "not a directory");
}

static void make_under_regular_file(const char *base, char *dir, size_t size, const char **skip)
{
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/file", base);
    make_regular_file(base, file, sizeof file, skip);
    snprintf(dir, size, "%s/sub/cache", file);
}

static void make_over_long(const char *base, char *dir, size_t size, const char **skip)
{
    (void)skip;
    int len = snprintf(dir, size, "%s/", base);
    while ((size_t)len + 1 < size)
        dir[len++] = 'x';
    dir[len] = '\0';
}

static void make_read_only(const char *base, char *dir, size_t size, const char **skip)
{
    snprintf(dir, size, "%s/read-only", base);
    assert_int_equal(mkdir(dir, 0555), 0);
    if (geteuid() == 0)
        *skip = "running as root, which writes to read-only directories";
}

static const struct unusable unusable_dirs[] = {
    {"a regular file", make_regular_file, "is a regular file, not a directory"},
    {"a path under a regular file", make_under_regular_file, "which is a regular file, not a directory"},
    {"a path longer than PATH_MAX", make_over_long, "path too long"},
    {"a read-only directory", make_read_only, "is not writable"},
};

/* KILN_CACHE_DIR names an unusable directory: the context opens, work runs
   and is right, the cache info reports memory only with a reason naming the
   directory, and one warning says so. */
static void test_unusable_cache_dir(void **state)
{
    const struct unusable *u = *state;
    char *base = kt_temp_dir();
    char *dir = malloc(PATH_MAX + 100);
    assert_non_null(dir);
    const char *skip = NULL;
    u->make(base, dir, PATH_MAX + 100, &skip);
    if (skip) {
        printf("# skipped: %s\n", skip);
    } else {
        const char *saved = getenv("KILN_CACHE_DIR");
        char *saved_copy = saved ? strdup(saved) : NULL;
        setenv("KILN_CACHE_DIR", dir, 1);
        struct kt_capture cap;
        kt_capture_begin(&cap, base);
        kiln_context *ctx = NULL;
        kiln_status st = kiln_context_create(NULL, &ctx);
        kiln_cache_info info;
        if (st == KILN_SUCCESS) {
            fill_and_gemm(ctx);
            fill_and_gemm(ctx);
            st = kiln_context_get_cache_info(ctx, &info);
        }
        int warnings = kt_capture_end(&cap);
        if (saved_copy)
            setenv("KILN_CACHE_DIR", saved_copy, 1);
        else
            unsetenv("KILN_CACHE_DIR");
        free(saved_copy);
        kt_assert_status(st, KILN_SUCCESS);
        printf("# reason: %s\n", info.disk_reason);
        assert_int_equal(info.disk_enabled, 0);
        assert_string_equal(info.dir, "");
        assert_non_null(strstr(info.disk_reason, u->says));
        assert_non_null(strstr(info.disk_reason, "KILN_CACHE_DIR"));
        char shown[100];
        snprintf(shown, sizeof shown, "'%.80s", dir);
        assert_non_null(strstr(info.disk_reason, shown));
        assert_true(info.builds >= 2);
        assert_int_equal(info.disk_hits, 0);
        assert_int_equal(warnings, 1);
        kiln_context_destroy(ctx);
    }
    free(dir);
    kt_remove_tree(base);
    free(base);
}

static kiln_context *open_with_cache(const char *dir)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.cache_dir = dir;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    return ctx;
}

/* The cache directory is removed while a context uses it: later builds
   succeed (the store makes it again), and a new context misses and builds. */
static void test_cache_dir_removed_while_running(void **state)
{
    (void)state;
    char *base = kt_temp_dir();
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/cache", base);
    struct kt_capture cap;
    kt_capture_begin(&cap, base);
    kiln_context *ctx = open_with_cache(dir);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(ctx, 64, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(buf, 0, 16, 1.0f), KILN_SUCCESS);
    kiln_buffer_destroy(buf);
    kt_remove_tree(dir);
    fill_and_gemm(ctx);
    kiln_cache_info info;
    kt_assert_status(kiln_context_get_cache_info(ctx, &info), KILN_SUCCESS);
    assert_int_equal(info.disk_enabled, 1);
    assert_int_equal(info.disk_failures, 0);
    kiln_context_destroy(ctx);

    kt_remove_tree(dir);
    ctx = open_with_cache(dir);
    fill_and_gemm(ctx);
    kt_assert_status(kiln_context_get_cache_info(ctx, &info), KILN_SUCCESS);
    assert_int_equal(info.disk_hits, 0);
    assert_true(info.builds >= 2);
    kiln_context_destroy(ctx);
    assert_int_equal(kt_capture_end(&cap), 0);
    kt_remove_tree(base);
    free(base);
}

/* The cache directory becomes a regular file after the context opened:
   every store fails and is counted, one warning is logged, the work is
   right and the cache info still succeeds, saying why it cannot list. */
static void test_cache_dir_replaced_by_a_file_while_running(void **state)
{
    (void)state;
    char *base = kt_temp_dir();
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/cache", base);
    struct kt_capture cap;
    kt_capture_begin(&cap, base);
    kiln_context *ctx = open_with_cache(dir);
    kt_remove_tree(dir);
    kt_write_file(dir, "not a directory any more");
    fill_and_gemm(ctx);
    fill_and_gemm(ctx);
    kiln_cache_info info;
    kiln_status st = kiln_context_get_cache_info(ctx, &info);
    int warnings = kt_capture_end(&cap);
    kt_assert_status(st, KILN_SUCCESS);
    printf("# reason: %s\n", info.disk_reason);
    assert_int_equal(info.disk_enabled, 1);
    assert_string_equal(info.dir, dir);
    assert_true(info.builds >= 2);
    assert_int_equal(info.disk_failures, info.builds);
    assert_non_null(strstr(info.disk_reason, dir));
    assert_int_equal(info.disk_entries, 0);
    assert_int_equal(warnings, 1);
    kiln_context_destroy(ctx);
    kt_remove_tree(base);
    free(base);
}

/* Disabled by the options: no warning, and the reason says so. */
static void test_cache_disabled_by_options_is_reported_without_warning(void **state)
{
    (void)state;
    char *base = kt_temp_dir();
    struct kt_capture cap;
    kt_capture_begin(&cap, base);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = 1;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    kiln_cache_info info;
    kt_assert_status(kiln_context_get_cache_info(ctx, &info), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    assert_int_equal(kt_capture_end(&cap), 0);
    assert_int_equal(info.disk_enabled, 0);
    assert_string_equal(info.disk_reason, "disabled by the options");
    kt_remove_tree(base);
    free(base);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--print-pocl-affinity") == 0) {
        const char *v = getenv("POCL_AFFINITY");
        fputs(v ? v : "(unset)", stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--print-pocl-workers") == 0)
        return print_pocl_workers();
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_pocl_workers_pinned_unless_the_user_chose));
    kt_add(&tests, cmocka_unit_test(test_pocl_workers_batch_unless_the_user_chose));
    kt_add(&tests, cmocka_unit_test(test_devices_are_listed_with_profiles));
    kt_add(&tests, cmocka_unit_test(test_default_context_is_the_best_device));
    kt_add(&tests, cmocka_unit_test(test_selectors));
    kt_add(&tests, cmocka_unit_test(test_bad_selectors));
    kt_add(&tests, cmocka_unit_test(test_environment_selects_device_and_options_win));
    kt_add(&tests, cmocka_unit_test(test_forced_profile));
    kt_add(&tests, cmocka_unit_test(test_two_contexts_in_one_process));
    kt_add(&tests, cmocka_unit_test(test_one_context_many_threads));
    kt_add(&tests, cmocka_unit_test(test_null_context_arguments));
    kt_add_items(&tests, "cache directory unusable: ", test_unusable_cache_dir, unusable_dirs,
                 sizeof unusable_dirs / sizeof unusable_dirs[0], sizeof unusable_dirs[0]);
    kt_add(&tests, cmocka_unit_test(test_cache_dir_removed_while_running));
    kt_add(&tests, cmocka_unit_test(test_cache_dir_replaced_by_a_file_while_running));
    kt_add(&tests, cmocka_unit_test(test_cache_disabled_by_options_is_reported_without_warning));
    return kt_run_with("context", &tests, NULL, NULL);
}
