/* log.h - one-line, timestamped logs on stderr for the long-running roles.
 *
 * Only top-level loops (coordinator, worker, controller, cli) log; library
 * functions return errors instead. Each process sets its component name once
 * ("coordinator", "worker-2"), so interleaved output from `eddy local` stays
 * readable. EDDY_LOG_LEVEL=debug|info|warn|error filters. */
#ifndef EDDY_COMMON_LOG_H
#define EDDY_COMMON_LOG_H

#include <stdint.h>

typedef enum { EDDY_LOG_DEBUG, EDDY_LOG_INFO, EDDY_LOG_WARN, EDDY_LOG_ERROR } eddy_log_level_t;

void eddy_log_set_component(const char *name);
void eddy_log_set_level(eddy_log_level_t level);
void eddy_log(eddy_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* At most one line per EDDY_LOG_LIMIT_INTERVAL_MS for one kind of event
 * (one limiter per kind, owned by the caller, zero-initialised), so a
 * flood of bad input from a hostile peer cannot flood the log. A line that
 * follows suppressed ones says how many were left out since the last line. */
#define EDDY_LOG_LIMIT_INTERVAL_MS 1000
typedef struct eddy_log_limit {
    uint64_t next_ms;    /* monotonic time from which the next line may go out */
    uint64_t suppressed; /* events since the last line that were not logged */
} eddy_log_limit_t;

void eddy_log_limited(eddy_log_limit_t *limit, eddy_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define eddy_debug(...) eddy_log(EDDY_LOG_DEBUG, __VA_ARGS__)
#define eddy_info(...) eddy_log(EDDY_LOG_INFO, __VA_ARGS__)
#define eddy_warn(...) eddy_log(EDDY_LOG_WARN, __VA_ARGS__)
#define eddy_error(...) eddy_log(EDDY_LOG_ERROR, __VA_ARGS__)

#endif
