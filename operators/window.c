/* window.c - the keyed window operator (api/window.h), after Flink's
 * WindowOperator with its default triggers: assigners, per-window state,
 * session merging (MergingWindowSet), event/processing-time timers, allowed
 * lateness, late records, and the per-key-group snapshot of all of it.
 *
 * State, all partitioned by key group and owned by one operator instance:
 * - accs: (key ++ state window) -> accumulator, for reduce / aggregate /
 *   a config-aware accumulator (a sliding window kept as panes: key ++
 *   pane; see "panes") (an eddy_keyed_state_t used as a hash map;
 *   pointers stay valid until the entry is removed); an accumulator's
 *   prepared handle is per instance (and per combiner), its size per step;
 * - lists: (key, state window) -> element list, without any of those;
 * - timers: (key, window) -> trigger timer at end - 1 and cleanup timer at
 *   end - 1 + lateness (one timer when they coincide); panes keep fewer;
 * - sessions: key -> its merging window set, an array sorted by start of
 *   disjoint windows, each with the state window its state lives under, so
 *   a record that extends a session moves no state (Flink's
 *   MergingWindowSet); the map value is a pointer to that array, so this
 *   table is serialised here, never by keyed_state's own writer.
 * A window has timers exactly while it has state, so a non-merging window
 * registers them when its state is created, not per record. Windows travel
 * as 16 bytes (start, end as big-endian with the sign bit flipped) so timer
 * ties fire in window order. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "api/window.h"
#include "common/clock.h"
#include "net/mpcodec.h"
#include "net/partial.h"
#include "operators/etl_record.h"
#include "plan/registry.h"
#include "state/group_freeze.h"
#include "state/keyed_state.h"
#include "state/keygroup.h"
#include "state/list_state.h"
#include "state/timers.h"

#define WIN_NS 16
#define WIN_STATE_VERSION 1u       /* one accumulator or list per window */
#define WIN_STATE_VERSION_PANES 2u /* sliding windows kept as panes */
#define WIN_MAX_PER_RECORD 65536
/* Panes finer than this against the slide (a gcd of 1 ms of 10 s windows
 * sliding by 9.999 s) would make every firing look up more panes than the
 * records a window holds: those windows stay per window. */
#define WIN_MAX_PANES_PER_SLIDE 16
#define WIN_MAX_ACC EDDY_WINDOW_MAX_ACC

/* Snapshot values too: append only. */
typedef enum { ASSIGN_TUMBLING, ASSIGN_SLIDING, ASSIGN_SESSION, ASSIGN_CUMULATE } assigner_t;
/* Snapshot values: never renumber (a restore compares them). */
typedef enum { STORE_REDUCE, STORE_AGGREGATE, STORE_LIST, STORE_ACCUMULATOR } store_t;

static const char *const assigner_names[] = {"tumbling", "sliding", "session", "cumulate"};
static const char *const store_names[] = {"reduce values", "aggregate accumulators",
                                          "element lists", "accumulators"};

/* The kind's arg: the user's functions and the kind's name (for errors). */
typedef struct window_kind {
    eddy_window_udf_t udf;
    char name[64];
} window_kind_t;

/* What configure() makes of a step's config: ctx->config of the ops. */
typedef struct window_conf {
    const window_kind_t *kind;
    const eddy_config_t *config;
    assigner_t assigner;
    store_t store;
    int64_t size, slide, offset, gap, lateness;
    bool processing;
    bool emit_late;
    bool combine;    /* config "combine": local pre-aggregation where exact */
    bool panes;      /* sliding windows kept as panes (see "panes" below) */
    int64_t pane;    /* the combiner's unit of time: gcd(size, slide) */
    size_t acc_size; /* bytes of an accs value */
} window_conf_t;

typedef struct session_entry {
    eddy_window_t w;  /* the window as the user sees it */
    eddy_window_t sw; /* the window its state is kept under */
} session_entry_t;

typedef struct session_set {
    uint32_t n, cap;
    session_entry_t e[];
} session_set_t;

typedef struct window_op {
    const window_conf_t *c;
    const eddy_window_udf_t *udf;
    eddy_key_fn key_fn;
    uint32_t max_kg;
    uint64_t *late_records;
    eddy_timers_t *timers;
    eddy_keyed_state_t *accs;     /* reduce / aggregate */
    eddy_list_state_t *lists;     /* element lists */
    eddy_keyed_state_t *sessions; /* session assigner: key -> session_set_t * */
    int64_t wm;
    bool live; /* it took a record or a watermark: its clock is its input's */
    int64_t proc_now;
    bool ticked;
    char *scratch; /* key ++ window, for accs lookups */
    size_t scratch_cap;
    unsigned char *acc_tmp; /* one accumulator, for merges */
    unsigned char *pane_acc; /* panes: a window's panes merged, for a firing */
    void *prepared;         /* STORE_ACCUMULATOR: this instance's handle */
    void *max_by;           /* max_by's handle (api/window.h) */
    eddy_collector_t *out;  /* while timers fire */
    eddy_group_freeze_t *frozen; /* a snapshot being written (see "asynchronous snapshots") */
} window_op_t;

/* Before any change to group kg's timers, element lists or session sets:
 * a snapshot still being written takes those first (state/group_freeze.h;
 * accumulators have copy-on-write of their own). Every such change comes
 * through timer_add/timer_del, a timer firing (the timers' before_fire),
 * the list branches of state_add/state_clear/state_merge, session_slot,
 * read_group or drop_group. */
static void touch(window_op_t *op, uint32_t kg)
{
    eddy_group_freeze_touch_slot(&op->frozen, kg);
}

static void touch_timer(void *ctx, uint32_t kg)
{
    touch(ctx, kg);
}

/* ---- windows ------------------------------------------------------------ */

static void put_be64(unsigned char *p, int64_t v)
{
    uint64_t u = (uint64_t)v ^ (UINT64_C(1) << 63);
    for (int i = 7; i >= 0; i--, u >>= 8)
        p[i] = (unsigned char)u;
}

static int64_t get_be64(const unsigned char *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u = (u << 8) | p[i];
    return (int64_t)(u ^ (UINT64_C(1) << 63));
}

static void window_encode(unsigned char ns[WIN_NS], eddy_window_t w)
{
    put_be64(ns, w.start);
    put_be64(ns + 8, w.end);
}

static eddy_window_t window_decode(const unsigned char *ns)
{
    eddy_window_t w = {get_be64(ns), get_be64(ns + 8)};
    return w;
}

