"""Regular expressions a kernel's start compiles, compiled once in the template (docs/kernels.md, "Kernels forked from a
template": "Other start work skipped").

A forked kernel inherits the template's `re` cache, but its start compiles patterns the template never used: IPython's
and traitlets' at `initialize`, and tokenize's pseudo-token expression at the first cell (~2-5 ms alone: the input
transformers tokenize every cell). They are the same for every kernel of a template. The probe kernel that teaches the
template its hot pages (kgate_hotset) also lists the keys of its `re` cache after its first `1+1`; the template compiles
them before it forks any kernel, so each kernel finds them in its cache (its own copy of the template's memory: nothing
is shared between kernels). A compiled pattern is a pure function of its text and flags: what a kernel matches is
unchanged. Nothing is done where `re`'s cache is not what this expects (`patterns` returns no list).
"""

import json
import re

import kgate_hotset  # next to this file: write_json

MAX_PATTERNS = 512  # re's own bound on its cache (_MAXCACHE in Python 3.11)
MAX_PATTERN_CHARS = 1 << 16


def patterns():
    """The (kind, text, flags) of every pattern in re's cache, kind "s" for a str pattern and "b" for bytes (as latin-1
    text), or None where the cache is not Python 3.11's dict of (type, pattern, flags)."""
    cache = getattr(re, "_cache", None)
    if not isinstance(cache, dict):
        return None
    out = []
    for key in list(cache):
        if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[2], int)):
            return None
        kind, pattern, flags = key
        if kind is str and isinstance(pattern, str):
            out.append(["s", pattern, int(flags)])
        elif kind is bytes and isinstance(pattern, bytes):
            out.append(["b", pattern.decode("latin-1"), int(flags)])
    return out[:MAX_PATTERNS]


def dump(path):
    """In the probe kernel, after its first cells: its re cache's patterns to `path` (JSON), for the template."""
    kgate_hotset.write_json(path, patterns() or [])


def load(path):
    """The patterns a probe dumped, checked: a list of (pattern, flags), or ValueError."""
    with open(path) as f:
        items = json.load(f)
    if not isinstance(items, list) or len(items) > MAX_PATTERNS:
        raise ValueError("not a list of at most %d patterns" % MAX_PATTERNS)
    out = []
    for item in items:
        if not (isinstance(item, list) and len(item) == 3 and item[0] in ("s", "b") and isinstance(item[1], str)
                and len(item[1]) <= MAX_PATTERN_CHARS and isinstance(item[2], int)):
            raise ValueError("a pattern is not [kind, text, flags]")
        out.append((item[1] if item[0] == "s" else item[1].encode("latin-1"), item[2]))
    return out


def compile_all(items):
    """Compiles each (pattern, flags) into re's cache; returns how many compiled (one that does not is skipped: a kernel
    would compile it, and fail, on its own)."""
    done = 0
    for pattern, flags in items:
        try:
            re.compile(pattern, flags)
            done += 1
        except (re.error, TypeError, ValueError, OverflowError, RecursionError):
            pass
    return done
