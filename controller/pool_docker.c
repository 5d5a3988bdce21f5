/* pool_docker.c - worker pool backend on the Docker Engine API (see
 * pool_docker.h). Requests are plain HTTP/1.1 over the unix socket, made
 * with libcurl's easy interface one at a time, each bounded by a timeout;
 * bodies are JSON (jansson). */
#include "controller/pool_docker.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "state/curl_util.h"

#define API "http://localhost/v1.41"
#define CONNECT_TIMEOUT_MS 2000
#define CALL_TIMEOUT_MS 15000
#define STOP_SECONDS 5 /* what the worker gets to leave cleanly */
#define LABEL "eddy.pool"

typedef struct pool_docker {
    bool curl_held; /* eddy_curl_acquire succeeded: release at destroy */
    char *socket, *prefix, *template_container, *image, *network, *volumes, *command, *env;
    json_t *template_doc; /* GET /containers/TEMPLATE/json, fetched once */
} pool_docker_t;

/* ---- building requests (pure) -------------------------------------------- */

/* A comma- (or space-) separated list as a JSON array of strings. */
static json_t *split_list(const char *text, char sep)
{
    json_t *arr = json_array();
    for (const char *p = text; arr && p && *p;) {
        const char *end = strchr(p, sep);
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len)
            json_array_append_new(arr, json_stringn(p, len));
        p = end ? end + 1 : NULL;
    }
    return arr;
}

/* The template's command with its --name (if any) replaced by name: a
 * worker's identity must be its own. */
static json_t *command_for(const json_t *cmd, const char *name)
{
    json_t *out = json_deep_copy(cmd);
    size_t n = json_array_size(out);
    for (size_t i = 0; i + 1 < n; i++)
        if (!strcmp(json_string_value(json_array_get(out, i)) ? json_string_value(json_array_get(out, i)) : "",
                    "--name"))
            json_array_set_new(out, i + 1, json_string(name));
    return out;
}

/* Labels of the template minus compose's (compose must not think it owns
 * the pool's containers), plus the pool's. */
static json_t *labels_for(const json_t *template_labels, const char *prefix)
{
    json_t *labels = json_object();
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)template_labels, key, value)
    {
        if (strncmp(key, "com.docker.compose.", strlen("com.docker.compose.")) != 0)
            json_object_set(labels, key, value);
    }
    json_object_set_new(labels, LABEL, json_string(prefix));
    return labels;
}

static json_t *networking_for(const char *network, const char *name)
{
    if (!network || !*network || !strcmp(network, "default") || !strcmp(network, "bridge") ||
        !strcmp(network, "host"))
        return NULL;
    /* the worker's name is its address on the network (--hostname-identity) */
    return json_pack("{s:{s:{s:[s]}}}", "EndpointsConfig", network, "Aliases", name);
}

