/* process.h - keyed process functions (Flink's KeyedProcessFunction): the
 * lowest-level keyed step, a function called per record with keyed state
 * and timers, for what windows and aggregates do not express (joins that
 * buffer both sides, timeouts, custom sessionisation, dedupe with expiry).
 *
 * A job registers a kind from its functions and uses it on a keyed stream:
 *
 *   static const eddy_process_udf_t join = {.value_size = sizeof(join_acc_t),
 *                                           .process = join_process,
 *                                           .on_timer = join_on_timer};
 *   eddy_register_process(r, "my_join", &join, err);            // plugin init
 *   eddy_process(eddy_key_by(s, "by_id"), "join", "my_join", cfg); // job build
 *
 * process() is called for every record, with the record's key as the
 * current key. on_timer() is called for every timer that fires, with the
 * timer's key as the current key. Everything a function reaches through its
 * context is scoped to the current key:
 *  - a value of value_size bytes (zeroed when the key is new), e.g. a count,
 *    a flag, a deadline; bytes, copied as such, so it must hold no pointers;
 *  - lists of records under namespaces (any bytes: "left", a window's end),
 *    in insertion order, e.g. the buffered rows of one side of a join;
 *  - timers: (domain, time, namespace); registering the same timer twice
 *    keeps one, each fires once, in (time, key, namespace) order;
 *  - named state (api/state.h): value, map, list and aggregating states the
 *    kind declares in udf.states, each with a schema version (and a
 *    migrate callback for older ones), matched by name when a job resumes
 *    from a savepoint of an older version. New functions should prefer
 *    these to the value and lists above, which have no name or version.
 * All of it is keyed state in key groups: checkpointed with the job,
 * restored after a failure, and moved with its key groups on a rescale, so
 * a timer registered before a rescale fires on the instance that owns its
 * key afterwards.
 *
 * Event-time timers fire when the watermark reaches them (time <= watermark),
 * processing-time timers when the wall clock does (the runtime ticks about
 * every EDDY_TICK_INTERVAL_MS). An event timer registered at or below the
 * current watermark fires at the next watermark advance (or in this one,
 * when registered from on_timer). At end of a bounded input the watermark
 * becomes EDDY_WATERMARK_MAX, so every event-time timer fires before the
 * step finishes; processing-time timers still pending then do not fire.
 * Late records (timestamp <= the watermark) are passed to process() like any
 * other: the function decides what late means for it. When it judges one
 * too late to count (its result was already emitted), it hands it to
 * eddy_process_late, which counts it in eddy_late_records_total and, with
 * the step's config late = "emit", sends it on unchanged but with kind
 * EDDY_LATE, for a late output (eddy_late_records, api/stream.h); with
 * late = "drop" (the default) it is dropped. Records of kind EDDY_LATE
 * from steps before never reach process() (api/operator.h).
 *
 * Records and the key are borrowed for the call; a record read from list
 * state stays valid until the next list add or clear, and never past the
 * call. Emitted records are copied by the collector; give them the
 * timestamp they should carry downstream (in on_timer, usually the timer's
 * time).
 *
 * A function returns 0, or -1 with err filled: the task fails and the job
 * recovers from its last checkpoint. The same function runs in several
 * instances (one per parallel slot, each its own state), so it must keep no
 * state of its own outside the context. */
#ifndef EDDY_API_PROCESS_H
#define EDDY_API_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/config.h"
#include "api/operator.h"
#include "api/plugin.h"
#include "api/state.h"
#include "common/err.h"
#include "common/time_domain.h"

/* The per-call context: the current key and the state behind it. */
typedef struct eddy_process_context eddy_process_context_t;

/* Largest value_size a kind may declare. */
#define EDDY_PROCESS_MAX_VALUE 4096u

