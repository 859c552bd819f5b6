/*
 * The search space of a kernel group's parameters, built from the schema
 * (params.h) alone: a new parameter of a kernel group is tuned without
 * changing this module or the tuner.
 *
 * A space holds a group, a seed (the matched profile's parameter set), the
 * device, and for each tunable field a ladder of candidate values. A
 * candidate is the group's struct (struct kiln_param_<group>) held in a
 * union kiln_space_values. Neighbours and random candidates are produced
 * only when they pass the group's check: first without the device (the
 * schema's constraints and compile-cost bounds), then with its limits
 * (work-group size, local memory). Each candidate refused is reported,
 * with the reason, to an optional callback, so a tuner can count what it
 * rejected before compiling anything.
 */
#ifndef KILN_TUNE_SPACE_H
#define KILN_TUNE_SPACE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "kiln/kiln.h"
#include "profiles/schema.h"

/* Any group's struct, at offset 0. */
union kiln_space_values {
#define KILN_SPACE_MEMBER(group, json, prefix, dims, check, doc) struct kiln_param_##group group;
    KILN_PARAM_GROUPS(KILN_SPACE_MEMBER)
#undef KILN_SPACE_MEMBER
};

/* The longest ladder: the powers of two of an int plus the seed's
   neighbours. */
#define KILN_SPACE_LADDER_MAX 40

/* A candidate refused: by the schema (constraints, compile-cost bounds) or
   by the device's limits. */
enum kiln_space_reject { KILN_SPACE_REJECT_SCHEMA, KILN_SPACE_REJECT_DEVICE };
typedef void (*kiln_space_reject_fn)(void *user, const union kiln_space_values *candidate, enum kiln_space_reject kind,
                                     const char *why);

struct kiln_space_field {
    int field; /* index in the group's schema fields */
    int ladder[KILN_SPACE_LADDER_MAX];
    size_t count; /* ascending, no repeats, all within the field's bounds */
};

struct kiln_space {
    enum kiln_group_id group;
    const struct kiln_device_desc *dev; /* not owned; NULL: the schema only */
    union kiln_space_values seed;
    struct kiln_space_field fields[32];
    size_t count;                   /* tunable fields */
    kiln_space_reject_fn on_reject; /* NULL: not reported */
    void *user;
};

/* Non-zero for a kernel group: one whose parameter sets may be chosen by
   shape or that sets a kernel's compiler options (not device or select). */
int kiln_space_kernel_group(enum kiln_group_id group);

/* Non-zero if field f of group is tuned (the rule is in space.c). */
int kiln_space_tunable(enum kiln_group_id group, int f);

/* A space around `seed` (a struct kiln_param_<group>) for device `dev`
   (NULL: the schema's checks only; else kept, not copied). INVALID_ARGUMENT
   for a group that is not a kernel group or a NULL seed. */
kiln_status kiln_space_init(struct kiln_space *s, enum kiln_group_id group, const void *seed,
                            const struct kiln_device_desc *dev);

/* 0 if `c` passes the group's check without the device and then with it;
   else -1 with the reason in `why` and, when kind is not NULL, which check
   refused it. */
int kiln_space_check(const struct kiln_space *s, const union kiln_space_values *c, char *why, size_t size,
                     enum kiln_space_reject *kind);

/* The neighbours of `from`: for each tunable field and each direction, the
   candidate with that field one step along its ladder (the next value below
   and above `from`'s). One that is refused is repaired, if it can be, by
   moving one other field a step too (a smaller tile with fewer work-items
   to cover it); one that cannot be takes the field's next value in that
   direction instead (a field that must be a multiple of a vector width
   skips the values that are not), and where none passes the nearest step
   goes to on_reject. Every neighbour
   passes kiln_space_check and differs from `from` in one or two fields.
   Writes at most `max` to `out`; returns how many. */
size_t kiln_space_neighbours(const struct kiln_space *s, const union kiln_space_values *from,
                             union kiln_space_values *out, size_t max);

/* A random candidate that passes kiln_space_check: the end of a random walk
   from the seed over candidates that pass (each step moves one or two
   fields to any value of their ladders), drawn with the xorshift state *rng
   (non-zero). Where the seed itself does not pass, the walk starts at the
   first of up to `tries` independent draws that does (refused ones go to
   on_reject). 0, or -1 when there is none. */
int kiln_space_random(const struct kiln_space *s, uint64_t *rng, int tries, union kiln_space_values *out);

/* The profile overlay of candidate `c` ({"kernels": {"<group>": {...}}}),
   holding the fields that differ from the seed, as kiln_context_options'
   profile_overlay takes it; malloc'd, NULL when out of memory. */
char *kiln_space_overlay(const struct kiln_space *s, const union kiln_space_values *c);

#endif /* KILN_TUNE_SPACE_H */
