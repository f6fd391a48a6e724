/* Thread control. ufp4 parallelizes with OpenMP; results never depend on the thread count. */
#ifndef UFP4_PARALLEL_H
#define UFP4_PARALLEL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the OpenMP thread count for ufp4's loops (n <= 0: leave the default). */
void ufp4_set_threads(int n);
int ufp4_get_threads(void);

#ifdef __cplusplus
}
#endif
#endif
