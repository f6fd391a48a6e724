/* .npy parser: any bytes either parse into a consistent array or fail with a message naming the
 * input; a parsed array's count must match its shape and every value must be readable. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "ufp4/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ufp4_npy a;
  int rc = ufp4_npy_parse(data, size, "fuzz.npy", &a);
  fuzz_check_error(rc, "fuzz.npy");
  if (rc) return 0;
  size_t count = 1;
  for (int i = 0; i < a.ndim; i++) count *= a.shape[i];
  if (count != a.count || a.ndim < 0 || a.ndim > UFP4_NPY_MAX_DIMS) abort();
  volatile float sink = 0;
  for (size_t i = 0; i < a.count; i++) sink += a.data[i];
  (void)sink;
  ufp4_npy_free(&a);
  return 0;
}