json_t *eddy_pool_docker_create_body(const eddy_pool_docker_config_t *c, const json_t *tpl,
                                     const char *name, eddy_err_t *err)
{
    const char *prefix = c->prefix && *c->prefix ? c->prefix : "eddy-pool";
    json_t *body = json_object(), *host = json_object();
    if (!body || !host) {
        json_decref(body);
        json_decref(host);
        eddy_err_set(err, "pool docker: out of memory");
        return NULL;
    }
    json_object_set_new(body, "Hostname", json_string(name));
    /* the pool replaces dead workers itself */
    json_object_set_new(host, "RestartPolicy", json_pack("{s:s}", "Name", "no"));
    const char *network = c->network;
    if (tpl) {
        const json_t *config = json_object_get(tpl, "Config");
        const json_t *thost = json_object_get(tpl, "HostConfig");
        const char *image = json_string_value(json_object_get(config, "Image"));
        if (!image) {
            json_decref(body);
            json_decref(host);
            eddy_err_set(err, "pool docker: the template container has no Config.Image");
            return NULL;
        }
        json_object_set_new(body, "Image", json_string(image));
        const json_t *cmd = json_object_get(config, "Cmd");
        if (json_is_array(cmd))
            json_object_set_new(body, "Cmd", command_for(cmd, name));
        const json_t *entry = json_object_get(config, "Entrypoint");
        if (json_is_array(entry))
            json_object_set(body, "Entrypoint", (json_t *)entry);
        const json_t *env = json_object_get(config, "Env");
        if (json_is_array(env))
            json_object_set(body, "Env", (json_t *)env);
        const json_t *wd = json_object_get(config, "WorkingDir");
        if (json_is_string(wd))
            json_object_set(body, "WorkingDir", (json_t *)wd);
        json_object_set_new(body, "Labels", labels_for(json_object_get(config, "Labels"), prefix));
        static const char *const copied[] = {"Binds", "Mounts", "NetworkMode"};
        for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
            const json_t *v = json_object_get(thost, copied[i]);
            if (v && !json_is_null(v))
                json_object_set(host, copied[i], (json_t *)v);
        }
        if (!network)
            network = json_string_value(json_object_get(thost, "NetworkMode"));
    } else {
        if (!c->image || !*c->image) {
            json_decref(body);
            json_decref(host);
            eddy_err_set(err, "pool docker: no --pool-image and no --pool-template to copy one from");
            return NULL;
        }
        json_object_set_new(body, "Image", json_string(c->image));
        if (c->command && *c->command) {
            json_t *cmd = split_list(c->command, ' ');
            json_object_set_new(body, "Cmd", command_for(cmd, name));
            json_decref(cmd);
        }
        if (c->env && *c->env)
            json_object_set_new(body, "Env", split_list(c->env, ','));
        if (c->volumes && *c->volumes)
            json_object_set_new(host, "Binds", split_list(c->volumes, ','));
        json_object_set_new(body, "Labels", labels_for(NULL, prefix));
    }
    if (c->network && *c->network)
        json_object_set_new(host, "NetworkMode", json_string(c->network));
    json_object_set_new(body, "HostConfig", host);
    json_t *net = networking_for(network, name);
    if (net)
        json_object_set_new(body, "NetworkingConfig", net);
    return body;
}

int eddy_pool_docker_running(const json_t *list, const char *prefix,
                             char (*names)[EDDY_POOL_NAME_MAX], size_t cap)
{
    size_t i, n = 0;
    json_t *c;
    json_array_foreach((json_t *)list, i, c)
    {
        const char *label = json_string_value(json_object_get(json_object_get(c, "Labels"), LABEL));
        const char *state = json_string_value(json_object_get(c, "State"));
        const char *name = json_string_value(json_array_get(json_object_get(c, "Names"), 0));
        if (!label || strcmp(label, prefix) || !name || (state && strcmp(state, "running")))
            continue;
        if (name[0] == '/') /* Docker's names start with one */
            name++;
        if (n < cap && strlen(name) < EDDY_POOL_NAME_MAX)
            snprintf(names[n++], EDDY_POOL_NAME_MAX, "%s", name);
    }
    return (int)n;
}

/* ---- talking to dockerd ---------------------------------------------------- */

/* One request. Returns the HTTP status with *out the body (caller frees),
 * or -1 with err. */
static long call(pool_docker_t *p, const char *method, const char *path, const json_t *body,
                 long timeout_ms, char **out, eddy_err_t *err)
{
    struct stat st;
    if (stat(p->socket, &st) < 0)
        return eddy_err_set(err, "docker socket %s: %s (is dockerd running? see --docker-socket)",
                            p->socket, strerror(errno));
    CURL *curl = curl_easy_init();
    if (!curl)
        return eddy_err_set(err, "pool docker: cannot make a libcurl handle");
    char url[1024];
    snprintf(url, sizeof url, API "%s", path);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    eddy_curl_body_t b = {.limit = 0}; /* dockerd's answers: small, on a local socket */
    curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, p->socket);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (!strcmp(method, "POST"))
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text ? text : ""); /* POST, even empty */
    else if (strcmp(method, "GET"))
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, eddy_curl_body_collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(curl);
    long status = -1;
    if (rc != CURLE_OK)
        eddy_err_set(err, "docker %s %s via %s: %s", method, path, p->socket, curl_easy_strerror(rc));
    else
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    free(text);
    if (status < 0) {
        free(b.data);
        return -1;
    }
    *out = b.data ? b.data : strdup("");
    return status;
}

