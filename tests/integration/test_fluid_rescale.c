/* test_fluid_rescale.c - `--migration fluid` rescales of a running
 * wordcount, through the real binary, real workers and the real control
 * and data planes (coordinator/fluid.c, runtime/task_migrate.c).
 *
 * - up, down and back (count 3 -> 4 -> 2 -> 3, steps of 4 key groups): the
 *   output equals the reference, every rescale says it was fluid (its
 *   reply, and `rescales[]` in status with its steps), and the key groups
 *   tile [0, 128) at each new parallelism;
 * - kill -9 in the middle of a step of the worker of the old owner, of the
 *   new owner, of an upstream sender: the test hook EDDY_TEST_FLUID_HOLD_MS
 *   makes every old owner hold its state back, and the worker is killed
 *   while it does; the rescale is refused, the job restores from its last
 *   checkpoint, a second fluid rescale completes, and the output is still
 *   exact;
 * - a corrupt state chunk (test hook EDDY_TEST_FLUID_CORRUPT) is named,
 *   nothing of its group is loaded, the job restores and stays exact;
 * - a job that is behind (read faster than count keeps up): a rescale 2 -> 4
 *   is exact, and so is a restore after a kill -9 of the old owner while
 *   all four of its steps are in flight;
 * - other keys keep flowing while a step's transfer is held back: a
 *   wordcount fed over --socket writes its changelog while the first step of
 *   count 2 -> 3 (key groups 43..63, instance 0 -> 1, in steps of 128) is
 *   held 4 s by the test hook; meanwhile words of every other key group get
 *   new counts and words of the moving groups none; at the end every word's
 *   last count is what was sent. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "state/keygroup.h"
#include "tests/support/cluster.h"
#include "tests/support/proc.h"

#define LINES 400000
#define SOURCE_RATE "30000"

static eddy_test_cluster_t *cl;
static eddy_proc_t *job;
static char *input, *output, *logp;

/* A cluster for eddy local --workers n with checkpoints every interval ms
 * (eddy local's own heartbeat timing). */
static void cluster(const char *tag, int n, const char *interval)
{
    eddy_err_t err = {{0}};
    eddy_test_cluster_opts_t o = {.tag = tag, .workers = n, .checkpoint_interval = interval,
                                  .heartbeat_ms = "", .heartbeat_timeout_ms = ""};
    cl = eddy_test_cluster_new(&o, &err);
    cr_assert(cl, "%s", err.msg);
    logp = eddy_test_cluster_path(cl, "local.log");
}

static void start_with(const char *hold_ms, const char *corrupt)
{
    eddy_err_t err = {{0}};
    cluster("fluid", 3, "500");
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_lines(input, LINES, 11, &err) == 0, "%s", err.msg);
    if (hold_ms)
        setenv("EDDY_TEST_FLUID_HOLD_MS", hold_ms, 1); /* the workers inherit it */
    if (corrupt)
        setenv("EDDY_TEST_FLUID_CORRUPT", corrupt, 1);
    /* --no-rebalance: a killed worker that eddy local restarts would get
     * instances back by a fluid migration, whose steps the hold slows down
     * as much as the rescale's (test_rebalance covers migrations) */
    const char *argv[] = {"--migration", "fluid", "--migration-step-key-groups", "4", "--no-rebalance",
                          "--job", "wordcount", "--input", input, "--output", output,
                          "--parallelism", "3", "--rate", SOURCE_RATE, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    job = eddy_test_cluster_local(cl);
    unsetenv("EDDY_TEST_FLUID_HOLD_MS");
    unsetenv("EDDY_TEST_FLUID_CORRUPT");
}

static void start(const char *hold_ms)
{
    start_with(hold_ms, NULL);
}

static void teardown(void)
{
    eddy_test_cluster_destroy(&cl);
}

static char *log_text(void)
{
    return eddy_test_cluster_log_text(cl);
}

static void wait_progress(int64_t min_completed, const char *what)
{
    const eddy_test_job_want_t want = {.state = "running", .min_completed = min_completed};
    if (!eddy_test_cluster_wait_job(cl, "wordcount", &want, 30000, NULL, NULL))
        cr_assert_fail("%s; log:\n%s", what, log_text());
}

static void wait_running(void)
{
    wait_progress(0, "job never (again) reached state running");
}

