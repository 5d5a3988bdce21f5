/* main.c - the eddy binary: dispatches to its subcommands (see cli.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "jobs/jobs.h"
#include "plan/registry.h"

volatile sig_atomic_t eddy_cli_stop;

static void on_signal(int sig)
{
    (void)sig;
    eddy_cli_stop = 1;
}

void eddy_cli_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

typedef struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} subcommand_t;

static const subcommand_t commands[] = {
    {"local", eddy_cmd_local, "run coordinator, N workers and controller here; run a job"},
    {"coordinator", eddy_cmd_coordinator, "run the coordinator"},
    {"worker", eddy_cmd_worker, "run a worker that registers with a coordinator"},
    {"controller", eddy_cmd_controller, "run the DS2 autoscaling controller"},
    {"submit", eddy_cmd_submit, "submit a built-in job to a running coordinator"},
    {"rescale", eddy_cmd_rescale, "change an operator's parallelism: rescale JOB OPERATOR N"},
    {"status", eddy_cmd_status, "show jobs, operators and workers"},
    {"scaling", eddy_cmd_scaling, "show the controller's scaling decisions"},
    {"jobs", eddy_cmd_jobs, "list the jobs (built in and from loaded plugins)"},
    {"cancel", eddy_cmd_cancel, "cancel a running job"},
    {"savepoint", eddy_cmd_savepoint, "take a savepoint of a job (--stop: and stop it); savepoint inspect LOCATION"},
    {"upgrade", eddy_cmd_upgrade, "replace a running job by a new version that keeps its state (rolls back if it fails)"},
    {"nexmark", eddy_cmd_nexmark, "write Nexmark benchmark events: nexmark generate --events N"},
    {"keygen", eddy_cmd_keygen, "make a cluster's CURVE keys: keygen DIR (then --keys DIR everywhere)"},
    {"plan", eddy_cmd_plan, "print a job's plan (stages, chaining, parallelism, keys) without running it"},
};

static void print_help(FILE *out)
{
    fprintf(out, "usage: eddy COMMAND [flags]\n\n"
                 "eddy is an elastic stream processor: a coordinator places key-partitioned\n"
                 "operators on workers, checkpoints them, and rescales them by key groups.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`eddy COMMAND --help` shows a command's flags. Every command that talks to\n"
                 "a cluster takes --keys DIR (env EDDY_KEYS): CURVE keys from `eddy keygen DIR`.\n"
                 "Example: eddy local --workers 2 --job wordcount --input data/hamlet.txt --output counts.tsv\n");
}

int main(int argc, char **argv)
{
    eddy_err_t err = {{0}};
    if (eddy_jobs_register_builtin(eddy_registry_default(), &err) < 0) {
        fprintf(stderr, "eddy: cannot register the built-in jobs: %s\n", err.msg);
        return 1;
    }
    if (argc < 2) {
        print_help(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        print_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "eddy: unknown command '%s' (see eddy --help)\n", argv[1]);
    return 2;
}
