/* test_state_handles.c - named state handles (api/state.h) on their store
 * (operators/named_state.h): each kind's operations on the current key,
 * iteration over a key and over a key group, remove, key-group boundaries
 * (a group written, dropped and read alone), schema versions migrated or
 * refused on read, and the declarations' checks; then the same through a
 * process function (api/process.h) that declares them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/process.h"
#include "operators/named_state.h"
#include "plan/registry.h"
#include "state/keygroup.h"
#include "tests/unit/leak_check.h"

TestSuite(state_handles, .fini = eddy_test_leak_check);

#define K 8u

static void sum_add(void *acc, const void *in, size_t in_len)
{
    (void)in;
    *(int64_t *)acc += (int64_t)in_len;
}

static const eddy_state_desc_t v1[] = {
    {.name = "seen", .kind = EDDY_STATE_VALUE, .version = 1},
    {.name = "tags", .kind = EDDY_STATE_MAP, .version = 1},
    {.name = "events", .kind = EDDY_STATE_LIST, .version = 1},
    {.name = "bytes", .kind = EDDY_STATE_AGGREGATING, .version = 1, .acc_size = 8, .add = sum_add},
};

static void key(eddy_named_states_t *s, const char *k)
{
    eddy_named_states_set_key(s, k, (uint32_t)strlen(k), eddy_key_group_of(k, strlen(k), K));
}

/* Appends "k=v;" (or "v;") for every visited entry. */
static void append(void *arg, const void *k, size_t k_len, const void *v, size_t len)
{
    char *buf = arg;
    size_t n = strlen(buf);
    if (k)
        n += (size_t)snprintf(buf + n, 256 - n, "%.*s=", (int)k_len, (const char *)k);
    snprintf(buf + n, 256 - n, "%.*s;", (int)len, (const char *)v);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

Test(state_handles, each_kind_on_the_current_key)
{
    eddy_named_states_t *s = eddy_named_states_new(v1, 4, K);
    cr_assert_not_null(s);
    eddy_state_t *seen = eddy_named_states_find(s, "seen"), *tags = eddy_named_states_find(s, "tags");
    eddy_state_t *events = eddy_named_states_find(s, "events");
    eddy_state_t *bytes = eddy_named_states_find(s, "bytes");
    cr_assert(seen && tags && events && bytes);
    cr_assert_null(eddy_named_states_find(s, "nope"));

    key(s, "alice");
    size_t len = 0;
    cr_assert_null(eddy_state_get(seen, &len));
    cr_assert_eq(eddy_state_put(seen, "yes", 3), 0);
    cr_assert_eq(eddy_state_put(seen, "twice", 5), 0);
    const char *v = eddy_state_get(seen, &len);
    cr_assert(v && len == 5 && !memcmp(v, "twice", 5));
    cr_assert_eq(eddy_state_map_put(tags, "a", 1, "1", 1), 0);
    cr_assert_eq(eddy_state_map_put(tags, "b", 1, "2", 1), 0);
    cr_assert_eq(eddy_state_map_put(tags, "a", 1, "3", 1), 0);
    v = eddy_state_map_get(tags, "a", 1, &len);
    cr_assert(v && len == 1 && *v == '3');
    cr_assert_null(eddy_state_map_get(tags, "c", 1, &len));
    cr_assert_eq(eddy_state_list_add(events, "x", 1), 0);
    cr_assert_eq(eddy_state_list_add(events, "", 0), 0);
    cr_assert_eq(eddy_state_list_add(events, "yz", 2), 0);
    cr_assert_eq(eddy_state_add(bytes, "abc", 3), 0);
    cr_assert_eq(eddy_state_add(bytes, "de", 2), 0);
    const int64_t *acc = eddy_state_get(bytes, &len);
    cr_assert(acc && len == 8 && *acc == 5);
    /* the wrong operation for a kind does nothing */
    cr_assert_eq(eddy_state_put(tags, "x", 1), -1);
    cr_assert_eq(eddy_state_list_add(seen, "x", 1), -1);
    cr_assert_eq(eddy_state_add(seen, "x", 1), -1);
    cr_assert_null(eddy_state_map_get(seen, "a", 1, &len));

    char buf[256] = "";
    cr_assert_eq(eddy_state_foreach(events, append, buf), 3);
    cr_assert_str_eq(buf, "x;;yz;");
    buf[0] = '\0';
    cr_assert_eq(eddy_state_foreach(seen, append, buf), 1);
    cr_assert_str_eq(buf, "twice;");
    buf[0] = '\0';
    cr_assert_eq(eddy_state_foreach(tags, append, buf), 2);
    cr_assert(!strcmp(buf, "a=3;b=2;") || !strcmp(buf, "b=2;a=3;"), "%s", buf);

    /* another key sees none of it */
    key(s, "bob");
    cr_assert_null(eddy_state_get(seen, &len));
    cr_assert_null(eddy_state_map_get(tags, "a", 1, &len));
    cr_assert_eq(eddy_state_foreach(events, append, buf), 0);
    cr_assert_eq(eddy_state_foreach(tags, append, buf), 0);
    cr_assert_null(eddy_state_get(bytes, &len));
    cr_assert_eq(eddy_state_map_put(tags, "a", 1, "bob", 3), 0);

    key(s, "alice");
    cr_assert(eddy_state_map_remove(tags, "a", 1));
    cr_assert_not(eddy_state_map_remove(tags, "a", 1));
    cr_assert(eddy_state_remove(tags)); /* b */
    cr_assert_not(eddy_state_remove(tags));
    cr_assert(eddy_state_remove(events));
    cr_assert_eq(eddy_state_foreach(events, append, buf), 0);
    cr_assert(eddy_state_remove(seen));
    cr_assert_null(eddy_state_get(seen, &len));
    cr_assert(eddy_state_remove(bytes));
    key(s, "bob");
    v = eddy_state_map_get(tags, "a", 1, &len);
    cr_assert(v && len == 3 && !memcmp(v, "bob", 3), "bob's map survives alice's remove");
    eddy_named_states_destroy(&s);
    cr_assert_null(s);
}

/* Collects "key:k=v" of a group walk. */
typedef struct seen_rows {
    char *row[64];
    size_t n;
} seen_rows_t;

static void group_row(void *arg, const void *k, size_t k_len, const void *mk, size_t mk_len,
                      const void *v, size_t len)
{
    seen_rows_t *r = arg;
    char buf[128];
    snprintf(buf, sizeof buf, "%.*s:%.*s=%.*s", (int)k_len, (const char *)k, (int)mk_len,
             mk ? (const char *)mk : "", (int)len, (const char *)v);
    cr_assert_lt(r->n, 64);
    r->row[r->n++] = strdup(buf);
}

/* Two keys of one key group, and one of another. */
static void keys_by_group(char same[2][16], char *other)
{
    int n = 0;
    uint32_t kg0 = eddy_key_group_of("k0", 2, K);
    snprintf(same[n++], 16, "k0");
    for (int i = 1; i < 1000 && (n < 2 || !other[0]); i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        if (eddy_key_group_of(k, strlen(k), K) == kg0 && n < 2)
            snprintf(same[n++], 16, "%s", k);
        else if (eddy_key_group_of(k, strlen(k), K) != kg0 && !other[0])
            snprintf(other, 16, "%s", k);
    }
    cr_assert(n == 2 && other[0]);
}

Test(state_handles, a_key_group_walks_writes_drops_and_reads_alone)
{
    char same[2][16], other[16] = "";
    keys_by_group(same, other);
    eddy_named_states_t *s = eddy_named_states_new(v1, 4, K);
    eddy_state_t *tags = eddy_named_states_find(s, "tags"), *seen = eddy_named_states_find(s, "seen");
    key(s, same[0]);
    eddy_state_map_put(tags, "a", 1, "1", 1);
    eddy_state_put(seen, "s0", 2);
    key(s, same[1]);
    eddy_state_map_put(tags, "b", 1, "2", 1);
    key(s, other);
    eddy_state_map_put(tags, "c", 1, "3", 1);

    key(s, same[0]);
    seen_rows_t rows = {0};
    cr_assert_eq(eddy_state_foreach_group(tags, group_row, &rows), 2);
    qsort(rows.row, rows.n, sizeof rows.row[0], str_cmp);
    char want[2][64];
    snprintf(want[0], 64, "%s:a=1", same[0]);
    snprintf(want[1], 64, "%s:b=2", same[1]);
    qsort(want, 2, sizeof want[0], (int (*)(const void *, const void *))strcmp);
    cr_assert_str_eq(rows.row[0], want[0]);
    cr_assert_str_eq(rows.row[1], want[1]);
    for (size_t i = 0; i < rows.n; i++)
        free(rows.row[i]);

    /* the group's bytes into a fresh store: only that group moves */
    uint32_t kg = eddy_key_group_of(same[0], strlen(same[0]), K);
    uint32_t kg_other = eddy_key_group_of(other, strlen(other), K);
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_named_states_write_group(s, kg, &buf, &len, &err), 0, "%s", err.msg);
    eddy_named_states_t *t = eddy_named_states_new(v1, 4, K);
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf, len, &err), 0, "%s", err.msg);
    eddy_state_t *t_tags = eddy_named_states_find(t, "tags");
    key(t, same[1]);
    size_t vlen = 0;
    const char *v = eddy_state_map_get(t_tags, "b", 1, &vlen);
    cr_assert(v && vlen == 1 && *v == '2');
    key(t, same[0]);
    v = eddy_state_get(eddy_named_states_find(t, "seen"), &vlen);
    cr_assert(v && vlen == 2 && !memcmp(v, "s0", 2));
    key(t, other);
    cr_assert_null(eddy_state_map_get(t_tags, "c", 1, &vlen), "another group came along");

    /* dropping the group in the source leaves the other group */
    eddy_named_states_drop_group(s, kg);
    key(s, same[0]);
    cr_assert_null(eddy_state_map_get(tags, "a", 1, &vlen));
    key(s, other);
    cr_assert_not_null(eddy_state_map_get(tags, "c", 1, &vlen));
    cr_assert_neq(kg, kg_other);
    /* read_group replaces the group; 0 bytes empty it */
    cr_assert_eq(eddy_named_states_read_group(t, kg, NULL, 0, &err), 0);
    key(t, same[1]);
    cr_assert_null(eddy_state_map_get(t_tags, "b", 1, &vlen));
    /* malformed bytes are refused and leave the group empty */
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf, len, &err), 0);
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf, len - 1, &err), -1);
    cr_assert_null(eddy_state_map_get(t_tags, "b", 1, &vlen));
    free(buf);
    eddy_named_states_destroy(&t);
    eddy_named_states_destroy(&s);
}

