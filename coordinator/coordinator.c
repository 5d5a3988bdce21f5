/* coordinator.c - the coordinator's event loop, sockets, worker registry,
 * liveness (heartbeat timeouts, busy and stuck workers: check_liveness)
 * and client request dispatch.
 *
 * One thread: the control ROUTER, and the HTTP server's descriptors, are
 * polled together, so every handler sees a consistent view of the state. */
#include "coordinator/internal.h"

#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "plan/plugin.h"
#include "net/loopback.h"
#include "net/curve.h"
#include "net/zrecv.h"

/* How long exit waits for queued metadata-store writes before abandoning them. */
#define COORD_META_DRAIN_MS 2000

/* ---- sending ------------------------------------------------------------ */

/* Whether msg was queued to identity: not when the peer's connection is
 * gone (ZMQ_ROUTER_MANDATORY: EHOSTUNREACH) or its queue is full. */
static bool send_to(coord_t *c, const unsigned char *identity, size_t identity_len,
                    const eddy_msg_t *msg)
{
    size_t len;
    /* fencing: everything this coordinator says carries its leader epoch */
    eddy_msg_t stamped = *msg;
    stamped.leader_epoch = c->leader_epoch;
    char *data = eddy_msg_encode(&stamped, &len);
    if (!data)
        return false;
    bool queued = false;
    if (zmq_send(c->router, identity, identity_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        queued = zmq_send(c->router, data, len, ZMQ_DONTWAIT) >= 0;
    else if (errno == EAGAIN) /* its queue is at --reply-hwm: a peer that does not read */
        coord_reject(&c->rejects, COORD_REJECT_REPLY_QUEUE,
                     "a %s to a peer that does not read its replies (--reply-hwm %u)",
                     eddy_msg_type_name(msg->type), c->limits.reply_hwm);
    free(data);
    return queued;
}

bool coord_send_worker(coord_t *c, coord_worker_t *w, const eddy_msg_t *msg)
{
    return w->alive && send_to(c, w->identity, w->identity_len, msg);
}

void coord_broadcast(coord_t *c, const eddy_msg_t *msg)
{
    for (coord_worker_t *w = c->workers; w; w = w->next)
        coord_send_worker(c, w, msg);
}

void coord_reply(coord_t *c, const unsigned char *identity, size_t identity_len, int64_t status,
                 const char *body)
{
    eddy_msg_t m = {.type = EDDY_MSG_REPLY};
    m.u.reply.status = status;
    m.u.reply.body = (char *)body;
    send_to(c, identity, identity_len, &m);
}

coord_worker_t *coord_find_worker(coord_t *c, uint32_t id)
{
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (w->id == id)
            return w;
    return NULL;
}

uint32_t coord_alive_workers(coord_t *c)
{
    uint32_t n = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        n += w->alive;
    return n;
}

bool coord_worker_usable(const coord_worker_t *w, uint64_t now_ms)
{
    return w->alive && now_ms >= w->quarantined_until_ms;
}

uint32_t coord_usable_workers(coord_t *c)
{
    uint64_t now = eddy_mono_ms();
    uint32_t n = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        n += coord_worker_usable(w, now);
    return n;
}

static coord_worker_t *worker_by_identity(coord_t *c, const unsigned char *id, size_t len)
{
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (w->alive && w->identity_len == len && !memcmp(w->identity, id, len))
            return w;
    return NULL;
}

/* ---- workers ------------------------------------------------------------ */

/* Drops whatever tasks the worker may still run, for every job: the
 * coordinator placed none there (it declared the worker dead, or does not
 * trust it), so any it runs are stale. Sent before any DEPLOY to it, and a
 * worker handles its messages in order. */
static void release_stale_tasks(coord_t *c, coord_worker_t *w)
{
    for (coord_job_t *j = c->jobs; j; j = j->next) {
        eddy_msg_t rel = {.type = EDDY_MSG_RELEASE};
        rel.u.release.job = j->num;
        coord_send_worker(c, w, &rel);
    }
}

/* A process this coordinator declared dead (same host and pid) that
 * registers again: it was alive after all (hung, or cut off for longer
 * than the heartbeat timeout) and may run tasks of attempts since
 * restored elsewhere. */
static bool was_declared_dead(const coord_t *c, const coord_worker_t *w)
{
    for (const coord_worker_t *o = c->workers; o; o = o->next)
        if (o != w && !o->alive && o->pid == w->pid && !strcmp(o->host, w->host))
            return true;
    return false;
}

/* Whether any job's placement names worker id. */
static bool worker_placed(const coord_t *c, uint32_t id)
{
    for (const coord_job_t *j = c->jobs; j; j = j->next)
        if (coord_job_on_worker(j, id))
            return true;
    return false;
}

/* Registrations that come and go must not grow the registry without
 * bound: past twice --max-registrations entries, dead workers that no placement
 * names and that `eddy status` no longer shows (--dead-worker-grace-ms)
 * are forgotten. */
static void prune_dead_workers(coord_t *c)
{
    uint32_t n = 0;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        n++;
    if (n < 2 * c->limits.max_workers)
        return;
    uint64_t now = eddy_mono_ms();
    uint64_t grace = c->opts->dead_worker_grace_ms ? c->opts->dead_worker_grace_ms : 60000;
    for (coord_worker_t **pp = &c->workers; *pp;) {
        coord_worker_t *w = *pp;
        if (!w->alive && !w->awaiting && w->dead_since_ms && now - w->dead_since_ms > grace &&
            now >= w->quarantined_until_ms && !worker_placed(c, w->id)) {
            *pp = w->next;
            free(w->metrics);
            free(w);
        } else {
            pp = &w->next;
        }
    }
}

static void on_register(coord_t *c, const unsigned char *identity, size_t identity_len,
                        const eddy_msg_t *m)
{
    if (m->u.reg.protocol_version != EDDY_PROTOCOL_VERSION) {
        eddy_msg_t refuse = {.type = EDDY_MSG_REGISTERED};
        refuse.u.registered.fatal = true;
        snprintf(refuse.u.registered.error, sizeof refuse.u.registered.error,
                 "worker %s speaks protocol version %u, this coordinator %u: run the same eddy version",
                 m->u.reg.name, m->u.reg.protocol_version, EDDY_PROTOCOL_VERSION);
        eddy_warn("%s", refuse.u.registered.error);
        send_to(c, identity, identity_len, &refuse);
        return;
    }
    coord_worker_t *w = worker_by_identity(c, identity, identity_len);
    /* The same process again on a new connection (it looked for the leader
     * elsewhere and came back): it keeps its entry, not a second one that
     * would be declared dead when the first misses its heartbeats. */
    for (coord_worker_t *o = c->workers; o && !w; o = o->next)
        if (o->alive && o->pid == m->u.reg.pid && !strcmp(o->host, m->u.reg.host) &&
            !strcmp(o->name, m->u.reg.name) && !strcmp(o->endpoint, m->u.reg.data_endpoint)) {
            memcpy(o->identity, identity, identity_len);
            o->identity_len = identity_len;
            w = o;
        }
    /* Identity is unique: another live process under the same name or data
     * address would get the other's tasks and data (the same process
     * re-registering on a new connection has the same host and pid). A
     * replacement of a worker that just died looks the same until the old
     * one misses its heartbeats, so the newcomer is asked to retry; only if
     * the old one is still heartbeating a heartbeat timeout after the first
     * clash is the refusal final (the worker exits saying why). */
    for (coord_worker_t *o = c->workers; o && !w; o = o->next) {
        bool same_process = o->pid == m->u.reg.pid && !strcmp(o->host, m->u.reg.host);
        bool same_name = !strcmp(o->name, m->u.reg.name);
        bool clash = same_name || !strcmp(o->endpoint, m->u.reg.data_endpoint);
        if (!o->alive || same_process || !clash)
            continue;
        uint64_t now = eddy_mono_ms();
        if (!o->clash_since_ms)
            o->clash_since_ms = now;
        bool final = now - o->clash_since_ms > c->opts->heartbeat_timeout_ms;
        eddy_msg_t refuse = {.type = EDDY_MSG_REGISTERED};
        refuse.u.registered.fatal = final;
        if (same_name)
            snprintf(refuse.u.registered.error, sizeof refuse.u.registered.error,
                     "worker name '%s' is already registered by a live worker (pid %lld on %s, "
                     "data at %s): give each worker its own --name", m->u.reg.name,
                     (long long)o->pid, o->host, o->endpoint);
        else
            snprintf(refuse.u.registered.error, sizeof refuse.u.registered.error,
                     "data address %s is already registered by live worker '%s' (pid %lld on "
                     "%s): give each worker its own data address", m->u.reg.data_endpoint,
                     o->name, (long long)o->pid, o->host);
        if (final)
            eddy_warn("refused a registration (pid %lld on %s): %s", (long long)m->u.reg.pid,
                      m->u.reg.host, refuse.u.registered.error);
        send_to(c, identity, identity_len, &refuse);
        return;
    }
    if (!w && (w = coord_awaiting_worker_named(c, m->u.reg.name))) {
        /* registered with the previous leader: it takes its entry back */
        w->awaiting = false;
        memcpy(w->identity, identity, identity_len);
        w->identity_len = identity_len;
        eddy_info("worker %u (%s), registered with the previous leader, is back %llu ms after "
                  "the takeover",
                  w->id, w->name, (unsigned long long)(eddy_mono_ms() - c->started_ms));
    }
    bool created = !w;
    if (!w && coord_alive_workers(c) >= c->limits.max_workers) {
        eddy_msg_t refuse = {.type = EDDY_MSG_REGISTERED};
        snprintf(refuse.u.registered.error, sizeof refuse.u.registered.error,
                 "this coordinator already has %u live workers (--max-registrations)",
                 c->limits.max_workers);
        coord_reject(&c->rejects, COORD_REJECT_REGISTRATIONS,
                     "registration of '%s' (pid %lld on %s): %s", m->u.reg.name,
                     (long long)m->u.reg.pid, m->u.reg.host, refuse.u.registered.error);
        send_to(c, identity, identity_len, &refuse);
        return;
    }
    if (!w)
        prune_dead_workers(c);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return;
        w->id = ++c->next_worker_id;
        w->conn_fd = -1;
        /* a quarantined peer registering again stays quarantined */
        for (coord_worker_t *old = c->workers; old; old = old->next)
            if (old->quarantined_until_ms > w->quarantined_until_ms &&
                ((old->identity_len == identity_len && !memcmp(old->identity, identity, identity_len)) ||
                 !strcmp(old->endpoint, m->u.reg.data_endpoint))) {
                w->quarantined_until_ms = old->quarantined_until_ms;
                w->quarantine_ms = old->quarantine_ms;
            }
        w->next = c->workers;
        c->workers = w;
        memcpy(w->identity, identity, identity_len);
        w->identity_len = identity_len;
    }
    snprintf(w->name, sizeof w->name, "%s", m->u.reg.name[0] ? m->u.reg.name : "worker");
    snprintf(w->endpoint, sizeof w->endpoint, "%s", m->u.reg.data_endpoint);
    snprintf(w->host, sizeof w->host, "%s", m->u.reg.host);
    w->pid = m->u.reg.pid;
    w->cores = m->u.reg.cores;
    /* a new secret for this registration's LIVENESS (sent to it alone) */
    w->liveness_token = 0;
    while (!w->liveness_token && RAND_bytes((unsigned char *)&w->liveness_token,
                                            sizeof w->liveness_token) == 1) {
    }
    w->last_alive_ms = 0;
    w->busy = false;
    w->alive = true;
    w->left = false;
    w->dead_since_ms = 0;
    w->last_seen_ms = eddy_mono_ms();
    w->registered_wall_ms = eddy_wall_ms();
    w->registered_ms = w->last_seen_ms;
    eddy_msg_t reply = {.type = EDDY_MSG_REGISTERED};
    reply.u.registered.worker_id = w->id;
    reply.u.registered.heartbeat_ms = c->opts->heartbeat_ms;
    reply.u.registered.liveness_token = w->liveness_token;
    send_to(c, identity, identity_len, &reply);
    eddy_info("worker %u (%s, pid %lld) registered, data at %s", w->id, w->name,
              (long long)w->pid, w->endpoint);
    coord_worker_lease_on_registered(c, w);
    coord_worker_back(c, w);
    if (created && was_declared_dead(c, w)) {
        eddy_info("worker %u (%s, pid %lld) was declared dead before: releasing the tasks it may "
                  "still run", w->id, w->name, (long long)w->pid);
        release_stale_tasks(c, w);
    }
    coord_jobs_on_worker_joined(c);
    coord_rebalance_worker_joined(c);
}

static void worker_gone(coord_t *c, coord_worker_t *w, eddy_log_level_t level, const char *what,
                        const char *why)
{
    if (!w->alive)
        return;
    w->alive = false;
    w->dead_since_ms = eddy_mono_ms();
    w->clash_since_ms = 0;
    /* nothing reads a dead worker's task metrics: no memory held for it */
    free(w->metrics);
    w->metrics = NULL;
    w->n_metrics = 0;
    eddy_log(level, "worker %u (%s, pid %lld) %s: %s", w->id, w->name, (long long)w->pid, what, why);
    coord_worker_lease_release(c, w);
    coord_jobs_on_worker_lost(c, w);
}

void coord_declare_dead(coord_t *c, coord_worker_t *w, const char *why)
{
    worker_gone(c, w, EDDY_LOG_WARN, "declared dead", why);
}

void coord_worker_left(coord_t *c, coord_worker_t *w, const char *why)
{
    if (w->alive)
        w->left = true;
    worker_gone(c, w, EDDY_LOG_INFO, "left", why);
}

void coord_quarantine_worker(coord_t *c, coord_worker_t *w, const char *why)
{
    w->quarantine_ms = w->quarantine_ms ? w->quarantine_ms * 2 : COORD_QUARANTINE_MIN_MS;
    if (w->quarantine_ms > COORD_QUARANTINE_MAX_MS)
        w->quarantine_ms = COORD_QUARANTINE_MAX_MS;
    w->quarantined_until_ms = eddy_mono_ms() + w->quarantine_ms;
    eddy_warn("worker %u (%s, pid %lld) quarantined for %llu s: %s", w->id, w->name,
              (long long)w->pid, (unsigned long long)(w->quarantine_ms / 1000), why);
    release_stale_tasks(c, w);
    coord_declare_dead(c, w, why);
}

/* A worker's loop (its heartbeats, and every other message of its main
 * socket) silent for the heartbeat timeout is dead unless its liveness
 * thread still speaks (LIVENESS within the heartbeat timeout): then it is
 * busy (its loop blocks: a large final output, a long state load, a
 * loaded machine), logged once, shown by status, and declared dead only
 * once its loop was silent for the stuck timeout. A stopped or cut-off
 * process says neither: "no heartbeat for" as before. */
static uint64_t stuck_timeout_ms(const coord_t *c)
{
    uint64_t t = c->opts->stuck_timeout_ms ? c->opts->stuck_timeout_ms
                                           : EDDY_COORD_DEFAULT_STUCK_TIMEOUT_MS;
    return t > c->opts->heartbeat_timeout_ms ? t : c->opts->heartbeat_timeout_ms;
}

static void check_liveness(coord_t *c, uint64_t now_ms)
{
    uint64_t timeout = c->opts->heartbeat_timeout_ms;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        if (!w->alive || now_ms - w->last_seen_ms <= timeout)
            continue;
        unsigned long long silent = (unsigned long long)(now_ms - w->last_seen_ms);
        bool alive = w->last_alive_ms && now_ms - w->last_alive_ms <= timeout;
        char why[128];
        if (!alive) {
            snprintf(why, sizeof why, "no heartbeat for %llu ms", silent);
            coord_declare_dead(c, w, why);
        } else if (now_ms - w->last_seen_ms > stuck_timeout_ms(c)) {
            snprintf(why, sizeof why, "stuck: loop silent for %llu ms, alive (--stuck-timeout-ms %llu)",
                     silent, (unsigned long long)stuck_timeout_ms(c));
            coord_declare_dead(c, w, why);
        } else if (!w->busy) {
            w->busy = true;
            eddy_warn("worker %u (%s, pid %lld) busy: loop silent for %llu ms, alive (its own "
                      "report: %llu ms); dead if stuck for %llu ms", w->id, w->name,
                      (long long)w->pid, silent, (unsigned long long)w->reported_loop_silent_ms,
                      (unsigned long long)stuck_timeout_ms(c));
        }
    }
}

