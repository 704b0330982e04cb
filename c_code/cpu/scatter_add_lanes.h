/*
 * cpu/scatter_add_lanes.h -- ScatterAdd's C code, part 3 of 3: how a call
 * shares its work between threads (the lanes, on the worker pool of
 * cpu/worker_pool.h), and sa_run, which chooses the plan.
 *
 * Neighbours: cpu/scatter_add_loops.h (part 2: the loops each task runs),
 * cpu/scatter_add_check.h (part 1: the types, the constants, the index
 * check), cpu/scatter_add.c (the entry point and the overview).
 *
 * With OpenMP (openmp=True gives the thread count, omp_get_max_threads), and
 * when the work is large enough (SA_OMP_MIN_WORK), two ways to split it
 * without atomics.  Both cut idx into blocks of about SA_TASK_BYTES of
 * increments and the work into lanes, one per thread, each of which gets
 * its blocks in index order, one at a time (a lock per lane); the tasks run
 * on the worker pool that Bincount uses (cpu/worker_pool.h, one pool per
 * process), a block each: the calling thread claims tasks itself, so a call
 * never waits on a worker that has not started (on busy cores it does the
 * work alone), only for a block in progress; after a stall (a worker
 * preempted in the middle of a block) calls run the serial loop for a while.
 *   by row, when rows are wide (SA_ROWS_MIN_BYTES) and out is larger than a
 *     last-level cache (SA_ROWS_MIN_OUT_BYTES): a lane is an owner of
 *     rows of out, blocks of SA_ROWS_BLOCK rows dealt out in turn (so that
 *     the hot rows of a skewed index, such as the first rows of a
 *     vocabulary sorted by frequency, are shared out); it walks every block
 *     of idx and adds the rows it owns.  Reading idx once per owner costs
 *     little against wide rows, and nothing else is read or written twice.
 *     Each row receives its increments in index order, so the result is the
 *     serial one, bit for bit.  Wide rows of a smaller out run on one
 *     thread: its rows stay in cache and the call streams the increments
 *     from memory, which a second thread does not speed up; split by row,
 *     the (N, V, D) = (1e5, 1e4, 64) cells ran at 0.77x (float64) and 0.74x
 *     (float32) the speed of one thread on a quiet 2-core machine (issue
 *     21; the likely costs: each owner's pass over idx, with a branch per
 *     index that cannot be predicted, on top of a stream that one thread
 *     already nearly saturates).
 *   by thread (privatized rows), for narrow rows: two runs of the pool.
 *     First the blocks of idx, dealt out in turn to the lanes: lane 0 adds
 *     into out, lane t into private copy t - 1 of out (starting at 0, or -0.0
 *     for floats).  Then, unless a bad index was met, the copies are added
 *     into out in copy order, a task per block of rows (SA_MERGE_BYTES).
 *     Chosen when the copies are small against the increments
 *     (SA_PRIVATE_MAX_FRACTION), below SA_PRIVATE_MAX_BYTES, and idx has two
 *     blocks or more.  Float sums then depend on the thread count (fixed for
 *     a given count, whichever thread ran which block).
 * Both cost more than the serial loop when one thread runs all their tasks,
 * so a call takes them only when the pool would share them out
 * (bc_pool_threaded), except the split by thread of float sums, whose
 * rounding it fixes (see sa_run).
 * Otherwise one thread adds everything, in index order.
 *
 * Included once per instantiation (see cpu/scatter_add_check.h); valid C99
 * and C++ on its own.
 */
#ifndef SA_LANES_INSTANTIATED
#define SA_LANES_INSTANTIATED 1

#include "cpu/scatter_add_loops.h"

/* ---- the strategies ---- */

/* Threads for a call (1: the calling thread adds everything). */
static int APPLY_SPECIFIC(sa_threads)(const SA_CTX *c)
{
    const double work = (double)c->n * (double)(c->rowlen ? c->rowlen : 1);
    return bc_pool_threads(work, (double)SA_OMP_MIN_WORK, SA_OMP_MIN_WORK / 2.0);
}

/* A threaded call: its strategy's data, shared by its tasks (cpu/worker_pool.h
 * runs them on the calling thread and on the pool's workers).  Both splits
 * cut idx into blocks of `block` indices and the work into lanes: a lane is
 * a private copy of out (by thread; lane 0 is out itself) or an owner of
 * rows (by row), which receives its blocks in index order, one at a time.
 * Each task of the pool runs one block: the next one of a lane that no
 * other thread holds (a lock per lane), the thread's own lane first.  So a
 * lane's sums come out the same whichever threads ran its blocks, and a
 * thread waits only when every lane with blocks left is held by another
 * thread, for the block in progress there: as with the pool itself, a call
 * never waits on a worker that has not started, only on one that the
 * operating system preempted in the middle of a block (a stall, which the
 * call reports to the pool: calls then run on one thread for a while). */
