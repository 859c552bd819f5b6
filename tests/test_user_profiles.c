/* The user's profile directory (docs/inputs.md, docs/profiles.md): where it
   is ($XDG_CONFIG_HOME/kiln/profiles, else $HOME/.config/kiln/profiles),
   that a missing one is silent and an unusable one or a file in it that does
   not load costs one warning and never an error, its precedence between the
   built-in profiles and KILN_PROFILE_DIR, and that a profile written by
   kiln_profile_write into it with rules naming this device and driver is
   what the next context matches, shown by kiln_device_get_info and a plan's
   description, while one naming another driver, device or arch loads, is
   silently passed over and leaves the parent matched. Every test runs under the
   watchdog, so one that hangs on a blocking open fails naming itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/context.h"
#include "profiles/profile.h"
#include "test_util.h"
#include "util/fs.h"

static void assert_says(const char *text, const char *says)
{
    if (!strstr(text, says))
        fail_msg("\"%s\" does not say \"%s\"", text, says);
}

/* A temporary XDG_CONFIG_HOME; *user becomes its kiln/profiles (not made). */
static char *config_home(char *user, size_t size)
{
    char *base = kt_temp_dir();
    setenv("XDG_CONFIG_HOME", base, 1);
    snprintf(user, size, "%s/kiln/profiles", base);
    return base;
}

static void make_user_dir(const char *base)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/kiln/profiles", base);
    kt_assert_status(kiln_mkdir_p(path, 0755), KILN_SUCCESS);
}

static void write_profile(const char *dir, const char *name, const char *body)
{
    char path[4400], text[2048];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    snprintf(text, sizeof text, "{\"name\": \"%s\", %s}", name, body);
    kt_write_file(path, text);
}

/* A context on the default device: its info, and the warnings it logged. */
static int open_context(kiln_device_info *info, const char *capture_dir)
{
    struct kt_capture cap;
    kt_capture_begin(&cap, capture_dir);
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(NULL, &ctx);
    int warnings = kt_capture_end(&cap);
    kt_assert_status(st, KILN_SUCCESS);
    kt_assert_status(kiln_context_get_device_info(ctx, info), KILN_SUCCESS);
    kiln_context_destroy(ctx);
    return warnings;
}

static void finish(char *base)
{
    setenv("XDG_CONFIG_HOME", getenv("KT_CONFIG_HOME"), 1);
    kt_remove_tree(base);
    free(base);
}

/* ------------------------------------------------------------------------ */

struct env_case {
    const char *name;
    const char *xdg; /* NULL: unset; "@": the temporary directory */
    int home;        /* HOME set to the temporary directory */
    const char *tail;
};

static const struct env_case locations[] = {
    {"XDG_CONFIG_HOME absolute", "@", 1, "/kiln/profiles"},
    {"XDG_CONFIG_HOME relative (ignored)", "relative/config", 1, "/.config/kiln/profiles"},
    {"XDG_CONFIG_HOME empty (ignored)", "", 1, "/.config/kiln/profiles"},
    {"XDG_CONFIG_HOME unset", NULL, 1, "/.config/kiln/profiles"},
    {"neither XDG_CONFIG_HOME nor HOME", NULL, 0, NULL},
};

/* Where the directory is, and that a profile there reaches a context. */
static void test_location(void **state)
{
    const struct env_case *c = *state;
    char *base = kt_temp_dir(), *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    if (c->xdg)
        setenv("XDG_CONFIG_HOME", strcmp(c->xdg, "@") == 0 ? base : c->xdg, 1);
    else
        unsetenv("XDG_CONFIG_HOME");
    if (c->home)
        setenv("HOME", base, 1);
    else
        unsetenv("HOME");
    char *dir = kiln_profile_user_dir();
    if (!c->tail) {
        assert_null(dir);
    } else {
        char want[4096];
        snprintf(want, sizeof want, "%s%s", base, c->tail);
        assert_non_null(dir);
        assert_string_equal(dir, want);
        kt_assert_status(kiln_mkdir_p(dir, 0755), KILN_SUCCESS);
        write_profile(dir, "user-child", "\"parent\": \"generic-cpu\"");
        struct kiln_profile_set *set = NULL;
        kt_assert_status(kiln_profile_set_shared(dir, NULL, &set), KILN_SUCCESS);
        const struct kiln_profile *p = kiln_profile_find(set, "user-child");
        assert_non_null(p);
        char origin[4096];
        kiln_profile_origin(p, origin, sizeof origin);
        assert_says(origin, want);
        assert_says(origin, "(user profile directory)");
        kiln_profile_set_release(set);
    }
    kiln_device_info info;
    assert_int_equal(open_context(&info, base), 0);
    free(dir);
    if (home)
        setenv("HOME", home, 1);
    free(home);
    finish(base);
}

