#!/usr/bin/python3
"""Regenerates tests/gateway/vectors_jframing.h: kernel WebSocket messages as Jupyter Server frames them.

A regeneration tool, not run by the tests (the header it writes is committed). It needs Debian's
python3-jupyter-server (1.23), so run it with /usr/bin/python3 from the repository root:

    /usr/bin/python3 tests/gateway/gen_jframing_vectors.py > tests/gateway/vectors_jframing.h

It calls Jupyter Server's own functions: serialize_msg_to_ws_v1 (what it sends to a v1 client),
ZMQStreamHandler._reserialize_reply (what it sends to a legacy client: JSON text, or the legacy
binary format through serialize_binary_message when there are buffers), and checks that its
deserializers read back what test_jframing.c's client-side vectors hold. Every input is fixed, so
the output is deterministic for a given jupyter_server version, recorded in the header.
"""

import json

import jupyter_server
from jupyter_client.session import Session
from jupyter_server.base.zmqhandlers import (
    ZMQStreamHandler,
    deserialize_binary_message,
    deserialize_msg_from_ws_v1,
    serialize_binary_message,
    serialize_msg_to_ws_v1,
)

# The parts of a kernel_info_reply as a kernel sends them (compact JSON, a non-ASCII character).
KIR = [
    b'{"msg_id":"f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d","msg_type":"kernel_info_reply","username":"kgate",'
    b'"session":"5e6f7a8b-sess","date":"2024-01-02T03:04:05.123456Z","version":"5.3"}',
    b'{"msg_id":"0a1b2c3d-0002-4e5f-8a9b-0c1d2e3f4a5b","msg_type":"kernel_info_request","username":"lab",'
    b'"session":"9c8b7a6d-sess","date":"2024-01-02T03:04:05.000000Z","version":"5.3"}',
    b"{}",
    '{"status":"ok","protocol_version":"5.3","implementation":"kgate-bash","implementation_version":"0.1.0",'
    '"language_info":{"name":"bash","version":"5.2","mimetype":"text/x-sh","file_extension":".sh"},'
    '"banner":"bash \u2013 kgate","help_links":[]}'.encode("utf-8"),
]

# An iopub comm_msg with three buffers, one of them empty.
COMM = [
    b'{"msg_id":"c0ffee00-0003","msg_type":"comm_msg","username":"kgate","session":"5e6f7a8b-sess",'
    b'"date":"2024-01-02T03:04:06.000000Z","version":"5.3"}',
    b"{}",
    b"{}",
    b'{"comm_id":"w1","data":{"method":"update","buffer_paths":[["a"],["b"],["c"]]}}',
]
COMM_BUFFERS = [b"\x00\x01\x02\xff", b"", b"xyz"]


class FakeHandler:
    """What ZMQStreamHandler._reserialize_reply needs of its handler: an unsigned session."""

    session = Session(key=b"")


def legacy(parts, buffers, channel):
    return ZMQStreamHandler._reserialize_reply(FakeHandler(), [b"<IDS|MSG>", b""] + parts + buffers, channel=channel)


def c_bytes(data):
    """A C string literal for `data`, split into lines; printable ASCII stays readable."""
    out, line, after_hex = [], "", False
    for b in data:
        c = chr(b)
        if c == '"' or c == "\\":
            piece = "\\" + c
        elif 0x20 <= b < 0x7F:
            # a hex escape would swallow the hex digits after it: end the literal there
            piece = ('""' + c) if after_hex and c in "0123456789abcdefABCDEF" else c
        else:
            piece = "\\x%02x" % b
        after_hex = piece.startswith("\\x")
        line += piece
        if len(line) >= 96:
            out.append('"%s"' % line)
            line, after_hex = "", False
    if line or not out:
        out.append('"%s"' % line)
    return "\n    ".join(out)


def emit(name, data, comment):
    print("/* %s */" % comment)
    print("#define %s \\\n    %s" % (name, c_bytes(data).replace("\n", " \\\n")))
    print()