static int rescale(const char *p, char **out, char **err)
{
    const char *argv[] = {"rescale", "wordcount", "count", p, NULL};
    return eddy_test_cluster_ctl(cl, argv, 90000, out, err);
}

/* `eddy rescale wordcount count p` in the background, its stdout in
 * DIR/rescale.out. */
static void rescale_start(const char *p, eddy_proc_t *client)
{
    const char *argv[] = {"rescale", "wordcount", "count", p, NULL};
    eddy_err_t err = {{0}};
    cr_assert(eddy_test_cluster_ctl_start(cl, argv, client,
                                          eddy_test_cluster_path(cl, "rescale.out"), NULL,
                                          &err) == 0,
              "%s", err.msg);
}

static void expect_correct_output(void)
{
    int rc = eddy_proc_wait(job, 120000);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log_text());
    size_t gl, el;
    int same = eddy_test_same_wordcount(input, output, &gl, &el);
    cr_assert(same >= 0, "no output; log:\n%s", log_text());
    cr_assert(same, "output after fluid rescales differs from the reference (%zu vs %zu bytes)",
              gl, el);
}

/* count's parallelism is p and its instances' key groups tile [0,128). */
static void expect_status_parallelism(int p)
{
    json_t *st = eddy_test_cluster_status(cl);
    cr_assert(st, "eddy status --json failed");
    cr_assert(eddy_test_status_job(st, "wordcount"));
    json_t *op = eddy_test_status_operator(st, "wordcount", "count"), *o;
    size_t i;
    cr_assert(op);
    cr_assert_eq(json_integer_value(json_object_get(op, "parallelism")), p);
    json_int_t next = 0;
    json_array_foreach(json_object_get(op, "instances"), i, o)
    {
        json_t *kg = json_object_get(o, "key_groups");
        cr_assert_eq(json_integer_value(json_array_get(kg, 0)), next);
        next = json_integer_value(json_array_get(kg, 1));
    }
    cr_assert_eq(next, 128);
    json_decref(st);
}

Test(fluid, up_down_back_keeps_exact_counts, .fini = teardown, .timeout = 240)
{
    start(NULL);
    static const char *steps[] = {"4", "2", "3"};
    for (int s = 0; s < 3; s++) {
        wait_running();
        char *out = NULL, *err = NULL;
        int rc = rescale(steps[s], &out, &err);
        cr_assert_eq(rc, 0, "eddy rescale wordcount count %s exited %d: %s\nlog:\n%s", steps[s], rc,
                     err, log_text());
        cr_assert(out && strstr(out, "(fluid)"), "not a fluid rescale: %s", out ? out : "");
        free(out);
        free(err);
        wait_running();
        expect_status_parallelism(atoi(steps[s]));
    }
    char *log = log_text();
    cr_assert(!strstr(log, "restor"), "a fluid rescale restored the job:\n%s", log);
    free(log);
    /* status records them as fluid, with their steps */
    json_t *st = eddy_test_cluster_status(cl);
    cr_assert(st);
    json_t *rs = json_object_get(eddy_test_status_job(st, "wordcount"), "rescales");
    cr_assert_eq(json_array_size(rs), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(rs, i);
        cr_assert_str_eq(json_string_value(json_object_get(r, "migration")), "fluid");
        cr_assert_gt(json_integer_value(json_object_get(r, "steps")), 0);
        cr_assert_gt(json_integer_value(json_object_get(r, "key_groups_moved")), 0);
    }
    json_decref(st);
    expect_correct_output();
}

/* Whether the log says arg (a string). */
static bool log_says(void *arg)
{
    char *s = eddy_read_file(logp, NULL);
    bool yes = s && strstr(s, (const char *)arg);
    free(s);
    return yes;
}

/* The pid of the worker running op[instance]. */
static pid_t worker_of(const char *name, int instance)
{
    json_t *st = eddy_test_cluster_status(cl);
    cr_assert(st);
    pid_t pid = eddy_test_status_instance_pid(st, "wordcount", name, instance);
    json_decref(st);
    return pid;
}

/* Rescales count 3 -> 4 with every step's transfer held 1.5 s, kills -9
 * the worker of op[instance] during the first step (3 -> 4 in steps of 4:
 * key groups 32..35 go from count[0] to count[1]), then expects the rescale
 * refused, the job restored, a second rescale to go through and the output
 * to be exact. */