static int64_t sat64(__int128 v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

static int64_t max_ts(eddy_window_t w) { return w.end - 1; }

/* Flink's cleanup time: end - 1 + lateness, saturating (event time only). */
static int64_t cleanup_time(const window_conf_t *c, eddy_window_t w)
{
    return c->processing ? max_ts(w) : sat64((__int128)max_ts(w) + c->lateness);
}

static bool window_late(const window_op_t *op, eddy_window_t w)
{
    return !op->c->processing && cleanup_time(op->c, w) <= op->wm;
}

/* Flink's TimeWindow.getWindowStartWithOffset, without overflow. */
static __int128 window_start(int64_t ts, int64_t offset, int64_t size)
{
    __int128 rem = ((__int128)ts - offset) % size;
    if (rem < 0)
        rem += size;
    return (__int128)ts - rem;
}

static bool windows_intersect(eddy_window_t a, eddy_window_t b)
{
    return a.start <= b.end && a.end >= b.start;
}

static eddy_time_domain_t domain(const window_op_t *op)
{
    return op->c->processing ? EDDY_PROCESSING_TIME : EDDY_EVENT_TIME;
}

static int64_t processing_time(const window_op_t *op)
{
    return op->ticked ? op->proc_now : eddy_wall_ms();
}

/* ---- per-window state -------------------------------------------------- */

/* Folds rec into acc (zeroed when created) of a reduce / aggregate /
 * accumulator store: the window operator's and the combiner's one fold. */
static void acc_add(store_t store, const eddy_window_udf_t *udf, void *prepared, void *acc,
                    bool created, const eddy_record_t *rec)
{
    if (store == STORE_REDUCE) {
        int64_t v;
        memcpy(&v, acc, sizeof v);
        v = created ? rec->value : udf->reduce(v, rec->value);
        memcpy(acc, &v, sizeof v);
    } else if (store == STORE_ACCUMULATOR) {
        if (created && udf->accumulator.create)
            udf->accumulator.create(prepared, acc);
        udf->accumulator.add(prepared, acc, rec);
    } else {
        if (created && udf->aggregate.create)
            udf->aggregate.create(acc);
        udf->aggregate.add(acc, rec);
    }
}

/* acc = acc merged with other (both of this window's store). */
static void acc_merge(const window_op_t *op, void *acc, const void *other)
{
    if (op->c->store == STORE_REDUCE)
        *(int64_t *)acc = op->udf->reduce(*(int64_t *)acc, *(const int64_t *)other);
    else if (op->c->store == STORE_ACCUMULATOR)
        op->udf->accumulator.merge(op->prepared, acc, other);
    else
        op->udf->aggregate.merge(acc, other);
}

/* key ++ window in op->scratch; returns its length (0 when out of memory). */
static uint32_t acc_key(window_op_t *op, const char *key, uint32_t klen, eddy_window_t sw)
{
    size_t need = (size_t)klen + WIN_NS;
    if (need > op->scratch_cap) {
        char *p = realloc(op->scratch, need);
        if (!p)
            return 0;
        op->scratch = p;
        op->scratch_cap = need;
    }
    if (klen)
        memcpy(op->scratch, key, klen);
    window_encode((unsigned char *)op->scratch + klen, sw);
    return (uint32_t)need;
}

static void *acc_get(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                     eddy_window_t sw)
{
    uint32_t n = acc_key(op, key, klen, sw);
    if (!n)
        return NULL;
    return eddy_keyed_state_get(op->accs, kg, eddy_key_hash(op->scratch, n), op->scratch, n);
}

static void acc_remove(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                       eddy_window_t sw)
{
    uint32_t n = acc_key(op, key, klen, sw);
    if (n)
        eddy_keyed_state_remove(op->accs, kg, eddy_key_hash(op->scratch, n), op->scratch, n);
}

/* The accumulator of (key, sw), made (zeroed, *created) when absent; NULL
 * when out of memory. */
static void *acc_upsert(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                        eddy_window_t sw, bool *created)
{
    uint32_t n = acc_key(op, key, klen, sw);
    return n ? eddy_keyed_state_upsert(op->accs, kg, eddy_key_hash(op->scratch, n), op->scratch, n,
                                       created)
             : NULL;
}

/* Folds rec into the state of (key, sw); *created when the state is new. */
static int state_add(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                     eddy_window_t sw, const eddy_record_t *rec, bool *created, eddy_err_t *err)
{
    if (op->c->store == STORE_LIST) {
        touch(op, kg);
        unsigned char ns[WIN_NS];
        window_encode(ns, sw);
        eddy_record_t best;
        bool existed = eddy_list_state_at(op->lists, kg, key, klen, ns, WIN_NS, 0, &best);
        *created = !existed;
        if (existed && op->udf->max_by.rank) { /* keep the highest rank's elements only */
            int cmp = op->udf->max_by.rank(op->max_by, rec, &best);
            if (cmp < 0)
                return 0;
            if (cmp > 0)
                eddy_list_state_clear(op->lists, kg, key, klen, ns, WIN_NS);
        }
        if (eddy_list_state_add(op->lists, kg, key, klen, ns, WIN_NS, rec) < 0)
            return eddy_err_set(err, "window: out of memory in list state");
        return 0;
    }
    void *acc = acc_upsert(op, kg, key, klen, sw, created);
    if (!acc)
        return eddy_err_set(err, "window: out of memory in window state");
    acc_add(op->c->store, op->udf, op->prepared, acc, *created, rec);
    return 0;
}

static void state_clear(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                        eddy_window_t sw)
{
    if (op->c->store == STORE_LIST) {
        touch(op, kg);
        unsigned char ns[WIN_NS];
        window_encode(ns, sw);
        eddy_list_state_clear(op->lists, kg, key, klen, ns, WIN_NS);
    } else {
        acc_remove(op, kg, key, klen, sw);
    }
}

/* Folds accumulator acc (of this window's store) into the state of (key,
 * sw): a copy when that is new (*created). */
static int acc_fold(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                    eddy_window_t sw, const void *acc, bool *created, eddy_err_t *err)
{
    *created = false;
    void *v = acc_upsert(op, kg, key, klen, sw, created);
    if (!v)
        return eddy_err_set(err, "window: out of memory in window state");
    if (*created)
        memcpy(v, acc, op->c->acc_size);
    else
        acc_merge(op, v, acc);
    return 0;
}

/* Merges the state of (key, from) into (key, to) and removes it. */
static int state_merge(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                       eddy_window_t to, eddy_window_t from, eddy_err_t *err)
{
    if (op->c->store == STORE_LIST) {
        touch(op, kg);
        unsigned char a[WIN_NS], b[WIN_NS];
        window_encode(a, to);
        window_encode(b, from);
        eddy_record_t ra, rb;
        if (op->udf->max_by.rank && eddy_list_state_at(op->lists, kg, key, klen, a, WIN_NS, 0, &ra) &&
            eddy_list_state_at(op->lists, kg, key, klen, b, WIN_NS, 0, &rb)) {
            int cmp = op->udf->max_by.rank(op->max_by, &rb, &ra);
            if (cmp < 0) {
                eddy_list_state_clear(op->lists, kg, key, klen, b, WIN_NS);
                return 0;
            }
            if (cmp > 0)
                eddy_list_state_clear(op->lists, kg, key, klen, a, WIN_NS);
        }
        if (eddy_list_state_move(op->lists, kg, key, klen, b, WIN_NS, a, WIN_NS) < 0)
            return eddy_err_set(err, "window: out of memory merging sessions");
        return 0;
    }
    void *other = acc_get(op, kg, key, klen, from);
    if (!other)
        return 0;
    memcpy(op->acc_tmp, other, op->c->acc_size);
    acc_remove(op, kg, key, klen, from);
    bool created;
    return acc_fold(op, kg, key, klen, to, op->acc_tmp, &created, err);
}

/* ---- timers ------------------------------------------------------------ */

static int timer_add(window_op_t *op, int64_t time, uint32_t kg, const char *key, uint32_t klen,
                     eddy_window_t w, eddy_err_t *err)
{
    touch(op, kg);
    unsigned char ns[WIN_NS];
    window_encode(ns, w);
    if (eddy_timers_register(op->timers, domain(op), time, kg, key, klen, ns, WIN_NS) < 0)
        return eddy_err_set(err, "window: out of memory registering a timer");
    return 0;
}

static void timer_del(window_op_t *op, int64_t time, uint32_t kg, const char *key, uint32_t klen,
                      eddy_window_t w)
{
    touch(op, kg);
    unsigned char ns[WIN_NS];
    window_encode(ns, w);
    eddy_timers_delete(op->timers, domain(op), time, kg, key, klen, ns, WIN_NS);
}

/* Timers of a window whose state was just created: the trigger's at end - 1
 * (unless the watermark is past it: the caller fires at once) and the
 * cleanup timer (Flink's registerCleanupTimer). */
static int timers_for_new_window(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                                 eddy_window_t w, eddy_err_t *err)
{
    int64_t t = max_ts(w), clean = cleanup_time(op->c, w);
    if ((op->c->processing || t > op->wm) && timer_add(op, t, kg, key, klen, w, err) < 0)
        return -1;
    if (clean != t && timer_add(op, clean, kg, key, klen, w, err) < 0)
        return -1;
    return 0;
}

static void timers_delete_window(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                                 eddy_window_t w)
{
    int64_t t = max_ts(w), clean = cleanup_time(op->c, w);
    timer_del(op, t, kg, key, klen, w);
    if (clean != t)
        timer_del(op, clean, kg, key, klen, w);
}

/* ---- firing ------------------------------------------------------------- */

typedef struct list_elements {
    eddy_window_elements_t base;
    eddy_list_state_t *lists;
    uint32_t kg;
    const char *key;
    uint32_t klen;
    unsigned char ns[WIN_NS];
} list_elements_t;

static void list_get(const eddy_window_elements_t *self, size_t i, eddy_record_t *rec)
{
    const list_elements_t *e = (const list_elements_t *)self;
    if (!eddy_list_state_at(e->lists, e->kg, e->key, e->klen, e->ns, WIN_NS, i, rec))
        *rec = eddy_record_make("", 0, 0);
}

typedef struct one_element {
    eddy_window_elements_t base;
    eddy_record_t rec;
} one_element_t;

static void one_get(const eddy_window_elements_t *self, size_t i, eddy_record_t *rec)
{
    (void)i;
    *rec = ((const one_element_t *)self)->rec;
}

/* Stamps what a process function emits with the window's end - 1. */
typedef struct stamping {
    eddy_collector_t base;
    eddy_collector_t *down;
    int64_t ts;
} stamping_t;

static void stamp_emit(eddy_collector_t *c, const eddy_record_t *rec)
{
    stamping_t *s = (stamping_t *)c;
    eddy_record_t r = *rec;
    r.timestamp = s->ts;
    eddy_emit(s->down, &r);
}

/* Emits window w's result from accumulator acc. */
static void fire_acc(window_op_t *op, eddy_collector_t *out, const char *key, uint32_t klen,
                     eddy_window_t w, const void *acc)
{
    const eddy_window_udf_t *udf = op->udf;
    eddy_window_context_t wc = {key, klen, w, op->wm, processing_time(op), op->c->config};
    stamping_t stamp = {{stamp_emit}, out, max_ts(w)};
    if (op->c->store == STORE_ACCUMULATOR) {
        udf->accumulator.emit(op->prepared, &wc, acc, &stamp.base);
        return;
    }
    int64_t result = op->c->store == STORE_REDUCE ? *(const int64_t *)acc
                                                  : udf->aggregate.result(acc);
    eddy_record_t rec = {key, klen, EDDY_INSERT, result, max_ts(w)};
    if (!udf->process) {
        eddy_emit(out, &rec);
        return;
    }
    one_element_t one = {{1, one_get}, rec};
    udf->process(&wc, &one.base, &stamp.base);
}

/* Emits window w's contents, kept under state window sw (nothing when empty). */
static void fire(window_op_t *op, eddy_collector_t *out, uint32_t kg, const char *key,
                 uint32_t klen, eddy_window_t w, eddy_window_t sw)
{
    const eddy_window_udf_t *udf = op->udf;
    eddy_window_context_t wc = {key, klen, w, op->wm, processing_time(op), op->c->config};
    stamping_t stamp = {{stamp_emit}, out, max_ts(w)};
    if (op->c->store == STORE_LIST) {
        list_elements_t e = {{0, list_get}, op->lists, kg, key, klen, {0}};
        window_encode(e.ns, sw);
        e.base.count = eddy_list_state_size(op->lists, kg, key, klen, e.ns, WIN_NS);
        if (e.base.count)
            udf->process(&wc, &e.base, &stamp.base);
        return;
    }
    const void *acc = acc_get(op, kg, key, klen, sw);
    if (acc)
        fire_acc(op, out, key, klen, w, acc);
}

/* ---- panes -------------------------------------------------------------- */

/* Sliding event-time windows of an accumulator that merges (reduce, or an
 * aggregate or accumulator with merge(); window_conf_t.panes) keep one
 * accumulator per (key, pane) rather than per (key, window): a pane is a
 * slice of gcd(size, slide) aligned to the offset, so every record of a
 * pane belongs to the same windows (Flink's pane/slice approach). A record
 * updates its pane only, and a window's firing merges the panes it covers
 * (size / pane lookups) in time order.
 *
 * Timers, with the window as their namespace (so they fire in the order
 * per-window state fires its windows), chained: a new pane registers the
 * trigger (end - 1) of the first of its windows not triggered yet; a
 * window's trigger, once it fired, registers the next window's (start +
 * slide) when that window covers a pane, so every window that covers a
 * pane fires, once (the timer service keeps one of equal timers), and a
 * key holds one timer rather than one per window. The cleanup (end - 1 +
 * lateness; with no lateness the trigger itself) of window w drops the
 * panes whose last window it is, those starting in [w.start, w.start +
 * slide); w's trigger registers it when there are such panes (a new pane
 * whose last window was triggered already registers it itself).
 *
 * Results are per-window state's, late firings included: a window fires
 * with the records of its panes that arrived before the firing, and those
 * are the records per-window state folds into it, because a record joins
 * its pane when its last window is not late (the latest window is the last
 * to become late), and a window that was late when a record arrived never
 * fires again. Only a key group moved into an instance whose watermark is
 * ahead of the group's own could differ: a window the move left behind
 * that watermark fires at this instance's next watermark and then includes
 * a record that arrived for a later window of the same pane in between
 * (per-window state would leave it out). */

static eddy_window_t slide_window(const window_conf_t *c, __int128 start)
{
    eddy_window_t w = {sat64(start), sat64(start + c->size)};
    return w;
}

static eddy_window_t pane_of(const window_conf_t *c, int64_t ts)
{
    __int128 start = window_start(ts, c->offset, c->pane);
    eddy_window_t p = {sat64(start), sat64(start + c->pane)};
    return p;
}

/* The starts of the first and last panes a firing found (INT64_MAX and
 * INT64_MIN: none). */
typedef struct pane_span {
    int64_t first, last;
} pane_span_t;

/* Fires window w from its panes, merged in time order into op->pane_acc. */
static pane_span_t panes_fire(window_op_t *op, eddy_collector_t *out, uint32_t kg,
                              const char *key, uint32_t klen, eddy_window_t w)
{
    pane_span_t span = {INT64_MAX, INT64_MIN};
    for (__int128 s = w.start; s < w.end; s += op->c->pane) {
        const void *acc = acc_get(op, kg, key, klen, pane_of(op->c, sat64(s)));
        if (!acc)
            continue;
        if (span.last != INT64_MIN)
            acc_merge(op, op->pane_acc, acc);
        else
            memcpy(op->pane_acc, acc, op->c->acc_size);
        if (span.first == INT64_MAX)
            span.first = sat64(s);
        span.last = sat64(s);
    }
    if (span.last != INT64_MIN)
        fire_acc(op, out, key, klen, w, op->pane_acc);
    return span;
}

static bool panes_any(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                      int64_t from, int64_t to)
{
    for (__int128 s = from; s < to; s += op->c->pane)
        if (acc_get(op, kg, key, klen, pane_of(op->c, sat64(s))))
            return true;
    return false;
}

/* Timers of a new pane p: the trigger of its first window not triggered
 * yet (the chain of triggers then reaches its last window, whose trigger
 * registers its cleanup); the cleanup of its last window when that one
 * was triggered already. */
static int pane_timers(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                       eddy_window_t p, eddy_err_t *err)
{
    const window_conf_t *c = op->c;
    __int128 last = window_start(p.start, c->offset, c->slide), first = last;
    while (first - c->slide > (__int128)p.start - c->size)
        first -= c->slide;
    for (__int128 s = first; s <= last; s += c->slide) {
        eddy_window_t w = slide_window(c, s);
        if (max_ts(w) > op->wm) {
            if (timer_add(op, max_ts(w), kg, key, klen, w, err) < 0)
                return -1;
            break;
        }
    }
    eddy_window_t wl = slide_window(c, last);
    if (max_ts(wl) > op->wm)
        return 0;
    return timer_add(op, cleanup_time(c, wl), kg, key, klen, wl, err);
}

/* A record (or a combiner's partial: acc, the accumulator of records of
 * one pane) of time ts: joins its pane unless every window of it is late
 * (*skipped), then fires the windows already past their end (within the
 * lateness), latest first as per-window state does. */
static int pane_add(window_op_t *op, uint32_t kg, const char *key, uint32_t klen, int64_t ts,
                    const eddy_record_t *rec, const void *acc, eddy_collector_t *out,
                    bool *skipped, eddy_err_t *err)
{
    const window_conf_t *c = op->c;
    __int128 last = window_start(ts, c->offset, c->slide);
    *skipped = window_late(op, slide_window(c, last));
    if (*skipped)
        return 0;
    eddy_window_t p = pane_of(c, ts);
    bool created = false;
    if (rec ? state_add(op, kg, key, klen, p, rec, &created, err) < 0
            : acc_fold(op, kg, key, klen, p, acc, &created, err) < 0)
        return -1;
    if (created && pane_timers(op, kg, key, klen, p, err) < 0)
        return -1;
    for (__int128 s = last; s > (__int128)ts - c->size; s -= c->slide) {
        eddy_window_t w = slide_window(c, s);
        if (window_late(op, w))
            break; /* so are the earlier ones */
        if (max_ts(w) <= op->wm)
            panes_fire(op, out, kg, key, klen, w);
    }
    return 0;
}

/* A timer of window w: its trigger fires it, passes the trigger on to the
 * next window when that covers a pane and, with a lateness, registers w's
 * cleanup when w is the last window of a pane; its cleanup drops the panes
 * whose last window it is. */
static int pane_timer(window_op_t *op, const eddy_timer_t *t, eddy_window_t w, eddy_err_t *err)
{
    const window_conf_t *c = op->c;
    const char *key = t->key;
    uint32_t klen = t->key_len, kg = t->kg;
    if (t->time == max_ts(w)) {
        /* The next window covers a pane when w has one past its first
         * slide or one lies in the slide after w. */
        pane_span_t span = panes_fire(op, op->out, kg, key, klen, w);
        eddy_window_t next = slide_window(c, (__int128)w.start + c->slide);
        if ((span.last >= next.start || panes_any(op, kg, key, klen, w.end, next.end)) &&
            timer_add(op, max_ts(next), kg, key, klen, next, err) < 0)
            return -1;
        if (cleanup_time(c, w) != t->time && span.first < next.start &&
            timer_add(op, cleanup_time(c, w), kg, key, klen, w, err) < 0)
            return -1;
    }
    if (t->time == cleanup_time(c, w))
        for (__int128 s = w.start; s < (__int128)w.start + c->slide; s += c->pane)
            acc_remove(op, kg, key, klen, pane_of(c, sat64(s)));
    return 0;
}

/* ---- sessions ----------------------------------------------------------- */

static session_set_t **session_slot(window_op_t *op, uint32_t kg, uint64_t h, const char *key,
                                    uint32_t klen, bool create)
{
    touch(op, kg); /* the caller may change the set in place */
    if (!create)
        return eddy_keyed_state_get(op->sessions, kg, h, key, klen);
    return eddy_keyed_state_upsert(op->sessions, kg, h, key, klen, NULL);
}

static void session_forget_key(window_op_t *op, uint32_t kg, uint64_t h, const char *key,
                               uint32_t klen)
{
    session_set_t **slot = session_slot(op, kg, h, key, klen, false);
    if (slot) {
        free(*slot);
        eddy_keyed_state_remove(op->sessions, kg, h, key, klen);
    }
}

/* Index of window w in the set, or -1. */
static int64_t session_find(const session_set_t *s, eddy_window_t w)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->e[mid].w.start < w.start)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->n && s->e[lo].w.start == w.start && s->e[lo].w.end == w.end ? (int64_t)lo : -1;
}

