/* pg_sink.c - the PostgreSQL two-phase-commit sink (see pg_sink.h).
 *
 * Owns: the instance's buffer of rows since the last prepare (worker loop),
 * and a core shared with the instance's libpq thread: a FIFO of jobs
 * (connect, prepare a checkpoint's rows, commit), a sequence of finished
 * jobs, and a sticky error. The core is reference counted: the thread, the
 * operator and each sync-list call that waits for a job hold one, so a task
 * destroyed while the snapshot writer still waits, or while the thread
 * still commits, frees nothing under anyone's feet. A closed instance's
 * thread still runs queued commits (a completed checkpoint should be
 * published) but skips queued prepares (no ACK will follow them); so does
 * an aborted one, whose abort job then rolls back what it prepared. */
#include "connectors/postgres/pg_sink.h"

#include <inttypes.h>
#include <stdarg.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "state/keygroup.h"

/* Rows per INSERT statement: 2 parameters each, far below libpq's 65535. */
#define ROWS_PER_STATEMENT 500
#define GID_MAX 200
/* Upsert mode's staging table (see insert_rows). */
#define STAGE_TABLE "eddy_upsert_stage" /* PostgreSQL's limit on a prepared transaction's id */
#define CONNECT_TIMEOUT_S "5"
/* A statement waiting this long for a row lock fails the instance rather
 * than hanging it: the lock belongs to a transaction some attempt left
 * prepared, which the restore that follows resolves. */
#define SESSION_OPTIONS "-c lock_timeout=20000"
/* How long a new instance waits for a closing one of an older attempt in
 * this process to finish the statement it is running. */
#define OLDER_ATTEMPT_WAIT_S 60
/* How long abort() waits for the rollback when the job ended for good:
 * below the default heartbeat timeout (3 s), so the worker is not declared
 * dead while it waits. */
#define ABORT_WAIT_S 2

/* ---- rows ----------------------------------------------------------------- */

typedef struct pg_row {
    size_t off;     /* NUL-terminated bytes in the batch's arena */
    uint8_t kind;
    int64_t value;
    size_t seq;     /* arrival order, to keep the last update of a key */
} pg_row_t;

typedef struct pg_batch {
    char *arena;
    size_t used, cap;
    pg_row_t *rows;
    size_t n, rows_cap;
    /* Upsert mode: key -> row + 1 (0 = empty), open addressing, so a key
     * updated a million times in an interval is one row, not a million. */
    size_t *slots;
    size_t n_slots;
} pg_batch_t;

static void batch_free(pg_batch_t *b)
{
    free(b->arena);
    free(b->rows);
    free(b->slots);
    memset(b, 0, sizeof *b);
}

static size_t *batch_slot(pg_batch_t *b, const char *key, uint32_t len)
{
    size_t mask = b->n_slots - 1;
    for (size_t i = (size_t)eddy_key_hash(key, len) & mask;; i = (i + 1) & mask) {
        size_t *slot = &b->slots[i];
        if (!*slot)
            return slot;
        const char *have = b->arena + b->rows[*slot - 1].off;
        if (strlen(have) == len && !memcmp(have, key, len))
            return slot;
    }
}

/* Keeps the table at most half full. */
static int batch_grow_slots(pg_batch_t *b)
{
    if ((b->n + 1) * 2 <= b->n_slots)
        return 0;
    size_t n_slots = b->n_slots ? b->n_slots * 2 : 1024;
    size_t *old = b->slots, old_n = b->n_slots;
    b->slots = calloc(n_slots, sizeof *b->slots);
    if (!b->slots) {
        b->slots = old;
        return -1;
    }
    b->n_slots = n_slots;
    for (size_t i = 0; i < old_n; i++)
        if (old[i]) {
            const char *k = b->arena + b->rows[old[i] - 1].off;
            *batch_slot(b, k, (uint32_t)strlen(k)) = old[i];
        }
    free(old);
    return 0;
}

/* Upsert mode: a key already in the batch gets the new change in place. */
static int batch_upsert(pg_batch_t *b, const eddy_record_t *rec);

static int batch_add(pg_batch_t *b, const eddy_record_t *rec)
{
    if (b->used + rec->len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->used + rec->len + 1)
            cap *= 2;
        char *a = realloc(b->arena, cap);
        if (!a)
            return -1;
        b->arena = a;
        b->cap = cap;
    }
    if (b->n == b->rows_cap) {
        size_t cap = b->rows_cap ? b->rows_cap * 2 : 256;
        pg_row_t *r = realloc(b->rows, cap * sizeof *r);
        if (!r)
            return -1;
        b->rows = r;
        b->rows_cap = cap;
    }
    memcpy(b->arena + b->used, rec->data, rec->len);
    b->arena[b->used + rec->len] = '\0';
    b->rows[b->n] = (pg_row_t){b->used, rec->kind, rec->value, b->n};
    b->n++;
    b->used += rec->len + 1;
    return 0;
}

