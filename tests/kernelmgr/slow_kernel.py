# tests/kernelmgr/slow_kernel.py: a kernel slow to start, for kernelmgr's start handshake (tests/kernelmgr/test_kernel_info.c).
# Usage: /usr/bin/python3 slow_kernel.py CONNECTION_FILE DELAY_MS MODE
# It binds its sockets at once, as ipykernel does, then reads nothing for DELAY_MS (ipykernel's imports and set-up: its
# sockets take kgate's connections and requests meanwhile), then answers kernel_info_request as a kernel does. It counts
# every kernel_info_request it reads in `kernel-info-count` beside the connection file. MODE:
#   answer      answers every one (status busy, kernel_info_reply, status idle)
#   drop-first  ignores the first one (no reply, no status), as if it had been lost
import json
import os
import sys
import time

import zmq
from jupyter_client.session import Session
from kernel_sockets import bind_all

cfg = json.load(open(sys.argv[1]))
delay_ms, mode = int(sys.argv[2]), sys.argv[3]
count_path = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "kernel-info-count")
shell, iopub, stdin, control, hb = bind_all(cfg)
session = Session(key=cfg["key"].encode(), signature_scheme="hmac-sha256")
time.sleep(delay_ms / 1000)
poller = zmq.Poller()
for s in (shell, control, hb):
    poller.register(s, zmq.POLLIN)
seen = 0
while True:
    for s, _ in poller.poll():
        if s is hb:
            hb.send_multipart(hb.recv_multipart())
            continue
        idents, parts = session.feed_identities(s.recv_multipart())
        msg = session.deserialize(parts)
        kind = msg["header"]["msg_type"]
        if s is control:
            if kind == "shutdown_request":
                session.send(control, "shutdown_reply", {"status": "ok", "restart": False}, parent=msg, ident=idents)
                sys.exit(0)
            continue
        if kind != "kernel_info_request":
            continue
        seen += 1
        with open(count_path + ".tmp", "w") as f:
            f.write(str(seen))
        os.replace(count_path + ".tmp", count_path)
        if mode == "drop-first" and seen == 1:
            continue
        session.send(iopub, "status", {"execution_state": "busy"}, parent=msg)
        session.send(shell, "kernel_info_reply",
                     {"status": "ok", "protocol_version": "5.3", "implementation": "slow",
                      "language_info": {"name": "slow"}}, parent=msg, ident=idents)
        session.send(iopub, "status", {"execution_state": "idle"}, parent=msg)
