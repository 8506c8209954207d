#!/usr/bin/python3
"""tests/e2e/jupyter_clients/gateway_mode.py: a client of Jupyter Server running in gateway mode.

The front server (`jupyter server --gateway-url=<backend>`) keeps no kernel of its own: every kernel it
reports lives in the backend (kgate, or a plain Jupyter Server standing in for it). Through the front
server's REST API and kernel WebSocket this script starts a kernel, executes, interrupts, restarts and
shuts it down, and checks in the backend's own GET /api/kernels that the kernel really lived there.

Usage: /usr/bin/python3 gateway_mode.py --url http://127.0.0.1:FRONT/ --token T
                                        --backend-url http://127.0.0.1:BACK/ --backend-token T2 [--timeout S]
Debian's /usr/bin/python3 (python3-websocket, the WebSocket client Jupyter Server itself depends on).
Prints one JSON line per step on stdout, {"step": ..., "ok": true|false, "detail": ...}, then
{"step": "done", ...}; exits 0 when every step passed, 1 when one failed, 2 on a usage error or the
global timeout.
"""

import argparse
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import websocket  # python3-websocket (websocket-client)

STEP_MS = 60  # seconds one wait for a kernel message may take (a kernel start on a loaded 2-core machine)


class StepError(Exception):
    pass


def check(cond, what):
    if not cond:
        raise StepError(what)


def emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


class Server:
    """One Jupyter Server API (the front, or the backend): REST calls with its token."""

    def __init__(self, url, token):
        self.url = url if url.endswith("/") else url + "/"
        self.token = token

    def request(self, method, path, body=None, expect=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path.lstrip("/"), data=data, method=method)
        req.add_header("Authorization", "token " + self.token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=STEP_MS) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        parsed = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
        if expect is not None:
            check(status == expect, "%s %s: HTTP %d, want %d: %.300s" % (method, path, status, expect, raw))
        return status, parsed

    def kernel_ids(self):
        _, kernels = self.request("GET", "api/kernels", expect=200)
        return [k["id"] for k in kernels]

    def ws_url(self, kernel_id, session_id):
        base = "ws" + self.url[len("http"):]
        query = urllib.parse.urlencode({"session_id": session_id, "token": self.token})
        return "%sapi/kernels/%s/channels?%s" % (base, kernel_id, query)


