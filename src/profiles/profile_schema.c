/* The one table of profile fields and the checks that follow it. Keep
   device_profiles/README.md in step (tests/test_profiles.c checks it names
   every field). */
#include "profiles/schema.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const gemm_routes[] = {"tiled", "cpu", "clblast", NULL};
static const char *const conv_algos[] = {"implicit-gemm", "winograd-4x4", "winograd-2x2", "direct",
                                         "im2col",        "gemm-1x1",     NULL};

#define INT(fam, key, min, doc) {fam, key, KILN_PARAM_INT, min, NULL, doc}
#define VW(fam, key, doc) {fam, key, KILN_PARAM_VW, 1, NULL, doc}
#define BOOL(fam, key, doc) {fam, key, KILN_PARAM_BOOL, 0, NULL, doc}
#define NUMBER(fam, key, min, doc) {fam, key, KILN_PARAM_NUMBER, min, NULL, doc}
#define STRING(fam, key, choices, doc) {fam, key, KILN_PARAM_STRING, 0, choices, doc}

const struct kiln_schema_field kiln_schema[] = {
    INT("device", "flops_per_cu_cycle", 1,
        "fp32 flops per compute unit (as the driver counts them) per clock; FMA = 2"),
    NUMBER("device", "peak_gbps", 1, "typical memory bandwidth of the family, GB/s"),
    INT("device", "clock_mhz", 0,
        "typical sustained clock when the driver reports a base clock; 0 = the reported clock"),
    NUMBER("device", "peak_gflops", 0, "explicit fp32 peak in GFLOP/s when > 0, overriding the computed one"),

    INT("util", "wg", 1, "work-group size of element-wise utility kernels (fill, copy) and pooling"),
    VW("util", "vw", "pooling: vector width (output columns in NCHW, channels in NHWC)"),

    STRING("gemm", "route", gemm_routes,
           "GEMM implementation: tiled OpenCL kernels, the CPU micro-kernel, or CLBlast; \"cpu\" also gives "
           "implicit-GEMM convolution its CPU kernel, any other route its tiled GPU kernel"),
    INT("gemm", "mwg", 1, "work-group tile size in M"),
    INT("gemm", "nwg", 1, "work-group tile size in N"),
    INT("gemm", "kwg", 1, "K step of the work-group tile (staged per iteration)"),
    INT("gemm", "mdimc", 1, "work-group shape in M (threads)"),
    INT("gemm", "ndimc", 1, "work-group shape in N (threads)"),
    INT("gemm", "mdima", 1, "M extent of the thread re-shape used to load A"),
    INT("gemm", "ndimb", 1, "N extent of the thread re-shape used to load B"),
    INT("gemm", "kwi", 1, "K loop unroll factor"),
    VW("gemm", "vwm", "vector width in M for loads and stores of A and C"),
    VW("gemm", "vwn", "vector width in N for loads and stores of B and C"),
    BOOL("gemm", "sa", "stage the A tile in local memory"),
    BOOL("gemm", "sb", "stage the B tile in local memory"),
    INT("gemm", "direct_max", 0, "problems with M*N*K at or below this use the direct kernel (0: never)"),
    INT("gemm", "wgd", 1, "direct kernel: square work-group tile size in M, N and K"),
    INT("gemm", "mdimcd", 1, "direct kernel: work-group shape in M"),
    INT("gemm", "ndimcd", 1, "direct kernel: work-group shape in N"),
    VW("gemm", "vwmd", "direct kernel: vector width in M"),
    VW("gemm", "vwnd", "direct kernel: vector width in N"),
    INT("gemm", "kwid", 1, "direct kernel: K loop unroll factor"),
    INT("gemm", "cpu_mr", 1,
        "CPU route: register micro-tile rows (filters in implicit-GEMM convolution's CPU kernel)"),
    INT("gemm", "cpu_nr", 1,
        "CPU route: register micro-tile columns (output pixels in implicit-GEMM convolution's CPU kernel)"),
    INT("gemm", "cpu_kc", 1, "CPU route: K block kept in L1/L2"),
    INT("gemm", "cpu_nc", 1, "CPU route: N block kept in L3"),
    VW("gemm", "cpu_vw", "CPU route: SIMD vector width in floats"),
    INT("gemm", "cpu_narrow_mr", 0,
        "CPU route: rows of a second register tile one vector (cpu_vw) wide, taken where a problem's columns fill it "
        "better (0: none)"),
    INT("gemm", "smallm_max", 0,
        "AUTO: GEMMs whose C has at most this many rows (m; n if column-major) use the small-M kernels (0: never)"),
    INT("gemm", "smallm_mr", 1, "small-M kernels: rows of C a work-item accumulates at once"),
    INT("gemm", "smallm_nc", 1,
        "small-M kernels: columns of C per work-item (B not transposed: rounded up to a multiple of smallm_vw)"),
    VW("gemm", "smallm_vw", "small-M kernels: vector width in floats, along K (B transposed) or N"),

    STRING("conv", "algo", conv_algos, "default algorithm when the heuristic has no stronger preference"),
    INT("conv", "igemm_mwg", 1,
        "implicit GEMM, tiled kernel (gemm.route not \"cpu\"): work-group tile in output pixels"),
    INT("conv", "igemm_nwg", 1, "implicit GEMM, tiled kernel: work-group tile in filters (of one group)"),
    INT("conv", "igemm_kwg", 1,
        "implicit GEMM, tiled kernel: K step, input channels x filter taps staged in local memory per iteration"),
    INT("conv", "igemm_mdimc", 1, "implicit GEMM, tiled kernel: work-group shape along pixels (work-items)"),
    INT("conv", "igemm_ndimc", 1, "implicit GEMM, tiled kernel: work-group shape along filters (work-items)"),
    VW("conv", "igemm_vw",
       "implicit GEMM, tiled kernel: vector width of the register tile's reads, in pixels and filters"),
    INT("conv", "wino_min_channels", 1, "use Winograd for 3x3 stride-1 when C and K are at least this"),
    INT("conv", "direct_wg", 1, "direct convolution: work-group size"),
    VW("conv", "direct_vw", "direct convolution: vector width"),

    INT("attention", "block_q", 1,
        "query rows per work-item, as block_q / vw vectors of vw rows (fewer when a batch item's key/value head has "
        "fewer rows)"),
    INT("attention", "block_kv", 1, "keys per block: a work-item's scores are block_q / vw x block_kv vectors"),
    INT("attention", "q_blocks", 1,
        "blocks of block_q rows per work-item, taking each chunk of keys in turn while it is in cache (fewer for "
        "head dimensions above 64, small problems)"),
    INT("attention", "chunk_kv", 1, "keys per chunk (a multiple of block_kv)"),
    INT("attention", "wg", 1, "work-items per work-group (1 on CPUs: a work-group is one thread's task)"),
    VW("attention", "vw", "vector width: query rows per vector"),
};
const size_t kiln_schema_count = sizeof kiln_schema / sizeof kiln_schema[0];

