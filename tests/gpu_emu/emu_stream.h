/*
 * emu_stream.h -- the asynchronous mode of the fake libcuda (FAKE_CUDA_ASYNC=1),
 * included by fake_libcuda.cc.
 *
 * In the normal mode every kernel, memset and copy runs inside the call that
 * queues it, so a host that reads a result before it waits for the stream
 * still sees the right bytes.  In this mode they are queued on a stream
 * thread instead, in order, and run only once some host thread waits
 * (cuStreamSynchronize, the fake CuPy's synchronizations, copies into
 * pageable memory, FAKE_CUDA_ASYNC_LAG_MS below): the latest a GPU may run
 * them.  So a host read of page-locked memory before the wait sees the old
 * bytes, as it may on a GPU, and a result that depends on it comes out wrong.
 * A wait drains the whole queue, what other host threads queued meanwhile
 * included, before it returns (a GPU may run that work before the waiter
 * looks at its results too).  One queue serves every stream and device:
 * the package queues everything on CuPy's current stream, and one order
 * for all is an order a GPU may choose.
 *
 * What it reports on stderr ("fake libcuda (async): ...", counted by
 * fake_cuda_async_reports): a copy into page-locked memory queued while a
 * copy into the same bytes, queued by another host thread, is still in
 * flight, or has landed while the thread that queued it has not yet come
 * back from its wait (a staging buffer or slot lent to two calls at once:
 * one of them reads the other's bytes), and page-locked memory freed under
 * a copy in flight (its free is then left undone, so that the copy lands
 * in memory still owned).
 *
 * FAKE_CUDA_ASYNC_LAG_MS=N: the stream thread also runs work queued N ms
 * ago, with no one waiting (a GPU that runs behind the host, not one that
 * waits for the host); 0 or unset: only when someone waits.
 *
 * The fake CuPy (tests/gpu_emu/fakecupy) calls fake_cuda_drain before each
 * of its own operations on device memory, which it does on the host: that
 * is the stream order of CuPy's work behind ours, on the one stream.
 *
 * Test code only (C++20).
 */
