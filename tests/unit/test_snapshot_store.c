/* test_snapshot_store.c - checkpoint files on disk (state/snapshot_store.c).
 *
 * Round trips of key-group files and blobs, the documented layout and header,
 * the atomic-write protocol leaving no temporary files behind, and a reader
 * that turns every damaged file (missing, truncated, extended, flipped byte,
 * bad magic) into an error naming the file. Each test works in its own
 * mkdtemp directory under /tmp and removes it afterwards. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "state/snapshot_store.h"
#include "tests/support/etcd.h" /* eddy_test_rm_rf */

static char tmpdir[64];
static char root[128];
static eddy_snapshot_store_t *store;

static void setup(void)
{
    strcpy(tmpdir, "/tmp/eddy-snap-test-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(root, sizeof root, "%s/nested/root", tmpdir);
    eddy_err_t err = {{0}};
    store = eddy_snapshot_store_new(root, &err);
    cr_assert_not_null(store, "%s", err.msg);
}

static void teardown(void)
{
    eddy_snapshot_store_destroy(&store);
    cr_assert_null(store);
    eddy_test_rm_rf(tmpdir);
}

TestSuite(snapshot_store, .init = setup, .fini = teardown);

static void fill(char *buf, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)(seed * 131 + i * 7 + (i >> 8));
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void group_path(char *buf, size_t size, const char *job, unsigned long long chk,
                       const char *op, unsigned kg)
{
    snprintf(buf, size, "%s/%s/chk-%llu/%s/kg-%u.snap", root, job, chk, op, kg);
}

Test(snapshot_store, root_is_created)
{
    struct stat st;
    cr_assert_eq(stat(root, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_str_eq(eddy_snapshot_store_root(store), root);
    /* Re-opening an existing root is fine. */
    eddy_err_t err = {{0}};
    eddy_snapshot_store_t *again = eddy_snapshot_store_new(root, &err);
    cr_assert_not_null(again, "%s", err.msg);
    eddy_snapshot_store_destroy(&again);
    cr_assert_null(again);
    cr_assert_null(eddy_snapshot_store_new("", &err));
}

Test(snapshot_store, group_and_blob_round_trip)
{
    eddy_err_t err = {{0}};
    const size_t sizes[] = {0, 1, 23, 4096, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t len = sizes[i];
        char *data = malloc(len ? len : 1);
        fill(data, len, (unsigned)i);
        cr_assert_eq(eddy_snapshot_store_write_group(store, "wordcount", 7, "count", (uint32_t)i,
                                                     data, len, &err),
                     0, "%s", err.msg);
        cr_assert_eq(eddy_snapshot_store_write_blob(store, "wordcount", 7, "source-offsets", data,
                                                    len, &err),
                     0, "%s", err.msg);
        char *back = NULL;
        size_t back_len = 99;
        cr_assert_eq(eddy_snapshot_store_read_group(store, "wordcount", 7, "count", (uint32_t)i,
                                                    &back, &back_len, &err),
                     0, "%s", err.msg);
        cr_assert_not_null(back);
        cr_assert_eq(back_len, len);
        cr_assert(len == 0 || memcmp(back, data, len) == 0);
        free(back);
        back = NULL;
        cr_assert_eq(eddy_snapshot_store_read_blob(store, "wordcount", 7, "source-offsets", &back,
                                                   &back_len, &err),
                     0, "%s", err.msg);
        cr_assert_eq(back_len, len);
        cr_assert(len == 0 || memcmp(back, data, len) == 0);
        free(back);
        free(data);
    }
    /* Overwriting a file replaces it. */
    cr_assert_eq(eddy_snapshot_store_write_blob(store, "wordcount", 7, "source-offsets", "new", 3,
                                                &err),
                 0);
    char *back = NULL;
    size_t back_len = 0;
    cr_assert_eq(eddy_snapshot_store_read_blob(store, "wordcount", 7, "source-offsets", &back,
                                               &back_len, &err),
                 0);
    cr_assert(back_len == 3 && memcmp(back, "new", 3) == 0);
    free(back);
}

Test(snapshot_store, layout_and_header)
{
    eddy_err_t err = {{0}};
    const char payload[] = "hello, snapshot";
    size_t len = sizeof payload - 1;
    cr_assert_eq(eddy_snapshot_store_write_group(store, "job_1", 42, "agg.v2", 127, payload, len,
                                                 &err),
                 0, "%s", err.msg);
    cr_assert_eq(eddy_snapshot_store_write_blob(store, "job_1", 42, "sink", payload, len, &err),
                 0);
    char path[512];
    group_path(path, sizeof path, "job_1", 42, "agg.v2", 127);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "expected %s", path);
    unsigned char file[128];
    size_t n = fread(file, 1, sizeof file, f);
    fclose(f);
    cr_assert_eq(n, 24 + len);
    cr_assert_arr_eq(file, "EDDYSNP1", 8);
    uint64_t plen = 0, sum = 0;
    for (int i = 7; i >= 0; i--) {
        plen = (plen << 8) | file[8 + i];
        sum = (sum << 8) | file[16 + i];
    }
    cr_assert_eq(plen, len);
    cr_assert_eq(sum, XXH64(payload, len, 0));
    cr_assert_arr_eq(file + 24, payload, len);

    snprintf(path, sizeof path, "%s/job_1/chk-42/sink.blob", root);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "expected %s", path);
    cr_assert_eq((size_t)st.st_size, 24 + len);
    /* No temporary files are left behind. */
    snprintf(path, sizeof path, "%s/job_1/chk-42", root);
    cr_assert_eq(count_entries(path), 2); /* agg.v2/ and sink.blob */
    snprintf(path, sizeof path, "%s/job_1/chk-42/agg.v2", root);
    cr_assert_eq(count_entries(path), 1);
}

static void write_sample(char *path, size_t size, size_t *file_len)
{
    eddy_err_t err = {{0}};
    char data[1000];
    fill(data, sizeof data, 3);
    cr_assert_eq(eddy_snapshot_store_write_group(store, "j", 1, "op", 5, data, sizeof data, &err),
                 0, "%s", err.msg);
    group_path(path, size, "j", 1, "op", 5);
    *file_len = 24 + sizeof data;
}

static void expect_read_error(const char *path, const char *needle)
{
    eddy_err_t err = {{0}};
    char *back = (char *)1;
    size_t back_len = 1;
    cr_assert_eq(eddy_snapshot_store_read_group(store, "j", 1, "op", 5, &back, &back_len, &err),
                 -1);
    cr_assert_null(back);
    cr_assert_eq(back_len, 0);
    cr_assert(strstr(err.msg, path), "error does not name the file: %s", err.msg);
    cr_assert(strstr(err.msg, needle), "expected \"%s\" in: %s", needle, err.msg);
}

Test(snapshot_store, truncated_file_rejected)
{
    char path[512];
    size_t file_len;
    write_sample(path, sizeof path, &file_len);
    const size_t cuts[] = {0, 7, 8, 23, 24, 25, 500, file_len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        cr_assert_eq(truncate(path, (off_t)cuts[i]), 0);
        expect_read_error(path, "truncated");
        write_sample(path, sizeof path, &file_len);
    }
    /* The error gives both sizes. */
    cr_assert_eq(truncate(path, 500), 0);
    char sizes[64];
    snprintf(sizes, sizeof sizes, "500 of %zu bytes", file_len);
    expect_read_error(path, sizes);
}

Test(snapshot_store, extended_file_rejected)
{
    char path[512];
    size_t file_len;
    write_sample(path, sizeof path, &file_len);
    FILE *f = fopen(path, "ab");
    fputc('x', f);
    fclose(f);
    expect_read_error(path, "trailing");
}

Test(snapshot_store, flipped_byte_rejected)
{
    char path[512];
    size_t file_len;
    write_sample(path, sizeof path, &file_len);
    /* Every byte position: magic, length, checksum and payload. */
    for (size_t pos = 0; pos < file_len; pos += (pos < 32 ? 1 : 97)) {
        int fd = open(path, O_RDWR);
        unsigned char b;
        cr_assert_eq(pread(fd, &b, 1, (off_t)pos), 1);
        b ^= 0x20;
        cr_assert_eq(pwrite(fd, &b, 1, (off_t)pos), 1);
        close(fd);
        const char *needle = pos < 8 ? "magic" : pos < 16 ? "" : "checksum";
        expect_read_error(path, needle);
        write_sample(path, sizeof path, &file_len);
    }
}

Test(snapshot_store, missing_file_error)
{
    eddy_err_t err = {{0}};
    char *back = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_snapshot_store_read_group(store, "nojob", 3, "op", 0, &back, &len, &err), -1);
    cr_assert(strstr(err.msg, "chk-3/op/kg-0.snap") && strstr(err.msg, "does not exist"), "%s",
              err.msg);
    cr_assert_eq(eddy_snapshot_store_read_blob(store, "nojob", 3, "offsets", &back, &len, &err),
                 -1);
    cr_assert(strstr(err.msg, "chk-3/offsets.blob"), "%s", err.msg);
    cr_assert_null(back);
}

