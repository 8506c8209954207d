"""IPython's named script magics' argument parser built once in the template (docs/kernels.md, "Kernels forked from a
template": "Other start work skipped").

Every IPython shell makes `%%sh`, `%%bash`, `%%perl`, `%%ruby`, `%%python`, `%%python2`, `%%python3` and `%%pypy`
(`ScriptMagics._generate_script_magics`), and each one's decorators build an argparse parser and format its help
(`magic_arguments.construct_parser`): ~6 ms of a forked kernel's start, the same eight times over in every kernel. The
parsers are all alike: the decorators are `script_args`' five options on a function named `named_script_magic` with no
docstring yet, so the parser's name, description and arguments depend neither on the magic's name nor on the kernel. The
template builds one before it forks, and each kernel's named script magics get that parser (in the kernel's own copy of
the template's memory: nothing of it is shared between kernels). A parser is handed out only to a function whose
decorators are exactly those it was built from, compared by value; `%%script` (its own parser, built at import) and
every other magic build theirs as before. The function's text is left as construct_parser leaves it (the parser's help;
IPython replaces it with the magic's docstring right after: `%%bash?`'s text). Nothing is changed unless IPython's
functions are what this expects (`install` says why not).
"""

import inspect
import types

# the function IPython's `ScriptMagics._make_script_magic` decorates, whose parser this builds once
NAMED_QUALNAME = "ScriptMagics._make_script_magic.<locals>.named_script_magic"
NAMED_MODULE = "IPython.core.magics.script"
MAX_BUILT = 8  # parsers kept (one per distinct set of decorators: IPython has one)


def _key(func):
    """What the parser of `func` is built from, compared by value; None when `func` is not a named script magic, or a
    decorator's arguments cannot be compared."""
    if getattr(func, "__module__", None) != NAMED_MODULE or getattr(func, "__qualname__", None) != NAMED_QUALNAME:
        return None
    try:
        key = (
            func.__doc__,
            getattr(func, "argcmd_name", None),
            tuple(sorted(getattr(func, "argcmd_kwds", {}).items())),
            tuple((type(d), tuple(d.args), tuple(sorted(d.kwds.items()))) for d in func.decorators),
        )
        hash(key)
    except (AttributeError, TypeError):
        return None
    return key


def install():
    """Builds the named script magics' parser once and has `construct_parser` hand it out. Returns None when installed,
    or why not (IPython's functions not what this expects: then nothing is changed)."""
    try:
        from IPython.core import magic_arguments
        from IPython.core.magics.script import ScriptMagics
    except ImportError as e:
        return "no IPython magics: %s" % e
    original = getattr(magic_arguments, "construct_parser", None)
    make = getattr(ScriptMagics, "_make_script_magic", None)
    if not inspect.isfunction(original) or list(inspect.signature(original).parameters) != ["magic_func"]:
        return "IPython's magic_arguments.construct_parser is not construct_parser(magic_func)"
    if not inspect.isfunction(make) or list(inspect.signature(make).parameters) != ["self", "name"]:
        return "IPython's ScriptMagics._make_script_magic is not _make_script_magic(self, name)"
    built = {}

    def construct_parser(magic_func):
        key = _key(magic_func)
        if key is None:
            return original(magic_func)
        hit = built.get(key)
        if hit is None:
            parser = original(magic_func)
            if len(built) < MAX_BUILT:
                built[key] = (parser, magic_func.__doc__)  # the parser, and the help text construct_parser set
            return parser
        parser, text = hit
        magic_func.__doc__ = text  # IPython's _make_script_magic replaces it with the magic's docstring right after
        return parser

    magic_arguments.construct_parser = construct_parser
    # one named script magic, made as a shell makes it (its function reads only `script_paths` of the magics object):
    # its parser is then every kernel's
    try:
        magic = make(types.SimpleNamespace(script_paths={}), "sh")
        ok = len(built) == 1 and getattr(magic, "parser", None) is next(iter(built.values()))[0]
    except Exception as e:  # noqa: B902: whatever IPython does differently, nothing is changed
        ok, why = False, "%s: %s" % (type(e).__name__, e)
    else:
        why = "IPython's named script magic is not a function with its decorators and parser"
    if not ok:
        magic_arguments.construct_parser = original
        return why
    return None
