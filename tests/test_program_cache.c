/* The program cache: memory hits, disk hits in a new context, corrupt and
   foreign entries, concurrent writers, build failures, KILN_KERNEL_DIR. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context.h"
#include "jit/program_cache.h"
#include "test_util.h"

static const char axpb_source[] =
    KT_PORTABLE_KERNEL "__kernel void axpb(__global float *y, __global const float *x, const float a)\n"
                       "{\n"
                       "    const size_t i = get_global_id(0);\n"
                       "    y[i] = a * x[i] + (float)i + OFFSET;\n"
                       "}\n";

enum { N = 333 };

static kiln_context *open_cached(const char *dir)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.cache_dir = dir;
    opt.disable_disk_cache = dir == NULL;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    return ctx;
}

static kiln_cache_info stats(const kiln_context *ctx)
{
    kiln_cache_info info;
    kt_assert_status(kiln_context_get_cache_info(ctx, &info), KILN_SUCCESS);
    return info;
}

/* Build (or fetch) axpb with -DOFFSET=<offset>, run it on random data and
   check every output against the host computation. */
static void run_axpb(kiln_context *ctx, float offset)
{
    char options[64];
    snprintf(options, sizeof options, "-DOFFSET=%.1ff", offset);
    struct kiln_program *prog = NULL;
    struct kiln_kernel *kernel = NULL;
    kt_assert_status(kiln_program_get(ctx, "axpb", axpb_source, strlen(axpb_source), options, &prog), KILN_SUCCESS);
    kt_assert_status(kiln_program_kernel(ctx, prog, "axpb", &kernel), KILN_SUCCESS);

    uint64_t seed = kt_seed();
    float x[N], y[N];
    kt_fill_uniform(x, N, -1.0f, 1.0f, &seed);
    kiln_buffer *bx, *by;
    kt_assert_status(kiln_buffer_create(ctx, sizeof x, &bx), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof y, &by), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(bx, 0, sizeof x, x), KILN_SUCCESS);
    for (int i = 0; i < N; i++)
        y[i] = -999.0f; /* poison (a write, not the fill kernel, so this is the only program) */
    kt_assert_status(kiln_buffer_write(by, 0, sizeof y, y), KILN_SUCCESS);
    const float a = 2.5f;
    struct kiln_args args = {0};
    kiln_args_buffer(&args, by->handle);
    kiln_args_buffer(&args, bx->handle);
    kiln_args_float(&args, a);
    size_t global = N;
    /* An argument list that overflowed the builder launches nothing. */
    struct kiln_args many = {0};
    for (int i = 0; i <= KILN_ARGS_MAX; i++)
        kiln_args_float(&many, a);
    kt_assert_status(kiln_kernel_launch(ctx, kernel, &many, 1, &global, NULL, 0, NULL), KILN_ERROR_INTERNAL);
    assert_non_null(strstr(kiln_last_error_detail(), "kernel axpb: more than 32 arguments"));
    assert_int_equal(many.count, KILN_ARGS_MAX);
    kt_assert_status(kiln_kernel_launch(ctx, kernel, &args, 1, &global, NULL, 0, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(by, 0, sizeof y, y), KILN_SUCCESS);
    for (int i = 0; i < N; i++)
        assert_float_equal(y[i], a * x[i] + (float)i + offset, 1e-5);
    kiln_buffer_destroy(bx);
    kiln_buffer_destroy(by);
}

/* The entry files (*.kbin) in dir; returns how many, paths in out[0..]. */
static int entries(const char *dir, char out[][512], int max)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".kbin") == 0 && n < max)
            snprintf(out[n++], 512, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return n;
}

static void test_memory_hit_and_options_are_part_of_the_key(void **state)
{
    (void)state;
    kiln_context *ctx = open_cached(NULL);
    run_axpb(ctx, 1.0f);
    run_axpb(ctx, 1.0f);
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.builds, 1);
    assert_int_equal(s.memory_hits, 1);
    run_axpb(ctx, 2.0f); /* other options: another program */
    s = stats(ctx);
    assert_int_equal(s.builds, 2);
    assert_string_equal(s.dir, "");
    kiln_context_destroy(ctx);
}

