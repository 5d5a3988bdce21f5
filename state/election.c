/* election.c - leader election on an etcd lease (see election.h).
 *
 * Owns the campaign thread and its store handle. The caller's loop reads
 * the outcome under a mutex (eddy_election_view, eddy_election_leading);
 * nothing the thread does can block it. */
#include "state/election.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "state/metastore.h"
#include "state/metastore_lease.h"

/* Trust a lease this much less than etcd does: clock-rate differences and
 * the time between the deadline check and the action it guards. */
#define SAFETY_MARGIN_MS 500u
#define POLL_MS 300u
#define RETRY_MS 200u

struct eddy_election {
    char *url;
    char *tls_paths[3]; /* CA, client certificate, client key (NULL: none) */
    char endpoint[EDDY_ELECTION_ENDPOINT_MAX];
    uint32_t ttl_ms;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    /* under lock */
    bool leader, lost;
    int64_t epoch;
    int64_t seen_epoch; /* the last leader's epoch seen while campaigning (0: none) */
    uint64_t valid_until_ms;
    char leader_endpoint[EDDY_ELECTION_ENDPOINT_MAX];
    char last_error[512];
    char *report;        /* a standby's report waiting to be written (eddy_election_report) */
    uint32_t holdoff_ms; /* no campaign before this long after the start */
};

static void set_error(eddy_election_t *e, const char *msg)
{
    pthread_mutex_lock(&e->lock);
    snprintf(e->last_error, sizeof e->last_error, "%s", msg);
    pthread_mutex_unlock(&e->lock);
}

/* Waits ms or until destroy; returns true when stopping. */
static bool rest(eddy_election_t *e, uint32_t ms)
{
    struct timespec ts = eddy_timespec_in(CLOCK_REALTIME, ms);
    pthread_mutex_lock(&e->lock);
    while (!e->stopping && pthread_cond_timedwait(&e->wake, &e->lock, &ts) == 0)
        ;
    bool stop = e->stopping;
    pthread_mutex_unlock(&e->lock);
    return stop;
}

static uint64_t deadline_after(uint64_t sent_ms, int64_t ttl_s)
{
    uint64_t ttl_ms = (uint64_t)ttl_s * 1000u;
    return ttl_ms > SAFETY_MARGIN_MS ? sent_ms + ttl_ms - SAFETY_MARGIN_MS : sent_ms;
}

static void lose(eddy_election_t *e, const char *why)
{
    pthread_mutex_lock(&e->lock);
    bool was = e->leader;
    e->leader = false;
    e->lost = true;
    pthread_mutex_unlock(&e->lock);
    if (was)
        eddy_warn("leadership lost (epoch %lld): %s", (long long)e->epoch, why);
}

/* Keeps the lease alive until it is lost or the thread stops. */
static void lead(eddy_election_t *e, eddy_metastore_t *store, int64_t lease)
{
    uint32_t interval = e->ttl_ms / 3 ? e->ttl_ms / 3 : 1;
    bool retry = false;
    for (;;) {
        /* a failed renewal is retried soon: the deadline is what matters */
        if (rest(e, retry ? RETRY_MS : interval))
            return;
        retry = false;
        pthread_mutex_lock(&e->lock);
        uint64_t until = e->valid_until_ms;
        pthread_mutex_unlock(&e->lock);
        uint64_t sent = eddy_mono_ms();
        if (sent >= until) {
            lose(e, "the lease could not be renewed in time");
            return;
        }
        int64_t ttl = 0;
        eddy_err_t err = {{0}};
        if (eddy_metastore_lease_keepalive(store, lease, &ttl, &err) < 0) {
            set_error(e, err.msg);
            eddy_warn("leader lease keepalive failed: %s", err.msg);
            retry = true;
            continue; /* the deadline decides */
        }
        if (ttl <= 0) {
            lose(e, "the lease expired in etcd");
            return;
        }
        pthread_mutex_lock(&e->lock);
        e->valid_until_ms = deadline_after(sent, ttl);
        e->last_error[0] = '\0';
        pthread_mutex_unlock(&e->lock);
    }
}

