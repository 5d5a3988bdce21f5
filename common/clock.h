/* clock.h - monotonic and wall clocks in the units eddy uses everywhere. */
#ifndef EDDY_COMMON_CLOCK_H
#define EDDY_COMMON_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

uint64_t eddy_mono_ns(void);   /* monotonic, for durations and deadlines */
uint64_t eddy_mono_ms(void);
int64_t eddy_wall_ms(void);    /* Unix epoch milliseconds, for logs and records */
int64_t eddy_wall_us(void);    /* Unix epoch microseconds: record latency across processes */
/* Sleeps ms milliseconds whatever signals arrive meanwhile (for a process's
 * own pacing and polling: an event loop never sleeps). */
void eddy_sleep_ms(unsigned ms);
/* The time ms milliseconds from now on clock (CLOCK_REALTIME, or the clock
 * a condition variable was made with): a pthread_cond_timedwait deadline. */
struct timespec eddy_timespec_in(clockid_t clock, uint32_t ms);

/* wall_ms as local time in ISO 8601 with its UTC offset,
 * "2026-12-03T10:15:02+01:00" (at least 26 bytes). Returns buf. */
char *eddy_format_local_time(char *buf, size_t size, int64_t wall_ms);

#endif
