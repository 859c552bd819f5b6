/* Parsing and validating one profile file on its own; inheritance and the
   cross-field checks come later (profile.c). */
#include "profiles/profile_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static void str_list_free(struct kiln_str_list *l)
{
    for (size_t i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
}

void kiln_profile_free(struct kiln_profile *p)
{
    if (!p)
        return;
    kiln_profile_free(p->replaced);
    str_list_free(&p->match_vendor);
    str_list_free(&p->match_name);
    str_list_free(&p->match_arch);
    free(p->source);
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
                if (cJSON_IsString(item) && strcmp(item->valuestring, kiln_profile_type_name(t)) == 0)
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
        } else {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "unknown or repeated key 'match.%s'", item->string);
            st = KILN_ERROR_INVALID_PROFILE;
        }
        if (st != KILN_SUCCESS)
            return st;
    }
    return KILN_SUCCESS;
}

static kiln_status parse_kernels(const cJSON *kernels, struct kiln_profile *p, char *why)
{
    if (!cJSON_IsObject(kernels)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'kernels' must be an object");
        return KILN_ERROR_INVALID_PROFILE;
    }
    for (const cJSON *fam = kernels->child; fam; fam = fam->next) {
        char where[96];
        snprintf(where, sizeof where, "kernels.%s", fam->string);
        if (strcmp(fam->string, "device") == 0 || !kiln_schema_has_family(fam->string)) {
            snprintf(why, KILN_PROFILE_WHY_SIZE, "unknown kernel family '%s'", where);
            return KILN_ERROR_INVALID_PROFILE;
        }
        if (kiln_schema_read_family(fam, fam->string, where, p->values, why, KILN_PROFILE_WHY_SIZE) != 0)
            return KILN_ERROR_INVALID_PROFILE;
    }
    return KILN_SUCCESS;
}

enum top_key { KEY_NAME, KEY_PARENT, KEY_SOURCE, KEY_MATCH, KEY_DEVICE, KEY_KERNELS, KEY_COUNT };
static const char *const top_keys[KEY_COUNT] = {"name", "parent", "source", "match", "device", "kernels"};

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
        case KEY_SOURCE:
            if (!cJSON_IsString(item)) {
                snprintf(why, KILN_PROFILE_WHY_SIZE, "'source' must be a string");
                st = KILN_ERROR_INVALID_PROFILE;
            } else if (!(p->source = strdup(item->valuestring))) {
                st = KILN_ERROR_OUT_OF_MEMORY;
            }
            break;
        case KEY_MATCH:
            st = parse_match(item, p, why);
            break;
        case KEY_DEVICE:
            if (kiln_schema_read_family(item, "device", "device", p->values, why, KILN_PROFILE_WHY_SIZE) != 0)
                st = KILN_ERROR_INVALID_PROFILE;
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
    if (!p->name[0]) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "'name' is missing");
        return KILN_ERROR_INVALID_PROFILE;
    }
    return KILN_SUCCESS;
}

kiln_status kiln_profile_parse(const char *text, size_t size, const char *path, const char *file_name,
                               struct kiln_profile **out, char *why)
{
    const char *end = NULL;
    /* `text` is NUL-terminated; cJSON wants the terminator inside the length
       to accept the end of input and reject trailing garbage. */
    cJSON *root = cJSON_ParseWithLengthOpts(text, size + 1, &end, 1);
    if (!root) {
        int line = 1, column = 1;
        for (const char *c = text; end && c < end && c < text + size; c++, column++)
            if (*c == '\n')
                line++, column = 0;
        snprintf(why, KILN_PROFILE_WHY_SIZE, "JSON syntax error at line %d, column %d", line, column);
        return KILN_ERROR_INVALID_PROFILE;
    }
    struct kiln_profile *p = calloc(1, sizeof *p + kiln_schema_count * sizeof p->values[0]);
    kiln_status st = p ? parse_fields(root, p, why) : KILN_ERROR_OUT_OF_MEMORY;
    cJSON_Delete(root);

    size_t len = strlen(file_name) > 5 ? strlen(file_name) - 5 : 0; /* without ".json" */
    if (st == KILN_SUCCESS && (strlen(p->name) != len || strncmp(p->name, file_name, len) != 0)) {
        snprintf(why, KILN_PROFILE_WHY_SIZE, "name '%s' differs from the file name '%s'", p->name, file_name);
        st = KILN_ERROR_INVALID_PROFILE;
    }
    if (st == KILN_SUCCESS && !p->source && !(p->source = strdup("")))
        st = KILN_ERROR_OUT_OF_MEMORY;
    if (st == KILN_SUCCESS && !(p->path = strdup(path)))
        st = KILN_ERROR_OUT_OF_MEMORY;
    if (st != KILN_SUCCESS) {
        kiln_profile_free(p);
        return st;
    }
    *out = p;
    return KILN_SUCCESS;
}
