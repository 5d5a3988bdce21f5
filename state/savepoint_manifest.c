/* savepoint_manifest.c - the savepoint manifest's JSON encoder and decoder
 * (contract in savepoint_manifest.h). Key-group ranges are derived from
 * each keyed operator's parallelism and max_parallelism when encoding
 * (Flink's KeyGroupRangeAssignment, state/keygroup.h) and only checked for
 * shape when decoding: a restore redistributes groups whatever they were. */
#include "state/savepoint_manifest.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "state/keygroup.h"

/* ---- encode ---------------------------------------------------------------- */

static json_t *operator_json(const eddy_savepoint_operator_t *o, uint32_t max_parallelism)
{
    json_t *kinds = json_array(), *ranges = json_array(), *states = json_array();
    for (uint32_t k = 0; k < o->n_kinds; k++)
        json_array_append_new(kinds, json_string(o->kinds[k]));
    for (uint32_t k = 0; k < o->n_states; k++)
        json_array_append_new(states, json_pack("{s:s, s:I}", "name", o->states[k].name, "version",
                                                (json_int_t)o->states[k].version));
    for (uint32_t i = 0; o->keyed && i < o->parallelism; i++) {
        eddy_kg_range_t r = eddy_kg_range_for(i, o->parallelism, max_parallelism);
        json_array_append_new(ranges, json_pack("[II]", (json_int_t)r.start, (json_int_t)r.end));
    }
    return json_pack("{s:s, s:b, s:b, s:I, s:o, s:o, s:o}", "uid", o->uid, "keyed", o->keyed,
                     "source", o->source, "parallelism", (json_int_t)o->parallelism, "kinds", kinds,
                     "key_groups", ranges, "states", states);
}

static json_t *position_json(const eddy_savepoint_position_t *p)
{
    json_t *o = json_pack("{s:s, s:I, s:I}", "operator", p->op, "instance", (json_int_t)p->instance,
                          "position", (json_int_t)p->position);
    if (o && p->state && p->state_len) {
        char *b64 = eddy_b64_encode((const unsigned char *)p->state, p->state_len);
        if (!b64) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "state", json_string(b64));
        free(b64);
    }
    return o;
}

char *eddy_savepoint_manifest_encode(const eddy_savepoint_manifest_t *m, size_t *len)
{
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, m->plan_fingerprint);
    json_t *ops = json_array(), *pos = json_array(), *files = json_array();
    json_t *doc = json_pack("{s:I, s:s, s:I, s:s, s:I, s:I, s:b, s:I}", "format_version",
                            (json_int_t)m->format_version, "job", m->job, "checkpoint",
                            (json_int_t)m->checkpoint, "plan_fingerprint", fp, "max_parallelism",
                            (json_int_t)m->max_parallelism, "created_ms", (json_int_t)m->created_ms,
                            "stopped", m->stopped, "sinks_committed",
                            (json_int_t)m->sinks_committed);
    bool ok = doc && ops && pos && files;
    for (uint32_t i = 0; ok && i < m->n_operators; i++)
        ok = json_array_append_new(ops, operator_json(&m->operators[i], m->max_parallelism)) == 0;
    for (uint32_t i = 0; ok && i < m->n_positions; i++)
        ok = json_array_append_new(pos, position_json(&m->positions[i])) == 0;
    for (uint32_t i = 0; ok && i < m->n_files; i++)
        ok = json_array_append_new(files, json_pack("{s:s, s:I}", "key", m->files[i].key, "size",
                                                    (json_int_t)m->files[i].size)) == 0;
    char *text = NULL;
    if (ok) {
        json_object_set(doc, "operators", ops);
        json_object_set(doc, "positions", pos);
        json_object_set(doc, "files", files);
        text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    }
    json_decref(ops);
    json_decref(pos);
    json_decref(files);
    json_decref(doc);
    if (text && len)
        *len = strlen(text);
    return text;
}

/* ---- decode ---------------------------------------------------------------- */

