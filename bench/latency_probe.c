/* latency_probe.c - end-to-end record latency of `wordcount --socket`, measured
 * from outside.
 *
 * Listens on a loopback port, starts the command given after `--` (an `eddy
 * local ... --job wordcount --socket 127.0.0.1:PORT` with PORT substituted
 * for the word {PORT}) with its stdout on a pipe, and once eddy's socket
 * source connected, sends lines `m<seq>` (one marker word each) phase by
 * phase at each phase's rate. Each marker's changelog row `+I[m<seq>, 1]`
 * read from the pipe gives its latency: time read - time written. A phase may
 * run a shell command at its start (e.g. `eddy rescale ...`).
 *
 *   latency_probe [-w WAIT_S] [-k KEYS] -p NAME,RATE,SECONDS[,CMD] ... -- COMMAND...
 *
 * RATE 0 sends as fast as the socket takes lines (eddy's backpressure sets
 * the pace). Prints
 * one line per phase:
 *   phase NAME rate R out O sent N got M p50 X p99 Y p999 Z max W (ms)
 * R: lines/s written; O: changelog rows/s read during the phase (in a RATE 0
 * phase, eddy's throughput; R also counts what waits in socket buffers).
 * Lines are paced by an absolute clock, sent in the 1 ms slot they are due.
 * Markers still missing WAIT_S seconds (default 10) after the last phase are
 * counted as lost (`got` < `sent`).
 * -k KEYS first sends KEYS lines `k<i>` (distinct words, as fast as the
 * socket takes them, not measured): keyed state of KEYS keys before the
 * phases (bench/checkpoint.sh).
 * -o FILE writes every marker, one line each: `seq sent_s latency_ms`
 * (sent_s on the monotonic clock; latency -1: lost), after a first line
 * `# cmd START END` with the span (same clock) during which each phase's
 * CMD ran (bench/rescale.sh: the rescale). */

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PHASES 32

typedef struct phase {
    char name[64];
    double rate;
    double seconds;
    const char *cmd;
    uint64_t first, end; /* marker seqs [first, end) */
    double started, ended;
} phase_t;

