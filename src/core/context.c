/*
 * Contexts: device enumeration over every backend of the registry, device
 * selection, profile matching, and the program cache that every operator
 * builds its kernels through.
 */
#include "core/context.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/device_choice.h"
#include "core/diag.h"
#include "jit/disk_cache.h"
#include "profiles/profile.h"

/* An environment variable, with "" treated as unset. */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Every device of every backend in the registry, in kiln's order (backend 0's
   devices, then backend 1's, ...), without peaks; *devices is malloc'd. */
static kiln_status list_devices(struct kiln_listing **devices, size_t *count)
{
    *devices = NULL;
    *count = 0;
    kiln_status st = KILN_SUCCESS;
    for (const struct kiln_backend *const *be = kiln_backends; *be && st == KILN_SUCCESS; be++) {
        size_t n = 0;
        st = (*be)->list_devices(NULL, 0, &n);
        if (st != KILN_SUCCESS || n == 0)
            continue;
        struct kiln_device_desc *descs = calloc(n, sizeof *descs);
        struct kiln_listing *grown = descs ? realloc(*devices, (*count + n) * sizeof *grown) : NULL;
        if (!grown) {
            free(descs);
            st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating %zu device descriptions", *count + n);
            break;
        }
        *devices = grown;
        size_t listed = n;
        st = (*be)->list_devices(descs, n, &listed);
        for (size_t i = 0; st == KILN_SUCCESS && i < n && i < listed; i++, ++*count)
            grown[*count] = (struct kiln_listing){descs[i], *be, i, 0.0};
        free(descs);
    }
    if (st != KILN_SUCCESS) {
        free(*devices);
        *devices = NULL;
        *count = 0;
    }
    return st;
}

/* The built-in profiles, the user's profile directory, KILN_PROFILE_DIR. */
static kiln_status load_profiles(struct kiln_profile_set **set)
{
    char *user = kiln_profile_user_dir();
    kiln_status st = kiln_profile_set_shared(user, env("KILN_PROFILE_DIR"), set);
    free(user);
    return st;
}

/* The forced profile (options, then KILN_PROFILE: `origin` names which) or
   the best match. */
static kiln_status choose_profile(const struct kiln_profile_set *set, const struct kiln_device_desc *desc,
                                  const char *forced, const char *origin, const struct kiln_profile **profile,
                                  char *reason, size_t reason_size)
{
    if (forced) {
        if (!*forced)
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s is empty (NULL matches a profile to the device)",
                              origin);
        *profile = kiln_profile_find(set, forced);
        if (!*profile) {
            /* A file of that name that failed to load says why. */
            char file[96];
            snprintf(file, sizeof file, "/%s.json: ", forced);
            const char *w = strlen(forced) < 64 ? strstr(kiln_profile_set_warnings(set), file) : NULL;
            const char *end = w ? strchr(w, '\n') : NULL;
            if (w)
                w += strlen(file);
            return kiln_error(KILN_ERROR_NOT_FOUND, "%s: profile \"%.64s%s\" (forced) %s%.*s", origin, forced,
                              strlen(forced) > 64 ? "..." : "", w ? "is invalid: " : "does not exist",
                              w ? (int)(end ? end - w : (long)strlen(w)) : 0, w ? w : "");
        }
        if (kiln_profile_is_abstract(*profile))
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s: profile \"%s\" is abstract (a parent only)", origin,
                              forced);
        snprintf(reason, reason_size, "forced by name \"%s\"", forced);
        return KILN_SUCCESS;
    }
    *profile = kiln_profile_match(set, desc, reason, reason_size);
    if (!*profile)
        return kiln_error(KILN_ERROR_INVALID_PROFILE, "no profile, not even a generic one, fits device %s", desc->name);
    return KILN_SUCCESS;
}

/* `text` in `buf`, cut with "..." if it does not fit. */
static void copy_cut(char *buf, size_t size, const char *text)
{
    if ((size_t)snprintf(buf, size, "%s", text) >= size)
        memcpy(buf + size - 4, "...", 4);
}

