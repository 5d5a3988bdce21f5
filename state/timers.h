/* timers.h - a timer service of one keyed operator instance: event-time and
 * processing-time timers per (key, namespace), stored per key group
 * (Flink's InternalTimerService on a heap backend).
 *
 * A timer is (domain, time ms, key bytes, namespace bytes); registering the
 * same timer twice keeps one. Timers of a domain fire in order of time (ties
 * in registration order is NOT promised; ties fire in (time, key, namespace)
 * byte order, so firing is deterministic across restores), each once:
 * eddy_timers_advance(EVENT, wm) fires every event timer with time <= wm.
 * A fired or deleted timer is gone. The callback may register (a later
 * timer, or one <= wm which then fires in the same advance) or delete
 * timers.
 *
 * Per key group serialisation (msgpack, bounds-checked, versioned) so the
 * timers move and restore with their key group; the key group of a timer is
 * the one the caller gives at registration (the key's). read_group replaces
 * the group (0 bytes: empty, as operator.h's read_group); on malformed bytes
 * it fails with err saying why and leaves the group empty. A callback must
 * not start another advance of the same object. */
#ifndef EDDY_STATE_TIMERS_H
#define EDDY_STATE_TIMERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/time_domain.h"

typedef struct eddy_timers eddy_timers_t;

typedef struct eddy_timer {
    eddy_time_domain_t domain;
    int64_t time;
    uint32_t kg;
    const void *key;
    uint32_t key_len;
    const void *ns;
    uint32_t ns_len;
} eddy_timer_t;

/* Returns 0, or -1 to stop the advance (err filled; the timer is consumed). */
typedef int (*eddy_timer_fire_fn)(void *ctx, const eddy_timer_t *timer, eddy_err_t *err);

eddy_timers_t *eddy_timers_new(uint32_t max_key_groups);
void eddy_timers_destroy(eddy_timers_t **self_p);

/* 0, or -1 on allocation failure or kg out of range. */
int eddy_timers_register(eddy_timers_t *self, eddy_time_domain_t domain, int64_t time, uint32_t kg,
                         const void *key, uint32_t key_len, const void *ns, uint32_t ns_len);
/* true when such a timer existed. */
bool eddy_timers_delete(eddy_timers_t *self, eddy_time_domain_t domain, int64_t time, uint32_t kg,
                        const void *key, uint32_t key_len, const void *ns, uint32_t ns_len);
/* Fires (in order) and removes every timer of domain with time <= until. */
int eddy_timers_advance(eddy_timers_t *self, eddy_time_domain_t domain, int64_t until,
                        eddy_timer_fire_fn fire, void *ctx, eddy_err_t *err);
/* before(ctx, kg) runs in an advance before it removes a timer of key
 * group kg (an owner that copies a group before changing it, as
 * state/group_freeze.h, learns of the change the advance makes). NULL:
 * none. */
void eddy_timers_before_fire(eddy_timers_t *self, void (*before)(void *ctx, uint32_t kg),
                             void *ctx);
/* Earliest pending time of domain, or INT64_MAX when none. */
int64_t eddy_timers_next(const eddy_timers_t *self, eddy_time_domain_t domain);
size_t eddy_timers_count(const eddy_timers_t *self);

int eddy_timers_write_group(const eddy_timers_t *self, uint32_t kg, char **out, size_t *len,
                            eddy_err_t *err);
int eddy_timers_read_group(eddy_timers_t *self, uint32_t kg, const void *data, size_t len,
                           eddy_err_t *err);
void eddy_timers_drop_group(eddy_timers_t *self, uint32_t kg);

#endif
