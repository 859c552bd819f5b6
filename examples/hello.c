/*
 * hello: open the default kiln device, describe it, and round-trip a buffer
 * through the device, filling part of it there.
 *
 * Select another device with KILN_DEVICE=cpu|gpu|<index>|<name substring>.
 */
#include <kiln/kiln.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 4096
#define FILL_FIRST 1000
#define FILL_COUNT 2000
#define FILL_VALUE 0.5f

static int failed(const char *what, kiln_status status)
{
    fprintf(stderr, "hello: %s: %s", what, kiln_status_string(status));
    const char *detail = kiln_last_error_detail();
    if (detail[0])
        fprintf(stderr, " (%s)", detail);
    fputc('\n', stderr);
    return 1;
}

/* Random floats in [-1, 1); a fixed-seed xorshift keeps runs repeatable. */
static void random_floats(float *out, size_t count)
{
    uint32_t state = 2463534242u;
    for (size_t i = 0; i < count; i++) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        out[i] = (float)(state >> 8) / (float)(1u << 23) - 1.0f;
    }
}

/* Elements in the filled range must equal FILL_VALUE, the rest what was written. */
static size_t count_mismatches(const float *written, const float *read)
{
    size_t bad = 0;
    for (size_t i = 0; i < COUNT; i++) {
        int filled = i >= FILL_FIRST && i < FILL_FIRST + FILL_COUNT;
        float expect = filled ? FILL_VALUE : written[i];
        if (memcmp(&read[i], &expect, sizeof expect) != 0) {
            if (bad < 5)
                fprintf(stderr, "hello: element %zu is %g, expected %g\n", i, read[i], expect);
            bad++;
        }
    }
    return bad;
}

static int run(kiln_context *ctx, kiln_buffer *buf, float *written, float *read)
{
    kiln_device_info info;
    kiln_status status = kiln_context_get_device_info(ctx, &info);
    if (status != KILN_SUCCESS)
        return failed("kiln_context_get_device_info", status);
    printf("kiln %s\n", kiln_version_string());
    printf("device:  %s (%s)\n", info.name, info.platform);
    printf("profile: %s\n", info.profile);
    printf("why:     %s\n", info.profile_reason);
    printf("peaks:   %.1f GFLOP/s fp32, %.1f GB/s (%s)\n", info.peak_gflops, info.peak_gbps, info.peak_source);

    random_floats(written, COUNT);
    for (size_t i = 0; i < COUNT; i++)
        read[i] = -written[i];
    status = kiln_buffer_write(buf, 0, COUNT * sizeof(float), written);
    if (status != KILN_SUCCESS)
        return failed("kiln_buffer_write", status);
    status = kiln_buffer_fill_f32(buf, FILL_FIRST, FILL_COUNT, FILL_VALUE);
    if (status != KILN_SUCCESS)
        return failed("kiln_buffer_fill_f32", status);
    status = kiln_buffer_read(buf, 0, COUNT * sizeof(float), read);
    if (status != KILN_SUCCESS)
        return failed("kiln_buffer_read", status);

    size_t bad = count_mismatches(written, read);
    if (bad) {
        fprintf(stderr, "hello: %zu of %d elements wrong after write, fill and read\n", bad, COUNT);
        return 1;
    }
    printf("OK\n");
    return 0;
}

int main(void)
{
    kiln_context *ctx = NULL;
    kiln_buffer *buf = NULL;
    float *written = malloc(COUNT * sizeof(float));
    float *read = malloc(COUNT * sizeof(float));
    int rc = 1;

    if (!written || !read) {
        fprintf(stderr, "hello: out of host memory\n");
        goto done;
    }
    kiln_status status = kiln_context_create(NULL, &ctx);
    if (status != KILN_SUCCESS) {
        rc = failed("kiln_context_create", status);
        goto done;
    }
    status = kiln_buffer_create(ctx, COUNT * sizeof(float), &buf);
    if (status != KILN_SUCCESS) {
        rc = failed("kiln_buffer_create", status);
        goto done;
    }
    rc = run(ctx, buf, written, read);
done:
    kiln_buffer_destroy(buf);
    kiln_context_destroy(ctx);
    free(written);
    free(read);
    return rc;
}
