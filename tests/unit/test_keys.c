/* test_keys.c - CURVE key files (net/keys.h) and the ZAP handler with roles
 * (net/curve.h) over real loopback TCP sockets.
 *
 * Why: a key file others can read is a leaked key, and a corrupt one must
 * be a clear error at start, not handshakes that silently fail; a peer whose
 * key is not listed, or that speaks no CURVE, must never deliver a message,
 * and the receiver must learn the sender's role from each message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "common/clock.h"
#include "net/curve.h"
#include "net/keys.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"
#include "tests/unit/leak_check.h"

static char *dir;

static void setup(void)
{
    eddy_err_t err = {{0}};
    char *parent = eddy_test_mkdtemp("keys", &err);
    cr_assert(parent, "%s", err.msg);
    size_t n = strlen(parent) + 8;
    dir = malloc(n);
    snprintf(dir, n, "%s/k", parent);
    free(parent);
    cr_assert(eddy_keys_generate(dir, &err) == 0, "%s", err.msg);
}

static void teardown(void)
{
    if (dir) {
        char *slash = strrchr(dir, '/');
        *slash = '\0';
        eddy_test_rm_rf(dir);
    }
    free(dir);
    dir = NULL;
    eddy_test_leak_check();
}

TestSuite(keys, .init = setup, .fini = teardown);

static char *path_of(const char *name)
{
    static char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static mode_t mode_of(const char *path)
{
    struct stat st;
    cr_assert(stat(path, &st) == 0, "%s", path);
    return st.st_mode & 07777;
}

Test(keys, keygen_writes_private_files_and_loads)
{
    cr_assert_eq(mode_of(dir), 0700);
    const char *files[] = {"server.key", "server.pub", "client.key", "reader.key", "authorized_keys"};
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(mode_of(path_of(files[i])), 0600, "%s", files[i]);
    eddy_err_t err = {{0}};
    eddy_keys_t *server = eddy_keys_load(dir, EDDY_KEYS_SERVER, &err);
    cr_assert(server, "%s", err.msg);
    eddy_keys_t *client = eddy_keys_load(dir, EDDY_KEYS_CLIENT, &err);
    cr_assert(client, "%s", err.msg);
    cr_assert_eq(client->role, EDDY_ROLE_CLIENT);
    cr_assert_str_eq(client->server_public, server->public_key);
    cr_assert_eq(server->n_authorized, 3);
    uint8_t bin[32];
    cr_assert(zmq_z85_decode(bin, client->public_key));
    cr_assert_eq(eddy_keys_role_of(server, bin), EDDY_ROLE_CLIENT);
    cr_assert(zmq_z85_decode(bin, server->public_key));
    cr_assert_eq(eddy_keys_role_of(server, bin), EDDY_ROLE_WORKER);
    memset(bin, 7, sizeof bin);
    cr_assert_eq(eddy_keys_role_of(server, bin), EDDY_ROLE_NONE);
    /* without client.key, a directory is a reader's */
    cr_assert(unlink(path_of("client.key")) == 0);
    eddy_keys_t *reader = eddy_keys_load(dir, EDDY_KEYS_CLIENT, &err);
    cr_assert(reader, "%s", err.msg);
    cr_assert_eq(reader->role, EDDY_ROLE_READER);
    eddy_keys_destroy(&reader);
    eddy_keys_destroy(&client);
    eddy_keys_destroy(&server);
    cr_assert_null(server);
}

Test(keys, keygen_never_overwrites)
{
    eddy_err_t err = {{0}};
    cr_assert(eddy_keys_generate(dir, &err) < 0);
    cr_assert(strstr(err.msg, "exists"), "%s", err.msg);
}