static int batch_upsert(pg_batch_t *b, const eddy_record_t *rec)
{
    if (batch_grow_slots(b) < 0)
        return -1;
    size_t *slot = batch_slot(b, rec->data, rec->len);
    if (*slot) {
        pg_row_t *row = &b->rows[*slot - 1];
        row->kind = rec->kind;
        row->value = rec->value;
        return 0;
    }
    if (batch_add(b, rec) < 0)
        return -1;
    *batch_slot(b, rec->data, rec->len) = b->n;
    return 0;
}

/* ---- the core shared with the thread ---------------------------------------- */

typedef enum { JOB_CONNECT, JOB_PREPARE, JOB_COMMIT, JOB_ABORT } job_kind_t;

typedef struct pg_job {
    struct pg_job *next;
    job_kind_t kind;
    uint64_t seq;
    uint64_t checkpoint;
    pg_batch_t batch;
} pg_job_t;

typedef struct pg_core {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    pg_job_t *head, *tail;
    uint64_t queued, done; /* job sequence numbers */
    bool closing;
    bool aborting;         /* the job ended for good: no more prepares */
    char error[512];       /* sticky: the first failure */
    atomic_bool failed;

    /* Set at open, read-only after. */
    eddy_pg_sink_config_t cfg;
    char where[EDDY_PG_HOST_MAX + 16]; /* HOST:PORT for errors */
    char prefix[GID_MAX];              /* eddy:<job>:<stage>: */
    uint32_t instance, epoch;
    uint64_t restored;

    struct pg_core *next_live; /* live_threads, under live_mu */

    /* The thread's own. */
    PGconn *conn;
    uint64_t *prepared; /* checkpoints prepared and not yet committed */
    size_t n_prepared, prepared_cap;
} pg_core_t;

/* Threads of this process that still run, so a new attempt's instance can
 * wait for a closing one of an older attempt: that one may be in the middle
 * of a PREPARE, which the new instance's sweep would otherwise miss (and its
 * row locks would block the new upserts). Workers declared dead are gone
 * (SIGKILL closes their sessions) or are zombies, which nothing fences. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_cv = PTHREAD_COND_INITIALIZER;
static struct pg_core *live_threads;

static void live_add(struct pg_core *c);
static void live_remove(struct pg_core *c);

static void core_unref(pg_core_t *c)
{
    pthread_mutex_lock(&c->mu);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (!last)
        return;
    while (c->head) {
        pg_job_t *j = c->head;
        c->head = j->next;
        batch_free(&j->batch);
        free(j);
    }
    if (c->conn)
        PQfinish(c->conn);
    free(c->prepared);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* Records the first failure (thread or loop). */
static void core_fail(pg_core_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void core_fail(pg_core_t *c, const char *fmt, ...)
{
    pthread_mutex_lock(&c->mu);
    if (!c->error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->error, sizeof c->error, fmt, ap);
        va_end(ap);
    }
    atomic_store(&c->failed, true);
    pthread_mutex_unlock(&c->mu);
}

/* Returns the job's sequence number; the core takes the job. */
static uint64_t core_submit(pg_core_t *c, pg_job_t *j)
{
    pthread_mutex_lock(&c->mu);
    uint64_t seq = j->seq = ++c->queued; /* j may be freed once unlocked */
    if (c->tail)
        c->tail->next = j;
    else
        c->head = j;
    c->tail = j;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return seq;
}

