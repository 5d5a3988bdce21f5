/* ctl_proc.h - process helpers for the autoscaling integration tests:
 * start the eddy binary in the background, run it to completion capturing
 * stdout, wait with a deadline, and compute wordcount's reference output.
 * (Named ctl_ to stay clear of tests/support/proc.h.) */
#ifndef EDDY_TESTS_SUPPORT_CTL_PROC_H
#define EDDY_TESTS_SUPPORT_CTL_PROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Starts argv[0] with argv, stdout and stderr appended to log_path (NULL:
 * /dev/null), in its own process group, SIGKILLed if the test dies.
 * Returns the pid or -1. */
pid_t ctl_spawn(char *const argv[], const char *log_path);
/* Runs argv to completion (at most timeout_ms, then SIGKILL), returning its
 * exit status (-1 on failure/timeout) and its stdout in *out (malloc'd). */
int ctl_run_capture(char *const argv[], uint32_t timeout_ms, char **out);
/* Non-blocking: true when pid has exited (status in *status). */
bool ctl_exited(pid_t pid, int *status);
/* Waits up to timeout_ms; then SIGKILLs the group. Returns the exit status,
 * or -1 when it had to be killed. */
int ctl_wait(pid_t pid, uint32_t timeout_ms);
/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *ctl_read_file(const char *path);
/* Reference for wordcount --output: "word<TAB>count" lines in byte order,
 * computed with `tr -s ' \t' '\n' | grep -v '^$' | LC_ALL=C sort | uniq -c`
 * over the generator's lines (written by `eddy` itself is not trusted:
 * the lines come from input_path). Returns malloc'd text or NULL. */
char *ctl_reference_counts(const char *input_path);
/* Converts wordcount's output file (word<TAB>count) into the same
 * "count word" form as ctl_reference_counts. malloc'd or NULL. */
char *ctl_output_as_uniq(const char *output_path);

/* 0 when the job's output at output_path holds exactly the reference
 * counts of input_path (and the reference is not empty); else -1 with
 * what differs in why. */
int ctl_compare_counts(const char *input_path, const char *output_path, char *why, size_t size);

/* Waits up to timeout_ms for pid to exit, calling poll(arg) every
 * every_ms meanwhile; then SIGKILLs the group. Returns true when it exited
 * by itself, its exit status in *status (-1 when it had to be killed). */
bool ctl_wait_polling(pid_t pid, uint32_t timeout_ms, uint32_t every_ms, void (*poll)(void *),
                      void *arg, int *status);
/* Writes the lines `wordcount --generate --lines LINES --words-per-line
 * WORDS` reads (vocabulary 10000, seed 42: the job's defaults), so that
 * ctl_reference_counts can check its output. */
void ctl_write_generated_input(const char *path, uint64_t lines, uint32_t words_per_line);
/* `eddy scaling --json` against coordinator: the decision log as JSON (a
 * new reference), or NULL when it cannot be read. */
json_t *ctl_scaling_decisions(const char *coordinator);
/* Polls ctl_scaling_decisions into *kept (a JSON array or NULL), keeping
 * the longer log of the two: the last one seen while a job runs. */
void ctl_keep_decisions(const char *coordinator, json_t **kept);

#endif
