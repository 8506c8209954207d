/* wire/src/ids.c: random identifiers (UUIDv4, hex keys) and ISO-8601 dates. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sodium.h>
#include "wire/ids.h"

void wire_uuid4(char out[WIRE_UUID_STRLEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    char *p = out;

    randombytes_buf(b, sizeof(b));
    /* RFC 4122 section 4.4: version 4 in the high nibble of byte 6, variant 10xx in byte 8. */
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    for (size_t i = 0; i != sizeof(b); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex[b[i] >> 4];
        *p++ = hex[b[i] & 0xf];
    }
    *p = '\0';
}

void wire_random_hex(char *out, size_t key_bytes)
{
    unsigned char chunk[32];

    out[0] = '\0';
    while (key_bytes != 0) {
        size_t n = key_bytes < sizeof(chunk) ? key_bytes : sizeof(chunk);
        randombytes_buf(chunk, n);
        sodium_bin2hex(out, 2 * n + 1, chunk, n);
        out += 2 * n;
        key_bytes -= n;
    }
    sodium_memzero(chunk, sizeof(chunk));
}

void wire_iso8601_format(const struct timespec *ts, char out[WIRE_DATE_STRLEN + 1])
{
    struct tm tm;
    char tmp[64];

    if (gmtime_r(&ts->tv_sec, &tm) == NULL)
        memset(&tm, 0, sizeof(tm));
    /* Years past 9999 would not fit; they are clamped rather than overflowing `out`. */
    int year = tm.tm_year + 1900;
    if (year < 0)
        year = 0;
    else if (year > 9999)
        year = 9999;
    long usec = ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000 ? ts->tv_nsec / 1000 : 0;
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
             tm.tm_sec, usec);
    memcpy(out, tmp, WIRE_DATE_STRLEN);
    out[WIRE_DATE_STRLEN] = '\0';
}

void wire_iso8601_now(char out[WIRE_DATE_STRLEN + 1])
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    wire_iso8601_format(&ts, out);
}