/* LIVENESS from a worker's liveness thread (its own connection, so not
 * bound by routing id): it counts only with the token this coordinator
 * gave that worker's current registration. */
static void on_liveness(coord_t *c, const eddy_msg_t *m)
{
    coord_worker_t *w = coord_find_worker(c, m->u.liveness.worker_id);
    if (!w || !w->alive || !w->liveness_token || m->u.liveness.token != w->liveness_token) {
        coord_reject(&c->rejects, COORD_REJECT_LIVENESS,
                     "a LIVENESS for worker %u without its registration's token",
                     m->u.liveness.worker_id);
        return;
    }
    w->last_alive_ms = eddy_mono_ms();
    w->reported_loop_silent_ms = m->u.liveness.loop_silent_ms;
}

/* ---- client requests ---------------------------------------------------- */

static void reply_json(coord_t *c, const unsigned char *id, size_t len, json_t *doc)
{
    char *body = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
    coord_reply(c, id, len, 0, body ? body : "{}");
    free(body);
    json_decref(doc);
}

/* submit [--guarantee G] [--from-savepoint LOC --savepoint-manifest JSON
 * [--allow-non-restored-state]] JOB [job flags]: the options eddy submit
 * puts before JOB; what follows JOB are the job's own flags. The manifest
 * was read and checked by the client (the coordinator reads no state).
 * `--like OLD` instead of JOB and its flags: the job OLD was (its name,
 * its flags as given, credentials included, and its guarantee unless
 * --guarantee) submitted again, ended or not: eddy upgrade's rollback. */
