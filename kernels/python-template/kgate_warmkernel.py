"""kernels/python-template/kgate_warmkernel.py: one whole kernel made in the template, warmed, stopped, and made a kernel
again in each fork (docs/kernels.md, "A warm kernel forked").

A kernel forked from imports alone runs ipykernel's start and its first cell itself, and each object that code reads gets
its reference count written: ~17.6 MiB of the template's pages copied per kernel. Here the template runs that start and a
first client's exchanges (kernel_info, `1+1`, a print) once, before it freezes its heap, so a kernel touches only what
its own sockets, threads and cells touch (~10 MiB). What cannot cross a fork is stopped before it (`quiesce`: ipykernel's
threads, the ZMQ contexts and their sockets, the event loops, the descriptors its output capture made) and made anew in
the child (`become`), with what ipykernel's start would have read there: the kernel's own connection file and key, cwd,
IPython directory, environment and history session.

It reaches into ipykernel 6's internals (IOPubThread, OutStream's capture, the kernel's streams), so it runs only on the
major version it was written for (SUPPORTED_MAJOR); the template falls back to forking from imports alone otherwise, or
when the warm-up fails. A kernel whose start would read something the template's did not (`unforkable`: config or
startup files in its profile, PYTHONSTARTUP, arguments other than a connection file) is refused: kgate spawns it.
"""

import asyncio
import atexit
import gc
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from logging import StreamHandler
from pathlib import Path

SUPPORTED_MAJOR = "6"  # ipykernel's major version whose internals this reaches into (Debian 12: 6.17)
WARM_TIMEOUT_S = 60  # the warm-up's start and client, on a loaded machine
# what IPython reads at a kernel's start from its profile directory (BaseIPythonApplication.config_file_paths: that, and the
# system's directories, which the template read as a kernel would; not the cwd)
CONFIG_FILES = ("ipython_config.py", "ipython_config.json", "ipython_kernel_config.py", "ipython_kernel_config.json")

APP = None  # the quiesced kernel's IPKernelApp, in the template and in each fork
INIT_ENV = {}  # what ipykernel's start put into os.environ (TERM, CLICOLOR, PAGER, GIT_PAGER, MPLBACKEND): set again


def supported():
    """None when this ipykernel is the one the re-making was written for, else why not."""
    import ipykernel

    if ipykernel.__version__.split(".")[0] != SUPPORTED_MAJOR:
        return "ipykernel %s is not %s.x, whose internals a warm kernel's re-making reaches into" % (
            ipykernel.__version__, SUPPORTED_MAJOR)
    return None


def warm_up(tmp, new_app):
    """Makes APP: an IPKernelApp (`new_app()`) initialised on a connection file in `tmp`, served to a client of its own
    (kernel_info, `1+1`, print) in a child, then quiesced. Raises on any failure (the template then forks from imports)."""
    global APP
    conn = private_connection_file(tmp, "warm")
    # the environment a kernel gets from kgate (its own IPython directory, NO_COLOR), without a startup file to run
    before = dict(os.environ)
    os.environ.update(IPYTHONDIR=os.path.join(tmp, "ipython"), NO_COLOR="1")
    os.environ.pop("PYTHONSTARTUP", None)
    client = os.fork()  # before the app makes its threads
    if client == 0:
        code = 1
        try:
            os.closerange(3, 65536)
            run_client(conn, ("1+1", "print('warm')"), WARM_TIMEOUT_S)
            code = 0
        finally:
            os._exit(code)
    status = None
    try:
        app = new_app()
        app.initialize(["-f", conn])
        INIT_ENV.update({k: v for k, v in os.environ.items() if before.get(k) != v and k not in ("IPYTHONDIR", "NO_COLOR")})
        status = serve_until_exit(app, client)
        if status != 0:
            raise RuntimeError("the warm-up client failed (wait status %s)" % status)
        quiesce(app)
    finally:
        if status is None:  # it still runs: the warm-up failed or timed out
            os.kill(client, signal.SIGKILL)
            os.waitpid(client, 0)
        os.environ.clear()  # the template's own again, whatever happened
        os.environ.update(before)
    APP = app