class Channels:
    """The kernel WebSocket in the legacy JSON framing (a text frame per message, with a `channel` key)."""

    def __init__(self, server, kernel_id):
        self.session = str(uuid.uuid4())
        self.ws = websocket.create_connection(server.ws_url(kernel_id, self.session), timeout=STEP_MS)
        self.pending = []  # messages read while waiting for others

    def close(self):
        self.ws.close()

    def send(self, channel, msg_type, content):
        msg_id = str(uuid.uuid4())
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "username": "gateway_mode.py",
            "session": self.session,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
            "version": "5.3",
        }
        msg = {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": channel, "buffers": []}
        self.ws.send(json.dumps(msg))
        return msg_id

    def recv(self, deadline):
        if self.pending:
            return self.pending.pop(0)
        while True:
            left = deadline - time.monotonic()
            check(left > 0, "no kernel message in time")
            # Short waits: the server's pings (every 30 s) restart a long socket timeout inside recv(), so the
            # deadline is kept here.
            self.ws.settimeout(min(left, 1.0))
            try:
                frame = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            if isinstance(frame, bytes):
                # Legacy framing with buffers: a binary frame, JSON after an offsets table. Never for these messages.
                continue
            if os.environ.get("KGATE_JCLIENTS_TRACE", "0") != "0":
                sys.stderr.write("[trace] WS recv %.300s\n" % frame)
            return json.loads(frame)

    def collect(self, msg_id, seconds=STEP_MS):
        """Every message whose parent is msg_id until both its shell reply and its iopub idle arrived."""
        deadline = time.monotonic() + seconds
        reply, iopub, idle = None, [], False
        while reply is None or not idle:
            m = self.recv(deadline)
            if m.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if m["channel"] == "iopub":
                iopub.append(m)
                if m["header"]["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                    idle = True
            elif m["channel"] in ("shell", "control"):
                reply = m
        return reply, iopub

    def execute(self, code, seconds=STEP_MS):
        msg_id = self.send(
            "shell",
            "execute_request",
            {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": False, "stop_on_error": False},
        )
        return self.collect(msg_id, seconds)

    def kernel_info(self, seconds=STEP_MS):
        """kernel_info_request until one is answered, as jupyter_client's wait_for_ready does: a request sent while
        the server is still connecting to the kernel (here, a gateway to its backend) may be lost."""
        deadline = time.monotonic() + seconds
        self.attempts = 0
        while True:
            self.attempts += 1
            try:
                reply, _ = self.collect(self.send("shell", "kernel_info_request", {}), min(3.0, deadline - time.monotonic()))
                break
            except StepError:
                check(time.monotonic() < deadline, "no kernel_info_reply in %d s (%d requests)" % (seconds, self.attempts))
        check(reply["header"]["msg_type"] == "kernel_info_reply", "reply %s" % reply["header"]["msg_type"])
        return reply["content"]


def results(iopub):
    return [m["content"]["data"].get("text/plain") for m in iopub if m["header"]["msg_type"] == "execute_result"]


def expect_value(ch, code, want):
    reply, iopub = ch.execute(code)
    check(reply["content"]["status"] == "ok", "`%s`: %s %s" % (code, reply["content"]["status"], reply["content"].get("ename")))
    check(results(iopub) == [want], "`%s`: execute_result %s, want %r" % (code, results(iopub), want))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--backend-url", required=True)
    ap.add_argument("--backend-token", required=True)
    ap.add_argument("--kernel", default="python3")
    ap.add_argument("--timeout", type=int, default=300, help="global timeout, seconds")
    args = ap.parse_args()

    def on_alarm(signum, frame):
        emit(step="timeout", ok=False, detail="global timeout of %d s" % args.timeout)
        os._exit(2)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.timeout)

    front = Server(args.url, args.token)
    back = Server(args.backend_url, args.backend_token)
    st = {"id": None, "ch": None}

    def step_api():
        _, body = front.request("GET", "api", expect=200)
        _, specs = front.request("GET", "api/kernelspecs", expect=200)
        check(args.kernel in specs.get("kernelspecs", {}), "no %s kernelspec through the gateway: %s" % (args.kernel, specs))
        return "front version %s; kernelspecs %s" % (body.get("version"), sorted(specs["kernelspecs"]))

    def step_start():
        before = set(back.kernel_ids())
        _, model = front.request("POST", "api/kernels", {"name": args.kernel}, expect=201)
        st["id"] = model["id"]
        check(model.get("name") == args.kernel, "model %s" % model)
        listed = back.kernel_ids()
        check(st["id"] in listed, "kernel %s is not in the backend's GET /api/kernels %s" % (st["id"], listed))
        check(st["id"] not in before, "the backend listed the kernel before it was started")
        front_ids = front.kernel_ids()
        check(st["id"] in front_ids, "kernel %s is not in the front's GET /api/kernels %s" % (st["id"], front_ids))
        return "kernel %s lives in the backend" % st["id"]

    def step_connect():
        st["ch"] = Channels(front, st["id"])
        info = st["ch"].kernel_info()
        check(info["language_info"]["name"] == "python", "language_info %s" % info["language_info"])
        return "%s %s, %d kernel_info_request(s)" % (info.get("implementation"), info["language_info"].get("version"), st["ch"].attempts)

    def step_execute():
        reply, iopub = st["ch"].execute("1+1")
        check(reply["content"]["status"] == "ok", "reply %s" % reply["content"])
        check(results(iopub) == ["2"], "execute_result %s" % results(iopub))
        reply, iopub = st["ch"].execute("print('hello')")
        text = "".join(m["content"]["text"] for m in iopub if m["header"]["msg_type"] == "stream")
        check(text == "hello\n", "stdout %r" % text)
        return "1+1 = 2, stdout hello"

    def step_interrupt():
        ch = st["ch"]
        # stop_on_error false, as in every execute here and in lab_client.mjs: with it true, ipykernel answers `aborted` to
        # a request that reaches it before its loop's next turn after the KeyboardInterrupt's reply (_abort_queues), and a
        # fresh machine's run once sent the `2+3` below that soon.
        msg_id = ch.send(
            "shell",
            "execute_request",
            {
                "code": "import time\ntime.sleep(30)",
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": False,
            },
        )
        t0 = time.monotonic()
        deadline = t0 + STEP_MS
        seen = []
        while True:  # until the kernel runs it: its execute_input
            m = ch.recv(deadline)
            if m.get("parent_header", {}).get("msg_id") == msg_id:
                seen.append(m)
                if m["header"]["msg_type"] == "execute_input":
                    break
        time.sleep(0.3)
        front.request("POST", "api/kernels/%s/interrupt" % st["id"], expect=204)
        ch.pending = seen  # collect() looks at them again (the busy status)
        reply, _ = ch.collect(msg_id)
        took = time.monotonic() - t0
        check(reply["content"]["status"] == "error" and reply["content"].get("ename") == "KeyboardInterrupt", "reply %s" % reply["content"])
        check(took < 20, "the sleep ended after %.1f s" % took)
        expect_value(ch, "2+3", "5")
        return "KeyboardInterrupt after %.2f s, kernel usable" % took

    def step_restart():
        expect_value(st["ch"], "z = 1\nz", "1")
        _, model = front.request("POST", "api/kernels/%s/restart" % st["id"], expect=200)
        check(model["id"] == st["id"], "restart changed the id: %s" % model)
        # As JupyterLab does after a restart: a new WebSocket.
        st["ch"].close()
        st["ch"] = Channels(front, st["id"])
        st["ch"].kernel_info()
        reply, _ = st["ch"].execute("z")
        check(reply["content"]["status"] == "error" and reply["content"].get("ename") == "NameError", "after restart `z`: %s" % reply["content"])
        expect_value(st["ch"], "1+1", "2")
        check(st["id"] in back.kernel_ids(), "the backend lost the kernel on restart")
        return "state gone (NameError), same id in the backend"

    def step_shutdown():
        st["ch"].close()
        front.request("DELETE", "api/kernels/%s" % st["id"], expect=204)
        check(st["id"] not in front.kernel_ids(), "the front still lists the kernel")
        deadline = time.monotonic() + 10
        while st["id"] in back.kernel_ids():
            check(time.monotonic() < deadline, "the backend still lists the kernel 10 s after DELETE")
            time.sleep(0.1)
        status, _ = back.request("GET", "api/kernels/%s" % st["id"])
        check(status == 404, "backend GET /api/kernels/{id} after DELETE: HTTP %d" % status)
        kid, st["id"] = st["id"], None
        return "kernel %s gone from both" % kid

    failed = 0
    for name, fn in [
        ("api", step_api),
        ("start", step_start),
        ("connect", step_connect),
        ("execute", step_execute),
        ("interrupt", step_interrupt),
        ("restart", step_restart),
        ("shutdown", step_shutdown),
    ]:
        t0 = time.monotonic()
        try:
            detail = fn()
            emit(step=name, ok=True, ms=int((time.monotonic() - t0) * 1000), detail=detail)
        except Exception as e:  # noqa: BLE001 - a step's failure of any kind is reported, not raised
            failed += 1
            detail = str(e) if isinstance(e, StepError) else "%s: %s" % (type(e).__name__, e)
            emit(step=name, ok=False, ms=int((time.monotonic() - t0) * 1000), detail=detail)
            if name in ("start", "connect"):
                break  # later steps need a kernel and its channels

    # Leave nothing running, whatever failed.
    if st["id"] is not None:
        try:
            front.request("DELETE", "api/kernels/%s" % st["id"])
        except Exception:  # noqa: BLE001
            pass
    emit(step="done", ok=failed == 0, detail="%d failed" % failed)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
