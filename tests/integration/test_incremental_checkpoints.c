/* test_incremental_checkpoints.c - incremental checkpoints
 * (--checkpoint-full-every) through the real binary: a coordinator and 3
 * workers run a rate-limited wordcount whose input first brings many
 * distinct words (every key group changes) and then only a few (a handful
 * of key groups change per checkpoint), so later checkpoints write a few
 * groups and refer to earlier objects for the rest.
 *
 * Each run checks, with file storage and with s3:// (npm's s3rver,
 * tests/support/s3rver.h):
 *  - a checkpoint after few changed keys writes fewer objects than the
 *    first, full one, and says how many it referred to (/api/v1/jobs
 *    last_checkpoint objects, objects_referenced; /metrics
 *    eddy_checkpoint_referenced_objects);
 *  - a kill -9 of a worker with tasks after such a checkpoint: the job is
 *    restored from it (through its references) and the output is exact;
 *  - once the job ended, every object the two newest checkpoints refer to
 *    is stored, and no object of an older checkpoint is left that neither
 *    refers to (deletion by reference).
 * And: a referenced object of an older checkpoint corrupted, then a kill -9:
 * the restore fails with an error naming that object and the checkpoint
 * that refers to it; the task is not run with part of its state. And an
 * object only the newest checkpoint wrote corrupted, then a kill -9: the
 * coordinator falls back to the older retained checkpoint, whose references
 * deletion by reference kept, and the output is exact.
 * Every wait polls an observable condition with a deadline. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "state/snapshot_manifest.h"
#include "state/snapshot_store.h"
#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"
#include "tests/support/s3rver.h"

#define BUCKET "eddy-incr"
#define RUN_SECONDS 16
#define FIRST_LINES 3000   /* 10 distinct words each: every key group */
#define LATER_LINES 27000  /* three words only */

#if defined(__SANITIZE_ADDRESS__)
#define HB_TIMEOUT "5000"
#else
#define HB_TIMEOUT "3000"
#endif

static eddy_test_s3rver_t *srv;
static eddy_test_cluster_t *cl;

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    eddy_test_s3rver_destroy(&srv);
}

/* Three equal blocks (the source instances read a third of the bytes
 * each, at a third of the rate): many distinct words, then three words. */
static void write_input(const char *path)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    static const char *const few[] = {"alpha", "beta", "gamma"};
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < FIRST_LINES / 3; i++) {
            for (int w = 0; w < 10; w++)
                fprintf(f, "%sw%d", w ? " " : "", (b * FIRST_LINES / 3 + i) * 10 + w);
            fputc('\n', f);
        }
        for (int i = 0; i < LATER_LINES / 3; i++)
            fprintf(f, "%s %s\n", few[i % 3], few[(i + 1) % 3]);
    }
    cr_assert_eq(fclose(f), 0);
}

/* last_checkpoint of job wordcount in /api/v1/jobs (NULL: none yet). */
static json_t *last_checkpoint(void)
{
    long status = 0;
    char *body = eddy_test_http_get(eddy_test_cluster_http_port(cl, 0), "/api/v1/jobs", 2000, &status);
    json_t *doc = body && status == 200 ? json_loads(body, 0, NULL) : NULL;
    free(body);
    json_t *jobs = json_is_array(doc) ? doc : json_object_get(doc, "jobs");
    json_t *found = NULL, *j;
    size_t i;
    json_array_foreach(jobs, i, j)
    {
        const char *id = json_string_value(json_object_get(j, "id"));
        if (id && !strcmp(id, "wordcount"))
            found = json_incref(json_object_get(j, "last_checkpoint"));
    }
    json_decref(doc);
    return found;
}

static long long ck_field(json_t *ck, const char *name)
{
    return (long long)json_integer_value(json_object_get(ck, name));
}

/* ---- what is stored --------------------------------------------------------- */

typedef struct keys {
    char **v;
    size_t n;
} keys_t;

