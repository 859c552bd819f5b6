/* Files and directories a user can get wrong (docs/inputs.md, "Environment
   variables naming paths" and "Files and directories"): KILN_KERNEL_DIR and
   its files, KILN_PROFILE_DIR and its files, the program cache directory
   from each of its sources, cache and find database entries, temporary
   files. Each kind of bad value (missing, a regular file, a FIFO, a socket,
   a device node, a symbolic link loop, too long a path, a directory where a
   file belongs, too large, a binary that does not fit its key) gets its
   specific status or warning. Every test runs under a watchdog, so one that
   hangs (a blocking open) fails within KT_WATCHDOG_SECONDS, naming itself. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/context.h"
#include "jit/disk_cache.h"
#include "jit/program_cache.h"
#include "ops/find.h"
#include "profiles/profile.h"
#include "test_util.h"
#include "util/fs.h"

/* ------------------------------------------------------------------------ */
/* Making bad files                                                         */
/* ------------------------------------------------------------------------ */

static void make_fifo(const char *path) { assert_int_equal(mkfifo(path, 0644), 0); }

static void make_socket(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        fail_msg("socket path too long for sun_path: %s", path);
    strcpy(addr.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (const struct sockaddr *)&addr, sizeof addr), 0);
    close(s); /* the socket file stays */
}

static void make_loop(const char *path) { assert_int_equal(symlink(path, path), 0); }

static void make_dir(const char *path) { assert_int_equal(mkdir(path, 0755), 0); }

static void make_regular(const char *path) { kt_write_file(path, "not what kiln expects here"); }

static void make_dev_null(const char *path) { assert_int_equal(symlink("/dev/null", path), 0); }

static void make_dev_zero(const char *path) { assert_int_equal(symlink("/dev/zero", path), 0); }

/* A sparse file of `size` bytes. */
static void make_sized(const char *path, off_t size)
{
    kt_write_file(path, "");
    assert_int_equal(truncate(path, size), 0);
}

/* A path of about PATH_MAX + 50 bytes under base. */
static void make_too_long(const char *base, char *path, size_t size)
{
    assert_true(size > PATH_MAX + 64);
    int len = snprintf(path, size, "%s/", base);
    for (; len < PATH_MAX + 50; len++)
        path[len] = (len % 200) ? 'x' : '/';
    path[len] = '\0';
}

/* A path in `dir` made into the kind of thing named by `kind`. */
enum kind { MISSING, UNDER_FILE, REGULAR, DIRECTORY, FIFO, SOCKET, DEV_NULL, DEV_ZERO, LOOP, TOO_LONG };

static void make_kind(enum kind kind, const char *base, const char *name, char *path, size_t size)
{
    if (kind == TOO_LONG) {
        make_too_long(base, path, size);
        return;
    }
    snprintf(path, size, "%s/%s", base, name);
    switch (kind) {
    case UNDER_FILE: /* a name under a regular file: <name>.file/dir */
        snprintf(path, size, "%s/%s.file", base, name);
        make_regular(path);
        snprintf(path, size, "%s/%s.file/dir", base, name);
        break;
    case REGULAR:
        make_regular(path);
        break;
    case DIRECTORY:
        make_dir(path);
        break;
    case FIFO:
        make_fifo(path);
        break;
    case SOCKET:
        make_socket(path);
        break;
    case DEV_NULL:
        make_dev_null(path);
        break;
    case DEV_ZERO:
        make_dev_zero(path);
        break;
    case LOOP:
        make_loop(path);
        break;
    default:
        break;
    }
}

static void assert_says(const char *text, const char *says)
{
    if (!strstr(text, says))
        fail_msg("\"%s\" does not say \"%s\"", text, says);
}

static void assert_detail_says(const char *says) { assert_says(kiln_last_error_detail(), says); }

