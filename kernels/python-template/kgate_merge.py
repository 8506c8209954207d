"""Pages merged across kernels, an operator's opt-in (`--kernel-template-merge`; docs/kernels.md, "Kernels forked from a
template", and docs/security.md: merging opens memory-deduplication side channels between contexts).

An idle forked kernel holds ~17.6 MiB of copies of the template's pages (reference counts and the interpreter's caches its
start wrote); two thirds of those copies are byte-identical to its siblings' (every kernel's start does the same), a fifth
to the template's own page. The template asks Linux to let its pages, and those of every process forked from it, be merged
by KSM (prctl PR_SET_MEMORY_MERGE, Linux 6.4: inherited by the forks and kept across their execs): ksmd then finds the
identical pages and maps one read-only copy for all, copied again on a write. It merges only while the operator runs ksmd
(/sys/kernel/mm/ksm/run = 1), which kgate never changes.
"""

import ctypes
import errno

PR_SET_MEMORY_MERGE = 67  # <linux/prctl.h>, Linux 6.4
KSM_RUN = "/sys/kernel/mm/ksm/run"


def enable():
    """Marks this process's memory, and its forks', mergeable. Returns None, or why not (this Linux, or a ksmd not running:
    then nothing is merged, which the template says on kgate's stderr)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MEMORY_MERGE, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        return "prctl(PR_SET_MEMORY_MERGE) failed: %s (Linux 6.4 with CONFIG_KSM is needed)" % errno.errorcode.get(err, err)
    try:
        with open(KSM_RUN) as f:
            run = f.read().strip()
    except OSError as e:
        return "%s cannot be read (%s): pages may never be merged" % (KSM_RUN, e.strerror)
    if run != "1":
        return "%s is %s, not 1: ksmd does not run, so no page is merged until the operator starts it" % (KSM_RUN, run)
    return None