static void kill_mid_step(const char *op, int instance)
{
    start("1500");
    wait_running();
    /* a completed checkpoint to restore from */
    wait_progress(1, "no checkpoint completed");
    eddy_proc_t client;
    rescale_start("4", &client);
    cr_assert(eddy_poll_until(log_says, "fluid rescale of count 3 -> 4", 30000), "the steps never started; log:\n%s",
              log_text());
    eddy_nap_ms(300);
    pid_t victim = worker_of(op, instance);
    cr_assert_gt(victim, 0);
    cr_assert_eq(kill(victim, SIGKILL), 0);
    int rc = eddy_proc_wait(&client, 60000);
    cr_assert_neq(rc, 0, "the interrupted rescale reported success; log:\n%s", log_text());
    wait_running();
    /* A rescale right after the restore may be refused with "try again"
     * (the job not yet running), so it is. */
    char *out = NULL, *errout = NULL;
    uint64_t deadline = eddy_mono_ms() + 60000;
    while ((rc = rescale("4", &out, &errout)) != 0 && errout && strstr(errout, "try again") &&
           eddy_mono_ms() < deadline) {
        free(out);
        free(errout);
        out = errout = NULL;
        eddy_nap_ms(200);
    }
    cr_assert_eq(rc, 0, "second rescale exited %d: %s\nlog:\n%s", rc, errout, log_text());
    free(out);
    free(errout);
    expect_correct_output();
}

Test(fluid, kill_of_the_old_owner_mid_step_restores_exactly, .fini = teardown, .timeout = 240)
{
    kill_mid_step("count", 0);
}

Test(fluid, kill_of_the_new_owner_mid_step_restores_exactly, .fini = teardown, .timeout = 240)
{
    kill_mid_step("count", 1);
}

Test(fluid, kill_of_an_upstream_sender_mid_step_restores_exactly, .fini = teardown, .timeout = 240)
{
    kill_mid_step("source", 2);
}

/* Every worker's old owners corrupt their first state chunk (test hook
 * EDDY_TEST_FLUID_CORRUPT): the new owner finds the checksum wrong, loads
 * nothing of the group and fails; the rescale is refused, the job restores
 * from its last checkpoint and its output is exact. */
Test(fluid, a_corrupt_state_chunk_restores_the_job_exactly, .fini = teardown, .timeout = 240)
{
    start_with(NULL, "1");
    wait_running();
    wait_progress(1, "no checkpoint completed");
    char *out = NULL, *errout = NULL;
    int rc = rescale("4", &out, &errout);
    cr_assert_neq(rc, 0, "a rescale with a corrupt chunk succeeded: %s; log:\n%s", out, log_text());
    free(out);
    free(errout);
    char *log = log_text();
    cr_assert(strstr(log, "corrupt state chunk"), "the corruption was not named; log:\n%s", log);
    free(log);
    wait_running();
    expect_correct_output();
}

/* ---- a job that is behind ------------------------------------------------- */

/* Read faster than count keeps up under ASan on a loaded machine (140-250k
 * lines/s here), so the channels and queues are full when the rescale
 * comes; the rate keeps the job running at least 6 s, so that the rescale
 * (after a checkpoint, for the kill) comes before the end of the input
 * wherever it runs. A release build keeps up at that rate (about 900k
 * lines/s here): the case is ASan's, which CI runs. */
#define BEHIND_LINES 1200000
#define BEHIND_RATE "200000"

/* wordcount at parallelism 2 read at BEHIND_RATE, steps of 16
 * key groups (2 -> 4 moves 64: 4 steps), steps_in_flight as
 * --migration-steps-in-flight (NULL: the default, adaptive). */
static void start_behind(const char *hold_ms, const char *steps_in_flight)
{
    eddy_err_t err = {{0}};
    cluster("fluidbehind", 3, "500");
    input = eddy_test_cluster_path(cl, "input.txt");
    output = eddy_test_cluster_path(cl, "counts.tsv");
    cr_assert(eddy_gen_lines(input, BEHIND_LINES, 13, &err) == 0, "%s", err.msg);
    if (hold_ms)
        setenv("EDDY_TEST_FLUID_HOLD_MS", hold_ms, 1);
    const char *argv[] = {"--migration", "fluid", "--migration-step-key-groups", "16",
                          "--migration-steps-in-flight", steps_in_flight ? steps_in_flight : "0",
                          "--no-rebalance", "--job", "wordcount", "--input", input, "--output",
                          output, "--parallelism", "2", "--rate", BEHIND_RATE, NULL};
    cr_assert(eddy_test_cluster_start_local(cl, argv, &err) == 0, "%s", err.msg);
    job = eddy_test_cluster_local(cl);
    unsetenv("EDDY_TEST_FLUID_HOLD_MS");
}

