/* test_dir_source.c - `--input dir:///DIR` end to end with the real binary:
 * `eddy local --workers 2 --job wordcount` watching a directory, changelog
 * on stdout.
 *
 * - Files (plain and .gz) are there at the start, more are renamed in while
 *   it runs, a worker is killed with SIGKILL mid-run (after a complete
 *   checkpoint, pid from `eddy status --json`), more files come after the
 *   restore. The last +I/+U value of every word in the changelog must equal
 *   a reference count of all files' text computed here: each line counted
 *   exactly once by the restored state (the changelog itself may repeat
 *   updates after a restore, so only final values are compared). Hidden
 *   and .tmp files are never read. Ctrl-C (SIGINT) then ends the run with
 *   exit 130 and "interrupted".
 * - A truncated .gz fails its task with an error naming the file.
 * - --output with a dir:// input is refused up front. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "tests/support/changelog.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "3000"
#else
#define HB_TIMEOUT "1000"
#endif
#define LINES_PER_FILE 6000
#define MAX_TEXT (64u << 20)

static eddy_test_cluster_t *cl;
static char *dir, *in_dir, *in_uri, *out_path, *log_path, *port_s;
static int ports[2];
static eddy_proc_t *local;
static char *all_text;   /* the text of every published file, concatenated */
static size_t all_len;

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "dirsrc", .workers = 2, .checkpoint_interval = "300",
                                  .heartbeat_timeout_ms = HB_TIMEOUT};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    in_dir = eddy_test_cluster_path(cl, "in");
    char uri[700];
    snprintf(uri, sizeof uri, "dir://%s", in_dir);
    in_uri = strdup(uri);
    out_path = eddy_test_cluster_path(cl, "changelog.txt");
    log_path = eddy_test_cluster_path(cl, "local.log");
    cr_assert(mkdir(in_dir, 0755) == 0);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    port_s = eddy_test_cluster_port_s(cl, 0);
    local = eddy_test_cluster_local(cl);
    all_text = calloc(1, MAX_TEXT);
    all_len = 0;
    cr_assert(all_text);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    free(in_uri);
    free(all_text);
}

static char *logs(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* ---- input files ----------------------------------------------------------------- */

/* Deterministic lines of words for file number k. */
static char *file_text(int k, size_t *len)
{
    size_t cap = LINES_PER_FILE * 64;
    char *t = malloc(cap);
    cr_assert(t);
    size_t n = 0;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1);
    for (int i = 0; i < LINES_PER_FILE; i++) {
        int words = 1 + i % 6;
        for (int w = 0; w < words; w++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            n += (size_t)snprintf(t + n, cap - n, "%sw%u", w ? " " : "", (unsigned)(x % 500));
        }
        t[n++] = '\n';
    }
    *len = n;
    return t;
}

/* Writes file k under a hidden name (gzip'd when gz) and renames it to
 * name: the writers' contract. Its text joins the reference. */
static void publish(int k, const char *name, bool gz)
{
    size_t len;
    char *t = file_text(k, &len);
    char tmp[700], final[700];
    snprintf(tmp, sizeof tmp, "%s/.%s.part", in_dir, name);
    snprintf(final, sizeof final, "%s/%s", in_dir, name);
    cr_assert(eddy_write_file(tmp, t, len) == 0);
    if (gz) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "gzip -c '%s' > '%s.gz.tmp' && mv '%s.gz.tmp' '%s'", tmp, tmp, tmp, tmp);
        cr_assert_eq(system(cmd), 0);
    }
    cr_assert(rename(tmp, final) == 0);
    cr_assert(all_len + len < MAX_TEXT);
    memcpy(all_text + all_len, t, len);
    all_len += len;
    free(t);
}

/* A file the source must never read: its words would show in the changelog. */
static void write_ignored(const char *name)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", in_dir, name);
    cr_assert(eddy_write_file(path, "ignored_word\n", 13) == 0);
}

/* ---- status ------------------------------------------------------------------------ */

static void wait_view(const char *state, int64_t min_completed, int64_t min_restarts, const char *what)
{
    eddy_test_job_want_t want = {.state = state, .min_completed = min_completed,
                                 .min_restarts = min_restarts};
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &want, 60000, NULL, NULL)) {
        char *l = logs();
        cr_assert_fail("timed out waiting for %s; log:\n%s", what, l);
    }
}

/* The pid of an alive worker running tasks (-1: none). */
static pid_t busy_worker(void)
{
    pid_t pid = eddy_test_busy_worker(ports[0], 0);
    return pid > 0 ? pid : -1;
}

/* ---- the changelog -------------------------------------------------------------------- */

static bool changelog_final(void *arg)
{
    char *why = arg;
    return eddy_changelog_matches(out_path, all_text, all_len, why, 256) || !eddy_proc_alive(local);
}

