/* policy.c - the scaling decision policy (see policy.h for the rules).
 *
 * Why the defaults are what they are:
 *   interval 10 s       long enough for per-window counts to be statistically
 *                       meaningful at modest rates, short enough to react
 *                       within a minute; DS2's own evaluation used windows
 *                       of this order.
 *   warm-up 30 s        three intervals: a rescale pauses the job, moves key
 *                       groups and leaves a backlog; the first windows after
 *                       it show catch-up rates, not steady-state ones.
 *   cooldown 60 s       twice the warm-up, so an operator is only rescaled
 *                       again on at least three clean windows of metrics.
 *   target 0.8          headroom to drain backlog and absorb noise (ds2.h).
 *   scale-down 0.7      a 0.1 band below the target: scaling down must leave
 *                       the operator at most 70% busy, so a +-5% wobble
 *                       around a parallelism boundary cannot flap.
 *   3 confirmations     a scale-down costs a pause and state movement; a
 *                       short dip in input should not trigger one.
 *   [1, 128]            128 = EDDY_DEFAULT_MAX_PARALLELISM: an operator
 *                       cannot usefully have more instances than key groups.
 *   effectiveness 0.5   Flink's autoscaler flags a scale-up as ineffective
 *                       below 10% of the expected gain; eddy's CPU-bound case
 *                       (instances sharing two cores) brought about a third
 *                       of it, so the bar is higher: half of what DS2
 *                       promised, or the operator is at its limit.
 *   catch-up 30 s       catch_up.h.
 *   blocked 10%         the share of a window an upstream may spend blocked
 *                       sending to an operator before that operator counts
 *                       as the queue behind a latency above the objective:
 *                       credit-based flow control blocks briefly even with
 *                       room to spare, a tenth of the time does not. */
#include "controller/policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fmt.h"
#include "controller/catch_up.h"
#include "controller/policy_alt.h"
#include "state/keygroup.h"

/* Upstream blocked this share of the window: the operator is a queue. */
#define SLO_BLOCKED_SHARE 0.1
/* Key groups spread this much over an even share (the busiest instance's
 * against the mean) are worth one instance more to even them out. */
#define ALIGN_IMBALANCE 1.05
/* A scale-down pays for its transfer in saved instances over the time the
 * lower load lasts; ten transfer times of it make the move a small share
 * of what it saves. */
#define MOVE_HOLD_FACTOR 10.0
/* A move shorter than this costs less than the interval's noise: no wait. */
#define MOVE_WAIT_MIN_S 1.0

typedef struct operator_state {
    char name[EDDY_SCALING_NAME_MAX];
    bool has_rescaled;
    int64_t last_rescale_ms;
    uint32_t down_streak;    /* consecutive evaluations asking for fewer instances */
    uint32_t down_candidate; /* largest parallelism proposed during the streak */
    uint32_t down_from;      /* the parallelism the streak started from */
    /* a scale-up ordered by the policy, to be checked once warmed up */
    bool check_pending;
    uint32_t check_from, check_to;
    double rate_before;      /* observed input rate at check_from */
    double rate_predicted;   /* what check_to instances were expected to process */
    double true_rate_before; /* per instance, at check_from */
    /* the effective limit found by such a check: no scale-up beyond it */
    uint32_t limit;          /* 0: none */
    double limit_achieved;
    char limit_cause[128];
    eddy_policy_alt_state_t alt; /* the flink policy's scale-down delay */
    uint32_t up_streak;          /* consecutive evaluations asking for more */
    /* the last applied rescale, until its effect is reported */
    bool effect_pending;
    eddy_scaling_effect_t effect;
} operator_state_t;

struct eddy_scaling_policy {
    eddy_scaling_policy_config_t config; /* config.job points at job below */
    char job[EDDY_SCALING_NAME_MAX];
    bool has_evaluated;
    int64_t last_evaluation_ms;
    bool has_rescaled;
    int64_t last_rescale_ms;
    double move_rate; /* bytes/s; see eddy_scaling_policy_set_move_rate */
    operator_state_t *operators;
    size_t operator_count;
    size_t operator_capacity;
};

eddy_scaling_policy_config_t eddy_scaling_policy_config_default(void)
{
    eddy_scaling_policy_config_t config = {
        .job = NULL,
        .interval_ms = 10000,
        .warmup_ms = 30000,
        .cooldown_ms = 60000,
        .target_utilisation = EDDY_DS2_DEFAULT_TARGET_UTILISATION,
        .scale_down_utilisation = 0.7,
        .scale_down_confirmations = 3,
        .min_parallelism = 1,
        .max_parallelism = EDDY_DEFAULT_MAX_PARALLELISM,
        .dry_run = false,
        .core_limit = 0,
        .allow_oversubscribe = false,
        .effectiveness = 0.5,
        .catch_up_s = EDDY_CATCH_UP_DEFAULT_S,
        .latency_slo_ms = 0.0,
        .kind = EDDY_POLICY_EDDY,
        .scale_down_delay_ms = 60000,
    };
    return config;
}

const char *eddy_scaling_policy_kind_name(eddy_scaling_policy_kind_t kind)
{
    switch (kind) {
    case EDDY_POLICY_EDDY:
        return "eddy";
    case EDDY_POLICY_DS2:
        return "ds2";
    case EDDY_POLICY_THRESHOLD:
        return "threshold";
    case EDDY_POLICY_FLINK:
        return "flink";
    }
    return "unknown";
}

int eddy_scaling_policy_kind_parse(const char *name, eddy_scaling_policy_kind_t *kind)
{
    static const eddy_scaling_policy_kind_t all[] = {EDDY_POLICY_EDDY, EDDY_POLICY_DS2,
                                                     EDDY_POLICY_THRESHOLD, EDDY_POLICY_FLINK};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, eddy_scaling_policy_kind_name(all[i])) == 0) {
            *kind = all[i];
            return 0;
        }
    }
    return -1;
}

