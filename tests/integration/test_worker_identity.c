/* test_worker_identity.c - `eddy worker --hostname-identity`: the identity
 * replicas of one compose service take from their container's hostname.
 *
 * A real coordinator (directory metastore) and real workers on loopback:
 * a worker with --hostname-identity registers under gethostname() and
 * advertises tcp://<hostname>:<data port>; explicit --name and
 * --advertise-host still win over it. The compose end-to-end test
 * (test_compose.sh) checks the same inside containers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/etcd.h"
#include "tests/support/proc.h"

static char *dir;
static char coord_logp[600], meta_dir[600], snap_dir[600], coord_url[64], data_a[16], data_b[16];
static int ports[3];
static eddy_proc_t coord, worker_a, worker_b;

static void setup(void)
{
    eddy_err_t err = {{0}};
    dir = eddy_test_mkdtemp("identity", &err);
    cr_assert(dir, "%s", err.msg);
    snprintf(coord_logp, sizeof coord_logp, "%s/coordinator.log", dir);
    snprintf(meta_dir, sizeof meta_dir, "%s/meta", dir);
    snprintf(snap_dir, sizeof snap_dir, "%s/snapshots", dir);
    cr_assert(eddy_test_free_ports(3, ports, &err) == 0, "%s", err.msg);
    snprintf(coord_url, sizeof coord_url, "tcp://127.0.0.1:%d", ports[0]);
    snprintf(data_a, sizeof data_a, "%d", ports[1]);
    snprintf(data_b, sizeof data_b, "%d", ports[2]);
}

static void teardown(void)
{
    eddy_proc_kill(&worker_a, 3000);
    eddy_proc_kill(&worker_b, 3000);
    eddy_proc_kill(&coord, 3000);
    if (dir)
        eddy_test_rm_rf(dir);
    free(dir);
}

/* The worker object named `name` in a status document (borrowed), or NULL. */
static json_t *worker_named(json_t *status, const char *name)
{
    size_t i;
    json_t *w;
    json_array_foreach(json_object_get(status, "workers"), i, w)
    {
        const char *n = json_string_value(json_object_get(w, "name"));
        if (n && !strcmp(n, name))
            return w;
    }
    return NULL;
}

struct expect {
    const char *name_a, *name_b;
};

static bool both_registered(void *arg)
{
    struct expect *e = arg;
    json_t *st = eddy_test_status(ports[0]);
    bool ok = st && worker_named(st, e->name_a) && worker_named(st, e->name_b);
    json_decref(st);
    return ok;
}

Test(worker_identity, hostname_identity_names_and_advertises_the_host, .init = setup,
     .fini = teardown, .timeout = 120)
{
    char host[256];
    cr_assert_eq(gethostname(host, sizeof host), 0);
    host[sizeof host - 1] = '\0';

    eddy_err_t err = {{0}};
    char *cargv[] = {EDDY_BINARY, "coordinator", "--bind", coord_url, "--http-port", "0",
                     "--metastore", meta_dir, "--snapshot-dir", snap_dir, NULL};
    cr_assert(eddy_proc_start(&coord, cargv, NULL, coord_logp, &err) == 0, "%s", err.msg);
    /* Only registration matters here: nothing connects to the advertised
     * address, so the hostname need not resolve on the test machine. */
    char *a[] = {EDDY_BINARY, "worker", "--coordinator", coord_url, "--hostname-identity",
                 "--data-port", data_a, "--snapshot-dir", snap_dir, "--register-timeout-ms", "60000",
                 NULL};
    char *b[] = {EDDY_BINARY, "worker", "--coordinator", coord_url, "--hostname-identity",
                 "--name", "explicit-b", "--advertise-host", "127.0.0.1", "--data-port", data_b,
                 "--snapshot-dir", snap_dir, "--register-timeout-ms", "60000", NULL};
    cr_assert(eddy_proc_start(&worker_a, a, NULL, NULL, &err) == 0, "%s", err.msg);
    cr_assert(eddy_proc_start(&worker_b, b, NULL, NULL, &err) == 0, "%s", err.msg);

    struct expect e = {host, "explicit-b"};
    if (!eddy_poll_until(both_registered, &e, 60000)) {
        char *l = eddy_read_file(coord_logp, NULL);
        cr_assert_fail("workers '%s' and 'explicit-b' did not both register; coordinator log:\n%s",
                       host, l ? l : "(none)");
    }
    json_t *st = eddy_test_status(ports[0]);
    cr_assert(st);
    char want[400];
    snprintf(want, sizeof want, "tcp://%s:%s", host, data_a);
    const char *addr_a = json_string_value(json_object_get(worker_named(st, host), "address"));
    cr_assert(addr_a && !strcmp(addr_a, want), "--hostname-identity advertises '%s', want '%s'",
              addr_a ? addr_a : "(null)", want);
    snprintf(want, sizeof want, "tcp://127.0.0.1:%s", data_b);
    const char *addr_b = json_string_value(json_object_get(worker_named(st, "explicit-b"), "address"));
    cr_assert(addr_b && !strcmp(addr_b, want), "explicit --advertise-host lost: '%s', want '%s'",
              addr_b ? addr_b : "(null)", want);
    json_decref(st);
}
