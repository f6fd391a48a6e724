#include "ufp4/parallel.h"

#include <omp.h>

void ufp4_set_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

int ufp4_get_threads(void) { return omp_get_max_threads(); }
