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
#include "operators/etl_record.h"
#include "operators/combiner_table.h"
#include "operators/line_merge.h"
#include "state/keyed_state.h"
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
    eddy_combiner_table_t *acc; /* everything since the last flush */
    char *frame;             /* a partial's data (net/partial.h) */
    size_t frame_cap;
    eddy_collector_t *out;   /* while flushing */
    bool oom;
} combiner_op_t;

static void combiner_close(void *self)
{
    combiner_op_t *op = self;
    eddy_combiner_table_destroy(&op->acc);
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
        op->acc = eddy_combiner_table_new();
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

static void emit_partial(void *ctx, const void *key, uint32_t key_len, int64_t value)
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
    eddy_record_t rec = {op->frame, len, EDDY_PARTIAL, value, 0};
    eddy_emit(op->out, &rec);
}

static int combiner_flush(void *self, eddy_collector_t *out, eddy_err_t *err)
{
    combiner_op_t *op = self;
    op->out = out;
    eddy_combiner_table_foreach(op->acc, emit_partial, op);
    eddy_combiner_table_clear(op->acc);
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
    int64_t *acc = eddy_combiner_table_upsert(op->acc, eddy_key_hash(key, klen), key, klen, &created);
    if (!acc)
        return eddy_err_set(err, "out of memory in the combiner");
    if (created && op->cfg->init)
        op->cfg->init(acc);
    if (rec->kind == EDDY_PARTIAL)
        op->cfg->merge(acc, &rec->value);
    else
        op->cfg->add(acc, rec);
    if (created && eddy_combiner_table_count(op->acc) >= COMBINER_MAX_KEYS)
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

/* The file's rows and where they go: handed to the writer thread. */
typedef struct table_write {
    char path[sizeof ((eddy_table_file_config_t *)0)->path];
    bool lines;
    table_row_t *rows;
    size_t count;
} table_write_t;

static void table_rows_free(table_row_t *rows, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(rows[i].key);
    free(rows);
}

static void table_write_release(void *arg)
{
    table_write_t *w = arg;
    table_rows_free(w->rows, w->count);
    free(w);
}

/* Sorts the rows and writes the file (temp + fsync + rename): seconds for
 * millions of rows, so it runs as a sync list call on the snapshot writer
 * thread, never on the worker loop (whose heartbeats would stop). */
static int table_write_call(void *arg, eddy_err_t *err)
{
    table_write_t *w = arg;
    if (w->count) /* an empty table has no rows array (qsort wants one) */
        qsort(w->rows, w->count, sizeof *w->rows, row_compare_seq);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", w->path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return eddy_err_set(err, "cannot write %s: %m", tmp);
    char *buf = malloc((size_t)1 << 20);
    if (buf)
        setvbuf(f, buf, _IOFBF, (size_t)1 << 20);
    for (size_t i = 0; i < w->count; i++) {
        /* Several updates of one key can arrive (changelog input): keep the last. */
        if (i + 1 < w->count && row_compare(&w->rows[i], &w->rows[i + 1]) == 0)
            continue;
        if (w->lines) {
            for (int64_t k = 0; k < w->rows[i].value; k++) {
                fwrite(w->rows[i].key, 1, w->rows[i].len, f);
                fputc('\n', f);
            }
            continue;
        }
        fwrite(w->rows[i].key, 1, w->rows[i].len, f);
        fprintf(f, "\t%" PRId64 "\n", w->rows[i].value);
    }
    if (ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        free(buf);
        unlink(tmp);
        return eddy_err_set(err, "cannot write %s: %m", tmp);
    }
    fclose(f);
    free(buf);
    if (rename(tmp, w->path) != 0) {
        unlink(tmp);
        return eddy_err_set(err, "cannot rename %s to %s: %m", tmp, w->path);
    }
    return 0;
}

/* The file is written at end of input, after finish(): the task's final
 * prepare hands the rows to the writer thread, and TASK_DONE waits for the
 * file (api/operator.h). Earlier checkpoints have nothing to prepare. */
static int table_prepare(void *self, uint64_t checkpoint, eddy_sync_list_t *sync, eddy_err_t *err)
{
    table_sink_t *s = self;
    if (checkpoint != EDDY_FINAL_CHECKPOINT)
        return 0;
    table_write_t *w = calloc(1, sizeof *w);
    if (!w)
        return eddy_err_set(err, "out of memory");
    memcpy(w->path, s->cfg->path, sizeof w->path);
    w->lines = s->cfg->lines;
    w->rows = s->rows;
    w->count = s->count;
    s->rows = NULL;
    s->count = s->cap = 0;
    if (sync)
        return eddy_sync_list_add_call(sync, table_write_call, w, table_write_release, err);
    int rc = table_write_call(w, err);
    table_write_release(w);
    return rc;
}

static void table_close(void *self)
{
    table_sink_t *s = self;
    table_rows_free(s->rows, s->count);
    free(s);
}

const eddy_operator_ops_t eddy_table_file_sink_ops = {
    .kind = "table_file_sink", .open = table_open, .process = table_process,
    .prepare = table_prepare, .close = table_close};

/* ---- part files (two-phase commit) --------------------------------------- */

#define PART_PATH_MAX 4400

typedef struct prepared_id {
    uint64_t checkpoint;
    struct prepared_id *next;
} prepared_id_t;

typedef struct part_sink {
    const eddy_part_file_config_t *cfg;
    uint32_t stage, instance, parallelism;
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
 * published before (a COMPLETE seen twice, by open after a restore, or by
 * the final merge of another instance). */
static int publish_path(const char *from, const char *to)
{
    if (rename(from, to) == 0)
        return 0;
    if (errno == ENOENT && access(to, F_OK) == 0)
        return 0;
    eddy_error("part file sink: cannot publish %s as %s: %s", from, to, strerror(errno));
    return -1;
}

static int publish(const part_sink_t *s, uint64_t checkpoint)
{
    char from[PART_PATH_MAX], to[PART_PATH_MAX];
    pending_path(s, checkpoint, from, sizeof from);
    committed_path(s, checkpoint, to, sizeof to);
    return publish_path(from, to);
}

/* "part-<instance>-<20 digits>.txt", a published file. */
static bool committed_name(const char *name, uint32_t *instance, uint64_t *checkpoint)
{
    unsigned inst;
    int n = 0;
    if (sscanf(name, "part-%u-%n", &inst, &n) != 1 || n == 0)
        return false;
    const char *id = name + n;
    if (strlen(id) != 24 || strspn(id, "0123456789") != 20 || strcmp(id + 20, ".txt") != 0)
        return false;
    *instance = inst;
    *checkpoint = strtoull(id, NULL, 10);
    return true;
}

/* "part-<stage>-<instance>-<20 digits>", a prepared file of that stage. */
static bool pending_name(const char *name, uint32_t stage, uint32_t *instance,
                         uint64_t *checkpoint)
{
    unsigned st, inst;
    int n = 0;
    if (sscanf(name, "part-%u-%u-%n", &st, &inst, &n) != 2 || n == 0 || st != stage)
        return false;
    const char *id = name + n;
    if (strlen(id) != 20 || strspn(id, "0123456789") != 20)
        return false;
    *instance = inst;
    *checkpoint = strtoull(id, NULL, 10);
    return true;
}

#define MERGED_MARKER ".merged"
/* A directory's path (at most PART_PATH_MAX) and an entry's name. */
#define ENTRY_PATH_MAX (PART_PATH_MAX + 258)
#define MERGE_RUNS_DIR ".merge"

/* Removes every entry of dir for which drop(name, arg) holds. */
static int remove_entries(const char *dir, bool (*drop)(const char *name, const void *arg),
                          const void *arg, eddy_err_t *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : eddy_err_set(err, "cannot read %s: %m", dir);
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!drop(e->d_name, arg))
            continue;
        char path[ENTRY_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) < 0 && errno != ENOENT)
            rc = eddy_err_set(err, "cannot remove %s: %m", path);
    }
    closedir(d);
    return rc;
}

