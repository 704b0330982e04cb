/*
 * cpu/worker_pool.h -- the worker threads of the CPU Op, and how a call shares
 * its work with them without ever waiting on a thread that has not run.
 *
 * Why not an OpenMP parallel region: its end is a barrier that waits for every
 * thread of the team to arrive, including one that the operating system has
 * not scheduled yet.  On a machine whose cores are all busy with other
 * processes that wait lasts a scheduler time slice (8-15 ms were measured for
 * a call that takes 1 ms on one thread).
 *
 * The design (that of work-stealing schedulers such as Intel TBB's, reduced
 * to one job at a time): a call cuts its work into tasks and publishes them as
 * a counter of tasks left; the caller and the workers claim tasks one at a
 * time with a compare-and-swap, until none is left.  A worker that the
 * scheduler runs late finds no task and claims nothing; the caller then does
 * all the work itself, at single-thread speed.  The caller only ever waits
 * for tasks that a worker has claimed and not yet finished; when the
 * operating system preempts a worker in the middle of a task that wait is
 * long, and calls then run on one thread for a while (see bc_pool_run).
 *
 * One 64-bit word, `ticket`, holds the state of the current job:
 *   bits 40..63  epoch: the job's number (a new job bumps it);
 *   bits 32..39  participant slots left for workers (the caller holds slot 0);
 *   bits  0..31  tasks not yet claimed.
 * A worker joins a job with the same compare-and-swap that claims its first
 * task, which also hands it a slot; after a successful claim the job cannot
 * end before that task is done, so the worker may then read the job's
 * function and argument.  A claim that fails (another epoch, no task or no
 * slot left) touches nothing else, so a worker woken long after a call
 * returned cannot reach the finished call's data.
 *
 * One pool serves every Bincount and ScatterAdd module of the process.  It
 * lives in a PyCapsule stored as an attribute of the Python package
 * aesara_bincount_core (BC_POOL_ATTR; the attribute name carries the layout
 * version of the struct below), so the compiled modules keep no static data
 * and share their threads.  The pool is read and created under the GIL, which every call
 * holds.  Workers never call into Python.  A process forked from one that had
 * a pool gets a new pool (the workers do not survive fork()).  Workers block
 * all signals, wait on a condition variable when idle (after spinning for
 * BC_POOL_SPIN_NS, as GNU OpenMP's workers do, so that back-to-back calls find
 * them awake), and live until the process exits.
 *
 * Valid C99 and C++ on its own (POSIX threads, GCC __atomic builtins).
 */
#ifndef AESARA_BINCOUNT_POOL_H
#define AESARA_BINCOUNT_POOL_H

#include "common/host_helpers.h"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BC_POOL_ATTR "_cpu_worker_pool_v1"
#define BC_POOL_PACKAGE "aesara_bincount_core"
#define BC_POOL_MAX_PARTS 256       /* participants of one job, the caller included */
#define BC_POOL_SPIN_NS 200000      /* idle workers spin this long before sleeping */
#define BC_POOL_STACK (1 << 20)     /* bytes of stack of a worker */
#define BC_POOL_MAX_TASKS 0x7FFFFFFF /* tasks of one job */
/* A call that waited on a worker's task this much longer than its own tasks
 * took (see bc_pool_run) was stalled by the scheduler. */
#ifndef BC_POOL_STALL_NS
#define BC_POOL_STALL_NS 200000
#endif
#define BC_POOL_SOLO_MIN_NS 10000000LL    /* first back-off after a stall: 10 ms */
#define BC_POOL_SOLO_MAX_NS 1000000000LL  /* longest back-off: 1 s */

/* The function of a job: run task `task` as participant `part` (0 is the
 * caller; workers get 1, 2, ... in the order they join). */
typedef void (*bc_task_fn)(void *arg, int part, npy_intp task);

