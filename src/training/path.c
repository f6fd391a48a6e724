#include "training/path.h"

#include <stdarg.h>
#include <stdio.h>

#include "ufp4/error.h"

int train_path_fmt(train_path *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int len = vsnprintf(p->s, sizeof p->s, fmt, ap);
  va_end(ap);
  if (len >= 0 && (size_t)len < sizeof p->s) return 0;
  /* The error message has room for the path's start, which is what tells the user which one. */
  const int shown = 200;
  const int rc = ufp4_fail(UFP4_EINVAL, "%.*s...: path too long (%d bytes; the limit is %d)", shown,
                           p->s, len, (int)sizeof p->s - 1);
  p->s[0] = '\0';
  return rc;
}
