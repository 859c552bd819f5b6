/* One resolved profile: inheritance from its parent, the parameter set a
   problem takes, device limits, its compiler options, peaks, and overlays. */
#include "profiles/profile_impl.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/diag.h"
#include "util/options.h"

static size_t field_size(const struct kiln_param_field *f)
{
    return f->type == KILN_PARAM_NUMBER ? sizeof(double) : sizeof(int);
}

/* Copy the fields of group g marked in `mask` from `src` to `dst`. */
static void copy_fields(int g, uint32_t mask, void *dst, const void *src)
{
    const struct kiln_param_group *grp = &kiln_param_groups[g];
    for (size_t f = 0; f < grp->count; f++)
        if (mask & (1u << f))
            memcpy((char *)dst + grp->fields[f].offset, (const char *)src + grp->fields[f].offset,
                   field_size(&grp->fields[f]));
}

static int copy_classes(struct kiln_param_classes *dst, const struct kiln_param_classes *src, size_t size)
{
    for (size_t i = 0; i < dst->count; i++) {
        free(dst->items[i].raw);
        free(dst->items[i].values);
    }
    free(dst->items);
    memset(dst, 0, sizeof *dst);
    if (!src->count)
        return 0;
    if (!(dst->items = calloc(src->count, sizeof *dst->items)))
        return -1;
    for (; dst->count < src->count; dst->count++) {
        struct kiln_param_class *c = &dst->items[dst->count];
        *c = src->items[dst->count];
        c->raw = malloc(size);
        c->values = malloc(size);
        if (!c->raw || !c->values) {
            dst->count++;
            return -1;
        }
        memcpy(c->raw, src->items[dst->count].raw, size);
    }
    return 0;
}

int kiln_profile_inherit(struct kiln_profile *p, const struct kiln_profile *parent, char *why)
{
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        const struct kiln_param_group *grp = &kiln_param_groups[g];
        void *values = (char *)&p->params + grp->offset;
        const uint32_t all = grp->count >= 32 ? ~0u : (1u << grp->count) - 1;
        if (parent)
            copy_fields(g, all & ~p->own[g], values, (const char *)&parent->params + grp->offset);
        copy_fields(g, p->own[g], values, (const char *)&p->raw + grp->offset);
        if (!parent && p->own[g] != all) {
            int f = 0;
            while (p->own[g] & (1u << f))
                f++;
            snprintf(why, KILN_PROFILE_WHY_SIZE, "'%s.%s' is not set by the profile or its parents", grp->name,
                     grp->fields[f].key);
            return -1;
        }
        if (parent && !p->classes[g].own && copy_classes(&p->classes[g], &parent->classes[g], grp->size) != 0)
            return -2;
        if (grp->check && grp->check(values, NULL, why, KILN_PROFILE_WHY_SIZE) != 0)
            return -1;
        for (size_t i = 0; i < p->classes[g].count; i++) {
            struct kiln_param_class *c = &p->classes[g].items[i];
            memcpy(c->values, values, grp->size);
            copy_fields(g, c->own, c->values, c->raw);
            if (grp->check && grp->check(c->values, NULL, why, KILN_PROFILE_WHY_SIZE) != 0) {
                size_t n = strlen(why);
                snprintf(why + n, KILN_PROFILE_WHY_SIZE - n, " (class '%s')", c->name);
                return -1;
            }
        }
    }
    return 0;
}

const char *kiln_profile_name(const struct kiln_profile *p) { return p ? p->name : ""; }
const char *kiln_profile_parent_name(const struct kiln_profile *p) { return p ? p->parent : ""; }
const char *kiln_profile_provenance(const struct kiln_profile *p) { return p ? p->provenance : "{}"; }
size_t kiln_profile_class_count(const struct kiln_profile *p, enum kiln_group_id g) { return p->classes[g].count; }
int kiln_profile_is_abstract(const struct kiln_profile *p) { return p ? !p->has_match : 1; }

void kiln_profile_origin(const struct kiln_profile *p, char *buf, size_t size)
{
    if (!p || p->origin == KILN_PROFILE_BUILTIN)
        snprintf(buf, size, "built-in");
    else if (p->origin == KILN_PROFILE_OVERLAY)
        snprintf(buf, size, "profile overlay");
    else
        snprintf(buf, size, "%s (%s)", p->path,
                 p->origin == KILN_PROFILE_USER ? "user profile directory" : "KILN_PROFILE_DIR");
}

void kiln_profile_chain(const struct kiln_profile_set *set, const struct kiln_profile *p, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t steps = 0; p && p->parent[0] && steps <= kiln_profile_set_count(set) && n < size; steps++) {
        n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " <- " : "", p->parent);
        p = kiln_profile_find(set, p->parent);
    }
}
const struct kiln_params *kiln_profile_params(const struct kiln_profile *p) { return &p->params; }

static int class_holds(const struct kiln_param_class *c, const struct kiln_dims *dims)
{
    for (int d = 0; d < KILN_DIM_COUNT; d++)
        if ((c->bounded & (1u << d)) && dims->v[d] && (dims->v[d] < c->lo[d] || dims->v[d] > c->hi[d]))
            return 0;
    return 1;
}

const void *kiln_profile_choose(const struct kiln_profile *p, enum kiln_group_id group, const struct kiln_dims *dims,
                                const struct kiln_device_desc *dev, const char **set_name)
{
    const struct kiln_param_group *grp = &kiln_param_groups[group];
    const struct kiln_param_classes *cs = &p->classes[group];
    char why[KILN_PROFILE_WHY_SIZE];
    for (size_t i = 0; dims && i < cs->count; i++) {
        const struct kiln_param_class *c = &cs->items[i];
        if (class_holds(c, dims) && (!dev || !grp->check || grp->check(c->values, dev, why, sizeof why) == 0)) {
            if (set_name)
                *set_name = c->name;
            return c->values;
        }
    }
    if (set_name)
        *set_name = "default";
    return (const char *)&p->params + grp->offset;
}

