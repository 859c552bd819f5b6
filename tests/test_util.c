#include "test_util.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t kt_seed(void)
{
    const char *env = getenv("KILN_TEST_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
    if (seed == 0)
        seed = 1;
    printf("# KILN_TEST_SEED=%llu\n", (unsigned long long)seed);
    return seed;
}

void kt_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t s = *state;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *state = s;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

char *kt_temp_dir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/kiln-test-XXXXXX", base && *base ? base : "/tmp");
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    return strdup(dir);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void kt_remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

void kt_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

void kt_assert_status_(kiln_status got, kiln_status expected, const char *file, int line)
{
    if (got != expected) {
        print_error("%s:%d: status %d (%s) where %d (%s) was expected; detail: %s\n", file, line, got,
                    kiln_status_string(got), expected, kiln_status_string(expected), kiln_last_error_detail());
        _fail(file, line);
    }
    if (expected != KILN_SUCCESS && kiln_last_error_detail()[0] == '\0') {
        print_error("%s:%d: status %s without a detail message\n", file, line, kiln_status_string(got));
        _fail(file, line);
    }
}