static void test_missing_is_silent(void **state)
{
    (void)state;
    char user[4096];
    char *base = config_home(user, sizeof user);
    kiln_device_info info;
    assert_int_equal(open_context(&info, base), 0);
    assert_string_equal(info.profile_origin, "built-in");
    finish(base);
}

/* ------------------------------------------------------------------------ */

enum kind { REGULAR, FIFO, SOCKET, DEV_NULL, LOOP, DIRECTORY, TEXT };

static void make_kind(enum kind kind, const char *path)
{
    switch (kind) {
    case REGULAR:
        kt_write_file(path, "not a directory");
        break;
    case FIFO:
        assert_int_equal(mkfifo(path, 0644), 0);
        break;
    case SOCKET: {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        assert_true(strlen(path) < sizeof addr.sun_path);
        strcpy(addr.sun_path, path);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_true(s >= 0);
        assert_int_equal(bind(s, (const struct sockaddr *)&addr, sizeof addr), 0);
        close(s);
        break;
    }
    case DEV_NULL:
        assert_int_equal(symlink("/dev/null", path), 0);
        break;
    case LOOP:
        assert_int_equal(symlink(path, path), 0);
        break;
    case DIRECTORY:
        assert_int_equal(mkdir(path, 0755), 0);
        break;
    default:
        break;
    }
}

struct bad_case {
    const char *name;
    enum kind kind;
    const char *text; /* TEXT: the file's content */
    const char *says;
};

/* The directory is unusable: one warning naming it and why; the context
   opens with the built-in profile. */
static const struct bad_case bad_dirs[] = {
    {"a regular file", REGULAR, NULL, "is a regular file, not a directory"},
    {"a FIFO", FIFO, NULL, "is a FIFO, not a directory"},
    {"a socket", SOCKET, NULL, "is a socket, not a directory"},
    {"the device /dev/null", DEV_NULL, NULL, "is a character device, not a directory"},
    {"a symbolic link loop", LOOP, NULL, "is a symbolic link loop"},
};

static void test_dir_unusable(void **state)
{
    const struct bad_case *c = *state;
    char user[4096];
    char *base = config_home(user, sizeof user);
    char parent[4096];
    snprintf(parent, sizeof parent, "%s/kiln", base);
    assert_int_equal(mkdir(parent, 0755), 0);
    make_kind(c->kind, user);
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(user, NULL, &set), KILN_SUCCESS);
    assert_says(kiln_profile_set_warnings(set), user);
    assert_says(kiln_profile_set_warnings(set), c->says);
    kiln_profile_set_free(set);
    kiln_device_info info;
    assert_int_equal(open_context(&info, base), 1);
    assert_string_equal(info.profile_origin, "built-in");
    finish(base);
}

/* A file of the directory does not load: one warning naming it and why;
   the context opens with the built-in profile. */