static void on_submit(coord_t *c, const unsigned char *id, size_t id_len, uint32_t argc, char **argv)
{
    eddy_guarantee_t guarantee = EDDY_GUARANTEE_EXACTLY_ONCE;
    bool guarantee_given = false;
    const char *location = NULL, *manifest_text = NULL, *like = NULL;
    bool allow = false;
    while (argc >= 1 && !strncmp(argv[0], "--", 2)) {
        if (!strcmp(argv[0], "--allow-non-restored-state")) {
            allow = true;
            argc--, argv++;
            continue;
        }
        if (argc < 2)
            break;
        if (!strcmp(argv[0], "--guarantee")) {
            if (eddy_guarantee_parse(argv[1], &guarantee) < 0) {
                coord_reply(c, id, id_len, 2,
                            "--guarantee: expected exactly-once, at-least-once or at-most-once");
                return;
            }
            guarantee_given = true;
        } else if (!strcmp(argv[0], "--from-savepoint")) {
            location = argv[1];
        } else if (!strcmp(argv[0], "--savepoint-manifest")) {
            manifest_text = argv[1];
        } else if (!strcmp(argv[0], "--like")) {
            like = argv[1];
        } else {
            break;
        }
        argc -= 2;
        argv += 2;
    }
    if ((like ? argc != 0 : argc < 1) || !location != !manifest_text) {
        coord_reply(c, id, id_len, 2, "usage: submit [--guarantee G] [--from-savepoint LOC "
                    "--savepoint-manifest JSON [--allow-non-restored-state]] (JOB [job flags] | "
                    "--like JOB_ID)");
        return;
    }
    eddy_err_t err = {{0}};
    /* --like: the old job's name and flags, copied (submitting may forget
     * an ended job to keep --max-ended-jobs) */
    char name[EDDY_NAME_MAX];
    uint32_t n_args = argc > 0 ? argc - 1 : 0;
    char **args = argc > 0 ? eddy_strv_dup(n_args, argv + 1) : NULL;
    if (like) {
        coord_job_t *old = coord_job_with_id(c, like);
        if (!old) {
            snprintf(err.msg, sizeof err.msg, "--like: no job '%s'", like);
            coord_reply(c, id, id_len, 2, err.msg);
            return;
        }
        snprintf(name, sizeof name, "%s", old->name);
        n_args = old->argc;
        args = eddy_strv_dup(old->argc, old->argv);
        if (!guarantee_given)
            guarantee = old->guarantee;
    } else {
        snprintf(name, sizeof name, "%s", argv[0]);
    }
    if (n_args && !args) {
        coord_reply(c, id, id_len, 1, "out of memory");
        return;
    }
    eddy_savepoint_manifest_t m = {0};
    coord_savepoint_from_t from = {location, &m, allow};
    coord_job_t *j = NULL;
    if (manifest_text &&
        eddy_savepoint_manifest_decode(manifest_text, strlen(manifest_text), &m, &err) < 0)
        eddy_err_wrap(&err, "%s", location);
    else
        j = coord_job_submit(c, name, guarantee, (int)n_args, args, location ? &from : NULL, &err);
    eddy_savepoint_manifest_clear(&m);
    eddy_strv_free(n_args, args);
    if (!j) {
        coord_reply(c, id, id_len, 2, err.msg);
        return;
    }
    coord_reply(c, id, id_len, 0, j->id);
}

