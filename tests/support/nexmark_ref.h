/* nexmark_ref.h - a reference implementation of the Nexmark queries (q0 q1
 * q2 q3 q4 q5 q7 q8 q11; not q12, which is processing time) over an events
 * file, to check eddy's nexmark job against.
 *
 * Written to be obviously right rather than fast: it reads every event,
 * then computes the ideal result in event time whatever the order of the
 * lines (every event counts, nothing is late), and returns the rows of
 * DESIGN.md (fields separated by tabs) sorted in byte order (strcmp), as
 * the job's --output file holds them. Semantics where DESIGN.md is terse:
 *   q3  every (person, auction) pair with auction.category 10,
 *       auction.seller == person.id and person.state OR, ID or CA
 *   q4  winning price of an auction: the max price of its bids with
 *       auction.date_time <= bid.date_time <= auction.expires (no such bid:
 *       the auction is left out); per category the integer average
 *   q5  windows [s, s+10000) for s a multiple of 2000; per window the
 *       auctions whose bid count is the window's maximum (ties: all)
 *   q7  windows [s, s+10000), s a multiple of 10000; the bids whose price
 *       is the window's maximum (ties: all)
 *   q8  per person event, one row when an auction event with that seller
 *       has its date_time in the person's 10 s tumbling window
 *   q11 per bidder, bids sorted by date_time form one session while each
 *       is < 10000 ms after the previous; start = first bid's date_time,
 *       end = last bid's date_time + 10000
 */
#ifndef EDDY_TESTS_SUPPORT_NEXMARK_REF_H
#define EDDY_TESTS_SUPPORT_NEXMARK_REF_H

#include <stddef.h>

#include "common/err.h"

typedef struct eddy_ref_lines {
    char **items; /* each malloc'd, without '\n' */
    size_t count;
} eddy_ref_lines_t;

/* Fills out with query's sorted rows over the events in events_path; -1 with
 * err for an unknown query, an unreadable file or a malformed line. */
int eddy_nexmark_reference(const char *query, const char *events_path, eddy_ref_lines_t *out,
                           eddy_err_t *err);
/* The rows as one text, each followed by '\n' (a --output file's bytes). */
char *eddy_ref_lines_join(const eddy_ref_lines_t *lines, size_t *len);
void eddy_ref_lines_free(eddy_ref_lines_t *lines);

#endif