def private_connection_file(tmp, name):
    """Writes a connection file in `tmp` (ipc sockets there, a new key) for a kernel of the template's own (the warm one,
    the probe); returns its path."""
    conn = os.path.join(tmp, "connection.json")
    with open(os.open(conn, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump({"transport": "ipc", "ip": os.path.join(tmp, "ch"), "shell_port": 1, "iopub_port": 2, "stdin_port": 3,
                   "control_port": 4, "hb_port": 5, "key": os.urandom(32).hex(), "signature_scheme": "hmac-sha256",
                   "kernel_name": name}, f)
    return conn


def run_client(conn, cells, timeout_s):
    """In a child of the template: a client's first exchanges with a kernel of the template's own (kernel_info, then each
    of `cells`), as kgate's and a caller's would be. Raises unless each cell's reply is "ok"."""
    from jupyter_client.blocking import BlockingKernelClient

    kc = BlockingKernelClient(connection_file=conn)
    kc.load_connection_file()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=timeout_s)
        for code in cells:
            reply = kc.execute_interactive(code, timeout=timeout_s, output_hook=lambda msg: None)
            if reply["content"]["status"] != "ok":
                raise RuntimeError("the kernel answered %s" % reply["content"]["status"])
    finally:
        kc.stop_channels()


def serve_until_exit(app, client):
    """Runs the kernel (app.start) until `client` has exited (returns its wait status) or WARM_TIMEOUT_S passed (None)."""
    from tornado import ioloop

    loop = ioloop.IOLoop.current()
    deadline = time.monotonic() + WARM_TIMEOUT_S
    status = []

    def check():
        pid, st = os.waitpid(client, os.WNOHANG)
        if pid == client:
            status.append(st)
        if status or time.monotonic() > deadline:
            loop.stop()

    poll = ioloop.PeriodicCallback(check, 20)
    poll.start()
    try:
        app.start()  # returns when check() stops the loop
    finally:
        poll.stop()
    return status[0] if status else None


def close_outstream(stream, fd):
    """Ends an OutStream's capture of descriptor `fd` (ipykernel's close() would join a watch thread blocked in read()):
    its thread woken by a byte it sees as its end, `fd` given back its original, the pipe's ends closed."""
    stream._should_watch = False
    os.write(fd, b"\n")
    stream.watch_fd_thread.join()
    pipe = os.fstat(stream._fid).st_ino
    os.dup2(stream._original_stdstream_copy, fd)
    os.close(stream._original_stdstream_copy)
    os.close(stream._fid)
    for name in os.listdir("/proc/self/fd"):  # the write end ipykernel dup2'd onto `fd` and kept
        try:
            if int(name) > 2 and os.fstat(int(name)).st_ino == pipe:
                os.close(int(name))
        except OSError:
            pass
    stream.pub_thread = None


def quiesce(app):
    """Stops and closes what a fork cannot carry (threads, ZMQ contexts, event loops, output capture), unregisters what
    ipykernel's start registered to run at exit, and clears the warm-up's cells from the shell, its history and its kernel."""
    from IPython.core import async_helpers
    from ipykernel import iostream
    from tornado import ioloop

    kernel, shell = app.kernel, app.shell
    out, err = sys.stdout, sys.stderr
    out.flush()
    err.flush()
    sys.stdout, sys.stderr, sys.displayhook = sys.__stdout__, sys.__stderr__, sys.__displayhook__
    for stream, fd in ((out, 1), (err, 2)):
        if isinstance(stream, iostream.OutStream) and getattr(stream, "_should_watch", False):
            close_outstream(stream, fd)
    for handler in app.log.handlers:  # init_io pointed it at a copy of descriptor 2, closed above
        if isinstance(handler, StreamHandler) and handler.stream is not sys.__stderr__:
            handler.stream = sys.__stderr__
    app.heartbeat.context.term()  # ends its device with ETERM: the thread closes its socket
    app.heartbeat.join()
    app.control_thread.stop()
    app.control_thread.join()
    app.iopub_thread.stop()
    app.iopub_thread.close()
    for stream in (kernel.shell_stream, kernel.control_stream, getattr(kernel, "debugpy_stream", None)):
        if stream is not None and not stream.closed():
            stream.close()
    ioloop.IOLoop.current().close(all_fds=True)  # its epoll and wake-up pipe would be every fork's
    asyncio.set_event_loop(None)
    if async_helpers._asyncio_event_loop is not None:
        async_helpers._asyncio_event_loop.close()
        async_helpers._asyncio_event_loop = None
    app.context.destroy(linger=0)
    app.context = None
    from zmq.utils import garbage

    garbage.gc.stop()  # pyzmq's zero-copy collector thread, if a big message started it
    for func in (app.close, app.iopub_thread.stop, app.cleanup_connection_file):
        atexit.unregister(func)  # each fork's start registers its own
    tornado_log = logging.getLogger("tornado")  # init_iopub adds a handler, each fork's one more
    for handler in list(tornado_log.handlers):
        tornado_log.removeHandler(handler)
    if threading.active_count() != 1:
        raise RuntimeError("threads left after the warm-up: %r" % threading.enumerate())
    # the warm-up's cells: user namespace, In/Out, execution count, history (session 1 again, as a new kernel's)
    shell.reset(new_session=True)
    shell.last_execution_result = None
    history = shell.history_manager
    with history.db:
        for table in ("history", "output_history", "sessions"):
            history.db.execute("DELETE FROM %s WHERE session != ?" % table, (history.session_number,))
        for table in ("history", "output_history", "sessions"):
            history.db.execute("UPDATE %s SET session = 1" % table)
        history.db.execute("UPDATE sqlite_sequence SET seq = 1 WHERE name = 'sessions'")
    history.session_number = 1
    kernel._parents = {"shell": {}, "control": {}}
    kernel._parent_ident = {"shell": b"", "control": b""}
    gc.collect()


def unforkable(env, args):
    """Why a kernel of this environment and arguments would start otherwise than the warm one did, or None."""
    if len(args) != 2 or args[0] != "-f":
        return "its arguments are not a connection file alone"
    if env.get("PYTHONSTARTUP"):  # the warm kernel ran none
        return "its environment sets PYTHONSTARTUP, which IPython runs only at a kernel's start"
    # kgate gives each kernel an empty IPYTHONDIR of its own: nothing there unless that changes
    profile = os.path.join(env.get("IPYTHONDIR") or os.path.expanduser("~/.ipython"), "profile_default")
    for name in CONFIG_FILES:
        if os.path.exists(os.path.join(profile, name)):
            return "%s holds %s, which IPython reads at a kernel's start" % (profile, name)
    startup = os.path.join(profile, "startup")
    if os.path.isdir(startup) and os.listdir(startup):
        return "%s holds startup files, which IPython runs at a kernel's start" % startup
    return None


def become(conn_file, on_bound):
    """In the fork, after the template's child set-up (cwd, environment, sys.path, limits, signals, descriptors): makes
    APP a kernel of its own on `conn_file` and runs it, calling `on_bound()` once its sockets are bound; returns when it
    stops."""
    import uuid

    from IPython.core.profiledir import ProfileDir
    from ipykernel.debugger import Debugger, _is_debugpy_available
    from tornado.queues import Queue
    from zmq.eventloop.zmqstream import ZMQStream

    app = APP
    kernel, shell, session = app.kernel, app.shell, app.session
    # what ipykernel's start read or wrote at the process level, as it would here
    for name, value in INIT_ENV.items():
        if name == "MPLBACKEND":
            os.environ.setdefault(name, value)  # ipykernel sets it only when unset
        else:
            os.environ[name] = value
    tempfile.tempdir = None  # cached from the template's TMPDIR: found again from this kernel's
    app.init_path()  # '' on sys.path before site-packages, as its start does
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # init_signal: a cell's execution handles it
    shell.history_manager.dir_hist[:] = [Path.cwd()]  # _dh
    # its own IPython directory (kgate's IPYTHONDIR for it: empty, so no config or startup file is skipped)
    ipython_dir = os.environ.get("IPYTHONDIR")
    if ipython_dir:
        os.makedirs(ipython_dir, mode=0o700, exist_ok=True)
        profile = ProfileDir.create_profile_dir_by_name(ipython_dir, "default")
        app.ipython_dir = shell.ipython_dir = ipython_dir
        app.profile_dir = kernel.profile_dir = shell.profile_dir = profile
        from pickleshare import PickleShareDB

        shell.db = PickleShareDB(os.path.join(profile.location, "db"))  # %store's
    asyncio.set_event_loop(asyncio.new_event_loop())
    # its identity: session id and pid (Session refuses to send from another pid), kernel ident; the key is the file's
    session.session = str(uuid.uuid4())
    session.pid = os.getpid()
    session.message_count = 0
    session.digest_history.clear()
    kernel.ident = str(uuid.uuid4())
    # sockets and threads as ipykernel's start makes them, on the kernel's own connection file
    display_socket = app.iopub_socket  # the BackgroundSocket the shell's displayhook and display_pub hold
    app.connection_file = conn_file
    app.shell_port = app.iopub_port = app.stdin_port = app.control_port = app.hb_port = 0
    app.load_connection_file(conn_file)
    app.init_sockets()
    display_socket.io_thread = app.iopub_thread
    app.iopub_socket = display_socket
    app.init_heartbeat()
    on_bound()  # kgate may connect from here on
    app.write_connection_file()
    app.log_connection_info()
    app.init_io()
    # the kernel's streams, as init_kernel makes them, set on the kernel the template made
    kernel.shell_stream = ZMQStream(app.shell_socket)
    kernel.control_stream = ZMQStream(app.control_socket, app.control_thread.io_loop)
    debugpy_stream = ZMQStream(app.debugpy_socket, app.control_thread.io_loop)
    app.control_thread.start()
    if _is_debugpy_available:
        kernel.debugpy_stream = debugpy_stream
    kernel.debug_shell_socket = app.debug_shell_socket
    kernel.control_thread = app.control_thread
    kernel.iopub_thread = app.iopub_thread
    kernel.iopub_socket = display_socket
    kernel.stdin_socket = app.stdin_socket
    kernel.control_queue = Queue()
    kernel.record_ports({name + "_port": port for name, port in app._ports.items()})
    if _is_debugpy_available:
        kernel.debugger = Debugger(kernel.log, debugpy_stream, kernel._publish_debug_event, app.debug_shell_socket, session,
                                   kernel.debug_just_my_code)
    shell.displayhook.topic = kernel._topic("execute_result")
    app.displayhook.get_execution_count = lambda: kernel.execution_count
    sys.stdout.flush()
    sys.stderr.flush()
    app.start()