#define SA_JOB APPLY_SPECIFIC(sa_job)
typedef struct {
    const SA_CTX *c;
    int parts;           /* lanes */
    npy_intp block;      /* indices of a block of idx */
    npy_intp nblocks;    /* blocks of idx */
    npy_intp *lanes;     /* per lane, SA_LANE_STRIDE apart: blocks started, lock */
    SA_ACC_T *priv;      /* by thread: parts - 1 private copies of out (NULL: by row) */
    npy_intp copy;       /* ... of this many elements each */
    npy_intp merge_rows; /* ... added into out this many rows per task */
    int bad;             /* atomic: a block met a bad index (c->check only) */
    int stalled;         /* atomic: a thread waited over BC_POOL_STALL_NS for a lane */
} SA_JOB;

/* The state of a lane, one cache line from the next lane's. */
#define SA_LANE_STRIDE ((npy_intp)(64 / sizeof(npy_intp)))

/* Blocks of lane `lane`: by thread, blocks lane, lane + parts, ...; by row,
 * every block. */
static npy_intp APPLY_SPECIFIC(sa_lane_blocks)(const SA_JOB *j, int lane)
{
    if (j->priv == NULL)
        return j->nblocks;
    return (j->nblocks - lane + j->parts - 1) / j->parts;
}

/* By thread, block `step` of lane `lane`: block step * parts + lane of idx
 * into out (lane 0) or into private copy lane - 1, which the lane's first
 * block fills with the additive identity: 0, or -0.0 for floats (x + -0.0 is
 * x for every x, -0.0 included, where x + 0.0 would turn a -0.0 of the base
 * into 0.0).  A block always goes into the same array, after the same
 * blocks, so float sums depend on the thread count only. */
static void APPLY_SPECIFIC(sa_chunk_block)(SA_JOB *j, int lane, npy_intp step)
{
    const SA_CTX *c = j->c;
    const npy_intp lo = (step * j->parts + lane) * j->block;
    const npy_intp hi = c->n - lo < j->block ? c->n : lo + j->block;
    int found;
    if (lane == 0) {
        found = APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, 1, lo, hi, 0, 1);
    } else {
        SA_ACC_T *p = j->priv + (npy_intp)(lane - 1) * j->copy;
        if (step == 0) {
            /* The copy is filled by the thread that first adds into it, so
             * that its pages sit near that thread. */
#if SA_OUT_FLOAT
            npy_intp r;
            for (r = 0; r < j->copy; r++)
                p[r] = (SA_ACC_T)-0.0;
#else
            memset(p, 0, (size_t)j->copy * sizeof(SA_ACC_T));
#endif
        }
        found = APPLY_SPECIFIC(sa_accumulate)(c, (char *)p,
                                              c->rowlen * (npy_intp)sizeof(SA_ACC_T), 1, lo, hi,
                                              0, 1);
    }
    if (found)
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* By row, block `step` of lane `lane`: block step of idx, adding the
 * increments of the rows that owner `lane` owns (sa_owner). */
static void APPLY_SPECIFIC(sa_rows_block)(SA_JOB *j, int lane, npy_intp step)
{
    const SA_CTX *c = j->c;
    const npy_intp lo = step * j->block;
    const npy_intp hi = c->n - lo < j->block ? c->n : lo + j->block;
    if (APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, c->out_contig, lo, hi, lane,
                                      j->parts))
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
}

/* A task: run the next block of a lane that no other thread holds: of the
 * lane that has started the fewest blocks (the thread's own lane first among
 * equals).  A thread alone then runs block b of every lane before block
 * b + 1 of any: by row, the owners' passes over a block of idx and its
 * increments follow each other while these are in the cache; by thread, idx
 * is read in order. */