Test(keys, loose_permissions_refused)
{
    const char *files[] = {"server.key", "authorized_keys", "client.key", "server.pub"};
    for (size_t i = 0; i < 4; i++) {
        cr_assert(chmod(path_of(files[i]), 0640) == 0);
        eddy_err_t err = {{0}};
        eddy_keys_use_t use = i < 2 ? EDDY_KEYS_SERVER : EDDY_KEYS_CLIENT;
        eddy_keys_t *k = eddy_keys_load(dir, use, &err);
        cr_assert_null(k, "%s with mode 0640 was accepted", files[i]);
        cr_assert(strstr(err.msg, files[i]) && strstr(err.msg, "too open"), "%s", err.msg);
        cr_assert(!strchr(err.msg, '\n'));
        cr_assert(chmod(path_of(files[i]), 0600) == 0);
    }
}

static void rewrite(const char *name, const char *text)
{
    cr_assert(unlink(path_of(name)) == 0);
    FILE *f = fopen(path_of(name), "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    cr_assert(chmod(path_of(name), 0600) == 0);
}

static void expect_load_error(eddy_keys_use_t use, const char *needle)
{
    eddy_err_t err = {{0}};
    eddy_keys_t *k = eddy_keys_load(dir, use, &err);
    cr_assert_null(k, "loaded although corrupt");
    cr_assert(strstr(err.msg, needle), "error '%s' lacks '%s'", err.msg, needle);
    cr_assert(!strchr(err.msg, '\n'));
}

Test(keys, corrupt_files_are_clear_errors)
{
    char *orig = eddy_read_file(path_of("server.key"), NULL);
    cr_assert(orig);
    /* one character of the secret changed: still Z85, wrong pair */
    char *edited = strdup(orig);
    char *sec = strstr(edited, "secret ") + 7;
    sec[3] = sec[3] == 'a' ? 'b' : 'a';
    rewrite("server.key", edited);
    expect_load_error(EDDY_KEYS_SERVER, "does not match");
    /* truncated key */
    strcpy(edited, orig);
    sec = strstr(edited, "secret ") + 7;
    strcpy(sec + 20, "\n");
    rewrite("server.key", edited);
    expect_load_error(EDDY_KEYS_SERVER, "server.key:3: corrupt key");
    /* no secret at all */
    rewrite("server.key", "public 0000000000000000000000000000000000000000\n");
    expect_load_error(EDDY_KEYS_SERVER, "missing its secret key");
    rewrite("server.key", "garbage\n");
    expect_load_error(EDDY_KEYS_SERVER, "server.key:1: expected");
    rewrite("server.key", orig);
    /* authorized_keys: unknown role, bad key, empty */
    rewrite("authorized_keys", "# c\nadmin 0000000000000000000000000000000000000000\n");
    expect_load_error(EDDY_KEYS_SERVER, "authorized_keys:2: expected `ROLE KEY`");
    rewrite("authorized_keys", "client 0000\n");
    expect_load_error(EDDY_KEYS_SERVER, "authorized_keys:1: corrupt key");
    rewrite("authorized_keys", "# nothing\n\n");
    expect_load_error(EDDY_KEYS_SERVER, "no keys");
    rewrite("client.key", "public ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\nsecret x\n");
    expect_load_error(EDDY_KEYS_CLIENT, "client.key:1: corrupt key");
    free(orig);
    free(edited);
    eddy_err_t err = {{0}};
    cr_assert_null(eddy_keys_load("/nonexistent/eddy-keys", EDDY_KEYS_CLIENT, &err));
    cr_assert(strstr(err.msg, "/nonexistent/eddy-keys"), "%s", err.msg);
}

/* ---- CURVE + ZAP over loopback ------------------------------------------------------ */

/* Receives one message on router within ms: its body and the sender's role. */
static bool recv_with_role(void *router, uint64_t ms, char *body, size_t cap, eddy_role_t *role)
{
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, (long)ms) <= 0)
        return false;
    zmq_msg_t id, msg;
    zmq_msg_init(&id);
    zmq_msg_init(&msg);
    cr_assert(zmq_msg_recv(&id, router, 0) >= 0);
    cr_assert(zmq_msg_recv(&msg, router, 0) >= 0);
    size_t n = zmq_msg_size(&msg) < cap - 1 ? zmq_msg_size(&msg) : cap - 1;
    memcpy(body, zmq_msg_data(&msg), n);
    body[n] = '\0';
    *role = eddy_curve_role(&msg);
    zmq_msg_close(&id);
    zmq_msg_close(&msg);
    return true;
}