/* lhs1*lhs2 must be a multiple of rhs1*rhs2/div (absent operands are 1). */
struct constraint {
    const char *family, *lhs1, *lhs2, *rhs1, *rhs2, *div;
};

static const struct constraint constraints[] = {
    {"gemm", "mwg", NULL, "mdimc", "vwm", NULL},
    {"gemm", "nwg", NULL, "ndimc", "vwn", NULL},
    {"gemm", "kwg", NULL, "kwi", NULL, NULL},
    {"gemm", "mwg", NULL, "mdima", NULL, NULL},
    {"gemm", "nwg", NULL, "ndimb", NULL, NULL},
    {"gemm", "mdimc", "ndimc", "mdima", NULL, NULL},
    {"gemm", "mdimc", "ndimc", "ndimb", NULL, NULL},
    {"gemm", "kwg", NULL, "mdimc", "ndimc", "mdima"},
    {"gemm", "kwg", NULL, "mdimc", "ndimc", "ndimb"},
    {"gemm", "wgd", NULL, "mdimcd", "vwmd", NULL},
    {"gemm", "wgd", NULL, "ndimcd", "vwnd", NULL},
    {"gemm", "wgd", NULL, "kwid", NULL, NULL},
    {"gemm", "cpu_nr", NULL, "cpu_vw", NULL, NULL},
    {"attention", "block_q", NULL, "vw", NULL, NULL},
    {"attention", "chunk_kv", NULL, "block_kv", NULL, NULL},
};

int kiln_schema_find(const char *family, const char *key)
{
    for (size_t i = 0; i < kiln_schema_count; i++)
        if (strcmp(kiln_schema[i].family, family) == 0 && strcmp(kiln_schema[i].key, key) == 0)
            return (int)i;
    return -1;
}

int kiln_schema_has_family(const char *family)
{
    for (size_t i = 0; i < kiln_schema_count; i++)
        if (strcmp(kiln_schema[i].family, family) == 0)
            return 1;
    return 0;
}

static int fail(char *why, size_t why_size, const char *fmt, const char *where, const char *key)
{
    snprintf(why, why_size, fmt, where, key);
    return -1;
}