static char *saved_env(const char *name)
{
    const char *v = getenv(name);
    return v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

/* ------------------------------------------------------------------------ */
/* KILN_KERNEL_DIR                                                          */
/* ------------------------------------------------------------------------ */

struct dir_case {
    const char *name;
    enum kind kind;
    const char *says;
};

/* The directory itself is unusable: the context does not open (KILN_ERROR_IO
   naming the variable, its value and why), like a bad KILN_PROFILE_DIR. */
static const struct dir_case kernel_dirs[] = {
    {"missing", MISSING, "does not exist"},
    {"a name under a regular file", UNDER_FILE, ".file, which is a regular file, not a directory"},
    {"a regular file", REGULAR, "is a regular file, not a directory"},
    {"a FIFO", FIFO, "is a FIFO, not a directory"},
    {"a socket", SOCKET, "is a socket, not a directory"},
    {"the device /dev/null", DEV_NULL, "is a character device, not a directory"},
    {"a symbolic link loop", LOOP, "is a symbolic link loop"},
    {"a path longer than PATH_MAX", TOO_LONG, "is too long"},
};

static void test_kernel_dir_unusable(void **state)
{
    const struct dir_case *c = *state;
    char *base = kt_temp_dir();
    char path[PATH_MAX + 100];
    make_kind(c->kind, base, "kernels", path, sizeof path);
    char *saved = saved_env("KILN_KERNEL_DIR");
    setenv("KILN_KERNEL_DIR", path, 1);
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(NULL, &ctx);
    restore_env("KILN_KERNEL_DIR", saved);
    kt_assert_status(st, KILN_ERROR_IO);
    assert_null(ctx);
    assert_detail_says("KILN_KERNEL_DIR");
    assert_detail_says(c->says);
    char shown[100];
    snprintf(shown, sizeof shown, "'%.80s", path);
    assert_detail_says(shown);
    kt_remove_tree(base);
    free(base);
}

/* The directory became unusable after the context opened: the call that
   needs a kernel answers KILN_ERROR_IO the same way. */
static void test_kernel_dir_removed_after_context_opened(void **state)
{
    (void)state;
    char *base = kt_temp_dir();
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/kernels", base);
    make_dir(dir);
    char *saved = saved_env("KILN_KERNEL_DIR");
    setenv("KILN_KERNEL_DIR", dir, 1);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = 1;
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(&opt, &ctx), KILN_SUCCESS);
    kiln_buffer *buf;
    kt_assert_status(kiln_buffer_create(ctx, 64, &buf), KILN_SUCCESS);
    assert_int_equal(rmdir(dir), 0);
    make_fifo(dir);
    kiln_status st = kiln_buffer_fill_f32(buf, 0, 16, 1.0f);
    restore_env("KILN_KERNEL_DIR", saved);
    kt_assert_status(st, KILN_ERROR_IO);
    assert_detail_says("KILN_KERNEL_DIR");
    assert_detail_says("is a FIFO, not a directory");
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    kt_remove_tree(base);
    free(base);
}

/* A usable directory whose file for a kernel is wrong: the call that needs
   it answers KILN_ERROR_IO naming the file and why; the embedded copy is
   never used in its place. */
struct file_case {
    const char *name;
    enum kind kind;
    off_t size; /* for REGULAR: a sparse file of this size (0: a short text) */
    const char *says;
};

static const struct file_case kernel_files[] = {
    {"missing (an empty directory)", MISSING, 0, "util/fill.cl does not exist"},
    {"a directory", DIRECTORY, 0, "is a directory, not a regular file"},
    {"a FIFO", FIFO, 0, "is a FIFO, not a regular file"},
    {"a socket", SOCKET, 0, "is a socket, not a regular file"},
    {"the device /dev/zero", DEV_ZERO, 0, "is a character device, not a regular file"},
    {"a symbolic link loop", LOOP, 0, "is a symbolic link loop"},
    {"larger than 16 MiB", REGULAR, (off_t)(16 << 20) + 1, "is 16777217 bytes, more than the 16777216 allowed"},
};

static void test_kernel_file_bad(void **state)
{
    const struct file_case *c = *state;
    char *dir = kt_temp_dir();
    char util[PATH_MAX], path[PATH_MAX + 100];
    snprintf(util, sizeof util, "%s/util", dir);
    if (c->kind != MISSING)
        make_dir(util);
    if (c->kind == REGULAR) {
        snprintf(path, sizeof path, "%s/fill.cl", util);
        make_sized(path, c->size);
    } else if (c->kind != MISSING) {
        make_kind(c->kind, util, "fill.cl", path, sizeof path);
    }
    char *saved = saved_env("KILN_KERNEL_DIR");
    setenv("KILN_KERNEL_DIR", dir, 1);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = 1;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opt, &ctx);
    kiln_buffer *buf = NULL;
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, 64, &buf);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_fill_f32(buf, 0, 16, 1.0f);
    restore_env("KILN_KERNEL_DIR", saved);
    kt_assert_status(st, KILN_ERROR_IO);
    assert_detail_says("KILN_KERNEL_DIR");
    assert_detail_says("util/fill.cl");
    assert_detail_says(c->says);
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

/* An #include whose name does not fit kiln's buffer is a build error, not
   a silently shortened name. */
