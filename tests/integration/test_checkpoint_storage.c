/* test_checkpoint_storage.c - checkpoints in an S3 bucket
 * (--checkpoint-storage s3://BUCKET/PREFIX?endpoint=URL&region=R) through
 * the real binary, against npm's s3rver on a free loopback port
 * (tests/support/s3rver.h).
 *
 * The cluster shares no directory: the coordinator and every worker get a
 * --snapshot-dir of their own (cluster.h own_snapshot_dirs), and only the
 * coordinator names the bucket; the workers learn it from DEPLOY. A
 * rate-limited wordcount runs on 3 workers; after a completed checkpoint
 * one worker that runs tasks is SIGKILLed, the job is restored on the two
 * others (which can only read the dead worker's key groups from the
 * bucket), then `eddy rescale` moves key groups with --migration sudden
 * (whose migration snapshot goes through the bucket too). The output must
 * equal the reference byte for byte, the bucket must hold the checkpoint
 * objects, and no process's own snapshot directory may hold any.
 *
 * The second group of tests: a wrong access key id (s3rver knows only
 * S3RVER) or an endpoint nobody listens on stops `eddy coordinator`,
 * `eddy worker` and `eddy local` at start with a non-zero exit and one
 * line on stderr naming the checkpoint storage; a usage error exits 2.
 *
 * Every wait polls an observable condition (status, logs, exit) with a
 * deadline. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "state/object_store.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"
#include "tests/support/s3rver.h"

#define BUCKET "eddy-ck"
#define PREFIX "team/ck"
#define TEXT_BYTES (1536u * 1024)
#define RUN_SECONDS 10 /* --rate is chosen so an undisturbed run takes this long */

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "5000"
#else
#define HB_TIMEOUT "3000"
#endif

static eddy_test_s3rver_t *srv;
static eddy_test_cluster_t *cl;
static char uri[512];

static void s3_setup(void)
{
    eddy_err_t err = {{0}};
    srv = eddy_test_s3rver_start_with_env(BUCKET, &err);
    cr_assert_not_null(srv, "cannot start s3rver: %s", err.msg);
    snprintf(uri, sizeof uri, "s3://%s/%s?endpoint=%s&region=us-east-1", BUCKET, PREFIX,
             eddy_test_s3rver_url(srv));
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    eddy_test_s3rver_destroy(&srv);
}

/* ---- the bucket ----------------------------------------------------------- */

typedef struct listing {
    int objects, keyed;
    char first[256];
} listing_t;

static int count_key(const char *key, uint64_t size, void *ctx)
{
    (void)size;
    listing_t *l = ctx;
    if (!l->objects)
        snprintf(l->first, sizeof l->first, "%s", key);
    l->objects++;
    l->keyed += strstr(key, "/count/kg-") != NULL;
    return 0;
}

/* The objects of job wordcount under the store's prefix. */
static listing_t list_bucket(void)
{
    eddy_err_t err = {{0}};
    listing_t l = {0};
    eddy_object_store_t *s = eddy_object_store_open(uri, NULL, &err);
    cr_assert_not_null(s, "open %s: %s", uri, err.msg);
    int rc = eddy_object_store_list(s, "wordcount/", count_key, &l, &err);
    cr_assert_eq(rc, 0, "list: %s", err.msg);
    eddy_object_store_destroy(&s);
    return l;
}

/* Nothing named chk-* anywhere under dir (missing is fine). */
static bool holds_checkpoint_files(const char *dir, char *found, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *e;
    bool any = false;
    while (!any && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!strncmp(e->d_name, "chk-", 4)) {
            snprintf(found, cap, "%s", path);
            any = true;
            break;
        }
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            any = holds_checkpoint_files(path, found, cap);
    }
    closedir(d);
    return any;
}

/* ---- the cluster ---------------------------------------------------------- */

static char *logs(void)
{
    return eddy_test_cluster_log_text(cl);
}

static eddy_test_job_view_t wait_view(const eddy_test_job_want_t *want, uint64_t timeout_ms,
                                      const char *what)
{
    eddy_test_job_view_t last = {0};
    bool gone = false;
    if (!eddy_test_cluster_wait_job(cl, "wordcount", want, timeout_ms, &last, &gone)) {
        char *l = logs();
        cr_assert_fail("timed out waiting for %s (state %s, checkpoint %lld, restarts %lld)%s; "
                       "logs:\n%s",
                       what, last.state, (long long)last.ck_id, (long long)last.restarts,
                       gone ? " - the coordinator exited" : "", l);
    }
    return last;
}

/* The most key groups one worker's DEPLOY loaded ("loaded N key groups"). */
static unsigned long long max_groups_loaded(const char *log)
{
    unsigned long long most = 0;
    for (const char *p = log; (p = strstr(p, ", loaded ")); ) {
        p += strlen(", loaded ");
        unsigned long long n = strtoull(p, NULL, 10);
        if (n > most)
            most = n;
    }
    return most;
}