/* Version 2 of "seen": the old bytes upper-cased and prefixed with "v2:". */
static int seen_migrate(uint32_t from, const void *old, size_t old_len, char **out, size_t *out_len,
                        eddy_err_t *err)
{
    if (from != 1)
        return eddy_err_set(err, "from %u?", from);
    *out = malloc(old_len + 3);
    memcpy(*out, "v2:", 3);
    for (size_t i = 0; i < old_len; i++)
        (*out)[3 + i] = (char)((((const char *)old)[i] >= 'a' && ((const char *)old)[i] <= 'z')
                                   ? ((const char *)old)[i] - 32
                                   : ((const char *)old)[i]);
    *out_len = old_len + 3;
    return 0;
}

static int fail_migrate(uint32_t from, const void *old, size_t old_len, char **out, size_t *out_len,
                        eddy_err_t *err)
{
    (void)old;
    (void)old_len;
    (void)out;
    (void)out_len;
    return eddy_err_set(err, "cannot read version %u", from);
}

Test(state_handles, older_schema_versions_migrate_or_are_refused)
{
    eddy_named_states_t *s = eddy_named_states_new(v1, 4, K);
    key(s, "k");
    uint32_t kg = eddy_key_group_of("k", 1, K);
    eddy_state_put(eddy_named_states_find(s, "seen"), "abc", 3);
    eddy_state_list_add(eddy_named_states_find(s, "events"), "e1", 2);
    eddy_state_map_put(eddy_named_states_find(s, "tags"), "t", 1, "x", 1);
    eddy_err_t err = {{0}};
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_named_states_write_group(s, kg, &buf, &len, &err), 0, "%s", err.msg);

    /* v2: seen migrates, events unchanged, tags no longer declared (dropped),
     * a new state starts empty */
    const eddy_state_desc_t v2[] = {
        {.name = "seen", .kind = EDDY_STATE_VALUE, .version = 2, .migrate = seen_migrate},
        {.name = "events", .kind = EDDY_STATE_LIST, .version = 1},
        {.name = "fresh", .kind = EDDY_STATE_VALUE, .version = 1},
    };
    eddy_named_states_t *t = eddy_named_states_new(v2, 3, K);
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf, len, &err), 0, "%s", err.msg);
    key(t, "k");
    size_t vlen = 0;
    const char *v = eddy_state_get(eddy_named_states_find(t, "seen"), &vlen);
    cr_assert(v && vlen == 6 && !memcmp(v, "v2:ABC", 6));
    char out[256] = "";
    eddy_state_foreach(eddy_named_states_find(t, "events"), append, out);
    cr_assert_str_eq(out, "e1;");
    cr_assert_null(eddy_state_get(eddy_named_states_find(t, "fresh"), &vlen));
    /* what v2 writes reads back in v2 without migrating again */
    char *buf2 = NULL;
    size_t len2 = 0;
    cr_assert_eq(eddy_named_states_write_group(t, kg, &buf2, &len2, &err), 0);
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf2, len2, &err), 0, "%s", err.msg);
    v = eddy_state_get(eddy_named_states_find(t, "seen"), &vlen);
    cr_assert(v && vlen == 6 && !memcmp(v, "v2:ABC", 6));
    eddy_named_states_destroy(&t);

    /* no migrate callback: refused, naming the state and the versions */
    const eddy_state_desc_t v2_bare[] = {{.name = "seen", .kind = EDDY_STATE_VALUE, .version = 2}};
    t = eddy_named_states_new(v2_bare, 1, K);
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf, len, &err), -1);
    cr_assert(strstr(err.msg, "state 'seen': saved with schema version 1, the operator declares 2 "
                              "and no migrate callback"), "%s", err.msg);
    /* v2's bytes into v1: newer, refused */
    eddy_named_states_t *old = eddy_named_states_new(v1, 4, K);
    cr_assert_eq(eddy_named_states_read_group(old, kg, buf2, len2, &err), -1);
    cr_assert(strstr(err.msg, "saved with schema version 2, the operator declares 1"), "%s", err.msg);
    eddy_named_states_destroy(&old);
    eddy_named_states_destroy(&t);
    /* a failing migrate fails the read and leaves the group empty */
    const eddy_state_desc_t v2_fail[] = {
        {.name = "seen", .kind = EDDY_STATE_VALUE, .version = 2, .migrate = fail_migrate}};
    t = eddy_named_states_new(v2_fail, 1, K);
    cr_assert_eq(eddy_named_states_read_group(t, kg, buf, len, &err), -1);
    cr_assert(strstr(err.msg, "cannot read version 1"), "%s", err.msg);
    key(t, "k");
    cr_assert_null(eddy_state_get(eddy_named_states_find(t, "seen"), &vlen));
    eddy_named_states_destroy(&t);
    free(buf);
    free(buf2);
    eddy_named_states_destroy(&s);
}

