/* test_dir_source_state.c - the dir source (connectors/dir_source.h) and the line
 * reader under it (connectors/line_reader.h), driven through their ops on
 * real files in a temporary directory:
 * - state bytes round trip; malformed bytes are rejected with a clear error;
 * - files present at open and files renamed in later are read once, in
 *   name order, hidden and .tmp names ignored, .gz inflated;
 * - a restore from write_state's bytes re-reads nothing already counted and
 *   goes on in the middle of a file;
 * - a truncated or non-gzip .gz is an error naming the file. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "connectors/dir_source.h"
#include "connectors/line_reader.h"
#include "connectors/sources.h"
#include "net/mpcodec.h"

#include "leak_check.h"

TestSuite(dir_source_state, .fini = eddy_test_leak_check);

/* ---- helpers ------------------------------------------------------------------ */

typedef struct lines {
    eddy_collector_t base;
    char text[8192]; /* lines joined by '|' */
    uint32_t n;
} lines_t;

static void collect(eddy_collector_t *self, const eddy_record_t *rec)
{
    lines_t *l = (lines_t *)self;
    size_t used = strlen(l->text);
    snprintf(l->text + used, sizeof l->text - used, "%.*s|", (int)rec->len, rec->data);
    l->n++;
}

static void lines_init(lines_t *l)
{
    memset(l, 0, sizeof *l);
    l->base.emit = collect;
}

static char *make_dir(void)
{
    char *dir = strdup("/tmp/eddy-test-dir-XXXXXX");
    cr_assert(mkdtemp(dir));
    return dir;
}

static void remove_dir(char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(dir);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

/* Writes name.gz holding text, with gzip(1). */
static void write_gz(const char *dir, const char *name, const char *text)
{
    write_file(dir, ".plain", text);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip -c '%s/.plain' > '%s/%s' && rm '%s/.plain'", dir, dir, name, dir);
    cr_assert_eq(system(cmd), 0);
}

/* Writes under a hidden name, then renames into place (the writers' contract). */
static void publish(const char *dir, const char *name, const char *text)
{
    write_file(dir, ".incoming.tmp", text);
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/.incoming.tmp", dir);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    cr_assert_eq(rename(from, to), 0);
}

static void *open_source(const char *dir, uint32_t instance, uint32_t parallelism, const char *state,
                         size_t state_len, eddy_err_t *err)
{
    eddy_dir_source_config_t cfg;
    snprintf(cfg.path, sizeof cfg.path, "%s", dir);
    eddy_op_context_t ctx = {.instance = instance, .parallelism = parallelism, .config = &cfg,
                             .source_state = state, .source_state_len = state_len};
    return eddy_dir_source_ops.open(&ctx, -1, err);
}

/* Polls until nothing is left now (EDDY_SOURCE_IDLE). */
static void poll_all(void *src, lines_t *out)
{
    eddy_err_t err = {{0}};
    for (int i = 0; i < 1000; i++) {
        int rc = eddy_dir_source_ops.poll(src, &out->base, 2, &err);
        cr_assert_neq(rc, -1, "%s", err.msg);
        cr_assert_neq(rc, 0, "a dir source never ends");
        if (rc == EDDY_SOURCE_IDLE)
            return;
    }
    cr_assert_fail("never idle");
}

/* ---- state bytes ------------------------------------------------------------------ */

Test(dir_source_state, state_round_trip)
{
    eddy_dir_progress_t p = {0};
    snprintf(p.current, sizeof p.current, "%s", "b.log.gz");
    p.offset = 1234567890123;
    char *names[] = {"a", "c.gz", "z z"};
    p.done = names;
    p.n_done = 3;
    char *bytes;
    size_t len;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_dir_state_encode(&p, &bytes, &len, &err), 0, "%s", err.msg);
    eddy_dir_progress_t back;
    cr_assert_eq(eddy_dir_state_decode(bytes, len, &back, &err), 0, "%s", err.msg);
    cr_assert_str_eq(back.current, "b.log.gz");
    cr_assert_eq(back.offset, 1234567890123);
    cr_assert_eq(back.n_done, 3);
    for (uint32_t i = 0; i < 3; i++)
        cr_assert_str_eq(back.done[i], names[i]);
    eddy_dir_progress_clear(&back);
    free(bytes);
}

