/* The GEMM search of kiln-tune; see tune.h. */
#include "tune/tune.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "core/diag.h"
#include "profiles/profile.h"
#include "profiles/schema.h"
#include "tune/peaks.h"
#include "tune/space.h"
#include "tune/trial.h"
#include "util/fs.h"

/* Timed runs per trial and per confirmation of the seed and the winner at
   the end (three runs of a short GEMM are noisy enough to crown a lucky
   candidate), the cut-off past the best time so far, the random draws
   between two rounds of refinement, and how many of the best are refined in
   each round. */
#define REPS 3
#define CONFIRM_REPS 9
/* The share of the budget the search may take: the rest is for the
   confirmations and the peaks, so the run ends within its budget. */
#define SEARCH_SHARE 0.95
#define CUTOFF 1.5
#define DRAWS 4
#define REFINE 3
#define RANDOM_TRIES 1000

void kiln_tune_options_init(struct kiln_tune_options *o)
{
    memset(o, 0, sizeof *o);
    o->budget_s = 600;
    o->seed = 1;
    o->min_gain = 0.03;
    o->measure_peaks = 1;
}

#define SHAPE(m, n, k)                                                                                                 \
    {                                                                                                                  \
        KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, m, n, k, 0, 0, 0                                                 \
    }

const struct kiln_tune_shape *kiln_tune_gemm_shapes(size_t *count)
{
    static struct kiln_tune_shape shapes[4];
    static const size_t dims[4][4] = {{512, 512, 512, 1}, {16, 1024, 1024, 1}, {64, 64, 4096, 1}, {128, 128, 128, 8}};
    static const char *const names[4] = {"512x512x512", "16x1024x1024", "64x64x4096", "128x128x128x8"};
    for (size_t i = 0; i < 4; i++) {
        shapes[i].name = names[i];
        kiln_gemm_desc_init(&shapes[i].desc, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, dims[i][0], dims[i][1],
                            dims[i][2]);
        if (dims[i][3] > 1) {
            kiln_gemm_desc *d = &shapes[i].desc;
            d->batch = dims[i][3];
            d->stride_a = d->m * d->k, d->stride_b = d->k * d->n, d->stride_c = d->m * d->n;
        }
    }
    *count = 4;
    return shapes;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* One journal line: a candidate of a group and what its trial found. */
struct entry {
    char *group, *overlay, *reason;
    int timed;
    cJSON *ms; /* shape name -> ms */
};

struct candidate {
    union kiln_space_values v;
    char *overlay;
    int ok, expanded;
    double ms[KILN_TUNE_SHAPES_MAX];
    double score;
};

struct search {
    const struct kiln_tune_options *o;
    struct kiln_tune_result *r;
    const struct kiln_tune_shape *shapes;
    size_t shape_count;
    FILE *journal;
    struct entry *entries;
    size_t entry_count;
    struct kiln_space space;
    const char *group;
    size_t members[KILN_TUNE_SHAPES_MAX]; /* the group's shapes */
    size_t member_count;
    double best_ms[KILN_TUNE_SHAPES_MAX];
    struct candidate *cands;
    size_t count, cap;
    char **refused; /* overlays refused by the space's checks, each counted once */
    size_t refused_count;
    double deadline;
};

static void count_refusal(void *user, const union kiln_space_values *c, enum kiln_space_reject kind, const char *why)
{
    struct search *s = user;
    (void)kind;
    char *overlay = kiln_space_overlay(&s->space, c);
    for (size_t i = 0; overlay && i < s->refused_count; i++)
        if (strcmp(s->refused[i], overlay) == 0) {
            free(overlay);
            return;
        }
    char **grown = overlay ? realloc(s->refused, (s->refused_count + 1) * sizeof *grown) : NULL;
    if (grown) {
        s->refused = grown;
        grown[s->refused_count++] = overlay;
    } else {
        free(overlay);
    }
    s->r->refused++;
    if (s->o->log)
        fprintf(s->o->log, "%s: refused before compiling: %s\n", s->group, why);
}

static void read_journal(struct search *s, FILE *f)
{
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *g = cJSON_GetObjectItem(j, "group"), *ov = cJSON_GetObjectItem(j, "overlay");
        const cJSON *v = cJSON_GetObjectItem(j, "verdict"), *why = cJSON_GetObjectItem(j, "reason");
        const cJSON *ms = cJSON_GetObjectItem(j, "ms");
        struct entry *grown = NULL;
        if (cJSON_IsString(g) && cJSON_IsString(ov) && cJSON_IsString(v) && cJSON_IsObject(ms))
            grown = realloc(s->entries, (s->entry_count + 1) * sizeof *grown);
        if (grown) {
            s->entries = grown;
            struct entry *e = &grown[s->entry_count++];
            e->group = strdup(g->valuestring);
            e->overlay = strdup(ov->valuestring);
            e->reason = strdup(cJSON_IsString(why) ? why->valuestring : "");
            e->timed = strcmp(v->valuestring, "timed") == 0;
            e->ms = cJSON_DetachItemFromObject(j, "ms");
        }
        cJSON_Delete(j);
    }
}

