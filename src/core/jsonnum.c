#include "ufp4/jsonnum.h"

#include <math.h>
#include <stdio.h>

const char *ufp4_json_num(char *buf, double v) {
  if (isfinite(v)) snprintf(buf, UFP4_JSONNUM_SIZE, "%.9g", v);
  else snprintf(buf, UFP4_JSONNUM_SIZE, "null");
  return buf;
}
