"""kernels/python-template/kgate_tplproto.py: kgate's template protocol (kernelmgr/src/tplproto.h), the template's side.

One copy for kgate_template.py and for the tests' fake template (tests/kernelmgr/fake_template/fake_template.py), so
that the fake speaks the protocol as the real template does: the frames (a 4-byte big-endian length, then fields each
with the same prefix), written whole on the blocking socket kgate hands over as descriptor 3, and the loop that reads
requests and hears of children's deaths (SIGCHLD through a wake-up pipe, so that select() wakes for both).
"""

import os
import select
import signal
import struct
import sys

MAX_FRAME = 1 << 20  # kgate's KMGR_TPL_MAX_FRAME
SOCK = 3
_buffered = 0  # bytes serve() has read past the request it is handling


def frame(*fields):
    body = b"".join(struct.pack(">I", len(f)) + f for f in fields)
    return struct.pack(">I", len(body)) + body


def send_raw(data):
    while data:
        data = data[os.write(SOCK, data) :]


def send(*fields):
    """One frame of fields: bytes as they are, anything else as its str() in UTF-8."""
    send_raw(frame(*[f if isinstance(f, bytes) else str(f).encode() for f in fields]))


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


def prepare():
    """Makes SOCK blocking, sends SIGCHLD to a wake-up pipe and ignores SIGINT (kgate interrupts its kernels, not the
    template: a stray SIGINT must not end it). Returns the pipe's read end, for serve()."""
    os.set_blocking(SOCK, True)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return wake_r


def request_waiting():
    """From on_request: whether kgate has sent more than the request being handled (read already, or still to read)."""
    if _buffered:
        return True
    poller = select.poll()
    poller.register(SOCK, select.POLLIN)
    return bool(poller.poll(0))


def serve(wake_r, on_request, on_child, waiter=None):
    """Reads kgate's requests until kgate closes its end (returns 0): on_request(fields) for each whole frame, in order;
    on_child() after a SIGCHLD. on_request returning a value other than None ends the loop with it; a frame over
    MAX_FRAME ends it with 2. `waiter`, if given, has more to wait on: fds() (descriptors), timeout() (select's, None
    for none) and on_wake(readable) (after every wake, requests first: its descriptors that were readable)."""
    global _buffered
    buf = b""
    while True:
        # poll, not select: select refuses a descriptor numbered 1024 or more, and the waiter's are the template's to number
        poller = select.poll()
        for fd in [SOCK, wake_r] + (waiter.fds() if waiter is not None else []):
            poller.register(fd, select.POLLIN)
        timeout = waiter.timeout() if waiter is not None else None
        try:
            readable = [fd for fd, _ in poller.poll(None if timeout is None else timeout * 1000)]
        except InterruptedError:
            continue
        if wake_r in readable:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
            on_child()
        if SOCK in readable:
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
                _buffered = len(buf)
                code = on_request(fields)
                if code is not None:
                    return code
        if waiter is not None:
            waiter.on_wake([fd for fd in readable if fd != SOCK and fd != wake_r])