static void test_kernel_include_name_too_long(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    char util[PATH_MAX], path[PATH_MAX + 16], text[700];
    snprintf(util, sizeof util, "%s/util", dir);
    make_dir(util);
    snprintf(path, sizeof path, "%s/fill.cl", util);
    int n = snprintf(text, sizeof text, "#include \"");
    while (n < 400)
        text[n++] = 'h';
    snprintf(text + n, sizeof text - (size_t)n, ".h\"\n");
    kt_write_file(path, text);
    char *saved = saved_env("KILN_KERNEL_DIR");
    setenv("KILN_KERNEL_DIR", dir, 1);
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.disable_disk_cache = 1;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opt, &ctx);
    kiln_buffer *buf = NULL;
    if (st == KILN_SUCCESS)
        st = kiln_buffer_create(ctx, 64, &buf);
    if (st == KILN_SUCCESS)
        st = kiln_buffer_fill_f32(buf, 0, 16, 1.0f);
    restore_env("KILN_KERNEL_DIR", saved);
    kt_assert_status(st, KILN_ERROR_BUILD);
    assert_detail_says("an included name is longer than 255 bytes");
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* KILN_PROFILE_DIR                                                         */
/* ------------------------------------------------------------------------ */

static void test_profile_dir_unusable(void **state)
{
    const struct dir_case *c = *state;
    char *base = kt_temp_dir();
    char path[PATH_MAX + 100];
    make_kind(c->kind, base, "profiles", path, sizeof path);
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, path, &set), KILN_ERROR_IO);
    assert_null(set);
    assert_detail_says("KILN_PROFILE_DIR");
    assert_detail_says(c->says);
    char shown[100];
    snprintf(shown, sizeof shown, "'%.80s", path);
    assert_detail_says(shown);

    /* What a context says when the variable names it. */
    char *saved = saved_env("KILN_PROFILE_DIR");
    setenv("KILN_PROFILE_DIR", path, 1);
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(NULL, &ctx);
    restore_env("KILN_PROFILE_DIR", saved);
    kt_assert_status(st, KILN_ERROR_IO);
    assert_detail_says("KILN_PROFILE_DIR");
    assert_detail_says(c->says);
    kt_remove_tree(base);
    free(base);
}

/* A *.json entry of the directory that is not a readable regular file of
   sensible size: skipped with a warning naming it and why; the rest of
   the set loads. */
static const struct file_case profile_files[] = {
    {"a directory", DIRECTORY, 0, "is a directory, not a regular file"},
    {"a FIFO", FIFO, 0, "is a FIFO, not a regular file"},
    {"a socket", SOCKET, 0, "is a socket, not a regular file"},
    {"the device /dev/zero", DEV_ZERO, 0, "is a character device, not a regular file"},
    {"a symbolic link loop", LOOP, 0, "is a symbolic link loop"},
    {"larger than 1 MiB", REGULAR, (off_t)(1 << 20) + 1, "is 1048577 bytes, more than the 1048576 allowed"},
    {"empty", REGULAR, 0, "profile-x.json"},
};

