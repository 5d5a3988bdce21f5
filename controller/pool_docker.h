/* pool_docker.h - the worker pool's Docker backend: worker containers
 * started and removed through the Docker Engine API on its unix socket
 * (libcurl, CURLOPT_UNIX_SOCKET_PATH; API version 1.41, Docker 20.10+).
 *
 * A new worker is a container made from a template: either an existing
 * worker container (--pool-template NAME: its image, command, environment,
 * network, volumes and restart policy are copied from GET
 * /containers/NAME/json) or the flags --pool-image, --pool-network,
 * --pool-volume (with --pool-command, the worker's arguments). Its
 * hostname is the worker's name, so a worker run with
 * `--hostname-identity` registers under it. Every container the pool makes
 * carries the label eddy.pool=PREFIX; live() lists the running ones by that
 * label, so a controller that restarts finds its pool again, and a worker
 * container that was killed is seen gone (and replaced by the policy).
 * Release: POST /containers/ID/stop?t=10, then DELETE /containers/ID.
 *
 * Every call has a connect timeout and a total timeout (the stop waits for
 * the worker's graceful exit, at most the stop timeout plus a margin); a
 * missing socket is a clear error naming the path. */
#ifndef EDDY_CONTROLLER_POOL_DOCKER_H
#define EDDY_CONTROLLER_POOL_DOCKER_H

#include <jansson.h>

#include "common/err.h"
#include "controller/pool.h"

#define EDDY_DOCKER_DEFAULT_SOCKET "/var/run/docker.sock"

typedef struct eddy_pool_docker_config {
    const char *socket;   /* default EDDY_DOCKER_DEFAULT_SOCKET */
    const char *prefix;   /* the eddy.pool label's value */
    const char *template_container; /* NULL: from the flags below */
    const char *image;
    const char *network;  /* NULL: Docker's default */
    const char *volumes;  /* comma-separated SRC:DST[:ro] binds; NULL: none */
    const char *command;  /* space-separated worker arguments after the image's
                           * entrypoint, e.g. "worker --coordinator tcp://c:7600
                           * --hostname-identity"; NULL: the image's */
    const char *env;      /* comma-separated NAME=VALUE; NULL: none */
} eddy_pool_docker_config_t;

/* Copies config; checks that it names a template or an image. Talks to
 * Docker only when used. 0, or -1 with err. */
int eddy_pool_docker_new(const eddy_pool_docker_config_t *config, eddy_pool_backend_t *out,
                         eddy_err_t *err);

/* The body of POST /containers/create?name=NAME for worker name: from
 * template (GET /containers/X/json's document, borrowed) when not NULL,
 * else from config. A new reference, or NULL with err. Exposed for tests. */
json_t *eddy_pool_docker_create_body(const eddy_pool_docker_config_t *config,
                                     const json_t *template_doc, const char *name,
                                     eddy_err_t *err);

/* The names of the running pool containers in a GET /containers/json
 * answer (borrowed): those whose label eddy.pool is prefix. Fills
 * names[0..cap) and returns how many. Exposed for tests. */
int eddy_pool_docker_running(const json_t *list, const char *prefix,
                             char (*names)[EDDY_POOL_NAME_MAX], size_t cap);

#endif