/* A worker killed after a checkpoint to the bucket: the job is restored
 * from the bucket on the others, rescaled through it, and ends exact. */
Test(checkpoint_storage, s3_worker_killed_then_rescaled, .init = s3_setup, .fini = teardown,
     .timeout = 240)
{
    const char *coord_args[] = {"--checkpoint-storage", uri, "--migration", "sudden", NULL};
    eddy_test_cluster_opts_t o = {.tag = "ckstore", .coordinators = 1, .workers = 3,
                                  .checkpoint_interval = "300", .heartbeat_timeout_ms = HB_TIMEOUT,
                                  .coord_args = coord_args, .own_snapshot_dirs = true};
    eddy_err_t err = {{0}};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    char *input = eddy_test_cluster_path(cl, "input.txt");
    char *output = eddy_test_cluster_path(cl, "counts.tsv");
    size_t lines = 0, expected_len = 0;
    char *expected = eddy_test_wc_reference(input, TEXT_BYTES, 2626, &expected_len, &lines, &err);
    cr_assert(expected, "%s", err.msg);
    free(expected);
    char rate[32];
    snprintf(rate, sizeof rate, "%zu", lines / RUN_SECONDS);
    const char *job[] = {"--job", "wordcount", "--input", input, "--output", output,
                         "--parallelism", "3", "--rate", rate, NULL};
    char *out = NULL;
    cr_assert(eddy_test_cluster_submit(cl, job, &out, &err) == 0, "%s", err.msg);
    free(out);

    /* a checkpoint completed: it is in the bucket */
    eddy_test_job_view_t v =
        wait_view(&(eddy_test_job_want_t){.state = "running", .min_completed = 1}, 30000,
                  "a completed checkpoint");
    listing_t before = list_bucket();
    int64_t first_ck = v.ck_id;
    cr_assert_gt(before.keyed, 0, "no key group of count in the bucket after checkpoint %lld "
                 "(%d objects)", (long long)v.ck_id, before.objects);

    /* kill -9 a worker that runs tasks */
    pid_t victim = eddy_test_busy_worker(eddy_test_cluster_port(cl, 0), 0);
    cr_assert_gt(victim, 0, "no worker with tasks");
    cr_assert_eq(kill(victim, SIGKILL), 0);
    v = wait_view(&(eddy_test_job_want_t){.state = "running", .min_restarts = 1}, 30000,
                  "the restore after kill -9");
    char *clog = eddy_read_file(eddy_test_cluster_coordinator_log(cl, 0), NULL);
    uint64_t from = 0;
    cr_assert(clog && eddy_test_restores_logged(clog, &from) >= 1, "no restore logged:\n%s", clog);
    cr_assert_geq(from, 1, "restored from checkpoint %llu, want a completed one",
                  (unsigned long long)from);
    cr_assert(strstr(clog, uri), "the coordinator does not name the bucket:\n%s", clog);
    free(clog);
    /* a checkpoint of the restored epoch, then a sudden rescale through the bucket */
    v = wait_view(&(eddy_test_job_want_t){.state = "running", .min_completed = v.ck_completed + 1,
                                          .min_restarts = 1},
                  30000, "a checkpoint after the restore");
    const char *rescale[] = {"rescale", "wordcount", "count", "2", NULL};
    char *rerr = NULL;
    int rc = eddy_test_cluster_ctl(cl, rescale, 90000, NULL, &rerr);
    if (rc != 0) {
        char *l = logs();
        cr_assert_fail("eddy rescale wordcount count 2 exited %d: %s\nlogs:\n%s", rc, rerr, l);
    }
    free(rerr);

    v = wait_view(&(eddy_test_job_want_t){.state = "finished"}, 120000, "the job to finish");
    size_t gl = 0, el = 0;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    if (same != 1) {
        char *l = logs();
        cr_assert_fail("output differs from the reference (%zu vs %zu bytes, %d); logs:\n%s", gl,
                       el, same, l);
    }
    /* a surviving worker loaded key groups at the restore: from the
     * bucket, since no worker wrote a file of its own (checked below) */
    char *l = logs();
    cr_assert_gt(max_groups_loaded(l), 0, "no worker loaded a key group at the restore:\n%s", l);
    char found[1400] = "";
    for (int i = 0; i < eddy_test_cluster_n_workers(cl); i++) {
        char name[64];
        snprintf(name, sizeof name, "snapshots-worker-%d", i + 1);
        cr_assert(!holds_checkpoint_files(eddy_test_cluster_path(cl, name), found, sizeof found),
                  "a worker wrote checkpoint files locally: %s", found);
    }
    cr_assert(!holds_checkpoint_files(eddy_test_cluster_path(cl, "snapshots-coordinator-1"), found,
                                      sizeof found),
              "the coordinator's directory holds checkpoint files: %s", found);
    free(l);
    cr_log_info("s3_worker_killed_then_rescaled: %d objects in the bucket at checkpoint %lld, "
                "restored from %llu, %lld restarts",
                before.objects, (long long)first_ck, (unsigned long long)from,
                (long long)v.restarts);
}