/* Blocks until job seq ran; its outcome (the sticky error) into err. */
static int core_wait(pg_core_t *c, uint64_t seq, eddy_err_t *err)
{
    pthread_mutex_lock(&c->mu);
    while (c->done < seq)
        pthread_cond_wait(&c->cv, &c->mu);
    int rc = c->error[0] ? eddy_err_set(err, "%s", c->error) : 0;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- SQL on the thread ------------------------------------------------------- */

/* The first line of libpq's message (it ends with '\n'). */
static const char *first_line(const char *msg, char *buf, size_t size)
{
    snprintf(buf, size, "%s", msg ? msg : "");
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

static bool sqlstate_is(const PGresult *r, const char *state)
{
    const char *s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return s && !strcmp(s, state);
}

/* Runs sql; fails the core (naming what) unless the result is ok or its
 * SQLSTATE is one of the tolerated ones (NULL-terminated list). */
static int exec_params(pg_core_t *c, const char *what, const char *sql, int n,
                       const char *const *params, const char *const *tolerated, PGresult **keep)
{
    PGresult *r = PQexecParams(c->conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        if (keep)
            *keep = r;
        else
            PQclear(r);
        return 0;
    }
    for (size_t i = 0; tolerated && tolerated[i]; i++)
        if (sqlstate_is(r, tolerated[i])) {
            PQclear(r);
            return 0;
        }
    char line[400];
    core_fail(c, "PostgreSQL at %s: %s: %s", c->where, what,
              first_line(PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r)
                                                    : PQerrorMessage(c->conn),
                         line, sizeof line));
    PQclear(r);
    return -1;
}

static int exec_simple(pg_core_t *c, const char *what, const char *sql)
{
    return exec_params(c, what, sql, 0, NULL, NULL, NULL);
}

static void make_gid(const pg_core_t *c, uint64_t checkpoint, char *out, size_t size)
{
    snprintf(out, size, "%s%" PRIu32 ":%" PRIu64 ":%" PRIu32, c->prefix, c->instance, checkpoint,
             c->epoch);
}

/* COMMIT/ROLLBACK PREPARED cannot take parameters: the gid is quoted here
 * (it is made of identifiers and digits, but quote anyway). */
static int finish_prepared(pg_core_t *c, const char *verb, const char *gid)
{
    char *lit = PQescapeLiteral(c->conn, gid, strlen(gid));
    if (!lit) {
        core_fail(c, "PostgreSQL at %s: out of memory", c->where);
        return -1;
    }
    char sql[GID_MAX * 2 + 160], what[GID_MAX + 128];
    snprintf(sql, sizeof sql, "%s PREPARED %s", verb, lit);
    snprintf(what, sizeof what, "%s PREPARED '%s'", verb, gid);
    PQfreemem(lit);
    /* 42704: already resolved, by another instance or an earlier attempt;
     * 55000: being resolved by another session right now (the final
     * commit's sweep below races the owner's own COMMIT PREPARED), which
     * decides as this one does (see resolve_stale). */
    static const char *const gone[] = {"42704", "55000", NULL};
    return exec_params(c, what, sql, 0, NULL, gone, NULL);
}

/* Parses "<instance>:<checkpoint>:<epoch>" after the prefix. */
static bool parse_gid_tail(const char *tail, uint32_t *instance, uint64_t *checkpoint, uint32_t *epoch)
{
    unsigned long long inst, cp, ep;
    int used = 0;
    if (sscanf(tail, "%llu:%llu:%llu%n", &inst, &cp, &ep, &used) != 3 || tail[used] != '\0' ||
        ep > UINT32_MAX || inst > UINT32_MAX)
        return false;
    *instance = (uint32_t)inst;
    *checkpoint = cp;
    *epoch = (uint32_t)ep;
    return true;
}

/* Resolves what other attempts and instances of this operator left
 * prepared:
 * - of an older attempt (any instance): committed when its checkpoint <=
 *   the restored one (that checkpoint completed), else rolled back (it is
 *   replayed);
 * - final: this attempt's final commit (COMPLETE of EDDY_FINAL_CHECKPOINT,
 *   sent only once every task is done, so every instance prepared all it
 *   wrote): another instance's transactions of this attempt are committed
 *   too. Its worker may have died before its own COMMIT PREPARED; the job
 *   then fails, no restore follows to resolve them, and they would hold
 *   their rows back (and their locks) for good. Every instance decides the
 *   same way for every gid, so racing sweeps never disagree. */
static int resolve_stale(pg_core_t *c, bool final)
{
    const char *params[] = {c->prefix};
    PGresult *r = NULL;
    if (exec_params(c, "listing pg_prepared_xacts",
                    "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() "
                    "AND left(gid, length($1)) = $1",
                    1, params, NULL, &r) < 0)
        return -1;
    int rc = 0;
    size_t plen = strlen(c->prefix);
    for (int i = 0; i < PQntuples(r) && rc == 0; i++) {
        const char *gid = PQgetvalue(r, i, 0);
        uint32_t inst, ep;
        uint64_t cp;
        if (!parse_gid_tail(gid + plen, &inst, &cp, &ep))
            continue;
        if (ep < c->epoch)
            rc = finish_prepared(c, cp <= c->restored ? "COMMIT" : "ROLLBACK", gid);
        else if (final && ep == c->epoch && inst != c->instance)
            rc = finish_prepared(c, "COMMIT", gid);
    }
    PQclear(r);
    return rc;
}

static void live_add(pg_core_t *c)
{
    pthread_mutex_lock(&live_mu);
    c->next_live = live_threads;
    live_threads = c;
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(pg_core_t *c)
{
    pthread_mutex_lock(&live_mu);
    for (pg_core_t **p = &live_threads; *p; p = &(*p)->next_live)
        if (*p == c) {
            *p = c->next_live;
            break;
        }
    pthread_cond_broadcast(&live_cv);
    pthread_mutex_unlock(&live_mu);
}

static bool older_closing(pg_core_t *c)
{
    for (pg_core_t *o = live_threads; o; o = o->next_live) {
        if (o == c || o->epoch >= c->epoch || strcmp(o->prefix, c->prefix) != 0)
            continue;
        pthread_mutex_lock(&o->mu);
        bool closing = o->closing;
        pthread_mutex_unlock(&o->mu);
        if (closing)
            return true;
    }
    return false;
}

/* Waits until no closing instance of an older attempt runs here. */
static int wait_older_attempts(pg_core_t *c)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += OLDER_ATTEMPT_WAIT_S;
    pthread_mutex_lock(&live_mu);
    int rc = 0;
    while (rc == 0 && older_closing(c))
        rc = pthread_cond_timedwait(&live_cv, &live_mu, &until);
    pthread_mutex_unlock(&live_mu);
    if (rc != 0) {
        core_fail(c, "PostgreSQL sink %s: an instance of an earlier attempt is still busy after %d s",
                  c->prefix, OLDER_ATTEMPT_WAIT_S);
        return -1;
    }
    return 0;
}

static int merge_staged(pg_core_t *c);

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Opens c->conn (a failure is recorded in the core). */
static int open_conn(pg_core_t *c)
{
    const eddy_pg_uri_t *u = &c->cfg.uri;
    char port[8];
    snprintf(port, sizeof port, "%d", u->port);
    const char *keys[] = {"host", "port", "dbname", "user", "connect_timeout",
                          "application_name", "options", "password", NULL};
    const char *vals[] = {u->host, port, u->db, u->user, CONNECT_TIMEOUT_S, "eddy",
                          SESSION_OPTIONS, u->password, NULL};
    if (!u->password[0])
        keys[7] = NULL;
    c->conn = PQconnectdbParams(keys, vals, 0);
    char line[400];
    if (!c->conn) {
        core_fail(c, "PostgreSQL at %s: cannot connect: out of memory", c->where);
        return -1;
    }
    if (PQstatus(c->conn) != CONNECTION_OK) {
        core_fail(c, "PostgreSQL at %s: cannot connect: %s", c->where,
                  first_line(PQerrorMessage(c->conn), line, sizeof line));
        return -1;
    }
    PQsetNoticeProcessor(c->conn, ignore_notice, NULL);
    return 0;
}

static int run_connect(pg_core_t *c)
{
    const eddy_pg_uri_t *u = &c->cfg.uri;
    if (open_conn(c) < 0)
        return -1;
    PGresult *r = NULL;
    if (exec_params(c, "SHOW max_prepared_transactions", "SHOW max_prepared_transactions", 0,
                    NULL, NULL, &r) < 0)
        return -1;
    bool none = PQntuples(r) != 1 || atoi(PQgetvalue(r, 0, 0)) <= 0;
    PQclear(r);
    if (none) {
        core_fail(c, "%s", EDDY_PG_NO_PREPARED_XACTS);
        return -1;
    }
    char sql[512];
    if (c->cfg.upsert)
        snprintf(sql, sizeof sql,
                 "CREATE TABLE IF NOT EXISTS \"%s\" (\"%s\" text PRIMARY KEY, \"%s\" bigint)",
                 u->table, c->cfg.key_column, c->cfg.value_column);
    else
        snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS \"%s\" (\"%s\" text NOT NULL)",
                 u->table, c->cfg.line_column);
    /* Instances create it concurrently: one wins, the others see it exist
     * (or collide on the catalog's unique index). */
    static const char *const raced[] = {"23505", "42P07", NULL};
    char what[128];
    snprintf(what, sizeof what, "creating table %s", u->table);
    if (exec_params(c, what, sql, 0, NULL, raced, NULL) < 0)
        return -1;
    /* No index: rows stay only until the next merge, and CREATE INDEX IF
     * NOT EXISTS would wait for the locks of prepared transactions. */
    if (c->cfg.upsert &&
        exec_params(c, "creating table " STAGE_TABLE,
                    "CREATE TABLE IF NOT EXISTS " STAGE_TABLE " (sink text NOT NULL, cp numeric "
                    "NOT NULL, seq bigint NOT NULL, k text NOT NULL, v bigint, del boolean NOT NULL)",
                    0, NULL, raced, NULL) < 0)
        return -1;
    if (wait_older_attempts(c) < 0 || resolve_stale(c, false) < 0)
        return -1;
    return merge_staged(c);
}