void kiln_device_info_fill(const struct kiln_device_desc *desc, size_t index, const char *backend,
                           const struct kiln_profile_set *set, const struct kiln_profile *profile, const char *reason,
                           kiln_device_info *info)
{
    memset(info, 0, sizeof *info);
    info->index = index;
    snprintf(info->backend, sizeof info->backend, "%s", backend);
    snprintf(info->platform, sizeof info->platform, "%s", desc->platform);
    snprintf(info->name, sizeof info->name, "%s", desc->name);
    snprintf(info->vendor, sizeof info->vendor, "%s", desc->vendor);
    snprintf(info->device_version, sizeof info->device_version, "%s", desc->device_version);
    snprintf(info->driver_version, sizeof info->driver_version, "%s", desc->driver_version);
    snprintf(info->arch, sizeof info->arch, "%s", desc->arch);
    info->type = desc->type;
    info->compute_units = desc->compute_units;
    info->clock_mhz = desc->clock_mhz;
    info->global_mem_bytes = desc->global_mem_bytes;
    info->local_mem_bytes = desc->local_mem_bytes;
    info->max_alloc_bytes = desc->max_alloc_bytes;
    info->cache_bytes = desc->cache_bytes;
    info->max_work_group_size = desc->max_work_group_size;
    kiln_pci_address(desc, info->pci_address, sizeof info->pci_address);
    info->fp16 = desc->fp16;
    info->fp64 = desc->fp64;
    snprintf(info->profile, sizeof info->profile, "%s", kiln_profile_name(profile));
    snprintf(info->profile_reason, sizeof info->profile_reason, "%s", reason);
    char origin[sizeof info->profile_origin + 8];
    kiln_profile_origin(profile, origin, sizeof origin);
    copy_cut(info->profile_origin, sizeof info->profile_origin, origin);
    kiln_profile_chain(set, profile, info->profile_parents, sizeof info->profile_parents);
    copy_cut(info->profile_provenance, sizeof info->profile_provenance, kiln_profile_provenance(profile));
    info->peak_gflops = kiln_profile_peak_gflops(profile, desc);
    info->peak_gbps = kiln_profile_peak_gbps(profile, desc);
    /* A profile kiln-tune wrote carries the peaks it measured on the device
       (device.peak_gflops, device.peak_gbps); any other profile's are the
       family's datasheet figures. */
    const int measured = kiln_profile_params(profile)->device.peak_gflops > 0 &&
                         strstr(kiln_profile_provenance(profile), "\"tool\":\"kiln-tune\"") != NULL;
    snprintf(info->peak_source, sizeof info->peak_source, "%s", measured ? "measured" : "profile");
}

kiln_status kiln_device_count(size_t *count)
{
    kiln_error_clear();
    KILN_CHECK_ARG(count);
    *count = 0;
    for (const struct kiln_backend *const *be = kiln_backends; *be; be++) {
        size_t n = 0;
        kiln_status st = (*be)->list_devices(NULL, 0, &n);
        if (st != KILN_SUCCESS)
            return st;
        *count += n;
    }
    return KILN_SUCCESS;
}

kiln_status kiln_backend_get_info(size_t index, kiln_backend_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(info);
    size_t n = 0;
    while (n < index && kiln_backends[n])
        n++;
    const struct kiln_backend *be = kiln_backends[n];
    if (!be)
        return kiln_error(KILN_ERROR_NOT_FOUND, "backend index %zu: kiln has %zu backends", index, n);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", be->name);
    if (be->status)
        be->status(info->status, sizeof info->status);
    return be->list_devices(NULL, 0, &info->devices);
}

/* Each listing's matched profile's fp32 peak, by which devices rank. */
static void add_peaks(struct kiln_listing *devices, size_t count, const struct kiln_profile_set *set)
{
    char reason[256];
    for (size_t i = 0; i < count; i++) {
        const struct kiln_profile *p = kiln_profile_match(set, &devices[i].desc, reason, sizeof reason);
        devices[i].peak_gflops = p ? kiln_profile_peak_gflops(p, &devices[i].desc) : 0.0;
    }
}

