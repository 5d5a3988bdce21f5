/* cmd_nexmark.c - `eddy nexmark generate`: writes Nexmark events as CSV
 * lines (connectors/nexmark.h) to a file or stdout, the same events the
 * "nexmark" source emits for the same seed and disorder, so a run over a
 * file and a run over the generator can be compared. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "connectors/nexmark.h"

#define GENERATE_USAGE "--events N [--seed S] [--disorder-ms D] [--output FILE]"

static void print_help(FILE *out)
{
    fprintf(out, "usage: eddy nexmark generate " GENERATE_USAGE "\n\n"
                 "commands:\n"
                 "  generate     write N Nexmark events (persons:auctions:bids = 1:3:46) as CSV\n"
                 "               lines, deterministic for a seed; see `eddy nexmark generate --help`\n");
}

static int generate(int argc, char **argv)
{
    uint64_t events = 0, seed = 42;
    int64_t disorder = 0;
    const char *output = NULL;
    eddy_flag_t flags[] = {
        EDDY_FLAG_U64("events", &events, 1, UINT64_MAX, "N", "how many events to write (required)"),
        EDDY_FLAG_U64("seed", &seed, 0, INT64_MAX, "S", "generator seed (42); the same seed gives the same bytes"),
        EDDY_FLAG_I64("disorder-ms", &disorder, 0, EDDY_NEXMARK_MAX_DISORDER_MS, "D",
                      "date_time = nominal time (base + 1 ms per event) minus 0..D ms (0: in order)"),
        EDDY_FLAG_STR("output", &output, "FILE", "write here instead of stdout"),
        EDDY_FLAG_END,
    };
    int code;
    if (eddy_cli_parse("nexmark generate", GENERATE_USAGE, flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if (!flags[0].seen)
        return eddy_usage_error("nexmark generate", "--events is required");
    FILE *out = output ? fopen(output, "w") : stdout;
    if (!out) {
        fprintf(stderr, "eddy nexmark generate: cannot write %s: %s\n", output, strerror(errno));
        return 1;
    }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    eddy_nexmark_config_t cfg = {.events = events, .seed = seed, .disorder_ms = disorder};
    eddy_nexmark_cursor_t cursor;
    eddy_nexmark_cursor_init(&cursor, &cfg, 0, 1, 0);
    char line[EDDY_NEXMARK_MAX_LINE + 1];
    uint32_t len;
    int rc = 0;
    while ((len = eddy_nexmark_cursor_next(&cursor, line, sizeof line - 1, NULL))) {
        line[len] = '\n';
        if (fwrite(line, 1, len + 1, out) != len + 1) {
            rc = 1;
            break;
        }
    }
    if (fflush(out) != 0 || ferror(out))
        rc = 1;
    if (rc)
        fprintf(stderr, "eddy nexmark generate: writing %s: %s\n", output ? output : "stdout",
                strerror(errno));
    if (output && fclose(out) != 0 && !rc) {
        fprintf(stderr, "eddy nexmark generate: writing %s: %s\n", output, strerror(errno));
        rc = 1;
    }
    return rc;
}

int eddy_cmd_nexmark(int argc, char **argv)
{
    if (argc < 1)
        return eddy_usage_error("nexmark", "a command is required (see eddy nexmark --help)");
    if (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") || !strcmp(argv[0], "help")) {
        print_help(stdout);
        return 0;
    }
    /* No signal handlers: like any filter, generate dies on SIGINT or on
     * SIGPIPE (`| head`), leaving a partial file the user asked to stop. */
    if (!strcmp(argv[0], "generate"))
        return generate(argc - 1, argv + 1);
    fprintf(stderr, "eddy nexmark: unknown command '%s' (see eddy nexmark --help)\n", argv[0]);
    return 2;
}
