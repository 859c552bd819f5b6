/* The search of kiln-tune; see tune.h. */
#include "tune/tune.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "core/diag.h"
#include "ops/attention.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"
#include "profiles/profile.h"
#include "profiles/schema.h"
#include "tune/peaks.h"
#include "tune/space.h"
#include "tune/trial.h"
#include "util/fs.h"

/* Timed runs per trial, per confirmation of the seed and the winners (three
   runs of a short problem are noisy enough to crown a lucky candidate) and
   per threshold probe; the cut-off past the best time so far; the random
   draws between two rounds of refinement, and how many of the best are
   refined in each round. */
#define REPS 3
#define CONFIRM_REPS 9
/* Rounds of a confirmation (CONFIRM_REPS / CONFIRM_ROUNDS runs of each
   candidate per round), and the most candidates it times: the seed, the
   best, and a class's default and class sets. */
#define CONFIRM_ROUNDS 3
#define CONFIRM_MAX 4
#define PROBE_REPS 5
#define CUTOFF 1.5
#define DRAWS 4
#define REFINE 3
#define RANDOM_TRIES 1000
/* Where each stage ends, as a share of the budget: the kernel groups, the
   thresholds, then the before/after table, the peaks and the writing. */
#define GROUPS_END 0.70
#define GROUPS_END_ALONE 0.82
#define THRESHOLDS_END 0.82

void kiln_tune_options_init(struct kiln_tune_options *o)
{
    memset(o, 0, sizeof *o);
    o->budget_s = 600;
    o->seed = 1;
    o->ops = KILN_TUNE_OPS_ALL;
    o->thresholds = 1;
    o->min_gain = 0.03;
    o->max_loss = KILN_TUNE_REGRESSION_MAX;
    o->select_max_loss = KILN_TUNE_SELECT_LOSS_MAX;
    o->measure_peaks = 1;
}

int kiln_tune_parse_ops(const char *list, unsigned *ops)
{
    static const char *const names[KILN_TUNE_OP_COUNT] = {"gemm", "conv", "attention"};
    *ops = 0;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < KILN_TUNE_OP_COUNT; i++)
            if (len == strlen(names[i]) && strncmp(p, names[i], len) == 0)
                found = i;
        if (found < 0)
            return -1;
        *ops |= 1u << found;
        p += len;
        if (*p == ',' && *++p == '\0')
            return -1;
    }
    return *ops ? 0 : -1;
}

/* Try `ctx`'s parameters on one shape. */
static kiln_status try_shape(kiln_context *ctx, const struct kiln_tune_shape *sh, int reps, double cutoff_ms,
                             uint64_t seed, struct kiln_trial *t)
{
    switch (sh->op) {
    case KILN_TUNE_CONV:
        return kiln_trial_conv(ctx, &sh->conv, reps, cutoff_ms, seed, t);
    case KILN_TUNE_ATTENTION:
        return kiln_trial_attention(ctx, &sh->attention, reps, cutoff_ms, seed, t);
    default:
        return kiln_trial_gemm(ctx, &sh->gemm, reps, cutoff_ms, seed, t);
    }
}

/* The shape's extents by which a class is chosen, its GFLOP per run and the
   parameter set of AUTO's plan on `ctx`. */
static kiln_status shape_facts(kiln_context *ctx, const struct kiln_tune_shape *sh, struct kiln_dims *dims,
                               double *gflop, char *set, size_t size, char *kernel, size_t kernel_size)
{
    kiln_status st;
    set[0] = kernel[0] = '\0';
    if (sh->op == KILN_TUNE_CONV) {
        const kiln_conv2d_desc *d = &sh->conv;
        size_t p = 0, q = 0, yh, yw;
        st = kiln_conv_desc_dims(d, dims);
        if (st == KILN_SUCCESS)
            st = kiln_conv2d_output_size(d, &p, &q, &yh, &yw);
        *gflop = 2e-9 * (double)d->n * (double)d->k * (double)(p * q) * (double)(d->c / d->groups) * (double)d->r *
                 (double)d->s;
        kiln_conv2d_plan *plan = NULL;
        kiln_conv2d_plan_info info;
        if (st == KILN_SUCCESS && (st = kiln_conv2d_plan_create(ctx, d, &plan)) == KILN_SUCCESS &&
            (st = kiln_conv2d_plan_describe(plan, &info)) == KILN_SUCCESS)
            snprintf(set, size, "%s", info.param_set), snprintf(kernel, kernel_size, "%s %s", info.kernel, info.params);
        kiln_conv2d_plan_destroy(plan);
    } else if (sh->op == KILN_TUNE_ATTENTION) {
        const kiln_attention_desc *d = &sh->attention;
        st = kiln_attention_desc_dims(d, dims);
        *gflop =
            4e-9 * (double)d->batch * (double)d->heads * (double)d->seq_q * (double)d->seq_kv * (double)d->head_dim;
        kiln_attention_plan *plan = NULL;
        kiln_attention_plan_info info;
        if (st == KILN_SUCCESS && (st = kiln_attention_plan_create(ctx, d, &plan)) == KILN_SUCCESS &&
            (st = kiln_attention_plan_describe(plan, &info)) == KILN_SUCCESS)
            snprintf(set, size, "%s", info.param_set), snprintf(kernel, kernel_size, "%s %s", info.kernel, info.params);
        kiln_attention_plan_destroy(plan);
    } else {
        const kiln_gemm_desc *d = &sh->gemm;
        st = kiln_gemm_desc_dims(d, dims);
        *gflop = 2e-9 * (double)d->m * (double)d->n * (double)d->k * (double)d->batch;
        kiln_gemm_plan *plan = NULL;
        kiln_gemm_plan_info info;
        if (st == KILN_SUCCESS && (st = kiln_gemm_plan_create(ctx, d, &plan)) == KILN_SUCCESS &&
            (st = kiln_gemm_plan_describe(plan, &info)) == KILN_SUCCESS)
            snprintf(set, size, "%s", info.param_set), snprintf(kernel, kernel_size, "%s %s", info.kernel, info.params);
        kiln_gemm_plan_destroy(plan);
    }
    return st;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------ */
/* Overlays                                                                 */
/* ------------------------------------------------------------------------ */

/* Merge the object `from` into `into`: objects key by key, anything else
   replaced. */
static void merge_json(cJSON *into, const cJSON *from)
{
    for (const cJSON *item = from ? from->child : NULL; item; item = item->next) {
        cJSON *have = cJSON_GetObjectItemCaseSensitive(into, item->string);
        if (cJSON_IsObject(have) && cJSON_IsObject(item))
            merge_json(have, item);
        else if (have)
            cJSON_ReplaceItemInObjectCaseSensitive(into, item->string, cJSON_Duplicate(item, 1));
        else
            cJSON_AddItemToObject(into, item->string, cJSON_Duplicate(item, 1));
    }
}

/* The overlay texts `parts` merged into one; malloc'd, NULL when out of
   memory. */
static char *merge_overlays(char *const *parts, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    for (size_t i = 0; root && i < n; i++) {
        cJSON *one = parts[i] ? cJSON_Parse(parts[i]) : NULL;
        merge_json(root, one);
        cJSON_Delete(one);
    }
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* ------------------------------------------------------------------------ */
/* The journal                                                              */
/* ------------------------------------------------------------------------ */

/* One journal line: a candidate of a group (or a probe of a threshold) and
   what its trial found. */
struct entry {
    char *group, *overlay, *reason;
    int timed;
    cJSON *ms; /* shape name -> ms */
};

struct candidate {
    union kiln_space_values v;
    char *overlay;
    int ok, expanded;
    double ms[KILN_TUNE_SHAPES_MAX]; /* per member of the group */
    double score;
};

struct search {
    const struct kiln_tune_options *o;
    struct kiln_tune_result *r;
    const struct kiln_tune_shape *shapes; /* store */
    size_t shape_count;
    struct kiln_tune_shape store[KILN_TUNE_SHAPES_MAX];
    struct kiln_dims dims[KILN_TUNE_SHAPES_MAX];
    double start, end; /* of the run */
    FILE *journal;
    struct entry *entries;
    size_t entry_count;
    /* The group being searched. */
    struct kiln_space space;
    const char *group;
    size_t members[KILN_TUNE_SHAPES_MAX]; /* its shapes */
    size_t member_count;
    double best_ms[KILN_TUNE_SHAPES_MAX];
    struct candidate *cands;
    size_t count, cap;
    char **refused; /* overlays refused by the space's checks, each counted once */
    size_t refused_count;
    double deadline;
};

static void report_progress(const struct search *s, const char *stage)
{
    if (!s->o->progress)
        return;
    struct kiln_tune_progress p = {now_s() - s->start, s->o->budget_s, stage, s->r->trials, s->r->rejected};
    s->o->progress(s->o->progress_user, &p);
}

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

/* The journal's line for `overlay` in `group` that times every shape of
   `names` (a rejection needs none). */
static const struct entry *journaled(const struct search *s, const char *group, const char *overlay,
                                     const char *const *names, size_t n)
{
    for (size_t i = 0; i < s->entry_count; i++) {
        const struct entry *e = &s->entries[i];
        if (!e->group || !e->overlay || strcmp(e->group, group) != 0 || strcmp(e->overlay, overlay) != 0)
            continue;
        int complete = 1;
        for (size_t m = 0; e->timed && m < n; m++)
            complete &= cJSON_IsNumber(cJSON_GetObjectItem(e->ms, names[m]));
        if (complete)
            return e;
    }
    return NULL;
}

static void write_journal(const struct search *s, const char *group, const char *overlay, int ok, const char *reason,
                          const char *const *names, const double *ms, size_t n)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "group", group);
    cJSON_AddStringToObject(j, "overlay", overlay);
    cJSON_AddStringToObject(j, "verdict", ok ? "timed" : "rejected");
    cJSON_AddStringToObject(j, "reason", reason);
    cJSON *obj = cJSON_AddObjectToObject(j, "ms");
    for (size_t m = 0; ok && m < n; m++)
        cJSON_AddNumberToObject(obj, names[m], ms[m]);
    char *text = cJSON_PrintUnformatted(j);
    if (text) {
        fprintf(s->journal, "%s\n", text);
        fflush(s->journal);
    }
    free(text);
    cJSON_Delete(j);
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

/* ------------------------------------------------------------------------ */
/* Trials                                                                   */
/* ------------------------------------------------------------------------ */

/* Time the shapes `idx[0..n)` on a context with `overlay` ("" or NULL:
   none), `reps` runs each, cut short past cutoff[i] (NULL: never): ms[i]
   and, where `sets` or `kernels` is not NULL, the parameter set or the
   main kernel each plan took. *ok is 0 when one was rejected, with `reason`
   saying why. */
static kiln_status measure(const struct search *s, const char *overlay, const size_t *idx, size_t n, int reps,
                           const double *cutoff, double *ms, char (*sets)[48], char (*kernels)[64], int *ok,
                           char *reason, size_t size)
{
    kiln_context_options opts;
    kiln_context_options_init(&opts);
    opts.device = s->o->device;
    opts.profile_overlay = overlay && *overlay ? overlay : NULL;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opts, &ctx);
    *ok = st == KILN_SUCCESS;
    if (st != KILN_SUCCESS) {
        snprintf(reason, size, "context: %s: %s", kiln_status_string(st), kiln_last_error_detail());
        return KILN_SUCCESS;
    }
    for (size_t i = 0; *ok && i < n; i++) {
        struct kiln_trial t;
        st = try_shape(ctx, &s->shapes[idx[i]], reps, cutoff ? cutoff[i] : 0.0, s->o->seed + idx[i], &t);
        if (st != KILN_SUCCESS)
            break;
        *ok = t.verdict == KILN_TRIAL_TIMED;
        ms[i] = t.ms;
        if (sets)
            snprintf(sets[i], sizeof sets[i], "%s", t.param_set);
        if (kernels)
            snprintf(kernels[i], sizeof kernels[i], "%s", t.kernel);
        if (!*ok)
            snprintf(reason, size, "%s: %s", s->shapes[idx[i]].name, t.reason);
    }
    kiln_context_destroy(ctx);
    return st;
}

