/* operators.c - built-in operators (see operators.h).
 *
 * These are the only operator implementations in the runtime; jobs compose
 * them with their own functions, so the hot paths (the aggregate's upsert,
 * the sinks' formatting) live here once. */
#include "operators/operators.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "net/partial.h"
#include "state/keygroup.h"

/* ---- flat_map / filter -------------------------------------------------- */

typedef struct fn_op {
    const void *config;
} fn_op_t;

static void *fn_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    fn_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->config = ctx->config;
    return op;
}

static void fn_close(void *self) { free(self); }

static int flat_map_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                            eddy_err_t *err)
{
    (void)err;
    const eddy_flat_map_config_t *cfg = ((fn_op_t *)self)->config;
    cfg->fn(rec, out, cfg->arg);
    return 0;
}

static int filter_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                          eddy_err_t *err)
{
    (void)err;
    const eddy_filter_config_t *cfg = ((fn_op_t *)self)->config;
    if (cfg->keep(rec, cfg->arg))
        eddy_emit(out, rec);
    return 0;
}

const eddy_operator_ops_t eddy_flat_map_ops = {
    .kind = "flat_map", .open = fn_open, .process = flat_map_process, .close = fn_close};
const eddy_operator_ops_t eddy_filter_ops = {
    .kind = "filter", .open = fn_open, .process = filter_process, .close = fn_close};

/* ---- late records (side output) ----------------------------------------- */

static void *late_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx;
    (void)err;
    static int token;
    return &token;
}

static int late_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                        eddy_err_t *err)
{
    (void)self;
    (void)err;
    if (rec->kind != EDDY_LATE)
        return 0;
    eddy_record_t r = *rec;
    r.kind = EDDY_INSERT;
    eddy_emit(out, &r);
    return 0;
}

const eddy_operator_ops_t eddy_late_records_ops = {
    .kind = "late_records", .open = late_open, .process = late_process, .sees_late = true};

/* ---- keyed aggregate ---------------------------------------------------- */

typedef struct aggregate_op {
    const eddy_aggregate_config_t *cfg;
    eddy_keyed_state_t *state;
    eddy_key_fn key_fn;
    const eddy_op_context_t *ctx_copy;
    eddy_kg_range_t *range;
    uint32_t max_parallelism;
    eddy_op_context_t ctx;
    int64_t cost_debt_ns;   /* simulated cost owed (negative: overslept) */
} aggregate_op_t;

static void *aggregate_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    if (!ctx->keyed_state || !ctx->key_fn) {
        eddy_err_set(err, "aggregate needs a keyed stage (key_by before it)");
        return NULL;
    }
    aggregate_op_t *op = calloc(1, sizeof *op);
    if (!op) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->cfg = ctx->config;
    op->state = ctx->keyed_state;
    op->key_fn = ctx->key_fn;
    op->max_parallelism = ctx->max_parallelism;
    op->ctx = *ctx;
    return op;
}

static void burn_us(double us)
{
    uint64_t until = eddy_mono_ns() + (uint64_t)(us * 1000.0);
    while (eddy_mono_ns() < until) {
    }
}