static void test_profile_file_bad(void **state)
{
    const struct file_case *c = *state;
    char *dir = kt_temp_dir();
    char path[PATH_MAX + 100];
    if (c->kind == REGULAR) {
        snprintf(path, sizeof path, "%s/profile-x.json", dir);
        make_sized(path, c->size);
    } else {
        make_kind(c->kind, dir, "profile-x.json", path, sizeof path);
    }
    struct kiln_profile_set *embedded = NULL, *set = NULL;
    kt_assert_status(kiln_profile_set_load(NULL, NULL, &embedded), KILN_SUCCESS);
    struct kt_capture cap;
    kt_capture_begin(&cap, dir);
    kiln_status st = kiln_profile_set_load(NULL, dir, &set);
    int warnings = kt_capture_end(&cap);
    kt_assert_status(st, KILN_SUCCESS);
    assert_int_equal(warnings, 1);
    const char *w = kiln_profile_set_warnings(set);
    printf("# %s", w);
    assert_says(w, path);
    assert_says(w, c->says);
    assert_int_equal(kiln_profile_set_count(set), kiln_profile_set_count(embedded));
    kiln_profile_set_free(set);
    kiln_profile_set_free(embedded);
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* The program cache directory                                              */
/* ------------------------------------------------------------------------ */

/* Where the directory comes from. */
enum origin { ENV_KILN_CACHE_DIR, OPTION_CACHE_DIR, ENV_XDG_CACHE_HOME, ENV_HOME };

struct cache_case {
    const char *name;
    enum origin origin;
    enum kind kind;
    const char *says;
};

static const struct cache_case cache_dirs[] = {
    {"KILN_CACHE_DIR a FIFO", ENV_KILN_CACHE_DIR, FIFO, "KILN_CACHE_DIR '"},
    {"KILN_CACHE_DIR a socket", ENV_KILN_CACHE_DIR, SOCKET, "KILN_CACHE_DIR '"},
    {"KILN_CACHE_DIR the device /dev/null", ENV_KILN_CACHE_DIR, DEV_NULL, "KILN_CACHE_DIR '"},
    {"KILN_CACHE_DIR a symbolic link loop", ENV_KILN_CACHE_DIR, LOOP, "KILN_CACHE_DIR '"},
    {"option cache_dir a FIFO", OPTION_CACHE_DIR, FIFO, "the cache_dir option '"},
    {"option cache_dir a symbolic link loop", OPTION_CACHE_DIR, LOOP, "the cache_dir option '"},
    {"option cache_dir too long", OPTION_CACHE_DIR, TOO_LONG, "the cache_dir option '"},
    {"XDG_CACHE_HOME a FIFO", ENV_XDG_CACHE_HOME, FIFO, "$XDG_CACHE_HOME/kiln '"},
    {"XDG_CACHE_HOME the device /dev/null", ENV_XDG_CACHE_HOME, DEV_NULL, "$XDG_CACHE_HOME/kiln '"},
    {"HOME a socket", ENV_HOME, SOCKET, "$HOME/.cache/kiln '"},
    {"HOME a symbolic link loop", ENV_HOME, LOOP, "$HOME/.cache/kiln '"},
};

/* What the cache check says about each kind. */
static const char *cache_reason(enum kind kind, int itself)
{
    switch (kind) {
    case FIFO:
        return itself ? "is a FIFO, not a directory" : "which is a FIFO, not a directory";
    case SOCKET:
        return itself ? "is a socket, not a directory" : "which is a socket, not a directory";
    case DEV_NULL:
        return itself ? "is a character device, not a directory" : "which is a character device, not a directory";
    case LOOP:
        return "symbolic link loop";
    case TOO_LONG:
        return "path too long";
    default:
        return "?";
    }
}

/* The context opens, keeps programs in memory, and says why in the cache
   info and in one warning naming where the directory came from. The devices
   are listed first, with the environment as it came: POCL sets its devices
   up at a process's first listing and lists none if it cannot make its own
   cache directory, which it puts under XDG_CACHE_HOME or HOME too (what a
   process that starts so is told: test_processes,
   test_first_context_with_an_unusable_home). */
static void test_cache_dir_unusable(void **state)
{
    const struct cache_case *c = *state;
    size_t devices = 0;
    kt_assert_status(kiln_device_count(&devices), KILN_SUCCESS);
    assert_true(devices > 0);
    char *base = kt_temp_dir();
    char path[PATH_MAX + 100];
    make_kind(c->kind, base, "bad", path, sizeof path);
    char *saved_kiln = saved_env("KILN_CACHE_DIR"), *saved_xdg = saved_env("XDG_CACHE_HOME");
    char *saved_home = saved_env("HOME");
    unsetenv("KILN_CACHE_DIR");
    unsetenv("XDG_CACHE_HOME");
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    if (c->origin == ENV_KILN_CACHE_DIR)
        setenv("KILN_CACHE_DIR", path, 1);
    else if (c->origin == OPTION_CACHE_DIR)
        opt.cache_dir = path;
    else if (c->origin == ENV_XDG_CACHE_HOME)
        setenv("XDG_CACHE_HOME", path, 1);
    else
        setenv("HOME", path, 1);
    struct kt_capture cap;
    kt_capture_begin(&cap, base);
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opt, &ctx);
    kiln_cache_info info;
    if (st == KILN_SUCCESS)
        st = kiln_context_get_cache_info(ctx, &info);
    int warnings = kt_capture_end(&cap);
    restore_env("KILN_CACHE_DIR", saved_kiln);
    restore_env("XDG_CACHE_HOME", saved_xdg);
    restore_env("HOME", saved_home);
    kt_assert_status(st, KILN_SUCCESS);
    printf("# reason: %s\n", info.disk_reason);
    assert_int_equal(info.disk_enabled, 0);
    assert_says(info.disk_reason, c->says);
    assert_says(info.disk_reason, cache_reason(c->kind, c->origin <= OPTION_CACHE_DIR));
    assert_int_equal(warnings, 1);
    kiln_context_destroy(ctx);
    kt_remove_tree(base);
    free(base);
}

/* ------------------------------------------------------------------------ */
/* Cache entries and temporary files                                        */
/* ------------------------------------------------------------------------ */

static const char entry_key[] = "backend=test\ndevice=Test CPU\noptions=\n";

/* Something other than a regular file of sane size where an entry belongs:
   discarded (removed) with one warning, CORRUPT_CACHE, never followed,
   never blocking; a store then puts a good entry in its place. */