kiln_status kiln_profile_plan_set(const struct kiln_profile *p, enum kiln_group_id group, const struct kiln_dims *dims,
                                  const struct kiln_device_desc *dev, const void **values, char *label)
{
    const struct kiln_param_group *grp = &kiln_param_groups[group];
    const char *set;
    *values = kiln_profile_choose(p, group, dims, dev, &set);
    snprintf(label, 48, "%s:%s", grp->name, set);
    char why[KILN_PROFILE_WHY_SIZE];
    if (grp->check && grp->check(*values, dev, why, sizeof why) != 0)
        return kiln_error(KILN_ERROR_UNSUPPORTED, "profile %s: %s", p->name, why);
    return KILN_SUCCESS;
}

int kiln_profile_fits(const struct kiln_profile *p, const struct kiln_device_desc *dev, char *why)
{
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        const struct kiln_param_group *grp = &kiln_param_groups[g];
        if (!grp->check)
            continue;
        if (grp->check((const char *)&p->params + grp->offset, dev, why, KILN_PROFILE_WHY_SIZE) != 0)
            return -1;
        for (size_t i = 0; i < p->classes[g].count; i++)
            if (grp->check(p->classes[g].items[i].values, dev, why, KILN_PROFILE_WHY_SIZE) != 0) {
                size_t n = strlen(why);
                snprintf(why + n, KILN_PROFILE_WHY_SIZE - n, " (class '%s')", p->classes[g].items[i].name);
                return -1;
            }
    }
    return 0;
}

kiln_status kiln_profile_get(const struct kiln_profile *p, const char *group, const char *key, double *value)
{
    if (!p || !group || !key || !value)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "profile parameter lookup with a NULL argument");
    int g = kiln_param_group_find(group);
    int f = g >= 0 ? kiln_param_field_find(g, key) : -1;
    if (f < 0)
        return kiln_error(KILN_ERROR_NOT_FOUND, "no profile parameter '%s.%s'", group, key);
    *value = kiln_param_get(g, f, (const char *)&p->params + kiln_param_groups[g].offset);
    return KILN_SUCCESS;
}

double kiln_profile_peak_gflops(const struct kiln_profile *p, const struct kiln_device_desc *desc)
{
    if (!p || !desc)
        return 0;
    const struct kiln_param_device *d = &p->params.device;
    if (d->peak_gflops > 0)
        return d->peak_gflops;
    double mhz = d->clock_mhz > 0 ? (double)d->clock_mhz : (double)desc->clock_mhz;
    return (double)d->flops_per_cu_cycle * desc->compute_units * mhz / 1000.0;
}

double kiln_profile_peak_gbps(const struct kiln_profile *p, const struct kiln_device_desc *desc)
{
    (void)desc; /* the family's typical bandwidth; desc is for a future per-device refinement */
    return p ? p->params.device.peak_gbps : 0;
}

void kiln_profile_defines(struct kiln_options *o, enum kiln_group_id group, const void *values)
{
    const struct kiln_param_group *grp = &kiln_param_groups[group];
    for (size_t f = 0; f < grp->count; f++) {
        if (!grp->fields[f].define)
            continue;
        char key[64];
        size_t n = 0;
        for (const char *c = grp->fields[f].key; *c && n + 1 < sizeof key; c++)
            key[n++] = (char)toupper((unsigned char)*c);
        key[n] = '\0';
        kiln_options_add(o, "-D%s%s=%.0f", grp->prefix, key, kiln_param_get((int)group, (int)f, values));
    }
}

kiln_status kiln_profile_derive(const struct kiln_profile *parent, const char *overlay, struct kiln_profile **out)
{
    if (!parent || !overlay || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "profile overlay: NULL argument");
    if (!*overlay)
        return kiln_error(KILN_ERROR_INVALID_PROFILE, "profile overlay: empty (NULL means none)");
    if (strnlen(overlay, KILN_PROFILE_MAX_BYTES + 1) > KILN_PROFILE_MAX_BYTES)
        return kiln_error(KILN_ERROR_INVALID_PROFILE, "profile overlay: longer than the %zu bytes an overlay may hold",
                          KILN_PROFILE_MAX_BYTES);
    char why[KILN_PROFILE_WHY_SIZE] = "";
    struct kiln_profile *p = NULL;
    kiln_status st = kiln_profile_parse_overlay(overlay, &p, why);
    if (st == KILN_SUCCESS) {
        snprintf(p->name, sizeof p->name, "%.*s+overlay", KILN_PROFILE_NAME_MAX - 9, parent->name);
        snprintf(p->parent, sizeof p->parent, "%s", parent->name);
        p->has_match = parent->has_match;
        p->origin = KILN_PROFILE_OVERLAY;
        int r = kiln_profile_inherit(p, parent, why);
        st = r == 0 ? KILN_SUCCESS : r == -1 ? KILN_ERROR_INVALID_PROFILE : KILN_ERROR_OUT_OF_MEMORY;
    }
    if (st != KILN_SUCCESS) {
        kiln_profile_free(p);
        return st == KILN_ERROR_INVALID_PROFILE ? kiln_error(st, "profile overlay: %s", why)
                                                : kiln_error(st, "profile overlay: out of memory");
    }
    *out = p;
    return KILN_SUCCESS;
}