/* Flink's MergingWindowSet.addWindow plus WindowOperator's merge function:
 * adds [ts, ts + gap) to the key's set, merging it with every window it
 * intersects. *actual is the window the record belongs to, *sw the window
 * its state lives under; *fresh when the window was not in the set before
 * in this shape (it needs its timers); *late when it is a new window that
 * is already late (nothing was added). */
static int session_add(window_op_t *op, uint32_t kg, uint64_t h, const char *key, uint32_t klen,
                       eddy_window_t w, eddy_window_t *actual, eddy_window_t *sw, bool *fresh,
                       bool *late, eddy_err_t *err)
{
    *fresh = *late = false;
    session_set_t **slot = session_slot(op, kg, h, key, klen, true);
    if (!slot)
        return eddy_err_set(err, "window: out of memory in session state");
    session_set_t *s = *slot;
    uint32_t n = s ? s->n : 0;
    /* Windows are sorted and disjoint, so ends are sorted too: the ones w
     * intersects are one run [lo, hi). */
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->e[mid].w.end < w.start)
            lo = mid + 1;
        else
            hi = mid;
    }
    hi = lo;
    while (hi < n && windows_intersect(s->e[hi].w, w))
        hi++;

    if (hi == lo) { /* a new session */
        if (window_late(op, w)) {
            *late = true;
            if (n == 0)
                session_forget_key(op, kg, h, key, klen);
            return 0;
        }
        if (!s || s->n == s->cap) {
            uint32_t cap = s ? s->cap * 2 : 2;
            session_set_t *g = realloc(s, sizeof *s + (size_t)cap * sizeof s->e[0]);
            if (!g) {
                if (!s)
                    session_forget_key(op, kg, h, key, klen);
                return eddy_err_set(err, "window: out of memory in session state");
            }
            if (!s)
                g->n = 0;
            g->cap = cap;
            s = *slot = g;
        }
        memmove(&s->e[lo + 1], &s->e[lo], (size_t)(s->n - lo) * sizeof s->e[0]);
        s->e[lo].w = s->e[lo].sw = w;
        s->n++;
        *actual = *sw = w;
        *fresh = true;
        return 0;
    }

    eddy_window_t cover = w;
    for (uint32_t i = lo; i < hi; i++) {
        if (s->e[i].w.start < cover.start)
            cover.start = s->e[i].w.start;
        if (s->e[i].w.end > cover.end)
            cover.end = s->e[i].w.end;
    }
    if (hi - lo == 1 && s->e[lo].w.start == cover.start && s->e[lo].w.end == cover.end) {
        *actual = cover; /* inside an existing session: nothing changes */
        *sw = s->e[lo].sw;
        return 0;
    }
    /* The merged windows' timers go, the merged window gets its own (the
     * caller registers them), their state moves under the first one's
     * state window. A merged window cannot end before the watermark here
     * (Flink throws if it did); should a moved-in key group's windows be
     * behind this instance's watermark, the merged window fires at once
     * and is cleaned up at the next watermark instead. */
    eddy_window_t target = s->e[lo].sw;
    for (uint32_t i = lo; i < hi; i++)
        timers_delete_window(op, kg, key, klen, s->e[i].w);
    for (uint32_t i = lo + 1; i < hi; i++)
        if (state_merge(op, kg, key, klen, target, s->e[i].sw, err) < 0)
            return -1;
    s->e[lo].w = cover;
    memmove(&s->e[lo + 1], &s->e[hi], (size_t)(s->n - hi) * sizeof s->e[0]);
    s->n -= hi - lo - 1;
    *actual = cover;
    *sw = target;
    *fresh = true;
    return 0;
}

/* ---- records ------------------------------------------------------------ */

static void late_record(window_op_t *op, const eddy_record_t *rec, eddy_collector_t *out)
{
    if (op->late_records)
        (*op->late_records)++;
    if (op->c->emit_late) {
        eddy_record_t r = *rec;
        r.kind = EDDY_LATE;
        eddy_emit(out, &r);
    }
}

/* Adds rec to window w of the key (non-merging assigners). */
static int add_to_window(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                         eddy_window_t w, const eddy_record_t *rec, eddy_collector_t *out,
                         eddy_err_t *err)
{
    bool created;
    if (state_add(op, kg, key, klen, w, rec, &created, err) < 0)
        return -1;
    if (created && timers_for_new_window(op, kg, key, klen, w, err) < 0)
        return -1;
    /* Flink's EventTimeTrigger: a window already past end - 1 (but within
     * lateness) fires at once with the updated contents. */
    if (!op->c->processing && max_ts(w) <= op->wm)
        fire(op, out, kg, key, klen, w, w);
    return 0;
}

/* Folds a combiner's partial accumulator into window w of the key: what
 * add_to_window does for each of the records it stands for. */
static int merge_into_window(window_op_t *op, uint32_t kg, const char *key, uint32_t klen,
                             eddy_window_t w, const void *partial, eddy_collector_t *out,
                             eddy_err_t *err)
{
    bool created;
    if (acc_fold(op, kg, key, klen, w, partial, &created, err) < 0)
        return -1;
    if (created && timers_for_new_window(op, kg, key, klen, w, err) < 0)
        return -1;
    if (max_ts(w) <= op->wm)
        fire(op, out, kg, key, klen, w, w);
    return 0;
}

static bool combinable(const window_conf_t *c);

/* The accumulator merges (reduce, or an aggregate or accumulator with
 * merge(), which must be associative and commutative): panes and the
 * combiner are exact. */
