/* cmd_keygen.c - `eddy keygen DIR`: a cluster's CURVE keys (net/keys.h
 * owns the files' format; this is the subcommand around it). */
#include <stdbool.h>
#include <stdio.h>

#include "cli/cli.h"
#include "net/keys.h"

static const char *keygen_usage =
    "[--keep-existing] DIR\n\n"
    "Creates DIR (mode 0700) with a cluster's CURVE keys, every file mode 0600:\n"
    "  server.key       coordinators and workers (--keys DIR on eddy coordinator/worker/local)\n"
    "  server.pub       the server's public key, which clients check\n"
    "  client.key       clients: every command (submit, cancel, rescale, plugins, status)\n"
    "  reader.key       read-only clients (status, jobs, scaling); used when DIR has no client.key\n"
    "  authorized_keys  `ROLE KEY` lines (ROLE worker, client or reader; `#` comment lines)\n"
    "A client host needs server.pub and client.key (or reader.key) only. Existing\n"
    "keys are never overwritten: without --keep-existing an existing key file is an\n"
    "error; with it, a DIR that holds every key file is checked and kept (exit 0),\n"
    "for a deployment step that runs at every start (deploy/docker-compose.yml).";

int eddy_cmd_keygen(int argc, char **argv)
{
    bool keep_existing = false;
    eddy_flag_t flags[] = {
        EDDY_FLAG_SWITCH("keep-existing", &keep_existing,
                         "a DIR that already holds every key file is checked and kept, not an error"),
        EDDY_FLAG_END};
    eddy_args_t pos = {0};
    int code;
    if (eddy_cli_parse("keygen", keygen_usage, flags, argc, argv, &pos, NULL, &code) < 0) {
        eddy_args_free(&pos);
        return code;
    }
    if (pos.count != 1) {
        eddy_args_free(&pos);
        return eddy_usage_error("keygen", "expected DIR");
    }
    eddy_err_t err = {{0}};
    bool kept = false;
    int rc = keep_existing ? eddy_keys_generate_once(pos.items[0], &kept, &err)
                           : eddy_keys_generate(pos.items[0], &err);
    if (rc == 0 && kept)
        printf("CURVE keys in %s exist and load: kept\n", pos.items[0]);
    else if (rc == 0)
        printf("CURVE keys written to %s (server.key, server.pub, client.key, reader.key, "
               "authorized_keys)\n", pos.items[0]);
    eddy_args_free(&pos);
    return rc == 0 ? 0 : eddy_usage_error("keygen", err.msg);
}
