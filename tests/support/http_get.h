/* http_get.h - GET from a process's HTTP port and read Prometheus text, for
 * tests that watch /metrics or the JSON API of a real coordinator. No
 * proxy (a CI machine's http_proxy must not intercept loopback). */
#ifndef EDDY_TESTS_SUPPORT_HTTP_GET_H
#define EDDY_TESTS_SUPPORT_HTTP_GET_H

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
