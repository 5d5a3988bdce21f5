/* client.h - talking to a coordinator as a client (CLI subcommands, the
 * controller): one request, one REPLY, with a deadline. */
#ifndef EDDY_NET_CLIENT_H
#define EDDY_NET_CLIENT_H

#include <stdint.h>

#include "common/err.h"
#include "net/keys.h"
#include "net/proto.h"

#define EDDY_CLIENT_DEFAULT_COORDINATOR "tcp://127.0.0.1:7600"
#define EDDY_MAX_COORDINATORS 16 /* endpoints in a --coordinator list */

/* Sends one request to the coordinator and waits up to timeout_ms for the
 * reply. coordinator may be a comma-separated list: the leader among them
 * answers (standbys' "not leader" answers are followed, see client.c).
 * Returns 0 with *status and *body (malloc'd), or -1 with err. With keys
 * (client use, see net/keys.h) the sockets speak CURVE; a lone coordinator
 * that refuses the handshake is an error that says so. */
int eddy_client_call(const char *coordinator, const eddy_keys_t *keys, const char *verb, int argc,
                     char **argv, uint32_t timeout_ms, int64_t *status, char **body,
                     eddy_err_t *err);
/* Sends any message (a PLUGIN upload) and waits for the REPLY, likewise. */
int eddy_client_send(const char *coordinator, const eddy_keys_t *keys, const eddy_msg_t *req,
                     uint32_t timeout_ms, int64_t *status, char **body, eddy_err_t *err);
/* Splits a comma-separated list of endpoints (spaces around them
 * trimmed) into out; returns how many (at most max). */
int eddy_client_split(const char *list, char out[][EDDY_ENDPOINT_MAX], int max);
/* $EDDY_COORDINATOR, else EDDY_CLIENT_DEFAULT_COORDINATOR. */
const char *eddy_client_default_coordinator(void);

#endif
