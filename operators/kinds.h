/* kinds.h - the built-in operators and sinks as plan kinds (api/plugin.h):
 *   sum          keyed aggregate: the sum of record values per key
 *                {emit: "changelog" (default) | "final", cost_us, cost_sleep}
 *   changelog    sink: Flink-style changelog rows on stdout
 *   table_file   sink {path}: "key<TAB>value" lines in byte order at end of input
 *   part_file    sink {directory, merge_to?}: exactly-once part files (two-phase
 *                commit); with merge_to, merged byte-sorted into that file at the end
 *   late_records the stream's late records as data (eddy_late_records)
 * and the key selector
 *   whole_record the record's bytes are its key */
#ifndef EDDY_OPERATORS_KINDS_H
#define EDDY_OPERATORS_KINDS_H

#include "api/plugin.h"

int eddy_operators_register(eddy_registry_t *r, eddy_err_t *err);

#endif
