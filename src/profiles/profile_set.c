/* Profile sets: the embedded files, then the user's profile directory, then
   KILN_PROFILE_DIR, resolved parents first (an override that fails gives
   way to the profile it replaced), and the sets shared by the contexts of a
   process. */
#include "profiles/profile_impl.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/diag.h"
#include "util/embedded.h"
#include "util/fs.h"
#include "util/hash.h"

/* Best effort: a warning lost to a failed allocation is still logged. */
static void warn(struct kiln_profile_set *set, const char *path, const char *why)
{
    kiln_log(KILN_LOG_WARN, "%s: %s", path, why);
    size_t add = strlen(path) + strlen(why) + 3;
    char *w = realloc(set->warnings, set->warnings_len + add + 1);
    if (!w)
        return;
    set->warnings = w;
    set->warnings_len += (size_t)snprintf(w + set->warnings_len, add + 1, "%s: %s\n", path, why);
}

static long index_of(const struct kiln_profile_set *set, const char *name)
{
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(set->items[i]->name, name) == 0)
            return (long)i;
    return -1;
}

/* Add one file's profile: a new name is appended; a file of a directory
   replaces the earlier profile of its name (kept in `replaced` in case the
   override fails inheritance). An invalid file only adds a warning. */
static kiln_status add_file(struct kiln_profile_set *set, size_t *capacity, const char *path, const char *file_name,
                            const char *text, size_t size, enum kiln_profile_origin origin)
{
    char why[KILN_PROFILE_WHY_SIZE];
    struct kiln_profile *p = NULL;
    kiln_status st = kiln_profile_parse(text, size, path, file_name, &p, why);
    if (st == KILN_ERROR_INVALID_PROFILE)
        warn(set, path, why);
    if (st != KILN_SUCCESS)
        return st == KILN_ERROR_INVALID_PROFILE ? KILN_SUCCESS : st;

    p->origin = origin;
    long at = index_of(set, p->name);
    if (at >= 0 && origin == KILN_PROFILE_BUILTIN) {
        warn(set, path, "a profile of this name is already loaded");
        kiln_profile_free(p);
    } else if (at >= 0) {
        p->replaced = set->items[at];
        set->items[at] = p;
    } else {
        if (set->count == *capacity) {
            size_t cap = *capacity ? 2 * *capacity : 32;
            struct kiln_profile **items = realloc(set->items, cap * sizeof *items);
            if (!items) {
                kiln_profile_free(p);
                return KILN_ERROR_OUT_OF_MEMORY;
            }
            set->items = items;
            *capacity = cap;
        }
        set->items[set->count++] = p;
    }
    return KILN_SUCCESS;
}

static int compare_strings(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* One override file; one that cannot be read (not a regular file, too
   large, unreadable) is a warning like an invalid one. */
static kiln_status load_path(struct kiln_profile_set *set, size_t *capacity, const char *path,
                             enum kiln_profile_origin origin)
{
    char *text = NULL;
    size_t size = 0;
    kiln_status st = kiln_fs_read(path, 0, KILN_PROFILE_MAX_BYTES, &text, &size);
    if (st == KILN_ERROR_OUT_OF_MEMORY)
        return st;
    if (st == KILN_SUCCESS) {
        st = add_file(set, capacity, path, strrchr(path, '/') + 1, text, size, origin);
    } else {
        char why[KILN_PROFILE_WHY_SIZE];
        snprintf(why, sizeof why, "skipped: the file %s", kiln_last_error_detail());
        warn(set, path, why);
        kiln_error_clear();
        st = KILN_SUCCESS;
    }
    free(text);
    return st;
}

/* The user's directory is optional: missing is silent, unusable a warning.
   KILN_PROFILE_DIR is an explicit request: unusable is an error. */
static kiln_status dir_unusable(struct kiln_profile_set *set, const char *dir, enum kiln_profile_origin origin,
                                const char *why)
{
    if (origin == KILN_PROFILE_DIR)
        return kiln_error(KILN_ERROR_IO, "the profile directory (KILN_PROFILE_DIR) '%.200s%s' %s", dir,
                          strlen(dir) > 200 ? "..." : "", why);
    char line[KILN_PROFILE_WHY_SIZE];
    snprintf(line, sizeof line, "skipped: the user profile directory %s", why);
    warn(set, dir, line);
    kiln_error_clear();
    return KILN_SUCCESS;
}

/* Every *.json file of `dir`, in name order. */
static kiln_status load_dir(struct kiln_profile_set *set, size_t *capacity, const char *dir,
                            enum kiln_profile_origin origin)
{
    struct stat sb;
    if (origin == KILN_PROFILE_USER && stat(dir, &sb) != 0 && errno == ENOENT)
        return KILN_SUCCESS;
    if (kiln_fs_check_dir(dir) != KILN_SUCCESS) {
        char why[256];
        snprintf(why, sizeof why, "%s", kiln_last_error_detail());
        return dir_unusable(set, dir, origin, why);
    }
    DIR *d = opendir(dir);
    if (!d) {
        char why[256];
        snprintf(why, sizeof why, "cannot be listed: %s", strerror(errno));
        return dir_unusable(set, dir, origin, why);
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    kiln_status st = KILN_SUCCESS;
    for (struct dirent *e; st == KILN_SUCCESS && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                st = KILN_ERROR_OUT_OF_MEMORY;
                break;
            }
            names = grown;
        }
        if ((names[count] = malloc(strlen(dir) + len + 2)))
            sprintf(names[count++], "%s/%s", dir, e->d_name);
        else
            st = KILN_ERROR_OUT_OF_MEMORY;
    }
    closedir(d);
    if (names)
        qsort(names, count, sizeof *names, compare_strings);
    for (size_t i = 0; i < count; i++) {
        if (st == KILN_SUCCESS)
            st = load_path(set, capacity, names[i], origin);
        free(names[i]);
    }
    free(names);
    return st;
}