/* The journal's trial of this candidate, if it covers the group's shapes. */
static const struct entry *journaled(const struct search *s, const char *overlay)
{
    for (size_t i = 0; i < s->entry_count; i++) {
        const struct entry *e = &s->entries[i];
        if (!e->group || !e->overlay || strcmp(e->group, s->group) != 0 || strcmp(e->overlay, overlay) != 0)
            continue;
        int complete = 1;
        for (size_t m = 0; e->timed && m < s->member_count; m++)
            complete &= cJSON_IsNumber(cJSON_GetObjectItem(e->ms, s->shapes[s->members[m]].name));
        if (complete)
            return e;
    }
    return NULL;
}

static void write_journal(const struct search *s, const struct candidate *c, const char *reason)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "group", s->group);
    cJSON_AddStringToObject(j, "overlay", c->overlay);
    cJSON_AddStringToObject(j, "verdict", c->ok ? "timed" : "rejected");
    cJSON_AddStringToObject(j, "reason", reason);
    cJSON *ms = cJSON_AddObjectToObject(j, "ms");
    for (size_t m = 0; c->ok && m < s->member_count; m++)
        cJSON_AddNumberToObject(ms, s->shapes[s->members[m]].name, c->ms[m]);
    char *text = cJSON_PrintUnformatted(j);
    if (text) {
        fprintf(s->journal, "%s\n", text);
        fflush(s->journal);
    }
    free(text);
    cJSON_Delete(j);
}

/* Try every shape of the group with the candidate's overlay, `reps` timed
   runs each, cut short past CUTOFF times the best so far when `cut`;
   reason gets why it was rejected. */
static kiln_status run_trials(struct search *s, struct candidate *c, int reps, int cut, char *reason, size_t size)
{
    kiln_context_options opts;
    kiln_context_options_init(&opts);
    opts.device = s->o->device;
    opts.profile_overlay = c->overlay;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opts, &ctx);
    if (st != KILN_SUCCESS) {
        snprintf(reason, size, "context: %s: %s", kiln_status_string(st), kiln_last_error_detail());
        return KILN_SUCCESS;
    }
    c->ok = 1;
    for (size_t m = 0; c->ok && m < s->member_count; m++) {
        struct kiln_trial t;
        double cutoff = cut && s->best_ms[m] > 0 ? CUTOFF * s->best_ms[m] : 0.0;
        st = kiln_trial_gemm(ctx, &s->shapes[s->members[m]].desc, reps, cutoff, s->o->seed + m, &t);
        if (st != KILN_SUCCESS)
            break;
        c->ok = t.verdict == KILN_TRIAL_TIMED;
        c->ms[m] = t.ms;
        if (!c->ok)
            snprintf(reason, size, "%s: %s", s->shapes[s->members[m]].name, t.reason);
    }
    kiln_context_destroy(ctx);
    return st;
}

/* The geometric mean over the group's shapes of seed_ms / candidate_ms:
   the seed (the first candidate) is the baseline of every score. */
static double score(const struct search *s, const struct candidate *c)
{
    double log_sum = 0;
    for (size_t m = 0; m < s->member_count; m++)
        log_sum += log(s->cands[0].ms[m] / c->ms[m]);
    return exp(log_sum / (double)s->member_count);
}

