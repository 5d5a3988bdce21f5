/* changelog.h - check wordcount's Flink-style changelog (`+I[word, 1]`,
 * `+U[word, 2]`, ... on stdout of an unbounded job) against the reference
 * counts of the text it read.
 *
 * An unbounded job never writes --output, so tests that must show that
 * every line was counted exactly once (across a kill -9 and restore, a
 * rescale, a backlog drained) compare the last +I/+U value of each word
 * with eddy_reference_counts() of all the text fed in. The changelog may
 * repeat updates after a restore, so only final values are compared; a
 * line torn by a killed worker is skipped up to its last '['. Used by
 * test_dir_source and test_catch_up; the row parser and the reference
 * lookup also by test_wordcount_e2e's strict check. Nothing here asserts:
 * a mismatch or a malformed line is false with the reason in why. */
#ifndef EDDY_TESTS_SUPPORT_CHANGELOG_H
#define EDDY_TESTS_SUPPORT_CHANGELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/support/proc.h"

/* One row, "+I[word, 7]": kind "+I", "-U", "+U", ...; word points into
 * the line (words have no spaces or tabs but may hold ',' and ']', so the
 * value is after the last ", "). */
typedef struct eddy_changelog_row {
    char kind[3];
    const char *word;
    uint32_t len;
    uint64_t value;
} eddy_changelog_row_t;

/* Parses line[0..l) (no '\n'): 0, or -1 when it is not a row. */
int eddy_changelog_row(const char *line, size_t l, eddy_changelog_row_t *row);
/* The index of word in ref[0..n) (eddy_reference_counts: sorted by memcmp,
 * shorter first), or n when it is not there. */
size_t eddy_changelog_find(const eddy_wc_entry_t *ref, size_t n, const char *word, uint32_t len);

/* True when the changelog at path gives every word of text[0..len) its
 * reference count (and names no other word); else false with the first
 * difference (or "no changelog yet") in why. */
bool eddy_changelog_matches(const char *path, const char *text, size_t len, char *why,
                            size_t why_size);

#endif
