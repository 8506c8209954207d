/* support/jframe.h: Jupyter's v1 kernel WebSocket framing (v1.kernel.websocket.jupyter.org), as a client writes it, for the
 * tests and the bench that speak it to kgate. */
#ifndef KGATE_SUPPORT_JFRAME_H
#define KGATE_SUPPORT_JFRAME_H

#include <stddef.h>
#include <stdint.h>

/**
 * One message in the v1 framing: a table of little-endian 64-bit offsets (their count, `nparts` + 1; where the first part
 * starts, right after the table; where each part ends), then the parts: `parts[0]` the channel, then header, parent_header,
 * metadata, content and any buffers, NUL-terminated strings. malloc'ed (free it), `*len` bytes.
 */
uint8_t *ts_jframe_v1(const char *const *parts, size_t nparts, size_t *len);

/** The little-endian 64-bit integer at `p`: an entry of a v1 frame's offset table. */
uint64_t ts_jframe_le64(const uint8_t *p);

#endif
