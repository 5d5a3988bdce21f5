/* time_domain.h - the two clocks a timer runs on: event time (the
 * watermark) and processing time (the wall clock). Its own header because
 * job authors see it (api/process.h) and the timer service keeps it
 * (state/timers.h), and the API must not expose the timer service. */
#ifndef EDDY_COMMON_TIME_DOMAIN_H
#define EDDY_COMMON_TIME_DOMAIN_H

typedef enum eddy_time_domain {
    EDDY_EVENT_TIME = 0,
    EDDY_PROCESSING_TIME = 1,
} eddy_time_domain_t;

#endif
