/* Parsing and validating one profile file on its own; inheritance and the
   cross-field checks come later (profile.c). */
#include "profiles/profile_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/diag.h"

const char *kiln_device_type_string(kiln_device_type type)
{
    switch (type) {
    case KILN_DEVICE_CPU:
        return "cpu";
    case KILN_DEVICE_GPU:
        return "gpu";
    case KILN_DEVICE_ACCELERATOR:
        return "accelerator";
    case KILN_DEVICE_OTHER:
        break;
    }
    return "other";
}

static void str_list_free(struct kiln_str_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
}

static void classes_free(struct kiln_param_classes *c)
{
    for (size_t i = 0; i < c->count; i++) {
        free(c->items[i].raw);
        free(c->items[i].values);
    }
    free(c->items);
    memset(c, 0, sizeof *c);
}

void kiln_profile_free(struct kiln_profile *p)
{
    if (!p)
        return;
    kiln_profile_free(p->replaced);
    str_list_free(&p->match_vendor);
    str_list_free(&p->match_name);
    str_list_free(&p->match_arch);
    str_list_free(&p->match_driver);
    for (int g = 0; g < KILN_GROUP_COUNT; g++)
        classes_free(&p->classes[g]);
    free(p->provenance);
    free(p->path);
    free(p);
}

/* A bounded name; returns 0 or -1 with `why`. */
static int copy_name(char *dst, const cJSON *item, const char *key, char *why)
{
    if (!cJSON_IsString(item) || !item->valuestring[0] || strlen(item->valuestring) >= KILN_PROFILE_NAME_MAX) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'%s' must be a non-empty string of at most %d characters", key,
                 KILN_PROFILE_NAME_MAX - 1);
        return -1;
    }
    strcpy(dst, item->valuestring);
    return 0;
}

static kiln_status parse_list(const cJSON *item, const char *key, struct kiln_str_list *list, char *why)
{
    int n = cJSON_GetArraySize(item);
    if (!cJSON_IsArray(item) || n == 0) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'match.%s' must be a non-empty list of strings", key);
        return KILN_ERROR_INVALID_PROFILE;
    }
    list->items = calloc((size_t)n, sizeof *list->items);
    if (!list->items)
        return KILN_ERROR_OUT_OF_MEMORY;
    for (const cJSON *s = item->child; s; s = s->next) {
        if (!cJSON_IsString(s) || !s->valuestring[0]) {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "'match.%s' must be a non-empty list of non-empty strings", key);
            return KILN_ERROR_INVALID_PROFILE;
        }
        if (!(list->items[list->count++] = strdup(s->valuestring)))
            return KILN_ERROR_OUT_OF_MEMORY;
    }
    return KILN_SUCCESS;
}

static kiln_status parse_match(const cJSON *match, struct kiln_profile *p, char *why)
{
    if (!cJSON_IsObject(match) || !match->child) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'match' must be an object with at least one rule");
        return KILN_ERROR_INVALID_PROFILE;
    }
    p->has_match = 1;
    for (const cJSON *item = match->child; item; item = item->next) {
        kiln_status st = KILN_SUCCESS;
        if (strcmp(item->string, "type") == 0) {
            for (int t = KILN_DEVICE_CPU; t <= KILN_DEVICE_ACCELERATOR; t++)
                if (cJSON_IsString(item) && strcmp(item->valuestring, kiln_device_type_string(t)) == 0)
                    p->match_type = (kiln_device_type)t;
            if (!p->match_type) {
                snprintf(why, KILN_PROFILE_WHY_SIZE, "'match.type' must be \"cpu\", \"gpu\" or \"accelerator\"");
                st = KILN_ERROR_INVALID_PROFILE;
            }
        } else if (strcmp(item->string, "vendor") == 0 && !p->match_vendor.items) {
            st = parse_list(item, "vendor", &p->match_vendor, why);
        } else if (strcmp(item->string, "name") == 0 && !p->match_name.items) {
            st = parse_list(item, "name", &p->match_name, why);
        } else if (strcmp(item->string, "arch") == 0 && !p->match_arch.items) {
            st = parse_list(item, "arch", &p->match_arch, why);
        } else if (strcmp(item->string, "driver") == 0 && !p->match_driver.items) {
            st = parse_list(item, "driver", &p->match_driver, why);
        } else {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "unknown or repeated key 'match.%s'", item->string);
            st = KILN_ERROR_INVALID_PROFILE;
        }
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