/* ---- failures at start ---------------------------------------------------- */

/* One line on stderr (a trailing newline allowed), naming what. */
static void expect_one_line(const char *who, int rc, const char *errout, const char *what)
{
    cr_assert(rc != 0 && rc != -1, "%s exited %d (want a failure at start): %s", who, rc,
              errout ? errout : "");
    cr_assert(errout && *errout, "%s exited %d saying nothing", who, rc);
    const char *nl = strchr(errout, '\n');
    cr_assert(!nl || nl[1] == '\0', "%s wrote more than one line:\n%s", who, errout);
    cr_assert(strstr(errout, what), "%s: the error does not mention '%s': %s", who, what, errout);
}

static void start_failures(const char *storage, const char *what)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "ckfail"};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    char *meta = eddy_test_cluster_path(cl, "meta");
    char *input = eddy_test_cluster_path(cl, "in.txt");
    cr_assert(eddy_write_file(input, "a b\n", 4) == 0);
    char *url = eddy_test_cluster_url(cl, 0);
    char *errout = NULL;

    char *coord[] = {EDDY_BINARY, "coordinator", "--bind", url, "--http-port", "0", "--metastore",
                     meta, "--checkpoint-storage", (char *)storage, NULL};
    int rc = eddy_proc_run(coord, 60000, NULL, &errout);
    expect_one_line("eddy coordinator", rc, errout, what);
    cr_log_info("coordinator: exit %d: %s", rc, errout);
    free(errout);

    char *worker[] = {EDDY_BINARY, "worker", "--coordinator", url, "--register-timeout-ms",
                      "60000", "--checkpoint-storage", (char *)storage, NULL};
    rc = eddy_proc_run(worker, 60000, NULL, &errout);
    expect_one_line("eddy worker", rc, errout, what);
    free(errout);

    char *local[] = {EDDY_BINARY, "local", "--quiet", "--workers", "1", "--control-port",
                     eddy_test_cluster_port_s(cl, 0), "--http-port", "0", "--checkpoint-storage",
                     (char *)storage, "--job", "wordcount", "--input", input, NULL};
    rc = eddy_proc_run(local, 60000, NULL, &errout);
    expect_one_line("eddy local", rc, errout, what);
    free(errout);
}

Test(checkpoint_storage, wrong_credentials_fail_at_start, .init = s3_setup, .fini = teardown,
     .timeout = 200)
{
    setenv("AWS_ACCESS_KEY_ID", "NOT-A-KEY-S3RVER-KNOWS", 1);
    start_failures(uri, "checkpoint-storage");
}

Test(checkpoint_storage, unreachable_endpoint_fails_at_start, .fini = teardown, .timeout = 200)
{
    setenv("AWS_ACCESS_KEY_ID", EDDY_TEST_S3RVER_KEY_ID, 1);
    setenv("AWS_SECRET_ACCESS_KEY", EDDY_TEST_S3RVER_SECRET, 1);
    int port;
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_free_ports(1, &port, &err) == 0, "%s", err.msg);
    snprintf(uri, sizeof uri, "s3://%s/%s?endpoint=http://127.0.0.1:%d&region=us-east-1", BUCKET,
             PREFIX, port);
    start_failures(uri, "checkpoint-storage");
}

Test(checkpoint_storage, usage_errors_exit_2, .fini = teardown, .timeout = 60)
{
    static const char *const cases[][6] = {
        {"coordinator", "--checkpoint-storage", "file:///tmp/x", "--snapshot-dir", "/tmp/y", "--snapshot-dir"},
        {"coordinator", "--checkpoint-storage", "ftp://host/x", NULL, NULL, "want file:///DIR"},
        {"worker", "--checkpoint-storage", "s3://KEY:SECRET@bucket/p?endpoint=http://h", NULL, NULL,
         "no credentials"},
        {"local", "--checkpoint-storage", "file://relative/dir", NULL, NULL, "ABSOLUTE"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8] = {EDDY_BINARY};
        int k = 1;
        for (int j = 0; j < 5 && cases[i][j]; j++)
            argv[k++] = (char *)cases[i][j];
        if (!strcmp(cases[i][0], "local")) {
            argv[k++] = "--job";
            argv[k++] = "wordcount";
        }
        argv[k] = NULL;
        char *errout = NULL;
        int rc = eddy_proc_run(argv, 20000, NULL, &errout);
        cr_assert_eq(rc, 2, "eddy %s %s: exit %d, want 2: %s", cases[i][0], cases[i][2], rc,
                     errout ? errout : "");
        cr_assert(errout && strstr(errout, cases[i][5]), "eddy %s %s: %s", cases[i][0],
                  cases[i][2], errout ? errout : "");
        free(errout);
    }
}