/* The number of steps from profile i up its parent chain to a root or to a
   missing parent; -1 if i is on a parent loop, -2 if its chain runs into
   one. `why` says which. */
static int chain_depth(const struct kiln_profile_set *set, size_t i, char *why)
{
    const struct kiln_profile *p = set->items[i];
    long j;
    int steps = 0;
    while (p->parent[0] && (j = index_of(set, p->parent)) >= 0) {
        if ((size_t)++steps > set->count)
            break;
        p = set->items[j];
    }
    if ((size_t)steps <= set->count)
        return steps;
    p = set->items[i];
    snprintf(why, KILN_PROFILE_WHY_SIZE, "parent '%s' was skipped", p->parent);
    for (steps = 0; (size_t)steps <= set->count; steps++) {
        p = set->items[index_of(set, p->parent)];
        if (p != set->items[i])
            continue;
        size_t n = (size_t)snprintf(why, KILN_PROFILE_WHY_SIZE, "parent cycle: %s", p->name);
        do {
            p = set->items[index_of(set, p->parent)];
            n += (size_t)snprintf(why + n, KILN_PROFILE_WHY_SIZE - n, " -> %s", p->name);
        } while (p != set->items[i] && n < KILN_PROFILE_WHY_SIZE);
        return -1;
    }
    return -2;
}

/* Fill each profile's inherited fields, parents first, and validate the
   result. valid[i] becomes 1, 0 for a failure of the profile itself, or -1
   when only its parent failed; why[i] says why. */
static kiln_status resolve_pass(struct kiln_profile_set *set, int *valid, char (*why)[KILN_PROFILE_WHY_SIZE])
{
    int *depth = malloc(set->count * sizeof *depth + 1);
    if (!depth)
        return KILN_ERROR_OUT_OF_MEMORY;
    int max_depth = 0;
    for (size_t i = 0; i < set->count; i++) {
        depth[i] = chain_depth(set, i, why[i]);
        valid[i] = depth[i] == -2 ? -1 : 0;
        max_depth = depth[i] > max_depth ? depth[i] : max_depth;
    }
    kiln_status st = KILN_SUCCESS;
    for (int d = 0; d <= max_depth && st == KILN_SUCCESS; d++) {
        for (size_t i = 0; i < set->count; i++) {
            struct kiln_profile *p = set->items[i];
            if (depth[i] != d)
                continue;
            p->depth = d;
            long j = p->parent[0] ? index_of(set, p->parent) : -1;
            if (p->parent[0] && j < 0) {
                snprintf(why[i], KILN_PROFILE_WHY_SIZE, "parent '%s' not found", p->parent);
                continue;
            }
            if (j >= 0 && valid[j] != 1) {
                snprintf(why[i], KILN_PROFILE_WHY_SIZE, "parent '%s' was skipped", p->parent);
                valid[i] = -1;
                continue;
            }
            int r = kiln_profile_inherit(p, j >= 0 ? set->items[j] : NULL, why[i]);
            if (r == -2)
                st = KILN_ERROR_OUT_OF_MEMORY;
            valid[i] = r == 0;
        }
    }
    free(depth);
    return st;
}

/* Put back the profile each override whose outcome is `tier` replaced, with
   a warning; returns how many were put back. */