/* Try every shape of the group with the candidate's overlay. */
static kiln_status run_trials(struct search *s, struct candidate *c, int reps, int cut, char *reason, size_t size)
{
    double cutoff[KILN_TUNE_SHAPES_MAX];
    for (size_t m = 0; m < s->member_count; m++)
        cutoff[m] = cut && s->best_ms[m] > 0 ? CUTOFF * s->best_ms[m] : 0.0;
    return measure(s, c->overlay, s->members, s->member_count, reps, cutoff, c->ms, NULL, NULL, &c->ok, reason, size);
}

/* The geometric mean over members `which` (all when NULL) of
   seed_ms / ms: the seed (the first candidate) is the baseline. */
static double score_over(const struct search *s, const double *ms, const int *which)
{
    double log_sum = 0;
    size_t n = 0;
    for (size_t m = 0; m < s->member_count; m++)
        if (!which || which[m])
            log_sum += log(s->cands[0].ms[m] / ms[m]), n++;
    return n ? exp(log_sum / (double)n) : 1.0;
}

static void member_names(const struct search *s, const char **names)
{
    for (size_t m = 0; m < s->member_count; m++)
        names[m] = s->shapes[s->members[m]].name;
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
    const char *names[KILN_TUNE_SHAPES_MAX];
    member_names(s, names);
    const struct entry *e = journaled(s, s->group, overlay, names, s->member_count);
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
            c->ms[m] = cJSON_GetObjectItem(e->ms, names[m])->valuedouble;
        s->r->journaled++;
    } else {
        kiln_status st = run_trials(s, c, REPS, 1, reason, sizeof reason);
        if (st != KILN_SUCCESS) {
            free(overlay);
            return st;
        }
        write_journal(s, s->group, overlay, c->ok, reason, names, c->ms, s->member_count);
    }
    s->count++;
    s->r->trials++;
    *tried = 1;
    if (!c->ok) {
        s->r->rejected++;
        if (s->o->log)
            fprintf(s->o->log, "%s %s: rejected: %s\n", s->group, overlay, reason);
        report_progress(s, s->group);
        return KILN_SUCCESS;
    }
    s->r->timed++;
    for (size_t m = 0; m < s->member_count; m++)
        if (s->best_ms[m] <= 0 || c->ms[m] < s->best_ms[m])
            s->best_ms[m] = c->ms[m];
    c->score = score_over(s, c->ms, NULL);
    if (s->o->log)
        fprintf(s->o->log, "%s %s: score %.3f%s\n", s->group, overlay, c->score, e ? " (journal)" : "");
    report_progress(s, s->group);
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

/* The best timed candidate over the members `which` (all when NULL),
   SIZE_MAX if none. */
static size_t best_over(const struct search *s, const int *which)
{
    size_t best = SIZE_MAX;
    double top = 0;
    for (size_t c = 0; c < s->count; c++) {
        double sc = s->cands[c].ok ? score_over(s, s->cands[c].ms, which) : 0;
        if (s->cands[c].ok && (best == SIZE_MAX || sc > top))
            best = c, top = sc;
    }
    return best;
}

/* Time the n distinct candidates `which` again with more runs and no
   cut-off, in alternation: CONFIRM_ROUNDS rounds, each running every
   candidate for a third of CONFIRM_REPS runs, in an order that turns by one
   candidate per round; per member the fastest round stays. A CPU shared
   with other work drifts by tens of percent over seconds, and a candidate
   timed after the seed, not beside it, took that drift for its own. */
static kiln_status confirm(struct search *s, const size_t *which, size_t n)
{
    double fastest[CONFIRM_MAX][KILN_TUNE_SHAPES_MAX];
    kiln_status st = KILN_SUCCESS;
    for (int round = 0; round < CONFIRM_ROUNDS && st == KILN_SUCCESS; round++)
        for (size_t t = 0; t < n && st == KILN_SUCCESS; t++) {
            const size_t slot = (t + (size_t)round) % n;
            struct candidate *c = &s->cands[which[slot]];
            if (round > 0 && !c->ok)
                continue;
            char reason[400] = "";
            if (s->o->log)
                fprintf(s->o->log, "%s: confirmation round %d of %d: %s\n", s->group, round + 1, CONFIRM_ROUNDS,
                        c->overlay);
            st = run_trials(s, c, CONFIRM_REPS / CONFIRM_ROUNDS, 0, reason, sizeof reason);
            if (st == KILN_SUCCESS && !c->ok && s->o->log)
                fprintf(s->o->log, "%s: confirmation failed: %s\n", s->group, reason);
            for (size_t m = 0; st == KILN_SUCCESS && c->ok && m < s->member_count; m++)
                fastest[slot][m] = round == 0 ? c->ms[m] : fmin(fastest[slot][m], c->ms[m]);
        }
    for (size_t t = 0; st == KILN_SUCCESS && t < n; t++)
        if (s->cands[which[t]].ok)
            memcpy(s->cands[which[t]].ms, fastest[t], s->member_count * sizeof(double));
    return st;
}

/* ------------------------------------------------------------------------ */
/* Classes of shapes                                                        */
/* ------------------------------------------------------------------------ */

/* The geometric mean over the members in `which` (all when NULL) of
   seed / row. */
static double row_score(const double *seed, const double *row, const int *which, size_t members)
{
    double log_sum = 0;
    size_t n = 0;
    for (size_t m = 0; m < members; m++)
        if (!which || which[m])
            log_sum += log(seed[m] / row[m]), n++;
    return n ? exp(log_sum / (double)n) : 1.0;
}

/* The best row of ms over the members `which`, SIZE_MAX if none is ok. */
static size_t best_row(const double *ms, const int *ok, size_t cands, size_t members, const int *which)
{
    size_t best = SIZE_MAX;
    double top = 0;
    for (size_t c = 0; c < cands; c++) {
        double sc = ok[c] ? row_score(ms, ms + c * members, which, members) : 0;
        if (ok[c] && (best == SIZE_MAX || sc > top))
            best = c, top = sc;
    }
    return best;
}