static int cmp_rows(const void *a, const void *b, void *arena)
{
    const pg_row_t *x = a, *y = b;
    int d = strcmp((const char *)arena + x->off, (const char *)arena + y->off);
    if (d)
        return d;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Upsert mode stages rows instead of writing the table in the prepared
 * transaction: a prepared transaction keeps its row locks until COMMIT
 * PREPARED, so the next checkpoint's upsert of the same key would wait for
 * a commit that needs that very checkpoint's ACK (always so after an
 * abandoned checkpoint, whose pre-commit is published only with a later
 * one). Plain inserts into the staging table never wait for each other;
 * merge_staged() moves committed rows into the table after each commit. */

/* Sends rows[0..n) as multi-row INSERTs: into the staging table (upsert
 * mode: sink, checkpoint, order, key, value, deleted) or the table itself
 * (append mode). */
static int insert_rows(pg_core_t *c, const pg_batch_t *b, uint64_t checkpoint, pg_row_t **rows,
                       size_t n)
{
    const eddy_pg_sink_config_t *cfg = &c->cfg;
    size_t per = cfg->upsert ? 4 : 1, shared = cfg->upsert ? 2 : 0;
    /* Per row at most ", ($1, $2::numeric, $N::bigint, $N, $N::bigint, $N::boolean)". */
    size_t sql_cap = 256 + ROWS_PER_STATEMENT * 96;
    char *sql = malloc(sql_cap);
    const char **params = malloc((shared + ROWS_PER_STATEMENT * per) * sizeof *params);
    char (*values)[2][24] = malloc(ROWS_PER_STATEMENT * sizeof *values);
    char cp[24];
    snprintf(cp, sizeof cp, "%" PRIu64, checkpoint);
    int rc = 0;
    if (!sql || !params || !values) {
        core_fail(c, "PostgreSQL sink: out of memory");
        rc = -1;
    }
    for (size_t at = 0; rc == 0 && at < n; at += ROWS_PER_STATEMENT) {
        size_t k = n - at < ROWS_PER_STATEMENT ? n - at : ROWS_PER_STATEMENT;
        int len = cfg->upsert
                      ? snprintf(sql, sql_cap, "INSERT INTO " STAGE_TABLE
                                 " (sink, cp, seq, k, v, del) VALUES ")
                      : snprintf(sql, sql_cap, "INSERT INTO \"%s\" (\"%s\") VALUES ",
                                 cfg->uri.table, cfg->line_column);
        if (cfg->upsert) {
            params[0] = c->prefix;
            params[1] = cp;
        }
        for (size_t i = 0; i < k; i++) {
            const pg_row_t *row = rows[at + i];
            size_t base = shared + i * per;
            params[base] = b->arena + row->off;
            if (cfg->upsert) {
                snprintf(values[i][0], sizeof values[i][0], "%" PRId64, row->value);
                snprintf(values[i][1], sizeof values[i][1], "%zu", at + i);
                params[base + 1] = values[i][0];
                params[base + 2] = values[i][1];
                params[base + 3] = row->kind == EDDY_DELETE ? "t" : "f";
                len += snprintf(sql + len, sql_cap - (size_t)len,
                                "%s($1, $2::numeric, $%zu::bigint, $%zu, $%zu::bigint, $%zu::boolean)",
                                i ? ", " : "", base + 3, base + 1, base + 2, base + 4);
            } else {
                len += snprintf(sql + len, sql_cap - (size_t)len, "%s($%zu)", i ? ", " : "",
                                base + 1);
            }
        }
        rc = exec_params(c, cfg->upsert ? "staging rows" : "insert", sql,
                         (int)(shared + k * per), params, NULL, NULL);
    }
    free(sql);
    free(params);
    free(values);
    return rc;
}

