/* leader.c - coordinator high availability: who leads, and the standby role.
 *
 * With an etcd metastore several coordinators run; an election
 * (state/election.h) on the key EDDY_LEADER_KEY picks one. Until it leads, a
 * process stands by: it binds the same control and HTTP ports as a leader
 * would, and answers every client request with "not leader" naming the
 * leader, every worker with a REGISTERED that sends it there, and
 * GET /api/v1/leader with its role. Once elected it closes those sockets and
 * runs the leader's loop (coord_run_leader), which reloads jobs and
 * checkpoints from the store as a restarted coordinator does. A leader that
 * loses its lease returns to standing by with a fresh election. With a file
 * store there is no election: the one coordinator leads at once. */
#include "coordinator/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/client.h"
#include "net/zrecv.h"
#include "state/metastore_lease.h"

/* Workers that came to a standby lately: it reports them to the leader
 * (through etcd, EDDY_STANDBY_HEARD_KEY) so that a leader cut off from them
 * but not from etcd steps down (quorum.c). */
#define HEARD_MAX 64
#define HEARD_FRESH_MS 3000u
#define REPORT_EVERY_MS 1000u

typedef struct standby {
    eddy_election_t *election;
    const char *advertise;
    void *router;
    struct {
        char name[EDDY_NAME_MAX];
        uint64_t ms;
    } heard[HEARD_MAX];
    uint32_t n_heard;
    uint64_t last_report_ms;
} standby_t;

static void note_heard(standby_t *s, const char *name)
{
    uint64_t now = eddy_mono_ms();
    uint32_t slot = s->n_heard, oldest = 0;
    for (uint32_t i = 0; i < s->n_heard; i++) {
        if (!strcmp(s->heard[i].name, name)) {
            slot = i;
            break;
        }
        if (s->heard[i].ms < s->heard[oldest].ms)
            oldest = i;
    }
    if (slot == s->n_heard) {
        if (s->n_heard < HEARD_MAX)
            s->n_heard++;
        else
            slot = oldest;
    }
    snprintf(s->heard[slot].name, sizeof s->heard[slot].name, "%s", name);
    s->heard[slot].ms = now;
}

static void report_heard(standby_t *s)
{
    uint64_t now = eddy_mono_ms();
    if (now - s->last_report_ms < REPORT_EVERY_MS)
        return;
    s->last_report_ms = now;
    json_t *names = json_array();
    for (uint32_t i = 0; i < s->n_heard; i++)
        if (now - s->heard[i].ms <= HEARD_FRESH_MS)
            json_array_append_new(names, json_string(s->heard[i].name));
    if (json_array_size(names) == 0) {
        json_decref(names);
        return;
    }
    json_t *doc = json_pack("{s:s, s:o, s:I}", "endpoint", s->advertise, "workers", names,
                            "wall_ms", (json_int_t)eddy_wall_ms());
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    if (text)
        eddy_election_report(s->election, text);
    free(text);
    json_decref(doc);
}

/* The endpoint clients and workers are told: --advertise, else the bind
 * address with a wildcard host replaced by this host's name. */
static void advertise_endpoint(const eddy_coordinator_options_t *opts, char *out, size_t cap)
{
    if (opts->advertise) {
        snprintf(out, cap, "%s", opts->advertise);
        return;
    }
    const char *b = opts->bind;
    const char *hostpart = strstr(b, "://");
    hostpart = hostpart ? hostpart + 3 : b;
    const char *port = strrchr(hostpart, ':');
    size_t hlen = port ? (size_t)(port - hostpart) : strlen(hostpart);
    if ((hlen == 7 && !strncmp(hostpart, "0.0.0.0", 7)) || (hlen == 1 && hostpart[0] == '*')) {
        char host[256] = "localhost";
        gethostname(host, sizeof host - 1);
        snprintf(out, cap, "tcp://%s%s", host, port ? port : "");
    } else {
        snprintf(out, cap, "%s", b);
    }
}

static void not_leader_text(const eddy_election_view_t *v, char *out, size_t cap)
{
    if (v->leader_endpoint[0])
        snprintf(out, cap, "%s%s", EDDY_NOT_LEADER_PREFIX, v->leader_endpoint);
    else
        snprintf(out, cap, "not leader, and no leader is elected yet%s%.300s",
                 v->last_error[0] ? ": " : "", v->last_error);
}

static void standby_http(void *ctx, const char *method, const char *path,
                         eddy_http_response_t *resp)
{
    (void)method;
    standby_t *s = ctx;
    eddy_election_view_t v;
    eddy_election_view(s->election, &v);
    if (!strcmp(path, "/healthz")) {
        resp->status = 200;
        resp->body = strdup("ok (standby)\n");
        return;
    }
    if (!strcmp(path, "/api/v1/leader")) {
        json_t *doc = json_pack("{s:s, s:o}", "role", "standby", "leader",
                                v.leader_endpoint[0] ? json_string(v.leader_endpoint) : json_null());
        resp->status = 200;
        resp->content_type = "application/json";
        resp->body = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(doc);
        return;
    }
    if (!strcmp(path, "/metrics")) {
        coord_view_standby_metrics(resp);
        return;
    }
    char text[EDDY_ENDPOINT_MAX + 300];
    not_leader_text(&v, text, sizeof text);
    resp->status = 503;
    size_t n = strlen(text);
    resp->body = malloc(n + 2);
    if (resp->body) {
        memcpy(resp->body, text, n);
        memcpy(resp->body + n, "\n", 2);
    }
}