static const struct file_case entries[] = {
    {"a FIFO", FIFO, 0, "is a FIFO, not a regular file"},
    {"a socket", SOCKET, 0, "is a socket, not a regular file"},
    {"a directory", DIRECTORY, 0, "is a directory, not a regular file"},
    {"a symbolic link loop", LOOP, 0, "is a symbolic link"},
    {"a symbolic link to the device /dev/zero", DEV_ZERO, 0, "is a symbolic link"},
    {"larger than 1 GiB", REGULAR, ((off_t)1 << 30) + 1, "more than the 1073741824 allowed"},
};

static void test_cache_entry_bad(void **state)
{
    const struct file_case *c = *state;
    char *dir = kt_temp_dir();
    char path[PATH_MAX];
    kt_assert_status(kiln_disk_cache_entry_path(dir, entry_key, path, sizeof path), KILN_SUCCESS);
    if (c->kind == REGULAR)
        make_sized(path, c->size);
    else if (c->kind == LOOP)
        make_loop(path);
    else if (c->kind == DEV_ZERO)
        make_dev_zero(path);
    else if (c->kind == DIRECTORY)
        make_dir(path);
    else if (c->kind == FIFO)
        make_fifo(path);
    else
        make_socket(path);
    void *payload = NULL;
    size_t size = 0;
    struct kt_capture cap;
    kt_capture_begin(&cap, dir);
    kiln_status st = kiln_disk_cache_load(dir, entry_key, &payload, &size);
    int warnings = kt_capture_end(&cap);
    kt_assert_status(st, KILN_ERROR_CORRUPT_CACHE);
    assert_detail_says(c->says);
    assert_null(payload);
    assert_int_equal(warnings, 1);
    struct stat sb;
    assert_int_equal(lstat(path, &sb), -1); /* removed */
    kt_assert_status(kiln_disk_cache_store(dir, entry_key, "payload", 7), KILN_SUCCESS);
    kt_assert_status(kiln_disk_cache_load(dir, entry_key, &payload, &size), KILN_SUCCESS);
    assert_int_equal(size, 7);
    free(payload);
    kt_remove_tree(dir);
    free(dir);
}

/* FIFOs, symbolic links (dangling, looping, to /dev/zero) and directories
   at every temporary name a store can try: the store never opens one (it
   would block on the FIFO or write elsewhere), gives up after its attempts
   with KILN_ERROR_IO, and leaves them as they were. */
struct temp_case {
    const char *name;
    enum kind kind;
};

static const struct temp_case temps[] = {
    {"FIFOs", FIFO},
    {"symbolic link loops", LOOP},
    {"symbolic links to /dev/zero", DEV_ZERO},
    {"directories", DIRECTORY},
};

enum { TEMP_NAMES = 1000 }; /* above the stores this process makes before plus the store's attempts */

