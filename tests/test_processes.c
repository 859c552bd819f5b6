/*
 * Many processes on one program cache directory: eight processes that start
 * together on an empty directory all build the same kernels (a GEMM and a
 * convolution in find mode, which also writes the find database) and
 * compute right results, after which a ninth finds everything on disk; and a
 * process given a directory with damaged entries and foreign files discards
 * and rebuilds the damaged entries and leaves the foreign files alone.
 * tests/test_disk_cache.c covers the entry format within one process. And
 * a process whose first kiln calls are eight threads creating contexts at
 * once gets eight contexts (the first listing of POCL's devices, which
 * other threads' listings must wait for).
 *
 * The parent never opens a context: POCL is not fork-safe once initialised,
 * so every process that uses kiln is this program run again as
 * "/proc/self/exe --child ...", started with fork and exec, and it writes
 * what it saw to a report file that the parent checks. A child fails by
 * exiting non-zero (cmocka's assertions outside a test exit the process);
 * one that has not ended by its deadline is killed and the test fails: a
 * hang must not hold up the run.
 */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conv_ref.h"
#include "gemm_ref.h"
#include "jit/disk_cache.h"

#define PROCESSES 8
/* Seconds a group of children may take, from start to exit, before the test
   calls it a hang; a few seconds each is usual. */
#define DEADLINE_S 120.0
#define REPORT_MAGIC 0x6b696c6eu

/* What a child saw, written once it has checked its results. */
struct report {
    kiln_cache_info cache;
    char gemm_kernel[64];
    char conv_name[32];
    char conv_reason[160];
    unsigned magic; /* REPORT_MAGIC: the child got to the end */
};

/* ------------------------------------------------------------------------ */
/* The child: one process's work on the shared directory                     */
/* ------------------------------------------------------------------------ */

/* A GEMM above the CPU profiles' direct threshold (m*n*k > 262144), so it
   takes the packed route, with sizes that fit no tile. */
static void child_gemm(kiln_context *ctx, uint64_t *seed, struct report *r)
{
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 70, 64, 61);
    kiln_gemm_plan *plan = NULL;
    kt_assert_status(kiln_gemm_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_gemm_plan_info info;
    kt_assert_status(kiln_gemm_plan_describe(plan, &info), KILN_SUCCESS);
    snprintf(r->gemm_kernel, sizeof r->gemm_kernel, "%s", info.kernel);
    gr_check_plan(ctx, &d, plan, 2, seed);
    kiln_gemm_plan_destroy(plan);
}

/* A 3x3 convolution in find mode: implicit GEMM, both Winograd variants,
   direct and im2col apply, so the search builds all of them. */
static void child_conv(kiln_context *ctx, uint64_t *seed, struct report *r)
{
    kiln_conv2d_desc d;
    kiln_conv2d_desc_init(&d, KILN_NCHW, 1, 8, 14, 14, 8, 3, 3);
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = 1;
    d.has_bias = 1;
    d.activation = KILN_ACT_RELU;
    d.find = 1;
    kiln_conv2d_plan *plan = NULL;
    kt_assert_status(kiln_conv2d_plan_create(ctx, &d, &plan), KILN_SUCCESS);
    kiln_conv2d_plan_info info;
    kt_assert_status(kiln_conv2d_plan_describe(plan, &info), KILN_SUCCESS);
    snprintf(r->conv_name, sizeof r->conv_name, "%s", info.name);
    snprintf(r->conv_reason, sizeof r->conv_reason, "%s", info.reason);
    struct cr_case t;
    cr_case_init(&t, ctx, &d);
    cr_case_fill(&t, seed);
    kt_assert_status(cr_case_execute(&t, plan, NULL), KILN_SUCCESS);
    cr_case_check(&t, kiln_conv_algo_tol(info.algo, t.dims.k_eff), info.name);
    cr_case_free(&t);
    kiln_conv2d_plan_destroy(plan);
}

