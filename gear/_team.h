/* A fork-join team for gear's batched kernels.
 *
 * A batched call of a few dozen states is a few microseconds of work.
 * Starting and joining an OpenMP parallel region between two calls from
 * Python cost 1.1-2.7 us on the machines gear is measured on (libgomp; the
 * main thread ran Python in between), as much as the work it shares; this
 * team costs about 0.4 us (benchmarks/bench_small_batches.py,
 * docs/performance.md).  Long work (rollouts, the maximal stepping) keeps
 * OpenMP.
 *
 * gear_team_run(n, fn, ctx) calls fn(ctx, part, n) for part = 0 .. n-1,
 * part 0 in the calling thread and the others on persistent worker
 * threads, and returns when all have returned.  Workers are started on
 * first use; between jobs they spin for GEAR_TEAM_SPIN_NS, then sleep on a
 * condition variable.  If the team is busy (another thread's call, or a
 * call from inside a part), or a worker cannot be started, the caller runs
 * every part itself: same results, one thread.  After fork() the child
 * starts with no workers.
 *
 * Included by gear/_data.pyx only: every extension shares its one team.
 */
#ifndef GEAR_TEAM_H
#define GEAR_TEAM_H

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <time.h>

#define GEAR_TEAM_MAX 256
#define GEAR_TEAM_SPIN_NS 100000L

typedef void (*gear_team_fn)(void *ctx, int part, int nparts);

static struct {
    pthread_mutex_t lock;          /* guards the sleep and the start of workers */
    pthread_cond_t wake;
    atomic_long gen;               /* job number << 16 | its number of parts */
    atomic_int pending;            /* parts of the current job not yet returned */
    atomic_int busy;               /* a caller holds the team */
    atomic_int sleepers;           /* workers waiting on `wake` */
    gear_team_fn fn;
    void *ctx;
    int nworkers;                  /* workers started: parts 1 .. nworkers */
    int atfork;                    /* the fork handler is registered */
    long start[GEAR_TEAM_MAX];     /* the job number when each worker was started */
} gear_team = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};

static inline void gear_team_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline long gear_team_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void *gear_team_worker(void *arg)
{
    int part = (int)(long)arg;
    long seen = gear_team.start[part], g;      /* jobs after this one are its to run */
    for (;;) {
        long t0 = gear_team_ns();
        int spins = 0;
        while ((g = atomic_load_explicit(&gear_team.gen, memory_order_acquire)) == seen) {
            gear_team_pause();
            if (++spins % 64 == 0 && gear_team_ns() - t0 > GEAR_TEAM_SPIN_NS) {
                pthread_mutex_lock(&gear_team.lock);
                atomic_fetch_add(&gear_team.sleepers, 1);
                while ((g = atomic_load(&gear_team.gen)) == seen)
                    pthread_cond_wait(&gear_team.wake, &gear_team.lock);
                atomic_fetch_sub(&gear_team.sleepers, 1);
                pthread_mutex_unlock(&gear_team.lock);
                break;
            }
        }
        seen = g;
        if (part < (int)(g & 0xffff)) {          /* the caller waits for this part */
            gear_team.fn(gear_team.ctx, part, (int)(g & 0xffff));
            atomic_fetch_sub_explicit(&gear_team.pending, 1, memory_order_release);
        }
    }
    return NULL;
}

static void gear_team_after_fork(void)
{
    /* the child has only the thread that forked */
    pthread_mutex_init(&gear_team.lock, NULL);
    pthread_cond_init(&gear_team.wake, NULL);
    gear_team.nworkers = 0;
    atomic_store(&gear_team.sleepers, 0);
    atomic_store(&gear_team.pending, 0);
    atomic_store(&gear_team.busy, 0);
}

/* start workers for parts 1 .. n-1; false if one cannot be started */
static int gear_team_grow(int n)
{
    pthread_attr_t attr;
    pthread_t th;
    int ok = 1;
    pthread_mutex_lock(&gear_team.lock);
    if (!gear_team.atfork)
        gear_team.atfork = pthread_atfork(NULL, NULL, gear_team_after_fork) == 0;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (gear_team.nworkers < n - 1) {
        gear_team.start[gear_team.nworkers + 1] = atomic_load(&gear_team.gen);
        if (!gear_team.atfork ||
            pthread_create(&th, &attr, gear_team_worker, (void *)(long)(gear_team.nworkers + 1)) != 0) {
            ok = 0;
            break;
        }
        gear_team.nworkers++;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_unlock(&gear_team.lock);
    return ok;
}

/* the caller's wait for the other parts: spinning, and after
 * GEAR_TEAM_SPIN_NS yielding its core (a worker the system has not
 * scheduled, on a machine with more runnable threads than cores) */
static void gear_team_wait(void)
{
    long t0 = 0;
    int spins = 0;
    while (atomic_load_explicit(&gear_team.pending, memory_order_acquire) != 0) {
        gear_team_pause();
        if (++spins % 64 == 0) {
            if (t0 == 0)
                t0 = gear_team_ns();
            else if (gear_team_ns() - t0 > GEAR_TEAM_SPIN_NS)
                sched_yield();
        }
    }
}

static void gear_team_serial(int n, gear_team_fn fn, void *ctx)
{
    int p;
    for (p = 0; p < n; p++)
        fn(ctx, p, n);
}

static void gear_team_run(int n, gear_team_fn fn, void *ctx)
{
    int expected = 0;
    if (n < 1)
        n = 1;
    if (n > GEAR_TEAM_MAX)
        n = GEAR_TEAM_MAX;
    if (n == 1 || !atomic_compare_exchange_strong(&gear_team.busy, &expected, 1)) {
        gear_team_serial(n, fn, ctx);
        return;
    }
    if (gear_team.nworkers < n - 1 && !gear_team_grow(n)) {
        atomic_store(&gear_team.busy, 0);
        gear_team_serial(n, fn, ctx);
        return;
    }
    gear_team.fn = fn;
    gear_team.ctx = ctx;
    atomic_store(&gear_team.pending, n - 1);
    /* seq_cst, and before reading sleepers: a worker going to sleep either
       sees the new job or is woken */
    atomic_store(&gear_team.gen, ((atomic_load(&gear_team.gen) >> 16) + 1) << 16 | n);
    if (atomic_load(&gear_team.sleepers) > 0) {
        pthread_mutex_lock(&gear_team.lock);
        pthread_cond_broadcast(&gear_team.wake);
        pthread_mutex_unlock(&gear_team.lock);
    }
    fn(ctx, 0, n);
    gear_team_wait();
    atomic_store(&gear_team.busy, 0);
}

/* A workspace of at least n doubles, 64-byte aligned, kept by the calling
 * thread from one job to the next (a part's workspace without a malloc per
 * call); NULL if it cannot be had.  One part at a time per thread uses it. */
static double *gear_team_scratch(long n)
{
    static __thread double *buf = NULL;
    static __thread long cap = 0;
    if (n > cap) {
        void *p = NULL;
        long want = n + n / 4 + 8;
        if (posix_memalign(&p, 64, (size_t)want * sizeof(double)) != 0)
            return NULL;
        free(buf);
        buf = (double *)p;
        cap = want;
    }
    return buf;
}

#endif
