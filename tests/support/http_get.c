/* http_get.c - GET over libcurl and sums over Prometheus text
 * (http_get.h): one copy for the tests that watch a coordinator's HTTP
 * port instead of one per test file. */
#include "tests/support/http_get.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct body {
    char *data;
    size_t len;
} body_t;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    body_t *b = userdata;
    size_t n = size * nmemb;
    char *nd = realloc(b->data, b->len + n + 1);
    if (!nd)
        return 0;
    memcpy(nd + b->len, ptr, n);
    b->data = nd;
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

long eddy_test_http_request(int port, const char *method, const char *path, const char *auth,
                            const char *body, long timeout_ms, eddy_test_http_reply_t *reply)
{
    memset(reply, 0, sizeof *reply);
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s%s", port, path[0] == '/' ? "" : "/", path);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(reply->error, sizeof reply->error, "curl_easy_init failed");
        return 0;
    }
    body_t h = {calloc(1, 1), 0}, b = {calloc(1, 1), 0};
    struct curl_slist *hdrs = NULL;
    if (auth) {
        char line[512];
        snprintf(line, sizeof line, "Authorization: %s", auth);
        hdrs = curl_slist_append(hdrs, line);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* a CI machine's http_proxy must not intercept */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, (void *)&h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, (void *)&b);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET"))
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply->status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        snprintf(reply->content_type, sizeof reply->content_type, "%s", ct ? ct : "");
    } else {
        snprintf(reply->error, sizeof reply->error, "%.16s %.160s: %.60s", method, url,
                 curl_easy_strerror(rc));
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    reply->headers = h.data;
    reply->body = b.data;
    if (!reply->headers || !reply->body) {
        eddy_test_http_reply_clear(reply);
        snprintf(reply->error, sizeof reply->error, "no memory for the reply of %.200s", url);
    }
    return reply->status;
}

void eddy_test_http_reply_clear(eddy_test_http_reply_t *reply)
{
    free(reply->headers);
    free(reply->body);
    reply->headers = reply->body = NULL;
    reply->status = 0;
}

char *eddy_test_http_get(int port, const char *path, long timeout_ms, long *status)
{
    eddy_test_http_reply_t r;
    eddy_test_http_request(port, "GET", path, NULL, NULL, timeout_ms, &r);
    if (status)
        *status = r.status;
    char *body = r.status ? r.body : NULL;
    if (!body)
        free(r.body);
    free(r.headers);
    return body;
}

long long eddy_test_metric_sum(const char *text, const char *series_prefix)
{
    long long sum = -1;
    size_t n = strlen(series_prefix);
    for (const char *line = text; line && *line;) {
        if (!strncmp(line, series_prefix, n)) {
            const char *sp = strchr(line, ' ');
            const char *nl = strchr(line, '\n');
            if (sp && (!nl || sp < nl))
                sum = (sum < 0 ? 0 : sum) + (long long)strtod(sp + 1, NULL);
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return sum;
}

long long eddy_test_scrape_sum(int port, const char *series_prefix)
{
    long status = 0;
    char *text = eddy_test_http_get(port, "/metrics", 2000, &status);
    long long sum = text && status == 200 ? eddy_test_metric_sum(text, series_prefix) : -1;
    free(text);
    return sum;
}