/* --child <cache dir> <report file> <seed> <ready fd> <go fd>: open a
   context on the directory; then, when the fds are not -1, write one byte
   to `ready` and wait for `go` to reach end of file (the parent closes it
   once every child is ready); run the GEMM and the convolution, check them,
   and write the report. */
static int child_main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr,
                "usage: %s --child <cache dir> <report file> <seed> <ready fd> <go "
                "fd>\n",
                argv[0]);
        return 2;
    }
    uint64_t seed = strtoull(argv[4], NULL, 0);
    int ready = atoi(argv[5]), go = atoi(argv[6]);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.cache_dir = argv[2];
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    if (ready >= 0) {
        assert_int_equal(write(ready, "r", 1), 1);
        close(ready);
    }
    if (go >= 0) {
        char byte;
        ssize_t n;
        while ((n = read(go, &byte, 1)) != 0)
            assert_true(n > 0 || errno == EINTR);
        close(go);
    }
    struct report r;
    memset(&r, 0, sizeof r);
    child_gemm(ctx, &seed, &r);
    child_conv(ctx, &seed, &r);
    kt_assert_status(kiln_context_get_cache_info(ctx, &r.cache), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    r.magic = REPORT_MAGIC;
    kt_write_bytes(argv[3], &r, sizeof r);
    return 0;
}

/* The first-contexts child: FIRST_THREADS threads, released together, each
   create a context as the process's first kiln call, fill a buffer and
   read it back. Exits 0 if all did, else 1 after saying what failed. The
   threads never end: the process exits under them once they have reported.
   LLVM, which POCL compiles with, gives the thread that first sets its
   signal handlers up an alternate signal stack from malloc, which
   AddressSanitizer fails to unmap when that thread ends ("unable to unmap",
   in the suite's AddressSanitizer build). */
#define FIRST_THREADS 8

struct first_context {
    pthread_barrier_t *start, *done;
    kiln_status status;
    char detail[256];
    int wrong; /* the buffer read back other than it was filled */
};

static void *first_context_thread(void *arg)
{
    struct first_context *f = arg;
    pthread_barrier_wait(f->start);
    kiln_context *ctx = NULL;
    kiln_buffer *buf = NULL;
    f->status = kiln_context_create(NULL, &ctx);
    if (f->status == KILN_SUCCESS)
        f->status = kiln_buffer_create(ctx, 64 * sizeof(float), &buf);
    if (f->status == KILN_SUCCESS)
        f->status = kiln_buffer_fill_f32(buf, 0, 64, 2.5f);
    float back[64] = {0};
    if (f->status == KILN_SUCCESS)
        f->status = kiln_buffer_read(buf, 0, sizeof back, back);
    if (f->status != KILN_SUCCESS)
        snprintf(f->detail, sizeof f->detail, "%s", kiln_last_error_detail());
    for (int i = 0; f->status == KILN_SUCCESS && i < 64; i++)
        f->wrong |= back[i] != 2.5f;
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    pthread_barrier_wait(f->done);
    for (;;)
        pause();
    return NULL;
}

static int first_contexts_main(void)
{
    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, FIRST_THREADS);
    pthread_barrier_init(&done, NULL, FIRST_THREADS + 1);
    struct first_context f[FIRST_THREADS];
    pthread_t thread;
    memset(f, 0, sizeof f);
    for (int i = 0; i < FIRST_THREADS; i++) {
        f[i].start = &start, f[i].done = &done;
        if (pthread_create(&thread, NULL, first_context_thread, &f[i]) != 0)
            return 1;
    }
    pthread_barrier_wait(&done);
    int failed = 0;
    for (int i = 0; i < FIRST_THREADS; i++) {
        if (f[i].status != KILN_SUCCESS || f[i].wrong) {
            fprintf(stderr, "thread %d: status %d%s: %s\n", i, (int)f[i].status,
                    f[i].wrong ? ", its buffer read back wrong" : "", f[i].detail);
            failed = 1;
        }
    }
    return failed;
}

