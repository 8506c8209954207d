"""tests/kernelmgr/fake_template/fake_template.py: a kernel template for tests/kernelmgr/test_template.c.

It speaks kgate's template protocol (kernelmgr/src/tplproto.h) on descriptor 3 as
kernels/python-template/kgate_template.py does, but misbehaves as KGATE_FAKE_TPL says:
  ok           "ready", then "forked" for each request, in order
  fail         "failed" for each request
  garbage      a frame of an unknown kind for the first request
  overbound    a frame length over the 1 MiB bound for the first request
  silent       reads requests, never answers
  die          exits (code 7) when the first request arrives
  die_at_start exits (code 9) before "ready"
  batch:N      waits for N requests, then answers them in reverse order
A forked child runs tests/kernelmgr/fake_kernel.py on the request's connection file (imported here first, so that the
child starts at once), after writing its pid to `fake-pid` beside the connection file; its wait status is reported in "exited" frames as the real template does.
"""

import os
import runpy
import signal
import struct
import sys

# the frames and the request loop, as the real template has them (one copy: kernels/python-template/kgate_tplproto.py)
sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "kernels", "python-template"))
import kgate_tplproto  # noqa: E402
from kgate_tplproto import send, send_raw  # noqa: E402

import zmq  # noqa: F401 (what fake_kernel.py imports: imported once, before any fork)
from jupyter_client.session import Session  # noqa: F401

FAKE_KERNEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fake_kernel.py")
MODE = os.environ.get("KGATE_FAKE_TPL", "ok")


def fork(fields):
    args, env, log = [], {}, os.devnull
    for f in fields:
        tag, value = f[:1], f[1:].decode()
        if tag == b"a":
            args.append(value)
        elif tag == b"e" and "=" in value:
            k, v = value.split("=", 1)
            env[k] = v
        elif tag == b"l":
            log = value
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setsid()
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.closerange(3, 65536)
            for sig in (signal.SIGCHLD, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.environ.clear()
            os.environ.update(env)
            conn = args[args.index("-f") + 1]
            # which request this process answers: the test compares it with the kernel's pid
            with open(os.path.join(os.path.dirname(conn), "fake-pid"), "w") as f:
                f.write(str(os.getpid()))
            sys.argv = [FAKE_KERNEL, conn]
            runpy.run_path(FAKE_KERNEL, run_name="__main__")
            code = 0
        finally:
            os._exit(code)
    return pid


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send(b"exited", pid, status)


# "fail_after:N", "silent_after:N": fork the first N requests, then refuse ("failed") or never answer the others.
AFTER = int(MODE.split(":")[1]) if MODE.startswith(("fail_after:", "silent_after:")) else -1
answered = [0]


def answer(req_id, fields):
    answered[0] += 1
    if AFTER >= 0 and answered[0] > AFTER:
        if MODE.startswith("fail_after:"):
            send(b"failed", req_id, b"OSError: the fake template forks no more")
        return
    if MODE == "fail":
        send(b"failed", req_id, b"OSError: the fake template does not fork")
    elif MODE == "garbage":
        send(b"hello", req_id)
    elif MODE == "overbound":
        send_raw(struct.pack(">I", kgate_tplproto.MAX_FRAME + 1) + b"x" * 64)
    else:
        send(b"forked", req_id, fork(fields))


def main():
    if MODE == "die_at_start":
        return 9
    wake_r = kgate_tplproto.prepare()
    send(b"ready", os.getpid())
    batch = int(MODE.split(":")[1]) if MODE.startswith("batch:") else 0
    held = []

    def on_request(fields):
        if MODE == "die":
            return 7
        if MODE == "silent":
            return None
        if batch:
            held.append(fields)
            if len(held) == batch:
                for f in reversed(held):
                    answer(f[1], f[2:])
                held.clear()
        else:
            answer(fields[1], fields[2:])
        reap()
        return None

    return kgate_tplproto.serve(wake_r, on_request, reap)


if __name__ == "__main__":
    sys.exit(main())