static void test_second_context_loads_from_disk(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    kiln_context *first = open_cached(dir);
    run_axpb(first, 1.0f);
    assert_int_equal(stats(first).builds, 1);
    kiln_cache_info s = stats(first);
    assert_int_equal(s.disk_entries, 1);
    assert_true(s.disk_bytes > 0);
    kiln_context_destroy(first);

    kiln_context *second = open_cached(dir);
    run_axpb(second, 1.0f); /* the loaded binary computes the right thing */
    s = stats(second);
    assert_int_equal(s.builds, 0);
    assert_int_equal(s.disk_hits, 1);
    kiln_context_destroy(second);
    kt_remove_tree(dir);
    free(dir);
}

/* Without KILN_CACHE_PROGRAMS=1 (which the suite's environment sets), a
   driver that keeps what it compiles (POCL with its kernel cache on) keeps
   the programs: kiln's directory gets no binary, and a second context builds
   again, from the driver's cache; any other driver's binaries go to kiln's
   directory as before. With the switch, kiln stores them on every driver. */
static void test_programs_left_to_a_driver_that_keeps_them(void **state)
{
    (void)state;
    const char *saved = getenv("KILN_CACHE_PROGRAMS");
    char *saved_copy = saved ? strdup(saved) : NULL;
    for (int keep_in_kiln = 0; keep_in_kiln < 2; keep_in_kiln++) {
        if (keep_in_kiln)
            setenv("KILN_CACHE_PROGRAMS", "1", 1);
        else
            unsetenv("KILN_CACHE_PROGRAMS");
        char *dir = kt_temp_dir();
        kiln_context *first = open_cached(dir);
        const int driver_keeps =
            !keep_in_kiln && first->backend->driver_keeps_programs && first->backend->driver_keeps_programs(first->dev);
        run_axpb(first, 3.0f);
        kiln_cache_info s = stats(first);
        assert_int_equal(s.builds, 1);
        assert_true(s.disk_enabled); /* the directory is still kiln's, for find results */
        assert_string_equal(s.dir, dir);
        if (s.disk_entries != (driver_keeps ? 0u : 1u))
            fail_msg("KILN_CACHE_PROGRAMS %s, a driver that %s its programs: %llu entries in kiln's directory",
                     keep_in_kiln ? "1" : "unset", driver_keeps ? "keeps" : "does not keep",
                     (unsigned long long)s.disk_entries);
        kiln_context_destroy(first);

        kiln_context *second = open_cached(dir);
        run_axpb(second, 3.0f);
        s = stats(second);
        assert_int_equal(s.builds, driver_keeps ? 1 : 0);
        assert_int_equal(s.disk_hits, driver_keeps ? 0 : 1);
        kiln_context_destroy(second);
        kt_remove_tree(dir);
        free(dir);
    }
    if (saved_copy)
        setenv("KILN_CACHE_PROGRAMS", saved_copy, 1);
    else
        unsetenv("KILN_CACHE_PROGRAMS");
    free(saved_copy);
}

/* Damage the only entry with `damage`, then expect a rebuild that repairs it. */
static void check_damaged_entry_is_rebuilt(void (*damage)(const char *path))
{
    char *dir = kt_temp_dir();
    kiln_context *ctx = open_cached(dir);
    run_axpb(ctx, 1.0f);
    kiln_context_destroy(ctx);
    char files[4][512];
    assert_int_equal(entries(dir, files, 4), 1);
    damage(files[0]);

    ctx = open_cached(dir);
    run_axpb(ctx, 1.0f);
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.discarded, 1);
    assert_int_equal(s.builds, 1);
    assert_int_equal(s.disk_hits, 0);
    kiln_context_destroy(ctx);

    ctx = open_cached(dir); /* the rebuilt entry is good again */
    run_axpb(ctx, 1.0f);
    assert_int_equal(stats(ctx).disk_hits, 1);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

static void truncate_to_half(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
}

static void flip_last_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    fputc(c ^ 0x5a, f);
    assert_int_equal(fclose(f), 0);
}

static void overwrite_with_garbage(const char *path) { kt_write_file(path, "not a kiln cache entry at all"); }

static void test_truncated_entry_is_rebuilt(void **state)
{
    (void)state;
    check_damaged_entry_is_rebuilt(truncate_to_half);
}

static void test_corrupt_entry_is_rebuilt(void **state)
{
    (void)state;
    check_damaged_entry_is_rebuilt(flip_last_byte);
}

