/* kmgr/loop.h: what kernelmgr needs from the event loop that hosts it (it owns no loop). */
#ifndef KMGR_LOOP_H
#define KMGR_LOOP_H

/**
 * kernelmgr runs inside its host's single-threaded event loop (h2o's in kgate, a poll() loop in
 * tests). The host provides these operations; kernelmgr never blocks and never starts threads.
 *
 * Besides these, the host must call kmgr_manager_tick() every KMGR_TICK_MS milliseconds or so:
 * heartbeats, grace periods, start-up retries and child reaping are all driven from there.
 */
typedef struct st_kmgr_loop_ops_t {
    /**
     * Starts watching `fd` (a kernel connection's socket) for readability, level-triggered: `cb(arg)`
     * is called from the loop whenever it is readable or has an error, again on every pass while it
     * stays so. The loop must not read from or close `fd` (kernelmgr owns it; dup() it if the loop
     * insists on owning one). Returns an opaque handle for unwatch and notify_writable, or NULL.
     */
    void *(*watch)(void *loop, int fd, void (*cb)(void *arg), void *arg);
    /**
     * Calls `cb(arg)` once, from the loop, when the fd of watch `handle` can be written to (or has
     * an error; a connect that finished either way). kernelmgr asks again for each wait and never
     * twice at once; an unwatch cancels it.
     */
    void (*notify_writable)(void *loop, void *handle, void (*cb)(void *arg), void *arg);
    /** Stops a watch; after it returns `cb` is never called for that handle again. */
    void (*unwatch)(void *loop, void *handle);
    /**
     * Asks the loop to call kmgr_manager_run_pending() soon, from the loop, never from inside this
     * call, and not before the loop has polled for I/O again (kernelmgr yields this way when it
     * caps a drain; running it in the same iteration would starve the host's sockets). Several
     * requests before it runs may be coalesced into one call.
     */
    void (*schedule)(void *loop);
} kmgr_loop_ops_t;

/** How often the host should call kmgr_manager_tick(), in milliseconds. */
#define KMGR_TICK_MS 50

#endif