Test(snapshot_store, remove_checkpoint)
{
    eddy_err_t err = {{0}};
    for (uint64_t chk = 1; chk <= 3; chk++) {
        for (uint32_t kg = 0; kg < 4; kg++) {
            cr_assert_eq(eddy_snapshot_store_write_group(store, "job", chk, "a", kg, "x", 1, &err),
                         0);
            cr_assert_eq(eddy_snapshot_store_write_group(store, "job", chk, "b", kg, "y", 1, &err),
                         0);
        }
        cr_assert_eq(eddy_snapshot_store_write_blob(store, "job", chk, "offsets", "z", 1, &err),
                     0);
    }
    /* A stray temp file (as a crash would leave) is removed too. */
    char path[512];
    snprintf(path, sizeof path, "%s/job/chk-2/a/.kg-9.snap.tmp.1.1", root);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);

    cr_assert_eq(eddy_snapshot_store_remove_checkpoint(store, "job", 2, &err), 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/job/chk-2", root);
    struct stat st;
    cr_assert_eq(stat(path, &st), -1, "%s still exists", path);
    char *back = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_snapshot_store_read_group(store, "job", 2, "a", 0, &back, &len, &err), -1);
    cr_assert_eq(eddy_snapshot_store_read_group(store, "job", 1, "a", 0, &back, &len, &err), 0);
    free(back);
    cr_assert_eq(eddy_snapshot_store_read_blob(store, "job", 3, "offsets", &back, &len, &err), 0);
    free(back);
    snprintf(path, sizeof path, "%s/job", root);
    cr_assert_eq(count_entries(path), 2);

    /* Missing checkpoints and jobs are not an error. */
    cr_assert_eq(eddy_snapshot_store_remove_checkpoint(store, "job", 2, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_snapshot_store_remove_checkpoint(store, "nojob", 9, &err), 0, "%s", err.msg);
}