static int aggregate_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                             eddy_err_t *err)
{
    aggregate_op_t *op = self;
    const eddy_aggregate_config_t *cfg = op->cfg;
    const char *key, *payload;
    uint32_t klen, plen;
    if (rec->kind != EDDY_PARTIAL)
        klen = op->key_fn(rec, &key);
    else if (!cfg->merge || !eddy_partial_decode(rec, &key, &klen, &payload, &plen) || plen)
        return eddy_err_set(err, "aggregate: a malformed partial record (%u bytes)", rec->len);
    uint64_t hash = eddy_key_hash(key, klen);
    uint32_t kg = eddy_key_group_of_hash(hash, op->max_parallelism);
    bool created;
    void *acc = eddy_keyed_state_upsert(op->state, kg, hash, key, klen, &created);
    if (!acc)
        return eddy_err_set(err, "out of memory in keyed state");
    if (cfg->cost_us > 0 && cfg->cost_sleep) {
        /* Sleep in slices of at least 1 ms and carry the overshoot over, so a
         * loaded machine's late wake-ups do not lower the simulated rate. */
        op->cost_debt_ns += (int64_t)(cfg->cost_us * 1000.0);
        if (op->cost_debt_ns >= 1000000) {
            uint64_t t0 = eddy_mono_ns();
            struct timespec ts = {(time_t)(op->cost_debt_ns / 1000000000),
                                  (long)(op->cost_debt_ns % 1000000000)};
            nanosleep(&ts, NULL);
            op->cost_debt_ns -= (int64_t)(eddy_mono_ns() - t0);
        }
    } else if (cfg->cost_us > 0) {
        burn_us(cfg->cost_us);
    }
    if (created && cfg->init)
        cfg->init(acc);
    if (rec->kind == EDDY_PARTIAL) {
        /* A combiner's partial accumulator (only sent where exact: FINAL). */
        cfg->merge(acc, &rec->value);
        return 0;
    }
    if (cfg->emit == EDDY_EMIT_CHANGELOG && !created) {
        eddy_record_t before = {key, klen, EDDY_UPDATE_BEFORE, cfg->result(acc), rec->timestamp};
        eddy_emit(out, &before);
    }
    cfg->add(acc, rec);
    if (cfg->emit == EDDY_EMIT_CHANGELOG) {
        eddy_record_t after = {key, klen, created ? EDDY_INSERT : EDDY_UPDATE_AFTER,
                               cfg->result(acc), rec->timestamp};
        eddy_emit(out, &after);
    }
    return 0;
}

typedef struct emit_ctx {
    const eddy_aggregate_config_t *cfg;
    eddy_collector_t *out;
} emit_ctx_t;

static void emit_final(void *ctx, const void *key, uint32_t key_len, void *value)
{
    emit_ctx_t *e = ctx;
    eddy_record_t rec = {key, key_len, EDDY_INSERT, e->cfg->result(value), 0};
    eddy_emit(e->out, &rec);
}

static int aggregate_finish(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    aggregate_op_t *op = self;
    if (op->cfg->emit != EDDY_EMIT_FINAL)
        return 0;
    emit_ctx_t e = {op->cfg, out};
    for (uint32_t kg = 0; kg < op->max_parallelism; kg++)
        if (eddy_keyed_state_foreach(op->state, kg, emit_final, &e) < 0)
            return eddy_err_set(err, "aggregate: out of memory in keyed state");
    return 0;
}

static size_t aggregate_value_size(const void *config)
{
    return ((const eddy_aggregate_config_t *)config)->acc_size;
}

/* Exact where the accumulator travels as a record's int64 value, merge
 * exists, only final results are emitted (a changelog would show fewer
 * intermediate updates) and no per-record cost is simulated. */
static const eddy_operator_ops_t *aggregate_combiner(const void *config)
{
    const eddy_aggregate_config_t *cfg = config;
    if (!cfg->combine || !cfg->merge || cfg->acc_size != sizeof(int64_t) ||
        cfg->emit != EDDY_EMIT_FINAL || cfg->cost_us > 0)
        return NULL;
    return &eddy_combiner_ops;
}

const eddy_operator_ops_t eddy_aggregate_ops = {
    .kind = "aggregate", .state_value_size = aggregate_value_size, .open = aggregate_open,
    .process = aggregate_process, .finish = aggregate_finish, .close = fn_close,
    .combiner = aggregate_combiner};

/* ---- local pre-aggregation (combiner) ------------------------------------ */

/* Keys held before the combiner flushes on its own: bounds its memory and
 * keeps partials flowing on a stream with many distinct keys. */
#define COMBINER_MAX_KEYS 65536u

typedef struct combiner_op {
    const eddy_aggregate_config_t *cfg;
    eddy_key_fn key_fn;
    eddy_keyed_state_t *acc; /* one "key group": everything since the last flush */
    char *frame;             /* a partial's data (net/partial.h) */
    size_t frame_cap;
    eddy_collector_t *out;   /* while flushing */
    bool oom;
} combiner_op_t;

