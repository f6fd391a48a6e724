/* GPT-2's reversible byte <-> unicode mapping (bytes_to_unicode in openai/gpt-2 encoder.py):
 * the 188 printable bytes '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF stand for themselves, the other
 * 68 bytes, in increasing order, become U+0100, U+0101, ... so every token is a printable string
 * without spaces. GPT-2's ids 0..255 are the bytes in that same order (printable ones first). */
#ifndef UFP4_DATA_BYTE_UNICODE_H
#define UFP4_DATA_BYTE_UNICODE_H

#include <stdint.h>

/* cp[b] = the code point standing for byte b. */
void ufp4_byte_to_unicode(uint32_t cp[256]);
/* The byte a code point stands for, or -1. */
int ufp4_unicode_to_byte(uint32_t cp);
/* order[k] = the byte whose base token id is k. */
void ufp4_byte_order(uint8_t order[256]);

#endif
