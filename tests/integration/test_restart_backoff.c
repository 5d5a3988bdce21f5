/* test_restart_backoff.c - a job that fails every time it runs, with the
 * real binary: `eddy local` whose sink can never write (its directory does
 * not exist). Restores in a row back off (the first at once, then 100 ms
 * doubling up to the 10 s cap), and after the tenth the job fails: eddy
 * local exits 1 with the restart count and the cause (the task, the worker
 * it failed on and the reason).
 *
 * Not RUN_SERIAL (CMakeLists.txt): nothing here depends on how fast the
 * machine is. The delays are read from the log, and the run's length is a
 * lower bound (the backoff's sum), which a busy machine only lengthens.
 * (It was a case of test_coordinator_recovery, whose other cases time
 * heartbeats and so run alone.) */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "tests/support/etcd.h"
#include "tests/support/proc.h"

Test(restart_backoff, deterministic_failure, .timeout = 240)
{
    eddy_err_t err = {{0}};
    char *tmp = eddy_test_mkdtemp("detfail", &err);
    cr_assert(tmp, "%s", err.msg);
    char in[600], out[600], logf[600];
    snprintf(in, sizeof in, "%s/in.txt", tmp);
    snprintf(out, sizeof out, "%s/missing-dir/counts.tsv", tmp); /* never writable */
    snprintf(logf, sizeof logf, "%s/local.log", tmp);
    cr_assert(eddy_gen_lines(in, 2000, 5, &err) == 0, "%s", err.msg);
    int p[2];
    cr_assert(eddy_test_free_ports(2, p, &err) == 0, "%s", err.msg);
    char cp[16], hp[16];
    snprintf(cp, sizeof cp, "%d", p[0]);
    snprintf(hp, sizeof hp, "%d", p[1]);
    char *argv[] = {EDDY_BINARY, "local", "--workers", "2", "--control-port", cp, "--http-port", hp,
                    "--checkpoint-interval", "0", "--job", "wordcount", "--input", in, /* INFO read */
                    "--output", out, NULL};
    eddy_proc_t local = {0};
    uint64_t t0 = eddy_mono_ms();
    cr_assert(eddy_proc_start(&local, argv, NULL, logf, &err) == 0, "%s", err.msg);
    int rc = eddy_proc_wait(&local, 200000);
    uint64_t elapsed = eddy_mono_ms() - t0;
    char *l = eddy_read_file(logf, NULL);
    cr_assert_eq(rc, 1, "eddy local exited %d:\n%s", rc, l);
    /* the cause names the task, the worker it failed on and the reason */
    const char *final = strstr(l, "failed: too many restarts (10); last cause: task sink[0] failed: on worker ");
    cr_assert(final && strstr(final, "cannot write"), "no final cause:\n%s", l);
    /* the planned delays double up to the cap */
    long prev = 0;
    int n = 0;
    for (const char *q = l; (q = strstr(q, " of at most 10 in ")); n++) {
        q += strlen(" of at most 10 in ");
        long d = strtol(q, NULL, 10);
        /* the first restore in a row goes at once, then 100 ms doubling */
        cr_assert(d == 10000 || (n == 0 && d == 0) || (n == 1 && d == 100) || (n > 1 && d == 2 * prev),
                  "delay %ld after %ld:\n%s", d, prev, l);
        prev = d;
    }
    cr_assert_eq(n, 10, "%d restores planned:\n%s", n, l);
    /* a lower bound by design (0, then 100 ms doubling to 10 s: 32.7 s) */
    cr_assert_geq(elapsed, 30000, "ten restores took only %llu ms", (unsigned long long)elapsed);
    free(l);
    eddy_test_rm_rf(tmp);
    free(tmp);
}
