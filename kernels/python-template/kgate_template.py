"""kgate's Python kernel template (docs/kernels.md, "Kernels forked from a template").

kgate starts one of these per ipykernel kernelspec, with the spec's interpreter:
`python3 kgate_template.py [--merge] [--imports-only]`, descriptor 3 a socket to kgate. It imports ipykernel (and with it
IPython, zmq, jupyter_client, tornado), then makes a whole kernel of its own, warms it with a client of its own and stops
it (kgate_warmkernel.py: each fork makes it a kernel again, with its own connection file and key, and copies ~10 MiB of
the template's pages where a kernel running ipykernel's start itself copies ~17.6), freezes its heap out of the garbage
collector's reach (gc.freeze: a collection in a child would otherwise write to every shared page), says "ready" and then
only forks kernels when kgate asks. It never runs user code and owns nothing of any user; when it forks it holds no
connection file, key, socket or thread of any kernel.

Without a warm kernel (--imports-only, kgate's --kernel-template-imports-only; an ipykernel other than 6.x; a warm-up that
failed) each kernel is forked from the imports alone and runs ipykernel's start itself. For that start the template builds
the named script magics' argument parser every kernel would build eight times (kgate_script_magics.py), learns from a probe
kernel which of its pages a kernel's start writes (kgate_hotset.py: each kernel then copies them in a few calls instead of
a fault each) and which regular expressions it compiles (kgate_warm.py: compiled here once), and forks each kernel through
a spare child forked ahead that has copied those pages already, once no kernel it handed out is still starting
(kgate_spare.py).

Frames both ways: a 4-byte big-endian length, then fields, each a 4-byte big-endian length and its
bytes (kgate_tplproto.py, shared with the tests' fake template; kernelmgr/src/tplproto.h is the C side;
tests/kernelmgr/test_tplproto.c its tests).
kgate -> template: ["fork", id, tagged fields...], each tagged field a tag byte and its value:
  c cwd, l log path, a kernel argument (in order), e "KEY=VALUE" (the whole environment), r "RESOURCE=VALUE".
template -> kgate: ["ready", pid], ["forked", id, pid] (right after the fork: the child applies its set-up on its own),
["failed", id, message], ["exited", pid, wait status].
"""

import functools
import gc
import json
import os
import random
import resource
import select
import signal
import sys
import threading
import time


def set_name(name):
    """/proc/<pid>/comm: `kgate-template` for the template (tests and ps tell it from kernels), the interpreter's for a kernel
    (one write through a descriptor: in a forked child, Python's file objects cost a millisecond of first touches)."""
    try:
        fd = os.open("/proc/self/comm", os.O_WRONLY)
        try:
            os.write(fd, name[:15].encode())
        finally:
            os.close(fd)
    except OSError:
        pass


# first, before the imports' second or so: whoever lists kgate's processes meanwhile tells the template from a kernel
set_name("kgate-template")

# before any other import: what the interpreter took from kgate's environment at its start (sys.path, os.environ)
import kgate_startenv  # noqa: E402 (next to this file)

# What every kernel needs before its first cell: imported once here, shared by every fork.
import ipykernel.kernelapp  # noqa: E402 (IPython, zmq, jupyter_client, tornado, traitlets)
import ipykernel.ipkernel  # noqa: F401
import ipykernel.zmqshell  # noqa: F401
import IPython.core.interactiveshell  # noqa: F401
import jupyter_client.session  # noqa: F401
import IPython.core.completerlib  # noqa: F401 (imported by every kernel's initialisation)
import faulthandler  # noqa: F401 (likewise)
from jupyter_client import localinterfaces
import kgate_hotset  # noqa: E402 (next to this file)
import kgate_merge  # noqa: E402 (next to this file)
from kgate_tplproto import send  # noqa: E402 (next to this file; the frames, shared with the tests' fake)
import kgate_tplproto  # noqa: E402
import kgate_script_magics  # noqa: E402 (next to this file)
import kgate_spare  # noqa: E402 (next to this file)
import kgate_warm  # noqa: E402 (next to this file)
import kgate_warmkernel  # noqa: E402 (next to this file)