/* Listing i's index in its backend's list and the other listing of the same
   device ("[1] cuda:0 (PCI 0000:65:00.0)", "" if none). */
static void listing_facts(const struct kiln_listing *devices, size_t count, size_t i, size_t *backend_index, char *same,
                          size_t size)
{
    char how[192], name[48];
    *backend_index = devices[i].index;
    const size_t twin = kiln_listing_twin(devices, count, i, how, sizeof how);
    same[0] = '\0';
    if (twin != SIZE_MAX) {
        kiln_listing_name(&devices[twin], name, sizeof name);
        snprintf(same, size, "[%zu] %.40s (%.120s)", twin, name, how);
    }
}

static int contains_nocase(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (; *haystack; haystack++)
        if (strncasecmp(haystack, needle, n) == 0)
            return 1;
    return 0;
}

/* A selector's backend prefix: "cuda" or "opencl", alone or before ":N"
   (N: the index among that backend's devices, in *index; else SIZE_MAX).
   NULL if sel names no backend. */
static const struct kiln_backend *selector_backend(const char *sel, size_t *index, int *bad_index)
{
    *index = SIZE_MAX;
    *bad_index = 0;
    for (const struct kiln_backend *const *be = kiln_backends; *be; be++) {
        size_t n = strlen((*be)->name);
        if (strncasecmp(sel, (*be)->name, n) != 0 || (sel[n] != '\0' && sel[n] != ':'))
            continue;
        if (sel[n] == ':') {
            char *end;
            errno = 0;
            unsigned long long i = strtoull(sel + n + 1, &end, 10);
            *bad_index = !isdigit((unsigned char)sel[n + 1]) || *end != '\0' || errno == ERANGE;
            *index = *bad_index ? SIZE_MAX : (size_t)i;
        }
        return *be;
    }
    return NULL;
}

/* A selector other than an index: a backend's devices (all, or its N-th),
   a kind, or a substring of "platform device". */
struct selector {
    const char *text;
    const struct kiln_backend *backend; /* NULL: a kind or a name */
    size_t in_backend;                  /* SIZE_MAX: any of the backend's devices */
};

static int selector_accepts(const void *user, const struct kiln_listing *l)
{
    const struct selector *s = user;
    const struct kiln_device_desc *d = &l->desc;
    if (s->backend)
        return l->backend == s->backend && (s->in_backend == SIZE_MAX || l->index == s->in_backend);
    if (strcasecmp(s->text, "cpu") == 0)
        return d->type == KILN_DEVICE_CPU;
    if (strcasecmp(s->text, "gpu") == 0)
        return d->type == KILN_DEVICE_GPU;
    if (strcasecmp(s->text, "accelerator") == 0)
        return d->type == KILN_DEVICE_ACCELERATOR;
    char full[300];
    snprintf(full, sizeof full, "%s %s", d->platform, d->name);
    return contains_nocase(full, s->text);
}

/* Append the devices to the error detail, or each backend's hint when there
   are none. */
static void list_for_detail(const struct kiln_listing *devices, size_t count)
{
    char line[320];
    if (!count) {
        kiln_error_append("; there is no device (");
        for (const struct kiln_backend *const *be = kiln_backends; *be; be++) {
            snprintf(line, sizeof line, "%s%s: %s", be == kiln_backends ? "" : "; ", (*be)->name,
                     (*be)->no_device_hint);
            kiln_error_append(line);
            if ((*be)->status) { /* what it found, or why it found nothing */
                char status[1024];
                (*be)->status(status, sizeof status);
                if (status[0]) {
                    kiln_error_append(" [");
                    kiln_error_append(status);
                    kiln_error_append("]");
                }
            }
        }
        kiln_error_append(")");
        return;
    }
    kiln_error_append("; devices:");
    for (size_t i = 0; i < count; i++) {
        snprintf(line, sizeof line, " [%zu] %s / %s%s", i, devices[i].desc.platform, devices[i].desc.name,
                 i + 1 < count ? ";" : "");
        kiln_error_append(line);
    }
}