/* Moves this operator's committed staged rows into the table, the last
 * change of each key winning (checkpoint, then order). Only committed rows
 * are visible, and every committed one belongs to a completed checkpoint;
 * rows are deleted as they move, so running it twice changes nothing. */
static int merge_staged(pg_core_t *c)
{
    if (!c->cfg.upsert)
        return 0;
    const eddy_pg_sink_config_t *cfg = &c->cfg;
    char sql[1024];
    snprintf(sql, sizeof sql,
             "WITH moved AS (DELETE FROM " STAGE_TABLE " WHERE sink = $1 "
             "RETURNING cp, seq, k, v, del), "
             "last AS (SELECT DISTINCT ON (k) k, v, del FROM moved ORDER BY k, cp DESC, seq DESC), "
             "gone AS (DELETE FROM \"%s\" WHERE \"%s\" IN (SELECT k FROM last WHERE del)) "
             "INSERT INTO \"%s\" (\"%s\", \"%s\") SELECT k, v FROM last WHERE NOT del "
             "ON CONFLICT (\"%s\") DO UPDATE SET \"%s\" = EXCLUDED.\"%s\"",
             cfg->uri.table, cfg->key_column, cfg->uri.table, cfg->key_column, cfg->value_column,
             cfg->key_column, cfg->value_column, cfg->value_column);
    const char *params[] = {c->prefix};
    return exec_params(c, "merging staged rows", sql, 1, params, NULL, NULL);
}

/* The interval's rows, in the transaction the caller prepares. */
static int write_rows(pg_core_t *c, pg_batch_t *b, uint64_t checkpoint)
{
    pg_row_t **order = malloc(b->n * sizeof *order);
    if (!order) {
        core_fail(c, "PostgreSQL sink: out of memory");
        return -1;
    }
    size_t n = 0;
    if (!c->cfg.upsert) {
        for (size_t i = 0; i < b->n; i++)
            order[n++] = &b->rows[i];
        int rc = insert_rows(c, b, checkpoint, order, n);
        free(order);
        return rc;
    }
    /* Only each key's last change of the interval is staged. */
    qsort_r(b->rows, b->n, sizeof *b->rows, cmp_rows, b->arena);
    for (size_t i = 0; i < b->n; i++) {
        bool last = i + 1 == b->n || strcmp(b->arena + b->rows[i].off, b->arena + b->rows[i + 1].off);
        if (!last)
            continue;
        /* A -U says nothing new (the +U after it does): look before it. */
        size_t j = i;
        while (b->rows[j].kind == EDDY_UPDATE_BEFORE && j > 0 &&
               !strcmp(b->arena + b->rows[j - 1].off, b->arena + b->rows[i].off))
            j--;
        if (b->rows[j].kind != EDDY_UPDATE_BEFORE)
            order[n++] = &b->rows[j];
    }
    int rc = insert_rows(c, b, checkpoint, order, n);
    free(order);
    return rc;
}

