/* worker_lease.c - the leader holds each live worker's registration on an
 * etcd lease, so a successor knows the workers at takeover.
 *
 * Workers have no etcd access; the leader speaks for them. A registered
 * worker gets a lease and the key COORD_WORKER_KEY_PREFIX<name> (its
 * identity as JSON) held by it. The lease is kept alive every TTL/3 while
 * the worker counts as alive (its heartbeats arrive) and revoked when it is
 * declared dead, so its key disappears with it. The TTL is the heartbeat
 * timeout plus twice the leader's lease TTL: a killed leader's workers must
 * still be listed when a standby takes over - up to one leader TTL after
 * the kill, plus the standby's poll and a loaded machine's delays.
 *
 * At takeover (coord_worker_leases_load, synchronous, before the loop) the
 * new leader lists the keys and knows those workers as "awaiting
 * heartbeat": not alive, never given work, but shown by `eddy status` and
 * counted by the restore's wait. One that registers again takes its entry
 * (and id) back; one that does not within the heartbeat timeout is dead as
 * any other, and its key is deleted.
 *
 * Every etcd call goes through c->meta_async (the loop never waits); the
 * callbacks find their worker by the name in the key they carry, and a
 * result for a lease the worker no longer holds is ignored (a lease granted
 * to a worker that died meanwhile is revoked). With the file store
 * (c->worker_leases false) nothing here does anything. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"
#include "state/metastore_lease.h"

/* A failed grant or keepalive is tried again by the tick after this long,
 * not by the executor: retries there would hold up every call queued
 * behind them (checkpoint commits) while etcd is unreachable. */
#define LEASE_RETRY_MS 1000u
#define LEASE_CALL_RETRIES 2 /* puts, deletes and revokes: nothing retries them later */

/* while etcd is unreachable every worker's calls fail each second */
static eddy_log_limit_t grant_log, keepalive_log;

static uint32_t lease_ttl_s(const coord_t *c)
{
    uint32_t leader = c->opts->leader_ttl_ms ? c->opts->leader_ttl_ms : COORD_LEADER_TTL_MS;
    return (c->opts->heartbeat_timeout_ms + 2 * leader + 999) / 1000;
}

static void worker_key(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s", COORD_WORKER_KEY_PREFIX, name);
}

/* The worker a lease result is about: the one with the key's name that is
 * alive or waits for a lease (names are unique among live workers; a dead
 * one never waits, see coord_worker_lease_release). */
static coord_worker_t *worker_for_key(coord_t *c, const char *key)
{
    size_t plen = strlen(COORD_WORKER_KEY_PREFIX);
    if (!key || strncmp(key, COORD_WORKER_KEY_PREFIX, plen))
        return NULL;
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if ((w->alive || w->lease_state == COORD_LEASE_GRANTING) && !strcmp(w->name, key + plen))
            return w;
    return NULL;
}

static void on_put(void *arg, const eddy_meta_result_t *res)
{
    (void)arg;
    if (res->rc < 0)
        eddy_warn("worker registration %s not recorded in the metadata store: %s", res->key,
                  res->err.msg);
}

static void put_registration(coord_t *c, const coord_worker_t *w)
{
    char key[COORD_KEY_MAX];
    worker_key(w->name, key, sizeof key);
    json_t *doc = json_pack("{s:i, s:s, s:s, s:s, s:i, s:I}", "id", (int)w->id, "name", w->name,
                            "data_endpoint", w->endpoint, "host", w->host, "cores", (int)w->cores,
                            "registered_ms", (json_int_t)w->registered_wall_ms);
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (!text)
        return;
    eddy_metastore_async_put_leased(c->meta_async, key, text, strlen(text), w->lease,
                                    LEASE_CALL_RETRIES, on_put, c);
    free(text);
}

static void on_granted(void *arg, const eddy_meta_result_t *res)
{
    coord_t *c = arg;
    coord_worker_t *w = worker_for_key(c, res->key);
    if (w && w->lease_state != COORD_LEASE_GRANTING)
        w = NULL;
    if (res->rc < 0) {
        eddy_log_limited(&grant_log, EDDY_LOG_WARN, "no lease for worker registration %s: %s",
                         res->key, res->err.msg);
        if (w) {
            w->lease_state = COORD_LEASE_NONE;
            w->lease_next_ms = eddy_mono_ms() + LEASE_RETRY_MS;
        }
        return;
    }
    if (!w || !w->alive) { /* it died while the lease was granted */
        if (w)
            w->lease_state = COORD_LEASE_NONE;
        eddy_metastore_async_lease_revoke(c->meta_async, NULL, res->lease, LEASE_CALL_RETRIES,
                                          NULL, NULL);
        return;
    }
    w->lease = res->lease;
    w->lease_state = COORD_LEASE_HELD;
    w->lease_next_ms = eddy_mono_ms() + (uint64_t)res->ttl_s * 1000u / 3u;
    put_registration(c, w);
}