static void combiner_close(void *self)
{
    combiner_op_t *op = self;
    eddy_keyed_state_destroy(&op->acc);
    free(op->frame);
    free(op);
}

static void *combiner_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    if (!ctx->key_fn) {
        eddy_err_set(err, "a combiner needs the keyed step's key selector");
        return NULL;
    }
    combiner_op_t *op = calloc(1, sizeof *op);
    if (op)
        op->acc = eddy_keyed_state_new(1, sizeof(int64_t));
    if (!op || !op->acc) {
        if (op)
            combiner_close(op);
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    op->cfg = ctx->config;
    op->key_fn = ctx->key_fn;
    return op;
}

static void emit_partial(void *ctx, const void *key, uint32_t key_len, void *value)
{
    combiner_op_t *op = ctx;
    size_t need = eddy_partial_size(key_len, 0);
    if (need > op->frame_cap) {
        char *p = realloc(op->frame, need);
        if (!p) {
            op->oom = true;
            return;
        }
        op->frame = p;
        op->frame_cap = need;
    }
    uint32_t len = eddy_partial_encode(op->frame, key, key_len, NULL, 0);
    eddy_record_t rec = {op->frame, len, EDDY_PARTIAL, *(int64_t *)value, 0};
    eddy_emit(op->out, &rec);
}

static int combiner_flush(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    combiner_op_t *op = self;
    op->out = out;
    eddy_keyed_state_foreach(op->acc, 0, emit_partial, op);
    eddy_keyed_state_drop_group(op->acc, 0);
    if (op->oom)
        return eddy_err_set(err, "out of memory in the combiner");
    return 0;
}

static int combiner_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                            eddy_err_t *err)
{
    combiner_op_t *op = self;
    if (rec->kind != EDDY_INSERT && rec->kind != EDDY_PARTIAL) {
        eddy_emit(out, rec); /* retractions and late records pass as they are */
        return 0;
    }
    const char *key, *payload;
    uint32_t klen, plen;
    if (rec->kind != EDDY_PARTIAL)
        klen = op->key_fn(rec, &key);
    else if (!eddy_partial_decode(rec, &key, &klen, &payload, &plen) || plen)
        return eddy_err_set(err, "combiner: a malformed partial record (%u bytes)", rec->len);
    bool created;
    int64_t *acc = eddy_keyed_state_upsert(op->acc, 0, eddy_key_hash(key, klen), key, klen, &created);
    if (!acc)
        return eddy_err_set(err, "out of memory in the combiner");
    if (created && op->cfg->init)
        op->cfg->init(acc);
    if (rec->kind == EDDY_PARTIAL)
        op->cfg->merge(acc, &rec->value);
    else
        op->cfg->add(acc, rec);
    if (created && eddy_keyed_state_keys(op->acc) >= COMBINER_MAX_KEYS)
        return combiner_flush(op, out, err);
    return 0;
}

static int combiner_watermark(void *self, int64_t wm, eddy_collector_t *out, eddy_err_t *err)
{
    (void)wm;
    return combiner_flush(self, out, err);
}

const eddy_operator_ops_t eddy_combiner_ops = {
    .kind = "combiner", .open = combiner_open, .process = combiner_process,
    .finish = combiner_flush, .close = combiner_close, .watermark = combiner_watermark,
    .flush = combiner_flush};

static void sum_add(void *acc, const eddy_record_t *rec) { *(int64_t *)acc += rec->value; }
static void sum_merge(void *acc, const void *other) { *(int64_t *)acc += *(const int64_t *)other; }
static int64_t sum_result(const void *acc) { return *(const int64_t *)acc; }

void eddy_aggregate_sum_config(eddy_aggregate_config_t *cfg, eddy_emit_mode_t emit)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->acc_size = sizeof(int64_t);
    cfg->add = sum_add;
    cfg->merge = sum_merge;
    cfg->result = sum_result;
    cfg->emit = emit;
    cfg->combine = true;
}