/* What an earlier run or attempt left that this one must not merge: the
 * instance's own published parts after the checkpoint it starts from (all
 * of them on a fresh start; later ones only exist when it starts from an
 * older checkpoint, a savepoint); for instance 0 also the marker of a
 * finished merge and such parts of instances the job no longer has. */
typedef struct clean_scope {
    const part_sink_t *s;
    uint64_t restored;
} clean_scope_t;

static bool earlier_run_file(const char *name, const void *arg)
{
    const clean_scope_t *c = arg;
    uint32_t inst;
    uint64_t id;
    if (committed_name(name, &inst, &id))
        return id > c->restored &&
               (inst == c->s->instance || (c->s->instance == 0 && inst >= c->s->parallelism));
    return c->s->instance == 0 && !strcmp(name, MERGED_MARKER);
}

static bool any_file(const char *name, const void *arg)
{
    (void)arg;
    return name[0] != '.';
}

static bool committed_file(const char *name, const void *arg)
{
    (void)arg;
    uint32_t inst;
    uint64_t id;
    return committed_name(name, &inst, &id);
}

static int part_clean_earlier_run(const part_sink_t *s, uint64_t restored, eddy_err_t *err)
{
    char runs[PART_PATH_MAX];
    snprintf(runs, sizeof runs, "%s/" MERGE_RUNS_DIR, s->cfg->directory);
    clean_scope_t scope = {s, restored};
    if (remove_entries(s->cfg->directory, earlier_run_file, &scope, err) < 0 ||
        (s->instance == 0 && remove_entries(runs, any_file, NULL, err) < 0))
        return -1;
    return eddy_fsync_dir(s->cfg->directory, err);
}