static bool mergeable(const window_conf_t *c)
{
    return c->store == STORE_REDUCE || (c->store == STORE_AGGREGATE && c->kind->udf.aggregate.merge) ||
           (c->store == STORE_ACCUMULATOR && c->kind->udf.accumulator.merge);
}

/* A partial from the combiner (see "local pre-aggregation" below): the
 * accumulator of value records of one pane, timestamped with the pane's
 * start. Every record of a pane belongs to the same windows, so the partial
 * is judged like one of them, at this operator's own watermark, and at
 * once: late for all its windows, its records count as late; otherwise it
 * joins exactly the windows that are not late. */
static int window_partial(window_op_t *op, const eddy_record_t *rec, eddy_collector_t *out,
                          eddy_err_t *err)
{
    const window_conf_t *c = op->c;
    const char *key, *acc;
    uint32_t klen, alen;
    if (!combinable(c))
        return eddy_err_set(err, "window '%s' got a partial record it takes none of", c->kind->name);
    if (!eddy_partial_decode(rec, &key, &klen, &acc, &alen) || alen != c->acc_size || rec->value < 1)
        return eddy_err_set(err, "window '%s': a malformed partial record (%u bytes)", c->kind->name,
                            rec->len);
    /* The frame puts the accumulator at any offset: merge an aligned copy. */
    memcpy(op->acc_tmp, acc, c->acc_size);
    if (c->store == STORE_ACCUMULATOR && op->udf->accumulator.check &&
        op->udf->accumulator.check(op->prepared, op->acc_tmp, err) < 0)
        return eddy_err_wrap(err, "window '%s': a partial record's accumulator", c->kind->name);
    uint32_t kg = eddy_key_group_of(key, klen, op->max_kg);
    int64_t ts = rec->timestamp;
    bool skipped = true;
    if (c->panes) {
        if (pane_add(op, kg, key, klen, ts, NULL, op->acc_tmp, out, &skipped, err) < 0)
            return -1;
        if (skipped && ts <= op->wm && op->late_records)
            *op->late_records += (uint64_t)rec->value;
        return 0;
    }
    for (__int128 start = window_start(ts, c->offset, c->slide); start > (__int128)ts - c->size;
         start -= c->slide) {
        eddy_window_t w = {sat64(start), sat64(start + c->size)};
        if (window_late(op, w))
            continue;
        skipped = false;
        if (merge_into_window(op, kg, key, klen, w, op->acc_tmp, out, err) < 0)
            return -1;
    }
    if (skipped && ts <= op->wm && op->late_records)
        *op->late_records += (uint64_t)rec->value;
    return 0;
}

static int window_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                          eddy_err_t *err)
{
    window_op_t *op = self;
    const window_conf_t *c = op->c;
    op->live = true;
    if (rec->kind == EDDY_PARTIAL)
        return window_partial(op, rec, out, err);
    const char *key;
    uint32_t klen = op->key_fn(rec, &key);
    uint64_t h = eddy_key_hash(key, klen);
    uint32_t kg = eddy_key_group_of_hash(h, op->max_kg);
    int64_t ts = c->processing ? processing_time(op) : rec->timestamp;
    bool skipped = true;

    if (c->assigner == ASSIGN_TUMBLING) {
        __int128 start = window_start(ts, c->offset, c->size);
        eddy_window_t w = {sat64(start), sat64(start + c->size)};
        if (!window_late(op, w)) {
            skipped = false;
            if (add_to_window(op, kg, key, klen, w, rec, out, err) < 0)
                return -1;
        }
    } else if (c->panes) {
        if (pane_add(op, kg, key, klen, ts, rec, NULL, out, &skipped, err) < 0)
            return -1;
    } else if (c->assigner == ASSIGN_CUMULATE) {
        /* every window [start, start + k * slide) of ts's max window that
         * holds ts, the largest first */
        __int128 start = window_start(ts, c->offset, c->size);
        for (__int128 end = start + c->size; end > (__int128)ts; end -= c->slide) {
            eddy_window_t w = {sat64(start), sat64(end)};
            if (window_late(op, w))
                continue;
            skipped = false;
            if (add_to_window(op, kg, key, klen, w, rec, out, err) < 0)
                return -1;
        }
    } else if (c->assigner == ASSIGN_SLIDING) {
        /* Flink's order: the latest window first. */
        for (__int128 start = window_start(ts, c->offset, c->slide); start > (__int128)ts - c->size;
             start -= c->slide) {
            eddy_window_t w = {sat64(start), sat64(start + c->size)};
            if (window_late(op, w))
                continue;
            skipped = false;
            if (add_to_window(op, kg, key, klen, w, rec, out, err) < 0)
                return -1;
        }
    } else {
        eddy_window_t w = {ts, sat64((__int128)ts + c->gap)}, actual, sw;
        bool fresh, late;
        if (session_add(op, kg, h, key, klen, w, &actual, &sw, &fresh, &late, err) < 0)
            return -1;
        if (!late) {
            skipped = false;
            bool created;
            if (state_add(op, kg, key, klen, sw, rec, &created, err) < 0)
                return -1;
            if (fresh && timers_for_new_window(op, kg, key, klen, actual, err) < 0)
                return -1;
            if (!c->processing && max_ts(actual) <= op->wm)
                fire(op, out, kg, key, klen, actual, sw);
        }
    }
    /* Flink drops (and counts) a record only when it was skipped by every
     * window and is itself late; a record between sliding windows that are
     * not late is dropped silently, as there. */
    if (skipped && !c->processing && sat64((__int128)ts + c->lateness) <= op->wm)
        late_record(op, rec, out);
    return 0;
}

/* ---- timers firing ------------------------------------------------------ */

static int on_timer(void *vctx, const eddy_timer_t *t, eddy_err_t *err)
{
    window_op_t *op = vctx;
    if (t->ns_len != WIN_NS)
        return eddy_err_set(err, "window: a timer has a namespace of %u bytes", t->ns_len);
    const char *key = t->key;
    uint32_t klen = t->key_len, kg = t->kg;
    eddy_window_t w = window_decode(t->ns), sw = w;
    if (op->c->panes)
        return pane_timer(op, t, w, err);
    session_set_t *s = NULL;
    int64_t idx = -1;
    uint64_t h = 0;
    if (op->c->assigner == ASSIGN_SESSION) {
        h = eddy_key_hash(key, klen);
        session_set_t **slot = session_slot(op, kg, h, key, klen, false);
        s = slot ? *slot : NULL;
        idx = s ? session_find(s, w) : -1;
        if (idx < 0)
            return 0; /* a timer of a window merged away (Flink ignores it too) */
        sw = s->e[idx].sw;
    }
    /* Processing-time triggers fire on any of their timers; event-time ones
     * at end - 1 only (not at the cleanup timer of a lateness). */
    if (op->c->processing || t->time == max_ts(w))
        fire(op, op->out, kg, key, klen, w, sw);
    if (t->time == cleanup_time(op->c, w)) {
        state_clear(op, kg, key, klen, sw);
        timers_delete_window(op, kg, key, klen, w);
        if (s) {
            memmove(&s->e[idx], &s->e[idx + 1], (size_t)(s->n - (uint32_t)idx - 1) * sizeof s->e[0]);
            if (--s->n == 0)
                session_forget_key(op, kg, h, key, klen);
        }
    }
    return 0;
}

static int window_watermark(void *self, int64_t wm, eddy_collector_t *out, eddy_err_t *err)
{
    window_op_t *op = self;
    op->live = true;
    if (wm <= op->wm)
        return 0;
    op->wm = wm;
    if (op->c->processing)
        return 0;
    op->out = out;
    int rc = eddy_timers_advance(op->timers, EDDY_EVENT_TIME, wm, on_timer, op, err);
    op->out = NULL;
    return rc;
}

static int window_tick(void *self, int64_t now_ms, eddy_collector_t *out, eddy_err_t *err)
{
    window_op_t *op = self;
    if (!op->ticked || now_ms > op->proc_now)
        op->proc_now = now_ms;
    op->ticked = true;
    if (!op->c->processing)
        return 0;
    op->out = out;
    int rc = eddy_timers_advance(op->timers, EDDY_PROCESSING_TIME, op->proc_now, on_timer, op, err);
    op->out = NULL;
    return rc;
}

/* End of a bounded input: processing-time windows still open fire (the
 * runtime already moved event time to EDDY_WATERMARK_MAX). */
static int window_finish(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    window_op_t *op = self;
    if (!op->c->processing)
        return 0;
    op->out = out;
    int rc = eddy_timers_advance(op->timers, EDDY_PROCESSING_TIME, INT64_MAX, on_timer, op, err);
    op->out = NULL;
    return rc;
}

/* ---- lifecycle ---------------------------------------------------------- */

static void free_session(void *ctx, const void *key, uint32_t key_len, void *value)
{
    (void)ctx;
    (void)key;
    (void)key_len;
    free(*(session_set_t **)value);
}

static void sessions_drop_group(window_op_t *op, uint32_t kg)
{
    if (!op->sessions)
        return;
    eddy_keyed_state_foreach(op->sessions, kg, free_session, NULL);
    eddy_keyed_state_drop_group(op->sessions, kg);
}

static void window_close(void *self)
{
    window_op_t *op = self;
    if (!op)
        return;
    eddy_group_freeze_detach(&op->frozen); /* a view being written needs the state */
    if (op->sessions)
        for (uint32_t kg = 0; kg < op->max_kg; kg++)
            eddy_keyed_state_foreach(op->sessions, kg, free_session, NULL);
    eddy_keyed_state_destroy(&op->sessions);
    eddy_keyed_state_destroy(&op->accs);
    eddy_list_state_destroy(&op->lists);
    eddy_timers_destroy(&op->timers);
    if (op->prepared && op->udf->accumulator.close)
        op->udf->accumulator.close(op->prepared);
    if (op->max_by && op->udf->max_by.close)
        op->udf->max_by.close(op->max_by);
    free(op->scratch);
    free(op->acc_tmp);
    free(op->pane_acc);
    free(op);
}

static void *window_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    if (!ctx->key_fn || !ctx->config || ctx->max_parallelism == 0) {
        eddy_err_set(err, "window needs a keyed stage (key_by before it)");
        return NULL;
    }
    const window_conf_t *c = ctx->config;
    window_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->c = c;
    op->udf = &c->kind->udf;
    op->key_fn = ctx->key_fn;
    op->max_kg = ctx->max_parallelism;
    op->late_records = ctx->late_records;
    op->wm = EDDY_WATERMARK_MIN;
    op->timers = eddy_timers_new(op->max_kg);
    eddy_timers_before_fire(op->timers, touch_timer, op);
    bool ok = op->timers != NULL;
    if (c->store == STORE_LIST) {
        ok = ok && (op->lists = eddy_list_state_new(op->max_kg)) != NULL;
    } else {
        ok = ok && (op->accs = eddy_keyed_state_new(op->max_kg, c->acc_size)) != NULL;
        ok = ok && (op->acc_tmp = calloc(1, c->acc_size)) != NULL;
        ok = ok && (!c->panes || (op->pane_acc = calloc(1, c->acc_size)) != NULL);
    }
    if (c->assigner == ASSIGN_SESSION)
        ok = ok && (op->sessions = eddy_keyed_state_new(op->max_kg, sizeof(session_set_t *)));
    if (!ok) {
        window_close(op);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    if (c->store == STORE_ACCUMULATOR && op->udf->accumulator.open &&
        op->udf->accumulator.open(c->config, &op->prepared, err) < 0) {
        window_close(op);
        return NULL;
    }
    if (op->udf->max_by.open && op->udf->max_by.open(c->config, &op->max_by, err) < 0) {
        window_close(op);
        return NULL;
    }
    return op;
}