# the host's addresses, found by running `ip addr` and cached in the module: once here, not a fork and exec per kernel
localinterfaces.localhost()
# the named script magics' argument parser (%%bash, %%python3, ...), built here once rather than eight times per kernel
SCRIPT_MAGICS_NOT_BUILT = kgate_script_magics.install()

NO_FORK = None  # why every fork is refused (kgate spawns): a warm-up that failed after its app or threads were made
BOUND_WAIT_S = 0.1  # a warm kernel's child binds its sockets 5-20 ms after its fork; a loaded machine's is not waited for
PROBE_TIMEOUT_S = 60  # the probe kernel's start and two cells, on a loaded machine; beyond, kernels fault page by page
HOT = []  # the runs of pages every forked kernel copies first (kgate_hotset), learned from the probe
SPARE = None  # (pid, request pipe, started pipe): a child forked ahead with those pages copied, waiting for a request
OWN_HOT = []  # the runs of the template's own pages its answer to a request writes (learn_own_pages), copied after each fork
SCHEDULE = kgate_spare.Schedule()  # the kernels handed out that are still starting: the next spare waits for them
STARTED_FD = -1  # in a kernel: the write end of its pipe to the template, closed when its initialize ends (kgate_spare)

RLIMITS = {
    "AS": resource.RLIMIT_AS,
    "CPU": resource.RLIMIT_CPU,
    "NPROC": resource.RLIMIT_NPROC,
    "FSIZE": resource.RLIMIT_FSIZE,
    "NOFILE": resource.RLIMIT_NOFILE,
    "DATA": resource.RLIMIT_DATA,
}


def child_setup(req, populated=False):
    """In the child, before any kernel code: what makes it a kernel of its own."""
    # first: the pages its start writes, copied in a few calls rather than a fault each (kgate_hotset); a spare did already
    if not populated:
        kgate_hotset.populate(HOT)
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
    # the template's descriptors (its socket to kgate, anything an import opened) are not the kernel's; its pipe saying
    # when its start has ended is kept until then
    os.closerange(3, max(3, STARTED_FD))
    os.closerange(max(3, STARTED_FD + 1), 65536)
    if req["cwd"]:
        os.chdir(req["cwd"])
    for name, value in req["rlimits"]:
        resource.setrlimit(RLIMITS[name], (value, value))
    # the kernel's whole environment, changing only what differs from the template's (most of it is kgate's, as the
    # template's is): every variable set again would be a malloc and a page of the template's heap copied
    for name in [name for name in os.environ if name not in req["env"]]:
        del os.environ[name]
    for name, value in req["env"].items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    # the path a new interpreter would start with here: its cwd first (not the template's directory), then PYTHONPATH's entries
    sys.path[:] = kgate_startenv.path_for(req["env"])
    # a fork copies the generators' state: every kernel would draw the template's numbers
    random.seed()
    np = sys.modules.get("numpy.random")
    if np is not None:
        np.seed()
    sys.argv = [sys.executable, "-m", "ipykernel_launcher"] + req["args"]


def new_app():
    """The kernel's IPKernelApp, made of constants alone: nothing of its request (arguments, environment, cwd) is read
    until `initialize`, so a spare makes it before its request comes (its traits that read the environment, IPYTHONDIR's
    among them, are computed when first read, in `initialize`)."""
    from ipykernel.kernelapp import IPKernelApp
    from traitlets.config import Config

    # history in memory: a kernel's IPYTHONDIR is its own and goes with it (kgate removes the kernel's directory), so a
    # sqlite file there is never read again, and creating it is a tenth of a forked kernel's start
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    # parent_handle 1: no thread polling for the parent's death (its parent is this template, which a kernel outlives; kgate
    # watches the kernel, and its instance mark has it killed with kgate), and no console banner in its log
    return IPKernelApp.instance(parent_handle=1, config=config)


def spare_app():
    """In a spare, before its request: the app made ahead, or None (then made after the request, failing there if it must)."""
    try:
        return new_app()
    except Exception:  # noqa: B902: made again after the request, where a failure is reported in the kernel's log
        return None