static int run_prepare(pg_core_t *c, pg_job_t *j)
{
    if (j->batch.n == 0)
        return 0; /* nothing to publish: no transaction */
    if (exec_simple(c, "BEGIN", "BEGIN") < 0)
        return -1;
    if (write_rows(c, &j->batch, j->checkpoint) < 0) {
        PQclear(PQexec(c->conn, "ROLLBACK"));
        return -1;
    }
    char gid[GID_MAX + 64], sql[GID_MAX * 2 + 160], what[GID_MAX + 128];
    make_gid(c, j->checkpoint, gid, sizeof gid);
    char *lit = PQescapeLiteral(c->conn, gid, strlen(gid));
    if (!lit) {
        PQclear(PQexec(c->conn, "ROLLBACK"));
        core_fail(c, "PostgreSQL at %s: out of memory", c->where);
        return -1;
    }
    snprintf(sql, sizeof sql, "PREPARE TRANSACTION %s", lit);
    PQfreemem(lit);
    snprintf(what, sizeof what, "PREPARE TRANSACTION '%s'", gid);
    if (exec_simple(c, what, sql) < 0) {
        PQclear(PQexec(c->conn, "ROLLBACK"));
        return -1;
    }
    if (c->n_prepared == c->prepared_cap) {
        size_t cap = c->prepared_cap ? c->prepared_cap * 2 : 8;
        uint64_t *p = realloc(c->prepared, cap * sizeof *p);
        if (!p) {
            /* Left prepared: the next attempt's sweep resolves it. */
            core_fail(c, "PostgreSQL sink: out of memory");
            return -1;
        }
        c->prepared = p;
        c->prepared_cap = cap;
    }
    c->prepared[c->n_prepared++] = j->checkpoint;
    return 0;
}

static int run_commit(pg_core_t *c, uint64_t checkpoint)
{
    size_t kept = 0;
    int rc = 0;
    for (size_t i = 0; i < c->n_prepared; i++) {
        if (c->prepared[i] > checkpoint || rc < 0) {
            c->prepared[kept++] = c->prepared[i];
            continue;
        }
        char gid[GID_MAX + 64];
        make_gid(c, c->prepared[i], gid, sizeof gid);
        if (finish_prepared(c, "COMMIT", gid) < 0) {
            rc = -1;
            c->prepared[kept++] = c->prepared[i];
        }
    }
    c->n_prepared = kept;
    if (rc < 0 || resolve_stale(c, checkpoint == EDDY_FINAL_CHECKPOINT) < 0)
        return -1;
    return merge_staged(c);
}

/* The job ended for good (cancelled or failed): rolls back every
 * transaction this instance prepared and was not told to commit, and
 * resolves what older attempts left (as a commit does). Runs even after a
 * failure, on a new session when the old one is gone; what it cannot undo
 * is logged (a later run of the job resolves it at open). */
static void run_abort(pg_core_t *c)
{
    if (c->conn && PQstatus(c->conn) != CONNECTION_OK) {
        PQfinish(c->conn);
        c->conn = NULL;
    }
    if (!c->conn && open_conn(c) < 0) {
        pthread_mutex_lock(&c->mu);
        eddy_warn("PostgreSQL sink %s%" PRIu32 ": cannot roll back its %zu prepared "
                  "transaction(s) after the job ended: %s", c->prefix, c->instance,
                  c->n_prepared, c->error);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    if (PQtransactionStatus(c->conn) != PQTRANS_IDLE)
        PQclear(PQexec(c->conn, "ROLLBACK"));
    size_t rolled = 0, failed = 0;
    for (size_t i = 0; i < c->n_prepared; i++) {
        char gid[GID_MAX + 64];
        make_gid(c, c->prepared[i], gid, sizeof gid);
        if (finish_prepared(c, "ROLLBACK", gid) < 0)
            failed++;
        else
            rolled++;
    }
    c->n_prepared = 0;
    if (failed || resolve_stale(c, false) < 0) {
        pthread_mutex_lock(&c->mu);
        eddy_warn("PostgreSQL sink %s%" PRIu32 ": after the job ended: %s", c->prefix,
                  c->instance, c->error);
        pthread_mutex_unlock(&c->mu);
    }
    if (rolled)
        eddy_info("PostgreSQL sink %s%" PRIu32 ": rolled back %zu prepared transaction(s)",
                  c->prefix, c->instance, rolled);
}

static void *core_thread(void *arg)
{
    pg_core_t *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->closing)
            pthread_cond_wait(&c->cv, &c->mu);
        pg_job_t *j = c->head;
        if (!j)
            break; /* closing and nothing left */
        c->head = j->next;
        if (!c->head)
            c->tail = NULL;
        bool skip = (c->error[0] && j->kind != JOB_ABORT) ||
                    ((c->closing || c->aborting) && j->kind == JOB_PREPARE);
        pthread_mutex_unlock(&c->mu);
        if (!skip) {
            if (j->kind == JOB_CONNECT)
                run_connect(c);
            else if (j->kind == JOB_PREPARE)
                run_prepare(c, j);
            else if (j->kind == JOB_ABORT)
                run_abort(c);
            else
                run_commit(c, j->checkpoint);
        }
        pthread_mutex_lock(&c->mu);
        if (skip && !c->error[0])
            snprintf(c->error, sizeof c->error, "PostgreSQL sink closed before its prepare ran");
        c->done = j->seq;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        batch_free(&j->batch);
        free(j);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    if (c->conn) {
        PQfinish(c->conn);
        c->conn = NULL;
    }
    live_remove(c);
    core_unref(c);
    return NULL;
}