Test(snapshot_store, bad_names_rejected)
{
    const char *bad[] = {"", ".", "..", "a/b", "../x", "a b", "tab\t", "caf\xc3\xa9", "x*", "/"};
    eddy_err_t err = {{0}};
    char *back = NULL;
    size_t len = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *b = bad[i];
        err.msg[0] = '\0';
        cr_assert_eq(eddy_snapshot_store_write_group(store, b, 1, "op", 0, "x", 1, &err), -1,
                     "job \"%s\" accepted", b);
        cr_assert(strstr(err.msg, "job"), "%s", err.msg);
        cr_assert_eq(eddy_snapshot_store_write_group(store, "job", 1, b, 0, "x", 1, &err), -1,
                     "operator \"%s\" accepted", b);
        cr_assert(strstr(err.msg, "operator"), "%s", err.msg);
        cr_assert_eq(eddy_snapshot_store_write_blob(store, "job", 1, b, "x", 1, &err), -1,
                     "blob \"%s\" accepted", b);
        cr_assert(strstr(err.msg, "blob"), "%s", err.msg);
        cr_assert_eq(eddy_snapshot_store_write_blob(store, b, 1, "blob", "x", 1, &err), -1);
        cr_assert_eq(eddy_snapshot_store_read_group(store, b, 1, "op", 0, &back, &len, &err), -1);
        cr_assert_eq(eddy_snapshot_store_read_group(store, "job", 1, b, 0, &back, &len, &err), -1);
        cr_assert_eq(eddy_snapshot_store_read_blob(store, "job", 1, b, &back, &len, &err), -1);
        cr_assert_eq(eddy_snapshot_store_remove_checkpoint(store, b, 1, &err), -1);
    }
    cr_assert_eq(eddy_snapshot_store_write_group(store, NULL, 1, "op", 0, "x", 1, &err), -1);
    cr_assert_eq(eddy_snapshot_store_write_blob(store, "job", 1, NULL, "x", 1, &err), -1);
    char longname[256];
    memset(longname, 'n', 255);
    longname[255] = '\0';
    cr_assert_eq(eddy_snapshot_store_write_blob(store, "job", 1, longname, "x", 1, &err), -1);
    /* Nothing was created by the rejected calls; the allowed alphabet works. */
    cr_assert_eq(count_entries(root), 0);
    cr_assert_eq(eddy_snapshot_store_write_blob(store, "Job-1_a.b", 1, "Az09._-", "x", 1, &err),
                 0, "%s", err.msg);
}