/* Docker's {"message": "..."} of an error answer, or the body. */
static int api_error(const char *what, long status, const char *body, eddy_err_t *err)
{
    json_t *doc = json_loads(body ? body : "", 0, NULL);
    const char *msg = json_string_value(json_object_get(doc, "message"));
    eddy_err_set(err, "docker: %s: HTTP %ld: %.300s", what, status, msg ? msg : body ? body : "");
    json_decref(doc);
    return -1;
}

static int template_doc(pool_docker_t *p, eddy_err_t *err)
{
    if (!p->template_container || p->template_doc)
        return 0;
    char path[512], *body = NULL;
    snprintf(path, sizeof path, "/containers/%s/json", p->template_container);
    long status = call(p, "GET", path, NULL, CALL_TIMEOUT_MS, &body, err);
    if (status < 0)
        return -1;
    if (status != 200) {
        char what[300];
        snprintf(what, sizeof what, "template container %.200s", p->template_container);
        api_error(what, status, body, err);
        free(body);
        return -1;
    }
    json_error_t jerr;
    p->template_doc = json_loads(body, 0, &jerr);
    free(body);
    if (!p->template_doc)
        return eddy_err_set(err, "docker: unreadable answer for the template container: %s", jerr.text);
    return 0;
}

static int docker_grow(void *backend, const char *name, eddy_err_t *err)
{
    pool_docker_t *p = backend;
    if (template_doc(p, err) < 0)
        return -1;
    eddy_pool_docker_config_t c = {.socket = p->socket, .prefix = p->prefix, .image = p->image,
                                   .network = p->network, .volumes = p->volumes,
                                   .command = p->command, .env = p->env};
    json_t *req = eddy_pool_docker_create_body(&c, p->template_doc, name, err);
    if (!req)
        return -1;
    char path[256], *body = NULL;
    snprintf(path, sizeof path, "/containers/create?name=%s", name);
    long status = call(p, "POST", path, req, CALL_TIMEOUT_MS, &body, err);
    json_decref(req);
    if (status < 0)
        return -1;
    if (status != 201) {
        api_error("create", status, body, err);
        free(body);
        return -1;
    }
    free(body);
    body = NULL;
    snprintf(path, sizeof path, "/containers/%s/start", name);
    status = call(p, "POST", path, NULL, CALL_TIMEOUT_MS, &body, err);
    if (status < 0 || (status != 204 && status != 304)) {
        if (status >= 0)
            api_error("start", status, body, err);
        free(body);
        /* a container that cannot start is no worker: remove it */
        char *ignored = NULL;
        eddy_err_t lerr = {{0}};
        snprintf(path, sizeof path, "/containers/%s?force=true", name);
        if (call(p, "DELETE", path, NULL, CALL_TIMEOUT_MS, &ignored, &lerr) >= 0)
            free(ignored);
        return -1;
    }
    free(body);
    return 0;
}

static int docker_shrink(void *backend, const char *name, eddy_err_t *err)
{
    pool_docker_t *p = backend;
    char path[256], *body = NULL;
    snprintf(path, sizeof path, "/containers/%s/stop?t=%d", name, STOP_SECONDS);
    long status = call(p, "POST", path, NULL, (STOP_SECONDS + 10) * 1000L, &body, err);
    if (status < 0)
        return -1;
    free(body);
    body = NULL;
    if (status != 204 && status != 304 && status != 404)
        return api_error("stop", status, NULL, err);
    snprintf(path, sizeof path, "/containers/%s?force=true", name);
    status = call(p, "DELETE", path, NULL, CALL_TIMEOUT_MS, &body, err);
    if (status < 0)
        return -1;
    int rc = status == 204 || status == 404 ? 0 : api_error("remove", status, body, err);
    free(body);
    return rc;
}

/* Containers of the pool that are not running (a killed worker) are
 * removed here, so that their names can be told from live ones. */
