/* test_dashboard_xss.c - hostile strings in everything the dashboard shows
 * run no script (docs/security.md, "HTTP": the dashboard).
 *
 * `eddy local` runs a rate-limited wordcount whose arguments hold markup
 * (its --output path); a fake worker (a DEALER speaking the control
 * protocol, as any peer on the network can) registers with markup as its
 * name and data address; scaling decisions are posted (the `decision`
 * request, as any client can) with markup in their operator and reason,
 * and one with markup where an integer belongs. Headless Chromium
 * (tests/support/cdp.c) then loads the page and every API it reads, and
 * the test proves:
 * - each hostile string is on the page as text (so it was rendered);
 * - none ran: the payloads would set window.__xss or document.title, and
 *   neither changed; no element the payloads would create exists; no
 *   Content-Security-Policy or Trusted Types violation was reported while
 *   the page redrew several times (a violation would mean markup reached
 *   the DOM and only the policy stopped it);
 * - the decision with a string for old_parallelism was refused (status 2)
 *   and is not in /api/v1/scaling: before the schema check it was stored
 *   and the page ran its script;
 * - the page and the APIs carry the security headers as the browser sees
 *   them;
 * - the bearer token (--http-token-file, the page opened as /#token=...)
 *   works, leaves the address bar and is in neither sessionStorage nor
 *   localStorage.
 *
 * Skipped, saying so, only when no chromium binary is installed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/client.h"
#include "net/proto.h"
#include "tests/support/cdp.h"
#include "tests/support/cluster.h"
#include "tests/support/peer.h"
#include "tests/support/proc.h"

#define LINES 400000
#define SOURCE_RATE "2000"
#define TOKEN "xss-T0ken-for-the-dashboard"

/* Each sets a global or the title if it ever runs; each fits a name (63 bytes). */
#define P_IMG "<img src=x onerror=__xss=1>"
#define P_SCRIPT "</script><script>__xss=2</script>"
#define P_SVG "\"><svg onload=__xss=3>"
#define P_ATTR "' onmouseover='__xss=4' x='"
#define P_TITLE "<img src=x onerror=document.title=5>"

static eddy_test_cluster_t *cl;
static char *input, *output, *logp, *browser_log, *profile, *token_path, *coord;
static char url[64], url_token[128];
static eddy_cdp_t *browser;

typedef struct fake {
    pthread_t thread;
    atomic_bool stop;
    bool started;
} fake_t;
static fake_t fake;

static char *log_text(const char *path)
{
    char *s = eddy_read_file(path, NULL);
    return s ? s : strdup("(no log)");
}

