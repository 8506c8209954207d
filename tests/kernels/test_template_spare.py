"""When the Python kernel template forks its next spare (kernels/python-template/kgate_spare.py): never while a kernel it
handed out is still starting, where the spare's fork and page copying took CPU from the start every caller waits for.

The schedule's bookkeeping against pipes and made-up times, then the real template (kgate_template.py, started as kgate
starts it: descriptor 3 a socket) handing out its spare to a kernel whose start a startup file holds for a while: no
other child of the template until that kernel's initialize has ended, then the next spare."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import kgate_spare
import kgate_tplproto

TEMPLATE = os.path.join(os.path.dirname(kgate_spare.__file__), "kgate_template.py")
HOLD_S = 2.0  # how long the kernel's startup file holds its initialize


class Schedule(unittest.TestCase):
    def setUp(self):
        self.s = kgate_spare.Schedule(settle_s=0.1, wait_max_s=3.0)

    def tearDown(self):
        self.s.close()

    def pipe(self):
        r, w = os.pipe2(os.O_NONBLOCK)
        return r, w

    def test_due_at_once_when_no_kernel_was_handed_out(self):
        self.assertTrue(self.s.due(100.0))
        self.assertEqual(self.s.timeout(100.0), 0.0)

    def test_not_due_while_a_kernel_starts_then_due_after_the_settle(self):
        r, w = self.pipe()
        self.s.started(r, 10.0)
        self.assertEqual(self.s.fds(), [r])
        self.assertFalse(self.s.due(10.5))
        self.assertAlmostEqual(self.s.timeout(10.5), 2.5)  # until the start holds it no longer
        os.close(w)  # the kernel's initialize ended (or it died)
        self.s.readable(r, 11.0)
        self.assertEqual(self.s.fds(), [])
        self.assertFalse(self.s.due(11.05))
        self.assertAlmostEqual(self.s.timeout(11.05), 0.05)
        self.assertTrue(self.s.due(11.1))
        with self.assertRaises(OSError):
            os.fstat(r)  # the schedule closed the read end it was handed

    def test_waits_for_every_kernel_starting(self):
        (r1, w1), (r2, w2) = self.pipe(), self.pipe()
        self.s.started(r1, 0.0)
        self.s.started(r2, 0.2)
        os.close(w1)
        self.s.readable(r1, 0.5)
        self.assertFalse(self.s.due(1.0))
        os.close(w2)
        self.s.readable(r2, 1.2)
        self.assertFalse(self.s.due(1.25))
        self.assertTrue(self.s.due(1.3))

    def test_a_start_that_takes_too_long_holds_the_spare_no_longer(self):
        r, w = self.pipe()
        self.s.started(r, 0.0)
        self.assertFalse(self.s.due(2.9))
        self.assertTrue(self.s.due(3.1))
        self.assertEqual(self.s.fds(), [])
        os.close(w)

    def test_a_spare_lost_is_made_again_after_a_while_not_at_once(self):
        self.s.lost(5.0)
        self.assertFalse(self.s.due(5.5))
        self.assertAlmostEqual(self.s.timeout(5.5), kgate_spare.RETRY_S - 0.5)
        self.assertTrue(self.s.due(5.0 + kgate_spare.RETRY_S))

    def test_a_readable_pipe_that_is_not_at_its_end_changes_nothing(self):
        r, w = self.pipe()
        self.s.started(r, 0.0)
        os.write(w, b"x")
        self.s.readable(r, 0.5)
        self.assertEqual(self.s.fds(), [r])
        os.close(w)


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        return set()


class Template(unittest.TestCase):
    """The real template, through kgate's protocol, forking from its imports alone (kgate's --kernel-template-imports-only:
    a template forking from a warm kernel has no spare)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sock, theirs = socket.socketpair()
        self.addCleanup(self.sock.close)
        self.proc = subprocess.Popen([sys.executable, TEMPLATE, "--imports-only"], preexec_fn=lambda: os.dup2(theirs.fileno(), 3), pass_fds=(3,),
                                     stderr=subprocess.DEVNULL)
        theirs.close()
        self.kernel = 0
        self.buf = b""

    def tearDown(self):
        if self.kernel > 0:
            try:
                os.killpg(self.kernel, signal.SIGKILL)  # its set-up made it a session leader
            except OSError:
                pass
        self.sock.close()  # EOF: the template ends, and with it its spare
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.tmp.cleanup()

    def read_frame(self, timeout_s):
        self.sock.settimeout(timeout_s)
        while True:
            if len(self.buf) >= 4:
                n = int.from_bytes(self.buf[:4], "big")
                if len(self.buf) >= 4 + n:
                    fields, self.buf = kgate_tplproto.parse_fields(self.buf[4 : 4 + n]), self.buf[4 + n :]
                    return fields
            data = self.sock.recv(65536)
            self.assertTrue(data, "the template closed its socket")
            self.buf += data

    def kernel_request(self):
        """A fork request for a kernel whose startup file holds its initialize HOLD_S seconds."""
        ipython = os.path.join(self.tmp.name, "ipython")
        os.makedirs(os.path.join(ipython, "profile_default", "startup"))
        with open(os.path.join(ipython, "profile_default", "startup", "00-hold.py"), "w") as f:
            f.write("import time\ntime.sleep(%r)\n" % HOLD_S)
        conn = os.path.join(self.tmp.name, "connection.json")
        with open(conn, "w") as f:
            json.dump({"transport": "ipc", "ip": os.path.join(self.tmp.name, "ch"), "shell_port": 1, "iopub_port": 2,
                       "stdin_port": 3, "control_port": 4, "hb_port": 5, "key": os.urandom(16).hex(),
                       "signature_scheme": "hmac-sha256", "kernel_name": "python3"}, f)
        env = dict(os.environ, IPYTHONDIR=ipython)
        fields = [b"c" + self.tmp.name.encode(), b"l" + os.path.join(self.tmp.name, "kernel.log").encode(), b"a-f",
                  b"a" + conn.encode()]
        fields += [b"e" + ("%s=%s" % kv).encode("utf-8", "surrogateescape") for kv in env.items()]
        return kgate_tplproto.frame(b"fork", b"1", *fields)

    def wait_for(self, what, timeout_s):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            got = what()
            if got:
                return got
            time.sleep(0.01)
        return what()

    def test_the_next_spare_waits_until_the_kernel_it_became_has_started(self):
        ready = self.read_frame(120)
        self.assertEqual(ready[0], b"ready")
        spare = self.wait_for(lambda: children(self.proc.pid), 10)
        self.assertEqual(len(spare), 1, "the template keeps one spare once ready")
        self.sock.sendall(self.kernel_request())
        answer = self.read_frame(30)
        self.assertEqual(answer[0], b"forked", answer)
        self.kernel = int(answer[2])
        self.assertEqual({self.kernel}, spare, "the spare became the kernel")
        # while its startup file holds its initialize, the kernel is the template's only child
        end = time.monotonic() + HOLD_S * 0.75
        while time.monotonic() < end:
            self.assertEqual(children(self.proc.pid), {self.kernel}, "a spare was forked while the kernel was starting")
            time.sleep(0.01)
        # once it has started (and the settle after), the next spare
        kids = self.wait_for(lambda: children(self.proc.pid) - {self.kernel}, HOLD_S + 10)
        self.assertEqual(len(kids), 1, "no next spare after the kernel's start")
        with open(os.path.join(self.tmp.name, "kernel.log"), errors="replace") as f:
            self.assertNotIn("Traceback", f.read())

    def test_a_spare_that_dies_is_replaced_after_a_while(self):
        self.assertEqual(self.read_frame(120)[0], b"ready")
        spare = self.wait_for(lambda: children(self.proc.pid), 10)
        self.assertEqual(len(spare), 1)
        dead = spare.pop()
        os.kill(dead, signal.SIGKILL)
        self.assertTrue(self.wait_for(lambda: dead not in children(self.proc.pid), 10), "the dead spare was not reaped")
        # not at once (a spare that dies at its start would be forked again in a loop); a short look, so that a test
        # that saw the reap late does not look past RETRY_S
        end = time.monotonic() + kgate_spare.RETRY_S * 0.3
        while time.monotonic() < end:
            self.assertEqual(len(children(self.proc.pid)), 0, "a spare forked again at once")
            time.sleep(0.01)
        self.assertEqual(len(self.wait_for(lambda: children(self.proc.pid), kgate_spare.RETRY_S + 10)), 1)
        self.assertIsNone(self.proc.poll(), "the template ended")


if __name__ == "__main__":
    unittest.main()
