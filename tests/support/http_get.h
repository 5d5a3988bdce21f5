/* http_get.h - GET from a process's HTTP port and read Prometheus text, for
 * tests that watch /metrics or the JSON API of a real coordinator. No
 * proxy (a CI machine's http_proxy must not intercept loopback). */
#ifndef EDDY_TESTS_SUPPORT_HTTP_GET_H
#define EDDY_TESTS_SUPPORT_HTTP_GET_H

/* What one request got: status 0 when there was no answer (curl's
 * reason in error). */
typedef struct eddy_test_http_reply {
    long status;
    char *headers; /* the raw header block (malloc'd) */
    char *body;    /* NUL-terminated (malloc'd) */
    char content_type[128];
    char error[256];
} eddy_test_http_reply_t;

/* METHOD http://127.0.0.1:PORT/PATH ("HEAD" sends no body back; any other
 * name is sent as it is), with "Authorization: AUTH" unless auth is NULL
 * and BODY unless NULL. Returns reply->status (0: no answer). */
long eddy_test_http_request(int port, const char *method, const char *path, const char *auth,
                            const char *body, long timeout_ms, eddy_test_http_reply_t *reply);
void eddy_test_http_reply_clear(eddy_test_http_reply_t *reply);

/* GET http://127.0.0.1:PORT/PATH. The body (malloc'd, NUL-terminated;
 * caller frees) with the HTTP status in *status, or NULL when there was no
 * answer within timeout_ms (not listening yet, gone). */
char *eddy_test_http_get(int port, const char *path, long timeout_ms, long *status);

/* The sum of the values of the series in Prometheus text whose line starts
 * with series_prefix (e.g. "eddy_late_records_total{job=\"nexmark\""), or
 * -1 when there is none. */
long long eddy_test_metric_sum(const char *text, const char *series_prefix);

/* eddy_test_metric_sum over GET /metrics; -1 when /metrics did not answer
 * 200 within 2 s or has no such series. */
long long eddy_test_scrape_sum(int port, const char *series_prefix);

#endif