#ifndef BC_EMU_STREAM_H
#define BC_EMU_STREAM_H

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace emu_stream {

inline bool enabled()
{
    static const bool on = [] {
        const char *v = std::getenv("FAKE_CUDA_ASYNC");
        return v != nullptr && *v && std::strcmp(v, "0") != 0;
    }();
    return on;
}

inline long lag_ms()
{
    static const long ms = [] {
        const char *v = std::getenv("FAKE_CUDA_ASYNC_LAG_MS");
        return v != nullptr ? std::atol(v) : 0L;
    }();
    return ms;
}

/* One queued operation; `landing` and `bytes`: the page-locked bytes a
 * device-to-host copy writes (none for the others). */
struct op {
    std::function<void()> run;
    const char *landing = nullptr;
    size_t bytes = 0;
    std::thread::id by;
    std::chrono::steady_clock::time_point queued;
};

/* The stream's state, never destroyed: the stream thread may still wait on
 * it when the process exits. */
/* A copy that has landed, until the host thread that queued it is back from a wait. */
struct landed {
    const char *landing;
    size_t bytes;
    std::thread::id by;
};

struct state {
    std::mutex lock;
    std::vector<landed> unread;
    std::condition_variable work_cv, idle_cv;
    std::deque<op> queue;
    int waiters = 0;
    bool busy = false;           /* the stream thread runs an operation */
    const op *running = nullptr; /* that operation */
    std::thread::id worker;
};
inline state &st = *new state;
inline std::mutex &lock = st.lock;
inline std::condition_variable &work_cv = st.work_cv, &idle_cv = st.idle_cv;
inline std::deque<op> &queue = st.queue;
inline std::vector<landed> &unread = st.unread;
inline int &waiters = st.waiters;
inline bool &busy = st.busy;
inline const op *&running = st.running;
inline std::thread::id &worker = st.worker;
inline std::atomic<long long> reports{0};

inline void report(const char *what)
{
    reports.fetch_add(1);
    std::fprintf(stderr, "fake libcuda (async): %s\n", what);
    std::fflush(stderr);
}

/* Whether [p, p + n) overlaps a page-locked landing of a queued or running copy,
 * or (with `unread_too`) of another host thread's landed copy that it has not
 * waited for yet (called under `lock`); *by: the host thread that queued it. */
inline bool landing_in_flight(const char *p, size_t n, std::thread::id *by, bool unread_too = true)
{
    auto overlaps = [&](const op &o) { return o.landing != nullptr && p < o.landing + o.bytes && o.landing < p + n; };
    if (running != nullptr && overlaps(*running)) {
        *by = running->by;
        return true;
    }
    for (const landed &l : unread) {
        if (unread_too && p < l.landing + l.bytes && l.landing < p + n && l.by != std::this_thread::get_id()) {
            *by = l.by;
            return true;
        }
    }
    for (const op &o : queue) {
        if (overlaps(o)) {
            *by = o.by;
            return true;
        }
    }
    return false;
}

inline void worker_main()
{
    std::unique_lock<std::mutex> g(lock);
    for (;;) {
        const long lag = lag_ms();
        auto due = [&] {
            return !queue.empty() &&
                   (waiters > 0 || (lag > 0 && std::chrono::steady_clock::now() - queue.front().queued >=
                                                   std::chrono::milliseconds(lag)));
        };
        if (lag > 0)
            work_cv.wait_for(g, std::chrono::milliseconds(lag), due);
        else
            work_cv.wait(g, due);
        if (!due())
            continue;
        op o = std::move(queue.front());
        queue.pop_front();
        busy = true;
        running = &o;
        g.unlock();
        o.run();
        g.lock();
        if (o.landing != nullptr)
            unread.push_back({o.landing, o.bytes, o.by});
        busy = false;
        running = nullptr;
        if (queue.empty())
            idle_cv.notify_all();
    }
}

/* Queue `run` (an operation that writes the page-locked bytes [landing,
 * landing + bytes) when landing is not null). */
inline void enqueue(std::function<void()> run, const char *landing = nullptr, size_t bytes = 0)
{
    std::lock_guard<std::mutex> g(lock);
    if (worker == std::thread::id()) {
        std::thread t(worker_main);
        worker = t.get_id();
        t.detach();
    }
    std::thread::id by;
    if (landing != nullptr && landing_in_flight(landing, bytes, &by) && by != std::this_thread::get_id()) {
        char text[256];
        std::snprintf(text, sizeof(text),
                      "a copy into page-locked memory at %p (%zu bytes) was queued while a copy "
                      "into the same bytes, queued by another host thread, is in flight or not yet "
                      "waited for: one staging lent to two calls at once",
                      (const void *)landing, bytes);
        report(text);
    }
    queue.push_back({std::move(run), landing, bytes, std::this_thread::get_id(), std::chrono::steady_clock::now()});
    work_cv.notify_all();
}

/* Wait until everything queued so far, and whatever is queued meanwhile,
 * has run; false after `limit` (a stream that never drains).  A no-op on the
 * stream thread itself (a host function that waits). */
template <typename D> inline bool drain(D limit)
{
    std::unique_lock<std::mutex> g(lock);
    if (std::this_thread::get_id() == worker)
        return true;
    waiters++;
    work_cv.notify_all();
    const bool done = idle_cv.wait_for(g, limit, [] { return queue.empty() && !busy; });
    waiters--;
    /* This thread's copies are now the host's to read. */
    const std::thread::id me = std::this_thread::get_id();
    for (size_t i = unread.size(); i-- > 0;)
        if (unread[i].by == me)
            unread.erase(unread.begin() + (long)i);
    return done;
}

/* Whether page-locked memory [p, p + n) may be freed now; reports it when a
 * queued copy still writes it. */
inline bool may_free(const void *p, size_t n)
{
    std::lock_guard<std::mutex> g(lock);
    std::thread::id by;
    const char *c = (const char *)p;
    if (!landing_in_flight(c, n, &by, false)) {
        for (size_t i = unread.size(); i-- > 0;)
            if (c < unread[i].landing + unread[i].bytes && unread[i].landing < c + n)
                unread.erase(unread.begin() + (long)i);
        return true;
    }
    char text[200];
    std::snprintf(text, sizeof(text),
                  "page-locked memory at %p freed while a copy into it is in flight (the free is "
                  "left undone)",
                  p);
    report(text);
    return false;
}

} /* namespace emu_stream */

#endif /* BC_EMU_STREAM_H */
