/* kiln-bench's quiet start (bench/bench_common.c): bench_quiesce() waits
   while another thread of the process runs (as a peer's thread pool spins
   after its call), returns once none does, and never waits past its limit.
   The test's kiln context is open, so its device's idle worker threads (POCL's
   on the CPU) are there too and must not count as running. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "bench.h"
#include "test_util.h"

struct spinner {
    double ms; /* spin this long; < 0: until stop is set */
    atomic_int started, stop;
};

static void *spin(void *arg)
{
    struct spinner *s = arg;
    const double start = bench_now_ms();
    atomic_store(&s->started, 1);
    while (!atomic_load(&s->stop) && (s->ms < 0 || bench_now_ms() - start < s->ms))
        ;
    return NULL;
}

static void *doze(void *arg)
{
    struct spinner *s = arg;
    atomic_store(&s->started, 1);
    while (!atomic_load(&s->stop)) {
        const struct timespec t = {0, 5000000};
        nanosleep(&t, NULL);
    }
    return NULL;
}

static void start(pthread_t *t, void *(*fn)(void *), struct spinner *s)
{
    assert_int_equal(pthread_create(t, NULL, fn, s), 0);
    while (!atomic_load(&s->started))
        sched_yield();
}

static void test_quiet_process_returns_at_once(void **state)
{
    (void)state;
    struct spinner s = {.ms = -1};
    pthread_t t;
    start(&t, doze, &s); /* a sleeping thread is not a running one */
    const double waited = bench_quiesce(2000.0);
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    printf("# waited %.2f ms beside a sleeping thread\n", waited);
    assert_true(waited < 100.0);
}

static void test_waits_for_a_spinning_thread(void **state)
{
    (void)state;
    struct spinner s = {.ms = 150.0};
    pthread_t t;
    const double t0 = bench_now_ms();
    start(&t, spin, &s);
    const double waited = bench_quiesce(2000.0);
    const double spun = bench_now_ms() - t0;
    pthread_join(t, NULL);
    printf("# waited %.1f ms for a thread spinning 150 ms\n", waited);
    assert_true(spun >= 140.0); /* returned only once the spinner was done */
    assert_true(waited < 1500.0);
}

static void test_limit_is_kept(void **state)
{
    (void)state;
    struct spinner s = {.ms = -1};
    pthread_t t;
    start(&t, spin, &s);
    const double waited = bench_quiesce(80.0);
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    printf("# waited %.1f ms with a limit of 80 ms\n", waited);
    assert_true(waited >= 80.0 && waited < 1000.0);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_quiet_process_returns_at_once));
    kt_add(&tests, cmocka_unit_test(test_waits_for_a_spinning_thread));
    kt_add(&tests, cmocka_unit_test(test_limit_is_kept));
    return kt_run("bench_timing", &tests);
}
