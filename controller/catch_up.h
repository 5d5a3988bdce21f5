/* catch_up.h - the rate a source must read: what arrives, plus its backlog
 * drained within the catch-up time (issue 29 item 2).
 *
 * This file owns that arithmetic only, as a pure function, so the
 * controller (controller.c) and the tests share one definition. A source
 * that reports its lag (entries upstream not read yet: a Redis stream's
 * entries behind its end) is sized for
 *   target = arrival + backlog / catch_up_s
 *   arrival = read / window + (lag_now - lag_before) / window   (>= 0)
 * i.e. the records that reached the source in the window (what it read
 * plus what its backlog grew by, so a source draining a backlog is not
 * mistaken for a source whose input arrives that fast) and the rate that
 * empties today's backlog in catch_up_s seconds. A rate-limited source
 * (offered_rate > 0: a generator) arrives at its configured rate. Once the
 * backlog is gone the target is the arrival rate again, which is what
 * lets the policy scale back in. Without a lag the target is the
 * configured rate (NaN for an unlimited source: unknown), as before. */
#ifndef EDDY_CONTROLLER_CATCH_UP_H
#define EDDY_CONTROLLER_CATCH_UP_H

/* The default --catch-up-s: Flink's autoscaler's catch-up duration is of
 * this order (its default is 30 min for hours-long outages; eddy's jobs
 * are smaller and its tests shorter). */
#define EDDY_CATCH_UP_DEFAULT_S 30.0

typedef struct eddy_catch_up_input {
    double offered_rate; /* configured records/s; 0: unlimited */
    double read;         /* records the source read in the window */
    double window_s;     /* > 0 */
    double lag_before;   /* records behind at the window's start; < 0 unknown */
    double lag_now;      /* records behind now; < 0 unknown (no lag reported) */
    double catch_up_s;   /* drain the backlog within this; 0: ignore backlogs */
} eddy_catch_up_input_t;

typedef struct eddy_catch_up {
    double arrival_rate;  /* records/s reaching the source; NaN unknown */
    double backlog;       /* records behind (lag_now); NaN unknown */
    double catch_up_rate; /* backlog / catch_up_s; 0 without either */
    double target_rate;   /* arrival_rate + catch_up_rate; NaN unknown */
} eddy_catch_up_t;

eddy_catch_up_t eddy_catch_up_target(const eddy_catch_up_input_t *in);

#endif