static void *group_values(struct kiln_params *params, int g) { return (char *)params + kiln_param_groups[g].offset; }

/* "when": {"m": [1, 64], "k": [4096, null]}: inclusive ranges of the group's
   dimensions, null for no upper bound. */
static int parse_when(const cJSON *when, int g, const char *where, struct kiln_param_class *c, char *why)
{
    if (!cJSON_IsObject(when) || !when->child)
        return snprintf(why, KILN_PROFILE_WHY_SIZE, "'%s.when' must be an object of ranges", where), -1;
    for (const cJSON *r = when->child; r; r = r->next) {
        int d = 0;
        while (d < KILN_DIM_COUNT && strcmp(kiln_dim_names[d], r->string) != 0)
            d++;
        if (d == KILN_DIM_COUNT || !(kiln_param_groups[g].dims & (1u << d)) || (c->bounded & (1u << d))) {
            size_t n = (size_t)snprintf(why, KILN_PROFILE_WHY_SIZE, "'%s.when.%s' is not one of", where, r->string);
            for (int e = 0; e < KILN_DIM_COUNT; e++)
                if (kiln_param_groups[g].dims & (1u << e) && n < KILN_PROFILE_WHY_SIZE)
                    n += (size_t)snprintf(why + n, KILN_PROFILE_WHY_SIZE - n, " %s", kiln_dim_names[e]);
            return -1;
        }
        const cJSON *lo = cJSON_GetArrayItem(r, 0), *hi = cJSON_GetArrayItem(r, 1);
        int ok = cJSON_IsArray(r) && cJSON_GetArraySize(r) == 2 && cJSON_IsNumber(lo) && lo->valuedouble >= 0 &&
                 lo->valuedouble <= 1e15 && lo->valuedouble == (double)(long)lo->valuedouble &&
                 (cJSON_IsNull(hi) || (cJSON_IsNumber(hi) && hi->valuedouble >= lo->valuedouble &&
                                       hi->valuedouble <= 1e15 && hi->valuedouble == (double)(long)hi->valuedouble));
        if (!ok)
            return snprintf(why, KILN_PROFILE_WHY_SIZE,
                            "'%s.when.%s' must be [low, high] or [low, null]: whole numbers, low <= high", where,
                            r->string),
                   -1;
        c->lo[d] = (long)lo->valuedouble;
        c->hi[d] = cJSON_IsNull(hi) ? LONG_MAX : (long)hi->valuedouble;
        c->bounded |= 1u << d;
    }
    return 0;
}