/* ---- per key group state ------------------------------------------------ */

/* One versioned envelope per key group (msgpack):
 *   [version, kg, assigner, store, acc_size, watermark,
 *    timers (bin | nil), accs (bin | nil), lists (bin | nil),
 *    [key (bin), [start, end, state_start, state_end, ...], ...]]
 * The parts are the timer service's, keyed state's and list state's own
 * per-group formats. Version 1: accumulators per (key, window); version 2:
 * per (key, pane) of a sliding window kept as panes (the same layout, the
 * pane in the window's place). Neither reads as the other: the error says
 * which config reads it. The watermark lets a restored instance continue
 * exactly: records it sees again are judged late as before. */

typedef struct session_writer {
    eddy_mpw_t *w;
} session_writer_t;

static void write_session(void *ctx, const void *key, uint32_t key_len, void *value)
{
    eddy_mpw_t *w = ((session_writer_t *)ctx)->w;
    const session_set_t *s = *(session_set_t **)value;
    eddy_mpw_bin(w, key, key_len);
    eddy_mpw_array(w, s->n * 4);
    for (uint32_t i = 0; i < s->n; i++) {
        eddy_mpw_i64(w, s->e[i].w.start);
        eddy_mpw_i64(w, s->e[i].w.end);
        eddy_mpw_i64(w, s->e[i].sw.start);
        eddy_mpw_i64(w, s->e[i].sw.end);
    }
}

static void count_list(void *ctx, const void *key, uint32_t key_len, const void *ns,
                       uint32_t ns_len, size_t n)
{
    (void)key;
    (void)key_len;
    (void)ns;
    (void)ns_len;
    *(size_t *)ctx += n;
}

static void write_part(eddy_mpw_t *w, const char *bytes, size_t len)
{
    if (bytes && len)
        eddy_mpw_bin(w, bytes, len);
    else
        msgpack_pack_nil(&w->pk);
}

/* A group's bytes are composed of two halves, so that a snapshot can take
 * each its own way (see "asynchronous snapshots"): the accumulators (an
 * eddy_keyed_state_t, frozen by its own copy-on-write view) and the rest -
 * timers, element lists and session sets - written by write_rest into one
 * buffer: u8 "lists or sessions hold something", then three times u64
 * length and bytes: the timers' group, the lists' group (0 bytes: no
 * lists) and the session sets as packed into the group's array (their
 * array header included). compose() makes the group's bytes of the two;
 * what it needs of the operator is copied into a win_shape_t, since a
 * snapshot may outlive the operator. */

typedef struct win_shape {
    uint64_t version, assigner, store, acc_size;
} win_shape_t;

static win_shape_t shape_of(const window_op_t *op)
{
    return (win_shape_t){op->c->panes ? WIN_STATE_VERSION_PANES : WIN_STATE_VERSION,
                         op->c->assigner, op->c->store, op->c->acc_size};
}

#define REST_PARTS 3

static void put_u64le(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint64_t get_u64le(const char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)(unsigned char)p[i] << (8 * i);
    return v;
}

/* Reads only group kg's timers, lists and session sets (and op's
 * structure pointers), so a snapshot's thread may call it. */
static int write_rest(window_op_t *op, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    *out = NULL;
    *len = 0;
    if (kg >= op->max_kg)
        return eddy_err_set(err, "window: key group %u out of range", kg);
    char *parts[REST_PARTS] = {NULL, NULL, NULL};
    size_t lens[REST_PARTS] = {0, 0, 0};
    size_t entries = 0;
    uint32_t n_keys = op->sessions ? (uint32_t)eddy_keyed_state_group_keys(op->sessions, kg) : 0;
    int rc = eddy_timers_write_group(op->timers, kg, &parts[0], &lens[0], err);
    if (rc == 0 && op->lists) {
        eddy_list_state_foreach(op->lists, kg, count_list, &entries);
        rc = eddy_list_state_write_group(op->lists, kg, &parts[1], &lens[1], err);
    }
    if (rc == 0) {
        eddy_mpw_t w;
        eddy_mpw_init(&w);
        eddy_mpw_array(&w, n_keys * 2);
        if (n_keys) {
            session_writer_t sw = {&w};
            eddy_keyed_state_foreach(op->sessions, kg, write_session, &sw);
        }
        parts[2] = eddy_mpw_release(&w, &lens[2]);
        eddy_mpw_free(&w);
        if (!parts[2])
            rc = eddy_err_set(err, "out of memory");
    }
    size_t total = 1 + 8 * REST_PARTS;
    for (int i = 0; i < REST_PARTS; i++)
        total += lens[i];
    if (rc == 0 && !(*out = malloc(total)))
        rc = eddy_err_set(err, "out of memory");
    if (rc == 0) {
        char *p = *out;
        *p++ = (char)(n_keys > 0 || entries > 0);
        for (int i = 0; i < REST_PARTS; i++) {
            put_u64le(p, lens[i]);
            p += 8;
            if (lens[i])
                memcpy(p, parts[i], lens[i]);
            p += lens[i];
        }
        *len = total;
    }
    for (int i = 0; i < REST_PARTS; i++)
        free(parts[i]);
    return rc;
}

/* Group kg's bytes from its accumulators' bytes (NULL: none) and
 * write_rest's buffer, at watermark wm. Timers exist only with state, so
 * a group without state is empty (NULL, 0). */
static int compose(win_shape_t shape, int64_t wm, uint32_t kg, const char *accs, size_t accs_len,
                   const char *rest, size_t rest_len, char **out, size_t *len, eddy_err_t *err)
{
    *out = NULL;
    *len = 0;
    const char *parts[REST_PARTS];
    size_t lens[REST_PARTS];
    const char *p = rest, *end = rest + rest_len;
    if (rest_len < 1)
        return eddy_err_set(err, "window: key group %u: a truncated snapshot part", kg);
    bool holds = *p++ != 0;
    for (int i = 0; i < REST_PARTS; i++) {
        if ((size_t)(end - p) < 8 || get_u64le(p) > (size_t)(end - p) - 8)
            return eddy_err_set(err, "window: key group %u: a truncated snapshot part", kg);
        lens[i] = get_u64le(p);
        parts[i] = p + 8;
        p += 8 + lens[i];
    }
    if (!accs && !holds)
        return 0;
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 10);
    eddy_mpw_u64(&w, shape.version);
    eddy_mpw_u64(&w, kg);
    eddy_mpw_u64(&w, shape.assigner);
    eddy_mpw_u64(&w, shape.store);
    eddy_mpw_u64(&w, shape.acc_size);
    eddy_mpw_i64(&w, wm);
    write_part(&w, parts[0], lens[0]);
    write_part(&w, accs, accs_len);
    write_part(&w, parts[1], lens[1]);
    msgpack_sbuffer_write(&w.buf, parts[2], lens[2]); /* the session sets, packed */
    *out = eddy_mpw_release(&w, len);
    eddy_mpw_free(&w);
    return *out ? 0 : eddy_err_set(err, "out of memory");
}

static int window_write_group(void *self, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    window_op_t *op = self;
    char *rest = NULL, *accs = NULL;
    size_t rest_len = 0, accs_len = 0;
    int rc = write_rest(op, kg, &rest, &rest_len, err);
    if (rc == 0 && op->accs && eddy_keyed_state_group_keys(op->accs, kg))
        rc = eddy_keyed_state_write_group(op->accs, kg, &accs, &accs_len, err);
    if (rc == 0)
        rc = compose(shape_of(op), op->wm, kg, accs, accs_len, rest, rest_len, out, len, err);
    free(rest);
    free(accs);
    return rc;
}

/* ---- asynchronous snapshots ----------------------------------------------
 * snapshot_view freezes the groups of a checkpoint in O(key groups): the
 * accumulators through keyed_state's copy-on-write view (a record that
 * updates one copies that entry, once), the rest of each group through a
 * state/group_freeze.h view of write_rest, and the watermark by value.
 * The snapshot writer's thread serialises each group: the accumulators
 * from their view, the rest from the live structures (timers, element
 * lists and session sets are partitioned by key group, and write_rest
 * reads only that group's), while touch() makes this thread take a
 * pending group's rest itself before it changes the group's timers, lists
 * or session sets - a new window, a firing, a list element, a session
 * merge; a record that only updates an existing window's accumulator
 * touches nothing. A view still being written when the next checkpoint
 * takes one stays frozen beside it (touch settles both); close detaches
 * them, serialising the rest they have not taken yet. */

typedef struct window_snap {
    window_op_t *op; /* for write_rest, only until the owner detaches */
    win_shape_t shape;
    int64_t wm;
    eddy_keyed_state_view_t *accs; /* NULL: no accumulators */
} window_snap_t;

static int snap_write_rest(void *arg, uint32_t kg, char **out, size_t *len, eddy_err_t *err)
{
    const window_snap_t *snap = arg;
    return write_rest(snap->op, kg, out, len, err);
}

/* On the owner's thread (the last reference goes there: the owner's
 * detach, or the unit's release on the worker's thread). */
static void snap_free(void *arg)
{
    window_snap_t *snap = arg;
    eddy_keyed_state_view_destroy(&snap->accs);
    free(snap);
}

static void *window_snapshot_view(void *self, const uint32_t *groups, uint32_t n, eddy_err_t *err)
{
    window_op_t *op = self;
    window_snap_t *snap = calloc(1, sizeof *snap);
    if (snap) {
        *snap = (window_snap_t){op, shape_of(op), op->wm, NULL};
        if (op->accs && !(snap->accs = eddy_keyed_state_view_new(op->accs))) {
            free(snap);
            snap = NULL;
        }
    }
    eddy_group_freeze_t *view =
        snap ? eddy_group_freeze_take(&op->frozen, op->max_kg, groups, n, snap_write_rest, snap,
                                      snap_free)
             : NULL;
    if (!view)
        eddy_err_set(err, "out of memory");
    return view; /* the reader's reference; op->frozen holds the owner's */
}