/* The first-context child: creates a context as the process's first kiln
   call and writes its status and detail to the report file argv[2]. */
struct first_report {
    int status;
    char detail[1536];
};

static int first_context_main(const char *report)
{
    struct first_report r;
    memset(&r, 0, sizeof r);
    kiln_context *ctx = NULL;
    r.status = (int)kiln_context_create(NULL, &ctx);
    snprintf(r.detail, sizeof r.detail, "%s", kiln_last_error_detail());
    kiln_context_destroy(ctx);
    kt_write_bytes(report, &r, sizeof r);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The parent: starting, synchronising and reaping children                  */
/* ------------------------------------------------------------------------ */

struct child {
    pid_t pid;
    int status; /* from waitpid, once ended */
    int ended;
    char report[PATH_MAX];
};

static uint64_t seed;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Start child `index` on `dir`, reporting to <work>/report-<index>; `ready`
   and `go` (or -1) are the ends of the barrier pipes it keeps. Every other
   descriptor of the parent is close-on-exec. */
static void spawn(struct child *c, const char *work, const char *dir, int index, int ready, int go)
{
    char seed_arg[32], ready_arg[16], go_arg[16];
    snprintf(c->report, sizeof c->report, "%s/report-%d", work, index);
    unlink(c->report);
    snprintf(seed_arg, sizeof seed_arg, "%llu", (unsigned long long)(seed + 7919u * (uint64_t)index));
    snprintf(ready_arg, sizeof ready_arg, "%d", ready);
    snprintf(go_arg, sizeof go_arg, "%d", go);
    char *argv[] = {"test_processes", "--child", (char *)dir, c->report, seed_arg, ready_arg, go_arg, NULL};
    c->ended = 0;
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        if ((ready >= 0 && fcntl(ready, F_SETFD, 0) != 0) || (go >= 0 && fcntl(go, F_SETFD, 0) != 0))
            _exit(126);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
}

/* Reap children that have ended; the number still running. */
static int reap(struct child *c, int n)
{
    int running = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].ended)
            continue;
        pid_t got = waitpid(c[i].pid, &c[i].status, WNOHANG);
        assert_true(got >= 0);
        c[i].ended = got == c[i].pid;
        running += !c[i].ended;
    }
    return running;
}

/* Kill the children still running and fail with `why`. */
static void kill_and_fail(struct child *c, int n, const char *why)
{
    int killed = 0;
    for (int i = 0; i < n; i++)
        if (!c[i].ended) {
            kill(c[i].pid, SIGKILL);
            waitpid(c[i].pid, &c[i].status, 0);
            c[i].ended = 1;
            killed++;
        }
    fail_msg("%s: %d of %d processes killed", why, killed, n);
}

/* Read one byte per child from `ready` (the children's ends closed in the
   parent), then close `go` so they all start at once. A child that ends
   before it is ready, or a barrier not reached by the deadline, fails. */
