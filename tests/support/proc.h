/* proc.h - process-level test helpers shared by the integration tests:
 * spawning the real eddy binary with stdout/stderr in files (or a pipe),
 * waiting with deadlines, run-and-capture, polling conditions, asking a
 * running coordinator for `eddy status --json`, a reference wordcount
 * computed independently of eddy, and deterministic multi-MB test text.
 *
 * Everything here talks to real processes and sockets; nothing mocks eddy.
 * Children are put in their own process group and get SIGKILL when the
 * test process dies (PR_SET_PDEATHSIG), so a crashed test leaves nothing
 * running; eddy_proc_kill() kills the whole group. */
#ifndef EDDY_TESTS_SUPPORT_PROC_H
#define EDDY_TESTS_SUPPORT_PROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

#ifndef EDDY_BINARY
#define EDDY_BINARY "eddy"
#endif

typedef struct eddy_proc {
    pid_t pid;
    bool exited;
    int code;       /* exit status, or 128 + signal */
    int stdout_fd;  /* read end when started with EDDY_PROC_PIPE, else -1 */
} eddy_proc_t;

/* Pass as stdout_path to get a pipe in proc->stdout_fd instead of a file. */
#define EDDY_PROC_PIPE ((const char *)1)

/* Starts argv[0] (a path) with stdin /dev/null and stdout/stderr appended
 * to the given files (NULL = /dev/null). 0, or -1 with err. */
int eddy_proc_start(eddy_proc_t *p, char *const argv[], const char *stdout_path,
                    const char *stderr_path, eddy_err_t *err);
/* Waits up to timeout_ms. Returns the exit code (128 + signal if killed),
 * or -1 on timeout (the process keeps running). */
int eddy_proc_wait(eddy_proc_t *p, uint64_t timeout_ms);
/* SIGTERM to its process group, SIGKILL after grace_ms, reap. Safe to call
 * on an exited or never-started process. */
void eddy_proc_kill(eddy_proc_t *p, uint64_t grace_ms);
/* 1 while running. */
bool eddy_proc_alive(eddy_proc_t *p);

/* Runs argv to completion (killed after timeout_ms) and captures stdout and
 * stderr (malloc'd, NUL-terminated; either pointer may be NULL). Returns the
 * exit code, or -1 on timeout / spawn failure. */
int eddy_proc_run(char *const argv[], uint64_t timeout_ms, char **out, char **errout);

/* Whole file, malloc'd and NUL-terminated; NULL if unreadable. */
char *eddy_read_file(const char *path, size_t *len);
int eddy_write_file(const char *path, const char *data, size_t len);

/* Polls cond(arg) every interval until it returns true or timeout_ms passes. */
bool eddy_poll_until(bool (*cond)(void *arg), void *arg, uint64_t timeout_ms);
/* A short pause for loops that already check a deadline (not for sync). */
void eddy_nap_ms(unsigned ms);

/* n distinct TCP ports on 127.0.0.1 that were free a moment ago (all bound
 * at once, then closed, so they differ from each other). 0 or -1. */
int eddy_test_free_ports(int n, int *ports, eddy_err_t *err);

/* `eddy status --json --coordinator tcp://127.0.0.1:PORT`, parsed; NULL if
 * the call failed or the output was not JSON. */
json_t *eddy_test_status(int control_port);
/* The job object with "id" == job in a status document (borrowed), or NULL. */
json_t *eddy_test_status_job(json_t *status, const char *job);
/* Polls status until job `job` is in state `state`; true on success.
 * Gives up early when `owner` (the eddy local process; may be NULL) exits. */
bool eddy_test_wait_job_state(int control_port, const char *job, const char *state,
                              uint64_t timeout_ms, eddy_proc_t *owner);
/* The same, and the job has at least min_completed completed checkpoints
 * and min_restarts restores behind it. */
bool eddy_test_wait_job_progress(int control_port, const char *job, const char *state,
                                 int64_t min_completed, int64_t min_restarts, uint64_t timeout_ms,
                                 eddy_proc_t *owner);

/* Waits until job `job` runs with at least min_completed completed
 * checkpoints, then kills the first worker in the status with SIGKILL.
 * Its pid, or 0 when the wait failed (or `owner` exited) or no worker was
 * listed. */
pid_t eddy_test_kill_worker_after(int control_port, const char *job, int64_t min_completed,
                                  uint64_t timeout_ms, eddy_proc_t *owner);

/* Reference wordcount: tokens split on ' ' and '\t' (lines on '\n'), sorted
 * with memcmp, as "word\tcount\n" lines. malloc'd; *out_len set. */
char *eddy_reference_wordcount(const char *text, size_t len, size_t *out_len);
/* Reference counts as parallel arrays (sorted); for changelog checks. */
typedef struct eddy_wc_entry {
    const char *word; /* points into the text; not NUL-terminated */
    uint32_t len;
    uint64_t count;
} eddy_wc_entry_t;
eddy_wc_entry_t *eddy_reference_counts(const char *text, size_t len, size_t *n);

/* splitmix64 step: deterministic pseudo-random numbers from a seed state. */
uint64_t eddy_test_rand(uint64_t *state);
/* Deterministic English-like text of about `bytes` bytes: a varied
 * vocabulary with punctuation ("be," "be." "Be"), tabs, runs of spaces,
 * leading spaces, blank lines, and a last line without '\n'. */
int eddy_gen_text(const char *path, size_t bytes, uint64_t seed, eddy_err_t *err);
/* A wordcount test's input: eddy_gen_text written to path, read back, and
 * its reference output; lines counts them (to pace --rate). */
typedef struct eddy_test_wc_input {
    char *text, *expected; /* malloc'd */
    size_t text_len, expected_len, lines;
} eddy_test_wc_input_t;
int eddy_test_wc_input(const char *path, size_t bytes, uint64_t seed, eddy_test_wc_input_t *out,
                       eddy_err_t *err);
void eddy_test_wc_input_free(eddy_test_wc_input_t *in);
/* The same, keeping only the reference (returned, malloc'd; NULL with err). */
char *eddy_test_wc_reference(const char *path, size_t bytes, uint64_t seed, size_t *expected_len,
                             size_t *lines, eddy_err_t *err);

/* `eddy nexmark generate --events EVENTS [--disorder-ms D] --output path`
 * (disorder_ms may be NULL). -1 with err naming the exit status and stderr. */
int eddy_test_nexmark_generate(const char *path, const char *events, const char *disorder_ms,
                               eddy_err_t *err);

/* Lines 1..n of "w<k> w<k+1> ..." style text, n lines; for rate tests. */
int eddy_gen_lines(const char *path, size_t lines, uint64_t seed, eddy_err_t *err);

/* Resident set size of pid in kB from /proc/PID/status, or -1. */
long eddy_proc_rss_kb(pid_t pid);

#endif