static int add_key(const char *key, uint64_t size, void *ctx)
{
    (void)size;
    keys_t *k = ctx;
    k->v = realloc(k->v, (k->n + 1) * sizeof *k->v);
    k->v[k->n++] = strdup(key);
    return 0;
}

static void keys_free(keys_t *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->v[i]);
    free(k->v);
}

static uint64_t key_id(const char *key)
{
    const char *p = strstr(key, "/chk-");
    return p ? strtoull(p + 5, NULL, 10) : 0;
}

static bool has_key(const keys_t *k, const char *key)
{
    for (size_t i = 0; i < k->n; i++)
        if (!strcmp(k->v[i], key))
            return true;
    return false;
}

/* Adds to refs every object checkpoint id's count manifests name; how
 * many of them are held by an earlier checkpoint. */
static uint32_t add_refs(eddy_snapshot_store_t *st, const keys_t *all, uint64_t id, keys_t *refs)
{
    uint32_t earlier = 0;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "wordcount/chk-%llu/count/refs-", (unsigned long long)id);
    for (size_t i = 0; i < all->n; i++) {
        if (strncmp(all->v[i], prefix, strlen(prefix)))
            continue;
        char *data = NULL;
        size_t len = 0;
        eddy_manifest_entry_t *e = NULL;
        uint32_t n = 0;
        eddy_err_t err = {{0}};
        cr_assert_eq(eddy_snapshot_store_read_key(st, all->v[i], &data, &len, &err), 0, "%s", err.msg);
        cr_assert_eq(eddy_manifest_decode(data, len, id, &e, &n, &err), 0, "%s", err.msg);
        for (uint32_t k = 0; k < n; k++) {
            char key[128];
            snprintf(key, sizeof key, "wordcount/chk-%llu/count/kg-%u.snap",
                     (unsigned long long)e[k].holder, e[k].kg);
            add_key(key, 0, refs);
            earlier += e[k].holder != id;
        }
        free(e);
        free(data);
    }
    return earlier;
}

/* The two newest stored checkpoints up to last with count manifests
 * (--checkpoints-retained 2): everything they refer to is there, and no
 * object of an older checkpoint that they do not refer to is left. True
 * when that holds; *why says what does not. */
static bool storage_collected(const char *root, uint64_t last, char *why, size_t cap)
{
    eddy_err_t err = {{0}};
    eddy_snapshot_store_t *st = eddy_snapshot_store_new(root, &err);
    cr_assert_not_null(st, "%s", err.msg);
    keys_t all = {0}, refs = {0};
    cr_assert_eq(eddy_snapshot_store_list_keys(st, "wordcount", add_key, &all, &err), 0, "%s", err.msg);
    uint64_t keep[2] = {0, 0};
    for (size_t i = 0; i < all.n; i++) {
        uint64_t id = key_id(all.v[i]);
        if (!strstr(all.v[i], "/count/refs-") || id > last || id == keep[0] || id == keep[1])
            continue;
        if (id > keep[0]) {
            keep[1] = keep[0];
            keep[0] = id;
        } else if (id > keep[1]) {
            keep[1] = id;
        }
    }
    bool ok = keep[0] == last;
    if (!ok)
        snprintf(why, cap, "the newest checkpoint with manifests is %llu, not %llu",
                 (unsigned long long)keep[0], (unsigned long long)last);
    for (int k = 0; ok && k < 2 && keep[k]; k++)
        add_refs(st, &all, keep[k], &refs);
    for (size_t i = 0; ok && i < refs.n; i++)
        if (!has_key(&all, refs.v[i])) {
            snprintf(why, cap, "%s is referred to but not stored", refs.v[i]);
            ok = false;
        }
    uint64_t oldest = keep[1] ? keep[1] : keep[0];
    for (size_t i = 0; ok && i < all.n; i++)
        if (key_id(all.v[i]) && key_id(all.v[i]) < oldest && !has_key(&refs, all.v[i])) {
            snprintf(why, cap, "%s is left, and no retained checkpoint refers to it", all.v[i]);
            ok = false;
        }
    keys_free(&all);
    keys_free(&refs);
    eddy_snapshot_store_destroy(&st);
    return ok;
}