static void APPLY_SPECIFIC(sa_lane_task)(void *arg, int part, npy_intp task)
{
    SA_JOB *j = (SA_JOB *)arg;
    long long start = 0;
    int k = 0;
    (void)task;
    for (;;) {
        int i, best = -1;
        npy_intp best_step = 0;
        for (i = 0; i < j->parts; i++) {
            const int lane = (part + i) % j->parts;
            const npy_intp *st = j->lanes + (npy_intp)lane * SA_LANE_STRIDE;
            const npy_intp s = __atomic_load_n(&st[0], __ATOMIC_ACQUIRE);
            if (s >= APPLY_SPECIFIC(sa_lane_blocks)(j, lane) ||
                __atomic_load_n(&st[1], __ATOMIC_RELAXED))
                continue; /* done, or held by another thread */
            if (best < 0 || s < best_step) {
                best = lane;
                best_step = s;
            }
        }
        if (best >= 0) {
            npy_intp *st = j->lanes + (npy_intp)best * SA_LANE_STRIDE;
            npy_intp unlocked = 0, step;
            const npy_intp nb = APPLY_SPECIFIC(sa_lane_blocks)(j, best);
            if (!__atomic_compare_exchange_n(&st[1], &unlocked, 1, 0, __ATOMIC_ACQUIRE,
                                             __ATOMIC_RELAXED))
                continue; /* another thread took it first: look again */
            if (start != 0 && bc_now_ns() - start > BC_POOL_STALL_NS)
                __atomic_store_n(&j->stalled, 1, __ATOMIC_RELAXED);
            step = st[0];
            if (step < nb) {
                __atomic_store_n(&st[0], step + 1, __ATOMIC_RELEASE);
                if (__atomic_load_n(&j->bad, __ATOMIC_RELAXED))
                    ; /* a bad index: out is dropped, the copies are not merged */
                else if (j->priv != NULL)
                    APPLY_SPECIFIC(sa_chunk_block)(j, best, step);
                else
                    APPLY_SPECIFIC(sa_rows_block)(j, best, step);
            }
            __atomic_store_n(&st[1], 0, __ATOMIC_RELEASE);
            if (step < nb)
                return;
            continue; /* the lane ran out meanwhile: look again */
        }
        /* Every lane with blocks left is held by another thread (there are
         * as many tasks as blocks: one is left for this task): wait. */
        if (start == 0)
            start = bc_now_ns();
        if (++k & 255 || bc_now_ns() - start < BC_POOL_SPIN_NS / 4)
            bc_cpu_relax();
        else
            sched_yield(); /* the holder may need this core */
    }
}

/* Run the blocks of every lane (parts, block, nblocks, priv must be set), then
 * tell the pool of a stall that the tasks saw.  0, or -1 when out of memory
 * (nothing has been run then). */
static int APPLY_SPECIFIC(sa_run_lanes)(SA_JOB *j, int nt)
{
    npy_intp ntasks = 0;
    int lane;
    j->lanes = (npy_intp *)calloc((size_t)j->parts * (size_t)SA_LANE_STRIDE, sizeof(npy_intp));
    if (j->lanes == NULL)
        return -1;
    for (lane = 0; lane < j->parts; lane++)
        ntasks += APPLY_SPECIFIC(sa_lane_blocks)(j, lane);
    bc_pool_run(nt, ntasks, APPLY_SPECIFIC(sa_lane_task), j);
    if (__atomic_load_n(&j->stalled, __ATOMIC_RELAXED))
        bc_pool_stalled();
    free(j->lanes);
    j->lanes = NULL;
    return 0;
}

/* By thread, merge task t: rows [t * merge_rows, ...) of every copy, in copy
 * order, into out. */
static void APPLY_SPECIFIC(sa_merge_task)(void *arg, int part, npy_intp t)
{
    SA_JOB *j = (SA_JOB *)arg;
    const SA_CTX *c = j->c;
    const npy_intp r0 = t * j->merge_rows;
    const npy_intp r1 = c->nrows - r0 < j->merge_rows ? c->nrows : r0 + j->merge_rows;
    npy_intp r;
    int k;
    (void)part;
    for (k = 0; k < j->parts - 1; k++) {
        const SA_ACC_T *p = j->priv + (npy_intp)k * j->copy;
        for (r = r0; r < r1; r++)
            APPLY_SPECIFIC(sa_add_contig)((SA_ACC_T *)(c->out + r * c->ostride),
                                          p + r * c->rowlen, c->rowlen);
    }
}

/* By thread (privatized rows): two runs of the pool, the blocks of idx into
 * their lanes (sa_chunk_block), then, unless a bad index was met, the
 * copies into out by blocks of rows (sa_merge_task).  Needs 2 blocks or
 * more.  Returns -1 when out of memory (nothing has been written then), else
 * 0; *bad is set when a bad index was met. */