static int name_of(json_t *o, const char *member, char *out, eddy_err_t *err)
{
    const char *s = json_string_value(json_object_get(o, member));
    if (!s || !*s || strlen(s) >= EDDY_SAVEPOINT_NAME_MAX)
        return eddy_err_set(err, "\"%s\" is missing, empty or longer than %d bytes", member,
                            EDDY_SAVEPOINT_NAME_MAX - 1);
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

static int uint_of(json_t *o, const char *member, uint64_t max, uint64_t *out, eddy_err_t *err)
{
    json_t *v = json_object_get(o, member);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
        return eddy_err_set(err, "\"%s\" is missing or not an integer in 0..%" PRIu64, member, max);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int decode_operator(json_t *o, uint32_t max_parallelism, eddy_savepoint_operator_t *op,
                           eddy_err_t *err)
{
    uint64_t p = 0; /* uint_of sets it; initialised because -O3 cannot see that */
    if (!json_is_object(o) || name_of(o, "uid", op->uid, err) < 0 ||
        uint_of(o, "parallelism", EDDY_SAVEPOINT_MAX_INSTANCES, &p, err) < 0)
        return eddy_err_wrap(err, "an operator");
    op->parallelism = (uint32_t)p;
    op->keyed = json_is_true(json_object_get(o, "keyed"));
    op->source = json_is_true(json_object_get(o, "source"));
    json_t *kinds = json_object_get(o, "kinds"), *k;
    size_t i;
    if (!json_is_array(kinds) || json_array_size(kinds) > EDDY_SAVEPOINT_MAX_KINDS)
        return eddy_err_set(err, "operator %s: \"kinds\" is not an array of at most %d names",
                            op->uid, EDDY_SAVEPOINT_MAX_KINDS);
    json_array_foreach(kinds, i, k) {
        const char *s = json_string_value(k);
        if (!s || strlen(s) >= EDDY_SAVEPOINT_NAME_MAX)
            return eddy_err_set(err, "operator %s: a kind is not a short string", op->uid);
        snprintf(op->kinds[op->n_kinds++], EDDY_SAVEPOINT_NAME_MAX, "%s", s);
    }
    json_t *states = json_object_get(o, "states"), *st;
    if (states && (!json_is_array(states) || json_array_size(states) > EDDY_SAVEPOINT_MAX_STATES))
        return eddy_err_set(err, "operator %s: \"states\" is not an array of at most %d states",
                            op->uid, EDDY_SAVEPOINT_MAX_STATES);
    json_array_foreach(states, i, st) {
        uint64_t v = 0;
        if (!json_is_object(st) || name_of(st, "name", op->states[op->n_states].name, err) < 0 ||
            uint_of(st, "version", UINT32_MAX, &v, err) < 0)
            return eddy_err_wrap(err, "operator %s: state %zu", op->uid, i);
        op->states[op->n_states++].version = (uint32_t)v;
    }
    json_t *ranges = json_object_get(o, "key_groups"), *r;
    if (ranges && !json_is_array(ranges))
        return eddy_err_set(err, "operator %s: \"key_groups\" is not an array", op->uid);
    json_array_foreach(ranges, i, r) {
        json_t *a = json_array_get(r, 0), *b = json_array_get(r, 1);
        if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
            json_integer_value(a) > json_integer_value(b) ||
            json_integer_value(b) > (json_int_t)max_parallelism)
            return eddy_err_set(err, "operator %s: key group range %zu is not within 0..%u",
                                op->uid, i, max_parallelism);
    }
    return 0;
}

static int decode_position(json_t *o, eddy_savepoint_position_t *p, eddy_err_t *err)
{
    uint64_t inst = 0;
    json_t *pos = json_object_get(o, "position");
    if (!json_is_object(o) || name_of(o, "operator", p->op, err) < 0 ||
        uint_of(o, "instance", EDDY_SAVEPOINT_MAX_INSTANCES - 1, &inst, err) < 0)
        return eddy_err_wrap(err, "a source position");
    if (!json_is_integer(pos))
        return eddy_err_set(err, "source position %s[%" PRIu64 "]: \"position\" is not an integer",
                            p->op, inst);
    p->instance = (uint32_t)inst;
    p->position = json_integer_value(pos);
    json_t *st = json_object_get(o, "state");
    if (!st)
        return 0;
    const char *b64 = json_string_value(st);
    size_t n = 0;
    if (!b64 || strlen(b64) > EDDY_SAVEPOINT_STATE_MAX / 3 * 4 + 4 ||
        eddy_b64_decode(b64, strlen(b64), &p->state, &n) < 0 || n > EDDY_SAVEPOINT_STATE_MAX)
        return eddy_err_set(err, "source position %s[%u]: \"state\" is not base64 of at most %d bytes",
                            p->op, p->instance, EDDY_SAVEPOINT_STATE_MAX);
    p->state_len = (uint32_t)n;
    return 0;
}

static int decode_file(json_t *o, eddy_savepoint_file_t *f, eddy_err_t *err)
{
    const char *key = json_string_value(json_object_get(o, "key"));
    if (!key || !*key || strlen(key) >= EDDY_SAVEPOINT_KEY_MAX || key[0] == '/' || strstr(key, ".."))
        return eddy_err_set(err, "a file's \"key\" is missing or not a relative key");
    if (uint_of(o, "size", UINT64_MAX / 2, &f->size, err) < 0)
        return eddy_err_wrap(err, "file %s", key);
    f->key = strdup(key);
    return f->key ? 0 : eddy_err_set(err, "out of memory");
}

/* The array member, its size checked against max; NULL with err. */
static json_t *array_of(json_t *doc, const char *member, size_t max, eddy_err_t *err)
{
    json_t *a = json_object_get(doc, member);
    if (!json_is_array(a) || json_array_size(a) > max) {
        eddy_err_set(err, "\"%s\" is missing or not an array of at most %zu entries", member, max);
        return NULL;
    }
    return a;
}

static int decode_doc(json_t *doc, eddy_savepoint_manifest_t *m, eddy_err_t *err)
{
    uint64_t v = 0;
    if (!json_is_object(doc))
        return eddy_err_set(err, "not a JSON object");
    if (uint_of(doc, "format_version", UINT32_MAX, &v, err) < 0)
        return -1;
    m->format_version = (uint32_t)v;
    if (v == 0 || v > EDDY_SAVEPOINT_FORMAT_VERSION)
        return eddy_err_set(err, "format version %" PRIu64 " is %s than this eddy reads (%u)", v,
                            v ? "newer" : "other", EDDY_SAVEPOINT_FORMAT_VERSION);
    if (name_of(doc, "job", m->job, err) < 0 || uint_of(doc, "checkpoint", UINT64_MAX / 2, &m->checkpoint, err) < 0 ||
        uint_of(doc, "max_parallelism", 32768, &v, err) < 0)
        return -1;
    m->max_parallelism = (uint32_t)v;
    if (!m->checkpoint || !m->max_parallelism)
        return eddy_err_set(err, "\"checkpoint\" and \"max_parallelism\" must be positive");
    const char *fp = json_string_value(json_object_get(doc, "plan_fingerprint"));
    char *end = NULL;
    if (!fp || strlen(fp) != 16 || (m->plan_fingerprint = strtoull(fp, &end, 16), *end))
        return eddy_err_set(err, "\"plan_fingerprint\" is not 16 hex digits");
    m->created_ms = json_integer_value(json_object_get(doc, "created_ms"));
    m->stopped = json_is_true(json_object_get(doc, "stopped"));
    m->sinks_committed = (uint64_t)json_integer_value(json_object_get(doc, "sinks_committed"));
    json_t *ops = array_of(doc, "operators", EDDY_SAVEPOINT_MAX_OPERATORS, err);
    json_t *pos = ops ? array_of(doc, "positions", EDDY_SAVEPOINT_MAX_INSTANCES, err) : NULL;
    json_t *files = pos ? array_of(doc, "files", EDDY_SAVEPOINT_MAX_FILES, err) : NULL;
    if (!files)
        return -1;
    m->operators = calloc(json_array_size(ops) + 1, sizeof *m->operators);
    m->positions = calloc(json_array_size(pos) + 1, sizeof *m->positions);
    m->files = calloc(json_array_size(files) + 1, sizeof *m->files);
    if (!m->operators || !m->positions || !m->files)
        return eddy_err_set(err, "out of memory");
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o) {
        if (decode_operator(o, m->max_parallelism, &m->operators[i], err) < 0)
            return -1;
        m->n_operators++;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(m->operators[k].uid, m->operators[i].uid))
                return eddy_err_set(err, "two operators have the uid %s", m->operators[i].uid);
    }
    json_array_foreach(pos, i, o) {
        m->n_positions++;
        if (decode_position(o, &m->positions[i], err) < 0)
            return -1;
    }
    json_array_foreach(files, i, o) {
        if (decode_file(o, &m->files[i], err) < 0)
            return -1;
        m->n_files++;
    }
    return 0;
}

