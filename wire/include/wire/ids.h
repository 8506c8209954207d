/* wire/ids.h: message/session identifiers and ISO-8601 dates. */
#ifndef WIRE_IDS_H
#define WIRE_IDS_H

#include <stddef.h>
#include <time.h>

#define WIRE_UUID_STRLEN 36
#define WIRE_DATE_STRLEN 27 /* 2026-11-22T04:39:40.123456Z */

/** Writes a random (version 4) UUID in canonical lower-case form, NUL-terminated. */
void wire_uuid4(char out[WIRE_UUID_STRLEN + 1]);
/** Writes `key_bytes` random bytes as lower-case hex (2*key_bytes chars + NUL) into `out`. */
void wire_random_hex(char *out, size_t key_bytes);
/** Formats `ts` (UTC) as ISO-8601 with microseconds and a Z suffix. */
void wire_iso8601_format(const struct timespec *ts, char out[WIRE_DATE_STRLEN + 1]);
/** Formats the current time (CLOCK_REALTIME) like wire_iso8601_format. */
void wire_iso8601_now(char out[WIRE_DATE_STRLEN + 1]);

#endif
