/* test_dashboard.c - the web dashboard at / in a real browser.
 *
 * A rate-limited wordcount runs under `eddy local`; headless Chromium
 * (Debian's chromium, driven over its DevTools protocol by
 * tests/support/cdp.c) loads http://127.0.0.1:PORT/ once and the test
 * watches the page update itself: the live "records read" number changes
 * between polls, the job graph shows the three operators with their
 * parallelism, and after `eddy rescale wordcount count 3` (sent while the
 * page is open) the parallelism chart's line for count has been at 2 and
 * at 3, with a rescale marker whose tooltip says what happened; the
 * latency tile, the sink's latency in the operator table and the latency
 * chart show numbers measured from source to sink. A
 * screenshot of the page is saved in the build directory
 * (test-artefacts/dashboard.png) and its path printed.
 *
 * Skipped, saying so, only when no chromium binary is installed
 * (scripts/setup.sh installs it, so CI runs it). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/support/cdp.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define LINES 400000
#define SOURCE_RATE "6000" /* lines/s: about a minute of work, far more than the test needs */

static eddy_test_cluster_t *cl;
static char *input, *logp, *browser_log, *profile, *coord;
static int ports[2];
static char url[64];
static eddy_cdp_t *browser;

static char *log_text(const char *path)
{
    char *s = eddy_read_file(path, NULL);
    return s ? s : strdup("(no log)");
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* eddy's own heartbeat timing */
    eddy_test_cluster_opts_t o = {.tag = "dashboard", .workers = 2, .checkpoint_interval = "500",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    logp = eddy_test_cluster_path(cl, "local.log");
    browser_log = eddy_test_cluster_path(cl, "chromium.log");
    profile = eddy_test_cluster_path(cl, "profile");
    cr_assert(mkdir(profile, 0700) == 0);
    cr_assert(eddy_gen_lines(input, LINES, 11, &err) == 0, "%s", err.msg);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    coord = eddy_test_cluster_url(cl, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ports[1]);
}

static void teardown(void)
{
    eddy_cdp_stop(&browser);
    eddy_test_cluster_destroy(&cl);
}

static void start_job(void)
{
    eddy_err_t err = {{0}};
    const char *job[] = {"--quiet", "--job", "wordcount", "--input", input, "--parallelism", "2",
                         "--rate", SOURCE_RATE, NULL};
    /* The changelog (to /dev/null): rows flow to the sink as they change,
     * so its batches carry their ingestion time and the page has a latency
     * to show (--output's table is written once at the end). */
    cr_assert(eddy_test_cluster_start_local(cl, job, &err) == 0, "%s", err.msg);
    eddy_test_job_want_t running = {.state = "running"};
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &running, 60000, NULL, NULL))
        cr_assert_fail("the job never reached state running; log:\n%s", log_text(logp));
}

/* What the page shows now, read from the DOM the dashboard drew. */
static const char *PROBE =
    "(() => {"
    "  const q = s => document.querySelector(s);"
    "  const live = q('#live'), rec = q('[data-live=\"records_in\"]');"
    "  const par = q('#chart-parallelism path.series[data-op=\"count\"]');"
    "  return {"
    "    ok: !!live && live.classList.contains('ok'),"
    "    polls: live ? Number(live.dataset.polls || 0) : 0,"
    "    records: rec && rec.dataset.value !== '' ? Number(rec.dataset.value) : -1,"
    "    ops: [...document.querySelectorAll('#job-graph g.op')].map(g => g.dataset.op + ':' + g.dataset.parallelism),"
    "    count_parallelism: par && par.dataset.values ? par.dataset.values.split(',').map(Number) : [],"
    "    rescale_tips: [...document.querySelectorAll('#chart-parallelism .rescale-marker')].map(m => m.dataset.tip),"
    "    updated: q('#updated') ? q('#updated').textContent : '',"
    "    latency: (t => t && t.dataset.value !== '' ? Number(t.dataset.value) : -1)(q('[data-live=\"latency\"]')),"
    "    latency_text: q('[data-live=\"latency\"] .v') ? q('[data-live=\"latency\"] .v').textContent : '',"
    "    sink_latency: (t => t && t.dataset.value !== '' ? Number(t.dataset.value) : -1)("
    "      q('tr[data-op=\"sink\"] [data-live=\"op_latency\"]')),"
    "    latency_series: [...document.querySelectorAll('#chart-latency path.series')]"
    "      .filter(p => p.dataset.values).map(p => p.dataset.op + ':' + p.dataset.kind)"
    "  };"
    "})()";