static const struct bad_case bad_files[] = {
    {"malformed JSON", TEXT, "{\"name\": \"tuned\",", "JSON syntax error"},
    {"an unknown key (a schema change)", TEXT,
     "{\"name\": \"tuned\", \"parent\": \"generic-cpu\", \"match\": {\"type\": \"cpu\"}, \"tuning\": 1}",
     "unknown top-level key 'tuning'"},
    {"an unknown parent", TEXT,
     "{\"name\": \"tuned\", \"parent\": \"no-such-profile\", \"match\": {\"type\": \"cpu\"}}",
     "parent 'no-such-profile' not found"},
    {"a kernel key the schema no longer knows", TEXT,
     "{\"name\": \"tuned\", \"parent\": \"generic-cpu\", \"match\": {\"type\": \"cpu\", \"driver\": [\"*\"]}, "
     "\"kernels\": {\"gemm.cpu\": {\"mc\": 8}}}",
     "unknown key 'kernels.gemm.cpu.mc'"},
    {"a match rule the schema does not know", TEXT,
     "{\"name\": \"tuned\", \"parent\": \"generic-cpu\", \"match\": {\"type\": \"cpu\", \"os\": [\"linux\"]}}",
     "unknown or repeated key 'match.os'"},
    {"a bad value", TEXT,
     "{\"name\": \"tuned\", \"parent\": \"generic-cpu\", \"match\": {\"type\": \"cpu\"}, \"kernels\": {\"gemm.cpu\": "
     "{\"mr\": -3}}}",
     "gemm.cpu"},
    {"a name that is not the file's", TEXT,
     "{\"name\": \"other\", \"parent\": \"generic-cpu\", \"match\": {\"type\": \"cpu\"}}", "other"},
    {"a FIFO", FIFO, NULL, "is a FIFO, not a regular file"},
    {"a directory", DIRECTORY, NULL, "is a directory, not a regular file"},
    {"a symbolic link loop", LOOP, NULL, "is a symbolic link loop"},
};

static void test_file_bad(void **state)
{
    const struct bad_case *c = *state;
    char user[4096], path[4200];
    char *base = config_home(user, sizeof user);
    make_user_dir(base);
    snprintf(path, sizeof path, "%s/tuned.json", user);
    if (c->kind == TEXT)
        kt_write_file(path, c->text);
    else
        make_kind(c->kind, path);
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(user, NULL, &set), KILN_SUCCESS);
    printf("# %s", kiln_profile_set_warnings(set));
    assert_says(kiln_profile_set_warnings(set), path);
    assert_says(kiln_profile_set_warnings(set), c->says);
    assert_null(kiln_profile_find(set, "tuned"));
    kiln_profile_set_free(set);
    kiln_device_info info;
    assert_int_equal(open_context(&info, base), 1);
    assert_string_equal(info.profile_origin, "built-in");
    finish(base);
}

/* ------------------------------------------------------------------------ */

static double mr_of(const struct kiln_profile *p)
{
    double v = 0;
    kt_assert_status(kiln_profile_get(p, "gemm.cpu", "mr", &v), KILN_SUCCESS);
    return v;
}

static void put(const char *dir, const char *name, int mr)
{
    char body[256];
    snprintf(body, sizeof body,
             "\"parent\": \"generic-cpu\", \"match\": {\"type\": \"cpu\"}, \"kernels\": {\"gemm.cpu\": {\"mr\": %d}}",
             mr);
    write_profile(dir, name, body);
}

/* built-in < user directory < KILN_PROFILE_DIR, by name; an override that
   fails gives way to the one it replaced. */
static void test_precedence(void **state)
{
    (void)state;
    char user[4096], over[4200];
    char *base = config_home(user, sizeof user);
    make_user_dir(base);
    snprintf(over, sizeof over, "%s/override", base);
    assert_int_equal(mkdir(over, 0755), 0);
    put(user, "arm-cpu", 3); /* replaces the built-in one */
    put(user, "both", 3);    /* replaced by KILN_PROFILE_DIR */
    put(over, "both", 5);
    put(user, "fallback", 3); /* KILN_PROFILE_DIR's fails: this one stays */
    write_profile(over, "fallback", "\"parent\": \"no-such-profile\"");
    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(user, over, &set), KILN_SUCCESS);
    char origin[4096];
    const struct kiln_profile *p = kiln_profile_find(set, "arm-cpu");
    assert_int_equal(mr_of(p), 3);
    kiln_profile_origin(p, origin, sizeof origin);
    assert_says(origin, "(user profile directory)");
    p = kiln_profile_find(set, "both");
    assert_int_equal(mr_of(p), 5);
    kiln_profile_origin(p, origin, sizeof origin);
    assert_says(origin, "(KILN_PROFILE_DIR)");
    p = kiln_profile_find(set, "fallback");
    assert_int_equal(mr_of(p), 3);
    kiln_profile_origin(p, origin, sizeof origin);
    assert_says(origin, "(user profile directory)");
    assert_says(kiln_profile_set_warnings(set), "the profile of ");
    kiln_profile_origin(kiln_profile_find(set, "generic-cpu"), origin, sizeof origin);
    assert_string_equal(origin, "built-in");
    kiln_profile_set_free(set);
    finish(base);
}

