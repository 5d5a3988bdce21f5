/* s3rver.h - a real S3-compatible server for tests: npm's s3rver, started
 * on a free 127.0.0.1 port with its data in a fresh temp dir and one bucket
 * made at start, waited for by polling an unsigned GET of the bucket (no
 * sleeping guesses), killable and restartable on the same port with the
 * same data (to test a server that goes away mid-way). It runs in its own
 * process group and gets SIGKILL when the thread that started it exits
 * (proc.h: PR_SET_PDEATHSIG), so start and restart it on the test's main
 * thread.
 *
 * What s3rver 3.7 checks of a SigV4 request: the header's shape, the date
 * (15 minutes of skew), x-amz-content-sha256 being present, and that the
 * access key id is one it knows (S3RVER, secret S3RVER); it does NOT verify
 * the signature itself, so a wrong secret goes unnoticed. It runs with
 * NODE_OPTIONS=--openssl-legacy-provider: its continuation tokens use DES. */
#ifndef EDDY_TESTS_SUPPORT_S3RVER_H
#define EDDY_TESTS_SUPPORT_S3RVER_H

#include <sys/types.h>

#include "common/err.h"

/* The s3rver script: $EDDY_S3RVER, else where scripts/setup.sh installs it. */
#define EDDY_TEST_S3RVER_DEFAULT "/usr/local/bin/s3rver"
/* The one key pair s3rver accepts. */
#define EDDY_TEST_S3RVER_KEY_ID "S3RVER"
#define EDDY_TEST_S3RVER_SECRET "S3RVER"

typedef struct eddy_test_s3rver eddy_test_s3rver_t;

/* Starts s3rver with bucket created. NULL with err (naming the binary and
 * how to install it when it is missing, or the log's tail). */
eddy_test_s3rver_t *eddy_test_s3rver_start(const char *bucket, eddy_err_t *err);
/* The same after putting s3rver's key pair into this process's environment
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; no AWS_SESSION_TOKEN), which the
 * processes a test starts inherit. */
eddy_test_s3rver_t *eddy_test_s3rver_start_with_env(const char *bucket, eddy_err_t *err);
/* "http://127.0.0.1:PORT" */
const char *eddy_test_s3rver_url(const eddy_test_s3rver_t *self);
int eddy_test_s3rver_port(const eddy_test_s3rver_t *self);
/* Its log (one line per request: "Stored part N of ID", ...). */
const char *eddy_test_s3rver_log(const eddy_test_s3rver_t *self);
/* -1 when not running. */
pid_t eddy_test_s3rver_pid(const eddy_test_s3rver_t *self);
/* SIGKILL and reap; the data stays for a restart. */
void eddy_test_s3rver_kill(eddy_test_s3rver_t *self);
/* Starts it again on the same port with the same data and waits for it. */
int eddy_test_s3rver_restart(eddy_test_s3rver_t *self, eddy_err_t *err);
/* Kills it and removes its dir. */
void eddy_test_s3rver_destroy(eddy_test_s3rver_t **self_p);

#endif