static json_t *probe(void)
{
    eddy_err_t err = {{0}};
    json_t *v = eddy_cdp_eval(browser, PROBE, &err);
    cr_assert(v, "evaluating the probe in the page: %s", err.msg);
    return v;
}

static bool has_string(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_string(v) && !strcmp(json_string_value(v), s))
            return true;
    }
    return false;
}

static bool has_int(json_t *arr, json_int_t n)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_number(v) && json_number_value(v) == (double)n)
            return true;
    }
    return false;
}

typedef bool (*page_cond_t)(json_t *state, void *arg);

/* Polls the page until cond holds (deadline); the last state, owned. */
static json_t *wait_page(page_cond_t cond, void *arg, uint64_t timeout_ms, const char *what)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t deadline = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + timeout_ms;
    json_t *state = NULL;
    for (;;) {
        json_decref(state);
        state = probe();
        if (cond(state, arg))
            return state;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 >= deadline)
            break;
        eddy_nap_ms(200);
    }
    char *text = json_dumps(state, JSON_COMPACT);
    cr_assert_fail("the dashboard never showed %s within %llu s; it shows %s; eddy log:\n%s", what,
                   (unsigned long long)(timeout_ms / 1000), text ? text : "?", log_text(logp));
    return NULL;
}

static bool page_live_at_2(json_t *s, void *arg)
{
    (void)arg;
    return json_is_true(json_object_get(s, "ok")) && json_integer_value(json_object_get(s, "records")) > 0 &&
           has_int(json_object_get(s, "count_parallelism"), 2);
}

static bool records_moved(json_t *s, void *arg)
{
    json_int_t before = *(json_int_t *)arg;
    json_int_t now = json_integer_value(json_object_get(s, "records"));
    return now > before;
}

static bool rescale_shown(json_t *s, void *arg)
{
    (void)arg;
    json_t *par = json_object_get(s, "count_parallelism");
    return has_int(par, 2) && has_int(par, 3) && json_array_size(json_object_get(s, "rescale_tips")) >= 1 &&
           has_string(json_object_get(s, "ops"), "count:3");
}

/* The tile shows a p99 (a number, with its unit), the sink's row too, and
 * the chart draws the sink's p99 and p50 over time. */
static bool latency_shown(json_t *s, void *arg)
{
    (void)arg;
    const char *text = json_string_value(json_object_get(s, "latency_text"));
    json_t *series = json_object_get(s, "latency_series");
    return json_number_value(json_object_get(s, "latency")) > 0 && text && text[0] >= '0' &&
           text[0] <= '9' && (strstr(text, " ms") || strstr(text, " s")) &&
           json_number_value(json_object_get(s, "sink_latency")) > 0 && has_string(series, "sink:p99") &&
           has_string(series, "sink:p50");
}

static json_t *eval_ok(const char *expr)
{
    eddy_err_t err = {{0}};
    json_t *v = eddy_cdp_eval(browser, expr, &err);
    cr_assert(v, "%s: %s", expr, err.msg);
    return v;
}

