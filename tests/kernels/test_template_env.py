"""The Python kernel template's start environment, pages, warmed patterns and warm kernel (kernels/python-template/
kgate_startenv.py, kgate_hotset.py, kgate_warm.py, kgate_warmkernel.py), against this interpreter: the sys.path a forked kernel gets is the one a new interpreter
started with `python3 -m` in that cwd and environment has; a variable only an interpreter's start reads makes a kernel
unforkable; a forked child's scan finds exactly the pages it wrote; the patterns a probe dumps are compiled into re's
cache, and a malformed dump is refused; a warm kernel stopped leaves one thread, no socket and none of its cells, and a
kernel whose start would run a startup file is refused."""

import ctypes
import json
import mmap
import os
import re
import subprocess
import sys
import tempfile
import unittest

import kgate_hotset
import kgate_startenv
import kgate_warm
import kgate_warmkernel

PROBE = "import json, sys\nprint(json.dumps(sys.path))\n"


class StartEnv(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cwd = os.path.join(self.tmp.name, "cwd")
        os.mkdir(self.cwd)
        with open(os.path.join(self.cwd, "kgate_path_probe.py"), "w") as f:
            f.write(PROBE)
        self.old_cwd = os.getcwd()

    def tearDown(self):
        os.chdir(self.old_cwd)
        self.tmp.cleanup()

    def new_interpreter_path(self, env):
        out = subprocess.run([sys.executable, "-m", "kgate_path_probe"], cwd=self.cwd, env=env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)

    def test_the_path_is_a_new_interpreters_with_pythonpath(self):
        env = dict(kgate_startenv.START_ENV, PYTHONPATH="%s/pp::rel:/nowhere" % self.tmp.name)
        os.chdir(self.cwd)
        got = kgate_startenv.path_for(env)
        self.assertEqual(got, self.new_interpreter_path(env))
        self.assertEqual(got[:5], [self.cwd, self.tmp.name + "/pp", self.cwd, self.cwd + "/rel", "/nowhere"])

    def test_the_path_is_a_new_interpreters_with_the_templates_own_environment(self):
        os.chdir(self.cwd)
        self.assertEqual(kgate_startenv.path_for(kgate_startenv.START_ENV),
                         self.new_interpreter_path(kgate_startenv.START_ENV))

    def test_an_unchanged_environment_is_forkable(self):
        env = dict(kgate_startenv.START_ENV, KGATE_ANYTHING="1", PYTHONPATH="/elsewhere", PYTHONSTARTUP="/x.py")
        self.assertIsNone(kgate_startenv.unforkable(env))

    def test_a_start_variable_of_its_own_is_unforkable(self):
        for name, value in (("PYTHONHASHSEED", "0"), ("PYTHONOPTIMIZE", "2"), ("PYTHONUTF8", "1")):
            env = dict(kgate_startenv.START_ENV)
            env[name] = value if kgate_startenv.START_ENV.get(name) != value else value + "1"
            why = kgate_startenv.unforkable(env)
            self.assertIsNotNone(why, name)
            self.assertIn(name, why)
        # an empty value is no value, as at the interpreter's start
        env = dict(kgate_startenv.START_ENV, PYTHONHASHSEED="")
        if not kgate_startenv.START_ENV.get("PYTHONHASHSEED"):
            self.assertIsNone(kgate_startenv.unforkable(env))

    def test_another_locale_is_unforkable(self):
        env = {k: v for k, v in kgate_startenv.START_ENV.items() if k not in ("LC_ALL", "LC_CTYPE", "LANG")}
        env["LC_ALL"] = "kgate.test-locale"
        self.assertIn("locale", kgate_startenv.unforkable(env))

    @unittest.skipUnless(kgate_startenv.site.ENABLE_USER_SITE, "this interpreter runs without a user site directory")
    def test_a_home_with_a_user_site_is_unforkable(self):
        home = os.path.join(self.tmp.name, "home")
        os.makedirs("%s/.local/lib/python%d.%d/site-packages" % (home, sys.version_info[0], sys.version_info[1]))
        env = {k: v for k, v in kgate_startenv.START_ENV.items() if k != "PYTHONUSERBASE"}
        env["HOME"] = home
        if kgate_startenv.START_ENV.get("PYTHONUSERBASE"):
            self.skipTest("PYTHONUSERBASE is set here")
        self.assertIn("user site", kgate_startenv.unforkable(env))
        # a HOME without one changes nothing a new interpreter would see, unless the template's had one
        env["HOME"] = self.cwd
        if kgate_startenv._user_site(kgate_startenv.START_ENV) is None:
            self.assertIsNone(kgate_startenv.unforkable(env))


class HotPages(unittest.TestCase):
    def test_a_forked_child_finds_the_pages_it_wrote_and_no_others(self):
        area = mmap.mmap(-1, 64 * kgate_hotset.PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        for i in range(64):
            area[i * kgate_hotset.PAGE] = 1  # present, and shared with the child after the fork
        start = ctypes.addressof(ctypes.c_char.from_buffer(area))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(r)
                maps, buf = [(start, start + 64 * kgate_hotset.PAGE)], kgate_hotset.scan_buffer()
                for i in (3, 4, 5, 40):
                    area[i * kgate_hotset.PAGE] = 2
                os.write(w, json.dumps(kgate_hotset.exclusive_runs(maps, buf=buf)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        runs = json.loads(os.read(r, 65536).decode() or "null")
        os.waitpid(pid, 0)
        self.assertEqual(runs, [[start + 3 * kgate_hotset.PAGE, 3], [start + 40 * kgate_hotset.PAGE, 1]])


class Warm(unittest.TestCase):
    def test_dumped_patterns_are_compiled_into_res_cache(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "patterns.json")
            re.compile(r"kgate-(\d+)-str")
            re.compile(rb"kgate-(\d+)-bytes\xff", re.IGNORECASE)
            kgate_warm.dump(path)
            re.purge()
            items = kgate_warm.load(path)
            self.assertEqual(kgate_warm.compile_all(items), len(items))
        self.assertIn((str, r"kgate-(\d+)-str", 0), re._cache)
        self.assertIn((bytes, rb"kgate-(\d+)-bytes\xff", int(re.IGNORECASE)), re._cache)

    def test_a_pattern_that_does_not_compile_is_skipped(self):
        self.assertEqual(kgate_warm.compile_all([("(", 0), ("kgate-ok", 0)]), 1)

    def test_a_malformed_dump_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "patterns.json")
            for bad in ('{}', '[["x", "a", 0]]', '[["s", 1, 0]]', '[["s", "a"]]', json.dumps([["s", "a", 0]] * 513)):
                with open(path, "w") as f:
                    f.write(bad)
                with self.assertRaises(ValueError, msg=bad):
                    kgate_warm.load(path)


# In a new interpreter (the warm kernel's singletons and threads are the process's): a warm kernel made and stopped as the
# template makes it, then what a fork would inherit from it, as JSON.
WARM_UP = """
import json, os, socket, stat, sys, threading
import kgate_warmkernel
from ipykernel.kernelapp import IPKernelApp
from traitlets.config import Config

def new_app():
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    return IPKernelApp.instance(parent_handle=1, config=config)

before = dict(os.environ)
kgate_warmkernel.warm_up(sys.argv[1], new_app)
shell = kgate_warmkernel.APP.shell
fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
sockets = [fd for fd in fds if fd > 2 and os.path.exists("/proc/self/fd/%d" % fd) and stat.S_ISSOCK(os.fstat(fd).st_mode)]
print(json.dumps({"threads": threading.active_count(), "sockets": len(sockets), "stdout": sys.stdout is sys.__stdout__,
                  "In": shell.user_ns["In"], "Out": list(shell.user_ns["Out"]), "count": shell.execution_count,
                  "session": shell.history_manager.session_number, "env_back": dict(os.environ) == before,
                  "init_env": sorted(kgate_warmkernel.INIT_ENV)}))
"""


class WarmKernel(unittest.TestCase):
    """kgate_warmkernel: the kernel the template warms and stops, and what it refuses to fork."""

    def test_a_warm_kernel_stopped_leaves_one_thread_no_socket_and_none_of_its_cells(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run([sys.executable, "-c", WARM_UP, tmp], capture_output=True, text=True, timeout=90,
                                 env=dict(os.environ, PYTHONPATH=os.path.dirname(kgate_startenv.__file__)))
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        got = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertEqual(got["threads"], 1, "a fork would copy another thread's locks")
        self.assertEqual(got["sockets"], 0, "every socket of the warm kernel closed")
        self.assertTrue(got["stdout"], "the output capture ended")
        self.assertEqual(got["In"], [""], "the warm-up's cells are not in a kernel's history")
        self.assertEqual(got["Out"], [])
        self.assertEqual(got["count"], 1)
        self.assertEqual(got["session"], 1)
        self.assertTrue(got["env_back"], "the template's environment as it was")
        self.assertIn("PAGER", got["init_env"], "what ipykernel's start sets, kept to set again in each fork")

    def test_a_pythonstartup_or_other_arguments_are_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = {"IPYTHONDIR": tmp}
            self.assertIsNone(kgate_warmkernel.unforkable(env, ["-f", "c.json"]))
            self.assertIn("PYTHONSTARTUP", kgate_warmkernel.unforkable(dict(env, PYTHONSTARTUP="s.py"), ["-f", "c.json"]))
            self.assertIsNotNone(kgate_warmkernel.unforkable(env, ["-f", "c.json", "--debug"]))
            os.makedirs(os.path.join(tmp, "profile_default", "startup"))
            self.assertIsNone(kgate_warmkernel.unforkable(env, ["-f", "c.json"]), "an empty startup directory")
            with open(os.path.join(tmp, "profile_default", "startup", "00.py"), "w") as f:
                f.write("X = 1\n")
            self.assertIn("startup files", kgate_warmkernel.unforkable(env, ["-f", "c.json"]))
            os.remove(os.path.join(tmp, "profile_default", "startup", "00.py"))
            with open(os.path.join(tmp, "profile_default", "ipython_kernel_config.py"), "w") as f:
                f.write("\n")
            self.assertIn("ipython_kernel_config.py", kgate_warmkernel.unforkable(env, ["-f", "c.json"]))

    def test_a_template_whose_warm_up_failed_half_way_refuses_every_fork(self):
        # in a new interpreter: importing the template names the process and imports ipykernel
        code = ("import kgate_template as t\n"
                "t.NO_FORK = 'half-made'\n"
                "print(t.fork([b'a-f', b'a/nonexistent.json']))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, PYTHONPATH=os.path.dirname(kgate_startenv.__file__)))
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        self.assertEqual(out.stdout.strip().splitlines()[-1], "(None, 'half-made')", "no child forked, the reason said")

    def test_this_ipykernel_is_supported(self):
        self.assertIsNone(kgate_warmkernel.supported(), "Debian 12's ipykernel is 6.17")


if __name__ == "__main__":
    unittest.main()