/* ------------------------------------------------------------------------ */

/* A tuned child of the profile the default device matches, written into
   the user directory as kiln-tune writes it: match rules naming this device
   and driver exactly, gemm.cpu.mr changed. */
struct tuned {
    char name[64], matched[64], path[4200];
    int mr;
};

static void write_tuned(const char *user, struct tuned *t)
{
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    const struct kiln_profile *matched = ctx->profile;
    snprintf(t->matched, sizeof t->matched, "%s", kiln_profile_name(matched));
    t->mr = mr_of(matched) == 4 ? 3 : 4;
    char overlay[128]; /* the tile's rows in either orientation */
    snprintf(overlay, sizeof overlay, "{\"kernels\": {\"gemm.cpu\": {\"mr\": %d, \"flip_mr\": 0}}}", t->mr);
    struct kiln_profile *values = NULL, *rules = NULL;
    kt_assert_status(kiln_profile_derive(matched, overlay, &values), KILN_SUCCESS);
    kt_assert_status(kiln_profile_exact_match(&ctx->desc, &rules), KILN_SUCCESS);
    snprintf(t->name, sizeof t->name, "%.50s-tuned", t->matched);
    kt_assert_status(kiln_mkdir_p(user, 0755), KILN_SUCCESS);
    snprintf(t->path, sizeof t->path, "%s/%s.json", user, t->name);
    struct kiln_profile_measurement m = {"gemm 256x256x256 GFLOP/s", 12.5, 10.0};
    struct kiln_profile_provenance pv = {
        "kiln-tune", "0.1.0", ctx->desc.name, ctx->desc.driver_version, "2026-01-01", "test", &m, 1};
    kt_assert_status(
        kiln_profile_write(t->path, t->name, t->matched, rules, values, 1u << KILN_GROUP_gemm_cpu, NULL, &pv),
        KILN_SUCCESS);
    kiln_profile_free(rules);
    kiln_profile_free(values);
    kiln_context_destroy(ctx);
}

/* kiln-tune's profile is the next context's, shown by kiln-info's fields
   with why it matched: every rule of this device, its driver included. */
static void test_written_profile_is_picked_up(void **state)
{
    (void)state;
    char user[4096];
    char *base = config_home(user, sizeof user);
    struct tuned t;
    write_tuned(user, &t);

    kiln_device_info info;
    assert_int_equal(open_context(&info, base), 0);
    printf("# %s (%s)\n", info.profile, info.profile_reason);
    assert_string_equal(info.profile, t.name);
    char says[256];
    snprintf(says, sizeof says, "name is '%s'", info.name);
    assert_says(info.profile_reason, says);
    snprintf(says, sizeof says, "arch '%s' matches", info.arch);
    assert_says(info.profile_reason, says);
    snprintf(says, sizeof says, "driver '%s' matches", info.driver_version);
    assert_says(info.profile_reason, says);
    assert_says(info.profile_origin, t.path);
    assert_says(info.profile_origin, "(user profile directory)");
    assert_says(info.profile_parents, t.matched);
    assert_says(info.profile_provenance, "\"tool\":\"kiln-tune\"");
    assert_says(info.profile_provenance, "gemm 256x256x256 GFLOP/s");
    kiln_device_info by_index;
    kt_assert_status(kiln_device_get_info(info.index, &by_index), KILN_SUCCESS);
    assert_string_equal(by_index.profile, t.name);
    assert_string_equal(by_index.profile_origin, info.profile_origin);

    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_create(NULL, &ctx), KILN_SUCCESS);
    kiln_gemm_desc d;
    kiln_gemm_desc_init(&d, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, 256, 256, 256);
    d.algo = KILN_GEMM_CPU;
    kiln_gemm_plan *plan = NULL;
    kiln_status st = kiln_gemm_plan_create(ctx, &d, &plan);
    if (kt_unsupported_here(ctx, st)) { /* the tuned CPU tile: not a CUDA context's */
        kiln_context_destroy(ctx);
        finish(base);
        skip();
    }
    kt_assert_status(st, KILN_SUCCESS);
    kiln_gemm_plan_info pi;
    kt_assert_status(kiln_gemm_plan_describe(plan, &pi), KILN_SUCCESS);
    printf("# %s %s (%s)\n", pi.kernel, pi.params, pi.profile);
    assert_string_equal(pi.profile, t.name);
    char want[32];
    snprintf(want, sizeof want, "MR=%d ", t.mr);
    assert_says(pi.params, want);
    kiln_gemm_plan_destroy(plan);
    kiln_context_destroy(ctx);
    finish(base);
}

