#include "core/cpu.h"

#include <stdlib.h>
#include <string.h>

/* The environment can only turn the kernels off, so a test can run the scalar reference through
 * the public API on a machine that has AVX2. */
static int env_disables(void) {
  const char *e = getenv("UFP4_NO_SIMD");
  return e && *e && strcmp(e, "0") != 0;
}

int ufp4_simd_enabled(void) {
#if defined(UFP4_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
  static int cached = -1;
  int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (v >= 0) return v;
  __builtin_cpu_init();
  v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && !env_disables();
  __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
  return v;
#else
  (void)env_disables;
  return 0;
#endif
}