/* "classes": [{"name": "skinny", "when": {...}, "params": {...}}, ...] */
static kiln_status parse_classes(const cJSON *list, int g, const char *where, struct kiln_profile *p, char *why)
{
    struct kiln_param_classes *cs = &p->classes[g];
    int n = cJSON_GetArraySize(list);
    if (!cJSON_IsArray(list) || kiln_param_groups[g].dims == 0 || n > KILN_CLASS_MAX) {
        snprintf(why, KILN_PROFILE_WHY_SIZE,
                 kiln_param_groups[g].dims ? "'%s.classes' must be a list of at most %d classes"
                                           : "'%s' has no classes (its kernels do not depend on the shape)",
                 where, KILN_CLASS_MAX);
        return KILN_ERROR_INVALID_PROFILE;
    }
    cs->own = 1;
    if (n == 0)
        return KILN_SUCCESS;
    if (!(cs->items = calloc((size_t)n, sizeof *cs->items)))
        return KILN_ERROR_OUT_OF_MEMORY;
    for (const cJSON *item = list->child; item; item = item->next) {
        struct kiln_param_class *c = &cs->items[cs->count++];
        if (!(c->raw = calloc(1, kiln_param_groups[g].size)) || !(c->values = calloc(1, kiln_param_groups[g].size)))
            return KILN_ERROR_OUT_OF_MEMORY;
        char at[128];
        snprintf(at, sizeof at, "%s.classes[%zu]", where, cs->count - 1);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        const cJSON *when = cJSON_GetObjectItemCaseSensitive(item, "when");
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(item, "params");
        if (!cJSON_IsObject(item) || cJSON_GetArraySize(item) != 3 || !cJSON_IsString(name) || !name->valuestring[0] ||
            strlen(name->valuestring) >= KILN_CLASS_NAME_MAX || strcmp(name->valuestring, "default") == 0 || !when ||
            !params) {
            snprintf(why, KILN_PROFILE_WHY_SIZE,
                     "'%s' must be {\"name\": a name other than \"default\" of at most %d characters, \"when\": "
                     "{ranges}, \"params\": {values}}",
                     at, KILN_CLASS_NAME_MAX - 1);
            return KILN_ERROR_INVALID_PROFILE;
        }
        for (size_t j = 0; j + 1 < cs->count; j++)
            if (strcmp(cs->items[j].name, name->valuestring) == 0) {
                snprintf(why, KILN_PROFILE_WHY_SIZE, "'%s': a second class named '%s'", at, name->valuestring);
                return KILN_ERROR_INVALID_PROFILE;
            }
        strcpy(c->name, name->valuestring);
        char pat[160];
        snprintf(pat, sizeof pat, "%s.params", at);
        if (parse_when(when, g, at, c, why) != 0 ||
            kiln_param_read(params, g, pat, c->raw, &c->own, why, KILN_PROFILE_WHY_SIZE) != 0)
            return KILN_ERROR_INVALID_PROFILE;
    }
    return KILN_SUCCESS;
}

/* A group's object: its fields, and "classes" where the group has them. */
static kiln_status parse_group(const cJSON *obj, int g, const char *where, struct kiln_profile *p, char *why)
{
    if (!cJSON_IsObject(obj)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'%s' must be an object", where);
        return KILN_ERROR_INVALID_PROFILE;
    }
    cJSON *copy = cJSON_Duplicate(obj, 1);
    if (!copy)
        return KILN_ERROR_OUT_OF_MEMORY;
    cJSON *classes = cJSON_DetachItemFromObjectCaseSensitive(copy, "classes");
    kiln_status st = KILN_SUCCESS;
    if (kiln_param_read(copy, g, where, group_values(&p->raw, g), &p->own[g], why, KILN_PROFILE_WHY_SIZE) != 0)
        st = KILN_ERROR_INVALID_PROFILE;
    if (st == KILN_SUCCESS && classes)
        st = parse_classes(classes, g, where, p, why);
    cJSON_Delete(classes);
    cJSON_Delete(copy);
    return st;
}

