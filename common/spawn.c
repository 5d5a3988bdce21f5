/* spawn.c - fork + exec of this binary as a child that dies with its
 * parent thread (see spawn.h). */
#include "common/spawn.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t eddy_spawn_self(char *const argv[])
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    execv("/proc/self/exe", argv);
    static const char msg[] = "eddy: cannot start a child process (exec failed)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
}

void eddy_describe_exit(int status, char *buf, size_t size)
{
    if (WIFSIGNALED(status))
        snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(buf, size, "ended (wait status %d)", status);
}
