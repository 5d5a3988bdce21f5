/* test_etcd_tls.c - the metadata store over TLS to a real etcd that wants
 * client certificates (--etcd-ca/--etcd-cert/--etcd-key).
 *
 * Each test makes a throwaway CA, a server certificate for 127.0.0.1 and a
 * client certificate with the openssl command, and starts etcd serving only
 * https with --client-cert-auth. Then:
 * - the metastore API with the CA and client certificate puts, gets, lists
 *   and deletes; without the client certificate, or without the CA (the
 *   system's CAs do not know ours), open fails with an error naming the
 *   store, and mistakes in the settings (http URL, a certificate without its
 *   key, a key others may read) are refused before anything is sent;
 * - `eddy coordinator --metastore https://...` with the three flags starts
 *   and keeps its job store there; without a client certificate it exits 1
 *   naming the store; the flags with an etcd:// URL are a usage error. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/metastore.h"
#include "tests/support/cluster.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

#define OPENSSL "/usr/bin/openssl"

/* The fixture gives the directory and two port pairs: the coordinator's
 * (control, HTTP) and etcd's (client, peer). The etcd here serves TLS only,
 * which the fixture's own etcd does not, and the coordinators' flags are
 * what is tested, so both are started here. */
static eddy_test_cluster_t *cl;
static char *dir, *ca, *cert, *key;
static char url[64];
static eddy_proc_t etcd;

static char *path_in(const char *name)
{
    return eddy_test_cluster_path(cl, name);
}

static void run_openssl(char *const argv[])
{
    char *errout = NULL;
    int rc = eddy_proc_run(argv, 60000, NULL, &errout);
    cr_assert_eq(rc, 0, "openssl %s failed (%d): %s", argv[1], rc, errout ? errout : "");
    free(errout);
}

/* A key pair and a certificate signed by the test CA. */
static void issue(const char *name, const char *extensions)
{
    char file[64];
    snprintf(file, sizeof file, "%s.key", name);
    char *keyp = path_in(file);
    snprintf(file, sizeof file, "%s.csr", name);
    char *csr = path_in(file);
    snprintf(file, sizeof file, "%s.pem", name);
    char *pem = path_in(file);
    snprintf(file, sizeof file, "%s.ext", name);
    char *ext = path_in(file);
    cr_assert(eddy_write_file(ext, extensions, strlen(extensions)) == 0);
    char subj[64];
    snprintf(subj, sizeof subj, "/CN=eddy-test-%s", name);
    char *req[] = {OPENSSL, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                   "-nodes", "-keyout", keyp, "-out", csr, "-subj", subj, NULL};
    run_openssl(req);
    char *sign[] = {OPENSSL, "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", path_in("ca.key"),
                    "-CAcreateserial", "-out", pem, "-days", "2", "-extfile", ext, NULL};
    run_openssl(sign);
    cr_assert(chmod(keyp, 0600) == 0);
}

static bool etcd_serves(void *arg)
{
    (void)arg;
    if (!eddy_proc_alive(&etcd))
        return true;
    eddy_metastore_tls_t tls = {ca, cert, key};
    eddy_metastore_t *m = eddy_metastore_open_tls(url, &tls, NULL);
    bool ok = m != NULL;
    eddy_metastore_destroy(&m);
    return ok;
}