/* The snapshot writer's thread. */
static int window_view_write_group(void *view, uint32_t kg, char **out, size_t *len,
                                   eddy_err_t *err)
{
    const window_snap_t *snap = eddy_group_freeze_arg(view);
    char *rest = NULL, *accs = NULL;
    size_t rest_len = 0, accs_len = 0;
    int rc = eddy_group_freeze_write_group(view, kg, &rest, &rest_len, err);
    if (rc == 0 && snap->accs && eddy_keyed_state_view_group_keys(snap->accs, kg))
        rc = eddy_keyed_state_view_write_group(snap->accs, kg, &accs, &accs_len, err);
    if (rc == 0)
        rc = compose(snap->shape, snap->wm, kg, accs, accs_len, rest, rest_len, out, len, err);
    free(rest);
    free(accs);
    return rc;
}

static void window_drop_group(void *self, uint32_t kg)
{
    window_op_t *op = self;
    if (kg >= op->max_kg)
        return;
    touch(op, kg);
    eddy_timers_drop_group(op->timers, kg);
    if (op->accs)
        eddy_keyed_state_drop_group(op->accs, kg);
    if (op->lists)
        eddy_list_state_drop_group(op->lists, kg);
    sessions_drop_group(op, kg);
}

typedef struct acc_check {
    window_op_t *op;
    uint32_t kg;
    bool bad;
    eddy_err_t why; /* an accumulator's check() refused one */
    bool refused;
} acc_check_t;

static void check_acc_key(void *ctx, const void *key, uint32_t key_len, void *value)
{
    acc_check_t *c = ctx;
    const eddy_window_udf_t *u = c->op->udf;
    if (key_len < WIN_NS || eddy_key_group_of(key, key_len - WIN_NS, c->op->max_kg) != c->kg)
        c->bad = true;
    else if (!c->refused && c->op->c->store == STORE_ACCUMULATOR && u->accumulator.check &&
             u->accumulator.check(c->op->prepared, value, &c->why) < 0)
        c->refused = true;
}

/* A nil or bin part: its bytes (NULL/0 for nil). */
static const char *read_part(eddy_mpr_t *r, uint32_t *len)
{
    *len = 0;
    if (r->ok && r->next < r->count && r->items[r->next].type == MSGPACK_OBJECT_NIL) {
        r->next++;
        return NULL;
    }
    return eddy_mpr_bytes(r, UINT32_MAX, len);
}

static int read_sessions(window_op_t *op, uint32_t kg, eddy_mpr_t *r, eddy_err_t *err)
{
    const msgpack_object *si;
    uint32_t sc, sn;
    uint32_t n = eddy_mpr_enter(r, UINT32_MAX, &si, &sc, &sn);
    if (r->ok && (n % 2 || (n && !op->sessions)))
        eddy_mpr_fail(r, n % 2 ? "sessions: odd element count" : "sessions for a non-session window");
    for (uint32_t k = 0; r->ok && k < n / 2; k++) {
        uint32_t klen;
        const char *key = eddy_mpr_bytes(r, EDDY_RECORD_MAX_BYTES, &klen);
        const msgpack_object *ii;
        uint32_t ic, in;
        uint32_t m = eddy_mpr_enter(r, UINT32_MAX, &ii, &ic, &in);
        if (!r->ok)
            break;
        if (m == 0 || m % 4) {
            eddy_mpr_fail(r, "sessions: a window set needs 4 integers per window");
            break;
        }
        if (eddy_key_group_of(key, klen, op->max_kg) != kg) {
            eddy_mpr_fail(r, "sessions: a key of another key group");
            break;
        }
        session_set_t *s = malloc(sizeof *s + (size_t)(m / 4) * sizeof s->e[0]);
        if (!s) {
            eddy_mpr_fail(r, "out of memory");
            break;
        }
        s->n = s->cap = m / 4;
        for (uint32_t i = 0; i < s->n; i++) {
            s->e[i].w.start = eddy_mpr_i64(r);
            s->e[i].w.end = eddy_mpr_i64(r);
            s->e[i].sw.start = eddy_mpr_i64(r);
            s->e[i].sw.end = eddy_mpr_i64(r);
            if (r->ok && (s->e[i].w.start >= s->e[i].w.end || s->e[i].sw.start >= s->e[i].sw.end ||
                          (i && !(s->e[i - 1].w.end < s->e[i].w.start))))
                eddy_mpr_fail(r, "sessions: windows must be non-empty, sorted and disjoint");
        }
        eddy_mpr_leave(r, ii, ic, in);
        bool created = false;
        session_set_t **slot =
            r->ok ? eddy_keyed_state_upsert(op->sessions, kg, eddy_key_hash(key, klen), key, klen,
                                            &created)
                  : NULL;
        if (!slot || !created) {
            free(s);
            if (r->ok)
                eddy_mpr_fail(r, slot ? "sessions: a key appears twice" : "out of memory");
            break;
        }
        *slot = s;
    }
    eddy_mpr_leave(r, si, sc, sn);
    (void)err;
    return r->ok ? 0 : -1;
}

/* max_by: lists restored from a snapshot written without it (every
 * element) keep their highest-ranked elements, in order, as if max_by had
 * kept them. */
typedef struct list_refs {
    eddy_buf_t buf; /* per list: key length (4 bytes), key, namespace */
    bool oom;
} list_refs_t;

static void collect_list(void *ctx, const void *key, uint32_t key_len, const void *ns,
                         uint32_t ns_len, size_t n)
{
    list_refs_t *r = ctx;
    if (n < 2 || ns_len != WIN_NS || r->oom)
        return;
    r->oom = eddy_buf_add(&r->buf, (const char *)&key_len, sizeof key_len) < 0 ||
             eddy_buf_add(&r->buf, key, key_len) < 0 || eddy_buf_add(&r->buf, ns, WIN_NS) < 0;
}

static int prune_list(window_op_t *op, eddy_list_state_t *tmp, uint32_t kg, const char *key,
                      uint32_t klen, const unsigned char *ns)
{
    int (*rank)(void *, const eddy_record_t *, const eddy_record_t *) = op->udf->max_by.rank;
    size_t n = eddy_list_state_size(op->lists, kg, key, klen, ns, WIN_NS);
    eddy_record_t best, r;
    bool mixed = false;
    eddy_list_state_at(op->lists, kg, key, klen, ns, WIN_NS, 0, &best);
    for (size_t i = 1; i < n && eddy_list_state_at(op->lists, kg, key, klen, ns, WIN_NS, i, &r); i++) {
        int cmp = rank(op->max_by, &r, &best);
        mixed |= cmp != 0;
        if (cmp > 0)
            best = r;
    }
    if (!mixed)
        return 0;
    for (size_t i = 0; i < n && eddy_list_state_at(op->lists, kg, key, klen, ns, WIN_NS, i, &r); i++)
        if (rank(op->max_by, &r, &best) == 0 &&
            eddy_list_state_add(tmp, kg, key, klen, ns, WIN_NS, &r) < 0)
            return -1;
    eddy_list_state_clear(op->lists, kg, key, klen, ns, WIN_NS);
    size_t m = eddy_list_state_size(tmp, kg, key, klen, ns, WIN_NS);
    for (size_t i = 0; i < m && eddy_list_state_at(tmp, kg, key, klen, ns, WIN_NS, i, &r); i++)
        if (eddy_list_state_add(op->lists, kg, key, klen, ns, WIN_NS, &r) < 0)
            return -1;
    eddy_list_state_clear(tmp, kg, key, klen, ns, WIN_NS);
    return 0;
}

static int prune_lists(window_op_t *op, uint32_t kg, eddy_err_t *err)
{
    list_refs_t refs = {.oom = false};
    eddy_list_state_foreach(op->lists, kg, collect_list, &refs);
    eddy_list_state_t *tmp = refs.buf.len ? eddy_list_state_new(op->max_kg) : NULL;
    int rc = refs.oom || (refs.buf.len && !tmp) ? -1 : 0;
    for (size_t at = 0; rc == 0 && at < refs.buf.len;) {
        uint32_t klen;
        memcpy(&klen, refs.buf.p + at, sizeof klen);
        const char *key = refs.buf.p + at + sizeof klen;
        rc = prune_list(op, tmp, kg, key, klen, (const unsigned char *)key + klen);
        at += sizeof klen + klen + WIN_NS;
    }
    eddy_list_state_destroy(&tmp);
    eddy_buf_free(&refs.buf);
    return rc < 0 ? eddy_err_set(err, "window: out of memory keeping max_by's elements") : 0;
}

static int window_read_group(void *self, uint32_t kg, const void *data, size_t len, eddy_err_t *err)
{
    window_op_t *op = self;
    if (kg >= op->max_kg)
        return eddy_err_set(err, "window: key group %u out of range", kg);
    window_drop_group(op, kg);
    if (len == 0)
        return 0;
    eddy_mpr_t r;
    if (eddy_mpr_open(&r, data, len, err) < 0)
        return eddy_err_wrap(err, "window state of key group %u", kg);
    uint64_t version = eddy_mpr_u64(&r, UINT32_MAX);
    uint64_t gk = eddy_mpr_u64(&r, UINT32_MAX);
    uint64_t assigner = eddy_mpr_u64(&r, 2);
    uint64_t store = eddy_mpr_u64(&r, STORE_ACCUMULATOR);
    uint64_t acc_size = eddy_mpr_u64(&r, WIN_MAX_ACC);
    int64_t wm = eddy_mpr_i64(&r);
    int rc = 0;
    unsigned expect = op->c->panes ? WIN_STATE_VERSION_PANES : WIN_STATE_VERSION;
    if (r.ok && version == WIN_STATE_VERSION && expect == WIN_STATE_VERSION_PANES)
        rc = eddy_err_set(err, "window state of key group %u keeps one accumulator per sliding window "
                          "(written before eddy kept sliding windows as panes); this window keeps panes: "
                          "restore it with the window's config 'panes' false", kg);
    else if (r.ok && version == WIN_STATE_VERSION_PANES && expect == WIN_STATE_VERSION)
        rc = eddy_err_set(err, "window state of key group %u keeps sliding windows as panes; this window "
                          "keeps one accumulator per window (its config 'panes' is false, or its "
                          "function no longer merges)", kg);
    else if (r.ok && version != expect)
        rc = eddy_err_set(err, "window state of key group %u has version %" PRIu64 ", expected %u",
                          kg, version, expect);
    else if (r.ok && gk != kg)
        rc = eddy_err_set(err, "window state of key group %" PRIu64 " given for key group %u", gk, kg);
    else if (r.ok && (assigner == ASSIGN_SESSION) != (op->c->assigner == ASSIGN_SESSION))
        rc = eddy_err_set(err, "window state of key group %u was written by a %s window, this one is %s",
                          kg, assigner_names[assigner], assigner_names[op->c->assigner]);
    else if (r.ok && store != op->c->store)
        rc = eddy_err_set(err, "window state of key group %u holds %s, this window keeps %s", kg,
                          store_names[store], store_names[op->c->store]);
    else if (r.ok && acc_size != op->c->acc_size)
        rc = eddy_err_set(err, "window state of key group %u holds %s of %" PRIu64 " bytes, this window's are %zu bytes",
                          kg, store_names[store], acc_size, op->c->acc_size);
    bool own_msg = rc < 0; /* already names the key group */
    uint32_t tl = 0, al = 0, ll = 0;
    const char *tb = NULL, *ab = NULL, *lb = NULL;
    if (rc == 0) {
        tb = read_part(&r, &tl);
        ab = read_part(&r, &al);
        lb = read_part(&r, &ll);
        if (r.ok && ((ab && !op->accs) || (lb && !op->lists)))
            eddy_mpr_fail(&r, "state of another kind of window");
    }
    if (rc == 0 && r.ok && tb && eddy_timers_read_group(op->timers, kg, tb, tl, err) < 0)
        rc = -1;
    if (rc == 0 && r.ok && ab) {
        if (eddy_keyed_state_read_group(op->accs, kg, ab, al, err) < 0) {
            rc = -1;
        } else {
            acc_check_t check = {.op = op, .kg = kg};
            eddy_keyed_state_foreach(op->accs, kg, check_acc_key, &check);
            if (check.bad)
                eddy_mpr_fail(&r, "accumulators: a key of another key group");
            else if (check.refused)
                rc = eddy_err_set(err, "an accumulator: %s", check.why.msg);
        }
    }
    if (rc == 0 && r.ok && lb && eddy_list_state_read_group(op->lists, kg, lb, ll, err) < 0)
        rc = -1;
    if (rc == 0 && r.ok && lb && op->udf->max_by.rank && prune_lists(op, kg, err) < 0)
        rc = -1;
    if (rc == 0 && r.ok)
        read_sessions(op, kg, &r, err);
    if (rc == 0 && eddy_mpr_finish(&r, "window state", err) < 0)
        rc = -1;
    eddy_mpr_close(&r);
    if (rc < 0) {
        window_drop_group(op, kg);
        return own_msg ? -1 : eddy_err_wrap(err, "window state of key group %u", kg);
    }
    /* A restore (groups read before any input) goes on from the groups'
     * clock, so that records seen again are judged late as before. A group
     * moved into a running instance (a rescale) does not move its clock:
     * its timers up to that watermark fired where it came from, and
     * records of this instance's own groups that the input has not yet
     * declared late would be dropped as late. */
    if (wm > op->wm && !op->live)
        op->wm = wm;
    return 0;
}

