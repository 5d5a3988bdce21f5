/* test_latency.c - low latency on the record path and its histograms, through
 * the real binary with a TCP server in the test process.
 *
 * A line written into wordcount's socket source shows up on `eddy local`'s
 * stdout, a pipe (block-buffered), while the input is still open and with
 * checkpoints off: nothing but the sink's flush when its task runs dry puts
 * it there (before, rows waited for a checkpoint barrier or the end). And
 * /metrics carries eddy_latency_seconds per job and operator as valid
 * Prometheus histograms (promtool) whose counts grow as lines flow; and
 * eddy_event_time_lag_seconds of a job with event time (nexmark q5, its
 * rate capped so it runs a while) is valid too and grows while it runs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/cluster.h"
#include "tests/support/http_get.h"
#include "tests/support/proc.h"

#define PROMTOOL_DEFAULT "/usr/bin/promtool"

static eddy_test_cluster_t *cl;
static char *dir;
static eddy_proc_t *job;
static int ports[2];
static int listener = -1, conn = -1;

/* eddy local with checkpoints off and the default heartbeat timeout. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "latency", .checkpoint_interval = "0",
                                  .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    ports[0] = eddy_test_cluster_port(cl, 0);
    ports[1] = eddy_test_cluster_http_port(cl, 0);
    job = eddy_test_cluster_local(cl);
}

static void teardown(void)
{
    if (conn >= 0)
        close(conn);
    if (listener >= 0)
        close(listener);
    eddy_test_cluster_destroy(&cl);
}

TestSuite(latency, .init = setup, .fini = teardown);

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

/* eddy local with `workers` workers and these job flags; its stdout in
 * stdout_path (NULL: /dev/null, or EDDY_PROC_PIPE). */
static void start_local(int workers, const char *const job_args[], const char *stdout_path)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts(cl)->workers = workers;
    cr_assert(eddy_test_cluster_start_local_to(cl, job_args, stdout_path, &err) == 0, "%s",
              err.msg);
}

static int listen_on_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0, "%s", strerror(errno));
    cr_assert_eq(listen(fd, 4), 0, "%s", strerror(errno));
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static bool accepted(void *arg)
{
    (void)arg;
    if (!eddy_proc_alive(job))
        return true; /* the assertion after the wait reports it */
    struct pollfd p = {listener, POLLIN, 0};
    if (poll(&p, 1, 0) == 1)
        conn = accept(listener, NULL, NULL);
    return conn >= 0;
}

/* eddy local, 2 workers, wordcount's changelog from our socket server on
 * stdout (a pipe), checkpoints off. */
static void start_job(void)
{
    int port;
    listener = listen_on_loopback(&port);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    const char *argv[] = {"--job", "wordcount", "--socket", where, NULL};
    start_local(2, argv, EDDY_PROC_PIPE);
    cr_assert(eddy_poll_until(accepted, NULL, 60000) && conn >= 0,
              "the socket source never connected; log:\n%s", log_text());
}

/* The changelog read so far from the pipe. */
static char seen[1 << 16];
static size_t seen_len;

typedef struct want {
    const char *row;
} want_t;

static bool row_seen(void *arg)
{
    want_t *w = arg;
    struct pollfd p = {job->stdout_fd, POLLIN, 0};
    while (poll(&p, 1, 0) == 1 && seen_len < sizeof seen - 1) {
        ssize_t n = read(job->stdout_fd, seen + seen_len, sizeof seen - 1 - seen_len);
        if (n <= 0)
            break;
        seen_len += (size_t)n;
        seen[seen_len] = '\0';
    }
    return strstr(seen, w->row) != NULL || !eddy_proc_alive(job);
}

static void write_line(const char *line)
{
    size_t n = strlen(line);
    cr_assert_eq(write(conn, line, n), (ssize_t)n, "%s", strerror(errno));
}