/* Evaluate a candidate once: from the journal or by trials. *tried is 0
   when it was a repeat or the budget is spent. */
static kiln_status evaluate(struct search *s, const union kiln_space_values *v, int *tried)
{
    *tried = 0;
    char *overlay = kiln_space_overlay(&s->space, v);
    if (!overlay)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
    for (size_t i = 0; i < s->count; i++)
        if (strcmp(s->cands[i].overlay, overlay) == 0) {
            free(overlay);
            return KILN_SUCCESS;
        }
    const struct entry *e = journaled(s, overlay);
    if (!e && now_s() >= s->deadline) {
        free(overlay);
        return KILN_SUCCESS;
    }
    if (s->count == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct candidate *grown = realloc(s->cands, cap * sizeof *grown);
        if (!grown) {
            free(overlay);
            return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: candidates");
        }
        s->cands = grown, s->cap = cap;
    }
    struct candidate *c = &s->cands[s->count];
    memset(c, 0, sizeof *c);
    c->v = *v;
    c->overlay = overlay;
    char reason[400] = "";
    if (e) {
        c->ok = e->timed;
        snprintf(reason, sizeof reason, "%s", e->reason);
        for (size_t m = 0; c->ok && m < s->member_count; m++)
            c->ms[m] = cJSON_GetObjectItem(e->ms, s->shapes[s->members[m]].name)->valuedouble;
        s->r->journaled++;
    } else {
        kiln_status st = run_trials(s, c, REPS, 1, reason, sizeof reason);
        if (st != KILN_SUCCESS) {
            free(overlay);
            return st;
        }
        write_journal(s, c, reason);
    }
    s->count++;
    s->r->trials++;
    *tried = 1;
    if (!c->ok) {
        s->r->rejected++;
        if (s->o->log)
            fprintf(s->o->log, "%s %s: rejected: %s\n", s->group, overlay, reason);
        return KILN_SUCCESS;
    }
    s->r->timed++;
    for (size_t m = 0; m < s->member_count; m++)
        if (s->best_ms[m] <= 0 || c->ms[m] < s->best_ms[m])
            s->best_ms[m] = c->ms[m];
    c->score = score(s, c);
    if (s->o->log)
        fprintf(s->o->log, "%s %s: score %.3f%s\n", s->group, overlay, c->score, e ? " (journal)" : "");
    return KILN_SUCCESS;
}

static kiln_status expand(struct search *s, size_t i, size_t *new_count)
{
    union kiln_space_values next[2 * 32];
    s->cands[i].expanded = 1;
    union kiln_space_values from = s->cands[i].v;
    size_t n = kiln_space_neighbours(&s->space, &from, next, sizeof next / sizeof *next);
    for (size_t k = 0; k < n; k++) {
        int tried;
        kiln_status st = evaluate(s, &next[k], &tried);
        if (st != KILN_SUCCESS)
            return st;
        *new_count += (size_t)tried;
    }
    return KILN_SUCCESS;
}

/* The best unexpanded timed candidate, or SIZE_MAX. */
static size_t best_unexpanded(const struct search *s)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < s->count; i++)
        if (s->cands[i].ok && !s->cands[i].expanded && (best == SIZE_MAX || s->cands[i].score > s->cands[best].score))
            best = i;
    return best;
}

static kiln_status search_group(struct search *s)
{
    uint64_t rng = s->o->seed * 0x9e3779b97f4a7c15u + (uint64_t)s->space.group + 1;
    int tried;
    kiln_status st = evaluate(s, &s->space.seed, &tried);
    if (st != KILN_SUCCESS || s->count == 0 || !s->cands[0].ok)
        return st;
    size_t fresh = 0;
    st = expand(s, 0, &fresh);
    while (st == KILN_SUCCESS && now_s() < s->deadline) {
        fresh = 0;
        for (int d = 0; d < DRAWS && st == KILN_SUCCESS; d++) {
            union kiln_space_values v;
            if (kiln_space_random(&s->space, &rng, RANDOM_TRIES, &v) == 0) {
                st = evaluate(s, &v, &tried);
                fresh += (size_t)tried;
            }
        }
        for (int k = 0; k < REFINE && st == KILN_SUCCESS; k++) {
            size_t best = best_unexpanded(s);
            if (best != SIZE_MAX)
                st = expand(s, best, &fresh);
        }
        if (fresh == 0 && best_unexpanded(s) == SIZE_MAX)
            break; /* the space is exhausted around what was found */
    }
    return st;
}

