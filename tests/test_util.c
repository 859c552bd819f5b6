#include "test_util.h"

#include "core/context.h"
#include "kiln/kiln_cl.h"
#include "profiles/profile.h"
#include "profiles/profile_impl.h"
#include "ref/storage.h"

#include <ctype.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t kt_seed(void)
{
    const char *env = getenv("KILN_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    if (seed == 0)
        seed = 1;
    printf("# KILN_TEST_SEED=%llu\n", (unsigned long long)seed);
    return seed;
}

void kt_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t s = *state;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *state = s;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

char *kt_temp_dir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/kiln-test-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    return strdup(dir);
}

char *kt_copy_dir(const char *src)
{
    char *dir = kt_temp_dir(), cmd[8300];
    snprintf(cmd, sizeof cmd, "cp -r '%s/.' '%s'", src, dir);
    assert_int_equal(system(cmd), 0);
    return dir;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void kt_remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

void kt_write_file(const char *path, const char *text) { kt_write_bytes(path, text, strlen(text)); }

void kt_write_bytes(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot create %s", path);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

unsigned char *kt_read_bytes(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    unsigned char *data = malloc((size_t)n + 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    data[n] = '\0';
    *size = (size_t)n;
    return data;
}

void kt_edit_file(const char *path, const char *from, const char *to)
{
    size_t size;
    char *text = (char *)kt_read_bytes(path, &size);
    char *hit = strstr(text, from);
    if (!hit)
        fail_msg("%s holds no \"%s\"", path, from);
    size_t n = size - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    assert_non_null(out);
    snprintf(out, n, "%.*s%s%s", (int)(hit - text), text, to, hit + strlen(from));
    kt_write_file(path, out);
    free(out);
    free(text);
}

void kt_assert_status_(kiln_status got, kiln_status expected, const char *file, int line)
{
    if (got != expected) {
        print_error("%s:%d: status %d (%s) where %d (%s) was expected; detail: %s\n", file, line, got,
                    kiln_status_string(got), expected, kiln_status_string(expected), kiln_last_error_detail());
        _fail(file, line);
    }
    if (expected != KILN_SUCCESS && kiln_last_error_detail()[0] == '\0') {
        print_error("%s:%d: status %s without a detail message\n", file, line, kiln_status_string(got));
        _fail(file, line);
    }
}

size_t kt_elem_size(kiln_dtype t) { return t == KILN_F32 ? 4 : 2; }

/* fp32 -> fp16, round to nearest even, NaN and overflow kept. */
uint16_t kt_to_half(float f) { return kiln_ref_to_f16(f); }

float kt_from_half(uint16_t h) { return kiln_ref_from_f16(h); }

uint16_t kt_to_bf16(float f) { return kiln_ref_to_bf16(f); }

float kt_from_bf16(uint16_t h) { return kiln_ref_from_bf16(h); }

float kt_round_to(kiln_dtype t, float f)
{
    return t == KILN_F16 ? kt_from_half(kt_to_half(f)) : t == KILN_BF16 ? kt_from_bf16(kt_to_bf16(f)) : f;
}

void kt_store(unsigned char *raw, kiln_dtype t, size_t i, float f)
{
    if (t == KILN_F32) {
        memcpy(raw + 4 * i, &f, sizeof f);
        return;
    }
    const uint16_t h = t == KILN_F16 ? kt_to_half(f) : kt_to_bf16(f);
    memcpy(raw + 2 * i, &h, sizeof h);
}

const char *kt_dtype_name(kiln_dtype t) { return t == KILN_F16 ? "f16" : t == KILN_BF16 ? "bf16" : "f32"; }

float kt_stored(const unsigned char *raw, kiln_dtype t, size_t i)
{
    if (t != KILN_F32) {
        uint16_t h;
        memcpy(&h, raw + 2 * i, sizeof h);
        return t == KILN_F16 ? kt_from_half(h) : kt_from_bf16(h);
    }
    float f;
    memcpy(&f, raw + 4 * i, sizeof f);
    return f;
}

size_t kt_large_page_bytes(void)
{
    size_t bytes = (size_t)2 << 20;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
    unsigned long long n = 0;
    if (f && fscanf(f, "%llu", &n) == 1 && n >= 4096 && (n & (n - 1)) == 0 && n <= ((unsigned long long)1 << 30))
        bytes = (size_t)n;
    if (f)
        fclose(f);
    return bytes;
}

kiln_buffer *kt_poisoned_buffer(kiln_context *ctx, size_t bytes)
{
    unsigned char *poison = malloc(bytes);
    assert_non_null(poison);
    memset(poison, 0xff, bytes);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_create(ctx, bytes, &buf), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(buf, 0, bytes, poison), KILN_SUCCESS);
    free(poison);
    return buf;
}

void kt_assert_still_poisoned(const kiln_buffer *buf)
{
    size_t n = kiln_buffer_size(buf);
    unsigned char *back = malloc(n);
    assert_non_null(back);
    kt_assert_status(kiln_buffer_read(buf, 0, n, back), KILN_SUCCESS);
    for (size_t i = 0; i < n; i++)
        if (back[i] != 0xff)
            fail_msg("byte %zu of %zu of a buffer was written (0x%02x)", i, n, back[i]);
    free(back);
}

kiln_context *kt_ctx;
uint64_t kt_group_seed;

int kt_group_setup(void **state)
{
    (void)state;
    kt_group_seed = kt_seed();
    return kiln_context_create(NULL, &kt_ctx) == KILN_SUCCESS ? 0 : -1;
}

int kt_group_teardown(void **state)
{
    (void)state;
    kiln_context_destroy(kt_ctx);
    return 0;
}

/* A context on the default device with these options (NULL: the default). */
static kiln_context *context_with(const char *profile, const char *overlay)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.profile = profile;
    opt.profile_overlay = overlay;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    return ctx;
}

kiln_context *kt_profile_context(const char *name)
{
    kiln_context *ctx = context_with(name, NULL);
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(ctx, &dev), KILN_SUCCESS);
    assert_string_equal(dev.profile, name);
    char why[KILN_PROFILE_WHY_SIZE];
    if (kiln_profile_fits(ctx->profile, &ctx->desc, why) != 0) {
        printf("# skipped: profile %s does not fit device %s: %s\n", name, dev.name, why);
        kiln_context_destroy(ctx);
        skip();
    }
    return ctx;
}