Test(state_handles, declarations_are_checked)
{
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_state_descs_check(v1, 4, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_state_descs_check(NULL, 0, &err), 0);
    const eddy_state_desc_t twice[] = {{.name = "a", .kind = EDDY_STATE_VALUE, .version = 1},
                                       {.name = "a", .kind = EDDY_STATE_LIST, .version = 1}};
    cr_assert_eq(eddy_state_descs_check(twice, 2, &err), -1);
    cr_assert(strstr(err.msg, "declared twice"), "%s", err.msg);
    const eddy_state_desc_t v0[] = {{.name = "a", .kind = EDDY_STATE_VALUE}};
    cr_assert_eq(eddy_state_descs_check(v0, 1, &err), -1);
    const eddy_state_desc_t no_add[] = {{.name = "a", .kind = EDDY_STATE_AGGREGATING, .version = 1,
                                         .acc_size = 8}};
    cr_assert_eq(eddy_state_descs_check(no_add, 1, &err), -1);
    const eddy_state_desc_t no_name[] = {{.kind = EDDY_STATE_VALUE, .version = 1}};
    cr_assert_eq(eddy_state_descs_check(no_name, 1, &err), -1);
    const eddy_state_desc_t bad_kind[] = {{.name = "a", .kind = 9, .version = 1}};
    cr_assert_eq(eddy_state_descs_check(bad_kind, 1, &err), -1);
}