static int restore_embedded(struct kiln_profile_set *set, const int *valid, char (*why)[KILN_PROFILE_WHY_SIZE],
                            int tier)
{
    int restored = 0;
    for (size_t i = 0; i < set->count; i++) {
        struct kiln_profile *p = set->items[i];
        if (valid[i] != tier || !p->replaced)
            continue;
        size_t n = strlen(why[i]);
        if (p->replaced->origin == KILN_PROFILE_BUILTIN)
            snprintf(why[i] + n, KILN_PROFILE_WHY_SIZE - n, "; the embedded profile is kept");
        else
            snprintf(why[i] + n, KILN_PROFILE_WHY_SIZE - n, "; the profile of %s is kept", p->replaced->path);
        warn(set, p->path, why[i]);
        set->items[i] = p->replaced;
        p->replaced = NULL;
        kiln_profile_free(p);
        restored++;
    }
    return restored;
}

/* Resolve every profile. An override that fails gives way to the profile it
   replaced and the set is resolved again (overrides failing on
   their own first, then those whose parent failed); the profiles still
   invalid are then dropped with a warning. */
static kiln_status resolve_all(struct kiln_profile_set *set)
{
    int *valid = malloc(set->count * sizeof *valid + 1);
    char(*why)[KILN_PROFILE_WHY_SIZE] = malloc(set->count * sizeof *why + 1);
    kiln_status st = valid && why ? KILN_SUCCESS : KILN_ERROR_OUT_OF_MEMORY;
    while (st == KILN_SUCCESS) {
        st = resolve_pass(set, valid, why);
        if (st == KILN_SUCCESS && !restore_embedded(set, valid, why, 0) && !restore_embedded(set, valid, why, -1))
            break;
    }
    size_t kept = 0;
    for (size_t i = 0; st == KILN_SUCCESS && i < set->count; i++) {
        struct kiln_profile *p = set->items[i];
        kiln_profile_free(p->replaced);
        p->replaced = NULL;
        if (valid[i] == 1) {
            set->items[kept++] = p;
        } else {
            warn(set, p->path, why[i]);
            kiln_profile_free(p);
        }
    }
    if (st == KILN_SUCCESS)
        set->count = kept;
    free(valid);
    free(why);
    return st;
}

static int compare_profiles(const void *a, const void *b)
{
    return strcmp((*(struct kiln_profile *const *)a)->name, (*(struct kiln_profile *const *)b)->name);
}

char *kiln_profile_user_dir(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    const char *base = xdg && xdg[0] == '/' ? xdg : home && *home ? home : NULL;
    const char *tail = base == xdg ? "/kiln/profiles" : "/.config/kiln/profiles";
    char *dir = base ? malloc(strlen(base) + strlen(tail) + 1) : NULL;
    if (dir)
        sprintf(dir, "%s%s", base, tail);
    return dir;
}

kiln_status kiln_profile_set_load(const char *user_dir, const char *override_dir, struct kiln_profile_set **out)
{
    if (!out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_profile_set_load: out is NULL");
    *out = NULL;
    struct kiln_profile_set *set = calloc(1, sizeof *set);
    if (!set)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "out of memory loading device profiles");
    size_t capacity = 0;
    kiln_status st = KILN_SUCCESS;
    for (size_t i = 0; st == KILN_SUCCESS && i < kiln_embedded_profiles_count; i++) {
        const struct kiln_embedded_file *e = &kiln_embedded_profiles[i];
        char path[256];
        snprintf(path, sizeof path, "embedded:%s", e->name);
        st = add_file(set, &capacity, path, e->name, e->data, e->size, KILN_PROFILE_BUILTIN);
    }
    if (st == KILN_SUCCESS && user_dir && *user_dir)
        st = load_dir(set, &capacity, user_dir, KILN_PROFILE_USER);
    if (st == KILN_SUCCESS && override_dir && *override_dir)
        st = load_dir(set, &capacity, override_dir, KILN_PROFILE_DIR);
    if (st == KILN_SUCCESS)
        st = resolve_all(set);
    if (st != KILN_SUCCESS) {
        kiln_profile_set_free(set);
        return st == KILN_ERROR_OUT_OF_MEMORY ? kiln_error(st, "out of memory loading device profiles") : st;
    }
    if (set->count)
        qsort(set->items, set->count, sizeof *set->items, compare_profiles);
    *out = set;
    return KILN_SUCCESS;
}

void kiln_profile_set_free(struct kiln_profile_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->count; i++)
        kiln_profile_free(set->items[i]);
    free(set->items);
    free(set->warnings);
    free(set);
}

