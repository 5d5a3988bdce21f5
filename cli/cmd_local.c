/* cmd_local.c - `eddy local`: coordinator (in this process), N worker
 * processes and optionally the controller on one machine, with the embedded
 * metadata store; runs one job and exits when a bounded job finishes.
 *
 * Workers are separate `eddy worker` processes (fork + exec of this binary)
 * that die with this process (PR_SET_PDEATHSIG). Everything lives in a state
 * directory (metadata, snapshots) that is removed at exit unless named. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/log.h"
#include "coordinator/coordinator.h"
#include "worker/graph.h"

#define MAX_LOCAL_WORKERS 64

static pid_t spawn(char *const argv[])
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "eddy local: cannot start %s: %s\n", argv[1], strerror(errno));
    _exit(127);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void stop_children(pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGTERM);
    uint64_t deadline = eddy_mono_ms() + 3000;
    for (int i = 0; i < n; i++) {
        if (pids[i] <= 0)
            continue;
        for (;;) {
            pid_t r = waitpid(pids[i], NULL, WNOHANG);
            if (r == pids[i] || r < 0)
                break;
            if (eddy_mono_ms() > deadline) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
                break;
            }
            usleep(10000);
        }
    }
}

static const char *local_usage =
    "--workers N --job JOB [job flags]\n\n"
    "Runs a coordinator, N worker processes (and with --autoscale the controller)\n"
    "on this machine and runs JOB on them; exits when a bounded job finishes.\n"
    "`eddy jobs` lists the jobs; `eddy local --job JOB --help` shows a job's flags.";

int eddy_cmd_local(int argc, char **argv)
{
    uint64_t workers = 2, control_port = EDDY_DEFAULT_CONTROL_PORT, http_port = EDDY_DEFAULT_HTTP_PORT;
    uint64_t interval = 2000, hb = 500, hb_timeout = 3000;
    uint64_t retained = 2, tolerable = 3, deploy_timeout = 10000;
    const char *job = NULL, *state_dir = NULL, *bind_host = "127.0.0.1";
    bool autoscale = false, quiet = false;
    const char *controller_flags = "";
    eddy_flag_t flags[] = {
        {"workers", EDDY_FLAG_UINT, &workers, "N", "worker processes to start (2)", false},
        {"job", EDDY_FLAG_STRING, &job, "JOB", "built-in job to run (see eddy jobs)", false},
        {"control-port", EDDY_FLAG_UINT, &control_port, "PORT", "coordinator control port (7600)", false},
        {"http-port", EDDY_FLAG_UINT, &http_port, "PORT", "coordinator HTTP port (9250, 0 = off)", false},
        {"bind-host", EDDY_FLAG_STRING, &bind_host, "ADDR", "address to listen on (127.0.0.1)", false},
        {"state-dir", EDDY_FLAG_STRING, &state_dir, "DIR", "keep metadata and snapshots in DIR (default: temporary)", false},
        {"checkpoint-interval", EDDY_FLAG_UINT, &interval, "MS", "periodic checkpoints (2000, 0 = off)", false},
        {"heartbeat-ms", EDDY_FLAG_UINT, &hb, "MS", "worker heartbeat interval (500)", false},
        {"heartbeat-timeout-ms", EDDY_FLAG_UINT, &hb_timeout, "MS", "declare a silent worker dead after (3000)", false},
        {"checkpoints-retained", EDDY_FLAG_UINT, &retained, "N", "complete checkpoints kept (2)", false},
        {"tolerable-checkpoint-failures", EDDY_FLAG_UINT, &tolerable, "N", "restore after N failed checkpoints in a row (3)", false},
        {"deploy-timeout-ms", EDDY_FLAG_UINT, &deploy_timeout, "MS", "quarantine a worker that does not confirm a deploy within MS (10000)", false},
        {"autoscale", EDDY_FLAG_BOOL, &autoscale, NULL, "run the DS2 controller too", false},
        {"controller-flags", EDDY_FLAG_STRING, &controller_flags, "\"FLAGS\"", "extra flags for the controller", false},
        {"quiet", EDDY_FLAG_BOOL, &quiet, NULL, "no progress lines", false},
        {NULL, 0, NULL, NULL, NULL, false},
    };
    eddy_args_t job_args = {0};
    eddy_err_t err = {{0}};
    int rc = eddy_flags_parse(flags, argc, argv, NULL, &job_args, &err);
    if (rc < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }
    if (rc == 1) {
        if (job && eddy_job_find(job)) {
            printf("usage: eddy local [local flags] --job %s [job flags]\n\njob flags:\n%s", job,
                   eddy_job_find(job)->usage);
        } else {
            printf("usage: eddy local %s\n\nflags:\n", local_usage);
            eddy_flags_print_help(stdout, flags);
        }
        eddy_args_free(&job_args);
        return 0;
    }
    if (!job) {
        /* Without --job, leftover flags cannot be job flags: name the first. */
        char msg[300];
        if (job_args.count > 0)
            snprintf(msg, sizeof msg, "unknown flag '%s' (see eddy local --help)", job_args.items[0]);
        else
            snprintf(msg, sizeof msg, "--job is required (see eddy jobs)");
        eddy_args_free(&job_args);
        return eddy_usage_error("local", msg);
    }
    if (workers < 1 || workers > MAX_LOCAL_WORKERS) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", "--workers must be 1..64");
    }
    if (control_port < 1 || control_port > 65535 || http_port > 65535) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", "ports must be 1..65535");
    }
    if (hb == 0 || hb_timeout <= hb) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", "--heartbeat-timeout-ms must exceed --heartbeat-ms (> 0)");
    }
    if (retained < 1 || retained > 64 || tolerable < 1 || tolerable > 1000000 ||
        deploy_timeout < 1 || deploy_timeout > 3600000) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", "--checkpoints-retained must be 1..64, --tolerable-checkpoint-failures 1..1000000, --deploy-timeout-ms 1..3600000");
    }
    /* Validate the job's flags before anything starts. */
    eddy_job_graph_t graph;
    if (eddy_job_build(&graph, job, job_args.count, job_args.items, &err) < 0) {
        eddy_args_free(&job_args);
        return eddy_usage_error("local", err.msg);
    }
    eddy_graph_clear(&graph);

    char dir[4096];
    bool temporary = !state_dir;
    if (temporary) {
        snprintf(dir, sizeof dir, "%s/eddy-local-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "eddy local: cannot create a state directory: %s\n", strerror(errno));
            eddy_args_free(&job_args);
            return 1;
        }
    } else {
        snprintf(dir, sizeof dir, "%s", state_dir);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "eddy local: cannot create %s: %s\n", dir, strerror(errno));
            eddy_args_free(&job_args);
            return 1;
        }
    }
    char meta[4200], snaps[4200], bind[300], connect[300];
    snprintf(meta, sizeof meta, "%s/meta", dir);
    snprintf(snaps, sizeof snaps, "%s/snapshots", dir);
    snprintf(bind, sizeof bind, "tcp://%s:%u", bind_host, (unsigned)control_port);
    snprintf(connect, sizeof connect, "tcp://%s:%u",
             strcmp(bind_host, "0.0.0.0") ? bind_host : "127.0.0.1", (unsigned)control_port);

    eddy_log_set_component("local");
    eddy_cli_install_signals();
    pid_t pids[MAX_LOCAL_WORKERS + 1] = {0};
    int n_children = 0;
    for (uint64_t i = 0; i < workers; i++) {
        char name[32];
        snprintf(name, sizeof name, "worker-%llu", (unsigned long long)i + 1);
        char *wargv[] = {"eddy", "worker", "--coordinator", connect, "--name", name,
                         "--snapshot-dir", snaps, NULL};
        pids[n_children++] = spawn(wargv);
    }
    if (autoscale) {
        char *cargv[64] = {"eddy", "controller", "--coordinator", connect, "--job", (char *)job};
        int k = 6;
        char *extra = strdup(controller_flags);
        for (char *tok = strtok(extra, " "); tok && k < 63; tok = strtok(NULL, " "))
            cargv[k++] = tok;
        cargv[k] = NULL;
        pids[n_children++] = spawn(cargv);
        free(extra);
    }
    eddy_log_set_component("coordinator");
    eddy_info("eddy local: %llu workers, job %s, state in %s%s", (unsigned long long)workers, job,
              dir, temporary ? " (temporary)" : "");
    eddy_coordinator_options_t opts = {
        .bind = bind, .http_host = bind_host, .http_port = (uint16_t)http_port, .metastore = meta,
        .snapshot_dir = snaps, .heartbeat_ms = (uint32_t)hb,
        .heartbeat_timeout_ms = (uint32_t)hb_timeout, .checkpoint_interval_ms = (uint32_t)interval,
        .checkpoint_timeout_ms = 60000, .checkpoints_retained = (uint32_t)retained,
        .tolerable_checkpoint_failures = (uint32_t)tolerable, .deploy_timeout_ms = (uint32_t)deploy_timeout,
        .submit_job = job, .submit_argc = job_args.count,
        .submit_argv = job_args.items, .min_workers = (uint32_t)workers, .exit_when_done = true,
        .progress = !quiet};
    rc = eddy_coordinator_run(&opts, &eddy_cli_stop, &err);
    stop_children(pids, n_children);
    if (temporary)
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    eddy_args_free(&job_args);
    if (rc < 0) {
        fprintf(stderr, "eddy local: %s\n", err.msg);
        return 1;
    }
    if (eddy_cli_stop && rc == 0) {
        fprintf(stderr, "eddy local: interrupted\n");
        return 130;
    }
    return rc;
}