/* savepoint JOB [--stop] [--dir URI]: answered when it is written. */
static void on_savepoint(coord_t *c, const unsigned char *id, size_t id_len, uint32_t argc, char **argv)
{
    bool stop = false;
    const char *dir = NULL;
    for (uint32_t i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--stop"))
            stop = true;
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else
            argc = 0; /* usage */
    }
    if (argc < 1) {
        coord_reply(c, id, id_len, 2, "usage: savepoint JOB [--stop] [--dir URI]");
        return;
    }
    eddy_err_t err = {{0}};
    if (coord_savepoint_request(c, argv[0], dir, stop, id, id_len, &err) < 0)
        coord_reply(c, id, id_len, 1, err.msg);
}

static void on_request(coord_t *c, const unsigned char *id, size_t id_len, const eddy_msg_t *m)
{
    const char *verb = m->u.request.verb;
    uint32_t argc = m->u.request.argc;
    char **argv = m->u.request.argv;
    eddy_err_t err = {{0}};
    if (!strcmp(verb, "status")) {
        reply_json(c, id, id_len, coord_view_status(c));
    } else if (!strcmp(verb, "jobs")) {
        reply_json(c, id, id_len, coord_view_jobs(c));
    } else if (!strcmp(verb, "scaling")) {
        reply_json(c, id, id_len, json_incref(c->decisions));
    } else if (!strcmp(verb, "metrics")) {
        if (argc != 1) {
            coord_reply(c, id, id_len, 2, "usage: metrics JOB");
            return;
        }
        json_t *doc = coord_view_operator_metrics(c, argv[0]);
        if (!doc) {
            char msg[160];
            snprintf(msg, sizeof msg, "no job '%s'", argv[0]);
            coord_reply(c, id, id_len, 1, msg);
            return;
        }
        reply_json(c, id, id_len, doc);
    } else if (!strcmp(verb, "decision")) {
        if (argc == 1 && strlen(argv[0]) > c->limits.max_decision_bytes) {
            char msg[160];
            snprintf(msg, sizeof msg, "decision: %zu bytes, more than --max-decision-bytes %u",
                     strlen(argv[0]), c->limits.max_decision_bytes);
            coord_reject(&c->rejects, COORD_REJECT_DECISION_BYTES, "%s", msg);
            coord_reply(c, id, id_len, 2, msg);
            return;
        }
        json_error_t jerr;
        json_t *doc = argc == 1 ? json_loads(argv[0], 0, &jerr) : NULL;
        if (!doc || !json_is_object(doc)) {
            json_decref(doc);
            coord_reply(c, id, id_len, 2, "decision: expected one JSON object");
            return;
        }
        if (coord_record_decision(c, doc, &err) < 0) {
            coord_reply(c, id, id_len, 2, err.msg);
            return;
        }
        coord_reply(c, id, id_len, 0, "recorded");
    } else if (!strcmp(verb, "rescale")) {
        uint64_t p;
        if (argc != 3 || eddy_parse_uint(argv[2], &p) < 0 || p > UINT32_MAX) {
            coord_reply(c, id, id_len, 2, "usage: rescale JOB OPERATOR PARALLELISM");
            return;
        }
        if (coord_job_rescale(c, argv[0], argv[1], (uint32_t)p, id, id_len, &err) < 0)
            coord_reply(c, id, id_len, 1, err.msg);
    } else if (!strcmp(verb, "submit")) {
        on_submit(c, id, id_len, argc, argv);
    } else if (!strcmp(verb, "savepoint")) {
        on_savepoint(c, id, id_len, argc, argv);
    } else if (!strcmp(verb, "cancel")) {
        if (argc != 1) {
            coord_reply(c, id, id_len, 2, "usage: cancel JOB");
            return;
        }
        if (coord_job_cancel(c, argv[0], &err) < 0)
            coord_reply(c, id, id_len, 1, err.msg);
        else
            coord_reply(c, id, id_len, 0, "cancelled");
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "unknown request '%s'", verb);
        coord_reply(c, id, id_len, 2, msg);
    }
}

void eddy_coordinator_limits_fill(eddy_coordinator_limits_t *l)
{
    if (!l->max_heartbeat_entries)
        l->max_heartbeat_entries = EDDY_COORD_DEFAULT_MAX_HEARTBEAT_ENTRIES;
    if (!l->max_heartbeat_bytes)
        l->max_heartbeat_bytes = EDDY_COORD_DEFAULT_MAX_HEARTBEAT_BYTES;
    if (!l->max_worker_series)
        l->max_worker_series = EDDY_COORD_DEFAULT_MAX_WORKER_SERIES;
    if (!l->max_workers)
        l->max_workers = EDDY_COORD_DEFAULT_MAX_WORKERS;
    if (!l->max_decisions || l->max_decisions > COORD_MAX_DECISIONS)
        l->max_decisions = l->max_decisions ? COORD_MAX_DECISIONS : EDDY_COORD_DEFAULT_MAX_DECISIONS;
    if (!l->max_decision_bytes)
        l->max_decision_bytes = EDDY_COORD_DEFAULT_MAX_DECISION_BYTES;
    if (!l->max_ended_jobs)
        l->max_ended_jobs = EDDY_COORD_DEFAULT_MAX_ENDED_JOBS;
    if (!l->max_plugins)
        l->max_plugins = EDDY_COORD_DEFAULT_MAX_PLUGINS;
    if (!l->reply_hwm)
        l->reply_hwm = EDDY_COORD_DEFAULT_REPLY_HWM;
}

/* ---- roles (--keys) -------------------------------------------------------- */

/* Requests that only read. */
static bool read_only_verb(const char *verb)
{
    return !strcmp(verb, "status") || !strcmp(verb, "jobs") || !strcmp(verb, "scaling") ||
           !strcmp(verb, "metrics");
}

/* Whether the sender's role may do m: readers read, workers also run the
 * worker protocol and fetch plugins, clients do everything. Without keys
 * there are no roles. */
static bool role_allows(const coord_t *c, eddy_role_t role, const eddy_msg_t *m)
{
    if (!c->opts->keys || role == EDDY_ROLE_CLIENT)
        return true;
    switch (m->type) {
    case EDDY_MSG_REQUEST:
        return read_only_verb(m->u.request.verb);
    case EDDY_MSG_PLUGIN:
        return role == EDDY_ROLE_WORKER && m->u.plugin.len == 0; /* a fetch, not an upload */
    default:
        return role == EDDY_ROLE_WORKER;
    }
}

static eddy_log_limit_t refused_log;

/* Answers what a client waits for; a forbidden worker-protocol message
 * gets no answer (its sender is a misconfigured or hostile process). */