/* Pick the device index for a selector (NULL: the default device); `origin`
   names where the selector came from; `why` says how it was chosen. */
static kiln_status select_device(const struct kiln_listing *devices, size_t count, const char *sel, const char *origin,
                                 size_t *index, char *why, size_t why_size)
{
    if (sel && !*sel)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s is empty (NULL selects the best device)", origin);
    const char *more = sel && strlen(sel) > 64 ? "..." : "";
    if (sel && isdigit((unsigned char)sel[0])) {
        char *end;
        errno = 0;
        unsigned long long i = strtoull(sel, &end, 10);
        if (*end != '\0')
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                              "%s \"%.64s%s\" is neither an index, cpu, gpu, accelerator nor a name", origin, sel,
                              more);
        if (errno == ERANGE || i >= count) {
            kiln_error(KILN_ERROR_NOT_FOUND, "%s \"%.64s%s\": %s", origin, sel, more,
                       errno == ERANGE ? "the index is out of range" : "no device has that index");
            list_for_detail(devices, count);
            return KILN_ERROR_NOT_FOUND;
        }
        *index = (size_t)i;
        snprintf(why, why_size, "selected by %s \"%s\", an index", origin, sel);
        return KILN_SUCCESS;
    }
    struct selector s = {sel, NULL, SIZE_MAX};
    int bad_index = 0;
    if (sel)
        s.backend = selector_backend(sel, &s.in_backend, &bad_index);
    if (s.backend && bad_index)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "%s \"%.64s%s\": after \"%s:\" comes a device index", origin,
                          sel, more, s.backend->name);
    *index = sel ? kiln_device_best(devices, count, selector_accepts, &s)
                 : kiln_device_default(devices, count, why, why_size);
    if (*index == SIZE_MAX) {
        if (sel)
            kiln_error(KILN_ERROR_NOT_FOUND, "%s \"%.64s%s\": no device matches", origin, sel, more);
        else
            kiln_error(KILN_ERROR_NOT_FOUND, "no device to select");
        if (s.backend && s.backend->status) {
            char status[1024];
            s.backend->status(status, sizeof status);
            kiln_error_append(" (");
            kiln_error_append(s.backend->name);
            kiln_error_append(": ");
            kiln_error_append(status);
            kiln_error_append(")");
        }
        list_for_detail(devices, count);
        return KILN_ERROR_NOT_FOUND;
    }
    if (sel && s.backend && s.in_backend != SIZE_MAX)
        snprintf(why, why_size, "selected by %s \"%.64s%s\"", origin, sel, more);
    else if (sel)
        snprintf(why, why_size,
                 "selected by %s \"%.64s%s\": of the devices it takes, GPUs first, then a backend that compiles "
                 "OpenCL's vector syntax, then the higher profile peak",
                 origin, sel, more);
    return KILN_SUCCESS;
}

kiln_status kiln_device_get_info(size_t index, kiln_device_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(info);
    struct kiln_listing *devices;
    size_t count;
    struct kiln_profile_set *set = NULL;
    kiln_status st = list_devices(&devices, &count);
    if (st == KILN_SUCCESS && index >= count)
        st = kiln_error(KILN_ERROR_NOT_FOUND, "device index %zu: there are %zu devices", index, count);
    if (st == KILN_SUCCESS)
        st = load_profiles(&set);
    if (st == KILN_SUCCESS) {
        const struct kiln_profile *profile;
        char reason[256];
        const struct kiln_listing *d = &devices[index];
        st = choose_profile(set, &d->desc, env("KILN_PROFILE"), "KILN_PROFILE", &profile, reason, sizeof reason);
        if (st == KILN_SUCCESS) {
            kiln_device_info_fill(&d->desc, index, d->backend->name, set, profile, reason, info);
            listing_facts(devices, count, index, &info->backend_index, info->same_device, sizeof info->same_device);
            /* Why a context opened without a device option takes it, if
               it does; a KILN_DEVICE that selects nothing says so there. */
            add_peaks(devices, count, set);
            size_t chosen;
            char why[sizeof info->selection];
            if (select_device(devices, count, env("KILN_DEVICE"), "KILN_DEVICE", &chosen, why, sizeof why) ==
                    KILN_SUCCESS &&
                chosen == index)
                snprintf(info->selection, sizeof info->selection, "%s", why);
            kiln_error_clear();
        }
    }
    kiln_profile_set_release(set);
    free(devices);
    return st;
}