static void test_garbage_entry_is_rebuilt(void **state)
{
    (void)state;
    check_damaged_entry_is_rebuilt(overwrite_with_garbage);
}

/* A valid entry of another program under this program's file name. */
static void test_foreign_entry_is_rebuilt(void **state)
{
    (void)state;
    char *dir_a = kt_temp_dir(), *dir_b = kt_temp_dir();
    kiln_context *ctx = open_cached(dir_a);
    run_axpb(ctx, 1.0f);
    kiln_context_destroy(ctx);
    ctx = open_cached(dir_b);
    run_axpb(ctx, 2.0f);
    kiln_context_destroy(ctx);
    char a[1][512], b[1][512], cmd[1100];
    assert_int_equal(entries(dir_a, a, 1), 1);
    assert_int_equal(entries(dir_b, b, 1), 1);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a[0], b[0]);
    assert_int_equal(system(cmd), 0);

    ctx = open_cached(dir_b);
    run_axpb(ctx, 2.0f); /* must not run the OFFSET=1 binary */
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.discarded, 1);
    assert_int_equal(s.builds, 1);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir_a);
    kt_remove_tree(dir_b);
    free(dir_a), free(dir_b);
}

struct writer {
    const char *dir;
    pthread_barrier_t *barrier;
};

static void *build_same_program(void *arg)
{
    struct writer *w = arg;
    kiln_context *ctx = open_cached(w->dir);
    pthread_barrier_wait(w->barrier);
    run_axpb(ctx, 3.0f);
    kiln_context_destroy(ctx);
    return NULL;
}

static void test_concurrent_writers_leave_one_good_entry(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    enum { T = 3 };
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, T);
    pthread_t threads[T];
    struct writer w = {dir, &barrier};
    for (int t = 0; t < T; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, build_same_program, &w), 0);
    for (int t = 0; t < T; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    pthread_barrier_destroy(&barrier);

    char files[4][512];
    assert_int_equal(entries(dir, files, 4), 1);
    kiln_context *ctx = open_cached(dir);
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.disk_entries, 1); /* no temporary files counted or left as entries */
    run_axpb(ctx, 3.0f);
    s = stats(ctx);
    assert_int_equal(s.disk_hits, 1);
    assert_int_equal(s.discarded, 0);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

static void test_build_failure_reports_the_log_and_caches_nothing(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    kiln_context *ctx = open_cached(dir);
    static const char broken[] = "__kernel void k(__global float *y) { y[0] = undeclared_thing_42; }\n";
    struct kiln_program *prog = (struct kiln_program *)(uintptr_t)0x5a5a;
    kt_assert_status(kiln_program_get(ctx, "broken", broken, strlen(broken), "", &prog), KILN_ERROR_BUILD);
    assert_ptr_equal(prog, (struct kiln_program *)(uintptr_t)0x5a5a);
    assert_non_null(strstr(kiln_last_error_detail(), "undeclared_thing_42")); /* the compiler's log */
    assert_non_null(strstr(kiln_last_error_detail(), strcmp(ctx->backend->name, "opencl") == 0
                                                         ? "CL_BUILD_PROGRAM_FAILURE"
                                                         : "NVRTC could not compile"));
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.builds, 0);
    assert_int_equal(s.disk_entries, 0);

    /* Asking again fails again (failures are not cached as programs). */
    kt_assert_status(kiln_program_get(ctx, "broken", broken, strlen(broken), "", &prog), KILN_ERROR_BUILD);
    /* Bad options are a build error too. */
    kt_assert_status(
        kiln_program_get(ctx, "axpb", axpb_source, strlen(axpb_source), "-DOFFSET=1.0f -fno-such-flag", &prog),
        KILN_ERROR_BUILD);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

static void test_unknown_kernel_and_source_names(void **state)
{
    (void)state;
    kiln_context *ctx = open_cached(NULL);
    struct kiln_kernel *kernel = (struct kiln_kernel *)(uintptr_t)0x5a5a;
    kt_assert_status(kiln_kernel_get(ctx, "util/fill", "-DKILN_UTIL_WG=64", "no_such_kernel", &kernel),
                     KILN_ERROR_NOT_FOUND);
    assert_non_null(strstr(kiln_last_error_detail(), "no_such_kernel"));
    kt_assert_status(kiln_kernel_get(ctx, "no/such/file", "", "k", &kernel), KILN_ERROR_NOT_FOUND);
    assert_ptr_equal(kernel, (struct kiln_kernel *)(uintptr_t)0x5a5a);
    kiln_context_destroy(ctx);
}