Test(latency, socket_record_reaches_piped_stdout_before_end_of_input, .timeout = 180)
{
    start_job();
    write_line("hello world\n");
    want_t w = {"+I[hello, 1]"};
    /* Generous for a loaded machine; with checkpoints off, the old timed
     * flush never came before the end of input, which does not come here. */
    bool ok = eddy_poll_until(row_seen, &w, 60000) && strstr(seen, w.row);
    char *log = log_text();
    cr_assert(ok, "'%s' not on stdout while the input is open; stdout:\n%s\nlog:\n%s", w.row, seen,
              log);
    free(log);
    write_line("hello again\n");
    w.row = "+U[hello, 2]";
    ok = eddy_poll_until(row_seen, &w, 60000) && strstr(seen, w.row);
    cr_assert(ok, "'%s' not on stdout; stdout:\n%s", w.row, seen);
    cr_assert(eddy_proc_alive(job), "eddy local ended before its input did");
    close(conn);
    conn = -1;
    int rc = eddy_proc_wait(job, 90000);
    cr_assert_eq(rc, 0, "eddy local exited %d", rc);
}

/* ---- /metrics ------------------------------------------------------------ */

static char *get_metrics(void)
{
    char *text = eddy_test_http_get(ports[1], "/metrics", 10000, NULL);
    cr_assert(text, "GET http://127.0.0.1:%d/metrics: no answer", ports[1]);
    return text;
}

/* The value of the series whose line starts with `series ` (-1: absent). */
static double series_value(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ')
            return atof(p + n + 1);
    return -1;
}

#define SINK_COUNT "eddy_latency_seconds_count{job=\"wordcount\",operator=\"sink\"}"

/* Buckets of histogram `family` of (job, op) never decrease with le, and
 * +Inf equals _count. */
static void check_histogram_shape(const char *text, const char *family, const char *job_id,
                                  const char *op)
{
    char count_series[256], prefix[256];
    snprintf(count_series, sizeof count_series, "%s_count{job=\"%s\",operator=\"%s\"}", family,
             job_id, op);
    snprintf(prefix, sizeof prefix, "%s_bucket{job=\"%s\",operator=\"%s\",le=\"", family, job_id, op);
    double last = 0, count = series_value(text, count_series);
    int buckets = 0;
    for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
        const char *v = strchr(p, ' ');
        cr_assert(v);
        double x = atof(v + 1);
        cr_assert_geq(x, last, "buckets go down at %.80s", p);
        last = x;
        buckets++;
    }
    cr_assert_gt(buckets, 5, "%s buckets of %s missing:\n%s", family, op, text);
    cr_assert_eq(last, count, "+Inf bucket %.0f != _count %.0f", last, count);
}

typedef struct growth {
    double above;
} growth_t;

static bool sink_count_above(void *arg)
{
    growth_t *g = arg;
    char *text = get_metrics();
    double v = series_value(text, SINK_COUNT);
    free(text);
    return v > g->above;
}

static bool count_op_counted(void *arg)
{
    (void)arg;
    char *text = get_metrics();
    double v = series_value(text, "eddy_latency_seconds_count{job=\"wordcount\",operator=\"count\"}");
    free(text);
    return v > 0;
}

static void promtool_check(const char *text)
{
    const char *promtool = getenv("EDDY_PROMTOOL");
    if (!promtool || !*promtool)
        promtool = PROMTOOL_DEFAULT;
    cr_assert(access(promtool, X_OK) == 0,
              "promtool not found at %s: install Debian's 'prometheus' package (scripts/setup.sh "
              "does)", promtool);
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.txt", dir);
    cr_assert_eq(eddy_write_file(path, text, strlen(text)), 0);
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "%s check metrics < %s 2>&1", promtool, path);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    int status = pclose(f);
    /* promtool lints (exit 3) for style only; a parse error exits 1. */
    cr_assert(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3),
              "promtool rejects /metrics:\n%s", out);
    cr_assert(!strstr(out, "error"), "promtool: %s", out);
}