/* ---- local pre-aggregation (combiner) ------------------------------------ */

/* Local-global aggregation for windows (api/operator.h "combiner"): chained
 * before the shuffle, the combiner folds records per (key, pane), a pane
 * being a slice of gcd(size, slide) of time aligned to the offset, so that
 * every record of a pane belongs to the same windows; it sends one
 * EDDY_PARTIAL per (key, pane): the accumulator as bytes, the number of
 * records as value, the pane's start as timestamp. It flushes before every
 * watermark and barrier it lets pass and at end of input, so it holds no
 * state across a checkpoint and the window operator gets each partial
 * before any watermark that followed its records.
 *
 * Exactness: the combiner judges nothing late itself. It cannot know the
 * watermark the window operator will have (another channel's watermark,
 * an idle channel's return or a restored key group's watermark may put it
 * ahead of this task's), so the window operator judges each partial at its
 * own watermark, at once, as it would each of the pane's records in turn:
 * late for every window, all of them count as late; otherwise the
 * accumulator joins exactly the windows that are not late. That holds only
 * where a record's fate does not depend on its own timestamp within its
 * pane nor on being seen one by one, hence the combiner only where
 * - event time: a processing-time window assigns a record by the window
 *   operator's clock when it arrives, which the combiner cannot know;
 * - tumbling or sliding: a session's extent (and whether a record is late
 *   for it) depends on the order records merge in, which a pre-merged
 *   session would hide;
 * - an accumulator with merge (reduce or aggregate.merge; both must be
 *   associative and commutative, as Flink requires): element lists have no
 *   merge and a process function must see every element;
 * - lateness_ms = 0: within a lateness each late record fires the window
 *   again, and a partial would fire it once;
 * - late = "drop": late = "emit" sends every late record on unchanged, and
 *   a partial no longer has them.
 * Records belonging to no window (sliding with slide > size) pass as they
 * are, as do records whose pane is near the int64 limits (windows saturate
 * there), and partials are not combined again. */
#define COMBINER_MAX_KEYS 16384u
/* Accumulators may be large (sketches): the combiner also flushes by bytes. */
#define COMBINER_MAX_BYTES ((size_t)16 << 20)
#define COMBINER_TS_LIMIT (INT64_C(1) << 62)

static bool combinable(const window_conf_t *c)
{
    /* cumulate: its partial records would need its own assignment */
    if (c->processing || c->assigner == ASSIGN_SESSION || c->assigner == ASSIGN_CUMULATE ||
        c->lateness != 0 || c->emit_late)
        return false;
    return mergeable(c);
}

typedef struct combiner {
    const window_conf_t *c;
    const eddy_window_udf_t *udf;
    eddy_key_fn key_fn;
    eddy_keyed_state_t *panes; /* key ++ pane start -> record count ++ accumulator */
    void *prepared;            /* STORE_ACCUMULATOR: this combiner's handle */
    char *scratch;             /* a lookup key, then a partial's frame */
    size_t scratch_cap;
    eddy_collector_t *out;     /* while flushing */
    bool oom;
} combiner_t;

static bool scratch_fit(combiner_t *cb, size_t need)
{
    if (need <= cb->scratch_cap)
        return true;
    char *p = realloc(cb->scratch, need);
    if (!p)
        return false;
    cb->scratch = p;
    cb->scratch_cap = need;
    return true;
}

static void combiner_close(void *self)
{
    combiner_t *cb = self;
    if (!cb)
        return;
    if (cb->prepared && cb->udf->accumulator.close)
        cb->udf->accumulator.close(cb->prepared);
    eddy_keyed_state_destroy(&cb->panes);
    free(cb->scratch);
    free(cb);
}

static void *combiner_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    if (!ctx->key_fn || !ctx->config) {
        eddy_err_set(err, "a window combiner needs the window's config and key selector");
        return NULL;
    }
    const window_conf_t *c = ctx->config;
    combiner_t *cb = calloc(1, sizeof *cb);
    if (cb)
        cb->panes = eddy_keyed_state_new(1, sizeof(int64_t) + c->acc_size);
    if (!cb || !cb->panes) {
        combiner_close(cb);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    cb->c = c;
    cb->udf = &c->kind->udf;
    cb->key_fn = ctx->key_fn;
    if (c->store == STORE_ACCUMULATOR && cb->udf->accumulator.open &&
        cb->udf->accumulator.open(c->config, &cb->prepared, err) < 0) {
        combiner_close(cb);
        return NULL;
    }
    return cb;
}

static void emit_pane(void *ctx, const void *k, uint32_t k_len, void *value)
{
    combiner_t *cb = ctx;
    uint32_t klen = k_len - 8;
    if (!scratch_fit(cb, eddy_partial_size(klen, cb->c->acc_size))) {
        cb->oom = true;
        return;
    }
    int64_t count;
    memcpy(&count, value, sizeof count);
    uint32_t len = eddy_partial_encode(cb->scratch, k, klen, (const char *)value + sizeof count,
                                       cb->c->acc_size);
    eddy_record_t rec = {cb->scratch, len, EDDY_PARTIAL, count,
                         get_be64((const unsigned char *)k + klen)};
    eddy_emit(cb->out, &rec);
}

static int combiner_flush(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    combiner_t *cb = self;
    cb->out = out;
    eddy_keyed_state_foreach(cb->panes, 0, emit_pane, cb);
    eddy_keyed_state_drop_group(cb->panes, 0);
    cb->out = NULL;
    if (cb->oom)
        return eddy_err_set(err, "out of memory in the window combiner");
    return 0;
}

static int combiner_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                            eddy_err_t *err)
{
    combiner_t *cb = self;
    const window_conf_t *c = cb->c;
    int64_t ts = rec->timestamp;
    if (rec->kind == EDDY_PARTIAL || rec->kind == EDDY_LATE || ts < -COMBINER_TS_LIMIT ||
        ts > COMBINER_TS_LIMIT || window_start(ts, c->offset, c->slide) <= (__int128)ts - c->size) {
        eddy_emit(out, rec);
        return 0;
    }
    int64_t pane = (int64_t)window_start(ts, c->offset, c->pane);
    const char *key;
    uint32_t klen = cb->key_fn(rec, &key);
    if (!scratch_fit(cb, (size_t)klen + 8))
        return eddy_err_set(err, "out of memory in the window combiner");
    if (klen)
        memcpy(cb->scratch, key, klen);
    put_be64((unsigned char *)cb->scratch + klen, pane);
    bool created;
    char *v = eddy_keyed_state_upsert(cb->panes, 0, eddy_key_hash(cb->scratch, klen + 8),
                                      cb->scratch, klen + 8, &created);
    if (!v)
        return eddy_err_set(err, "out of memory in the window combiner");
    int64_t count;
    memcpy(&count, v, sizeof count);
    count++;
    memcpy(v, &count, sizeof count);
    acc_add(c->store, cb->udf, cb->prepared, v + sizeof count, created, rec);
    size_t keys = eddy_keyed_state_keys(cb->panes);
    if (created && (keys >= COMBINER_MAX_KEYS || keys * c->acc_size >= COMBINER_MAX_BYTES))
        return combiner_flush(cb, out, err);
    return 0;
}

static int combiner_watermark(void *self, int64_t wm, eddy_collector_t *out, eddy_err_t *err)
{
    (void)wm;
    return combiner_flush(self, out, err);
}

static const eddy_operator_ops_t window_combiner_ops = {
    .kind = "window_combiner", .open = combiner_open, .process = combiner_process,
    .finish = combiner_flush, .close = combiner_close, .watermark = combiner_watermark,
    .flush = combiner_flush};

static const eddy_operator_ops_t *window_combiner(const void *config)
{
    const window_conf_t *c = config;
    return c->combine && combinable(c) ? &window_combiner_ops : NULL;
}

static const eddy_operator_ops_t window_ops = {
    .kind = "window",
    .open = window_open,
    .process = window_process,
    .finish = window_finish,
    .close = window_close,
    .watermark = window_watermark,
    .tick = window_tick,
    .write_group = window_write_group,
    .read_group = window_read_group,
    .drop_group = window_drop_group,
    .snapshot_view = window_snapshot_view,
    .view_write_group = window_view_write_group,
    .view_release = eddy_group_freeze_view_release,
    .combiner = window_combiner,
};

/* ---- configuration ------------------------------------------------------ */

/* The type of key in cfg, or -1 when absent. */
static int config_type(const eddy_config_t *cfg, const char *key)
{
    for (size_t i = 0; i < eddy_config_count(cfg); i++)
        if (!strcmp(eddy_config_key_at(cfg, i), key))
            return (int)eddy_config_type_at(cfg, i);
    return -1;
}