kiln_context *kt_overlay_context(const char *fmt, ...)
{
    char overlay[1024];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(overlay, sizeof overlay, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof overlay);
    return context_with(NULL, overlay);
}

int kt_vector_kernels(const kiln_context *ctx) { return ctx->vector_kernels; }

int kt_cuda_cc(kiln_context *ctx)
{
    kiln_device_info dev;
    kt_assert_status(kiln_context_get_device_info(ctx, &dev), KILN_SUCCESS);
    if (strcmp(dev.backend, "cuda") != 0 || strncmp(dev.arch, "sm_", 3) != 0)
        return 0;
    return atoi(dev.arch + 3);
}

int kt_unsupported_here(const kiln_context *ctx, kiln_status status)
{
    if (status != KILN_ERROR_UNSUPPORTED || ctx->vector_kernels)
        return 0;
    printf("# not on the %s backend's kernels: %s\n", ctx->backend->name, kiln_last_error_detail());
    return 1;
}

void kt_wait_and_release(kiln_event *ev)
{
    assert_true(ev != NULL && ev != KT_POISON_EVENT);
    if (strcmp(ev->backend->name, "opencl") != 0) {
        kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
        kiln_event_destroy(ev);
        return;
    }
    cl_event cl = kiln_event_get_cl(ev);
    assert_non_null(cl);
    kt_assert_status(kiln_event_wait(ev), KILN_SUCCESS);
    cl_int status = CL_QUEUED;
    assert_int_equal(clGetEventInfo(cl, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL), CL_SUCCESS);
    assert_int_equal(status, CL_COMPLETE);
    kiln_event_destroy(ev);
}

/* Allocation failures while a list is built end the program: no test runs yet. */
static void *grow(void *array, size_t *capacity, size_t needed, size_t elem)
{
    if (needed <= *capacity)
        return array;
    size_t cap = *capacity ? 2 * *capacity : 64;
    while (cap < needed)
        cap *= 2;
    void *bigger = realloc(array, cap * elem);
    if (!bigger) {
        fprintf(stderr, "out of memory building the test list\n");
        exit(1);
    }
    *capacity = cap;
    return bigger;
}

static void *own(struct kt_list *list, void *p)
{
    if (!p) {
        fprintf(stderr, "cannot allocate or format a test name or state\n");
        exit(1);
    }
    list->owned = grow(list->owned, &list->owned_capacity, list->owned_count + 1, sizeof *list->owned);
    list->owned[list->owned_count++] = p;
    return p;
}

