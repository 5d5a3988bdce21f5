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

char *eddy_test_http_get(int port, const char *path, long timeout_ms, long *status)
{
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s%s", port, path[0] == '/' ? "" : "/", path);
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    body_t b = {calloc(1, 1), 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, "");
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, (void *)&b);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    if (status)
        *status = code;
    if (rc != CURLE_OK || !b.data) {
        free(b.data);
        return NULL;
    }
    return b.data;
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