struct kiln_tune_split kiln_tune_best_split(const double *ms, const int *ok, size_t cands, size_t members,
                                            const struct kiln_dims *dims, unsigned dim_mask)
{
    struct kiln_tune_split best = {.score = 0};
    if (cands == 0 || !ok[0] || members > KILN_TUNE_SHAPES_MAX)
        return best;
    for (int d = 0; d < KILN_DIM_COUNT; d++) {
        if (!(dim_mask & (1u << d)))
            continue;
        for (size_t a = 0; a < members; a++) {
            /* Members at or below member a's extent against the rest. */
            const long cut = dims[a].v[d];
            long above = LONG_MAX;
            int low[KILN_TUNE_SHAPES_MAX], high[KILN_TUNE_SHAPES_MAX], n_low = 0;
            for (size_t m = 0; m < members; m++) {
                long v = dims[m].v[d];
                low[m] = v <= cut, high[m] = !low[m], n_low += low[m];
                if (v > cut && v < above)
                    above = v;
            }
            if (cut <= 0 || above == LONG_MAX || n_low == 0)
                continue;
            const long boundary = (long)floor(sqrt((double)cut * (double)above));
            for (int side = 0; side < 2; side++) {
                const int *in = side ? high : low, *out = side ? low : high;
                struct kiln_tune_split sp = {.def = best_row(ms, ok, cands, members, out),
                                             .cls = best_row(ms, ok, cands, members, in),
                                             .dim = d};
                if (sp.def == SIZE_MAX || sp.cls == SIZE_MAX || sp.def == sp.cls)
                    continue;
                double log_sum = 0;
                for (size_t m = 0; m < members; m++) {
                    sp.in[m] = in[m];
                    log_sum += log(ms[m] / ms[(in[m] ? sp.cls : sp.def) * members + m]);
                }
                sp.score = exp(log_sum / (double)members);
                sp.lo = side ? boundary + 1 : 1;
                sp.hi = side ? LONG_MAX : boundary;
                /* The same parts either way round: the default (what every
                   shape outside the class takes) is the better of the two
                   over all the shapes. */
                const int tie = fabs(sp.score - best.score) <= 1e-12 * best.score;
                const double def_score = row_score(ms, ms + sp.def * members, NULL, members),
                             best_def = best.score > 0 ? row_score(ms, ms + best.def * members, NULL, members) : 0;
                /* Of the same parts along two dimensions, the one they lie
                   farther apart on: its boundary is the surer. */
                sp.gap = (double)above / (double)cut;
                if ((!tie && sp.score > best.score) || (tie && def_score > best_def * (1 + 1e-12)) ||
                    (tie && fabs(def_score - best_def) <= 1e-12 * best_def && sp.gap > best.gap))
                    best = sp;
            }
        }
    }
    return best;
}

/* kiln_tune_best_split over the group's candidates. */
static struct kiln_tune_split best_split(const struct search *s)
{
    struct kiln_tune_split none = {.score = 0};
    double *ms = malloc(s->count * s->member_count * sizeof *ms);
    int *ok = malloc(s->count * sizeof *ok);
    struct kiln_dims dims[KILN_TUNE_SHAPES_MAX];
    if (!ms || !ok) {
        free(ms), free(ok);
        return none;
    }
    for (size_t c = 0; c < s->count; c++) {
        ok[c] = s->cands[c].ok;
        memcpy(ms + c * s->member_count, s->cands[c].ms, s->member_count * sizeof *ms);
    }
    for (size_t m = 0; m < s->member_count; m++)
        dims[m] = s->dims[s->members[m]];
    struct kiln_tune_split sp =
        kiln_tune_best_split(ms, ok, s->count, s->member_count, dims, kiln_param_groups[s->space.group].dims);
    free(ms), free(ok);
    return sp;
}

/* The group's overlay with the split's class: the changes of `def` to the
   seed and a class holding every value of `cls`. */
static char *class_overlay(const struct search *s, const struct kiln_tune_split *sp, const union kiln_space_values *def,
                           const union kiln_space_values *cls_values)
{
    char *def_text = kiln_space_overlay(&s->space, def);
    cJSON *root = def_text ? cJSON_Parse(def_text) : NULL;
    free(def_text);
    cJSON *group = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "kernels"), s->group);
    /* The class holds every field: one it did not hold would follow the
       group's default set, and a later overlay of the default (a search
       from this profile) would change the class with it, or make it
       invalid. */
    cJSON *params = cJSON_CreateObject();
    const struct kiln_param_group *grp = &kiln_param_groups[s->space.group];
    for (size_t f = 0; params && f < grp->count; f++)
        kiln_param_write((int)s->space.group, (int)f, cls_values, params);
    char *text = NULL;
    if (group && params) {
        cJSON *item = cJSON_CreateObject(), *when = cJSON_AddObjectToObject(item, "when");
        char name[KILN_CLASS_NAME_MAX];
        const char *dim = kiln_dim_names[sp->dim];
        if (sp->hi == LONG_MAX)
            snprintf(name, sizeof name, "%s-from-%ld", dim, sp->lo);
        else
            snprintf(name, sizeof name, "%s-to-%ld", dim, sp->hi);
        cJSON_AddStringToObject(item, "name", name);
        cJSON *range = cJSON_AddArrayToObject(when, dim);
        cJSON_AddItemToArray(range, cJSON_CreateNumber((double)sp->lo));
        cJSON_AddItemToArray(range, sp->hi == LONG_MAX ? cJSON_CreateNull() : cJSON_CreateNumber((double)sp->hi));
        cJSON_AddItemToObject(item, "params", params);
        params = NULL;
        cJSON_AddItemToArray(cJSON_AddArrayToObject(group, "classes"), item);
        text = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(params);
    cJSON_Delete(root);
    return text;
}

/* What the members `which` of the group run on a context with `overlay`:
   each plan's kernel and parameters, one after the other. */
static kiln_status signature(const struct search *s, const char *overlay, const int *which, char *out, size_t size)
{
    kiln_context_options opts;
    kiln_context_options_init(&opts);
    opts.device = s->o->device;
    opts.profile_overlay = overlay;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opts, &ctx);
    out[0] = '\0';
    for (size_t m = 0; st == KILN_SUCCESS && m < s->member_count; m++) {
        if (which && !which[m])
            continue;
        struct kiln_dims dims;
        double gflop;
        char set[48], kernel[400];
        st = shape_facts(ctx, &s->shapes[s->members[m]], &dims, &gflop, set, sizeof set, kernel, sizeof kernel);
        size_t len = strlen(out);
        if (st == KILN_SUCCESS)
            snprintf(out + len, size - len, "%s|", kernel);
    }
    kiln_context_destroy(ctx);
    return st;
}

/* Set back to `base`'s value every field of *v that changes no kernel the
   members `which` run: a value no shape exercises (a second register tile
   none of them takes, say) stays as the profile had it. */
static kiln_status minimize(struct search *s, union kiln_space_values *v, const union kiln_space_values *base,
                            const int *which)
{
    const enum kiln_group_id g = s->space.group;
    const struct kiln_param_group *grp = &kiln_param_groups[g];
    char *overlay = kiln_space_overlay(&s->space, v);
    char want[4096], got[4096], why[256];
    kiln_status st = overlay ? signature(s, overlay, which, want, sizeof want)
                             : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
    free(overlay);
    for (size_t f = 0; st == KILN_SUCCESS && f < grp->count; f++) {
        /* A compiler option is always exercised: every member runs the
           group's kernel, and its plan description need not name every
           option it was built with. */
        if (grp->fields[f].define || kiln_param_get((int)g, (int)f, v) == kiln_param_get((int)g, (int)f, base))
            continue;
        union kiln_space_values back = *v;
        const struct kiln_param_field *fd = &grp->fields[f];
        memcpy((char *)&back + fd->offset, (const char *)base + fd->offset,
               fd->type == KILN_PARAM_NUMBER ? sizeof(double) : sizeof(int));
        if (kiln_space_check(&s->space, &back, why, sizeof why, NULL) != 0)
            continue;
        overlay = kiln_space_overlay(&s->space, &back);
        st = overlay ? signature(s, overlay, which, got, sizeof got)
                     : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
        free(overlay);
        if (st == KILN_SUCCESS && strcmp(want, got) == 0) {
            if (s->o->log)
                fprintf(s->o->log, "%s.%s: no shape runs another kernel for it: left as the profile has it\n", s->group,
                        fd->key);
            *v = back;
        }
    }
    if (st != KILN_SUCCESS) /* a set that made its plans once makes them again */
        st = kiln_error(KILN_ERROR_INTERNAL, "kiln-tune: %s: %s", s->group, kiln_last_error_detail());
    return st;
}

/* Search the group of shape members, confirm what it found, and give the
   overlay to keep (NULL: nothing gained past min_gain). */