def child_run(req, app=None):
    if app is None:
        app = new_app()
    if is_plain_connection_args(app, req["args"]):
        app.parse_command_line = functools.partial(parse_connection_args, app)
    app.initialize(req["args"])
    # its start has ended: the template may fork the next spare (kgate_spare); a kernel that dies before tells it by dying
    signal_started()
    app.start()


def is_plain_connection_args(app, args):
    """Whether `args` is `-f <file>` alone (kgate's spec for ipykernel) and `-f` means what ipykernel's aliases say."""
    return len(args) == 2 and args[0] == "-f" and app.aliases.get("f") == "IPKernelApp.connection_file"


def parse_connection_args(app, argv):
    """traitlets' Application.parse_command_line for `-f <file>` alone, with the same outcome (cli_config, argv, extra_args)
    without the argument parser it builds from every configurable class's traits (a tenth of a forked kernel's start)."""
    from traitlets.config import Config

    app.argv = list(argv)
    cli = Config()
    cli.IPKernelApp.connection_file = argv[1]
    app.cli_config = cli
    app.update_config(app.cli_config)
    app.extra_args = []


def run_child(req, populated=False, app=None):
    """The forked child's whole life: set-up, then the kernel (the warm one made a kernel again, or one started from the
    imports); never returns."""
    code = 127
    try:
        child_setup(req, populated)
        code = 0
        if kgate_warmkernel.APP is not None:
            kgate_warmkernel.become(req["args"][1], on_bound=signal_started)
        else:
            child_run(req, app)
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
    if NO_FORK is not None:
        return None, NO_FORK
    # what a fork cannot give (a hash seed, an encoding ... of its own) is refused: kgate spawns that kernel
    why = kgate_startenv.unforkable(req["env"])
    if why is None and kgate_warmkernel.APP is not None:
        why = kgate_warmkernel.unforkable(req["env"], req["args"])
    if why is not None:
        return None, why
    if kgate_warmkernel.APP is not None:
        return fork_warm(req), None
    global SPARE
    if SPARE is not None:
        # the spare forked ahead takes this kernel: its fork and page copying were done while nobody waited
        pid, pipe, started = SPARE
        SPARE = None
        data = json.dumps(req).encode()
        try:
            while data:
                data = data[os.write(pipe, data) :]
            SCHEDULE.started(started, time.monotonic())
            return pid, None
        except OSError:
            os.close(started)  # it died (its "exited" is reported): fork one now
        finally:
            os.close(pipe)
    pid, started = fork_with_start_pipe()
    if pid == 0:
        run_child(req)
    SCHEDULE.started(started, time.monotonic())
    # answered at once: kgate's loop waits for this answer, not for the child's set-up (a failure there is the kernel's
    # death before it was ready, its reason in its log, as for a spawned kernel that fails after exec)
    return pid, None


def fork_warm(req):
    """Forks a kernel from the warm one (nothing to copy ahead, no spare); returns its pid once the child has bound its
    sockets, so that kgate's first connect, right after the answer, finds them (else its next attempt comes at its next
    tick, 40-50 ms later, measured as half the creates taking ~95 ms rather than ~50). At most BOUND_WAIT_S, and not at
    all while another request waits: a burst's forks are not held one behind another's set-up."""
    pid, bound = fork_with_start_pipe()
    if pid == 0:
        run_child(req)
    try:
        if not kgate_tplproto.request_waiting():
            poller = select.poll()
            for fd in (bound, kgate_tplproto.SOCK):
                poller.register(fd, select.POLLIN)
            poller.poll(BOUND_WAIT_S * 1000)  # EOF on `bound`: the child bound its sockets, or died
    finally:
        os.close(bound)
    return pid


