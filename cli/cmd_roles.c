/* cmd_roles.c - `eddy coordinator` and `eddy worker`: the long-running roles. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "net/http.h"
#include "net/loopback.h"
#include "runtime/worker.h"

/* What of a worker reaches beyond loopback (NULL: nothing): a coordinator
 * it registers with (it runs the plugins that one sends), or its data
 * socket. */
static const char *exposure(const char *coordinators, const char *bind_host, char *what, size_t size)
{
    char list[1024];
    snprintf(list, sizeof list, "%s", coordinators ? coordinators : "");
    for (char *save = NULL, *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save))
        if (!eddy_endpoint_is_loopback(c)) {
            snprintf(what, size, "registering with coordinator %s beyond loopback", c);
            return what;
        }
    if (!eddy_host_is_loopback(bind_host)) {
        snprintf(what, size, "data socket on %s is reachable beyond loopback", bind_host);
        return what;
    }
    return NULL;
}

int eddy_cmd_worker(int argc, char **argv)
{
    char what[1200];
    const char *coordinator = eddy_client_default_coordinator(), *name = NULL;
    const char *bind_host = "127.0.0.1", *advertise = NULL, *snapshots = NULL;
    const char *plugin_cache = NULL, *storage = NULL, *storage_uri = NULL;
    uint32_t port = 0, register_timeout = 10000;
    bool hostname_identity = false, insecure = false, no_local_recovery = false;
    uint32_t leave_wait = 300;
    const char *keys_dir = eddy_cli_default_keys();
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("coordinator", &coordinator, "tcp://HOST:PORT[,...]", "coordinator control socket, or a comma-separated list of coordinators: the worker follows their leader (env EDDY_COORDINATOR)"),
        EDDY_FLAG_STR("name", &name, "NAME", "name shown in status (default worker-PID)"),
        EDDY_FLAG_STR("bind-host", &bind_host, "ADDR", "address of the data socket (127.0.0.1)"),
        EDDY_FLAG_STR("advertise-host", &advertise, "HOST", "address other workers use (default: bind host; 127.0.0.1 if that is 0.0.0.0)"),
        EDDY_FLAG_U32("data-port", &port, 0, EDDY_FLAG_PORT_MAX, "PORT", "data socket port (0 = any free port)"),
        EDDY_FLAG_STR("snapshot-dir", &snapshots, "DIR", "snapshot store if the coordinator names none (/tmp/eddy/snapshots)"),
        EDDY_CLI_STORAGE_FLAG(storage),
        EDDY_FLAG_STR("plugin-cache", &plugin_cache, "DIR", "cache of plugins fetched from the coordinator: a directory private to this user (created 0700; refused if another user owns it or others may access it). Default $XDG_RUNTIME_DIR/eddy-plugins, else a fresh directory removed at exit"),
        EDDY_FLAG_U32("register-timeout-ms", &register_timeout, 1, EDDY_FLAG_MS_MAX, "MS", "give up reaching the coordinator after MS (10000)"),
        EDDY_FLAG_U32("leave-wait-ms", &leave_wait, 0, EDDY_FLAG_MS_MAX, "MS", "asked to stop, tell the coordinator this worker leaves and wait up to MS for its answer (300; 0: stop without a word, logged as dead)"),
        EDDY_FLAG_SWITCH("no-local-recovery", &no_local_recovery, "keep no in-memory copy of what this worker's tasks checkpoint: a restore reads all its key groups from checkpoint storage (default: the last completed checkpoint's groups are kept and a restore placing them here again loads them from memory)"),
        EDDY_FLAG_SWITCH("hostname-identity", &hostname_identity, "--name and --advertise-host default to this host's name (one scalable compose service)"),
        EDDY_CLI_KEYS_FLAG(keys_dir),
        EDDY_CLI_INSECURE_FLAG(insecure),
        EDDY_FLAG_END,
    };
    int code;
    if (eddy_cli_parse("worker", "[flags]", flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    /* Its own --checkpoint-storage wins over the coordinator's (the same
     * bucket by another endpoint, say); --snapshot-dir only stands in when
     * the coordinator names none. */
    const char *snap_dir = snapshots;
    if ((code = eddy_cli_checkpoint_storage("worker", storage, &snap_dir, &storage_uri)) != 0)
        return code;
    if (storage && !storage_uri)
        storage_uri = storage; /* file:///DIR, its own too */
    if (!snapshots)
        snapshots = "/tmp/eddy/snapshots";
    /* Replicas of one container service share their command line; the
     * hostname (the container id, also its DNS alias) is what differs. */
    char host[256];
    if (hostname_identity) {
        if (gethostname(host, sizeof host) < 0 || !host[0]) {
            fprintf(stderr, "eddy worker: --hostname-identity: cannot read this host's name\n");
            return 1;
        }
        host[sizeof host - 1] = '\0';
        if (!name)
            name = host;
        if (!advertise)
            advertise = host;
    }
    eddy_keys_t *keys;
    if (eddy_cli_load_keys("worker", keys_dir, EDDY_KEYS_SERVER, &keys) != 0)
        return 2;
    if (eddy_cli_check_exposure("worker", keys, insecure, exposure(coordinator, bind_host, what, sizeof what)) != 0) {
        eddy_keys_destroy(&keys);
        return 2;
    }
    char default_name[64];
    if (!name) {
        snprintf(default_name, sizeof default_name, "worker-%d", (int)getpid());
        name = default_name;
    }
    eddy_log_set_component(name);
    eddy_cli_install_signals();
    eddy_worker_options_t opts = {coordinator, name, bind_host, advertise, port, register_timeout,
                                  snapshots, keys, leave_wait, plugin_cache, storage_uri,
                                  no_local_recovery};
    eddy_err_t err = {{0}};
    int rc = eddy_worker_run(&opts, &eddy_cli_stop, &err);
    eddy_keys_destroy(&keys);
    if (rc < 0) {
        fprintf(stderr, "eddy worker: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int eddy_cmd_coordinator(int argc, char **argv)
{
    /* loopback unless told otherwise: reaching beyond it is a choice
     * (docs/security.md) */
    const char *bind = "tcp://127.0.0.1:7600", *http_host = "127.0.0.1", *token_file = NULL;
    const char *metastore = "./eddy-meta", *snapshots = NULL, *advertise = NULL;
    const char *etcd_ca = NULL, *etcd_cert = NULL, *etcd_key = NULL;
    const char *storage = NULL, *storage_uri = NULL;
    uint32_t leader_ttl = 3000, dead_grace = 60000, quorum_timeout = 5000;
    const char *keys_dir = eddy_cli_default_keys();
    uint32_t http_port = EDDY_DEFAULT_HTTP_PORT, interval = 2000, hb = 500, hb_timeout = 3000;
    uint32_t stuck_timeout = EDDY_COORD_DEFAULT_STUCK_TIMEOUT_MS;
    uint32_t retained = 2, tolerable = 3, deploy_timeout = 10000, ck_timeout = 60000, max_restarts = 10;
    const char *savepoint_dir = NULL;
    uint32_t full_every = 10;
    bool heartbeat_only = false, no_rebalance = false, insecure = false;
    uint32_t rebalance_ms = 3000;
    eddy_coordinator_limits_t limits = {0};
    const char *migration_name = "fluid";
    uint32_t migration_step = EDDY_MIGRATION_STEP_KEY_GROUPS;
    uint64_t migration_step_bytes = EDDY_MIGRATION_STEP_BYTES;
    uint32_t migration_steps_in_flight = 0;
    eddy_flag_t flags[] = {
        EDDY_FLAG_STR("bind", &bind, "tcp://ADDR:PORT", "control socket (tcp://127.0.0.1:7600; tcp://0.0.0.0:7600 for other machines)"),
        EDDY_FLAG_STR("http-host", &http_host, "ADDR", "HTTP bind address (127.0.0.1; 0.0.0.0 for other machines)"),
        EDDY_FLAG_U32("http-port", &http_port, 0, EDDY_FLAG_PORT_MAX, "PORT", "HTTP port for the dashboard at /, /metrics and the JSON API (9250, 0 = off)"),
        EDDY_FLAG_STR("http-token-file", &token_file, "FILE", "require this bearer token (file mode 0600) on HTTP, except /healthz"),
        EDDY_FLAG_STR("metastore", &metastore, "URL", "etcd://HOST:PORT, https://HOST:PORT (TLS) or a directory (./eddy-meta)"),
        EDDY_FLAG_STR("etcd-ca", &etcd_ca, "FILE", "CA certificate (PEM) that signed an https:// etcd's certificate"),
        EDDY_FLAG_STR("etcd-cert", &etcd_cert, "FILE", "client certificate (PEM) for an etcd with --client-cert-auth"),
        EDDY_FLAG_STR("etcd-key", &etcd_key, "FILE", "private key (PEM) of --etcd-cert"),
        EDDY_CLI_KEYS_FLAG(keys_dir),
        EDDY_CLI_INSECURE_FLAG(insecure),
        EDDY_FLAG_STR("snapshot-dir", &snapshots, "DIR", "snapshot store shared with workers (/tmp/eddy/snapshots); with an s3:// --checkpoint-storage only uploaded plugins are kept here"),
        EDDY_CLI_STORAGE_FLAG(storage),
        EDDY_FLAG_STR("savepoint-dir", &savepoint_dir, "URI", "where `eddy savepoint` without --dir puts savepoints: a directory every worker can write, file:///DIR or s3://BUCKET/PREFIX (default: savepoints/ beside a directory checkpoint storage; with s3:// storage, --dir is then required)"),
        EDDY_FLAG_U32("checkpoint-interval", &interval, 0, EDDY_FLAG_MS_MAX, "MS", "periodic checkpoints (2000, 0 = off)"),
        EDDY_FLAG_U32("heartbeat-ms", &hb, 1, EDDY_FLAG_MS_MAX, "MS", "worker heartbeat interval (500)"),
        EDDY_FLAG_U32("heartbeat-timeout-ms", &hb_timeout, 2, EDDY_FLAG_MS_MAX, "MS", "declare a silent worker dead after (3000)"),
        EDDY_FLAG_U32("stuck-timeout-ms", &stuck_timeout, 2, EDDY_FLAG_MS_MAX, "MS", "a busy worker (heartbeats late while its liveness thread still speaks: its loop blocks) is declared dead only when its loop was silent this long (60000, at least --heartbeat-timeout-ms)"),
        EDDY_FLAG_SWITCH("heartbeat-only", &heartbeat_only, "detect dead workers only by --heartbeat-timeout-ms, not also at once by their closed connection"),
        EDDY_FLAG_U32("checkpoint-timeout-ms", &ck_timeout, 1, EDDY_FLAG_MS_MAX, "MS", "abandon a checkpoint not complete after MS (60000)"),
        EDDY_FLAG_U32("checkpoints-retained", &retained, 1, 64, "N", "complete checkpoints kept (2)"),
        EDDY_FLAG_U32("checkpoint-full-every", &full_every, 1, EDDY_CHECKPOINT_FULL_EVERY_MAX, "N", "every N-th checkpoint of a keyed task is full; the others write only the key groups changed since its last completed checkpoint and refer to earlier ones for the rest (10; 1 = always full)"),
        EDDY_FLAG_U32("tolerable-checkpoint-failures", &tolerable, 1, 1000000, "N", "restore after N failed checkpoints in a row (3)"),
        EDDY_FLAG_U32("max-restarts", &max_restarts, 1, 1000000, "N", "fail a job after N restores in a row without a completed checkpoint (10)"),
        EDDY_FLAG_STR("advertise", &advertise, "tcp://HOST:PORT", "endpoint clients and workers are sent to when this coordinator leads (default: --bind, a wildcard host replaced by the host name)"),
        EDDY_FLAG_U32("leader-ttl-ms", &leader_ttl, 2000, EDDY_FLAG_MS_MAX, "MS", "with an etcd metastore: the leader lease's TTL; a standby takes over this long after the leader dies (3000)"),
        EDDY_FLAG_U32("leader-quorum-timeout-ms", &quorum_timeout, 0, EDDY_FLAG_MS_MAX, "MS", "with an etcd metastore: a leader that reaches fewer than a majority of its workers for MS while a standby hears from them gives up its lease (5000, 0 = never)"),
        EDDY_FLAG_U32("dead-worker-grace-ms", &dead_grace, 1, EDDY_FLAG_MS_MAX, "MS", "a dead worker leaves `eddy status` after MS (60000)"),
        EDDY_FLAG_U32("deploy-timeout-ms", &deploy_timeout, 1, EDDY_FLAG_MS_MAX, "MS", "quarantine a worker that does not confirm a deploy within MS (10000)"),
        EDDY_FLAG_SWITCH("no-rebalance", &no_rebalance, "never move running instances onto a joined or less loaded worker"),
        EDDY_FLAG_U32("rebalance-interval-ms", &rebalance_ms, 1, EDDY_FLAG_MS_MAX, "MS", "at most one rebalancing migration per MS, none within MS of a job's rescale (3000)"),
        EDDY_CLI_LIMIT_FLAGS(limits),
        EDDY_FLAG_STR("migration", &migration_name, "MODE", "how a rescale moves key groups: fluid (the default: in steps, worker to worker over the data plane, while the sources run; adding or removing instances pauses them briefly, without moving state) or sudden (the sources pause while the moved groups go through the snapshot store)"),
        EDDY_FLAG_U32("migration-step-key-groups", &migration_step, 1, 32768, "N", "fluid migration: key groups moved per step, at most (8)"),
        EDDY_FLAG_U64("migration-step-bytes", &migration_step_bytes, 1, UINT64_MAX / 2, "BYTES", "fluid migration: bytes of state moved per step, about (4194304); a step moves at least one key group"),
        EDDY_FLAG_U32("migration-steps-in-flight", &migration_steps_in_flight, 0, EDDY_MIGRATION_STEPS_IN_FLIGHT_MAX, "N", "fluid migration: steps in flight at once, at most (0, the default: adaptive, more when the job is behind and markers wait behind queued records; 1: one after another)"),
        EDDY_FLAG_END,
    };
    int code;
    if (eddy_cli_parse("coordinator", "[flags]", flags, argc, argv, NULL, NULL, &code) < 0)
        return code;
    if ((code = eddy_cli_checkpoint_storage("coordinator", storage, &snapshots, &storage_uri)) != 0)
        return code;
    if (!snapshots)
        snapshots = "/tmp/eddy/snapshots";
    if (hb_timeout <= hb)
        return eddy_usage_error("coordinator", "--heartbeat-timeout-ms must exceed --heartbeat-ms");
    if (stuck_timeout < hb_timeout)
        return eddy_usage_error("coordinator", "--stuck-timeout-ms must be at least --heartbeat-timeout-ms");
    eddy_migration_mode_t migration;
    if (eddy_migration_mode_parse(migration_name, &migration) < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "--migration: expected sudden or fluid, got '%.64s'", migration_name);
        return eddy_usage_error("coordinator", msg);
    }
    if ((etcd_ca || etcd_cert || etcd_key) && strncasecmp(metastore, "https://", 8))
        return eddy_usage_error("coordinator", "--etcd-ca/--etcd-cert/--etcd-key need an "
                                "https:// --metastore URL (etcd:// is plain HTTP)");
    if (!etcd_cert != !etcd_key)
        return eddy_usage_error("coordinator", etcd_cert ? "--etcd-cert needs --etcd-key"
                                                         : "--etcd-key needs --etcd-cert");
    char *token = NULL;
    eddy_err_t err = {{0}};
    if (token_file && eddy_http_token_load(token_file, &token, &err) < 0)
        return eddy_usage_error("coordinator", err.msg);
    eddy_keys_t *keys;
    if (eddy_cli_load_keys("coordinator", keys_dir, EDDY_KEYS_SERVER, &keys) != 0) {
        eddy_http_token_free(&token);
        return 2;
    }
    char what[300];
    snprintf(what, sizeof what, "control socket %s is reachable beyond loopback", bind);
    if (eddy_cli_check_exposure("coordinator", keys, insecure,
                                eddy_endpoint_is_loopback(bind) ? NULL : what) != 0) {
        eddy_http_token_free(&token);
        eddy_keys_destroy(&keys);
        return 2;
    }
    eddy_log_set_component("coordinator");
    eddy_cli_install_signals();
    eddy_coordinator_options_t opts = {
        .bind = bind, .keys = keys, .http_host = http_host, .http_port = (uint16_t)http_port, .http_token = token,
        .metastore = metastore, .etcd_ca = etcd_ca, .etcd_cert = etcd_cert, .etcd_key = etcd_key,
        .snapshot_dir = snapshots, .checkpoint_storage = storage_uri, .savepoint_dir = savepoint_dir,
        .heartbeat_ms = hb,
        .heartbeat_timeout_ms = hb_timeout, .stuck_timeout_ms = stuck_timeout, .heartbeat_only = heartbeat_only, .checkpoint_interval_ms = interval,
        .checkpoint_timeout_ms = ck_timeout, .checkpoints_retained = retained, .checkpoint_full_every = full_every,
        .tolerable_checkpoint_failures = tolerable, .deploy_timeout_ms = deploy_timeout,
        .max_restarts = max_restarts, .advertise = advertise, .leader_ttl_ms = leader_ttl,
        .leader_quorum_timeout_ms = quorum_timeout, .dead_worker_grace_ms = dead_grace,
        .no_rebalance = no_rebalance, .rebalance_interval_ms = rebalance_ms, .limits = limits,
        .migration = migration, .migration_step_key_groups = migration_step,
        .migration_step_bytes = migration_step_bytes,
        .migration_steps_in_flight = migration_steps_in_flight};
    int rc = eddy_coordinator_run(&opts, &eddy_cli_stop, &err);
    eddy_http_token_free(&token);
    eddy_keys_destroy(&keys);
    if (rc < 0) {
        fprintf(stderr, "eddy coordinator: %s\n", err.msg);
        return 1;
    }
    return 0;
}
