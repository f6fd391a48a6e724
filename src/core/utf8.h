/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
#ifndef UFP4_DATA_UTF8_H
#define UFP4_DATA_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the code point at s[0..n); returns its length 1..4, or 0 when the bytes there are not a
 * valid, complete sequence. */
int ufp4_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Returns 1 when all of s is valid; otherwise 0 and *bad (when bad is not NULL) = offset of the
 * first invalid byte. */
int ufp4_utf8_valid(const void *s, size_t n, size_t *bad);
/* As ufp4_utf8_valid, with a NUL byte invalid too: for text that must survive as a C string (cJSON,
 * which takes any bytes inside a string, would stop at the NUL). */
int ufp4_utf8_valid_no_nul(const void *s, size_t n, size_t *bad);
/* Writes cp (<= U+10FFFF, not a surrogate) as UTF-8; returns the length, 0 if cp is invalid. */
int ufp4_utf8_encode(uint32_t cp, uint8_t out[4]);

#endif