/* ---- sinks -------------------------------------------------------------- */

size_t eddy_format_changelog(const eddy_record_t *rec, char *buf, size_t size)
{
    static const char *kinds[] = {"+I", "-U", "+U", "-D"};
    int n = snprintf(buf, size, "%s[%.*s, %" PRId64 "]\n", rec->kind <= EDDY_DELETE ? kinds[rec->kind] : "?L", (int)rec->len,
                     rec->data, rec->value);
    if (n < 0)
        return 0;
    return (size_t)n < size ? (size_t)n : size - 1;
}

static int changelog_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                             eddy_err_t *err)
{
    (void)self;
    (void)out;
    char small[512];
    size_t need = rec->len + 48;
    char *buf = need <= sizeof small ? small : malloc(need);
    if (!buf)
        return eddy_err_set(err, "out of memory");
    size_t n = eddy_format_changelog(rec, buf, need);
    size_t w = fwrite(buf, 1, n, stdout);
    if (buf != small)
        free(buf);
    if (w != n)
        return eddy_err_set(err, "writing to stdout failed");
    return 0;
}

static int changelog_finish(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    (void)self;
    (void)out;
    if (fflush(stdout) != 0)
        return eddy_err_set(err, "writing to stdout failed");
    return 0;
}

/* Before every barrier: what a checkpoint covers is on stdout before it
 * completes, so a killed worker loses no printed row a restore will not
 * replay, and an unbounded job's rows show up at least once a checkpoint. */
static int changelog_flush(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    return changelog_finish(self, out, err);
}

static void *changelog_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    (void)ctx;
    (void)err;
    static int token;
    return &token;
}

static void noop_close(void *self) { (void)self; }

const eddy_operator_ops_t eddy_changelog_sink_ops = {
    .kind = "changelog_sink", .open = changelog_open, .process = changelog_process,
    .finish = changelog_finish, .close = noop_close, .flush = changelog_flush};

static int print_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                         eddy_err_t *err)
{
    (void)self;
    (void)out;
    if (rec->kind == EDDY_UPDATE_BEFORE || rec->kind == EDDY_DELETE)
        return 0;
    if (fwrite(rec->data, 1, rec->len, stdout) != rec->len || putchar('\n') == EOF)
        return eddy_err_set(err, "writing to stdout failed");
    return 0;
}

const eddy_operator_ops_t eddy_print_sink_ops = {
    .kind = "print_sink", .open = changelog_open, .process = print_process,
    .finish = changelog_finish, .close = noop_close, .flush = changelog_flush};

typedef struct table_row {
    char *key;
    uint32_t len;
    int64_t value;
    size_t seq; /* arrival order: the later update of a key wins */
} table_row_t;

typedef struct table_sink {
    const eddy_table_file_config_t *cfg;
    table_row_t *rows;
    size_t count, cap;
} table_sink_t;

static void *table_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    table_sink_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    s->cfg = ctx->config;
    return s;
}

static int table_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                         eddy_err_t *err)
{
    (void)out;
    table_sink_t *s = self;
    if (rec->kind == EDDY_UPDATE_BEFORE || rec->kind == EDDY_DELETE)
        return 0; /* a final table keeps the latest value per key */
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        table_row_t *rows = realloc(s->rows, cap * sizeof *rows);
        if (!rows)
            return eddy_err_set(err, "out of memory");
        s->rows = rows;
        s->cap = cap;
    }
    table_row_t *row = &s->rows[s->count];
    row->key = malloc(rec->len ? rec->len : 1);
    if (!row->key)
        return eddy_err_set(err, "out of memory");
    memcpy(row->key, rec->data, rec->len);
    row->len = rec->len;
    row->value = rec->value;
    row->seq = s->count;
    s->count++;
    return 0;
}

static int row_compare(const void *a, const void *b)
{
    const table_row_t *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return (x->len > y->len) - (x->len < y->len);
}