static void *dealer_to(void *ctx, const char *endpoint, const eddy_keys_t *keys)
{
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    eddy_err_t err = {{0}};
    cr_assert(eddy_curve_client(d, keys, &err) == 0, "%s", err.msg);
    cr_assert(zmq_connect(d, endpoint) == 0);
    return d;
}

static void zap_roles(const char *domain, eddy_role_t want_client, eddy_role_t want_worker)
{
    eddy_err_t err = {{0}};
    eddy_keys_t *server = eddy_keys_load(dir, EDDY_KEYS_SERVER, &err);
    cr_assert(server, "%s", err.msg);
    eddy_keys_t *client = eddy_keys_load(dir, EDDY_KEYS_CLIENT, &err);
    cr_assert(client, "%s", err.msg);
    void *sctx = zmq_ctx_new(), *cctx = zmq_ctx_new();
    void *router = zmq_socket(sctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    eddy_zap_t *zap = eddy_zap_start(sctx, server, router, domain, &err);
    cr_assert(zap, "%s", err.msg);
    cr_assert(zmq_bind(router, "tcp://127.0.0.1:*") == 0);
    char ep[128];
    size_t sz = sizeof ep;
    zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &sz);

    /* a stranger with a valid CURVE pair not in authorized_keys, and a
     * peer without CURVE: their messages never arrive */
    eddy_keys_t stranger = *client;
    stranger.authorized = NULL;
    cr_assert(zmq_curve_keypair(stranger.public_key, stranger.secret_key) == 0);
    void *bad1 = dealer_to(cctx, ep, &stranger);
    void *bad2 = dealer_to(cctx, ep, NULL);
    zmq_send(bad1, "stranger", 8, ZMQ_DONTWAIT);
    zmq_send(bad2, "plain", 5, ZMQ_DONTWAIT);

    void *good = dealer_to(cctx, ep, client);
    zmq_send(good, "client", 6, 0);
    void *worker = dealer_to(cctx, ep, server); /* workers connect with the server pair */
    zmq_send(worker, "worker", 6, 0);
    int got_client = 0, got_worker = 0;
    char body[64];
    eddy_role_t role;
    uint64_t deadline = eddy_mono_ms() + 5000;
    while (eddy_mono_ms() < deadline && recv_with_role(router, 500, body, sizeof body, &role)) {
        cr_assert(strcmp(body, "stranger") && strcmp(body, "plain"), "'%s' got through", body);
        if (!strcmp(body, "client")) {
            got_client++;
            cr_assert_eq(role, want_client, "client arrived as role %d", role);
        } else if (!strcmp(body, "worker")) {
            got_worker++;
            cr_assert_eq(role, want_worker, "worker arrived as role %d", role);
        }
        if (got_worker + got_client == (want_client != EDDY_ROLE_NONE) + 1)
            break;
    }
    cr_assert_eq(got_worker, 1);
    cr_assert_eq(got_client, want_client != EDDY_ROLE_NONE ? 1 : 0);
    zmq_close(bad1);
    zmq_close(bad2);
    zmq_close(good);
    zmq_close(worker);
    zmq_close(router);
    eddy_zap_destroy(&zap);
    zmq_ctx_term(sctx);
    zmq_ctx_term(cctx);
    eddy_keys_destroy(&server);
    eddy_keys_destroy(&client);
}

Test(keys, zap_admits_listed_keys_with_their_role)
{
    zap_roles(EDDY_ZAP_CONTROL, EDDY_ROLE_CLIENT, EDDY_ROLE_WORKER);
}

Test(keys, zap_data_domain_admits_workers_only)
{
    zap_roles(EDDY_ZAP_DATA, EDDY_ROLE_NONE, EDDY_ROLE_WORKER);
}