const char *eddy_scaling_action_name(eddy_scaling_action_t action)
{
    switch (action) {
    case EDDY_SCALING_NO_CHANGE:
        return "no_change";
    case EDDY_SCALING_SCALE_UP:
        return "scale_up";
    case EDDY_SCALING_SCALE_DOWN:
        return "scale_down";
    }
    return "unknown";
}

int eddy_scaling_action_parse(const char *name, eddy_scaling_action_t *action)
{
    static const eddy_scaling_action_t all[] = {EDDY_SCALING_NO_CHANGE, EDDY_SCALING_SCALE_UP,
                                                EDDY_SCALING_SCALE_DOWN};
    if (!name)
        return -1;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, eddy_scaling_action_name(all[i])) == 0) {
            *action = all[i];
            return 0;
        }
    }
    return -1;
}

static int validate_config(const eddy_scaling_policy_config_t *c, eddy_err_t *err)
{
    if (c->job && strlen(c->job) >= EDDY_SCALING_NAME_MAX)
        return eddy_err_set(err, "scaling policy: job name longer than %d bytes",
                            EDDY_SCALING_NAME_MAX - 1);
    if (c->interval_ms < 0 || c->warmup_ms < 0 || c->cooldown_ms < 0 ||
        c->scale_down_delay_ms < 0)
        return eddy_err_set(err, "scaling policy: interval, warm-up, cooldown and scale-down "
                                 "delay must be >= 0");
    if (strcmp(eddy_scaling_policy_kind_name(c->kind), "unknown") == 0)
        return eddy_err_set(err, "scaling policy: unknown policy kind %d", (int)c->kind);
    if (!(c->target_utilisation > 0.0 && c->target_utilisation <= 1.0))
        return eddy_err_set(err, "scaling policy: target utilisation %g must be in (0, 1]",
                            c->target_utilisation);
    if (!(c->scale_down_utilisation > 0.0 &&
          c->scale_down_utilisation <= c->target_utilisation))
        return eddy_err_set(err,
                            "scaling policy: scale-down utilisation %g must be in (0, %g] "
                            "(the target utilisation)",
                            c->scale_down_utilisation, c->target_utilisation);
    if (c->scale_down_confirmations < 1)
        return eddy_err_set(err, "scaling policy: scale-down confirmations must be >= 1");
    if (!(c->effectiveness >= 0.0 && c->effectiveness <= 1.0))
        return eddy_err_set(err, "scaling policy: effectiveness %g must be in [0, 1]",
                            c->effectiveness);
    if (!(c->catch_up_s >= 0.0 && isfinite(c->catch_up_s)))
        return eddy_err_set(err, "scaling policy: catch-up time %g s must be >= 0", c->catch_up_s);
    if (!(c->latency_slo_ms >= 0.0 && isfinite(c->latency_slo_ms)))
        return eddy_err_set(err, "scaling policy: latency objective %g ms must be >= 0",
                            c->latency_slo_ms);
    if (c->min_parallelism < 1 || c->max_parallelism < c->min_parallelism)
        return eddy_err_set(err, "scaling policy: parallelism bounds [%u, %u] need 1 <= min <= max",
                            c->min_parallelism, c->max_parallelism);
    return 0;
}

eddy_scaling_policy_t *eddy_scaling_policy_new(const eddy_scaling_policy_config_t *config,
                                               eddy_err_t *err)
{
    if (!config) {
        eddy_err_set(err, "scaling policy: no config");
        return NULL;
    }
    if (validate_config(config, err) < 0)
        return NULL;
    eddy_scaling_policy_t *self = calloc(1, sizeof *self);
    if (!self) {
        eddy_err_set(err, "scaling policy: out of memory");
        return NULL;
    }
    self->config = *config;
    if (config->job)
        memcpy(self->job, config->job, strlen(config->job) + 1);
    self->config.job = self->job;
    return self;
}

void eddy_scaling_policy_destroy(eddy_scaling_policy_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->operators);
    free(*self_p);
    *self_p = NULL;
}

static operator_state_t *find_operator(eddy_scaling_policy_t *self, const char *name)
{
    for (size_t i = 0; i < self->operator_count; i++) {
        if (strcmp(self->operators[i].name, name) == 0)
            return &self->operators[i];
    }
    return NULL;
}

/* Returns the state for name, creating it on first sight; NULL when out of
 * memory. May move the array: earlier pointers into it become invalid. */
static operator_state_t *find_or_add_operator(eddy_scaling_policy_t *self, const char *name,
                                              eddy_err_t *err)
{
    operator_state_t *found = find_operator(self, name);
    if (found)
        return found;
    if (self->operator_count == self->operator_capacity) {
        size_t capacity = self->operator_capacity ? self->operator_capacity * 2 : 8;
        operator_state_t *grown = realloc(self->operators, capacity * sizeof *grown);
        if (!grown) {
            eddy_err_set(err, "scaling policy: out of memory");
            return NULL;
        }
        self->operators = grown;
        self->operator_capacity = capacity;
    }
    operator_state_t *added = &self->operators[self->operator_count++];
    memset(added, 0, sizeof *added);
    memcpy(added->name, name, strlen(name) + 1);
    return added;
}

static void reset_scale_down_streaks(eddy_scaling_policy_t *self)
{
    for (size_t i = 0; i < self->operator_count; i++) {
        self->operators[i].down_streak = 0;
        self->operators[i].down_candidate = 0;
    }
}

static void record_rescale(eddy_scaling_policy_t *self, operator_state_t *op, int64_t now_ms)
{
    if (op) {
        op->has_rescaled = true;
        op->last_rescale_ms = now_ms;
    }
    self->has_rescaled = true;
    self->last_rescale_ms = now_ms;
    reset_scale_down_streaks(self);
}