/* msgpack of [format, current, offset, [names]] built by hand. */
static char *state_of(uint64_t format, const char *current, int64_t offset, const char **names,
                      uint32_t n, size_t *len)
{
    eddy_mpw_t w;
    eddy_mpw_init(&w);
    eddy_mpw_array(&w, 4);
    eddy_mpw_u64(&w, format);
    eddy_mpw_str(&w, current);
    eddy_mpw_i64(&w, offset);
    eddy_mpw_array(&w, n);
    for (uint32_t i = 0; i < n; i++)
        eddy_mpw_str(&w, names[i]);
    return eddy_mpw_release(&w, len);
}

static void expect_malformed(const void *bytes, size_t len, const char *needle)
{
    eddy_dir_progress_t p;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_dir_state_decode(bytes, len, &p, &err), -1, "accepted (%s)", needle);
    cr_assert(strstr(err.msg, needle), "'%s' not in '%s'", needle, err.msg);
    cr_assert_null(p.done);
    cr_assert_eq(p.n_done, 0);
}

Test(dir_source_state, malformed_state_is_rejected_clearly)
{
    expect_malformed("", 0, "dir source state");
    expect_malformed("\xc1", 1, "dir source state");
    expect_malformed("\x93\x01\xa0\x00", 4, "3 fields, expected 4");
    expect_malformed("\x94\x01\xa0\x00\x90\x00", 6, "dir source state"); /* trailing byte */
    size_t len;
    const char *sorted[] = {"a", "b"}, *unsorted[] = {"b", "a"}, *twice[] = {"a", "a"};
    const char *slash[] = {"a/b"}, *hidden[] = {".a"}, *tmp[] = {"a.tmp"};
    char *b = state_of(2, "", 0, sorted, 2, &len);
    expect_malformed(b, len, "format 2");
    free(b);
    b = state_of(1, "", -5, sorted, 2, &len);
    expect_malformed(b, len, "negative offset");
    free(b);
    b = state_of(1, "../x", 0, sorted, 2, &len);
    expect_malformed(b, len, "not a file name");
    free(b);
    b = state_of(1, "", 0, unsorted, 2, &len);
    expect_malformed(b, len, "not sorted");
    free(b);
    b = state_of(1, "", 0, twice, 2, &len);
    expect_malformed(b, len, "not sorted and distinct");
    free(b);
    b = state_of(1, "", 0, slash, 1, &len);
    expect_malformed(b, len, "not a file name");
    free(b);
    b = state_of(1, "", 0, hidden, 1, &len);
    expect_malformed(b, len, "not a file name");
    free(b);
    b = state_of(1, "", 0, tmp, 1, &len);
    expect_malformed(b, len, "not a file name");
    free(b);
    /* a wrong type in place of the names */
    expect_malformed("\x94\x01\xa0\x00\x01", 5, "expected an array");
    /* and a good one for contrast */
    b = state_of(1, "c", 3, sorted, 2, &len);
    eddy_dir_progress_t p;
    eddy_err_t err = {{0}};
    cr_assert_eq(eddy_dir_state_decode(b, len, &p, &err), 0, "%s", err.msg);
    eddy_dir_progress_clear(&p);
    free(b);

    /* open() refuses bad bytes and says whose they are */
    char *dir = make_dir();
    void *src = open_source(dir, 0, 1, "\x93\x01\xa0\x00", 4, &err);
    cr_assert_null(src);
    cr_assert(strstr(err.msg, "restoring the dir source"), "%s", err.msg);
    remove_dir(dir);
}

Test(dir_source_state, names_and_owners)
{
    cr_assert(eddy_dir_source_wanted("part-0001.csv"));
    cr_assert(eddy_dir_source_wanted("a.gz"));
    cr_assert_not(eddy_dir_source_wanted(".hidden"));
    cr_assert_not(eddy_dir_source_wanted("upload.tmp"));
    cr_assert_not(eddy_dir_source_wanted(""));
    uint32_t seen[3] = {0};
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof name, "file-%03d.txt", i);
        uint32_t o = eddy_dir_source_owner(name, 3);
        cr_assert_lt(o, 3);
        cr_assert_eq(o, eddy_dir_source_owner(name, 3), "owner is not stable");
        seen[o]++;
    }
    for (int i = 0; i < 3; i++)
        cr_assert_gt(seen[i], 50, "instance %d owns %u of 300 files", i, seen[i]);
}

