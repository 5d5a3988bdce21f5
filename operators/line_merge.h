/* line_merge.h - the lines of several files, byte-sorted into one file, in
 * bounded memory (an external merge sort).
 *
 * The inputs' lines are read into runs of at most `budget` bytes, each run
 * sorted and written to a file in tmp_dir (created if missing), then the
 * runs are merged k-way into output: written to a temporary name beside it,
 * fsynced, renamed over it and its directory fsynced, so output is either
 * absent, the old file or the complete new one. A single run is written
 * straight to output. Lines compare as unsigned bytes, a line before its
 * extensions (the order of the table file sink, operators.h); equal lines
 * are all kept; each output line ends in '\n' (a last input line without
 * one gets it). The run files are removed on success and on failure.
 * Blocking work: it belongs off the worker loop (the part file sink runs it
 * as a sync list call on the snapshot writer thread). */
#ifndef EDDY_OPERATORS_LINE_MERGE_H
#define EDDY_OPERATORS_LINE_MERGE_H

#include <stddef.h>

#include "common/err.h"

/* The memory a merge sorts in at once unless told otherwise. */
#define EDDY_LINE_MERGE_BUDGET ((size_t)64 << 20)

typedef struct eddy_line_merge_stats {
    size_t lines, runs;
} eddy_line_merge_stats_t;

/* stats may be NULL. budget 0: EDDY_LINE_MERGE_BUDGET. */
int eddy_line_merge(const char *const *inputs, size_t n_inputs, const char *tmp_dir,
                    const char *output, size_t budget, eddy_line_merge_stats_t *stats,
                    eddy_err_t *err);
/* Sorts the lines of the file at path into the same file: read through
 * a descriptor opened without O_CREAT, written back over the same bytes,
 * fsynced. The file is never replaced or created, so a file removed while
 * it sorts (an attempt discarding what an earlier one prepared) stays
 * removed; a crash halfway leaves it mixed (its prepare never completed).
 * tmp_dir and budget as above. */
int eddy_line_sort_in_place(const char *path, const char *tmp_dir, size_t budget,
                            eddy_line_merge_stats_t *stats, eddy_err_t *err);
/* The same for inputs that are each sorted already (e.g. by
 * eddy_line_merge of one file onto itself): a k-way merge of them, no runs.
 * An input found unsorted on the way (a line less than the one written
 * before it) makes it start over as eddy_line_merge; stats->runs is then
 * the runs it sorted, else the number of inputs. */
int eddy_line_merge_sorted(const char *const *inputs, size_t n_inputs, const char *tmp_dir,
                           const char *output, size_t budget, eddy_line_merge_stats_t *stats,
                           eddy_err_t *err);

#endif