void eddy_scaling_policy_set_core_limit(eddy_scaling_policy_t *self, uint32_t cores)
{
    if (self)
        self->config.core_limit = cores;
}

void eddy_scaling_policy_set_move_rate(eddy_scaling_policy_t *self, double bytes_per_s)
{
    if (self)
        self->move_rate = bytes_per_s > 0.0 && isfinite(bytes_per_s) ? bytes_per_s : 0.0;
}

int eddy_scaling_policy_note_rescale(eddy_scaling_policy_t *self, const char *operator_name,
                                     int64_t now_ms, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "scaling policy: no policy");
    operator_state_t *op = NULL;
    if (operator_name) {
        if (strlen(operator_name) >= EDDY_SCALING_NAME_MAX)
            return eddy_err_set(err, "scaling policy: operator name longer than %d bytes",
                                EDDY_SCALING_NAME_MAX - 1);
        op = find_or_add_operator(self, operator_name, err);
        if (!op)
            return -1;
    }
    record_rescale(self, op, now_ms);
    return 0;
}

/* Appends to a fixed-size reason; silently truncates (reasons are for people). */
static void vreason_append(char *reason, const char *fmt, va_list ap)
{
    size_t used = strnlen(reason, EDDY_SCALING_REASON_MAX - 1);
    vsnprintf(reason + used, EDDY_SCALING_REASON_MAX - used, fmt, ap);
}

