/* keys.h - a cluster's CURVE keys, as `eddy keygen DIR` writes them and
 * every process given --keys DIR (env EDDY_KEYS) reads them.
 *
 * DIR (0700) holds, every file 0600:
 *   server.key       public + secret key of coordinators and workers
 *   server.pub       the server public key alone (what a client needs)
 *   client.key       a client pair: every command
 *   reader.key       a reader pair: read-only commands (status, jobs, ...)
 *   authorized_keys  one `ROLE KEY` a line (ROLE: worker, client, reader;
 *                    KEY: 40 Z85 characters); a line starting with `#` is a comment
 * A pair file is two lines, `public KEY` and `secret KEY` (comments
 * allowed); server.pub is one `public KEY` line.
 *
 * Loading refuses a file readable or writable by group or others, a key
 * that is not 40 Z85 characters, and a pair whose public key does not
 * belong to its secret key: the error names the file and the problem in one
 * line. Loading reads small local files synchronously: only at start. */
#ifndef EDDY_NET_KEYS_H
#define EDDY_NET_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

#define EDDY_KEY_Z85_LEN 40  /* a 32-byte CURVE key in Z85 */
#define EDDY_KEY_BIN_LEN 32

/* What an authorised public key may do (its line in authorized_keys).
 * The ZAP handler hands the role name to the receiving socket as the
 * message property "User-Id". */
typedef enum eddy_role {
    EDDY_ROLE_NONE = 0, /* not authorised */
    EDDY_ROLE_READER,   /* read-only requests */
    EDDY_ROLE_WORKER,   /* register, heartbeat, task reports, data, plugin fetch */
    EDDY_ROLE_CLIENT,   /* everything */
} eddy_role_t;

/* What the process does with the keys: a server binds (coordinator,
 * worker: server.key + authorized_keys, and connects with the server pair as
 * a worker); a client only connects (CLI, controller: server.pub and
 * client.key, else reader.key). */
typedef enum eddy_keys_use { EDDY_KEYS_SERVER, EDDY_KEYS_CLIENT } eddy_keys_use_t;

typedef struct eddy_authorized_key {
    uint8_t key[EDDY_KEY_BIN_LEN];
    eddy_role_t role;
} eddy_authorized_key_t;

typedef struct eddy_keys {
    char dir[512];
    eddy_keys_use_t use;
    char server_public[EDDY_KEY_Z85_LEN + 1]; /* the key a connector expects its server to hold */
    char public_key[EDDY_KEY_Z85_LEN + 1];    /* this process's own pair */
    char secret_key[EDDY_KEY_Z85_LEN + 1];
    eddy_role_t role;                          /* of this process's own pair */
    eddy_authorized_key_t *authorized;        /* EDDY_KEYS_SERVER only */
    size_t n_authorized;
} eddy_keys_t;

/* Loads DIR's keys for use. NULL with err naming the file on any problem. */
eddy_keys_t *eddy_keys_load(const char *dir, eddy_keys_use_t use, eddy_err_t *err);
void eddy_keys_destroy(eddy_keys_t **self_p);

/* The role of a peer's binary public key: EDDY_ROLE_NONE if unlisted. */
eddy_role_t eddy_keys_role_of(const eddy_keys_t *self, const uint8_t key[EDDY_KEY_BIN_LEN]);

/* Creates DIR (0700; an existing DIR must hold none of the files) with new
 * server, client and reader pairs and their authorized_keys. */
int eddy_keys_generate(const char *dir, eddy_err_t *err);
/* The same, unless DIR already holds every key file: then they are checked
 * (all must load) and kept, *kept true. A partial set is an error, never
 * completed: new keys beside old ones would split the cluster. */
int eddy_keys_generate_once(const char *dir, bool *kept, eddy_err_t *err);

const char *eddy_role_name(eddy_role_t role);
/* "worker", "client", "reader" -> role; EDDY_ROLE_NONE for anything else. */
eddy_role_t eddy_role_parse(const char *name);

#endif