void kiln_context_options_init(kiln_context_options *options)
{
    if (options)
        memset(options, 0, sizeof *options);
}

/* The program cache's directory for `options` in dir (`size` bytes), or ""
   with why the disk cache is off in `reason`. A directory that cannot be
   used is warned about here, once per context, and costs nothing else: a
   cache is an optimisation. */
static void choose_cache_dir(const kiln_context_options *options, char *dir, size_t size, char *reason,
                             size_t reason_size)
{
    dir[0] = reason[0] = '\0';
    if (options->disable_disk_cache || (options->cache_dir && !*options->cache_dir)) {
        snprintf(reason, reason_size, "disabled by the options");
        return;
    }
    const char *origin = "the cache_dir option";
    kiln_status st = KILN_SUCCESS;
    if (options->cache_dir) {
        if (snprintf(dir, size, "%s", options->cache_dir) >= (int)size)
            st = KILN_ERROR_INVALID_ARGUMENT;
    } else {
        st = kiln_disk_cache_default_dir(dir, size, &origin);
    }
    /* The reason names the directory, shortened to leave room for why. */
    enum { SHOWN = 120 };
    const char *more = strlen(dir) > SHOWN ? "..." : "";
    if (st == KILN_ERROR_NOT_FOUND)
        snprintf(reason, reason_size, "no cache directory (set KILN_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    else if (st != KILN_SUCCESS)
        snprintf(reason, reason_size, "%s '%.*s...': path too long (kiln takes up to %zu bytes)", origin, SHOWN, dir,
                 size - 1);
    else if (kiln_disk_cache_check(dir) != KILN_SUCCESS)
        snprintf(reason, reason_size, "%s '%.*s%s' %s", origin, SHOWN, dir, more, kiln_last_error_detail());
    else
        return;
    kiln_error_clear();
    kiln_log(KILN_LOG_WARN, "program cache: memory only: %s", reason);
    dir[0] = '\0';
}

kiln_status kiln_context_init(kiln_context *ctx, const kiln_context_options *options)
{
    kiln_context_options defaults;
    if (!options) {
        kiln_context_options_init(&defaults);
        options = &defaults;
    }
    kiln_status st = ctx->backend->describe(ctx->dev, &ctx->desc);
    if (st == KILN_SUCCESS)
        st = load_profiles(&ctx->profiles);
    if (st == KILN_SUCCESS)
        st = kiln_source_dir_check();
    if (st == KILN_SUCCESS)
        st = choose_profile(ctx->profiles, &ctx->desc, options->profile ? options->profile : env("KILN_PROFILE"),
                            options->profile ? "the profile option" : "KILN_PROFILE", &ctx->profile,
                            ctx->profile_reason, sizeof ctx->profile_reason);
    if (st == KILN_SUCCESS && options->profile_overlay) {
        st = kiln_profile_derive(ctx->profile, options->profile_overlay, &ctx->overlay);
        if (st == KILN_SUCCESS)
            ctx->profile = ctx->overlay;
    }
    if (st != KILN_SUCCESS)
        return st;
    ctx->vector_kernels = ctx->backend->vector_kernels && !kiln_env_flag("KILN_CUDA_ROUTES");
    char why[512];
    if (kiln_profile_fits(ctx->profile, &ctx->desc, why) != 0) {
        if (ctx->overlay)
            return kiln_error(KILN_ERROR_INVALID_PROFILE, "profile overlay: %s", why);
        kiln_log(KILN_LOG_WARN, "profile %s does not fit device %s: %s (plans that need it answer UNSUPPORTED)",
                 kiln_profile_name(ctx->profile), ctx->desc.name, why);
    }
    kiln_log(KILN_LOG_INFO, "device %s: profile %s (%s)", ctx->desc.name, kiln_profile_name(ctx->profile),
             ctx->profile_reason);

    char dir[sizeof ctx->cache.dir], reason[sizeof ctx->cache.disk_reason];
    choose_cache_dir(options, dir, sizeof dir, reason, sizeof reason);
    st = kiln_program_cache_init(&ctx->cache, dir, reason);
    ctx->cache_ready = st == KILN_SUCCESS;
    /* Where the driver keeps what it compiles itself, taking a binary for
       kiln's directory would compile the program again (docs/pocl.md); the
       directory still keeps convolution find results. */
    if (ctx->cache.programs_on_disk && !kiln_env_flag("KILN_CACHE_PROGRAMS") && ctx->backend->driver_keeps_programs &&
        ctx->backend->driver_keeps_programs(ctx->dev)) {
        ctx->cache.programs_on_disk = 0;
        kiln_log(KILN_LOG_INFO,
                 "program cache: binaries left to the driver's own cache (KILN_CACHE_PROGRAMS=1 "
                 "keeps them in %s too)",
                 ctx->cache.dir);
    }
    return st;
}

kiln_status kiln_context_wrap_native(const struct kiln_backend *backend, size_t device_index, const void *native,
                                     const kiln_context_options *options, kiln_context **out)
{
    kiln_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a context");
    ctx->backend = backend;
    ctx->device_index = device_index;
    snprintf(ctx->selection, sizeof ctx->selection, "the caller's own %s objects", backend->name);
    /* Where the enumeration has it, its place there. */
    struct kiln_listing *devices = NULL;
    size_t count = 0;
    ctx->backend_index = SIZE_MAX;
    if (device_index != SIZE_MAX && list_devices(&devices, &count) == KILN_SUCCESS && device_index < count)
        listing_facts(devices, count, device_index, &ctx->backend_index, ctx->same_device, sizeof ctx->same_device);
    free(devices);
    kiln_error_clear();
    kiln_status st = backend->wrap(native, &ctx->dev);
    if (st == KILN_SUCCESS)
        st = kiln_context_init(ctx, options);
    if (st != KILN_SUCCESS) {
        kiln_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return KILN_SUCCESS;
}

kiln_status kiln_context_create(const kiln_context_options *options, kiln_context **out)
{
    kiln_error_clear();
    KILN_CHECK_ARG(out);
    /* Switches read later are checked now, so a bad value is reported
       when a context opens even if nothing reads it for a while. */
    (void)kiln_log_level();
    (void)kiln_env_flag("KILN_FIND");
    (void)kiln_env_flag("KILN_CACHE_PROGRAMS");
    const char *sel = options && options->device ? options->device : env("KILN_DEVICE");
    const char *origin = options && options->device ? "the device option" : "KILN_DEVICE";
    struct kiln_listing *devices = NULL;
    struct kiln_profile_set *set = NULL;
    size_t count = 0, index = 0;
    kiln_context *ctx = NULL;
    kiln_status st = list_devices(&devices, &count);
    if (st == KILN_SUCCESS)
        st = load_profiles(&set);
    if (st == KILN_SUCCESS) {
        add_peaks(devices, count, set);
        ctx = calloc(1, sizeof *ctx);
        st = ctx ? KILN_SUCCESS : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating a context");
    }
    if (st == KILN_SUCCESS)
        st = select_device(devices, count, sel, origin, &index, ctx->selection, sizeof ctx->selection);
    kiln_profile_set_release(set);
    if (st == KILN_SUCCESS) {
        ctx->backend = devices[index].backend;
        ctx->device_index = index;
        listing_facts(devices, count, index, &ctx->backend_index, ctx->same_device, sizeof ctx->same_device);
    }
    free(devices);
    if (st != KILN_SUCCESS) {
        free(ctx);
        return st;
    }
    st = ctx->backend->open(ctx->backend_index, &ctx->dev);
    if (st != KILN_SUCCESS) {
        free(ctx);
        return st;
    }
    st = kiln_context_init(ctx, options);
    if (st != KILN_SUCCESS) {
        kiln_context_destroy(ctx); /* sets no error detail: the init failure's stays */
        return st;
    }
    *out = ctx;
    return KILN_SUCCESS;
}

void kiln_context_destroy(kiln_context *ctx)
{
    if (!ctx)
        return;
    if (ctx->dev) {
        ctx->backend->finish(ctx->dev);
        if (ctx->cache_ready)
            kiln_program_cache_release(&ctx->cache, ctx->backend);
        ctx->backend->close(ctx->dev);
    }
    while (ctx->memo) {
        struct kiln_memo *next = ctx->memo->next;
        free(ctx->memo->key);
        free(ctx->memo->value);
        free(ctx->memo);
        ctx->memo = next;
    }
    kiln_profile_free(ctx->overlay);
    kiln_profile_set_release(ctx->profiles);
    free(ctx);
}

kiln_status kiln_context_get_device_info(const kiln_context *ctx, kiln_device_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(info);
    kiln_device_info_fill(&ctx->desc, ctx->device_index, ctx->backend->name, ctx->profiles, ctx->profile,
                          ctx->profile_reason, info);
    info->backend_index = ctx->backend_index;
    snprintf(info->same_device, sizeof info->same_device, "%s", ctx->same_device);
    snprintf(info->selection, sizeof info->selection, "%s", ctx->selection);
    return KILN_SUCCESS;
}

kiln_status kiln_context_get_profile_json(const kiln_context *ctx, char *buf, size_t size, size_t *length)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(length);
    char *text = NULL;
    kiln_status st = kiln_profile_to_json(ctx->profile, &text);
    if (st != KILN_SUCCESS)
        return st;
    *length = strlen(text);
    if (buf && size > *length)
        memcpy(buf, text, *length + 1);
    else if (buf || size)
        st = kiln_error(KILN_ERROR_OUT_OF_BOUNDS, "%s: the profile's %zu bytes of JSON need a buffer of %zu", __func__,
                        *length, *length + 1);
    free(text);
    return st;
}

kiln_status kiln_context_finish(kiln_context *ctx)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    return ctx->backend->finish(ctx->dev);
}

