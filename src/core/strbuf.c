/* The growing text buffer (see core/strbuf.h). */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"

void ufp4_strbuf_puts(ufp4_strbuf *b, const char *s) {
  const size_t len = strlen(s);
  if (b->oom) return;
  if (b->n + len + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->n + len + 1) nc *= 2;
    char *ns = realloc(b->s, nc);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
  memcpy(b->s + b->n, s, len + 1);
  b->n += len;
}

void ufp4_strbuf_printf(ufp4_strbuf *b, const char *fmt, ...) {
  char small[1024]; /* most pieces fit: no second pass, no allocation */
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (len < 0) return;
  if ((size_t)len < sizeof small) {
    ufp4_strbuf_puts(b, small);
    return;
  }
  char *big = malloc((size_t)len + 1);
  if (!big) {
    b->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)len + 1, fmt, ap);
  va_end(ap);
  ufp4_strbuf_puts(b, big);
  free(big);
}

int ufp4_strbuf_write(ufp4_strbuf *b, const char *path) {
  int rc = b->oom ? ufp4_fail(UFP4_ENOMEM, "%s: out of memory while composing", path)
                  : ufp4_write_file_atomic(path, b->s ? b->s : "", b->n);
  ufp4_strbuf_free(b);
  return rc;
}

void ufp4_strbuf_free(ufp4_strbuf *b) {
  free(b->s);
  *b = (ufp4_strbuf){0};
}