/* ---- the run ----------------------------------------------------------------- */

static eddy_test_job_view_t wait_view(const eddy_test_job_want_t *want, uint64_t timeout_ms,
                                      const char *what)
{
    eddy_test_job_view_t last = {0};
    bool gone = false;
    if (!eddy_test_cluster_wait_job(cl, "wordcount", want, timeout_ms, &last, &gone)) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("timed out waiting for %s (state %s, checkpoint %lld, restarts %lld)%s; "
                       "logs:\n%s",
                       what, last.state, (long long)last.ck_id, (long long)last.restarts,
                       gone ? " - the coordinator exited" : "", l);
    }
    return last;
}

static void run(const char *storage, bool own_dirs)
{
    const char *with_uri[] = {"--checkpoint-storage", storage, "--checkpoint-full-every", "8",
                              "--checkpoints-retained", "2", NULL};
    const char *with_dir[] = {"--checkpoint-full-every", "8", "--checkpoints-retained", "2", NULL};
    eddy_test_cluster_opts_t o = {.tag = "incr", .coordinators = 1, .workers = 3,
                                  .checkpoint_interval = "300", .heartbeat_timeout_ms = HB_TIMEOUT,
                                  .coord_args = storage ? with_uri : with_dir,
                                  .own_snapshot_dirs = own_dirs};
    eddy_err_t err = {{0}};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    char *input = eddy_test_cluster_path(cl, "input.txt");
    char *output = eddy_test_cluster_path(cl, "counts.tsv");
    const char *root = storage ? storage : eddy_test_cluster_path(cl, "snapshots");
    write_input(input);
    char rate[32];
    snprintf(rate, sizeof rate, "%d", (FIRST_LINES + LATER_LINES) / RUN_SECONDS);
    const char *job[] = {"--job", "wordcount", "--input", input, "--output", output,
                         "--parallelism", "3", "--rate", rate, NULL};
    char *out = NULL;
    cr_assert(eddy_test_cluster_submit(cl, job, &out, &err) == 0, "%s", err.msg);
    free(out);

    /* the first checkpoint is full; a later one, after few changed keys,
     * writes fewer objects and refers to earlier ones for the rest */
    wait_view(&(eddy_test_job_want_t){.state = "running", .min_completed = 1}, 30000,
              "a completed checkpoint");
    long long full_objects = 0, objects = 0, referenced = 0, bytes = 0, full_bytes = 0;
    uint64_t deadline = eddy_mono_ms() + 30000;
    while (eddy_mono_ms() < deadline) {
        json_t *ck = last_checkpoint();
        if (ck && ck_field(ck, "id") == 1) {
            full_objects = ck_field(ck, "objects");
            full_bytes = ck_field(ck, "bytes");
        }
        objects = ck ? ck_field(ck, "objects") : 0;
        referenced = ck ? ck_field(ck, "objects_referenced") : 0;
        bytes = ck ? ck_field(ck, "bytes") : 0;
        json_decref(ck);
        if (referenced > 64)
            break;
        eddy_nap_ms(50);
    }
    cr_assert_gt(referenced, 64, "no checkpoint referred to earlier ones (last: %lld objects, "
                 "%lld referred to)", objects, referenced);
    cr_assert_lt(objects, referenced, "an incremental checkpoint wrote %lld objects and referred "
                 "to %lld", objects, referenced);
    if (full_objects)
        cr_assert_lt(objects, full_objects, "incremental %lld objects, full %lld", objects,
                     full_objects);
    long long metric = eddy_test_scrape_sum(eddy_test_cluster_http_port(cl, 0),
                                            "eddy_checkpoint_referenced_objects{job=\"wordcount\"");
    cr_assert_geq(metric, 0, "no eddy_checkpoint_referenced_objects series");

    /* kill -9 a worker with tasks: restored through the references, exact */
    pid_t victim = eddy_test_busy_worker(eddy_test_cluster_port(cl, 0), 0);
    cr_assert_gt(victim, 0, "no worker with tasks");
    cr_assert_eq(kill(victim, SIGKILL), 0);
    wait_view(&(eddy_test_job_want_t){.state = "running", .min_restarts = 1}, 30000,
              "the restore after kill -9");
    char *clog = eddy_read_file(eddy_test_cluster_coordinator_log(cl, 0), NULL);
    uint64_t from = 0;
    cr_assert(clog && eddy_test_restores_logged(clog, &from) >= 1, "no restore logged:\n%s", clog);
    free(clog);

    /* a (fluid) rescale moves key groups between instances; then, once a
     * checkpoint after it refers to objects written at parallelism 3, a
     * second kill -9: restored at parallelism 2 through those references */
    eddy_test_job_view_t v =
        wait_view(&(eddy_test_job_want_t){.state = "running", .min_completed = 1, .min_restarts = 1},
                  30000, "a checkpoint after the restore");
    const char *rescale[] = {"rescale", "wordcount", "count", "2", NULL};
    char *rerr = NULL;
    int rc = eddy_test_cluster_ctl(cl, rescale, 90000, NULL, &rerr);
    if (rc != 0) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("eddy rescale wordcount count 2 exited %d: %s\nlogs:\n%s", rc, rerr, l);
    }
    free(rerr);
    v = eddy_test_job_view(eddy_test_cluster_port(cl, 0), "wordcount");
    int64_t after = v.ck_completed;
    deadline = eddy_mono_ms() + 30000;
    bool referred = false;
    while (!referred && !strcmp(v.state, "running") && eddy_mono_ms() < deadline) {
        eddy_nap_ms(50);
        v = eddy_test_job_view(eddy_test_cluster_port(cl, 0), "wordcount");
        json_t *ck = last_checkpoint();
        referred = v.ck_completed > after + 1 && ck_field(ck, "objects_referenced") > 64;
        json_decref(ck);
    }
    if (referred) {
        victim = eddy_test_busy_worker(eddy_test_cluster_port(cl, 0), 0);
        cr_assert_gt(victim, 0, "no worker with tasks");
        cr_assert_eq(kill(victim, SIGKILL), 0);
        wait_view(&(eddy_test_job_want_t){.min_restarts = 2}, 30000, "the second restore");
    }
    v = wait_view(&(eddy_test_job_want_t){.state = "finished"}, 120000,
                                       "the job to finish");
    size_t gl = 0, el = 0;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    if (same != 1) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("output differs from the reference (%zu vs %zu bytes, %d); logs:\n%s", gl,
                       el, same, l);
    }

    /* deletion by reference (the reaper runs off the loop: poll) */
    json_t *ck = last_checkpoint();
    uint64_t last = (uint64_t)ck_field(ck, "id");
    json_decref(ck);
    char why[512] = "";
    deadline = eddy_mono_ms() + 20000;
    bool collected = false;
    while (!(collected = storage_collected(root, last, why, sizeof why)) && eddy_mono_ms() < deadline)
        eddy_nap_ms(100);
    cr_assert(collected, "after checkpoint %llu: %s", (unsigned long long)last, why);
    cr_log_info("incremental (%s): full checkpoint %lld objects / %lld bytes, incremental %lld "
                "objects / %lld bytes (%lld referred to); restored from %llu; %lld restarts%s",
                storage ? "s3" : "file", full_objects, full_bytes, objects, bytes, referenced,
                (unsigned long long)from, (long long)v.restarts,
                referred ? "" : " (the job ended before a second kill)");
}

