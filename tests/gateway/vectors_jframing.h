/* tests/gateway/vectors_jframing.h: kernel WebSocket messages framed by jupyter_server 1.23.3 (gen_jframing_vectors.py). */
/* Do not edit: regenerate with `/usr/bin/python3 tests/gateway/gen_jframing_vectors.py > tests/gateway/vectors_jframing.h`. */
#ifndef KGATE_TESTS_VECTORS_JFRAMING_H
#define KGATE_TESTS_VECTORS_JFRAMING_H

/* Generated: the long literals stay as they are. */
// clang-format off

/* kernel_info_reply: the kernel's header frame */
#define JFV_KIR_HEADER \
    "{\"msg_id\":\"f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d\",\"msg_type\":\"kernel_info_reply\",\"userna" \
    "me\":\"kgate\",\"session\":\"5e6f7a8b-sess\",\"date\":\"2024-01-02T03:04:05.123456Z\",\"version\"" \
    ":\"5.3\"}"

/* kernel_info_reply: the kernel's parent frame */
#define JFV_KIR_PARENT \
    "{\"msg_id\":\"0a1b2c3d-0002-4e5f-8a9b-0c1d2e3f4a5b\",\"msg_type\":\"kernel_info_request\",\"user" \
    "name\":\"lab\",\"session\":\"9c8b7a6d-sess\",\"date\":\"2024-01-02T03:04:05.000000Z\",\"version\"" \
    ":\"5.3\"}"

/* kernel_info_reply: the kernel's metadata frame */
#define JFV_KIR_METADATA \
    "{}"

/* kernel_info_reply: the kernel's content frame */
#define JFV_KIR_CONTENT \
    "{\"status\":\"ok\",\"protocol_version\":\"5.3\",\"implementation\":\"kgate-bash\",\"implementati" \
    "on_version\":\"0.1.0\",\"language_info\":{\"name\":\"bash\",\"version\":\"5.2\",\"mimetype\":\"t" \
    "ext/x-sh\",\"file_extension\":\".sh\"},\"banner\":\"bash \xe2\x80\x93 kgate\",\"help_links\":[]}"

/* comm_msg: the kernel's header frame */
#define JFV_COMM_HEADER \
    "{\"msg_id\":\"c0ffee00-0003\",\"msg_type\":\"comm_msg\",\"username\":\"kgate\",\"session\":\"5e6" \
    "f7a8b-sess\",\"date\":\"2024-01-02T03:04:06.000000Z\",\"version\":\"5.3\"}"

/* comm_msg: the kernel's parent frame */
#define JFV_COMM_PARENT \
    "{}"

/* comm_msg: the kernel's metadata frame */
#define JFV_COMM_METADATA \
    "{}"

/* comm_msg: the kernel's content frame */
#define JFV_COMM_CONTENT \
    "{\"comm_id\":\"w1\",\"data\":{\"method\":\"update\",\"buffer_paths\":[[\"a\"],[\"b\"],[\"c\"]]}}"

/* comm_msg: buffer 0 */
#define JFV_COMM_BUFFER0 \
    "\x00\x01\x02\xff"

/* comm_msg: buffer 1 */
#define JFV_COMM_BUFFER1 \
    ""

/* comm_msg: buffer 2 */
#define JFV_COMM_BUFFER2 \
    "xyz"

/* serialize_msg_to_ws_v1(kernel_info_reply parts, "shell") */
#define JFV_PY_V1_KIR \
    "\x06\x00\x00\x00\x00\x00\x00\x00""8\x00\x00\x00\x00\x00\x00\x00=\x00\x00\x00\x00\x00\x00\x00\xef" \
    "\x00\x00\x00\x00\x00\x00\x00\xa1\x01\x00\x00\x00\x00\x00\x00\xa3\x01\x00\x00\x00\x00\x00\x00\x92" \
    "\x02\x00\x00\x00\x00\x00\x00shell{\"msg_id\":\"f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d\",\"msg_type" \
    "\":\"kernel_info_reply\",\"username\":\"kgate\",\"session\":\"5e6f7a8b-sess\",\"date\":\"2024-01" \
    "-02T03:04:05.123456Z\",\"version\":\"5.3\"}{\"msg_id\":\"0a1b2c3d-0002-4e5f-8a9b-0c1d2e3f4a5b\"," \
    "\"msg_type\":\"kernel_info_request\",\"username\":\"lab\",\"session\":\"9c8b7a6d-sess\",\"date\"" \
    ":\"2024-01-02T03:04:05.000000Z\",\"version\":\"5.3\"}{}{\"status\":\"ok\",\"protocol_version\":\"" \
    "5.3\",\"implementation\":\"kgate-bash\",\"implementation_version\":\"0.1.0\",\"language_info\":{" \
    "\"name\":\"bash\",\"version\":\"5.2\",\"mimetype\":\"text/x-sh\",\"file_extension\":\".sh\"},\"b" \
    "anner\":\"bash \xe2\x80\x93 kgate\",\"help_links\":[]}"

