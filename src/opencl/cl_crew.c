/*
 * kiln's own threads for a CPU device (docs/pocl.md, "kiln's threads"): the
 * caller and the parts - 1 threads of kiln's that join a launch in time
 * share its work, fork and join as OpenMP runs a parallel region, except
 * that the caller waits only for the threads that joined. Between launches
 * the threads spin for a while (a launch that follows soon finds them
 * running) and then sleep until the next.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
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

    /* The job: fn(arg, part) on the caller and on each thread that joins it
       before the caller closes it. The state holds the job's generation
       (high 32 bits), whether it is closed (CREW_CLOSED) and how many threads
       joined it (the low bits): a thread joins by counting itself in while
       the job is open, and the caller waits for those alone, so a thread
       the host keeps off its core holds up no launch it did not join. */
    void (*fn)(void *arg, unsigned part);
    void *arg;
    _Atomic uint64_t state;
    _Atomic unsigned done; /* threads that joined the job and finished */
    _Atomic int stop;

    pthread_mutex_t lock; /* with wake: sleeping threads */
    pthread_cond_t wake;
    _Atomic int sleepers;

    /* Where the threads are pinned (one core each, where the process may
       use a core a thread and one for the caller): the core the caller ran
       on when it started the job, and the one no thread of the crew holds.
       A thread that finds the caller on its core moves to the spare one
       (crew_main), so that the caller's part and its own do not share a
       core. */
    _Atomic int caller_cpu;
    _Atomic int spare_cpu; /* -1: the threads are not pinned */
};

/* One job at a time in the process, whichever crew runs it: every crew's
   threads are on the same cores, so two jobs at once would only take turns
   there, and POCL would see two launches of one compiled kernel at once,
   which it cannot count when their grids differ (crew_launch,
   cl_backend.c). */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;

#define CREW_CLOSED ((uint64_t)1 << 31)
#define CREW_JOINED (CREW_CLOSED - 1)

static unsigned generation_of(uint64_t state) { return (unsigned)(state >> 32); }

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

/* Pin the calling thread to `cpu`; non-zero where it could not be. */
static int pin_to(int cpu)
{
#ifdef CPU_SET
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one);
#else
    (void)cpu;
    return -1;
#endif
}

/* The next generation after `seen` (or the stop): spin for CREW_SPIN_US,
   then sleep. */
static unsigned next_generation(struct kiln_cl_crew *c, unsigned seen)
{
    const double end = now_us() + CREW_SPIN_US;
    for (unsigned i = 1;; i++) {
        unsigned g = generation_of(atomic_load_explicit(&c->state, memory_order_acquire));
        if (g != seen || atomic_load_explicit(&c->stop, memory_order_acquire))
            return g;
        spin_once(i);
        if ((i & 255) == 0 && now_us() > end)
            break;
    }
    pthread_mutex_lock(&c->lock);
    atomic_fetch_add(&c->sleepers, 1);
    unsigned g;
    while ((g = generation_of(atomic_load(&c->state))) == seen && !atomic_load(&c->stop))
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
    int cpu = t->cpu;
    if (cpu >= 0 && pin_to(cpu) != 0)
        cpu = -1;
#ifdef __linux__
    pthread_setname_np(pthread_self(), "kiln-crew"); /* for top -H, gdb and test_network */
#endif
    free(t);
    unsigned seen = 0;
    for (;;) {
        seen = next_generation(c, seen);
        if (atomic_load_explicit(&c->stop, memory_order_acquire))
            return NULL;
        /* The caller on this thread's core: move to the spare one, whether
           or not the job is still open (the caller keeps the core while it
           works, and yields it after a job no thread joined). One thread at
           most holds the caller's core, and a previous mover's update
           reached this one through the jobs' states and done counts. */
        if (cpu >= 0 && atomic_load_explicit(&c->caller_cpu, memory_order_relaxed) == cpu) {
            const int spare = atomic_exchange_explicit(&c->spare_cpu, cpu, memory_order_acq_rel);
            if (spare >= 0 && pin_to(spare) == 0)
                cpu = spare;
            else
                atomic_store_explicit(&c->spare_cpu, spare, memory_order_release);
        }
        /* Join the job, unless the caller has closed it (or started another). */
        uint64_t s = atomic_load_explicit(&c->state, memory_order_acquire);
        int joined = 0;
        while (!joined && generation_of(s) == seen && !(s & CREW_CLOSED))
            joined =
                atomic_compare_exchange_weak_explicit(&c->state, &s, s + 1, memory_order_acq_rel, memory_order_acquire);
        if (!joined)
            continue;
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
    /* Part i's thread on the i-th core the process may use. */
    int cpus[KILN_CL_MAX_PARTS] = {0}, ncpus = 0;
#ifdef CPU_SET
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && ncpus < KILN_CL_MAX_PARTS; cpu--)
            if (CPU_ISSET(cpu, &allowed))
                cpus[ncpus++] = cpu;
#endif
    /* The threads take cpus[parts - 2] down to cpus[0]; the caller is
       expected on the one left. */
    const unsigned spare = parts - 1; /* parts >= 2, as checked above */
    atomic_init(&c->spare_cpu, (unsigned)ncpus > spare ? cpus[spare] : -1);
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
    pthread_mutex_lock(&run_lock);
    c->fn = fn;
    c->arg = arg;
    atomic_store_explicit(&c->done, 0, memory_order_relaxed);
    atomic_store_explicit(&c->caller_cpu, sched_getcpu(), memory_order_relaxed);
    const uint64_t generation = generation_of(atomic_load_explicit(&c->state, memory_order_relaxed)) + 1u;
    atomic_store_explicit(&c->state, (generation & 0xffffffffu) << 32, memory_order_release);
    if (atomic_load(&c->sleepers) > 0) {
        pthread_mutex_lock(&c->lock);
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->lock);
    }
    fn(arg, 0);
    const unsigned joined =
        (unsigned)(atomic_fetch_or_explicit(&c->state, CREW_CLOSED, memory_order_acq_rel) & CREW_JOINED);
    for (unsigned i = 1; atomic_load_explicit(&c->done, memory_order_acquire) != joined; i++)
        spin_once(i);
    pthread_mutex_unlock(&run_lock);
    /* A thread that did not join may be waiting for this core (pinned to
       it, with the caller on it): let it run, and move. */
    if (joined + 1 < c->parts)
        sched_yield();
}
