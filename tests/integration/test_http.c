/* test_http.c - the coordinator's HTTP API while a job runs.
 *
 * Starts a rate-limited, unbounded wordcount under `eddy local` on its own
 * ports and checks, with libcurl against the real listener: GET /healthz
 * answers ok, GET /api/v1/jobs is JSON listing the job, GET /api/v1/scaling
 * is a JSON list, and GET /metrics is valid Prometheus text according to
 * `promtool check metrics` (Debian's prometheus package; the test fails
 * with a clear message when promtool is missing rather than skipping). */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define PROMTOOL_DEFAULT "/usr/bin/promtool"

static eddy_test_cluster_t *cl;
static int ports[2];

static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "http", .workers = 2, .checkpoint_interval = "500",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    const char *job[] = {"--quiet", "--job", "wordcount", "--generate", "--lines", "0", "--rate",
                         "2000", NULL};
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    eddy_test_job_want_t running = {.state = "running"};
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &running, 30000, NULL, NULL)) {
        char *log = eddy_test_cluster_log_text(cl);
        cr_assert_fail("job never reached state running; log:\n%s", log);
    }
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
    curl_global_cleanup();
}

/* GET http://127.0.0.1:PORT/path; returns the status and the body. */
static long get(const char *path, char **body, char *content_type, size_t ct_size)
{
    eddy_test_http_reply_t r;
    eddy_test_http_request(ports[1], "GET", path, NULL, NULL, 10000, &r);
    cr_assert(r.status, "%s", r.error);
    if (content_type)
        snprintf(content_type, ct_size, "%s", r.content_type);
    free(r.headers);
    *body = r.body;
    return r.status;
}

Test(http, healthz_ok, .init = setup, .fini = teardown, .timeout = 90)
{
    char *body;
    long st = get("/healthz", &body, NULL, 0);
    cr_assert_eq(st, 200, "status %ld body %s", st, body);
    cr_assert(strstr(body, "ok"), "body: %s", body);
    free(body);
}

Test(http, jobs_api_lists_job, .init = setup, .fini = teardown, .timeout = 90)
{
    char *body, ct[128];
    long st = get("/api/v1/jobs", &body, ct, sizeof ct);
    cr_assert_eq(st, 200, "status %ld body %s", st, body);
    cr_assert(strstr(ct, "json"), "Content-Type '%s'", ct);
    json_error_t jerr;
    json_t *doc = json_loads(body, 0, &jerr);
    cr_assert(doc, "not JSON (%s): %.200s", jerr.text, body);
    json_t *jobs = json_is_array(doc) ? doc : json_object_get(doc, "jobs");
    cr_assert(json_is_array(jobs), "no job list in %.200s", body);
    bool found = false;
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        const char *id = json_string_value(json_object_get(j, "id"));
        found |= id && !strcmp(id, "wordcount");
    }
    cr_assert(found, "job 'wordcount' not listed: %.300s", body);
    json_decref(doc);
    free(body);

    st = get("/api/v1/scaling", &body, NULL, 0);
    cr_assert_eq(st, 200, "scaling: status %ld", st);
    doc = json_loads(body, 0, &jerr);
    cr_assert(doc && (json_is_array(doc) || json_is_object(doc)), "scaling not JSON: %.200s", body);
    json_decref(doc);
    free(body);
}

Test(http, metrics_pass_promtool, .init = setup, .fini = teardown, .timeout = 90)
{
    const char *promtool = getenv("EDDY_PROMTOOL");
    if (!promtool || !*promtool)
        promtool = PROMTOOL_DEFAULT;
    cr_assert(access(promtool, X_OK) == 0,
              "promtool not found at %s: install Debian's 'prometheus' package (scripts/setup.sh "
              "does) or set EDDY_PROMTOOL",
              promtool);
    char *body, ct[128];
    long st = get("/metrics", &body, ct, sizeof ct);
    cr_assert_eq(st, 200, "status %ld", st);
    cr_assert(strstr(ct, "text/plain"), "Content-Type '%s'", ct);
    cr_assert(strstr(body, "# TYPE"), "no TYPE lines in:\n%.400s", body);
    char path[700], cmd[1600];
    snprintf(path, sizeof path, "%s/metrics.txt", eddy_test_cluster_dir(cl));
    cr_assert(eddy_write_file(path, body, strlen(body)) == 0);
    snprintf(cmd, sizeof cmd, "'%s' check metrics < '%s'", promtool, path);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    char *out = NULL, *err = NULL;
    int rc = eddy_proc_run(argv, 30000, &out, &err);
    cr_assert_eq(rc, 0, "promtool check metrics exited %d:\n%s%s\nmetrics were:\n%.2000s", rc, out,
                 err, body);
    free(out);
    free(err);
    free(body);
}