Test(incremental_checkpoints, file_kill9_exact_and_collected, .fini = teardown, .timeout = 240)
{
    run(NULL, false);
}

Test(incremental_checkpoints, s3_kill9_exact_and_collected, .fini = teardown, .timeout = 240)
{
    eddy_err_t err = {{0}};
    srv = eddy_test_s3rver_start_with_env(BUCKET, &err);
    cr_assert_not_null(srv, "cannot start s3rver: %s", err.msg);
    static char uri[512];
    snprintf(uri, sizeof uri, "s3://%s/ck?endpoint=%s&region=us-east-1", BUCKET,
             eddy_test_s3rver_url(srv));
    run(uri, true);
}

/* An object that checkpoint `id` refers to, held by an older checkpoint
 * (older) or written by `id` itself, into key; false: none (yet). */
static bool referenced_object(const char *root, uint64_t id, bool older, char *key, size_t cap)
{
    eddy_err_t err = {{0}};
    eddy_snapshot_store_t *st = eddy_snapshot_store_new(root, &err);
    cr_assert_not_null(st, "%s", err.msg);
    keys_t all = {0}, refs = {0};
    cr_assert_eq(eddy_snapshot_store_list_keys(st, "wordcount", add_key, &all, &err), 0, "%s", err.msg);
    add_refs(st, &all, id, &refs);
    bool found = false;
    for (size_t i = 0; !found && i < refs.n; i++)
        if ((older ? key_id(refs.v[i]) < id : key_id(refs.v[i]) == id) && has_key(&all, refs.v[i])) {
            snprintf(key, cap, "%s", refs.v[i]);
            found = true;
        }
    keys_free(&all);
    keys_free(&refs);
    eddy_snapshot_store_destroy(&st);
    return found;
}

