/* nexmark_ref.c - `nexmark_ref QUERY EVENTS_FILE`: prints the reference
 * result of a Nexmark query (tests/support/nexmark_ref.h) as the job's
 * --output file would hold it, so tests and people can diff the two. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/nexmark_ref.h"

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: nexmark_ref QUERY EVENTS_FILE  (QUERY: q0 q1 q2 q3 q4 q5 q7 q8 q11)\n\n"
               "Prints the reference result of QUERY over the events in EVENTS_FILE as the\n"
               "job's --output file holds it.\n");
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: nexmark_ref QUERY EVENTS_FILE  (QUERY: q0 q1 q2 q3 q4 q5 q7 q8 q11)\n");
        return 2;
    }
    eddy_ref_lines_t lines;
    eddy_err_t err = {{0}};
    if (eddy_nexmark_reference(argv[1], argv[2], &lines, &err) < 0) {
        fprintf(stderr, "nexmark_ref: %s\n", err.msg);
        return 1;
    }
    size_t len;
    char *text = eddy_ref_lines_join(&lines, &len);
    int rc = !text || fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0;
    if (rc)
        fprintf(stderr, "nexmark_ref: cannot write the result\n");
    free(text);
    eddy_ref_lines_free(&lines);
    return rc;
}