static void refuse(coord_t *c, const unsigned char *id, size_t id_len, eddy_role_t role,
                   const eddy_msg_t *m)
{
    char what[96];
    if (m->type == EDDY_MSG_REQUEST)
        snprintf(what, sizeof what, "'%s'", m->u.request.verb);
    else if (m->type == EDDY_MSG_PLUGIN)
        snprintf(what, sizeof what, "a plugin upload");
    else
        snprintf(what, sizeof what, "%s", eddy_msg_type_name(m->type));
    eddy_log_limited(&refused_log, EDDY_LOG_WARN, "refused %s from a %s key", what,
                     eddy_role_name(role));
    if (m->type == EDDY_MSG_REQUEST || m->type == EDDY_MSG_PLUGIN) {
        char msg[200];
        snprintf(msg, sizeof msg, "permission denied: a %s key may not send %s (client keys only)",
                 eddy_role_name(role), what);
        coord_reply(c, id, id_len, 1, msg);
    }
}

/* ---- loop --------------------------------------------------------------- */

/* One limiter per kind of bad input: a hostile peer sending garbage as fast
 * as it can costs a line per second, not a line per message. */
static eddy_log_limit_t malformed_log, undecodable_log, unexpected_log;

/* Without keys nothing says who a peer is, and a registered worker is
 * given plugins, tasks and the job's data: only loopback peers may register
 * (--insecure or not: it opens the port to clients, not to unproven
 * workers). peer NULL or not an IP address: ipc://, on this machine. */
static bool may_register(coord_t *c, const unsigned char *id, size_t id_len, const char *peer,
                         const eddy_msg_t *m)
{
    if (c->opts->keys || !eddy_peer_is_remote(peer))
        return true;
    eddy_msg_t refuse = {.type = EDDY_MSG_REGISTERED};
    refuse.u.registered.fatal = true;
    snprintf(refuse.u.registered.error, sizeof refuse.u.registered.error,
             "worker registration from %s refused: without --keys only workers on loopback "
             "may register (anyone reaching the port would be given plugins, tasks and job "
             "data); give every process --keys DIR (eddy keygen)", peer);
    coord_reject(&c->rejects, COORD_REJECT_REMOTE_WITHOUT_KEYS, "'%s' (pid %lld on %s): %s",
                 m->u.reg.name, (long long)m->u.reg.pid, m->u.reg.host, refuse.u.registered.error);
    send_to(c, id, id_len, &refuse);
    return false;
}

static void handle_message(coord_t *c, const unsigned char *id, size_t id_len, const void *data,
                           size_t len, eddy_role_t role, const char *peer)
{
    eddy_msg_t m;
    eddy_err_t err;
    /* Caps before decoding: the decoder allocates for every task entry. */
    uint32_t n_tasks;
    if (eddy_msg_peek(data, len, &n_tasks) == EDDY_MSG_HEARTBEAT) {
        if (len > c->limits.max_heartbeat_bytes) {
            coord_reject(&c->rejects, COORD_REJECT_HEARTBEAT_BYTES,
                         "a heartbeat of %zu bytes (--max-heartbeat-bytes %u)", len,
                         c->limits.max_heartbeat_bytes);
            return;
        }
        if (n_tasks > c->limits.max_heartbeat_entries) {
            coord_reject(&c->rejects, COORD_REJECT_HEARTBEAT_ENTRIES,
                         "a heartbeat of %u task entries (--max-heartbeat-entries %u)", n_tasks,
                         c->limits.max_heartbeat_entries);
            return;
        }
    }
    if (eddy_msg_decode(data, len, &m, &err) < 0) {
        eddy_log_limited(&undecodable_log, EDDY_LOG_WARN, "dropping control message: %s",
                         err.msg);
        return;
    }
    if (!role_allows(c, role, &m)) {
        refuse(c, id, id_len, role, &m);
        eddy_msg_clear(&m);
        return;
    }
    if (m.leader_epoch > c->leader_epoch) {
        /* Authority by role: only a coordinator's key may carry a leader
         * epoch anyone acts on, and no coordinator sends to another's
         * control socket: every sender here is a client, reader or worker
         * (or, without keys, anyone), so the epoch is ignored, never obeyed
         * (a reader's status request must not depose the leader). A leader
         * learns that it was deposed from its own etcd lease only
         * (still_leading), which it stops trusting before etcd can give
         * the key to another; the workers fence a deposed leader's commands
         * by epoch. The message itself is handled. */
        coord_reject(&c->rejects, COORD_REJECT_LEADER_EPOCH,
                     "a %s message from a %s carries leader epoch %llu, above this leader's "
                     "%llu: ignored (only this coordinator's lease decides)",
                     eddy_msg_type_name(m.type),
                     c->opts->keys ? eddy_role_name(role) : "peer without keys",
                     (unsigned long long)m.leader_epoch, (unsigned long long)c->leader_epoch);
    }
    coord_worker_t *w = NULL;
    if (m.type == EDDY_MSG_PLUGIN) {
        /* An upload from a client, or a worker's fetch. */
        coord_plugins_on_message(c, id, id_len, worker_by_identity(c, id, id_len), &m);
        eddy_msg_clear(&m);
        return;
    }
    if (m.type == EDDY_MSG_LIVENESS) {
        on_liveness(c, &m);
        eddy_msg_clear(&m);
        return;
    }
    if (m.type != EDDY_MSG_REGISTER && m.type != EDDY_MSG_REQUEST) {
        w = worker_by_identity(c, id, id_len);
        if (!w) {
            /* A worker we declared dead (or never knew) must register again. */
            eddy_msg_t again = {.type = EDDY_MSG_REGISTERED};
            snprintf(again.u.registered.error, sizeof again.u.registered.error,
                     "unknown worker; register again");
            if (m.type == EDDY_MSG_HEARTBEAT || m.type == EDDY_MSG_LEAVE) /* it waits */
                send_to(c, id, id_len, &again);
            eddy_msg_clear(&m);
            return;
        }
        w->last_seen_ms = eddy_mono_ms();
        if (w->busy) {
            w->busy = false;
            eddy_info("worker %u (%s, pid %lld) no longer busy: its loop answers again", w->id,
                      w->name, (long long)w->pid);
        }
    }
    switch (m.type) {
    case EDDY_MSG_REGISTER:
        if (may_register(c, id, id_len, peer, &m))
            on_register(c, id, id_len, &m);
        break;
    case EDDY_MSG_HEARTBEAT: {
        uint32_t kept = coord_sender_filter_metrics(c, w, m.u.heartbeat.tasks,
                                                    m.u.heartbeat.n_tasks);
        if (kept < m.u.heartbeat.n_tasks) {
            /* what is kept is all the memory held for it */
            eddy_task_metrics_t *fit = realloc(m.u.heartbeat.tasks,
                                               (kept ? kept : 1) * sizeof *fit);
            if (fit)
                m.u.heartbeat.tasks = fit;
            m.u.heartbeat.n_tasks = kept;
        }
        coord_timeline_on_heartbeat(c, w, w->metrics, w->n_metrics,
                                    m.u.heartbeat.tasks, m.u.heartbeat.n_tasks);
        free(w->metrics);
        w->last_heartbeat_ms = eddy_mono_ms();
        w->metrics = m.u.heartbeat.tasks;
        w->n_metrics = m.u.heartbeat.n_tasks;
        m.u.heartbeat.tasks = NULL;
        coord_recovery_on_metrics(c, w->metrics, w->n_metrics);
        coord_latency_on_metrics(c, w->id, w->metrics, w->n_metrics);
        coord_jobs_on_metrics(c, w);
        /* The answer tells the worker its coordinator still leads (a worker
         * given several coordinators moves on when answers stop). */
        eddy_msg_t ack = {.type = EDDY_MSG_REGISTERED};
        ack.u.registered.worker_id = w->id;
        ack.u.registered.heartbeat_ms = c->opts->heartbeat_ms;
        ack.u.registered.liveness_token = w->liveness_token;
        send_to(c, id, id_len, &ack);
        break;
    }
    case EDDY_MSG_DEPLOYED:
        coord_job_on_deployed(c, w, &m);
        break;
    case EDDY_MSG_ACK: {
        /* task-scoped: only from the task's worker, a final ACK once (senders.c) */
        bool final = m.u.ack.checkpoint == EDDY_FINAL_CHECKPOINT;
        coord_job_t *j = coord_sender_task(c, w, final ? "final ACK" : "ACK", m.u.ack.job,
                                           m.u.ack.epoch, m.u.ack.stage, m.u.ack.instance);
        /* (a final ACK outside the final commit is ignored by on_ack, and
         * must not use up the task's one) */
        if (j && (!final || !j->finishing ||
                  coord_sender_once(c, j, m.u.ack.stage, m.u.ack.instance,
                                    COORD_TASK_SEEN_FINAL_ACK, "final ACK")))
            coord_job_on_ack(c, &m);
        break;
    }
    case EDDY_MSG_TASK_DONE: {
        coord_job_t *j = coord_sender_task(c, w, "TASK_DONE", m.u.task_done.job,
                                           m.u.task_done.epoch, m.u.task_done.stage,
                                           m.u.task_done.instance);
        if (j && coord_sender_once(c, j, m.u.task_done.stage, m.u.task_done.instance,
                                   COORD_TASK_SEEN_DONE, "TASK_DONE"))
            coord_job_on_task_done(c, &m);
        break;
    }
    case EDDY_MSG_STEP_DONE:
        /* only the new owner's worker says its groups are installed (senders.c) */
        if (coord_sender_task(c, w, "STEP_DONE", m.u.step_done.job, m.u.step_done.epoch,
                              m.u.step_done.stage, m.u.step_done.instance))
            coord_fluid_on_step_done(c, &m);
        break;
    case EDDY_MSG_TASK_FAILED: {
        coord_job_t *j = coord_sender_task(c, w, "TASK_FAILED", m.u.task_failed.job,
                                           m.u.task_failed.epoch, m.u.task_failed.stage,
                                           m.u.task_failed.instance);
        if (!j || !coord_sender_once(c, j, m.u.task_failed.stage, m.u.task_failed.instance,
                                     COORD_TASK_SEEN_FAILED, "TASK_FAILED"))
            break;
        /* The cause names the worker: an input one worker cannot open is
         * that worker's problem, and the user has to know which. */
        char cause[sizeof m.u.task_failed.error];
        snprintf(cause, sizeof cause, "%s", m.u.task_failed.error);
        snprintf(m.u.task_failed.error, sizeof m.u.task_failed.error, "on worker %u (%s): %.*s",
                 w->id, w->name, (int)(sizeof cause - 96), cause);
        coord_job_on_task_failed(c, &m);
        break;
    }
    case EDDY_MSG_REQUEST:
        on_request(c, id, id_len, &m);
        break;
    case EDDY_MSG_LEAVE: {
        coord_worker_left(c, w, m.u.leave.reason[0] ? m.u.leave.reason : "no reason given");
        eddy_msg_t bye = {.type = EDDY_MSG_REGISTERED}; /* it may close now */
        bye.u.registered.worker_id = w->id;
        bye.u.registered.heartbeat_ms = c->opts->heartbeat_ms;
        send_to(c, id, id_len, &bye);
        break;
    }
    default:
        eddy_log_limited(&unexpected_log, EDDY_LOG_WARN, "unexpected %s message",
                         eddy_msg_type_name(m.type));
    }
    eddy_msg_clear(&m);
}

