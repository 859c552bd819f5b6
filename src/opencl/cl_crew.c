/*
 * kiln's own threads for a CPU device (docs/pocl.md, "kiln's threads"): the
 * caller and parts - 1 threads of kiln's each run one part of every launch,
 * fork and join, as OpenMP runs a parallel region. Between launches the
 * threads spin for a while (a launch that follows soon finds them running)
 * and then sleep until the next.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "core/diag.h"
#include "opencl/cl_backend.h"

/* How long a thread of the crew spins after a part before it sleeps, in
   microseconds: the gap between the layers of a network is a few to some
   tens; a longer spin only burns a core a program could use. */
#define CREW_SPIN_US 2000

/* The stack of a crew thread: address space reserved, pages committed as
   used (the same as POCL's workers get from kiln). */
#define CREW_STACK (64UL << 20)

struct kiln_cl_crew {
    unsigned parts;
    pthread_t thread[KILN_CL_MAX_PARTS];
    int started; /* threads started (parts - 1 when all were) */

    /* The job: each generation runs fn(arg, part) once on every part. */
    void (*fn)(void *arg, unsigned part);
    void *arg;
    _Atomic unsigned generation;
    _Atomic unsigned done; /* parts other than the caller's finished */
    _Atomic int stop;

    pthread_mutex_t lock; /* with wake: sleeping threads */
    pthread_cond_t wake;
    _Atomic int sleepers;

    pthread_mutex_t run_lock; /* one job at a time */
};

struct crew_thread {
    struct kiln_cl_crew *crew;
    unsigned part;
    int cpu; /* the core it is pinned to, -1 for none */
};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static inline void pause_cpu(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    sched_yield();
#endif
}

/* A spinning thread's wait between two looks: a pause, and every 32nd time
   the core offered to whatever else is ready to run on it (the caller's
   thread may share it: Linux places threads as it likes). */
static inline void spin_once(unsigned i)
{
    if (i % 32 == 0)
        sched_yield();
    else
        pause_cpu();
}

/* The next generation after `seen` (or the stop): spin for CREW_SPIN_US,
   then sleep. */
static unsigned next_generation(struct kiln_cl_crew *c, unsigned seen)
{
    const double end = now_us() + CREW_SPIN_US;
    for (unsigned i = 1;; i++) {
        unsigned g = atomic_load_explicit(&c->generation, memory_order_acquire);
        if (g != seen || atomic_load_explicit(&c->stop, memory_order_acquire))
            return g;
        spin_once(i);
        if ((i & 255) == 0 && now_us() > end)
            break;
    }
    pthread_mutex_lock(&c->lock);
    atomic_fetch_add(&c->sleepers, 1);
    unsigned g;
    while ((g = atomic_load(&c->generation)) == seen && !atomic_load(&c->stop))
        pthread_cond_wait(&c->wake, &c->lock);
    atomic_fetch_sub(&c->sleepers, 1);
    pthread_mutex_unlock(&c->lock);
    return g;
}

static void *crew_main(void *p)
{
    struct crew_thread *t = p;
    struct kiln_cl_crew *c = t->crew;
    const unsigned part = t->part;
#ifdef CPU_SET
    if (t->cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(t->cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
#endif
    free(t);
    unsigned seen = 0;
    for (;;) {
        seen = next_generation(c, seen);
        if (atomic_load_explicit(&c->stop, memory_order_acquire))
            return NULL;
        c->fn(c->arg, part);
        atomic_fetch_add_explicit(&c->done, 1, memory_order_release);
    }
}

void kiln_cl_crew_stop(struct kiln_cl_crew *c)
{
    if (!c)
        return;
    atomic_store(&c->stop, 1);
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&c->wake);
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < c->started; i++)
        pthread_join(c->thread[i], NULL);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->run_lock);
    free(c);
}

kiln_status kiln_cl_crew_start(unsigned parts, struct kiln_cl_crew **out)
{
    if (parts < 2 || parts > KILN_CL_MAX_PARTS)
        return kiln_error(KILN_ERROR_INVALID_ARGUMENT, "a crew of %u threads (2 to %d)", parts, KILN_CL_MAX_PARTS);
    struct kiln_cl_crew *c = calloc(1, sizeof *c);
    if (!c)
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating kiln's CPU threads");
    c->parts = parts;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_mutex_init(&c->run_lock, NULL);
    /* Part i's thread on the i-th core the process may use. */
    int cpus[KILN_CL_MAX_PARTS] = {0}, ncpus = 0;
#ifdef CPU_SET
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && ncpus < KILN_CL_MAX_PARTS; cpu--)
            if (CPU_ISSET(cpu, &allowed))
                cpus[ncpus++] = cpu;
#endif
    pthread_attr_t attr;
    const int have_attr = pthread_attr_init(&attr) == 0;
    if (have_attr)
        pthread_attr_setstacksize(&attr, CREW_STACK);
    for (unsigned i = 1; i < parts; i++) {
        struct crew_thread *t = malloc(sizeof *t);
        if (t) {
            t->crew = c;
            t->part = i;
            t->cpu = (unsigned)ncpus >= parts ? cpus[parts - 1 - i] : -1;
        }
        if (!t || pthread_create(&c->thread[c->started], have_attr ? &attr : NULL, crew_main, t) != 0) {
            free(t);
            if (have_attr)
                pthread_attr_destroy(&attr);
            kiln_cl_crew_stop(c);
            return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "starting kiln's CPU thread %u of %u", i, parts - 1);
        }
        c->started++;
    }
    if (have_attr)
        pthread_attr_destroy(&attr);
    *out = c;
    return KILN_SUCCESS;
}

void kiln_cl_crew_run(struct kiln_cl_crew *c, void (*fn)(void *arg, unsigned part), void *arg)
{
    pthread_mutex_lock(&c->run_lock);
    c->fn = fn;
    c->arg = arg;
    atomic_store_explicit(&c->done, 0, memory_order_relaxed);
    atomic_fetch_add(&c->generation, 1);
    if (atomic_load(&c->sleepers) > 0) {
        pthread_mutex_lock(&c->lock);
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->lock);
    }
    fn(arg, 0);
    for (unsigned i = 1; atomic_load_explicit(&c->done, memory_order_acquire) != c->parts - 1; i++)
        spin_once(i);
    pthread_mutex_unlock(&c->run_lock);
}
