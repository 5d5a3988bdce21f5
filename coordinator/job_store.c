/* job_store.c - the job record and checkpoint metadata: their one writer
 * and one reader, and the coordinator-restart reload.
 *
 * Record encode/parse are pure (unit-tested in tests/unit/test_job_store.c).
 * coord_job_store_save() writes a job's record through the asynchronous
 * metadata store, so it lands in order with every other call.
 * coord_jobs_restore_from_store() runs once before the loop: it rebuilds
 * each job that had not ended in memory only, with the checkpoints whose
 * metadata exists (their write was the commit point, so the newest one is
 * what sinks may already have published) and an epoch above any used
 * before. Nothing is written back here: the first write is the restore's
 * deploy, which records a higher epoch before any DEPLOY goes out. */
#include "coordinator/job_store.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/internal.h"

/* ---- keys ------------------------------------------------------------------ */

void coord_job_key(char *buf, size_t size, const char *job_id)
{
    snprintf(buf, size, "/eddy/jobs/%s", job_id);
}

void coord_checkpoint_key(char *buf, size_t size, const char *job_id, uint64_t checkpoint)
{
    snprintf(buf, size, "/eddy/jobs/%s/checkpoints/%020" PRIu64, job_id, checkpoint);
}

void coord_checkpoint_prefix(char *buf, size_t size, const char *job_id)
{
    snprintf(buf, size, "/eddy/jobs/%s/checkpoints/", job_id);
}

void coord_counters_key(char *buf, size_t size, const char *job_id)
{
    snprintf(buf, size, "/eddy/jobs/%s/counters", job_id);
}

/* ---- the job record ----------------------------------------------------------- */

static json_t *parallelism_json(uint32_t n, const char (*names)[EDDY_NAME_MAX], const uint32_t *p)
{
    json_t *o = json_object();
    for (uint32_t s = 0; s < n; s++)
        json_object_set_new(o, names[s], json_integer(p[s]));
    return o;
}

static int parallelism_parse(json_t *o, uint32_t *n, char (*names)[EDDY_NAME_MAX], uint32_t *p)
{
    const char *name;
    json_t *v;
    *n = 0;
    json_object_foreach(o, name, v)
    {
        if (*n == EDDY_MAX_STAGES || !json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > UINT32_MAX || strlen(name) >= EDDY_NAME_MAX)
            return -1;
        snprintf(names[*n], EDDY_NAME_MAX, "%s", name);
        p[(*n)++] = (uint32_t)json_integer_value(v);
    }
    return 0;
}

static char *dump(json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    return text;
}

char *coord_job_record_encode(const coord_job_record_t *r)
{
    json_t *args = json_array();
    for (uint32_t i = 0; i < r->argc; i++)
        json_array_append_new(args, json_string(r->argv[i]));
    json_t *plugins = json_array();
    for (uint32_t i = 0; i < r->n_plugins; i++)
        json_array_append_new(plugins, json_string(r->plugins[i]));
    char *hex = malloc(r->plan_len * 2 + 1);
    if (!hex) {
        json_decref(args);
        json_decref(plugins);
        return NULL;
    }
    for (size_t i = 0; i < r->plan_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)r->plan[i]);
    hex[r->plan_len * 2] = '\0';
    json_t *plan = json_string(hex);
    free(hex);
    json_t *counters = NULL;
    if (r->counters) {
        json_error_t jerr;
        counters = json_loads(r->counters, 0, &jerr);
        if (!json_is_object(counters)) {
            json_decref(counters);
            json_decref(args);
            json_decref(plugins);
            json_decref(plan);
            return NULL;
        }
    }
    json_t *doc = json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:o, s:I, s:I, s:I, s:I}", "id", r->id,
                          "job", r->job, "args", args, "plugins", plugins, "plan", plan, "state", r->state,
                          "guarantee", eddy_guarantee_name(r->guarantee), "parallelism",
                          parallelism_json(r->n_stages, r->stage, r->parallelism), "last_checkpoint",
                          (json_int_t)r->last_checkpoint, "submitted_ms", (json_int_t)r->submitted_ms,
                          "epoch", (json_int_t)r->epoch, "restarts", (json_int_t)r->restarts);
    if (doc && counters)
        json_object_set_new(doc, "counters", counters);
    else
        json_decref(counters);
    if (doc && r->ended_ms)
        json_object_set_new(doc, "ended_ms", json_integer((json_int_t)r->ended_ms));
    if (doc && r->savepoint[0])
        json_object_set_new(doc, "savepoint", json_string(r->savepoint));
    return dump(doc);
}