static void setup(void)
{
    eddy_err_t err = {{0}};
    /* eddy local on one worker, eddy's own heartbeat timing */
    eddy_test_cluster_opts_t o = {.tag = "dashxss", .workers = 1, .checkpoint_interval = "500",
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, P_TITLE ".tsv");
    logp = eddy_test_cluster_path(cl, "local.log");
    browser_log = eddy_test_cluster_path(cl, "chromium.log");
    profile = eddy_test_cluster_path(cl, "profile");
    token_path = eddy_test_cluster_path(cl, "http.token");
    cr_assert(mkdir(profile, 0700) == 0);
    cr_assert(eddy_write_file(token_path, TOKEN "\n", strlen(TOKEN) + 1) == 0);
    cr_assert(chmod(token_path, 0600) == 0);
    cr_assert(eddy_gen_lines(input, LINES, 7, &err) == 0, "%s", err.msg);
    coord = eddy_test_cluster_url(cl, 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", eddy_test_cluster_http_port(cl, 0));
}

/* A fetch with the token, as the page's own requests carry it. */
#define AUTH "{headers: {Authorization: 'Bearer " TOKEN "'}}"

static void teardown(void)
{
    eddy_cdp_stop(&browser);
    if (fake.started) {
        atomic_store(&fake.stop, true);
        pthread_join(fake.thread, NULL);
        fake.started = false;
    }
    eddy_test_cluster_destroy(&cl);
}

/* ---- a worker named with markup ------------------------------------------- */

static void fake_register(void *sock)
{
    char data[EDDY_ENDPOINT_MAX];
    snprintf(data, sizeof data, "tcp://%s:9", P_SVG);
    eddy_msg_t reg = eddy_test_peer_registration(P_SCRIPT, data, "localhost");
    eddy_test_peer_send(sock, &reg);
}

/* Registers and heartbeats; ignores whatever it is sent. */
static void *fake_run(void *arg)
{
    (void)arg;
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(sock, coord);
    fake_register(sock);
    uint32_t id = 0;
    uint64_t next_hb = 0;
    while (!atomic_load(&fake.stop)) {
        zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
        zmq_poll(&it, 1, 50);
        char buf[1 << 16];
        int n;
        while ((n = zmq_recv(sock, buf, sizeof buf, ZMQ_DONTWAIT)) >= 0) {
            eddy_msg_t m;
            eddy_err_t err;
            if (n > (int)sizeof buf || eddy_msg_decode(buf, (size_t)n, &m, &err) < 0)
                continue;
            if (m.type == EDDY_MSG_REGISTERED) {
                if (m.u.registered.error[0])
                    fake_register(sock);
                else
                    id = m.u.registered.worker_id;
            }
            eddy_msg_clear(&m);
        }
        if (eddy_mono_ms() >= next_hb) {
            eddy_msg_t hb = {.type = EDDY_MSG_HEARTBEAT};
            hb.u.heartbeat.worker_id = id;
            eddy_test_peer_send(sock, &hb);
            next_hb = eddy_mono_ms() + 200;
        }
    }
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return NULL;
}

/* ---- decisions ------------------------------------------------------------- */

static json_t *decision(const char *operator_name, json_t *old_parallelism, const char *reason)
{
    return json_pack("{s:I,s:s,s:s,s:o,s:i,s:s,s:b,s:s,s:{s:n,s:n,s:n,s:n,s:n,s:n,s:n}}", "time_ms",
                     (json_int_t)eddy_wall_ms(), "job", "wordcount", "operator", operator_name,
                     "old_parallelism", old_parallelism, "new_parallelism", 2, "action", "scale_up",
                     "applied", 0, "reason", reason, "rates", "target_input_rate",
                     "true_rate_per_instance", "observed_input_rate", "selectivity", "utilisation",
                     "target_utilisation", "projected_utilisation");
}

/* Posts doc (taken); the coordinator's status code, *body its answer. */
static int64_t post(json_t *doc, char **body)
{
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    cr_assert(text);
    int64_t status = -1;
    eddy_err_t err = {{0}};
    char *args[] = {text};
    cr_assert_eq(eddy_client_call(coord, NULL, "decision", 1, args, 10000, &status, body, &err), 0, "%s",
                 err.msg);
    free(text);
    return status;
}

/* ---- the page ---------------------------------------------------------------- */

static json_t *eval_ok(const char *expr)
{
    eddy_err_t err = {{0}};
    json_t *v = eddy_cdp_eval(browser, expr, &err);
    cr_assert(v, "%s: %s", expr, err.msg);
    return v;
}

/* Counts policy violations from now on (a listener the page keeps). */
static const char *WATCH =
    "window.__violations = [];"
    "document.addEventListener('securitypolicyviolation', e =>"
    "  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + (e.sample || '')));"
    "true";

static const char *PROBE =
    "(() => {"
    "  const text = id => (document.getElementById(id) || {}).textContent || '';"
    "  const live = document.getElementById('live');"
    "  return {"
    "    polls: live ? Number(live.dataset.polls || 0) : 0,"
    "    xss: typeof window.__xss === 'undefined' ? null : String(window.__xss),"
    "    title: document.title,"
    "    violations: window.__violations || null,"
    "    injected: document.querySelectorAll('img, script:not([src]), iframe, object, embed, "
    "      [onerror], [onload], [onmouseover], [onfocus]').length,"
    "    workers: text('workers'), decisions: text('decisions'), head: text('job-head'),"
    "    tips: [...document.querySelectorAll('#chart-parallelism .decision-marker')].map(m => m.dataset.tip)"
    "  };"
    "})()";

static bool has(json_t *s, const char *field, const char *needle)
{
    const char *v = json_string_value(json_object_get(s, field));
    return v && strstr(v, needle);
}

static bool any_tip_has(json_t *s, const char *needle)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(s, "tips"), i, t) {
        if (json_is_string(t) && strstr(json_string_value(t), needle))
            return true;
    }
    return false;
}

