/* Thread control. ufp4 parallelizes with OpenMP; results never depend on the thread count. */
#ifndef UFP4_PARALLEL_H
#define UFP4_PARALLEL_H

#include "ufp4/export.h"

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* Sets the OpenMP thread count for ufp4's loops (n <= 0: leave the default). */
void ufp4_set_threads(int n);
int ufp4_get_threads(void);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
