/* The search space of a kernel group: ladders of candidate values from the
   schema, neighbours, random candidates, and overlays. */
#include "tune/space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/diag.h"

int kiln_space_kernel_group(enum kiln_group_id group)
{
    if ((unsigned)group >= KILN_GROUP_COUNT)
        return 0;
    const struct kiln_param_group *grp = &kiln_param_groups[group];
    if (grp->dims)
        return 1;
    for (size_t f = 0; f < grp->count; f++)
        if (grp->fields[f].define)
            return 1;
    return 0;
}

/*
 * The rule, in this one place: every field of a kernel group is tuned except
 * NUMBER fields. DEF fields are the kernel's compiler options; the HOST
 * fields of a kernel group are its launch geometry and register tiles
 * (gemm.cpu mr, nr, vw, narrow_mr; gemm.smallm mr, nc; conv.direct wg, vw;
 * conv.winograd vw; attention.fused q_blocks; util vw), which the host reads
 * to build the kernel's options or its launch. Thresholds that steer the
 * host's choice of kernel live in `select`, never in a kernel group, and
 * device facts in `device`: neither is a kernel group, so neither is tuned.
 */
int kiln_space_tunable(enum kiln_group_id group, int f)
{
    if (!kiln_space_kernel_group(group) || f < 0 || (size_t)f >= kiln_param_groups[group].count)
        return 0;
    return kiln_param_groups[group].fields[f].type != KILN_PARAM_NUMBER;
}

static void ladder_add(struct kiln_space_field *lf, const struct kiln_param_field *field, long v)
{
    if (v < field->min || v > field->max || lf->count >= KILN_SPACE_LADDER_MAX)
        return;
    size_t i = 0;
    while (i < lf->count && lf->ladder[i] < v)
        i++;
    if (i < lf->count && lf->ladder[i] == v)
        return;
    memmove(&lf->ladder[i + 1], &lf->ladder[i], (lf->count - i) * sizeof lf->ladder[0]);
    lf->ladder[i] = (int)v;
    lf->count++;
}

/*
 * The ladder of a field, ascending, within its bounds:
 *   INT:    every power of two, and around the seed s: s/2, s-1, s, s+1,
 *           3s/2 and 2s (so a seed of 6 brings 3, 5, 7, 9 and 12, and one
 *           of 64 brings 63, 65 and 96);
 *   VW:     1, 2, 4, 8, 16;
 *   BOOL:   0, 1;
 *   CHOICE: every choice.
 */
static void ladder_build(struct kiln_space_field *lf, const struct kiln_param_field *field, long seed)
{
    lf->count = 0;
    switch (field->type) {
    case KILN_PARAM_INT:
        for (long v = 1; v <= field->max && v <= (1L << 30); v *= 2)
            ladder_add(lf, field, v);
        ladder_add(lf, field, seed / 2);
        ladder_add(lf, field, seed - 1);
        ladder_add(lf, field, seed);
        ladder_add(lf, field, seed + 1);
        ladder_add(lf, field, seed * 3 / 2);
        ladder_add(lf, field, seed * 2);
        break;
    case KILN_PARAM_VW:
        for (long v = 1; v <= 16; v *= 2)
            ladder_add(lf, field, v);
        break;
    case KILN_PARAM_BOOL:
        ladder_add(lf, field, 0);
        ladder_add(lf, field, 1);
        break;
    case KILN_PARAM_CHOICE:
        for (long c = 0; field->choices[c]; c++)
            lf->ladder[lf->count++] = (int)c;
        break;
    case KILN_PARAM_NUMBER:
        break;
    }
}

static int get_int(const struct kiln_space *s, const struct kiln_space_field *lf, const union kiln_space_values *c)
{
    int v;
    memcpy(&v, (const char *)c + kiln_param_groups[s->group].fields[lf->field].offset, sizeof v);
    return v;
}

static void set_int(const struct kiln_space *s, const struct kiln_space_field *lf, union kiln_space_values *c, int v)
{
    memcpy((char *)c + kiln_param_groups[s->group].fields[lf->field].offset, &v, sizeof v);
}