/* The final merge (merge_to), a sync list call on the writer thread. It
 * owns a copy of what it needs: the sink may close meanwhile. */
typedef struct merge_task {
    char directory[sizeof ((eddy_part_file_config_t *)0)->directory];
    char merge_to[sizeof ((eddy_part_file_config_t *)0)->merge_to];
    uint32_t stage;
} merge_task_t;

/* Every prepared file of the stage still pending, of any instance, belongs
 * to a completed checkpoint at the final commit: publish it (its own
 * instance's commit may not have run yet; publishing twice is a no-op). */
static int publish_stage(const merge_task_t *mt, eddy_err_t *err)
{
    char pending[PART_PATH_MAX];
    snprintf(pending, sizeof pending, "%s/.pending", mt->directory);
    DIR *d = opendir(pending);
    if (!d)
        return eddy_err_set(err, "cannot read %s: %m", pending);
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint32_t inst;
        uint64_t id;
        if (!pending_name(e->d_name, mt->stage, &inst, &id))
            continue;
        char from[ENTRY_PATH_MAX], to[PART_PATH_MAX];
        snprintf(from, sizeof from, "%s/%s", pending, e->d_name);
        snprintf(to, sizeof to, "%s/part-%u-%020" PRIu64 ".txt", mt->directory, inst, id);
        if (publish_path(from, to) < 0)
            rc = eddy_err_set(err, "cannot publish %s", from);
    }
    closedir(d);
    return rc;
}

static int merge_call(void *arg, eddy_err_t *err)
{
    const merge_task_t *mt = arg;
    char marker[PART_PATH_MAX], runs[PART_PATH_MAX];
    snprintf(marker, sizeof marker, "%s/" MERGED_MARKER, mt->directory);
    snprintf(runs, sizeof runs, "%s/" MERGE_RUNS_DIR, mt->directory);
    if (access(marker, F_OK) == 0)
        return 0; /* an earlier final commit merged, then removed the parts */
    if (publish_stage(mt, err) < 0)
        return -1;
    eddy_strv_t parts = {0};
    DIR *d = opendir(mt->directory);
    if (!d)
        return eddy_err_set(err, "cannot read %s: %m", mt->directory);
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        uint32_t inst;
        uint64_t id;
        if (!committed_name(e->d_name, &inst, &id))
            continue;
        char path[ENTRY_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", mt->directory, e->d_name);
        if (eddy_strv_push(&parts, path, strlen(path)) < 0)
            rc = eddy_err_set(err, "out of memory");
    }
    closedir(d);
    uint64_t t0 = eddy_mono_ms();
    eddy_line_merge_stats_t st = {0};
    if (rc == 0)
        rc = eddy_line_merge_sorted((const char *const *)parts.v, parts.n, runs,
                                    mt->merge_to, 0, &st, err);
    size_t n_parts = parts.n;
    eddy_strv_clear(&parts);
    if (rc < 0)
        return eddy_err_wrap(err, "merging the output into %s", mt->merge_to);
    eddy_info("part file sink: merged %zu rows of %zu part files into %s (%zu sorted runs) "
              "in %" PRIu64 " ms", st.lines, n_parts, mt->merge_to, st.runs, eddy_mono_ms() - t0);
    int fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || fsync(fd) < 0) {
        if (fd >= 0)
            close(fd);
        return eddy_err_set(err, "cannot write %s: %m", marker);
    }
    close(fd);
    if (eddy_fsync_dir(mt->directory, err) < 0)
        return -1;
    /* The rows live in merge_to now; the marker keeps a repeated final
     * commit from merging the (removed) parts again. */
    return remove_entries(mt->directory, committed_file, NULL, err);
}