typedef struct eddy_process_udf {
    size_t value_size; /* bytes of the per-key value, 0..EDDY_PROCESS_MAX_VALUE (0: none) */
    int (*process)(eddy_process_context_t *ctx, const eddy_record_t *rec, eddy_collector_t *out,
                   eddy_err_t *err);
    /* May be NULL when the function registers no timers. */
    int (*on_timer)(eddy_process_context_t *ctx, eddy_time_domain_t domain, int64_t time,
                    const void *ns, uint32_t ns_len, eddy_collector_t *out, eddy_err_t *err);
    /* Named state (api/state.h): n_states declarations (static storage),
     * reached through eddy_process_state. May be NULL/0. */
    const eddy_state_desc_t *states;
    uint32_t n_states;
} eddy_process_udf_t;

/* Registers an operator kind `name` for eddy_process() steps; the registry
 * copies udf. -1 when process is missing, value_size is too big, or the
 * name is taken. */
int eddy_register_process(eddy_registry_t *r, const char *name, const eddy_process_udf_t *udf,
                          eddy_err_t *err);

/* The current key: its length, *key pointing at its bytes. */
uint32_t eddy_process_key(const eddy_process_context_t *ctx, const char **key);
/* The last watermark this instance saw (in on_timer for an event timer: the
 * one that fired it); EDDY_WATERMARK_MIN before the first. */
int64_t eddy_process_watermark(const eddy_process_context_t *ctx);
/* Processing time (epoch ms): the latest tick's (in on_timer for a
 * processing timer: the tick that fired it), the wall clock before the first. */
int64_t eddy_process_time(const eddy_process_context_t *ctx);
/* In process() of a two-input step (eddy_process2, api/stream.h): the input
 * the record came from, 0 (left) or 1 (right). 0 in a one-input step and
 * in on_timer. */
uint32_t eddy_process_input(const eddy_process_context_t *ctx);
/* The step's configuration (never NULL). */
const eddy_config_t *eddy_process_config(const eddy_process_context_t *ctx);

/* rec is late for the function: count it, and send it on as EDDY_LATE when
 * the step's config has late = "emit" (see above). */
void eddy_process_late(eddy_process_context_t *ctx, const eddy_record_t *rec,
                       eddy_collector_t *out);

/* The handle of the state the kind declared as name (api/state.h), acting
 * on the current key; NULL when no state of that name is declared. A
 * lookup among the declarations: cheap, a function may call it per record. */
eddy_state_t *eddy_process_state(eddy_process_context_t *ctx, const char *name);

/* Timers of the current key. register: 0, or -1 when out of memory.
 * delete: true when such a timer was pending. */
int eddy_process_timer_register(eddy_process_context_t *ctx, eddy_time_domain_t domain,
                                 int64_t time, const void *ns, uint32_t ns_len);
bool eddy_process_timer_delete(eddy_process_context_t *ctx, eddy_time_domain_t domain,
                               int64_t time, const void *ns, uint32_t ns_len);

/* The current key's value (value_size bytes, 8-byte aligned), created
 * zeroed when absent (*created tells; created may be NULL). NULL when the
 * kind has value_size 0, or out of memory. Valid until value_clear or the
 * end of the call. */
void *eddy_process_value(eddy_process_context_t *ctx, bool *created);
/* The current key's value when it exists, else NULL (never creates). */
void *eddy_process_value_get(eddy_process_context_t *ctx);
/* Forgets the current key's value; true when it existed. */
bool eddy_process_value_clear(eddy_process_context_t *ctx);

/* The current key's list under namespace ns: append a copy of rec (0, or -1
 * when out of memory), its length, entry i (false past the end), forget it
 * (true when it existed). */
int eddy_process_list_add(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len,
                          const eddy_record_t *rec);
size_t eddy_process_list_size(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len);
bool eddy_process_list_at(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len, size_t i,
                          eddy_record_t *rec);
bool eddy_process_list_clear(eddy_process_context_t *ctx, const void *ns, uint32_t ns_len);

#endif