typedef struct bc_pool {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    long pid;            /* process that created the pool */
    int workers;         /* threads started */
    int sleeping;        /* atomic: workers waiting on `wake` */
    int busy;            /* atomic: a job is running */
    npy_uint64 ticket;   /* atomic: epoch | slots left | tasks left, see above */
    /* The current job; written before its ticket is published, read by a
     * worker only after it claimed a task of it. */
    bc_task_fn fn;
    void *arg;
    npy_intp ntasks;
    int parts;           /* participants allowed, the caller included */
    npy_intp done;       /* atomic: tasks finished */
    /* Back-off after stalls (read and written by the caller only). */
    long long solo_until; /* calls before this time (ns) run on one thread */
    long long solo_ns;    /* the next back-off */
} bc_pool;

#define BC_TICKET_EPOCH(t) ((t) >> 40)
#define BC_TICKET_SLOTS(t) (((t) >> 32) & 0xFF)
#define BC_TICKET_TASKS(t) ((t)&0xFFFFFFFFULL)

static long long bc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void bc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run tasks of job `epoch` until none is left.  `part` is the
 * participant's slot, or -1 for a worker that has not joined this job yet.
 * Returns the number of tasks run. */
static npy_intp bc_pool_work(bc_pool *p, npy_uint64 epoch, int part)
{
    npy_intp ran = 0;
    for (;;) {
        npy_uint64 t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE), next;
        npy_intp task;
        if (BC_TICKET_EPOCH(t) != epoch || BC_TICKET_TASKS(t) == 0)
            return ran;
        if (part < 0 && BC_TICKET_SLOTS(t) == 0)
            return ran;
        next = t - 1 - (part < 0 ? (1ULL << 32) : 0);
        if (!__atomic_compare_exchange_n(&p->ticket, &t, next, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            continue;
        /* The job cannot end before this task is done: its fields are stable. */
        if (part < 0)
            part = p->parts - (int)BC_TICKET_SLOTS(t);
        task = p->ntasks - (npy_intp)BC_TICKET_TASKS(t);
        p->fn(p->arg, part, task);
        __atomic_fetch_add(&p->done, (npy_intp)1, __ATOMIC_RELEASE);
        ran++;
    }
}

/* A worker: wait for a new epoch, work on it, repeat. */
static void *bc_pool_worker(void *arg)
{
    bc_pool *p = (bc_pool *)arg;
    npy_uint64 seen = ~(npy_uint64)0; /* no epoch: join the current job at once */
    for (;;) {
        npy_uint64 t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
        if (BC_TICKET_EPOCH(t) == seen) {
            const long long until = bc_now_ns() + BC_POOL_SPIN_NS;
            int k = 0;
            while (BC_TICKET_EPOCH(t) == seen && (++k & 1023 || bc_now_ns() < until)) {
                bc_cpu_relax();
                t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
            }
        }
        if (BC_TICKET_EPOCH(t) == seen) {
            pthread_mutex_lock(&p->mu);
            __atomic_fetch_add(&p->sleeping, 1, __ATOMIC_SEQ_CST);
            t = __atomic_load_n(&p->ticket, __ATOMIC_SEQ_CST);
            while (BC_TICKET_EPOCH(t) == seen) {
                pthread_cond_wait(&p->wake, &p->mu);
                t = __atomic_load_n(&p->ticket, __ATOMIC_SEQ_CST);
            }
            __atomic_fetch_sub(&p->sleeping, 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&p->mu);
        }
        seen = BC_TICKET_EPOCH(t);
        bc_pool_work(p, seen, -1);
    }
    return NULL;
}

/* Start workers until there are `n`.  Returns how many there are. */
static int bc_pool_grow(bc_pool *p, int n)
{
    pthread_attr_t attr;
    sigset_t all, old;
    if (p->workers >= n)
        return p->workers;
    if (pthread_attr_init(&attr) != 0)
        return p->workers;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, BC_POOL_STACK);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the workers inherit this mask */
    while (p->workers < n) {
        pthread_t th;
        if (pthread_create(&th, &attr, bc_pool_worker, p) != 0)
            break;
        p->workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return p->workers;
}

/* The process's pool, created on first use; NULL (no exception set) when
 * none can be had.  Needs the GIL. */
static bc_pool *bc_pool_get(void)
{
    PyObject *name, *mod, *cap;
    bc_pool *p = NULL;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    name = PyUnicode_FromString(BC_POOL_PACKAGE);
    if (name == NULL)
        goto done;
    mod = PyImport_GetModule(name); /* already imported: the Op's class lives there */
    if (mod == NULL && !PyErr_Occurred())
        mod = PyImport_Import(name);
    Py_DECREF(name);
    if (mod == NULL)
        goto done;
    cap = PyObject_GetAttrString(mod, BC_POOL_ATTR);
    if (cap != NULL) {
        p = (bc_pool *)PyCapsule_GetPointer(cap, BC_POOL_PACKAGE "." BC_POOL_ATTR);
        Py_DECREF(cap);
        if (p != NULL && p->pid != (long)getpid())
            p = NULL; /* made before a fork(): its workers are gone; leave it */
    }
    PyErr_Clear();
    if (p == NULL) {
        p = (bc_pool *)calloc(1, sizeof(bc_pool));
        if (p != NULL && (pthread_mutex_init(&p->mu, NULL) != 0 ||
                          pthread_cond_init(&p->wake, NULL) != 0)) {
            free(p);
            p = NULL;
        }
        if (p != NULL) {
            p->pid = (long)getpid();
            /* No destructor: workers may still use the pool when the
             * attribute goes away at exit. */
            cap = PyCapsule_New(p, BC_POOL_PACKAGE "." BC_POOL_ATTR, NULL);
            if (cap == NULL || PyObject_SetAttrString(mod, BC_POOL_ATTR, cap) != 0) {
                pthread_cond_destroy(&p->wake);
                pthread_mutex_destroy(&p->mu);
                free(p);
                p = NULL;
            }
            Py_XDECREF(cap);
        }
    }
    Py_DECREF(mod);
done:
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return p;
}

/* After a threaded run: back off after a stall (10 ms, doubling with each
 * further stall up to 1 s), else halve the next back-off.  Called by the
 * caller only, under the GIL. */
static void bc_pool_back_off(bc_pool *p, int stalled)
{
    if (stalled) {
        p->solo_ns = p->solo_ns < BC_POOL_SOLO_MIN_NS ? BC_POOL_SOLO_MIN_NS
                     : p->solo_ns * 2 > BC_POOL_SOLO_MAX_NS ? BC_POOL_SOLO_MAX_NS
                                                             : p->solo_ns * 2;
        p->solo_until = bc_now_ns() + p->solo_ns;
    } else {
        p->solo_ns /= 2;
    }
}

/* Whether a run started now would share its tasks with workers: 0 while
 * the process has no pool, while the pool is in use, or while it backs off
 * after a stall (bc_pool_run would then run every task on this thread),
 * else 1.  A caller whose threaded plan costs more than its single-thread
 * plan when run on one thread (ScatterAdd's private copies, its split by
 * row) asks this first.  Only a hint: bc_pool_run decides again.  Needs the
 * GIL (which every caller holds, and under which the back-off is kept). */
static int bc_pool_threaded(void)
{
    bc_pool *p = bc_pool_get();
    if (p == NULL || __atomic_load_n(&p->busy, __ATOMIC_ACQUIRE))
        return 0;
    return bc_now_ns() >= p->solo_until;
}

/* Run fn(arg, part, task) for every task in [0, ntasks), in increasing order
 * of claim, with up to `nt` participants: this thread (part 0) and workers of
 * the process's pool that are running.  Returns the number of participant
 * slots that may have been used (slots are 0 .. result - 1; a slot that no
 * thread took ran nothing).  Needs the GIL (to find the pool).  Without a
 * pool, when it is in use, or while it backs off after a stall, this thread
 * runs every task itself.
 *
 * Stalls: this thread never waits for a worker that has not claimed a task,
 * but it must wait for a task that a worker has claimed; if the operating
 * system preempts the worker in the middle of it, the wait lasts until the
 * worker runs again.  A wait longer than this thread's own time per task plus
 * BC_POOL_STALL_NS counts as a stall: calls then run on one thread for a
 * while (10 ms, doubling with each further stall up to 1 s, halving with
 * each threaded call that did not stall), so that while the cores stay busy
 * only the occasional threaded call can stall. */
static int bc_pool_run(int nt, npy_intp ntasks, bc_task_fn fn, void *arg)
{
    bc_pool *p = NULL;
    npy_uint64 epoch, t;
    npy_intp task, ran;
    long long start, waited;
    int zero = 0;
    if (nt > BC_POOL_MAX_PARTS)
        nt = BC_POOL_MAX_PARTS;
    if (nt > 1 && ntasks > 1 && ntasks <= BC_POOL_MAX_TASKS)
        p = bc_pool_get();
    if (p != NULL && !__atomic_compare_exchange_n(&p->busy, &zero, 1, 0, __ATOMIC_ACQUIRE,
                                                  __ATOMIC_RELAXED))
        p = NULL;
    start = p != NULL ? bc_now_ns() : 0;
    if (p != NULL && (start < p->solo_until || bc_pool_grow(p, nt - 1) < 1)) {
        __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE);
        p = NULL;
    }
    if (p == NULL) {
        for (task = 0; task < ntasks; task++)
            fn(arg, 0, task);
        return 1;
    }
    if (nt - 1 > p->workers)
        nt = p->workers + 1;
    p->fn = fn;
    p->arg = arg;
    p->ntasks = ntasks;
    p->parts = nt;
    __atomic_store_n(&p->done, (npy_intp)0, __ATOMIC_RELAXED);
    t = __atomic_load_n(&p->ticket, __ATOMIC_RELAXED);
    epoch = (BC_TICKET_EPOCH(t) + 1) & 0xFFFFFF;
    __atomic_store_n(&p->ticket,
                     (epoch << 40) | ((npy_uint64)(nt - 1) << 32) | (npy_uint64)ntasks,
                     __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleeping, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    ran = bc_pool_work(p, epoch, 0);
    /* Every task is claimed now; wait for those that running workers hold. */
    waited = 0;
    if (__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) != ntasks) {
        const long long mine = bc_now_ns();
        const long long per_task = ran > 0 ? (mine - start) / ran : 0;
        int k = 0;
        while (__atomic_load_n(&p->done, __ATOMIC_ACQUIRE) != ntasks) {
            if (++k & 255 || bc_now_ns() - mine < BC_POOL_SPIN_NS / 4)
                bc_cpu_relax();
            else
                sched_yield(); /* the holder may need this core */
        }
        waited = bc_now_ns() - mine - per_task;
    }
    bc_pool_back_off(p, waited > BC_POOL_STALL_NS);
    __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE);
    return nt;
}

