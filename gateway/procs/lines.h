/* gateway/lines.h: splitting process output into lines, for line-by-line command events (pure). */
#ifndef GW_LINES_H
#define GW_LINES_H

#include <stddef.h>

/** Receives one line (`len` bytes, without its terminator; may be empty). */
typedef void (*gw_line_cb)(void *data, const char *line, size_t len);

/**
 * Splits `len` bytes of `buf` into lines ended by "\n", "\r" or "\r\n" (execd's convention: a
 * carriage return ends a line too, and "\r\n" is one terminator). Calls `on_line` for each complete
 * line, blank ones included, and returns the number of bytes consumed; the rest is an incomplete
 * last line, to be passed again, at the start of `buf`, once more bytes have arrived.
 *
 * `*after_cr` (0 at first) carries a "\r" that ended the previous call's input over to the next
 * call, so that a "\n" arriving separately is not taken for a second, empty line. With `final`
 * (the output has ended) the remainder is reported as a line as well. A remainder longer than
 * `max_line` bytes (at least 4) is reported in pieces of at most `max_line` bytes, cut on a UTF-8
 * character boundary, so that no line makes the caller hold more than `max_line` bytes. Pure: no
 * state besides `*after_cr`.
 */
size_t gw_lines_split(const char *buf, size_t len, int final, size_t max_line, int *after_cr, gw_line_cb on_line, void *data);

#endif
