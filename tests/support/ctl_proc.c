/* ctl_proc.c - see ctl_proc.h. */
#include "tests/support/ctl_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "connectors/sources.h"

static uint64_t ctl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static pid_t ctl_start(char *const argv[], int out_fd, int err_fd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(out_fd >= 0 ? out_fd : devnull, 1);
    dup2(err_fd >= 0 ? err_fd : devnull, 2);
    execv(argv[0], argv);
    _exit(127);
}

pid_t ctl_spawn(char *const argv[], const char *log_path)
{
    int fd = log_path ? open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
    pid_t pid = ctl_start(argv, fd, fd);
    if (fd >= 0)
        close(fd);
    return pid;
}

bool ctl_exited(pid_t pid, int *status)
{
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r != pid)
        return false;
    if (status)
        *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
}

int ctl_wait(pid_t pid, uint32_t timeout_ms)
{
    uint64_t deadline = ctl_now_ms() + timeout_ms;
    int status;
    while (ctl_now_ms() < deadline) {
        if (ctl_exited(pid, &status))
            return status;
        usleep(20000);
    }
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int ctl_run_capture(char *const argv[], uint32_t timeout_ms, char **out)
{
    *out = NULL;
    int fds[2];
    if (pipe(fds) < 0)
        return -1;
    pid_t pid = ctl_start(argv, fds[1], -1);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    uint64_t deadline = ctl_now_ms() + timeout_ms;
    int status = -1;
    bool done = false;
    for (;;) {
        if (len + 1024 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
        ssize_t n = read(fds[0], buf + len, cap - len - 1);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        if (n == 0 && done)
            break;
        if (!done && ctl_exited(pid, &status))
            done = true;
        else if (n < 0 && errno != EAGAIN)
            break;
        if (!done && ctl_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            status = -1;
            break;
        }
        if (n == 0 || !done)
            usleep(5000);
    }
    close(fds[0]);
    buf[len] = '\0';
    *out = buf;
    return status;
}

char *ctl_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (len + 1 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static char *ctl_shell(const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    char *out;
    int rc = ctl_run_capture(argv, 60000, &out);
    if (rc != 0) {
        free(out);
        return NULL;
    }
    return out;
}

char *ctl_reference_counts(const char *input_path)
{
    char cmd[4500];
    snprintf(cmd, sizeof cmd,
             "tr -s ' \\t' '\\n' < '%s' | grep -v '^$' | LC_ALL=C sort | uniq -c | "
             "awk '{print $1, $2}' | LC_ALL=C sort",
             input_path);
    return ctl_shell(cmd);
}

char *ctl_output_as_uniq(const char *output_path)
{
    char cmd[4500];
    snprintf(cmd, sizeof cmd, "awk -F'\\t' '{print $2, $1}' '%s' | LC_ALL=C sort", output_path);
    return ctl_shell(cmd);
}

void ctl_write_generated_input(const char *path, uint64_t lines, uint32_t words_per_line)
{
    eddy_generator_config_t cfg = {.lines = lines, .words_per_line = words_per_line, .vocabulary = 10000, .seed = 42};
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    char buf[8192];
    for (uint64_t n = 0; n < lines; n++) {
        uint32_t len = eddy_generator_line(&cfg, n, buf, sizeof buf);
        fwrite(buf, 1, len, f);
        if (len == 0 || buf[len - 1] != '\n')
            fputc('\n', f);
    }
    fclose(f);
}

json_t *ctl_scaling_decisions(const char *coordinator)
{
    char *argv[] = {EDDY_BINARY, "scaling", "--json", "--coordinator", (char *)coordinator, NULL};
    char *out = NULL;
    json_t *doc = NULL;
    if (ctl_run_capture(argv, 5000, &out) == 0) {
        doc = json_loads(out, 0, NULL);
        if (!json_is_array(doc)) {
            json_decref(doc);
            doc = NULL;
        }
    }
    free(out);
    return doc;
}

void ctl_keep_decisions(const char *coordinator, json_t **kept)
{
    json_t *doc = ctl_scaling_decisions(coordinator);
    if (doc && json_array_size(doc) >= json_array_size(*kept)) {
        json_decref(*kept);
        *kept = doc;
    } else {
        json_decref(doc);
    }
}

bool ctl_wait_polling(pid_t pid, uint32_t timeout_ms, uint32_t every_ms, void (*poll)(void *),
                      void *arg, int *status)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (ctl_exited(pid, status))
            return true;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t elapsed_ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (elapsed_ms >= timeout_ms)
            break;
        poll(arg);
        usleep(every_ms * 1000);
    }
    *status = ctl_wait(pid, 1);
    return false;
}

int ctl_compare_counts(const char *input_path, const char *output_path, char *why, size_t size)
{
    char *want = ctl_reference_counts(input_path);
    char *got = ctl_output_as_uniq(output_path);
    int rc = -1;
    if (!want)
        snprintf(why, size, "no reference counts of %s", input_path);
    else if (!got)
        snprintf(why, size, "cannot read the output %s", output_path);
    else if (!want[0])
        snprintf(why, size, "the reference of %s is empty", input_path);
    else if (strcmp(want, got) != 0)
        snprintf(why, size, "final counts differ from the reference (output %s)", output_path);
    else
        rc = 0;
    free(want);
    free(got);
    return rc;
}