/* Messages taken per loop turn, so HTTP and timers get their turn too. */
#define DRAIN_BURST 1000

static void drain_router(coord_t *c)
{
    for (int n = 0; n < DRAIN_BURST && !c->deposed; n++) {
        zmq_msg_t frames[EDDY_ZRECV_FRAMES_ROUTER];
        eddy_err_t err;
        eddy_zrecv_result_t got = eddy_zrecv(c->router, frames, EDDY_ZRECV_FRAMES_ROUTER,
                                             EDDY_ZRECV_MAX_CONTROL, &err);
        if (got == EDDY_ZRECV_NONE)
            return;
        if (got == EDDY_ZRECV_MALFORMED) {
            eddy_log_limited(&malformed_log, EDDY_LOG_WARN, "dropping control message: %s",
                             err.msg);
            continue;
        }
        size_t id_len = zmq_msg_size(&frames[0]);
        if (id_len <= COORD_MAX_IDENTITY) {
            const unsigned char *id = zmq_msg_data(&frames[0]);
            handle_message(c, id, id_len, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]),
                           eddy_curve_role(&frames[1]), zmq_msg_gets(&frames[1], "Peer-Address"));
            /* which connection it came through: disconnect.c */
            coord_disconnect_heard(c, zmq_msg_get(&frames[1], ZMQ_SRCFD), id, id_len,
                                   worker_by_identity(c, id, id_len));
        }
        zmq_msg_close(&frames[1]);
        zmq_msg_close(&frames[0]);
    }
}

static void free_coord(coord_t *c)
{
    /* first: callbacks of the writes that still finish (a job's final
     * state) may look at jobs */
    eddy_metastore_async_destroy(&c->meta_async, COORD_META_DRAIN_MS);
    coord_reaper_destroy(&c->reaper);
    while (c->tickets)
        coord_ticket_release(c->tickets);
    while (c->jobs) {
        coord_job_t *j = c->jobs;
        c->jobs = j->next;
        coord_job_free(j);
    }
    while (c->workers) {
        coord_worker_t *w = c->workers;
        c->workers = w->next;
        free(w->metrics);
        free(w);
    }
    json_decref(c->decisions);
    coord_timeline_destroy(&c->timeline);
    json_decref(c->used_ids);
    coord_disconnect_stop(c);
    eddy_http_destroy(&c->http);
    eddy_metastore_destroy(&c->meta);
    eddy_snapshot_store_destroy(&c->store);
    coord_plugins_close(c);
    if (c->router)
        zmq_close(c->router);
    /* after the router: a handshake on it must never find no handler */
    eddy_zap_destroy(&c->zap);
    if (c->zctx)
        zmq_ctx_term(c->zctx);
}