static void test_kernel_dir_reads_sources_from_disk(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    setenv("KILN_KERNEL_DIR", dir, 1);
    kiln_context *ctx = open_cached(NULL);
    kiln_buffer *buf;
    kt_assert_status(kiln_buffer_create(ctx, 64, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_fill_f32(buf, 0, 16, 1.0f), KILN_ERROR_IO); /* no util/fill.cl there */
    assert_non_null(strstr(kiln_last_error_detail(), "util/fill.cl"));

    /* A development copy that writes value + 1 proves the disk copy is used. */
    char sub[600], path[700];
    snprintf(sub, sizeof sub, "%s/util", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(path, sizeof path, "%s/fill.cl", sub);
    if (strcmp(ctx->backend->name, "opencl") == 0)
        kt_write_file(path, "__kernel void util_fill_f32(__global float *x, const ulong first, const ulong count,\n"
                            "                            const float value)\n"
                            "{ const size_t i = get_global_id(0); if (i < count) x[first + i] = value + 1.0f; }\n");
    else /* CUDA C for NVRTC */
        kt_write_file(path, "extern \"C\" __global__ void util_fill_f32(float *x, const unsigned long first,\n"
                            "    const unsigned long count, const float value)\n"
                            "{ const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;\n"
                            "  if (i < count) x[first + i] = value + 1.0f; }\n");
    kt_assert_status(kiln_buffer_fill_f32(buf, 0, 16, 1.0f), KILN_SUCCESS);
    float host[16];
    kt_assert_status(kiln_buffer_read(buf, 0, sizeof host, host), KILN_SUCCESS);
    for (int i = 0; i < 16; i++)
        assert_true(host[i] == 2.0f);
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    unsetenv("KILN_KERNEL_DIR");
    kt_remove_tree(dir);
    free(dir);
}

/* Stores through the program cache (builds and the convolution find
   database alike) that fail once the directory breaks are counted, warned
   about once per context, and never fail the caller. */
static void test_failing_stores_are_counted_and_warned_about_once(void **state)
{
    (void)state;
    char *base = kt_temp_dir();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", base);
    kiln_context *ctx = open_cached(dir);
    run_axpb(ctx, 1.0f);
    assert_int_equal(stats(ctx).disk_entries, 1);
    kt_remove_tree(dir);
    kt_write_file(dir, "a file where the directory was");
    struct kt_capture cap;
    kt_capture_begin(&cap, base);
    kiln_program_cache_store(&ctx->cache, "a find database entry", "find-key-1", "direct", 6);
    kiln_program_cache_store(&ctx->cache, "a find database entry", "find-key-2", "wino", 4);
    run_axpb(ctx, 2.0f);
    int warnings = kt_capture_end(&cap);
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.disk_failures, 3);
    assert_int_equal(s.builds, 2);
    assert_int_equal(warnings, 1);
    kiln_context_destroy(ctx);
    kt_remove_tree(base);
    free(base);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_memory_hit_and_options_are_part_of_the_key));
    kt_add(&tests, cmocka_unit_test(test_second_context_loads_from_disk));
    kt_add(&tests, cmocka_unit_test(test_programs_left_to_a_driver_that_keeps_them));
    kt_add(&tests, cmocka_unit_test(test_truncated_entry_is_rebuilt));
    kt_add(&tests, cmocka_unit_test(test_corrupt_entry_is_rebuilt));
    kt_add(&tests, cmocka_unit_test(test_garbage_entry_is_rebuilt));
    kt_add(&tests, cmocka_unit_test(test_foreign_entry_is_rebuilt));
    kt_add(&tests, cmocka_unit_test(test_concurrent_writers_leave_one_good_entry));
    kt_add(&tests, cmocka_unit_test(test_build_failure_reports_the_log_and_caches_nothing));
    kt_add(&tests, cmocka_unit_test(test_unknown_kernel_and_source_names));
    kt_add(&tests, cmocka_unit_test(test_kernel_dir_reads_sources_from_disk));
    kt_add(&tests, cmocka_unit_test(test_failing_stores_are_counted_and_warned_about_once));
    return kt_run_with("program_cache", &tests, NULL, NULL);
}
