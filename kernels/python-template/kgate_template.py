"""kgate's Python kernel template (docs/kernels.md, "Kernels forked from a template").

kgate starts one of these per ipykernel kernelspec, with the spec's interpreter:
`python3 kgate_template.py`, descriptor 3 a socket to kgate. It imports ipykernel (and with it
IPython, zmq, jupyter_client, tornado), freezes what the imports allocated out of the garbage
collector's reach (gc.freeze: a collection in a child would otherwise write to every shared
page), says "ready" and then only forks kernels when kgate asks. It never runs user code, holds no
connection file, key, socket or thread of any kernel, and owns nothing of any user.

Frames both ways: a 4-byte big-endian length, then fields, each a 4-byte big-endian length and its
bytes (kernelmgr/src/tplproto.h is the C side; tests/kernelmgr/test_tplproto.c its tests).
kgate -> template: ["fork", id, tagged fields...], each tagged field a tag byte and its value:
  c cwd, l log path, a kernel argument (in order), e "KEY=VALUE" (the whole environment), r "RESOURCE=VALUE".
template -> kgate: ["ready", pid], ["forked", id, pid] (right after the fork: the child applies its set-up on its own),
["failed", id, message], ["exited", pid, wait status].
"""

import gc
import os
import random
import resource
import select
import signal
import struct
import sys
import threading


def set_name(name):
    """/proc/<pid>/comm: `kgate-template` for the template (tests and ps tell it from kernels), the interpreter's for a kernel."""
    try:
        with open("/proc/self/comm", "w") as f:
            f.write(name[:15])
    except OSError:
        pass


# first, before the imports' second or so: whoever lists kgate's processes meanwhile tells the template from a kernel
set_name("kgate-template")

# What every kernel needs before its first cell: imported once here, shared by every fork.
import ipykernel.kernelapp  # noqa: E402 (IPython, zmq, jupyter_client, tornado, traitlets)
import ipykernel.ipkernel  # noqa: F401
import ipykernel.zmqshell  # noqa: F401
import IPython.core.interactiveshell  # noqa: F401
import jupyter_client.session  # noqa: F401
import IPython.core.completerlib  # noqa: F401 (imported by every kernel's initialisation)
import faulthandler  # noqa: F401 (likewise)
from jupyter_client import localinterfaces

# the host's addresses, found by running `ip addr` and cached in the module: once here, not a fork and exec per kernel
localinterfaces.localhost()

MAX_FRAME = 1 << 20  # kgate's KMGR_TPL_MAX_FRAME
SOCK = 3

RLIMITS = {
    "AS": resource.RLIMIT_AS,
    "CPU": resource.RLIMIT_CPU,
    "NPROC": resource.RLIMIT_NPROC,
    "FSIZE": resource.RLIMIT_FSIZE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "DATA": resource.RLIMIT_DATA,
}


def frame(*fields):
    body = b"".join(struct.pack(">I", len(f)) + f for f in fields)
    return struct.pack(">I", len(body)) + body


def send(*fields):
    data = frame(*[f if isinstance(f, bytes) else str(f).encode() for f in fields])
    while data:
        n = os.write(SOCK, data)
        data = data[n:]


def parse_fields(body):
    fields, i = [], 0
    while i < len(body):
        if i + 4 > len(body):
            raise ValueError("truncated field length")
        (n,) = struct.unpack_from(">I", body, i)
        i += 4
        if i + n > len(body):
            raise ValueError("truncated field")
        fields.append(body[i : i + n])
        i += n
    return fields


def child_setup(req):
    """In the child, before any kernel code: what makes it a kernel of its own."""
    os.setsid()
    set_name(os.path.basename(sys.executable))
    log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # the template's descriptors (its socket to kgate, anything an import opened) are not the kernel's
    os.closerange(3, 65536)
    if req["cwd"]:
        os.chdir(req["cwd"])
    for name, value in req["rlimits"]:
        resource.setrlimit(RLIMITS[name], (value, value))
    os.environ.clear()
    os.environ.update(req["env"])
    # a fork copies the generators' state: every kernel would draw the template's numbers
    random.seed()
    np = sys.modules.get("numpy.random")
    if np is not None:
        np.seed()
    sys.argv = [sys.executable, "-m", "ipykernel_launcher"] + req["args"]


def child_run(req):
    from ipykernel.kernelapp import IPKernelApp
    from traitlets.config import Config

    # history in memory: a kernel's IPYTHONDIR is its own and goes with it (kgate removes the kernel's directory), so a
    # sqlite file there is never read again, and creating it is a tenth of a forked kernel's start
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    # parent_handle 1: no thread polling for the parent's death (its parent is this template, which a kernel outlives; kgate
    # watches the kernel, and its instance mark has it killed with kgate), and no console banner in its log
    IPKernelApp.launch_instance(argv=req["args"], parent_handle=1, config=config)


def fork(fields):
    req = {"cwd": "", "log": os.devnull, "args": [], "env": {}, "rlimits": []}
    for f in fields:
        tag, value = f[:1], f[1:].decode("utf-8", "surrogateescape")
        if tag == b"c":
            req["cwd"] = value
        elif tag == b"l":
            req["log"] = value
        elif tag == b"a":
            req["args"].append(value)
        elif tag == b"e" and "=" in value:
            k, v = value.split("=", 1)
            req["env"][k] = v
        elif tag == b"r" and "=" in value:
            k, v = value.split("=", 1)
            if k not in RLIMITS:
                raise ValueError("unknown resource " + k)
            req["rlimits"].append((k, int(v)))
    if threading.active_count() != 1:
        raise RuntimeError("the template has %d threads: a fork would copy their locks" % threading.active_count())
    pid = os.fork()
    if pid == 0:
        code = 127
        try:
            child_setup(req)
            code = 0
            child_run(req)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0
        except BaseException:  # noqa: B902: anything at all ends this kernel, never the template
            import traceback

            # to its kernel.log once child_setup has opened it: kgate quotes the tail in the kernel's death reason
            traceback.print_exc()
            code = code or 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    # answered at once: kgate's loop waits for this answer, not for the child's set-up (a failure there is the kernel's
    # death before it was ready, its reason in its log, as for a spawned kernel that fails after exec)
    return pid, None


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        send(b"exited", pid, status)


def main():
    os.set_blocking(SOCK, True)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    # kgate interrupts its kernels, not the template: a stray SIGINT must not end it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.collect()
    gc.freeze()
    send(b"ready", os.getpid())
    buf = b""
    while True:
        try:
            readable, _, _ = select.select([SOCK, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
            reap()
        if SOCK not in readable:
            continue
        data = os.read(SOCK, 65536)
        if not data:
            return 0  # kgate closed its end: nothing more to fork
        buf += data
        while len(buf) >= 4:
            (n,) = struct.unpack_from(">I", buf)
            if n > MAX_FRAME:
                sys.stderr.write("kgate template: a frame of %d bytes is over the bound\n" % n)
                return 2
            if len(buf) < 4 + n:
                break
            fields, buf = parse_fields(buf[4 : 4 + n]), buf[4 + n :]
            if len(fields) < 2 or fields[0] != b"fork":
                sys.stderr.write("kgate template: unknown request\n")
                return 2
            try:
                pid, why = fork(fields[2:])
            except Exception as e:  # noqa: B902: a bad request is answered, never the template's end
                pid, why = None, "%s: %s" % (type(e).__name__, e)
            if pid is not None:
                send(b"forked", fields[1], pid)
            else:
                send(b"failed", fields[1], why)
            reap()


if __name__ == "__main__":
    sys.exit(main())
