/*
 * kiln-bench conv --model's whole-network passes: kiln's pass over the
 * network (every layer enqueued, one wait) ends with probabilities that sum
 * to 1, and, where oneDNN is built in, oneDNN's own pass over the same graph
 * and the same random weights and image (its layouts, conversions in the
 * pass, ResNet-50's shortcuts summed in place) ends with classifier scores
 * that agree with kiln's to 1e-3 of the largest. The two passes are
 * independent implementations of the network, so a slot read or written
 * wrongly on either side (a shortcut left out, a layout misread) shows as a
 * difference of the scores' own size. Both networks run in NCHW, MobileNet
 * v1 also in NHWC (the image as oneDNN's first convolution reads it).
 *
 * MobileNet v1 in NCHW runs its per-layer table twice (--rounds 2): a layer
 * line for each layer once, both passes' totals, and totals that are the
 * sums of the layers' medians (with two passes, the passes' mean).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "test_util.h"

#ifdef KT_KILN_BENCH
/* The last line kiln-bench conv --model <model> --layout <layout> --rounds
   <rounds> --json prints, parsed; *layer_lines counts the lines of its
   layers. */
static cJSON *run_model(const char *model, const char *layout, int rounds, int *layer_lines)
{
    char *dir = kt_temp_dir(), cmd[4400], path[4200];
    snprintf(path, sizeof path, "%s/out", dir);
    snprintf(cmd, sizeof cmd, "'%s' conv --model %s --layout %s --rounds %d --json > '%s' 2>&1", KT_KILN_BENCH, model,
             layout, rounds, path);
    const int rc = system(cmd);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char line[1 << 16], last[1 << 16];
    last[0] = '\0';
    *layer_lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"op\":\"model\""))
            strcpy(last, line);
        else if (strstr(line, "\"layer\":\""))
            ++*layer_lines;
    }
    fclose(f);
    kt_remove_tree(dir);
    free(dir);
    if (rc != 0 || !last[0])
        fail_msg("kiln-bench conv --model %s exited with %d; its model line: %s", model, rc, last);
    cJSON *j = cJSON_Parse(last);
    if (!j)
        fail_msg("kiln-bench's model line is not JSON: %s", last);
    return j;
}

/* With two or more rounds: "rounds", each pass's kiln total (positive) and
   the layers' lines once. With two, the total is the passes' mean. */
static void check_rounds(const char *model, const cJSON *j, const char *text, int rounds, int layer_lines)
{
    const cJSON *layers = cJSON_GetObjectItem(j, "layers"), *r = cJSON_GetObjectItem(j, "rounds");
    const cJSON *total = cJSON_GetObjectItem(j, "kiln_ms"), *passes = cJSON_GetObjectItem(j, "kiln_round_ms");
    if (!cJSON_IsNumber(layers) || layer_lines != layers->valueint)
        fail_msg("%s: %d layer lines for %d layers: %s", model, layer_lines, layers ? layers->valueint : -1, text);
    if (!cJSON_IsNumber(r) || r->valueint != rounds || !cJSON_IsNumber(total))
        fail_msg("%s: not the %d rounds asked for: %s", model, rounds, text);
    if (rounds == 1)
        return;
    if (!cJSON_IsArray(passes) || cJSON_GetArraySize(passes) != rounds)
        fail_msg("%s: not %d passes' totals: %s", model, rounds, text);
    double sum = 0.0;
    for (int i = 0; i < rounds; i++) {
        const double v = cJSON_GetArrayItem(passes, i)->valuedouble;
        if (!(v > 0.0))
            fail_msg("%s: pass %d's total %g: %s", model, i, v, text);
        sum += v;
    }
    printf("# %s: %d passes, the layers' medians %.3f ms\n", model, rounds, total->valuedouble);
    if (rounds == 2 && !(fabs(total->valuedouble - sum / 2) <= 1e-4 * total->valuedouble))
        fail_msg("%s: the layers' medians sum to %g, not the passes' mean %g: %s", model, total->valuedouble, sum / 2,
                 text);
}

static void check_model(const char *model, const char *layout, int rounds)
{
    int layer_lines = 0;
    cJSON *j = run_model(model, layout, rounds, &layer_lines);
    char *text = cJSON_PrintUnformatted(j);
    check_rounds(model, j, text, rounds, layer_lines);
    const cJSON *kiln = cJSON_GetObjectItem(j, "kiln_network_ms");
    if (!cJSON_IsNumber(kiln) || !(kiln->valuedouble > 0.0))
        fail_msg("%s: no whole-network time for kiln: %s", model, text);
    if (cJSON_GetObjectItem(j, "onednn_ms")) {
        const cJSON *peer = cJSON_GetObjectItem(j, "onednn_network_ms");
        const cJSON *diff = cJSON_GetObjectItem(j, "network_max_rel_diff");
        if (!cJSON_IsNumber(peer) || !(peer->valuedouble > 0.0) || !cJSON_IsNumber(diff))
            fail_msg("%s: oneDNN's whole network not measured: %s", model, text);
        printf("# %s: kiln %.3f ms, oneDNN %.3f ms, scores differ by %.2g of the largest\n", model, kiln->valuedouble,
               peer->valuedouble, diff->valuedouble);
        if (!(diff->valuedouble <= 1e-3))
            fail_msg("%s: kiln's and oneDNN's scores differ by %g: %s", model, diff->valuedouble, text);
    } else {
        printf("# %s: oneDNN not built in; kiln's pass alone (%.3f ms)\n", model, kiln->valuedouble);
    }
    cJSON_free(text);
    cJSON_Delete(j);
}

static void test_mobilenet_v1(void **state)
{
    (void)state;
    check_model("mobilenet_v1", "nchw", 2);
}

/* The image in NHWC: oneDNN's first convolution reads it as it is. */
static void test_mobilenet_v1_nhwc(void **state)
{
    (void)state;
    check_model("mobilenet_v1", "nhwc", 1);
}

static void test_resnet50(void **state)
{
    (void)state;
    check_model("resnet50", "nchw", 1);
}
#else
static void test_mobilenet_v1(void **state)
{
    (void)state;
    printf("# kiln-bench not built\n");
    skip();
}

static void test_resnet50(void **state)
{
    (void)state;
    printf("# kiln-bench not built\n");
    skip();
}

static void test_mobilenet_v1_nhwc(void **state)
{
    (void)state;
    printf("# kiln-bench not built\n");
    skip();
}
#endif

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_mobilenet_v1));
    kt_add(&tests, cmocka_unit_test(test_resnet50));
    kt_add(&tests, cmocka_unit_test(test_mobilenet_v1_nhwc));
    return kt_run("bench_models", &tests);
}