static kiln_status parse_kernels(const cJSON *kernels, struct kiln_profile *p, char *why)
{
    if (!cJSON_IsObject(kernels)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'kernels' must be an object");
        return KILN_ERROR_INVALID_PROFILE;
    }
    for (const cJSON *grp = kernels->child; grp; grp = grp->next) {
        char where[96];
        snprintf(where, sizeof where, "kernels.%s", grp->string);
        int g = kiln_param_group_find(grp->string);
        if (g < 0 || g == KILN_GROUP_device || g == KILN_GROUP_select) {
            size_t n = (size_t)snprintf(why, KILN_PROFILE_WHY_SIZE, "unknown kernel group '%s' (groups:", where);
            for (int e = KILN_GROUP_select + 1; e < KILN_GROUP_COUNT && n < KILN_PROFILE_WHY_SIZE; e++)
                n += (size_t)snprintf(why + n, KILN_PROFILE_WHY_SIZE - n, " %s", kiln_param_groups[e].name);
            if (n < KILN_PROFILE_WHY_SIZE)
                snprintf(why + n, KILN_PROFILE_WHY_SIZE - n, ")");
            return KILN_ERROR_INVALID_PROFILE;
        }
        if (p->own[g] || p->classes[g].own) {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "repeated kernel group '%s'", where);
            return KILN_ERROR_INVALID_PROFILE;
        }
        kiln_status st = parse_group(grp, g, where, p, why);
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

/* "provenance": where the numbers come from, as data. */
static kiln_status parse_provenance(const cJSON *obj, struct kiln_profile *p, char *why)
{
    static const char *const strings[] = {"tool", "version", "device", "driver", "date", "basis"};
    if (!cJSON_IsObject(obj)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'provenance' must be an object");
        return KILN_ERROR_INVALID_PROFILE;
    }
    for (const cJSON *item = obj->child; item; item = item->next) {
        size_t k = 0;
        while (k < sizeof strings / sizeof *strings && strcmp(strings[k], item->string) != 0)
            k++;
        if (k < sizeof strings / sizeof *strings) {
            if (!cJSON_IsString(item) || strlen(item->valuestring) > 400) {
                snprintf(why, KILN_PROFILE_WHY_SIZE, "'provenance.%s' must be a string of at most 400 characters",
                         item->string);
                return KILN_ERROR_INVALID_PROFILE;
            }
            continue;
        }
        if (strcmp(item->string, "measurements") != 0) {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "unknown key 'provenance.%s'", item->string);
            return KILN_ERROR_INVALID_PROFILE;
        }
        int ok = cJSON_IsArray(item);
        for (const cJSON *m = ok ? item->child : NULL; m && ok; m = m->next) {
            const cJSON *what = cJSON_GetObjectItemCaseSensitive(m, "what");
            const cJSON *value = cJSON_GetObjectItemCaseSensitive(m, "value");
            const cJSON *base = cJSON_GetObjectItemCaseSensitive(m, "baseline");
            ok = cJSON_IsObject(m) && cJSON_IsString(what) && cJSON_IsNumber(value) &&
                 (!base || cJSON_IsNumber(base)) && cJSON_GetArraySize(m) == 2 + (base != NULL);
        }
        if (!ok) {
            snprintf(why, KILN_PROFILE_WHY_SIZE,
                     "'provenance.measurements' must be a list of {\"what\": text, \"value\": number, \"baseline\": "
                     "number (optional)}");
            return KILN_ERROR_INVALID_PROFILE;
        }
    }
    free(p->provenance);
    if (!(p->provenance = cJSON_PrintUnformatted(obj)))
        return KILN_ERROR_OUT_OF_MEMORY;
    return KILN_SUCCESS;
}

enum top_key { KEY_NAME, KEY_PARENT, KEY_PROVENANCE, KEY_MATCH, KEY_DEVICE, KEY_SELECT, KEY_KERNELS, KEY_COUNT };
static const char *const top_keys[KEY_COUNT] = {"name", "parent", "provenance", "match", "device", "select", "kernels"};

static kiln_status parse_fields(const cJSON *root, struct kiln_profile *p, char *why)
{
    unsigned seen = 0;
    if (!cJSON_IsObject(root)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "the top level must be an object");
        return KILN_ERROR_INVALID_PROFILE;
    }
    for (const cJSON *item = root->child; item; item = item->next) {
        unsigned k = 0;
        while (k < KEY_COUNT && strcmp(top_keys[k], item->string) != 0)
            k++;
        if (k == KEY_COUNT || (seen & (1u << k))) {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "%s top-level key '%s'", k < KEY_COUNT ? "repeated" : "unknown",
                     item->string);
            return KILN_ERROR_INVALID_PROFILE;
        }
        seen |= 1u << k;
        kiln_status st = KILN_SUCCESS;
        switch ((enum top_key)k) {
        case KEY_NAME:
        case KEY_PARENT:
            if (copy_name(k == KEY_NAME ? p->name : p->parent, item, top_keys[k], why) != 0)
                st = KILN_ERROR_INVALID_PROFILE;
            break;
        case KEY_PROVENANCE:
            st = parse_provenance(item, p, why);
            break;
        case KEY_MATCH:
            st = parse_match(item, p, why);
            break;
        case KEY_DEVICE:
        case KEY_SELECT:
            st = parse_group(item, k == KEY_DEVICE ? KILN_GROUP_device : KILN_GROUP_select, top_keys[k], p, why);
            break;
        case KEY_KERNELS:
            st = parse_kernels(item, p, why);
            break;
        case KEY_COUNT: /* ruled out above */
            break;
        }
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

