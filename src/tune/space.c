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
 * fields of a kernel group (its rows marked HOST in params.h: launch
 * geometry, register tiles, split-K settings, copy modes) are what the host
 * reads to build the kernel's options or its launch. Thresholds that steer
 * the host's choice of kernel live in `select`, never in a kernel group, and
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

/* Seeds up to this value get the steps s-1 and s+1 on their ladder: a
   register tile of 6 rows is worth trying at 5 and 7, a work-group of 128
   work-items at 127 and 129 is not (its neighbours are 64 and 192). */
#define FINE_STEPS_MAX 16

/*
 * The ladder of a field, ascending, within its bounds:
 *   INT:    every power of two, and around the seed s: s/2, s-1 and s+1
 *           (for s up to FINE_STEPS_MAX), s, 3s/2 and 2s (so a seed of 6
 *           brings 3, 5, 7, 9 and 12, and one of 64 brings 96);
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
        if (seed <= FINE_STEPS_MAX) {
            ladder_add(lf, field, seed - 1);
            ladder_add(lf, field, seed + 1);
        }
        ladder_add(lf, field, seed);
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

/* Where v sits on lf's ladder: *below ladder values under it, *above the
   index of the first one over it. */
static void ladder_place(const struct kiln_space_field *lf, int v, size_t *below, size_t *above)
{
    size_t b = 0;
    while (b < lf->count && lf->ladder[b] < v)
        b++;
    size_t a = b;
    while (a < lf->count && lf->ladder[a] <= v)
        a++;
    *below = b;
    *above = a;
}

/* The values one step from v on lf's ladder: the next below and the next
   above (at most two). */
static int ladder_steps(const struct kiln_space_field *lf, int v, int step[2])
{
    size_t below, above;
    ladder_place(lf, v, &below, &above);
    int steps = 0;
    if (below > 0)
        step[steps++] = lf->ladder[below - 1];
    if (above < lf->count)
        step[steps++] = lf->ladder[above];
    return steps;
}

static int passes(const struct kiln_space *s, const union kiln_space_values *c)
{
    char why[512];
    return kiln_space_check(s, c, why, sizeof why, NULL) == 0;
}

/* *c, refused with field i moved, made to pass by moving one other field a
   step along its ladder (the first that passes, fields in schema order):
   fields that constrain each other (a tile and the work-items that cover
   it) move together. 1 if repaired. */
static int repair(const struct kiln_space *s, size_t i, union kiln_space_values *c)
{
    for (size_t j = 0; j < s->count; j++) {
        if (j == i)
            continue;
        const struct kiln_space_field *lf = &s->fields[j];
        int step[2];
        const int v = get_int(s, lf, c), steps = ladder_steps(lf, v, step);
        for (int d = 0; d < steps; d++) {
            set_int(s, lf, c, step[d]);
            if (passes(s, c))
                return 1;
        }
        set_int(s, lf, c, v);
    }
    return 0;
}

/* *c with field i at v, made to pass as it is or repaired; 0 if neither. */
static int step_to(const struct kiln_space *s, size_t i, int v, union kiln_space_values *c)
{
    set_int(s, &s->fields[i], c, v);
    return passes(s, c) || repair(s, i, c);
}

size_t kiln_space_neighbours(const struct kiln_space *s, const union kiln_space_values *from,
                             union kiln_space_values *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->count && n < max; i++) {
        const struct kiln_space_field *lf = &s->fields[i];
        size_t below, above;
        ladder_place(lf, get_int(s, lf, from), &below, &above);
        /* Each direction's first value that passes, alone or repaired: a
           field that must be a multiple of another (nr of vw) steps past
           the values that never are (flip_nr from 0 to vw, not to 1). */
        for (int up = 0; up <= 1 && n < max; up++) {
            if (up ? above == lf->count : below == 0)
                continue;
            const size_t first = up ? above : below - 1, values = up ? lf->count - above : below;
            int found = 0;
            for (size_t j = 0; j < values && !found; j++) {
                out[n] = *from;
                found = step_to(s, i, lf->ladder[up ? first + j : first - j], &out[n]);
            }
            if (!found) {
                out[n] = *from;
                set_int(s, lf, &out[n], lf->ladder[first]);
                n += (size_t)admit(s, &out[n]); /* reports the refusal of the nearest step */
                continue;
            }
            /* The same candidate reached from another field's step is one
               neighbour. */
            int seen = 0;
            for (size_t k = 0; k < n && !seen; k++)
                seen = memcmp(&out[k], &out[n], sizeof out[n]) == 0;
            n += (size_t)!seen;
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

/* Proposals of a random walk per tuned field. */
#define WALK_STEPS 24

int kiln_space_random(const struct kiln_space *s, uint64_t *rng, int tries, union kiln_space_values *out)
{
    /* The walk starts at the seed, or where the seed does not pass (a
       device smaller than its profile), at the first of up to `tries`
       independent draws that does. */
    *out = s->seed;
    int start = passes(s, out);
    for (int t = 0; !start && t < tries; t++) {
        *out = s->seed;
        for (size_t i = 0; i < s->count; i++)
            set_int(s, &s->fields[i], out, s->fields[i].ladder[next(rng) % s->fields[i].count]);
        start = admit(s, out);
    }
    if (!start)
        return -1;
    /* A random walk over the candidates that pass: each step moves one
       field, or two at once, to any value of its ladder, and stays where it
       is when the result is refused. Uniform proposals accepted only where
       they pass draw every candidate the walk can reach alike, where
       independent draws of every field almost never pass the constraints
       that tie fields together (one in several hundred for the tiled
       GEMM's). */
    for (size_t k = 0; s->count && k < WALK_STEPS * s->count; k++) {
        union kiln_space_values c = *out;
        const size_t moves = 1 + next(rng) % 2;
        for (size_t m = 0; m < moves; m++) {
            const struct kiln_space_field *lf = &s->fields[next(rng) % s->count];
            set_int(s, lf, &c, lf->ladder[next(rng) % lf->count]);
        }
        if (passes(s, &c))
            *out = c;
    }
    return 0;
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
