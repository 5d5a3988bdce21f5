/* curl_util.c - libcurl's global state and response bodies, shared by the
 * etcd store and the Docker pool (see curl_util.h). curl_global_init is not
 * thread-safe and must run before handles are made on any thread, so it is
 * counted here rather than left to curl_easy_init's implicit call. */
#include "state/curl_util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t users_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long users;

int eddy_curl_acquire(eddy_err_t *err)
{
    int rc = 0;
    pthread_mutex_lock(&users_lock);
    if (users == 0) {
        CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (c != CURLE_OK)
            rc = eddy_err_set(err, "curl_global_init: %s", curl_easy_strerror(c));
    }
    if (rc == 0)
        users++;
    pthread_mutex_unlock(&users_lock);
    return rc;
}

void eddy_curl_release(void)
{
    pthread_mutex_lock(&users_lock);
    if (users > 0 && --users == 0)
        curl_global_cleanup();
    pthread_mutex_unlock(&users_lock);
}

size_t eddy_curl_body_collect(char *ptr, size_t size, size_t nmemb, void *body)
{
    eddy_curl_body_t *b = body;
    size_t n = size * nmemb;
    if (b->limit && n > b->limit - b->len) {
        b->too_big = true;
        return 0; /* aborts the transfer */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return 0;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}