static void standby_send(standby_t *s, const void *id, size_t id_len, const eddy_msg_t *m)
{
    size_t len;
    char *data = eddy_msg_encode(m, &len);
    if (!data)
        return;
    if (zmq_send(s->router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(s->router, data, len, ZMQ_DONTWAIT);
    free(data);
}

/* Workers are sent to the leader; clients get a "not leader" REPLY. */
static void standby_answer(standby_t *s, const void *id, size_t id_len, const void *data,
                           size_t len)
{
    eddy_msg_t m;
    eddy_err_t err;
    if (eddy_msg_decode(data, len, &m, &err) < 0)
        return;
    eddy_election_view_t v;
    eddy_election_view(s->election, &v);
    eddy_msg_t out = {0};
    if (m.type == EDDY_MSG_REQUEST || (m.type == EDDY_MSG_PLUGIN && m.u.plugin.data)) {
        char text[EDDY_ENDPOINT_MAX + 300];
        not_leader_text(&v, text, sizeof text);
        out.type = EDDY_MSG_REPLY;
        out.u.reply.status = EDDY_STATUS_NOT_LEADER;
        out.u.reply.body = text;
        standby_send(s, id, id_len, &out);
    } else if (m.type != EDDY_MSG_REPLY && m.type != EDDY_MSG_REGISTERED) {
        if (m.type == EDDY_MSG_REGISTER && m.u.reg.name[0])
            note_heard(s, m.u.reg.name);
        out.type = EDDY_MSG_REGISTERED;
        out.u.registered.not_leader = true;
        snprintf(out.u.registered.leader, sizeof out.u.registered.leader, "%s", v.leader_endpoint);
        not_leader_text(&v, out.u.registered.error, sizeof out.u.registered.error);
        standby_send(s, id, id_len, &out);
    }
    eddy_msg_clear(&m);
}

/* Serves as a standby until elected: 1 elected, 0 stopped, -1 error. */
static int stand_by(const eddy_coordinator_options_t *opts, standby_t *s,
                    volatile sig_atomic_t *stop, eddy_err_t *err)
{
    int rc = -1;
    void *zctx = zmq_ctx_new();
    s->router = zmq_socket(zctx, ZMQ_ROUTER);
    eddy_http_t *http = NULL;
    eddy_zap_t *zap = NULL;
    int linger = 0;
    zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof linger);
    if (eddy_zsock_limit_size(s->router, EDDY_ZRECV_MAX_CONTROL, err) < 0)
        goto out;
    /* the same handshake as the leader's socket: keyed workers and clients
     * must hear where the leader is, and nobody else may reach a decoder */
    if (opts->keys && !(zap = eddy_zap_start(zctx, opts->keys, s->router, EDDY_ZAP_CONTROL, err)))
        goto out;
    if (zmq_bind(s->router, opts->bind) != 0) {
        eddy_err_set(err, "cannot listen on %s: %s", opts->bind, zmq_strerror(errno));
        goto out;
    }
    if (opts->http_port) {
        http = eddy_http_new(opts->http_host, opts->http_port, standby_http, s, err);
        if (!http)
            goto out;
        /* a standby's answers hold no secret, but the token guards the same
         * paths as on the leader, so a scraper configured for one works on all */
        if (opts->http_token && eddy_http_require_token(http, opts->http_token, coord_http_is_open, err) < 0)
            goto out;
    }
    eddy_info("standing by as %s (control %s, HTTP port %u) until it is elected", s->advertise,
              opts->bind, opts->http_port);
    char last_leader[EDDY_ELECTION_ENDPOINT_MAX] = "";
    while (!*stop) {
        eddy_election_view_t v;
        eddy_election_view(s->election, &v);
        if (v.leader) {
            rc = 1;
            goto out;
        }
        if (strcmp(last_leader, v.leader_endpoint)) {
            snprintf(last_leader, sizeof last_leader, "%s", v.leader_endpoint);
            if (v.leader_endpoint[0])
                eddy_info("the leader is %s", v.leader_endpoint);
        }
        zmq_pollitem_t items[8];
        items[0] = (zmq_pollitem_t){s->router, 0, ZMQ_POLLIN, 0};
        int n = 1 + eddy_http_pollitems(http, items + 1, 7);
        long timeout = 50;
        long ht = eddy_http_timeout_ms(http);
        if (ht >= 0 && ht < timeout)
            timeout = ht;
        if (zmq_poll(items, n, timeout) < 0 && errno != EINTR) {
            eddy_err_set(err, "poll failed: %s", zmq_strerror(errno));
            goto out;
        }
        for (int k = 0; k < 256; k++) {
            zmq_msg_t frames[EDDY_ZRECV_FRAMES_ROUTER];
            eddy_err_t rerr;
            eddy_zrecv_result_t got = eddy_zrecv(s->router, frames, EDDY_ZRECV_FRAMES_ROUTER,
                                                 EDDY_ZRECV_MAX_CONTROL, &rerr);
            if (got != EDDY_ZRECV_OK) {
                if (got == EDDY_ZRECV_NONE)
                    break;
                continue;
            }
            standby_answer(s, zmq_msg_data(&frames[0]), zmq_msg_size(&frames[0]),
                           zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]));
            zmq_msg_close(&frames[1]);
            zmq_msg_close(&frames[0]);
        }
        eddy_http_run(http);
        report_heard(s);
    }
    rc = 0;