/* Count a stall that the tasks of a run saw themselves (a task that waited
 * longer than BC_POOL_STALL_NS for another task it depends on, which
 * bc_pool_run cannot see): calls then run on one thread for a while, as
 * after a stall of bc_pool_run.  Call it after that run.  Needs the GIL. */
static void bc_pool_stalled(void)
{
    bc_pool *p = bc_pool_get();
    if (p != NULL)
        bc_pool_back_off(p, 1);
}

/* Threads for a call of `work` units (elements, or elements times row
 * length): 1 below `min_work` units, inside an OpenMP parallel region, or
 * without OpenMP; else OpenMP's thread count, cut so that each thread gets at
 * least `min_share` units, and at most BC_POOL_MAX_PARTS.  The one thread
 * count of Bincount, FusedBincount and ScatterAdd. */
static int bc_pool_threads(double work, double min_work, double min_share)
{
#ifdef _OPENMP
    int nt;
    if (work < min_work || omp_in_parallel())
        return 1;
    nt = omp_get_max_threads();
    if ((double)nt * min_share > work)
        nt = (int)(work / min_share);
    return nt < 1 ? 1 : nt > BC_POOL_MAX_PARTS ? BC_POOL_MAX_PARTS : nt;
#else
    (void)work;
    (void)min_work;
    (void)min_share;
    return 1;
#endif
}

#endif /* AESARA_BINCOUNT_POOL_H */