/* Time the seed and candidate `best` again with more runs and no cut-off,
   and score `best` by these times. */
static kiln_status confirm(struct search *s, size_t best)
{
    char reason[400] = "";
    kiln_status st = run_trials(s, &s->cands[0], CONFIRM_REPS, 0, reason, sizeof reason);
    if (st == KILN_SUCCESS && s->cands[0].ok)
        st = run_trials(s, &s->cands[best], CONFIRM_REPS, 0, reason, sizeof reason);
    struct candidate *c = &s->cands[best];
    c->ok &= s->cands[0].ok;
    if (st != KILN_SUCCESS || !c->ok) {
        if (s->o->log)
            fprintf(s->o->log, "%s: confirmation failed: %s\n", s->group, reason);
        return st;
    }
    c->score = score(s, c);
    if (s->o->log)
        fprintf(s->o->log, "%s %s: score %.3f confirmed over %d runs\n", s->group, c->overlay, c->score, CONFIRM_REPS);
    return KILN_SUCCESS;
}

/* Open the journal in `dir`, reading it first when resuming. */
static kiln_status open_journal(struct search *s, const char *dir)
{
    if (kiln_mkdir_p(dir, 0755) != KILN_SUCCESS) {
        char why[512]; /* the detail is overwritten by the error below */
        snprintf(why, sizeof why, "%s", kiln_last_error_detail());
        return kiln_error(KILN_ERROR_IO, "kiln-tune: cannot create the output directory %s (%s)", dir, why);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, KILN_TUNE_JOURNAL);
    if (s->o->resume) {
        FILE *f = fopen(path, "r");
        if (f) {
            read_journal(s, f);
            fclose(f);
        }
    }
    s->journal = fopen(path, s->o->resume ? "a" : "w");
    if (!s->journal)
        return kiln_error(KILN_ERROR_IO, "kiln-tune: cannot write %s: %s", path, strerror(errno));
    return KILN_SUCCESS;
}