def fork_with_start_pipe():
    """Forks a kernel's child holding the write end of a pipe (STARTED_FD) that it closes once its start is far enough
    along (signal_started()), or by dying. Returns (pid, the read end) in the template, (0, -1) in the child."""
    global STARTED_FD
    read_end, STARTED_FD = os.pipe2(os.O_CLOEXEC)
    try:
        pid = fork_child()
    except BaseException:
        os.close(read_end)
        os.close(STARTED_FD)
        STARTED_FD = -1
        raise
    if pid == 0:
        os.close(read_end)
        return 0, -1
    os.close(STARTED_FD)
    STARTED_FD = -1
    return pid, read_end


def signal_started():
    """In a kernel: its start is far enough along (its sockets bound, or its initialize ended) to tell the template, by
    closing its end of the pipe (STARTED_FD) the template watches."""
    global STARTED_FD
    if STARTED_FD >= 0:
        os.close(STARTED_FD)
        STARTED_FD = -1


def fork_child():
    if threading.active_count() != 1:
        raise RuntimeError("the template has %d threads: a fork would copy their locks" % threading.active_count())
    return os.fork()


def make_spare():
    """Forks the spare: a child that copies the hot pages now and becomes the next kernel asked for (its request comes
    whole through a pipe, then EOF; EOF alone, the template gone, ends it), having made its IPKernelApp (new_app: of
    constants alone). Until then it holds nothing of any user."""
    global SPARE, STARTED_FD
    r, w = os.pipe2(os.O_CLOEXEC)
    started, STARTED_FD = os.pipe2(os.O_CLOEXEC)
    try:
        pid = fork_child()
    except BaseException:
        for fd in (r, w, started, STARTED_FD):
            os.close(fd)
        STARTED_FD = -1
        raise
    if pid == 0:
        try:
            os.close(w)
            os.close(started)
            kgate_hotset.populate(HOT)
            app = spare_app()
            chunks = []
            while True:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
            req = json.loads(b"".join(chunks)) if chunks else None
        except BaseException:  # noqa: B902: a child of the template never returns into it
            os._exit(1)
        if req is None:
            os._exit(0)
        run_child(req, populated=True, app=app)
    os.close(r)
    os.close(STARTED_FD)
    STARTED_FD = -1
    SPARE = (pid, w, started)


def learn_own_pages():
    """The runs of this template's own pages that answering a request writes, learned once through a request of its own.

    After each fork every page the template shares with its children is write-protected, and its answer to the next
    request (the frame parsed, the request checked and handed to the spare as JSON, the answer framed) writes ~150-200 of
    them: a copy-on-write fault each, 25-40 us on these machines, while kgate and a client wait. Learned here with a child
    that copies nothing and takes a made-up request as a spare takes one (the template's own environment, a connection
    file that does not exist; it reads the request and exits): the pages the template then holds alone are those it wrote.
    After each spare's fork the template copies them in one madvise per run (kgate_hotset.populate) while nothing waits."""
    global SPARE
    maps, buf = kgate_hotset.writable_maps(), kgate_hotset.scan_buffer()  # before: the scan is to find the answer's writes
    r, w = os.pipe2(os.O_CLOEXEC)
    hold_r, hold_w = os.pipe2(os.O_CLOEXEC)  # closed after the scan: the child's pages stay shared until then
    started_r, started_w = os.pipe2(os.O_CLOEXEC)  # as a spare's: the child holds its write end until it exits
    pid = fork_child()
    if pid == 0:
        code = 0
        try:
            os.close(w)
            os.close(hold_w)
            os.close(started_r)
            for fd in (r, hold_r):
                while os.read(fd, 65536):
                    pass
        except BaseException:  # noqa: B902: a child of the template never returns into it
            code = 1
        finally:
            os._exit(code)
    os.close(r)
    os.close(hold_r)
    os.close(started_w)
    SPARE = (pid, w, started_r)
    try:
        env = [b"e" + ("%s=%s" % kv).encode("utf-8", "surrogateescape") for kv in os.environ.items()]
        request = kgate_tplproto.frame(b"fork", b"0", b"c", b"l" + os.devnull.encode(), b"a-f", b"a/nonexistent.json", *env)
        fields = kgate_tplproto.parse_fields(request[4:])
        forked, why = fork(fields[2:])
        if forked != pid:
            raise RuntimeError("the made-up request was not handed over: %s" % why)
        kgate_tplproto.frame(b"forked", fields[1], str(forked).encode())
        return kgate_hotset.exclusive_runs(maps, buf=buf)
    finally:
        if SPARE is not None:
            os.close(SPARE[1])
            os.close(SPARE[2])
            SPARE = None
        os.close(hold_w)
        os.waitpid(pid, 0)
        SCHEDULE.close()  # the made-up kernel's start: no spare waits for it