static void reason_append(char *reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason_append(char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreason_append(reason, fmt, ap);
    va_end(ap);
}

/* The same for the other policies (policy_alt.h). */
void eddy_scaling_reason_append(char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreason_append(reason, fmt, ap);
    va_end(ap);
}

/* "target 25000 rec/s / (10000 rec/s per instance x 0.80) = 3.12 -> 4",
 * plus the clamping when the bounds changed the rounded value. */
static void reason_append_formula(char *reason, const eddy_ds2_estimate_t *est,
                                  double utilisation, const eddy_ds2_operator_t *bounds)
{
    double exact = est->target_input_rate / (est->true_rate_per_instance * utilisation);
    uint32_t unclamped = eddy_ds2_parallelism_for(est->target_input_rate,
                                                  est->true_rate_per_instance, utilisation, 1,
                                                  UINT32_MAX);
    uint32_t clamped = eddy_ds2_parallelism_for(est->target_input_rate,
                                                est->true_rate_per_instance, utilisation,
                                                bounds->min_parallelism, bounds->max_parallelism);
    char shown[32];
    reason_append(reason, "target %.0f rec/s / (%.0f rec/s per instance x %.2f) = %s -> %u",
                  est->target_input_rate, est->true_rate_per_instance, utilisation,
                  eddy_fmt_ceil_operand(shown, sizeof shown, exact, unclamped), unclamped);
    if (clamped != unclamped)
        reason_append(reason, ", clamped to %u by bounds [%u, %u]", clamped,
                      bounds->min_parallelism, bounds->max_parallelism);
}

static void fill_rates(eddy_scaling_decision_t *d, const eddy_ds2_operator_t *op,
                       const eddy_ds2_estimate_t *est, double target_utilisation)
{
    d->rates.state_bytes = op->metrics.state_bytes > 0.0 ? op->metrics.state_bytes : NAN;
    d->rates.target_input_rate = est->target_input_rate;
    d->rates.true_rate_per_instance = est->true_rate_per_instance;
    d->rates.observed_input_rate = est->observed_input_rate;
    d->rates.selectivity = est->selectivity;
    d->rates.utilisation = est->observed_utilisation;
    d->rates.target_utilisation = target_utilisation;
    d->rates.projected_utilisation =
        est->target_input_rate / ((double)d->new_parallelism * est->true_rate_per_instance);
}

/* Marks in seen[] operator i and everything upstream of it. */
static void mark_upstream(const eddy_ds2_operator_t *ops, size_t i, bool *seen)
{
    if (seen[i])
        return;
    seen[i] = true;
    for (size_t u = 0; u < ops[i].upstream_count; u++)
        mark_upstream(ops, ops[i].upstreams[u], seen);
}

/* The backlog of the sources upstream of operator i (itself included):
 * the sum into d's rates (NaN when none has one) and, for each source
 * whose catch-up rate is part of the targets, one clause of the reason. */
static void note_backlog(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *ops,
                         size_t count, size_t i, bool *seen, eddy_scaling_decision_t *d)
{
    memset(seen, 0, count * sizeof *seen);
    mark_upstream(ops, i, seen);
    double sum = 0.0;
    for (size_t k = 0; k <= i; k++) {
        const eddy_ds2_metrics_t *m = &ops[k].metrics;
        if (!seen[k] || ops[k].upstream_count > 0 || !(m->backlog > 0.0))
            continue;
        sum += m->backlog;
        if (!(m->catch_up_rate > 0.0))
            continue;
        reason_append(d->reason,
                      "backlog: %s is %.0f records behind; draining them within %.0f s "
                      "(--catch-up-s) adds %.0f rec/s to the %.0f rec/s arriving; ",
                      ops[k].name, m->backlog, self->config.catch_up_s, m->catch_up_rate,
                      m->offered_rate - m->catch_up_rate);
    }
    d->rates.backlog = sum > 0.0 ? sum : NAN;
}

/* The job's p99 latency in the window: its slowest operator's (each
 * operator's latency counts from ingest, so the last one's includes the
 * queues before it); 0 when none measured one. */
static double job_p99_ms(const eddy_ds2_operator_t *ops, size_t count)
{
    double p99 = 0.0;
    for (size_t i = 0; i < count; i++)
        if (ops[i].metrics.latency_p99_ms > p99)
            p99 = ops[i].metrics.latency_p99_ms;
    return p99;
}

/* Lowers *up_to to what can help: the operator's recorded limit, the
 * instances a hot key group leaves useful, the workers' cores. cause says
 * which (the tightest) when it lowered anything. */
static void limit_scale_up(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                           const eddy_ds2_estimate_t *est, const operator_state_t *state,
                           uint32_t *up_to, char *cause, size_t cause_size)
{
    const eddy_scaling_policy_config_t *c = &self->config;
    double share = op->metrics.hot_key_share;
    if (share > 0.0 && share <= 1.0 &&
        share * est->target_input_rate > est->true_rate_per_instance * c->target_utilisation) {
        /* the instance owning the hot group gets at least share of the
         * records however many there are: past 1/share, more do not help */
        double useful = ceil(1.0 / share - 1e-9);
        uint32_t cap = useful < (double)*up_to ? (uint32_t)useful : *up_to;
        if (cap < *up_to) {
            *up_to = cap;
            snprintf(cause, cause_size,
                     "hot key group %u (%.0f%% of the records; one instance carries at most %.0f rec/s)",
                     op->metrics.hot_key_group, share * 100.0, est->true_rate_per_instance);
        }
    }
    if (state->limit && *up_to > state->limit) {
        *up_to = state->limit;
        snprintf(cause, cause_size, "%s", state->limit_cause);
    }
    if (c->core_limit && !c->allow_oversubscribe && *up_to > c->core_limit) {
        *up_to = c->core_limit;
        snprintf(cause, cause_size, "the workers' %u cores (--allow-oversubscribe to go past them)",
                 c->core_limit);
    }
}

/* The first clean window after a scale-up the policy ordered: did the added
 * instances bring the throughput DS2 predicted? If not, the operator's
 * current parallelism is its effective limit. */
static void check_effect(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                         const eddy_ds2_estimate_t *est, operator_state_t *state)
{
    if (!state->check_pending || self->config.effectiveness <= 0.0)
        return;
    state->check_pending = false;
    double achieved = est->observed_input_rate;
    if (op->parallelism != state->check_to || !isfinite(achieved) || !isfinite(state->rate_before))
        return;
    double predicted_gain = state->rate_predicted - state->rate_before;
    double gain = achieved - state->rate_before;
    bool short_of_target = !(achieved >= 0.95 * est->target_input_rate);
    if (!(predicted_gain > 0.0) || gain >= self->config.effectiveness * predicted_gain ||
        !short_of_target)
        return;
    state->limit = state->check_to;
    state->limit_achieved = achieved;
    double share = op->metrics.hot_key_share;
    if (share > 0.0 && share * achieved >= 0.5 * est->true_rate_per_instance)
        snprintf(state->limit_cause, sizeof state->limit_cause,
                 "hot key group %u (%.0f%% of the records)", op->metrics.hot_key_group,
                 share * 100.0);
    else if (isfinite(state->true_rate_before) &&
             est->true_rate_per_instance < 0.8 * state->true_rate_before)
        snprintf(state->limit_cause, sizeof state->limit_cause,
                 "contention: %u -> %u instances brought %.0f of %.0f rec/s predicted, each now "
                 "processes %.0f rec/s when busy, was %.0f",
                 state->check_from, state->check_to, gain, predicted_gain,
                 est->true_rate_per_instance, state->true_rate_before);
    else
        snprintf(state->limit_cause, sizeof state->limit_cause,
                 "something outside the operator: %u -> %u instances brought %.0f of %.0f rec/s "
                 "predicted",
                 state->check_from, state->check_to, gain, predicted_gain);
}

/* What the operator wants by its rates (DS2), before the state budget and
 * the timing gates (dry run, cooldown). Updates the scale-down streak. */
static void propose_by_rates(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                             const eddy_ds2_estimate_t *est, operator_state_t *state,
                             eddy_scaling_decision_t *d)
{
    const eddy_scaling_policy_config_t *c = &self->config;
    uint32_t current = op->parallelism;
    d->action = EDDY_SCALING_NO_CHANGE;
    d->new_parallelism = current;

    if (est->status == EDDY_DS2_NO_MEASUREMENT) {
        state->down_streak = 0;
        reason_append(d->reason,
                      "no useful-time measurement in this window; keeping parallelism %u",
                      current);
        return;
    }
    if (est->status == EDDY_DS2_NO_TARGET) {
        state->down_streak = 0;
        reason_append(d->reason,
                      "target input rate unknown (a source without offered rate, or an "
                      "upstream without data); keeping parallelism %u",
                      current);
        return;
    }

    uint32_t up_to = est->optimal_parallelism;
    uint32_t down_to = eddy_ds2_parallelism_for(est->target_input_rate,
                                                est->true_rate_per_instance,
                                                c->scale_down_utilisation, op->min_parallelism,
                                                op->max_parallelism);
    if (up_to > current) {
        state->down_streak = 0;
        uint32_t capped = up_to;
        char cause[160] = "";
        limit_scale_up(self, op, est, state, &capped, cause, sizeof cause);
        /* more workers (a pool) can only help when cores were the limit */
        if (capped < up_to && c->core_limit && !c->allow_oversubscribe && capped == c->core_limit)
            d->wanted_parallelism = up_to;
        if (capped < up_to) {
            d->infeasible = true;
            reason_append(d->reason, "infeasible: target %.0f rec/s, achieved %.0f rec/s at parallelism %u, limited by %s; ",
                          est->target_input_rate, est->observed_input_rate, current, cause);
        }
        reason_append_formula(d->reason, est, c->target_utilisation, op);
        if (capped <= current) {
            reason_append(d->reason, "; staying at %u", current);
            return;
        }
        d->action = EDDY_SCALING_SCALE_UP;
        d->new_parallelism = capped;
        if (capped < up_to)
            reason_append(d->reason, "; only to %u", capped);
        return;
    }
    if (down_to < current) {
        /* A streak is about one starting parallelism; if something else
         * changed it meanwhile, the earlier proposals no longer apply. */
        if (state->down_streak > 0 && state->down_from != current)
            state->down_streak = 0;
        if (state->down_streak == 0) {
            state->down_candidate = down_to;
            state->down_from = current;
        } else if (down_to > state->down_candidate) {
            state->down_candidate = down_to;
        }
        state->down_streak++;
        reason_append_formula(d->reason, est, c->scale_down_utilisation, op);
        reason_append(d->reason, " at scale-down utilisation, below %u for %u/%u intervals",
                      current, state->down_streak, c->scale_down_confirmations);
        if (state->down_streak >= c->scale_down_confirmations) {
            d->action = EDDY_SCALING_SCALE_DOWN;
            d->new_parallelism = state->down_candidate;
            if (state->down_candidate != down_to)
                reason_append(d->reason, "; largest proposal in the streak: %u",
                              state->down_candidate);
        } else {
            reason_append(d->reason, "; waiting before scaling down");
        }
        return;
    }
    state->down_streak = 0;
    reason_append_formula(d->reason, est, c->target_utilisation, op);
    if (up_to == current) {
        reason_append(d->reason, "; already at %u", current);
    } else {
        /* Here min <= up_to < current, so current - 1 >= 1. */
        double utilisation_one_fewer =
            est->target_input_rate / ((double)(current - 1) * est->true_rate_per_instance);
        reason_append(d->reason,
                      "; keeping %u: %u instances would run at %.2f, above the scale-down "
                      "utilisation %.2f",
                      current, current - 1, utilisation_one_fewer, c->scale_down_utilisation);
    }
}

/* The instances op's keyed state needs under the budget by the end of the
 * horizon (the next interval plus a warm-up: the soonest a later decision
 * could take effect); 0 without a budget or state. */
static uint32_t memory_need(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                            double *projected, double *horizon_s)
{
    const eddy_scaling_policy_config_t *c = &self->config;
    double bytes = op->metrics.state_bytes;
    if (!c->state_budget_bytes || !(bytes > 0.0))
        return 0;
    double growth = op->metrics.state_growth_per_s > 0.0 ? op->metrics.state_growth_per_s : 0.0;
    *horizon_s = (double)(c->interval_ms + c->warmup_ms) / 1000.0;
    *projected = bytes + growth * *horizon_s;
    double need = ceil(*projected / (double)c->state_budget_bytes - 1e-9);
    if (need < 1.0)
        return 1;
    return need > (double)UINT32_MAX ? UINT32_MAX : (uint32_t)need;
}

/* Decides what one operator wants, before the timing gates: by its rates,
 * then at least what its state needs under the budget (policy.h, memory). */
static void propose(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                    const eddy_ds2_estimate_t *est, operator_state_t *state,
                    eddy_scaling_decision_t *d)
{
    propose_by_rates(self, op, est, state, d);
    double projected = 0.0, horizon_s = 0.0;
    uint32_t need = memory_need(self, op, &projected, &horizon_s);
    if (!need)
        return;
    const double mb = 1024.0 * 1024.0;
    uint32_t current = op->parallelism;
    uint32_t feasible = need > op->max_parallelism ? op->max_parallelism : need;
    d->memory_parallelism = feasible;
    if (d->new_parallelism >= need)
        return;
    reason_append(d->reason, "; state %.1f MB (%.1f MB per instance), %.1f MB in %.0f s at "
                  "%.2f MB/s: a budget of %.1f MB per instance needs %u",
                  op->metrics.state_bytes / mb, op->metrics.state_bytes / mb / current,
                  projected / mb, horizon_s, op->metrics.state_growth_per_s / mb,
                  (double)self->config.state_budget_bytes / mb, need);
    if (need > op->max_parallelism) {
        d->infeasible = true;
        reason_append(d->reason, " (infeasible: limited by max parallelism %u)",
                      op->max_parallelism);
    }
    if (feasible > current) {
        state->down_streak = 0;
        d->action = EDDY_SCALING_SCALE_UP;
        d->new_parallelism = feasible;
        reason_append(d->reason, "; scaling out to %u for memory", feasible);
    } else if (d->action == EDDY_SCALING_SCALE_DOWN) {
        state->down_streak = 0;
        d->action = EDDY_SCALING_NO_CHANGE;
        d->new_parallelism = current;
        reason_append(d->reason, "; not scaling down");
    }
    if (d->wanted_parallelism && d->wanted_parallelism < d->new_parallelism)
        d->wanted_parallelism = d->new_parallelism;
}

/* The latency objective (policy.h, latency): one instance more for an
 * operator that is the queue behind a p99 above the objective. */
static void propose_for_latency(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                                const eddy_ds2_estimate_t *est, operator_state_t *state,
                                double p99_ms, eddy_scaling_decision_t *d)
{
    const eddy_scaling_policy_config_t *c = &self->config;
    if (!(c->latency_slo_ms > 0.0) || !(p99_ms > c->latency_slo_ms) ||
        op->min_parallelism == op->max_parallelism)
        return;
    double busy = est->observed_utilisation;
    double blocked = op->metrics.upstream_blocked;
    bool is_busy = busy >= c->target_utilisation;
    bool pressed = blocked >= SLO_BLOCKED_SHARE;
    reason_append(d->reason, "; p99 latency %.0f ms is above the %.0f ms objective", p99_ms,
                  c->latency_slo_ms);
    if (!is_busy && !pressed) {
        reason_append(d->reason,
                      " but %s is not queueing (busy %.2f, upstream blocked %.0f%% of the "
                      "time): the latency is the sink's or the network's; no instance added "
                      "for it",
                      op->name, isfinite(busy) ? busy : 0.0, blocked * 100.0);
        return;
    }
    if (is_busy)
        reason_append(d->reason, " and %s is queueing (busy %.2f >= %.2f)", op->name, busy,
                      c->target_utilisation);
    else
        reason_append(d->reason, " and %s is queueing (upstream blocked %.0f%% of the time)",
                      op->name, blocked * 100.0);
    uint32_t current = op->parallelism;
    uint32_t want = current < op->max_parallelism ? current + 1 : current;
    if (d->new_parallelism >= want) {
        if (d->action == EDDY_SCALING_SCALE_UP)
            reason_append(d->reason, ": already scaling out");
        else
            reason_append(d->reason, ": at max parallelism %u", op->max_parallelism);
        return;
    }
    uint32_t capped = want;
    char cause[160] = "";
    limit_scale_up(self, op, est, state, &capped, cause, sizeof cause);
    if (capped <= current) {
        reason_append(d->reason, ": no instance added, limited by %s", cause);
        return;
    }
    state->down_streak = 0;
    d->action = EDDY_SCALING_SCALE_UP;
    d->new_parallelism = capped;
    reason_append(d->reason, ": one more instance, %u", capped);
    if (d->wanted_parallelism < capped)
        d->wanted_parallelism = capped;
}

/* The other kinds' proposal (policy_alt.h) in place of the rules above;
 * only flink keeps the backlog clause (its catch-up duration). */
static void propose_alt(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                        const eddy_ds2_estimate_t *est, operator_state_t *state, int64_t now_ms,
                        eddy_scaling_decision_t *d)
{
    const eddy_scaling_policy_config_t *c = &self->config;
    if (c->kind != EDDY_POLICY_FLINK)
        d->reason[0] = '\0';
    if (c->kind == EDDY_POLICY_DS2)
        eddy_policy_ds2_propose(op, est, d);
    else if (c->kind == EDDY_POLICY_THRESHOLD)
        eddy_policy_threshold_propose(op, est, d);
    else
        eddy_policy_flink_propose(op, est, now_ms, c->scale_down_delay_ms,
                                  EDDY_DEFAULT_MAX_PARALLELISM, &state->alt, d);
}

/* Plain DS2 sizes the sources for what arrives: their catch-up rate
 * (controller/catch_up.h) comes off the offered rate. */
static void without_catch_up(eddy_ds2_operator_t *ops, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        eddy_ds2_metrics_t *m = &ops[i].metrics;
        if (ops[i].upstream_count > 0 || !(m->catch_up_rate > 0.0) || !isfinite(m->offered_rate))
            continue;
        m->offered_rate = m->offered_rate > m->catch_up_rate ? m->offered_rate - m->catch_up_rate
                                                             : 0.0;
    }
}

