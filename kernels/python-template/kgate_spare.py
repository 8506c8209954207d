"""kernels/python-template/kgate_spare.py: when the template forks its next spare (docs/kernels.md, "A spare forked ahead").

A spare's making is CPU: the template's fork (its page tables) and its own pages copied again (OWN_HOT), then the spare's
copy of the ~4,300 pages a kernel's start writes. Made right after a request was handed out, it ran beside that kernel's
start, on a machine of two cores, and took ~20 ms from the start every caller waits for (create to first `1+1`, three
kgates alternating on a quiet machine: 115 ms made at once, 110 ms made 50 ms later, 95 ms made 300 ms later). So the next
spare waits until no kernel the template handed out is still in its `initialize` (each holds the write end of a pipe it
closes there, or by dying), then SETTLE_S more for the kernel's first exchanges (kgate's kernel_info, the caller's first
cell). A kernel whose start takes longer than WAIT_MAX_S (a loaded machine) holds it no longer. A request that comes while
there is no spare is forked at once, as before there were spares: a burst's starts pay the same CPU either way.

Pure bookkeeping of descriptors and times (the caller reads them, closes nothing it did not hand over), tested by
tests/kernels/test_template_spare.py.
"""

import os

SETTLE_S = 0.1  # after the last kernel's initialize: kgate's kernel_info and the caller's first cell come next
WAIT_MAX_S = 3.0  # a kernel's start this long holds the next spare no longer
RETRY_S = 1.0  # after a spare that died before it was handed out, or one that could not be forked: not in a loop


class Schedule:
    """Which kernels handed out are still starting (the read ends of their pipes), and when the next spare is due."""

    def __init__(self, settle_s=SETTLE_S, wait_max_s=WAIT_MAX_S):
        self.settle_s = settle_s
        self.wait_max_s = wait_max_s
        self.starting = {}  # read end of a kernel's pipe -> the time past which it holds the spare no longer
        self.quiet_from = 0.0  # when the last start ended: the spare is due SETTLE_S after
        self.not_before = 0.0  # and not before this (RETRY_S after a spare lost)

    def started(self, fd, now):
        """A kernel was handed out, `fd` the read end of its pipe (owned here from now on: closed when it ends)."""
        self.starting[fd] = now + self.wait_max_s

    def fds(self):
        return list(self.starting)

    def readable(self, fd, now):
        """`fd` was readable: EOF (the kernel's initialize ended, or it died) ends its start. The kernel never writes."""
        try:
            data = os.read(fd, 64)
        except BlockingIOError:
            return
        if not data:
            self.end(fd, now)

    def end(self, fd, now):
        self.forget(fd)
        self.quiet_from = max(self.quiet_from, now)

    def forget(self, fd):
        del self.starting[fd]
        os.close(fd)

    def expire(self, now):
        """Starts past their WAIT_MAX_S hold the spare no longer, with no settle after (the machine is loaded, not idle)."""
        for fd, limit in list(self.starting.items()):
            if now >= limit:
                self.forget(fd)

    def lost(self, now):
        """A spare died before it was handed out, or could not be forked: the next one waits RETRY_S."""
        self.not_before = now + RETRY_S

    def due(self, now):
        """Whether a spare, if there is none, should be forked now."""
        self.expire(now)
        return not self.starting and now >= max(self.quiet_from + self.settle_s, self.not_before)

    def timeout(self, now):
        """Seconds until due() may change with no descriptor readable (select's timeout), never negative."""
        if self.starting:
            return max(0.0, min(self.starting.values()) - now)
        return max(0.0, self.quiet_from + self.settle_s - now, self.not_before - now)

    def close(self):
        for fd in list(self.starting):
            os.close(fd)
        self.starting.clear()