kiln_status kiln_space_init(struct kiln_space *s, enum kiln_group_id group, const void *seed,
                            const struct kiln_device_desc *dev)
{
    if (!s || !seed)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "search space: NULL argument");
    if (!kiln_space_kernel_group(group))
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "search space: group %d is not a kernel group", (int)group);
    const struct kiln_param_group *grp = &kiln_param_groups[group];
    memset(s, 0, sizeof *s);
    s->group = group;
    s->dev = dev;
    memcpy(&s->seed, seed, grp->size);
    for (size_t f = 0; f < grp->count; f++) {
        if (!kiln_space_tunable(group, (int)f))
            continue;
        struct kiln_space_field *lf = &s->fields[s->count++];
        lf->field = (int)f;
        ladder_build(lf, &grp->fields[f], get_int(s, lf, &s->seed));
    }
    return KILN_SUCCESS;
}

int kiln_space_check(const struct kiln_space *s, const union kiln_space_values *c, char *why, size_t size,
                     enum kiln_space_reject *kind)
{
    kiln_param_check check = kiln_param_groups[s->group].check;
    if (!check)
        return 0;
    if (check(c, NULL, why, size) != 0) {
        if (kind)
            *kind = KILN_SPACE_REJECT_SCHEMA;
        return -1;
    }
    if (s->dev && check(c, s->dev, why, size) != 0) {
        if (kind)
            *kind = KILN_SPACE_REJECT_DEVICE;
        return -1;
    }
    return 0;
}

/* kiln_space_check, reporting a refusal to on_reject. */
static int admit(const struct kiln_space *s, const union kiln_space_values *c)
{
    char why[512];
    enum kiln_space_reject kind;
    if (kiln_space_check(s, c, why, sizeof why, &kind) == 0)
        return 1;
    if (s->on_reject)
        s->on_reject(s->user, c, kind, why);
    return 0;
}

size_t kiln_space_neighbours(const struct kiln_space *s, const union kiln_space_values *from,
                             union kiln_space_values *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->count && n < max; i++) {
        const struct kiln_space_field *lf = &s->fields[i];
        const int v = get_int(s, lf, from);
        size_t below = 0; /* ladder values under v */
        while (below < lf->count && lf->ladder[below] < v)
            below++;
        size_t above = below; /* the first ladder value over v */
        while (above < lf->count && lf->ladder[above] <= v)
            above++;
        int step[2], steps = 0;
        if (below > 0)
            step[steps++] = lf->ladder[below - 1];
        if (above < lf->count)
            step[steps++] = lf->ladder[above];
        for (int d = 0; d < steps && n < max; d++) {
            out[n] = *from;
            set_int(s, lf, &out[n], step[d]);
            n += (size_t)admit(s, &out[n]);
        }
    }
    return n;
}

static uint64_t next(uint64_t *rng)
{
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *rng = x;
}

int kiln_space_random(const struct kiln_space *s, uint64_t *rng, int tries, union kiln_space_values *out)
{
    for (int t = 0; t < tries; t++) {
        *out = s->seed;
        for (size_t i = 0; i < s->count; i++)
            set_int(s, &s->fields[i], out, s->fields[i].ladder[next(rng) % s->fields[i].count]);
        if (admit(s, out))
            return 0;
    }
    return -1;
}

char *kiln_space_overlay(const struct kiln_space *s, const union kiln_space_values *c)
{
    const struct kiln_param_group *grp = &kiln_param_groups[s->group];
    cJSON *root = cJSON_CreateObject();
    cJSON *kernels = cJSON_AddObjectToObject(root, "kernels");
    cJSON *obj = cJSON_AddObjectToObject(kernels, grp->name);
    if (!obj) {
        cJSON_Delete(root);
        return NULL;
    }
    for (size_t f = 0; f < grp->count; f++)
        if (kiln_param_get((int)s->group, (int)f, c) != kiln_param_get((int)s->group, (int)f, &s->seed))
            kiln_param_write((int)s->group, (int)f, c, obj);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}