static kiln_status finish(struct kiln_profile *p, const char *path, char *why)
{
    (void)why;
    if (!p->provenance && !(p->provenance = strdup("{}")))
        return KILN_ERROR_OUT_OF_MEMORY;
    if (!(p->path = strdup(path)))
        return KILN_ERROR_OUT_OF_MEMORY;
    return KILN_SUCCESS;
}

/* `text` is NUL-terminated; cJSON wants the terminator inside the length to
   accept the end of input and reject trailing garbage. */
static cJSON *parse_json(const char *text, size_t size, char *why)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, size + 1, &end, 1);
    if (!root) {
        int line = 1, column = 1, depth = 0, in_string = 0, escaped = 0;
        for (const char *c = text; end && c < end && c < text + size; c++, column++) {
            if (*c == '\n')
                line++, column = 0;
            if (in_string) {
                in_string = escaped || *c != '"';
                escaped = !escaped && *c == '\\';
            } else if (*c == '"')
                in_string = 1;
            else
                depth += (*c == '[' || *c == '{') - (*c == ']' || *c == '}');
        }
        snprintf(why, KILN_PROFILE_WHY_SIZE, "JSON syntax error at line %d, column %d%s", line, column,
                 depth >= CJSON_NESTING_LIMIT ? " (nested deeper than the JSON parser's limit)" : "");
    }
    return root;
}

kiln_status kiln_profile_parse(const char *text, size_t size, const char *path, const char *file_name,
                               struct kiln_profile **out, char *why)
{
    cJSON *root = parse_json(text, size, why);
    if (!root)
        return KILN_ERROR_INVALID_PROFILE;
    struct kiln_profile *p = calloc(1, sizeof *p);
    kiln_status st = p ? parse_fields(root, p, why) : KILN_ERROR_OUT_OF_MEMORY;
    cJSON_Delete(root);
    if (st == KILN_SUCCESS && !p->name[0]) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'name' is missing");
        st = KILN_ERROR_INVALID_PROFILE;
    }

    size_t len = file_name && strlen(file_name) > 5 ? strlen(file_name) - 5 : 0; /* without ".json" */
    if (st == KILN_SUCCESS && file_name && (strlen(p->name) != len || strncmp(p->name, file_name, len) != 0)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "name '%s' differs from the file name '%s'", p->name, file_name);
        st = KILN_ERROR_INVALID_PROFILE;
    }
    if (st == KILN_SUCCESS)
        st = finish(p, path, why);
    if (st != KILN_SUCCESS) {
        kiln_profile_free(p);
        return st;
    }
    *out = p;
    return KILN_SUCCESS;
}

kiln_status kiln_profile_parse_overlay(const char *text, struct kiln_profile **out, char *why)
{
    cJSON *root = parse_json(text, strlen(text), why);
    if (!root)
        return KILN_ERROR_INVALID_PROFILE;
    struct kiln_profile *p = calloc(1, sizeof *p);
    kiln_status st = p ? KILN_SUCCESS : KILN_ERROR_OUT_OF_MEMORY;
    for (const cJSON *item = root->child; st == KILN_SUCCESS && cJSON_IsObject(root) && item; item = item->next)
        if (strcmp(item->string, "device") != 0 && strcmp(item->string, "select") != 0 &&
            strcmp(item->string, "kernels") != 0) {
            snprintf(why, KILN_PROFILE_WHY_SIZE,
                     "unknown key '%s' (an overlay holds \"device\", \"select\" and \"kernels\")", item->string);
            st = KILN_ERROR_INVALID_PROFILE;
        }
    if (st == KILN_SUCCESS)
        st = parse_fields(root, p, why);
    cJSON_Delete(root);
    if (st == KILN_SUCCESS)
        st = finish(p, "overlay", why);
    if (st != KILN_SUCCESS) {
        kiln_profile_free(p);
        return st;
    }
    *out = p;
    return KILN_SUCCESS;
}