/* One match rule of a tuned profile, edited as if it had been written on
   another device or driver. */
struct elsewhere_case {
    const char *name;
    const char *rule, *value;
};

static const struct elsewhere_case elsewhere[] = {
    {"another driver version", "driver", "0.0-other"},
    {"another device name", "name", "=Another Device"},
    {"another arch", "arch", "x86_64:other"},
};

/* The profile still loads but no longer matches: the device gets the parent,
   with no warning and no error. */
static void test_tuned_elsewhere(void **state)
{
    const struct elsewhere_case *c = *state;
    char user[4096];
    char *base = config_home(user, sizeof user);
    struct tuned t;
    write_tuned(user, &t);
    size_t size;
    char *text = (char *)kt_read_bytes(t.path, &size);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cJSON *match = cJSON_GetObjectItemCaseSensitive(root, "match");
    assert_non_null(cJSON_GetObjectItemCaseSensitive(match, c->rule));
    cJSON *list = cJSON_CreateArray();
    cJSON_AddItemToArray(list, cJSON_CreateString(c->value));
    cJSON_ReplaceItemInObjectCaseSensitive(match, c->rule, list);
    text = cJSON_Print(root);
    cJSON_Delete(root);
    kt_write_file(t.path, text);
    free(text);

    struct kiln_profile_set *set = NULL;
    kt_assert_status(kiln_profile_set_load(user, NULL, &set), KILN_SUCCESS);
    assert_string_equal(kiln_profile_set_warnings(set), "");
    assert_non_null(kiln_profile_find(set, t.name));
    kiln_profile_set_free(set);
    kiln_device_info info;
    assert_int_equal(open_context(&info, base), 0);
    printf("# %s (%s)\n", info.profile, info.profile_reason);
    assert_string_equal(info.profile, t.matched);
    assert_string_equal(info.profile_origin, "built-in");
    finish(base);
}

/* ------------------------------------------------------------------------ */

int main(void)
{
    /* Each test points XDG_CONFIG_HOME elsewhere and back to the suite's. */
    const char *suite = getenv("XDG_CONFIG_HOME");
    setenv("KT_CONFIG_HOME", suite ? suite : "/nonexistent", 1);
    struct kt_list t = {0};
#define CASES(prefix, fn, items)                                                                                       \
    for (size_t i = 0; i < sizeof items / sizeof *items; i++)                                                          \
    kt_add_watched(&t, prefix, fn, &items[i])
    CASES("user dir location: ", test_location, locations);
    CASES("user dir ", test_dir_unusable, bad_dirs);
    CASES("user dir file ", test_file_bad, bad_files);
    CASES("tuned profile for ", test_tuned_elsewhere, elsewhere);
#undef CASES
    static const struct {
        const char *name;
        CMUnitTestFunction fn;
    } single[] = {
        {"test_missing_is_silent", test_missing_is_silent},
        {"test_precedence", test_precedence},
        {"test_written_profile_is_picked_up", test_written_profile_is_picked_up},
    };
    for (size_t i = 0; i < sizeof single / sizeof *single; i++)
        kt_add_watched(&t, "", single[i].fn, &single[i]);
    /* kt_run opens a context first, with the real HOME: POCL fixes where its
       kernel cache lives (under HOME) when it starts, and the location tests
       point HOME at directories they remove. */
    return kt_run("user_profiles", &t);
}