static void add_named(struct kt_list *list, struct CMUnitTest test, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *name = own(list, n < 0 ? NULL : malloc((size_t)n + 1));
    vsnprintf(name, (size_t)n + 1, fmt, again);
    va_end(again);
    test.name = name;
    list->tests = grow(list->tests, &list->capacity, list->count + 1, sizeof *list->tests);
    list->tests[list->count++] = test;
}

void kt_add_test_(struct kt_list *list, struct CMUnitTest test)
{
    test.name = own(list, strdup(test.name));
    list->tests = grow(list->tests, &list->capacity, list->count + 1, sizeof *list->tests);
    list->tests[list->count++] = test;
}

void kt_addf(struct kt_list *list, CMUnitTestFunction fn, const void *state, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_named(list, (struct CMUnitTest){NULL, fn, NULL, NULL, (void *)state}, fmt, ap);
    va_end(ap);
}

void *kt_add_copy(struct kt_list *list, CMUnitTestFunction fn, const void *state, size_t size, const char *fmt, ...)
{
    void *copy = own(list, malloc(size));
    memcpy(copy, state, size);
    va_list ap;
    va_start(ap, fmt);
    add_named(list, (struct CMUnitTest){NULL, fn, NULL, NULL, copy}, fmt, ap);
    va_end(ap);
    return copy;
}

void kt_add_items(struct kt_list *list, const char *prefix, CMUnitTestFunction fn, const void *items, size_t count,
                  size_t size)
{
    for (size_t i = 0; i < count; i++) {
        const void *item = (const char *)items + i * size;
        kt_addf(list, fn, item, "%s%s", prefix, *(const char *const *)item);
    }
}

void kt_add_profiles(struct kt_list *list, CMUnitTestFunction test, CMFixtureFunction teardown)
{
    struct kiln_profile_set *set = NULL;
    if (kiln_profile_set_load(NULL, NULL, &set) != KILN_SUCCESS) {
        fprintf(stderr, "cannot load the embedded profiles: %s\n", kiln_last_error_detail());
        exit(1);
    }
    for (size_t i = 0; i < kiln_profile_set_count(set); i++) {
        const struct kiln_profile *p = kiln_profile_set_at(set, i);
        if (kiln_profile_is_abstract(p))
            continue;
        const char *name = kiln_profile_name(p);
        kt_add_copy(list, test, name, strlen(name) + 1, "profile %s", name);
        list->tests[list->count - 1].teardown_func = teardown;
    }
    kiln_profile_set_free(set);
}