Test(dashboard, live_page_in_chromium_shows_graph_rates_and_rescale, .init = setup, .fini = teardown,
     .timeout = 400)
{
    const char *chromium = eddy_cdp_find_chromium();
    if (!chromium)
        cr_skip_test("chromium is not installed (apt-get install chromium; scripts/setup.sh installs it): "
                     "the dashboard browser test did not run");
    start_job();

    eddy_err_t err = {{0}};
    browser = eddy_cdp_start(chromium, profile, browser_log, 1500, 1800, &err);
    cr_assert(browser, "%s; chromium's log:\n%s", err.msg, log_text(browser_log));
    cr_assert(eddy_cdp_navigate(browser, url, &err) == 0, "%s", err.msg);

    /* The page polls by itself: it comes alive with a record count and a
     * parallelism chart where count runs at 2. */
    json_t *s = wait_page(page_live_at_2, NULL, 90000, "a live job with count at parallelism 2");
    json_int_t first = json_integer_value(json_object_get(s, "records"));
    json_int_t polls = json_integer_value(json_object_get(s, "polls"));
    json_t *ops = json_object_get(s, "ops");
    cr_assert(has_string(ops, "source:2") && has_string(ops, "count:2") && has_string(ops, "sink:1"),
              "the job graph should show source x2, count x2, sink x1; it shows %s",
              json_dumps(ops, JSON_COMPACT));
    json_decref(s);

    /* Live numbers change with no reload. */
    s = wait_page(records_moved, &first, 60000, "the records-read number change");
    cr_assert_gt(json_integer_value(json_object_get(s, "polls")), polls);
    json_decref(s);

    /* Latency from source to sink, measured per batch, as a figure and a chart. */
    s = wait_page(latency_shown, NULL, 60000, "a source-to-sink latency figure and chart");
    double p99 = json_number_value(json_object_get(s, "latency"));
    cr_assert_lt(p99, 60000, "a p99 latency of %.3f ms for a job far below its capacity", p99);
    fprintf(stderr, "dashboard latency tile: %s (p99 %.3f ms)\n",
            json_string_value(json_object_get(s, "latency_text")), p99);
    json_decref(s);

    /* A rescale while the page is open shows up in its chart and graph. */
    char *argv[] = {EDDY_BINARY, "rescale", "wordcount", "count", "3", "--coordinator", coord, NULL};
    char *out = NULL, *errout = NULL;
    int rc = eddy_proc_run(argv, 90000, &out, &errout);
    cr_assert_eq(rc, 0, "eddy rescale exited %d: %s%s", rc, out ? out : "", errout ? errout : "");
    free(out);
    free(errout);
    s = wait_page(rescale_shown, NULL, 90000, "count's parallelism going 2 -> 3 with a rescale marker");
    const char *tip = json_string_value(json_array_get(json_object_get(s, "rescale_tips"), 0));
    cr_assert(tip && strstr(tip, "rescale count 2 → 3") && strstr(tip, "pause"),
              "the rescale marker's tooltip should say what happened; it says: %s", tip ? tip : "(none)");
    json_decref(s);

    /* The assets and APIs the page uses, as the browser sees them. */
    json_t *v = eval_ok("fetch('/').then(r => r.status + ' ' + r.headers.get('content-type'))");
    cr_assert(strstr(json_string_value(v), "200 text/html"), "GET / answered %s", json_string_value(v));
    json_decref(v);
    v = eval_ok("fetch('/api/v1/timeseries/no-such-job').then(r => r.status)");
    cr_assert_eq(json_integer_value(v), 404, "an unknown job's time series should be 404");
    json_decref(v);
    v = eval_ok("fetch('/api/v1/timeseries/wordcount').then(r => r.json()).then(d => d.t.length > 2 && "
                "d.operators.length === 3 && d.operators[0].offered_rate.length === d.t.length && "
                "d.operators.every(o => o.latency_p99_ms.length === d.t.length))");
    cr_assert(json_is_true(v), "the time series should have samples for the 3 operators, offered rate "
              "and latency included");
    json_decref(v);

    /* The artefact: a screenshot of the page as it is now. */
    char dirp[700], png[760];
    snprintf(dirp, sizeof dirp, "%s/test-artefacts", EDDY_BINARY_DIR);
    mkdir(dirp, 0755);
    snprintf(png, sizeof png, "%s/dashboard.png", dirp);
    cr_assert(eddy_cdp_screenshot(browser, png, &err) == 0, "%s", err.msg);
    size_t len = 0;
    char *bytes = eddy_read_file(png, &len);
    cr_assert(bytes && len > 10000 && !memcmp(bytes, "\x89PNG", 4), "%s is not a plausible PNG (%zu bytes)", png,
              len);
    free(bytes);
    fprintf(stderr, "dashboard screenshot: %s\n", png);
}
