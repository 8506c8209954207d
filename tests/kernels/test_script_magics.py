"""tests/kernels/test_script_magics.py: kernels/python-template/kgate_script_magics.py, the named script magics' parser
built once in the template. A shell made after install() shows and runs %%bash, %%python3 ... exactly as one made
without it, its eight named magics share the one parser, other magics build their own, and install() changes nothing
when IPython's functions are not what it expects. Each case runs in an interpreter of its own (install() patches
IPython's module). Run by ctest (test_script_magics) with PYTHONPATH the template's folder."""

import json
import os
import subprocess
import sys
import unittest

NAMED = ("sh", "bash", "perl", "ruby", "python", "python2", "python3", "pypy")

# What a user sees of the script magics in a shell: each magic's help (`%%bash?`), its parser's help, and two cells' output.
SHOW = r"""
import io, json, sys
from contextlib import redirect_stdout
%(before)s
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance(colors="NoColor")
cells = ip.magics_manager.magics["cell"]
named = %(named)r
out = {"installed": why, "names": sorted(n for n in named if n in cells),
       "parsers": len({id(cells[n].parser) for n in named}),
       "help": {n: ip.object_inspect_text("%%%%" + n) for n in named + ("script",)},
       "parser_help": {n: cells[n].parser.format_help() for n in named + ("script",)}}
buf = io.StringIO()
with redirect_stdout(buf):
    ip.run_cell("%%%%bash\necho bash $((6*7))")
    ip.run_cell("%%%%python3\nprint('python3', 6*7)")
    ip.run_cell("%%%%script --no-raise-error sh\necho script; exit 3")
out["cells"] = buf.getvalue()
print(json.dumps(out))
"""


def show(before):
    """The script magics of a shell made in a new interpreter after `before` (which sets `why`), as JSON."""
    code = SHOW % {"before": before, "named": NAMED}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("the interpreter failed: %s" % r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


INSTALL = "import kgate_script_magics\nwhy = kgate_script_magics.install()"


class ScriptMagics(unittest.TestCase):
    def test_a_shell_shows_and_runs_them_as_without_it_with_one_parser(self):
        plain = show("why = 'not called'")
        built = show(INSTALL)
        self.assertIsNone(built["installed"])
        self.assertEqual(plain["parsers"], len(NAMED), "without it, each named magic builds its own parser")
        self.assertEqual(built["parsers"], 1, "with it, the eight named magics share the parser built at install")
        self.assertEqual(built["names"], sorted(NAMED))
        for key in ("names", "help", "parser_help", "cells"):
            self.assertEqual(built[key], plain[key], key)
        self.assertIn("%%bash script magic", built["help"]["bash"])
        self.assertIn("--no-raise-error", built["parser_help"]["python3"])
        self.assertIn("bash 42\n", built["cells"])
        self.assertIn("python3 42\n", built["cells"])
        self.assertIn("script\n", built["cells"])

    def test_other_magics_build_their_own_parser(self):
        code = INSTALL + r"""
from IPython.core.magic_arguments import argument, magic_arguments
def make():
    @magic_arguments()
    @argument("--x", help="an option")
    def named_script_magic(line):
        pass
    return named_script_magic
a, b = make(), make()
assert why is None, why
assert a.parser is not b.parser, "a magic of another module with the same name shares a parser"
print("ok")
"""
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])

    def test_nothing_changes_when_ipython_is_not_what_it_expects(self):
        for patch, reason in (
            ("ScriptMagics._make_script_magic = lambda self, name, path=None: None", "_make_script_magic(self, name)"),
            ("magic_arguments.construct_parser = lambda func, extra=None: None", "construct_parser(magic_func)"),
            # a named magic made without the decorators and parser this expects
            ("ScriptMagics._make_script_magic = lambda self, name: (lambda line, cell: None)", "decorators and parser"),
        ):
            code = "from IPython.core import magic_arguments\nfrom IPython.core.magics.script import ScriptMagics\n"
            code += patch + "\nexpected = magic_arguments.construct_parser\n" + INSTALL + "\n"
            code += "assert magic_arguments.construct_parser is expected, 'construct_parser was replaced'\nprint(why)\n"
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, "%s: %s" % (patch, r.stderr[-2000:]))
            self.assertIn(reason, r.stdout, patch)


if __name__ == "__main__":
    unittest.main()