/* ---- reading ------------------------------------------------------------------------ */

Test(dir_source_state, reads_each_file_once_in_name_order_and_restores)
{
    char *dir = make_dir();
    write_file(dir, "b.txt", "b1\nb2\n");
    write_gz(dir, "a.gz", "a1\na2\na3");
    write_file(dir, ".hidden", "no\n");
    write_file(dir, "partial.tmp", "no\n");
    mkdir(strcat(strcpy((char[600]){0}, dir), "/sub"), 0755);
    eddy_err_t err = {{0}};
    void *src = open_source(dir, 0, 1, NULL, 0, &err);
    cr_assert(src, "%s", err.msg);
    lines_t out;
    lines_init(&out);
    poll_all(src, &out);
    cr_assert_str_eq(out.text, "a1|a2|a3|b1|b2|");

    /* a file renamed in while running */
    publish(dir, "c.txt", "c1\nc2\nc3\nc4\n");
    lines_init(&out);
    eddy_collector_t *c = &out.base;
    /* read two lines of c, then checkpoint */
    int rc = eddy_dir_source_ops.poll(src, c, 2, &err);
    cr_assert_eq(rc, 1, "%s", err.msg);
    cr_assert_str_eq(out.text, "c1|c2|");
    char *state;
    size_t len;
    cr_assert_eq(eddy_dir_source_ops.write_state(src, &state, &len, &err), 0, "%s", err.msg);
    eddy_dir_progress_t p;
    cr_assert_eq(eddy_dir_state_decode(state, len, &p, &err), 0, "%s", err.msg);
    cr_assert_str_eq(p.current, "c.txt");
    cr_assert_eq(p.offset, 6);
    cr_assert_eq(p.n_done, 2);
    eddy_dir_progress_clear(&p);
    poll_all(src, &out);
    cr_assert_str_eq(out.text, "c1|c2|c3|c4|");
    eddy_dir_source_ops.close(src);

    /* after the checkpoint, before the failure, another file came */
    publish(dir, "d.txt", "d1\n");
    src = open_source(dir, 0, 1, state, len, &err);
    cr_assert(src, "%s", err.msg);
    lines_init(&out);
    poll_all(src, &out);
    cr_assert_str_eq(out.text, "c3|c4|d1|", "the restore re-read or missed lines");
    free(state);

    /* a removed file is forgotten; a new file of the same name is read */
    char path[600];
    snprintf(path, sizeof path, "%s/a.gz", dir);
    cr_assert_eq(unlink(path), 0);
    lines_init(&out);
    poll_all(src, &out);
    cr_assert_eq(eddy_dir_source_ops.write_state(src, &state, &len, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_dir_state_decode(state, len, &p, &err), 0, "%s", err.msg);
    cr_assert_eq(p.n_done, 3, "b, c, d");
    cr_assert_str_eq(p.done[0], "b.txt");
    eddy_dir_progress_clear(&p);
    free(state);
    eddy_dir_source_ops.close(src);
    remove_dir(dir);
}

Test(dir_source_state, instances_split_the_files)
{
    char *dir = make_dir();
    uint32_t expect[2] = {0};
    for (int i = 0; i < 20; i++) {
        char name[32], text[40];
        snprintf(name, sizeof name, "f%02d", i);
        snprintf(text, sizeof text, "%s\n", name);
        write_file(dir, name, text);
        expect[eddy_dir_source_owner(name, 2)]++;
    }
    for (uint32_t inst = 0; inst < 2; inst++) {
        eddy_err_t err = {{0}};
        void *src = open_source(dir, inst, 2, NULL, 0, &err);
        cr_assert(src, "%s", err.msg);
        lines_t out;
        lines_init(&out);
        poll_all(src, &out);
        cr_assert_eq(out.n, expect[inst]);
        eddy_dir_source_ops.close(src);
    }
    remove_dir(dir);
}

Test(dir_source_state, corrupt_gz_is_an_error_naming_the_file)
{
    char *dir = make_dir();
    write_gz(dir, "good.gz", "line one\nline two\nline three\n");
    char cmd[600];
    /* truncated: the first 20 bytes of a longer gzip stream */
    snprintf(cmd, sizeof cmd, "head -c 20 '%s/good.gz' > '%s/cut.gz'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    write_file(dir, "plain.gz", "not compressed at all\n");
    eddy_err_t err = {{0}};
    char path[600];
    snprintf(path, sizeof path, "%s/cut.gz", dir);
    eddy_line_reader_t *r = eddy_line_reader_open(path, 0, &err);
    lines_t out;
    lines_init(&out);
    uint32_t got;
    int rc = r ? eddy_line_reader_poll(r, &out.base, 100, &got, &err) : -1;
    cr_assert_eq(rc, -1);
    cr_assert(strstr(err.msg, "cut.gz"), "%s", err.msg);
    cr_assert(strstr(err.msg, "gzip"), "%s", err.msg);
    eddy_line_reader_destroy(&r);

    snprintf(path, sizeof path, "%s/plain.gz", dir);
    cr_assert_null(eddy_line_reader_open(path, 0, &err));
    cr_assert(strstr(err.msg, "plain.gz: not gzip data"), "%s", err.msg);

    /* resuming a .gz at an uncompressed offset */
    snprintf(path, sizeof path, "%s/good.gz", dir);
    r = eddy_line_reader_open(path, 9, &err);
    cr_assert(r, "%s", err.msg);
    cr_assert_eq(eddy_line_reader_poll(r, &out.base, 100, &got, &err), 0, "%s", err.msg);
    cr_assert_str_eq(out.text, "line two|line three|");
    cr_assert_eq(eddy_line_reader_offset(r), 29);
    eddy_line_reader_destroy(&r);

    /* the dir source fails on the corrupt file, naming it */
    snprintf(cmd, sizeof cmd, "rm '%s/plain.gz' '%s/good.gz'", dir, dir);
    cr_assert_eq(system(cmd), 0);
    void *src = open_source(dir, 0, 1, NULL, 0, &err);
    cr_assert(src, "%s", err.msg);
    lines_init(&out);
    rc = 1;
    for (int i = 0; i < 100 && rc == 1; i++)
        rc = eddy_dir_source_ops.poll(src, &out.base, 10, &err);
    cr_assert_eq(rc, -1);
    cr_assert(strstr(err.msg, "cut.gz"), "%s", err.msg);
    eddy_dir_source_ops.close(src);
    remove_dir(dir);
}

Test(dir_source_state, file_source_reads_a_gz_whole_on_instance_0)
{
    char *dir = make_dir();
    write_gz(dir, "in.gz", "x y\nz\n\nlast");
    eddy_file_source_config_t cfg;
    snprintf(cfg.path, sizeof cfg.path, "%s/in.gz", dir);
    eddy_err_t err = {{0}};
    for (uint32_t inst = 0; inst < 2; inst++) {
        eddy_op_context_t ctx = {.instance = inst, .parallelism = 2, .config = &cfg};
        void *src = eddy_file_source_ops.open(&ctx, -1, &err);
        cr_assert(src, "%s", err.msg);
        lines_t out;
        lines_init(&out);
        int rc;
        while ((rc = eddy_file_source_ops.poll(src, &out.base, 2, &err)) == 1)
            ;
        cr_assert_eq(rc, 0, "%s", err.msg);
        cr_assert_str_eq(out.text, inst == 0 ? "x y|z||last|" : "");
        eddy_file_source_ops.close(src);
    }
    /* restore at a position it gave: the uncompressed offset of "z" */
    eddy_op_context_t ctx = {.instance = 0, .parallelism = 2, .config = &cfg};
    void *src = eddy_file_source_ops.open(&ctx, 4, &err);
    cr_assert(src, "%s", err.msg);
    lines_t out;
    lines_init(&out);
    while (eddy_file_source_ops.poll(src, &out.base, 2, &err) == 1)
        ;
    cr_assert_str_eq(out.text, "z||last|");
    cr_assert_eq(eddy_file_source_ops.position(src), 11);
    eddy_file_source_ops.close(src);
    remove_dir(dir);
}
