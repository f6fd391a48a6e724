/* Status codes and the thread-local error message.
 *
 * Every fallible ufp4 function returns 0 on success or a negative ufp4_status, and leaves a
 * human-readable message (naming the file and what is wrong, where a file is involved) that
 * ufp4_last_error() returns until the next failure on the same thread. */
#ifndef UFP4_ERROR_H
#define UFP4_ERROR_H

#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

typedef enum {
  UFP4_OK = 0,
  UFP4_EINVAL = -1,  /* bad argument or unsupported combination */
  UFP4_ENOMEM = -2,  /* allocation failed or a size would overflow */
  UFP4_EIO = -3,     /* the operating system refused a read, write, rename or fsync */
  UFP4_EFORMAT = -4, /* a file's contents are malformed */
} ufp4_status;

const char *ufp4_status_name(int status);
const char *ufp4_last_error(void);
/* Formats the message into thread-local storage; returns `status` so callers can
 * `return ufp4_fail(UFP4_EINVAL, "...")`. */
int ufp4_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
