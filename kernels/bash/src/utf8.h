/* kernels/bash/src/utf8.h: code point counts and offsets in UTF-8 (stream sanitising is wire_utf8_sanitize). */
#ifndef BK_UTF8_H
#define BK_UTF8_H

#include <stddef.h>

/** The number of code points in the first `nbytes` bytes of valid UTF-8 `s`. */
size_t bk_utf8_count(const char *s, size_t nbytes);

/** The byte offset of code point `cp` in valid UTF-8 `s` of `len` bytes (clamped to `len`). */
size_t bk_utf8_offset(const char *s, size_t len, size_t cp);

#endif
