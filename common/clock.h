/* clock.h - monotonic and wall clocks in the units eddy uses everywhere. */
#ifndef EDDY_COMMON_CLOCK_H
#define EDDY_COMMON_CLOCK_H

#include <stdint.h>

uint64_t eddy_mono_ns(void);   /* monotonic, for durations and deadlines */
uint64_t eddy_mono_ms(void);
int64_t eddy_wall_ms(void);    /* Unix epoch milliseconds, for logs and records */
int64_t eddy_wall_us(void);    /* Unix epoch microseconds: record latency across processes */

#endif