static void release_together(struct child *c, int n, int ready, int go, double deadline)
{
    int arrived = 0;
    while (arrived < n) {
        if (reap(c, n) < n)
            kill_and_fail(c, n, "a process ended before it was ready");
        if (now_s() > deadline)
            kill_and_fail(c, n, "the processes did not all get ready in time");
        struct pollfd p = {ready, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        char bytes[PROCESSES];
        ssize_t got = read(ready, bytes, (size_t)(n - arrived) < sizeof bytes ? (size_t)(n - arrived) : sizeof bytes);
        assert_true(got > 0 || errno == EINTR);
        arrived += got > 0 ? (int)got : 0;
    }
    close(go);
}

/* Wait until every child has ended or the deadline has passed (then the
   rest are killed and the test fails: a hang). */
static void wait_all(struct child *c, int n, double deadline)
{
    while (reap(c, n) > 0) {
        if (now_s() > deadline)
            kill_and_fail(c, n, "processes still running at the deadline (a hang)");
        usleep(20000);
    }
}

/* The report of a child that must have exited 0. */
static struct report child_report(const struct child *c, int index)
{
    if (!WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0)
        fail_msg("process %d %s %d", index, WIFEXITED(c->status) ? "exited with" : "was killed by signal",
                 WIFEXITED(c->status) ? WEXITSTATUS(c->status) : WTERMSIG(c->status));
    size_t size;
    unsigned char *bytes = kt_read_bytes(c->report, &size);
    struct report r;
    assert_int_equal(size, sizeof r);
    memcpy(&r, bytes, sizeof r);
    free(bytes);
    assert_int_equal(r.magic, REPORT_MAGIC);
    print_message("# process %d: %s and %s (%s); %llu builds, %llu disk hits, "
                  "%llu discarded\n",
                  index, r.gemm_kernel, r.conv_name, r.conv_reason, (unsigned long long)r.cache.builds,
                  (unsigned long long)r.cache.disk_hits, (unsigned long long)r.cache.discarded);
    return r;
}

/* One child on `dir`, not synchronised with anything; its report. */
static struct report run_one(const char *work, const char *dir, int index)
{
    struct child c;
    spawn(&c, work, dir, index, -1, -1);
    wait_all(&c, 1, now_s() + DEADLINE_S);
    return child_report(&c, index);
}

/* ------------------------------------------------------------------------ */
/* The cache directory as files                                             */
/* ------------------------------------------------------------------------ */

struct entry {
    char path[PATH_MAX];
    char *key; /* NUL-terminated copy */
    unsigned char *bytes;
    size_t size;
};

struct entries {
    struct entry items[64];
    size_t count;
};

/* buf = dir/name, which must fit. */
static void path_in(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    assert_true(n >= 0 && (size_t)n < size);
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Every file of `dir`, which must all be entries (no left-over temporary,
   say), with its bytes and key. */
static void list_entries(const char *dir, struct entries *list)
{
    memset(list, 0, sizeof *list);
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (const struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        size_t len = strlen(e->d_name);
        if (len != 32 + 5 || strcmp(e->d_name + 32, ".kbin") != 0)
            fail_msg("%s holds %s, which is no cache entry", dir, e->d_name);
        assert_true(list->count < sizeof list->items / sizeof list->items[0]);
        struct entry *en = &list->items[list->count++];
        path_in(en->path, sizeof en->path, dir, e->d_name);
        en->bytes = kt_read_bytes(en->path, &en->size);
        assert_true(en->size >= KT_ENTRY_HEADER);
        size_t key_len = (size_t)get_le(en->bytes + KT_ENTRY_KEY_LEN, 4);
        assert_true(key_len <= en->size - KT_ENTRY_HEADER);
        en->key = strndup((const char *)en->bytes + KT_ENTRY_HEADER, key_len);
        assert_non_null(en->key);
    }
    closedir(d);
}

static void free_entries(struct entries *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].key);
        free(list->items[i].bytes);
    }
}

/* Every entry listed loads through the library with its own key. */
static void assert_entries_load(const char *dir, const struct entries *list)
{
    for (size_t i = 0; i < list->count; i++) {
        void *payload = NULL;
        size_t size = 0;
        kt_assert_status(kiln_disk_cache_load(dir, list->items[i].key, &payload, &size), KILN_SUCCESS);
        free(payload);
    }
}

/* ------------------------------------------------------------------------ */
/* Eight processes at once, then a ninth                                    */
/* ------------------------------------------------------------------------ */

