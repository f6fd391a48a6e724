/* Amortized growth of the data pipeline's dynamic arrays. */
#ifndef UFP4_DATA_GROW_H
#define UFP4_DATA_GROW_H

#include <stddef.h>

/* Makes *p hold at least `need` elements of `elem` bytes, doubling *cap (from 16) so that n
 * appends cost O(n). Returns 0, or -1 with *p and *cap untouched when realloc fails. */
int ufp4_grow(void **p, size_t *cap, size_t need, size_t elem);

#endif
