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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "test_util.h"

#ifdef KT_KILN_BENCH
/* The last line kiln-bench conv --model <model> --layout <layout> --json
   prints, parsed. */
static cJSON *run_model(const char *model, const char *layout)
{
    char *dir = kt_temp_dir(), cmd[4400], path[4200];
    snprintf(path, sizeof path, "%s/out", dir);
    snprintf(cmd, sizeof cmd, "'%s' conv --model %s --layout %s --json > '%s' 2>&1", KT_KILN_BENCH, model, layout,
             path);
    const int rc = system(cmd);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char line[1 << 16], last[1 << 16];
    last[0] = '\0';
    while (fgets(line, sizeof line, f))
        if (strstr(line, "\"op\":\"model\""))
            strcpy(last, line);
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

static void check_model(const char *model, const char *layout)
{
    cJSON *j = run_model(model, layout);
    char *text = cJSON_PrintUnformatted(j);
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
    check_model("mobilenet_v1", "nchw");
}

/* The image in NHWC: oneDNN's first convolution reads it as it is. */
static void test_mobilenet_v1_nhwc(void **state)
{
    (void)state;
    check_model("mobilenet_v1", "nhwc");
}

static void test_resnet50(void **state)
{
    (void)state;
    check_model("resnet50", "nchw");
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
