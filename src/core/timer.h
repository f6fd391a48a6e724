/* Wall-clock time for progress, ETA and phase timings. Internal to the library and the CLI. */
#ifndef UFP4_CORE_TIMER_H
#define UFP4_CORE_TIMER_H

/* Seconds on CLOCK_MONOTONIC: only differences mean anything, and they never run backwards when
 * the system clock is set. */
double ufp4_now_s(void);

#endif