/* Listeners other machines can reach are the operator's decision (compose
 * binds 0.0.0.0 on purpose), but never a silent one. */
static void warn_beyond_loopback(const eddy_coordinator_options_t *opts, const char *http_host)
{
    /* the control socket: refused by the command line without --insecure,
     * which says so itself (cli/common.c) */
    if (opts->http_port && !opts->http_token && !eddy_host_is_loopback(http_host))
        eddy_warn("HTTP on %s:%u is reachable beyond loopback without a bearer token "
                  "(--http-token-file): anyone who can reach it can read job status and metrics "
                  "(docs/security.md)", http_host, opts->http_port);
}

/* The exit code of a run that ended normally; a failure names the first
 * failed job and its cause in err, for the caller's last line. */
static int run_result(coord_t *c, eddy_err_t *err)
{
    if (c->any_failed) {
        for (coord_job_t *j = c->jobs; j; j = j->next)
            if (j->state == JOB_FAILED) {
                eddy_err_set(err, "job %s failed: %s", j->id, j->error);
                break;
            }
        return 1;
    }
    if (c->any_cancelled) {
        eddy_err_set(err, "job cancelled");
        for (coord_job_t *j = c->jobs; j; j = j->next)
            if (j->state == JOB_CANCELLED) {
                eddy_err_set(err, "job %s was cancelled", j->id);
                break;
            }
        return 3;
    }
    return 0;
}

/* Checked before every loop turn acts: a lease that ran out (also while the
 * process was paused) or a peer that knows a newer leader. */
static bool still_leading(coord_t *c)
{
    if (!c->election || c->deposed)
        return !c->deposed;
    if (eddy_election_leading(c->election))
        return true;
    c->deposed = true;
    /* said here, the moment the loop stops acting (the election thread's
     * "leadership lost" may come later: it waits for its etcd call) */
    eddy_warn("stopped acting as leader (epoch %llu): its lease is no longer known to be valid",
              (unsigned long long)c->leader_epoch);
    return false;
}

const char *coord_storage(const eddy_coordinator_options_t *opts)
{
    return opts->checkpoint_storage ? opts->checkpoint_storage : opts->snapshot_dir;
}

/* ---- reading the store at takeover --------------------------------------- */

/* What a new leader reads synchronously before its loop: a fresh store
 * connection (fenced on its election), the decision history, then the jobs
 * with their checkpoints and counters and the previous leader's workers.
 * Each is all or nothing, so a failed attempt is simply made again. */
static int load_first(coord_t *c, const eddy_metastore_tls_t *tls, eddy_err_t *err)
{
    if (!c->meta && !(c->meta = eddy_metastore_open_tls(c->opts->metastore, tls, err)))
        return eddy_err_wrap(err, "metadata store");
    /* a file store is this coordinator's alone (flock) */
    if (eddy_metastore_lock(c->meta, err) < 0)
        return -1;
    if (c->election &&
        eddy_metastore_set_fence(c->meta, EDDY_LEADER_KEY, (int64_t)c->leader_epoch, err) < 0)
        return -1;
    return coord_decisions_load(c, err);
}

static void forget_loaded_workers(coord_t *c)
{
    while (c->workers) {
        coord_worker_t *w = c->workers;
        c->workers = w->next;
        free(w->metrics);
        free(w);
    }
    c->listed_workers = 0;
    c->next_worker_id = 0;
}

static int load_jobs(coord_t *c, const eddy_metastore_tls_t *tls, eddy_err_t *err)
{
    (void)tls;
    if (coord_jobs_restore_from_store(c, err) < 0)
        return -1;
    if (coord_worker_leases_load(c, err) < 0) {
        coord_jobs_drop_loaded(c);
        forget_loaded_workers(c);
        return -1;
    }
    return 0;
}

/* Runs step until it succeeds, with backoff (100 ms doubling to 2 s), for
 * at most twice the leader TTL (5 s at least): an etcd error there (one
 * lost SYN is a connect timeout; a read times out under loss) is never
 * fatal. After that, or once the lease is gone, a leader gives its
 * leadership up and stands by (COORD_RUN_DEPOSED) rather than lead without
 * its jobs. With a file store (no election) one attempt, and its error is
 * the process's: there is nobody to hand over to, and a local store's
 * errors (a lock, permissions) do not pass by waiting. */