static int row_compare_seq(const void *a, const void *b)
{
    int c = row_compare(a, b);
    if (c)
        return c;
    const table_row_t *x = a, *y = b;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int table_finish(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    (void)out;
    table_sink_t *s = self;
    if (s->count) /* an empty table has no rows array (qsort wants one) */
        qsort(s->rows, s->count, sizeof *s->rows, row_compare_seq);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", s->cfg->path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return eddy_err_set(err, "cannot write %s: %m", tmp);
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    for (size_t i = 0; i < s->count; i++) {
        /* Several updates of one key can arrive (changelog input): keep the last. */
        if (i + 1 < s->count && row_compare(&s->rows[i], &s->rows[i + 1]) == 0)
            continue;
        if (s->cfg->lines) {
            for (int64_t k = 0; k < s->rows[i].value; k++) {
                fwrite(s->rows[i].key, 1, s->rows[i].len, f);
                fputc('\n', f);
            }
            continue;
        }
        fwrite(s->rows[i].key, 1, s->rows[i].len, f);
        fprintf(f, "\t%" PRId64 "\n", s->rows[i].value);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        unlink(tmp);
        return eddy_err_set(err, "cannot write %s: %m", tmp);
    }
    fclose(f);
    if (rename(tmp, s->cfg->path) != 0) {
        unlink(tmp);
        return eddy_err_set(err, "cannot rename %s to %s: %m", tmp, s->cfg->path);
    }
    return 0;
}

static void table_close(void *self)
{
    table_sink_t *s = self;
    for (size_t i = 0; i < s->count; i++)
        free(s->rows[i].key);
    free(s->rows);
    free(s);
}

const eddy_operator_ops_t eddy_table_file_sink_ops = {
    .kind = "table_file_sink", .open = table_open, .process = table_process,
    .finish = table_finish, .close = table_close};

/* ---- part files (two-phase commit) --------------------------------------- */

#define PART_PATH_MAX 4400

typedef struct prepared_id {
    uint64_t checkpoint;
    struct prepared_id *next;
} prepared_id_t;

typedef struct part_sink {
    const eddy_part_file_config_t *cfg;
    uint32_t stage, instance;
    char pending_dir[4200];
    char inprogress[PART_PATH_MAX];
    FILE *f;                  /* the in-progress file, opened at the first record */
    char *buf;                /* its stdio buffer */
    prepared_id_t *prepared;  /* prepared and not yet published, ascending */
} part_sink_t;

#define PART_BUF_SIZE (256u * 1024u)

static void pending_path(const part_sink_t *s, uint64_t checkpoint, char *out, size_t size)
{
    snprintf(out, size, "%s/part-%u-%u-%020" PRIu64, s->pending_dir, s->stage, s->instance,
             checkpoint);
}

static void committed_path(const part_sink_t *s, uint64_t checkpoint, char *out, size_t size)
{
    snprintf(out, size, "%s/part-%u-%020" PRIu64 ".txt", s->cfg->directory, s->instance,
             checkpoint);
}

/* Publishes one prepared file. A file already gone whose target exists was
 * published before (a COMPLETE seen twice, or by open after a restore). */
static int publish(const part_sink_t *s, uint64_t checkpoint)
{
    char from[PART_PATH_MAX], to[PART_PATH_MAX];
    pending_path(s, checkpoint, from, sizeof from);
    committed_path(s, checkpoint, to, sizeof to);
    if (rename(from, to) == 0)
        return 0;
    if (errno == ENOENT && access(to, F_OK) == 0)
        return 0;
    eddy_error("part file sink: cannot publish %s as %s: %s", from, to, strerror(errno));
    return -1;
}

/* An in-progress file of this stage and instance from any attempt (the
 * form without an attempt is what earlier versions wrote). */
static bool is_own_inprogress(const part_sink_t *s, const char *name)
{
    char prefix[64];
    int plen = snprintf(prefix, sizeof prefix, ".inprogress-%u-%u", s->stage, s->instance);
    return !strncmp(name, prefix, (size_t)plen) && (name[plen] == '\0' || name[plen] == '-');
}

/* Publishes or discards what an earlier run of this instance prepared, and
 * drops the in-progress files of earlier attempts: their records were not
 * prepared, so the restore replays them. */
static int part_recover(part_sink_t *s, uint64_t restored, eddy_err_t *err)
{
    DIR *d = opendir(s->pending_dir);
    if (!d)
        return eddy_err_set(err, "cannot read %s: %m", s->pending_dir);
    char prefix[64];
    int plen = snprintf(prefix, sizeof prefix, "part-%u-%u-", s->stage, s->instance);
    int rc = 0;
    bool published = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (is_own_inprogress(s, e->d_name)) {
            char path[sizeof s->pending_dir + 1 + sizeof e->d_name];
            snprintf(path, sizeof path, "%s/%s", s->pending_dir, e->d_name);
            if (unlink(path) < 0 && errno != ENOENT)
                rc = eddy_err_set(err, "cannot remove %s: %m", path);
            continue;
        }
        const char *id = e->d_name + plen;
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0 || strlen(id) != 20 ||
            strspn(id, "0123456789") != 20)
            continue;
        uint64_t checkpoint = strtoull(id, NULL, 10);
        if (checkpoint <= restored) {
            /* that checkpoint completed; its COMPLETE may not have arrived */
            eddy_info("part file sink %u[%u]: publishing checkpoint %" PRIu64
                      " prepared before the restore from %" PRIu64, s->stage, s->instance,
                      checkpoint, restored);
            if (publish(s, checkpoint) < 0)
                rc = eddy_err_set(err, "cannot publish prepared part file of checkpoint %" PRIu64,
                                  checkpoint);
            published = true;
        } else {
            /* written after the checkpoint we restore from: it will be replayed */
            char path[PART_PATH_MAX];
            pending_path(s, checkpoint, path, sizeof path);
            eddy_info("part file sink %u[%u]: discarding checkpoint %" PRIu64
                      " prepared after the restored checkpoint %" PRIu64, s->stage, s->instance,
                      checkpoint, restored);
            if (unlink(path) < 0 && errno != ENOENT)
                rc = eddy_err_set(err, "cannot remove %s: %m", path);
        }
    }
    closedir(d);
    if (published && eddy_fsync_dir(s->cfg->directory, err) < 0)
        rc = -1;
    if (eddy_fsync_dir(s->pending_dir, err) < 0)
        rc = -1;
    return rc;
}

