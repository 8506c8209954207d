/* core/errors.h: error codes of the gateway's engine (negative integers, one table), and gw_strerror. */
#ifndef GW_ERRORS_H
#define GW_ERRORS_H

/*
 * XX(name, message): every error a gateway engine function returns besides -errno (file system
 * calls) and KSYS_E* codes (kernels and processes, ksys/errors.h). The codes count up from -299 (above GW__ERR_FIRST, -300), below
 * every errno and below wire's and sys's ranges (-100, -200), so that one int can carry any of them without ambiguity. Front doors
 * map these codes to their protocol's errors (execd: docs/API.md section 0).
 */
#define GW_ERRNO_MAP(XX)                                                                                                           \
    XX(SHUTTINGDOWN, "kgate is shutting down")                                                                                     \
    XX(TOOMANYCONTEXTS, "the maximum number of contexts is alive")                                                                 \
    XX(TOOMANYCOMMANDS, "every command record is taken by a running command")                                                      \
    XX(QUEUEFULL, "the context's run queue is full")                                                                               \
    XX(KERNELDEAD, "the context's kernel is dead")                                                                                 \
    XX(EVENTSGONE, "the events after that id are no longer retained")                                                              \
    XX(NOINPUT, "no input is awaited")                                                                                             \
    XX(SPAWN, "cannot start the process")                                                                                          \
    XX(NOTFOUND, "no such object")                                                                                                 \
    XX(WSCLOSED, "the WebSocket is closing")                                                                                       \
    XX(WSFULL, "the WebSocket's peer is not reading: its send queue is full")                                                      \
    XX(WORKSPACE_EMPTY, "the path is empty")                                                                                       \
    XX(WORKSPACE_NUL, "the path contains a NUL byte")                                                                              \
    XX(WORKSPACE_TOOLONG, "the path is too long")                                                                                  \
    XX(WORKSPACE_OUTSIDE, "the path is outside the workspace root")                                                                \
    XX(WORKSPACE_HARDLINK, "the file has more than one hard link (one may be outside the workspace root)")                         \
    XX(WORKSPACE_SPECIAL, "not a regular file nor a directory (a FIFO, a socket or a device)")                                     \
    XX(MULTIPART_NOBOUNDARY, "the Content-Type is not multipart/form-data with a boundary")                                        \
    XX(MULTIPART_MALFORMED, "the multipart body is malformed")                                                                     \
    XX(MULTIPART_TOOMANYPARTS, "the multipart body has too many parts")                                                            \
    XX(EDITOR_NOMATCH, "Error: No match found for replacement. Please check your text and try again.")                             \
    XX(EDITOR_MULTIPLEMATCHES,                                                                                                     \
       "Error: Found several matches for replacement text. Please provide more context to make a unique match.")                   \
    XX(EDITOR_EMPTYOLDSTR, "Error: old_str must not be empty.")                                                                    \
    XX(EDITOR_INVALIDRANGE, "Error: Invalid view_range.")                                                                          \
    XX(EDITOR_INVALIDLINE, "Error: Invalid insert_line.")                                                                          \
    XX(EDITOR_NOHISTORY, "Error: No edit history found for this file.")                                                            \
    XX(EDITOR_TOOLARGE, "Error: The file would exceed the editor's size limit.")                                                   \
    XX(TOOMANYPTYS, "the maximum number of PTY sessions is alive")                                                                 \
    XX(PTYBUSY, "another client is attached to the PTY session")                                                                   \
    XX(NOTRUNNING, "the session's shell is not running")                                                                           \
    XX(STDINFULL, "the shell's stdin queue is full")                                                                               \
    XX(NOTTY, "the session has no terminal (pipe mode)")                                                                           \
    XX(JMSG_NOTBINARY, "a v1.kernel.websocket.jupyter.org message must be a binary frame")                                         \
    XX(JMSG_TRUNCATED, "the message is shorter than its offsets table")                                                            \
    XX(JMSG_PARTCOUNT, "the message's offsets table has too few entries for its parts")                                            \
    XX(JMSG_TOOMANYBUFFERS, "the message has more than 1024 buffers")                                                              \
    XX(JMSG_OFFSETS, "the message's offsets are out of order or out of range")                                                     \
    XX(JMSG_NOTJSON, "the message or one of its parts is not a JSON object")                                                       \
    XX(JMSG_TEXTBUFFERS, "a text frame cannot carry buffers: send them in a binary frame")                                         \
    XX(JMSG_HEADER, "the message header lacks a usable msg_id or msg_type string")                                                 \
    XX(JMSG_CHANNEL, "a client may send on the shell, control and stdin channels only")                                            \
    XX(JMSG_TOOBIG, "the message is too large for the legacy binary framing (4 GiB)")                                              \
    XX(TOOLSINVALID, "the tools declared are invalid")                                                                             \
    XX(TOOLSUNSUPPORTED, "tools are supported in Python (ipykernel) contexts only")                                                \
    XX(TOOLCALLNOTFOUND, "the run has no tool call with that id")                                                                  \
    XX(TOOLCALLANSWERED, "the tool call has been answered already")                                                                \
    XX(TOOLCALLCLOSED, "the tool call is no longer awaited (its run was interrupted, timed out or ended)")                         \
    XX(ISOBUSY, "the isolated session is running another command (one at a time)")                                                 \
    XX(TOOMANYISOLATED, "the maximum number of isolated sessions exists")

typedef enum {
    GW_OK = 0,
#define GW_XX_ENUM(name, msg) GW_E##name,
    GW__ERR_FIRST = -300,
    GW_ERRNO_MAP(GW_XX_ENUM)
#undef GW_XX_ENUM
} gw_err_t;

/**
 * A static description of `err`: a gateway code, a kernelmgr (or wire) code, or -errno.
 */
const char *gw_strerror(int err);

#endif