/* One campaign round: 1 when this process now leads (lease kept in *lease). */
static int campaign(eddy_election_t *e, eddy_metastore_t *store, int64_t *lease)
{
    eddy_err_t err = {{0}};
    char *holder = NULL;
    int64_t rev = 0;
    int got = eddy_metastore_get_rev(store, EDDY_LEADER_KEY, &holder, NULL, &rev, &err);
    if (got < 0) {
        set_error(e, err.msg);
        return 0;
    }
    if (got == 1) {
        pthread_mutex_lock(&e->lock);
        e->seen_epoch = rev;
        snprintf(e->leader_endpoint, sizeof e->leader_endpoint, "%s", holder);
        e->last_error[0] = '\0';
        pthread_mutex_unlock(&e->lock);
        free(holder);
        return 0;
    }
    uint32_t ttl_s = (e->ttl_ms + 999) / 1000;
    uint64_t sent = eddy_mono_ms();
    if (eddy_metastore_lease_grant(store, ttl_s, lease, &err) < 0) {
        set_error(e, err.msg);
        return 0;
    }
    int created = eddy_metastore_create_leased(store, EDDY_LEADER_KEY, e->endpoint,
                                               strlen(e->endpoint), *lease, &rev, &holder, &err);
    if (created != 1) {
        eddy_err_t rerr;
        eddy_metastore_lease_revoke(store, *lease, &rerr);
        pthread_mutex_lock(&e->lock);
        if (created == 0 && holder)
            snprintf(e->leader_endpoint, sizeof e->leader_endpoint, "%s", holder);
        if (created < 0)
            snprintf(e->last_error, sizeof e->last_error, "%s", err.msg);
        pthread_mutex_unlock(&e->lock);
        free(holder);
        return 0;
    }
    pthread_mutex_lock(&e->lock);
    e->leader = true;
    e->epoch = rev;
    e->valid_until_ms = deadline_after(sent, ttl_s);
    snprintf(e->leader_endpoint, sizeof e->leader_endpoint, "%s", e->endpoint);
    e->last_error[0] = '\0';
    pthread_mutex_unlock(&e->lock);
    /* The epoch is the etcd revision that created the leader key: it is
     * above every earlier leader's (fencing needs no more) but grows with
     * every write to the store in between (jobs, checkpoints, worker
     * registrations), so successive epochs are far apart. */
    if (e->seen_epoch)
        eddy_info("elected leader (epoch %lld, lease %lld s; the previous leader's epoch was %lld: "
                  "epochs are etcd revisions, which every write to the store advances)",
                  (long long)rev, (long long)ttl_s, (long long)e->seen_epoch);
    else
        eddy_info("elected leader (epoch %lld, lease %lld s; epochs are etcd revisions)",
                  (long long)rev, (long long)ttl_s);
    return 1;
}

/* Writes a standby's pending report, if any (best effort: the next one
 * replaces it). */
static void write_report(eddy_election_t *e, eddy_metastore_t *store)
{
    pthread_mutex_lock(&e->lock);
    char *r = e->report;
    e->report = NULL;
    pthread_mutex_unlock(&e->lock);
    if (!r)
        return;
    eddy_err_t err;
    if (eddy_metastore_put(store, EDDY_STANDBY_HEARD_KEY, r, strlen(r), &err) < 0)
        eddy_debug("standby report not written: %s", err.msg);
    free(r);
}

