/* etl_records.h - the etl job's record operator (kind "etl_records"):
 * parse CSV or JSON lines, clean fields, enrich from a reference table,
 * write CSV or JSON lines; malformed records are dropped, counted and
 * optionally appended to a rejects file. Its configuration (strings unless
 * said): format, output_format ("csv"|"json"), columns (comma list),
 * header (bool), header_file (the input whose first line names the CSV
 * columns), trim (bool), lower, upper, date, number (comma lists),
 * date_only (bool), enrich_key, enrich_table (a CSV file or a
 * postgresql:// URI), enrich_required (bool), enrich_timeout_s (int),
 * rejects (a file path). */
#ifndef EDDY_JOBS_ETL_RECORDS_H
#define EDDY_JOBS_ETL_RECORDS_H

#include "api/plugin.h"

#define EDDY_ETL_RECORDS_KIND "etl_records"

int eddy_etl_records_register(eddy_registry_t *r, eddy_err_t *err);

#endif