static void add_final_merge(const part_sink_t *s, eddy_sync_list_t *sync)
{
    eddy_err_t err = {{0}};
    merge_task_t *mt = calloc(1, sizeof *mt);
    if (!mt) {
        eddy_error("part file sink: out of memory for the final merge into %s", s->cfg->merge_to);
        return;
    }
    memcpy(mt->directory, s->cfg->directory, sizeof mt->directory);
    memcpy(mt->merge_to, s->cfg->merge_to, sizeof mt->merge_to);
    mt->stage = s->stage;
    int rc;
    if (sync) {
        rc = eddy_sync_list_add_call(sync, merge_call, mt, free, &err);
    } else {
        rc = merge_call(mt, &err);
        free(mt);
    }
    if (rc < 0)
        eddy_error("part file sink: %s", err.msg);
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
    s->parallelism = ctx->parallelism;
    snprintf(s->pending_dir, sizeof s->pending_dir, "%s/.pending", cfg->directory);
    /* The attempt in the name: an instance of an earlier attempt that still
     * runs (its worker was declared dead but was not) writes and, at close,
     * removes its own file, never this one. */
    snprintf(s->inprogress, sizeof s->inprogress, "%s/.inprogress-%u-%u-%u", s->pending_dir,
             s->stage, s->instance, ctx->epoch);
    if (eddy_mkdir_p(s->pending_dir, err) < 0 || part_recover(s, ctx->restored_checkpoint, err) < 0 ||
        (cfg->merge_to[0] && part_clean_earlier_run(s, ctx->restored_checkpoint, err) < 0)) {
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

/* With merge_to, each prepared file is sorted in place (line_merge.h: its
 * own bytes rewritten, never a new file, so a sort of an earlier attempt
 * that runs late cannot bring back a file the restore discarded) by a
 * call after its fsyncs, on the snapshot writer thread: every instance
 * sorts its own rows while the job runs, in parallel on its worker, and
 * the final merge only merges. The checkpoint's ACK follows the sort. */
typedef struct part_sort {
    char path[PART_PATH_MAX], runs[PART_PATH_MAX];
} part_sort_t;

static int part_sort_call(void *arg, eddy_err_t *err)
{
    const part_sort_t *ps = arg;
    return eddy_line_sort_in_place(ps->path, ps->runs, 0, NULL, err);
}

static int add_part_sort(const part_sink_t *s, const char *path, eddy_sync_list_t *sync,
                         eddy_err_t *err)
{
    part_sort_t *ps = calloc(1, sizeof *ps);
    if (!ps)
        return eddy_err_set(err, "out of memory");
    snprintf(ps->path, sizeof ps->path, "%s", path);
    snprintf(ps->runs, sizeof ps->runs, "%s/" MERGE_RUNS_DIR, s->cfg->directory);
    return eddy_sync_list_add_call(sync, part_sort_call, ps, free, err);
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
        eddy_sync_list_add_dir(sync, s->pending_dir, err) < 0 ||
        (s->cfg->merge_to[0] && add_part_sort(s, to, sync, err) < 0)) {
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
    /* A published name lost in a crash is published again by open() after
     * the restore (its file is still pending), so the directory's fsync may
     * follow later; the job's final ACK waits for it (see worker.c). */
    eddy_err_t err = {{0}};
    int rc = !any ? 0 : sync ? eddy_sync_list_add_dir(sync, s->cfg->directory, &err)
                             : eddy_fsync_dir(s->cfg->directory, &err);
    if (rc < 0)
        eddy_error("part file sink: %s", err.msg);
    /* The final merge: one instance does it, for all (see operators.h). */
    if (checkpoint == EDDY_FINAL_CHECKPOINT && s->cfg->merge_to[0] && s->instance == 0)
        add_final_merge(s, sync);
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