static int load_with_retries(coord_t *c, const eddy_metastore_tls_t *tls,
                             int (*step)(coord_t *, const eddy_metastore_tls_t *, eddy_err_t *),
                             const char *what, eddy_err_t *err)
{
    uint64_t ttl = c->opts->leader_ttl_ms ? c->opts->leader_ttl_ms : COORD_LEADER_TTL_MS;
    uint64_t deadline = eddy_mono_ms() + (2 * ttl > 5000 ? 2 * ttl : 5000);
    uint32_t backoff = 100;
    for (int attempt = 1;; attempt++) {
        if (!c->election)
            return step(c, tls, err) == 0 ? 0 : -1;
        eddy_err_t aerr = {{0}};
        if (step(c, tls, &aerr) == 0) {
            if (attempt > 1)
                eddy_info("%s: done on attempt %d", what, attempt);
            return 0;
        }
        if (!eddy_election_leading(c->election) || eddy_mono_ms() + backoff > deadline) {
            eddy_err_set(err, "%s failed %d times, last: %.400s; giving up the leadership", what,
                         attempt, aerr.msg);
            c->deposed = true;
            return COORD_RUN_DEPOSED;
        }
        eddy_warn("%s (attempt %d): %s; retrying in %u ms", what, attempt, aerr.msg, backoff);
        struct timespec ts = {backoff / 1000, (long)(backoff % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
}

int coord_run_leader(const eddy_coordinator_options_t *opts, eddy_election_t *election,
                     const char *advertise, const coord_expected_t *expect,
                     volatile sig_atomic_t *stop, eddy_err_t *err)
{
    coord_t c = {0};
    c.election = election;
    c.expected = expect && expect->n ? expect : NULL;
    c.advertise = advertise;
    if (election) {
        eddy_election_view_t v;
        eddy_election_view(election, &v);
        c.leader_epoch = (uint64_t)v.epoch;
    }
    /* zero means "the default" for the options added later */
    eddy_coordinator_options_t o = *opts;
    if (!o.checkpoints_retained)
        o.checkpoints_retained = 2;
    if (!o.checkpoint_full_every)
        o.checkpoint_full_every = 10;
    if (!o.tolerable_checkpoint_failures)
        o.tolerable_checkpoint_failures = 3;
    if (!o.deploy_timeout_ms)
        o.deploy_timeout_ms = 10000;
    if (!o.max_restarts)
        o.max_restarts = COORD_MAX_RESTARTS;
    if (!o.checkpoint_timeout_ms)
        o.checkpoint_timeout_ms = 60000;
    eddy_coordinator_limits_fill(&o.limits);
    opts = &o;
    c.opts = opts;
    c.limits = o.limits;
    c.started_ms = eddy_mono_ms();
    c.decisions = json_array();
    c.timeline = coord_timeline_new(); /* NULL: no dashboard history, nothing else lost */
    int rc = -1;
    eddy_metastore_tls_t tls = {opts->etcd_ca, opts->etcd_cert, opts->etcd_key};
    /* synchronous: before the executor owns the store */
    if ((rc = load_with_retries(&c, &tls, load_first, "reading the metadata store", err)) < 0)
        goto out;
    rc = -1;
    c.meta_async = eddy_metastore_async_new(c.meta, err);
    if (!c.meta_async) {
        eddy_err_wrap(err, "metadata store");
        goto out;
    }
    /* before the loop, so blocking is fine: a wrong bucket, endpoint or
     * credentials end the process here, by name */
    c.store = eddy_snapshot_store_new(coord_storage(opts), err);
    if (!c.store || eddy_snapshot_store_probe(c.store, err) < 0) {
        eddy_err_wrap(err, opts->checkpoint_storage ? "--checkpoint-storage" : "snapshot store");
        goto out;
    }
    c.reaper = coord_reaper_new(c.store, err);
    if (!c.reaper)
        goto out;
    c.zctx = zmq_ctx_new();
    c.router = zmq_socket(c.zctx, ZMQ_ROUTER);
    int linger = 500, zero = 0, mandatory = 1, hwm = (int)c.limits.reply_hwm;
    zmq_setsockopt(c.router, ZMQ_LINGER, &linger, sizeof linger);
    /* a peer that never reads holds at most --reply-hwm messages */
    zmq_setsockopt(c.router, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(c.router, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(c.router, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof mandatory);
    if (eddy_zsock_limit_size(c.router, EDDY_ZRECV_MAX_CONTROL, err) < 0)
        goto out;
    if (opts->keys) {
        c.zap = eddy_zap_start(c.zctx, opts->keys, c.router, EDDY_ZAP_CONTROL, err);
        if (!c.zap)
            goto out;
    }
    if (zmq_bind(c.router, opts->bind) != 0) {
        eddy_err_set(err, "cannot listen on %s: %s", opts->bind, zmq_strerror(errno));
        goto out;
    }
    const char *http_host = opts->http_host ? opts->http_host : "127.0.0.1";
    if (coord_disconnect_start(&c, err) < 0)
        goto out;
    if (opts->http_port) {
        c.http = eddy_http_new(http_host, opts->http_port, coord_http_handler, &c, err);
        if (!c.http)
            goto out;
        if (opts->http_token && eddy_http_require_token(c.http, opts->http_token, coord_http_is_open, err) < 0)
            goto out;
    }
    eddy_info("listening on %s (%s), HTTP on %s:%u%s, metadata store %s, snapshots in %s",
              opts->bind, opts->keys ? "CURVE, authorised keys only" : "no keys", http_host,
              opts->http_port, opts->http_token ? " (bearer token required)" : "",
              eddy_metastore_url(c.meta), coord_storage(opts));
    warn_beyond_loopback(opts, http_host);
    for (uint32_t i = 0; i < opts->n_plugin_files; i++) {
        char hash[EDDY_PLUGIN_HASH_LEN + 1];
        if (coord_plugins_add_file(&c, opts->plugin_files[i], hash, err) < 0)
            goto out;
        eddy_info("plugin %s loaded as %s", opts->plugin_files[i], hash);
    }
    /* before the loop, with the store used synchronously: nothing is
     * queued on c.meta_async yet, and the reload writes nothing */
    if ((rc = load_with_retries(&c, &tls, load_jobs, "reading the jobs from the metadata store",
                                err)) < 0)
        goto out;
    rc = -1;

    /* the takeover's grace (coord_takeover_grace_ms) counts from here, not
     * from before reads of the store that may have been retried */
    c.started_ms = eddy_mono_ms();
    if (c.expected)
        eddy_info("expecting %u workers that asked this coordinator while it stood by, and %u "
                  "that the previous leader listed",
                  c.expected->n, c.listed_workers);
    for (coord_worker_t *w = c.workers; w; w = w->next)
        if (w->awaiting)
            w->last_seen_ms = c.started_ms;
    while (!*stop) {
        zmq_pollitem_t items[64];
        items[0] = (zmq_pollitem_t){c.router, 0, ZMQ_POLLIN, 0};
        int n = 1 + eddy_http_pollitems(c.http, items + 1, 61);
        /* metadata-store completions (state/metastore_async.h) */
        items[n++] = (zmq_pollitem_t){NULL, eddy_metastore_async_fd(c.meta_async), ZMQ_POLLIN, 0};
        if (coord_disconnect_socket(&c))
            items[n++] = (zmq_pollitem_t){coord_disconnect_socket(&c), 0, ZMQ_POLLIN, 0};
        long timeout = 20;
        long ht = eddy_http_timeout_ms(c.http);
        if (ht >= 0 && ht < timeout)
            timeout = ht;
        if (zmq_poll(items, n, timeout) < 0 && errno != EINTR) {
            eddy_err_set(err, "poll failed: %s", zmq_strerror(errno));
            goto out;
        }
        if (!still_leading(&c))
            break;
        /* before the router: see disconnect.c on reused descriptors */
        coord_disconnect_drain(&c);
        drain_router(&c);
        if (!still_leading(&c))
            break;
        /* completions of metadata-store calls: commit points, job records */
        eddy_metastore_async_dispatch(c.meta_async);
        eddy_http_run(c.http);
        uint64_t now = eddy_mono_ms();
        check_liveness(&c, now);
        coord_worker_leases_tick(&c, now);
        coord_quorum_tick(&c, now);
        if (opts->submit_job && !c.submitted && coord_alive_workers(&c) >= opts->min_workers) {
            c.submitted = true;
            eddy_err_t serr = {{0}};
            coord_savepoint_from_t from = {opts->submit_savepoint, opts->submit_savepoint_manifest,
                                           opts->submit_allow_non_restored};
            if (!coord_job_submit(&c, opts->submit_job, opts->submit_guarantee, opts->submit_argc,
                                  opts->submit_argv, from.location ? &from : NULL, &serr)) {
                eddy_err_set(err, "%s", serr.msg);
                goto out;
            }
        }
        coord_jobs_tick(&c, now);
        coord_rebalance_tick(&c, now);
        coord_timeline_tick(&c, now);
        if (opts->exit_when_done && c.submitted && coord_all_jobs_ended(&c) &&
            coord_releases_confirmed(&c, eddy_mono_ms())) {
            /* let RELEASE messages leave before the socket closes */
            drain_router(&c);
            break;
        }
    }
    if (c.deposed) {
        eddy_err_set(err, "leadership %s (epoch %llu)", c.stepped_down ? "given up" : "lost",
                     (unsigned long long)c.leader_epoch);
        rc = c.stepped_down ? COORD_RUN_STEPPED_DOWN : COORD_RUN_DEPOSED;
        goto out;
    }
    rc = run_result(&c, err);
out:
    free_coord(&c);
    return rc;
}