/* ---- the operator (worker loop) ------------------------------------------------ */

typedef struct pg_sink {
    pg_core_t *core;
    pg_batch_t batch; /* rows since the last prepare */
} pg_sink_t;

static pg_job_t *job_new(job_kind_t kind, uint64_t checkpoint)
{
    pg_job_t *j = calloc(1, sizeof *j);
    if (j) {
        j->kind = kind;
        j->checkpoint = checkpoint;
    }
    return j;
}

static void pg_close(void *self)
{
    pg_sink_t *s = self;
    if (!s)
        return;
    pthread_mutex_lock(&s->core->mu);
    s->core->closing = true;
    pthread_cond_broadcast(&s->core->cv);
    pthread_mutex_unlock(&s->core->mu);
    core_unref(s->core);
    batch_free(&s->batch);
    free(s);
}

/* The job ended for good: the rollback runs on the thread, behind the
 * commits of checkpoints already complete; the worker waits for it at most
 * ABORT_WAIT_S (an unreachable server must not hang it). */
static void pg_abort(void *self)
{
    pg_sink_t *s = self;
    pg_core_t *c = s->core;
    pg_job_t *j = job_new(JOB_ABORT, 0);
    if (!j) {
        eddy_warn("PostgreSQL sink %s%" PRIu32 ": out of memory; its prepared transactions "
                  "stay until the job runs again", c->prefix, c->instance);
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->aborting = true;
    pthread_mutex_unlock(&c->mu);
    uint64_t seq = core_submit(c, j);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ABORT_WAIT_S;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (rc == 0 && c->done < seq)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
    bool done = c->done >= seq;
    pthread_mutex_unlock(&c->mu);
    if (!done)
        eddy_warn("PostgreSQL sink %s%" PRIu32 ": its rollback did not finish within %d s; "
                  "it goes on in the background", c->prefix, c->instance, ABORT_WAIT_S);
}

static void *pg_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    const eddy_pg_sink_config_t *cfg = ctx->config;
    pg_sink_t *s = calloc(1, sizeof *s);
    pg_core_t *c = calloc(1, sizeof *c);
    pg_job_t *connect = job_new(JOB_CONNECT, 0);
    if (!s || !c || !connect) {
        free(s);
        free(c);
        free(connect);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    c->cfg = *cfg;
    snprintf(c->where, sizeof c->where, strchr(cfg->uri.host, ':') ? "[%s]:%d" : "%s:%d",
             cfg->uri.host, cfg->uri.port);
    int n = snprintf(c->prefix, sizeof c->prefix, "eddy:%s:%s:", ctx->job_id, ctx->stage_name);
    /* Room for "<instance>:<20 digits>:<10 digits>". */
    if (n < 0 || (size_t)n + 34 >= GID_MAX) {
        free(s);
        free(c);
        free(connect);
        eddy_err_set(err, "PostgreSQL sink: job and operator names are too long for a "
                          "transaction id (%d bytes)", GID_MAX);
        return NULL;
    }
    c->instance = ctx->instance;
    c->epoch = ctx->epoch;
    c->restored = ctx->restored_checkpoint;
    c->refs = 2; /* the operator and the thread */
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    s->core = c;
    live_add(c);
    pthread_t tid;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, core_thread, c);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        live_remove(c);
        c->refs = 1;
        core_unref(c);
        free(s);
        free(connect);
        eddy_err_set(err, "PostgreSQL sink: cannot start its thread: %s", strerror(rc));
        return NULL;
    }
    core_submit(c, connect);
    return s;
}

static int pg_process(void *self, const eddy_record_t *rec, eddy_collector_t *out, eddy_err_t *err)
{
    (void)out;
    pg_sink_t *s = self;
    if (atomic_load(&s->core->failed)) {
        pthread_mutex_lock(&s->core->mu);
        eddy_err_set(err, "%s", s->core->error);
        pthread_mutex_unlock(&s->core->mu);
        return -1;
    }
    /* An upsert needs only the new value: -U is always followed by its +U
     * (one process() call of the aggregate emits both). */
    if (s->core->cfg.upsert && rec->kind == EDDY_UPDATE_BEFORE)
        return 0;
    if ((s->core->cfg.upsert ? batch_upsert(&s->batch, rec) : batch_add(&s->batch, rec)) < 0)
        return eddy_err_set(err, "PostgreSQL sink: out of memory");
    return 0;
}