static void setup(void)
{
    cr_assert(access(OPENSSL, X_OK) == 0, "openssl not found at " OPENSSL
              " (Debian package openssl; scripts/setup.sh installs it)");
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "etcdtls", .ports = 2};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    dir = eddy_test_cluster_dir(cl);
    ca = path_in("ca.pem");
    cert = path_in("client.pem");
    key = path_in("client.key");
    char *mkca[] = {OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", path_in("ca.key"), "-out",
                    ca, "-subj", "/CN=eddy-test-ca", "-days", "2", NULL};
    run_openssl(mkca);
    /* etcd's JSON gateway dials etcd itself with the server certificate,
     * so that one must be good for client authentication too */
    issue("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
    issue("client", "extendedKeyUsage=clientAuth\n");

    const char *bin = getenv("EDDY_ETCD") && getenv("EDDY_ETCD")[0] ? getenv("EDDY_ETCD")
                                                                     : EDDY_TEST_ETCD_DEFAULT;
    cr_assert(access(bin, X_OK) == 0, "etcd not found at %s", bin);
    char client_url[64], peer_url[64], cluster[100];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", eddy_test_cluster_port(cl, 1));
    snprintf(client_url, sizeof client_url, "%s", url);
    snprintf(peer_url, sizeof peer_url, "http://127.0.0.1:%d", eddy_test_cluster_http_port(cl, 1));
    snprintf(cluster, sizeof cluster, "eddy-tls=%s", peer_url);
    char *argv[] = {(char *)bin, "--name", "eddy-tls", "--data-dir", path_in("data"),
                    "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                    "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                    "--initial-cluster", cluster, "--initial-cluster-state", "new",
                    "--cert-file", path_in("server.pem"), "--key-file", path_in("server.key"),
                    "--trusted-ca-file", ca, "--client-cert-auth", NULL};
    cr_assert(eddy_proc_start(&etcd, argv, NULL, path_in("etcd.log"), &err) == 0, "%s", err.msg);
    eddy_poll_until(etcd_serves, NULL, 30000);
    char *log = eddy_read_file(path_in("etcd.log"), NULL);
    cr_assert(eddy_proc_alive(&etcd) && etcd_serves(NULL), "etcd with TLS did not serve; log:\n%s",
              log ? log : "");
    free(log);
}

static void teardown(void)
{
    eddy_proc_kill(&etcd, 5000);
    eddy_test_cluster_destroy(&cl);
}

static void open_fails(const char *u, const eddy_metastore_tls_t *tls, const char *needle)
{
    eddy_err_t err = {{0}};
    eddy_metastore_t *m = eddy_metastore_open_tls(u, tls, &err);
    cr_assert_null(m, "open %s succeeded", u);
    cr_assert(strstr(err.msg, needle), "error lacks '%s': %s", needle, err.msg);
}

