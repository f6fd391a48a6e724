/* Unicode classes for the GPT-2 pre-tokenizer: sorted, disjoint, inclusive code point ranges of
 * \p{L} (letters), \p{N} (numbers) and JS \s (whitespace), generated from node's regex engine by
 * scripts/gen_unicode_tables.js. */
#ifndef UFP4_DATA_UNICODE_TABLES_H
#define UFP4_DATA_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

extern const uint32_t ufp4_uc_letter_ranges[][2];
extern const size_t ufp4_uc_letter_count;
extern const uint32_t ufp4_uc_number_ranges[][2];
extern const size_t ufp4_uc_number_count;
extern const uint32_t ufp4_uc_space_ranges[][2];
extern const size_t ufp4_uc_space_count;
extern const char ufp4_uc_version[];

#endif
