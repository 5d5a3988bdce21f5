/* quorum.c - a leader cut off from its workers but not from etcd steps
 * down (issue 24, item 11).
 *
 * Such a leader keeps its lease (etcd is fine), declares every worker dead
 * and waits for them; the workers, finding it silent, ask the standby,
 * which is not the leader. Nobody acts until the network heals. So: when
 * fewer than a majority of the leader's workers are alive for
 * --leader-quorum-timeout-ms, the leader reads what the standby reports
 * (leader.c writes, through its election thread, the names of the workers
 * that came to it lately under EDDY_STANDBY_HEARD_KEY). If a fresh report
 * names more of this leader's workers than it can reach itself, it gives
 * its lease up (COORD_RUN_STEPPED_DOWN: it also lets the standby win the
 * next election), and the standby takes over with the workers.
 *
 * The report is the guard against stepping down for nothing: workers that
 * crashed reach no standby either, so a leader that merely lost workers
 * keeps leading. The read goes through c->meta_async (the loop never
 * waits). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

/* A report older than this (wall clock; standbys write one a second while
 * workers come) is not believed. */
#define REPORT_FRESH_MS 5000
#define CHECK_EVERY_MS 1000u
/* Dead workers count as the leader's for this long after their death. */
#define KNOWN_FOR_MS 60000u

static bool name_alive(const coord_t *c, const char *name)
{
    for (const coord_worker_t *w = c->workers; w; w = w->next)
        if (w->alive && !strcmp(w->name, name))
            return true;
    return false;
}

/* The workers this leader counts on: alive, awaiting, or dead lately (and
 * not replaced under their name); workers that left are not counted. */
static bool is_known(const coord_t *c, const coord_worker_t *w, uint64_t now_ms)
{
    if (w->left)
        return false;
    if (w->alive || w->awaiting)
        return true;
    return w->dead_since_ms && now_ms - w->dead_since_ms <= KNOWN_FOR_MS && !name_alive(c, w->name);
}

static void count(const coord_t *c, uint64_t now_ms, uint32_t *alive, uint32_t *known)
{
    *alive = *known = 0;
    for (const coord_worker_t *w = c->workers; w; w = w->next)
        if (is_known(c, w, now_ms)) {
            (*known)++;
            *alive += w->alive;
        }
}

static void on_report(void *arg, const eddy_meta_result_t *res)
{
    coord_t *c = arg;
    c->quorum_reading = false;
    if (res->rc != 1 || c->deposed || !c->minority_since_ms)
        return;
    json_error_t jerr;
    json_t *doc = json_loadb(res->value, res->len, 0, &jerr);
    const char *endpoint = json_string_value(json_object_get(doc, "endpoint"));
    json_t *names = json_object_get(doc, "workers");
    int64_t at = json_integer_value(json_object_get(doc, "wall_ms"));
    int64_t age = eddy_wall_ms() - at;
    if (!endpoint || !json_is_array(names) || age > REPORT_FRESH_MS || age < -REPORT_FRESH_MS ||
        (c->advertise && !strcmp(endpoint, c->advertise))) {
        json_decref(doc);
        return;
    }
    uint64_t now = eddy_mono_ms();
    uint32_t alive, known, heard = 0;
    count(c, now, &alive, &known);
    size_t i;
    json_t *n;
    json_array_foreach(names, i, n) {
        const char *name = json_string_value(n);
        for (const coord_worker_t *w = c->workers; name && w; w = w->next)
            if (!w->alive && is_known(c, w, now) && !strcmp(w->name, name)) {
                heard++;
                break;
            }
    }
    if (heard > alive) {
        eddy_warn("giving up the leadership (epoch %llu): it has reached only %u of its %u workers "
                  "for %llu ms while standby %s hears from %u of the others",
                  (unsigned long long)c->leader_epoch, alive, known,
                  (unsigned long long)(now - c->minority_since_ms), endpoint, heard);
        c->stepped_down = true;
        c->deposed = true;
    }
    json_decref(doc);
}

void coord_quorum_tick(coord_t *c, uint64_t now_ms)
{
    uint32_t timeout = c->opts->leader_quorum_timeout_ms;
    if (!c->election || !timeout || c->deposed)
        return;
    uint32_t alive, known;
    count(c, now_ms, &alive, &known);
    if (known == 0 || alive * 2 > known) {
        if (c->minority_since_ms)
            eddy_info("reaches %u of its %u workers again", alive, known);
        c->minority_since_ms = 0;
        return;
    }
    if (!c->minority_since_ms) {
        c->minority_since_ms = now_ms;
        eddy_warn("reaches only %u of its %u workers; gives up the leadership after %u ms if a "
                  "standby hears from them",
                  alive, known, timeout);
    }
    if (now_ms - c->minority_since_ms < timeout || c->quorum_reading ||
        now_ms < c->quorum_next_check_ms)
        return;
    c->quorum_next_check_ms = now_ms + CHECK_EVERY_MS;
    c->quorum_reading = true;
    eddy_metastore_async_get(c->meta_async, EDDY_STANDBY_HEARD_KEY, 0, on_report, c);
}