static void remove_exited(pool_docker_t *p, const json_t *list)
{
    size_t i;
    json_t *c;
    json_array_foreach((json_t *)list, i, c)
    {
        const char *label = json_string_value(json_object_get(json_object_get(c, "Labels"), LABEL));
        const char *state = json_string_value(json_object_get(c, "State"));
        const char *id = json_string_value(json_object_get(c, "Id"));
        if (!label || strcmp(label, p->prefix) || !state || !id || !strcmp(state, "running") ||
            !strcmp(state, "created") || !strcmp(state, "restarting"))
            continue;
        char path[256], *body = NULL;
        eddy_err_t lerr = {{0}};
        snprintf(path, sizeof path, "/containers/%.128s?force=true", id);
        if (call(p, "DELETE", path, NULL, CALL_TIMEOUT_MS, &body, &lerr) >= 0)
            free(body);
    }
}

static int docker_live(void *backend, char (*names)[EDDY_POOL_NAME_MAX], size_t cap,
                       eddy_err_t *err)
{
    pool_docker_t *p = backend;
    /* filters={"label":["eddy.pool=PREFIX"]}, URL-encoded */
    char *escaped = curl_easy_escape(NULL, p->prefix, 0);
    if (!escaped)
        return eddy_err_set(err, "pool docker: out of memory");
    char path[512], *body = NULL;
    snprintf(path, sizeof path,
             "/containers/json?all=true&filters=%%7B%%22label%%22%%3A%%5B%%22" LABEL "%%3D%s%%22%%5D%%7D",
             escaped);
    curl_free(escaped);
    long status = call(p, "GET", path, NULL, CALL_TIMEOUT_MS, &body, err);
    if (status < 0)
        return -1;
    if (status != 200) {
        api_error("list containers", status, body, err);
        free(body);
        return -1;
    }
    json_t *list = json_loads(body, 0, NULL);
    free(body);
    if (!json_is_array(list)) {
        json_decref(list);
        return eddy_err_set(err, "docker: unreadable container list");
    }
    remove_exited(p, list);
    int n = eddy_pool_docker_running(list, p->prefix, names, cap);
    json_decref(list);
    return n;
}

static void docker_destroy(void *backend)
{
    pool_docker_t *p = backend;
    if (!p)
        return;
    /* The containers stay: they are the cluster's workers, and a
     * restarted controller finds them by their label. */
    json_decref(p->template_doc);
    free(p->socket);
    free(p->prefix);
    free(p->template_container);
    free(p->image);
    free(p->network);
    free(p->volumes);
    free(p->command);
    free(p->env);
    if (p->curl_held)
        eddy_curl_release();
    free(p);
}

static const eddy_pool_ops_t DOCKER_OPS = {
    .name = "docker",
    .grow = docker_grow,
    .shrink = docker_shrink,
    .live = docker_live,
    .destroy = docker_destroy,
};

static char *dup_opt(const char *s, bool *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    *failed |= !d;
    return d;
}

int eddy_pool_docker_new(const eddy_pool_docker_config_t *c, eddy_pool_backend_t *out,
                         eddy_err_t *err)
{
    if (!c->template_container && !(c->image && *c->image))
        return eddy_err_set(err, "--pool docker needs --pool-template CONTAINER or --pool-image IMAGE");
    pool_docker_t *p = calloc(1, sizeof *p);
    if (!p)
        return eddy_err_set(err, "pool docker: out of memory");
    bool failed = false;
    p->socket = dup_opt(c->socket ? c->socket : EDDY_DOCKER_DEFAULT_SOCKET, &failed);
    p->prefix = dup_opt(c->prefix && *c->prefix ? c->prefix : "eddy-pool", &failed);
    p->template_container = dup_opt(c->template_container, &failed);
    p->image = dup_opt(c->image, &failed);
    p->network = dup_opt(c->network, &failed);
    p->volumes = dup_opt(c->volumes, &failed);
    p->command = dup_opt(c->command, &failed);
    p->env = dup_opt(c->env, &failed);
    if (failed) {
        docker_destroy(p);
        return eddy_err_set(err, "pool docker: out of memory");
    }
    if (eddy_curl_acquire(err) < 0) {
        docker_destroy(p);
        return -1;
    }
    p->curl_held = true;
    out->ops = &DOCKER_OPS;
    out->self = p;
    return 0;
}