out:
    eddy_http_destroy(&http);
    zmq_close(s->router);
    s->router = NULL;
    eddy_zap_destroy(&zap);
    zmq_ctx_term(zctx);
    return rc;
}

/* A coordinator whose etcd is not there yet (started before it, or cut
 * off) waits for it, as a standby would, instead of exiting: in compose
 * or under systemd the store often comes up second. */
typedef struct retry {
    const char *what;
    uint32_t attempt, backoff_ms;
    char last[sizeof(((eddy_err_t *)0)->msg)];
} retry_t;

/* Logs err (when it changed, or every tenth attempt), waits the backoff
 * (100 ms doubling to 2 s) unless stop is set; false when stopped. */
static bool wait_to_retry(retry_t *r, volatile sig_atomic_t *stop, eddy_err_t *err)
{
    r->attempt++;
    r->backoff_ms = r->backoff_ms ? (r->backoff_ms * 2 > 2000 ? 2000 : r->backoff_ms * 2) : 100;
    if (strcmp(r->last, err->msg) || r->attempt % 10 == 1)
        eddy_warn("%s: %s; retrying (attempt %u, every %u ms at most)", r->what, err->msg,
                  r->attempt, 2000u);
    snprintf(r->last, sizeof r->last, "%s", err->msg);
    err->msg[0] = '\0';
    for (uint32_t waited = 0; waited < r->backoff_ms && !*stop; waited += 50) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return !*stop;
}

int eddy_coordinator_run(const eddy_coordinator_options_t *opts, volatile sig_atomic_t *stop,
                         eddy_err_t *err)
{
    char advertise[EDDY_ENDPOINT_MAX];
    advertise_endpoint(opts, advertise, sizeof advertise);
    /* Only etcd elects; the store is opened once here to tell which. */
    eddy_metastore_tls_t tls = {opts->etcd_ca, opts->etcd_cert, opts->etcd_key};
    eddy_metastore_t *probe = NULL;
    retry_t probe_retry = {.what = "metadata store"};
    bool unreachable;
    while (!(probe = eddy_metastore_open_probe(opts->metastore, &tls, &unreachable, err))) {
        if (!unreachable)
            return eddy_err_wrap(err, "metadata store");
        if (!wait_to_retry(&probe_retry, stop, err))
            return 0;
    }
    bool elect = eddy_metastore_has_leases(probe);
    eddy_metastore_destroy(&probe);
    if (!elect)
        return coord_run_leader(opts, NULL, advertise, NULL, stop, err);
    uint32_t ttl = opts->leader_ttl_ms ? opts->leader_ttl_ms : COORD_LEADER_TTL_MS;
    uint32_t holdoff = 0;
    for (;;) {
        standby_t s = {.advertise = advertise};
        retry_t election_retry = {.what = "leader election"};
        while (!(s.election = eddy_election_new_after(opts->metastore, &tls, advertise, ttl,
                                                      holdoff, err)))
            if (!wait_to_retry(&election_retry, stop, err))
                return 0;
        int got = stand_by(opts, &s, stop, err);
        if (got <= 0) {
            eddy_election_destroy(&s.election);
            return got;
        }
        /* the workers that asked it lately: the new leader expects them */
        coord_expected_t expect;
        expect.n = 0;
        uint64_t now = eddy_mono_ms();
        for (uint32_t i = 0; i < s.n_heard && expect.n < COORD_EXPECT_MAX; i++)
            if (now - s.heard[i].ms <= HEARD_FRESH_MS)
                snprintf(expect.names[expect.n++], EDDY_NAME_MAX, "%s", s.heard[i].name);
        eddy_debug("standby heard %u workers, %u lately", s.n_heard, expect.n);
        int rc = coord_run_leader(opts, s.election, advertise, &expect, stop, err);
        eddy_election_destroy(&s.election);
        if (rc != COORD_RUN_DEPOSED && rc != COORD_RUN_STEPPED_DOWN)
            return rc;
        /* one that stepped down for its workers' sake lets the standby win */
        holdoff = rc == COORD_RUN_STEPPED_DOWN ? 2 * ttl : 0;
        eddy_warn("%s; standing by%s", err->msg,
                  holdoff ? " (no campaign for twice the lease TTL)" : "");
        err->msg[0] = '\0';
    }
}