static void *run(void *arg)
{
    eddy_election_t *e = arg;
    eddy_metastore_t *store = NULL;
    while (!store) {
        eddy_err_t err = {{0}};
        eddy_metastore_tls_t tls = {e->tls_paths[0], e->tls_paths[1], e->tls_paths[2]};
        store = eddy_metastore_open_tls(e->url, &tls, &err);
        if (!store) {
            set_error(e, err.msg);
            if (rest(e, 1000))
                return NULL;
        }
    }
    int64_t lease = 0;
    bool stop = e->holdoff_ms && rest(e, e->holdoff_ms);
    while (!stop) {
        write_report(e, store);
        if (campaign(e, store, &lease)) {
            lead(e, store, lease);
            break; /* won once, lost or stopping: never campaign again */
        }
        stop = rest(e, POLL_MS);
    }
    pthread_mutex_lock(&e->lock);
    bool revoke = e->leader && lease;
    pthread_mutex_unlock(&e->lock);
    if (revoke) {
        eddy_err_t err;
        if (eddy_metastore_lease_revoke(store, lease, &err) == 0)
            eddy_info("leadership given up (lease revoked)");
    }
    eddy_metastore_destroy(&store);
    return NULL;
}

eddy_election_t *eddy_election_new(const char *store_url, const eddy_metastore_tls_t *tls,
                                   const char *endpoint, uint32_t ttl_ms, eddy_err_t *err)
{
    return eddy_election_new_after(store_url, tls, endpoint, ttl_ms, 0, err);
}

void eddy_election_report(eddy_election_t *self, const char *json)
{
    char *copy = strdup(json);
    if (!copy)
        return;
    pthread_mutex_lock(&self->lock);
    free(self->report);
    self->report = copy;
    pthread_mutex_unlock(&self->lock);
}

eddy_election_t *eddy_election_new_after(const char *store_url, const eddy_metastore_tls_t *tls,
                                         const char *endpoint, uint32_t ttl_ms,
                                         uint32_t holdoff_ms, eddy_err_t *err)
{
    eddy_election_t *e = calloc(1, sizeof *e);
    if (!e || !(e->url = strdup(store_url))) {
        free(e);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    const char *paths[3] = {tls ? tls->ca_file : NULL, tls ? tls->cert_file : NULL,
                            tls ? tls->key_file : NULL};
    for (int i = 0; i < 3; i++) {
        if (paths[i] && !(e->tls_paths[i] = strdup(paths[i]))) {
            for (int k = 0; k < i; k++)
                free(e->tls_paths[k]);
            free(e->url);
            free(e);
            eddy_err_set(err, "out of memory");
            return NULL;
        }
    }
    snprintf(e->endpoint, sizeof e->endpoint, "%s", endpoint);
    e->ttl_ms = ttl_ms < 2000 ? 2000 : ttl_ms;
    e->holdoff_ms = holdoff_ms;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    if (pthread_create(&e->thread, NULL, run, e) != 0) {
        eddy_election_destroy(&e);
        eddy_err_set(err, "cannot start the election thread");
        return NULL;
    }
    e->started = true;
    return e;
}

void eddy_election_destroy(eddy_election_t **self_p)
{
    eddy_election_t *e = *self_p;
    if (!e)
        return;
    if (e->started) {
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        pthread_cond_signal(&e->wake);
        pthread_mutex_unlock(&e->lock);
        pthread_join(e->thread, NULL);
    }
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->wake);
    for (int i = 0; i < 3; i++)
        free(e->tls_paths[i]);
    free(e->report);
    free(e->url);
    free(e);
    *self_p = NULL;
}

void eddy_election_view(eddy_election_t *self, eddy_election_view_t *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&self->lock);
    if (self->leader && eddy_mono_ms() >= self->valid_until_ms) {
        self->leader = false; /* paused or cut off past the lease: no longer */
        self->lost = true;
    }
    out->leader = self->leader;
    out->lost = self->lost;
    out->epoch = self->epoch;
    if (self->lost && !strcmp(self->leader_endpoint, self->endpoint))
        self->leader_endpoint[0] = '\0';
    snprintf(out->leader_endpoint, sizeof out->leader_endpoint, "%s", self->leader_endpoint);
    snprintf(out->last_error, sizeof out->last_error, "%s", self->last_error);
    pthread_mutex_unlock(&self->lock);
}

bool eddy_election_leading(eddy_election_t *self)
{
    eddy_election_view_t v;
    eddy_election_view(self, &v);
    return v.leader;
}