static int copy_str(char *dst, size_t size, const char *src)
{
    if (strlen(src) >= size)
        return -1;
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

int coord_job_record_parse(const char *text, coord_job_record_t *r, eddy_err_t *err)
{
    memset(r, 0, sizeof *r);
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    if (!doc)
        return eddy_err_set(err, "job record is not JSON: %s", jerr.text);
    const char *id, *job, *state;
    json_t *args, *par;
    json_int_t last = 0, submitted = 0, epoch = 0, restarts = 0;
    int rc = -1;
    if (json_unpack_ex(doc, &jerr, 0, "{s:s, s:s, s:o, s:s, s:o, s:I, s?I, s?I, s?I}", "id", &id,
                       "job", &job, "args", &args, "state", &state, "parallelism", &par,
                       "last_checkpoint", &last, "submitted_ms", &submitted, "epoch", &epoch,
                       "restarts", &restarts) < 0) {
        eddy_err_set(err, "job record: %s", jerr.text);
        goto out;
    }
    if (copy_str(r->id, sizeof r->id, id) < 0 || copy_str(r->job, sizeof r->job, job) < 0 ||
        copy_str(r->state, sizeof r->state, state) < 0) {
        eddy_err_set(err, "job record: id, job or state is too long");
        goto out;
    }
    if (!json_is_array(args) || !json_is_object(par) || last < 0 || epoch < 0 ||
        epoch > UINT32_MAX || restarts < 0 || restarts > UINT32_MAX) {
        eddy_err_set(err, "job record: malformed args, parallelism, last_checkpoint or epoch");
        goto out;
    }
    if (parallelism_parse(par, &r->n_stages, r->stage, r->parallelism) < 0) {
        eddy_err_set(err, "job record: malformed parallelism");
        goto out;
    }
    r->argc = (uint32_t)json_array_size(args);
    r->argv = calloc(r->argc + 1, sizeof *r->argv);
    for (uint32_t i = 0; r->argv && i < r->argc; i++) {
        const char *a = json_string_value(json_array_get(args, i));
        if (!a || !(r->argv[i] = strdup(a))) {
            eddy_err_set(err, "job record: argument %u is not a string", i);
            goto out;
        }
    }
    if (!r->argv) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    /* absent in records written before --guarantee: exactly-once */
    const char *guarantee = json_string_value(json_object_get(doc, "guarantee"));
    r->guarantee = EDDY_GUARANTEE_EXACTLY_ONCE;
    if (guarantee && eddy_guarantee_parse(guarantee, &r->guarantee) < 0) {
        eddy_err_set(err, "job record: unknown guarantee '%.64s'", guarantee);
        goto out;
    }
    /* both absent in records written before counters were kept */
    json_t *counters = json_object_get(doc, "counters");
    if (counters && (!json_is_object(counters) ||
                     !(r->counters = json_dumps(counters, JSON_COMPACT | JSON_SORT_KEYS)))) {
        eddy_err_set(err, "job record: malformed counters");
        goto out;
    }
    json_t *ended = json_object_get(doc, "ended_ms");
    r->ended_ms = json_is_integer(ended) ? json_integer_value(ended) : 0;
    const char *savepoint = json_string_value(json_object_get(doc, "savepoint"));
    if (savepoint)
        snprintf(r->savepoint, sizeof r->savepoint, "%.*s", (int)sizeof r->savepoint - 1, savepoint);
    json_t *plugins = json_object_get(doc, "plugins"); /* absent in records before plugins */
    r->n_plugins = json_is_array(plugins) ? (uint32_t)json_array_size(plugins) : 0;
    r->plugins = calloc(r->n_plugins + 1, sizeof *r->plugins);
    for (uint32_t i = 0; r->plugins && i < r->n_plugins; i++) {
        const char *h = json_string_value(json_array_get(plugins, i));
        if (!h || !(r->plugins[i] = strdup(h))) {
            eddy_err_set(err, "job record: plugin %u is not a string", i);
            goto out;
        }
    }
    if (!r->plugins) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    const char *hex = json_string_value(json_object_get(doc, "plan")); /* absent before plans */
    size_t hex_len = hex ? strlen(hex) : 0;
    if (hex_len % 2 || hex_len / 2 > EDDY_PLAN_MAX_WIRE) {
        eddy_err_set(err, "job record: malformed plan");
        goto out;
    }
    if (hex_len) {
        r->plan = malloc(hex_len / 2);
        if (!r->plan) {
            eddy_err_set(err, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < hex_len / 2; i++) {
            unsigned v;
            if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
                eddy_err_set(err, "job record: malformed plan");
                goto out;
            }
            r->plan[i] = (char)v;
        }
        r->plan_len = hex_len / 2;
    }
    r->last_checkpoint = (uint64_t)last;
    r->submitted_ms = submitted;
    r->epoch = (uint32_t)epoch;
    r->restarts = (uint32_t)restarts;
    rc = 0;
out:
    json_decref(doc);
    if (rc < 0)
        coord_job_record_clear(r);
    return rc;
}

void coord_job_record_clear(coord_job_record_t *r)
{
    if (r->argv)
        for (uint32_t i = 0; i < r->argc; i++)
            free(r->argv[i]);
    free(r->argv);
    if (r->plugins)
        for (uint32_t i = 0; i < r->n_plugins; i++)
            free(r->plugins[i]);
    free(r->plugins);
    free(r->plan);
    free(r->counters);
    memset(r, 0, sizeof *r);
}

/* ---- checkpoint metadata ------------------------------------------------------ */

static json_t *finished_json(const coord_checkpoint_record_t *r);

char *coord_checkpoint_record_encode(const coord_checkpoint_record_t *r)
{
    json_t *positions = json_array();
    for (uint32_t k = 0; k < r->n_positions; k++) {
        const coord_position_record_t *p = &r->positions[k];
        json_t *entry = json_pack("{s:s, s:I, s:I}", "stage", p->stage, "instance",
                                  (json_int_t)p->instance, "position", (json_int_t)p->position);
        if (entry && p->state && p->state_len) {
            char *b64 = eddy_b64_encode((const unsigned char *)p->state, p->state_len);
            if (!b64 || json_object_set_new(entry, "state", json_string(b64)) < 0) {
                free(b64);
                json_decref(entry);
                json_decref(positions);
                return NULL;
            }
            free(b64);
        }
        json_array_append_new(positions, entry);
    }
    json_t *doc = json_pack("{s:I, s:I, s:I, s:f, s:I, s:I, s:o, s:o, s:s}", "id", (json_int_t)r->id,
                            "time_ms", (json_int_t)r->time_ms, "epoch", (json_int_t)r->epoch,
                            "duration_ms", r->duration_ms, "bytes", (json_int_t)r->bytes, "files",
                            (json_int_t)r->files, "positions", positions, "parallelism",
                            parallelism_json(r->n_stages, r->stage, r->parallelism), "snapshot_dir",
                            r->snapshot_dir);
    if (doc && r->n_finished && json_object_set_new(doc, "finished", finished_json(r)) < 0) {
        json_decref(doc);
        return NULL;
    }
    return dump(doc);
}

/* "finished": the tasks finished at the checkpoint, [{"stage", "instance"}]. */
static json_t *finished_json(const coord_checkpoint_record_t *r)
{
    json_t *a = json_array();
    for (uint32_t f = 0; a && f < r->n_finished; f++)
        if (json_array_append_new(a, json_pack("{s:s, s:I}", "stage", r->finished[f].stage,
                                                "instance", (json_int_t)r->finished[f].instance)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static int finished_parse(json_t *a, coord_checkpoint_record_t *r, eddy_err_t *err)
{
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) > EDDY_TASK_REFS_MAX)
        return eddy_err_set(err, "checkpoint metadata: \"finished\" is not a list of tasks");
    r->n_finished = (uint32_t)json_array_size(a);
    r->finished = calloc(r->n_finished + 1, sizeof *r->finished);
    if (!r->finished)
        return eddy_err_set(err, "out of memory");
    for (uint32_t f = 0; f < r->n_finished; f++) {
        const char *stage;
        json_int_t instance;
        if (json_unpack(json_array_get(a, f), "{s:s, s:I}", "stage", &stage, "instance",
                        &instance) < 0 ||
            instance < 0 || instance > UINT32_MAX ||
            copy_str(r->finished[f].stage, sizeof r->finished[f].stage, stage) < 0)
            return eddy_err_set(err, "checkpoint metadata: malformed finished task %u", f);
        r->finished[f].instance = (uint32_t)instance;
    }
    return 0;
}

int coord_checkpoint_record_parse(const char *text, coord_checkpoint_record_t *r, eddy_err_t *err)
{
    memset(r, 0, sizeof *r);
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    if (!doc)
        return eddy_err_set(err, "checkpoint metadata is not JSON: %s", jerr.text);
    json_int_t id = 0, time_ms = 0, epoch = 0, bytes = 0, files = 0;
    double duration = 0;
    json_t *positions, *par = NULL, *finished = NULL;
    const char *dir = "";
    int rc = -1;
    if (json_unpack_ex(doc, &jerr, 0, "{s:I, s:o, s?I, s?I, s?F, s?I, s?I, s?o, s?s, s?o}", "id",
                       &id, "positions", &positions, "time_ms", &time_ms, "epoch", &epoch,
                       "duration_ms", &duration, "bytes", &bytes, "files", &files, "parallelism",
                       &par, "snapshot_dir", &dir, "finished", &finished) < 0) {
        eddy_err_set(err, "checkpoint metadata: %s", jerr.text);
        goto out;
    }
    if (id <= 0 || !json_is_array(positions) || (par && !json_is_object(par)) ||
        copy_str(r->snapshot_dir, sizeof r->snapshot_dir, dir) < 0 ||
        (par && parallelism_parse(par, &r->n_stages, r->stage, r->parallelism) < 0)) {
        eddy_err_set(err, "checkpoint metadata: malformed id, positions or parallelism");
        goto out;
    }
    r->n_positions = (uint32_t)json_array_size(positions);
    r->positions = calloc(r->n_positions + 1, sizeof *r->positions);
    if (!r->positions) {
        eddy_err_set(err, "out of memory");
        goto out;
    }
    for (uint32_t k = 0; k < r->n_positions; k++) {
        const char *stage, *state = NULL;
        size_t state_b64_len = 0;
        json_int_t instance, position;
        if (json_unpack(json_array_get(positions, k), "{s:s, s:I, s:I, s?s%}", "stage", &stage,
                        "instance", &instance, "position", &position, "state", &state,
                        &state_b64_len) < 0 ||
            instance < 0 || instance > UINT32_MAX ||
            copy_str(r->positions[k].stage, sizeof r->positions[k].stage, stage) < 0) {
            eddy_err_set(err, "checkpoint metadata: malformed position %u", k);
            goto out;
        }
        r->positions[k].instance = (uint32_t)instance;
        r->positions[k].position = position;
        if (state && state_b64_len) {
            size_t len = 0;
            int brc = state_b64_len <= (EDDY_SOURCE_STATE_MAX + 2) / 3 * 4
                          ? eddy_b64_decode(state, state_b64_len, &r->positions[k].state, &len)
                          : -1;
            if (brc < 0 || len > EDDY_SOURCE_STATE_MAX) {
                eddy_err_set(err, brc == -2 ? "out of memory"
                                            : "checkpoint metadata: position %u: source state is "
                                              "not base64 of at most %u bytes", k,
                             EDDY_SOURCE_STATE_MAX);
                goto out;
            }
            r->positions[k].state_len = (uint32_t)len;
        }
    }
    if (finished_parse(finished, r, err) < 0)
        goto out;
    r->id = (uint64_t)id;
    r->time_ms = time_ms;
    r->epoch = (uint32_t)epoch;
    r->duration_ms = duration;
    r->bytes = (uint64_t)bytes;
    r->files = (uint64_t)files;
    rc = 0;
out:
    json_decref(doc);
    if (rc < 0)
        coord_checkpoint_record_clear(r);
    return rc;
}

void coord_checkpoint_record_clear(coord_checkpoint_record_t *r)
{
    for (uint32_t k = 0; r->positions && k < r->n_positions; k++)
        free(r->positions[k].state);
    free(r->positions);
    free(r->finished);
    memset(r, 0, sizeof *r);
}

/* ---- tickets --------------------------------------------------------------------- */

coord_ticket_t *coord_ticket_new(coord_t *c, const coord_job_t *j, uint64_t checkpoint)
{
    coord_ticket_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->c = c;
    t->job = j->num;
    t->epoch = j->epoch;
    t->checkpoint = checkpoint;
    snprintf(t->job_id, sizeof t->job_id, "%s", j->id);
    t->next = c->tickets;
    if (c->tickets)
        c->tickets->prev = t;
    c->tickets = t;
    return t;
}

void coord_ticket_release(coord_ticket_t *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        t->c->tickets = t->next;
    if (t->next)
        t->next->prev = t->prev;
    free(t);
}

coord_job_t *coord_ticket_job(coord_ticket_t *t)
{
    coord_job_t *j = coord_job_by_num(t->c, t->job);
    return j && j->epoch == t->epoch ? j : NULL;
}

/* ---- save ---------------------------------------------------------------------------- */

/* The job's counts (counters.h) as this coordinator knows them, into its
 * counters before they are saved. */
static void note_job_counts(coord_job_t *j)
{
    coord_job_counts_t now = {.checkpoints_completed = j->checkpoints_completed,
                              .checkpoints_failed = j->checkpoints_failed,
                              .rescales = (uint64_t)j->rescales_earlier + j->n_rescales -
                                          j->n_migrations,
                              .rescale_bytes = j->rescale_bytes_total,
                              .restarts = j->restarts,
                              .migrations = (uint64_t)j->migrations_earlier + j->n_migrations,
                              .instances_migrated = j->instances_migrated,
                              .migration_bytes = j->migration_bytes_total};
    coord_counters_set_job(j->counters, &now);
}

void coord_job_store_save(coord_t *c, coord_job_t *j, int retries, eddy_meta_done_fn done, void *arg)
{
    note_job_counts(j);
    coord_job_record_t r = {.argc = j->argc, .argv = j->argv, .n_plugins = j->n_plugins,
                            .plugins = j->plugins, .plan = j->plan, .plan_len = j->plan_len,
                            .n_stages = j->graph.n_stages,
                            .last_checkpoint = j->last_checkpoint, .submitted_ms = j->submitted_wall_ms,
                            .epoch = j->epoch, .restarts = j->restarts,
                            .guarantee = j->guarantee, .ended_ms = j->ended_wall_ms};
    const char *names[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        names[s] = j->graph.stages[s].name;
    snprintf(r.savepoint, sizeof r.savepoint, "%s", j->savepoint_last);
    json_t *counters = coord_counters_to_json(j->counters, names, j->graph.n_stages, eddy_wall_ms());
    r.counters = counters ? json_dumps(counters, JSON_COMPACT) : NULL;
    json_decref(counters);
    snprintf(r.id, sizeof r.id, "%s", j->id);
    snprintf(r.job, sizeof r.job, "%s", j->name);
    snprintf(r.state, sizeof r.state, "%s", coord_job_state_name(j->state));
    for (uint32_t s = 0; s < j->graph.n_stages; s++) {
        snprintf(r.stage[s], sizeof r.stage[s], "%s", j->graph.stages[s].name);
        /* a fluid migration's extra instances are not the job's */
        r.parallelism[s] = j->fluid && j->n_moves && (int)s == j->rescale_stage
                               ? j->rescale_from
                               : coord_job_parallelism(j, s);
    }
    char *text = coord_job_record_encode(&r);
    free(r.counters);
    char key[COORD_KEY_MAX];
    coord_job_key(key, sizeof key, j->id);
    if (text)
        eddy_metastore_async_put(c->meta_async, key, text, strlen(text), retries, done, arg);
    else if (done) {
        eddy_meta_result_t res = {.rc = -1, .key = key};
        eddy_err_set(&res.err, "out of memory");
        done(arg, &res);
    }
    free(text);
}

/* ---- counters ------------------------------------------------------------------ */

static void on_counters_saved(void *arg, const eddy_meta_result_t *res)
{
    coord_ticket_t *t = arg;
    coord_job_t *j = coord_ticket_job(t);
    if (res->rc < 0)
        eddy_debug("job %s: counters not saved: %s", t->job_id, res->err.msg);
    else if (j)
        coord_counters_commit(j->counters, t->checkpoint);
    coord_ticket_release(t);
}

void coord_counters_save(coord_t *c, coord_job_t *j)
{
    const char *names[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        names[s] = j->graph.stages[s].name;
    int64_t now = eddy_wall_ms();
    note_job_counts(j);
    uint64_t capture = coord_counters_capture(j->counters, now);
    json_t *doc = coord_counters_to_json(j->counters, names, j->graph.n_stages, now);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    coord_ticket_t *t = text ? coord_ticket_new(c, j, capture) : NULL;
    if (t) {
        char key[COORD_KEY_MAX];
        coord_counters_key(key, sizeof key, j->id);
        eddy_metastore_async_put(c->meta_async, key, text, strlen(text), 3, on_counters_saved, t);
    }
    free(text);
}

/* ---- coordinator restart --------------------------------------------------------- */

/* Positions of a checkpoint in the job's source-instance order, or NULL
 * when they do not fit the job (a different parallelism of a source).
 * Takes the record's source states. */
static coord_source_progress_t *positions_for(const coord_job_t *j, coord_checkpoint_record_t *r,
                                              uint32_t *n)
{
    *n = 0;
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        if (j->graph.stages[s].source)
            *n += j->graph.stages[s].parallelism;
    if (*n != r->n_positions)
        return NULL;
    coord_source_progress_t *out = coord_progress_new(*n);
    uint32_t k = 0;
    for (uint32_t s = 0; out && s < j->graph.n_stages; s++) {
        if (!j->graph.stages[s].source)
            continue;
        for (uint32_t i = 0; i < j->graph.stages[s].parallelism; i++, k++) {
            bool found = false;
            for (uint32_t q = 0; q < r->n_positions && !found; q++)
                if (!strcmp(r->positions[q].stage, j->graph.stages[s].name) && r->positions[q].instance == i) {
                    out[k] = (coord_source_progress_t){r->positions[q].position, r->positions[q].state,
                                                       r->positions[q].state_len};
                    r->positions[q].state = NULL;
                    r->positions[q].state_len = 0;
                    found = true;
                }
            if (!found) {
                coord_progress_free(&out, *n);
                return NULL;
            }
        }
    }
    return out;
}

/* The record's finished tasks as the job's (stage index, instance); -1
 * when one does not fit the job (no such stage or instance). */
static int finished_for(const coord_job_t *j, const coord_checkpoint_record_t *r,
                        eddy_task_ref_t **out)
{
    *out = NULL;
    if (!r->n_finished)
        return 0;
    eddy_task_ref_t *f = calloc(r->n_finished, sizeof *f);
    if (!f)
        return -1;
    for (uint32_t k = 0; k < r->n_finished; k++) {
        uint32_t s = 0;
        while (s < j->graph.n_stages && strcmp(j->graph.stages[s].name, r->finished[k].stage))
            s++;
        if (s == j->graph.n_stages || r->finished[k].instance >= j->graph.stages[s].parallelism) {
            free(f);
            return -1;
        }
        f[k] = (eddy_task_ref_t){s, r->finished[k].instance};
    }
    *out = f;
    return 0;
}

/* Loads the job's recorded checkpoints (ascending ids) into j->retained;
 * -1 with err when the store could not be read (the job must not resume
 * without them: it would restart from the beginning after its sinks
 * committed). */
static int load_checkpoints(coord_t *c, coord_job_t *j, const coord_job_record_t *rec,
                            eddy_err_t *serr)
{
    char prefix[COORD_KEY_MAX];
    coord_checkpoint_prefix(prefix, sizeof prefix, j->id);
    eddy_kv_list_t list = {0};
    eddy_err_t err;
    if (eddy_metastore_list(c->meta, prefix, &list, &err) < 0)
        return eddy_err_set(serr, "job %s: cannot list its checkpoints: %s", j->id, err.msg);
    uint64_t highest = 0, lowest = UINT64_MAX;
    for (size_t i = 0; i < list.count; i++) {
        const char *digits = list.items[i].key + strlen(prefix);
        uint64_t key_id = strtoull(digits, NULL, 10);
        if (key_id && key_id < lowest)
            lowest = key_id; /* recorded, maybe unreadable: deleted by retention later */
        coord_checkpoint_record_t r;
        if (coord_checkpoint_record_parse(list.items[i].value, &r, &err) < 0) {
            eddy_warn("job %s: ignoring %s: %s", j->id, list.items[i].key, err.msg);
            continue;
        }
        if (r.id > highest)
            highest = r.id;
        uint32_t n;
        coord_source_progress_t *pos = positions_for(j, &r, &n);
        eddy_task_ref_t *finished = NULL;
        if (pos && finished_for(j, &r, &finished) < 0)
            coord_progress_free(&pos, n);
        if (pos)
            coord_retained_push(j, r.id, pos, n, finished, r.n_finished);
        else
            eddy_warn("job %s: checkpoint %" PRIu64 "'s source positions do not fit the job; not using it",
                      j->id, r.id);
        coord_checkpoint_record_clear(&r);
    }
    eddy_kv_list_clear(&list);
    j->cleaned_below = lowest != UINT64_MAX ? lowest : highest + 1;
    /* ids continue above anything recorded, abandoned ones included */
    uint64_t above = highest > rec->last_checkpoint ? highest : rec->last_checkpoint;
    j->next_checkpoint = above + 1;
    if (rec->last_checkpoint > j->last_checkpoint) {
        eddy_warn("job %s: its record names checkpoint %" PRIu64 " but the newest usable one is %" PRIu64,
                  j->id, rec->last_checkpoint, j->last_checkpoint);
        /* recovery never crosses a commit (recovery.c) */
        const char *fence = coord_job_commit_fence(j);
        if (fence)
            snprintf(j->unrestorable, sizeof j->unrestorable,
                     "checkpoint %" PRIu64 " cannot be restored (its metadata is unreadable or does "
                     "not fit the job); sink %s may have published up to it, and restoring %s would "
                     "publish the replay twice",
                     rec->last_checkpoint, fence, j->last_checkpoint ? "an older checkpoint" : "from the start");
    }
    return 0;
}

/* Counters parsed from text into a new object, or NULL (warned). */
static coord_counters_t *counters_from_text(const coord_job_t *j, const char *text, size_t len,
                                            const char *where)
{
    const char *names[EDDY_MAX_STAGES];
    for (uint32_t s = 0; s < j->graph.n_stages; s++)
        names[s] = j->graph.stages[s].name;
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    eddy_err_t err = {{0}};
    coord_counters_t *ctr = coord_counters_new();
    if (!doc || !ctr || coord_counters_from_json(ctr, doc, names, j->graph.n_stages, &err) < 0) {
        eddy_warn("job %s: ignoring the counters in %s: %s", j->id, where, doc ? err.msg : "not JSON");
        coord_counters_destroy(&ctr);
    }
    json_decref(doc);
    return ctr;
}

/* The job's counters as saved: under their own key (saved every second)
 * or in the record (saved at checkpoints), whichever holds more. */
static int restore_counters(coord_t *c, coord_job_t *j, const coord_job_record_t *rec,
                            eddy_err_t *serr)
{
    coord_counters_t *best = rec->counters
                                 ? counters_from_text(j, rec->counters, strlen(rec->counters), "its record")
                                 : NULL;
    char key[COORD_KEY_MAX], *text = NULL;
    size_t len = 0;
    eddy_err_t err = {{0}};
    coord_counters_key(key, sizeof key, j->id);
    int found = eddy_metastore_get(c->meta, key, &text, &len, &err);
    if (found < 0) {
        coord_counters_destroy(&best);
        return eddy_err_set(serr, "job %s: cannot read its counters: %s", j->id, err.msg);
    }
    coord_counters_t *own = found == 1 ? counters_from_text(j, text, len, key) : NULL;
    free(text);
    if (own && (!best || coord_counters_grand_total(own) >= coord_counters_grand_total(best))) {
        coord_counters_destroy(&best);
        best = own;
    } else {
        coord_counters_destroy(&own);
    }
    if (best) {
        coord_counters_destroy(&j->counters);
        j->counters = best;
    }
    /* the job's counts go on from what was saved (the record's restarts
     * may be newer: it is written at each restore's deploy) */
    coord_job_counts_t saved;
    coord_counters_job(j->counters, true, &saved);
    j->checkpoints_completed = saved.checkpoints_completed;
    j->checkpoints_failed = saved.checkpoints_failed;
    j->rescales_earlier = saved.rescales > UINT32_MAX ? UINT32_MAX : (uint32_t)saved.rescales;
    j->rescale_bytes_total = saved.rescale_bytes;
    j->migrations_earlier = saved.migrations > UINT32_MAX ? UINT32_MAX : (uint32_t)saved.migrations;
    j->instances_migrated = saved.instances_migrated;
    j->migration_bytes_total = saved.migration_bytes;
    uint64_t restarts = saved.restarts > rec->restarts ? saved.restarts : rec->restarts;
    j->restarts = restarts > UINT32_MAX ? UINT32_MAX : (uint32_t)restarts;
    return 0;
}

/* An ended job's record as history for the views (status --all, the
 * dashboard): its final numbers, parallelism and times; never deployed. */
static int load_history(coord_t *c, const coord_job_record_t *rec, eddy_err_t *serr)
{
    eddy_err_t err = {{0}};
    for (uint32_t p = 0; p < rec->n_plugins; p++)
        if (coord_plugins_ensure(c, rec->plugins[p], &err) < 0)
            return 0; /* its plan cannot be read without the plugin */
    coord_job_t *j = coord_job_new(c, rec->job, (int)rec->argc, rec->argv, rec->plan, rec->plan_len, &err);
    if (!j) {
        eddy_debug("job %s stays out of the history: %s", rec->id, err.msg);
        return 0;
    }
    snprintf(j->id, sizeof j->id, "%s", rec->id);
    if (restore_counters(c, j, rec, serr) < 0) {
        coord_job_free(j);
        return -1;
    }
    j->history = true;
    j->state = !strcmp(rec->state, "finished") ? JOB_FINISHED
               : !strcmp(rec->state, "failed") ? JOB_FAILED
               : !strcmp(rec->state, "stopped") ? JOB_STOPPED
                                                : JOB_CANCELLED;
    j->guarantee = rec->guarantee;
    j->submitted_wall_ms = rec->submitted_ms;
    j->ended_wall_ms = rec->ended_ms;
    snprintf(j->savepoint_last, sizeof j->savepoint_last, "%s", rec->savepoint);
    j->epoch = rec->epoch;
    j->last_checkpoint = rec->last_checkpoint;
    for (uint32_t s = 0; s < j->graph.n_stages; s++) {
        for (uint32_t q = 0; q < rec->n_stages; q++)
            if (!strcmp(rec->stage[q], j->graph.stages[s].name))
                j->graph.stages[s].parallelism = rec->parallelism[q];
        j->placement[s].parallelism = j->graph.stages[s].parallelism;
    }
    /* its run time, on this coordinator's monotonic clock */
    int64_t ran = rec->ended_ms > rec->submitted_ms ? rec->ended_ms - rec->submitted_ms : 0;
    j->ended_ms = eddy_mono_ms();
    j->started_ms = j->ended_ms - (uint64_t)ran;
    coord_job_add(c, j);
    return 0;
}

/* Forgets every job loaded so far: a reload that failed half-way is done
 * again from the start, never led with part of the jobs. */
void coord_jobs_drop_loaded(coord_t *c)
{
    while (c->jobs) {
        coord_job_t *j = c->jobs;
        c->jobs = j->next;
        coord_job_free(j);
    }
    c->resumed_jobs = false;
}

int coord_jobs_restore_from_store(coord_t *c, eddy_err_t *serr)
{
    eddy_kv_list_t list = {0};
    eddy_err_t err;
    if (eddy_metastore_list(c->meta, "/eddy/jobs/", &list, &err) < 0)
        return eddy_err_set(serr, "cannot read jobs from the metadata store: %s", err.msg);
    int rc = 0;
    for (size_t i = 0; i < list.count; i++) {
        const char *rest = list.items[i].key + strlen("/eddy/jobs/");
        if (strchr(rest, '/'))
            continue; /* checkpoints and other sub-keys */
        coord_job_record_t rec;
        if (coord_job_record_parse(list.items[i].value, &rec, &err) < 0) {
            eddy_warn("ignoring malformed job record %s: %s", list.items[i].key, err.msg);
            continue;
        }
        coord_job_id_reserve(c, rec.id);
        if (!strcmp(rec.state, "finished") || !strcmp(rec.state, "failed") ||
            !strcmp(rec.state, "cancelled") || !strcmp(rec.state, "stopped")) {
            rc = load_history(c, &rec, serr);
            coord_job_record_clear(&rec);
            if (rc < 0)
                break;
            continue;
        }
        bool plugins_ok = true;
        for (uint32_t p = 0; p < rec.n_plugins && plugins_ok; p++)
            if (coord_plugins_ensure(c, rec.plugins[p], &err) < 0) {
                eddy_warn("cannot resume job %s: its plugin: %s", rec.id, err.msg);
                plugins_ok = false;
            }
        if (!plugins_ok) {
            coord_job_record_clear(&rec);
            continue;
        }
        coord_job_t *j = coord_job_new(c, rec.job, (int)rec.argc, rec.argv, rec.plan, rec.plan_len, &err);
        if (!j) {
            eddy_warn("cannot resume job %s: %s", rec.id, err.msg);
            coord_job_record_clear(&rec);
            continue;
        }
        snprintf(j->id, sizeof j->id, "%s", rec.id);
        if (restore_counters(c, j, &rec, serr) < 0) {
            coord_job_free(j);
            coord_job_record_clear(&rec);
            rc = -1;
            break;
        }
        j->guarantee = rec.guarantee;
        j->submitted_wall_ms = rec.submitted_ms;
        for (uint32_t s = 0; s < j->graph.n_stages; s++)
            for (uint32_t q = 0; q < rec.n_stages; q++)
                if (!strcmp(rec.stage[q], j->graph.stages[s].name) &&
                    rec.parallelism[q] <= j->graph.max_parallelism)
                    j->graph.stages[s].parallelism = rec.parallelism[q];
        if (load_checkpoints(c, j, &rec, serr) < 0) {
            coord_job_free(j);
            coord_job_record_clear(&rec);
            rc = -1;
            break;
        }
        /* a placement is needed to restore; the parallelism comes from the record */
        for (uint32_t s = 0; s < j->graph.n_stages; s++)
            j->placement[s].parallelism = j->graph.stages[s].parallelism;
        /* Above any epoch the previous coordinator used (it persisted each
         * before deploying), so messages of its tasks are stale; the restore
         * deploys (and records) the next one. */
        j->epoch = rec.epoch + 1;
        j->resumed_restore_pending = true;
        coord_job_add(c, j);
        c->resumed_jobs = true;
        eddy_info("resumed job %s from the metadata store (last checkpoint %" PRIu64 ", epoch %u)",
                  j->id, j->last_checkpoint, rec.epoch);
        coord_job_record_clear(&rec);
    }
    eddy_kv_list_clear(&list);
    if (rc < 0)
        coord_jobs_drop_loaded(c);
    return rc;
}
