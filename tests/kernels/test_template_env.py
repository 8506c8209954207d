"""The Python kernel template's start environment, pages and warmed patterns (kernels/python-template/kgate_startenv.py,
kgate_hotset.py, kgate_warm.py), against this interpreter: the sys.path a forked kernel gets is the one a new interpreter
started with `python3 -m` in that cwd and environment has; a variable only an interpreter's start reads makes a kernel
unforkable; a forked child's scan finds exactly the pages it wrote; the patterns a probe dumps are compiled into re's
cache, and a malformed dump is refused."""

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


if __name__ == "__main__":
    unittest.main()