static int read_value(const cJSON *item, const struct kiln_schema_field *f, const char *where,
                      struct kiln_param_value *v, char *why, size_t why_size)
{
    switch (f->type) {
    case KILN_PARAM_BOOL:
        if (!cJSON_IsBool(item))
            return fail(why, why_size, "'%s.%s' must be true or false", where, f->key);
        v->i = cJSON_IsTrue(item) ? 1 : 0;
        break;
    case KILN_PARAM_STRING:
        if (cJSON_IsString(item))
            for (const char *const *c = f->choices; *c; c++)
                if (strcmp(*c, item->valuestring) == 0) {
                    v->s = *c;
                    return 0;
                }
        snprintf(why, why_size, "'%s.%s' must be one of", where, f->key);
        for (const char *const *c = f->choices; *c; c++)
            snprintf(why + strlen(why), why_size - strlen(why), "%s \"%s\"", c == f->choices ? "" : ",", *c);
        return -1;
    case KILN_PARAM_NUMBER:
        if (!cJSON_IsNumber(item) || !(item->valuedouble >= f->min) || !isfinite(item->valuedouble)) {
            snprintf(why, why_size, "'%s.%s' must be a number >= %g", where, f->key, f->min);
            return -1;
        }
        v->d = item->valuedouble;
        break;
    case KILN_PARAM_INT:
    case KILN_PARAM_VW: {
        double d = cJSON_IsNumber(item) ? item->valuedouble : -1;
        int ok = d == floor(d) && d >= f->min && d <= INT_MAX;
        if (f->type == KILN_PARAM_VW)
            ok = ok && (d == 1 || d == 2 || d == 4 || d == 8 || d == 16);
        if (!ok) {
            if (f->type == KILN_PARAM_VW)
                return fail(why, why_size, "'%s.%s' must be a vector width: 1, 2, 4, 8 or 16", where, f->key);
            snprintf(why, why_size, "'%s.%s' must be an integer >= %g", where, f->key, f->min);
            return -1;
        }
        v->i = (long)d;
        break;
    }
    }
    return 0;
}

int kiln_schema_read_family(const cJSON *obj, const char *family, const char *where,
                            struct kiln_param_value *values, char *why, size_t why_size)
{
    if (!cJSON_IsObject(obj)) {
        snprintf(why, why_size, "'%s' must be an object", where);
        return -1;
    }
    for (const cJSON *item = obj->child; item; item = item->next) {
        int idx = kiln_schema_find(family, item->string);
        if (idx < 0)
            return fail(why, why_size, "unknown key '%s.%s'", where, item->string);
        if (values[idx].own)
            return fail(why, why_size, "duplicate key '%s.%s'", where, item->string);
        if (read_value(item, &kiln_schema[idx], where, &values[idx], why, why_size) != 0)
            return -1;
        values[idx].set = values[idx].own = 1;
    }
    return 0;
}

static long long operand(const struct kiln_param_value *values, const char *family, const char *key)
{
    return key ? values[kiln_schema_find(family, key)].i : 1;
}

/* "a*b/c" from a constraint's operand names. */
static void expression(char *buf, size_t size, const char *a, const char *b, const char *div)
{
    snprintf(buf, size, "%s%s%s%s%s", a, b ? "*" : "", b ? b : "", div ? "/" : "", div ? div : "");
}

int kiln_schema_check(const struct kiln_param_value *values, char *why, size_t why_size)
{
    for (size_t i = 0; i < kiln_schema_count; i++)
        if (!values[i].set)
            return fail(why, why_size, "'%s.%s' is not set by the profile or its parents", kiln_schema[i].family,
                        kiln_schema[i].key);
    for (size_t i = 0; i < sizeof constraints / sizeof constraints[0]; i++) {
        const struct constraint *c = &constraints[i];
        long long lhs = operand(values, c->family, c->lhs1) * operand(values, c->family, c->lhs2);
        long long rhs = operand(values, c->family, c->rhs1) * operand(values, c->family, c->rhs2);
        long long div = operand(values, c->family, c->div);
        if (rhs % div == 0 && lhs % (rhs / div) == 0)
            continue;
        char l[64], r[64];
        expression(l, sizeof l, c->lhs1, c->lhs2, NULL);
        expression(r, sizeof r, c->rhs1, c->rhs2, c->div);
        snprintf(why, why_size, "%s constraint fails: %s = %lld is not a multiple of %s = %g", c->family, l, lhs, r,
                 (double)rhs / (double)div);
        return -1;
    }
    return 0;
}