typedef struct pg_ticket {
    pg_core_t *core;
    uint64_t seq;
} pg_ticket_t;

static int ticket_wait(void *arg, eddy_err_t *err)
{
    pg_ticket_t *t = arg;
    return core_wait(t->core, t->seq, err);
}

static void ticket_release(void *arg)
{
    pg_ticket_t *t = arg;
    core_unref(t->core);
    free(t);
}

/* Makes the ACK (through sync) wait for job seq; with no list, waits here. */
static int wait_for(pg_sink_t *s, uint64_t seq, eddy_sync_list_t *sync, eddy_err_t *err)
{
    if (!sync)
        return core_wait(s->core, seq, err);
    pg_ticket_t *t = malloc(sizeof *t);
    if (!t)
        return eddy_err_set(err, "out of memory");
    pthread_mutex_lock(&s->core->mu);
    s->core->refs++;
    pthread_mutex_unlock(&s->core->mu);
    *t = (pg_ticket_t){s->core, seq};
    return eddy_sync_list_add_call(sync, ticket_wait, t, ticket_release, err);
}

static int pg_prepare(void *self, uint64_t checkpoint, eddy_sync_list_t *sync, eddy_err_t *err)
{
    pg_sink_t *s = self;
    pg_job_t *j = job_new(JOB_PREPARE, checkpoint);
    if (!j)
        return eddy_err_set(err, "out of memory");
    j->batch = s->batch;
    memset(&s->batch, 0, sizeof s->batch);
    return wait_for(s, core_submit(s->core, j), sync, err);
}

static void pg_commit(void *self, uint64_t checkpoint, eddy_sync_list_t *sync)
{
    pg_sink_t *s = self;
    pg_job_t *j = job_new(JOB_COMMIT, checkpoint);
    if (!j) {
        core_fail(s->core, "PostgreSQL sink: out of memory for the commit of checkpoint %" PRIu64,
                  checkpoint);
        return;
    }
    uint64_t seq = core_submit(s->core, j);
    /* The job's final ACK (after which it is declared finished) follows the
     * last COMMIT PREPARED; other commits need not hold the writer thread. */
    eddy_err_t err = {{0}};
    if (checkpoint == EDDY_FINAL_CHECKPOINT && wait_for(s, seq, sync, &err) < 0 && !sync)
        eddy_error("%s", err.msg);
}

const eddy_operator_ops_t eddy_pg_sink_ops = {
    .kind = "postgres_sink",
    .open = pg_open,
    .process = pg_process,
    .close = pg_close,
    .prepare = pg_prepare,
    .commit = pg_commit,
    .abort = pg_abort,
};

/* ---- the plan kind ------------------------------------------------------------- */

static int ident_config(const eddy_config_t *cfg, const char *key, const char *dflt, char *dst,
                        eddy_err_t *err)
{
    const char *v = eddy_config_str(cfg, key, dflt);
    if (!eddy_pg_ident_ok(v))
        return eddy_err_set(err, "'%s' is '%s'; expected an identifier ([A-Za-z_][A-Za-z0-9_$]*)",
                            key, v);
    snprintf(dst, EDDY_PG_IDENT_MAX, "%s", v);
    return 0;
}

static void *pg_configure(const eddy_config_t *cfg, const void *arg, eddy_err_t *err)
{
    (void)arg;
    eddy_pg_sink_config_t *c = calloc(1, sizeof *c);
    if (!c) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    const char *mode = eddy_config_str(cfg, "mode", "upsert");
    if (strcmp(mode, "upsert") != 0 && strcmp(mode, "append") != 0) {
        eddy_err_set(err, "'mode' is '%s'; expected upsert or append", mode);
        goto fail;
    }
    c->upsert = !strcmp(mode, "upsert");
    if (eddy_pg_uri_parse(eddy_config_str(cfg, "uri", ""), &c->uri, err) < 0 ||
        ident_config(cfg, "key_column", "key", c->key_column, err) < 0 ||
        ident_config(cfg, "value_column", "value", c->value_column, err) < 0 ||
        ident_config(cfg, "line_column", "line", c->line_column, err) < 0)
        goto fail;
    if (c->upsert && !strcmp(c->key_column, c->value_column)) {
        eddy_err_set(err, "'key_column' and 'value_column' are both '%s'", c->key_column);
        goto fail;
    }
    return c;
fail:
    free(c);
    return NULL;
}

static const eddy_operator_kind_t pg_kind = {
    .name = "postgres",
    .ops = &eddy_pg_sink_ops,
    .configure = pg_configure,
    .release = free,
};

int eddy_pg_sink_register(eddy_registry_t *r, eddy_err_t *err)
{
    return eddy_register_operator(r, &pg_kind, err);
}