/* A wordcount on one coordinator and two workers, incremental checkpoints
 * every interval (a full one only every 1000th), `retained` kept; the
 * input, output and file storage root come back through the pointers. */
static void start_wordcount(const char *tag, const char *interval, const char *retained,
                            const char *parallelism, const char *rate, char **input,
                            char **output, const char **root)
{
    const char *args[] = {"--checkpoint-full-every", "1000", "--checkpoints-retained", retained,
                          NULL};
    /* restores read what the store holds (objects are corrupted on purpose):
     * no survivor serves its groups from its local copies */
    const char *worker_args[] = {"--no-local-recovery", NULL};
    eddy_test_cluster_opts_t o = {.tag = tag, .coordinators = 1, .workers = 2,
                                  .checkpoint_interval = interval,
                                  .heartbeat_timeout_ms = HB_TIMEOUT, .coord_args = args,
                                  .worker_args = worker_args};
    eddy_err_t err = {{0}};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    *input = eddy_test_cluster_path(cl, "input.txt");
    *output = eddy_test_cluster_path(cl, "counts.tsv");
    *root = eddy_test_cluster_path(cl, "snapshots");
    write_input(*input);
    const char *job[] = {"--job", "wordcount", "--input", *input, "--output", *output,
                         "--parallelism", parallelism, "--rate", rate, NULL};
    char *out = NULL;
    cr_assert(eddy_test_cluster_submit(cl, job, &out, &err) == 0, "%s", err.msg);
    free(out);
}

/* Polls (every nap_ms, up to 60 s) for a completed checkpoint of id at
 * least min_id that refers to more than 64 objects, one of them stored
 * (of an older checkpoint when older, else of its own) whose key comes
 * back in key. Returns the checkpoint's id. */
static long long wait_for_reference(const char *root, long long min_id, bool older, char *key,
                                    size_t cap, unsigned nap_ms, const char *what)
{
    uint64_t deadline = eddy_mono_ms() + 60000;
    for (;;) {
        json_t *ck = last_checkpoint();
        long long id = ck ? ck_field(ck, "id") : 0, refs = ck ? ck_field(ck, "objects_referenced") : 0;
        json_decref(ck);
        if (id >= min_id && refs > 64 && referenced_object(root, (uint64_t)id, older, key, cap))
            return id;
        cr_assert_lt(eddy_mono_ms(), deadline, "%s", what);
        eddy_nap_ms(nap_ms);
    }
}

