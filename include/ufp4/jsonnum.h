/* Numbers for hand-written JSON lines: JSON has no NaN or Inf, so a non-finite value is null. */
#ifndef UFP4_JSONNUM_H
#define UFP4_JSONNUM_H

#include <stddef.h>
#include "ufp4/export.h"

/* Formats v with %.9g (or "null") into buf[UFP4_JSONNUM_SIZE] and returns buf. */
#define UFP4_JSONNUM_SIZE 32
#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN
const char *ufp4_json_num(char *buf, double v);
UFP4_API_END
#ifdef __cplusplus
}
#endif

#endif