/* A fluid rescale of a job that is behind: its steps go together, the
 * first ones ahead of the records the sources send after EXPAND (each
 * marker behind a full queue, one step after another, took 7-25 s); the
 * output is exact. */
Test(fluid, a_rescale_of_a_job_that_is_behind_is_exact, .fini = teardown, .timeout = 240)
{
    start_behind(NULL, NULL);
    wait_running();
    char *out = NULL, *errout = NULL;
    int rc = rescale("4", &out, &errout);
    cr_assert_eq(rc, 0, "eddy rescale wordcount count 4 exited %d: %s\nlog:\n%s", rc, errout,
                 log_text());
    cr_assert(out && strstr(out, "(fluid)"), "not a fluid rescale: %s", out ? out : "");
    free(out);
    free(errout);
    char *log = log_text();
    cr_assert(!strstr(log, "restor"), "the fluid rescale restored the job:\n%s", log);
    free(log);
    expect_correct_output();
}

/* All four steps of 2 -> 4 in flight at once (sent before the sources
 * start), each old owner holding each step's state 2 s (test hook): a kill
 * -9 of the worker of count[0], the old owner of two of them, restores the
 * job from its last checkpoint, and the output is exact. */
Test(fluid, kill_of_the_old_owner_with_steps_in_flight_restores_exactly, .fini = teardown,
     .timeout = 240)
{
    start_behind("2000", "4");
    wait_progress(1, "no checkpoint completed");
    eddy_proc_t client;
    rescale_start("4", &client);
    cr_assert(eddy_poll_until(log_says, "fluid rescale of count 2 -> 4", 30000), "the steps never started; "
              "log:\n%s", log_text());
    eddy_nap_ms(200);
    pid_t victim = worker_of("count", 0);
    cr_assert_gt(victim, 0);
    cr_assert_eq(kill(victim, SIGKILL), 0);
    int rc = eddy_proc_wait(&client, 60000);
    cr_assert_neq(rc, 0, "the interrupted rescale reported success; log:\n%s", log_text());
    expect_correct_output();
}

/* The input ends while a scale-down's steps are held (4 s each, one at a
 * time). When sources end but not the job, their end of stream went out on
 * the old epoch's channels and SHRINK's deploy would leave count waiting for
 * it forever (the compose test's hang): the rescale gives way to a restore.
 * When the whole job ends first, the rescale says so. Either way the job
 * ends, with exact output. */
Test(fluid, input_ending_during_the_steps_restores_and_ends_exactly, .fini = teardown,
     .timeout = 240)
{
    start_behind("4000", "1");
    wait_running();
    char *out = NULL, *errout = NULL;
    int rc = rescale("1", &out, &errout);
    expect_correct_output();
    char *log = log_text();
    /* done, given way to a restore, or outrun by the end of the job */
    cr_assert(rc == 0 || strstr(log, "end of their input during it") ||
                  (errout && strstr(errout, "finished during the rescale")),
              "the rescale failed for another reason (exit %d: %s); log:\n%s", rc,
              errout ? errout : "", log);
    free(log);
    free(out);
    free(errout);
}

/* ---- other keys flow while a step is held --------------------------------- */

#define WORDS 200

typedef struct feeder {
    int fd;
    volatile bool stop;
    uint64_t sent[WORDS];
} feeder_t;

static void *feed(void *arg)
{
    feeder_t *f = arg;
    for (uint64_t i = 0; !f->stop; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "w%u\n", (unsigned)(i % WORDS));
        if (write(f->fd, line, (size_t)n) != n)
            break;
        f->sent[i % WORDS]++;
        if (i % 4 == 3)
            eddy_nap_ms(1);
    }
    return NULL;
}

static bool moving(const char *word, size_t len)
{
    uint32_t kg = eddy_key_group_of(word, len, 128);
    return kg >= 43 && kg < 64;
}