/* The batch writer used by checkpoints: same files, same checks on read, no
 * temporary files left behind, and a bad name writes nothing. */
Test(snapshot_store, batch_of_groups_round_trip)
{
    eddy_err_t err = {{0}};
    enum { N = 40 };
    uint32_t kgs[N];
    char *data[N];
    size_t lens[N];
    for (uint32_t i = 0; i < N; i++) {
        kgs[i] = 3 * i + 1;
        lens[i] = i * 97;
        data[i] = malloc(lens[i] ? lens[i] : 1);
        fill(data[i], lens[i], i);
    }
    cr_assert_eq(eddy_snapshot_store_write_groups(store, "wc", 9, "count", N, kgs, data, lens, true, &err),
                 0, "%s", err.msg);
    for (uint32_t i = 0; i < N; i++) {
        char *back = NULL;
        size_t back_len = 0;
        cr_assert_eq(eddy_snapshot_store_read_group(store, "wc", 9, "count", kgs[i], &back,
                                                    &back_len, &err),
                     0, "%s", err.msg);
        cr_assert_eq(back_len, lens[i]);
        cr_assert(lens[i] == 0 || memcmp(back, data[i], lens[i]) == 0);
        free(back);
    }
    char dir[600];
    snprintf(dir, sizeof dir, "%s/wc/chk-9/count", root);
    cr_assert_eq(count_entries(dir), N, "only the group files remain");
    cr_assert_eq(eddy_snapshot_store_write_groups(store, "wc", 9, "../x", N, kgs, data, lens, true,
                                                  &err),
                 -1);
    /* Without durability (migration snapshots) the files are the same. */
    cr_assert_eq(eddy_snapshot_store_write_groups(store, "wc", 10, "count", N, kgs, data, lens,
                                                  false, &err),
                 0, "%s", err.msg);
    char *back = NULL;
    size_t back_len = 0;
    cr_assert_eq(eddy_snapshot_store_read_group(store, "wc", 10, "count", kgs[5], &back, &back_len,
                                                &err),
                 0, "%s", err.msg);
    cr_assert(back_len == lens[5] && memcmp(back, data[5], lens[5]) == 0);
    free(back);
    for (uint32_t i = 0; i < N; i++)
        free(data[i]);
}