static void start_local(void)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--quiet", "--job", "wordcount", "--input", in_uri, "--parallelism", "2",
                         "--rate", "20000", NULL};
    cr_assert(eddy_test_cluster_start_local_to(cl, job, out_path, &err) == 0, "%s", err.msg);
}

/* ---- tests ----------------------------------------------------------------------------- */

Test(dir_source, kill_a_worker_mid_run_counts_each_line_once, .init = setup, .fini = teardown,
     .timeout = 240)
{
    publish(0, "a-0000.txt", false);
    publish(1, "a-0001.gz", true);
    write_ignored(".hidden");
    write_ignored("upload.tmp");
    start_local();
    wait_view("running", 1, 0, "a first complete checkpoint");

    publish(2, "b-0002.txt", false);
    publish(3, "b-0003.txt.gz", true);
    publish(4, "b-0004.txt", false);
    wait_view("running", 3, 0, "checkpoints after the second files");
    pid_t victim = busy_worker();
    cr_assert_gt(victim, 0, "no worker with tasks in status");
    cr_assert(kill(victim, SIGKILL) == 0);
    uint64_t killed = eddy_mono_ms();
    wait_view("running", 0, 1, "the restore after kill -9");
    cr_log_info("dir source: restored %llu ms after kill -9 of pid %d",
                (unsigned long long)(eddy_mono_ms() - killed), (int)victim);

    publish(5, "c-0005.txt", false);
    publish(6, "0-early-name.gz", true); /* sorts before everything read so far */
    write_ignored(".late-hidden");
    char why[256] = "";
    bool ok = eddy_poll_until(changelog_final, why, 90000) && eddy_proc_alive(local);
    if (!ok) {
        char *l = logs();
        cr_assert_fail("final counts never matched the reference (%s); log:\n%s", why, l);
    }
    eddy_test_job_view_t v = eddy_test_job_view(ports[0], "wordcount");
    cr_assert_geq(v.restarts, 1, "no restore happened");
    cr_log_info("dir source: %zu bytes of input in 7 files, counts exact after %lld restarts",
                all_len, (long long)v.restarts);

    /* Ctrl-C: a dir job never ends by itself */
    cr_assert(kill(local->pid, SIGINT) == 0);
    int rc = eddy_proc_wait(local, 30000);
    char *l = logs();
    cr_assert_eq(rc, 130, "eddy local exited %d after SIGINT; log:\n%s", rc, l);
    cr_assert(strstr(l, "eddy local: interrupted"), "log:\n%s", l);
    free(l);
}

static bool log_has_gz_error(void *arg)
{
    (void)arg;
    char *l = eddy_read_file(log_path, NULL);
    bool ok = l && strstr(l, "cut.gz: truncated gzip data");
    free(l);
    return ok || !eddy_proc_alive(local);
}

Test(dir_source, a_truncated_gz_fails_its_task_naming_the_file, .init = setup, .fini = teardown,
     .timeout = 120)
{
    publish(0, "good.txt", false);
    char path[700], cmd[4096];
    snprintf(path, sizeof path, "%s/.whole.gz", in_dir);
    size_t len;
    char *t = file_text(1, &len);
    char plain[700];
    snprintf(plain, sizeof plain, "%s/.plain", dir);
    cr_assert(eddy_write_file(plain, t, len) == 0);
    free(t);
    snprintf(cmd, sizeof cmd, "gzip -c '%s' | head -c 3000 > '%s' && mv '%s' '%s/cut.gz'", plain, path,
             path, in_dir);
    cr_assert_eq(system(cmd), 0);
    start_local();
    bool seen = eddy_poll_until(log_has_gz_error, NULL, 60000);
    char *l = logs();
    cr_assert(seen && strstr(l, "cut.gz: truncated gzip data"),
              "no error naming the truncated file; log:\n%s", l);
    free(l);
}

Test(dir_source, output_with_a_dir_input_is_refused, .init = setup, .fini = teardown, .timeout = 60)
{
    char out[700];
    snprintf(out, sizeof out, "%s/counts.tsv", dir);
    char *argv[] = {EDDY_BINARY, "local", "--control-port", port_s, "--http-port", "0", "--job",
                    "wordcount", "--input", in_uri, "--output", out, NULL};
    char *err_text = NULL;
    int rc = eddy_proc_run(argv, 30000, NULL, &err_text);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, err_text ? err_text : "");
    cr_assert(strstr(err_text, "never reaches"), "%s", err_text);
    free(err_text);

    /* and a dir:// that is not a directory */
    char file_uri[700];
    snprintf(file_uri, sizeof file_uri, "dir://%s/nothing-here", dir);
    char *argv2[] = {EDDY_BINARY, "local", "--control-port", port_s, "--http-port", "0", "--job",
                     "wordcount", "--input", file_uri, NULL};
    rc = eddy_proc_run(argv2, 30000, NULL, &err_text);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, err_text ? err_text : "");
    cr_assert(strstr(err_text, "cannot watch input directory"), "%s", err_text);
    free(err_text);
}