/* Overwrites two bytes of ROOT/key's payload, then kills -9 a worker that
 * runs tasks: the restore that follows must read that object. */
static void corrupt_and_kill_a_worker(const char *root, const char *key)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, key);
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 30, SEEK_SET);
    fputc('!', f);
    fputc('!', f);
    fclose(f);
    pid_t victim = eddy_test_busy_worker(eddy_test_cluster_port(cl, 0), 0);
    cr_assert_gt(victim, 0, "no worker with tasks");
    cr_assert_eq(kill(victim, SIGKILL), 0);
}

Test(incremental_checkpoints, corrupt_referenced_object_is_named, .fini = teardown, .timeout = 180)
{
    char *input, *output;
    const char *root;
    start_wordcount("incr-bad", "300", "1", "2", "1000", &input, &output, &root);
    /* a checkpoint that refers to an older one's objects, which the
     * collection left in place for it */
    char key[256] = "";
    wait_for_reference(root, 0, true, key, sizeof key, 50,
                       "no checkpoint referring to an older object");
    corrupt_and_kill_a_worker(root, key);
    /* the restore names the object and the checkpoint holding it */
    char needle[300];
    snprintf(needle, sizeof needle, "%s", strrchr(key, '/') + 1); /* kg-N.snap */
    uint64_t deadline = eddy_mono_ms() + 60000;
    char *l = NULL;
    for (;;) {
        free(l);
        l = eddy_test_cluster_log_text(cl);
        char *hit = l ? strstr(l, "is held by checkpoint") : NULL;
        if (hit && strstr(l, needle) && strstr(l, "checksum"))
            break;
        if (eddy_mono_ms() > deadline)
            cr_assert_fail("no restore error naming %s; logs:\n%s", key, l);
        eddy_nap_ms(100);
    }
    free(l);
    cr_log_info("corrupted %s: the restore names it", key);
}

Test(incremental_checkpoints, older_retained_restores_through_references, .fini = teardown,
     .timeout = 240)
{
    char *input, *output;
    const char *root;
    char rate[32];
    snprintf(rate, sizeof rate, "%d", (FIRST_LINES + LATER_LINES) / RUN_SECONDS);
    start_wordcount("incr-old", "1000", "2", "3", rate, &input, &output, &root);
    /* the newest checkpoint refers to older objects, and so does the one
     * before it (both retained) */
    char key[256] = "";
    long long id = wait_for_reference(root, 4, false, key, sizeof key, 20,
                                      "no incremental checkpoint after another");
    corrupt_and_kill_a_worker(root, key);
    /* checkpoint id is unusable: the restore falls back to the one before */
    char needle[96];
    snprintf(needle, sizeof needle, "checkpoint %lld cannot be restored", id);
    uint64_t deadline = eddy_mono_ms() + 60000;
    while (eddy_test_cluster_log_count(cl, "coordinator.log", needle) == 0) {
        if (eddy_mono_ms() > deadline) {
            char *l = eddy_test_cluster_log_text(cl);
            cr_assert_fail("no fall back from checkpoint %lld (corrupted %s); logs:\n%s", id, key, l);
        }
        eddy_nap_ms(50);
    }
    wait_view(&(eddy_test_job_want_t){.state = "finished"}, 120000, "the job to finish");
    size_t gl = 0, el = 0;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    if (same != 1) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("output differs from the reference (%zu vs %zu bytes, %d); logs:\n%s", gl,
                       el, same, l);
    }
    cr_log_info("corrupted %s of checkpoint %lld: restored from the one before, exact", key, id);
}