static void on_kept_alive(void *arg, const eddy_meta_result_t *res)
{
    coord_t *c = arg;
    coord_worker_t *w = worker_for_key(c, res->key);
    if (!w || w->lease_state != COORD_LEASE_HELD || w->lease != res->lease)
        return; /* revoked or replaced meanwhile */
    w->lease_keepalive_sent = false;
    uint64_t now = eddy_mono_ms();
    if (res->rc < 0) {
        eddy_log_limited(&keepalive_log, EDDY_LOG_WARN, "lease keepalive for worker %s failed: %s",
                         w->name, res->err.msg);
        w->lease_next_ms = now + LEASE_RETRY_MS;
    } else if (res->ttl_s <= 0) {
        /* etcd dropped it (e.g. unreachable past the TTL): the key went
         * with it, so register the worker anew */
        eddy_warn("the lease of worker %s expired in the metadata store; granting a new one",
                  w->name);
        w->lease_state = COORD_LEASE_NONE;
        w->lease = 0;
        w->lease_next_ms = now;
    } else {
        w->lease_next_ms = now + (uint64_t)res->ttl_s * 1000u / 3u;
    }
}

static void grant(coord_t *c, coord_worker_t *w)
{
    char key[COORD_KEY_MAX];
    worker_key(w->name, key, sizeof key);
    w->lease_state = COORD_LEASE_GRANTING;
    eddy_metastore_async_lease_grant(c->meta_async, key, lease_ttl_s(c), 0, on_granted, c);
}

void coord_worker_lease_on_registered(coord_t *c, coord_worker_t *w)
{
    if (!c->worker_leases)
        return;
    if (w->lease_state == COORD_LEASE_NONE)
        grant(c, w);
    else if (w->lease_state == COORD_LEASE_HELD)
        put_registration(c, w); /* the same worker again: its details may have changed */
}

void coord_worker_lease_release(coord_t *c, coord_worker_t *w)
{
    if (!c->worker_leases || w->lease_state == COORD_LEASE_NONE)
        return;
    if (w->lease_state == COORD_LEASE_GRANTING) {
        /* on_granted finds no worker waiting for it and revokes the lease
         * (or gives it to this name's next registration) */
        w->lease_state = COORD_LEASE_NONE;
        return;
    }
    eddy_metastore_async_lease_revoke(c->meta_async, NULL, w->lease, LEASE_CALL_RETRIES, NULL,
                                      NULL);
    w->lease = 0;
    w->lease_state = COORD_LEASE_NONE;
    w->lease_keepalive_sent = false;
}

void coord_worker_leases_tick(coord_t *c, uint64_t now_ms)
{
    if (!c->worker_leases)
        return;
    for (coord_worker_t *w = c->workers; w; w = w->next) {
        if (w->awaiting && now_ms - w->last_seen_ms > coord_takeover_grace_ms(c)) {
            w->awaiting = false;
            w->dead_since_ms = now_ms;
            eddy_warn("worker %u (%s), registered with the previous leader, did not come back "
                      "within %llu ms: dead",
                      w->id, w->name, (unsigned long long)coord_takeover_grace_ms(c));
            char key[COORD_KEY_MAX];
            worker_key(w->name, key, sizeof key);
            eddy_metastore_async_delete(c->meta_async, key, LEASE_CALL_RETRIES, on_put, c);
            continue;
        }
        if (!w->alive || now_ms < w->lease_next_ms)
            continue;
        if (w->lease_state == COORD_LEASE_NONE) {
            grant(c, w);
        } else if (w->lease_state == COORD_LEASE_HELD && !w->lease_keepalive_sent) {
            char key[COORD_KEY_MAX];
            worker_key(w->name, key, sizeof key);
            w->lease_keepalive_sent = true;
            eddy_metastore_async_lease_keepalive(c->meta_async, key, w->lease, 0,
                                                 on_kept_alive, c);
        }
    }
}

