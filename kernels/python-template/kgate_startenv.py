"""What a Python interpreter takes from its environment when it starts, for a kernel forked from the template
(docs/kernels.md, "Kernels forked from a template": "The interpreter's start environment").

A spawned kernel is a new interpreter started with the kernel's environment; a forked one is the template's interpreter,
started with kgate's. Most of the environment is read when it is used (os.environ, applied in the child before
ipykernel runs), but some is read only at the interpreter's start. sys.path is one: `path_for` gives the forked kernel
the path `python3 -m ipykernel_launcher` would have started with in its cwd and environment (its cwd first, then
PYTHONPATH's entries, then the rest of the template's start path). The others (the hash seed, the optimisation and
bytecode flags, the encodings, the user site directory...) a running interpreter cannot take: `unforkable` names the
first one the kernel's environment gives a value other than the template's, and the template refuses that fork (kgate
then spawns the kernel, counted as a `failed` fallback, with that reason in its log).

Imported first, before any other import can change sys.path or os.environ: START_ENV and START_PATH are the template's
own start.
"""

import os
import site
import sys

START_ENV = dict(os.environ)
START_PATH = list(sys.path)

# Read by the interpreter at its start (Python's documentation, "Environment variables"), other than PYTHONPATH (emulated
# by path_for) and those read again when used (PYTHONSTARTUP, PYTHONBREAKPOINT, PYTHONASYNCIODEBUG).
START_VARS = (
    "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONPLATLIBDIR", "PYTHONOPTIMIZE", "PYTHONDEBUG", "PYTHONINSPECT",
    "PYTHONUNBUFFERED", "PYTHONVERBOSE", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONHASHSEED",
    "PYTHONINTMAXSTRDIGITS", "PYTHONIOENCODING", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
    "PYTHONWARNINGS", "PYTHONFAULTHANDLER", "PYTHONTRACEMALLOC", "PYTHONPROFILEIMPORTTIME", "PYTHONMALLOC",
    "PYTHONMALLOCSTATS", "PYTHONCOERCECLOCALE", "PYTHONDEVMODE", "PYTHONUTF8", "PYTHONWARNDEFAULTENCODING",
    "PYTHONNODEBUGRANGES", "PYTHONTHREADDEBUG", "PYTHONDUMPREFS",
)


def _start_value(env, name):
    """The variable as the interpreter reads it at its start: an empty value is no value."""
    return env.get(name) or None


def _pythonpath_entries(env):
    """PYTHONPATH's entries as the interpreter's start makes them: each made absolute from the cwd (an empty one is the cwd)."""
    value = _start_value(env, "PYTHONPATH")
    return [os.path.abspath(p) for p in value.split(os.pathsep)] if value else []


def _ctype_locale(env):
    """The locale category the interpreter's start sets from the environment (LC_CTYPE: its encodings)."""
    return env.get("LC_ALL") or env.get("LC_CTYPE") or env.get("LANG") or None


def _user_site(env):
    """The user site directory an interpreter started with `env` would put on sys.path, or None (site.py's rule: enabled
    in the template, PYTHONUSERBASE or ~/.local of env's HOME, present)."""
    if not site.ENABLE_USER_SITE:
        return None
    base = env.get("PYTHONUSERBASE") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local")
    path = "%s/lib/python%d.%d/site-packages" % (base, sys.version_info[0], sys.version_info[1])
    return path if os.path.isdir(path) else None


def unforkable(env):
    """Why a kernel with environment `env` must be a new interpreter, or None when a fork of the template is one."""
    for name in START_VARS:
        if _start_value(env, name) != _start_value(START_ENV, name):
            return "its environment sets %s, which a Python interpreter reads only at its start" % name
    if _ctype_locale(env) != _ctype_locale(START_ENV):
        return "its environment sets another locale (LC_ALL, LC_CTYPE, LANG), which a Python interpreter reads only at its start"
    if _user_site(env) != _user_site(START_ENV):
        return "its environment gives another user site directory (HOME), which a Python interpreter reads only at its start"
    return None


def path_for(env):
    """In the child, after its chdir: the sys.path a new interpreter started by `python3 -m` in this cwd with `env` has
    (the template's own start path has its script's directory first, and its own PYTHONPATH's entries after it)."""
    tail = START_PATH[1 + len(_pythonpath_entries(START_ENV)):]
    return [os.getcwd()] + _pythonpath_entries(env) + tail