static void test_eight_processes_on_one_empty_directory_then_a_ninth_finds_all_on_disk(void **state)
{
    (void)state;
    char *work = kt_temp_dir();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cache", work);
    assert_int_equal(mkdir(dir, 0755), 0);

    /* One process first, on a cache directory of its own, so that POCL's
       per-user cache holds the device code: the eight below then race in
       kiln's cache, which is what this tests, not in POCL's, which has no
       lock (docs/pocl.md: eight cold compiles at once can fail a build
       without a diagnostic, which kiln retries). */
    char warm[512];
    snprintf(warm, sizeof warm, "%s/warm-up", work);
    assert_int_equal(mkdir(warm, 0755), 0);
    run_one(work, warm, PROCESSES);

    int ready[2], go[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    struct child c[PROCESSES];
    double deadline = now_s() + DEADLINE_S;
    for (int i = 0; i < PROCESSES; i++)
        spawn(&c[i], work, dir, i, ready[1], go[0]);
    close(ready[1]);
    close(go[0]);
    release_together(c, PROCESSES, ready[0], go[1], deadline);
    close(ready[0]);
    wait_all(c, PROCESSES, deadline);

    /* Every one computed right (checked in the child) and never found a
       damaged entry: a writer never exposes a partial one. */
    for (int i = 0; i < PROCESSES; i++) {
        struct report r = child_report(&c[i], i);
        if (r.cache.discarded != 0)
            fail_msg("process %d found %llu damaged entries", i, (unsigned long long)r.cache.discarded);
        assert_true(r.cache.builds + r.cache.disk_hits > 0);
    }
    /* Whole entries only: no temporary left behind. */
    struct entries list;
    list_entries(dir, &list);
    assert_true(list.count > 0);
    assert_entries_load(dir, &list);
    free_entries(&list);

    struct report r = run_one(work, dir, PROCESSES);
    assert_int_equal(r.cache.builds, 0);
    assert_int_equal(r.cache.discarded, 0);
    assert_true(r.cache.disk_hits > 0);
    assert_string_equal(r.conv_reason, "find: from the find database");
    kt_remove_tree(work);
    free(work);
}

/* ------------------------------------------------------------------------ */
/* Damaged entries and foreign files                                        */
/* ------------------------------------------------------------------------ */

/* The entry of `list` whose key starts with `prefix`, skipping `skip` of them.
 */
static struct entry *entry_with(struct entries *list, const char *prefix, int skip)
{
    for (size_t i = 0; i < list->count; i++)
        if (strncmp(list->items[i].key, prefix, strlen(prefix)) == 0 && skip-- == 0)
            return &list->items[i];
    fail_msg("fewer entries with a key starting \"%s\" than the test needs", prefix);
    return NULL;
}

/* Rewrite `e` as the entry another device would have written: a whole,
   valid entry for its key with the device line changed (stored through the
   library in `scratch`), so only the key tells it apart. */
static void rewrite_as_other_device(struct entry *e, const char *scratch)
{
    const char *line = strstr(e->key, "\ndevice=");
    assert_non_null(line);
    const char *end = strchr(line + 1, '\n');
    assert_non_null(end);
    char key[4096];
    snprintf(key, sizeof key, "%.*s\ndevice=Another Device%s", (int)(line - e->key), e->key, end);
    const size_t payload_at = KT_ENTRY_HEADER + strlen(e->key);
    kt_assert_status(kiln_disk_cache_store(scratch, key, e->bytes + payload_at, e->size - payload_at), KILN_SUCCESS);
    char path[PATH_MAX];
    kt_assert_status(kiln_disk_cache_entry_path(scratch, key, path, sizeof path), KILN_SUCCESS);
    size_t size;
    unsigned char *bytes = kt_read_bytes(path, &size);
    kt_write_bytes(e->path, bytes, size);
    free(bytes);
}

struct foreign {
    const char *name; /* in the cache directory */
    size_t size;      /* bytes of random content; 0: empty */
};

/* Files that are none of kiln's: named like nothing kiln writes, like an
   entry of no key, like a writer's temporary file (one that died half way),
   and a directory named like an entry. */
static const struct foreign foreign_files[] = {
    {"notes.txt", 3000},
    {"0123456789abcdef0123456789abcdef.kbin", 0},
    {"0123456789abcdef0123456789abcdee.kbin.tmp.99999.0", 777},
};
#define FOREIGN_DIR "fedcba9876543210fedcba9876543210.kbin"

static void assert_foreign_files_intact(const char *dir, unsigned char *const *contents)
{
    for (size_t i = 0; i < sizeof foreign_files / sizeof foreign_files[0]; i++) {
        char path[PATH_MAX];
        path_in(path, sizeof path, dir, foreign_files[i].name);
        size_t size;
        unsigned char *now = kt_read_bytes(path, &size);
        assert_int_equal(size, foreign_files[i].size);
        assert_memory_equal(now, contents[i], size);
        free(now);
    }
    char path[PATH_MAX];
    path_in(path, sizeof path, dir, FOREIGN_DIR "/inside");
    size_t size;
    free(kt_read_bytes(path, &size));
    assert_int_equal(size, 0);
}

/* A process fills a directory; the find database entry is truncated, and of
   three program entries one gets a flipped payload bit, one is rewritten as
   another device's and one as another format version's; foreign files are
   added. The next process must discard exactly those four, search again
   (the database entry is gone), which loads every program entry, rebuild
   the three programs, compute right results and store whole entries again,
   leaving the foreign files as they were. */
static void test_new_process_discards_damaged_entries_and_ignores_foreign_files(void **state)
{
    (void)state;
    char *work = kt_temp_dir();
    char dir[512], scratch[512];
    snprintf(dir, sizeof dir, "%s/cache", work);
    snprintf(scratch, sizeof scratch, "%s/scratch", work);
    run_one(work, dir, 0);

    struct entries before;
    list_entries(dir, &before);
    struct entry *db = entry_with(&before, "conv-find", 0);
    kt_write_bytes(db->path, db->bytes, db->size / 2);
    struct entry *flipped = entry_with(&before, "backend=", 0);
    flipped->bytes[flipped->size - flipped->size / 3] ^= 0x04;
    kt_write_bytes(flipped->path, flipped->bytes, flipped->size);
    rewrite_as_other_device(entry_with(&before, "backend=", 1), scratch);
    struct entry *versioned = entry_with(&before, "backend=", 2);
    versioned->bytes[KT_ENTRY_VERSION] += 1;
    kt_write_bytes(versioned->path, versioned->bytes, versioned->size);

    unsigned char *contents[sizeof foreign_files / sizeof foreign_files[0]];
    for (size_t i = 0; i < sizeof foreign_files / sizeof foreign_files[0]; i++) {
        char path[PATH_MAX];
        path_in(path, sizeof path, dir, foreign_files[i].name);
        float *x = malloc(foreign_files[i].size + sizeof(float));
        assert_non_null(x);
        kt_fill_uniform(x, foreign_files[i].size / sizeof(float) + 1, -1e9f, 1e9f, &seed);
        contents[i] = (unsigned char *)x;
        kt_write_bytes(path, contents[i], foreign_files[i].size);
    }
    char path[PATH_MAX];
    path_in(path, sizeof path, dir, FOREIGN_DIR);
    assert_int_equal(mkdir(path, 0755), 0);
    path_in(path, sizeof path, dir, FOREIGN_DIR "/inside");
    kt_write_bytes(path, "", 0);

    struct report r = run_one(work, dir, 1);
    if (r.cache.discarded != 4 || r.cache.builds != 3)
        fail_msg("%llu entries discarded and %llu programs built where 4 damaged entries (3 of programs) were",
                 (unsigned long long)r.cache.discarded, (unsigned long long)r.cache.builds);
    assert_null(strstr(r.conv_reason, "database"));
    assert_foreign_files_intact(dir, contents);

    /* Every entry there was is whole again. */
    assert_entries_load(dir, &before);
    free_entries(&before);
    for (size_t i = 0; i < sizeof foreign_files / sizeof foreign_files[0]; i++)
        free(contents[i]);
    kt_remove_tree(work);
    free(work);
}

/* Runs this program again with argv (argv[1] naming a child's part) and
   envp (NULL: this environment) to its end, or kills it at the deadline and
   fails; its wait status. */
static int run_self(char *const argv[], char *const envp[])
{
    extern char **environ;
    struct child c = {0};
    c.pid = fork();
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        execve("/proc/self/exe", argv, envp ? envp : environ);
        _exit(127);
    }
    wait_all(&c, 1, now_s() + DEADLINE_S);
    return c.status;
}

