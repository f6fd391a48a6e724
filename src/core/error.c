#include "ufp4/error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *ufp4_status_name(int status) {
  switch (status) {
  case UFP4_OK: return "ok";
  case UFP4_EINVAL: return "invalid argument";
  case UFP4_ENOMEM: return "out of memory";
  case UFP4_EIO: return "I/O error";
  case UFP4_EFORMAT: return "malformed file";
  default: return "unknown error";
  }
}

const char *ufp4_last_error(void) { return last_error[0] ? last_error : "no error recorded"; }

int ufp4_fail(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}
