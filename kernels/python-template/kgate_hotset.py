"""The template's hot pages (docs/kernels.md, "Kernels forked from a template": "Copying a kernel's pages in one call").

A forked kernel's start writes to ~4,000 of the template's pages (reference counts, the allocator's free lists, the
interpreter's caches), each a copy-on-write fault; on this project's virtual machines a fault costs 25-40 us, so a tenth
of a second per kernel goes to faults alone. The pages are the same for every kernel of a template: the template learns
them once from a probe kernel (a kernel forked like any other, run through a kernel_info and a `1+1` by a client forked
beside it, with nothing of any user), then each forked kernel copies them first thing, in one madvise(MADV_POPULATE_WRITE)
per run of pages: 6-7 us a page instead of a fault each. What the kernel reads and computes is unchanged (the call only
copies pages it would have copied itself); Linux before 5.14 refuses the call and kernels fault as before.
"""

import ctypes
import json
import mmap
import os

MADV_POPULATE_WRITE = 23  # Linux 5.14, <sys/mman.h>
PAGE = mmap.PAGESIZE
PRESENT = 1 << 63
EXCLUSIVE = 1 << 56  # /proc/<pid>/pagemap: the page is mapped by this process alone (copied, or its own)
MAX_RANGES = 1 << 16  # a bound on what a probe may hand back: ~4,000 pages come in ~2,000 runs

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int


def writable_maps():
    """The private writable mappings of this process, as (start, end): what a child's writes copy on write."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()
            if p[1][1] != "w" or p[1][3] != "p" or (len(p) > 5 and p[5] in ("[vvar]", "[vdso]", "[vsyscall]")):
                continue
            lo, hi = (int(x, 16) for x in p[0].split("-"))
            out.append((lo, hi))
    return out


SCAN_ENTRIES = 8192  # pagemap entries read at once (64 KiB)


def scan_buffer():
    """A buffer for exclusive_runs, made before the writes it is to find: the scan then allocates almost nothing, so that
    the pages it finds are those written before it, not its own."""
    return bytearray(SCAN_ENTRIES * 8)


def exclusive_runs(maps, pagemap="/proc/self/pagemap", buf=None):
    """Runs (start, pages) of `maps` whose pages are present and this process's alone: those it wrote since its fork."""
    runs = []
    buf = scan_buffer() if buf is None else buf
    entries = memoryview(buf).cast("Q")
    fd = os.open(pagemap, os.O_RDONLY)
    try:
        for lo, hi in maps:
            addr, run = lo, None
            while addr < hi:
                want = min((hi - addr) // PAGE, SCAN_ENTRIES)
                got = os.preadv(fd, [memoryview(buf)[: want * 8]], addr // PAGE * 8) // 8
                if got <= 0:
                    break
                for i in range(got):
                    if entries[i] & PRESENT and entries[i] & EXCLUSIVE:
                        if run is not None and run[0] + run[1] * PAGE == addr:
                            run[1] += 1
                        else:
                            run = [addr, 1]
                            runs.append(run)
                    addr += PAGE
    finally:
        os.close(fd)
    return runs


def write_json(path, value):
    """`value` as JSON to `path`, whole or not at all (written beside it, then renamed): what a probe hands the template."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.rename(tmp, path)


def dump(path, maps):
    """In the probe kernel, after its first cells: its written runs of `maps` to `path` (JSON), for the template."""
    write_json(path, exclusive_runs(maps))


def load(path):
    """The runs a probe dumped, checked: a list of (start, pages), or ValueError."""
    with open(path) as f:
        runs = json.load(f)
    if not isinstance(runs, list) or len(runs) > MAX_RANGES:
        raise ValueError("not a list of at most %d runs" % MAX_RANGES)
    out = []
    for r in runs:
        if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) and x > 0 for x in r) and r[0] % PAGE == 0):
            raise ValueError("a run is not [page address, pages]")
        out.append((r[0], r[1]))
    return out


def populate(runs):
    """Copies the pages of `runs` now, one call per run; False at the first refusal (an older Linux: nothing more is tried)."""
    for start, pages in runs:
        if _libc.madvise(start, pages * PAGE, MADV_POPULATE_WRITE) != 0:
            return False
    return True


def supported():
    """Whether this Linux takes MADV_POPULATE_WRITE (on a page of our own)."""
    m = mmap.mmap(-1, PAGE)
    try:
        buf = ctypes.c_char.from_buffer(m)
        try:
            return _libc.madvise(ctypes.addressof(buf), PAGE, MADV_POPULATE_WRITE) == 0
        finally:
            del buf
    finally:
        m.close()