kiln_status kiln_context_get_cache_info(const kiln_context *ctx, kiln_cache_info *info)
{
    kiln_error_clear();
    KILN_CHECK_ARG(ctx);
    KILN_CHECK_ARG(info);
    memset(info, 0, sizeof *info);
    struct kiln_program_cache *cache = (struct kiln_program_cache *)&ctx->cache;
    pthread_mutex_lock(&cache->lock);
    snprintf(info->dir, sizeof info->dir, "%s", cache->dir);
    info->memory_hits = cache->memory_hits;
    info->disk_hits = cache->disk_hits;
    info->builds = cache->builds;
    info->discarded = cache->discarded;
    snprintf(info->disk_reason, sizeof info->disk_reason, "%s", cache->disk_reason);
    pthread_mutex_unlock(&cache->lock);
    info->disk_enabled = info->dir[0] != '\0';
    info->disk_failures = atomic_load(&cache->disk_failures);
    if (info->disk_enabled &&
        kiln_disk_cache_usage(info->dir, &info->disk_entries, &info->disk_bytes) != KILN_SUCCESS) {
        snprintf(info->disk_reason, sizeof info->disk_reason, "%s", kiln_last_error_detail());
        info->disk_entries = info->disk_bytes = 0;
        kiln_error_clear();
    }
    return KILN_SUCCESS;
}