Test(latency, histograms_are_prometheus_and_move_with_load, .timeout = 180)
{
    start_job();
    char *text = get_metrics();
    cr_assert(strstr(text, "# TYPE eddy_latency_seconds histogram"), "no latency family:\n%s", text);
    cr_assert(strstr(text, "# TYPE eddy_event_time_lag_seconds histogram"), "no lag family");
    double before = series_value(text, SINK_COUNT);
    cr_assert_eq(before, 0, "sink latency counted before any input: %.0f", before);
    free(text);

    for (int i = 0; i < 50; i++)
        write_line("alpha beta\n");
    growth_t g = {0};
    cr_assert(eddy_poll_until(sink_count_above, &g, 60000), "sink latency count never grew; log:\n%s",
              log_text());
    text = get_metrics();
    double first = series_value(text, SINK_COUNT);
    check_histogram_shape(text, "eddy_latency_seconds", "wordcount", "sink");
    promtool_check(text);
    free(text);
    /* Workers heartbeat on their own clocks: the count operator's samples
     * may arrive after the sink's. */
    cr_assert(eddy_poll_until(count_op_counted, NULL, 60000),
              "the count operator has no latency samples");

    /* More load: the histogram moves on. */
    for (int i = 0; i < 500; i++)
        write_line("gamma delta epsilon\n");
    g.above = first;
    cr_assert(eddy_poll_until(sink_count_above, &g, 60000),
              "sink latency count stuck at %.0f after more lines", first);
    text = get_metrics();
    check_histogram_shape(text, "eddy_latency_seconds", "wordcount", "sink");
    promtool_check(text);
    free(text);
    close(conn);
    conn = -1;
    cr_assert_eq(eddy_proc_wait(job, 90000), 0);
}

/* ---- event-time lag ------------------------------------------------------ */

#define LAG_COUNT "eddy_event_time_lag_seconds_count{job=\"nexmark\",operator=\""

/* The first operator of the nexmark job whose event-time lag histogram has
 * counted more than `above` samples, into op; false if none has. */
static bool lag_counted(const char *text, double above, char *op, size_t size)
{
    for (const char *p = strstr(text, LAG_COUNT); p; p = strstr(p + 1, LAG_COUNT)) {
        const char *name = p + strlen(LAG_COUNT), *end = strchr(name, '"');
        const char *v = strchr(name, ' ');
        if (!end || !v || atof(v + 1) <= above)
            continue;
        snprintf(op, size, "%.*s", (int)(end - name), name);
        return true;
    }
    return false;
}

typedef struct lag_wait {
    char op[64];
    double above;
} lag_wait_t;

static bool lag_grew(void *arg)
{
    lag_wait_t *w = arg;
    char *text = eddy_test_http_get(ports[1], "/metrics", 10000, NULL);
    bool ok = false;
    if (text && !w->op[0]) {
        ok = lag_counted(text, w->above, w->op, sizeof w->op);
    } else if (text) {
        char series[256];
        snprintf(series, sizeof series, LAG_COUNT "%s\"}", w->op);
        ok = series_value(text, series) > w->above;
    }
    free(text);
    return ok || !eddy_proc_alive(job);
}

Test(latency, event_time_lag_is_prometheus_and_moves, .timeout = 180)
{
    /* about 30 s of events: far longer than the test needs to see two readings */
    const char *argv[] = {"--quiet", "--job", "nexmark", "--query", "q5", "--events", "60000",
                          "--rate", "2000", "--parallelism", "1", "--output", "/dev/null", NULL};
    start_local(1, argv, NULL);
    lag_wait_t w = {{0}, 0};
    cr_assert(eddy_poll_until(lag_grew, &w, 60000) && w.op[0],
              "no operator of nexmark q5 counted event-time lag; log:\n%s", log_text());
    char *text = get_metrics();
    char series[256];
    snprintf(series, sizeof series, LAG_COUNT "%s\"}", w.op);
    double first = series_value(text, series);
    check_histogram_shape(text, "eddy_event_time_lag_seconds", "nexmark", w.op);
    promtool_check(text);
    free(text);
    /* ticks go on counting while the job runs */
    w.above = first;
    cr_assert(eddy_poll_until(lag_grew, &w, 60000) && eddy_proc_alive(job),
              "%s's event-time lag count stuck at %.0f; log:\n%s", w.op, first, log_text());
    text = get_metrics();
    cr_assert_gt(series_value(text, series), first);
    check_histogram_shape(text, "eddy_event_time_lag_seconds", "nexmark", w.op);
    promtool_check(text);
    free(text);
}
