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

#include "tests/support/cluster.h"
#include "tests/support/proc.h"

static eddy_test_cluster_t *cl;
static char data_a[16], data_b[16];
static int ports[1];

/* A coordinator with eddy's own timing. */
static void setup(void)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = "identity", .checkpoint_interval = "", .heartbeat_ms = "",
                                  .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    ports[0] = eddy_test_cluster_port(cl, 0);
    int data[2];
    cr_assert(eddy_test_free_ports(2, data, &err) == 0, "%s", err.msg);
    snprintf(data_a, sizeof data_a, "%d", data[0]);
    snprintf(data_b, sizeof data_b, "%d", data[1]);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
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
    cr_assert(eddy_test_cluster_start_coordinator(cl, 0, &err) == 0, "%s", err.msg);
    /* Only registration matters here: nothing connects to the advertised
     * address, so the hostname need not resolve on the test machine. */
    const char *a[] = {"--hostname-identity", "--data-port", data_a, "--register-timeout-ms",
                       "60000", NULL};
    const char *b[] = {"--hostname-identity", "--advertise-host", "127.0.0.1", "--data-port",
                       data_b, "--register-timeout-ms", "60000", NULL};
    cr_assert(eddy_test_cluster_start_worker_as(cl, "", a, &err) >= 0, "%s", err.msg);
    cr_assert(eddy_test_cluster_start_worker_as(cl, "explicit-b", b, &err) >= 0, "%s", err.msg);

    struct expect e = {host, "explicit-b"};
    if (!eddy_poll_until(both_registered, &e, 60000)) {
        char *l = eddy_test_cluster_log_text(cl);
        cr_assert_fail("workers '%s' and 'explicit-b' did not both register; logs:\n%s", host, l);
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
