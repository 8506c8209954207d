# tests/kernelmgr/fake_kernel.py: a scripted Jupyter kernel for kernelmgr tests (forged messages,
# reply/idle order). Usage: /usr/bin/python3 fake_kernel.py CONNECTION_FILE [ENDED_FILE]
# ENDED_FILE: a line is appended for each way it is told to end, "shutdown_request" when one arrives and "SIGTERM" when
# that signal does (then it dies of it): how kgate ended it, which its exit status, reaped by kgate, cannot tell a test.
import collections
import json
import os
import re
import signal
import sys
import time

import zmq
from jupyter_client.session import Session

# next to this file; run by path (runpy, by the fake template and its ipykernel_launcher) its directory is not on sys.path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_sockets import bind_all  # noqa: E402

cfg = json.load(open(sys.argv[1]))
ended = open(sys.argv[2], "a") if len(sys.argv) > 2 else None


def told_to_end(how):
    if ended is not None:
        ended.write(how + "\n")
        ended.flush()


def on_sigterm(signum, frame):
    told_to_end("SIGTERM")
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


if ended is not None:
    signal.signal(signal.SIGTERM, on_sigterm)
shell, iopub, stdin, control, hb = bind_all(cfg)
good = Session(key=cfg["key"].encode(), signature_scheme="hmac-sha256")
forger = Session(key=b"not the key", signature_scheme="hmac-sha256")
poller = zmq.Poller()
for s in (shell, control, hb):
    poller.register(s, zmq.POLLIN)

# As Deno 2.9 does (cli/js/jupyter_kernel.js): what code prints goes on a queue that a drainer publishes one message at a
# time, each tagged with the execute request being handled when it is published (current), while the reply and idle go
# out at once. "deno N GAP [fail-flush]" queues N lines "late i\n" published GAP ms apart (a loaded machine's slow drain);
# Deno.jupyter.broadcast("TYPE", {}) (kgate's flush) queues one TYPE message, behind them; "fail-flush" makes the next
# broadcast fail (as when an interrupt lands in it): an error reply, nothing queued.
queue = collections.deque()
current = None
drain_gap = 0.0
next_drain = 0.0
fail_flush = False
BROADCAST = re.compile(r'^Deno\.jupyter\.broadcast\("([a-z_]+)", \{\}\)$')