/* The overlay holding every chosen group's changes and the measured peaks. */
static char *merge_overlays(char *const *overlays, size_t n, const struct kiln_tune_result *r)
{
    cJSON *root = cJSON_CreateObject(), *kernels = cJSON_AddObjectToObject(root, "kernels");
    for (size_t i = 0; i < n; i++) {
        cJSON *one = cJSON_Parse(overlays[i]);
        cJSON *groups = cJSON_GetObjectItem(one, "kernels");
        while (groups && groups->child) {
            cJSON *group = cJSON_DetachItemViaPointer(groups, groups->child);
            cJSON_AddItemToObject(kernels, group->string, group);
        }
        cJSON_Delete(one);
    }
    if (r->peak_gflops > 0) {
        cJSON *dev = cJSON_AddObjectToObject(root, "device");
        cJSON_AddNumberToObject(dev, "peak_gflops", r->peak_gflops);
        cJSON_AddNumberToObject(dev, "peak_gbps", r->peak_gbps);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static kiln_status write_profile(kiln_context *ctx, const struct kiln_tune_options *o, const char *dir,
                                 char *const *overlays, size_t n, unsigned groups, struct kiln_tune_result *r)
{
    if (o->measure_peaks) {
        struct kiln_peaks peaks;
        kiln_status st = kiln_measure_peaks(ctx, &peaks);
        if (st != KILN_SUCCESS)
            return st;
        r->peak_gflops = peaks.gflops, r->peak_gbps = peaks.gbps;
        groups |= 1u << KILN_GROUP_device;
    }
    char *overlay = merge_overlays(overlays, n, r);
    struct kiln_profile *values = NULL;
    kiln_status st = overlay ? kiln_profile_derive(ctx->profile, overlay, &values)
                             : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
    if (overlay)
        snprintf(r->changes, sizeof r->changes, "%s", overlay);
    free(overlay);
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_profile_measurement m[KILN_TUNE_SHAPES_MAX];
    char what[KILN_TUNE_SHAPES_MAX][80];
    for (size_t i = 0; i < r->shape_count; i++) {
        const struct kiln_tune_shape_result *sr = &r->shapes[i];
        snprintf(what[i], sizeof what[i], "gemm %s GFLOP/s", sr->name);
        m[i].what = what[i];
        m[i].value = sr->gflop / (sr->after_ms * 1e-3);
        m[i].baseline = sr->gflop / (sr->before_ms * 1e-3);
    }
    char date[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%d", gmtime_r(&t, &tm));
    struct kiln_profile_provenance pv = {
        "kiln-tune", kiln_version_string(), ctx->desc.name, ctx->desc.driver_version, date, "measured by kiln-tune",
        m,           r->shape_count};
    snprintf(r->profile, sizeof r->profile, "%.60s-tuned", r->matched);
    snprintf(r->path, sizeof r->path, "%s/%s.json", dir, r->profile);
    struct kiln_profile *exact = NULL; /* match this device and driver alone */
    st = kiln_profile_exact_match(&ctx->desc, &exact);
    if (st == KILN_SUCCESS)
        st = kiln_profile_write(r->path, r->profile, r->matched, exact, values, groups, &pv);
    kiln_profile_free(exact);
    kiln_profile_free(values);
    if (st != KILN_SUCCESS)
        r->profile[0] = r->path[0] = '\0';
    return st;
}

/* The group each shape's plan takes on the matched profile. */
static kiln_status plan_groups(kiln_context *ctx, const struct kiln_tune_options *o,
                               const struct kiln_tune_shape *shapes, struct kiln_tune_result *r)
{
    for (size_t i = 0; i < r->shape_count; i++) {
        kiln_gemm_plan *plan = NULL;
        kiln_gemm_plan_info info;
        kiln_status st = kiln_gemm_plan_create(ctx, &shapes[i].desc, &plan);
        if (st == KILN_SUCCESS)
            st = kiln_gemm_plan_describe(plan, &info);
        kiln_gemm_plan_destroy(plan);
        if (st != KILN_SUCCESS)
            return st;
        const kiln_gemm_desc *d = &shapes[i].desc;
        snprintf(r->shapes[i].name, sizeof r->shapes[i].name, "%s", shapes[i].name);
        /* A shape class's own set is not tuned yet: the overlay changes a
           group's default set, which such a plan does not take. */
        const char *set = strchr(info.param_set, ':');
        int by_default = set && strcmp(set, ":default") == 0;
        snprintf(r->shapes[i].group, sizeof r->shapes[i].group, "%.*s",
                 by_default ? (int)(set - info.param_set) : (int)strlen(info.param_set), info.param_set);
        if (!by_default && o->log)
            fprintf(o->log, "%s: its plan takes %s, not tuned\n", shapes[i].name,
                    info.param_set[0] ? info.param_set : "no parameter set");
        r->shapes[i].gflop = 2e-9 * (double)d->m * (double)d->n * (double)d->k * (double)d->batch;
    }
    return KILN_SUCCESS;
}

kiln_status kiln_tune_gemm(const struct kiln_tune_options *o, struct kiln_tune_result *r)
{
    if (!o || !r)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_tune_gemm: NULL argument");
    double start = now_s();
    memset(r, 0, sizeof *r);
    struct search s = {.o = o, .r = r};
    s.shapes = o->shapes ? o->shapes : kiln_tune_gemm_shapes(&s.shape_count);
    s.shape_count = o->shapes ? o->shape_count : s.shape_count;
    if (s.shape_count == 0 || s.shape_count > KILN_TUNE_SHAPES_MAX)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_tune_gemm: %zu shapes (1 to %d)", s.shape_count,
                          KILN_TUNE_SHAPES_MAX);
    r->shape_count = s.shape_count;
    char *dir = o->out ? strdup(o->out) : kiln_profile_user_dir();
    if (!dir)
        return kiln_error(KILN_ERROR_IO, "kiln-tune: no output directory (neither XDG_CONFIG_HOME nor HOME is set)");
    kiln_status st = open_journal(&s, dir);

    kiln_context_options opts;
    kiln_context_options_init(&opts);
    opts.device = o->device;
    kiln_context *ctx = NULL;
    if (st == KILN_SUCCESS)
        st = kiln_context_create(&opts, &ctx);
    if (st == KILN_SUCCESS) {
        snprintf(r->matched, sizeof r->matched, "%s", kiln_profile_name(ctx->profile));
        st = plan_groups(ctx, o, s.shapes, r);
    }

    /* The groups in the order of their first shape; each gets an equal
       share of what is left of the budget when it starts. */
    int order[KILN_TUNE_SHAPES_MAX];
    size_t group_count = 0;
    unsigned seen = 0;
    for (size_t i = 0; st == KILN_SUCCESS && i < s.shape_count; i++) {
        int g = kiln_param_group_find(r->shapes[i].group);
        if (g >= 0 && !(seen & (1u << g)) && kiln_space_kernel_group((enum kiln_group_id)g))
            order[group_count++] = g, seen |= 1u << g;
    }
    char *chosen[KILN_TUNE_SHAPES_MAX];
    size_t chosen_count = 0;
    unsigned chosen_groups = 0;
    for (size_t gi = 0; st == KILN_SUCCESS && gi < group_count; gi++) {
        int g = order[gi];
        s.group = kiln_param_groups[g].name;
        s.member_count = 0;
        for (size_t k = 0; k < s.shape_count; k++)
            if (strcmp(r->shapes[k].group, s.group) == 0)
                s.members[s.member_count++] = k;
        memset(s.best_ms, 0, sizeof s.best_ms);
        s.count = 0;
        double left = SEARCH_SHARE * o->budget_s - (now_s() - start);
        s.deadline = now_s() + (left > 0 ? left / (double)(group_count - gi) : 0);
        const void *seed = (const char *)kiln_profile_params(ctx->profile) + kiln_param_groups[g].offset;
        st = kiln_space_init(&s.space, (enum kiln_group_id)g, seed, &ctx->desc);
        s.space.on_reject = count_refusal;
        s.space.user = &s;
        if (st == KILN_SUCCESS)
            st = search_group(&s);
        /* The best other than the seed, kept only past the noise floor. */
        size_t best = SIZE_MAX;
        for (size_t c = 1; c < s.count; c++)
            if (s.cands[c].ok && (best == SIZE_MAX || s.cands[c].score > s.cands[best].score))
                best = c;
        if (st == KILN_SUCCESS && best != SIZE_MAX)
            st = confirm(&s, best);
        /* More than 3% (min_gain) over the seed: below that, a difference
           is within the run-to-run noise of a CPU. */
        int keep = best != SIZE_MAX && s.cands[best].ok && s.cands[best].score > 1.0 + o->min_gain;
        for (size_t m = 0; s.count > 0 && s.cands[0].ok && m < s.member_count; m++) {
            r->shapes[s.members[m]].before_ms = s.cands[0].ms[m];
            r->shapes[s.members[m]].after_ms = keep ? s.cands[best].ms[m] : s.cands[0].ms[m];
        }
        if (keep) {
            chosen[chosen_count++] = s.cands[best].overlay;
            chosen_groups |= 1u << g;
            s.cands[best].overlay = NULL;
        }
        for (size_t c = 0; c < s.count; c++)
            free(s.cands[c].overlay);
        for (size_t c = 0; c < s.refused_count; c++)
            free(s.refused[c]);
        s.refused_count = 0;
    }
    if (st == KILN_SUCCESS && chosen_count > 0)
        st = write_profile(ctx, o, dir, chosen, chosen_count, chosen_groups, r);
    for (size_t i = 0; i < chosen_count; i++)
        free(chosen[i]);
    for (size_t i = 0; i < s.entry_count; i++) {
        free(s.entries[i].group), free(s.entries[i].overlay), free(s.entries[i].reason);
        cJSON_Delete(s.entries[i].ms);
    }
    free(s.entries);
    free(s.cands);
    free(s.refused);
    if (s.journal)
        fclose(s.journal);
    kiln_context_destroy(ctx);
    free(dir);
    return st;
}