static void test_cache_temp_file_taken(void **state)
{
    const struct temp_case *c = *state;
    char *dir = kt_temp_dir();
    char path[PATH_MAX], tmp[PATH_MAX + 64];
    kt_assert_status(kiln_disk_cache_entry_path(dir, entry_key, path, sizeof path), KILN_SUCCESS);
    for (int n = 0; n < TEMP_NAMES; n++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%d", path, (long)getpid(), n);
        if (c->kind == FIFO)
            make_fifo(tmp);
        else if (c->kind == LOOP)
            make_loop(tmp);
        else if (c->kind == DEV_ZERO)
            make_dev_zero(tmp);
        else
            make_dir(tmp);
    }
    kt_assert_status(kiln_disk_cache_store(dir, entry_key, "payload", 7), KILN_ERROR_IO);
    assert_detail_says("names taken");
    struct stat sb;
    assert_int_equal(lstat(path, &sb), -1);
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* Cached binaries that do not fit their key                                */
/* ------------------------------------------------------------------------ */

static const char axpb_source[] =
    KT_PORTABLE_KERNEL "__kernel void axpb(__global float *y, __global const float *x, const float a)\n"
                       "{ const size_t i = get_global_id(0); y[i] = a * x[i] + 1.0f; }\n";
static const char other_source[] =
    KT_PORTABLE_KERNEL "__kernel void other(__global float *y) { y[get_global_id(0)] = 0.0f; }\n";

static kiln_context *open_cached(const char *dir)
{
    kiln_context_options opt;
    kiln_context_options_init(&opt);
    opt.cache_dir = dir;
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

/* Build (or load) `source` on ctx and make its kernel `kernel`. */
static struct kiln_kernel *get_kernel(kiln_context *ctx, const char *source, const char *kernel)
{
    struct kiln_program *prog = NULL;
    struct kiln_kernel *k = NULL;
    kt_assert_status(kiln_program_get(ctx, kernel, source, strlen(source), "", &prog), KILN_SUCCESS);
    kt_assert_status(kiln_program_kernel(ctx, prog, kernel, &k), KILN_SUCCESS);
    return k;
}

/* Run axpb on ctx and check every output. */
static void run_axpb(kiln_context *ctx)
{
    enum { N = 100 };
    struct kiln_kernel *k = get_kernel(ctx, axpb_source, "axpb");
    float x[N], y[N];
    uint64_t seed = kt_seed();
    kt_fill_uniform(x, N, -1.0f, 1.0f, &seed);
    kiln_buffer *bx, *by;
    kt_assert_status(kiln_buffer_create(ctx, sizeof x, &bx), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_create(ctx, sizeof y, &by), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_write(bx, 0, sizeof x, x), KILN_SUCCESS);
    struct kiln_args args = {0};
    kiln_args_buffer(&args, by->handle);
    kiln_args_buffer(&args, bx->handle);
    kiln_args_float(&args, 3.0f);
    size_t global = N;
    kt_assert_status(kiln_kernel_launch(ctx, k, &args, 1, &global, NULL, 0, NULL), KILN_SUCCESS);
    kt_assert_status(kiln_buffer_read(by, 0, sizeof y, y), KILN_SUCCESS);
    for (int i = 0; i < N; i++)
        assert_float_equal(y[i], 3.0f * x[i] + 1.0f, 1e-6);
    kiln_buffer_destroy(bx);
    kiln_buffer_destroy(by);
}

/* The only entry file of dir: its path, and its key and payload copied out. */
static void only_entry(const char *dir, char *path, size_t size, char **key, unsigned char **payload,
                       size_t *payload_size)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls '%s'/*.kbin", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(path, (int)size, p));
    assert_null(fgets(cmd, sizeof cmd, p)); /* exactly one */
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
    size_t n = 0;
    unsigned char *bytes = kt_read_bytes(path, &n);
    assert_true(n >= KT_ENTRY_HEADER);
    size_t key_len = bytes[KT_ENTRY_KEY_LEN] | (size_t)bytes[KT_ENTRY_KEY_LEN + 1] << 8 |
                     (size_t)bytes[KT_ENTRY_KEY_LEN + 2] << 16 | (size_t)bytes[KT_ENTRY_KEY_LEN + 3] << 24;
    assert_true(KT_ENTRY_HEADER + key_len <= n);
    *key = strndup((const char *)bytes + KT_ENTRY_HEADER, key_len);
    *payload_size = n - KT_ENTRY_HEADER - key_len;
    *payload = malloc(*payload_size + 1);
    memcpy(*payload, bytes + KT_ENTRY_HEADER + key_len, *payload_size);
    free(bytes);
}

/* An entry with axpb's key, a valid header and checksum, and `payload`. */
static void replace_axpb_entry(const char *dir, const void *payload, size_t size)
{
    char path[PATH_MAX];
    char *key;
    unsigned char *old;
    size_t old_size;
    only_entry(dir, path, sizeof path, &key, &old, &old_size);
    kt_assert_status(kiln_disk_cache_store(dir, key, payload, size), KILN_SUCCESS);
    free(key);
    free(old);
}

/* A new context on dir computes axpb right, having discarded the entry
   once, with one warning; a third context then loads the rebuilt entry. */
static void check_axpb_discarded_and_rebuilt(const char *dir, const char *warning)
{
    struct kt_capture cap;
    kt_capture_begin(&cap, dir);
    kiln_context *ctx = open_cached(dir);
    run_axpb(ctx);
    kiln_cache_info s = stats(ctx);
    kiln_context_destroy(ctx);
    int warnings = kt_capture_end(&cap);
    unsigned char *said = kt_read_bytes(cap.path, &(size_t){0});
    assert_says((const char *)said, warning);
    free(said);
    assert_int_equal(s.discarded, 1);
    assert_int_equal(s.builds, 1);
    assert_int_equal(warnings, 1);
    ctx = open_cached(dir);
    run_axpb(ctx);
    s = stats(ctx);
    assert_int_equal(s.discarded, 0);
    assert_int_equal(s.disk_hits, 1);
    assert_int_equal(s.builds, 0);
    kiln_context_destroy(ctx);
}

/* The entry's binary is not a binary: the driver refuses it. */
static void test_cached_binary_that_does_not_load(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    kiln_context *ctx = open_cached(dir);
    run_axpb(ctx);
    kiln_context_destroy(ctx);
    static const char garbage[] = "\x7f"
                                  "ELF but not really a program binary";
    replace_axpb_entry(dir, garbage, sizeof garbage);
    check_axpb_discarded_and_rebuilt(dir, "rejected by the driver");
    kt_remove_tree(dir);
    free(dir);
}

/* The entry holds another program's valid binary under axpb's key (the
   file passes every check): kernel axpb is missing from it, so it is
   discarded and axpb built from source instead of the call failing. */
static void test_cached_binary_lacking_the_kernel(void **state)
{
    (void)state;
    char *dir = kt_temp_dir(), *other_dir = kt_temp_dir();
    kiln_context *ctx = open_cached(other_dir);
    get_kernel(ctx, other_source, "other");
    kiln_context_destroy(ctx);
    char path[PATH_MAX];
    char *key;
    unsigned char *binary;
    size_t size;
    only_entry(other_dir, path, sizeof path, &key, &binary, &size);
    free(key);

    ctx = open_cached(dir);
    run_axpb(ctx);
    kiln_context_destroy(ctx);
    replace_axpb_entry(dir, binary, size);
    free(binary);
    check_axpb_discarded_and_rebuilt(dir, "lacks kernel axpb");
    kt_remove_tree(dir);
    kt_remove_tree(other_dir);
    free(dir);
    free(other_dir);
}

/* A name the program does not have is the caller's mistake, not the
   entry's: the error stays, nothing is discarded. */
static void test_unknown_kernel_of_a_cached_program_is_not_a_discard(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    kiln_context *ctx = open_cached(dir);
    run_axpb(ctx);
    kiln_context_destroy(ctx);
    ctx = open_cached(dir);
    struct kiln_program *prog = NULL;
    struct kiln_kernel *k = NULL;
    kt_assert_status(kiln_program_get(ctx, "axpb", axpb_source, strlen(axpb_source), "", &prog), KILN_SUCCESS);
    kt_assert_status(kiln_program_kernel(ctx, prog, "no_such_kernel", &k), KILN_ERROR_NOT_FOUND);
    assert_detail_says("no_such_kernel");
    kiln_cache_info s = stats(ctx);
    assert_int_equal(s.discarded, 0);
    assert_int_equal(s.disk_hits, 1);
    run_axpb(ctx);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

/* A FIFO where axpb's entry belongs: discarded, built, stored. */
static void test_fifo_in_place_of_a_program_entry(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    kiln_context *ctx = open_cached(dir);
    run_axpb(ctx);
    kiln_context_destroy(ctx);
    char path[PATH_MAX];
    char *key;
    unsigned char *binary;
    size_t size;
    only_entry(dir, path, sizeof path, &key, &binary, &size);
    free(key);
    free(binary);
    assert_int_equal(unlink(path), 0);
    make_fifo(path);
    check_axpb_discarded_and_rebuilt(dir, "is a FIFO");
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */
/* The find database                                                        */
/* ------------------------------------------------------------------------ */

static const char *const find_names[] = {"slow", "fast"};

static int find_applies(void *cookie, size_t i)
{
    (void)cookie;
    (void)i;
    return 1;
}

static kiln_status find_time(void *cookie, size_t i, double *ms, int *built)
{
    ++*(int *)cookie;
    *ms = i == 0 ? 2.0 : 1.0;
    *built = 1;
    return KILN_SUCCESS;
}

static const char find_key[] = "find-test|device=x|problem=y";

struct find_case {
    const char *name;
    const char *payload;
    size_t size;
};

static const struct find_case find_entries[] = {
    {"an unknown algorithm name", "winograd-9x9", 12},
    {"a name with a NUL", "fast\0junk", 9},
    {"a name longer than any algorithm's", "fastfastfastfastfastfastfastfastfastfastfastfastfastfastfastfast", 64},
    {"empty", "", 0},
};

/* A find database entry that is intact but names no candidate: one
   warning, counted as discarded, the search runs again and stores its
   choice, which the next context takes from the database. */
static void test_find_entry_bad(void **state)
{
    const struct find_case *c = *state;
    char *dir = kt_temp_dir();
    kt_assert_status(kiln_disk_cache_store(dir, find_key, c->payload, c->size), KILN_SUCCESS);
    int timed = 0;
    struct kiln_find_candidates cands = {find_names, 2, find_applies, find_time, &timed};
    size_t pick = 99;
    char reason[256];
    struct kt_capture cap;
    kt_capture_begin(&cap, dir);
    kiln_context *ctx = open_cached(dir);
    kt_assert_status(kiln_find(ctx, find_key, &cands, &pick, reason, sizeof reason), KILN_SUCCESS);
    kiln_cache_info s = stats(ctx);
    kiln_context_destroy(ctx);
    int warnings = kt_capture_end(&cap);
    assert_int_equal(pick, 1);
    assert_says(reason, "fastest");
    assert_int_equal(timed, 2);
    assert_int_equal(s.discarded, 1);
    assert_int_equal(warnings, 1);

    ctx = open_cached(dir);
    kt_assert_status(kiln_find(ctx, find_key, &cands, &pick, reason, sizeof reason), KILN_SUCCESS);
    assert_int_equal(pick, 1);
    assert_says(reason, "from the find database");
    assert_int_equal(stats(ctx).discarded, 0);
    kiln_context_destroy(ctx);
    kt_remove_tree(dir);
    free(dir);
}

/* ------------------------------------------------------------------------ */

/* Files and directories without permission: the reader and the directory
   check say "Permission denied". Permissions do not bind root, so as root
   the checks run in a child process that has become the unprivileged user
   65534 (and skip, saying why, where it cannot). */
static int unreadable_checks(const char *file, const char *dir)
{
    char *data = NULL;
    size_t size = 0;
    kiln_status st = kiln_fs_read(file, 0, 1024, &data, &size);
    int bad = 0;
    if (st != KILN_ERROR_IO || !strstr(kiln_last_error_detail(), "Permission denied")) {
        fprintf(stderr, "unreadable file: status %d, detail \"%s\"\n", st, kiln_last_error_detail());
        bad |= 1;
    }
    free(data);
    st = kiln_fs_check_dir(dir);
    if (st != KILN_ERROR_IO || !strstr(kiln_last_error_detail(), "Permission denied")) {
        fprintf(stderr, "unreadable directory: status %d, detail \"%s\"\n", st, kiln_last_error_detail());
        bad |= 2;
    }
    return bad;
}

static void test_file_and_directory_without_permission(void **state)
{
    (void)state;
    char *dir = kt_temp_dir();
    assert_int_equal(chmod(dir, 0755), 0);
    char file[PATH_MAX], sub[PATH_MAX];
    snprintf(file, sizeof file, "%s/profile.json", dir);
    snprintf(sub, sizeof sub, "%s/kernels", dir);
    kt_write_file(file, "{}");
    assert_int_equal(chmod(file, 0), 0);
    assert_int_equal(mkdir(sub, 0), 0);
    int bad;
    if (geteuid() != 0) {
        bad = unreadable_checks(file, sub);
    } else {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(100);
            _exit(unreadable_checks(file, sub));
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        bad = WEXITSTATUS(status);
        if (bad == 100) {
            kt_remove_tree(dir);
            free(dir);
            printf("# skipped: running as root and cannot become an unprivileged user to test permissions\n");
            skip();
        }
    }
    kt_remove_tree(dir);
    free(dir);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------------------ */

int main(void)
{
    struct kt_list t = {0};
#define CASES(prefix, fn, items)                                                                                       \
    for (size_t i = 0; i < sizeof items / sizeof *items; i++)                                                          \
    kt_add_watched(&t, prefix, fn, &items[i])
    CASES("KILN_KERNEL_DIR ", test_kernel_dir_unusable, kernel_dirs);
    CASES("KILN_KERNEL_DIR file ", test_kernel_file_bad, kernel_files);
    CASES("KILN_PROFILE_DIR ", test_profile_dir_unusable, kernel_dirs);
    CASES("KILN_PROFILE_DIR file ", test_profile_file_bad, profile_files);
    CASES("cache dir ", test_cache_dir_unusable, cache_dirs);
    CASES("cache entry ", test_cache_entry_bad, entries);
    CASES("cache temporary names taken by ", test_cache_temp_file_taken, temps);
    CASES("find database entry ", test_find_entry_bad, find_entries);
#undef CASES
    static const struct {
        const char *name;
        CMUnitTestFunction fn;
    } single[] = {
        {"test_kernel_dir_removed_after_context_opened", test_kernel_dir_removed_after_context_opened},
        {"test_kernel_include_name_too_long", test_kernel_include_name_too_long},
        {"test_cached_binary_that_does_not_load", test_cached_binary_that_does_not_load},
        {"test_cached_binary_lacking_the_kernel", test_cached_binary_lacking_the_kernel},
        {"test_unknown_kernel_of_a_cached_program_is_not_a_discard",
         test_unknown_kernel_of_a_cached_program_is_not_a_discard},
        {"test_fifo_in_place_of_a_program_entry", test_fifo_in_place_of_a_program_entry},
        {"test_file_and_directory_without_permission", test_file_and_directory_without_permission},
    };
    for (size_t i = 0; i < sizeof single / sizeof *single; i++)
        kt_add_watched(&t, "", single[i].fn, &single[i]);
    return kt_run_with("inputs_files", &t, NULL, NULL);
}