uint64_t coord_takeover_grace_ms(const coord_t *c)
{
    uint64_t grace = c->opts->heartbeat_timeout_ms;
    if (c->election) {
        uint64_t seek = eddy_failover_reregister_ms(c->opts->heartbeat_ms);
        if (seek > grace)
            grace = seek;
    }
    return grace;
}

bool coord_takeover_all_back(const coord_t *c)
{
    if ((!c->listed_workers && !c->expected) || coord_awaiting_workers(c))
        return false;
    for (uint32_t i = 0; c->expected && i < c->expected->n; i++) {
        bool alive = false;
        for (const coord_worker_t *w = c->workers; w && !alive; w = w->next)
            alive = w->alive && !strcmp(w->name, c->expected->names[i]);
        if (!alive)
            return false;
    }
    return true;
}

void coord_worker_back(coord_t *c, coord_worker_t *w)
{
    (void)w;
    if (c->all_back_logged || !coord_takeover_all_back(c))
        return;
    c->all_back_logged = true;
    uint32_t n = 0;
    for (const coord_worker_t *o = c->workers; o; o = o->next)
        n += o->alive;
    eddy_info("all %u workers of the previous leader are back %llu ms after the takeover "
              "(grace %llu ms)",
              n, (unsigned long long)(eddy_mono_ms() - c->started_ms),
              (unsigned long long)coord_takeover_grace_ms(c));
}

uint32_t coord_awaiting_workers(const coord_t *c)
{
    uint32_t n = 0;
    for (const coord_worker_t *w = c->workers; w; w = w->next)
        n += w->awaiting;
    return n;
}

coord_worker_t *coord_awaiting_worker_named(coord_t *c, const char *name)
{
    for (coord_worker_t *w = c->workers; w; w = w->next)
        if (w->awaiting && !strcmp(w->name, name))
            return w;
    return NULL;
}

static void load_one(coord_t *c, const eddy_kv_t *kv, uint64_t now)
{
    json_error_t jerr;
    json_t *doc = json_loadb(kv->value, kv->value_len, 0, &jerr);
    json_int_t id = 0, cores = 0, registered = 0;
    const char *name = NULL, *endpoint = NULL, *host = "";
    if (!doc || json_unpack_ex(doc, &jerr, 0, "{s:I, s:s, s:s, s?s, s?I, s?I}", "id", &id,
                               "name", &name, "data_endpoint", &endpoint, "host", &host,
                               "cores", &cores, "registered_ms", &registered) < 0 ||
        id <= 0 || id > UINT32_MAX) {
        eddy_warn("ignoring worker registration %s: %s", kv->key, jerr.text);
        json_decref(doc);
        return;
    }
    coord_worker_t *w = calloc(1, sizeof *w);
    if (!w) {
        json_decref(doc);
        return;
    }
    w->id = (uint32_t)id;
    snprintf(w->name, sizeof w->name, "%s", name);
    snprintf(w->endpoint, sizeof w->endpoint, "%s", endpoint);
    snprintf(w->host, sizeof w->host, "%s", host);
    w->cores = (uint32_t)cores;
    w->registered_wall_ms = registered;
    w->conn_fd = -1;
    w->awaiting = true;
    w->last_seen_ms = now; /* the heartbeat timeout counts from the takeover */
    w->next = c->workers;
    c->workers = w;
    if (w->id > c->next_worker_id)
        c->next_worker_id = w->id;
    c->listed_workers++;
    eddy_info("worker %u (%s, data at %s) registered with the previous leader: awaiting its "
              "heartbeat",
              w->id, w->name, w->endpoint);
    json_decref(doc);
}

int coord_worker_leases_load(coord_t *c, eddy_err_t *serr)
{
    c->worker_leases = eddy_metastore_has_leases(c->meta);
    if (!c->worker_leases)
        return 0;
    eddy_kv_list_t list;
    eddy_err_t err = {{0}};
    if (eddy_metastore_list(c->meta, COORD_WORKER_KEY_PREFIX, &list, &err) < 0)
        return eddy_err_set(serr, "cannot list the registered workers: %s", err.msg);
    uint64_t now = eddy_mono_ms();
    for (size_t i = 0; i < list.count; i++)
        load_one(c, &list.items[i], now);
    eddy_kv_list_clear(&list);
    return 0;
}
