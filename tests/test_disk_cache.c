/* The on-disk program cache: round trips, detection and removal of damaged
   entries, directory handling, usage, the default directory, and writers
   racing on one key from several processes and threads. */
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jit/disk_cache.h"

static const char key_a[] = "gemm_f32_cpu_6x32|device=Test CPU|driver=1.2|options=-cl-fast-relaxed-math";
static const char key_b[] = "conv_f32_wino4x4_out|device=Test CPU|driver=1.2|options=";

static uint64_t rng;

/* n random bytes (malloc'd): the bit patterns of random floats. */
static unsigned char *random_bytes(size_t n)
{
    size_t floats = n / sizeof(float) + 1;
    float *x = malloc(floats * sizeof(float));
    assert_non_null(x);
    kt_fill_uniform(x, floats, -1e9f, 1e9f, &rng);
    return (unsigned char *)x;
}

static void path_of(const char *dir, const char *key, char *buf)
{
    kt_assert_status(kiln_disk_cache_entry_path(dir, key, buf, PATH_MAX), KILN_SUCCESS);
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Directory entries other than "." and "..": catches left-over temporaries. */
static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    for (const struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void assert_loads(const char *dir, const char *key, const void *expected, size_t size)
{
    void *got = NULL;
    size_t got_size = 12345;
    kt_assert_status(kiln_disk_cache_load(dir, key, &got, &got_size), KILN_SUCCESS);
    assert_non_null(got);
    assert_int_equal(got_size, size);
    if (size > 0)
        assert_memory_equal(got, expected, size);
    free(got);
}

static void assert_round_trip(const char *dir, const char *key, size_t size)
{
    unsigned char *data = random_bytes(size);
    kt_assert_status(kiln_disk_cache_store(dir, key, data, size), KILN_SUCCESS);
    assert_loads(dir, key, data, size);
    free(data);
}

/* Store a fresh entry for key and return the bytes of its file (malloc'd). */
static unsigned char *stored_entry(const char *dir, const char *key, size_t payload_size, size_t *file_size)
{
    char path[PATH_MAX];
    assert_round_trip(dir, key, payload_size);
    path_of(dir, key, path);
    return kt_read_bytes(path, file_size);
}

/* Load of key fails as corrupt for `reason`, the file is gone, and the key
   can be stored and loaded again. */
static void assert_rejected(const char *dir, const char *key, const char *reason)
{
    char path[PATH_MAX];
    path_of(dir, key, path);
    void *got = (void *)1;
    size_t got_size = 1;
    kt_assert_status(kiln_disk_cache_load(dir, key, &got, &got_size), KILN_ERROR_CORRUPT_CACHE);
    if (!strstr(kiln_last_error_detail(), reason))
        fail_msg("detail \"%s\" does not name \"%s\"", kiln_last_error_detail(), reason);
    if (!strstr(kiln_last_error_detail(), path))
        fail_msg("detail \"%s\" does not name the file %s", kiln_last_error_detail(), path);
    assert_null(got);
    assert_int_equal(got_size, 0);
    assert_false(file_exists(path));
    assert_round_trip(dir, key, 1000);
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Store an entry for key, let `edit` change its bytes, write them back. */
static void corrupt_entry(const char *dir, const char *key, void (*edit)(unsigned char *, size_t *))
{
    char path[PATH_MAX];
    size_t size;
    unsigned char *bytes = stored_entry(dir, key, 5000, &size);
    unsigned char *edited = realloc(bytes, size + 64);
    assert_non_null(edited);
    edit(edited, &size);
    path_of(dir, key, path);
    kt_write_bytes(path, edited, size);
    free(edited);
}

static int setup_dir(void **state)
{
    *state = kt_temp_dir();
    return 0;
}

static int teardown_dir(void **state)
{
    kt_remove_tree(*state);
    free(*state);
    return 0;
}

static void test_round_trip_returns_stored_bytes_for_sizes_from_0_to_4mib(void **state)
{
    static const size_t sizes[] = {0, 1, 7, 4096, 65537, (4u << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "round-trip-%zu", sizes[i]);
        assert_round_trip(*state, key, sizes[i]);
    }
}

static void test_load_of_missing_key_is_not_found(void **state)
{
    char missing_dir[PATH_MAX];
    snprintf(missing_dir, sizeof missing_dir, "%s/never/created", (char *)*state);
    void *got = (void *)1;
    size_t size = 1;
    kt_assert_status(kiln_disk_cache_load(*state, key_a, &got, &size), KILN_ERROR_NOT_FOUND);
    assert_null(got);
    kt_assert_status(kiln_disk_cache_load(missing_dir, key_a, &got, &size), KILN_ERROR_NOT_FOUND);
    assert_round_trip(*state, key_b, 10);
    kt_assert_status(kiln_disk_cache_load(*state, key_a, &got, &size), KILN_ERROR_NOT_FOUND);
}

static void test_store_creates_directory_and_parents(void **state)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/a/b//c/", (char *)*state);
    assert_round_trip(dir, key_a, 100);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(count_files(dir), 1);
}

static void test_store_under_regular_file_is_io_error_naming_path(void **state)
{
    char file[PATH_MAX], dir[PATH_MAX + 8];
    snprintf(file, sizeof file, "%s/file", (char *)*state);
    snprintf(dir, sizeof dir, "%s/sub", file);
    kt_write_file(file, "not a directory");
    kt_assert_status(kiln_disk_cache_store(dir, key_a, "x", 1), KILN_ERROR_IO);
    assert_non_null(strstr(kiln_last_error_detail(), file));
    kt_assert_status(kiln_disk_cache_store(file, key_a, "x", 1), KILN_ERROR_IO);
    assert_non_null(strstr(kiln_last_error_detail(), "not a directory"));
}

static void test_entry_path_is_128bit_hex_name_with_kbin_suffix_in_dir(void **state)
{
    char a[PATH_MAX], a_again[PATH_MAX], b[PATH_MAX], slash[PATH_MAX], dir_slash[PATH_MAX];
    path_of(*state, key_a, a);
    path_of(*state, key_a, a_again);
    path_of(*state, key_b, b);
    snprintf(dir_slash, sizeof dir_slash, "%s/", (char *)*state);
    path_of(dir_slash, key_a, slash);
    assert_string_equal(a, a_again);
    assert_string_equal(a, slash);
    assert_string_not_equal(a, b);

    size_t dir_len = strlen(*state);
    assert_memory_equal(a, *state, dir_len);
    assert_int_equal(a[dir_len], '/');
    const char *name = a + dir_len + 1;
    assert_int_equal(strlen(name), 32 + strlen(".kbin"));
    assert_int_equal(strspn(name, "0123456789abcdef"), 32);
    assert_string_equal(name + 32, ".kbin");

    char small[16];
    kt_assert_status(kiln_disk_cache_entry_path(*state, key_a, small, sizeof small), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_disk_cache_entry_path("", key_a, a, sizeof a), KILN_ERROR_INVALID_ARGUMENT);
}

static void test_load_rejects_entry_truncated_at_any_point(void **state)
{
    size_t size;
    unsigned char *bytes = stored_entry(*state, key_a, 3000, &size);
    size_t key_len = strlen(key_a);
    const size_t cuts[] = {0,
                           1,
                           8,
                           20,
                           KT_ENTRY_HEADER - 1,
                           KT_ENTRY_HEADER,
                           KT_ENTRY_HEADER + key_len / 2,
                           KT_ENTRY_HEADER + key_len,
                           KT_ENTRY_HEADER + key_len + 1500,
                           size - 1};
    char path[PATH_MAX];
    path_of(*state, key_a, path);
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        print_message("# cut at %zu of %zu bytes\n", cuts[i], size);
        kt_write_bytes(path, bytes, cuts[i]);
        assert_rejected(*state, key_a, "truncated");
    }
    free(bytes);
}

static void flip_payload_byte(unsigned char *b, size_t *size) { b[*size - 100] ^= 0x10; }
static void flip_key_byte(unsigned char *b, size_t *size)
{
    (void)size;
    b[KT_ENTRY_HEADER + 3] ^= 0x01;
}
static void flip_magic_byte(unsigned char *b, size_t *size)
{
    (void)size;
    b[0] ^= 0x20;
}
static void set_version_2(unsigned char *b, size_t *size)
{
    (void)size;
    put_le(b + KT_ENTRY_VERSION, 2, 4);
}
static void append_garbage(unsigned char *b, size_t *size)
{
    memset(b + *size, 0xab, 17);
    *size += 17;
}
static void set_huge_payload_length(unsigned char *b, size_t *size)
{
    (void)size;
    put_le(b + KT_ENTRY_PAYLOAD_LEN, 1ull << 60, 8);
}
static void set_huge_key_length(unsigned char *b, size_t *size)
{
    (void)size;
    put_le(b + KT_ENTRY_KEY_LEN, UINT32_MAX, 4);
}

static void test_load_rejects_flipped_payload_byte(void **state)
{
    corrupt_entry(*state, key_a, flip_payload_byte);
    assert_rejected(*state, key_a, "checksum mismatch");
}

static void test_load_rejects_flipped_key_byte(void **state)
{
    corrupt_entry(*state, key_a, flip_key_byte);
    assert_rejected(*state, key_a, "checksum mismatch");
}

static void test_load_rejects_bad_magic(void **state)
{
    corrupt_entry(*state, key_a, flip_magic_byte);
    assert_rejected(*state, key_a, "bad magic");
}

static void test_load_rejects_other_format_version(void **state)
{
    corrupt_entry(*state, key_a, set_version_2);
    assert_rejected(*state, key_a, "format version 2");
}

static void test_load_rejects_trailing_garbage(void **state)
{
    corrupt_entry(*state, key_a, append_garbage);
    assert_rejected(*state, key_a, "trailing garbage");
}

/* Lengths near 2^60 or 2^32 must be refused from the file size, before any
   allocation (the sanitizer build aborts on an allocation that large). */
static void test_load_rejects_absurd_lengths_without_allocating_them(void **state)
{
    corrupt_entry(*state, key_a, set_huge_payload_length);
    assert_rejected(*state, key_a, "truncated");
    corrupt_entry(*state, key_a, set_huge_key_length);
    assert_rejected(*state, key_a, "truncated");
}

static void test_load_rejects_valid_entry_of_another_key(void **state)
{
    size_t size;
    unsigned char *bytes = stored_entry(*state, key_a, 2000, &size);
    char path_b[PATH_MAX];
    path_of(*state, key_b, path_b);
    kt_write_bytes(path_b, bytes, size);
    assert_rejected(*state, key_b, "foreign key");

    char path_a[PATH_MAX];
    path_of(*state, key_a, path_a);
    assert_true(file_exists(path_a));
    assert_loads(*state, key_a, bytes + KT_ENTRY_HEADER + strlen(key_a), size - KT_ENTRY_HEADER - strlen(key_a));
    free(bytes);
}

static void test_store_overwrites_existing_entry(void **state)
{
    unsigned char *first = random_bytes(3000), *second = random_bytes(700);
    kt_assert_status(kiln_disk_cache_store(*state, key_a, first, 3000), KILN_SUCCESS);
    kt_assert_status(kiln_disk_cache_store(*state, key_a, second, 700), KILN_SUCCESS);
    assert_loads(*state, key_a, second, 700);
    assert_int_equal(count_files(*state), 1);
    free(first);
    free(second);
}

/* A failed rename (a directory sits at the entry's name) must remove the
   temporary file and report the path. */
static void test_store_failing_rename_is_io_error_and_leaves_no_temp_file(void **state)
{
    char path[PATH_MAX];
    path_of(*state, key_a, path);
    assert_int_equal(mkdir(path, 0755), 0);
    kt_assert_status(kiln_disk_cache_store(*state, key_a, "payload", 7), KILN_ERROR_IO);
    assert_non_null(strstr(kiln_last_error_detail(), path));
    assert_int_equal(count_files(*state), 1);
    /* A load discards the (empty) directory like any other non-entry. */
    void *got;
    size_t size;
    kt_assert_status(kiln_disk_cache_load(*state, key_a, &got, &size), KILN_ERROR_CORRUPT_CACHE);
    assert_int_equal(count_files(*state), 0);
}

/* A write that fails part way (file size limit in a child process) must
   remove the temporary file and report strerror. */
static void test_store_failing_write_is_io_error_and_leaves_no_temp_file(void **state)
{
    const char *dir = *state;
    unsigned char *data = random_bytes(100000);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
            _exit(10);
        if (kiln_disk_cache_store(dir, key_a, data, 100000) != KILN_ERROR_IO)
            _exit(11);
        if (!strstr(kiln_last_error_detail(), strerror(EFBIG)) || !strstr(kiln_last_error_detail(), dir))
            _exit(12);
        _exit(count_files(dir) == 0 ? 0 : 13);
    }
    int wstatus;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    free(data);
}