const char *kiln_profile_set_warnings(const struct kiln_profile_set *set)
{
    return set && set->warnings ? set->warnings : "";
}

size_t kiln_profile_set_count(const struct kiln_profile_set *set) { return set ? set->count : 0; }

const struct kiln_profile *kiln_profile_set_at(const struct kiln_profile_set *set, size_t i)
{
    return set && i < set->count ? set->items[i] : NULL;
}

const struct kiln_profile *kiln_profile_find(const struct kiln_profile_set *set, const char *name)
{
    long i = set && name ? index_of(set, name) : -1;
    return i >= 0 ? set->items[i] : NULL;
}

/* Sets shared by the contexts of this process, one per pair of directories
   (user and override) and state of their files. A set whose directories
   changed is dropped from the list and freed by its last release. */
struct shared_set {
    char *user, *dir;
    uint64_t state;
    struct kiln_profile_set *set;
    unsigned refs;
    int current;
    struct shared_set *next;
};
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_set *shared_sets;

/* A fingerprint of the directory's *.json files: names, sizes, times. */
static uint64_t dir_state(const char *dir)
{
    uint64_t h = KILN_HASH_SEED;
    DIR *d = dir && *dir ? opendir(dir) : NULL;
    if (!d)
        return h ^ (dir && *dir ? 1 : 0);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        uint64_t one = kiln_hash64(e->d_name, len, KILN_HASH_SEED);
        if (stat(path, &sb) == 0) {
            long long facts[4] = {(long long)sb.st_size, (long long)sb.st_mtim.tv_sec, (long long)sb.st_mtim.tv_nsec,
                                  (long long)sb.st_ino};
            one = kiln_hash64(facts, sizeof facts, one);
        }
        h ^= one; /* independent of the listing order */
    }
    closedir(d);
    return h;
}

static void shared_free(struct shared_set *s)
{
    kiln_profile_set_free(s->set);
    free(s->user);
    free(s->dir);
    free(s);
}

kiln_status kiln_profile_set_shared(const char *user_dir, const char *override_dir, struct kiln_profile_set **out)
{
    const char *user = user_dir ? user_dir : "", *dir = override_dir ? override_dir : "";
    uint64_t state = dir_state(dir) ^ (dir_state(user) * 0x9e3779b97f4a7c15ull);
    pthread_mutex_lock(&shared_lock);
    struct shared_set *s = shared_sets;
    while (s && !(s->current && s->state == state && strcmp(s->dir, dir) == 0 && strcmp(s->user, user) == 0))
        s = s->next;
    kiln_status st = KILN_SUCCESS;
    if (!s) {
        struct kiln_profile_set *set = NULL;
        st = kiln_profile_set_load(user, dir, &set);
        struct shared_set *fresh = st == KILN_SUCCESS ? calloc(1, sizeof *fresh) : NULL;
        char *dir_copy = fresh ? strdup(dir) : NULL, *user_copy = fresh ? strdup(user) : NULL;
        if (st == KILN_SUCCESS && (!dir_copy || !user_copy)) {
            free(dir_copy);
            free(user_copy);
            free(fresh);
            kiln_profile_set_free(set);
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "out of memory loading device profiles");
        } else if (st == KILN_SUCCESS) {
            s = fresh;
            s->dir = dir_copy;
            s->user = user_copy;
            /* The directories changed: their older set is freed now if no
               context holds it, else by its last release. */
            for (struct shared_set **at = &shared_sets; *at;) {
                struct shared_set *old = *at;
                if (strcmp(old->dir, dir) != 0 || strcmp(old->user, user) != 0) {
                    at = &old->next;
                    continue;
                }
                old->current = 0;
                if (old->refs) {
                    at = &old->next;
                    continue;
                }
                *at = old->next;
                shared_free(old);
            }
            s->state = state;
            s->set = set;
            s->current = 1;
            s->next = shared_sets;
            shared_sets = s;
        }
    }
    if (st == KILN_SUCCESS) {
        s->refs++;
        *out = s->set;
    }
    pthread_mutex_unlock(&shared_lock);
    return st;
}

void kiln_profile_set_release(struct kiln_profile_set *set)
{
    if (!set)
        return;
    pthread_mutex_lock(&shared_lock);
    for (struct shared_set **at = &shared_sets; *at; at = &(*at)->next) {
        struct shared_set *s = *at;
        if (s->set != set)
            continue;
        if (--s->refs == 0 && !s->current) {
            *at = s->next;
            shared_free(s);
        }
        break;
    }
    pthread_mutex_unlock(&shared_lock);
}