static void part_close(void *self);

static void *part_open(const eddy_op_context_t *ctx, eddy_err_t *err)
{
    const eddy_part_file_config_t *cfg = ctx->config;
    if (!cfg || !cfg->directory[0]) {
        eddy_err_set(err, "part file sink needs a directory");
        return NULL;
    }
    part_sink_t *s = calloc(1, sizeof *s);
    if (!s) {
        eddy_err_set(err, "out of memory");
        return NULL;
    }
    s->cfg = cfg;
    s->stage = ctx->stage;
    s->instance = ctx->instance;
    snprintf(s->pending_dir, sizeof s->pending_dir, "%s/.pending", cfg->directory);
    /* The attempt in the name: an instance of an earlier attempt that still
     * runs (its worker was declared dead but was not) writes and, at close,
     * removes its own file, never this one. */
    snprintf(s->inprogress, sizeof s->inprogress, "%s/.inprogress-%u-%u-%u", s->pending_dir,
             s->stage, s->instance, ctx->epoch);
    if (eddy_mkdir_p(s->pending_dir, err) < 0 || part_recover(s, ctx->restored_checkpoint, err) < 0) {
        part_close(s);
        return NULL;
    }
    return s;
}

static int part_process(void *self, const eddy_record_t *rec, eddy_collector_t *out,
                        eddy_err_t *err)
{
    (void)out;
    part_sink_t *s = self;
    if (!s->f) {
        s->f = fopen(s->inprogress, "w");
        if (!s->f)
            return eddy_err_set(err, "cannot write %s: %m", s->inprogress);
        if (!s->buf)
            s->buf = malloc(PART_BUF_SIZE);
        if (s->buf)
            setvbuf(s->f, s->buf, _IOFBF, PART_BUF_SIZE);
    }
    if (fwrite(rec->data, 1, rec->len, s->f) != rec->len || putc('\n', s->f) == EOF)
        return eddy_err_set(err, "cannot write %s: %m", s->inprogress);
    return 0;
}