static kiln_status tune_group(struct search *s, int g, const struct kiln_profile *profile,
                              const struct kiln_device_desc *dev, char **kept)
{
    *kept = NULL;
    memset(s->best_ms, 0, sizeof s->best_ms);
    s->count = 0;
    const void *seed = (const char *)kiln_profile_params(profile) + kiln_param_groups[g].offset;
    kiln_status st = kiln_space_init(&s->space, (enum kiln_group_id)g, seed, dev);
    s->space.on_reject = count_refusal;
    s->space.user = s;
    if (st == KILN_SUCCESS)
        st = search_group(s);
    size_t best = best_over(s, NULL); /* the seed itself when nothing beat it */
    if (st != KILN_SUCCESS || best == SIZE_MAX)
        return st;
    /* A class only where the matched profile has none for the group (a
       child's classes replace its parent's). */
    struct kiln_tune_split sp = {.score = 0};
    if (kiln_profile_class_count(profile, (enum kiln_group_id)g) == 0 && s->member_count > 1)
        sp = best_split(s);
    const int use_class = sp.score > s->cands[best].score * (1.0 + KILN_TUNE_CLASS_GAIN);

    /* Confirm the seed and the winners with more runs, side by side: short
       problems are noisy enough to crown a lucky candidate. */
    const size_t again[CONFIRM_MAX] = {0, best, use_class ? sp.def : 0, use_class ? sp.cls : 0};
    size_t distinct[CONFIRM_MAX], n = 0;
    for (int i = 0; i < CONFIRM_MAX; i++) {
        int done = i > 0 && again[i] == 0;
        for (int j = 0; j < i; j++)
            done |= again[j] == again[i];
        if (!done)
            distinct[n++] = again[i];
    }
    st = confirm(s, distinct, n);
    if (st != KILN_SUCCESS || !s->cands[0].ok)
        return st;
    double single = s->cands[best].ok ? score_over(s, s->cands[best].ms, NULL) : 0;
    double classed = 0;
    if (use_class && s->cands[sp.def].ok && s->cands[sp.cls].ok) {
        double log_sum = 0;
        for (size_t m = 0; m < s->member_count; m++)
            log_sum += log(s->cands[0].ms[m] / s->cands[sp.in[m] ? sp.cls : sp.def].ms[m]);
        classed = exp(log_sum / (double)s->member_count);
    }
    for (size_t m = 0; m < s->member_count; m++)
        s->r->shapes[s->members[m]].before_ms = s->cands[0].ms[m];
    if (classed > single * (1.0 + KILN_TUNE_CLASS_GAIN) && classed > 1.0 + s->o->min_gain) {
        union kiln_space_values def = s->cands[sp.def].v, cls = s->cands[sp.cls].v;
        int out[KILN_TUNE_SHAPES_MAX];
        for (size_t m = 0; m < s->member_count; m++)
            out[m] = !sp.in[m];
        kiln_status st2 = minimize(s, &def, &s->space.seed, out);
        if (st2 == KILN_SUCCESS)
            st2 = minimize(s, &cls, &def, sp.in);
        if (st2 != KILN_SUCCESS)
            return st2;
        *kept = class_overlay(s, &sp, &def, &cls);
        if (!*kept)
            return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: class overlay");
        s->r->classes++;
        for (size_t m = 0; m < s->member_count; m++)
            s->r->shapes[s->members[m]].after_ms = s->cands[sp.in[m] ? sp.cls : sp.def].ms[m];
        if (s->o->log)
            fprintf(s->o->log, "%s: score %.3f confirmed with a class of its own (%.3f with one set): %s\n", s->group,
                    classed, single, *kept);
    } else if (single > 1.0 + s->o->min_gain) {
        /* More than 3% (min_gain) over the seed: below that, a difference
           is within the run-to-run noise of a CPU. */
        union kiln_space_values v = s->cands[best].v;
        st = minimize(s, &v, &s->space.seed, NULL);
        if (st != KILN_SUCCESS)
            return st;
        *kept = kiln_space_overlay(&s->space, &v);
        if (!*kept)
            return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
        for (size_t m = 0; m < s->member_count; m++)
            s->r->shapes[s->members[m]].after_ms = s->cands[best].ms[m];
        if (s->o->log)
            fprintf(s->o->log, "%s %s: score %.3f confirmed over %d runs beside the seed's\n", s->group, *kept, single,
                    CONFIRM_REPS);
    } else if (s->o->log) {
        fprintf(s->o->log, "%s: the best found scores %.3f confirmed: the profile's values stay\n", s->group, single);
    }
    return KILN_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Thresholds between algorithms                                            */
/* ------------------------------------------------------------------------ */

#define PROBES_MAX 8

/* A ladder of problems along which one algorithm (small) gives way to
   another (large). A maximum threshold (the small side up to it) becomes
   the last size from the bottom up to which the small side wins; a
   minimum (the large side from it on) the first size from which the large
   side wins up to the top. The sides are the rungs' algorithms, or, for a
   threshold that chooses between two ways of one kernel (group is a kernel
   group, and the field one of its host fields), the overlays `sides`. */
struct ladder {
    const char *field;
    enum kiln_group_id group; /* KILN_GROUP_select, or the kernel group the field belongs to */
    const char *sides[2];     /* overlays forcing the small and the large side, or NULL */
    int is_max;
    long never; /* the value that takes the large side everywhere (max) or never (min) */
    const char *metric_name;
    size_t count;
    long metric[PROBES_MAX];
    struct kiln_tune_shape small[PROBES_MAX], large[PROBES_MAX];
    char names[2][PROBES_MAX][48];
};

/* One side of a ladder of 1x1 convolutions: its algorithm and its rungs'
   names (a format of the plane's side). */
struct side {
    kiln_conv_algo algo;
    const char *name;
};

/* A minimum threshold of select over 1x1 convolutions of c -> k channels
   on square planes of `sides` (the metric: the plane's pixels), the small
   side below it and the large side from it on. */
static void plane_ladder(struct ladder *l, const char *field, const size_t *sides, size_t count, size_t c, size_t k,
                         const struct side two[2])
{
    *l = (struct ladder){
        .group = KILN_GROUP_select, .field = field, .is_max = 0, .never = 1L << 30, .metric_name = "pixels"};
    for (size_t i = 0; i < count && i < PROBES_MAX; i++, l->count++) {
        const size_t e = sides[i];
        struct kiln_tune_shape *sh[2] = {&l->small[i], &l->large[i]};
        for (int j = 0; j < 2; j++) {
            snprintf(l->names[j][i], sizeof l->names[j][i], two[j].name, e);
            *sh[j] = kiln_tune_conv_shape(l->names[j][i], c, e, k, 1, 1, 1);
            sh[j]->conv.algo = two[j].algo;
        }
        l->metric[i] = (long)(e * e);
    }
}

/* The fewest whole row panels of the narrow tile, three or more, to
   which the CPU family's tile rule gives the narrow tile over 1024 columns
   (32 rows on amd-zen4: 8 x 16 against 5 x 64's seven balanced panels),
   in rows; 0 where none up to eight panels does. */
static size_t narrow_ladder_rows(const struct kiln_param_gemm_cpu *cpu)
{
    const size_t mr = cpu->narrow_mr > 0 ? (size_t)cpu->narrow_mr : 0;
    for (size_t m = 3 * mr; mr && m <= 8 * mr; m += mr) {
        struct kiln_options o = {0};
        const struct kiln_cpu_tile t = kiln_cpu_tile_choose(cpu, m, 1024, &o);
        kiln_options_free(&o);
        if (t.narrow)
            return m;
    }
    return 0;
}

static size_t ladders(const struct kiln_tune_options *o, const kiln_context *ctx, const struct kiln_params *p,
                      struct ladder *out)
{
    size_t n = 0;
    const int route = p->select.gemm_route;
    const kiln_gemm_algo family = route == KILN_ROUTE_CPU ? KILN_GEMM_CPU : KILN_GEMM_TILED;
    if ((o->ops & (1u << KILN_TUNE_GEMM)) && route != KILN_ROUTE_CLBLAST) {
        /* The narrow tile reads B in place or the wide one does
           (gemm.cpu.narrow_in_place_l2): products of a few row panels of
           the narrow tile (the fewest rows above two panels that take it)
           by square Bs of 2.25 to 36 MiB, measured in the percent of L2
           the field counts in. Placed before gemm_smallm_max, whose ladder
           times the CPU family at such rows. */
        const size_t narrow_rows =
            family == KILN_GEMM_CPU && ctx->vector_kernels ? narrow_ladder_rows(&p->gemm_cpu) : 0;
        if (narrow_rows) {
            static const size_t sides[] = {768, 1024, 1536, 2048, 3072};
            const struct kiln_param_group *g = &kiln_param_groups[KILN_GROUP_gemm_cpu];
            const double top = g->fields[kiln_param_field_find(KILN_GROUP_gemm_cpu, "narrow_in_place_l2")].max;
            struct ladder *l = &out[n++];
            *l = (struct ladder){.field = "narrow_in_place_l2",
                                 .group = KILN_GROUP_gemm_cpu,
                                 .sides = {"{\"kernels\":{\"gemm.cpu\":{\"narrow_in_place_l2\":10000}}}",
                                           "{\"kernels\":{\"gemm.cpu\":{\"narrow_in_place_l2\":0}}}"},
                                 .is_max = 1,
                                 .never = 0,
                                 .metric_name = "l2%"};
            for (size_t r = 0; r < sizeof sides / sizeof *sides; r++) {
                const size_t e = sides[r], i = l->count;
                const long metric = kiln_gemm_cpu_in_place_l2(ctx, e * e * sizeof(float));
                if ((double)metric > top) /* past the field's range (a small L2): not placeable */
                    continue;
                snprintf(l->names[0][i], 48, "cpu %zux%zux%zu, narrow", narrow_rows, e, e);
                snprintf(l->names[1][i], 48, "cpu %zux%zux%zu, wide", narrow_rows, e, e);
                l->small[i] = kiln_tune_gemm_shape(l->names[0][i], narrow_rows, e, e, 1);
                l->large[i] = kiln_tune_gemm_shape(l->names[1][i], narrow_rows, e, e, 1);
                l->small[i].gemm.algo = l->large[i].gemm.algo = KILN_GEMM_CPU;
                l->metric[i] = metric;
                l->count++;
            }
        }
        /* B of 2048 x 2048 (16 MiB): a layer's weights, past a core's L2,
           where the small-M kernel streams B once and the CPU family packs
           it first (at 1024 x 1024 B may sit in the caches, a third of what
           a network's weights get). */
        static const size_t rows[] = {1, 2, 4, 8, 16, 32, 64};
        struct ladder *l = &out[n++];
        *l = (struct ladder){
            .field = "gemm_smallm_max", .group = KILN_GROUP_select, .is_max = 1, .never = 0, .metric_name = "m"};
        for (size_t i = 0; i < sizeof rows / sizeof *rows; i++, l->count++) {
            snprintf(l->names[0][i], 48, "smallm m=%zu", rows[i]);
            snprintf(l->names[1][i], 48, "route m=%zu", rows[i]);
            l->small[i] = kiln_tune_gemm_shape(l->names[0][i], rows[i], 2048, 2048, 1);
            l->large[i] = kiln_tune_gemm_shape(l->names[1][i], rows[i], 2048, 2048, 1);
            l->small[i].gemm.algo = KILN_GEMM_SMALLM;
            l->large[i].gemm.algo = family;
            l->metric[i] = (long)rows[i];
        }
        static const size_t sides[] = {16, 32, 48, 64, 96, 128, 192};
        l = &out[n++];
        *l = (struct ladder){
            .field = "gemm_direct_max", .group = KILN_GROUP_select, .is_max = 1, .never = 0, .metric_name = "mnk"};
        for (size_t i = 0; i < sizeof sides / sizeof *sides; i++, l->count++) {
            size_t e = sides[i];
            snprintf(l->names[0][i], 48, "direct %zu^3", e);
            snprintf(l->names[1][i], 48, "route %zu^3", e);
            l->small[i] = kiln_tune_gemm_shape(l->names[0][i], e, e, e, 1);
            l->large[i] = kiln_tune_gemm_shape(l->names[1][i], e, e, e, 1);
            l->small[i].gemm.algo = KILN_GEMM_DIRECT;
            l->large[i].gemm.algo = family;
            l->metric[i] = (long)(e * e * e);
        }
    }
    if (o->ops & (1u << KILN_TUNE_CONV)) {
        static const size_t channels[] = {16, 32, 64, 128, 256};
        struct ladder *l = &out[n++];
        *l = (struct ladder){.field = "conv_wino_min_channels",
                             .group = KILN_GROUP_select,
                             .is_max = 0,
                             .never = 1L << 30,
                             .metric_name = "c"};
        for (size_t i = 0; i < sizeof channels / sizeof *channels; i++, l->count++) {
            size_t c = channels[i];
            snprintf(l->names[0][i], 48, "implicit-gemm 3x3 c=k=%zu 28^2", c);
            snprintf(l->names[1][i], 48, "winograd-4x4 3x3 c=k=%zu 28^2", c);
            l->small[i] = kiln_tune_conv_shape(l->names[0][i], c, 28, c, 3, 1, 1);
            l->large[i] = kiln_tune_conv_shape(l->names[1][i], c, 28, c, 3, 1, 1);
            l->small[i].conv.algo = KILN_CONV_IMPLICIT_GEMM;
            l->large[i].conv.algo = KILN_CONV_WINOGRAD_4X4;
            l->metric[i] = (long)c;
        }
        static const size_t sides[] = {7, 10, 14, 20, 28, 40, 56};
        plane_ladder(&out[n++], "conv_1x1_igemm_min_pixels", sides, sizeof sides / sizeof *sides, 256, 256,
                     (const struct side[]){{KILN_CONV_GEMM_1X1, "gemm-1x1 c=k=256 %zu^2"},
                                           {KILN_CONV_IMPLICIT_GEMM, "implicit-gemm 1x1 c=k=256 %zu^2"}});
        /* Direct against implicit GEMM's CPU kernel for 1x1 layers on large
           planes (MobileNet's conv2_1/pw: 32 channels at 112x112). */
        if (p->select.conv_igemm_route == KILN_IGEMM_CPU) {
            static const size_t planes[] = {28, 40, 56, 80, 112, 160};
            plane_ladder(&out[n++], "conv_1x1_direct_min_pixels", planes, sizeof planes / sizeof *planes, 32, 64,
                         (const struct side[]){{KILN_CONV_IMPLICIT_GEMM, "implicit-gemm 1x1 c=32 k=64 %zu^2"},
                                               {KILN_CONV_DIRECT, "direct 1x1 c=32 k=64 %zu^2"}});
        }
        /* The CPU family's flipped product reads B in place or packs it
           first (gemm.cpu.in_place_l2): 1x1 convolutions at 14x14 (ResNet-50's
           res4 and MobileNet's conv5 layers) over more and more channels, B
           spanning 200 KB to 1.6 MB, measured in the percent of L2 the
           field counts in. */
        if (family == KILN_GEMM_CPU && ctx->vector_kernels) {
            static const size_t depth[] = {256, 512, 768, 1024, 1536, 2048};
            l = &out[n++];
            *l = (struct ladder){.field = "in_place_l2",
                                 .group = KILN_GROUP_gemm_cpu,
                                 .sides = {"{\"kernels\":{\"gemm.cpu\":{\"in_place_l2\":1000}}}",
                                           "{\"kernels\":{\"gemm.cpu\":{\"in_place_l2\":0}}}"},
                                 .is_max = 1,
                                 .never = 0,
                                 .metric_name = "l2%"};
            for (size_t i = 0; i < sizeof depth / sizeof *depth; i++, l->count++) {
                const size_t c = depth[i];
                snprintf(l->names[0][i], 48, "gemm-1x1 c=%zu k=256 14^2, B in place", c);
                snprintf(l->names[1][i], 48, "gemm-1x1 c=%zu k=256 14^2, B packed", c);
                l->small[i] = kiln_tune_conv_shape(l->names[0][i], c, 14, 256, 1, 1, 1);
                l->large[i] = kiln_tune_conv_shape(l->names[1][i], c, 14, 256, 1, 1, 1);
                l->small[i].conv.algo = l->large[i].conv.algo = KILN_CONV_GEMM_1X1;
                l->metric[i] = kiln_gemm_cpu_in_place_l2(ctx, c * 14 * 14 * sizeof(float));
            }
        }
    }
    return n;
}

/* One probe of a ladder on `ctx`, from the journal or timed: ms, or
   INFINITY when rejected (an algorithm that does not apply loses). */
static kiln_status probe(struct search *s, kiln_context *ctx, const struct kiln_tune_shape *sh, const char *placed,
                         int reps, double *ms)
{
    static const char *const names[1] = {"probe"};
    char key[512]; /* the probe, the thresholds it ran under, and a confirmation's runs */
    snprintf(key, sizeof key, "%s %s%s", sh->name, placed, reps == PROBE_REPS ? "" : " confirmed");
    const struct entry *e = journaled(s, "select", key, names, 1);
    if (e) {
        s->r->journaled++, s->r->trials++;
        *ms = e->timed ? cJSON_GetObjectItem(e->ms, "probe")->valuedouble : INFINITY;
        return KILN_SUCCESS;
    }
    struct kiln_trial t;
    kiln_status st = try_shape(ctx, sh, reps, 0.0, s->o->seed, &t);
    if (st != KILN_SUCCESS)
        return st;
    s->r->trials++;
    const int ok = t.verdict == KILN_TRIAL_TIMED;
    *ms = ok ? t.ms : INFINITY;
    write_journal(s, "select", key, ok, t.reason, names, &t.ms, 1);
    report_progress(s, "thresholds");
    return KILN_SUCCESS;
}

/* The log of a probe's time, a side that does not apply costing as much
   as 10^30 ms. */
static double log_ms(double ms) { return log(isfinite(ms) && ms > 0 ? ms : 1e30); }

long kiln_tune_place(int is_max, const long *metric, const double *small, const double *large, size_t n, long current,
                     long never, double min_gain)
{
    /* Split k: the small side on rungs 0 .. k-1, the large side on the
       rest; its cost, the sum of the log times it takes. */
    size_t here = 0; /* the current value's split */
    while (here < n && (is_max ? metric[here] <= current : metric[here] < current))
        here++;
    double cost[PROBES_MAX + 1], best_cost = INFINITY;
    size_t best = here;
    for (size_t k = 0; k <= n && n <= PROBES_MAX; k++) {
        cost[k] = 0;
        for (size_t i = 0; i < n; i++)
            cost[k] += log_ms(i < k ? small[i] : large[i]);
        const size_t d = k > here ? k - here : here - k, d_best = best > here ? best - here : here - best;
        if (cost[k] < best_cost - 1e-9 || (fabs(cost[k] - best_cost) <= 1e-9 && d < d_best))
            best = k, best_cost = cost[k];
    }
    if (n == 0 || n > PROBES_MAX || best == here || exp((cost[here] - best_cost) / (double)n) <= 1.0 + min_gain)
        return current;
    if (is_max)
        return best ? metric[best - 1] : never;
    return best < n ? metric[best] : never;
}

/* Walk the ladder and place the threshold: its small side timed on
   ctx[0], its large side on ctx[1]. */
static kiln_status place(struct search *s, kiln_context *const ctx[2], const struct ladder *l, const char *placed,
                         long current, struct kiln_tune_threshold *th)
{
    snprintf(th->field, sizeof th->field, "%s.%s", kiln_param_groups[l->group].name, l->field);
    th->before = th->after = current;
    double small[PROBES_MAX], large[PROBES_MAX];
    size_t used = 0;
    for (size_t i = 0; i < l->count; i++, used++) {
        if (now_s() >= s->deadline)
            return KILN_SUCCESS; /* out of budget: the profile's value stays, not measured */
        kiln_status st = probe(s, ctx[0], &l->small[i], placed, PROBE_REPS, &small[i]);
        if (st == KILN_SUCCESS)
            st = probe(s, ctx[1], &l->large[i], placed, PROBE_REPS, &large[i]);
        if (st != KILN_SUCCESS)
            return st;
        size_t len = strlen(th->evidence);
        snprintf(th->evidence + len, sizeof th->evidence - len, "%s%s=%ld %.3g/%.3g", len ? ", " : "", l->metric_name,
                 l->metric[i], small[i], large[i]);
    }
    th->measured = 1;
    th->after = kiln_tune_place(l->is_max, l->metric, small, large, used, current, l->never, s->o->min_gain);
    /* A move rests on the rungs that change sides: each is timed again,
       nine runs a side, the large side first, and each side keeps its
       faster time, so that one noisy probe (a 0.08 ms layer timed at half
       its speed on a shared CPU) cannot carry the threshold with it. */
    for (size_t i = 0; th->after != current && i < used && now_s() < s->deadline; i++) {
        const int was_small = l->is_max ? l->metric[i] <= current : l->metric[i] < current;
        const int now_small = l->is_max ? l->metric[i] <= th->after : l->metric[i] < th->after;
        if (was_small == now_small)
            continue;
        double again_small = INFINITY, again_large = INFINITY;
        kiln_status st = probe(s, ctx[1], &l->large[i], placed, CONFIRM_REPS, &again_large);
        if (st == KILN_SUCCESS)
            st = probe(s, ctx[0], &l->small[i], placed, CONFIRM_REPS, &again_small);
        if (st != KILN_SUCCESS)
            return st;
        small[i] = fmin(small[i], again_small), large[i] = fmin(large[i], again_large);
        size_t len = strlen(th->evidence);
        snprintf(th->evidence + len, sizeof th->evidence - len, "; again %s=%ld %.3g/%.3g", l->metric_name,
                 l->metric[i], again_small, again_large);
    }
    th->after = kiln_tune_place(l->is_max, l->metric, small, large, used, current, l->never, s->o->min_gain);
    if (s->o->log)
        fprintf(s->o->log, "%s: %ld -> %ld (ms small/large side: %s)\n", th->field, th->before, th->after,
                th->evidence);
    return KILN_SUCCESS;
}

/* The thresholds, timed with the kernels of `overlay`; the overlay of
   those that changed (select's fields, and gemm.cpu.in_place_l2 under
   kernels) goes to *changed (NULL: none). */
static kiln_status tune_thresholds(struct search *s, const kiln_context *ctx, const char *overlay, char **changed)
{
    *changed = NULL;
    struct ladder *ls = calloc(KILN_TUNE_THRESHOLDS_MAX, sizeof *ls);
    if (!ls)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: ladders");
    const size_t n = ladders(s->o, ctx, kiln_profile_params(ctx->profile), ls);
    cJSON *root = cJSON_CreateObject(), *select = cJSON_AddObjectToObject(root, "select");
    kiln_status st = root && select ? KILN_SUCCESS : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: thresholds");
    int moved = 0;
    for (size_t i = 0; st == KILN_SUCCESS && i < n; i++) {
        /* Each ladder with the kernels just tuned and the thresholds placed
           before it: Winograd's products, for one, take the GEMM family
           that gemm_direct_max picks. A ladder with sides of its own times
           each on a context of its own, the side's overlay on top. */
        char *placed = cJSON_PrintUnformatted(root);
        char *texts[3] = {NULL, NULL, NULL};
        kiln_context *ctxs[3] = {NULL, NULL, NULL}; /* the thresholds' context, then each side's */
        for (int c = 0; c < 3 && st == KILN_SUCCESS; c++) {
            if (c > 0 && !ls[i].sides[c - 1]) {
                ctxs[c] = ctxs[0];
                continue;
            }
            char *parts[3] = {(char *)overlay, placed, c > 0 ? (char *)ls[i].sides[c - 1] : NULL};
            texts[c] = placed ? merge_overlays(parts, c > 0 ? 3 : 2) : NULL;
            kiln_context_options opts;
            kiln_context_options_init(&opts);
            opts.device = s->o->device;
            opts.profile_overlay = texts[c];
            st = texts[c] ? kiln_context_create(&opts, &ctxs[c])
                          : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: thresholds");
        }
        const struct kiln_param_group *grp = &kiln_param_groups[ls[i].group];
        const int f = kiln_param_field_find((int)ls[i].group, ls[i].field);
        struct kiln_tune_threshold *th = &s->r->thresholds[s->r->threshold_count++];
        if (st == KILN_SUCCESS) {
            /* The value in force with the kernels just tuned. */
            const char *values = (const char *)kiln_profile_params(ctxs[0]->profile) + grp->offset;
            st = place(s, ctxs + 1, &ls[i], placed, (long)kiln_param_get((int)ls[i].group, f, values), th);
        }
        if (st == KILN_SUCCESS && th->after != th->before) {
            cJSON *into = select;
            if (ls[i].group != KILN_GROUP_select) {
                cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
                if (!kernels)
                    kernels = cJSON_AddObjectToObject(root, "kernels");
                into = kernels ? cJSON_GetObjectItemCaseSensitive(kernels, grp->name) : NULL;
                if (kernels && !into)
                    into = cJSON_AddObjectToObject(kernels, grp->name);
            }
            if (!into || !cJSON_AddNumberToObject(into, ls[i].field, (double)th->after))
                st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: thresholds");
            moved = 1;
        }
        for (int c = 2; c >= 0; c--)
            if (c == 0 || ctxs[c] != ctxs[0])
                kiln_context_destroy(ctxs[c]);
        for (int c = 0; c < 3; c++)
            free(texts[c]);
        free(placed);
    }
    if (select && !select->child)
        cJSON_DeleteItemFromObjectCaseSensitive(root, "select");
    if (st == KILN_SUCCESS && moved && !(*changed = cJSON_PrintUnformatted(root)))
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: thresholds");
    cJSON_Delete(root);
    free(ls);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The profile                                                              */
/* ------------------------------------------------------------------------ */

/* Rounds of the before/after table. */
#define TABLE_ROUNDS 3

/* Every shape with AUTO's plans on the matched profile and on `overlay`:
   TABLE_ROUNDS rounds of both, each side first in every other round, each the median of a
   third of CONFIRM_REPS runs, and the fastest round of each kept. A CPU
   shared with other work drifts by tens of percent over seconds; timing
   both sides in alternation leaves the drift to both alike. */
static kiln_status before_after(struct search *s, const char *overlay)
{
    for (size_t i = 0; i < s->shape_count; i++) {
        struct kiln_tune_shape_result *sr = &s->r->shapes[i];
        char reason[400] = "", sets[1][48] = {""}, kernels[2][64] = {"", ""}; /* before, after */
        int ok = 1;
        kiln_status st = KILN_SUCCESS;
        sr->before_ms = sr->after_ms = 0;
        for (int round = 0; round < TABLE_ROUNDS && st == KILN_SUCCESS && ok; round++) {
            double before = 0, after = 0;
            /* Each side first in every other round. */
            for (int side = 0; side < 2 && st == KILN_SUCCESS && ok; side++) {
                const int is_after = (side + round) % 2;
                st = measure(s, is_after ? overlay : NULL, &i, 1, CONFIRM_REPS / TABLE_ROUNDS, NULL,
                             is_after ? &after : &before, is_after ? sets : NULL, &kernels[is_after], &ok, reason,
                             sizeof reason);
            }
            if (st == KILN_SUCCESS && ok) {
                sr->before_ms = round == 0 ? before : fmin(sr->before_ms, before);
                sr->after_ms = round == 0 ? after : fmin(sr->after_ms, after);
            }
        }
        if (st != KILN_SUCCESS)
            return st;
        if (!ok)
            return kiln_error(KILN_ERROR_INTERNAL, "kiln-tune: the tuned profile fails where it was tuned: %s", reason);
        snprintf(sr->set_after, sizeof sr->set_after, "%s", sets[0]);
        snprintf(sr->kernel_before, sizeof sr->kernel_before, "%s", kernels[0]);
        snprintf(sr->kernel_after, sizeof sr->kernel_after, "%s", kernels[1]);
        report_progress(s, "before/after");
    }
    return KILN_SUCCESS;
}

static kiln_status write_profile(kiln_context *ctx, const struct kiln_tune_options *o, const char *dir,
                                 const char *overlay, double start, struct kiln_tune_result *r)
{
    if (o->measure_peaks) {
        struct kiln_peaks peaks;
        kiln_status st = kiln_measure_peaks(ctx, &peaks);
        if (st != KILN_SUCCESS)
            return st;
        r->peak_gflops = peaks.gflops, r->peak_gbps = peaks.gbps;
    }
    cJSON *root = cJSON_Parse(overlay);
    /* A group whose search kept nothing a shape runs is no change. */
    cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    for (cJSON *g = kernels ? kernels->child : NULL, *next; g; g = next) {
        next = g->next;
        if (cJSON_IsObject(g) && !g->child)
            cJSON_Delete(cJSON_DetachItemViaPointer(kernels, g));
    }
    if (kernels && !kernels->child)
        cJSON_DeleteItemFromObjectCaseSensitive(root, "kernels");
    if (root && r->peak_gflops > 0) {
        cJSON *dev = cJSON_AddObjectToObject(root, "device");
        cJSON_AddNumberToObject(dev, "peak_gflops", r->peak_gflops);
        cJSON_AddNumberToObject(dev, "peak_gbps", r->peak_gbps);
    }
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    struct kiln_profile *values = NULL;
    kiln_status st =
        text ? kiln_profile_derive(ctx->profile, text, &values) : kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune");
    if (text)
        snprintf(r->changes, sizeof r->changes, "%s", text);
    free(text);
    if (st != KILN_SUCCESS)
        return st;
    struct kiln_profile_measurement m[KILN_TUNE_SHAPES_MAX];
    char what[KILN_TUNE_SHAPES_MAX][80];
    for (size_t i = 0; i < r->shape_count; i++) {
        const struct kiln_tune_shape_result *sr = &r->shapes[i];
        snprintf(what[i], sizeof what[i], "%s GFLOP/s", sr->name);
        m[i].what = what[i];
        m[i].value = sr->gflop / (sr->after_ms * 1e-3);
        m[i].baseline = sr->gflop / (sr->before_ms * 1e-3);
    }
    char basis[320];
    snprintf(
        basis, sizeof basis,
        "measured by kiln-tune in %.0f s: %zu trials (%zu rejected), %zu classes; before/after: AUTO's plans on %s "
        "and on this profile",
        now_s() - start, r->trials, r->rejected, r->classes, r->matched);
    char date[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%Y-%m-%d", gmtime_r(&t, &tm));
    struct kiln_profile_provenance pv = {
        "kiln-tune", kiln_version_string(), ctx->desc.name, ctx->desc.driver_version, date, basis, m, r->shape_count};
    /* A child of the matched profile holding what differs from it; tuned
       again, a profile kiln-tune wrote for a device ("<parent>-tuned") is
       replaced by one holding what differs from its own parent (the
       earlier changes and the new). A shipped profile whose numbers
       kiln-tune measured is a family's, and gets a child like any other. */
    const struct kiln_profile *parent = ctx->profile;
    const char *parent_name = kiln_profile_parent_name(parent);
    char own_name[96];
    snprintf(own_name, sizeof own_name, "%s-tuned", parent_name ? parent_name : "");
    if (parent_name && strcmp(kiln_profile_name(parent), own_name) == 0 &&
        strstr(kiln_profile_provenance(parent), "\"tool\":\"kiln-tune\"") &&
        kiln_profile_find(ctx->profiles, parent_name))
        parent = kiln_profile_find(ctx->profiles, parent_name);
    snprintf(r->profile, sizeof r->profile, "%.60s-tuned", kiln_profile_name(parent));
    snprintf(r->path, sizeof r->path, "%s/%s.json", dir, r->profile);
    struct kiln_profile *exact = NULL; /* match this device and driver alone */
    st = kiln_profile_exact_match(&ctx->desc, &exact);
    if (st == KILN_SUCCESS)
        st = kiln_profile_write(r->path, r->profile, kiln_profile_name(parent), exact, values, ~0u, parent, &pv);
    kiln_profile_free(exact);
    kiln_profile_free(values);
    if (st != KILN_SUCCESS)
        r->profile[0] = r->path[0] = '\0';
    return st;
}

kiln_status kiln_tune_shape_set(kiln_context *ctx, const struct kiln_tune_shape *shape, char *set, size_t size)
{
    struct kiln_dims dims;
    double gflop;
    char kernel[400];
    return shape_facts(ctx, shape, &dims, &gflop, set, size, kernel, sizeof kernel);
}

/* The group each shape's plan takes on the matched profile, its extents and
   its GFLOP. */
static kiln_status plan_groups(kiln_context *ctx, struct search *s)
{
    struct kiln_tune_result *r = s->r;
    for (size_t i = 0; i < r->shape_count; i++) {
        char set[48], kernel[400];
        kiln_status st =
            shape_facts(ctx, &s->shapes[i], &s->dims[i], &r->shapes[i].gflop, set, sizeof set, kernel, sizeof kernel);
        if (st != KILN_SUCCESS)
            return st;
        snprintf(r->shapes[i].name, sizeof r->shapes[i].name, "%s", s->shapes[i].name);
        /* A shape class's own set is not tuned: the search changes a group's
           default set, which such a plan does not take. */
        const char *colon = strchr(set, ':');
        int by_default = colon && strcmp(colon, ":default") == 0;
        snprintf(r->shapes[i].group, sizeof r->shapes[i].group, "%.*s",
                 by_default ? (int)(colon - set) : (int)strlen(set), set);
        if (!by_default && s->o->log)
            fprintf(s->o->log, "%s: its plan takes %s, not tuned\n", s->shapes[i].name,
                    set[0] ? set : "no parameter set");
    }
    return KILN_SUCCESS;
}

/* Whether `name` is one of the comma-separated `list`. */
static int listed(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

kiln_status kiln_tune_check_groups(const char *list)
{
    for (const char *p = list;; p++) {
        const size_t len = strcspn(p, ",");
        char name[48];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : 0), p);
        const int g = kiln_param_group_find(name);
        if (len == 0 || len >= sizeof name ||
            (strcmp(name, "select") != 0 && (g < 0 || !kiln_space_kernel_group((enum kiln_group_id)g))))
            return kiln_error(KILN_ERROR_INVALID_ARGUMENT,
                              "groups: \"%.*s%s\" is not a kernel group (gemm.tiled, gemm.mma, gemm.wgmma, ...) "
                              "or select",
                              (int)(len < 64 ? len : 64), p, len > 64 ? "..." : "");
        p += len;
        if (!*p)
            return KILN_SUCCESS;
    }
}

/* The shapes of the run: the options' or the representative ones, and the
   shapes of the CUDA families the context runs whose operation has shapes
   in the run (each once: one of a name already there is not added again);
   each such family it does not run is reported as skipped, with the
   reason (a family outside the groups option is neither). */
static void gather_shapes(struct search *s, const kiln_context *ctx)
{
    const struct kiln_tune_options *o = s->o;
    size_t n = o->shape_count;
    const struct kiln_tune_shape *from =
        o->shapes ? o->shapes : kiln_tune_shapes(o->ops, ctx->desc.type == KILN_DEVICE_GPU, &n);
    memcpy(s->store, from, n * sizeof *from);
    unsigned ops = 0;
    for (size_t i = 0; i < n; i++)
        ops |= 1u << from[i].op;
    struct kiln_tune_family families[KILN_TUNE_FAMILIES];
    kiln_tune_families(ctx, families);
    for (int f = 0; f < KILN_TUNE_FAMILIES; f++) {
        const char *group = kiln_param_groups[families[f].group].name;
        if (!(ops & (1u << families[f].op)) || (o->groups && !listed(o->groups, group)))
            continue;
        if (!families[f].runs) {
            struct kiln_tune_skip *k = &s->r->skipped[s->r->skipped_count++];
            snprintf(k->group, sizeof k->group, "%s", group);
            snprintf(k->reason, sizeof k->reason, "%s", families[f].why_not);
            if (o->log)
                fprintf(o->log, "%s: the CUDA family not searched: %s\n", k->group, k->reason);
            continue;
        }
        struct kiln_tune_shape own[KILN_TUNE_FAMILY_SHAPES_MAX];
        const size_t count = o->shapes ? 0 : kiln_tune_family_shapes(&families[f], own);
        for (size_t i = 0; i < count; i++) {
            int have = 0;
            for (size_t k = 0; k < n && !have; k++)
                have = strcmp(s->store[k].name, own[i].name) == 0;
            if (!have && n < KILN_TUNE_SHAPES_MAX)
                s->store[n++] = own[i];
        }
    }
    s->shapes = s->store;
    s->shape_count = s->r->shape_count = n;
}

/* Only the shapes whose plans take a group of the groups option. */
static void keep_listed(struct search *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->shape_count; i++) {
        if (!listed(s->o->groups, s->r->shapes[i].group)) {
            if (s->o->log)
                fprintf(s->o->log, "%s: its plan takes %s, which is not among the groups searched\n", s->shapes[i].name,
                        s->r->shapes[i].group[0] ? s->r->shapes[i].group : "no group");
            continue;
        }
        s->store[n] = s->store[i], s->dims[n] = s->dims[i], s->r->shapes[n] = s->r->shapes[i];
        n++;
    }
    s->shape_count = s->r->shape_count = n;
}

static void free_search(struct search *s)
{
    for (size_t c = 0; c < s->count; c++)
        free(s->cands[c].overlay);
    for (size_t c = 0; c < s->refused_count; c++)
        free(s->refused[c]);
    for (size_t i = 0; i < s->entry_count; i++) {
        free(s->entries[i].group), free(s->entries[i].overlay), free(s->entries[i].reason);
        cJSON_Delete(s->entries[i].ms);
    }
    free(s->entries);
    free(s->cands);
    free(s->refused);
    if (s->journal)
        fclose(s->journal);
}

/* Whether a group's overlay part sets any field: {"kernels":{"gemm.cpu":{}}}
   (the seed's values kept) does not. */
static int changes_something(const char *part)
{
    cJSON *root = cJSON_Parse(part);
    const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(root, "kernels");
    int any = 0;
    for (const cJSON *g = kernels ? kernels->child : NULL; g && !any; g = g->next)
        any = g->child != NULL;
    cJSON_Delete(root);
    return any;
}

unsigned kiln_tune_refuted(const struct kiln_tune_shape_result *shapes, size_t count, double max, unsigned among,
                           char *why, size_t size)
{
    unsigned groups = 0;
    for (size_t i = 0; i < count; i++) {
        const struct kiln_tune_shape_result *sr = &shapes[i];
        const int g = strchr(sr->group, ':') ? -1 : kiln_param_group_find(sr->group);
        if (g < 0 || g >= 32 || !(among & (1u << g)) || !(sr->before_ms > 0.0) ||
            !(sr->after_ms > sr->before_ms * (1.0 + max)))
            continue;
        if (!groups && why && size)
            snprintf(why, size, "%s %.2fx (%.4f -> %.4f ms)", sr->name, sr->before_ms / sr->after_ms, sr->before_ms,
                     sr->after_ms);
        groups |= 1u << g;
    }
    return groups;
}

/* A shape's kernel group: the group before any ":<set>"; -1 for none. */
static int shape_group(const char *group)
{
    char name[48];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(group, ":"), group);
    return *name ? kiln_param_group_find(name) : -1;
}