char **kt_environ_with(const char *const *set)
{
    extern char **environ;
    size_t n = 0, changes = 0;
    while (environ[n])
        n++;
    while (set[changes])
        changes++;
    char **env = calloc(n + changes + 1, sizeof *env);
    assert_non_null(env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int named = 0;
        for (const char *const *s = set; *s && !named; s++) {
            const size_t len = strcspn(*s, "=");
            named = strncmp(environ[i], *s, len) == 0 && environ[i][len] == '=';
        }
        if (!named)
            env[k++] = environ[i];
    }
    for (const char *const *s = set; *s; s++)
        if (strchr(*s, '='))
            env[k++] = (char *)*s;
    return env;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* 0 if every test has its own name, else 1 after naming the duplicates. */
static int check_names_unique(const char *group, const struct kt_list *list)
{
    const char **names = malloc((list->count ? list->count : 1) * sizeof *names);
    if (!names)
        return 1;
    for (size_t i = 0; i < list->count; i++)
        names[i] = list->tests[i].name;
    qsort(names, list->count, sizeof *names, by_name);
    int dup = 0;
    for (size_t i = 1; i < list->count; i++)
        if (strcmp(names[i - 1], names[i]) == 0) {
            fprintf(stderr, "%s: two tests are named \"%s\"\n", group, names[i]);
            dup = 1;
        }
    free(names);
    return dup;
}

/* KILN_TEST_SHARD "i/n" (0 <= i < n <= 1000): reads it into *shard and
   *shards (0 and 1 when it is unset or empty); 0 if it is well formed, else
   1 after saying so. */
static int shard_of(const char *group, size_t *shard, size_t *shards)
{
    *shard = 0, *shards = 1;
    const char *v = getenv("KILN_TEST_SHARD");
    if (!v || !v[0])
        return 0;
    char *end = NULL;
    const unsigned long i = isdigit((unsigned char)v[0]) ? strtoul(v, &end, 10) : 0;
    const int slash = end && *end == '/' && isdigit((unsigned char)end[1]);
    const unsigned long n = slash ? strtoul(end + 1, &end, 10) : 0;
    if (!slash || *end || n < 1 || n > 1000 || i >= n) {
        fprintf(stderr, "%s: KILN_TEST_SHARD=\"%s\" is not \"i/n\" with 0 <= i < n <= 1000\n", group, v);
        return 1;
    }
    *shard = i, *shards = n;
    return 0;
}

/* Keeps the list's tests shard, shard + shards, shard + 2 * shards, ... in
   their order (the names stay owned by the list). */
static void keep_shard(struct kt_list *list, size_t shard, size_t shards)
{
    size_t kept = 0;
    for (size_t i = shard; i < list->count; i += shards)
        list->tests[kept++] = list->tests[i];
    list->count = kept;
}

int kt_run_with(const char *group, struct kt_list *list, CMFixtureFunction setup, CMFixtureFunction teardown)
{
    int failed = check_names_unique(group, list);
    /* KILN_TEST_FILTER: run only the tests whose names match its pattern
       (cmocka's: * and ? wildcards). */
    const char *filter = getenv("KILN_TEST_FILTER");
    if (filter && filter[0])
        cmocka_set_test_filter(filter);
    /* KILN_TEST_SHARD "i/n": run every n-th test from the i-th, so that n
       processes (ctest's KILN_TEST_SHARDS) share a long program. */
    size_t shard = 0, shards = 1;
    if (!failed)
        failed = shard_of(group, &shard, &shards);
    if (!failed && shards > 1) {
        const size_t all = list->count;
        keep_shard(list, shard, shards);
        printf("%s: shard %zu of %zu (KILN_TEST_SHARD): %zu of %zu tests\n", group, shard, shards, list->count, all);
    }
    if (!failed)
        failed = _cmocka_run_group_tests(group, list->tests, list->count, setup, teardown);
    for (size_t i = 0; i < list->owned_count; i++)
        free(list->owned[i]);
    free(list->owned);
    free(list->tests);
    memset(list, 0, sizeof *list);
    return failed;
}

int kt_run(const char *group, struct kt_list *list)
{
    return kt_run_with(group, list, kt_group_setup, kt_group_teardown);
}

void kt_capture_begin(struct kt_capture *c, const char *dir)
{
    const char *log = getenv("KILN_LOG");
    c->log_env = log ? strdup(log) : NULL;
    setenv("KILN_LOG", "1", 1);
    snprintf(c->path, sizeof c->path, "%s/stderr.txt", dir);
    fflush(stderr);
    c->saved = dup(STDERR_FILENO);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(c->saved >= 0 && fd >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    close(fd);
}

int kt_capture_end(struct kt_capture *c)
{
    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    if (c->log_env)
        setenv("KILN_LOG", c->log_env, 1);
    else
        unsetenv("KILN_LOG");
    free(c->log_env);
    FILE *f = fopen(c->path, "r");
    assert_non_null(f);
    int warnings = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "kiln warning:", 13) == 0) {
            warnings++;
            printf("# %s", line);
        }
    }
    fclose(f);
    return warnings;
}

static void watchdog_fired(int sig)
{
    (void)sig;
    static const char msg[] = "[  FAILED  ] watchdog: the test ran past its limit (KT_WATCHDOG_SECONDS)\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

int kt_watchdog_arm(void **state)
{
    (void)state;
    fflush(stdout); /* cmocka's "[ RUN      ]" line names the test if it hangs */
    signal(SIGALRM, watchdog_fired);
    alarm(KT_WATCHDOG_SECONDS);
    return 0;
}

int kt_watchdog_disarm(void **state)
{
    (void)state;
    alarm(0);
    return 0;
}

void kt_add_watched(struct kt_list *list, const char *prefix, CMUnitTestFunction fn, const void *state)
{
    kt_addf(list, fn, state, "%s%s", prefix, *(const char *const *)state);
    list->tests[list->count - 1].setup_func = kt_watchdog_arm;
    list->tests[list->count - 1].teardown_func = kt_watchdog_disarm;
}
