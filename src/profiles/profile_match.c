/* Matching a device to the most specific profile whose rules all hold.
   Rule weights: arch 16, name 8, vendor 4, type 2, driver 1, each above all
   the lighter ones together. The driver ranks last: it refines a match
   between profiles for the same device and never takes a device from one
   that names its arch or name better. Ties go to the deeper profile (the
   more specialised child), then to the first name. */
#include "profiles/profile_impl.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/diag.h"

#define ARCH_SCORE 16
#define NAME_SCORE 8
#define VENDOR_SCORE 4
#define TYPE_SCORE 2
#define DRIVER_SCORE 1

static void lower(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    for (; src[n] && n + 1 < size; n++)
        dst[n] = (char)tolower((unsigned char)src[n]);
    dst[n] = '\0';
}

/* An item "=text" equals `text`; any other occurs in it. */
static int contains(const char *needle, const char *text)
{
    if (needle[0] == '=')
        return strcasecmp(needle + 1, text) == 0;
    char t[256], n[256];
    lower(t, sizeof t, text);
    lower(n, sizeof n, needle);
    return strstr(t, n) != NULL;
}

static int glob_match(const char *pattern, const char *text)
{
    char t[256], p[256];
    lower(t, sizeof t, text);
    lower(p, sizeof p, pattern);
    return fnmatch(p, t, 0) == 0;
}

/* The first item of `list` for which test(item, text) holds, or NULL. */
static const char *first_hit(const struct kiln_str_list *list, int (*test)(const char *, const char *),
                             const char *text)
{
    for (size_t i = 0; i < list->count; i++)
        if (test(list->items[i], text))
            return list->items[i];
    return NULL;
}

/* Append one clause to the explanation, comma-separated. */
static void append(char *buf, size_t size, const char *fmt, ...) KILN_PRINTF(3, 4);
static void append(char *buf, size_t size, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used && used + 2 < size)
        used += (size_t)snprintf(buf + used, size - used, ", ");
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

/* "name 'x' contains 'y'", or "name is 'x'" for an item "=x". */
static void explain_contains(char *why, size_t size, const char *field, const char *text, const char *hit)
{
    if (hit[0] == '=')
        append(why, size, "%s is '%s'", field, text);
    else
        append(why, size, "%s '%s' contains '%s'", field, text, hit);
}

/* The profile's score for `desc`, or -1 if a rule fails; `why` explains. */
static int score(const struct kiln_profile *p, const struct kiln_device_desc *desc, char *why, size_t size)
{
    int total = 0;
    const char *hit;
    why[0] = '\0';
    if (p->match_arch.count) {
        if (!(hit = first_hit(&p->match_arch, glob_match, desc->arch)))
            return -1;
        append(why, size, "arch '%s' matches '%s'", desc->arch, hit);
        total += ARCH_SCORE;
    }
    if (p->match_name.count) {
        const char *field = desc->name;
        if (!(hit = first_hit(&p->match_name, contains, field)))
            hit = first_hit(&p->match_name, contains, field = desc->board_name);
        if (!hit)
            return -1;
        explain_contains(why, size, field == desc->name ? "name" : "board name", field, hit);
        total += NAME_SCORE;
    }
    if (p->match_vendor.count) {
        if (!(hit = first_hit(&p->match_vendor, contains, desc->vendor)))
            return -1;
        explain_contains(why, size, "vendor", desc->vendor, hit);
        total += VENDOR_SCORE;
    }
    if (p->match_type) {
        if (p->match_type != desc->type)
            return -1;
        append(why, size, "type %s", kiln_device_type_string(desc->type));
        total += TYPE_SCORE;
    }
    if (p->match_driver.count) {
        if (!(hit = first_hit(&p->match_driver, glob_match, desc->driver_version)))
            return -1;
        append(why, size, "driver '%s' matches '%s'", desc->driver_version, hit);
        total += DRIVER_SCORE;
    }
    return total;
}

const struct kiln_profile *kiln_profile_match(const struct kiln_profile_set *set, const struct kiln_device_desc *desc,
                                              char *reason, size_t reason_size)
{
    char why[256], best_why[256] = "";
    const struct kiln_profile *best = NULL;
    int best_score = -1;
    for (size_t i = 0; set && desc && i < set->count; i++) {
        const struct kiln_profile *p = set->items[i];
        int s = p->has_match ? score(p, desc, why, sizeof why) : -1;
        if (s < 0 || s < best_score)
            continue;
        if (best && s == best_score &&
            (p->depth < best->depth || (p->depth == best->depth && strcmp(p->name, best->name) > 0)))
            continue;
        best = p;
        best_score = s;
        memcpy(best_why, why, sizeof why);
    }
    if (!best && set && desc) {
        const char *root = desc->type == KILN_DEVICE_CPU ? "generic-cpu" : "generic-gpu";
        best = kiln_profile_find(set, root);
        snprintf(best_why, sizeof best_why, "no profile matches; generic fallback for type %s%s",
                 kiln_device_type_string(desc->type), best ? "" : ", which is missing");
    } else if (!best) {
        snprintf(best_why, sizeof best_why, "no device description or profile set");
    }
    if (reason && reason_size)
        snprintf(reason, reason_size, "%s", best_why);
    return best;
}