int kiln_tune_select_refuted(const struct kiln_tune_shape_result *shapes, size_t count, double max,
                             unsigned kernel_changed, char *why, size_t size)
{
    double before = 0, after = 0;
    size_t moved = 0;
    for (size_t i = 0; i < count; i++) {
        const struct kiln_tune_shape_result *sr = &shapes[i];
        const int g = shape_group(sr->group);
        if (!sr->kernel_before[0] || !sr->kernel_after[0] || strcmp(sr->kernel_before, sr->kernel_after) == 0 ||
            (g >= 0 && g < 32 && (kernel_changed & (1u << g))) || !(sr->before_ms > 0.0) || !(sr->after_ms > 0.0))
            continue;
        before += sr->before_ms, after += sr->after_ms, moved++;
    }
    if (!moved || !(after > before * (1.0 + max)))
        return 0;
    if (why && size)
        snprintf(why, size, "the %zu shape%s the thresholds moved to another kernel %.2fx (%.4f -> %.4f ms)", moved,
                 moved == 1 ? "" : "s", before / after, before, after);
    return 1;
}

kiln_status kiln_tune(const struct kiln_tune_options *o, struct kiln_tune_result *r)
{
    if (!o || !r)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_tune: NULL argument");
    memset(r, 0, sizeof *r);
    struct search s = {.o = o, .r = r, .start = now_s()};
    s.end = s.start + o->budget_s;
    if (o->shapes && (o->shape_count == 0 || o->shape_count > KILN_TUNE_SHAPES_MAX))
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_tune: %zu shapes (1 to %d)", o->shape_count,
                          KILN_TUNE_SHAPES_MAX);
    if (!o->shapes && (o->ops & KILN_TUNE_OPS_ALL) == 0)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "kiln_tune: no operation to tune");
    if (o->groups && kiln_tune_check_groups(o->groups) != KILN_SUCCESS)
        return KILN_ERROR_INVALID_ARGUMENT;
    const int thresholds = o->thresholds && (!o->groups || listed(o->groups, "select"));

    /* The device first: a device that cannot be opened leaves no journal
       behind. */
    kiln_context_options opts;
    kiln_context_options_init(&opts);
    opts.device = o->device;
    kiln_context *ctx = NULL;
    kiln_status st = kiln_context_create(&opts, &ctx);
    if (st != KILN_SUCCESS)
        return st;
    gather_shapes(&s, ctx);
    snprintf(r->matched, sizeof r->matched, "%s", kiln_profile_name(ctx->profile));
    char *dir = o->out ? strdup(o->out) : kiln_profile_user_dir();
    st = dir ? open_journal(&s, dir)
             : kiln_error(KILN_ERROR_IO, "kiln-tune: no output directory (neither XDG_CONFIG_HOME nor HOME is set)");
    if (st == KILN_SUCCESS)
        st = plan_groups(ctx, &s);
    /* The thresholds answer for every shape they may move (the before/after
       table, kiln_tune_select_refuted): with them searched, every shape
       stays, and only the listed kernel groups are searched (below). */
    if (st == KILN_SUCCESS && o->groups && !thresholds)
        keep_listed(&s);

    /* The groups in the order of their first shape; each gets an equal
       share of what is left of the groups' time when it starts. */
    int order[KILN_TUNE_SHAPES_MAX];
    size_t group_count = 0;
    unsigned seen = 0;
    for (size_t i = 0; st == KILN_SUCCESS && i < s.shape_count; i++) {
        int g = kiln_param_group_find(r->shapes[i].group);
        if (g >= 0 && !(seen & (1u << g)) && kiln_space_kernel_group((enum kiln_group_id)g) &&
            (!o->groups || listed(o->groups, kiln_param_groups[g].name)))
            order[group_count++] = g, seen |= 1u << g;
    }
    const double groups_end = s.start + (thresholds ? GROUPS_END : GROUPS_END_ALONE) * o->budget_s;
    char *parts[KILN_TUNE_SHAPES_MAX + 1];
    int part_group[KILN_TUNE_SHAPES_MAX + 1]; /* each part's group; select for the thresholds' */
    size_t part_count = 0;
    unsigned changed = 0;
    for (size_t gi = 0; st == KILN_SUCCESS && gi < group_count; gi++) {
        int g = order[gi];
        s.group = kiln_param_groups[g].name;
        s.member_count = 0;
        for (size_t k = 0; k < s.shape_count; k++)
            if (strcmp(r->shapes[k].group, s.group) == 0)
                s.members[s.member_count++] = k;
        double left = groups_end - now_s();
        s.deadline = now_s() + (left > 0 ? left / (double)(group_count - gi) : 0);
        char *kept = NULL;
        st = tune_group(&s, g, ctx->profile, &ctx->desc, &kept);
        if (kept)
            part_group[part_count] = g, parts[part_count++] = kept, changed |= 1u << g;
        for (size_t c = 0; c < s.count; c++)
            free(s.cands[c].overlay);
        s.count = 0;
    }
    char *kernels = st == KILN_SUCCESS ? merge_overlays(parts, part_count) : NULL;
    if (st == KILN_SUCCESS && !kernels)
        st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
    if (st == KILN_SUCCESS && thresholds) {
        char *select = NULL;
        s.deadline = s.start + THRESHOLDS_END * o->budget_s;
        st = tune_thresholds(&s, ctx, kernels, &select);
        if (select) {
            part_group[part_count] = KILN_GROUP_select, parts[part_count++] = select;
            changed |= 1u << KILN_GROUP_select;
            free(kernels);
            kernels = merge_overlays(parts, part_count);
            if (!kernels)
                st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
        }
    }
    if (st == KILN_SUCCESS && changed) {
        st = before_after(&s, kernels);
        /* The table is the last word: a group's change that makes one of
           its shapes much slower there (a search misled by one fast
           outlier of a small shape) is left out, and the rest measured
           again. Parts that change nothing (a group kept at the seed's
           values) are not refuted: their table is noise by construction. */
        unsigned real = 0;
        for (size_t i = 0; i < part_count; i++)
            if (part_group[i] != KILN_GROUP_select && changes_something(parts[i]))
                real |= 1u << part_group[i];
        unsigned refuted = st == KILN_SUCCESS ? kiln_tune_refuted(r->shapes, r->shape_count, o->max_loss,
                                                                  changed & real, r->refuted, sizeof r->refuted)
                                              : 0;
        /* The thresholds answer for the shapes they moved to another
           kernel, in sum (KILN_TUNE_SELECT_LOSS_MAX). */
        char why[200];
        if (st == KILN_SUCCESS && (changed & (1u << KILN_GROUP_select)) &&
            kiln_tune_select_refuted(r->shapes, r->shape_count, o->select_max_loss, changed & real, why, sizeof why)) {
            const size_t len = strlen(r->refuted);
            snprintf(r->refuted + len, sizeof r->refuted - len, "%s%s", len ? "; " : "", why);
            refuted |= 1u << KILN_GROUP_select;
        }
        if (refuted) {
            size_t len = strlen(r->refuted), kept = 0;
            snprintf(r->refuted + len, sizeof r->refuted - len, ": left out");
            for (size_t i = 0; i < part_count; i++) {
                if (refuted & (1u << part_group[i])) {
                    len = strlen(r->refuted);
                    snprintf(r->refuted + len, sizeof r->refuted - len, " %s", kiln_param_groups[part_group[i]].name);
                    free(parts[i]);
                } else {
                    part_group[kept] = part_group[i], parts[kept++] = parts[i];
                }
            }
            part_count = kept;
            changed &= ~refuted;
            if (s.o->log)
                fprintf(s.o->log, "the before/after table refutes a change: %s\n", r->refuted);
            free(kernels);
            kernels = merge_overlays(parts, part_count);
            if (!kernels)
                st = kiln_error(KILN_ERROR_OUT_OF_MEMORY, "kiln-tune: overlay");
            else if (changed)
                st = before_after(&s, kernels);
            else /* nothing left to write: the profile's values stay */
                for (size_t i = 0; i < r->shape_count; i++)
                    r->shapes[i].after_ms = r->shapes[i].before_ms;
        }
    }
    if (st == KILN_SUCCESS && changed) {
        st = write_profile(ctx, o, dir, kernels, s.start, r);
    } else {
        for (size_t i = 0; i < r->shape_count; i++)
            if (r->shapes[i].after_ms <= 0)
                r->shapes[i].after_ms = r->shapes[i].before_ms;
    }
    for (size_t i = 0; i < part_count; i++)
        free(parts[i]);
    free(kernels);
    free_search(&s);
    kiln_context_destroy(ctx);
    free(dir);
    r->seconds = now_s() - s.start;
    return st;
}