static phase_t phases[MAX_PHASES];
static int n_phases;
static int64_t *sent_ns;   /* per seq: when written (0: not yet) */
static int64_t *got_ns;    /* per seq: latency, -1 not seen */
static uint64_t cap_seq;
static pid_t cmd_pid;
static double cmd_started, cmd_ended;
static volatile uint64_t n_sent;
static volatile int reader_done;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "latency_probe: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *reader(void *arg)
{
    FILE *in = arg;
    char line[4096];
    while (fgets(line, sizeof line, in)) {
        int64_t t = now_ns();
        unsigned long long seq;
        if (sscanf(line, "+I[m%llu, 1]", &seq) != 1 || seq >= cap_seq)
            continue;
        int64_t s = __atomic_load_n(&sent_ns[seq], __ATOMIC_ACQUIRE);
        if (s && got_ns[seq] < 0)
            got_ns[seq] = t - s;
    }
    __atomic_store_n(&reader_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void sleep_until(int64_t t)
{
    struct timespec ts = {t / 1000000000, t % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static void run_cmd(const char *cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    cmd_pid = pid;
    cmd_started = (double)now_ns() / 1e9;
    cmd_ended = 0;
}

/* Notes when the phase command ended (polled while sending). */
static void reap_cmd(void)
{
    if (cmd_pid > 0 && waitpid(cmd_pid, NULL, WNOHANG) == cmd_pid) {
        cmd_ended = (double)now_ns() / 1e9;
        cmd_pid = 0;
    }
}

/* Writes all of buf (blocking: eddy's backpressure paces a RATE 0 phase). */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("writing to eddy's socket source");
        buf += n;
        len -= (size_t)n;
    }
}

static void send_phase(int fd, phase_t *p)
{
    char buf[65536];
    p->first = n_sent;
    int64_t start = now_ns(), stop = start + (int64_t)(p->seconds * 1e9);
    p->started = (double)start / 1e9;
    if (p->cmd)
        run_cmd(p->cmd);
    uint64_t due_base = n_sent;
    for (;;) {
        reap_cmd();
        int64_t t = now_ns();
        if (t >= stop)
            break;
        uint64_t due;
        if (p->rate > 0) {
            due = due_base + (uint64_t)((double)(t - start) / 1e9 * p->rate) + 1;
            if (due > n_sent + 4096)
                due = n_sent + 4096;
        } else {
            due = n_sent + 256;
        }
        if (due > cap_seq)
            break;
        if (due <= n_sent) {
            /* next line's time, or 1 ms, whichever is sooner */
            int64_t next = start + (int64_t)((double)(n_sent - due_base) / p->rate * 1e9);
            if (next > t + 1000000)
                next = t + 1000000;
            sleep_until(next);
            continue;
        }
        size_t len = 0;
        uint64_t first = n_sent;
        for (uint64_t s = first; s < due && len < sizeof buf - 32; s++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "m%llu\n", (unsigned long long)s);
        uint64_t last = first;
        for (size_t i = 0; i < len; i++)
            last += buf[i] == '\n';
        int64_t when = now_ns();
        for (uint64_t s = first; s < last; s++)
            __atomic_store_n(&sent_ns[s], when, __ATOMIC_RELEASE);
        write_all(fd, buf, len);
        n_sent = last;
    }
    p->end = n_sent;
    p->ended = (double)now_ns() / 1e9;
}

/* -k: KEYS distinct words ahead of the phases. */
static void send_preload(int fd, uint64_t keys)
{
    char buf[65536];
    for (uint64_t s = 0; s < keys;) {
        size_t len = 0;
        for (; s < keys && len < sizeof buf - 32; s++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "k%llu\n", (unsigned long long)s);
        write_all(fd, buf, len);
    }
}

static void report(const phase_t *p)
{
    uint64_t n = p->end - p->first, got = 0;
    int64_t *lat = malloc((n ? n : 1) * sizeof *lat);
    for (uint64_t s = p->first; s < p->end; s++)
        if (got_ns[s] >= 0)
            lat[got++] = got_ns[s];
    qsort(lat, got, sizeof *lat, cmp_i64);
    double secs = p->ended - p->started;
    /* Throughput: markers of any phase whose row arrived during this one. */
    uint64_t out = 0;
    int64_t from = (int64_t)(p->started * 1e9), to = (int64_t)(p->ended * 1e9);
    for (uint64_t s = 0; s < n_sent; s++) {
        int64_t at = got_ns[s] >= 0 ? sent_ns[s] + got_ns[s] : -1;
        out += at >= from && at < to;
    }
#define Q(q) (got ? (double)lat[(uint64_t)((double)(got - 1) * (q))] / 1e6 : -1)
    printf("phase %s rate %.0f out %.0f sent %llu got %llu p50 %.3f p99 %.3f p999 %.3f max %.3f\n",
           p->name, secs > 0 ? (double)n / secs : 0, secs > 0 ? (double)out / secs : 0,
           (unsigned long long)n, (unsigned long long)got, Q(0.5), Q(0.99), Q(0.999), Q(1.0));
#undef Q
    fflush(stdout);
    free(lat);
}

int main(int argc, char **argv)
{
    uint64_t preload = 0;
    double wait_s = 10;
    const char *dump = NULL;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: latency_probe [-w WAIT_S] [-k KEYS] -p NAME,RATE,SECONDS[,CMD]... -- COMMAND...\n\n"
                   "Starts COMMAND (its {PORT} replaced by a loopback port this probe listens\n"
                   "on), sends marker lines phase by phase at RATE lines/s for SECONDS (CMD, a\n"
                   "shell command, runs at the phase's start) and prints each phase's latency\n"
                   "percentiles from the changelog rows on COMMAND's stdout. -w: seconds to\n"
                   "wait for the source to connect (10).\n");
            return 0;
        }
        if (!strcmp(argv[i], "-w") && i + 1 < argc) {
            wait_s = atof(argv[++i]);
        } else if (!strcmp(argv[i], "-k") && i + 1 < argc) {
            preload = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            dump = argv[++i];
        } else if (!strcmp(argv[i], "-p") && i + 1 < argc && n_phases < MAX_PHASES) {
            phase_t *p = &phases[n_phases++];
            char *spec = strdup(argv[++i]);
            char *name = strtok(spec, ","), *rate = strtok(NULL, ","), *secs = strtok(NULL, ",");
            char *cmd = strtok(NULL, "");
            if (!name || !rate || !secs) {
                fprintf(stderr, "latency_probe: -p NAME,RATE,SECONDS[,CMD]\n");
                return 2;
            }
            snprintf(p->name, sizeof p->name, "%s", name);
            p->rate = atof(rate);
            p->seconds = atof(secs);
            p->cmd = cmd;
        } else {
            fprintf(stderr, "usage: latency_probe [-w WAIT_S] [-k KEYS] [-o FILE] -p NAME,RATE,SECONDS[,CMD]... -- COMMAND...\n");
            return 2;
        }
    }
    if (i >= argc - 1 || n_phases == 0) {
        fprintf(stderr, "usage: latency_probe [-w WAIT_S] [-k KEYS] [-o FILE] -p NAME,RATE,SECONDS[,CMD]... -- COMMAND...\n");
        return 2;
    }
    char **cmd = &argv[i + 1];
    signal(SIGPIPE, SIG_IGN);

    double budget = 0;
    for (int k = 0; k < n_phases; k++)
        budget += (phases[k].rate > 0 ? phases[k].rate : 5e5) * phases[k].seconds;
    cap_seq = (uint64_t)budget + 4096;
    sent_ns = calloc(cap_seq, sizeof *sent_ns);
    got_ns = malloc(cap_seq * sizeof *got_ns);
    if (!sent_ns || !got_ns)
        die("allocating marker tables");
    memset(got_ns, 0xff, cap_seq * sizeof *got_ns);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 1) < 0)
        die("listening");
    socklen_t alen = sizeof addr;
    getsockname(lfd, (struct sockaddr *)&addr, &alen);
    char port[16];
    snprintf(port, sizeof port, "%u", ntohs(addr.sin_port));
    for (char **a = cmd; *a; a++)
        if (strstr(*a, "{PORT}")) {
            char *p = strstr(*a, "{PORT}"), *s = malloc(strlen(*a) + 16);
            sprintf(s, "%.*s%s%s", (int)(p - *a), *a, port, p + 6);
            *a = s;
        }
    for (int k = 0; k < n_phases; k++)
        if (phases[k].cmd && strstr(phases[k].cmd, "{PORT}")) {
            const char *c = phases[k].cmd, *p = strstr(c, "{PORT}");
            char *s = malloc(strlen(c) + 16);
            sprintf(s, "%.*s%s%s", (int)(p - c), c, port, p + 6);
            phases[k].cmd = s;
        }

    int out[2];
    if (pipe(out) < 0)
        die("pipe");
    pid_t child = fork();
    if (child == 0) {
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        execvp(cmd[0], cmd);
        _exit(127);
    }
    close(out[1]);
    FILE *in = fdopen(out[0], "r");
    pthread_t th;
    pthread_create(&th, NULL, reader, in);

    struct pollfd pfd = {lfd, POLLIN, 0};
    if (poll(&pfd, 1, 60000) != 1) {
        fprintf(stderr, "latency_probe: eddy's socket source did not connect within 60 s\n");
        kill(child, SIGTERM);
        return 1;
    }
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        die("accept");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (preload) {
        send_preload(fd, preload);
        fprintf(stderr, "latency_probe: preloaded %llu keys\n", (unsigned long long)preload);
    }
    for (int k = 0; k < n_phases; k++) {
        send_phase(fd, &phases[k]);
        fprintf(stderr, "latency_probe: phase %s done (%llu lines)\n", phases[k].name,
                (unsigned long long)(phases[k].end - phases[k].first));
    }
    /* Wait for the last markers (or until WAIT_S), then end the input. */
    int64_t deadline = now_ns() + (int64_t)(wait_s * 1e9);
    while (now_ns() < deadline && !__atomic_load_n(&reader_done, __ATOMIC_ACQUIRE)) {
        uint64_t missing = 0;
        for (uint64_t s = n_sent > 1000 ? n_sent - 1000 : 0; s < n_sent; s++)
            missing += got_ns[s] < 0;
        if (!missing)
            break;
        sleep_until(now_ns() + 10000000);
    }
    for (int k = 0; k < n_phases; k++)
        report(&phases[k]);
    if (cmd_pid > 0 && waitpid(cmd_pid, NULL, 0) == cmd_pid)
        cmd_ended = (double)now_ns() / 1e9;
    if (dump) {
        FILE *f = fopen(dump, "w");
        if (!f)
            die(dump);
        fprintf(f, "# cmd %.6f %.6f\n", cmd_started, cmd_ended);
        for (uint64_t s = 0; s < n_sent; s++)
            fprintf(f, "%llu %.6f %.3f\n", (unsigned long long)s, (double)sent_ns[s] / 1e9,
                    got_ns[s] >= 0 ? (double)got_ns[s] / 1e6 : -1.0);
        fclose(f);
    }
    close(fd);
    int status = 0;
    int64_t stop_by = now_ns() + 30000000000ll;
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (now_ns() > stop_by) {
            kill(child, SIGTERM);
            waitpid(child, &status, 0);
            break;
        }
        sleep_until(now_ns() + 20000000);
    }
    return 0;
}
