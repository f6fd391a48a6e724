/* Pins OpenBLAS's kernel set: blas_pin.h. */
#include "cli/blas_pin.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ufp4/gemm.h"

int cli_blas_pin_wanted(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  const char *mode = getenv("UFP4_BLAS_CORE");
  if (getenv("OPENBLAS_CORETYPE") || (mode && !strcmp(mode, "native"))) return 0;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         strcasecmp(ufp4_blas_core(), UFP4_BLAS_PINNED_CORE) != 0;
#else
  return 0;
#endif
}

void cli_pin_blas_core(char **argv) {
  if (!cli_blas_pin_wanted()) return;
  /* OpenBLAS read the environment when it loaded, so only a fresh image of this program sees the
   * variable. The variable being set now, the new image does not come back here. When exec fails
   * the run goes on with OpenBLAS's own choice, which `ufp4 version` names. */
  if (setenv("OPENBLAS_CORETYPE", UFP4_BLAS_PINNED_CORE, 1)) return;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE");
}
