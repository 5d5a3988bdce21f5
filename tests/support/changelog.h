/* changelog.h - check wordcount's Flink-style changelog (`+I[word, 1]`,
 * `+U[word, 2]`, ... on stdout of an unbounded job) against the reference
 * counts of the text it read.
 *
 * An unbounded job never writes --output, so tests that must show that
 * every line was counted exactly once (across a kill -9 and restore, a
 * rescale, a backlog drained) compare the last +I/+U value of each word
 * with eddy_reference_counts() of all the text fed in. The changelog may
 * repeat updates after a restore, so only final values are compared; a
 * line torn by a killed worker is skipped up to its last '['. Shared by
 * test_dir_source and test_catch_up. Nothing here asserts: a mismatch or
 * a malformed line is false with the reason in why. */
#ifndef EDDY_TESTS_SUPPORT_CHANGELOG_H
#define EDDY_TESTS_SUPPORT_CHANGELOG_H

#include <stdbool.h>
#include <stddef.h>

/* True when the changelog at path gives every word of text[0..len) its
 * reference count (and names no other word); else false with the first
 * difference (or "no changelog yet") in why. */
bool eddy_changelog_matches(const char *path, const char *text, size_t len, char *why,
                            size_t why_size);

#endif