static int validate_names(const eddy_ds2_operator_t *operators, size_t count, eddy_err_t *err)
{
    for (size_t i = 0; i < count; i++) {
        if (!operators[i].name)
            return eddy_err_set(err, "scaling policy: operator %zu has no name", i);
        if (strlen(operators[i].name) >= EDDY_SCALING_NAME_MAX)
            return eddy_err_set(err, "scaling policy: operator name %.32s... longer than %d bytes",
                                operators[i].name, EDDY_SCALING_NAME_MAX - 1);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(operators[i].name, operators[j].name) == 0)
                return eddy_err_set(err, "scaling policy: operator name %s appears twice",
                                    operators[i].name);
        }
    }
    return 0;
}

/* Copies operators with bounds narrowed to the job-wide ones. */
static eddy_ds2_operator_t *bounded_copy(const eddy_scaling_policy_t *self,
                                         const eddy_ds2_operator_t *operators, size_t count,
                                         eddy_err_t *err)
{
    eddy_ds2_operator_t *copy = calloc(count ? count : 1, sizeof *copy);
    if (!copy) {
        eddy_err_set(err, "scaling policy: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        copy[i] = operators[i];
        if (copy[i].min_parallelism < self->config.min_parallelism)
            copy[i].min_parallelism = self->config.min_parallelism;
        if (copy[i].max_parallelism > self->config.max_parallelism)
            copy[i].max_parallelism = self->config.max_parallelism;
        if (copy[i].min_parallelism > copy[i].max_parallelism) {
            eddy_err_set(err,
                         "scaling policy: operator %s: bounds [%u, %u] do not overlap the "
                         "job's [%u, %u]",
                         operators[i].name, operators[i].min_parallelism,
                         operators[i].max_parallelism, self->config.min_parallelism,
                         self->config.max_parallelism);
            free(copy);
            return NULL;
        }
    }
    return copy;
}

/* policy.h, aligned: p + 1 when it evens out the key groups p leaves
 * uneven; upper is the most instances the limits allow. */
static uint32_t aligned_parallelism(uint32_t p, uint32_t upper)
{
    const uint32_t groups = EDDY_DEFAULT_MAX_PARALLELISM;
    if (!p || p >= groups || groups % p == 0 || p + 1 > upper || groups % (p + 1) != 0)
        return p;
    double busiest = ceil((double)groups / p), even = (double)groups / p;
    return busiest > ALIGN_IMBALANCE * even ? p + 1 : p;
}

static void align_to_key_groups(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                                eddy_scaling_decision_t *d)
{
    if (d->action == EDDY_SCALING_NO_CHANGE || d->infeasible)
        return;
    const eddy_scaling_policy_config_t *c = &self->config;
    uint32_t upper = op->max_parallelism;
    if (c->core_limit && !c->allow_oversubscribe && c->core_limit < upper)
        upper = c->core_limit;
    if (d->action == EDDY_SCALING_SCALE_DOWN && d->old_parallelism - 1 < upper)
        upper = d->old_parallelism - 1;
    uint32_t p = aligned_parallelism(d->new_parallelism, upper);
    if (p == d->new_parallelism)
        return;
    reason_append(d->reason, "; %u instead of %u: %u key groups divide evenly", p,
                  d->new_parallelism, EDDY_DEFAULT_MAX_PARALLELISM);
    d->new_parallelism = p;
}

/* policy.h, cost of moving: a change whose transfer outweighs what it
 * brings waits. Returns after turning d into no_change when it must wait. */
static void weigh_move_cost(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                            const eddy_ds2_estimate_t *est, operator_state_t *state,
                            double p99_ms, eddy_scaling_decision_t *d)
{
    const eddy_scaling_policy_config_t *c = &self->config;
    if (d->action != EDDY_SCALING_SCALE_UP)
        state->up_streak = 0;
    else
        state->up_streak++;
    double bytes = op->metrics.state_bytes;
    if (d->action == EDDY_SCALING_NO_CHANGE || !(bytes > 0.0))
        return;
    uint32_t from = d->old_parallelism, to = d->new_parallelism;
    double moved = bytes * (double)(to > from ? to - from : from - to) / (to > from ? to : from);
    double rate = self->move_rate > 0.0 ? self->move_rate : EDDY_SCALING_DEFAULT_MOVE_RATE;
    double move_s = moved / rate;
    const double mb = 1024.0 * 1024.0;
    if (d->action == EDDY_SCALING_SCALE_DOWN) {
        double held_s = (double)state->down_streak * (double)c->interval_ms / 1000.0;
        double need_s = MOVE_HOLD_FACTOR * move_s;
        if (held_s >= need_s)
            return;
        reason_append(d->reason, "; moving ~%.1f MB (~%.1f s at %.0f MB/s%s) waits until the "
                      "lower load has held %.0f s (%.0f s so far)",
                      moved / mb, move_s, rate / mb, self->move_rate > 0.0 ? ", measured" : "",
                      need_s, held_s);
    } else {
        bool keeps_up = est->observed_input_rate >= 0.95 * est->target_input_rate;
        bool backlog = d->rates.backlog > 0.0;
        bool slo_missed = c->latency_slo_ms > 0.0 && p99_ms > c->latency_slo_ms;
        bool memory = d->memory_parallelism > from;
        if (!keeps_up || backlog || slo_missed || memory || d->infeasible ||
            move_s < MOVE_WAIT_MIN_S || state->up_streak >= 2)
            return;
        reason_append(d->reason, "; it keeps up and moving ~%.1f MB takes ~%.1f s: waiting "
                      "for a second interval to ask for it", moved / mb, move_s);
    }
    d->action = EDDY_SCALING_NO_CHANGE;
    d->new_parallelism = from;
}

/* What an applied decision's new parallelism is expected to process: its
 * target, at most what its instances can (the effectiveness check and the
 * reported effect compare the observed rate with it). */
static double predicted_rate(const eddy_scaling_decision_t *d, const eddy_ds2_estimate_t *est)
{
    double capacity = (double)d->new_parallelism * est->true_rate_per_instance;
    return est->target_input_rate < capacity ? est->target_input_rate : capacity;
}

/* policy.h, effect: reports the last applied rescale's effect once, in the
 * first evaluation past its warm-up; forgets it when the operator was
 * rescaled to something else meanwhile. */
static void report_effect(const eddy_ds2_operator_t *op, const eddy_ds2_estimate_t *est,
                          operator_state_t *state, eddy_scaling_decision_t *d)
{
    if (!state->effect_pending)
        return;
    if (op->parallelism != state->effect.to) {
        state->effect_pending = false;
        return;
    }
    if (est->status == EDDY_DS2_NO_MEASUREMENT || !isfinite(est->observed_input_rate))
        return;
    state->effect_pending = false;
    d->effect = state->effect;
    d->effect.known = true;
    d->effect.observed_rate = est->observed_input_rate;
    d->effect.observed_utilisation = est->observed_utilisation;
    reason_append(d->reason, "; effect of %u -> %u at %.1f s: predicted %.0f rec/s at "
                  "utilisation %.2f, observed %.0f rec/s at %.2f",
                  d->effect.from, d->effect.to, (double)d->effect.decided_ms / 1000.0,
                  d->effect.predicted_rate, d->effect.predicted_utilisation,
                  d->effect.observed_rate, d->effect.observed_utilisation);
}

/* An applied decision's prediction, for report_effect. */
static void expect_effect(operator_state_t *state, const eddy_scaling_decision_t *d,
                          const eddy_ds2_estimate_t *est)
{
    memset(&state->effect, 0, sizeof state->effect);
    state->effect_pending = true;
    state->effect.decided_ms = d->time_ms;
    state->effect.from = d->old_parallelism;
    state->effect.to = d->new_parallelism;
    state->effect.predicted_rate = predicted_rate(d, est);
    state->effect.predicted_utilisation = d->rates.projected_utilisation;
}

static void start_decision(const eddy_scaling_policy_t *self, const eddy_ds2_operator_t *op,
                           int64_t now_ms, eddy_scaling_decision_t *d)
{
    memset(d, 0, sizeof *d);
    d->time_ms = now_ms;
    memcpy(d->job, self->job, sizeof d->job);
    memcpy(d->operator_name, op->name, strlen(op->name) + 1);
    snprintf(d->policy, sizeof d->policy, "%s", eddy_scaling_policy_kind_name(self->config.kind));
    d->old_parallelism = op->parallelism;
    d->new_parallelism = op->parallelism;
    d->action = EDDY_SCALING_NO_CHANGE;
    d->applied = false;
    d->rates.backlog = NAN; /* optional inputs: unknown until noted */
    d->rates.latency_p99_ms = NAN;
    d->rates.state_bytes = NAN;
}

/* An applied decision: a scale-up is checked after its warm-up; a
 * scale-down forgets the limit (the conditions changed). */
static void note_scale_up(operator_state_t *state, const eddy_scaling_decision_t *d,
                          const eddy_ds2_estimate_t *est)
{
    if (d->action != EDDY_SCALING_SCALE_UP) {
        state->check_pending = false;
        state->limit = 0;
        return;
    }
    state->check_pending = true;
    state->check_from = d->old_parallelism;
    state->check_to = d->new_parallelism;
    state->rate_before = est->observed_input_rate;
    state->true_rate_before = est->true_rate_per_instance;
    state->rate_predicted = predicted_rate(d, est);
}

int eddy_scaling_policy_decide(eddy_scaling_policy_t *self, int64_t now_ms,
                               const eddy_ds2_operator_t *operators, size_t count,
                               eddy_scaling_decision_t *decisions, eddy_err_t *err)
{
    if (!self)
        return eddy_err_set(err, "scaling policy: no policy");
    if (count > 0 && (!operators || !decisions))
        return eddy_err_set(err, "scaling policy: %zu operators but no operator or decision array",
                            count);
    if (self->has_evaluated && now_ms - self->last_evaluation_ms < self->config.interval_ms)
        return 0;
    if (validate_names(operators, count, err) < 0)
        return -1;

    eddy_ds2_operator_t *bounded = bounded_copy(self, operators, count, err);
    if (!bounded)
        return -1;
    eddy_ds2_estimate_t *estimates = calloc(count ? count : 1, sizeof *estimates);
    if (!estimates) {
        free(bounded);
        return eddy_err_set(err, "scaling policy: out of memory");
    }
    int rc = -1;
    bool *seen = NULL;
    if (self->config.kind == EDDY_POLICY_DS2)
        without_catch_up(bounded, count);
    if (eddy_ds2_estimate(bounded, count, self->config.target_utilisation, estimates, err) < 0) {
        eddy_err_wrap(err, "scaling policy");
        goto done;
    }
    /* Create every state first: adding may move the array. */
    for (size_t i = 0; i < count; i++) {
        if (!find_or_add_operator(self, operators[i].name, err))
            goto done;
    }

    seen = calloc(count ? count : 1, sizeof *seen);
    if (!seen) {
        eddy_err_set(err, "scaling policy: out of memory");
        goto done;
    }
    const eddy_scaling_policy_config_t *c = &self->config;
    double p99_ms = job_p99_ms(bounded, count);
    bool warming_up = self->has_rescaled && now_ms - self->last_rescale_ms < c->warmup_ms;
    bool any_applied = false;
    for (size_t i = 0; i < count; i++) {
        operator_state_t *state = find_operator(self, operators[i].name);
        eddy_scaling_decision_t *d = &decisions[i];
        start_decision(self, &bounded[i], now_ms, d);

        if (warming_up) {
            state->down_streak = 0;
            /* the controller's clock is the job's time (loop.c) */
            reason_append(d->reason,
                          "warm-up after the deploy at %.1f s (job start, rescale or restore): "
                          "metrics ignored until %.1f s",
                          (double)self->last_rescale_ms / 1000.0,
                          (double)(self->last_rescale_ms + c->warmup_ms) / 1000.0);
            fill_rates(d, &bounded[i], &estimates[i], c->target_utilisation);
            continue;
        }

        note_backlog(self, bounded, count, i, seen, d);
        if (c->kind == EDDY_POLICY_EDDY) {
            check_effect(self, &bounded[i], &estimates[i], state);
            propose(self, &bounded[i], &estimates[i], state, d);
            propose_for_latency(self, &bounded[i], &estimates[i], state, p99_ms, d);
            align_to_key_groups(self, &bounded[i], d);
            weigh_move_cost(self, &bounded[i], &estimates[i], state, p99_ms, d);
        } else {
            propose_alt(self, &bounded[i], &estimates[i], state, now_ms, d);
        }
        report_effect(&bounded[i], &estimates[i], state, d);
        if (!d->wanted_parallelism && estimates[i].status != EDDY_DS2_NO_MEASUREMENT &&
            estimates[i].status != EDDY_DS2_NO_TARGET)
            d->wanted_parallelism = d->new_parallelism;
        fill_rates(d, &bounded[i], &estimates[i], c->target_utilisation);
        if (c->latency_slo_ms > 0.0 && p99_ms > 0.0)
            d->rates.latency_p99_ms = p99_ms;
        if (d->action == EDDY_SCALING_NO_CHANGE)
            continue;
        bool cooling_down =
            state->has_rescaled && now_ms - state->last_rescale_ms < c->cooldown_ms;
        if (cooling_down && d->action == EDDY_SCALING_SCALE_UP &&
            d->memory_parallelism > d->old_parallelism) {
            /* the state will not wait for the cooldown: at least its need */
            cooling_down = false;
            if (d->new_parallelism > d->memory_parallelism) {
                d->new_parallelism = d->memory_parallelism;
                reason_append(d->reason, "; only to %u in the cooldown", d->new_parallelism);
            }
        }
        if (c->dry_run) {
            reason_append(d->reason, "; dry run, not applied");
        } else if (cooling_down) {
            reason_append(d->reason, "; not applied: cooldown until %.1f s",
                          (double)(state->last_rescale_ms + c->cooldown_ms) / 1000.0);
        } else {
            d->applied = true;
            any_applied = true;
        }
    }

    if (any_applied) {
        for (size_t i = 0; i < count; i++) {
            if (!decisions[i].applied)
                continue;
            operator_state_t *state = find_operator(self, operators[i].name);
            record_rescale(self, state, now_ms);
            note_scale_up(state, &decisions[i], &estimates[i]);
            expect_effect(state, &decisions[i], &estimates[i]);
        }
    }
    self->has_evaluated = true;
    self->last_evaluation_ms = now_ms;
    rc = 1;
done:
    free(seen);
    free(estimates);
    free(bounded);
    return rc;
}