/* ---- through a process function -------------------------------------------- */

static uint32_t whole(const eddy_record_t *rec, const char **key)
{
    *key = rec->data;
    return rec->len;
}

static int counting(eddy_process_context_t *ctx, const eddy_record_t *rec, eddy_collector_t *out,
                    eddy_err_t *err)
{
    cr_assert_null(eddy_process_state(ctx, "undeclared"));
    eddy_state_t *bytes = eddy_process_state(ctx, "bytes");
    if (eddy_state_add(bytes, rec->data, rec->len) < 0)
        return eddy_err_set(err, "out of memory");
    const int64_t *acc = eddy_state_get(bytes, NULL);
    eddy_record_t r = eddy_record_make(rec->data, rec->len, acc ? *acc : -1);
    eddy_emit(out, &r);
    return 0;
}

typedef struct last {
    eddy_collector_t base;
    int64_t value;
} last_t;

static void keep_last(eddy_collector_t *c, const eddy_record_t *rec)
{
    ((last_t *)c)->value = rec->value;
}

Test(state_handles, a_process_function_declares_checkpoints_and_restores_them)
{
    eddy_registry_t *r = eddy_registry_new();
    eddy_err_t err = {{0}};
    const eddy_state_desc_t twice[] = {{.name = "a", .kind = EDDY_STATE_VALUE, .version = 1},
                                       {.name = "a", .kind = EDDY_STATE_LIST, .version = 1}};
    const eddy_process_udf_t bad = {.process = counting, .states = twice, .n_states = 2};
    cr_assert_eq(eddy_register_process(r, "bad", &bad, &err), -1);
    cr_assert(strstr(err.msg, "process 'bad': state 'a' is declared twice"), "%s", err.msg);
    const eddy_process_udf_t udf = {.process = counting, .states = v1, .n_states = 4};
    cr_assert_eq(eddy_register_process(r, "counting", &udf, &err), 0, "%s", err.msg);
    const eddy_operator_kind_t *kind = eddy_registry_operator(r, "counting");
    eddy_config_t *cfg = eddy_config_new();
    void *conf = kind->configure(cfg, kind->arg, &err);
    cr_assert_not_null(conf, "%s", err.msg);
    const eddy_state_desc_t *d = NULL;
    cr_assert_eq(kind->ops->states(conf, &d), 4);
    cr_assert_str_eq(d[3].name, "bytes");
    eddy_op_context_t ctx = {.job_id = "t", .stage_name = "s", .parallelism = 1,
                             .max_parallelism = K, .key_groups = {0, K}, .config = conf,
                             .key_fn = whole};
    void *a = kind->ops->open(&ctx, &err), *b = kind->ops->open(&ctx, &err);
    cr_assert(a && b, "%s", err.msg);
    last_t out = {{keep_last}, 0};
    eddy_record_t rec = eddy_record_make("word", 4, 0);
    cr_assert_eq(kind->ops->process(a, &rec, &out.base, &err), 0, "%s", err.msg);
    cr_assert_eq(kind->ops->process(a, &rec, &out.base, &err), 0, "%s", err.msg);
    cr_assert_eq(out.value, 8);
    uint32_t kg = eddy_key_group_of("word", 4, K);
    char *buf = NULL;
    size_t len = 0;
    cr_assert_eq(kind->ops->write_group(a, kg, &buf, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(kind->ops->read_group(b, kg, buf, len, &err), 0, "%s", err.msg);
    free(buf);
    cr_assert_eq(kind->ops->process(b, &rec, &out.base, &err), 0, "%s", err.msg);
    cr_assert_eq(out.value, 12, "the accumulator moved with its key group");
    /* dropped with the group */
    kind->ops->drop_group(b, kg);
    cr_assert_eq(kind->ops->process(b, &rec, &out.base, &err), 0, "%s", err.msg);
    cr_assert_eq(out.value, 4);
    kind->ops->close(a);
    kind->ops->close(b);
    kind->release(conf);
    eddy_config_destroy(&cfg);
    eddy_registry_destroy(&r);
}
