/* lines.h - generated inputs with their expected outputs, and the texts a
 * test compares or prints when it fails: sorted lines, the logs of a
 * cluster. One copy here for the integration tests that check a job's
 * output line for line against a reference computed apart from eddy. */
#ifndef EDDY_TESTS_SUPPORT_LINES_H
#define EDDY_TESTS_SUPPORT_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* splitmix64: a reproducible stream of well-mixed numbers from a counter. */
uint64_t eddy_test_mix(uint64_t x);

/* Splits text (modified in place) into lines, sorts them bytewise and
 * joins them, each ending in '\n'. Returns the malloc'd result, its length
 * in *out_len and the number of lines in *n_lines (either may be NULL). */
char *eddy_test_sort_lines(char *text, size_t len, size_t *out_len, size_t *n_lines);

/* Input of the `etl` job's transform tests: CSV lines "uU,iI,AMOUNT" and,
 * computed independently of eddy, the sorted rows "uU\tiI\tAMOUNT*2" the
 * job keeps (amount >= min_amount). */
typedef struct eddy_test_etl_input {
    size_t lines;
    uint64_t seed;         /* line n is drawn from eddy_test_mix(n * 7919 + seed) */
    unsigned users, items; /* distinct values of each */
    long min_amount;
    size_t repeat_every;   /* > 0: every such line is "u7,i7,777" (stored once per copy) */
    bool malformed;        /* a header line and a few broken lines, which the job drops */
} eddy_test_etl_input_t;

/* Writes the input to path; the expected output (malloc'd) in *expected,
 * *expected_len, its row count in *rows (may be NULL). -1 with err. */
int eddy_test_write_etl_input(const char *path, const eddy_test_etl_input_t *in, char **expected,
                              size_t *expected_len, size_t *rows, eddy_err_t *err);

/* The committed part files of a part-file sink, DIR/part-*, concatenated
 * in name order (malloc'd; length in *len, file count in *files, either
 * may be NULL). NULL with err when DIR cannot be read or a part does not
 * end in a newline (a torn write). */
char *eddy_test_read_parts(const char *dir, size_t *len, int *files, eddy_err_t *err);

/* The files' texts, each after a "--- PATH" line ("(none)" for a missing
 * one), for a failure message. Malloc'd. */
char *eddy_test_cat_logs(const char *const *paths, int n);

/* eddy_test_cat_logs of the given logs then DIR/worker-1.log ..
 * DIR/worker-N.log, the names the integration tests give workers' logs. */
char *eddy_test_cluster_logs(const char *const *heads, int n_heads, const char *dir, int n_workers);

#endif