static void test_usage_counts_entries_and_bytes_ignoring_other_files(void **state)
{
    static const size_t sizes[] = {0, 1234, 99999};
    const char *keys[] = {"usage-0", "usage-1", "usage-2"};
    uint64_t expected_bytes = 0;
    for (int i = 0; i < 3; i++) {
        assert_round_trip(*state, keys[i], sizes[i]);
        expected_bytes += KT_ENTRY_HEADER + strlen(keys[i]) + sizes[i];
    }
    char other[PATH_MAX + 64], entry[PATH_MAX];
    path_of(*state, keys[0], entry);
    snprintf(other, sizeof other, "%s.tmp.123.4", entry);
    kt_write_file(other, "a writer's temporary file");
    snprintf(other, sizeof other, "%s/notes.txt", (char *)*state);
    kt_write_file(other, "unrelated");
    snprintf(other, sizeof other, "%s/sub.kbin", (char *)*state);
    assert_int_equal(mkdir(other, 0755), 0);

    uint64_t entries = 99, bytes = 99;
    kt_assert_status(kiln_disk_cache_usage(*state, &entries, &bytes), KILN_SUCCESS);
    assert_int_equal(entries, 3);
    assert_int_equal(bytes, expected_bytes);
}

static void test_usage_of_missing_dir_is_zero(void **state)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/missing", (char *)*state);
    uint64_t entries = 99, bytes = 99;
    kt_assert_status(kiln_disk_cache_usage(dir, &entries, &bytes), KILN_SUCCESS);
    assert_int_equal(entries, 0);
    assert_int_equal(bytes, 0);
}