/* Three processes, one after another, whose first kiln calls are eight
   threads creating contexts at once: every thread of each gets a context
   that works. Before kiln listed devices one thread at a time, seven of the
   eight failed "there is no device" on POCL in every process. */
static void test_threads_create_the_first_contexts_at_once(void **state)
{
    (void)state;
    for (int round = 0; round < 3; round++) {
        char *argv[] = {"test_processes", "--first-contexts", NULL};
        const int status = run_self(argv, NULL);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("process %d of 3: %s %d (its stderr says which threads failed)", round + 1,
                     WIFEXITED(status) ? "exited with" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
}

/* A process whose HOME is a file (no XDG_CACHE_HOME, POCL_CACHE_DIR or
   KILN_CACHE_DIR) creating its first context: it gets one where the device
   needs no cache directory there, and where POCL lists no device for want
   of one the detail names the directory and what is wrong with it, not
   only "is an OpenCL ICD installed?". On POCL alone the context fails so,
   and the detail's check runs. */
static void test_first_context_with_an_unusable_home(void **state)
{
    (void)state;
    char *work = kt_temp_dir();
    char home[PATH_MAX], report[PATH_MAX], home_var[PATH_MAX + 8];
    snprintf(home, sizeof home, "%s/home-is-a-file", work);
    snprintf(report, sizeof report, "%s/report", work);
    kt_write_bytes(home, "", 0);
    snprintf(home_var, sizeof home_var, "HOME=%s", home);

    const char *const set[] = {home_var, "XDG_CACHE_HOME", "POCL_CACHE_DIR", "KILN_CACHE_DIR", NULL};
    char **envp = kt_environ_with(set);

    char *argv[] = {"test_processes", "--first-context", report, NULL};
    const int status = run_self(argv, envp);
    free(envp);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    size_t size = 0;
    unsigned char *bytes = kt_read_bytes(report, &size);
    struct first_report r;
    assert_int_equal(size, sizeof r);
    memcpy(&r, bytes, sizeof r);
    free(bytes);
    r.detail[sizeof r.detail - 1] = '\0';
    print_message("# HOME a file: status %d%s%s\n", r.status, r.detail[0] ? ": " : "", r.detail);
    /* Where POCL is what lists no device; another device (a GPU under
       KILN_DEVICE=gpu, say) may answer NOT_FOUND for reasons of its own. */
    if (r.status != KILN_SUCCESS)
        assert_int_equal(r.status, KILN_ERROR_NOT_FOUND);
    if (r.status != KILN_SUCCESS && strstr(r.detail, "\"Portable Computing Language\": 0 devices")) {
        assert_non_null(strstr(r.detail, "cache directory"));
        char says[PATH_MAX + 64];
        snprintf(says, sizeof says, "is under %s, which is a regular file, not a directory", home);
        if (!strstr(r.detail, says))
            fail_msg("the detail does not say \"%s\"", says);
    }
    kt_remove_tree(work);
    free(work);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--first-context") == 0)
        return first_context_main(argv[2]);
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    if (argc == 2 && strcmp(argv[1], "--first-contexts") == 0)
        return first_contexts_main();
    seed = kt_seed();
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_eight_processes_on_one_empty_directory_then_a_ninth_finds_all_on_disk));
    kt_add(&tests, cmocka_unit_test(test_new_process_discards_damaged_entries_and_ignores_foreign_files));
    kt_add(&tests, cmocka_unit_test(test_threads_create_the_first_contexts_at_once));
    kt_add(&tests, cmocka_unit_test(test_first_context_with_an_unusable_home));
    return kt_run_with("processes", &tests, NULL, NULL);
}
