/* cmd_roles.c - `eddy coordinator` and `eddy worker`: the long-running roles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "worker/worker.h"

int eddy_cmd_worker(int argc, char **argv)
{
    const char *coordinator = eddy_client_default_coordinator(), *name = NULL;
    const char *bind_host = "127.0.0.1", *advertise = NULL, *snapshots = "/tmp/eddy/snapshots";
    uint64_t port = 0, register_timeout = 10000;
    eddy_flag_t flags[] = {
        {"coordinator", EDDY_FLAG_STRING, &coordinator, "tcp://HOST:PORT", "coordinator control socket (env EDDY_COORDINATOR)", false},
        {"name", EDDY_FLAG_STRING, &name, "NAME", "name shown in status (default worker-PID)", false},
        {"bind-host", EDDY_FLAG_STRING, &bind_host, "ADDR", "address of the data socket (127.0.0.1)", false},
        {"advertise-host", EDDY_FLAG_STRING, &advertise, "HOST", "address other workers use (default: bind host; 127.0.0.1 if that is 0.0.0.0)", false},
        {"data-port", EDDY_FLAG_UINT, &port, "PORT", "data socket port (0 = any free port)", false},
        {"snapshot-dir", EDDY_FLAG_STRING, &snapshots, "DIR", "snapshot store if the coordinator names none", false},
        {"register-timeout-ms", EDDY_FLAG_UINT, &register_timeout, "MS", "give up reaching the coordinator after MS (10000)", false},
        {NULL, 0, NULL, NULL, NULL, false},
    };
    int code;
    if (eddy_cli_parse("worker", "[flags]", flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if (port > 65535)
        return eddy_usage_error("worker", "--data-port must be 0..65535");
    if (register_timeout == 0 || register_timeout > 3600000)
        return eddy_usage_error("worker", "--register-timeout-ms must be 1..3600000");
    char default_name[64];
    if (!name) {
        snprintf(default_name, sizeof default_name, "worker-%d", (int)getpid());
        name = default_name;
    }
    eddy_log_set_component(name);
    eddy_cli_install_signals();
    eddy_worker_options_t opts = {coordinator, name, bind_host, advertise, (uint32_t)port,
                                  (uint32_t)register_timeout, snapshots};
    eddy_err_t err = {{0}};
    if (eddy_worker_run(&opts, &eddy_cli_stop, &err) < 0) {
        fprintf(stderr, "eddy worker: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int eddy_cmd_coordinator(int argc, char **argv)
{
    const char *bind = "tcp://0.0.0.0:7600", *http_host = "0.0.0.0";
    const char *metastore = "./eddy-meta", *snapshots = "/tmp/eddy/snapshots";
    uint64_t http_port = EDDY_DEFAULT_HTTP_PORT, interval = 2000, hb = 500, hb_timeout = 3000;
    uint64_t retained = 2, tolerable = 3, deploy_timeout = 10000, ck_timeout = 60000;
    eddy_flag_t flags[] = {
        {"bind", EDDY_FLAG_STRING, &bind, "tcp://ADDR:PORT", "control socket (tcp://0.0.0.0:7600)", false},
        {"http-host", EDDY_FLAG_STRING, &http_host, "ADDR", "HTTP bind address (0.0.0.0)", false},
        {"http-port", EDDY_FLAG_UINT, &http_port, "PORT", "HTTP port for /metrics and the API (9250, 0 = off)", false},
        {"metastore", EDDY_FLAG_STRING, &metastore, "URL", "etcd://HOST:PORT or a directory (./eddy-meta)", false},
        {"snapshot-dir", EDDY_FLAG_STRING, &snapshots, "DIR", "snapshot store shared with workers", false},
        {"checkpoint-interval", EDDY_FLAG_UINT, &interval, "MS", "periodic checkpoints (2000, 0 = off)", false},
        {"heartbeat-ms", EDDY_FLAG_UINT, &hb, "MS", "worker heartbeat interval (500)", false},
        {"heartbeat-timeout-ms", EDDY_FLAG_UINT, &hb_timeout, "MS", "declare a silent worker dead after (3000)", false},
        {"checkpoint-timeout-ms", EDDY_FLAG_UINT, &ck_timeout, "MS", "abandon a checkpoint not complete after MS (60000)", false},
        {"checkpoints-retained", EDDY_FLAG_UINT, &retained, "N", "complete checkpoints kept (2)", false},
        {"tolerable-checkpoint-failures", EDDY_FLAG_UINT, &tolerable, "N", "restore after N failed checkpoints in a row (3)", false},
        {"deploy-timeout-ms", EDDY_FLAG_UINT, &deploy_timeout, "MS", "quarantine a worker that does not confirm a deploy within MS (10000)", false},
        {NULL, 0, NULL, NULL, NULL, false},
    };
    int code;
    if (eddy_cli_parse("coordinator", "[flags]", flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if (http_port > 65535)
        return eddy_usage_error("coordinator", "--http-port must be 0..65535");
    if (hb == 0 || hb_timeout <= hb)
        return eddy_usage_error("coordinator", "--heartbeat-timeout-ms must exceed --heartbeat-ms (> 0)");
    if (retained < 1 || retained > 64)
        return eddy_usage_error("coordinator", "--checkpoints-retained must be 1..64");
    if (tolerable < 1 || tolerable > 1000000)
        return eddy_usage_error("coordinator", "--tolerable-checkpoint-failures must be 1..1000000");
    if (deploy_timeout < 1 || deploy_timeout > 3600000 || ck_timeout < 1 || ck_timeout > 3600000)
        return eddy_usage_error("coordinator", "--deploy-timeout-ms and --checkpoint-timeout-ms must be 1..3600000");
    eddy_log_set_component("coordinator");
    eddy_cli_install_signals();
    eddy_coordinator_options_t opts = {
        .bind = bind, .http_host = http_host, .http_port = (uint16_t)http_port,
        .metastore = metastore, .snapshot_dir = snapshots, .heartbeat_ms = (uint32_t)hb,
        .heartbeat_timeout_ms = (uint32_t)hb_timeout, .checkpoint_interval_ms = (uint32_t)interval,
        .checkpoint_timeout_ms = (uint32_t)ck_timeout, .checkpoints_retained = (uint32_t)retained,
        .tolerable_checkpoint_failures = (uint32_t)tolerable, .deploy_timeout_ms = (uint32_t)deploy_timeout};
    eddy_err_t err = {{0}};
    int rc = eddy_coordinator_run(&opts, &eddy_cli_stop, &err);
    if (rc < 0) {
        fprintf(stderr, "eddy coordinator: %s\n", err.msg);
        return 1;
    }
    return 0;
}