/* ZMQStreamHandler._reserialize_reply(kernel_info_reply, channel="shell"): the legacy text frame */
#define JFV_PY_LEGACY_KIR \
    "{\"header\": {\"msg_id\": \"f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d\", \"msg_type\": \"kernel_info_" \
    "reply\", \"username\": \"kgate\", \"session\": \"5e6f7a8b-sess\", \"date\": \"2024-01-02T03:04:0" \
    "5.123456Z\", \"version\": \"5.3\"}, \"msg_id\": \"f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d\", \"msg_" \
    "type\": \"kernel_info_reply\", \"parent_header\": {\"msg_id\": \"0a1b2c3d-0002-4e5f-8a9b-0c1d2e3" \
    "f4a5b\", \"msg_type\": \"kernel_info_request\", \"username\": \"lab\", \"session\": \"9c8b7a6d-s" \
    "ess\", \"date\": \"2024-01-02T03:04:05Z\", \"version\": \"5.3\"}, \"metadata\": {}, \"content\":" \
    " {\"status\": \"ok\", \"protocol_version\": \"5.3\", \"implementation\": \"kgate-bash\", \"imple" \
    "mentation_version\": \"0.1.0\", \"language_info\": {\"name\": \"bash\", \"version\": \"5.2\", \"" \
    "mimetype\": \"text/x-sh\", \"file_extension\": \".sh\"}, \"banner\": \"bash \\u2013 kgate\", \"h" \
    "elp_links\": []}, \"buffers\": [], \"channel\": \"shell\"}"

/* serialize_msg_to_ws_v1(comm_msg parts + buffers, "iopub") */
#define JFV_PY_V1_COMM \
    "\x09\x00\x00\x00\x00\x00\x00\x00P\x00\x00\x00\x00\x00\x00\x00U\x00\x00\x00\x00\x00\x00\x00\xe7\x00" \
    "\x00\x00\x00\x00\x00\x00\xe9\x00\x00\x00\x00\x00\x00\x00\xeb\x00\x00\x00\x00\x00\x00\x00""9\x01\x00" \
    "\x00\x00\x00\x00\x00=\x01\x00\x00\x00\x00\x00\x00=\x01\x00\x00\x00\x00\x00\x00@\x01\x00\x00\x00\x00" \
    "\x00\x00iopub{\"msg_id\":\"c0ffee00-0003\",\"msg_type\":\"comm_msg\",\"username\":\"kgate\",\"se" \
    "ssion\":\"5e6f7a8b-sess\",\"date\":\"2024-01-02T03:04:06.000000Z\",\"version\":\"5.3\"}{}{}{\"co" \
    "mm_id\":\"w1\",\"data\":{\"method\":\"update\",\"buffer_paths\":[[\"a\"],[\"b\"],[\"c\"]]}}\x00\x01" \
    "\x02\xffxyz"

/* ZMQStreamHandler._reserialize_reply(comm_msg + buffers, channel="iopub"): the legacy binary frame */
#define JFV_PY_LEGACY_COMM \
    "\x00\x00\x00\x04\x00\x00\x00\x14\x00\x00\x01\x85\x00\x00\x01\x89\x00\x00\x01\x89{\"header\": {\"" \
    "msg_id\": \"c0ffee00-0003\", \"msg_type\": \"comm_msg\", \"username\": \"kgate\", \"session\": \"" \
    "5e6f7a8b-sess\", \"date\": \"2024-01-02T03:04:06Z\", \"version\": \"5.3\"}, \"msg_id\": \"c0ffee" \
    "00-0003\", \"msg_type\": \"comm_msg\", \"parent_header\": {}, \"metadata\": {}, \"content\": {\"" \
    "comm_id\": \"w1\", \"data\": {\"method\": \"update\", \"buffer_paths\": [[\"a\"], [\"b\"], [\"c\"" \
    "]]}}, \"channel\": \"iopub\"}\x00\x01\x02\xffxyz"

/* serialize_msg_to_ws_v1(comm_msg parts + buffers, "shell"): a client's v1 message */
#define JFV_PY_V1_CLIENT_COMM \
    "\x09\x00\x00\x00\x00\x00\x00\x00P\x00\x00\x00\x00\x00\x00\x00U\x00\x00\x00\x00\x00\x00\x00\xe7\x00" \
    "\x00\x00\x00\x00\x00\x00\xe9\x00\x00\x00\x00\x00\x00\x00\xeb\x00\x00\x00\x00\x00\x00\x00""9\x01\x00" \
    "\x00\x00\x00\x00\x00=\x01\x00\x00\x00\x00\x00\x00=\x01\x00\x00\x00\x00\x00\x00@\x01\x00\x00\x00\x00" \
    "\x00\x00shell{\"msg_id\":\"c0ffee00-0003\",\"msg_type\":\"comm_msg\",\"username\":\"kgate\",\"se" \
    "ssion\":\"5e6f7a8b-sess\",\"date\":\"2024-01-02T03:04:06.000000Z\",\"version\":\"5.3\"}{}{}{\"co" \
    "mm_id\":\"w1\",\"data\":{\"method\":\"update\",\"buffer_paths\":[[\"a\"],[\"b\"],[\"c\"]]}}\x00\x01" \
    "\x02\xffxyz"

/* serialize_binary_message(a client's comm_msg + buffers on shell): a client's legacy binary message */
#define JFV_PY_LEGACY_CLIENT_COMM \
    "\x00\x00\x00\x04\x00\x00\x00\x14\x00\x00\x01Y\x00\x00\x01]\x00\x00\x01]{\"channel\": \"shell\", " \
    "\"content\": {\"comm_id\": \"w1\", \"data\": {\"method\": \"update\", \"buffer_paths\": [[\"a\"]" \
    ", [\"b\"], [\"c\"]]}}, \"header\": {\"msg_id\": \"c0ffee00-0003\", \"msg_type\": \"comm_msg\", \"" \
    "username\": \"kgate\", \"session\": \"5e6f7a8b-sess\", \"date\": \"2024-01-02T03:04:06.000000Z\"" \
    ", \"version\": \"5.3\"}, \"metadata\": {}, \"parent_header\": {}}\x00\x01\x02\xffxyz"

// clang-format on

#endif
