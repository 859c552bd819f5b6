/* Profiles as JSON: a resolved profile whole (kiln-info --profile), and a
   child profile holding chosen groups, with its provenance, as a file. */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/diag.h"
#include "profiles/profile_impl.h"

/* Whether group g has the same classes in a and b. */
static int same_classes(const struct kiln_profile *a, const struct kiln_profile *b, int g)
{
    const struct kiln_param_classes *x = &a->classes[g], *y = &b->classes[g];
    if (x->count != y->count)
        return 0;
    for (size_t i = 0; i < x->count; i++) {
        const struct kiln_param_class *c = &x->items[i], *d = &y->items[i];
        if (strcmp(c->name, d->name) != 0 || c->bounded != d->bounded || c->own != d->own ||
            memcmp(c->lo, d->lo, sizeof c->lo) != 0 || memcmp(c->hi, d->hi, sizeof c->hi) != 0 ||
            memcmp(c->values, d->values, kiln_param_groups[g].size) != 0)
            return 0;
    }
    return 1;
}

/* Group g of p: the fields of its default set, then its classes; with
   `base`, only the fields that differ from base's, and the classes only if
   they differ (NULL when nothing does). */
static cJSON *group_json(const struct kiln_profile *p, int g, const struct kiln_profile *base)
{
    const struct kiln_param_group *grp = &kiln_param_groups[g];
    const char *mine = (const char *)&p->params + grp->offset;
    const char *theirs = base ? (const char *)&base->params + grp->offset : NULL;
    cJSON *obj = cJSON_CreateObject();
    for (size_t f = 0; obj && f < grp->count; f++)
        if (!theirs || kiln_param_get(g, (int)f, mine) != kiln_param_get(g, (int)f, theirs))
            kiln_param_write(g, (int)f, mine, obj);
    const struct kiln_param_classes *cs = &p->classes[g];
    const int classes = base ? !same_classes(p, base, g) : cs->count > 0;
    if (obj && base && !classes && !obj->child) {
        cJSON_Delete(obj);
        return NULL;
    }
    cJSON *list = classes ? cJSON_AddArrayToObject(obj, "classes") : NULL;
    for (size_t i = 0; list && i < cs->count; i++) {
        const struct kiln_param_class *c = &cs->items[i];
        cJSON *item = cJSON_CreateObject(), *when = cJSON_CreateObject(), *params = cJSON_CreateObject();
        cJSON_AddItemToArray(list, item);
        cJSON_AddStringToObject(item, "name", c->name);
        cJSON_AddItemToObject(item, "when", when);
        cJSON_AddItemToObject(item, "params", params);
        for (int d = 0; d < KILN_DIM_COUNT; d++) {
            if (!(c->bounded & (1u << d)))
                continue;
            cJSON *range = cJSON_AddArrayToObject(when, kiln_dim_names[d]);
            cJSON_AddItemToArray(range, cJSON_CreateNumber((double)c->lo[d]));
            cJSON_AddItemToArray(range,
                                 c->hi[d] == LONG_MAX ? cJSON_CreateNull() : cJSON_CreateNumber((double)c->hi[d]));
        }
        for (size_t f = 0; f < grp->count; f++)
            if (c->own & (1u << f))
                kiln_param_write(g, (int)f, c->values, params);
    }
    return obj;
}

static void add_list(cJSON *match, const char *key, const struct kiln_str_list *l)
{
    if (!l->count)
        return;
    cJSON *a = cJSON_AddArrayToObject(match, key);
    for (size_t i = 0; a && i < l->count; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(l->items[i]));
}

/* name, parent, provenance, match, then the groups of `groups` (with
   `base`, what differs from it). */
static cJSON *profile_json(const char *name, const char *parent, const char *provenance,
                           const struct kiln_profile *match_from, const struct kiln_profile *values, unsigned groups,
                           const struct kiln_profile *base)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "name", name);
    if (parent && *parent)
        cJSON_AddStringToObject(root, "parent", parent);
    cJSON *prov = cJSON_Parse(provenance);
    if (prov)
        cJSON_AddItemToObject(root, "provenance", prov);
    if (match_from && match_from->has_match) {
        cJSON *match = cJSON_AddObjectToObject(root, "match");
        if (match_from->match_type)
            cJSON_AddStringToObject(match, "type", kiln_device_type_string(match_from->match_type));
        add_list(match, "vendor", &match_from->match_vendor);
        add_list(match, "name", &match_from->match_name);
        add_list(match, "arch", &match_from->match_arch);
        add_list(match, "driver", &match_from->match_driver);
    }
    cJSON *kernels = NULL;
    for (int g = 0; g < KILN_GROUP_COUNT; g++) {
        if (!(groups & (1u << g)))
            continue;
        cJSON *obj = group_json(values, g, base);
        if (obj && base && !obj->child) { /* nothing differs from base */
            cJSON_Delete(obj);
            obj = NULL;
        }
        if (!obj)
            continue;
        if (g == KILN_GROUP_device || g == KILN_GROUP_select) {
            cJSON_AddItemToObject(root, kiln_param_groups[g].name, obj);
        } else {
            if (!kernels)
                kernels = cJSON_AddObjectToObject(root, "kernels");
            cJSON_AddItemToObject(kernels, kiln_param_groups[g].name, obj);
        }
    }
    return root;
}