def main():
    v1_kir = serialize_msg_to_ws_v1(KIR, "shell")
    legacy_kir = legacy(KIR, [], "shell")
    v1_comm = serialize_msg_to_ws_v1(COMM + COMM_BUFFERS, "iopub")
    legacy_comm = legacy(COMM, COMM_BUFFERS, "iopub")
    # The same comm_msg from a client on shell, framed as JupyterLab's serialize.ts frames it: the same functions'
    # layouts (v1), and JSON.stringify of its message object {buffers, channel, content, header, metadata,
    # parent_header} without "buffers" (legacy binary).
    v1_client = serialize_msg_to_ws_v1(COMM + COMM_BUFFERS, "shell")
    client_msg = {"buffers": COMM_BUFFERS, "channel": "shell", "content": json.loads(COMM[3]), "header": json.loads(COMM[0]),
                  "metadata": {}, "parent_header": {}}
    legacy_client = serialize_binary_message(client_msg)
    assert isinstance(legacy_kir, str) and isinstance(legacy_comm, bytes)

    # Jupyter Server's own deserializers read its output back (the same functions read what clients send).
    assert deserialize_msg_from_ws_v1(v1_kir) == ("shell", KIR)
    assert deserialize_msg_from_ws_v1(v1_comm) == ("iopub", COMM + COMM_BUFFERS)
    assert deserialize_msg_from_ws_v1(v1_client) == ("shell", COMM + COMM_BUFFERS)
    back = deserialize_binary_message(legacy_client)
    assert [bytes(b) for b in back["buffers"]] == COMM_BUFFERS and back["header"]["msg_id"] == "c0ffee00-0003"
    back = deserialize_binary_message(legacy_comm)
    assert [bytes(b) for b in back["buffers"]] == COMM_BUFFERS and back["channel"] == "iopub"
    kir = json.loads(legacy_kir)
    assert kir["content"] == json.loads(KIR[3]) and kir["msg_id"] == json.loads(KIR[0])["msg_id"]

    print("/* tests/gateway/vectors_jframing.h: kernel WebSocket messages framed by jupyter_server %s (gen_jframing_vectors.py). */"
          % jupyter_server.__version__)
    print("/* Do not edit: regenerate with `/usr/bin/python3 tests/gateway/gen_jframing_vectors.py > tests/gateway/vectors_jframing.h`. */")
    print("#ifndef KGATE_TESTS_VECTORS_JFRAMING_H")
    print("#define KGATE_TESTS_VECTORS_JFRAMING_H")
    print()
    print("/* Generated: the long literals stay as they are. */")
    print("// clang-format off")
    print()
    for i, name in enumerate(["HEADER", "PARENT", "METADATA", "CONTENT"]):
        emit("JFV_KIR_" + name, KIR[i], "kernel_info_reply: the kernel's %s frame" % name.lower())
    for i, name in enumerate(["HEADER", "PARENT", "METADATA", "CONTENT"]):
        emit("JFV_COMM_" + name, COMM[i], "comm_msg: the kernel's %s frame" % name.lower())
    for i, b in enumerate(COMM_BUFFERS):
        emit("JFV_COMM_BUFFER%d" % i, b, "comm_msg: buffer %d" % i)
    emit("JFV_PY_V1_KIR", v1_kir, "serialize_msg_to_ws_v1(kernel_info_reply parts, \"shell\")")
    emit("JFV_PY_LEGACY_KIR", legacy_kir.encode("utf-8"),
         "ZMQStreamHandler._reserialize_reply(kernel_info_reply, channel=\"shell\"): the legacy text frame")
    emit("JFV_PY_V1_COMM", v1_comm, "serialize_msg_to_ws_v1(comm_msg parts + buffers, \"iopub\")")
    emit("JFV_PY_LEGACY_COMM", legacy_comm,
         "ZMQStreamHandler._reserialize_reply(comm_msg + buffers, channel=\"iopub\"): the legacy binary frame")
    emit("JFV_PY_V1_CLIENT_COMM", v1_client, "serialize_msg_to_ws_v1(comm_msg parts + buffers, \"shell\"): a client's v1 message")
    emit("JFV_PY_LEGACY_CLIENT_COMM", legacy_client,
         "serialize_binary_message(a client's comm_msg + buffers on shell): a client's legacy binary message")
    print("// clang-format on")
    print()
    print("#endif")


if __name__ == "__main__":
    main()