static int get_int(const eddy_config_t *cfg, const char *kind, const char *key, int64_t dflt,
                   int64_t *v, eddy_err_t *err)
{
    int t = config_type(cfg, key);
    if (t >= 0 && t != EDDY_CONFIG_INT)
        return eddy_err_set(err, "window '%s': '%s' must be an integer (milliseconds)", kind, key);
    *v = t < 0 ? dflt : eddy_config_int(cfg, key, dflt);
    return 0;
}

static int get_str(const eddy_config_t *cfg, const char *kind, const char *key, const char *dflt,
                   const char **v, eddy_err_t *err)
{
    int t = config_type(cfg, key);
    if (t >= 0 && t != EDDY_CONFIG_STR)
        return eddy_err_set(err, "window '%s': '%s' must be a string", kind, key);
    *v = eddy_config_str(cfg, key, dflt);
    return 0;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* An accumulator's bytes for this config: it is opened once to ask. */
static int accumulator_size(const eddy_config_t *cfg, const window_kind_t *k, size_t *size,
                            eddy_err_t *err)
{
    const eddy_window_accumulator_t *a = &k->udf.accumulator;
    void *prepared = NULL;
    if (a->open && a->open(cfg, &prepared, err) < 0)
        return eddy_err_wrap(err, "window '%s'", k->name);
    *size = a->size(prepared);
    if (a->close && prepared)
        a->close(prepared);
    if (*size == 0 || *size > WIN_MAX_ACC)
        return eddy_err_set(err, "window '%s': its accumulator is %zu bytes for this config; 1..%u are allowed",
                            k->name, *size, WIN_MAX_ACC);
    return 0;
}

static int parse_config(const eddy_config_t *cfg, const window_kind_t *k, window_conf_t *c,
                        eddy_err_t *err)
{
    const char *name = k->name, *assigner = NULL, *time = NULL, *late = NULL;
    if (get_str(cfg, name, "assigner", NULL, &assigner, err) < 0 ||
        get_str(cfg, name, "time", "event", &time, err) < 0 ||
        get_str(cfg, name, "late", "drop", &late, err) < 0 ||
        get_int(cfg, name, "size_ms", 0, &c->size, err) < 0 ||
        get_int(cfg, name, "slide_ms", 0, &c->slide, err) < 0 ||
        get_int(cfg, name, "offset_ms", 0, &c->offset, err) < 0 ||
        get_int(cfg, name, "gap_ms", 0, &c->gap, err) < 0 ||
        get_int(cfg, name, "lateness_ms", 0, &c->lateness, err) < 0)
        return -1;
    if (!assigner)
        return eddy_err_set(err, "window '%s': 'assigner' is required (tumbling, sliding, session or "
                            "cumulate)", name);
    if (!strcmp(assigner, "tumbling"))
        c->assigner = ASSIGN_TUMBLING;
    else if (!strcmp(assigner, "sliding"))
        c->assigner = ASSIGN_SLIDING;
    else if (!strcmp(assigner, "session"))
        c->assigner = ASSIGN_SESSION;
    else if (!strcmp(assigner, "cumulate"))
        c->assigner = ASSIGN_CUMULATE;
    else
        return eddy_err_set(err, "window '%s': 'assigner' is '%s'; expected tumbling, sliding, "
                            "session or cumulate", name, assigner);
    /* Keys of other assigners are mistakes, not parameters of the user's. */
    static const char *const only[4][3] = {{"slide_ms", "gap_ms", NULL},
                                           {"gap_ms", NULL, NULL},
                                           {"size_ms", "slide_ms", "offset_ms"},
                                           {"gap_ms", NULL, NULL}};
    for (int i = 0; i < 3 && only[c->assigner][i]; i++)
        if (eddy_config_has(cfg, only[c->assigner][i]))
            return eddy_err_set(err, "window '%s': '%s' does not apply to assigner '%s'", name,
                                only[c->assigner][i], assigner);
    if (c->assigner == ASSIGN_SESSION) {
        if (c->gap <= 0)
            return eddy_err_set(err, "window '%s': 'gap_ms' must be > 0 for session windows (got %" PRId64 ")",
                                name, c->gap);
    } else {
        if (c->size <= 0)
            return eddy_err_set(err, "window '%s': 'size_ms' must be > 0 for %s windows (got %" PRId64 ")",
                                name, assigner, c->size);
        if (c->assigner == ASSIGN_SLIDING) {
            if (c->slide <= 0)
                return eddy_err_set(err, "window '%s': 'slide_ms' must be > 0 (got %" PRId64 ")", name,
                                    c->slide);
            if (c->size / c->slide + 1 > WIN_MAX_PER_RECORD)
                return eddy_err_set(err, "window '%s': 'size_ms' / 'slide_ms' puts a record in more than %d windows",
                                    name, WIN_MAX_PER_RECORD);
        } else if (c->assigner == ASSIGN_CUMULATE) {
            if (c->slide <= 0 || c->size % c->slide)
                return eddy_err_set(err, "window '%s': 'slide_ms' (the step) must be > 0 and divide "
                                    "'size_ms' (got %" PRId64 " and %" PRId64 ")", name, c->slide,
                                    c->size);
            if (c->size / c->slide > WIN_MAX_PER_RECORD)
                return eddy_err_set(err, "window '%s': 'size_ms' / 'slide_ms' puts a record in more than %d windows",
                                    name, WIN_MAX_PER_RECORD);
        } else {
            c->slide = c->size;
        }
        int64_t period = c->assigner == ASSIGN_CUMULATE ? c->size : c->slide;
        if (c->offset <= -period || c->offset >= period)
            return eddy_err_set(err, "window '%s': 'offset_ms' must satisfy |offset_ms| < %s (got %" PRId64 ")",
                                name, c->assigner == ASSIGN_SLIDING ? "'slide_ms'" : "'size_ms'",
                                c->offset);
    }
    if (!strcmp(time, "event"))
        c->processing = false;
    else if (!strcmp(time, "processing"))
        c->processing = true;
    else
        return eddy_err_set(err, "window '%s': 'time' is '%s'; expected event or processing", name, time);
    if (c->lateness < 0)
        return eddy_err_set(err, "window '%s': 'lateness_ms' must be >= 0 (got %" PRId64 ")", name,
                            c->lateness);
    if (c->processing && eddy_config_has(cfg, "lateness_ms"))
        return eddy_err_set(err, "window '%s': 'lateness_ms' applies to event time only", name);
    int ct = config_type(cfg, "combine");
    if (ct >= 0 && ct != EDDY_CONFIG_BOOL)
        return eddy_err_set(err, "window '%s': 'combine' must be a boolean", name);
    c->combine = eddy_config_bool(cfg, "combine", true);
    int pt = config_type(cfg, "panes");
    if (pt >= 0 && pt != EDDY_CONFIG_BOOL)
        return eddy_err_set(err, "window '%s': 'panes' must be a boolean", name);
    c->pane = c->assigner == ASSIGN_SESSION ? 0 : gcd64(c->size, c->slide);
    if (!strcmp(late, "drop"))
        c->emit_late = false;
    else if (!strcmp(late, "emit"))
        c->emit_late = true;
    else
        return eddy_err_set(err, "window '%s': 'late' is '%s'; expected drop or emit", name, late);

    const eddy_window_udf_t *u = &k->udf;
    c->store = u->reduce                ? STORE_REDUCE
               : u->aggregate.acc_size  ? STORE_AGGREGATE
               : u->accumulator.add     ? STORE_ACCUMULATOR
                                        : STORE_LIST;
    c->acc_size = c->store == STORE_REDUCE ? sizeof(int64_t)
                  : c->store == STORE_AGGREGATE ? u->aggregate.acc_size : 0;
    if (c->store == STORE_ACCUMULATOR && accumulator_size(cfg, k, &c->acc_size, err) < 0)
        return -1;
    if (c->assigner == ASSIGN_SESSION &&
        ((c->store == STORE_AGGREGATE && !u->aggregate.merge) ||
         (c->store == STORE_ACCUMULATOR && !u->accumulator.merge)))
        return eddy_err_set(err, "window '%s': session windows merge, so its %s needs merge()",
                            name, c->store == STORE_AGGREGATE ? "aggregate" : "accumulator");
    c->panes = eddy_config_bool(cfg, "panes", true) && c->assigner == ASSIGN_SLIDING &&
               !c->processing && c->slide <= c->size && c->slide / c->pane <= WIN_MAX_PANES_PER_SLIDE &&
               mergeable(c);
    return 0;
}

static void *window_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    window_conf_t *c = calloc(1, sizeof *c);
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    c->kind = arg;
    c->config = cfg;
    if (parse_config(cfg, arg, c, err) < 0) {
        free(c);
        return NULL;
    }
    return c;
}

int eddy_register_window(eddy_registry_t *r, const char *name, const eddy_window_udf_t *udf,
                         eddy_err_t *err)
{
    const char *n = name ? name : "";
    if (!udf)
        return eddy_err_set(err, "window '%s' needs its functions", n);
    const eddy_aggregate_udf_t *a = &udf->aggregate;
    const eddy_window_accumulator_t *x = &udf->accumulator;
    bool has_agg = a->acc_size || a->create || a->add || a->merge || a->result;
    bool has_acc =
        x->open || x->close || x->size || x->create || x->add || x->merge || x->emit || x->check;
    if ((udf->reduce != NULL) + has_agg + has_acc > 1)
        return eddy_err_set(err, "window '%s' takes one of reduce(), an aggregate and an accumulator", n);
    if (has_agg && (!a->add || !a->result || a->acc_size == 0 || a->acc_size > WIN_MAX_ACC))
        return eddy_err_set(err, "window '%s': its aggregate needs add(), result() and an accumulator of 1..%u bytes",
                            n, WIN_MAX_ACC);
    if (has_acc && (!x->size || !x->add || !x->emit || udf->process))
        return eddy_err_set(err, "window '%s': its accumulator needs size(), add() and emit(), and no process function",
                            n);
    if (!udf->reduce && !has_agg && !has_acc && !udf->process)
        return eddy_err_set(err, "window '%s' needs reduce(), an aggregate or a process function", n);
    const eddy_window_max_by_t *m = &udf->max_by;
    if ((m->open || m->close) && !m->rank)
        return eddy_err_set(err, "window '%s': its max_by needs rank()", n);
    if (m->rank && (udf->reduce || has_agg || has_acc))
        return eddy_err_set(err, "window '%s': max_by keeps elements, so it takes a process function "
                            "and no reduce(), aggregate or accumulator", n);
    if (strlen(n) >= sizeof((window_kind_t *)0)->name)
        return eddy_err_set(err, "window name '%s' is too long", n);
    window_kind_t *k = calloc(1, sizeof *k);
    if (!k)
        return eddy_err_set(err, "out of memory");
    k->udf = *udf;
    strcpy(k->name, n);
    eddy_operator_kind_t kind = {name, &window_ops, window_configure, free, k};
    return eddy_registry_add_operator_owned(r, &kind, k, err);
}
