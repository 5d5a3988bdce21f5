/* etcd.h - test helpers: temporary directories, free local ports, and a
 * real etcd server started for the duration of a test binary.
 *
 * Linked into every test executable (see CMakeLists.txt). Nothing here
 * prints; failures come back as eddy_err_t so tests can assert with the
 * message.
 *
 * Criterion note: each test runs in a re-executed child process, which
 * inherits the environment but not the runner's globals. So a test binary
 * that wants one etcd for all its tests starts it in ReportHook(PRE_ALL)
 * with eddy_test_etcd_start_shared() (which publishes the URL in the
 * environment), stops it in ReportHook(POST_ALL), and its tests call
 * eddy_test_etcd_shared_url(). The etcd process gets SIGKILL if the runner
 * dies, so a crashed run leaves no server behind. */
#ifndef EDDY_TESTS_SUPPORT_ETCD_H
#define EDDY_TESTS_SUPPORT_ETCD_H

#include <sys/types.h>

#include "common/err.h"

/* The etcd binary: $EDDY_ETCD, else /usr/bin/etcd. */
#define EDDY_TEST_ETCD_DEFAULT "/usr/bin/etcd"

/* mkdtemp under $TMPDIR (or /tmp) named "eddy-<tag>-XXXXXX"; malloc'd path. */
char *eddy_test_mkdtemp(const char *tag, eddy_err_t *err);
/* rm -rf path (never follows symlinks). 0, or -1 if something remained. */
int eddy_test_rm_rf(const char *path);

/* A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0 and
 * close). -1 with err on failure. */
int eddy_test_free_port(eddy_err_t *err);
/* A listening socket on 127.0.0.1 that nobody accepts from: connections
 * succeed (the kernel backlog takes them) but never get an answer. Returns
 * the fd and sets *port; -1 with err on failure. */
int eddy_test_listen_silent(int *port, eddy_err_t *err);

typedef struct eddy_test_etcd eddy_test_etcd_t;

/* Starts a single-member etcd on free 127.0.0.1 ports with its data in a
 * fresh temp dir, and waits (polling /health, deadline 30 s, no sleeping
 * guesses) until it serves. Retries with new ports if one was taken. */
eddy_test_etcd_t *eddy_test_etcd_start(eddy_err_t *err);
/* "http://127.0.0.1:PORT" */
const char *eddy_test_etcd_url(const eddy_test_etcd_t *self);
/* Its process id, for tests that SIGSTOP/SIGCONT it to make it unresponsive. */
pid_t eddy_test_etcd_pid(const eddy_test_etcd_t *self);
/* SIGTERM (then SIGKILL after 5 s), reap, remove the data dir. */
void eddy_test_etcd_stop(eddy_test_etcd_t **self_p);

/* The keys under prefix and the lease holding each (0: none), read with
 * a range request on etcd's JSON gateway at url. Fills at most cap
 * entries (keys truncated to EDDY_TEST_ETCD_KEY_MAX - 1 bytes) and returns
 * how many keys there are, or -1 with err. */
#define EDDY_TEST_ETCD_KEY_MAX 256
int eddy_test_etcd_range(const char *url, const char *prefix,
                         char (*keys)[EDDY_TEST_ETCD_KEY_MAX], long long *leases, int cap,
                         eddy_err_t *err);

/* Shared server for a whole test binary (see the note above). start_shared
 * never fails loudly: on failure it records the reason in the environment,
 * and shared_url returns NULL with that reason. */
void eddy_test_etcd_start_shared(void);
void eddy_test_etcd_stop_shared(void);
const char *eddy_test_etcd_shared_url(eddy_err_t *err);

#endif
