/* Carving consecutive arrays out of one allocation (internal to the model layer).
 *
 * A block's layout is ONE list of carve() calls, run twice: first on a carver with no base, which
 * only counts the elements the list needs (and notices a size_t overflow), then on the allocation
 * of that many elements, which hands out the arrays in the same order. The size and the carving
 * therefore cannot disagree. */
#ifndef UFP4_MODEL_CARVE_H
#define UFP4_MODEL_CARVE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  char *base;    /* NULL: counting pass */
  size_t elem;   /* bytes per element */
  size_t count;  /* elements carved so far */
  int overflow;  /* a count overflowed size_t (or its bytes did) */
} carver;

static inline carver carver_counting(size_t elem) { return (carver){NULL, elem, 0, 0}; }
static inline carver carver_on(void *base, size_t elem) { return (carver){base, elem, 0, 0}; }

/* The next a * b elements (NULL while counting). */
static inline void *carve(carver *cv, size_t a, size_t b) {
  void *p = cv->base ? cv->base + cv->count * cv->elem : NULL;
  if ((a && b > SIZE_MAX / a) || a * b > SIZE_MAX / cv->elem - cv->count) cv->overflow = 1;
  else cv->count += a * b;
  return p;
}

#endif