/* Rows (+I/+U) in changelog bytes [from, to): of moving words, of others. */
static void count_rows(const char *text, size_t from, size_t to, uint64_t *moved, uint64_t *other,
                       int64_t *last)
{
    *moved = *other = 0;
    for (size_t i = from; i < to;) {
        const char *nl = memchr(text + i, '\n', to - i);
        size_t end = nl ? (size_t)(nl - text) : to;
        const char *l = text + i;
        if (end - i > 4 && (l[0] == '+') && l[2] == '[') {
            const char *comma = memchr(l, ',', end - i);
            if (comma) {
                size_t wl = (size_t)(comma - (l + 3));
                if (moving(l + 3, wl))
                    (*moved)++;
                else
                    (*other)++;
                if (last && l[3] == 'w')
                    last[atoi(l + 4) % WORDS] = atoll(comma + 2);
            }
        }
        i = end + 1;
    }
}

static size_t file_size(const char *path)
{
    size_t n = 0;
    char *s = eddy_read_file(path, &n);
    free(s);
    return s ? n : 0;
}

Test(fluid, other_keys_flow_while_a_step_is_held_back, .fini = teardown, .timeout = 240)
{
    eddy_err_t err = {{0}};
    cluster("fluidflow", 2, "1000");
    char *changelog = eddy_test_cluster_path(cl, "changelog.txt");
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    cr_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 1) == 0);
    cr_assert_eq(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
    char where[64];
    snprintf(where, sizeof where, "127.0.0.1:%d", ntohs(a.sin_port));
    setenv("EDDY_TEST_FLUID_HOLD_MS", "4000", 1);
    const char *argv[] = {"--migration", "fluid", "--migration-step-key-groups", "128", "--job",
                          "wordcount", "--socket", where, "--parallelism", "2", NULL};
    cr_assert(eddy_test_cluster_start_local_to(cl, argv, changelog, &err) == 0, "%s", err.msg);
    job = eddy_test_cluster_local(cl);
    unsetenv("EDDY_TEST_FLUID_HOLD_MS");
    struct pollfd p = {lfd, POLLIN, 0};
    cr_assert_eq(poll(&p, 1, 60000), 1, "the socket source never connected; log:\n%s", log_text());
    feeder_t f = {.fd = accept(lfd, NULL, NULL)};
    cr_assert(f.fd >= 0);
    pthread_t th;
    pthread_create(&th, NULL, feed, &f);
    wait_running();
    eddy_nap_ms(1000);
    eddy_proc_t client;
    rescale_start("3", &client);
    cr_assert(eddy_poll_until(log_says, "fluid rescale of count 2 -> 3", 30000), "no steps; log:\n%s", log_text());
    /* The first step's old owner holds its state 4 s from when its markers
     * are in; rows of records the old owner had before them may still come
     * in the first moments. */
    eddy_nap_ms(500);
    size_t from = file_size(changelog);
    eddy_nap_ms(2000);
    size_t to = file_size(changelog);
    char *text = eddy_read_file(changelog, NULL);
    uint64_t moved, other;
    count_rows(text, from, to, &moved, &other, NULL);
    free(text);
    cr_assert_gt(other, 100, "words of unmoved key groups stopped while the step was held (%llu rows)",
                 (unsigned long long)other);
    cr_assert_eq(moved, 0, "%llu rows of the moving key groups before their state arrived",
                 (unsigned long long)moved);
    int rc = eddy_proc_wait(&client, 60000);
    cr_assert_eq(rc, 0, "the rescale failed; log:\n%s", log_text());
    eddy_nap_ms(500);
    f.stop = true;
    pthread_join(th, NULL);
    close(f.fd);
    close(lfd);
    rc = eddy_proc_wait(job, 60000);
    cr_assert_eq(rc, 0, "eddy local exited %d; log:\n%s", rc, log_text());
    size_t len = 0;
    text = eddy_read_file(changelog, &len);
    int64_t last[WORDS] = {0};
    count_rows(text, 0, len, &moved, &other, last);
    free(text);
    cr_assert_gt(moved, 0);
    for (int w = 0; w < WORDS; w++)
        cr_assert_eq(last[w], (int64_t)f.sent[w], "w%d: last count %lld, sent %llu", w,
                     (long long)last[w], (unsigned long long)f.sent[w]);
}