/* default_dir: the three variables are saved in setup and restored in
   teardown. */
static const char *const env_names[] = {"KILN_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
#define ENV_COUNT 3

static int save_env(void **state)
{
    char **saved = calloc(ENV_COUNT, sizeof(char *));
    for (int i = 0; i < ENV_COUNT; i++) {
        const char *v = getenv(env_names[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(env_names[i]);
    }
    *state = saved;
    return 0;
}

static int restore_env(void **state)
{
    char **saved = *state;
    for (int i = 0; i < ENV_COUNT; i++) {
        if (saved[i])
            setenv(env_names[i], saved[i], 1);
        else
            unsetenv(env_names[i]);
        free(saved[i]);
    }
    free(saved);
    return 0;
}

static void assert_default_dir(const char *expected, const char *origin)
{
    char buf[PATH_MAX];
    const char *from = NULL;
    kt_assert_status(kiln_disk_cache_default_dir(buf, sizeof buf, &from), KILN_SUCCESS);
    assert_string_equal(buf, expected);
    assert_string_equal(from, origin);
}

static void test_default_dir_prefers_kiln_cache_dir(void **state)
{
    (void)state;
    setenv("KILN_CACHE_DIR", "/opt/kiln-cache", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    assert_default_dir("/opt/kiln-cache", "KILN_CACHE_DIR");
}

static void test_default_dir_uses_xdg_cache_home_when_kiln_cache_dir_unset_or_empty(void **state)
{
    (void)state;
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    assert_default_dir("/xdg/kiln", "$XDG_CACHE_HOME/kiln");
    setenv("KILN_CACHE_DIR", "", 1);
    assert_default_dir("/xdg/kiln", "$XDG_CACHE_HOME/kiln");
}

static void test_default_dir_uses_home_when_xdg_unset_empty_or_relative(void **state)
{
    (void)state;
    setenv("HOME", "/home/u", 1);
    assert_default_dir("/home/u/.cache/kiln", "$HOME/.cache/kiln");
    setenv("XDG_CACHE_HOME", "", 1);
    assert_default_dir("/home/u/.cache/kiln", "$HOME/.cache/kiln");
    setenv("XDG_CACHE_HOME", "relative/cache", 1);
    assert_default_dir("/home/u/.cache/kiln", "$HOME/.cache/kiln");
}

static void test_default_dir_is_not_found_without_any_variable(void **state)
{
    (void)state;
    char buf[PATH_MAX];
    kt_assert_status(kiln_disk_cache_default_dir(buf, sizeof buf, NULL), KILN_ERROR_NOT_FOUND);
    setenv("HOME", "", 1);
    setenv("KILN_CACHE_DIR", "", 1);
    kt_assert_status(kiln_disk_cache_default_dir(buf, sizeof buf, NULL), KILN_ERROR_NOT_FOUND);
}

static void test_default_dir_with_small_buffer_is_invalid_argument(void **state)
{
    (void)state;
    setenv("HOME", "/home/u", 1);
    char buf[19]; /* "/home/u/.cache/kiln" needs 20 */
    const char *origin = NULL;
    kt_assert_status(kiln_disk_cache_default_dir(buf, sizeof buf, &origin), KILN_ERROR_INVALID_ARGUMENT);
    assert_string_equal(origin, "$HOME/.cache/kiln"); /* named even when too long */
    char exact[20];
    kt_assert_status(kiln_disk_cache_default_dir(exact, sizeof exact, NULL), KILN_SUCCESS);
}

/* Null arguments: INVALID_ARGUMENT with the argument's name in the detail. */
static void assert_null_argument(kiln_status status, const char *name)
{
    kt_assert_status(status, KILN_ERROR_INVALID_ARGUMENT);
    if (!strstr(kiln_last_error_detail(), name))
        fail_msg("detail \"%s\" does not name %s", kiln_last_error_detail(), name);
}

static void test_load_with_null_argument_is_invalid(void **state)
{
    void *p;
    size_t n;
    assert_null_argument(kiln_disk_cache_load(NULL, key_a, &p, &n), "dir");
    assert_null_argument(kiln_disk_cache_load(*state, NULL, &p, &n), "key");
    assert_null_argument(kiln_disk_cache_load(*state, key_a, NULL, &n), "payload");
    assert_null_argument(kiln_disk_cache_load(*state, key_a, &p, NULL), "size");
}

static void test_store_with_null_argument_is_invalid(void **state)
{
    assert_null_argument(kiln_disk_cache_store(NULL, key_a, "x", 1), "dir");
    assert_null_argument(kiln_disk_cache_store(*state, NULL, "x", 1), "key");
    assert_null_argument(kiln_disk_cache_store(*state, key_a, NULL, 0), "payload");
    assert_int_equal(count_files(*state), 0);
}

static void test_usage_with_null_argument_is_invalid(void **state)
{
    uint64_t n;
    assert_null_argument(kiln_disk_cache_usage(NULL, &n, &n), "dir");
    assert_null_argument(kiln_disk_cache_usage(*state, NULL, &n), "entries");
    assert_null_argument(kiln_disk_cache_usage(*state, &n, NULL), "bytes");
}

static void test_entry_path_and_default_dir_with_null_argument_are_invalid(void **state)
{
    char buf[PATH_MAX];
    assert_null_argument(kiln_disk_cache_entry_path(NULL, key_a, buf, sizeof buf), "dir");
    assert_null_argument(kiln_disk_cache_entry_path(*state, NULL, buf, sizeof buf), "key");
    assert_null_argument(kiln_disk_cache_entry_path(*state, key_a, NULL, sizeof buf), "buf");
    assert_null_argument(kiln_disk_cache_default_dir(NULL, sizeof buf, NULL), "buf");
}

/* A writer's temporary file (here half an entry, as a writer that is still
   writing or died leaves it) is never read as the entry. */
static void test_half_written_temporary_file_is_never_read_as_entry(void **state)
{
    const char *dir = *state;
    char entry[PATH_MAX], tmp[PATH_MAX + 64];
    assert_round_trip(dir, key_a, 1000);
    path_of(dir, key_a, entry);
    size_t size = 0;
    unsigned char *whole = kt_read_bytes(entry, &size);
    assert_int_equal(unlink(entry), 0);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.0", entry, (long)getpid() + 1);
    kt_write_bytes(tmp, whole, size / 2);
    void *payload = NULL;
    size_t got = 0;
    kt_assert_status(kiln_disk_cache_load(dir, key_a, &payload, &got), KILN_ERROR_NOT_FOUND);
    assert_null(payload);
    assert_true(file_exists(tmp)); /* another writer's file is left alone */
    assert_round_trip(dir, key_a, 1000);
    free(whole);
}

/* kiln_disk_cache_check: usable directories (existing, or creatable under a
   writable ancestor) pass; the reason for an unusable one follows its name. */
static void assert_check_fails(const char *dir, const char *says)
{
    kt_assert_status(kiln_disk_cache_check(dir), KILN_ERROR_IO);
    if (!strstr(kiln_last_error_detail(), says))
        fail_msg("check of %s: \"%s\" does not say \"%s\"", dir, kiln_last_error_detail(), says);
}

static void test_check_accepts_usable_and_explains_unusable_directories(void **state)
{
    const char *base = *state;
    char path[PATH_MAX + 64], file[PATH_MAX];
    kt_assert_status(kiln_disk_cache_check(base), KILN_SUCCESS);
    snprintf(path, sizeof path, "%s/not/yet/made/", base);
    kt_assert_status(kiln_disk_cache_check(path), KILN_SUCCESS);
    assert_int_equal(count_files(base), 0); /* checking creates nothing */

    snprintf(file, sizeof file, "%s/file", base);
    kt_write_file(file, "x");
    assert_check_fails(file, "is a regular file, not a directory");
    snprintf(path, sizeof path, "%s/a/b", file);
    char says[PATH_MAX + 64];
    snprintf(says, sizeof says, "is under %s, which is a regular file, not a directory", file);
    assert_check_fails(path, says);

    size_t len = (size_t)snprintf(path, sizeof path, "%s/", base);
    memset(path + len, 'x', PATH_MAX - len);
    path[PATH_MAX] = '\0';
    assert_check_fails(path, "is too long");

    snprintf(path, sizeof path, "%s/read-only", base);
    assert_int_equal(mkdir(path, 0555), 0);
    if (geteuid() == 0) {
        printf("# read-only case skipped: running as root, which writes to read-only directories\n");
    } else {
        assert_check_fails(path, "is not writable");
        strcat(path, "/sub");
        assert_check_fails(path, "cannot be created");
    }
    assert_null_argument(kiln_disk_cache_check(NULL), "dir");
    kt_assert_status(kiln_disk_cache_check(""), KILN_ERROR_INVALID_ARGUMENT);
}

/* Racing writers: each stores its own payload under one key RACE_ROUNDS
   times and loads after every store; other loaders load meanwhile. Every
   successful load must be exactly one of the payloads, and no load may
   find a corrupt entry. */
#define RACE_WRITERS 4
#define RACE_ROUNDS 60
#define RACE_PAYLOAD (300u * 1024)

struct race {
    char dir[PATH_MAX];
    unsigned char *payloads[RACE_WRITERS];
    size_t sizes[RACE_WRITERS];
};

struct race_tally {
    int loaded, missing, wrong, failed; /* failed: any other status */
    char first_failure[512];
};

static const char race_key[] = "race|gemm_f32_cpu_6x32|device=Test CPU";

static void race_init(struct race *r, const char *base)
{
    /* Not yet created, so the writers also race to create it. */
    snprintf(r->dir, sizeof r->dir, "%s/race/cache", base);
    for (int i = 0; i < RACE_WRITERS; i++) {
        r->sizes[i] = RACE_PAYLOAD + (size_t)i * 4099;
        r->payloads[i] = random_bytes(r->sizes[i]);
    }
}

static void race_free(struct race *r)
{
    for (int i = 0; i < RACE_WRITERS; i++)
        free(r->payloads[i]);
}

static void race_note_failure(struct race_tally *t, const char *what)
{
    if (t->first_failure[0] == '\0')
        snprintf(t->first_failure, sizeof t->first_failure, "%s: %s", what, kiln_last_error_detail());
}

static void race_load(const struct race *r, struct race_tally *t)
{
    void *got;
    size_t size;
    kiln_status status = kiln_disk_cache_load(r->dir, race_key, &got, &size);
    if (status == KILN_ERROR_NOT_FOUND) {
        t->missing++;
        return;
    }
    if (status != KILN_SUCCESS) {
        t->failed++;
        race_note_failure(t, kiln_status_string(status));
        return;
    }
    int match = 0;
    for (int i = 0; i < RACE_WRITERS; i++)
        match |= size == r->sizes[i] && memcmp(got, r->payloads[i], size) == 0;
    if (match)
        t->loaded++;
    else {
        t->wrong++;
        race_note_failure(t, "load returned bytes that no writer stored");
    }
    free(got);
}

/* A writer's own loads come after its store, so NOT_FOUND is a failure too. */
static void race_write(const struct race *r, int self, struct race_tally *t)
{
    for (int round = 0; round < RACE_ROUNDS; round++) {
        if (kiln_disk_cache_store(r->dir, race_key, r->payloads[self], r->sizes[self]) != KILN_SUCCESS) {
            t->failed++;
            race_note_failure(t, "store");
        }
        race_load(r, t);
    }
}

static void assert_race_clean(const struct race_tally *t, const char *who)
{
    if (t->wrong || t->failed)
        fail_msg("%s: %d wrong and %d failed loads or stores; first: %s", who, t->wrong, t->failed, t->first_failure);
}

/* After the race: one entry holding one writer's payload, no temporaries. */
static void assert_race_result(const struct race *r)
{
    struct race_tally t = {0};
    race_load(r, &t);
    assert_int_equal(t.loaded, 1);
    assert_int_equal(count_files(r->dir), 1);
}

static void test_racing_writer_processes_never_expose_partial_entry(void **state)
{
    struct race r;
    race_init(&r, *state);
    pid_t pids[RACE_WRITERS];
    for (int i = 0; i < RACE_WRITERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            struct race_tally t = {0};
            race_write(&r, i, &t);
            if (t.missing || t.wrong || t.failed)
                fprintf(stderr, "writer %d: %d missing, %d wrong, %d failed; first: %s\n", i, t.missing, t.wrong,
                        t.failed, t.first_failure);
            _exit(t.missing || t.wrong || t.failed ? 1 : 0);
        }
    }
    struct race_tally parent = {0};
    int running = RACE_WRITERS;
    int failed_children = 0;
    while (running > 0) {
        race_load(&r, &parent);
        int wstatus;
        pid_t done;
        while ((done = waitpid(-1, &wstatus, WNOHANG)) > 0) {
            running--;
            failed_children += !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0;
        }
    }
    print_message("# parent: %d loads matched a payload, %d found no entry\n", parent.loaded, parent.missing);
    assert_int_equal(failed_children, 0);
    assert_race_clean(&parent, "parent");
    assert_race_result(&r);
    race_free(&r);
}

struct race_thread {
    pthread_t thread;
    const struct race *race;
    int self;
    struct race_tally tally;
};

static atomic_int writers_running;

static void *race_thread_main(void *arg)
{
    struct race_thread *t = arg;
    race_write(t->race, t->self, &t->tally);
    atomic_fetch_sub(&writers_running, 1);
    return NULL;
}

static void test_racing_writer_threads_never_expose_partial_entry(void **state)
{
    struct race r;
    race_init(&r, *state);
    struct race_thread threads[RACE_WRITERS];
    atomic_store(&writers_running, RACE_WRITERS);
    for (int i = 0; i < RACE_WRITERS; i++) {
        threads[i] = (struct race_thread){.race = &r, .self = i};
        assert_int_equal(pthread_create(&threads[i].thread, NULL, race_thread_main, &threads[i]), 0);
    }
    struct race_tally reader = {0};
    while (atomic_load(&writers_running) > 0)
        race_load(&r, &reader);
    for (int i = 0; i < RACE_WRITERS; i++)
        assert_int_equal(pthread_join(threads[i].thread, NULL), 0);
    print_message("# reader: %d loads matched a payload, %d found no entry\n", reader.loaded, reader.missing);
    assert_race_clean(&reader, "reader thread");
    for (int i = 0; i < RACE_WRITERS; i++) {
        assert_int_equal(threads[i].tally.missing, 0);
        assert_race_clean(&threads[i].tally, "writer thread");
    }
    assert_race_result(&r);
    race_free(&r);
}

#define DIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup_dir, teardown_dir)
#define ENV_TEST(f) cmocka_unit_test_setup_teardown(f, save_env, restore_env)

int main(void)
{
    rng = kt_seed();
    struct kt_list tests = {0};
    kt_add(&tests, DIR_TEST(test_round_trip_returns_stored_bytes_for_sizes_from_0_to_4mib));
    kt_add(&tests, DIR_TEST(test_load_of_missing_key_is_not_found));
    kt_add(&tests, DIR_TEST(test_store_creates_directory_and_parents));
    kt_add(&tests, DIR_TEST(test_store_under_regular_file_is_io_error_naming_path));
    kt_add(&tests, DIR_TEST(test_entry_path_is_128bit_hex_name_with_kbin_suffix_in_dir));
    kt_add(&tests, DIR_TEST(test_load_rejects_entry_truncated_at_any_point));
    kt_add(&tests, DIR_TEST(test_load_rejects_flipped_payload_byte));
    kt_add(&tests, DIR_TEST(test_load_rejects_flipped_key_byte));
    kt_add(&tests, DIR_TEST(test_load_rejects_bad_magic));
    kt_add(&tests, DIR_TEST(test_load_rejects_other_format_version));
    kt_add(&tests, DIR_TEST(test_load_rejects_trailing_garbage));
    kt_add(&tests, DIR_TEST(test_load_rejects_absurd_lengths_without_allocating_them));
    kt_add(&tests, DIR_TEST(test_load_rejects_valid_entry_of_another_key));
    kt_add(&tests, DIR_TEST(test_store_overwrites_existing_entry));
    kt_add(&tests, DIR_TEST(test_store_failing_rename_is_io_error_and_leaves_no_temp_file));
    kt_add(&tests, DIR_TEST(test_store_failing_write_is_io_error_and_leaves_no_temp_file));
    kt_add(&tests, DIR_TEST(test_usage_counts_entries_and_bytes_ignoring_other_files));
    kt_add(&tests, DIR_TEST(test_usage_of_missing_dir_is_zero));
    kt_add(&tests, ENV_TEST(test_default_dir_prefers_kiln_cache_dir));
    kt_add(&tests, ENV_TEST(test_default_dir_uses_xdg_cache_home_when_kiln_cache_dir_unset_or_empty));
    kt_add(&tests, ENV_TEST(test_default_dir_uses_home_when_xdg_unset_empty_or_relative));
    kt_add(&tests, ENV_TEST(test_default_dir_is_not_found_without_any_variable));
    kt_add(&tests, ENV_TEST(test_default_dir_with_small_buffer_is_invalid_argument));
    kt_add(&tests, DIR_TEST(test_load_with_null_argument_is_invalid));
    kt_add(&tests, DIR_TEST(test_store_with_null_argument_is_invalid));
    kt_add(&tests, DIR_TEST(test_usage_with_null_argument_is_invalid));
    kt_add(&tests, DIR_TEST(test_entry_path_and_default_dir_with_null_argument_are_invalid));
    kt_add(&tests, DIR_TEST(test_half_written_temporary_file_is_never_read_as_entry));
    kt_add(&tests, DIR_TEST(test_check_accepts_usable_and_explains_unusable_directories));
    kt_add(&tests, DIR_TEST(test_racing_writer_processes_never_expose_partial_entry));
    kt_add(&tests, DIR_TEST(test_racing_writer_threads_never_expose_partial_entry));
    return kt_run_with("disk_cache", &tests, NULL, NULL);
}