Test(etcd_tls, metastore_over_tls, .init = setup, .fini = teardown, .timeout = 180)
{
    eddy_err_t err = {{0}};
    eddy_metastore_tls_t tls = {ca, cert, key};
    eddy_metastore_t *m = eddy_metastore_open_tls(url, &tls, &err);
    cr_assert(m, "%s", err.msg);
    cr_assert_eq(eddy_metastore_put(m, "/eddy/tls/a", "one", 3, &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_metastore_put(m, "/eddy/tls/b", "two", 3, &err), 0, "%s", err.msg);
    char *v = NULL;
    size_t len = 0;
    cr_assert_eq(eddy_metastore_get(m, "/eddy/tls/a", &v, &len, &err), 1, "%s", err.msg);
    cr_assert(len == 3 && !memcmp(v, "one", 3));
    free(v);
    eddy_kv_list_t list = {0};
    cr_assert_eq(eddy_metastore_list(m, "/eddy/tls/", &list, &err), 0, "%s", err.msg);
    cr_assert_eq(list.count, 2);
    eddy_kv_list_clear(&list);
    cr_assert_eq(eddy_metastore_delete(m, "/eddy/tls/a", &err), 0, "%s", err.msg);
    cr_assert_eq(eddy_metastore_get(m, "/eddy/tls/a", NULL, NULL, &err), 0);
    eddy_metastore_destroy(&m);

    /* etcd wants a client certificate */
    eddy_metastore_tls_t ca_only = {ca, NULL, NULL};
    open_fails(url, &ca_only, "client certificate");
    /* and our CA: the system's CAs do not vouch for its certificate */
    eddy_metastore_tls_t no_ca = {NULL, cert, key};
    open_fails(url, &no_ca, "certificate");
    open_fails(url, NULL, url);

    /* settings that cannot be right are refused before any request */
    char http_url[80];
    snprintf(http_url, sizeof http_url, "http%s", url + 5);
    open_fails(http_url, &tls, "https://");
    open_fails("etcd://127.0.0.1:1", &tls, "https://");
    open_fails(dir, &tls, "https://");
    eddy_metastore_tls_t half = {ca, cert, NULL};
    open_fails(url, &half, "go together");
    eddy_metastore_tls_t missing = {ca, path_in("nope.pem"), key};
    open_fails(url, &missing, "nope.pem");
    cr_assert(chmod(key, 0644) == 0);
    open_fails(url, &tls, "chmod 600");
    cr_assert(chmod(key, 0640) == 0); /* group-readable keys are common (ssl-cert) */
    m = eddy_metastore_open_tls(url, &tls, &err);
    cr_assert(m, "%s", err.msg);
    eddy_metastore_destroy(&m);
}

static bool coordinator_listening(void *arg)
{
    char *log = eddy_read_file(arg, NULL);
    bool ok = log && (strstr(log, "listening on") || strstr(log, "eddy coordinator:"));
    free(log);
    return ok;
}

Test(etcd_tls, coordinator_over_tls, .init = setup, .fini = teardown, .timeout = 180)
{
    eddy_err_t err = {{0}};
    char *bind = eddy_test_cluster_url(cl, 0);
    char *logp = eddy_test_cluster_coordinator_log(cl, 0);
    char *argv[] = {EDDY_BINARY, "coordinator", "--bind", bind, "--http-port", "0", "--metastore",
                    url, "--etcd-ca", ca, "--etcd-cert", cert, "--etcd-key", key,
                    "--snapshot-dir", path_in("snapshots"), NULL};
    eddy_proc_t coord;
    cr_assert(eddy_proc_start(&coord, argv, NULL, logp, &err) == 0, "%s", err.msg);
    cr_assert(eddy_poll_until(coordinator_listening, logp, 30000), "coordinator never started");
    char *log = eddy_read_file(logp, NULL);
    cr_assert(strstr(log, "listening on") && eddy_proc_alive(&coord), "log:\n%s", log);
    free(log);
    /* it works against that store: a status round trip reads its state */
    json_t *st = eddy_test_status(eddy_test_cluster_port(cl, 0));
    cr_assert(st, "no status from a coordinator on TLS etcd");
    json_decref(st);
    eddy_proc_kill(&coord, 3000);

    /* without a client certificate: exit 1, naming the store */
    char *no_cert[] = {EDDY_BINARY, "coordinator", "--bind", bind, "--http-port", "0", "--metastore",
                       url, "--etcd-ca", ca, "--snapshot-dir", path_in("snapshots"), NULL};
    char *errout = NULL;
    int rc = eddy_proc_run(no_cert, 60000, NULL, &errout);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, url) && strstr(errout, "--etcd-cert"), "%s", errout ? errout : "");
    free(errout);

    /* the flags with a plain-HTTP URL, or a certificate without its key */
    char *plain[] = {EDDY_BINARY, "coordinator", "--metastore", "etcd://127.0.0.1:2379",
                     "--etcd-ca", ca, NULL};
    errout = NULL;
    rc = eddy_proc_run(plain, 30000, NULL, &errout);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, "https://"), "%s", errout ? errout : "");
    free(errout);
    char *half[] = {EDDY_BINARY, "coordinator", "--metastore", url, "--etcd-cert", cert, NULL};
    errout = NULL;
    rc = eddy_proc_run(half, 30000, NULL, &errout);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, errout ? errout : "");
    cr_assert(errout && strstr(errout, "--etcd-key"), "%s", errout ? errout : "");
    free(errout);
}