def spare_ahead():
    """Forks the next spare, then copies the template's own pages its next answer writes (OWN_HOT), both while nothing
    waits on the template and no kernel it handed out is starting (kgate_spare)."""
    make_spare()
    kgate_hotset.populate(OWN_HOT)


class SpareWaiter:
    """kgate_tplproto.serve's waiter: the starting kernels' pipes watched, and the next spare forked when it is due."""

    def fds(self):
        return SCHEDULE.fds()

    def timeout(self):
        # no spare to make (there is one, or nothing to copy): wait on requests and pipes alone
        return SCHEDULE.timeout(time.monotonic()) if SPARE is None and HOT else None

    def on_wake(self, readable):
        now = time.monotonic()
        for fd in readable:
            SCHEDULE.readable(fd, now)
        if SPARE is None and HOT and SCHEDULE.due(now):
            try:
                spare_ahead()
            except Exception as e:  # noqa: B902: no spare, the next kernel is forked on its request
                SCHEDULE.lost(now)
                sys.stderr.write("kgate template: no spare: %s\n" % e)


def probe_client(conn_file, dump_path, patterns_path):
    """In a child beside the probe kernel: kgate's first exchanges with a kernel (kernel_info, `1+1`), then the dumps (its
    written pages, then its re cache's patterns)."""
    dumps = "import kgate_hotset, kgate_warm\nkgate_hotset.dump(%r, kgate_hotset.TEMPLATE_MAPS)\nkgate_warm.dump(%r)"
    kgate_warmkernel.run_client(conn_file, ("1+1", dumps % (dump_path, patterns_path)), PROBE_TIMEOUT_S)


def learn_from_probe():
    """Forks a probe kernel and a client for it: (the runs of this template's pages a kernel's start writes, the patterns
    its start compiles, None), or ([], [], why) when there are none to copy (no patterns either: the probe failed).

    The probe is a kernel like any other (its own directory, connection file and key, removed after), run before the
    template says "ready": nothing of any user is ever in it. A probe that fails leaves kernels to fault as before."""
    import shutil
    import tempfile

    if not kgate_hotset.supported():
        return [], [], "this Linux has no MADV_POPULATE_WRITE"
    tmp = tempfile.mkdtemp(prefix="kgate-probe-")
    conn_file, dump_path = kgate_warmkernel.private_connection_file(tmp, "probe"), os.path.join(tmp, "hot.json")
    patterns_path = os.path.join(tmp, "patterns.json")
    kgate_hotset.TEMPLATE_MAPS = kgate_hotset.writable_maps()
    env = dict(os.environ, IPYTHONDIR=os.path.join(tmp, "ipython"), NO_COLOR="1")
    req = {"cwd": tmp, "log": os.path.join(tmp, "kernel.log"), "args": ["-f", conn_file], "env": env, "rlimits": []}
    kernel = client = 0
    try:
        kernel = os.fork()
        if kernel == 0:
            run_child(req)
        client = os.fork()
        if client == 0:
            code = 1
            try:
                os.closerange(3, 65536)
                probe_client(conn_file, dump_path, patterns_path)
                code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + PROBE_TIMEOUT_S
        status = None
        while status is None and time.monotonic() < deadline:
            pid, st = os.waitpid(client, os.WNOHANG)
            status = st if pid == client else None
            if status is None:
                time.sleep(0.02)
        if status is None:
            return [], [], "the probe kernel did not answer within %d s" % PROBE_TIMEOUT_S
        if status != 0 or not os.path.exists(dump_path) or not os.path.exists(patterns_path):
            return [], [], "the probe kernel failed (its log: %s)" % read_tail(req["log"])
        try:
            return kgate_hotset.load(dump_path), kgate_warm.load(patterns_path), None
        except (OSError, ValueError) as e:  # json's errors are ValueErrors
            return [], [], "the probe kernel's dumps are unreadable: %s" % e
    finally:
        for pid in (client, kernel):
            if pid > 0:
                for kill in (os.killpg, os.kill):  # the group: the kernel's set-up made it a session leader
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)