static int APPLY_SPECIFIC(sa_run_private)(const SA_CTX *c, int nt, npy_intp block, int *bad)
{
    const npy_intp rowbytes = c->rowlen * (npy_intp)sizeof(SA_ACC_T);
    SA_JOB j;
    size_t bytes;
    memset(&j, 0, sizeof(j));
    j.c = c;
    j.block = block;
    j.nblocks = (c->n + block - 1) / block;
    j.parts = (npy_intp)nt < j.nblocks ? nt : (int)j.nblocks;
    j.copy = c->nrows * c->rowlen;
    bytes = (size_t)(j.parts - 1) * (size_t)j.copy * sizeof(SA_ACC_T);
    j.priv = (SA_ACC_T *)malloc(bytes ? bytes : 1);
    if (j.priv == NULL)
        return -1;
    bc_advise_huge_pages(j.priv, bytes);
    if (APPLY_SPECIFIC(sa_run_lanes)(&j, nt) != 0) {
        free(j.priv);
        return -1;
    }
    *bad = __atomic_load_n(&j.bad, __ATOMIC_RELAXED);
    j.merge_rows = SA_MERGE_BYTES / rowbytes;
    if (j.merge_rows < 1)
        j.merge_rows = 1;
    if (!*bad)
        bc_pool_run(nt, (c->nrows + j.merge_rows - 1) / j.merge_rows,
                    APPLY_SPECIFIC(sa_merge_task), &j);
    free(j.priv);
    return 0;
}

/* By row: one pool run over the blocks of idx of every owner of rows.
 * Returns 1 when a bad index was met, 0, or -1 when out of memory (nothing
 * has been written then). */
static int APPLY_SPECIFIC(sa_run_rows)(const SA_CTX *c, int nt, npy_intp block)
{
    SA_JOB j;
    memset(&j, 0, sizeof(j));
    j.c = c;
    j.parts = nt;
    j.block = block;
    j.nblocks = (c->n + block - 1) / block;
    if (APPLY_SPECIFIC(sa_run_lanes)(&j, nt) != 0)
        return -1;
    return __atomic_load_n(&j.bad, __ATOMIC_RELAXED);
}

/* Add everything; returns 1 when a bad index was met (c->check only).  Run
 * on one thread, both threaded plans cost more than the serial loop (copies
 * to fill and merge, or idx read once per owner), so while the pool would
 * not share them out (bc_pool_threaded: it backs off after a stall) the
 * call takes the serial loop, which gives the same result: the split by row
 * adds in index order, and integer sums are exact.  Float sums split by
 * thread are not the serial ones: they keep that split (run on one thread
 * then), so that they depend on the thread count only, never on the load of
 * the machine. */
static int APPLY_SPECIFIC(sa_run)(const SA_CTX *c)
{
    const int nt = APPLY_SPECIFIC(sa_threads)(c);
    int bad = 0;
    if (nt > 1) {
        const npy_intp rowbytes = c->rowlen * (npy_intp)sizeof(SA_ACC_T);
        const double inc_bytes = (double)c->n * (double)rowbytes;
        const double priv_bytes = (double)(nt - 1) * (double)c->nrows * (double)rowbytes;
        const npy_intp block = SA_TASK_BYTES / rowbytes > 0 ? SA_TASK_BYTES / rowbytes : 1;
        const int wide = rowbytes >= SA_ROWS_MIN_BYTES && c->nrows >= (npy_intp)nt * SA_ROWS_BLOCK;
        const int by_row = wide && (double)c->nrows * (double)rowbytes >= (double)SA_ROWS_MIN_OUT_BYTES;
        const int by_thread = !wide && c->out_contig && c->n > block &&
                              priv_bytes * SA_PRIVATE_MAX_FRACTION <= inc_bytes &&
                              priv_bytes <= (double)SA_PRIVATE_MAX_BYTES;
        if (by_row && bc_pool_threaded()) {
            bad = APPLY_SPECIFIC(sa_run_rows)(c, nt, block);
            if (bad >= 0)
                return bad;
        }
        if (by_thread && (SA_OUT_FLOAT || bc_pool_threaded()) &&
            APPLY_SPECIFIC(sa_run_private)(c, nt, block, &bad) == 0)
            return bad;
    }
    return APPLY_SPECIFIC(sa_accumulate)(c, c->out, c->ostride, c->out_contig, 0, c->n, 0, 1);
}

#endif /* SA_LANES_INSTANTIATED */