int eddy_savepoint_manifest_decode(const char *data, size_t len, eddy_savepoint_manifest_t *m,
                                   eddy_err_t *err)
{
    memset(m, 0, sizeof *m);
    json_error_t jerr;
    json_t *doc = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return eddy_err_set(err, "not valid JSON (line %d: %s)", jerr.line, jerr.text);
    int rc = decode_doc(doc, m, err);
    json_decref(doc);
    return rc;
}

void eddy_savepoint_manifest_clear(eddy_savepoint_manifest_t *m)
{
    for (uint32_t i = 0; m->positions && i < m->n_positions; i++)
        free(m->positions[i].state);
    for (uint32_t i = 0; m->files && i < m->n_files; i++)
        free(m->files[i].key);
    free(m->operators);
    free(m->positions);
    free(m->files);
    memset(m, 0, sizeof *m);
}

const eddy_savepoint_operator_t *eddy_savepoint_manifest_operator(const eddy_savepoint_manifest_t *m,
                                                                  const char *uid)
{
    for (uint32_t i = 0; i < m->n_operators; i++)
        if (!strcmp(m->operators[i].uid, uid))
            return &m->operators[i];
    return NULL;
}

int eddy_savepoint_manifest_add_file(eddy_savepoint_manifest_t *m, const char *key, uint64_t size)
{
    eddy_savepoint_file_t *f = realloc(m->files, (m->n_files + 1) * sizeof *f);
    if (!f)
        return -1;
    m->files = f;
    f[m->n_files].key = strdup(key);
    f[m->n_files].size = size;
    if (!f[m->n_files].key)
        return -1;
    m->n_files++;
    return 0;
}