static bool everything_shown(json_t *s)
{
    return has(s, "workers", P_SCRIPT) && has(s, "workers", P_SVG) && has(s, "decisions", P_IMG) &&
           has(s, "decisions", P_ATTR) && has(s, "decisions", P_TITLE) && has(s, "head", P_TITLE) &&
           any_tip_has(s, P_IMG);
}

static void expect_nothing_ran(json_t *s, const char *where)
{
    char *text = json_dumps(s, JSON_COMPACT);
    cr_assert(json_is_null(json_object_get(s, "xss")), "%s: a payload ran: %s", where, text);
    cr_assert_str_eq(json_string_value(json_object_get(s, "title")), "eddy dashboard",
                     "%s: a payload set the title: %s", where, text);
    cr_assert_eq(json_integer_value(json_object_get(s, "injected")), 0, "%s: markup from data is in the DOM: %s",
                 where, text);
    json_t *v = json_object_get(s, "violations");
    cr_assert(json_is_array(v) && json_array_size(v) == 0,
              "%s: policy violations (markup reached the DOM, only the CSP stopped it): %s", where, text);
    free(text);
}

Test(dashboard_xss, hostile_strings_in_every_field_run_no_script, .init = setup, .fini = teardown,
     .timeout = 300)
{
    const char *chromium = eddy_cdp_find_chromium();
    if (!chromium)
        cr_skip_test("chromium is not installed (apt-get install chromium; scripts/setup.sh installs it): "
                     "the dashboard XSS test did not run");
    eddy_err_t err = {{0}};
    const char *argv[] = {"--http-token-file", token_path, "--quiet", "--job", "wordcount",
                          "--input", input, "--rate", SOURCE_RATE, "--output", output, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    static const eddy_test_job_want_t running = {.state = "running"};
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &running, 60000, NULL, NULL))
        cr_assert_fail("the job never reached state running; log:\n%s", log_text(logp));

    cr_assert(pthread_create(&fake.thread, NULL, fake_run, NULL) == 0);
    fake.started = true;

    /* Markup where the schema wants an integer: refused, and not stored. */
    char *body = NULL;
    int64_t st = post(decision("count", json_string("<img src=x onerror=__xss=6>"), "int"), &body);
    cr_assert_eq(st, 2, "a decision with markup for old_parallelism was accepted (%lld): %s", (long long)st,
                 body ? body : "");
    cr_assert(body && strstr(body, "old_parallelism"), "the refusal should name the field: %s", body);
    free(body);
    body = NULL;
    json_t *extra = decision("count", json_integer(1), "unknown key");
    json_object_set_new(extra, "html", json_string(P_IMG));
    st = post(extra, &body);
    cr_assert_eq(st, 2, "a decision with an unknown key was accepted: %s", body ? body : "");
    free(body);
    /* Markup in the strings a decision may hold: stored, shown as text. */
    body = NULL;
    st = post(decision(P_IMG, json_integer(1), P_SCRIPT " " P_ATTR " " P_TITLE), &body);
    cr_assert_eq(st, 0, "a well-formed decision was refused: %s", body ? body : "");
    free(body);

    browser = eddy_cdp_start(chromium, profile, browser_log, 1400, 1600, &err);
    cr_assert(browser, "%s; chromium's log:\n%s", err.msg, log_text(browser_log));
    snprintf(url_token, sizeof url_token, "%s#token=%s", url, TOKEN);
    cr_assert(eddy_cdp_navigate(browser, url_token, &err) == 0, "%s", err.msg);
    json_decref(eval_ok(WATCH));

    /* Wait until every hostile string is on the page, then for three more
     * redraws: each redraw would inject again. */
    uint64_t deadline = eddy_mono_ms() + 60000;
    json_t *s = NULL;
    json_int_t shown_at = -1;
    for (;;) {
        json_decref(s);
        s = eval_ok(PROBE);
        expect_nothing_ran(s, "the dashboard");
        json_int_t polls = json_integer_value(json_object_get(s, "polls"));
        if (shown_at < 0 && everything_shown(s))
            shown_at = polls;
        if (shown_at >= 0 && polls >= shown_at + 3)
            break;
        if (eddy_mono_ms() > deadline) {
            char *text = json_dumps(s, JSON_COMPACT);
            cr_assert_fail("the page never showed every hostile string as text: %s\nlog:\n%s", text,
                           log_text(logp));
        }
        eddy_nap_ms(200);
    }
    json_decref(s);

    /* The scaling history the page reads has no trace of the refused ones. */
    json_t *v = eval_ok("fetch('/api/v1/scaling', " AUTH ").then(r => r.text())");
    cr_assert(!strstr(json_string_value(v), "__xss=6") && !strstr(json_string_value(v), "\"html\""),
              "a refused decision was stored: %s", json_string_value(v));
    json_decref(v);

    /* The headers, as the browser sees them on the page and an API. */
    static const char *const header_checks[] = {
        "fetch('/').then(r => r.headers.get('content-security-policy'))",
        "fetch('/api/v1/status', " AUTH ").then(r => r.status + ' ' + r.headers.get('content-security-policy'))",
    };
    for (size_t i = 0; i < sizeof header_checks / sizeof header_checks[0]; i++) {
        v = eval_ok(header_checks[i]);
        const char *csp = json_string_value(v);
        cr_assert(csp && strstr(csp, "script-src 'self'") && strstr(csp, "frame-ancestors 'none'") &&
                      strstr(csp, "require-trusted-types-for 'script'") && !strstr(csp, "unsafe-inline"),
                  "%s: %s", header_checks[i], csp ? csp : "(none)");
        json_decref(v);
    }
    v = eval_ok("fetch('/').then(r => [r.headers.get('x-content-type-options'), "
                "r.headers.get('referrer-policy'), r.headers.get('x-frame-options')].join(' '))");
    cr_assert_str_eq(json_string_value(v), "nosniff no-referrer DENY");
    json_decref(v);
    /* The token worked (the page showed the job), left the address bar,
     * and is not kept where other scripts of the origin could read it. */
    v = eval_ok("[sessionStorage.length + localStorage.length, location.hash === '', "
                "document.documentElement.outerHTML.includes('" TOKEN "')].join(' ')");
    cr_assert_str_eq(json_string_value(v), "0 true false", "web storage entries, address bar cleared, "
                     "token in the DOM: %s", json_string_value(v));
    json_decref(v);

    /* The APIs the page reads: JSON, never sniffed as anything else. */
    static const char *const apis[] = {"/api/v1/status", "/api/v1/scaling", "/api/v1/jobs",
                                       "/api/v1/timeseries/wordcount"};
    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        char expr[300];
        snprintf(expr, sizeof expr,
                 "fetch('%s', " AUTH ").then(r => [r.status, r.headers.get('content-type'), "
                 "r.headers.get('x-content-type-options')].join(' '))",
                 apis[i]);
        v = eval_ok(expr);
        cr_assert(strstr(json_string_value(v), "200 application/json") &&
                      strstr(json_string_value(v), "nosniff"),
                  "%s: %s", apis[i], json_string_value(v));
        json_decref(v);
    }
}