/* Runs what the sink would have handed to the runtime when it got no list. */
static int sync_now(eddy_sync_list_t *own, eddy_err_t *err)
{
    int rc = eddy_sync_list_run(own, err);
    eddy_sync_list_destroy(&own);
    return rc;
}

/* Pre-commit: flush and rename on the loop (cheap); the file and the rename
 * become durable through the sync list before the checkpoint's ACK. */
static int part_prepare(void *self, uint64_t checkpoint, eddy_sync_list_t *sync, eddy_err_t *err)
{
    part_sink_t *s = self;
    if (!s->f)
        return 0; /* nothing since the last prepare */
    eddy_sync_list_t *own = NULL;
    if (!sync && !(sync = own = eddy_sync_list_new()))
        return eddy_err_set(err, "out of memory");
    int ok = fflush(s->f) == 0;
    int fd = ok ? dup(fileno(s->f)) : -1;
    ok = (fclose(s->f) == 0) && ok && fd >= 0;
    s->f = NULL;
    if (!ok) {
        if (fd >= 0)
            close(fd);
        unlink(s->inprogress);
        eddy_sync_list_destroy(&own);
        return eddy_err_set(err, "cannot write %s: %m", s->inprogress);
    }
    char to[PART_PATH_MAX];
    pending_path(s, checkpoint, to, sizeof to);
    prepared_id_t *p = malloc(sizeof *p);
    if (!p || rename(s->inprogress, to) < 0) {
        int rc = p ? eddy_err_set(err, "cannot rename %s to %s: %m", s->inprogress, to)
                   : eddy_err_set(err, "out of memory");
        free(p);
        close(fd);
        eddy_sync_list_destroy(&own);
        return rc;
    }
    /* Ids only grow within one run of an instance: append. */
    p->checkpoint = checkpoint;
    p->next = NULL;
    prepared_id_t **tail = &s->prepared;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    if (eddy_sync_list_add_file(sync, fd, to, err) < 0 ||
        eddy_sync_list_add_dir(sync, s->pending_dir, err) < 0) {
        eddy_sync_list_destroy(&own);
        return -1;
    }
    return own ? sync_now(own, err) : 0;
}

static void part_commit(void *self, uint64_t checkpoint, eddy_sync_list_t *sync)
{
    part_sink_t *s = self;
    bool any = false;
    while (s->prepared && s->prepared->checkpoint <= checkpoint) {
        /* On failure the file stays pending; open() after a restore retries it. */
        if (publish(s, s->prepared->checkpoint) < 0)
            break;
        prepared_id_t *p = s->prepared;
        s->prepared = p->next;
        free(p);
        any = true;
    }
    if (!any)
        return;
    /* A published name lost in a crash is published again by open() after
     * the restore (its file is still pending), so the directory's fsync may
     * follow later; the job's final ACK waits for it (see worker.c). */
    eddy_err_t err = {{0}};
    int rc = sync ? eddy_sync_list_add_dir(sync, s->cfg->directory, &err)
                  : eddy_fsync_dir(s->cfg->directory, &err);
    if (rc < 0)
        eddy_error("part file sink: %s", err.msg);
}

static void part_close(void *self)
{
    part_sink_t *s = self;
    if (s->f) {
        fclose(s->f);
        unlink(s->inprogress); /* not prepared: a restore replays it */
    }
    free(s->buf);
    while (s->prepared) {
        prepared_id_t *p = s->prepared;
        s->prepared = p->next;
        free(p);
    }
    free(s);
}

const eddy_operator_ops_t eddy_part_file_sink_ops = {
    .kind = "part_file_sink", .open = part_open, .process = part_process, .close = part_close,
    .prepare = part_prepare, .commit = part_commit};