while True:
    if queue and time.monotonic() >= next_drain:
        msg_type, content = queue.popleft()
        good.send(iopub, msg_type, content, parent=current)
        next_drain = time.monotonic() + drain_gap
        continue
    timeout = max(0, int((next_drain - time.monotonic()) * 1000)) if queue else None
    for s, _ in poller.poll(timeout):
        if s is hb:
            hb.send_multipart(hb.recv_multipart())
            continue
        idents, parts = good.feed_identities(s.recv_multipart())
        msg = good.deserialize(parts)
        kind = msg["header"]["msg_type"]
        if s is control:
            if kind == "shutdown_request":
                told_to_end("shutdown_request")
                good.send(control, "shutdown_reply", {"status": "ok", "restart": False}, parent=msg, ident=idents)
                sys.exit(0)
            continue
        good.send(iopub, "status", {"execution_state": "busy"}, parent=msg)
        if kind == "kernel_info_request":
            good.send(shell, "kernel_info_reply",
                      {"status": "ok", "protocol_version": "5.3", "implementation": "fake",
                       "language_info": {"name": "fake"}}, parent=msg, ident=idents)
        elif kind == "execute_request" and BROADCAST.match(msg["content"]["code"]):
            current = msg
            if fail_flush:
                fail_flush = False
                good.send(shell, "execute_reply", {"status": "error", "execution_count": 1, "ename": "Interrupted",
                                                   "evalue": "", "traceback": []}, parent=msg, ident=idents)
            else:
                queue.append((BROADCAST.match(msg["content"]["code"]).group(1), {}))
                good.send(shell, "execute_reply", {"status": "ok", "execution_count": 1, "user_expressions": {}},
                          parent=msg, ident=idents)
        elif kind == "execute_request":
            code = msg["content"]["code"]
            current = msg
            if code.startswith("deno "):
                count, gap_ms = (int(x) for x in code.split()[1:3])
                queue.extend(("stream", {"name": "stdout", "text": "late %d\n" % i}) for i in range(count))
                drain_gap = gap_ms / 1000
                next_drain = time.monotonic() + drain_gap
                fail_flush = code.split()[3:] == ["fail-flush"]
            # A message signed with the wrong key: the client must drop it.
            forger.send(iopub, "stream", {"name": "stdout", "text": "forged\n"}, parent=msg)
            good.send(iopub, "stream", {"name": "stdout", "text": "genuine\n"}, parent=msg)
            reply = {"status": "ok", "execution_count": 1, "user_expressions": {}}
            if code == "idle-first":
                good.send(iopub, "status", {"execution_state": "idle"}, parent=msg)
                good.send(shell, "execute_reply", reply, parent=msg, ident=idents)
                continue
            if code.startswith("burst "):
                # After a pause, many big stream messages at once, more than one drain takes
                # (KMGR_DRAIN_BYTES); after them nothing arrives that would wake the client's loop.
                count, size, pause_ms = (int(x) for x in code.split()[1:4])
                time.sleep(pause_ms / 1000)
                for _ in range(count):
                    good.send(iopub, "stream", {"name": "stdout", "text": "b" * size}, parent=msg)
            if code.startswith("buffers "):
                # A message with many binary buffers (frames after the content); buffer i is i+1 bytes.
                count = int(code.split()[1])
                good.send(iopub, "display_data", {"data": {}, "metadata": {}}, parent=msg,
                          buffers=[b"%c" % (65 + i % 26) * (i + 1) for i in range(count)])
            if code.startswith("oversized "):
                # One stream message of N bytes of text, more than the client's message cap: the
                # client passes it over and its connection goes on (the status idle below arrives).
                good.send(iopub, "stream", {"name": "stdout", "text": "o" * int(code.split()[1])}, parent=msg)
            if code.startswith("oversized-forged "):
                # The same signed with the wrong key: the client must deliver none of it.
                forger.send(iopub, "stream", {"name": "stdout", "text": "f" * int(code.split()[1])}, parent=msg)
            if code.startswith("oversized-mixed "):
                # N times "\u00e9\n" on stderr, after another member: 2-byte characters and escapes, 3N bytes decoded.
                good.send(iopub, "stream", {"extra": [1, {"a": "]"}], "name": "stderr", "text": "\u00e9\n" * int(code.split()[1])},
                          parent=msg)
            if code.startswith("oversized-reply "):
                # The reply itself is over the cap (as with a huge exception message): the client
                # passes it over; only the probe that follows tells it the request was dealt with.
                reply["padding"] = "r" * int(code.split()[1])
            if code.startswith("oversized-input "):
                # An input_request whose prompt is over the cap; then what the client answered.
                prompt = "p" * int(code.split()[1])
                good.send(stdin, "input_request", {"prompt": prompt, "password": False}, parent=msg, ident=idents)
                while True:
                    answer = good.deserialize(good.feed_identities(stdin.recv_multipart())[1])
                    if answer["header"]["msg_type"] == "input_reply":
                        break
                good.send(iopub, "stream", {"name": "stdout", "text": "got [%s]\n" % answer["content"]["value"]}, parent=msg)
            if code == "reply-lost":
                # as ipykernel does when an interrupt lands after the code and before the reply: idle, no reply
                good.send(iopub, "status", {"execution_state": "idle"}, parent=msg)
                continue
            if code == "idle-lost":
                # as if the kernel's PUB queue had dropped it: the reply comes, the idle never does
                good.send(shell, "execute_reply", reply, parent=msg, ident=idents)
                continue
            good.send(shell, "execute_reply", reply, parent=msg, ident=idents)
        good.send(iopub, "status", {"execution_state": "idle"}, parent=msg)
        if kind == "execute_request" and msg["content"]["code"].startswith("afterwards "):
            # Once the run is over: big output nobody awaits (as from a background thread), then a
            # small status pair without a parent, which must still move the kernel's state.
            time.sleep(0.5)
            size = int(msg["content"]["code"].split()[1])
            good.send(iopub, "stream", {"name": "stdout", "text": "a" * size}, parent=msg)
            good.send(iopub, "status", {"execution_state": "busy"})
            good.send(iopub, "status", {"execution_state": "idle"})
        if kind == "execute_request" and msg["content"]["code"].startswith("late "):
            # As Deno 2.9 does: output for the request after its reply and status idle, N lines GAP_MS apart; with STALL_MS,
            # the last line comes that long after the one before (a kernel starved of CPU in the middle of its output).
            args = [int(x) for x in msg["content"]["code"].split()[1:4]]
            count, gap_ms = args[0], args[1]
            for i in range(count):
                time.sleep((args[2] if len(args) > 2 and i == count - 1 else gap_ms) / 1000)
                good.send(iopub, "stream", {"name": "stdout", "text": "late %d\n" % i}, parent=msg)