def read_tail(path):
    try:
        with open(path, "rb") as f:
            return f.read()[-300:].decode("utf-8", "replace").strip().replace("\n", " | ")
    except OSError as e:
        return str(e)


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        global SPARE
        if SPARE is not None and SPARE[0] == pid:
            os.close(SPARE[1])
            os.close(SPARE[2])
            SPARE = None
            SCHEDULE.lost(time.monotonic())  # it died before it was a kernel: nobody to tell; another in a while
            continue
        send(b"exited", pid, status)


def on_request(fields):
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
    return None  # the next spare is forked once this kernel's start has ended (SpareWaiter)


def warm_up():
    """Makes the warm kernel every kernel is forked from (kgate_warmkernel): None, or why there is none (then kernels are
    forked from the imports alone, as below)."""
    import shutil
    import tempfile

    why = kgate_warmkernel.supported()
    if why is not None:
        return why
    tmp = tempfile.mkdtemp(prefix="kgate-warm-")
    try:
        kgate_warmkernel.warm_up(tmp, new_app)
        return None
    except Exception as e:  # noqa: B902: any failure leaves the imports-alone start
        return "%s: %s" % (type(e).__name__, e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    global NO_FORK, HOT, OWN_HOT
    # --merge (kgate's --kernel-template-merge, an operator's opt-in): before the first fork, so every kernel inherits it
    if "--merge" in sys.argv[1:]:
        why = kgate_merge.enable()
        if why is not None:
            sys.stderr.write("kgate template: kernels' pages are not merged: %s\n" % why)
    # before prepare(): the warm kernel's start sets its own signal dispositions, and the template's follow
    if "--imports-only" in sys.argv[1:]:  # kgate's --kernel-template-imports-only
        why = "kgate was asked so (--kernel-template-imports-only)"
    else:
        why = warm_up()
    wake_r = kgate_tplproto.prepare()
    gc.collect()
    gc.freeze()
    if why is not None:
        sys.stderr.write("kgate template: kernels are forked from the imports alone, not from a warm kernel: %s\n" % why)
        from ipykernel.kernelapp import IPKernelApp

        if threading.active_count() != 1 or IPKernelApp.initialized():
            NO_FORK = "a warm kernel's start failed half-way in the template (%s): no fork of it is safe" % why
    if why is None or NO_FORK is not None:  # a warm kernel's forks need nothing more; a half-made one allows none
        send(b"ready", os.getpid())
        return kgate_tplproto.serve(wake_r, on_request, reap)
    HOT, patterns, why = learn_from_probe()
    if why is not None:
        sys.stderr.write("kgate template: kernels copy their pages one fault at a time: %s\n" % why)
    else:
        # the patterns every kernel's start compiles, compiled here once (kgate_warm); out of the collector's reach as the rest
        kgate_warm.compile_all(patterns)
        gc.collect()
        gc.freeze()
        try:
            OWN_HOT = learn_own_pages()
        except Exception as e:  # noqa: B902: the template's answers then fault page by page, as before
            sys.stderr.write("kgate template: its answers copy their pages one fault at a time: %s\n" % e)
        spare_ahead()
    if SCRIPT_MAGICS_NOT_BUILT is not None:
        sys.stderr.write("kgate template: kernels build their script magics' parsers: %s\n" % SCRIPT_MAGICS_NOT_BUILT)
    send(b"ready", os.getpid())
    return kgate_tplproto.serve(wake_r, on_request, reap, SpareWaiter())


if __name__ == "__main__":
    sys.exit(main())