/* `text` as a glob that matches it alone: * ? [ and backslash escaped. */
static char *glob_literal(const char *text)
{
    char *out = malloc(2 * strlen(text) + 1), *o = out;
    for (; out && *text; text++) {
        if (strchr("*?[\\", *text))
            *o++ = '\\';
        *o++ = *text;
    }
    if (o)
        *o = '\0';
    return out;
}

/* "=text": a vendor or name item that the field must equal. */
static char *equal_to(const char *text)
{
    size_t n = strlen(text) + 2;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "=%s", text);
    return out;
}

/* l becomes the one item `item` (taken), if `text` is not empty; -1 when out
   of memory. */
static int only(struct kiln_str_list *l, const char *text, char *(*item)(const char *))
{
    if (!*text)
        return 0;
    char *s = item(text);
    l->items = s ? malloc(sizeof *l->items) : NULL;
    if (!l->items) {
        free(s);
        return -1;
    }
    l->items[l->count++] = s;
    return 0;
}

kiln_status kiln_profile_exact_match(const struct kiln_device_desc *desc, struct kiln_profile **out)
{
    if (!desc || !out)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_profile_exact_match: NULL argument");
    struct kiln_profile *p = *out = calloc(1, sizeof *p);
    if (!p)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "match rules for %s", desc->name);
    p->has_match = 1;
    if (desc->type >= KILN_DEVICE_CPU && desc->type <= KILN_DEVICE_ACCELERATOR)
        p->match_type = desc->type;
    const char *name = desc->board_name[0] ? desc->board_name : desc->name;
    if (only(&p->match_vendor, desc->vendor, equal_to) == 0 && only(&p->match_name, name, equal_to) == 0 &&
        only(&p->match_arch, desc->arch, glob_literal) == 0 &&
        only(&p->match_driver, desc->driver_version, glob_literal) == 0)
        return KILN_SUCCESS;
    kiln_profile_free(p);
    *out = NULL;
    return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "match rules for %s", desc->name);
}

kiln_status kiln_profile_to_json(const struct kiln_profile *p, char **text)
{
    cJSON *root = profile_json(p->name, p->parent, p->provenance, p, p, ~0u, NULL);
    *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return *text ? KILN_SUCCESS : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "printing profile %s", p->name);
}

static cJSON *provenance_json(const struct kiln_profile_provenance *pv)
{
    cJSON *obj = cJSON_CreateObject();
    const char *keys[] = {"tool", "version", "device", "driver", "date", "basis"};
    const char *vals[] = {pv->tool, pv->version, pv->device, pv->driver, pv->date, pv->basis};
    for (int i = 0; i < 6; i++)
        if (vals[i])
            cJSON_AddStringToObject(obj, keys[i], vals[i]);
    cJSON *list = pv->measurement_count ? cJSON_AddArrayToObject(obj, "measurements") : NULL;
    for (size_t i = 0; list && i < pv->measurement_count; i++) {
        const struct kiln_profile_measurement *m = &pv->measurements[i];
        cJSON *item = cJSON_CreateObject();
        cJSON_AddItemToArray(list, item);
        cJSON_AddStringToObject(item, "what", m->what);
        cJSON_AddNumberToObject(item, "value", m->value);
        if (m->baseline != 0)
            cJSON_AddNumberToObject(item, "baseline", m->baseline);
    }
    return obj;
}

kiln_status kiln_profile_write(const char *path, const char *name, const char *parent,
                               const struct kiln_profile *match_from, const struct kiln_profile *values,
                               unsigned groups, const struct kiln_profile *base,
                               const struct kiln_profile_provenance *provenance)
{
    if (!path || !name || !*name || strlen(name) >= KILN_PROFILE_NAME_MAX || !values || !provenance)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_profile_write: NULL argument or bad name");
    cJSON *prov = provenance_json(provenance);
    char *prov_text = prov ? cJSON_PrintUnformatted(prov) : NULL;
    cJSON_Delete(prov);
    cJSON *root = prov_text ? profile_json(name, parent, prov_text, match_from, values, groups, base) : NULL;
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    free(prov_text);
    if (!text)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "writing profile %s", name);

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    /* A fresh file of our own: a FIFO or symbolic link left at the
       temporary name is removed, never opened (it could block or write
       elsewhere). */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = f && fclose(f) == 0 && ok;
    free(text);
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return kiln_error(KILN_ERROR_IO, "cannot write profile %s", path);
    }
    return KILN_SUCCESS;
}
